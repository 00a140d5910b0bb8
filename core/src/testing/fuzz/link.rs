//! The `link` driver: the device's instance link ([`Link`]) alone, wired as the device wires it
//! (a connection that opens, is heard, closes or is closed, and is let go), driven by dials
//! that open or fail, closes with any code, handshakes, time passing, and settings that change
//! while the link is busy or not, against a model written from the link's documented rules.
//!
//! The promises checked after every operation:
//! - a dial is asked for exactly when the link starts, when the wait after a drop or a failure
//!   is over (never before), or when a restart for new settings finds the link up and idle;
//!   never while a dial is pending or the link is up, and never once it stopped;
//! - the wait after the `n`-th failure in a row (a dial that failed or a link that dropped,
//!   counted from the last full handshake) is between half and all of
//!   `min(initial_ms · 2^n, max_ms)`;
//! - a close 4400, a refused token or an unsupported server stops the link for good, saying so
//!   once;
//! - a restart for new settings waits while the link is busy, happens once when it is not, and
//!   leaves a link that is not up alone;
//! - while the link is up (and only then) its heartbeat pings a quiet link once every
//!   `ping_after_ms` and gives up a silent one after `dead_after_ms`, a drop like any other;
//! - an open the device did not ask for is refused; no panic.

use arbitrary::Arbitrary;

use crate::config::{Backoff, Liveness};
use crate::device::link::{Link, LinkState, CLOSE_PROTOCOL};
use crate::device::outbox::Outbox;
use crate::device::{ConnId, DialFailure, Effect, Misuse, Output};
use crate::liveness::Beat;
use crate::rng::Rng;
use crate::time::Time;

/// At most this many operations are read from one input.
const MAX_LINK_OPS: usize = 512;

#[derive(Arbitrary, Debug)]
enum Op {
    /// The shell starts keeping a link up.
    Start,
    /// The shell reports a link open (asked for or not).
    Opened,
    DialFailed(Failure),
    /// The peer closed the link, with this code (4400 often).
    PeerClosed {
        protocol: bool,
        code: Option<u16>,
    },
    /// The device closed the link on its own account (behind what was queued).
    DeviceClosed,
    /// The link carried a full handshake.
    Initialized,
    /// Something arrived on the link.
    Heard,
    /// Time passes, then the device looks at its deadlines (redial, heartbeat).
    Advance {
        ms: u16,
    },
    /// What the link's handshake says changed.
    SettingsChanged,
    /// The device's end of every input: a restart for new settings, if nothing holds it.
    AfterInput {
        busy: bool,
    },
}

#[derive(Arbitrary, Debug)]
enum Failure {
    Transient,
    TokenRefused,
    Unsupported,
}

/// The link as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Off,
    Dialing,
    Up,
    /// Dropped or failed; redial at `at`.
    Waiting {
        at: Time,
    },
    Stopped,
}

#[derive(Debug)]
struct Model {
    state: State,
    /// Failures in a row since the last full handshake.
    failures: u32,
    restart_due: bool,
    /// While up: when something last arrived (or it opened), and when the last ping of this
    /// quiet spell went out.
    heard: Time,
    pinged: Option<Time>,
    stops: usize,
}

struct Driver {
    link: Link,
    out: Outbox,
    rng: Rng,
    backoff: Backoff,
    liveness: Option<Liveness>,
    now: Time,
    /// The link's connection while it is open, and the next connection's number.
    conn: Option<ConnId>,
    next_conn: u64,
    m: Model,
}

/// Drive a [`Link`] through operations read from `data`; panics on a broken promise.
pub fn link(data: &[u8]) {
    let Some(((initial, max, liveness, seed), ops)) =
        super::read_input::<(u8, u16, Option<(u8, u8)>, u64), Op>(data, MAX_LINK_OPS)
    else {
        return;
    };
    let initial_ms = 1 + u64::from(initial);
    let backoff = Backoff {
        initial_ms,
        max_ms: initial_ms + u64::from(max),
    };
    let liveness = liveness.map(|(ping, dead)| Liveness {
        ping_after_ms: 1 + u64::from(ping),
        dead_after_ms: 1 + u64::from(dead),
    });
    let mut d = Driver {
        link: Link::new(backoff, liveness),
        out: Outbox::default(),
        rng: Rng::new(seed),
        backoff,
        liveness,
        now: Time(0),
        conn: None,
        next_conn: 0,
        m: Model {
            state: State::Off,
            failures: 0,
            restart_due: false,
            heard: Time(0),
            pinged: None,
            stops: 0,
        },
    };
    for op in ops {
        d.step(op);
        d.check();
    }
}

