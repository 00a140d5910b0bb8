//! One connection to the device (the instance link, an editor on stdio, a local process on the
//! service's hub socket): its handshake
//! phase, what its client said about itself, and the requests the device sent it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::jsonrpc::Id;
use crate::wire::handshake::ClientSaid;

/// Identifies a connection; made by the device, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ConnId(pub u64);

/// Serde: `"link"`, `"stdio"`, `"terminal"`, `"hub"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ConnKind {
    /// The WebSocket the device dialled to its instance.
    Link,
    /// An editor on `lembas serve --stdio`: plain ACP, no limits, no `_lembas` notifications.
    Stdio,
    /// A terminal (the TUI) on this device: a second place a card is shown and answered.
    Terminal,
    /// A local process on the running service's hub socket (an editor relayed by
    /// `lembas serve --stdio`, `lembas sessions`): plain ACP as on stdio, on the service's
    /// store, so its sessions are the ones the link's client sees.
    Hub,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Only `initialize` is accepted.
    AwaitingInitialize,
    Ready,
}

/// A request the device sent on this connection, waiting for its answer. Which card it put,
/// if any, the card knows (`OpenCard::asked`, cards.rs).
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    pub method: &'static str,
}

/// The ids of the requests the device sends, `"<epoch>-<n>"`: unique across connections (`n`
/// counts every request of this start) and across restarts on the same store (the epoch is
/// stored before any frame of this start leaves), so an answer that arrives late, on another
/// link, to a request of an earlier one is never taken for the answer to a new one.
#[derive(Debug, Default)]
pub(crate) struct RequestIds {
    /// This start's number on its store (0 for a device made with `Device::new`, which has
    /// none; `Device::restore` takes the stored one plus one and stores it).
    pub epoch: u64,
    /// Requests sent since this start.
    sent: u64,
}

impl RequestIds {
    pub fn next(&mut self) -> Id {
        self.sent += 1;
        Id::string(&format!("{}-{}", self.epoch, self.sent))
    }
}

/// The connections as a concern reaches them: each one's state (what it may be sent, the
/// requests it owes an answer), the ids of the requests the device sends, and the queue that
/// sends them. Built from `Device`'s fields one by one, so a concern can use it while the
/// device lends it a session too.
pub(crate) struct Reach<'a> {
    pub conns: &'a mut Connections,
    pub ids: &'a mut RequestIds,
    pub out: &'a mut super::outbox::Outbox,
}

#[derive(Debug)]
pub(crate) struct Connection {
    pub kind: ConnKind,
    pub phase: Phase,
    pub said: ClientSaid,
    /// Set when the client answered `_lembas/question` or `_lembas/plan` with -32601: it is
    /// treated as protocol 1 for the rest of the connection.
    pub downgraded: bool,
    pub pending: BTreeMap<Id, Pending>,
    /// A session request waiting for its directory check (the `ResolvePath` request number,
    /// limits.rs) or for its session to be read back from the store (the `LoadSession` one,
    /// live.rs): every frame after it waits in `held`, so requests keep their order.
    pub gate: Option<u64>,
    pub held: VecDeque<Vec<u8>>,
    pub held_bytes: usize,
    /// A link just answered `initialize`: the sessions editors share are announced to it at
    /// the end of the input (shared.rs), after the answer.
    pub announce_due: bool,
}

/// The open connections, by id. Ids count up and are never reused, so a frame or an answer
/// for a connection that closed finds nothing rather than its successor.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    open: BTreeMap<ConnId, Connection>,
    next: u64,
}

impl Connections {
    /// The id [`Connections::open`] gives next.
    pub fn next_id(&self) -> ConnId {
        ConnId(self.next)
    }

    pub fn open(&mut self, kind: ConnKind) -> ConnId {
        let conn = self.next_id();
        self.next += 1;
        self.open.insert(conn, Connection::new(kind));
        conn
    }

    pub fn remove(&mut self, conn: &ConnId) -> Option<Connection> {
        self.open.remove(conn)
    }

