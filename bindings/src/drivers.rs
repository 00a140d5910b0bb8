//! `DeviceDriver` and `ClientDriver`: the run loops of `lembas-runtime-wasm` over a socket,
//! `setTimeout` and a store handed in from JS, as JS classes. Their option objects are declared
//! in `lembas.d.ts` (`DeviceDriverOptions`, `ClientDriverOptions`, `SocketLike`, ...).

use wasm_bindgen::prelude::*;

use lembas_runtime_wasm::{ClientDriver, DeviceDriver};

use crate::turn_phase;

/// A wasm device: the core's device and the scripted engine, run over the instance link that
/// `options.dial()` makes, with its store in `options.store` (default: none, the device's
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

    /// Stop for good: close the link, clear the timer.
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

/// A wasm client (a web UI's role) on the device links it is handed with `attach`.
#[wasm_bindgen(js_name = ClientDriver)]
pub struct JsClientDriver {
    inner: ClientDriver,
}

#[wasm_bindgen(js_class = ClientDriver)]
impl JsClientDriver {
    /// A driver whose undelivered deletes (if kept in `options.storage`) are read at once;
    /// with `options.kept` (IndexedDB), use `ClientDriver.open`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "ClientDriverOptions | undefined")] options: JsValue,
    ) -> Result<JsClientDriver, JsValue> {
        Ok(JsClientDriver {
            inner: ClientDriver::new(&options)?,
        })
    }

    /// A driver whose undelivered deletes are loaded from `options.kept` first.
    #[wasm_bindgen(unchecked_return_type = "Promise<ClientDriver>")]
    pub fn open(
        #[wasm_bindgen(unchecked_param_type = "ClientDriverOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        ClientDriver::open(&options, |inner| JsClientDriver { inner })
    }

    /// Take a device's link: a socket open already (`readyState === 1`) or opening.
    pub fn attach(
        &self,
        #[wasm_bindgen(unchecked_param_type = "SocketLike")] socket: JsValue,
    ) -> Result<(), JsValue> {
        self.inner.attach(socket)
    }

    /// Send a request; returns its id. Refused (an `Error`) when the link is not ready or the
    /// device did not list the method's capability.
    #[wasm_bindgen(unchecked_return_type = "RequestId")]
    pub fn call(
        &self,
        method: &str,
        #[wasm_bindgen(unchecked_param_type = "unknown")] params: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.inner.call(method, &params)
    }

    /// Send a notification, gated like `call`.
    pub fn notify(
        &self,
        method: &str,
        #[wasm_bindgen(unchecked_param_type = "unknown")] params: JsValue,
    ) -> Result<(), JsValue> {
        self.inner.notify(method, &params)
    }

    /// Send a prompt (ACP content blocks) with this turn id or one the client makes; kept and
    /// reattached across dropped links until answered. Returns the turn id.
    pub fn prompt(
        &self,
        #[wasm_bindgen(js_name = sessionId)] session_id: &str,
        #[wasm_bindgen(unchecked_param_type = "unknown[]")] blocks: JsValue,
        #[wasm_bindgen(js_name = turnId)] turn_id: Option<String>,
    ) -> Result<String, JsValue> {
        self.inner.prompt(session_id, &blocks, turn_id)
    }

    /// Answer a request the device sent (a card): `{ result }` or `{ error }`. Returns whether
    /// it was sent (not for a request of an earlier link, or one answered already).
    pub fn respond(
        &self,
        #[wasm_bindgen(unchecked_param_type = "RequestId")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Outcome")] outcome: JsValue,
    ) -> Result<bool, JsValue> {
        self.inner.respond(&id, &outcome)
    }

    /// Delete a session: sent now if the link is ready, else kept (and in `storage` or
    /// `kept`) for the next link.
    #[wasm_bindgen(js_name = deleteSession)]
    pub fn delete_session(&self, #[wasm_bindgen(js_name = sessionId)] session_id: &str) {
        self.inner.delete_session(session_id);
    }

    /// The first event `accepts` takes from now on; rejects with an `Error` after `timeoutMs`
    /// (default 10000).
    #[wasm_bindgen(unchecked_return_type = "Promise<ClientEvent>")]
    pub fn next(
        &self,
        #[wasm_bindgen(unchecked_param_type = "(event: ClientEvent) => boolean")] accepts: JsValue,
        #[wasm_bindgen(js_name = timeoutMs)] timeout_ms: Option<f64>,
    ) -> Result<js_sys::Promise, JsValue> {
        self.inner.next(accepts, timeout_ms)
    }

    #[wasm_bindgen(js_name = isReady)]
    pub fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    /// Deletes not yet answered (what is kept across a reload).
    #[wasm_bindgen(
        js_name = pendingDeletes,
        unchecked_return_type = "{ sessionId: string; refusals: number }[]"
    )]
    pub fn pending_deletes(&self) -> JsValue {
        self.inner.pending_deletes()
    }

    /// Prompts sent and not yet answered.
    #[wasm_bindgen(unchecked_return_type = "{ sessionId: string; turnId: string }[]")]
    pub fn incomplete(&self) -> JsValue {
        self.inner.incomplete()
    }

    /// Cards open now, with the request id to `respond` to.
    #[wasm_bindgen(
        js_name = openCards,
        unchecked_return_type = "{ toolCallId: string; id: RequestId }[]"
    )]
    pub fn open_cards(&self) -> JsValue {
        self.inner.open_cards()
    }

    /// The capabilities the device listed on the current link.
    pub fn capabilities(&self) -> Vec<String> {
        self.inner.capabilities()
    }

    /// Stop: close the link, clear the timer, take no more links.
    pub fn stop(&self) {
        self.inner.stop();
    }
}
