//! Following sessions by seq (our extension, capability `events`): the client remembers, per
//! session it heard of, the last `_meta.lembas.seq` it handed its UI *per stream*: one for
//! `session/update`s, one for the rest (`_lembas/event`s, settled notices). On a new link it
//! asks `_lembas/session/events` for what came after the lower of the two, page by page, and
//! hands the missed events out in order, as live ones. A frame whose seq is at or below its own
//! stream's last is dropped, live or fetched, so the UI neither misses nor repeats one. Where
//! the log no longer reaches back (`truncated`), the pages run out, or the device cannot say, a
//! [`ClientEvent::Gap`] tells the UI to import `history` instead.
//!
//! Why per stream: a link client hears each text chunk twice, an update and an event of
//! consecutive seqs, and a connection behind its pause mark merges a session's run of chunks
//! per stream (device/coalesce.rs): `u1 e2 u3 e4` goes out as `u(1+3, seq 3) e(2+4, seq 4)`.
//! One last seq would say 3 after the first frame, and a link cut there would resume past the
//! unheard `e2`. Per stream, each stream's frames come in seq order and a merged frame holds
//! every chunk of its stream since that stream's frame before, so "every seq of the stream up
//! to its last was handed out" holds for each, and asking from the lower misses none. A frame
//! that is not a text chunk is never merged and no chunk passes it (the device's rule), so
//! every seq below it has come: it lifts both streams to its seq, and a stream quiet for a
//! while (the events of a turn's end after its last update) does not hold `since` back.
//!
//! Live frames of a session that is catching up are not handed out: every one of them is in
//! the pages too (it was sent, and logged, before the answer that ends the catch-up), and a
//! merged one may hold chunks a page already handed out. The catch-up ends on a page that
//! reaches the newest seq heard live meanwhile, or an empty one; live frames after that answer
//! hold only later chunks (the answer, not a chunk, ends every merge). What the client says
//! about a session meanwhile (a prompt's answer, a reattach) is held and said after.
//!
//! Requests (cards) are not in this: a card still open is put again on the new link, with the
//! seq of its first offer, and must be answerable there; one fetched from the log is not.

use serde_json::Value;

use super::turns::Purpose;
use super::{Client, ClientEvent};
use crate::device::{MERGED_EVENTS, MERGED_UPDATES};
use crate::jsonrpc::RpcError;
use crate::methods::{self, Kind};
use crate::wire::events::{EventsPage, EventsParams, PagedEvent};

/// A session followed by seq.
#[derive(Debug, Default)]
struct Followed {
    session: String,
    /// The last seq handed out of each stream: `session/update`s, and the rest.
    last: [u64; 2],
    /// When it was last heard of (a count of events), so the oldest is forgotten first.
    heard: u64,
    catch_up: Option<CatchUp>,
}

impl Followed {
    /// Where to fetch from: every seq up to it was handed out, whatever its stream.
    fn since(&self) -> u64 {
        self.last[0].min(self.last[1])
    }

    /// Seq `seq` of `stream` was handed out; `all`: every seq below it has come too (a frame
    /// that is not a chunk, or one fetched in order).
    fn handed(&mut self, stream: usize, seq: u64, all: bool) {
        self.last[stream] = seq;
        if all {
            self.lift(seq);
        }
    }

    fn lift(&mut self, seq: u64) {
        for last in &mut self.last {
            *last = (*last).max(seq);
        }
    }
}

/// A session catching up on a new link.
#[derive(Debug, Default)]
struct CatchUp {
    pages: u32,
    /// The newest seq heard live meanwhile (0: none); the pages reach it before the end.
    newest: u64,
    /// What the client says about the session meanwhile, in order.
    held: Vec<ClientEvent>,
}

/// Few (`followed_sessions`), so a list: a map's code would cost the web client's module more.
#[derive(Debug, Default)]
pub(super) struct Resume {
    sessions: Vec<Followed>,
    heard: u64,
    /// Held events over all sessions.
    held: usize,
}

impl Resume {
    fn get(&mut self, session: &str) -> Option<&mut Followed> {
        self.sessions.iter_mut().find(|f| f.session == session)
    }
}

/// The session and seq of an event that carries one.
pub(super) fn sequenced(params: &Value) -> Option<(&str, u64)> {
    let seq = params["_meta"]["lembas"]["seq"].as_u64()?;
    Some((params["sessionId"].as_str()?, seq))
}

/// A notification's stream: 0 for `session/update`, 1 for the rest.
fn stream(method: &str) -> usize {
    usize::from(method != "session/update")
}

/// Whether the device may merge it with its stream's neighbours: a kind device/coalesce.rs
/// merges (one it would not, an image chunk say, only lifts less).
fn chunk(method: &str, params: &Value) -> bool {
    let (kind, merged) = match method {
        "session/update" => (&params["update"]["sessionUpdate"], &MERGED_UPDATES),
        _ => (&params["event"]["type"], &MERGED_EVENTS),
    };
    kind.as_str().is_some_and(|k| merged.contains(&k))
}

