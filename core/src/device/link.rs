//! The instance link's lifecycle on the device: dial, up (watched by its heartbeat), dropped and
//! waiting to redial (with backoff and jitter), or stopped for good (a server that closed with
//! 4400, a refused token).

use super::outbox::Outbox;
use super::{ConnId, DialFailure, Effect, Misuse};
use crate::config::{Backoff, Liveness};
use crate::liveness::{Beat, Heartbeat};
use crate::rng::Rng;
use crate::time::Time;

/// The close code a peer uses to refuse the other's protocol version.
pub const CLOSE_PROTOCOL: u16 = 4400;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// The shell has not asked for a link (stdio-only use).
    Off,
    /// `Effect::Dial` was emitted; waiting for the shell to report the socket open or failed.
    Dialing {
        attempt: u32,
    },
    Up {
        attempt: u32,
    },
    /// Dropped; redial at the deadline.
    Waiting {
        attempt: u32,
        at: Time,
    },
    /// Never dial again in this process; the message says why.
    Stopped {
        message: String,
    },
}

#[derive(Debug)]
pub(crate) struct Link {
    pub state: LinkState,
    backoff: Backoff,
    liveness: Option<Liveness>,
    /// The link's connection and its heartbeat, while it is up (and liveness is on).
    beat: Option<(ConnId, Heartbeat)>,
    /// What its handshake says changed: it restarts once nothing holds it (reconfigure.rs).
    restart_due: bool,
}

impl Link {
    pub fn new(backoff: Backoff, liveness: Option<Liveness>) -> Self {
        Link {
            state: LinkState::Off,
            backoff,
            liveness,
            beat: None,
            restart_due: false,
        }
    }

    /// The dialled link opened as `conn`: it is up, and its heartbeat starts now. A link the
    /// device did not ask to dial is the shell's mistake.
    pub fn opened(&mut self, conn: ConnId, now: Time) -> Result<(), Misuse> {
        let LinkState::Dialing { attempt } = self.state else {
            return Err(Misuse::NotDialing);
        };
        self.state = LinkState::Up { attempt };
        self.beat = self.liveness.map(|l| (conn, Heartbeat::new(l, now)));
        Ok(())
    }

    /// Something arrived on `conn`; only the link's own connection counts.
    pub fn heard(&mut self, conn: ConnId, now: Time) {
        if let Some((c, beat)) = &mut self.beat {
            if *c == conn {
                beat.heard(now);
            }
        }
    }

    /// `conn` is gone: when it was the link, its heartbeat stops.
    pub fn let_go(&mut self, conn: ConnId) {
        if self.beat.is_some_and(|(c, _)| c == conn) {
            self.beat = None;
        }
    }

    /// What the heartbeat asks for at `now`, with the link's connection and how long it has
    /// been silent.
    pub fn beat(&mut self, now: Time) -> Option<(ConnId, Beat, u64)> {
        let (conn, beat) = self.beat.as_mut()?;
        Some((*conn, beat.poll(now), beat.silent_ms(now)))
    }

    /// The link is told what to do next after it was lost: wait `delay` then redial.
    pub fn schedule_redial(&mut self, attempt: u32, now: Time, rng: &mut Rng) -> Time {
        let ceiling = self.backoff.ceiling(attempt);
        let delay = ceiling / 2 + rng.below(ceiling / 2 + 1);
        let at = now.plus_ms(delay);
        self.state = LinkState::Waiting {
            attempt: attempt + 1,
            at,
        };
        at
    }

    /// When the link's heartbeat has something to say (while it is up, with liveness on).
    pub fn heartbeat_deadline(&self) -> Option<Time> {
        self.beat.map(|(_, b)| b.deadline())
    }

    pub fn stopped(&self) -> bool {
        matches!(self.state, LinkState::Stopped { .. })
    }
}

/// The link's transitions: what the shell is asked goes into the Outbox.
impl Link {
    /// Start keeping a link up (the first time only): a dial now.
    pub fn start(&mut self, out: &mut Outbox) {
        if matches!(self.state, LinkState::Off) {
            self.state = LinkState::Dialing { attempt: 0 };
            out.effect(Effect::Dial);
        }
    }

