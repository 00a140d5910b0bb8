//! The client's prompts and the reattach algorithm. Every prompt carries a client-made turn id
//! and is kept as a row until answered. When a link drops (or either side restarts) the rows
//! left incomplete are reattached on the next link: `_lembas/session/status` says whether turn
//! T runs (follow it), waits (wait, and follow it when it starts), is unknown to the device
//! (send the prompt again: the device deduplicates) — and `_lembas/session/history` tells a
//! finished T (import it). Following or waiting re-sends the same turn id too, which the device
//! never runs twice and answers when the turn ends: that is how the client hears its answer.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{CallError, Client, ClientEvent};
use crate::jsonrpc::{Id, RpcError};
use crate::time::Time;
use crate::wire::session::StatusResult;

/// How an incomplete row was picked up again.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reattach {
    /// T was running: its updates follow, and its answer comes to the re-sent prompt.
    Following,
    /// T was waiting behind another turn: likewise, once it starts.
    Waiting,
    /// T had finished: these are its history turns (its user turn and the answer after it).
    Imported(Vec<Value>),
    /// The device did not know T: the prompt was sent again.
    Resent,
    /// The session is gone from the device.
    Gone,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum RowState {
    /// Sent on the current link, as request `Id`.
    Sent(Id),
    /// Its link dropped before the answer: reattach on the next one.
    Incomplete,
    /// Asked `status` (or `history`) about it with this request.
    Asking(Id),
}

#[derive(Clone, Debug)]
pub(super) struct Row {
    pub session_id: String,
    pub params: Value,
    pub state: RowState,
}

/// What a pending call was for, beyond the method's name.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Purpose {
    Plain,
    Prompt(String),
    Status(String),
    History(String),
    Delete(String),
    /// `session/new`: the answer names a session this client now knows.
    NewSession,
    /// `_lembas/session/events` for this session: a page of what it missed.
    Events(String),
}

pub(super) type Rows = BTreeMap<String, Row>;

impl Client {
    /// Send a prompt with this turn id (or one the client makes), kept until answered and
    /// reattached across dropped links. Returns the turn id.
    pub fn prompt(
        &mut self,
        session_id: &str,
        blocks: Value,
        turn_id: Option<&str>,
        now: Time,
    ) -> Result<String, CallError> {
        self.clock.advance(now);
        let turn_id = match turn_id {
            Some(t) => t.to_string(),
            None => format!("msg_{}", self.rng.token(16)),
        };
        let params = json!({
            "sessionId": session_id,
            "prompt": blocks,
            "_meta": { "lembas": { "turnId": turn_id } },
        });
        let id = self.call("session/prompt", &params, now)?;
        self.follow(session_id);
        self.purposes
            .insert(id.clone(), Purpose::Prompt(turn_id.clone()));
        self.rows.insert(
            turn_id.clone(),
            Row {
                session_id: session_id.to_string(),
                params,
                state: RowState::Sent(id),
            },
        );
        Ok(turn_id)
    }

    /// Turns sent and not yet answered.
    pub fn incomplete(&self) -> Vec<(String, String)> {
        self.rows
            .iter()
            .map(|(t, r)| (r.session_id.clone(), t.clone()))
            .collect()
    }

    /// The link dropped: every row waiting for an answer on it is incomplete now.
    pub(super) fn rows_link_down(&mut self) {
        for row in self.rows.values_mut() {
            row.state = RowState::Incomplete;
        }
    }

    /// A new link is ready: pick up every incomplete row.
    pub(super) fn reattach_all(&mut self) {
        let turns: Vec<String> = self
            .rows
            .iter()
            .filter(|(_, r)| r.state == RowState::Incomplete)
            .map(|(t, _)| t.clone())
            .collect();
        for turn in turns {
            let session = self.rows[&turn].session_id.clone();
            match self.call(
                "_lembas/session/status",
                &json!({ "sessionId": session }),
                self.clock.now(),
            ) {
                Ok(id) => {
                    self.purposes
                        .insert(id.clone(), Purpose::Status(turn.clone()));
                    if let Some(row) = self.rows.get_mut(&turn) {
                        row.state = RowState::Asking(id);
                    }
                }
                // A device without `status`: sending again is always safe.
                Err(_) => self.resend(&turn, Reattach::Resent),
            }
        }
    }

