//! Sessions in memory are bounded (`sessions.max_live`). An idle session — no turn running or
//! waiting, no prompt waiting for an answer, held by no editor or terminal (the link attaches
//! again by naming it) — can be set aside: it leaves memory, only its id is kept (in the
//! `SessionSet`, session_set.rs: a few dozen bytes), and its record, ledger and history stay in the store. A frame that names it
//! waits while the shell reads it back (`Effect::LoadSession`, answered with
//! [`Device::handle_session_loaded`]), then runs through the same handlers as if the session had
//! never left (so a duplicate turn id is answered from its ledger, and `attach`'s checks apply).
//! Past the bound the least recently used idle session is set aside; with none, `session/new`
//! is refused. Without a store (`has_store: false`) nothing is set aside.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::connection::{Connection, Connections, Phase};
use super::restore::{Grouped, StoredSession, Unreadable};
use super::session_set::SessionSet;
use super::sessions::Session;
use super::{ConnId, Device, Effect};
use crate::jsonrpc::{self, Message, RpcError};
use crate::store::{self, Entry};
use crate::time::Time;

/// Frames waiting for a session to be read back, each with its connection, in arrival order.
type Parked = Vec<(ConnId, Vec<u8>)>;

/// A session being read back, and the frames that named it meanwhile.
#[derive(Debug)]
struct Loading {
    request: u64,
    parked: Parked,
}

/// The sessions being read back from the store (`Effect::LoadSession`), by id, each with the
/// frames waiting for it: one read a session however many frames name it meanwhile.
#[derive(Debug, Default)]
pub(super) struct Loads {
    by_session: BTreeMap<String, Loading>,
    next_request: u64,
}

impl Loads {
    pub(super) fn is_empty(&self) -> bool {
        self.by_session.is_empty()
    }

    pub(super) fn contains(&self, session: &str) -> bool {
        self.by_session.contains_key(session)
    }

    /// `frame` from `conn` waits for `session` to be read back: the read's request number, and
    /// whether it is a new read (to be asked of the shell).
    fn park(&mut self, session: &str, conn: ConnId, frame: &[u8]) -> (u64, bool) {
        let new = !self.by_session.contains_key(session);
        let loading = self
            .by_session
            .entry(session.to_string())
            .or_insert_with(|| {
                let request = self.next_request;
                self.next_request += 1;
                Loading {
                    request,
                    parked: Vec::new(),
                }
            });
        loading.parked.push((conn, frame.to_vec()));
        (loading.request, new)
    }

    /// The read `request` is answered: its session, and the frames that waited for it in
    /// arrival order. `None` for a request not (or no longer) waited for.
    fn take(&mut self, request: u64) -> Option<(String, Parked)> {
        let session = self
            .by_session
            .iter()
            .find(|(_, l)| l.request == request)?
            .0
            .clone();
        let loading = self.by_session.remove(&session)?;
        Some((session, loading.parked))
    }
}

/// The one member every session method's params share.
#[derive(Deserialize)]
struct Names<'a> {
    #[serde(rename = "sessionId", borrow, default)]
    session_id: Option<Cow<'a, str>>,
}

/// The sessions in memory by last use (oldest first), for setting one aside: each session
/// keeps its place (`Session::used`), this keeps the order.
#[derive(Debug, Default)]
pub(super) struct Recency {
    by_use: BTreeMap<u64, String>,
    last: u64,
}

impl Recency {
    /// `s` was named, or came into memory: it is the last one an eviction picks.
    pub fn mark(&mut self, s: &mut Session) {
        self.by_use.remove(&s.used);
        self.last += 1;
        s.used = self.last;
        self.by_use.insert(s.used, s.durable.id.clone());
    }

    /// `s` left memory.
    pub(super) fn forget(&mut self, s: &Session) {
        self.by_use.remove(&s.used);
    }

    /// Session ids, least recently used first.
    pub(super) fn oldest_first(&self) -> impl Iterator<Item = &String> {
        self.by_use.values()
    }
}

/// The session a request's params name (`sessionId`), if they name one.
fn named_session(params: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let names: Names = serde_json::from_str(params?.get()).ok()?;
    names.session_id
}

/// The session a request from `conn` (`None`: gone) with `params` waits for: one it names
/// that is set aside in `sessions` or being read back, once the connection is past
/// `initialize` (before that, the request is answered as it is).
fn awaited<'a>(
    sessions: &SessionSet,
    conn: Option<&Connection>,
    params: Option<&'a RawValue>,
) -> Option<Cow<'a, str>> {
    if !sessions.any_aside() || conn.is_none_or(|c| c.phase != Phase::Ready) {
        return None;
    }
    let session = named_session(params)?;
    (sessions.loads.contains(&session) || sessions.is_set_aside(&session)).then_some(session)
}

