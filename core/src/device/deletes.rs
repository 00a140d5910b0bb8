//! Deletes: `_lembas/session/delete` from a client, and deletes made on the device (a command,
//! a prune, a terminal), which reach the client as `_lembas/session/deleted` now or, when no
//! link is up, right after the next link's `initialize`. None is lost to a crash or a dropped
//! link: the pending delete is durable before its frame is sent, and forgotten only once the
//! link that carried it stayed up `delete_confirm_ms` afterwards.

use serde_json::{json, Map, Value};

use super::{ConnId, ConnKind, Device, Effect};
use crate::engine::StopReason;
use crate::jsonrpc::{self, RpcError};
use crate::paths;
use crate::store::{self, Record, Table};
use crate::time::Time;
use crate::turn::Answer;
use crate::wire::session::SessionIdParams;

impl Device {
    /// `_lembas/session/delete`: a session the client holds or was ever given, one a terminal
    /// shares, or one under `remote.roots` while remote work is on. Trust is not asked.
    pub(super) fn delete_request(
        &mut self,
        conn: ConnId,
        p: SessionIdParams,
    ) -> Result<Value, RpcError> {
        let Some(s) = self.sessions.get(&p.session_id) else {
            // Gone already: deleting twice is done as well.
            return Ok(json!({ "deleted": false }));
        };
        let remote = &self.config.remote;
        let allowed = s.durable.given
            || s.holders.contains(&conn)
            || s.holders.iter().any(|h| {
                self.conns
                    .get(h)
                    .is_some_and(|c| c.kind == ConnKind::Terminal)
            })
            || (remote.enabled && paths::within(&s.durable.root, &remote.roots).is_some());
        if !allowed {
            return Err(RpcError::invalid_params(format!(
                "session `{}` was never given to a client and is not under the device's roots; \
                 it can only be deleted on the device",
                p.session_id
            )));
        }
        self.remove_session(&p.session_id);
        Ok(json!({ "deleted": true }))
    }

    /// Delete a session on the device's own account (`lembas sessions delete`, a prune). The
    /// client hears `_lembas/session/deleted` now, or after the next link's `initialize`.
    /// Returns whether there was such a session.
    pub fn delete_session(&mut self, session_id: &str, now: Time) -> bool {
        self.clock.advance(now);
        if !self.has_session(session_id) {
            return false;
        }
        self.remove_session(session_id);
        self.out.persist(vec![Record::Put {
            table: Table::Deletes,
            key: session_id.to_string(),
            value: String::new(),
        }]);
        self.pending_deletes.insert(session_id.to_string());
        // Sent now on a link that may hear it; its turns were the last a restart for new
        // settings waited for, maybe.
        self.after_input();
        true
    }

    /// Send the kept deletes to every link whose client may hear them (part of the step that
    /// ends every input): a delete made on the device while such a link is up, or a link that
    /// just answered `initialize`.
    pub(super) fn send_pending_deletes_to_links(&mut self) {
        if self.pending_deletes.is_empty() {
            return;
        }
        let links: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.kind == ConnKind::Link && c.may_receive("_lembas/session/deleted"))
            .map(|(id, _)| *id)
            .collect();
        for conn in links {
            self.send_pending_deletes(conn);
        }
    }

    /// Send every kept delete to a link whose client said `_meta.lembas`. Each stays kept
    /// until that link has stayed up `delete_confirm_ms` since (then it is forgotten, once the
    /// frames have left); a link that drops sooner may have lost it, and the next one gets it.
    fn send_pending_deletes(&mut self, conn: ConnId) {
        let now = self.clock.now();
        for id in std::mem::take(&mut self.pending_deletes) {
            let frame = jsonrpc::encode_notification(
                "_lembas/session/deleted",
                &json!({ "sessionId": id }),
            );
            self.out.send(conn, frame);
            self.unconfirmed_deletes.insert(id, (conn, now));
        }
    }

    /// The link `conn` dropped: the deletes it carried and did not confirm are kept again.
    pub(super) fn unconfirm_deletes(&mut self, conn: ConnId) {
        let back: Vec<String> = self
            .unconfirmed_deletes
            .iter()
            .filter(|(_, (c, _))| *c == conn)
            .map(|(id, _)| id.clone())
            .collect();
        for id in back {
            self.unconfirmed_deletes.remove(&id);
            self.pending_deletes.insert(id);
        }
    }

    /// Deletes whose link stayed up long enough are forgotten.
    pub(super) fn confirm_deletes(&mut self, now: Time) {
        let wait = self.config.sessions.delete_confirm_ms;
        let done: Vec<String> = self
            .unconfirmed_deletes
            .iter()
            .filter(|(_, (_, at))| at.plus_ms(wait) <= now)
            .map(|(id, _)| id.clone())
            .collect();
        if done.is_empty() {
            return;
        }
        let mut forget = Vec::new();
        for id in done {
            self.unconfirmed_deletes.remove(&id);
            forget.push(Record::Delete {
                table: Table::Deletes,
                key: id,
            });
        }
        self.out.persist_after_send(forget);
    }

    pub(super) fn deletes_deadline(&self) -> Option<Time> {
        let wait = self.config.sessions.delete_confirm_ms;
        self.unconfirmed_deletes
            .values()
            .map(|(_, at)| at.plus_ms(wait))
            .min()
    }

    /// Take a session out of the device and its store: its turn stops and every prompt waiting
    /// on it is answered `cancelled`; its cards come down; its attachments go. One set aside
    /// (idle, held by no one) only leaves the store.
    fn remove_session(&mut self, session_id: &str) {
        let s = self.take_live(session_id);
        if s.is_none() && !self.stored.remove(session_id) {
            return;
        }
        let prefix = store::session_prefix(session_id);
        let removal = vec![
            Record::Delete {
                table: Table::Sessions,
                key: session_id.to_string(),
            },
            Record::DeletePrefix {
                table: Table::Turns,
                prefix: prefix.clone(),
            },
            Record::DeletePrefix {
                table: Table::History,
                prefix,
            },
        ];
        let Some(s) = s else {
            self.out.persist(removal);
            self.out.effect(Effect::RemoveAttachments {
                session_id: session_id.to_string(),
            });
            return;
        };
        let (running, waiters) = s.turns.abandon();
        if let Some(r) = running {
            self.out.effect(Effect::CancelTurn {
                session_id: session_id.to_string(),
                turn_id: r.turn_id.clone(),
            });
            self.drop_turn_cards(session_id, &r.turn_id);
        }
        let cancelled = Answer::stopped(StopReason::Cancelled, {
            let mut m = Map::new();
            m.insert("message".into(), json!("the session was deleted"));
            m
        });
        for (turn, waiting) in waiters {
            for (conn, id) in waiting {
                if self.conns.contains_key(&conn) {
                    self.out.send(conn, cancelled.frame(&id, &turn));
                }
            }
        }
        self.out.persist(removal);
        self.out.effect(Effect::RemoveAttachments {
            session_id: session_id.to_string(),
        });
        // A terminal that has it open starts a new one.
        let frame = jsonrpc::encode_notification(
            "_lembas/session/deleted",
            &json!({ "sessionId": session_id }),
        );
        for conn in s.holders {
            if self
                .conns
                .get(&conn)
                .is_some_and(|c| c.kind == ConnKind::Terminal)
            {
                self.out.send(conn, frame.clone());
            }
        }
    }
}
