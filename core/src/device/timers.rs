//! The device's timers: one table, one slot a reason to wake up. `poll_timeout` is the
//! earliest slot and [`Device::timeout_reason`] names it. The table is refreshed by the step
//! that ends every input ([`Device::after_input`]), from the state that owns each deadline; a
//! slot over a collection (cards, terminals, deletes) holds the earliest of its members.
//! `handle_timeout` runs every check, each of which does nothing before its own deadline, so
//! an early or repeated call is harmless.

use super::link::LinkState;
use super::Device;
use crate::time::{Time, TimerKind, TimerTable};

/// Why the device wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// The link's heartbeat: ping a quiet link, or give up a silent one.
    Heartbeat,
    /// The backoff after a lost link is over: dial again.
    Redial,
    /// The earliest open card reaches its timeout.
    CardExpiry,
    /// The earliest terminal output waiting `terminals.batch_ms` goes out.
    TerminalFlush,
    /// The earliest delete sent on a link is confirmed (`sessions.delete_confirm_ms`).
    ConfirmDeletes,
    /// The daily look for stale turn ledgers.
    PruneLedgers,
}

impl TimerKind for Timer {
    const ALL: &'static [Timer] = &[
        Timer::Heartbeat,
        Timer::Redial,
        Timer::CardExpiry,
        Timer::TerminalFlush,
        Timer::ConfirmDeletes,
        Timer::PruneLedgers,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

pub(super) type Timers = TimerTable<Timer, 6>;

impl Device {
    /// Each timer's deadline, read from the state that owns it.
    pub(super) fn current_timers(&self) -> Timers {
        let mut t = Timers::default();
        match self.link.state {
            LinkState::Waiting { at, .. } => t.set(Timer::Redial, at),
            _ => t.set_or_stop(Timer::Heartbeat, self.link.heartbeat_deadline()),
        }
        t.set_or_stop(Timer::CardExpiry, self.cards.deadline());
        let batch_ms = self.config.terminals.batch_ms;
        t.set_or_stop(Timer::TerminalFlush, self.terminals.deadline(batch_ms));
        let confirm_ms = self.config.sessions.delete_confirm_ms;
        t.set_or_stop(Timer::ConfirmDeletes, self.deletes.deadline(confirm_ms));
        t.set(Timer::PruneLedgers, self.next_prune);
        t
    }

    /// When the shell should call `handle_timeout` next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        self.checked_timers().earliest()
    }

    /// What the next wake-up is for, and when (for logs and tests); `None` with no timer set.
    #[must_use]
    pub fn timeout_reason(&self) -> Option<(Time, Timer)> {
        self.checked_timers().next()
    }

    fn checked_timers(&self) -> &Timers {
        // Every input ends in `after_input`, which refreshes the table: one that missed it
        // would sleep past a deadline.
        debug_assert_eq!(
            self.timers,
            self.current_timers(),
            "an input did not end in after_input"
        );
        &self.timers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use crate::device::{DialFailure, Effect, Output};

    fn dials(d: &mut Device) -> usize {
        std::iter::from_fn(|| d.poll_output())
            .filter(|o| matches!(o, Output::Effect(Effect::Dial)))
            .count()
    }

    /// The next wake-up names its reason; an early or repeated `handle_timeout` does nothing.
    #[test]
    fn the_next_wake_up_says_what_it_is_for() {
        let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        d.handle_timeout(Time(0));
        let (prune_at, reason) = d.timeout_reason().unwrap();
        assert_eq!(reason, Timer::PruneLedgers);
        assert!(prune_at > Time(0));
        d.start_link(Time(1));
        assert_eq!(dials(&mut d), 1);
        d.handle_dial_failed(DialFailure::Transient, Time(2));
        let (redial_at, reason) = d.timeout_reason().unwrap();
        assert_eq!(reason, Timer::Redial);
        assert_eq!(d.poll_timeout(), Some(redial_at));
        assert!(redial_at > Time(2) && redial_at < prune_at);
        d.handle_timeout(Time(redial_at.0 - 1));
        assert_eq!(dials(&mut d), 0, "early: nothing is due");
        assert_eq!(d.timeout_reason(), Some((redial_at, Timer::Redial)));
        d.handle_timeout(redial_at);
        assert_eq!(dials(&mut d), 1);
        d.handle_timeout(redial_at);
        assert_eq!(dials(&mut d), 0, "repeated: the redial went once");
        assert_eq!(d.timeout_reason(), Some((prune_at, Timer::PruneLedgers)));
    }
}
