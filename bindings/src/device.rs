//! `Device`, the scripted engine and the in-memory store as JS classes: the device role, in
//! builds with the `device` feature.

use wasm_bindgen::prelude::*;

use lembas_core::device::{ConnId, Device, DialFailure, Handled, Input, Unreadable};
use lembas_core::engine::Engine;
use lembas_core::engine::{Decision, EngineEvent, TurnStart};
use lembas_core::scripted::ScriptedEngine;
use lembas_core::store::MemStore;
use lembas_core::store::{Entry, Record};
use lembas_runtime_wasm::js::{array, bytes, err, from_js, time, to_js, whole};

use crate::{deadline, json, turn_phase};

/// The device (ACP's agent): sessions, turn ledgers, cards, deletes, and the connections on it.
#[wasm_bindgen(js_name = Device)]
pub struct JsDevice {
    inner: Device,
    unreadable: Vec<Unreadable>,
}

#[wasm_bindgen(js_class = Device)]
impl JsDevice {
    /// A fresh device with an empty store.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "DeviceConfig | undefined")] config: JsValue,
        now: f64,
    ) -> Result<JsDevice, JsError> {
        let config = json::device_config(from_js(&config)?).map_err(err)?;
        Ok(JsDevice {
            inner: Device::new(config, time(now)?).map_err(err)?,
            unreadable: Vec::new(),
        })
    }

    /// A device rebuilt from every entry of its store (what `MemStore.entries()` or an
    /// IndexedDB scan gives). Entries it could not read are kept out and listed by
    /// `unreadable()`.
    pub fn restore(
        #[wasm_bindgen(unchecked_param_type = "DeviceConfig | undefined")] config: JsValue,
        #[wasm_bindgen(unchecked_param_type = "StoreEntry[]")] entries: JsValue,
        now: f64,
    ) -> Result<JsDevice, JsError> {
        let config = json::device_config(from_js(&config)?).map_err(err)?;
        let entries = json::read::<Vec<Entry>>("store entries", from_js(&entries)?).map_err(err)?;
        let (inner, unreadable) = Device::restore(config, entries, time(now)?).map_err(err)?;
        Ok(JsDevice { inner, unreadable })
    }

    /// What `restore` could not read: `{ table, key, why }`.
    #[wasm_bindgen(unchecked_return_type = "{ table: StoreTable; key: string; why: string }[]")]
    pub fn unreadable(&self) -> JsValue {
        to_js(&json::out(&self.unreadable))
    }

    /// Take one input, in the shape the conformance transcripts record (`DeviceInput`: every
    /// method below as one object, `{ type: "frame", conn, frame }`). Returns what it gave:
    /// the new connection's id for `open`; for `delete_session`, whether there was such a
    /// session; for `reconfigure`, whether anything changed; for `terminal_opened`, whether the
    /// device still wants it; else `undefined` (a `session_loaded`'s unreadable entries are
    /// added to `unreadable()`).
    #[wasm_bindgen(unchecked_return_type = "number | boolean | undefined")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "DeviceInput")] input: JsValue,
        now: f64,
    ) -> Result<JsValue, JsError> {
        let input = json::read::<Input>("device input", from_js(&input)?).map_err(err)?;
        Ok(match self.inner.handle(input, time(now)?).map_err(err)? {
            Handled::Opened(conn) => JsValue::from_f64(conn.0 as f64),
            Handled::Changed(b) | Handled::Wanted(b) => JsValue::from_bool(b),
            Handled::Unreadable(bad) => {
                self.unreadable.extend(bad);
                JsValue::UNDEFINED
            }
            _ => JsValue::UNDEFINED,
        })
    }

    /// Start keeping a link to the instance up: a `dial` effect follows.
    #[wasm_bindgen(js_name = startLink)]
    pub fn start_link(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.start_link(time(now)?);
        Ok(())
    }

    /// A connection opened (`"link"` after a `dial` effect, `"stdio"`, `"terminal"`, `"hub"`); returns
    /// its id.
    pub fn open(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ConnKind")] kind: &str,
        now: f64,
    ) -> Result<f64, JsError> {
        let kind = json::conn_kind(kind).map_err(err)?;
        let conn = self.inner.handle_open(kind, time(now)?).map_err(err)?;
        Ok(conn.0 as f64)
    }

    /// The dial asked for failed.
    #[wasm_bindgen(js_name = dialFailed)]
    pub fn dial_failed(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "DialFailure")] failure: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let failure = json::read::<DialFailure>("dial failure", from_js(&failure)?).map_err(err)?;
        self.inner.handle_dial_failed(failure, time(now)?);
        Ok(())
    }

    /// One message arrived on a connection.
    pub fn frame(
        &mut self,
        conn: f64,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array | ArrayBuffer")] data: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let conn = ConnId(whole("conn", conn)?);
        self.inner
            .handle_frame(conn, &bytes(&data)?, time(now)?)
            .map_err(err)
    }

    /// A connection closed, with the peer's close code when it sent one.
    pub fn closed(&mut self, conn: f64, code: Option<u16>, now: f64) -> Result<(), JsError> {
        let conn = ConnId(whole("conn", conn)?);
        self.inner
            .handle_closed(conn, code, time(now)?)
            .map_err(err)
    }

    /// Time passed: fire what is due.
    pub fn tick(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.handle_timeout(time(now)?);
        Ok(())
    }

    /// Every record up to `persist` effect `seq` is durable.
    pub fn persisted(&mut self, seq: f64, now: f64) -> Result<(), JsError> {
        self.inner.handle_persisted(whole("seq", seq)?, time(now)?);
        Ok(())
    }

    /// The answer to a `load_session` effect: the session's entries in the store (its record,
    /// turns and history; others are ignored; none: the store does not have it). Entries it
    /// could not read are kept out and added to `unreadable()`.
    #[wasm_bindgen(js_name = sessionLoaded)]
    pub fn session_loaded(
        &mut self,
        request: f64,
        #[wasm_bindgen(unchecked_param_type = "StoreEntry[]")] entries: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let entries = json::read::<Vec<Entry>>("store entries", from_js(&entries)?).map_err(err)?;
        let bad = self
            .inner
            .handle_session_loaded(whole("request", request)?, entries, time(now)?);
        self.unreadable.extend(bad);
        Ok(())
    }

    /// The answer to a `load_session` effect whose read failed, with why: the requests that
    /// waited for the session are refused with it; the session stays in the store.
    #[wasm_bindgen(js_name = sessionLoadFailed)]
    pub fn session_load_failed(
        &mut self,
        request: f64,
        error: &str,
        now: f64,
    ) -> Result<(), JsError> {
        self.inner
            .handle_session_load_failed(whole("request", request)?, error, time(now)?);
        Ok(())
    }

    /// The answer to a `read_history` effect: the session's history entries it asked for.
    #[wasm_bindgen(js_name = historyRead)]
    pub fn history_read(
        &mut self,
        request: f64,
        #[wasm_bindgen(unchecked_param_type = "StoreEntry[]")] entries: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let entries = json::read::<Vec<Entry>>("store entries", from_js(&entries)?).map_err(err)?;
        self.inner
            .handle_history_read(whole("request", request)?, Ok(entries), time(now)?);
        Ok(())
    }

    /// The answer to a `read_history` effect whose read failed, with why: the `history`
    /// request is refused with it.
    #[wasm_bindgen(js_name = historyReadFailed)]
    pub fn history_read_failed(
        &mut self,
        request: f64,
        error: &str,
        now: f64,
    ) -> Result<(), JsError> {
        self.inner.handle_history_read(
            whole("request", request)?,
            Err(error.to_string()),
            time(now)?,
        );
        Ok(())
    }

    /// The answer to a `read_events` effect: the set-aside session's event log blocks.
    #[wasm_bindgen(js_name = eventsRead)]
    pub fn events_read(
        &mut self,
        request: f64,
        #[wasm_bindgen(unchecked_param_type = "StoreEntry[]")] entries: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let entries = json::read::<Vec<Entry>>("store entries", from_js(&entries)?).map_err(err)?;
        self.inner
            .handle_events_read(whole("request", request)?, Ok(entries), time(now)?);
        Ok(())
    }

    /// The answer to a `read_events` effect whose read failed, with why: the
    /// `_lembas/session/events` request is refused with it; the session stays set aside.
    #[wasm_bindgen(js_name = eventsReadFailed)]
    pub fn events_read_failed(
        &mut self,
        request: f64,
        error: &str,
        now: f64,
    ) -> Result<(), JsError> {
        self.inner.handle_events_read(
            whole("request", request)?,
            Err(error.to_string()),
            time(now)?,
        );
        Ok(())
    }

    /// The answer to a `resolve_path` effect: `{ path }` (resolved) or `{ error }`.
    #[wasm_bindgen(js_name = pathResolved)]
    pub fn path_resolved(
        &mut self,
        request: f64,
        #[wasm_bindgen(unchecked_param_type = "PathResolution")] resolved: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let resolved = json::path_resolution(from_js(&resolved)?).map_err(err)?;
        self.inner
            .handle_path_resolved(whole("request", request)?, resolved, time(now)?);
        Ok(())
    }

    /// The answer to a `write_attachment` effect: `error` unset when it was written, else why
    /// not (its prompt is then refused with it, and its turn never starts).
    #[wasm_bindgen(js_name = attachmentWritten)]
    pub fn attachment_written(
        &mut self,
        request: f64,
        error: Option<String>,
        now: f64,
    ) -> Result<(), JsError> {
        let written = error.map_or(Ok(()), Err);
        self.inner
            .handle_attachment_written(whole("request", request)?, written, time(now)?);
        Ok(())
    }

    /// The answer to an `open_terminal` effect: `{ shell, integration }` when the shell started,
    /// or `{ error }`. Returns whether the device still wants it (`false`: hang it up).
    #[wasm_bindgen(js_name = terminalOpened)]
    pub fn terminal_opened(
        &mut self,
        terminal_id: &str,
        #[wasm_bindgen(unchecked_param_type = "TerminalStart")] started: JsValue,
        now: f64,
    ) -> Result<bool, JsError> {
        let started = json::terminal_start(from_js(&started)?).map_err(err)?;
        Ok(self
            .inner
            .handle_terminal_opened(terminal_id, started, time(now)?))
    }

    /// Bytes a terminal's shell wrote.
    #[wasm_bindgen(js_name = terminalOutput)]
    pub fn terminal_output(
        &mut self,
        terminal_id: &str,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array | ArrayBuffer")] data: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        self.inner
            .handle_terminal_output(terminal_id, &bytes(&data)?, time(now)?);
        Ok(())
    }

    /// A terminal's shell ended with `code`.
    #[wasm_bindgen(js_name = terminalExit)]
    pub fn terminal_exit(&mut self, terminal_id: &str, code: i32, now: f64) -> Result<(), JsError> {
        self.inner
            .handle_terminal_exit(terminal_id, code, time(now)?);
        Ok(())
    }

    /// What the engine reports about a turn (a `ScriptedEngine` report's `event`, or a real
    /// engine's).
    pub fn engine(
        &mut self,
        session_id: &str,
        turn_id: &str,
        #[wasm_bindgen(unchecked_param_type = "EngineEvent")] event: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let event = json::read::<EngineEvent>("engine event", from_js(&event)?).map_err(err)?;
        self.inner
            .handle_engine(session_id, turn_id, event, time(now)?);
        Ok(())
    }

    /// Delete a session on the device's own account; the client hears of it now or on the
    /// next link. Returns whether there was such a session.
    #[wasm_bindgen(js_name = deleteSession)]
    pub fn delete_session(&mut self, session_id: &str, now: f64) -> Result<bool, JsError> {
        Ok(self.inner.delete_session(session_id, time(now)?))
    }

    /// Every output ready now, in order. Call after every input.
    #[wasm_bindgen(unchecked_return_type = "DeviceOutput[]")]
    pub fn drain(&mut self) -> JsValue {
        let mut out = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            out.push(json::out(&o));
        }
        array(out)
    }

    /// When to call `tick` next (milliseconds), or `undefined`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        deadline(self.inner.poll_timeout())
    }

    /// What the session's ledger knows of a turn: `"queued"`, `"running"`, `"done"`, or
    /// `undefined`.
    #[wasm_bindgen(js_name = turnState, unchecked_return_type = "TurnPhase | undefined")]
    pub fn turn_state(&self, session_id: &str, turn_id: &str) -> JsValue {
        turn_phase(self.inner.turn_state(session_id, turn_id))
    }

    #[wasm_bindgen(js_name = sessionCount)]
    pub fn session_count(&self) -> f64 {
        self.inner.session_count() as f64
    }

    /// Whether the device gave up linking (4400, a refused token, an unsupported server).
    #[wasm_bindgen(js_name = linkStopped)]
    pub fn link_stopped(&self) -> bool {
        self.inner.link_stopped()
    }

    /// The connections open now.
    #[wasm_bindgen(unchecked_return_type = "{ conn: number; kind: ConnKind }[]")]
    pub fn connections(&self) -> JsValue {
        array(
            self.inner
                .connections()
                .map(|(c, k)| serde_json::json!({ "conn": c.0, "kind": k })),
        )
    }
}