    fn resend(&mut self, turn: &str, how: Reattach) {
        let Some(row) = self.rows.get(turn) else {
            return;
        };
        let session_id = row.session_id.clone();
        let params = row.params.clone();
        match self.call("session/prompt", &params, self.clock.now()) {
            Ok(id) => {
                self.purposes
                    .insert(id.clone(), Purpose::Prompt(turn.to_string()));
                if let Some(row) = self.rows.get_mut(turn) {
                    row.state = RowState::Sent(id);
                }
                self.emit_about(
                    &session_id.clone(),
                    ClientEvent::Reattached {
                        session_id,
                        turn_id: turn.to_string(),
                        how,
                    },
                );
            }
            Err(_) => {
                if let Some(row) = self.rows.get_mut(turn) {
                    row.state = RowState::Incomplete;
                }
            }
        }
    }

    /// An answer to a call this module made; a plain call's outcome is handed back.
    pub(super) fn on_turn_answer(
        &mut self,
        purpose: Purpose,
        outcome: Result<Value, RpcError>,
    ) -> Result<(), Result<Value, RpcError>> {
        match purpose {
            Purpose::Plain => return Err(outcome),
            Purpose::Prompt(turn) => {
                if let Some(row) = self.rows.remove(&turn) {
                    let session = row.session_id.clone();
                    self.emit_about(
                        &session,
                        ClientEvent::PromptAnswered {
                            session_id: row.session_id,
                            turn_id: turn,
                            outcome,
                        },
                    );
                }
            }
            Purpose::Status(turn) => self.on_status(turn, outcome),
            Purpose::History(turn) => self.on_history(turn, outcome),
            Purpose::Delete(session) => self.on_delete_answer(session, outcome),
            Purpose::Events(session) => self.on_events_page(session, outcome),
            Purpose::NewSession => {
                if let Some(s) = outcome.as_ref().ok().and_then(|v| v["sessionId"].as_str()) {
                    self.deletes.known.insert(s.to_string());
                }
                return Err(outcome);
            }
        }
        Ok(())
    }

    fn on_status(&mut self, turn: String, outcome: Result<Value, RpcError>) {
        let Some(row) = self.rows.get(&turn) else {
            return;
        };
        let session_id = row.session_id.clone();
        // A refusal, or an answer that is no status: the prompt is sent again (its turn id
        // makes that safe: the device answers a turn it has without running it twice).
        let status = outcome
            .ok()
            .and_then(|v| serde_json::from_value::<StatusResult>(v).ok());
        let Some(status) = status else {
            return self.resend(&turn, Reattach::Resent);
        };
        if !status.exists {
            self.rows.remove(&turn);
            return self.emit_about(
                &session_id.clone(),
                ClientEvent::Reattached {
                    session_id,
                    turn_id: turn,
                    how: Reattach::Gone,
                },
            );
        }
        if status.turn_id.as_deref() == Some(turn.as_str()) {
            return self.resend(&turn, Reattach::Following);
        }
        if status.queued.iter().any(|t| *t == turn) {
            return self.resend(&turn, Reattach::Waiting);
        }
        match self.call(
            "_lembas/session/history",
            &json!({ "sessionId": session_id }),
            self.clock.now(),
        ) {
            Ok(id) => {
                self.purposes
                    .insert(id.clone(), Purpose::History(turn.clone()));
                if let Some(row) = self.rows.get_mut(&turn) {
                    row.state = RowState::Asking(id);
                }
            }
            Err(_) => self.resend(&turn, Reattach::Resent),
        }
    }

    fn on_history(&mut self, turn: String, outcome: Result<Value, RpcError>) {
        let turns = outcome
            .ok()
            .and_then(|h| h["turns"].as_array().cloned())
            .unwrap_or_default();
        let start = turns
            .iter()
            .position(|t| t["role"] == "user" && t["turnId"].as_str() == Some(turn.as_str()));
        let Some(start) = start else {
            return self.resend(&turn, Reattach::Resent);
        };
        let end = turns[start + 1..]
            .iter()
            .position(|t| t["role"] == "user")
            .map_or(turns.len(), |i| start + 1 + i);
        let Some(row) = self.rows.remove(&turn) else {
            return;
        };
        self.emit_about(
            &row.session_id.clone(),
            ClientEvent::Reattached {
                session_id: row.session_id,
                turn_id: turn,
                how: Reattach::Imported(turns[start..end].to_vec()),
            },
        );
    }
}
