//! Routing one decoded message: handshake gating, the method table, capability gating, and
//! the answers the client's responses carry.

use serde_json::Value;

use super::connection::Phase;
use super::handlers::Call;
use super::{ConnId, ConnKind, Device};
use crate::jsonrpc::{self, code, Message, Notification, Request, Response, RpcError};
use crate::methods::{self, Direction, Kind, On, Serve};

/// What a request handler gives back: the encoded answer now, or `None` when the answer comes
/// later (a prompt answers when its turn ends).
pub(crate) type Reply = Option<Vec<u8>>;

impl Device {
    pub(super) fn on_frame(&mut self, conn: ConnId, frame: &[u8]) {
        // Behind a session request waiting for its directory check, everything waits.
        if self.hold(conn, frame) {
            return;
        }
        self.run_frame(conn, frame, None);
    }

    /// Handle one frame. `checked` is the verdict on a session request that waited for its
    /// directory check (limits.rs), `None` for a frame not checked yet.
    pub(super) fn run_frame(
        &mut self,
        conn: ConnId,
        frame: &[u8],
        checked: Option<Result<(), RpcError>>,
    ) {
        match jsonrpc::decode(frame, &self.config.frames) {
            Err(e) => self.out.send(conn, e.response()),
            Ok(Message::Request(req)) => {
                // A session set aside is read back first; the request runs after. One the
                // table says may be answered at rest (a catch-up, event_log.rs) is answered
                // without it when it can be, and asks again after its directory check in case
                // the session came and went meanwhile.
                let again = crate::methods::find(&req.method).is_some_and(|m| m.at_rest);
                if (checked.is_none() || again) && self.park(conn, frame, &req.method, req.params) {
                    return;
                }
                self.on_request(conn, req, frame, checked)
            }
            Ok(Message::Notification(n)) => self.on_notification(conn, n),
            Ok(Message::Response(r)) => self.on_response(conn, r),
        }
    }

    fn on_request(
        &mut self,
        conn: ConnId,
        req: Request<'_>,
        frame: &[u8],
        checked: Option<Result<(), RpcError>>,
    ) {
        match self.route(conn, &req, frame, checked) {
            // Deletes made while no link was up follow `initialize`'s answer at once: the
            // input ends in `after_input`, which sends them.
            Ok(Some(frame)) => self.out.send(conn, frame),
            Ok(None) => {}
            Err(e) => self.reply_error(conn, &req.id, &e),
        }
    }

    fn route(
        &mut self,
        conn: ConnId,
        req: &Request<'_>,
        frame: &[u8],
        checked: Option<Result<(), RpcError>>,
    ) -> Result<Reply, RpcError> {
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
            if !methods::capability_built(cap) {
                return Err(RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("`{method}` needs capability `{cap}`, which this device does not list"),
                ));
            }
        }
        if spec.on == On::Local && self.conns[&conn].kind == ConnKind::Link {
            return Err(RpcError::invalid_params(format!(
                "`{method}` serves an editor's own connection (`lembas serve --stdio`, the hub), \
                 not the instance link"
            )));
        }
        let admitted = match checked {
            Some(verdict) => verdict,
            None if self.gate(conn, spec, req.params, frame)? => return Ok(None),
            None => Ok(()),
        };
        let admitted = match admitted {
            // Its handler answers the refusal (`status`: the session exists, and no more).
            Err(_) if spec.answers_refusal => false,
            Err(e) => return Err(e),
            Ok(()) => true,
        };
        match spec.serve {
            Serve::Request(handler) => handler.run(
                self,
                &Call::new(conn, &req.id, spec.name, req.params, admitted),
            ),
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
        // A notification that does not parse names nothing to act on; there is no one to tell.
        if let Some(Serve::Notification(handler)) = methods::find(&n.method).map(|m| m.serve) {
            handler.run(self, conn, n.params);
        }
    }

    fn on_response(&mut self, conn: ConnId, r: Response<'_>) {
        let Some(id) = r.id else { return };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        // An answer to nothing we asked (or asked and already heard) changes nothing.
        let Some(method) = c.pending.get(&id).map(|p| p.method) else {
            return;
        };
        let card = self.cards.asked_with(conn, &id);
        let outcome = match (&card, r.outcome) {
            (Some((_, tool_call_id)), Ok(raw)) => {
                let answer: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                if crate::wire::card::names_another_card(&answer, tool_call_id) {
                    // Meant for another card: not this request's answer, which may still come.
                    return;
                }
                Ok(answer)
            }
            (_, Ok(_)) => Ok(Value::Null),
            (_, Err(e)) => Err(e),
        };
        c.pending.remove(&id);
        if let Err(e) = &outcome {
            if e.code == code::METHOD_NOT_FOUND
                && matches!(method, "_lembas/question" | "_lembas/plan")
            {
                c.downgraded = true;
            }
        }
        if let Some(key) = card {
            self.card_answered(conn, key, outcome);
        }
    }
}