/// The deterministic scripted engine the native device uses by default: a prompt's own lines
/// say what the turn does (`say`, `think`, `sleep`, `tool`, `permit`, `ask`, `plan`, ...).
#[wasm_bindgen(js_name = ScriptedEngine)]
pub struct JsScriptedEngine {
    inner: ScriptedEngine,
}

impl Default for JsScriptedEngine {
    fn default() -> Self {
        Self::new()
    }
}

#[wasm_bindgen(js_class = ScriptedEngine)]
impl JsScriptedEngine {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsScriptedEngine {
        JsScriptedEngine {
            inner: ScriptedEngine::new(),
        }
    }

    /// Run a turn (a `start_turn` effect's `turn`).
    pub fn start(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "TurnStart")] turn: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let turn = json::read::<TurnStart>("turn", from_js(&turn)?).map_err(err)?;
        self.inner.start(&turn, time(now)?);
        Ok(())
    }

    pub fn cancel(&mut self, session_id: &str, turn_id: &str) {
        self.inner.cancel(session_id, turn_id);
    }

    pub fn steer(
        &mut self,
        session_id: &str,
        turn_id: &str,
        id: f64,
        text: &str,
    ) -> Result<(), JsError> {
        self.inner
            .steer(session_id, turn_id, whole("id", id)?, text);
        Ok(())
    }

    /// A card the turn put was decided (a `card_decided` effect).
    pub fn decide(
        &mut self,
        session_id: &str,
        turn_id: &str,
        tool_call_id: &str,
        #[wasm_bindgen(unchecked_param_type = "Decision")] decision: JsValue,
        now: f64,
    ) -> Result<(), JsError> {
        let decision = json::read::<Decision>("decision", from_js(&decision)?).map_err(err)?;
        self.inner
            .decide(session_id, turn_id, tool_call_id, &decision, time(now)?);
        Ok(())
    }

    /// Route a device effect meant for the engine (`start_turn`, `cancel_turn`, `steer`,
    /// `card_decided`); returns whether it was one.
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Effect")] effect: JsValue,
        now: f64,
    ) -> Result<bool, JsError> {
        let effect = from_js(&effect)?;
        let Some(command) = json::engine_command_from(&effect).map_err(err)? else {
            return Ok(false);
        };
        self.inner.handle_command(command, time(now)?);
        Ok(true)
    }

    /// Forget every run (the process died).
    pub fn clear(&mut self) {
        self.inner.clear();
    }

    pub fn tick(&mut self, now: f64) -> Result<(), JsError> {
        self.inner.handle_timeout(time(now)?);
        Ok(())
    }

    /// Every report ready now: `{ sessionId, turnId, event }`, to hand to `Device.engine`.
    #[wasm_bindgen(unchecked_return_type = "EngineReport[]")]
    pub fn drain(&mut self) -> JsValue {
        let mut out = Vec::new();
        while let Some((s, t, e)) = self.inner.poll_event() {
            out.push(json::report(&s, &t, &e));
        }
        array(out)
    }

    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        deadline(self.inner.poll_timeout())
    }

    /// Turns running now.
    pub fn running(&self) -> f64 {
        self.inner.running() as f64
    }
}

