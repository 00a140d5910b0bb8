//! Paths the shell is asked to resolve (`Effect::ResolvePath`; symlinks followed), with what
//! each is for: a `session/new`'s `cwd`, a terminal's, or a session request's directory checked
//! over the link (limits.rs). An answer goes to whoever asked; a connection that goes away
//! waits for nothing more.

use super::asked::Asked;
use super::directories::{Listing, PendingListing, PendingPlaces};
use super::limits::Gate;
use super::session_new::PendingNew;
use super::{ConnId, Device};

/// What a `ResolvePath` request was made for.
#[derive(Debug)]
pub(super) enum Resolving {
    Session(Box<PendingNew>),
    Terminal(String),
    /// A session request over the link (limits.rs).
    Gate(Box<Gate>),
    /// A `_lembas/directories` listing (directories.rs).
    Directory(Box<PendingListing>),
    /// `_lembas/directories`' places, resolved one after the other (directories.rs).
    Places(Box<PendingPlaces>),
}

impl Resolving {
    /// The connection waiting on the answer, if one is (a terminal's path is its shell's
    /// business, let go of when the terminal is).
    fn waiting_conn(&self) -> Option<ConnId> {
        match self {
            Resolving::Session(p) => Some(p.conn),
            Resolving::Gate(g) => Some(g.conn()),
            Resolving::Directory(d) => Some(d.conn),
            Resolving::Places(p) => Some(p.conn),
            Resolving::Terminal(_) => None,
        }
    }
}

/// The resolutions asked for and not yet answered.
#[derive(Debug, Default)]
pub(super) struct PathRequests(Asked<Resolving>);

impl PathRequests {
    /// Keep `what` until its path is resolved: the number of the request.
    pub fn ask(&mut self, what: Resolving) -> u64 {
        self.0.ask(what)
    }

    /// Request `request` was answered: what it was for, once.
    pub fn answered(&mut self, request: u64) -> Option<Resolving> {
        self.0.answered(request)
    }

    /// No resolution is waited for.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `conn` went away: what it waited for is let go (the answer will find nothing).
    pub fn forget_connection(&mut self, conn: ConnId) {
        self.0.retain(|r| r.waiting_conn() != Some(conn));
    }
}

impl Device {
    /// The shell resolved a path it was asked to (`Effect::ResolvePath`; symlinks followed): a
    /// `session/new`'s `cwd`, a terminal's, a session request's directory (limits.rs), or a
    /// place of `_lembas/directories`.
    pub fn handle_path_resolved(
        &mut self,
        request: u64,
        resolved: Result<String, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        match self.resolving.answered(request) {
            Some(Resolving::Session(pending)) => self.session_path_resolved(*pending, resolved),
            Some(Resolving::Terminal(terminal_id)) => {
                self.terminal_path_resolved(terminal_id, resolved)
            }
            Some(Resolving::Gate(gate)) => self.gate_resolved(*gate, resolved),
            Some(Resolving::Places(places)) => self.place_resolved(*places, resolved),
            // A listing's answer is `handle_directory_listed`: this one went astray.
            Some(Resolving::Directory(_)) | None => {}
        }
        self.after_input();
    }

    /// The shell listed a directory it was asked to (`Effect::ListDirectory`).
    pub fn handle_directory_listed(
        &mut self,
        request: u64,
        listed: Result<Listing, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        if let Some(Resolving::Directory(pending)) = self.resolving.answered(request) {
            self.directory_listed(*pending, listed);
        }
        self.after_input();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;
    use crate::jsonrpc::Id;

    fn new_session(conn: u64) -> Resolving {
        Resolving::Session(Box::new(PendingNew {
            conn: ConnId(conn),
            id: Id::number(1),
            cwd: "/w".into(),
            root: "/w".into(),
            mode: Mode::Auto,
            model: None,
            effort: None,
            context: Default::default(),
        }))
    }

    #[test]
    fn a_gone_connection_waits_for_nothing_and_a_terminal_keeps_its_path() {
        let mut paths = PathRequests::default();
        let gone = paths.ask(new_session(1));
        let other = paths.ask(new_session(2));
        let terminal = paths.ask(Resolving::Terminal("t".into()));
        paths.forget_connection(ConnId(1));
        assert!(paths.answered(gone).is_none(), "its connection went away");
        assert!(matches!(
            paths.answered(other),
            Some(Resolving::Session(p)) if p.conn == ConnId(2)
        ));
        assert!(matches!(
            paths.answered(terminal),
            Some(Resolving::Terminal(t)) if t == "t"
        ));
        assert!(paths.answered(terminal).is_none(), "answered once");
    }
}
