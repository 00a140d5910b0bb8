//! One frame through the JSON-RPC codec: see `lembas_core::testing::fuzz::frame`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::frame(data);
});
