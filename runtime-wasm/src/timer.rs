//! One `setTimeout` a driver, re-armed at the earliest deadline of its machines. It is only
//! replaced when that deadline moves, so most frames cost no timer call.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use lembas_core::Time;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(f: &JsValue, ms: f64) -> JsValue;

    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
}

/// Call `f` once after `ms` milliseconds; returns the handle to [`cancel`] it with.
pub fn after(ms: u64, f: &JsValue) -> JsValue {
    set_timeout(f, ms.min(MAX_WAIT_MS) as f64)
}

pub fn cancel(handle: &JsValue) {
    clear_timeout(handle);
}

/// The longest wait `setTimeout` takes; a longer one fires at once.
pub const MAX_WAIT_MS: u64 = (1 << 31) - 1;

#[derive(Default)]
pub struct Timer {
    /// The pending timeout's handle and the deadline it was armed for.
    armed: RefCell<Option<(JsValue, Time)>>,
}

impl Timer {
    /// Fire `fire` at `deadline` (now if it passed). `fire` is only made when a timeout is
    /// really set.
    pub fn arm(&self, deadline: Time, now: Time, fire: impl FnOnce() -> JsValue) {
        if matches!(&*self.armed.borrow(), Some((_, at)) if *at == deadline) {
            return;
        }
        self.clear();
        let handle = after(wait_ms(deadline, now), &fire());
        *self.armed.borrow_mut() = Some((handle, deadline));
    }

    pub fn clear(&self) {
        let armed = self.armed.borrow_mut().take();
        if let Some((handle, _)) = armed {
            clear_timeout(&handle);
        }
    }

    /// The timeout went off: nothing is pending any more.
    pub fn fired(&self) {
        self.armed.borrow_mut().take();
    }
}

/// How long to wait from `now` until `deadline`, within what `setTimeout` takes.
pub fn wait_ms(deadline: Time, now: Time) -> u64 {
    deadline.0.saturating_sub(now.0).min(MAX_WAIT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_clamped_to_what_set_timeout_takes() {
        assert_eq!(wait_ms(Time(150), Time(100)), 50);
        assert_eq!(wait_ms(Time(100), Time(150)), 0);
        assert_eq!(wait_ms(Time(u64::MAX), Time(0)), MAX_WAIT_MS);
    }
}
