//! The handlers the method table (`crate::methods::METHODS`) names: each reads its params and
//! hands them to the concern that serves the method. Adding a method the device serves is a
//! row there, and a handler with its name here.

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
    /// Whether the session's directory check passed; only a method whose row `answers_refusal`
    /// runs when it did not.
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

// The method table names its handlers rather than pointing at them: the client reads the
// table too, and a function pointer there would link the whole device into a client-only
// build (the web client module grew from 381 KB to 599 KB, past its 400 KB budget). Only
// dispatch calls `run`, so only a device build links the handlers.

/// The handler that serves a client's request: its answer frame, or `None` when it answers
/// later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestHandler {
    Initialize,
    SessionNew,
    Prompt,
    SetMode,
    Configure,
    Steer,
    Status,
    History,
    Title,
    Delete,
    TerminalOpen,
    Events,
    Directories,
    SessionList,
    SessionLoad,
    SessionResume,
    SessionClose,
    SessionDelete,
    FilesSearch,
    Commands,
    Compact,
    Rewind,
}

impl RequestHandler {
    pub(crate) fn run(self, d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
        match self {
            RequestHandler::Initialize => initialize(d, c),
            RequestHandler::SessionNew => session_new(d, c),
            RequestHandler::Prompt => prompt(d, c),
            RequestHandler::SetMode => set_mode(d, c),
            RequestHandler::Configure => configure(d, c),
            RequestHandler::Steer => steer(d, c),
            RequestHandler::Status => status(d, c),
            RequestHandler::History => history(d, c),
            RequestHandler::Title => title(d, c),
            RequestHandler::Delete => delete(d, c),
            RequestHandler::TerminalOpen => terminal_open(d, c),
            RequestHandler::Events => events(d, c),
            RequestHandler::Directories => directories(d, c),
            RequestHandler::SessionList => c.answer(&d.list_sessions(c.params()?)?),
            // Answered once its history is read from the store and replayed.
            RequestHandler::SessionLoad => {
                let answer = d.load_session(c.conn, c.id, c.params()?, true)?;
                Ok(answer.map(|v| jsonrpc::encode_result(c.id, &v)))
            }
            RequestHandler::SessionResume => {
                let answer = d.load_session(c.conn, c.id, c.params()?, false)?;
                Ok(answer.map(|v| jsonrpc::encode_result(c.id, &v)))
            }
            RequestHandler::SessionClose => c.answer(&d.close_session(c.conn, c.params()?)?),
            RequestHandler::SessionDelete => c.answer(&d.delete_from_editor(c.params()?)?),
            RequestHandler::FilesSearch => files_search(d, c),
            RequestHandler::Commands => commands(d, c),
            // Answered once the engine has made the summary.
            RequestHandler::Compact => d.compact_method(c.conn, c.id, c.params()?).map(|()| None),
            RequestHandler::Rewind => c.answer(&d.rewind(c.conn, c.params()?)?),
        }
    }
}

/// The handler that acts on a client's notification; there is no one to tell of params that
/// do not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotificationHandler {
    Cancel,
    TerminalInput,
    TerminalResize,
    TerminalClose,
}

impl NotificationHandler {
    pub(crate) fn run(self, d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
        match self {
            NotificationHandler::Cancel => cancel(d, conn, params),
            NotificationHandler::TerminalInput => terminal_input(d, conn, params),
            NotificationHandler::TerminalResize => terminal_resize(d, conn, params),
            NotificationHandler::TerminalClose => terminal_close(d, conn, params),
        }
    }
}

fn initialize(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    let result = d.initialize(c.conn, c.params)?;
    c.answer(&result)
}

fn session_new(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    let answer = d.session_new(c.conn, c.id, c.params()?)?;
    Ok(answer.map(|v: Value| jsonrpc::encode_result(c.id, &v)))
}

fn prompt(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    d.prompt(c.conn, c.id, c.params()?)
}

fn set_mode(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.set_mode(c.conn, c.params()?)?)
}

fn configure(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.configure(c.conn, c.params()?)?)
}

fn steer(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.steer(c.conn, c.params()?)?)
}

fn status(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.status(c.conn, c.params()?, c.admitted)?)
}

fn history(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Answered once the shell has read the store.
    d.history(c.conn, c.id, c.params()?).map(|()| None)
}

fn title(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.set_title(c.conn, c.params()?)?)
}

fn delete(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    c.answer(&d.delete_request(c.conn, c.params()?)?)
}

fn terminal_open(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Answered once the shell has started the terminal.
    d.terminal_open(c.conn, c.id, c.params()?).map(|()| None)
}

fn events(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // A set-aside session's missed events: answered once the shell has read its log.
    let page = d.session_events(c.conn, c.id, c.params()?)?;
    Ok(page.map(|p| jsonrpc::encode_result(c.id, &p)))
}

fn directories(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Without a path answered now; a listing once the shell has read the directory.
    let answer = d.directories(c.conn, c.id, c.params()?)?;
    Ok(answer.map(|v: Value| jsonrpc::encode_result(c.id, &v)))
}

fn files_search(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Answered once the shell has searched its index.
    d.files_search(c.conn, c.id, c.params()?)?;
    Ok(None)
}

fn commands(d: &mut Device, c: &Call<'_>) -> Result<Reply, RpcError> {
    // Answered once the shell has read the command files.
    d.commands_method(c.conn, c.id, c.params()?)?;
    Ok(None)
}

fn cancel(d: &mut Device, _conn: ConnId, params: Option<&RawValue>) {
    if let Ok(p) = jsonrpc::parse_params("session/cancel", params) {
        d.cancel(p);
    }
}

fn terminal_input(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    if let Ok(p) = jsonrpc::parse_params("_lembas/terminal/input", params) {
        d.terminal_input(conn, p);
    }
}

fn terminal_resize(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    if let Ok(p) = jsonrpc::parse_params("_lembas/terminal/resize", params) {
        d.terminal_resize(conn, p);
    }
}

fn terminal_close(d: &mut Device, conn: ConnId, params: Option<&RawValue>) {
    if let Ok(p) = jsonrpc::parse_params("_lembas/terminal/close", params) {
        d.terminal_close(conn, p);
    }
}
