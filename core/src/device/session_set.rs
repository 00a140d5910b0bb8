//! Every session the device has, in one place: those in memory (bounded by
//! `sessions.max_live`), the ids of those set aside in the store, the ones being read back, and
//! the order of last use that picks which one is set aside next (live.rs says when). The set
//! keeps its invariants itself: a session is never both in memory and set aside, and a delete
//! removes it wherever it is.

use std::collections::HashMap;

use super::connection::ConnId;
use super::event_log::AtRest;
use super::ledger::Fixed;
use super::live::{Loads, Recency};
use super::sessions::{Session, Sessions};

/// Where a removed session was.
#[derive(Debug)]
pub(super) enum Removed {
    Live(Box<Session>),
    SetAside,
    Absent,
}

/// What making room for one more session in memory takes ([`SessionSet::room_for_one`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Room {
    /// The sessions to set aside, least recently used first.
    pub aside: Vec<String>,
    /// Whether setting them aside leaves room; else the new session is refused.
    pub made: bool,
}

/// What `session/list` shows of a session set aside (in memory while its session is not: a
/// listing reads no store), and of one in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Summary {
    pub cwd: Box<str>,
    pub title: Option<Box<str>>,
    pub touched: u64,
    /// Its event log's reach, so a client that missed none of its events catches up on it
    /// without a read of the store (event_log.rs).
    pub events: AtRest,
    /// A client on the link was given it: a link that missed some of its events is sent
    /// them all, not only its command sets (events_read.rs).
    pub given: bool,
}

impl Summary {
    pub fn of(s: &Session) -> Summary {
        Summary {
            cwd: s.durable.cwd.as_str().into(),
            title: s.durable.title.as_deref().map(Into::into),
            touched: s.durable.touched,
            events: s.events.at_rest(),
            given: s.durable.given,
        }
    }
}

/// One session as `session/list` sees it.
#[derive(Debug)]
pub(super) struct Listed<'a> {
    pub id: &'a str,
    pub cwd: &'a str,
    pub title: Option<&'a str>,
    pub touched: u64,
}

#[derive(Debug, Default)]
pub(super) struct SessionSet {
    live: Sessions,
    /// The sessions set aside, by id, with what a listing shows of them: in the store only,
    /// read back when named.
    stored: HashMap<Box<str>, Summary, Fixed>,
    recency: Recency,
    /// Sessions being read back, by id, with the requests waiting for them (live.rs).
    pub loads: Loads,
}

impl SessionSet {
    pub fn get(&self, id: &str) -> Option<&Session> {
        self.live.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.live.get_mut(id)
    }

    /// A session in memory, named now: it is the last one an eviction picks.
    pub fn touch(&mut self, id: &str) -> Option<&mut Session> {
        let s = self.live.get_mut(id)?;
        self.recency.mark(s);
        Some(s)
    }

    /// A session in memory, and the order of use to mark it in once the caller knows it was
    /// named (a check may turn the request away first).
    pub fn get_mut_with_recency(&mut self, id: &str) -> Option<(&mut Session, &mut Recency)> {
        Some((self.live.get_mut(id)?, &mut self.recency))
    }

    pub fn values(&self) -> impl Iterator<Item = &Session> {
        self.live.values()
    }

    /// The sessions in memory that `conn` holds (a set-aside session is held by no one).
    pub fn held_by(&self, conn: ConnId) -> impl Iterator<Item = &Session> {
        self.values().filter(move |s| s.holders.contains(&conn))
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Session> {
        self.live.values_mut()
    }

    /// Sessions in memory.
    pub fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Sessions the device has, in memory or set aside.
    pub fn count(&self) -> usize {
        self.live.len() + self.stored.len()
    }

    /// Whether the device has the session, in memory or set aside.
    pub fn has(&self, id: &str) -> bool {
        self.live.contains_key(id) || self.stored.contains_key(id)
    }

    pub fn is_set_aside(&self, id: &str) -> bool {
        self.stored.contains_key(id)
    }

    /// What is kept of a session set aside.
    pub fn set_aside_summary(&self, id: &str) -> Option<&Summary> {
        self.stored.get(id)
    }

    /// Every session the device has, in memory or set aside, as a listing shows it.
    pub fn listed(&self) -> impl Iterator<Item = Listed<'_>> {
        let live = self.live.values().map(|s| Listed {
            id: &s.durable.id,
            cwd: &s.durable.cwd,
            title: s.durable.title.as_deref(),
            touched: s.durable.touched,
        });
        let aside = self.stored.iter().map(|(id, s)| Listed {
            id,
            cwd: &s.cwd,
            title: s.title.as_deref(),
            touched: s.touched,
        });
        live.chain(aside)
    }

