//! New `remote:` settings while the device runs (config.yaml edited, or SIGHUP). They apply to
//! the next request at once (limits.rs). The client learns a device's limits only in
//! `_lembas/hello` and `initialize`, so when what those say changed (the advertised roots,
//! `max_mode`, `require_trust`, the capabilities) the device closes the instance link once no
//! session works (no turn running or waiting) and dials again at once: the new handshake carries
//! the new limits. A change they do not show (`approval_timeout`, the trusted list) keeps the
//! link. A turn in progress, or a remote terminal open on the link, is never cut for it. The
//! instance's model list is taken the same way ([`Device::set_models`]).

use super::connection::Connections;
use super::session_set::SessionSet;
use super::{ConnId, ConnKind, Device};
use crate::config::{ConfigError, DeviceConfig, Model, Remote};
use crate::time::Time;
use crate::wire::handshake::Limits;

/// The close code of a link the device restarts itself (RFC 6455 "service restart").
pub const CLOSE_SETTINGS_CHANGED: u16 = 1012;

/// The reason sent with [`CLOSE_SETTINGS_CHANGED`].
pub const SETTINGS_CHANGED: &str = "the device's settings changed; it links again at once";

/// Whether a link restart for new settings waits: for a session's turn running or waiting, a
/// terminal open on the link (`link`; `terminal_owners` are the connections of the terminals
/// open), or a request waiting for its session's read or its directory check (`conns`' gates).
fn restart_held(
    sessions: &SessionSet,
    terminal_owners: impl IntoIterator<Item = ConnId>,
    link: Option<ConnId>,
    conns: &Connections,
) -> bool {
    sessions.values().any(|s| !s.turns.idle())
        // A remote terminal is a person's work too: it would die with the link.
        || terminal_owners.into_iter().any(|owner| Some(owner) == link)
        || conns.values().any(|c| c.gate.is_some())
}

impl Device {
    /// Take new `remote:` settings. A config that fails validation is refused and the old one
    /// kept. Returns whether anything changed; when what the hello and `initialize` say changed
    /// and a link is up, the link is restarted (closed with 1012, then dialled at once) as soon
    /// as no session works.
    pub fn reconfigure(&mut self, remote: Remote, now: Time) -> Result<bool, ConfigError> {
        self.clock.advance(now);
        if remote == self.config.remote {
            return Ok(false);
        }
        let mut next = self.config.clone();
        next.remote = remote;
        next.validate()?;
        self.change_config(|config| *config = next);
        Ok(true)
    }

    /// The instance's model list, fetched again (at login and at every dial). The device's
    /// list is replaced; sessions keep their model, and one whose model the instance no longer
    /// serves has its next prompt refused with -32602 naming it. A change that lists or
    /// unlists `model` and `configure` (models where there were none, or none left) is a
    /// handshake change, and restarts the link as new settings do; any other keeps it. Returns
    /// whether anything changed.
    pub fn set_models(&mut self, models: Vec<Model>, now: Time) -> bool {
        self.clock.advance(now);
        if models == self.config.models {
            return false;
        }
        self.change_config(|config| config.models = models);
        true
    }

    /// Change the settings: when what a link's hello and `initialize` say changed, the link
    /// restarts once nothing holds it.
    fn change_config(&mut self, change: impl FnOnce(&mut DeviceConfig)) {
        let before = self.announced();
        change(&mut self.config);
        if self.announced() != before {
            self.link.settings_changed();
        }
        self.after_input();
    }

    /// What a link's hello and `initialize` say that the settings decide.
    fn announced(&self) -> (Limits, Vec<&'static str>) {
        (
            self.limits(),
            self.capabilities_for(ConnKind::Link).collect(),
        )
    }

    /// Whether a link restart for new settings waits for the sessions to go idle.
    pub fn relink_pending(&self) -> bool {
        self.link.restart_due()
    }

