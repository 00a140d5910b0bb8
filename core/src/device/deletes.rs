//! Deletes: `_lembas/session/delete` from a client, and deletes made on the device (a command,
//! a prune, a terminal), which reach the client as `_lembas/session/deleted` now or, when no
//! link is up, right after the next link's `initialize`. None is lost to a crash or a dropped
//! link: the pending delete is durable before its frame is sent, and forgotten only once the
//! link that carried it stayed up `delete_confirm_ms` afterwards.

use std::collections::{BTreeMap, BTreeSet};

use super::connection::Connections;
use super::outbox::Outbox;
use super::session_set::Removed;
use super::sessions::Session;
use super::{ConnId, ConnKind, Device, Effect};
use crate::config::Remote;
use crate::engine::{EngineCommand, StopReason};
use crate::jsonrpc::{self, RpcError};
use crate::paths;
use crate::store::{self, Record, Table};
use crate::time::Time;
use crate::turn::Answer;
use crate::wire::event::notice::{DeletedParams, DELETED};
use crate::wire::session::{DeleteResult, SessionIdParams, TurnNotes};

/// The deletes made on the device not yet known to reach a client: kept (durable, in
/// `Table::Deletes`) until sent, then unconfirmed until the link that carried them stayed up
/// `delete_confirm_ms`; a link that drops sooner may have lost them, so they are kept again.
#[derive(Debug, Default)]
pub(super) struct KeptDeletes {
    /// Not yet sent on a link that is still up.
    to_send: BTreeSet<String>,
    /// Sent, with the link and when: forgotten once confirmed.
    unconfirmed: BTreeMap<String, (ConnId, Time)>,
}

impl KeptDeletes {
    /// A delete to tell the client, read back from the store.
    pub fn keep(&mut self, session_id: String) {
        self.to_send.insert(session_id);
    }

    /// A delete made on the device now: durable before any frame after it, then kept until a
    /// link's client has heard it.
    pub fn made(&mut self, session_id: &str, out: &mut Outbox) {
        out.persist(vec![Record::Put {
            table: Table::Deletes,
            key: session_id.to_string(),
            value: String::new(),
        }]);
        self.keep(session_id.to_string());
    }

    /// Send the kept deletes to every link of `conns` whose client may hear them (after its
    /// `initialize`, with `_meta.lembas`); each waits there to be confirmed. None such: they
    /// stay kept.
    pub fn send_to_links(&mut self, conns: &Connections, now: Time, out: &mut Outbox) {
        if self.to_send.is_empty() {
            return;
        }
        for (conn, c) in conns.iter() {
            if c.kind == ConnKind::Link && c.may_receive(DELETED) {
                self.send(*conn, now, out);
            }
        }
    }

    /// Send every kept delete on the link `conn`; each waits there to be confirmed.
    fn send(&mut self, conn: ConnId, now: Time, out: &mut Outbox) {
        for id in std::mem::take(&mut self.to_send) {
            out.send(conn, deleted_frame(&id));
            self.unconfirmed.insert(id, (conn, now));
        }
    }

    /// The link `conn` dropped: the deletes it carried and did not confirm are kept again.
    pub fn unconfirm(&mut self, conn: ConnId) {
        let to_send = &mut self.to_send;
        self.unconfirmed.retain(|id, (c, _)| {
            if *c == conn {
                to_send.insert(id.clone());
            }
            *c != conn
        });
    }

    /// Deletes whose link stayed up `wait_ms` since they were sent are forgotten, in the store
    /// too, once the frames before have left.
    pub fn confirm(&mut self, now: Time, wait_ms: u64, out: &mut Outbox) {
        let mut forget = Vec::new();
        self.unconfirmed.retain(|id, (_, at)| {
            let done = at.plus_ms(wait_ms) <= now;
            if done {
                forget.push(Record::Delete {
                    table: Table::Deletes,
                    key: id.clone(),
                });
            }
            !done
        });
        if !forget.is_empty() {
            out.persist_after_send(forget);
        }
    }

    /// When the first unconfirmed delete is confirmed.
    pub fn deadline(&self, wait_ms: u64) -> Option<Time> {
        self.unconfirmed
            .values()
            .map(|(_, at)| at.plus_ms(wait_ms))
            .min()
    }
}

/// `_lembas/session/deleted` for `session_id`.
fn deleted_frame(session_id: &str) -> Vec<u8> {
    jsonrpc::encode_notification(
        DELETED,
        &DeletedParams {
            session_id: session_id.to_owned(),
        },
    )
}

/// Whether a client on `conn` may delete `s` (`_lembas/session/delete`): one it holds or was
/// ever given, one a terminal shares, or one under `remote.roots` while remote work is on.
fn may_delete(s: &Session, conn: ConnId, conns: &Connections, remote: &Remote) -> bool {
    s.durable.given
        || s.holders.contains(&conn)
        || conns.any_of(&s.holders, |c| c.kind == ConnKind::Terminal)
        || (remote.enabled && paths::within(&s.durable.root, &remote.roots).is_some())
}

