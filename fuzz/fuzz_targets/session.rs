//! One session alone: see `lembas_core::testing::fuzz::session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::session(data);
});
