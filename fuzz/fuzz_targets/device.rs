//! A sequence of shell inputs through the device: see `lembas_core::testing::fuzz::device`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::device(data);
});
