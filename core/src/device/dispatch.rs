//! Routing one decoded message: handshake gating, the method table, capability gating, and
//! the answers the client's responses carry.

use serde_json::value::RawValue;

use super::connection::Phase;
use super::{ConnId, Device, CAPABILITIES};
use crate::jsonrpc::{self, code, Message, Notification, Request, Response, RpcError};
use crate::methods::{self, Direction, Kind};

/// What a request handler gives back: the encoded answer now, or `None` when the answer comes
/// later (a prompt answers when its turn ends).
pub(super) type Reply = Option<Vec<u8>>;

impl Device {
    pub(super) fn on_frame(&mut self, conn: ConnId, frame: &[u8]) {
        match jsonrpc::decode(frame, &self.config.frames) {
            Err(e) => self.send(conn, e.response()),
            Ok(Message::Request(req)) => self.on_request(conn, req),
            Ok(Message::Notification(n)) => self.on_notification(conn, n),
            Ok(Message::Response(r)) => self.on_response(conn, r),
        }
    }

    fn on_request(&mut self, conn: ConnId, req: Request<'_>) {
        match self.route(conn, &req) {
            Ok(Some(frame)) => self.send(conn, frame),
            Ok(None) => {}
            Err(e) => self.reply_error(conn, &req.id, &e),
        }
    }

    fn route(&mut self, conn: ConnId, req: &Request<'_>) -> Result<Reply, RpcError> {
        let method = req.method.as_ref();
        let phase = self.conns[&conn].phase;
        if phase == Phase::AwaitingInitialize && method != "initialize" {
            return Err(RpcError::invalid_request(format!(
                "`{method}` before `initialize`: a connection must be initialized first"
            )));
        }
        let spec = methods::find(method)
            .filter(|m| m.direction == Direction::ClientToAgent && m.kind == Kind::Request)
            .ok_or_else(|| RpcError::method_not_found(method))?;
        if let Some(cap) = spec.capability {
            if !CAPABILITIES.contains(&cap) {
                return Err(RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("`{method}` needs capability `{cap}`, which this device does not list"),
                ));
            }
        }
        self.handle_request(conn, spec.name, req.params)
            .map(|answer| answer.map(|result| jsonrpc::encode_result(&req.id, &result)))
    }

    /// The method handlers. Each returns its result, or `None` when it answers later itself.
    fn handle_request(
        &mut self,
        conn: ConnId,
        method: &'static str,
        params: Option<&RawValue>,
    ) -> Result<Option<Box<RawValue>>, RpcError> {
        match method {
            "initialize" => self.initialize(conn, params).map(Some),
            _ => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("`{method}` is not implemented by this device yet"),
            )),
        }
    }

    fn on_notification(&mut self, conn: ConnId, n: Notification<'_>) {
        // Unknown notifications are ignored, as JSON-RPC asks; so is anything before
        // `initialize`, which has no one to answer.
        if self.conns[&conn].phase != Phase::Ready {
            return;
        }
        let _ = n;
    }

    fn on_response(&mut self, conn: ConnId, r: Response<'_>) {
        let Some(id) = r.id else { return };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        // An answer to nothing we asked (or asked and already heard) changes nothing.
        let Some(pending) = c.pending.remove(&id) else {
            return;
        };
        if let Err(e) = &r.outcome {
            if e.code == code::METHOD_NOT_FOUND
                && matches!(pending.method, "_lembas/question" | "_lembas/plan")
            {
                c.downgraded = true;
            }
        }
    }
}