/// The settings and operations [`link`] reads from `data`, one a line: to read a failing
/// input.
pub fn link_script(data: &[u8]) -> String {
    super::script::<(u8, u16, Option<(u8, u8)>, u64), Op>(data, MAX_LINK_OPS, "settings")
}

/// What the shell was asked, in order.
#[derive(Debug, PartialEq)]
enum Asked {
    Dial,
    Stop,
    Ping(ConnId),
    Close(ConnId),
}

impl Driver {
    fn step(&mut self, op: Op) {
        match op {
            Op::Start => {
                self.link.start(&mut self.out);
                if self.m.state == State::Off {
                    self.m.state = State::Dialing;
                    self.expect(&[Asked::Dial]);
                } else {
                    self.expect(&[]);
                }
            }
            Op::Opened => {
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                let opened = self.link.opened(conn, self.now);
                if self.m.state == State::Dialing {
                    assert_eq!(opened, Ok(()), "the dial asked for opened");
                    self.m.state = State::Up;
                    self.m.heard = self.now;
                    self.m.pinged = None;
                    self.conn = Some(conn);
                } else {
                    assert_eq!(
                        opened,
                        Err(Misuse::NotDialing),
                        "a link opened with no dial asked for ({:?})",
                        self.m.state
                    );
                }
                self.expect(&[]);
            }
            Op::DialFailed(failure) => {
                let failure = match failure {
                    Failure::Transient => DialFailure::Transient,
                    Failure::TokenRefused => DialFailure::TokenRefused,
                    Failure::Unsupported => DialFailure::Unsupported("not 3".into()),
                };
                let transient = failure == DialFailure::Transient;
                self.link
                    .dial_failed(failure, self.now, &mut self.rng, &mut self.out);
                if self.m.state != State::Dialing {
                    // Only a pending dial can fail.
                    self.expect(&[]);
                } else if transient {
                    self.failed();
                    self.expect(&[]);
                } else {
                    self.stop();
                }
            }
            Op::PeerClosed { protocol, code } => {
                let Some(conn) = self.conn.take() else {
                    return;
                };
                let code = if protocol { Some(CLOSE_PROTOCOL) } else { code };
                // As the device does: what was queued for it is dropped, then the link hears.
                self.out.unqueue(conn);
                self.link.let_go(conn);
                self.link
                    .closed(code, self.now, &mut self.rng, &mut self.out);
                if code == Some(CLOSE_PROTOCOL) {
                    self.stop();
                } else {
                    self.failed();
                    self.expect(&[]);
                }
            }
            Op::DeviceClosed => {
                let Some(conn) = self.conn.take() else {
                    return;
                };
                self.out.close(conn, 1000, "closed".into());
                self.link.let_go(conn);
                self.link.dropped(self.now, &mut self.rng);
                self.failed();
                self.expect(&[Asked::Close(conn)]);
            }
            Op::Initialized => {
                if self.conn.is_some() {
                    self.link.initialized();
                    self.m.failures = 0;
                }
            }
            Op::Heard => {
                if let Some(conn) = self.conn {
                    self.link.heard(conn, self.now);
                    self.m.heard = self.now;
                    self.m.pinged = None;
                }
                // A connection that is not the link's counts for nothing.
                self.link.heard(ConnId(u64::MAX), self.now);
            }
            Op::Advance { ms } => {
                self.now = self.now.plus_ms(u64::from(ms));
                self.deadlines();
            }
            Op::SettingsChanged => {
                self.link.settings_changed();
                self.m.restart_due = true;
            }
            Op::AfterInput { busy } => {
                let restart = self.link.take_restart(busy);
                let expected = self.m.restart_due && !busy && self.m.state == State::Up;
                assert_eq!(
                    restart, expected,
                    "a restart for new settings (due {}, busy {busy}, {:?})",
                    self.m.restart_due, self.m.state
                );
                if !busy {
                    self.m.restart_due = false;
                }
                if restart {
                    let conn = self.conn.take().expect("up, so open");
                    self.out.close(conn, 1012, "settings".into());
                    self.link.let_go(conn);
                    self.link.redial_now(&mut self.out);
                    // On purpose, not a failure: dialled at once.
                    self.m.state = State::Dialing;
                    self.m.failures = 0;
                    self.expect(&[Asked::Close(conn), Asked::Dial]);
                } else {
                    self.expect(&[]);
                }
                assert_eq!(self.link.restart_due(), self.m.restart_due);
            }
        }
    }

