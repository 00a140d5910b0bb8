//! `DeviceDriver`: the device run loop of `lembas-runtime-wasm` over the instance link, timers
//! and a store handed in from JS, as a JS class (the `device` feature). Its options are declared
//! in `lembas.d.ts` (`DeviceDriverOptions`, `SocketLike`, `DeviceStore`, ...).

use wasm_bindgen::prelude::*;

use lembas_runtime_wasm::DeviceDriver;

use crate::turn_phase;

/// A wasm device: the core's device and its engine (the scripted one, or with `options.model`
/// the model engine, which reaches the instance through `fetch`), run over the instance link
/// that `options.dial()` makes, with its store in `options.store` (default: none, the device's
/// state lives as long as the driver).
#[wasm_bindgen(js_name = DeviceDriver)]
pub struct JsDeviceDriver {
    inner: DeviceDriver,
}

#[wasm_bindgen(js_class = DeviceDriver)]
impl JsDeviceDriver {
    /// A driver over a store whose `entries()` answers at once (or none); with an
    /// asynchronous one (IndexedDB), use `DeviceDriver.open`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "DeviceDriverOptions")] options: JsValue,
    ) -> Result<JsDeviceDriver, JsValue> {
        Ok(JsDeviceDriver {
            inner: DeviceDriver::new(&options)?,
        })
    }

    /// A driver over a store whose `entries()` may be a promise.
    #[wasm_bindgen(unchecked_return_type = "Promise<DeviceDriver>")]
    pub fn open(
        #[wasm_bindgen(unchecked_param_type = "DeviceDriverOptions")] options: JsValue,
    ) -> js_sys::Promise {
        DeviceDriver::open(&options, |inner| JsDeviceDriver { inner })
    }

    /// Start keeping the instance link up (it dials at once).
    pub fn start(&self) {
        self.inner.start();
    }

    /// Stop for good: close the link, abort the model engine's requests (and a model list
    /// being fetched), clear the timer.
    pub fn stop(&self) {
        self.inner.stop();
    }

    /// Delete a session on the device's own account; the client hears of it now or on the
    /// next link. Returns whether there was such a session.
    #[wasm_bindgen(js_name = deleteSession)]
    pub fn delete_session(&self, #[wasm_bindgen(js_name = sessionId)] session_id: &str) -> bool {
        self.inner.delete_session(session_id)
    }

    /// The store entries it could not read at start-up.
    #[wasm_bindgen(unchecked_return_type = "{ table: StoreTable; key: string; why: string }[]")]
    pub fn unreadable(&self) -> JsValue {
        self.inner.unreadable()
    }

    #[wasm_bindgen(js_name = sessionCount)]
    pub fn session_count(&self) -> f64 {
        self.inner.session_count() as f64
    }

    /// What the session's ledger knows of a turn.
    #[wasm_bindgen(js_name = turnState, unchecked_return_type = "TurnPhase | undefined")]
    pub fn turn_state(
        &self,
        #[wasm_bindgen(js_name = sessionId)] session_id: &str,
        #[wasm_bindgen(js_name = turnId)] turn_id: &str,
    ) -> JsValue {
        turn_phase(self.inner.turn_state(session_id, turn_id))
    }

    /// Whether the device gave up linking (4400, a refused token, an unsupported server).
    #[wasm_bindgen(js_name = linkStopped)]
    pub fn link_stopped(&self) -> bool {
        self.inner.link_stopped()
    }

    /// The answer to an `open_terminal` effect (from `onEffect`): `{ shell, integration }` or
    /// `{ error }`. Returns whether the device still wants it (`false`: hang it up).
    #[wasm_bindgen(js_name = terminalOpened)]
    pub fn terminal_opened(
        &self,
        #[wasm_bindgen(js_name = terminalId)] terminal_id: &str,
        #[wasm_bindgen(unchecked_param_type = "TerminalStart")] started: JsValue,
    ) -> Result<bool, JsValue> {
        self.inner.terminal_opened(terminal_id, &started)
    }

    /// Bytes a terminal's shell wrote.
    #[wasm_bindgen(js_name = terminalOutput)]
    pub fn terminal_output(
        &self,
        #[wasm_bindgen(js_name = terminalId)] terminal_id: &str,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array | ArrayBuffer")] data: JsValue,
    ) -> Result<(), JsValue> {
        self.inner.terminal_output(terminal_id, &data)
    }

    /// A terminal's shell ended with `code`.
    #[wasm_bindgen(js_name = terminalExit)]
    pub fn terminal_exit(
        &self,
        #[wasm_bindgen(js_name = terminalId)] terminal_id: &str,
        code: i32,
    ) {
        self.inner.terminal_exit(terminal_id, code);
    }
}
