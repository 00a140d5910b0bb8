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

/// A UTC civil time, from milliseconds since the Unix epoch: what a person or ACP is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u64,
    pub day: u64,
    pub hour: u64,
    pub minute: u64,
    pub second: u64,
    pub milli: u64,
}

impl Civil {
    pub fn of(ms: u64) -> Civil {
        let secs = ms / 1000;
        let days = (secs / 86_400) as i64;
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
        let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u64;
        Civil {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: (secs % 86_400) / 3600,
            minute: (secs % 3600) / 60,
            second: secs % 60,
            milli: ms % 1000,
        }
    }
}

/// `2026-11-30T11:32:05.123Z` for milliseconds since the Unix epoch (ACP's ISO 8601 times).
pub fn iso8601(ms: u64) -> String {
    let Civil {
        year,
        month,
        day,
        hour,
        minute,
        second,
        milli,
    } = Civil::of(ms);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
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

/// The timers of one state machine: a small enum, each variant one reason to wake up.
pub trait TimerKind: Copy + Eq + fmt::Debug + 'static {
    /// Every variant, in the order ties are broken (the first listed wins).
    const ALL: &'static [Self];
    /// This variant's place in [`TimerKind::ALL`].
    fn index(self) -> usize;
}

/// A table of deadlines indexed by a small enum, as quinn-proto keeps its timers: `earliest()`
/// is what `poll_timeout` reports, with the timer that set it (str0m's `last_timeout_reason`),
/// and firing is idempotent, so an early or repeated `handle_timeout` is harmless. `N` is the
/// number of variants of `K`.
#[derive(Clone, PartialEq, Eq)]
pub struct TimerTable<K: TimerKind, const N: usize> {
    deadlines: [Option<Time>; N],
    kind: core::marker::PhantomData<K>,
}

impl<K: TimerKind, const N: usize> Default for TimerTable<K, N> {
    fn default() -> Self {
        debug_assert_eq!(K::ALL.len(), N, "a timer table has one slot a timer");
        TimerTable {
            deadlines: [None; N],
            kind: core::marker::PhantomData,
        }
    }
}

impl<K: TimerKind, const N: usize> fmt::Debug for TimerTable<K, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(K::ALL.iter().filter_map(|k| self.get(*k).map(|at| (k, at))))
            .finish()
    }
}

impl<K: TimerKind, const N: usize> TimerTable<K, N> {
    pub fn set(&mut self, timer: K, at: Time) {
        self.deadlines[timer.index()] = Some(at);
    }

    /// Set `timer` to `at`, or stop it when `at` is `None`.
    pub fn set_or_stop(&mut self, timer: K, at: Option<Time>) {
        self.deadlines[timer.index()] = at;
    }

    pub fn stop(&mut self, timer: K) {
        self.deadlines[timer.index()] = None;
    }

    pub fn get(&self, timer: K) -> Option<Time> {
        self.deadlines[timer.index()]
    }

    /// The next deadline and the timer it belongs to (the first in `K::ALL` on a tie).
    pub fn next(&self) -> Option<(Time, K)> {
        K::ALL
            .iter()
            .filter_map(|k| self.get(*k).map(|at| (at, *k)))
            .min_by_key(|(at, _)| *at)
    }

    pub fn earliest(&self) -> Option<Time> {
        self.next().map(|(at, _)| at)
    }

    /// Take the timer if it is due at `now` (and so clear it): each expiry is seen once.
    pub fn take_expired(&mut self, timer: K, now: Time) -> bool {
        match self.get(timer) {
            Some(at) if at <= now => {
                self.stop(timer);
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
    fn iso8601_is_a_utc_civil_time_with_milliseconds() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_005), "2000-02-29T00:00:00.005Z");
        assert_eq!(iso8601(1_796_038_385_123), "2026-11-30T11:33:05.123Z");
    }

    #[test]
    fn clock_clamps_backwards_steps() {
        let mut c = Clock::new(Time(100));
        assert_eq!(c.advance(Time(50)), Time(100));
        assert_eq!(c.advance(Time(150)), Time(150));
        assert_eq!(c.now(), Time(150));
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum T {
        Slow,
        Fast,
    }

    impl TimerKind for T {
        const ALL: &'static [T] = &[T::Slow, T::Fast];
        fn index(self) -> usize {
            self as usize
        }
    }

    #[test]
    fn timers_fire_once_and_report_the_earliest() {
        let mut t = TimerTable::<T, 2>::default();
        t.set(T::Slow, Time(30));
        t.set(T::Fast, Time(10));
        assert_eq!(t.earliest(), Some(Time(10)));
        assert!(!t.take_expired(T::Fast, Time(9)));
        assert!(t.take_expired(T::Fast, Time(10)));
        assert!(!t.take_expired(T::Fast, Time(10)));
        assert_eq!(t.earliest(), Some(Time(30)));
    }

    #[test]
    fn the_next_deadline_names_its_timer() {
        let mut t = TimerTable::<T, 2>::default();
        assert_eq!(t.next(), None);
        t.set(T::Slow, Time(30));
        assert_eq!(t.next(), Some((Time(30), T::Slow)));
        t.set(T::Fast, Time(10));
        assert_eq!(t.next(), Some((Time(10), T::Fast)));
        // A tie goes to the timer listed first.
        t.set(T::Slow, Time(10));
        assert_eq!(t.next(), Some((Time(10), T::Slow)));
        t.set_or_stop(T::Slow, None);
        assert_eq!(t.next(), Some((Time(10), T::Fast)));
        t.stop(T::Fast);
        assert_eq!((t.next(), t.earliest()), (None, None));
    }

    #[test]
    fn debug_lists_the_running_timers_by_name() {
        let mut t = TimerTable::<T, 2>::default();
        t.set(T::Fast, Time(7));
        assert_eq!(format!("{t:?}"), "{Fast: t=7ms}");
    }
}
