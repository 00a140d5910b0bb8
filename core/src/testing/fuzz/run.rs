//! The shell around the device under fuzz ([`Run`]): the Pair's fake OS (`testing/fake_os.rs`,
//! here with held persists, paths named "missing" that fail and a flaky disk) and the ledger of everything said, against which the fuzzer's invariants are
//! checked after every operation.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::DeviceConfig;
use crate::device::{
    ConnId, ConnKind, Device, DialFailure, Effect, Handled, Input, Misuse, Refused,
};
use crate::engine::Engine;
use crate::host::{self, ShellOutput};
use crate::methods::{Direction, Kind, METHODS};
use crate::scripted::ScriptedEngine;
use crate::time::Time;

use super::grammar::{Failure, Op, Reconfig};
use super::{lossy, MAX_OUTPUTS_PER_OP};
use crate::testing::connections::Connections;
use crate::testing::fake_os::FakeOs;
use crate::testing::oracle::Conversations;
use crate::testing::persist_order::PersistOrder;

/// The shell around the device, and the ledger the checks are made against.
pub(crate) struct Run {
    pub(crate) config: DeviceConfig,
    pub(crate) device: Device,
    pub(crate) engine: ScriptedEngine,
    /// The fake OS the device runs on (the Pair's): its store outlives a restart.
    pub(crate) os: FakeOs,
    pub(crate) persists: PersistOrder,
    pub(crate) now: Time,
    pub(crate) ops: usize,
    /// Session ids the device handed out (they outlive a restart, as the store does).
    pub(crate) sessions: Vec<String>,
    /// Everything below is per process.
    /// The device's connections and dials, checked as they come and go (the Pair keeps one
    /// too).
    pub(crate) conns: Connections,
    pub(crate) started: bool,
    /// What was said on each connection, checked as it is said (the oracle the Pair runs too).
    pub(crate) talk: Conversations,
    /// Terminals whose shell runs: opened, and not exited or hung up.
    pub(crate) terminals: BTreeSet<String>,
    /// Terminals whose shell exited while outputs waited behind a held persist: keystrokes or
    /// a hang-up the device queued before it heard of the exit may still come out.
    pub(crate) exited: BTreeSet<String>,
}

/// What one drain saw.
#[derive(Default)]
pub(crate) struct Drained {
    pub(crate) dials: usize,
}

impl Run {
    pub(crate) fn new(config: DeviceConfig, defer_persist: bool) -> Run {
        let device = Device::new(config.clone(), Time::ZERO).expect("the fuzz config is valid");
        Run {
            config,
            device,
            engine: ScriptedEngine::new(),
            os: FakeOs {
                hold_persists: defer_persist,
                missing_paths_fail: true,
                every_fifth_write_fails: true,
                files: [
                    ("/tmp/a.md", "one\ntwo\nthree\n"),
                    ("/tmp/my notes.md", "notes"),
                    ("/tmp/a#b.md", "hash"),
                    ("/tmp/src/lib.rs", "fn a() {}"),
                    ("/tmp/x/secret", "secret"),
                    ("/tmp/.git/config", "secret"),
                    ("/etc/passwd", "secret"),
                ]
                .into_iter()
                .map(|(path, text)| (path.to_string(), text.as_bytes().to_vec()))
                .collect(),
                protected: vec![crate::confine::Protected::Name(".git".into())],
                ..FakeOs::default()
            },
            persists: PersistOrder::default(),
            now: Time::ZERO,
            ops: 0,
            sessions: Vec::new(),
            conns: Connections::default(),
            started: false,
            talk: Conversations::default(),
            terminals: BTreeSet::new(),
            exited: BTreeSet::new(),
        }
    }

    /// The process died: forget every per-process fact.
    pub(crate) fn forget_process(&mut self) {
        self.persists = PersistOrder::default();
        self.engine.forget_all();
        self.conns.forget();
        self.started = false;
        self.talk = Conversations::default();
        self.terminals.clear();
        self.exited.clear();
    }