    /// The dial failed: try again after the backoff, or, when the token or the server is
    /// refused, stop for good with the sentence to show.
    pub fn dial_failed(
        &mut self,
        failure: DialFailure,
        now: Time,
        rng: &mut Rng,
        out: &mut Outbox,
    ) {
        let LinkState::Dialing { attempt } = self.state else {
            return;
        };
        match failure {
            DialFailure::Transient => {
                self.schedule_redial(attempt, now, rng);
            }
            DialFailure::TokenRefused => self.stop(
                "the instance refused this device's token; run `lembas login` again".into(),
                out,
            ),
            DialFailure::Unsupported(sentence) => self.stop(sentence, out),
        }
    }

    /// The link's connection is gone (dropped, or closed by the device): dial again after the
    /// backoff. Nothing when it was not up (stopped, say).
    pub fn dropped(&mut self, now: Time, rng: &mut Rng) {
        if let LinkState::Up { attempt } = self.state {
            self.schedule_redial(attempt, now, rng);
        }
    }

    /// The link's connection closed (by the peer, with its close code when it sent one, or
    /// because the transport failed): a server that refused protocol 3 stops it for good,
    /// anything else is a drop ([`Link::dropped`]).
    pub fn closed(&mut self, close_code: Option<u16>, now: Time, rng: &mut Rng, out: &mut Outbox) {
        if close_code == Some(CLOSE_PROTOCOL) {
            self.stop(
                "the LLeMbas server refused link protocol 3 (close 4400): it needs updating to \
                 LLeMbas 2.0"
                    .into(),
                out,
            );
        } else {
            self.dropped(now, rng);
        }
    }

    /// Never dial again in this process, and tell the person why.
    pub fn stop(&mut self, message: String, out: &mut Outbox) {
        self.state = LinkState::Stopped {
            message: message.clone(),
        };
        out.effect(Effect::Stop { message });
    }

    /// What a link's hello and `initialize` say changed (new settings, a new model list): the
    /// link restarts, so a new handshake says it, once nothing holds it.
    pub fn settings_changed(&mut self) {
        self.restart_due = true;
    }

    /// Whether a restart for new settings waits for the link to be let go.
    pub fn restart_due(&self) -> bool {
        self.restart_due
    }

    /// A restart for new settings is due and nothing `held` it (a turn, a terminal on the link,
    /// a request waiting for its session): it is no longer due, and whether the link is up to
    /// be restarted (its connection closed, then [`Link::redial_now`]). A link not up is left
    /// alone: its next dial's hello carries the new settings anyway.
    pub fn take_restart(&mut self, held: bool) -> bool {
        if !self.restart_due || held {
            return false;
        }
        self.restart_due = false;
        matches!(self.state, LinkState::Up { .. })
    }

    /// Dial again at once, with no backoff: the link went down on purpose, not for a failure.
    pub fn redial_now(&mut self, out: &mut Outbox) {
        self.state = LinkState::Dialing { attempt: 0 };
        out.effect(Effect::Dial);
    }

    /// Dial again if the wait after a drop or a failure is over.
    pub fn redial_if_due(&mut self, now: Time, out: &mut Outbox) {
        if let LinkState::Waiting { attempt, at } = self.state {
            if at <= now {
                self.state = LinkState::Dialing { attempt };
                out.effect(Effect::Dial);
            }
        }
    }
}

