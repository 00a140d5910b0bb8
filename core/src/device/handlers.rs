//! The handlers the method table (`crate::methods::METHODS`) points at: each reads its params
//! and hands them to the concern that serves the method. Adding a method the device serves is a
//! row there and a handler here.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::dispatch::Reply;
use super::{ConnId, Device};
use crate::jsonrpc::{self, Id, RpcError};

/// One request as its handler sees it.
pub(crate) struct Call<'a> {
    pub conn: ConnId,
    pub id: &'a Id,
    pub method: &'static str,
    params: Option<&'a RawValue>,
    /// Whether the session's directory check passed; only `status` runs when it did not.
    pub admitted: bool,
}

impl<'a> Call<'a> {
    pub fn new(
        conn: ConnId,
        id: &'a Id,
        method: &'static str,
        params: Option<&'a RawValue>,
        admitted: bool,
    ) -> Call<'a> {
        Call {
            conn,
            id,
            method,
            params,
            admitted,
        }
    }

    /// The params as `P`, or -32602 naming what does not fit.
    fn params<P: Deserialize<'a>>(&self) -> Result<P, RpcError> {
        jsonrpc::parse_params(self.method, self.params)
    }

    /// An answer given now.
    fn answer(&self, result: &impl serde::Serialize) -> Result<Reply, RpcError> {
        Ok(Some(jsonrpc::encode_result(self.id, result)))
    }
}

/// Serves a client's request: its answer frame, or `None` when it answers later.
pub(crate) type RequestHandler = fn(&mut Device, &Call<'_>) -> Result<Reply, RpcError>;

/// Acts on a client's notification; there is no one to tell of params that do not parse.
pub(crate) type NotificationHandler = fn(&mut Device, ConnId, Option<&RawValue>);

pub(crate) fn initialize(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    let result = d.initialize(c.conn, c.params)?;
    c.answer(&result)
}

pub(crate) fn session_new(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    let answer = d.session_new(c.conn, c.id, c.params()?)?;
    Ok(answer.map(|v: Value| jsonrpc::encode_result(c.id, &v)))
}

pub(crate) fn prompt(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    d.prompt(c.conn, c.id, c.params()?)
}

pub(crate) fn set_mode(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.set_mode(c.conn, c.params()?)?)
}

pub(crate) fn steer(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.steer(c.conn, c.params()?)?)
}

pub(crate) fn status(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.status(c.conn, c.params()?, c.admitted)?)
}

pub(crate) fn history(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.history(c.conn, c.params()?)?)
}

pub(crate) fn title(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.set_title(c.conn, c.params()?)?)
}

pub(crate) fn delete(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.delete_request(c.conn, c.params()?)?)
}

pub(crate) fn terminal_open(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Answered once the shell has started the terminal.
    d.terminal_open(c.conn, c.id, c.params()?).map(|()| None)
}

pub(crate) fn cancel(d: &mut Device, _conn: ConnId, params: Option<&RawValue>) {
    if let Ok(p) = jsonrpc::parse_params("session/cancel", params) {
        d.cancel(p);
    }
}

pub(crate) fn terminal_input(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    d.terminal_input(conn, params);
}

pub(crate) fn terminal_resize(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    d.terminal_resize(conn, params);
}

pub(crate) fn terminal_close(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    d.terminal_close(conn, params);
}