/// An in-memory store that applies `persist` records as a real one would (the reference the
/// IndexedDB store is tested against); `entries()` feeds `Device.restore`.
#[wasm_bindgen(js_name = MemStore)]
#[derive(Default)]
pub struct JsMemStore {
    inner: MemStore,
}

#[wasm_bindgen(js_class = MemStore)]
impl JsMemStore {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsMemStore {
        JsMemStore::default()
    }

    pub fn apply(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "StoreRecord[]")] records: JsValue,
    ) -> Result<(), JsError> {
        let records = json::read::<Vec<Record>>("records", from_js(&records)?).map_err(err)?;
        self.inner.apply(&records);
        Ok(())
    }

    #[wasm_bindgen(unchecked_return_type = "StoreEntry[]")]
    pub fn entries(&self) -> JsValue {
        to_js(&json::out(&self.inner.entries()))
    }

    /// A session's history entries as a `read_history` effect asks for them.
    #[wasm_bindgen(unchecked_return_type = "StoreEntry[]")]
    pub fn history(
        &self,
        #[wasm_bindgen(js_name = sessionId)] session_id: &str,
        before: Option<f64>,
        limit: f64,
        #[wasm_bindgen(js_name = maxBytes)] max_bytes: f64,
    ) -> Result<JsValue, JsError> {
        let before = before.map(|b| whole("before", b)).transpose()?;
        let entries = self.inner.history(
            session_id,
            before,
            whole("limit", limit)? as usize,
            whole("maxBytes", max_bytes)? as usize,
        );
        Ok(to_js(&json::out(&entries)))
    }

    /// A set-aside session's event log blocks as a `read_events` effect asks for them.
    #[wasm_bindgen(unchecked_return_type = "StoreEntry[]")]
    pub fn events(&self, #[wasm_bindgen(js_name = sessionId)] session_id: &str) -> JsValue {
        to_js(&json::out(&self.inner.session_events(session_id)))
    }

    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.inner.len() as f64
    }
}
