//! The client's deletes: a delete it could not deliver (no link, no answer in time, refused) is
//! kept and sent again when the device next links, until answered; after five refusals it is
//! given up and the caller told. A session pending deletion is not brought back by an
//! `announce`, and a `deleted` for a session it never had, or deleted already, is ignored.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{json, Value};

use super::turns::Purpose;
use super::{Client, ClientEvent};
use crate::jsonrpc::{Id, RpcError};
use crate::time::Time;
use crate::wire::event::notice::DELETED;
use crate::wire::session::DeleteResult;

/// Refusals after which a delete is given up (LLeMbas's rule).
pub const MAX_REFUSALS: u32 = 5;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Delivery {
    /// Waiting for a link to send it on.
    Unsent,
    /// Sent as this request; no answer by the deadline means undelivered.
    Sent(Id, Time),
}

#[derive(Clone, Debug)]
pub(super) struct PendingDelete {
    pub refusals: u32,
    pub delivery: Delivery,
}

#[derive(Debug, Default)]
pub(super) struct Deletes {
    pub pending: BTreeMap<String, PendingDelete>,
    /// Sessions this client knows (made, announced, or deleted by it).
    pub known: BTreeSet<String>,
    /// Sessions whose delete the device acknowledged.
    pub done: BTreeSet<String>,
}

impl Client {
    /// Delete a session: sent now when the link is ready, else kept and sent on the next link.
    /// `now` starts the wait for its answer.
    pub fn delete_session(&mut self, session_id: &str, now: Time) {
        self.clock.advance(now);
        self.deletes.known.insert(session_id.to_string());
        self.deletes
            .pending
            .entry(session_id.to_string())
            .or_insert(PendingDelete {
                refusals: 0,
                delivery: Delivery::Unsent,
            });
        self.send_deletes();
    }

    /// Deletes not yet answered (what a web UI keeps across a reload), with their refusals.
    pub fn pending_deletes(&self) -> Vec<(String, u32)> {
        self.deletes
            .pending
            .iter()
            .map(|(s, p)| (s.clone(), p.refusals))
            .collect()
    }

    /// Put back deletes kept from before a restart of the client.
    pub fn restore_pending_deletes(&mut self, kept: &[(String, u32)]) {
        for (session, refusals) in kept {
            self.deletes.known.insert(session.clone());
            self.deletes.pending.insert(
                session.clone(),
                PendingDelete {
                    refusals: *refusals,
                    delivery: Delivery::Unsent,
                },
            );
        }
        self.send_deletes();
    }

    /// Send every unsent delete, if the link is ready for it.
    pub(super) fn send_deletes(&mut self) {
        let deadline = self.clock.now().plus_ms(self.config.request_timeout_ms);
        let unsent: Vec<String> = self
            .deletes
            .pending
            .iter()
            .filter(|(_, p)| p.delivery == Delivery::Unsent)
            .map(|(s, _)| s.clone())
            .collect();
        for session in unsent {
            let Ok(id) = self.call(
                "_lembas/session/delete",
                &json!({ "sessionId": session }),
                self.clock.now(),
            ) else {
                return;
            };
            self.purposes
                .insert(id.clone(), Purpose::Delete(session.clone()));
            if let Some(p) = self.deletes.pending.get_mut(&session) {
                p.delivery = Delivery::Sent(id, deadline);
            }
        }
    }

    pub(super) fn deletes_link_down(&mut self) {
        for p in self.deletes.pending.values_mut() {
            p.delivery = Delivery::Unsent;
        }
    }

    /// Sent deletes with no answer in time are undelivered: kept for the next link.
    pub(super) fn expire_deletes(&mut self, now: Time) {
        for p in self.deletes.pending.values_mut() {
            if matches!(p.delivery, Delivery::Sent(_, at) if at <= now) {
                p.delivery = Delivery::Unsent;
            }
        }
    }

    pub(super) fn deletes_deadline(&self) -> Option<Time> {
        self.deletes
            .pending
            .values()
            .filter_map(|p| match p.delivery {
                Delivery::Sent(_, at) => Some(at),
                Delivery::Unsent => None,
            })
            .min()
    }

    pub(super) fn on_delete_answer(&mut self, session: String, outcome: Result<Value, RpcError>) {
        let Some(p) = self.deletes.pending.get_mut(&session) else {
            return;
        };
        match outcome {
            Ok(v) => {
                self.deletes.pending.remove(&session);
                self.deletes.done.insert(session.clone());
                self.unfollow(&session);
                self.emit(ClientEvent::Deleted {
                    session_id: session,
                    // An answer that is no DeleteResult still means the device let it go.
                    existed: DeleteResult::deserialize(&v).is_ok_and(|r| r.deleted),
                });
            }
            Err(e) => {
                p.refusals += 1;
                p.delivery = Delivery::Unsent;
                if p.refusals >= MAX_REFUSALS {
                    self.deletes.pending.remove(&session);
                    self.emit(ClientEvent::DeleteGivenUp {
                        session_id: session,
                        reason: e.message,
                    });
                }
            }
        }
    }

    /// Whether a notification about `session` should reach the UI: not an `announce` of one
    /// pending deletion, not a `deleted` of one it never had or deleted already.
    pub(super) fn passes_delete_rules(&mut self, method: &str, params: &Value) -> bool {
        let Some(session) = params["sessionId"].as_str() else {
            return true;
        };
        match method {
            "_lembas/session/announce" => {
                if self.deletes.pending.contains_key(session) {
                    return false;
                }
                self.deletes.known.insert(session.to_string());
                true
            }
            DELETED => {
                self.unfollow(session);
                let fresh = self.deletes.known.contains(session)
                    && !self.deletes.done.contains(session)
                    && !self.deletes.pending.contains_key(session);
                self.deletes.done.insert(session.to_string());
                fresh
            }
            _ => true,
        }
    }
}