/// The answer to the requests that waited for `session` when the shell could not read it
/// back (`why`): an internal error, the session still set aside.
fn load_failed(session: &str, why: &str) -> RpcError {
    RpcError::new(
        jsonrpc::code::INTERNAL_ERROR,
        format!("session `{session}` could not be read back from the store: {why}"),
    )
}

/// The refusal of a new session in memory: `live` are, the limit is `max`, and none can be set
/// aside (`has_store`: each works or is held; without a store, none ever is).
fn no_room(live: usize, max: usize, has_store: bool) -> RpcError {
    let why = if has_store {
        "every one of them has a turn running or waiting, or is held by an editor or a terminal"
    } else {
        "and without a store none can be set aside"
    };
    RpcError::over_limit(
        format!(
            "this device has {live} sessions in memory, the limit of {max} (sessions.max_live), \
             {why}"
        ),
        max,
    )
}

impl Session {
    /// Whether it may leave memory now: nothing of it lives only here (no turn running or
    /// waiting, no prompt waiting for an answer, no holder but the link, which attaches again
    /// by naming it). `conns`: the open connections.
    fn evictable(&self, conns: &Connections) -> bool {
        self.turns.idle()
            && !self.turns.has_waiters()
            && !conns.any_of(&self.holders, Connection::is_local)
    }
}

impl Device {
    /// Room for one more session in memory: at the bound, the least recently used idle one is
    /// set aside. The refusal names the limit and its value.
    pub(super) fn make_room(&mut self) -> Result<(), RpcError> {
        let (max, has_store) = (self.config.sessions.max_live, self.config.has_store);
        let room = self
            .sessions
            .room_for_one(max, has_store, |s| s.evictable(&self.conns));
        for id in &room.aside {
            // The rest of its log and its exact next seq go to the store first.
            self.seal_event_log(id);
            self.sessions.set_aside(id);
        }
        if room.made {
            Ok(())
        } else {
            Err(no_room(self.sessions.live_len(), max, has_store))
        }
    }

    /// A request that names a session set aside (or being read back) waits for it: the read is
    /// asked for, and the request runs once it is done. Like a request waiting for its
    /// directory check (limits.rs), every frame after it on its connection waits behind it in
    /// order (bounded by `sessions.max_held_bytes`). Returns whether it was parked.
    pub(super) fn park(
        &mut self,
        conn: ConnId,
        frame: &[u8],
        method: &str,
        params: Option<&RawValue>,
    ) -> bool {
        let Some(session) = awaited(&self.sessions, self.conns.get(&conn), params) else {
            return false;
        };
        // The table says which requests may be answered from what a set-aside session keeps;
        // whether that answers this one is the kept summary's to say.
        let at_rest = crate::methods::find(method).is_some_and(|m| m.at_rest);
        if at_rest && self.kept_answers(conn, &session, params) {
            return false;
        }
        let (request, new) = self.sessions.loads.park(&session, conn, frame);
        if new {
            // Queued behind every persist issued so far: the shell reads what was written.
            self.out.effect(Effect::LoadSession {
                request,
                session_id: session.to_string(),
            });
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.gate = Some(request);
        }
        true
    }

    /// The shell read back the session `Effect::LoadSession { request }` asked for: `entries`
    /// are its record, turns and history (others are ignored; none: the store does not have
    /// it). It is back in memory, and the requests that waited for it run now, then the frames
    /// held behind them. Entries that could not be read are returned (and left out).
    pub fn handle_session_loaded(
        &mut self,
        request: u64,
        entries: Vec<Entry>,
        now: Time,
    ) -> Vec<Unreadable> {
        let bad = self.session_loaded(request, entries, now);
        self.after_input();
        bad
    }

    fn session_loaded(&mut self, request: u64, entries: Vec<Entry>, now: Time) -> Vec<Unreadable> {
        let now = self.clock.advance(now);
        let Some((session, parked)) = self.sessions.loads.take(request) else {
            return Vec::new();
        };
        let (stored, bad) = read_back(&session, entries);
        let mut refused = None;
        // Deleted on the device meanwhile: it stays gone.
        if self.sessions.is_set_aside(&session) {
            let mut records = Vec::new();
            let rebuilt = stored.and_then(|s| self.rebuild(&session, s, now, &mut records));
            if !records.is_empty() {
                self.out.persist(records);
            }
            match rebuilt {
                Some(s) => match self.make_room() {
                    Ok(()) => {
                        self.sessions.insert_live(s);
                        self.resume_undo(&session);
                    }
                    Err(e) => refused = Some(e),
                },
                // The store does not have it (any more): it is gone.
                None => {
                    self.sessions.remove(&session);
                }
            }
        }
        self.unpark(parked, refused.as_ref());
        bad
    }