    /// Give the device one input the way a shell writes it down: through the one place every
    /// input is routed ([`Device::handle`]).
    fn input(&mut self, input: Input) -> Result<Handled, Refused> {
        self.device.handle(input, self.now)
    }

    pub(crate) fn pick(&self, k: u8) -> Option<(ConnId, ConnKind)> {
        let open = &self.conns.open;
        if open.is_empty() {
            return None;
        }
        let i = usize::from(k) % open.len();
        open.iter().nth(i).map(|(c, k)| (*c, *k))
    }

    /// An editor on stdio, or a local process on the hub: either opens at any time.
    fn open_local(&mut self, kind: ConnKind) {
        let Ok(Handled::Opened(conn)) = self.input(Input::Open { kind }) else {
            panic!("a local connection opens at any time");
        };
        self.opened(conn, kind);
        self.drain();
    }

    pub(crate) fn step(&mut self, op: &Op) {
        self.ops += 1;
        match op {
            Op::OpenLink => self.open_link(),
            Op::OpenStdio => self.open_local(ConnKind::Stdio),
            Op::OpenHub => self.open_local(ConnKind::Hub),
            Op::Frame { conn, frame } => {
                if let Some((conn, _)) = self.pick(*conn) {
                    let bytes = frame.bytes(&self.sessions);
                    self.feed(conn, &bytes);
                }
            }
            Op::Rpc { conn, rpc } => {
                if let Some((conn, _)) = self.pick(*conn) {
                    let bytes = rpc.bytes(&self.sessions);
                    self.feed(conn, &bytes);
                }
            }
            Op::Close { conn, code } => {
                if let Some((conn, kind)) = self.pick(*conn) {
                    self.close(conn, kind, code.code());
                }
            }
            Op::DialFailed(f) => self.dial_failed(f),
            Op::Advance { ms } => {
                self.now = self.now.plus_ms(u64::from(*ms));
                self.timeout();
            }
            Op::Fire => {
                if let Some(at) = host::poll_timeout(&self.device, &self.engine) {
                    self.now = self.now.max(at);
                }
                self.timeout();
            }
            Op::Stale { ms } => {
                let stale = Time(self.now.0.saturating_sub(u64::from(*ms)));
                let ticked = self.device.handle(Input::Tick, stale);
                assert_eq!(ticked, Ok(Handled::Done));
                self.drain();
            }
            Op::Ask { conn, method } => {
                let asks: Vec<&'static str> = METHODS
                    .iter()
                    .filter(|m| m.direction == Direction::AgentToClient && m.kind == Kind::Request)
                    .map(|m| m.name)
                    .collect();
                if let (Some((conn, _)), false) = (self.pick(*conn), asks.is_empty()) {
                    let method = asks[usize::from(*method) % asks.len()];
                    let _sent = self
                        .device
                        .test_request(conn, method, serde_json::json!({}));
                    self.drain();
                }
            }
            Op::FrameToUnknown { back } => {
                // A connection that closed, or one never opened.
                let closed = &self.conns.closed;
                let conn = closed
                    .iter()
                    .nth(usize::from(*back) % closed.len().max(1))
                    .copied()
                    .unwrap_or(ConnId(u64::MAX - u64::from(*back)));
                let frame = b"{}".to_vec();
                assert_eq!(
                    self.input(Input::Frame { conn, frame }),
                    Err(Refused::Misuse(Misuse::UnknownConnection(conn))),
                    "a frame on a connection that is not open is a misuse"
                );
                self.drain();
            }
            Op::Persisted { all } => {
                let n = if *all { self.os.held.len() } else { 1 };
                self.os.release(&mut self.device, n, self.now);
                self.drain();
            }
            Op::Restart => self.restart(),
            Op::Reconfigure(r) => self.reconfigure(r),
            Op::DeleteSession { pick } => self.delete_session(*pick),
            Op::TerminalOutput { pick, bytes } => {
                if let Some(terminal_id) = self.pick_terminal(*pick) {
                    let bytes = bytes.clone();
                    let output = Input::TerminalOutput { terminal_id, bytes };
                    assert_eq!(self.input(output), Ok(Handled::Done));
                    self.drain();
                }
            }
            Op::TerminalExit { pick, code } => {
                if let Some(t) = self.pick_terminal(*pick) {
                    self.terminals.remove(&t);
                    // The fake PTY's shell is gone too: nothing echoes any more.
                    self.os.shells.remove(&t);
                    if !self.os.held.is_empty() {
                        self.exited.insert(t.clone());
                    }
                    let exit = Input::TerminalExit {
                        terminal_id: t,
                        code: *code,
                    };
                    assert_eq!(self.input(exit), Ok(Handled::Done));
                    self.drain();
                }
            }
        }
        self.check_state();
    }

