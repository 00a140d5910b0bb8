//! `_lembas/session/events` (issue 16): a session's events after `since`, from its log in
//! memory, from what is kept of a session set aside (a client that missed none), or from its
//! log's blocks in the store (events_read.rs); and which such requests are answered without
//! reading the session back.

use serde_json::value::RawValue;

use super::limits::admit_over_link;
use super::sessions::Session;
use super::{ConnId, Device};
use crate::jsonrpc::RpcError;
use crate::wire::events::EventsParams;

impl Device {
    /// Whether a request on `conn` naming `session`, set aside, whose row may be answered at
    /// rest (`methods::MethodSpec::at_rest`: `_lembas/session/events`), is answered without
    /// reading the session back (see [`Device::session_events`]): a page without events from
    /// what is kept of it, a page read from its log alone, or a refusal by the limits of this
    /// moment. Params that are no page request are not: the request waits for the session, as
    /// any other.
    pub(super) fn kept_answers(
        &self,
        conn: ConnId,
        session: &str,
        params: Option<&RawValue>,
    ) -> bool {
        if self.sessions.loads.contains(session) {
            // Being read back already: it runs once that is done.
            return false;
        }
        let Some(summary) = self.sessions.set_aside_summary(session) else {
            return false;
        };
        if self.on_link(conn)
            && admit_over_link(&self.config.remote, session, &summary.cwd).is_err()
        {
            return true;
        }
        params.is_some_and(|p| serde_json::from_str::<EventsParams>(p.get()).is_ok())
    }

    /// `session`, in memory, when `conn` is a link asking after it and no client was ever
    /// given: a terminal's or an editor's session announced to it, whose command sets are all
    /// it was sent of it. Its catch-up reads those alone and leaves the session as it is: the
    /// link does not come to hold it (nor is its mode capped, nor is it marked given, a mark
    /// that lasts); it goes on hearing what it is announced, sets included.
    fn unheld_by(&self, conn: ConnId, session: &str) -> Option<&Session> {
        if !self.on_link(conn) {
            return None;
        }
        self.sessions
            .get(session)
            .filter(|s| !s.durable.given && !s.holders.contains(&conn))
    }

    /// `_lembas/session/events`: the session's events after `since`, oldest first.
    ///
    /// A session in memory: the connection comes to hold it (as with `history`), so it follows
    /// live from here: a turn running while its link was down goes on streaming to it. But a
    /// session never given to a client is only followed by the link, not taken up
    /// ([`Device::unheld_by`]).
    ///
    /// A session set aside is idle (only an idle one leaves memory) and its log changes no more
    /// while it is out: a client that missed none of its events (the usual catch-up on a new
    /// link, on every session it follows) is answered from the numbers kept of it; one that
    /// did miss some, from its log alone, read from the store (events_read.rs). Either way it
    /// is not read back, evicts no other and is not held. The connection then holds nothing of
    /// it, as a link's hold did not outlast the session's setting aside before either (holders
    /// are not stored): if another connection makes it live again, the web hears of it as of
    /// any session (`announce` for a terminal's), and its own prompt or `status` takes it up.
    /// `None`: answered once the log is read.
    pub(super) fn session_events(
        &mut self,
        conn: ConnId,
        id: &crate::jsonrpc::Id,
        p: EventsParams,
    ) -> Result<Option<Box<RawValue>>, RpcError> {
        let max = self.config.sessions.max_events_page;
        let limit = match p.limit {
            None => self.config.sessions.events_page,
            Some(0) => {
                return Err(RpcError::invalid_params(
                    "limit must be at least 1 (or left out for sessions.events_page)",
                ))
            }
            Some(l) if l > max as u64 => {
                return Err(RpcError::over_limit(
                    format!(
                        "limit {l} is over the most this device answers at once, {max} \
                         (sessions.max_events_page)"
                    ),
                    max,
                ))
            }
            Some(l) => l as usize,
        };
        // Room for the answer's own framing within a frame.
        let max_bytes = self.config.frames.max_frame_bytes.saturating_sub(1024);
        let json = match self.sessions.set_aside_summary(&p.session_id) {
            Some(summary) => {
                if self.on_link(conn) {
                    admit_over_link(&self.config.remote, &p.session_id, &summary.cwd)?;
                }
                let Some(page) = summary.events.page(p.since) else {
                    let read = super::events_read::Wanted {
                        since: p.since,
                        limit,
                        max_bytes,
                        at_rest: summary.events,
                        // What a link was sent of a session no client was given: its sets.
                        unheld: self.on_link(conn) && !summary.given,
                    };
                    self.read_events(conn, id, &p.session_id, read)?;
                    return Ok(None);
                };
                page.to_json()
            }
            None => match self.unheld_by(conn, &p.session_id) {
                Some(s) => {
                    admit_over_link(&self.config.remote, &p.session_id, &s.durable.cwd)?;
                    let heard = super::command_set::heard_unheld;
                    s.events.page_of(p.since, limit, max_bytes, heard).to_json()
                }
                None => {
                    let s = self.attach(conn, &p.session_id)?;
                    s.events.page(p.since, limit, max_bytes).to_json()
                }
            },
        };
        Ok(Some(
            RawValue::from_string(json).expect("the log writes JSON"),
        ))
    }
}
