//! The device's remote limits as they are at the moment of each request (the spec: "the
//! device's limits apply to every request as they are at that moment"). A session made while
//! remote work was on, in a root since removed, or in a directory since untrusted is not used
//! from the link: every request that runs, changes or reads its content passes [`Device::admit`]
//! first, whether the session is in memory or opened again from the store.
//!
//! The rules are about remote work over the instance link (`remote.*`): an editor on
//! `serve --stdio` and a terminal on the device are the device's own person at the device, and
//! work where they are, as `session/new` lets them (its `initialize` says `limits: null`).

use super::connection::{Connection, Hold};
use super::{ConnId, ConnKind, Device};
use crate::config::Remote;
use crate::jsonrpc::RpcError;
use crate::methods::MethodSpec;
use crate::paths;

impl Device {
    /// Whether a request on `conn` may use session `session`, whose directory is `dir`, under
    /// the limits of this moment: remote work on, `dir` inside `remote.roots`, and trusted when
    /// `remote.require_trust`. Only the link is held to them (see the module doc). `dir` is the
    /// session's stored directory (lexical), or the same directory with symlinks followed.
    pub(super) fn admit(&self, conn: ConnId, session: &str, dir: &str) -> Result<(), RpcError> {
        if !self.on_link(conn) {
            return Ok(());
        }
        admit_over_link(&self.config.remote, session, dir)
    }

    /// The rules a directory of remote work passes (see [`check_directory`]).
    pub(super) fn check_directory(&self, dir: &str) -> Result<String, RpcError> {
        check_directory(&self.config.remote, dir)
    }
}

/// Whether a request over the link may use session `session`, whose directory is `dir`.
pub(super) fn admit_over_link(remote: &Remote, session: &str, dir: &str) -> Result<(), RpcError> {
    check_directory(remote, dir).map(drop).map_err(|e| {
        RpcError::invalid_params(format!(
            "session `{session}` cannot be used over the link now: {}",
            e.message
        ))
    })
}

/// The rules a directory of remote work passes, in order: remote work on, some roots, `dir`
/// inside one of them, and trusted when `remote.require_trust`. The root, or the reason.
pub(super) fn check_directory(remote: &Remote, dir: &str) -> Result<String, RpcError> {
    let root = check_roots(remote, dir)?.to_string();
    if remote.require_trust && paths::within(dir, &remote.trusted).is_none() {
        return Err(RpcError::invalid_params(format!(
            "`{dir}` is not in a trusted project (remote.require_trust is on; \
             trust it on the device with `lembas trust`)"
        )));
    }
    Ok(root)
}

/// Remote work on, some roots, and `path` inside one of them: the root, or the reason.
pub(super) fn check_roots<'a>(remote: &'a Remote, path: &str) -> Result<&'a str, RpcError> {
    remote_work_allowed(remote)?;
    paths::within(path, &remote.roots).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "`{path}` is outside the device's roots ({})",
            remote.roots.join(", ")
        ))
    })
}

/// Remote work on and some roots, or the reason no folder is allowed.
pub(super) fn remote_work_allowed(remote: &Remote) -> Result<(), RpcError> {
    if !remote.enabled {
        return Err(RpcError::invalid_params(
            "remote work is off on this device (remote.enabled is false)",
        ));
    }
    if remote.roots.is_empty() {
        return Err(RpcError::invalid_params(
            "this device allows no folder yet (remote.roots is empty)",
        ));
    }
    Ok(())
}

/// The close code for a client that sent more than `sessions.max_held_bytes` while a request
/// waited for its directory check (WebSocket's "policy violation").
pub const CLOSE_HELD_OVERFLOW: u16 = 1008;

/// A session request waiting for the shell to resolve its session's directory.
#[derive(Debug)]
pub(crate) struct Gate {
    conn: ConnId,
    session: String,
    dir: String,
    /// The request itself, run once the directory passes.
    frame: Vec<u8>,
}

