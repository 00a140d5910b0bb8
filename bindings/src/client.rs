//! `Client` as a JS class: the client role, in every build.

use wasm_bindgen::prelude::*;

use lembas_core::client::{Client, Handled, Input};
use lembas_runtime_wasm::js::{array, bytes, err, from_js, time, to_js};

use crate::{deadline, json};

/// The client (the LLeMbas web UI's role) on one device's link, one link at a time.
#[wasm_bindgen(js_name = Client)]
pub struct JsClient {
    inner: Client,
}

#[wasm_bindgen(js_class = Client)]
impl JsClient {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "ClientConfig | undefined")] config: JsValue,
        now: f64,
    ) -> Result<JsClient, JsError> {
        let config = json::client_config(from_js(&config)?).map_err(err)?;
        Ok(JsClient {
            inner: Client::new(config, time(now)?).map_err(err)?,
        })
    }

    /// Take one input, in the shape the conformance transcripts record (`ClientInput`: every
    /// method below as one object, `{ type: "call", method, params }`). Returns what it gave:
    /// the request id for `call`, the turn id for `prompt`, whether `respond` sent its answer;
    /// else `undefined`. A refused call is an `Error`, as from the methods.
    #[wasm_bindgen(unchecked_return_type = "RequestId | boolean | undefined")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ClientInput")] input: JsValue,
        now: f64,
    ) -> Result<JsValue, JsError> {
        let input = json::read::<Input>("client input", from_js(&input)?).map_err(err)?;
        Ok(match self.inner.handle(input, time(now)?).map_err(err)? {
            Handled::Called(id) => to_js(&json::id_value(&id)),
            Handled::Prompted(turn) => JsValue::from_str(&turn),
            Handled::Sent(sent) => JsValue::from_bool(sent),
            _ => JsValue::UNDEFINED,
        })
    }

    /// A device's link reached us (the socket is open).
    #[wasm_bindgen(js_name = linkUp)]
    pub fn link_up(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.handle_link_up(time(now)?);
        Ok(())
    }

    /// The link is gone.
    #[wasm_bindgen(js_name = linkDown)]
    pub fn link_down(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.handle_link_down(time(now)?);
        Ok(())
    }

    /// One message arrived on the link.
    pub fn frame(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array | ArrayBuffer")] data: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        self.inner.handle_frame(&bytes(&data)?, time(now)?);
        Ok(())
    }

    pub fn tick(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.handle_timeout(time(now)?);
        Ok(())
    }

    /// Send a request; returns its id. Refused (an `Error`) when the link is not ready or the
    /// device did not list the method's capability.
    #[wasm_bindgen(unchecked_return_type = "RequestId")]
    pub fn call(&mut self, method: &str, params: JsValue, now: f64) -> Result<JsValue, JsError> {
        let params = from_js(&params)?;
        let id = self.inner.call(method, &params, time(now)?).map_err(err)?;
        Ok(to_js(&json::id_value(&id)))
    }

    /// Send a notification, gated like `call`.
    pub fn notify(&mut self, method: &str, params: JsValue, now: f64) -> Result<(), JsError> {
        let params = from_js(&params)?;
        self.inner.notify(method, &params, time(now)?).map_err(err)
    }

    /// Answer a request the device sent (a card): `{ result }` or `{ error }`.
    pub fn respond(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "RequestId")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Outcome")] outcome: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let id = json::id(&from_js(&id)?).map_err(err)?;
        let outcome = json::outcome_from(from_js(&outcome)?).map_err(err)?;
        self.inner.respond(&id, outcome, time(now)?);
        Ok(())
    }

    /// Send a prompt (ACP content blocks) with this turn id or one the client makes; kept and
    /// reattached across dropped links until answered. Returns the turn id.
    pub fn prompt(
        &mut self,
        session_id: &str,
        blocks: JsValue,
        turn_id: Option<String>,
        now: f64,
    ) -> Result<String, JsError> {
        let blocks = from_js(&blocks)?;
        self.inner
            .prompt(session_id, blocks, turn_id.as_deref(), time(now)?)
            .map_err(err)
    }

    /// Delete a session: sent now if the link is ready, else kept for the next link; `now`
    /// starts the wait for its answer.
    #[wasm_bindgen(js_name = deleteSession)]
    pub fn delete_session(&mut self, session_id: &str, now: f64) -> Result<(), JsError> {
        self.inner.delete_session(session_id, time(now)?);
        Ok(())
    }

    /// Deletes not yet answered (what a web UI keeps across a reload).
    #[wasm_bindgen(
        js_name = pendingDeletes,
        unchecked_return_type = "{ sessionId: string; refusals: number }[]"
    )]
    pub fn pending_deletes(&self) -> JsValue {
        to_js(&json::pending_deletes(&self.inner.pending_deletes()))
    }

    /// Put back deletes kept from before a reload.
    #[wasm_bindgen(js_name = restorePendingDeletes)]
    pub fn restore_pending_deletes(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "{ sessionId: string; refusals: number }[]")]
        kept: JsValue,
    ) -> Result<(), JsError> {
        let kept = json::kept_deletes(from_js(&kept)?).map_err(err)?;
        self.inner.restore_pending_deletes(&kept);
        Ok(())
    }

    /// Prompts sent and not yet answered.
    #[wasm_bindgen(unchecked_return_type = "{ sessionId: string; turnId: string }[]")]
    pub fn incomplete(&self) -> JsValue {
        to_js(&json::incomplete(&self.inner.incomplete()))
    }

    /// Cards open now, with the request id to `respond` to.
    #[wasm_bindgen(
        js_name = openCards,
        unchecked_return_type = "{ toolCallId: string; id: RequestId }[]"
    )]
    pub fn open_cards(&self) -> JsValue {
        to_js(&json::open_cards(self.inner.open_cards()))
    }

    #[wasm_bindgen(js_name = isReady)]
    pub fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    pub fn capabilities(&self) -> Vec<String> {
        self.inner.capabilities().to_vec()
    }

    #[wasm_bindgen(unchecked_return_type = "ClientOutput[]")]
    pub fn drain(&mut self) -> JsValue {
        let mut out = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            out.push(json::out(&o));
        }
        array(out)
    }

    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        deadline(self.inner.poll_timeout())
    }
}