impl Client {
    /// A live event with a seq: handed out, left to the pages while its session catches up,
    /// or dropped as seen.
    pub(super) fn on_sequenced(
        &mut self,
        session: String,
        seq: u64,
        method: String,
        params: Value,
    ) {
        let new = self.follow(&session);
        let Some(f) = self.resume.get(&session) else {
            return;
        };
        if new {
            // Heard of first now, mid-way: followed from this seq on in both streams (a merged
            // frame of either may reach a little further back).
            f.last = [seq.saturating_sub(1); 2];
        }
        if let Some(c) = &mut f.catch_up {
            c.newest = c.newest.max(seq);
            return;
        }
        let stream = stream(&method);
        if seq <= f.last[stream] {
            return;
        }
        f.handed(stream, seq, !chunk(&method, &params));
        self.hand_out(method, params);
    }

    /// Remember `session` as heard of now, forgetting the one heard of longest ago past the
    /// bound; whether it was not followed before. A session the client prompts is followed
    /// from then, before any of its events is heard: a link cut before the first of them
    /// still catches up on them (from seq 0).
    pub(super) fn follow(&mut self, session: &str) -> bool {
        let r = &mut self.resume;
        r.heard += 1;
        let heard = r.heard;
        if let Some(f) = r.get(session) {
            f.heard = heard;
            return false;
        }
        if r.sessions.len() >= self.config.followed_sessions {
            let oldest = r
                .sessions
                .iter()
                .min_by_key(|f| f.heard)
                .map(|f| f.session.clone());
            if let Some(oldest) = oldest {
                self.unfollow(&oldest);
            }
        }
        self.resume.sessions.push(Followed {
            session: session.to_string(),
            heard,
            ..Followed::default()
        });
        true
    }

    /// Tell the UI `event` about `session`: after the missed events, if it is catching up.
    pub(super) fn emit_about(&mut self, session: &str, event: ClientEvent) {
        let r = &mut self.resume;
        let followed = r.sessions.iter_mut().find(|f| f.session == session);
        match followed.and_then(|f| f.catch_up.as_mut()) {
            Some(c) if r.held < self.config.held_events => {
                r.held += 1;
                c.held.push(event);
            }
            // Out of order rather than lost.
            _ => self.emit(event),
        }
    }

    /// A new link is ready: every followed session asks for what it missed. A session still
    /// catching up when its link dropped keeps what it held: it comes after what is fetched.
    pub(super) fn catch_up_all(&mut self) {
        for i in 0..self.resume.sessions.len() {
            let f = &mut self.resume.sessions[i];
            f.catch_up.get_or_insert_with(CatchUp::default).pages = 0;
            let session = f.session.clone();
            self.ask_events(&session);
        }
    }

    fn ask_events(&mut self, session: &str) {
        let Some(f) = self.resume.get(session) else {
            return;
        };
        let since = f.since();
        if let Some(c) = &mut f.catch_up {
            c.pages += 1;
        }
        let params = EventsParams {
            session_id: session.to_owned(),
            since,
            limit: None,
        };
        match self.call("_lembas/session/events", &params, self.clock.now()) {
            Ok(id) => {
                self.purposes
                    .insert(id, Purpose::Events(session.to_string()));
            }
            // A device without `events`: what was missed cannot be had.
            Err(_) => self.finish_catch_up(session, true),
        }
    }

    /// A page of missed events: hand them out, then ask for the next or follow live.
    pub(super) fn on_events_page(&mut self, session: String, outcome: Result<Value, RpcError>) {
        let Some(since) = self.resume.get(&session).map(|f| f.since()) else {
            return;
        };
        // A page that is not one (its device is broken) is as good as none: a gap.
        let page = outcome
            .ok()
            .and_then(|v| serde_json::from_value::<EventsPage>(v).ok());
        let Some(EventsPage {
            events, truncated, ..
        }) = page
        else {
            return self.finish_catch_up(&session, true);
        };
        if truncated {
            self.emit(ClientEvent::Gap {
                session_id: session.clone(),
                since,
            });
        }
        let fetched = !events.is_empty();
        for PagedEvent {
            method,
            params,
            seq,
        } in events
        {
            let notice = methods::find(&method).is_some_and(|m| m.kind == Kind::Notification);
            let Some(f) = self.resume.get(&session) else {
                return;
            };
            // The log is in seq order and whole from `since`: every seq up to this one is in.
            let new = seq > f.last[stream(&method)];
            f.lift(seq);
            if notice && new {
                self.hand_out(method, params);
            }
        }
        let Some(f) = self.resume.get(&session) else {
            return;
        };
        let Some(c) = &f.catch_up else { return };
        let reached_live = c.newest > 0 && c.newest <= f.since();
        if !fetched || reached_live {
            self.finish_catch_up(&session, false);
        } else if c.pages >= self.config.catch_up_pages {
            self.finish_catch_up(&session, true);
        } else {
            self.ask_events(&session);
        }
    }

    /// Stop catching up: a gap first if what was missed could not all be had (the live frames
    /// heard meanwhile are lost with it: the UI imports `history`), then what was held.
    fn finish_catch_up(&mut self, session: &str, gap: bool) {
        let Some(f) = self.resume.get(session) else {
            return;
        };
        let Some(c) = f.catch_up.take() else { return };
        if gap {
            let since = f.since();
            f.lift(c.newest);
            self.emit(ClientEvent::Gap {
                session_id: session.to_string(),
                since,
            });
        }
        self.resume.held -= c.held.len();
        for event in c.held {
            self.emit(event);
        }
    }

    /// A session deleted is followed no more.
    pub(super) fn unfollow(&mut self, session: &str) {
        self.finish_catch_up(session, false);
        self.resume.sessions.retain(|f| f.session != session);
    }
}