    /// The shell could not read back the session `Effect::LoadSession { request }` asked for
    /// (its store failed, with `why`). The session stays set aside, not lost: every request
    /// that waited for it is answered -32603 with the reason, the frames held behind them go
    /// on, and the next request naming it asks for it again.
    pub fn handle_session_load_failed(&mut self, request: u64, why: &str, now: Time) {
        self.session_load_failed(request, why, now);
        self.after_input();
    }

    fn session_load_failed(&mut self, request: u64, why: &str, now: Time) {
        self.clock.advance(now);
        let Some((session, parked)) = self.sessions.loads.take(request) else {
            return;
        };
        self.unpark(parked, Some(&load_failed(&session, why)));
    }

    /// The requests that waited for a session's read run now, in arrival order, or are
    /// answered `refused`; the frames each connection held behind its request go on after it.
    /// A connection gone meanwhile is skipped.
    fn unpark(&mut self, parked: Parked, refused: Option<&RpcError>) {
        for (conn, frame) in parked {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            c.gate = None;
            match refused {
                Some(e) => self.refuse_parked(conn, &frame, e),
                None => self.run_frame(conn, &frame, None),
            }
            self.release_held(conn);
        }
    }

    /// Answer a parked request with `e`.
    fn refuse_parked(&mut self, conn: ConnId, frame: &[u8], e: &RpcError) {
        if let Ok(Message::Request(req)) = jsonrpc::decode(frame, &self.config.frames) {
            let id = req.id.clone();
            self.reply_error(conn, &id, e);
        }
    }

    /// Whether the device has the session, in memory or set aside in its store.
    pub(super) fn has_session(&self, id: &str) -> bool {
        self.sessions.has(id)
    }
}

