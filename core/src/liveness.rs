//! Whether a link is alive, decided from time alone: one `Heartbeat` per link, on both roles.
//! Anything that arrives (a message, a pong, a ping) is proof of life. A link quiet for
//! `ping_after_ms` is pinged, again every `ping_after_ms` while it stays quiet; silent for
//! `dead_after_ms`, it is dead. Outbound traffic proves nothing: a black hole takes every byte.

use crate::config::Liveness;
use crate::time::Time;

/// The close code for a link given up as dead: RFC 6455's 1001 "going away" (the endpoint
/// leaves this connection). The spec names no code for it; 1006 would fit but may not be sent.
/// The peer seldom reads it (the network is gone), but a link that was only slow hears it and
/// reconnects, like any close that is not 4400.
pub const CLOSE_DEAD_LINK: u16 = 1001;

/// What a heartbeat asks for at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Beat {
    Nothing,
    /// Send a ping now.
    Ping,
    /// Nothing arrived for the bound: close the link.
    Dead,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heartbeat {
    limits: Liveness,
    /// When something last arrived (or the link opened).
    heard: Time,
    /// When the last ping of this quiet spell went out.
    pinged: Option<Time>,
}

impl Heartbeat {
    pub fn new(limits: Liveness, now: Time) -> Heartbeat {
        Heartbeat {
            limits,
            heard: now,
            pinged: None,
        }
    }

    /// Something arrived: the quiet spell is over.
    pub fn heard(&mut self, now: Time) {
        self.heard = self.heard.max(now);
        self.pinged = None;
    }

    fn dead_at(&self) -> Time {
        self.heard.plus_ms(self.limits.dead_after_ms)
    }

    fn ping_at(&self) -> Time {
        self.pinged
            .unwrap_or(self.heard)
            .plus_ms(self.limits.ping_after_ms)
    }

    /// The next time [`Heartbeat::poll`] has something to say.
    pub fn deadline(&self) -> Time {
        self.ping_at().min(self.dead_at())
    }

    /// What is due at `now`. A ping is asked for once per `ping_after_ms`, so an early or
    /// repeated call asks for nothing.
    pub fn poll(&mut self, now: Time) -> Beat {
        if now >= self.dead_at() {
            Beat::Dead
        } else if now >= self.ping_at() {
            self.pinged = Some(now);
            Beat::Ping
        } else {
            Beat::Nothing
        }
    }

    /// How long the link has been silent at `now` (for the close reason and the logs).
    pub fn silent_ms(&self, now: Time) -> u64 {
        now.since(self.heard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_pings_then_silence_is_dead_and_anything_heard_resets() {
        let mut h = Heartbeat::new(Liveness::new(15, 45), Time(100));
        assert_eq!(h.deadline(), Time(115));
        assert_eq!(h.poll(Time(114)), Beat::Nothing);
        assert_eq!(h.poll(Time(115)), Beat::Ping);
        // Repeated at the same instant: no second ping.
        assert_eq!(h.poll(Time(115)), Beat::Nothing);
        assert_eq!(h.deadline(), Time(130));
        assert_eq!(h.poll(Time(130)), Beat::Ping);
        h.heard(Time(131));
        assert_eq!(h.deadline(), Time(146));
        assert_eq!(h.poll(Time(140)), Beat::Nothing);
        assert_eq!(h.poll(Time(146)), Beat::Ping);
        assert_eq!(h.poll(Time(161)), Beat::Ping);
        assert_eq!(h.deadline(), Time(176));
        assert_eq!(h.poll(Time(175)), Beat::Nothing);
        assert_eq!(h.poll(Time(176)), Beat::Dead);
        assert_eq!(h.silent_ms(Time(176)), 45);
    }
}
