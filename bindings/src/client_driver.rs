//! `ClientDriver`: the client run loop of `lembas-runtime-wasm` over the device links, timers
//! and the kept deletes handed in from JS, as a JS class. Its options are declared in
//! `lembas.d.ts` (`ClientDriverOptions`, `SocketLike`, `KeptDeletes`).

use wasm_bindgen::prelude::*;

use lembas_runtime_wasm::ClientDriver;

/// A wasm client (a web UI's role) on the device links it is handed with `attach`.
#[wasm_bindgen(js_name = ClientDriver)]
pub struct JsClientDriver {
    inner: ClientDriver,
}

#[wasm_bindgen(js_class = ClientDriver)]
impl JsClientDriver {
    /// A driver whose undelivered deletes (if kept in `options.storage`) are read at once;
    /// with `options.kept` (IndexedDB), use `ClientDriver.open`. Every option has a default,
    /// so `options` may be left out (`undefined` here), and TypeScript is told it is optional.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "ClientDriverOptions")] options: JsValue,
    ) -> Result<JsClientDriver, JsValue> {
        Ok(JsClientDriver {
            inner: ClientDriver::new(&options)?,
        })
    }

    /// A driver whose undelivered deletes are loaded from `options.kept` first.
    #[wasm_bindgen(unchecked_return_type = "Promise<ClientDriver>")]
    pub fn open(
        #[wasm_bindgen(unchecked_optional_param_type = "ClientDriverOptions")] options: JsValue,
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
