//! A session's notifications (`session/update`, `_lembas/event`): the params at the
//! session's next seq, the frame to each holder still connected that hears that kind, in the
//! session's lane, and the copy its event log keeps. A text chunk takes its own path
//! (chunks.rs), held byte for byte to these.

use std::collections::BTreeSet;

use super::connection::{Connection, Connections, Phase};
use super::event_log::{notification_frame, Logged};
use super::outbox::Lane;
use super::{ConnId, Device};
use crate::wire::event::lembas::{EventParams, LembasEvent};
use crate::wire::event::seq::SeqMeta;
use crate::wire::event::update::{SessionUpdate, UpdateParams};

impl Device {
    /// A `session/update` to every connection that holds the session, with the session's
    /// next seq, kept in its event log.
    pub(super) fn broadcast_update(&mut self, session: &str, update: SessionUpdate) {
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let params = update_params(session, seq, update);
        self.broadcast_logged(session, seq, Logged::Update, params, hears_updates);
    }

    /// An `_lembas/event` to every holder whose client said `_meta.lembas`, with the
    /// session's next seq, kept in its event log (whoever hears it now: a client cut off asks
    /// for it later).
    pub(super) fn broadcast_event(&mut self, session: &str, event: LembasEvent) {
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let params = event_params(session, seq, event);
        self.broadcast_logged(session, seq, Logged::Event, params, hears_events);
    }

    /// Send a notification of the session, its params encoded with `seq`, to every holder
    /// `hears`, in the session's lane (its frames wait only for its own and lane-less
    /// persists); then keep it in the session's log.
    pub(super) fn broadcast_logged(
        &mut self,
        session: &str,
        seq: u64,
        method: Logged,
        params: String,
        hears: impl Fn(&Connection) -> bool,
    ) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let lane = Lane::of(session);
        let mut frame = None;
        for conn in hearers(&s.holders, &self.conns, hears) {
            let frame = frame.get_or_insert_with(|| notification_frame(method.name(), &params));
            self.out.send_in(lane, conn, frame.clone());
        }
        self.log_event(session, seq, method, &params);
    }
}

/// A `session/update` of `session` carrying `update`, as its event `seq`: the params its log
/// keeps and its frame wraps.
pub(super) fn update_params(session: &str, seq: u64, update: SessionUpdate) -> String {
    serde_json::to_string(&UpdateParams {
        meta: SeqMeta::some(seq),
        session_id: session.to_owned(),
        update,
    })
    .expect("updates serialize")
}

/// An `_lembas/event` of `session` carrying `event`, as its event `seq`: the params its log
/// keeps and its frame wraps.
fn event_params(session: &str, seq: u64, event: LembasEvent) -> String {
    serde_json::to_string(&EventParams {
        meta: SeqMeta::some(seq),
        event,
        session_id: session.to_owned(),
    })
    .expect("events serialize")
}

/// Whether a connection hears a session's `session/update`s: any that answered `initialize`.
fn hears_updates(c: &Connection) -> bool {
    c.phase == Phase::Ready
}

/// Whether a connection hears a session's `_lembas/event`s: a client that said
/// `_meta.lembas` ([`Connection::may_receive`]).
fn hears_events(c: &Connection) -> bool {
    c.may_receive("_lembas/event")
}

/// The holders of a session that are still connected and `hears` say hear it, in id order.
pub(super) fn hearers<'a>(
    holders: &'a BTreeSet<ConnId>,
    conns: &'a Connections,
    hears: impl Fn(&Connection) -> bool + 'a,
) -> impl Iterator<Item = ConnId> + 'a {
    holders
        .iter()
        .filter(move |c| conns.get(c).is_some_and(&hears))
        .copied()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::Mode;
    use crate::device::ConnKind;
    use crate::wire::event::lembas::TitleEvent;
    use crate::wire::event::update::CurrentModeUpdate;

    #[test]
    fn a_broadcast_goes_to_the_connected_holders_that_hear_it() {
        let ready = |kind, lembas| {
            let mut c = Connection::new(kind);
            c.initialized(crate::wire::handshake::ClientSaid {
                lembas,
                protocol: 3,
                show: false,
            });
            c
        };
        let conns = Connections::from_iter([
            (ConnId(1), ready(ConnKind::Link, true)),
            (ConnId(2), Connection::new(ConnKind::Stdio)),
            (ConnId(3), ready(ConnKind::Hub, false)),
            (ConnId(4), ready(ConnKind::Stdio, true)),
        ]);
        // 2 has not answered `initialize`; 9 is gone; 4 does not hold the session.
        let holders = BTreeSet::from([ConnId(1), ConnId(2), ConnId(3), ConnId(9)]);
        let updates: Vec<_> = hearers(&holders, &conns, hears_updates).collect();
        assert_eq!(updates, [ConnId(1), ConnId(3)]);
        let events: Vec<_> = hearers(&holders, &conns, hears_events).collect();
        assert_eq!(events, [ConnId(1)], "only a client that said _meta.lembas");
    }

    #[test]
    fn updates_and_events_are_params_of_the_session_at_their_seq() {
        let update = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
            current_mode_id: Mode::Plan,
        });
        let params: Value = serde_json::from_str(&update_params("s", 12, update)).unwrap();
        assert_eq!(
            params,
            json!({ "_meta": { "lembas": { "seq": 12 } }, "sessionId": "s",
                    "update": { "sessionUpdate": "current_mode_update", "currentModeId": "plan" } })
        );
        let event = LembasEvent::Title(TitleEvent {
            id: "s".into(),
            title: "t".into(),
        });
        let params: Value = serde_json::from_str(&event_params("s", 13, event)).unwrap();
        assert_eq!(
            params,
            json!({ "_meta": { "lembas": { "seq": 13 } }, "sessionId": "s",
                    "event": { "type": "title", "id": "s", "title": "t" } })
        );
    }
}