    /// A dial failed or the link dropped: wait within the backoff, then dial again.
    fn failed(&mut self) {
        let m = &mut self.m;
        // Doubling from `initial_ms` per failure in a row, up to `max_ms`.
        let ceiling = self
            .backoff
            .initial_ms
            .saturating_mul(1u64.checked_shl(m.failures).unwrap_or(u64::MAX))
            .min(self.backoff.max_ms);
        let LinkState::Waiting { at, .. } = self.link.state else {
            panic!("after a failure the link waits, not {:?}", self.link.state);
        };
        let wait = at.since(self.now);
        assert!(
            ceiling / 2 <= wait && wait <= ceiling,
            "failure {} waits {wait} ms, not within [{}, {ceiling}]",
            m.failures,
            ceiling / 2
        );
        m.failures += 1;
        m.state = State::Waiting { at };
    }

    fn stop(&mut self) {
        assert_ne!(self.m.state, State::Stopped, "a stopped link stopped again");
        self.m.state = State::Stopped;
        self.m.stops += 1;
        self.expect(&[Asked::Stop]);
    }

    /// What the device does at a deadline: redial if the wait is over, then the heartbeat.
    fn deadlines(&mut self) {
        let now = self.now;
        self.link.redial_if_due(now, &mut self.out);
        let mut expected = Vec::new();
        if let State::Waiting { at } = self.m.state {
            if at <= now {
                self.m.state = State::Dialing;
                expected.push(Asked::Dial);
            }
        }
        let beat = self.link.beat(now);
        match (self.conn, self.liveness) {
            (Some(conn), Some(l)) => {
                let (beat_conn, beat, silent) = beat.expect("an open link with liveness beats");
                assert_eq!(beat_conn, conn);
                assert_eq!(silent, now.since(self.m.heard), "silent since last heard");
                let dead = now >= self.m.heard.plus_ms(l.dead_after_ms);
                let ping_at = self
                    .m
                    .pinged
                    .unwrap_or(self.m.heard)
                    .plus_ms(l.ping_after_ms);
                if dead {
                    assert_eq!(beat, Beat::Dead, "silent {silent} ms, over dead_after_ms");
                    self.out.close_now(conn, 1001, "dead".into());
                    self.link.let_go(conn);
                    self.link.dropped(now, &mut self.rng);
                    self.conn = None;
                    self.failed();
                    expected.push(Asked::Close(conn));
                } else if now >= ping_at {
                    assert_eq!(beat, Beat::Ping, "quiet since {ping_at:?}");
                    self.m.pinged = Some(now);
                    self.out.ping(conn);
                    expected.push(Asked::Ping(conn));
                } else {
                    assert_eq!(beat, Beat::Nothing);
                }
            }
            _ => assert!(
                beat.is_none(),
                "a heartbeat with no open link or no liveness"
            ),
        }
        self.expect(&expected);
    }

    /// What the shell is asked now must be exactly `expected`.
    fn expect(&mut self, expected: &[Asked]) {
        let asked: Vec<Asked> = std::iter::from_fn(|| self.out.poll())
            .map(|o| match o {
                Output::Effect(Effect::Dial) => Asked::Dial,
                Output::Effect(Effect::Stop { .. }) => Asked::Stop,
                Output::Ping { conn } => Asked::Ping(conn),
                Output::Close { conn, .. } => Asked::Close(conn),
                other => panic!("the link asked for {other:?}"),
            })
            .collect();
        assert_eq!(
            asked, expected,
            "what the shell is asked ({:?}, {:?})",
            self.m.state, self.link.state
        );
    }

    fn check(&self) {
        let m = &self.m;
        let state = match self.link.state {
            LinkState::Off => State::Off,
            LinkState::Dialing { .. } => State::Dialing,
            LinkState::Up { .. } => State::Up,
            LinkState::Waiting { at, .. } => State::Waiting { at },
            LinkState::Stopped { .. } => State::Stopped,
        };
        assert_eq!(state, m.state, "the link's state");
        assert_eq!(self.link.stopped(), m.state == State::Stopped);
        assert!(m.stops <= 1, "stopped {} times", m.stops);
        assert_eq!(
            self.link.heartbeat_deadline().is_some(),
            self.conn.is_some() && self.liveness.is_some(),
            "a heartbeat runs exactly while the link is open (with liveness on)"
        );
        if m.state == State::Up {
            assert!(self.conn.is_some());
        }
    }
}
