//! The device's connections and dials as a harness sees them come and go (the fuzz `Run` and
//! the Pair both keep one): told each open, close, dial and stop, it panics when the device
//! breaks a rule of the link's life:
//!
//! - a connection id is never reused, and a link opens only when a dial was asked for;
//! - a dial is asked for only when none is under way, no link is up, and the device has not
//!   stopped linking;
//! - the device writes, pings and closes only on connections that are open (or that it let go
//!   of while their close waits behind a held persist), never on one that closed.

use std::collections::{BTreeMap, BTreeSet};

use crate::device::{ConnId, ConnKind};

#[derive(Debug, Default)]
pub(crate) struct Connections {
    pub(crate) open: BTreeMap<ConnId, ConnKind>,
    pub(crate) closed: BTreeSet<ConnId>,
    /// Connections the device let go of whose `Close` has not left yet (it waits behind a held
    /// persist): the shell still has them, and a frame on one is a misuse the device refuses.
    pub(crate) closing: BTreeMap<ConnId, ConnKind>,
    pub(crate) dialing: bool,
    pub(crate) stopped: bool,
}

impl Connections {
    /// The device opened `conn` (a link only after a dial was asked for).
    pub(crate) fn opened(&mut self, conn: ConnId, kind: ConnKind) {
        assert!(
            !self.open.contains_key(&conn)
                && !self.closed.contains(&conn)
                && !self.closing.contains_key(&conn),
            "connection ids are never reused: {conn:?}"
        );
        if kind == ConnKind::Link {
            assert!(self.dialing, "a link opened though no dial was asked for");
            self.dialing = false;
        }
        self.open.insert(conn, kind);
    }

    /// The peer (or the network) closed `conn`, and the device was told.
    pub(crate) fn peer_closed(&mut self, conn: ConnId) {
        self.open.remove(&conn);
        self.closing.remove(&conn);
        self.closed.insert(conn);
    }

    /// The device let go of `conn`, its `Close` still to leave.
    pub(crate) fn letting_go(&mut self, conn: ConnId) {
        if let Some(kind) = self.open.remove(&conn) {
            self.closing.insert(conn, kind);
        }
    }

    /// The device closed `conn` (its `Close` output).
    pub(crate) fn device_closed(&mut self, conn: ConnId) {
        assert!(
            !self.closed.contains(&conn),
            "the device closed {conn:?} after it was closed"
        );
        assert!(
            self.open.remove(&conn).is_some() || self.closing.remove(&conn).is_some(),
            "the device closed {conn:?}, which never opened"
        );
        self.closed.insert(conn);
    }

    /// The kind of `conn`, on which the device writes (or pings): it must be open.
    pub(crate) fn written(&self, conn: ConnId, what: &dyn std::fmt::Display) -> ConnKind {
        assert!(
            !self.closed.contains(&conn),
            "{what} was sent on {conn:?} after it closed"
        );
        *self
            .open
            .get(&conn)
            .or(self.closing.get(&conn))
            .unwrap_or_else(|| panic!("{what} was sent on {conn:?}, which never opened"))
    }

    /// The device asked for a dial.
    pub(crate) fn dial_asked(&mut self) {
        assert!(!self.stopped, "a dial was asked for after Stop");
        assert!(
            !self.dialing,
            "a second dial was asked for before the first ended"
        );
        assert!(
            !self.open.values().any(|k| *k == ConnKind::Link),
            "a dial was asked for while a link is up"
        );
        self.dialing = true;
    }

    /// The dial under way failed (the device was told).
    pub(crate) fn dial_failed(&mut self) {
        self.dialing = false;
    }

    /// The device stopped linking for good.
    pub(crate) fn stopped(&mut self) {
        self.stopped = true;
        self.dialing = false;
    }

    /// The process died: every connection with it.
    pub(crate) fn forget(&mut self) {
        *self = Connections::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "a link opened though no dial was asked for")]
    fn a_link_needs_a_dial() {
        Connections::default().opened(ConnId(1), ConnKind::Link);
    }

    #[test]
    #[should_panic(expected = "a dial was asked for while a link is up")]
    fn no_dial_while_linked() {
        let mut c = Connections::default();
        c.dial_asked();
        c.opened(ConnId(1), ConnKind::Link);
        c.dial_asked();
    }

    #[test]
    #[should_panic(expected = "after it closed")]
    fn nothing_is_written_on_a_closed_connection() {
        let mut c = Connections::default();
        c.opened(ConnId(1), ConnKind::Stdio);
        c.peer_closed(ConnId(1));
        c.written(ConnId(1), &"a frame");
    }

    #[test]
    fn a_connection_let_go_may_still_be_written_until_its_close_leaves() {
        let mut c = Connections::default();
        c.opened(ConnId(1), ConnKind::Stdio);
        c.letting_go(ConnId(1));
        assert_eq!(c.written(ConnId(1), &"a frame"), ConnKind::Stdio);
        c.device_closed(ConnId(1));
        assert!(c.closed.contains(&ConnId(1)));
    }
}