    pub fn get(&self, conn: &ConnId) -> Option<&Connection> {
        self.open.get(conn)
    }

    pub fn get_mut(&mut self, conn: &ConnId) -> Option<&mut Connection> {
        self.open.get_mut(conn)
    }

    pub fn contains_key(&self, conn: &ConnId) -> bool {
        self.open.contains_key(conn)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ConnId, &Connection)> {
        self.open.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&ConnId, &mut Connection)> {
        self.open.iter_mut()
    }

    pub fn values(&self) -> impl Iterator<Item = &Connection> {
        self.open.values()
    }

    /// The link's connection, if one is open (there is at most one).
    pub fn link(&self) -> Option<ConnId> {
        self.iter()
            .find(|(_, c)| c.kind == ConnKind::Link)
            .map(|(id, _)| *id)
    }

    /// Whether any of `among` is open and `is` so (an editor among a session's holders, say).
    pub fn any_of(&self, among: &BTreeSet<ConnId>, is: impl Fn(&Connection) -> bool) -> bool {
        among.iter().any(|c| self.get(c).is_some_and(&is))
    }
}

impl std::ops::Index<&ConnId> for Connections {
    type Output = Connection;

    /// For a connection the caller has just found open.
    fn index(&self, conn: &ConnId) -> &Connection {
        &self.open[conn]
    }
}

/// Connections made as they are (tests and the fuzz harness): the next id is past the largest
/// given.
#[cfg(any(test, feature = "testing"))]
impl FromIterator<(ConnId, Connection)> for Connections {
    fn from_iter<I: IntoIterator<Item = (ConnId, Connection)>>(iter: I) -> Self {
        let open: BTreeMap<_, _> = iter.into_iter().collect();
        let next = open.keys().last().map_or(0, |c| c.0 + 1);
        Connections { open, next }
    }
}

#[cfg(any(test, feature = "testing"))]
impl Connections {
    pub fn insert(&mut self, conn: ConnId, c: Connection) {
        self.next = self.next.max(conn.0 + 1);
        self.open.insert(conn, c);
    }
}

/// What became of a frame offered to be held behind a waiting request.
#[derive(Debug, PartialEq)]
pub(crate) enum Hold {
    /// No request waits: the frame runs now.
    NothingWaits,
    /// Held, to run once the request before it has.
    Held,
    /// Not held: it would take the held bytes past the bound.
    Over,
}

impl Connection {
    pub fn new(kind: ConnKind) -> Self {
        Connection {
            kind,
            phase: Phase::AwaitingInitialize,
            said: ClientSaid::default(),
            downgraded: false,
            pending: BTreeMap::new(),
            gate: None,
            held: VecDeque::new(),
            held_bytes: 0,
            announce_due: false,
        }
    }

    /// `initialize` is answered: the client said `said` of itself, and the connection takes
    /// any request now. A link's sessions editors share are announced to it at the end of the
    /// input (shared.rs), after the answer.
    pub fn initialized(&mut self, said: ClientSaid) {
        self.said = said;
        self.phase = Phase::Ready;
        if self.kind == ConnKind::Link {
            self.announce_due = true;
        }
    }

    /// Hold `frame` behind the request waiting (`gate`), if one waits: at most `max` bytes
    /// held in all.
    pub fn hold(&mut self, frame: &[u8], max: usize) -> Hold {
        if self.gate.is_none() {
            return Hold::NothingWaits;
        }
        if self.held_bytes.saturating_add(frame.len()) > max {
            return Hold::Over;
        }
        self.held_bytes += frame.len();
        self.held.push_back(frame.to_vec());
        Hold::Held
    }

    /// The oldest held frame, to run now: none while a request waits.
    pub fn next_held(&mut self) -> Option<Vec<u8>> {
        if self.gate.is_some() {
            return None;
        }
        let frame = self.held.pop_front()?;
        self.held_bytes -= frame.len();
        Some(frame)
    }

