//! The JS/TS surface of the LLeMbas link core: the only crate with `#[wasm_bindgen]` exports.
//!
//! `DeviceDriver` and `ClientDriver` (`device_driver.rs`, `client_driver.rs`) run a device or a
//! client over a socket, `setTimeout` and a store handed in from JS (the run loops of
//! `lembas-runtime-wasm`). Beneath them, four classes (`device.rs`: `Device`, `ScriptedEngine`,
//! `MemStore`; `client.rs`: `Client`), each a thin skin over the sans-IO core with the same run
//! loop in JS terms:
//!
//! ```js
//! const device = new Device({ seed: 1, remote: { enabled: true, roots: ["/w"] } }, 0);
//! device.startLink(0);
//! for (const out of device.drain()) {          // plain objects, see lembas.d.ts below
//!   if (out.type === "effect" && out.effect.kind === "dial") link = device.open("link", now());
//!   if (out.type === "send") socket.send(out.frame);
//! }
//! device.frame(link, message, now());          // then drain() again
//! setTimeout(() => device.tick(now()), device.nextDeadline() - now());
//! ```
//!
//! Everything that crosses is a plain object (configs, outputs, engine events, decisions, store
//! records) or a string/number; errors are JS `Error`s carrying the core's sentence. The shapes
//! are defined once in [`json`] (pure Rust, also used by the native conformance replay) and
//! declared for TypeScript in the custom section below. Time is a number of milliseconds on a
//! clock the caller picks (`performance.now()`, or virtual time in a test).
//!
//! The device side is the default feature `device`. Without it the module is the client role
//! alone, which is what a web UI loads (`build.sh`'s `pkg-web-client`, within the 400 KB budget).

mod client;
mod client_driver;
#[cfg(feature = "device")]
mod device;
#[cfg(feature = "device")]
mod device_driver;
#[cfg(feature = "device")]
pub mod transcript;

pub use lembas_runtime_wasm::json;

use wasm_bindgen::prelude::*;

use lembas_core::Time;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = include_str!("../lembas.d.ts");

fn deadline(t: Option<Time>) -> Option<f64> {
    t.map(|t| t.0 as f64)
}

#[cfg(feature = "device")]
fn turn_phase(p: Option<lembas_core::device::TurnPhase>) -> JsValue {
    p.map_or(JsValue::UNDEFINED, |p| {
        lembas_runtime_wasm::js::to_js(&json::out(&p))
    })
}

/// This build's version.
#[wasm_bindgen]
pub fn version() -> String {
    lembas_core::VERSION.to_string()
}