    pub(crate) fn restart(&mut self) {
        self.forget_process();
        self.device = self.os.restart(self.config.clone(), self.now);
        self.drain();
    }

    pub(crate) fn opened(&mut self, conn: ConnId, kind: ConnKind) {
        self.conns.opened(conn, kind);
    }

    pub(crate) fn open_link(&mut self) {
        if !self.started {
            self.started = true;
            assert_eq!(self.input(Input::StartLink), Ok(Handled::Done));
            self.drain();
        }
        let kind = ConnKind::Link;
        if self.conns.dialing {
            let Ok(Handled::Opened(conn)) = self.input(Input::Open { kind }) else {
                panic!("the device asked for a dial, so a link may open");
            };
            self.opened(conn, kind);
        } else if self.os.held.is_empty() {
            // (With persists held, a `Dial` may be waiting behind them.)
            assert_eq!(
                self.input(Input::Open { kind }),
                Err(Refused::Misuse(Misuse::NotDialing)),
                "a link opened though no dial was asked for"
            );
        }
        self.drain();
    }

    pub(crate) fn dial_failed(&mut self, f: &Failure) {
        let failure = match f {
            Failure::Transient => DialFailure::Transient,
            Failure::TokenRefused => DialFailure::TokenRefused,
            Failure::Unsupported(s) => DialFailure::Unsupported(s.clone()),
        };
        if !self.conns.dialing && !self.os.held.is_empty() {
            // A `Dial` may wait behind the held persists: the shell has not dialled yet.
            return;
        }
        let was_dialing = self.conns.dialing;
        assert_eq!(self.input(Input::DialFailed { failure }), Ok(Handled::Done));
        if was_dialing {
            self.conns.dial_failed();
        }
        let d = self.drain();
        if was_dialing && matches!(f, Failure::Transient) {
            assert_eq!(
                d.dials, 0,
                "a transient dial failure is retried after a backoff, not at once"
            );
            // (Other timers share `poll_timeout`, so only its presence is checked here.)
            assert!(
                self.device.poll_timeout().is_some(),
                "a transient dial failure schedules a redial"
            );
        }
        if was_dialing && !matches!(f, Failure::Transient) {
            assert!(
                self.device.link_stopped(),
                "a refused token or an unsupported server stops linking"
            );
        }
    }

    pub(crate) fn close(&mut self, conn: ConnId, kind: ConnKind, code: Option<u16>) {
        let closed = self.input(Input::Closed { conn, code });
        assert_eq!(closed, Ok(Handled::Done), "the connection is open");
        self.conns.peer_closed(conn);
        let d = self.drain();
        if kind == ConnKind::Link {
            if code == Some(crate::device::CLOSE_PROTOCOL) {
                assert!(
                    self.device.link_stopped(),
                    "a link closed with 4400 stops linking"
                );
            } else if !self.device.link_stopped() {
                assert!(
                    d.dials > 0 || self.device.poll_timeout().is_some(),
                    "a dropped link is redialled (now or at a deadline)"
                );
            }
        }
    }

