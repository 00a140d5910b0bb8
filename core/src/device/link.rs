//! The instance link's lifecycle on the device: dial, up (watched by its heartbeat), dropped and
//! waiting to redial (with backoff and jitter), or stopped for good (a server that closed with
//! 4400, a refused token).

use super::ConnId;
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
}

impl Link {
    pub fn new(backoff: Backoff, liveness: Option<Liveness>) -> Self {
        Link {
            state: LinkState::Off,
            backoff,
            liveness,
            beat: None,
        }
    }

    /// The dialled link opened as `conn`: its heartbeat starts now.
    pub fn opened(&mut self, conn: ConnId, now: Time) {
        self.beat = self.liveness.map(|l| (conn, Heartbeat::new(l, now)));
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

impl Link {
    /// The link carried a full handshake: the next drop starts the backoff afresh.
    pub fn initialized(&mut self) {
        if let LinkState::Up { attempt } = &mut self.state {
            *attempt = 0;
        }
    }
}
