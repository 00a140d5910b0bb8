//! A set-aside session's event log read alone (issue 16). A client that missed some of such a
//! session's events (its catch-up on a new link) is answered from the log's blocks in the store
//! (`Effect::ReadEvents`, answered by [`Device::handle_events_read`]) by the same paging rules
//! as a log in memory: the session is not read back, so it evicts no other, is not held by the
//! connection and is not marked given. Reads waiting at once are bounded by
//! `sessions.max_event_reads`; each holds at most about one log while it is answered.

use serde_json::value::RawValue;

use super::event_block::read_block;
use super::event_log::{AtRest, EventLog, LoggedEvent};
use super::{ConnId, Device, Effect};
use crate::config::SessionLimits;
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::store::{self, Entry};
use crate::time::Time;

/// What a page of a set-aside session's log is asked for.
#[derive(Debug)]
pub(super) struct Wanted {
    pub since: u64,
    pub limit: usize,
    pub max_bytes: usize,
    /// What was kept of the log when the session was set aside: its last seq and reach.
    pub at_rest: AtRest,
    /// Only the events a link sent nothing but announcements of the session heard
    /// (`command_set::heard_unheld`): no client was ever given it.
    pub unheld: bool,
}

/// A `_lembas/session/events` request waiting for its session's log to be read.
#[derive(Debug)]
pub(super) struct PendingEvents {
    conn: ConnId,
    id: Id,
    session_id: String,
    wanted: Wanted,
}

impl PendingEvents {
    /// The answer's result from what the shell read: the page, or why there is none.
    fn page(
        &self,
        read: Result<Vec<Entry>, String>,
        limits: &SessionLimits,
    ) -> Result<String, RpcError> {
        let failed = |why: String| {
            RpcError::new(
                code::INTERNAL_ERROR,
                format!(
                    "the event log of session `{}` could not be read from the store: {why}",
                    self.session_id
                ),
            )
        };
        let mut blocks: Vec<(u64, Vec<LoggedEvent>)> = Vec::new();
        for e in read.map_err(failed)? {
            if !store::is_event_block_of(&e, &self.session_id) {
                continue;
            }
            let first = store::event_block_first(&e.key)
                .ok_or_else(|| failed(format!("`{}` is not `<session>/<first seq>`", e.key)))?;
            let events = read_block(&e.value, &self.session_id)
                .map_err(|why| failed(format!("`{}`: {why}", e.key)))?;
            blocks.push((first, events));
        }
        let w = &self.wanted;
        let log = EventLog::read_back(&self.session_id, blocks, w.at_rest, limits);
        let page = if w.unheld {
            let heard = super::command_set::heard_unheld;
            log.page_of(w.since, w.limit, w.max_bytes, heard)
        } else {
            log.page(w.since, w.limit, w.max_bytes)
        };
        Ok(page.to_json())
    }
}

impl Device {
    /// Ask the shell for set-aside `session`'s log, to answer request `id` on `conn` with the
    /// page `wanted` says, behind every persist issued so far (its seal among them). Refused,
    /// naming the bound, when `sessions.max_event_reads` reads wait already.
    pub(super) fn read_events(
        &mut self,
        conn: ConnId,
        id: &Id,
        session: &str,
        wanted: Wanted,
    ) -> Result<(), RpcError> {
        let max = self.config.sessions.max_event_reads;
        if self.event_reads.len() >= max {
            return Err(RpcError::over_limit(
                format!(
                    "this device is reading {max} set-aside sessions' event logs already, the \
                     most it reads at once (sessions.max_event_reads); ask again once one is \
                     answered"
                ),
                max,
            ));
        }
        let request = self.event_reads.ask(PendingEvents {
            conn,
            id: id.clone(),
            session_id: session.to_string(),
            wanted,
        });
        self.out.effect(Effect::ReadEvents {
            request,
            session_id: session.to_string(),
        });
        Ok(())
    }

    /// The shell read the log `Effect::ReadEvents { request }` asked for: `entries` (the
    /// session's blocks; others are ignored), or why it could not. The waiting request is
    /// answered with its page, or -32603 with the reason (a block that cannot be read too:
    /// a page without it could leave out events unsaid). The session stays set aside.
    pub fn handle_events_read(
        &mut self,
        request: u64,
        read: Result<Vec<Entry>, String>,
        now: Time,
    ) {
        self.clock.advance(now);
        if let Some(p) = self.event_reads.answered(request) {
            if self.conns.contains_key(&p.conn) {
                match p.page(read, &self.config.sessions) {
                    Ok(json) => {
                        let page = RawValue::from_string(json).expect("the log writes JSON");
                        self.out.send(p.conn, jsonrpc::encode_result(&p.id, &page));
                    }
                    Err(e) => self.reply_error(p.conn, &p.id, &e),
                }
            }
        }
        self.after_input();
    }

    /// A connection went away: its event log reads answer no one.
    pub(super) fn forget_event_reads(&mut self, conn: ConnId) {
        self.event_reads.retain(|p| p.conn != conn);
    }
}
