//! Which engine answers the device's prompts: the core's [`EngineChoice`] and [`DeviceEngine`]
//! (the same as the wasm shell's). Here the model engine is the default, and config.yaml's
//! `engine: scripted` keeps the scripted one (tests and `lembas demo`).

pub use lembas_core::engine_choice::{DeviceEngine, EngineChoice};