/// What the shell read back for `session` (`Effect::LoadSession`): its stored parts, when the
/// store has any, and those of its entries that could not be read. Another session's entries
/// (one whose id starts with this one's) are not its own, read or not.
fn read_back(session: &str, entries: Vec<Entry>) -> (Option<StoredSession>, Vec<Unreadable>) {
    let own = entries
        .into_iter()
        .filter(|e| store::belongs_to(e, session));
    let mut grouped = Grouped::read(own.collect());
    (grouped.sessions.remove(session), grouped.bad)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::device::ConnKind;
    use crate::store::SessionRecord;

    pub(in crate::device) fn session(id: &str) -> Session {
        Session::new(SessionRecord::testing(id), 10)
    }

    #[test]
    fn read_back_a_session_is_its_own_entries_and_what_of_them_could_not_be_read() {
        let entry = |table, key: &str, value: &str| Entry {
            table,
            key: key.into(),
            value: value.into(),
        };
        let record = |id: &str| serde_json::to_string(&SessionRecord::testing(id)).unwrap();
        let entries = vec![
            entry(store::Table::Sessions, "a", &record("a")),
            entry(store::Table::Turns, "a/t1", "not json"),
            entry(store::Table::Sessions, "ab", &record("ab")),
            entry(store::Table::Turns, "ab/t1", "not json"),
        ];
        let (stored, bad) = read_back("a", entries.clone());
        let stored = stored.expect("its record");
        assert_eq!(stored.record.map(|r| r.id).as_deref(), Some("a"));
        let keys: Vec<_> = bad.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(keys, ["a/t1"], "only its own");
        let (stored, bad) = read_back("c", entries);
        assert!(
            stored.is_none() && bad.is_empty(),
            "the store has none of it"
        );
    }

    #[test]
    fn the_least_recently_named_session_comes_first() {
        let mut recency = Recency::default();
        let (mut a, mut b, mut c) = (session("a"), session("b"), session("c"));
        for s in [&mut a, &mut b, &mut c] {
            recency.mark(s);
        }
        recency.mark(&mut a);
        let order = |r: &Recency| r.oldest_first().cloned().collect::<Vec<_>>();
        assert_eq!(order(&recency), ["b", "c", "a"]);
        recency.forget(&b);
        assert_eq!(order(&recency), ["c", "a"]);
        // Back in memory, it is the most recent.
        recency.mark(&mut b);
        assert_eq!(order(&recency), ["c", "a", "b"]);
    }

    #[test]
    fn only_an_idle_session_held_by_no_editor_or_terminal_may_leave_memory() {
        let mut conns = Connections::default();
        conns.insert(ConnId(1), Connection::new(ConnKind::Link));
        conns.insert(ConnId(2), Connection::new(ConnKind::Stdio));
        let mut s = session("a");
        assert!(s.evictable(&conns));
        s.holders.insert(ConnId(1));
        assert!(s.evictable(&conns), "the link attaches again by naming it");
        s.holders.insert(ConnId(3));
        assert!(s.evictable(&conns), "a holder gone holds nothing");
        s.holders.insert(ConnId(2));
        assert!(!s.evictable(&conns), "an editor holds it");
        s.holders.remove(&ConnId(2));
        let start = s.turn_start("t".into(), "hi".into(), Vec::new());
        let waiter = (ConnId(1), crate::jsonrpc::Id::number(1));
        s.turns.admit(start, Default::default(), waiter);
        assert!(!s.evictable(&conns), "a turn waits to run");
    }

    #[test]
    fn no_room_names_the_limit_its_value_and_why_none_was_set_aside() {
        let e = no_room(4, 4, true);
        assert_eq!(e.code, crate::jsonrpc::code::INVALID_PARAMS);
        assert_eq!(
            e.message,
            "this device has 4 sessions in memory, the limit of 4 (sessions.max_live), every \
             one of them has a turn running or waiting, or is held by an editor or a terminal"
        );
        assert_eq!(e.data, Some(serde_json::json!({ "limit": 4 })));
        assert!(no_room(2, 2, false)
            .message
            .ends_with("(sessions.max_live), and without a store none can be set aside"));
    }

    #[test]
    fn a_request_names_its_session_by_session_id() {
        let raw = |text: &str| RawValue::from_string(text.to_string()).unwrap();
        let named = raw(r#"{"sessionId":"ses_a","other":1}"#);
        assert_eq!(named_session(Some(&named)).as_deref(), Some("ses_a"));
        assert_eq!(named_session(Some(&raw(r#"{"cwd":"/w"}"#))), None);
        assert_eq!(named_session(Some(&raw("[1]"))), None);
        assert_eq!(named_session(None), None);
    }

    #[test]
    fn a_request_waits_only_for_a_session_it_names_that_is_set_aside_or_being_read() {
        use crate::wire::handshake::ClientSaid;
        let raw = |text: &str| RawValue::from_string(text.to_string()).unwrap();
        let names = |id: &str| raw(&format!(r#"{{"sessionId":"{id}"}}"#));
        let (a, b, c) = (names("ses_a"), names("ses_b"), names("ses_c"));
        let mut ready = Connection::new(ConnKind::Link);
        ready.initialized(ClientSaid::default());
        let fresh = Connection::new(ConnKind::Link);
        let mut sessions = SessionSet::default();
        sessions.insert_live(session("ses_a"));
        sessions.insert_live(session("ses_b"));
        let awaits =
            |s: &SessionSet, conn, params| awaited(s, conn, Some(params)).map(|n| n.into_owned());
        assert_eq!(awaits(&sessions, Some(&ready), &a), None, "none set aside");
        sessions.set_aside("ses_a");
        assert_eq!(
            awaits(&sessions, Some(&ready), &a).as_deref(),
            Some("ses_a")
        );
        assert_eq!(awaits(&sessions, Some(&ready), &b), None, "in memory");
        assert_eq!(awaits(&sessions, Some(&ready), &c), None, "unknown");
        assert_eq!(
            awaits(&sessions, Some(&fresh), &a),
            None,
            "before initialize"
        );
        assert_eq!(awaits(&sessions, None, &a), None, "gone");
        assert_eq!(awaited(&sessions, Some(&ready), None), None, "names none");
        // Read back into memory, and named meanwhile: it still waits.
        sessions.loads.park("ses_b", ConnId(1), b"f");
        assert_eq!(
            awaits(&sessions, Some(&ready), &b).as_deref(),
            Some("ses_b")
        );
        let e = load_failed("ses_a", "disk gone");
        assert_eq!(e.code, crate::jsonrpc::code::INTERNAL_ERROR);
        assert_eq!(
            e.message,
            "session `ses_a` could not be read back from the store: disk gone"
        );
    }

    #[test]
    fn one_read_a_session_however_many_frames_wait_for_it_in_order() {
        let mut loads = Loads::default();
        let (a, new) = loads.park("ses_a", ConnId(1), b"first");
        assert!(new);
        assert_eq!(loads.park("ses_a", ConnId(2), b"second"), (a, false));
        let (b, new) = loads.park("ses_b", ConnId(1), b"other");
        assert!(new && b != a);
        assert_eq!(
            loads.take(a),
            Some((
                "ses_a".to_string(),
                vec![
                    (ConnId(1), b"first".to_vec()),
                    (ConnId(2), b"second".to_vec())
                ]
            ))
        );
        assert!(!loads.contains("ses_a") && loads.contains("ses_b"));
        // Answered once: a second answer to the same read finds nothing.
        assert_eq!(loads.take(a), None);
        assert!(loads.take(b).is_some());
        assert!(loads.is_empty());
        // A session named again after its read is read again, under a new request.
        let (again, new) = loads.park("ses_a", ConnId(1), b"later");
        assert!(new && again != a && again != b);
    }
}