    pub(crate) fn timeout(&mut self) {
        host::handle_timeout(&mut self.device, &mut self.engine, self.now);
        self.drain();
        let at = self.device.poll_timeout();
        assert!(
            at.is_none_or(|at| at > self.now),
            "after handle_timeout({:?}) the next deadline {at:?} is not in the future: a shell \
             would spin",
            self.now
        );
    }

    pub(crate) fn feed(&mut self, conn: ConnId, frame: &[u8]) {
        let limits = self.device.config().frames;
        self.talk.heard(conn, frame, &limits);
        let frame = frame.to_vec();
        let fed = self.input(Input::Frame { conn, frame });
        assert_eq!(fed, Ok(Handled::Done), "the connection is open");
        self.drain();
    }

    /// Drain the device's outputs and the engine's events until both are quiet.
    pub(crate) fn drain(&mut self) -> Drained {
        let mut d = Drained::default();
        let mut n = 0usize;
        loop {
            n += 1;
            assert!(
                n <= MAX_OUTPUTS_PER_OP,
                "more than {MAX_OUTPUTS_PER_OP} outputs after one input (op {}): livelock",
                self.ops
            );
            // Every reader keeps up here: nothing is paused.
            match host::poll_output(&mut self.device, &mut self.engine, self.now, |_| false) {
                Some(out) => self.output(out, &mut d),
                None => return d,
            }
        }
    }

    pub(crate) fn output(&mut self, out: ShellOutput, d: &mut Drained) {
        match out {
            ShellOutput::Send { conn, frame } => self.sent(conn, &frame),
            // The device has let go of a connection it closes.
            ShellOutput::Close { conn, .. } => self.conns.device_closed(conn),
            // Pings go unanswered here (a silent network): the link is given up in time. One
            // queued before the device closed the link leaves ahead of its close.
            ShellOutput::Ping { conn } => assert_eq!(
                self.conns.written(conn, &"a ping"),
                ConnKind::Link,
                "a ping was asked for on {conn:?}, which is not a link"
            ),
            ShellOutput::Effect(effect) => self.effect(effect, d),
            // The fuzzed engine is scripted, which needs nothing from a shell.
            ShellOutput::Io(call) => panic!("the scripted engine asked for I/O: {call:?}"),
        }
    }

    /// Check what the device asks for against what the fuzzer knows, then have the fake OS
    /// perform it.
    pub(crate) fn effect(&mut self, effect: Effect, d: &mut Drained) {
        match &effect {
            Effect::Dial => {
                d.dials += 1;
                self.conns.dial_asked();
            }
            Effect::Stop { .. } => self.conns.stopped(),
            Effect::Persist { seq, .. } => self.persists.asked(*seq),
            Effect::OpenTerminal { terminal_id, .. } => {
                self.terminals.insert(terminal_id.clone());
            }
            Effect::TerminalInput { terminal_id, .. } => assert!(
                self.terminals.contains(terminal_id) || self.exited.contains(terminal_id),
                "keystrokes for terminal {terminal_id}, whose shell is not running"
            ),
            Effect::CloseTerminal { terminal_id } => assert!(
                self.terminals.remove(terminal_id) || self.exited.remove(terminal_id),
                "terminal {terminal_id} hung up, whose shell is not running"
            ),
            Effect::ResolvePath { .. }
            | Effect::ListDirectory { .. }
            | Effect::ReadMentions { .. }
            | Effect::SearchFiles { .. }
            | Effect::ReadCommands { .. }
            | Effect::CheckChanges { .. }
            | Effect::LoadSession { .. }
            | Effect::ReadHistory { .. }
            | Effect::ReadEvents { .. }
            | Effect::WriteAttachment { .. }
            | Effect::ResizeTerminal { .. }
            | Effect::RemoveAttachments { .. }
            | Effect::UndoFiles { .. } => {}
        }
        // The network's effects (a dial, a stop) are the fuzzer's own, noted above.
        let _network = self.os.perform(&mut self.device, effect, self.now);
    }