/// Take a session out of the store: its record, turns, history and event log; then its
/// attachments.
fn forget_stored(session_id: &str, out: &mut Outbox) {
    let prefix = store::session_prefix(session_id);
    out.persist(vec![
        Record::Delete {
            table: Table::Sessions,
            key: session_id.to_string(),
        },
        Record::DeletePrefix {
            table: Table::Turns,
            prefix: prefix.clone(),
        },
        Record::DeletePrefix {
            table: Table::History,
            prefix: prefix.clone(),
        },
        Record::DeletePrefix {
            table: Table::Events,
            prefix,
        },
    ]);
    out.effect(Effect::RemoveAttachments {
        session_id: session_id.to_string(),
    });
}

impl Device {
    /// `_lembas/session/delete`: a session the client may delete ([`may_delete`]). Trust is
    /// not asked.
    pub(super) fn delete_request(
        &mut self,
        conn: ConnId,
        p: SessionIdParams,
    ) -> Result<DeleteResult, RpcError> {
        let Some(s) = self.sessions.get(&p.session_id) else {
            // Gone already: deleting twice is done as well.
            return Ok(DeleteResult { deleted: false });
        };
        let remote = &self.config.remote;
        if !may_delete(s, conn, &self.conns, remote) {
            // The rule that failed: the roots, or remote work being off (remote.enabled).
            let why = if remote.enabled {
                "is not under the device's roots"
            } else {
                "the device's remote work is off (remote.enabled)"
            };
            return Err(RpcError::invalid_params(format!(
                "session `{}` was never given to a client and {why}; it can only be deleted on \
                 the device",
                p.session_id
            )));
        }
        self.remove_session(&p.session_id);
        Ok(DeleteResult { deleted: true })
    }

    /// Delete a session on the device's own account (`lembas sessions delete`, a prune). The
    /// client hears `_lembas/session/deleted` now, or after the next link's `initialize`.
    /// Returns whether there was such a session.
    pub fn delete_session(&mut self, session_id: &str, now: Time) -> bool {
        self.clock.advance(now);
        let deleted = self.delete_on_device(session_id);
        // Sent now on a link that may hear it; its turns were the last a restart for new
        // settings waited for, maybe.
        self.after_input();
        deleted
    }

    /// [`Device::delete_session`] within an input (an editor's `session/delete`): the delete
    /// is kept until a link's client has heard it.
    pub(super) fn delete_on_device(&mut self, session_id: &str) -> bool {
        if !self.has_session(session_id) {
            return false;
        }
        self.remove_session(session_id);
        self.deletes.made(session_id, &mut self.out);
        true
    }

