//! Sessions an editor shares with the web (the spec's terminal-shared sessions): while a local
//! connection (an editor on stdio or the hub, a terminal) holds a session, the link's client
//! hears `_lembas/session/announce` (when the first one comes to hold it, and again on every
//! link's `initialize`), followed by its command set (command_set.rs); `_lembas/session/status`
//! says `held: "terminal"`, and `_lembas/session/left` follows when the last one lets go
//! (`session/close`, or its connection ended). Capability `sessions`: a device without a store
//! announces nothing.

use serde::Serialize;

use super::connection::Connection;
use super::sessions::Session;
use super::{ConnId, ConnKind, Device};
use crate::jsonrpc;

/// `_lembas/session/announce` params.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Announce<'a> {
    session_id: &'a str,
    cwd: &'a str,
    title: Option<&'a str>,
    model: Option<&'a str>,
    instance: bool,
    mode: crate::config::Mode,
    effort: Option<&'a str>,
    busy: bool,
    origin: &'static str,
}

/// `_lembas/session/left` params.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Left<'a> {
    session_id: &'a str,
    available: bool,
}

impl Device {
    /// Whether a local connection (not the link) holds `s`.
    pub(super) fn editor_holds(&self, s: &Session) -> bool {
        self.conns.any_of(&s.holders, Connection::is_local)
    }

    /// The links whose client hears sessions announced.
    pub(super) fn announce_to(&self) -> Vec<ConnId> {
        if !self.config.has_store {
            return Vec::new();
        }
        self.conns
            .iter()
            .filter(|(_, c)| c.kind == ConnKind::Link && c.may_receive("_lembas/session/announce"))
            .map(|(id, _)| *id)
            .collect()
    }

    fn announce_frame(s: &Session) -> Vec<u8> {
        let d = &s.durable;
        jsonrpc::encode_notification(
            "_lembas/session/announce",
            &Announce {
                session_id: &d.id,
                cwd: &d.cwd,
                title: d.title.as_deref(),
                model: d.model.as_deref(),
                instance: d.instance,
                mode: d.mode,
                effort: d.effort.as_deref(),
                busy: s.busy(),
                origin: "terminal",
            },
        )
    }

    /// `conn` came to hold `session`: when it is a local connection and the first one, the
    /// web hears the session announced.
    pub(super) fn shared_gained(&mut self, conn: ConnId, session: &str) {
        if !self.conns.get(&conn).is_some_and(Connection::is_local) {
            return;
        }
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let locals = s
            .holders
            .iter()
            .filter(|c| self.conns.get(c).is_some_and(Connection::is_local))
            .count();
        if locals != 1 {
            return;
        }
        let frame = Self::announce_frame(s);
        for link in self.announce_to() {
            self.out.send(link, frame.clone());
            self.tell_announced(session, link);
        }
    }

    /// A local connection let go of `session` (closed it, or ended): when none holds it now,
    /// the web hears it left.
    pub(super) fn shared_lost(&mut self, session: &str) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        if self.editor_holds(s) {
            return;
        }
        let frame = jsonrpc::encode_notification(
            "_lembas/session/left",
            &Left {
                session_id: session,
                available: self.config.has_store,
            },
        );
        for link in self.announce_to() {
            self.out.send(link, frame.clone());
        }
    }

    /// Links that just answered `initialize` (part of the step that ends every input): every
    /// session a local connection holds is announced to them.
    pub(super) fn announce_to_new_links(&mut self) {
        let due: Vec<ConnId> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| c.announce_due)
            .map(|(id, c)| {
                c.announce_due = false;
                *id
            })
            .collect();
        for link in due {
            self.announce_all(link);
        }
    }

    /// Every session a local connection holds, announced to `link`.
    fn announce_all(&mut self, link: ConnId) {
        if !self.announce_to().contains(&link) {
            return;
        }
        let announced: Vec<(String, Vec<u8>)> = self
            .sessions
            .values()
            .filter(|s| self.editor_holds(s))
            .map(|s| (s.durable.id.clone(), Self::announce_frame(s)))
            .collect();
        for (session, frame) in announced {
            self.out.send(link, frame);
            self.tell_announced(&session, link);
        }
    }

    /// The links `s` is announced to without their holding it: it is shared (a local
    /// connection holds it) and they hear announces.
    pub(super) fn announced_links(&self, s: &Session) -> Vec<ConnId> {
        if !self.editor_holds(s) {
            return Vec::new();
        }
        let mut links = self.announce_to();
        links.retain(|l| !s.holders.contains(l));
        links
    }

    /// The sessions `conn` holds, when it is a local connection (before it is let go).
    pub(super) fn held_by_local(&self, conn: ConnId, kind: ConnKind) -> Vec<String> {
        if kind == ConnKind::Link {
            return Vec::new();
        }
        self.sessions
            .held_by(conn)
            .map(|s| s.durable.id.clone())
            .collect()
    }
}