    /// Whether any session is set aside or being read back (else no frame can wait for one).
    pub fn any_aside(&self) -> bool {
        !self.stored.is_empty() || !self.loads.is_empty()
    }

    /// Keep `s` in memory, as the most recently used; it is no longer set aside.
    pub fn insert_live(&mut self, mut s: Session) {
        self.stored.remove(s.durable.id.as_str());
        self.recency.mark(&mut s);
        self.live.insert(s.durable.id.clone(), s);
    }

    /// Take a session out of memory.
    pub fn take_live(&mut self, id: &str) -> Option<Session> {
        let s = self.live.remove(id)?;
        self.recency.forget(&s);
        Some(s)
    }

    /// Keep only the id (and summary) of a session that is in the store (read at start).
    /// One in memory stays there.
    pub fn keep_aside(&mut self, s: &Session) {
        if !self.live.contains_key(s.durable.id.as_str()) {
            self.stored
                .insert(s.durable.id.as_str().into(), Summary::of(s));
        }
    }

    /// Set a session in memory aside: it leaves memory, its id and summary are kept.
    pub fn set_aside(&mut self, id: &str) -> bool {
        let Some(s) = self.take_live(id) else {
            return false;
        };
        let summary = Summary::of(&s);
        self.stored.insert(s.durable.id.into_boxed_str(), summary);
        true
    }

    /// The least recently used session in memory that `may_leave` lets go.
    #[cfg(test)]
    pub fn least_recent(&self, may_leave: impl FnMut(&Session) -> bool) -> Option<String> {
        self.leaving(may_leave).next().cloned()
    }

