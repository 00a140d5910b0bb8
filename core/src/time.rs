//! Time as the shell tells it: milliseconds on a monotonic clock the core never reads itself.

use core::fmt;

/// A point in time, in milliseconds since an origin the shell picks (process start, say).
/// Every `handle_*` input carries one; the core only compares and adds them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    #[must_use]
    pub fn plus_ms(self, ms: u64) -> Time {
        Time(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, zero when `earlier` is later.
    #[must_use]
    pub fn since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}ms", self.0)
    }
}

/// The core's idea of "now": it only moves forward. A shell whose clock steps back (or that
/// hands in a stale reading) gets the latest time it already gave, so deadlines never re-fire.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    now: Time,
}

impl Clock {
    pub fn new(now: Time) -> Self {
        Clock { now }
    }

    /// Advance to `now`, clamping a step backwards; returns the clamped time.
    pub fn advance(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    pub fn now(&self) -> Time {
        self.now
    }
}

/// A table of deadlines indexed by a small enum (`K: Into<usize>`), as quinn-proto keeps its
/// timers: `earliest()` is what `poll_timeout` reports, and firing is idempotent, so an early or
/// repeated `handle_timeout` is harmless.
#[derive(Clone, Debug)]
pub struct TimerTable<const N: usize> {
    deadlines: [Option<Time>; N],
}

impl<const N: usize> Default for TimerTable<N> {
    fn default() -> Self {
        TimerTable {
            deadlines: [None; N],
        }
    }
}

impl<const N: usize> TimerTable<N> {
    pub fn set(&mut self, timer: usize, at: Time) {
        self.deadlines[timer] = Some(at);
    }

    pub fn stop(&mut self, timer: usize) {
        self.deadlines[timer] = None;
    }

    pub fn get(&self, timer: usize) -> Option<Time> {
        self.deadlines[timer]
    }

    pub fn earliest(&self) -> Option<Time> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Take the timer if it is due at `now` (and so clear it): each expiry is seen once.
    pub fn take_expired(&mut self, timer: usize, now: Time) -> bool {
        match self.deadlines[timer] {
            Some(at) if at <= now => {
                self.deadlines[timer] = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_clamps_backwards_steps() {
        let mut c = Clock::new(Time(100));
        assert_eq!(c.advance(Time(50)), Time(100));
        assert_eq!(c.advance(Time(150)), Time(150));
        assert_eq!(c.now(), Time(150));
    }

    #[test]
    fn timers_fire_once_and_report_the_earliest() {
        let mut t = TimerTable::<2>::default();
        t.set(0, Time(30));
        t.set(1, Time(10));
        assert_eq!(t.earliest(), Some(Time(10)));
        assert!(!t.take_expired(1, Time(9)));
        assert!(t.take_expired(1, Time(10)));
        assert!(!t.take_expired(1, Time(10)));
        assert_eq!(t.earliest(), Some(Time(30)));
    }
}