impl Link {
    /// The link carried a full handshake: the next drop starts the backoff afresh.
    pub fn initialized(&mut self) {
        if let LinkState::Up { attempt } = &mut self.state {
            *attempt = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Output;

    fn link() -> Link {
        Link::new(
            Backoff {
                initial_ms: 1_000,
                max_ms: 60_000,
            },
            None,
        )
    }

    fn asked(out: &mut Outbox) -> Vec<Effect> {
        std::iter::from_fn(|| out.poll())
            .map(|o| match o {
                Output::Effect(e) => e,
                o => panic!("only effects: {o:?}"),
            })
            .collect()
    }

    #[test]
    fn a_start_dials_once() {
        let (mut l, mut out) = (link(), Outbox::default());
        l.start(&mut out);
        l.start(&mut out);
        assert_eq!(asked(&mut out), vec![Effect::Dial]);
        assert_eq!(l.state, LinkState::Dialing { attempt: 0 });
    }

    #[test]
    fn a_failed_dial_waits_its_backoff_then_dials_again() {
        let (mut l, mut out, mut rng) = (link(), Outbox::default(), Rng::new(3));
        l.start(&mut out);
        asked(&mut out);
        l.dial_failed(DialFailure::Transient, Time(0), &mut rng, &mut out);
        let LinkState::Waiting { attempt: 1, at } = l.state else {
            panic!("{:?}", l.state)
        };
        // Half the ceiling (1 s for the first attempt) up to all of it.
        assert!((500..=1_000).contains(&at.0), "{at:?}");
        l.redial_if_due(Time(at.0 - 1), &mut out);
        assert!(asked(&mut out).is_empty(), "not before its time");
        l.redial_if_due(at, &mut out);
        assert_eq!(asked(&mut out), vec![Effect::Dial]);
        assert_eq!(l.state, LinkState::Dialing { attempt: 1 });
    }

    #[test]
    fn a_refused_token_stops_for_good_with_the_sentence() {
        let (mut l, mut out, mut rng) = (link(), Outbox::default(), Rng::new(3));
        l.start(&mut out);
        asked(&mut out);
        l.dial_failed(DialFailure::TokenRefused, Time(0), &mut rng, &mut out);
        let effects = asked(&mut out);
        assert!(
            matches!(&effects[..], [Effect::Stop { message }] if message.contains("lembas login")),
            "{effects:?}"
        );
        assert!(l.stopped());
        // Nothing brings it back.
        l.dropped(Time(10), &mut rng);
        l.redial_if_due(Time(1_000_000), &mut out);
        l.start(&mut out);
        assert!(asked(&mut out).is_empty());
        assert!(l.stopped());
    }

    #[test]
    fn only_a_link_that_was_up_redials_after_a_drop() {
        let (mut l, mut out, mut rng) = (link(), Outbox::default(), Rng::new(3));
        l.dropped(Time(0), &mut rng);
        assert_eq!(l.state, LinkState::Off);
        l.start(&mut out);
        l.state = LinkState::Up { attempt: 2 };
        l.dropped(Time(0), &mut rng);
        let LinkState::Waiting { attempt: 3, at } = l.state else {
            panic!("{:?}", l.state)
        };
        // The third attempt's ceiling is 4 s.
        assert!((2_000..=4_000).contains(&at.0), "{at:?}");
    }

    #[test]
    fn a_restart_for_new_settings_waits_for_nothing_to_hold_it_and_happens_once() {
        let mut l = link();
        assert!(!l.take_restart(false), "none due");
        l.settings_changed();
        l.state = LinkState::Up { attempt: 2 };
        assert!(!l.take_restart(true), "held");
        assert!(l.restart_due());
        assert!(l.take_restart(false));
        assert!(!l.restart_due() && !l.take_restart(false), "once");
        let mut out = Outbox::default();
        l.redial_now(&mut out);
        assert_eq!(asked(&mut out), vec![Effect::Dial]);
        assert_eq!(l.state, LinkState::Dialing { attempt: 0 }, "no backoff");
        // Not up: nothing to restart, and nothing left due (the next hello says it).
        l.settings_changed();
        assert!(!l.take_restart(false));
        assert!(!l.restart_due());
    }

    #[test]
    fn a_link_opens_only_when_dialled_and_a_4400_close_stops_it() {
        let (mut l, mut out, mut rng) = (link(), Outbox::default(), Rng::new(3));
        assert_eq!(l.opened(ConnId(1), Time(0)), Err(Misuse::NotDialing));
        assert_eq!(l.state, LinkState::Off);
        l.start(&mut out);
        asked(&mut out);
        assert_eq!(l.opened(ConnId(1), Time(0)), Ok(()));
        assert_eq!(l.state, LinkState::Up { attempt: 0 });
        // A close without 4400 is a drop: redial after the backoff.
        l.closed(Some(1006), Time(0), &mut rng, &mut out);
        assert!(
            matches!(l.state, LinkState::Waiting { attempt: 1, .. }),
            "{:?}",
            l.state
        );
        assert!(asked(&mut out).is_empty());
        l.state = LinkState::Up { attempt: 0 };
        l.closed(Some(CLOSE_PROTOCOL), Time(0), &mut rng, &mut out);
        let effects = asked(&mut out);
        assert!(
            matches!(&effects[..], [Effect::Stop { message }] if message.contains("close 4400")),
            "{effects:?}"
        );
        assert!(l.stopped());
    }
}