    /// The sessions in memory that `may_leave` lets go, least recently used first.
    fn leaving<'a>(
        &'a self,
        mut may_leave: impl FnMut(&Session) -> bool + 'a,
    ) -> impl Iterator<Item = &'a String> + 'a {
        self.recency
            .oldest_first()
            .filter(move |id| self.live.get(*id).is_some_and(&mut may_leave))
    }

    /// Room for one more session in memory under `max` (`sessions.max_live`): the least
    /// recently used sessions that `may_leave` lets go, as many as it takes to be under it
    /// (none without a store, `has_store` false: nothing is ever set aside), and whether that
    /// is enough. Nothing is set aside here: the device seals each one's log first.
    pub fn room_for_one(
        &self,
        max: usize,
        has_store: bool,
        may_leave: impl FnMut(&Session) -> bool,
    ) -> Room {
        let over = (self.live.len() + 1).saturating_sub(max);
        let aside: Vec<String> = if has_store && over > 0 {
            self.leaving(may_leave).take(over).cloned().collect()
        } else {
            Vec::new()
        };
        Room {
            made: aside.len() == over,
            aside,
        }
    }

    /// A connection went away: it hears no session's updates, and waits for no turn.
    pub fn forget_connection(&mut self, conn: ConnId) {
        for s in self.live.values_mut() {
            s.holders.remove(&conn);
            s.turns.forget_connection(conn);
        }
    }

    /// Remove a session wherever it is (deleted, or gone from the store).
    pub fn remove(&mut self, id: &str) -> Removed {
        if let Some(s) = self.take_live(id) {
            return Removed::Live(Box::new(s));
        }
        if self.stored.remove(id).is_some() {
            Removed::SetAside
        } else {
            Removed::Absent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::live::tests::session;

    fn set(ids: &[&str]) -> SessionSet {
        let mut set = SessionSet::default();
        for id in ids {
            set.insert_live(session(id));
        }
        set
    }

    #[test]
    fn a_session_is_never_both_in_memory_and_set_aside() {
        let mut set = set(&["a", "b"]);
        assert!(set.set_aside("a"));
        assert!(set.is_set_aside("a") && set.get("a").is_none());
        assert_eq!((set.live_len(), set.count()), (1, 2));
        // Read back: in memory, and no longer set aside.
        set.insert_live(session("a"));
        assert!(!set.is_set_aside("a") && set.get("a").is_some());
        assert_eq!(set.count(), 2);
        // An id kept aside for a session in memory leaves it in memory, counted once.
        set.keep_aside(&session("b"));
        assert!(!set.is_set_aside("b"));
        assert_eq!(set.count(), 2);
        assert!(!set.set_aside("nope"));
    }

    #[test]
    fn the_least_recently_used_idle_one_is_set_aside() {
        let mut set = set(&["a", "b", "c"]);
        set.touch("a");
        assert_eq!(set.least_recent(|_| true).as_deref(), Some("b"));
        // `b` may not leave (busy, say): the next oldest does.
        assert_eq!(
            set.least_recent(|s| s.durable.id != "b").as_deref(),
            Some("c")
        );
        set.set_aside("b");
        assert_eq!(set.least_recent(|_| true).as_deref(), Some("c"));
        assert_eq!(set.least_recent(|_| false), None);
    }

    #[test]
    fn a_delete_removes_it_wherever_it_is() {
        let mut set = set(&["a", "b"]);
        set.set_aside("b");
        assert!(matches!(set.remove("a"), Removed::Live(s) if s.durable.id == "a"));
        assert!(matches!(set.remove("b"), Removed::SetAside));
        assert!(matches!(set.remove("a"), Removed::Absent));
        assert!(!set.has("a") && !set.has("b") && !set.any_aside());
        assert_eq!(set.count(), 0);
        assert_eq!(
            set.least_recent(|_| true),
            None,
            "no longer in the order of use"
        );
    }

    #[test]
    fn a_connection_gone_is_no_holder_of_any_session() {
        let mut set = set(&["a", "b"]);
        for id in ["a", "b"] {
            let s = set.get_mut(id).unwrap();
            s.holders.insert(ConnId(1));
            s.holders.insert(ConnId(2));
        }
        set.forget_connection(ConnId(1));
        for s in set.values() {
            assert_eq!(s.holders.iter().copied().collect::<Vec<_>>(), [ConnId(2)]);
        }
    }

    #[test]
    fn room_for_one_more_sets_aside_the_least_recently_used_that_may_leave() {
        let mut set = set(&["a", "b", "c"]);
        set.touch("a");
        let room = |aside: &[&str], made| Room {
            aside: aside.iter().map(|s| s.to_string()).collect(),
            made,
        };
        assert_eq!(
            set.room_for_one(4, true, |_| true),
            room(&[], true),
            "under it"
        );
        assert_eq!(set.room_for_one(3, true, |_| true), room(&["b"], true));
        assert_eq!(
            set.room_for_one(3, true, |s| s.durable.id != "b"),
            room(&["c"], true),
            "b may not leave: the next oldest does"
        );
        // A lowered bound: as many as it takes, least recently used first.
        assert_eq!(set.room_for_one(2, true, |_| true), room(&["b", "c"], true));
        assert_eq!(
            set.room_for_one(1, true, |s| s.durable.id != "a"),
            room(&["b", "c"], false),
            "those that may leave go, and it is still not enough"
        );
        assert_eq!(set.room_for_one(3, true, |_| false), room(&[], false));
        assert_eq!(
            set.room_for_one(3, false, |_| true),
            room(&[], false),
            "without a store none is set aside"
        );
        assert_eq!(set.live_len(), 3, "nothing is set aside here");
    }
}