    pub(crate) fn sent(&mut self, conn: ConnId, frame: &[u8]) {
        let kind = self
            .conns
            .written(conn, &format_args!("a frame ({})", lossy(frame)));
        if let Some(session) = self.talk.said(conn, kind, frame) {
            if !self.sessions.contains(&session) {
                self.sessions.push(session);
            }
        }
    }

    pub(crate) fn reconfigure(&mut self, r: &Reconfig) {
        let remote = r.remote(self.device.config().remote.clone());
        let same = remote == self.device.config().remote;
        let reloaded = self.input(Input::Reconfigure {
            remote: remote.clone(),
        });
        match reloaded {
            Ok(Handled::Changed(changed)) => {
                assert!(
                    !(same && changed),
                    "an unchanged `remote:` changed the device"
                );
                assert_eq!(
                    self.device.config().remote,
                    remote,
                    "a valid `remote:` is the device's from the reload on"
                );
                // The next process starts with what the person saved.
                self.config.remote = remote;
            }
            Err(Refused::Config(e)) => assert_ne!(
                self.device.config().remote,
                remote,
                "a refused `remote:` ({}) was taken anyway",
                e.0
            ),
            other => panic!("a reload is answered whether it changed anything: {other:?}"),
        }
        self.drain();
    }

    pub(crate) fn delete_session(&mut self, pick: u8) {
        let id = match self
            .sessions
            .get(usize::from(pick) % self.sessions.len().max(1))
        {
            Some(id) if pick < 200 => id.clone(),
            _ => format!("stranger-{pick}"),
        };
        let delete = || Input::DeleteSession {
            session_id: id.clone(),
        };
        let deleted = self.input(delete());
        self.drain();
        if deleted == Ok(Handled::Changed(true)) {
            assert_eq!(
                self.input(delete()),
                Ok(Handled::Changed(false)),
                "session {id} was deleted twice"
            );
            self.drain();
        } else {
            assert_eq!(deleted, Ok(Handled::Changed(false)));
        }
    }

    /// A terminal whose shell is running (opened and neither exited nor hung up).
    pub(crate) fn pick_terminal(&self, pick: u8) -> Option<String> {
        let n = self.terminals.len();
        (n > 0).then(|| {
            self.terminals
                .iter()
                .nth(usize::from(pick) % n)
                .cloned()
                .expect("picked within the set")
        })
    }

    pub(crate) fn check_state(&mut self) {
        if self.os.held.is_empty() {
            // Nothing waits in the device's queue now: what it asks from here on, it asked
            // knowing of every exit.
            self.exited.clear();
        }
        let theirs: BTreeMap<ConnId, ConnKind> = self.device.connections().collect();
        // A connection the device closed on its own account behind a held persist: it has let
        // go of it, and the close leaves with that persist.
        let let_go: Vec<ConnId> = self
            .conns
            .open
            .keys()
            .filter(|c| !theirs.contains_key(c))
            .copied()
            .collect();
        for conn in let_go {
            assert!(
                !self.os.held.is_empty(),
                "the device let go of {conn:?} without closing it"
            );
            self.conns.letting_go(conn);
            let frame = b"{}".to_vec();
            assert_eq!(
                self.input(Input::Frame { conn, frame }),
                Err(Refused::Misuse(Misuse::UnknownConnection(conn))),
                "a frame on a connection the device let go of is a misuse"
            );
        }
        assert_eq!(
            theirs, self.conns.open,
            "the device's connections are the ones opened and not closed"
        );
        if self.os.held.is_empty() {
            assert_eq!(
                self.device.link_stopped(),
                self.conns.stopped,
                "the device stopped linking exactly when it said Stop"
            );
        }
    }
}
