//! The model engine alone, against an instance that answers anything: see
//! `lembas_core::testing::fuzz::model_engine`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lembas_core::testing::fuzz::model_engine(data);
});
