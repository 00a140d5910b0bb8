//! `_lembas/session/rewind` (capability `rewind`): the client edits or regenerates from a
//! turn, so that turn and every later one are reverted. Their prompts and answers leave the
//! store's history (so `_lembas/session/history` and `session/load`'s replay no longer show
//! them) and the model's context; the next turn's entries are stored where the first of them
//! was. Files are not touched. A turn already folded into a compaction's summary stays in the
//! summary. The ledger keeps the reverted turns' answers (a prompt sent again with one of
//! their ids still gets it) but no longer their history entries, so a turn is reverted once.
//!
//! Which turns exist is the ledger's: each turn the model is given knows the history entry its
//! prompt is (`TurnRecord::history`), so only the last `sessions.ledger_turns` turns can be
//! rewound to, and the entries deleted are bounded by those turns'.

use serde_json::{json, Value};

use super::ledger::TurnState;
use super::outbox::Lane;
use super::sessions::Session;
use super::{ConnId, Device};
use crate::jsonrpc::RpcError;
use crate::store::{self, Record, Table};
use crate::wire::session::RewindParams;

impl Device {
    /// `_lembas/session/rewind`: `{ reverted: <turns> }`; -32602 while the session works, or
    /// for a turn it does not have (or no longer gives the model).
    pub(super) fn rewind(&mut self, conn: ConnId, p: RewindParams) -> Result<Value, RpcError> {
        let now = self.clock.now().0;
        let ledger_turns = self.config.sessions.ledger_turns;
        let s = self.attach(conn, &p.session_id)?;
        let session = s.durable.id.clone();
        if !s.turns.idle() {
            return Err(RpcError::invalid_params(format!(
                "session `{session}` is working: rewind it once its turns are done"
            )));
        }
        let Some(from) = s.turns.ledger().history_of(&p.turn_id) else {
            return Err(RpcError::invalid_params(format!(
                "session `{session}` has no turn `{}` to rewind to: it is not one of its last \
                 {ledger_turns} turns (sessions.ledger_turns), was reverted already, or was an \
                 action such as /compact",
                p.turn_id
            )));
        };
        let (reverted, records) = s.revert_from(from, now);
        self.out.persist_in(Lane::of(&session), records);
        Ok(json!({ "reverted": reverted }))
    }
}

impl Session {
    /// Revert the turns whose prompts are history entries `from` and after (see the module):
    /// how many, and the records that store it.
    pub(super) fn revert_from(&mut self, from: u64, now: u64) -> (usize, Vec<Record>) {
        let id = self.durable.id.clone();
        let turns = self.turns.ledger_mut().revert_from(from);
        let mut records: Vec<Record> = turns
            .iter()
            .filter_map(|(turn, order, state)| match state {
                TurnState::Done(answer) => {
                    Some(store::done_record(&id, turn, *order, answer, now, None))
                }
                // Reverted only while the session is idle: every one of them is done.
                TurnState::Queued | TurnState::Running => None,
            })
            .collect();
        records.extend(
            (from..self.recent.next_index()).map(|index| Record::Delete {
                table: Table::History,
                key: store::history_key(&id, index as usize),
            }),
        );
        self.recent.revert_from(from);
        // The summary keeps what it folded; the entries after it start where the reverted
        // ones did.
        if let Some(c) = &mut self.durable.compaction {
            c.folded = c.folded.min(from);
        }
        self.durable.touched = now;
        records.push(self.record());
        (turns.len(), records)
    }
}