    /// Restart the link for new settings if one is pending, no turn runs or waits, and no
    /// terminal is open on the link. Part of the step that ends every input
    /// (`Device::after_input`), so whichever input ends the last of them lets the restart go.
    pub(super) fn relink_if_idle(&mut self) {
        // Looked at after every input: the sessions are looked at only while one is due.
        if !self.link.restart_due() {
            return;
        }
        let link = self.conns.link();
        let owners = self.terminals().map(|(_, owner)| owner);
        let busy = restart_held(&self.sessions, owners, link, &self.conns);
        if !self.link.take_restart(busy) {
            return;
        }
        if let Some(conn) = link {
            // Behind what is already queued for it, so every answer sent before still leaves.
            self.out
                .close(conn, CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED.into());
            // The device lets go of a connection it closes (the shell reports no close for it).
            self.let_go(conn);
        }
        self.link.redial_now(&mut self.out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::ClientEvent;
    use crate::config::{DeviceConfig, Mode};
    use crate::device::connection::Connection;
    use crate::device::{Effect, Output};
    use crate::testing::{Dir, Pair};

    fn remote(max_mode: Mode) -> Remote {
        Remote {
            max_mode,
            ..Remote::open(&["/work"])
        }
    }

    #[test]
    fn an_invalid_remote_is_refused_and_the_old_one_kept() {
        let config = DeviceConfig {
            remote: remote(Mode::Edit),
            ..DeviceConfig::default()
        };
        let mut d = Device::new(config, Time(0)).unwrap();
        let mut bad = remote(Mode::Auto);
        bad.roots = vec!["relative/dir".into()];
        let e = d.reconfigure(bad, Time(1)).unwrap_err();
        assert!(
            e.0.contains("remote.roots") && e.0.contains("relative/dir"),
            "{e}"
        );
        assert_eq!(d.config().remote, remote(Mode::Edit));
        assert!(!d.relink_pending());
        assert_eq!(d.reconfigure(remote(Mode::Edit), Time(2)), Ok(false));
    }

    #[test]
    fn with_no_link_up_nothing_is_closed_or_dialled() {
        let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        assert_eq!(d.reconfigure(remote(Mode::Plan), Time(1)), Ok(true));
        assert!(!d.relink_pending());
        assert_eq!(d.poll_output(), None);
        assert_eq!(d.config().remote.max_mode, Mode::Plan);
    }

    #[test]
    fn a_restart_waits_for_a_turn_a_terminal_on_the_link_or_a_gated_request() {
        use crate::device::turn_table::Admission;
        use crate::engine::TurnStart;
        use crate::jsonrpc::Id;
        let (editor, link) = (ConnId(1), ConnId(2));
        let mut conns = Connections::default();
        conns.insert(editor, Connection::new(ConnKind::Stdio));
        conns.insert(link, Connection::new(ConnKind::Link));
        assert_eq!(conns.link(), Some(link));
        let mut sessions = SessionSet::default();
        sessions.insert_live(crate::device::live::tests::session("s"));
        let held = |sessions: &SessionSet, owners: &[ConnId], conns: &Connections| {
            restart_held(sessions, owners.iter().copied(), Some(link), conns)
        };
        assert!(!held(&sessions, &[], &conns), "nothing works");
        assert!(
            !held(&sessions, &[editor], &conns),
            "a terminal of an editor does not die with the link"
        );
        assert!(held(&sessions, &[editor, link], &conns));
        conns.get_mut(&editor).unwrap().gate = Some(0);
        assert!(
            held(&sessions, &[], &conns),
            "a request waits for its session"
        );
        conns.get_mut(&editor).unwrap().gate = None;
        let s = sessions.get_mut("s").unwrap();
        let start = TurnStart::testing("t", "hi");
        s.turns
            .admit(start, Admission::default(), (editor, Id::number(1)));
        assert!(held(&sessions, &[], &conns), "a turn waits to run");
        conns.remove(&link);
        assert_eq!(conns.link(), None);
    }

    /// When each hello reached the client, and the max_mode it carried.
    fn hellos(pair: &Pair) -> Vec<(Time, serde_json::Value)> {
        pair.transcript
            .iter()
            .filter(|t| t.dir == Dir::ToClient && t.frame.contains("\"_lembas/hello\""))
            .map(|t| {
                let v: serde_json::Value = serde_json::from_str(&t.frame).unwrap();
                (t.at, v["params"]["limits"]["max_mode"].clone())
            })
            .collect()
    }

    #[test]
    fn the_link_restarts_once_the_running_turn_ends_and_redials_at_once() {
        let mut pair = Pair::default_with_roots(&["/work"]);
        pair.start().unwrap();
        let session = pair.new_session("/work/p");
        pair.client
            .prompt(
                &session,
                json!([{ "type": "text", "text": "say one\nsleep 5000\nsay two" }]),
                Some("msg_1"),
                pair.now,
            )
            .unwrap();
        pair.advance(1000).unwrap();
        let link = pair.link();
        let dials = pair.dials;
        let mut new = pair.device.config().remote.clone();
        new.max_mode = Mode::Plan;
        let changed_at = pair.now;
        assert_eq!(pair.device.reconfigure(new, pair.now), Ok(true));
        pair.drive().unwrap();
        // The turn runs on: the link stays up, nothing is dialled.
        pair.advance(3000).unwrap();
        assert!(pair.device.relink_pending());
        assert_eq!(pair.link(), link);
        assert_eq!(pair.dials, dials);
        assert!(pair.device_closes.is_empty());
        pair.advance(3000).unwrap();
        // The turn ended and its answer reached the client; then the link closed with 1012
        // and was dialled at the same instant, and the new hello says the new max_mode.
        let answered = pair.client_events.iter().any(|e| {
            matches!(e, ClientEvent::PromptAnswered { turn_id, outcome: Ok(v), .. }
                if turn_id == "msg_1" && v["stopReason"] == "end_turn")
        });
        assert!(answered, "{:?}", pair.client_events);
        assert!(!pair.device.relink_pending());
        assert_eq!(
            pair.device_closes,
            vec![(CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED.to_string())]
        );
        assert_eq!(pair.dials, dials + 1);
        assert_ne!(pair.link(), link);
        let answer_at = pair
            .transcript
            .iter()
            .find(|t| t.dir == Dir::ToClient && t.frame.contains("\"stopReason\""))
            .map(|t| t.at)
            .unwrap();
        assert!(answer_at >= changed_at.plus_ms(4000), "{answer_at:?}");
        let hellos = hellos(&pair);
        assert_eq!(hellos.len(), 2, "{hellos:?}");
        assert_eq!(hellos[0].1, "edit");
        assert_eq!(hellos[1], (answer_at, json!("plan")));
        // The client took the new link up: it is ready again, with nothing left to reattach.
        assert!(pair.client.incomplete().is_empty());
    }

    /// A restart for new settings held by a minute-long turn of a new session; the session.
    fn held_by_a_running_turn(pair: &mut Pair) -> String {
        pair.start().unwrap();
        let session = pair.new_session("/work/p");
        pair.client
            .prompt(
                &session,
                json!([{ "type": "text", "text": "say one\nsleep 60000\nsay two" }]),
                Some("msg_1"),
                pair.now,
            )
            .unwrap();
        pair.advance(1000).unwrap();
        let mut new = pair.device.config().remote.clone();
        new.max_mode = Mode::Plan;
        assert_eq!(pair.device.reconfigure(new, pair.now), Ok(true));
        pair.drive().unwrap();
        assert!(pair.device.relink_pending());
        session
    }

    /// Any input that leaves the device idle lets the restart go, not only a turn's end: here
    /// the session whose turn held it is deleted, by the client or by the device's own user.
    #[test]
    fn deleting_the_session_of_the_running_turn_lets_the_restart_go_at_once() {
        for by_client in [true, false] {
            let mut pair = Pair::default_with_roots(&["/work"]);
            let session = held_by_a_running_turn(&mut pair);
            if by_client {
                pair.call("_lembas/session/delete", json!({ "sessionId": session }))
                    .unwrap();
            } else {
                assert!(pair.device.delete_session(&session, pair.now));
                pair.drive().unwrap();
            }
            assert!(!pair.device.relink_pending(), "by client: {by_client}");
            assert_eq!(
                pair.device_closes,
                vec![(CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED.to_string())],
                "by client: {by_client}"
            );
        }
    }

    #[test]
    fn an_open_remote_terminal_holds_the_restart_until_it_closes() {
        let mut pair = Pair::default_with(&["/work"], |d| d.remote.terminal = true);
        pair.start().unwrap();
        let opened = pair.call("_lembas/terminal/open", json!({})).unwrap();
        let id = opened["terminalId"].as_str().unwrap().to_string();
        let (link, dials) = (pair.link(), pair.dials);
        let mut new = pair.device.config().remote.clone();
        new.max_mode = Mode::Plan;
        assert_eq!(pair.device.reconfigure(new, pair.now), Ok(true));
        pair.advance(5000).unwrap();
        assert!(pair.device.relink_pending());
        assert_eq!((pair.link(), pair.dials), (link, dials));
        pair.client
            .notify(
                "_lembas/terminal/close",
                &json!({ "terminalId": id }),
                pair.now,
            )
            .unwrap();
        // The shell's exit lets the restart go at once, with no timer to wait for.
        pair.settle().unwrap();
        assert!(!pair.device.relink_pending());
        assert_eq!(
            pair.device_closes,
            vec![(CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED.to_string())]
        );
        assert_eq!(pair.dials, dials + 1);
        assert_eq!(hellos(&pair).last().unwrap().1, "plan");
    }

    /// A terminal still starting holds a restart too; a shell that fails to start lets it go
    /// at once. (Before every input ended in `after_input`, `handle_terminal_opened` did not
    /// look, and the restart waited for the next timer.)
    #[test]
    fn a_shell_that_fails_to_start_lets_the_restart_go_at_once() {
        let config = DeviceConfig {
            remote: Remote {
                terminal: true,
                ..remote(Mode::Edit)
            },
            ..DeviceConfig::default()
        };
        let mut d = Device::new(config, Time(0)).unwrap();
        d.start_link(Time(0));
        let link = d.handle_open(ConnKind::Link, Time(1)).unwrap();
        let init =
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
        d.handle_frame(link, init, Time(2)).unwrap();
        let open = br#"{"jsonrpc":"2.0","id":2,"method":"_lembas/terminal/open","params":{}}"#;
        d.handle_frame(link, open, Time(3)).unwrap();
        let outputs = |d: &mut Device| std::iter::from_fn(|| d.poll_output()).collect::<Vec<_>>();
        let request = outputs(&mut d)
            .into_iter()
            .find_map(|o| match o {
                Output::Effect(Effect::ResolvePath { request, .. }) => Some(request),
                _ => None,
            })
            .expect("the terminal's cwd is resolved first");
        d.handle_path_resolved(request, Ok("/work".into()), Time(4));
        let terminal_id = outputs(&mut d)
            .into_iter()
            .find_map(|o| match o {
                Output::Effect(Effect::OpenTerminal { terminal_id, .. }) => Some(terminal_id),
                _ => None,
            })
            .expect("the shell is asked to start");
        assert_eq!(d.reconfigure(remote(Mode::Plan), Time(5)), Ok(true));
        assert!(
            d.relink_pending(),
            "the starting terminal holds the restart"
        );
        assert!(!d.handle_terminal_opened(&terminal_id, Err("no pty".into()), Time(6)));
        assert!(!d.relink_pending());
        let closed = outputs(&mut d).into_iter().any(|o| {
            matches!(o, Output::Close { conn, code: CLOSE_SETTINGS_CHANGED, .. } if conn == link)
        });
        assert!(closed, "the link restarts with no timer to wait for");
    }

    /// A new model list that still has models keeps the link and the sessions' models; the
    /// session whose model went has its next prompt refused, naming it. One that leaves none
    /// unlists `model` and `configure`: the link restarts, and lists neither again.
    #[test]
    fn a_model_list_change_restarts_the_link_only_when_it_flips_model_and_configure() {
        let mut pair = Pair::default_with_roots(&["/work"]);
        pair.start().unwrap();
        let listed = |pair: &Pair, cap: &str| pair.client.capabilities().iter().any(|c| c == cap);
        assert!(listed(&pair, "model") && listed(&pair, "configure"));
        let session = pair.new_session("/work/p");
        let (link, dials) = (pair.link(), pair.dials);
        let other = vec![Model::served("other/model")];
        assert!(pair.device.set_models(other.clone(), pair.now));
        pair.settle().unwrap();
        assert!(
            !pair.device.set_models(other.clone(), pair.now),
            "nothing changed"
        );
        assert!(!pair.device.relink_pending());
        assert_eq!((pair.link(), pair.dials), (link, dials));
        assert!(pair.device_closes.is_empty());
        assert_eq!(pair.device.config().models, other);
        let status = pair
            .call("_lembas/session/status", json!({ "sessionId": session }))
            .unwrap();
        assert_eq!(status["exists"], true);
        pair.client
            .prompt(
                &session,
                json!([{ "type": "text", "text": "hi" }]),
                Some("t1"),
                pair.now,
            )
            .unwrap();
        pair.settle().unwrap();
        let refused = pair.answers("t1");
        let message = match refused.as_slice() {
            [Err(e)] => e.message.clone(),
            other => panic!("the prompt should be refused: {other:?}"),
        };
        assert!(
            message.contains("`lembas/default`, which the instance no longer serves"),
            "{message}"
        );
        assert_eq!(pair.starts("t1"), 0);
        // None left: a handshake change.
        assert!(pair.device.set_models(Vec::new(), pair.now));
        pair.settle().unwrap();
        assert_eq!(
            pair.device_closes,
            vec![(CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED.to_string())]
        );
        assert_eq!(pair.dials, dials + 1);
        assert!(pair.client.is_ready());
        assert!(!listed(&pair, "model") && !listed(&pair, "configure"));
        pair.client
            .prompt(
                &session,
                json!([{ "type": "text", "text": "hi" }]),
                Some("t2"),
                pair.now,
            )
            .unwrap();
        pair.settle().unwrap();
        let refused = format!("{:?}", pair.answers("t2"));
        assert!(refused.contains("the device is not logged in"), "{refused}");
        // And back: listed again, after another restart.
        assert!(pair.device.set_models(other, pair.now));
        pair.settle().unwrap();
        assert_eq!(pair.device_closes.len(), 2);
        assert!(listed(&pair, "model") && listed(&pair, "configure"));
    }

    /// A change the hello and `initialize` do not show keeps the link (it used to close it
    /// with 1012); one they show restarts it.
    #[test]
    fn only_a_change_the_handshake_shows_restarts_the_link() {
        let mut pair = Pair::default_with_roots(&["/work"]);
        pair.start().unwrap();
        let (link, dials) = (pair.link(), pair.dials);
        let mut quiet = pair.device.config().remote.clone();
        quiet.approval_timeout_ms = 5_000;
        quiet.trusted.push("/work/other".into());
        assert_eq!(pair.device.reconfigure(quiet.clone(), pair.now), Ok(true));
        pair.settle().unwrap();
        assert!(!pair.device.relink_pending());
        assert_eq!((pair.link(), pair.dials), (link, dials));
        assert!(pair.device_closes.is_empty());
        assert_eq!(pair.device.config().remote.approval_timeout_ms, 5_000);
        // Each of these is in the hello or `initialize`.
        let changes: [fn(&mut Remote); 4] = [
            |r| r.roots.push("/srv".into()),
            |r| r.require_trust = !r.require_trust,
            |r| r.terminal = !r.terminal,
            |r| r.enabled = false,
        ];
        for (i, change) in changes.into_iter().enumerate() {
            let mut next = pair.device.config().remote.clone();
            change(&mut next);
            assert_eq!(pair.device.reconfigure(next, pair.now), Ok(true));
            pair.settle().unwrap();
            assert_eq!(pair.device_closes.len(), i + 1, "change {i}");
            assert_eq!(pair.dials, dials + i + 1, "change {i}");
        }
    }
}
