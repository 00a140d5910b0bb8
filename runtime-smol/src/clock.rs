//! The shell's clock: milliseconds since the Unix epoch, clamped so it never goes backwards
//! (a wall clock stepped back by NTP must not re-fire deadlines the core already passed).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lembas_core::Time;

#[derive(Debug, Default)]
pub struct Clock {
    last: u64,
}

impl Clock {
    pub fn new() -> Clock {
        Clock::default()
    }

    pub fn now(&mut self) -> Time {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.last = self.last.max(wall);
        Time(self.last)
    }

    /// The `Instant` at which `at` falls, for a smol `Timer` (past deadlines are now).
    pub fn instant_of(&mut self, at: Time) -> Instant {
        let now = self.now();
        Instant::now() + Duration::from_millis(at.since(now))
    }
}
