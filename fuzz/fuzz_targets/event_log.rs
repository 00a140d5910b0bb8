//! One session's event log alone: see `lembas_core::testing::fuzz::event_log`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::event_log(data);
});