    /// Take a session out of the device and its store: its turn stops and every prompt waiting
    /// on it is answered `cancelled`; its cards come down; its attachments go; a terminal that
    /// has it open is told. One set aside (idle, held by no one) only leaves the store.
    fn remove_session(&mut self, session_id: &str) {
        let s = match self.sessions.remove(session_id) {
            Removed::Live(s) => *s,
            Removed::SetAside => return forget_stored(session_id, &mut self.out),
            Removed::Absent => return,
        };
        let (running, waiters) = s.turns.abandon();
        if let Some(r) = running {
            self.out.engine(EngineCommand::Cancel {
                session_id: session_id.to_string(),
                turn_id: r.turn_id.clone(),
            });
            self.drop_turn_cards(session_id, &r.turn_id);
        }
        let notes = TurnNotes {
            message: Some("the session was deleted".into()),
            ..TurnNotes::default()
        };
        let cancelled = Answer::stopped(StopReason::Cancelled, notes);
        for (turn, waiting) in waiters {
            for (conn, id) in waiting {
                if self.conns.contains_key(&conn) {
                    self.out.send(conn, cancelled.frame(&id, &turn));
                }
            }
        }
        forget_stored(session_id, &mut self.out);
        // A terminal that has it open starts a new one.
        let frame = deleted_frame(session_id);
        for conn in s.holders {
            if self
                .conns
                .get(&conn)
                .is_some_and(|c| c.kind == ConnKind::Terminal)
            {
                self.out.send(conn, frame.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::connection::Connection;
    use crate::device::Output;
    use serde_json::{json, Value};

    const LINK: ConnId = ConnId(1);

    fn sent(out: &mut Outbox) -> Vec<Output> {
        std::iter::from_fn(|| out.poll()).collect()
    }

    #[test]
    fn a_sent_delete_is_forgotten_only_once_its_link_stayed_up_long_enough() {
        let mut deletes = KeptDeletes::default();
        let mut out = Outbox::default();
        deletes.keep("ses_a".into());
        deletes.send(LINK, Time(100), &mut out);
        assert!(matches!(
            &sent(&mut out)[..],
            [Output::Send { conn: LINK, .. }]
        ));
        assert!(deletes.to_send.is_empty());
        assert_eq!(deletes.deadline(50), Some(Time(150)));
        deletes.confirm(Time(149), 50, &mut out);
        assert!(sent(&mut out).is_empty(), "not yet");
        deletes.confirm(Time(150), 50, &mut out);
        let forgotten = sent(&mut out);
        assert!(
            matches!(&forgotten[..], [Output::Effect(Effect::Persist { records, .. })]
                if records == &vec![Record::Delete { table: Table::Deletes, key: "ses_a".into() }]),
            "{forgotten:?}"
        );
        assert_eq!(deletes.deadline(50), None);
    }

    #[test]
    fn a_link_that_drops_before_confirming_gives_its_deletes_back() {
        let mut deletes = KeptDeletes::default();
        let mut out = Outbox::default();
        deletes.keep("ses_a".into());
        deletes.send(LINK, Time(0), &mut out);
        deletes.keep("ses_b".into());
        deletes.send(ConnId(2), Time(0), &mut out);
        deletes.unconfirm(LINK);
        assert_eq!(deletes.to_send, BTreeSet::from(["ses_a".to_string()]));
        assert_eq!(
            deletes.unconfirmed.len(),
            1,
            "ses_b waits on the other link"
        );
        // The next link hears it again.
        sent(&mut out);
        deletes.send(ConnId(3), Time(10), &mut out);
        assert_eq!(sent(&mut out).len(), 1);
    }

    fn conn(kind: ConnKind, ready: bool, lembas: bool) -> Connection {
        let mut c = Connection::new(kind);
        if ready {
            c.phase = super::super::connection::Phase::Ready;
        }
        c.said.lembas = lembas;
        c
    }

    #[test]
    fn a_delete_made_on_the_device_is_durable_then_kept_for_a_link_that_may_hear_it() {
        let mut deletes = KeptDeletes::default();
        let mut out = Outbox::default();
        deletes.made("ses_a", &mut out);
        // No link may hear it yet: an editor, a terminal, a link before its `initialize`, a
        // link whose client said no `_meta.lembas`.
        let mut conns: Connections = [
            (ConnId(1), conn(ConnKind::Stdio, true, true)),
            (ConnId(2), conn(ConnKind::Terminal, true, true)),
            (ConnId(3), conn(ConnKind::Link, false, true)),
            (ConnId(4), conn(ConnKind::Link, true, false)),
        ]
        .into_iter()
        .collect();
        deletes.send_to_links(&conns, Time(5), &mut out);
        let first = sent(&mut out);
        assert!(
            matches!(&first[..], [Output::Effect(Effect::Persist { records, .. })]
                if records == &vec![Record::Put { table: Table::Deletes, key: "ses_a".into(), value: String::new() }]),
            "{first:?}"
        );
        assert_eq!(
            deletes.deadline(50),
            None,
            "sent nowhere, so nothing to confirm"
        );
        out.acked(1);
        // A link that may hear it: sent there, and waits to be confirmed.
        conns.insert(ConnId(5), conn(ConnKind::Link, true, true));
        deletes.send_to_links(&conns, Time(7), &mut out);
        let frames: Vec<_> = sent(&mut out)
            .into_iter()
            .map(|o| {
                let Output::Send { conn, frame } = o else {
                    panic!("{o:?}")
                };
                (conn, serde_json::from_slice::<Value>(&frame).unwrap())
            })
            .collect();
        assert_eq!(
            frames,
            [(
                ConnId(5),
                json!({ "jsonrpc": "2.0", "method": "_lembas/session/deleted",
                        "params": { "sessionId": "ses_a" } })
            )]
        );
        assert_eq!(deletes.deadline(50), Some(Time(57)));
        // Sent once.
        deletes.send_to_links(&conns, Time(9), &mut out);
        assert!(sent(&mut out).is_empty());
    }

    #[test]
    fn a_client_deletes_only_a_session_it_holds_was_given_shares_with_a_terminal_or_under_the_roots(
    ) {
        let (web, terminal) = (ConnId(1), ConnId(2));
        let conns: Connections = [
            (web, conn(ConnKind::Link, true, true)),
            (terminal, conn(ConnKind::Terminal, true, true)),
            (ConnId(3), conn(ConnKind::Stdio, true, false)),
        ]
        .into_iter()
        .collect();
        let off = Remote::default();
        let s = super::super::live::tests::session("ses_a");
        assert!(!may_delete(&s, web, &conns, &off), "a stranger's");
        let mut held = super::super::live::tests::session("ses_a");
        held.holders.insert(web);
        assert!(may_delete(&held, web, &conns, &off));
        let mut given = super::super::live::tests::session("ses_a");
        given.durable.given = true;
        assert!(may_delete(&given, web, &conns, &off));
        let mut shared = super::super::live::tests::session("ses_a");
        shared.holders.insert(ConnId(3));
        assert!(
            !may_delete(&shared, web, &conns, &off),
            "an editor's is not shared"
        );
        shared.holders.insert(terminal);
        assert!(may_delete(&shared, web, &conns, &off), "a terminal's is");
        // Under the roots (`/w`): only while remote work is on.
        let mut roots = Remote {
            roots: vec!["/w".into()],
            ..Remote::default()
        };
        assert!(!may_delete(&s, web, &conns, &roots));
        roots.enabled = true;
        assert!(may_delete(&s, web, &conns, &roots));
        roots.roots = vec!["/elsewhere".into()];
        assert!(!may_delete(&s, web, &conns, &roots));
    }
}