impl Gate {
    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// A request on the link `conn` about `session`, whose directory is `dir`, checked
    /// lexically under the limits of this moment: `Ok(Some)`, the gate it waits at while the
    /// shell resolves `dir`; `Ok(None)`, it runs now, refused, and its handler answers that
    /// (`answers_refusal`); `Err`, the refusal.
    fn lexical(
        remote: &Remote,
        answers_refusal: bool,
        conn: ConnId,
        session: String,
        dir: String,
        frame: &[u8],
    ) -> Result<Option<Gate>, RpcError> {
        match admit_over_link(remote, &session, &dir) {
            Ok(()) => Ok(Some(Gate {
                conn,
                session,
                dir,
                frame: frame.to_vec(),
            })),
            Err(_) if answers_refusal => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The session's real directory, from what the shell resolved it to (normalized), or why
    /// the request is refused without it.
    fn real_dir(&self, resolved: Result<String, String>) -> Result<String, RpcError> {
        let real = resolved.map_err(|why| {
            RpcError::invalid_params(format!(
                "session `{}` cannot be used over the link now: its directory `{}` cannot be \
                 checked: {why}",
                self.session, self.dir
            ))
        })?;
        paths::normalize(&real).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "session `{}`: its directory `{}` did not resolve",
                self.session, self.dir
            ))
        })
    }
}

/// The session a request names, if any (`files/search` and `commands` may name a `cwd`
/// instead; that one is checked as `session/new`'s is).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Named {
    session_id: Option<String>,
}

/// The session a request's params name, if they name one.
fn named_session(params: Option<&serde_json::value::RawValue>) -> Option<String> {
    params
        .and_then(|p| serde_json::from_str::<Named>(p.get()).ok())
        .and_then(|n| n.session_id)
}

