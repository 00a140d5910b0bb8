//! The client's timers: one table, one slot a reason to wake up. The table is read from the
//! state that owns each deadline whenever it is asked for, so no input can leave it stale;
//! `poll_timeout` is its earliest slot and [`Client::timeout_reason`] names it. The checks
//! `handle_timeout` runs do nothing before their own deadline, so an early or repeated call
//! is harmless.

use super::Client;
use crate::time::{Time, TimerKind, TimerTable};

/// Why the client wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientTimer {
    /// The link's heartbeat: ping a quiet link, or give up a silent one.
    Heartbeat,
    /// The earliest delete sent and not answered reaches `request_timeout_ms`.
    DeleteAnswer,
}

impl TimerKind for ClientTimer {
    const ALL: &'static [ClientTimer] = &[ClientTimer::Heartbeat, ClientTimer::DeleteAnswer];

    fn index(self) -> usize {
        self as usize
    }
}

type Timers = TimerTable<ClientTimer, 2>;

impl Client {
    fn timers(&self) -> Timers {
        let mut t = Timers::default();
        t.set_or_stop(ClientTimer::Heartbeat, self.beat.map(|b| b.deadline()));
        t.set_or_stop(ClientTimer::DeleteAnswer, self.deletes_deadline());
        t
    }

    /// When the shell should call `handle_timeout` next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers().earliest()
    }

    /// What the next wake-up is for, and when (for logs and tests); `None` with no timer set.
    #[must_use]
    pub fn timeout_reason(&self) -> Option<(Time, ClientTimer)> {
        self.timers().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClientConfig, Liveness};

    /// The next wake-up names its reason: the heartbeat while a link is up, nothing without.
    #[test]
    fn the_next_wake_up_says_what_it_is_for() {
        let liveness = Liveness {
            ping_after_ms: 1_000,
            dead_after_ms: 5_000,
        };
        let config = ClientConfig {
            liveness: Some(liveness),
            ..ClientConfig::default()
        };
        let mut c = Client::new(config, Time(0)).unwrap();
        assert_eq!(c.timeout_reason(), None);
        c.handle_link_up(Time(10));
        assert_eq!(
            c.timeout_reason(),
            Some((Time(1_010), ClientTimer::Heartbeat))
        );
        assert_eq!(c.poll_timeout(), Some(Time(1_010)));
        // Early: nothing is sent, the deadline stands.
        c.handle_timeout(Time(1_009));
        assert_eq!(c.poll_output(), None);
        c.handle_timeout(Time(1_010));
        assert_eq!(c.poll_output(), Some(crate::client::ClientOutput::Ping));
        // Repeated: no second ping.
        c.handle_timeout(Time(1_010));
        assert_eq!(c.poll_output(), None);
        assert_eq!(
            c.timeout_reason(),
            Some((Time(2_010), ClientTimer::Heartbeat))
        );
        c.handle_link_down(Time(1_500));
        assert_eq!(c.timeout_reason(), None);
    }
}