    /// Whether it is on this machine (an editor, a terminal, a hub process), not the link.
    pub fn is_local(&self) -> bool {
        self.kind != ConnKind::Link
    }

    /// Whether `_lembas/event` and the other `_lembas` notifications go to this client.
    pub fn gets_events(&self) -> bool {
        self.phase == Phase::Ready && self.said.lembas
    }

    /// Whether this client may be sent `_lembas/question` and `_lembas/plan`.
    pub fn gets_cards(&self) -> bool {
        self.gets_events() && self.said.protocol >= 2 && !self.downgraded
    }

    /// Whether the device may send `method` to this client now: `_lembas` notifications only
    /// to a client that said `_meta.lembas`, questions and plans only to protocol 2 or later
    /// (and not after it refused one with -32601), nothing before `initialize`.
    pub fn may_receive(&self, method: &str) -> bool {
        match method {
            "_lembas/hello" => self.kind == ConnKind::Link,
            "_lembas/question" | "_lembas/plan" => self.gets_cards(),
            m if m.starts_with("_lembas/") => self.gets_events(),
            _ => self.phase == Phase::Ready,
        }
    }

    /// Remember a request the device sends on this connection under `id`.
    pub fn expect_answer(&mut self, id: Id, method: &'static str) {
        self.pending.insert(id, Pending { method });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_and_queries_see_only_open_connections() {
        let mut conns = Connections::default();
        let editor = conns.open(ConnKind::Stdio);
        let link = conns.open(ConnKind::Link);
        assert_ne!(editor, link);
        assert_eq!(conns.link(), Some(link));
        let holders = BTreeSet::from([editor, link]);
        assert!(conns.any_of(&holders, Connection::is_local));
        assert!(conns.remove(&editor).is_some());
        assert!(!conns.contains_key(&editor));
        assert!(
            !conns.any_of(&holders, Connection::is_local),
            "a holder gone is no editor"
        );
        let next = conns.open(ConnKind::Stdio);
        assert!(next != editor && next != link, "{next:?} was used before");
        conns.remove(&link);
        assert_eq!(conns.link(), None);
        assert_eq!(conns.iter().count(), 1);
    }

    #[test]
    fn initialize_readies_a_connection_and_only_a_link_is_due_its_announcement() {
        let said = ClientSaid {
            lembas: true,
            protocol: 2,
            show: false,
        };
        for kind in [
            ConnKind::Link,
            ConnKind::Stdio,
            ConnKind::Terminal,
            ConnKind::Hub,
        ] {
            let mut c = Connection::new(kind);
            assert!(
                !c.may_receive("session/update"),
                "nothing before initialize"
            );
            c.initialized(said);
            assert_eq!(c.phase, Phase::Ready);
            assert_eq!(c.said, said);
            assert!(
                c.may_receive("session/update") && c.gets_cards(),
                "{kind:?}"
            );
            assert_eq!(c.announce_due, kind == ConnKind::Link, "{kind:?}");
        }
    }

    #[test]
    fn frames_behind_a_waiting_request_are_held_to_the_bound_and_run_in_order_once_it_has() {
        let mut c = Connection::new(ConnKind::Link);
        assert_eq!(c.hold(b"a", 10), Hold::NothingWaits);
        c.gate = Some(1);
        assert_eq!(c.hold(b"first", 10), Hold::Held);
        assert_eq!(c.hold(b"secon", 10), Hold::Held, "exactly at the bound");
        assert_eq!(c.hold(b"x", 10), Hold::Over);
        assert_eq!(c.held_bytes, 10, "a frame over the bound is not held");
        assert_eq!(c.next_held(), None, "nothing runs while the request waits");
        c.gate = None;
        assert_eq!(c.next_held().as_deref(), Some(&b"first"[..]));
        assert_eq!(c.held_bytes, 5);
        assert_eq!(c.next_held().as_deref(), Some(&b"secon"[..]));
        assert_eq!((c.next_held(), c.held_bytes), (None, 0));
    }
}
