//! The drivers' clock: `performance.now()` (monotonic), else `Date.now()`, or a `clock()` the
//! caller hands in (virtual time in a test). The core clamps a clock that goes backwards.

use wasm_bindgen::prelude::*;

use lembas_core::Time;

use crate::js::{self, Func};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

pub enum Clock {
    Performance,
    Date,
    Js(Func),
}

impl Clock {
    pub fn new(given: Option<Func>) -> Clock {
        match given {
            Some(f) => Clock::Js(f),
            None if js::member(&js_sys::global(), "performance").is_object() => Clock::Performance,
            None => Clock::Date,
        }
    }

    pub fn now(&self) -> Time {
        let ms = match self {
            Clock::Performance => performance_now(),
            Clock::Date => js_sys::Date::now(),
            Clock::Js(f) => match f.call0(&JsValue::UNDEFINED) {
                Ok(v) => v.as_f64().unwrap_or(0.0),
                Err(e) => {
                    js::report(e);
                    0.0
                }
            },
        };
        millis(ms)
    }
}

/// Milliseconds as the core counts them: whole, not negative, not past 2^53 (NaN is 0).
pub fn millis(ms: f64) -> Time {
    Time(ms.clamp(0.0, 9_007_199_254_740_991.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_clock_readings_become_whole_milliseconds() {
        assert_eq!(millis(12.7), Time(12));
        assert_eq!(millis(-5.0), Time(0));
        assert_eq!(millis(f64::NAN), Time(0));
        assert_eq!(millis(f64::INFINITY), Time(9_007_199_254_740_991));
    }
}
