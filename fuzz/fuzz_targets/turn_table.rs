//! One session's turn table alone: see `lembas_core::testing::fuzz::turn_table`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::turn_table(data);
});