impl Device {
    /// A request of `spec`'s method on `conn` about to run: when it is `dir_checked`, over the
    /// link, the session's directory is checked lexically now (`Err`: refused), then resolved by
    /// the shell; `Ok(true)` means the request waits for that ([`Device::gate_resolved`]) and
    /// every frame after it on `conn` waits behind it, so requests keep their order.
    pub(super) fn gate(
        &mut self,
        conn: ConnId,
        spec: &MethodSpec,
        params: Option<&serde_json::value::RawValue>,
        frame: &[u8],
    ) -> Result<bool, RpcError> {
        let Some(c) = self
            .conns
            .get_mut(&conn)
            .filter(|c| c.kind == ConnKind::Link && spec.dir_checked)
        else {
            return Ok(false);
        };
        let Some(session) = named_session(params) else {
            return Ok(false);
        };
        // One set aside reaches here only for what is answered without reading it back (a
        // catch-up, event_log.rs): its directory is checked all the same.
        let dir = match self.sessions.get(&session) {
            Some(s) => Some(s.durable.cwd.clone()),
            None => self
                .sessions
                .set_aside_summary(&session)
                .map(|s| s.cwd.to_string()),
        };
        let Some(dir) = dir else {
            // Unknown: the handler says so.
            return Ok(false);
        };
        let remote = &self.config.remote;
        let Some(gate) = Gate::lexical(remote, spec.answers_refusal, conn, session, dir, frame)?
        else {
            // Refused: its handler answers that itself (runs with `admitted` false).
            return Ok(false);
        };
        let dir = gate.dir.clone();
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Gate(Box::new(gate)));
        c.gate = Some(request);
        self.out.resolve_path(request, dir);
        Ok(true)
    }

    /// The shell resolved a gated request's session directory: the request runs if the
    /// directory, symlinks followed, still passes the limits of this moment; then the frames
    /// held behind it run in order.
    pub(super) fn gate_resolved(&mut self, gate: Gate, resolved: Result<String, String>) {
        let Some(c) = self.conns.get_mut(&gate.conn) else {
            return;
        };
        c.gate = None;
        let admitted = gate
            .real_dir(resolved)
            .and_then(|real| self.admit(gate.conn, &gate.session, &real));
        self.run_frame(gate.conn, &gate.frame, Some(admitted));
        self.release_held(gate.conn);
    }

    /// Hold `frame` behind a request waiting for its directory check, if one waits on `conn`.
    /// Past `sessions.max_held_bytes` the client is flooding: the connection is closed.
    pub(super) fn hold(&mut self, conn: ConnId, frame: &[u8]) -> bool {
        let max = self.config.sessions.max_held_bytes;
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        match c.hold(frame, max) {
            Hold::NothingWaits => false,
            Hold::Held => true,
            Hold::Over => {
                self.close_connection(
                    conn,
                    CLOSE_HELD_OVERFLOW,
                    format!(
                        "over {max} bytes arrived while a request waited for its directory \
                         check (sessions.max_held_bytes)"
                    ),
                );
                true
            }
        }
    }

    /// Run the frames held on `conn`, in order, until one waits again.
    pub(super) fn release_held(&mut self, conn: ConnId) {
        while let Some(frame) = self.conns.get_mut(&conn).and_then(Connection::next_held) {
            self.run_frame(conn, &frame, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::{DeviceConfig, Remote};
    use crate::device::{Effect, Output};
    use crate::time::Time;

    /// A linked device over `/w` whose shell answers nothing but persists: what it sent, and
    /// the paths it was asked to resolve.
    struct Bare {
        d: Device,
        link: ConnId,
        sent: Vec<Value>,
        resolves: Vec<(u64, String)>,
        closes: Vec<(u16, String)>,
        /// Persists are kept here unwritten, not acknowledged at once.
        hold_persists: bool,
        unwritten: Vec<u64>,
    }

    impl Bare {
        fn new(tweak: impl FnOnce(&mut DeviceConfig)) -> Bare {
            let mut c = DeviceConfig {
                remote: Remote::open(&["/w"]),
                ..DeviceConfig::default()
            };
            tweak(&mut c);
            let mut d = Device::new(c, Time(0)).unwrap();
            d.start_link(Time(0));
            let mut b = Bare {
                link: ConnId(0),
                d,
                sent: Vec::new(),
                resolves: Vec::new(),
                closes: Vec::new(),
                hold_persists: false,
                unwritten: Vec::new(),
            };
            b.drain();
            b.link = b.d.handle_open(ConnKind::Link, Time(0)).unwrap();
            b.frame(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                            "params": { "protocolVersion": 1 } }));
            b
        }

        fn drain(&mut self) {
            while let Some(o) = self.d.poll_output() {
                match o {
                    Output::Send { frame, .. } => {
                        self.sent.push(serde_json::from_slice(&frame).unwrap())
                    }
                    Output::Close { code, reason, .. } => self.closes.push((code, reason)),
                    Output::Effect(Effect::Persist { seq, .. }) if self.hold_persists => {
                        self.unwritten.push(seq)
                    }
                    Output::Effect(Effect::Persist { seq, .. }) => {
                        self.d.handle_persisted(seq, Time(0))
                    }
                    Output::Effect(Effect::ResolvePath { request, path }) => {
                        self.resolves.push((request, path))
                    }
                    Output::Effect(_) | Output::Ping { .. } | Output::Engine(_) => {}
                }
            }
        }

        fn frame(&mut self, v: Value) {
            let bytes = serde_json::to_vec(&v).unwrap();
            self.d.handle_frame(self.link, &bytes, Time(0)).unwrap();
            self.drain();
        }

        /// Answer the oldest path the device asked about with `to`.
        fn resolve(&mut self, to: &str) {
            let (request, _) = self.resolves.remove(0);
            self.d.handle_path_resolved(request, Ok(to.into()), Time(0));
            self.drain();
        }

        fn answer(&self, id: u64) -> Option<&Value> {
            self.sent.iter().find(|f| f["id"] == id)
        }

        fn session(&mut self) -> String {
            self.frame(json!({ "jsonrpc": "2.0", "id": 1, "method": "session/new",
                               "params": { "cwd": "/w/p" } }));
            self.resolve("/w/p");
            self.answer(1).unwrap()["result"]["sessionId"]
                .as_str()
                .unwrap()
                .to_string()
        }
    }

    #[test]
    fn a_request_over_the_link_is_checked_lexically_then_waits_for_its_real_directory() {
        let remote = Remote::open(&["/w"]);
        let lexical = |answers_refusal, dir: &str| {
            Gate::lexical(
                &remote,
                answers_refusal,
                ConnId(3),
                "s".into(),
                dir.into(),
                b"f",
            )
        };
        let gate = lexical(false, "/w/p")
            .unwrap()
            .expect("inside the roots: it waits");
        assert_eq!(
            (gate.conn(), gate.dir.as_str(), gate.frame.as_slice()),
            (ConnId(3), "/w/p", &b"f"[..])
        );
        let outside = "session `s` cannot be used over the link now: `/etc` is outside the \
                       device's roots (/w)";
        assert_eq!(lexical(false, "/etc").unwrap_err().message, outside);
        assert!(
            lexical(true, "/etc").unwrap().is_none(),
            "its handler answers the refusal"
        );
        assert_eq!(gate.real_dir(Ok("/w/./q/".into())), Ok("/w/q".into()));
        assert_eq!(
            gate.real_dir(Ok("/etc".into())),
            Ok("/etc".into()),
            "the limits are the device's to apply"
        );
        let refused = |resolved| gate.real_dir(resolved).unwrap_err().message;
        assert_eq!(
            refused(Err("gone".into())),
            "session `s` cannot be used over the link now: its directory `/w/p` cannot be \
             checked: gone"
        );
        assert_eq!(
            refused(Ok("q".into())),
            "session `s`: its directory `/w/p` did not resolve"
        );
    }

    #[test]
    fn the_session_a_request_names_is_its_session_id_if_any() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        let named = raw(r#"{ "sessionId": "s", "x": 1 }"#);
        assert_eq!(named_session(Some(&named)), Some("s".into()));
        for params in [r#"{ "cwd": "/w" }"#, r#"{ "sessionId": 7 }"#, "[]"] {
            assert_eq!(named_session(Some(&raw(params))), None, "{params}");
        }
        assert_eq!(named_session(None), None);
    }

    #[test]
    fn requests_behind_one_waiting_for_its_check_keep_their_order() {
        let mut b = Bare::new(|_| {});
        let s = b.session();
        b.frame(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "session/set_mode",
                        "params": { "sessionId": s, "modeId": "plan" } }),
        );
        // Not a session request, but it waits behind one all the same.
        b.frame(
            json!({ "jsonrpc": "2.0", "id": 3, "method": "_lembas/session/delete",
                        "params": { "sessionId": "ses_unknown" } }),
        );
        b.frame(
            json!({ "jsonrpc": "2.0", "id": 4, "method": "_lembas/session/title",
                        "params": { "sessionId": s, "title": "t" } }),
        );
        assert_eq!(b.resolves, vec![(1, "/w/p".to_string())]);
        assert!(b.answer(2).is_none() && b.answer(3).is_none() && b.answer(4).is_none());
        b.resolve("/w/p");
        assert_eq!(b.answer(2).unwrap()["result"], json!({}));
        assert_eq!(b.answer(3).unwrap()["result"]["deleted"], false);
        // The title waits for its own check.
        assert!(b.answer(4).is_none());
        // Re-pointed meanwhile: refused, with the resolved path and the roots.
        b.resolve("/etc");
        let e = &b.answer(4).unwrap()["error"];
        assert_eq!(e["code"], -32602);
        let m = e["message"].as_str().unwrap();
        assert!(
            m.contains("`/etc` is outside the device's roots (/w)"),
            "{m}"
        );
        let ids: Vec<&Value> = b.sent.iter().map(|f| &f["id"]).collect();
        let pos = |n: u64| ids.iter().position(|i| **i == n).unwrap();
        assert!(pos(2) < pos(3) && pos(3) < pos(4), "{ids:?}");
    }

    /// Prompts sent at once: the one behind is checked as soon as the one before has run, not
    /// once its turn is written. (Waiting for that commit, 100 prompts started one commit
    /// apart, and the link's later frames, every session's stream among them, waited too.)
    #[test]
    fn a_directory_check_waits_for_no_commit() {
        let mut b = Bare::new(|_| {});
        let s = b.session();
        b.hold_persists = true;
        for id in [2, 3] {
            b.frame(
                json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
                            "params": { "sessionId": s,
                                        "prompt": [{ "type": "text", "text": "go" }] } }),
            );
        }
        assert_eq!(
            b.resolves.len(),
            1,
            "the second prompt waits behind the first"
        );
        b.resolve("/w/p");
        assert!(
            !b.unwritten.is_empty(),
            "the first prompt ran: its turn is being written"
        );
        assert_eq!(
            b.resolves.len(),
            1,
            "the second prompt's check is asked while the first's turn is not yet written"
        );
    }

    #[test]
    fn a_link_that_floods_while_a_request_waits_is_closed_naming_the_bound() {
        let mut b = Bare::new(|c| {
            c.frames.max_frame_bytes = 2048;
            c.sessions.max_held_bytes = 4096;
        });
        let s = b.session();
        b.frame(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "_lembas/session/history",
                        "params": { "sessionId": s } }),
        );
        let filler = "x".repeat(1500);
        for id in 3..6 {
            assert!(b.closes.is_empty(), "closed after {} frames", id - 3);
            b.frame(
                json!({ "jsonrpc": "2.0", "id": id, "method": "_lembas/session/title",
                            "params": { "sessionId": s, "title": filler } }),
            );
        }
        assert_eq!(b.closes.len(), 1, "{:?}", b.closes);
        assert_eq!(b.closes[0].0, CLOSE_HELD_OVERFLOW);
        assert!(b.closes[0].1.contains("4096") && b.closes[0].1.contains("max_held_bytes"));
        assert_eq!(b.d.connections().count(), 0);
    }
}
