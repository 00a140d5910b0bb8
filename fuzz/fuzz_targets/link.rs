//! The instance link's lifecycle alone: see `lembas_core::testing::fuzz::link`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::link(data);
});
