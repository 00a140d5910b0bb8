//! Which engine answers the wasm device's prompts: the core's [`EngineChoice`] and
//! [`DeviceEngine`] (the same as the native shell's). Here the scripted one is the default
//! (tests and demos with no instance); the model engine's HTTP is performed with the global
//! `fetch` (`instance_http.rs`).

pub use lembas_core::engine_choice::{DeviceEngine, EngineChoice};
