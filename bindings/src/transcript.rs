//! Conformance transcripts (`spec/conformance/*.json`): everything that went into a device and
//! a client, and everything that came out, in order, with virtual time. Each step is one input
//! to one role (`"device"` or `"client"`), in the same plain-object shapes as the JS classes
//! take and give, followed by every output drained after it. Effect results (a `persisted`
//! ack, an engine's report, a resolved path, an opened link) are inputs like frames, so a
//! replay needs neither an engine nor a disk: feed each role its inputs at their times and
//! compare what it drains. The two roles replay independently of each other.
//!
//! ```json
//! { "name": "prompt", "description": "…", "device": {DeviceConfig}, "client": {ClientConfig},
//!   "steps": [ { "at": 0, "role": "device", "input": { "type": "start_link" },
//!                "outputs": [ { "type": "effect", "effect": { "kind": "dial" } } ] }, … ] }
//! ```
//!
//! Device inputs are `lembas_core::device::Input` in its serde shape (`input.type`: `start_link`,
//! `open {kind}`, `dial_failed {failure}`, `frame {conn, frame}`, `closed {conn, code}`, `tick`,
//! `persisted {seq}`, `path_resolved {request, path | error}`, `engine {sessionId, turnId,
//! event}`, `delete_session {sessionId}`, and the rest that type names), handed to
//! `Device::handle`. Two steps are the transcript's own, not the device's: `session_loaded
//! {request, sessionId}` (a `load_session` effect answered from the transcript's store) and
//! `restart` (the process dies and comes back: `Device.restore` from every record its
//! `persist` effects wrote so far).
//! Client inputs are `lembas_core::client::Input` in its serde shape (`link_up`, `link_down`,
//! `frame {frame}`, `tick`, `call {method, params}`, `notify {method, params}`, `respond {id,
//! result | error}`, `prompt {sessionId, blocks, turnId?}`, `delete_session {sessionId}`,
//! `restore_pending_deletes {kept}`, `activity`), handed to `Client::handle`. A step may carry
//! `returns`: what the call gave back (a conn id, a request id, a turn id, a boolean).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use lembas_core::client::{Client, Handled as ClientHandled, Input as ClientInput};
use lembas_core::device::{Device, Effect, Handled, Input, Output};
use lembas_core::store::MemStore;
use lembas_core::{DeviceConfig, Time};

use crate::json::{self, ShapeError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Device,
    Client,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub at: u64,
    pub role: Role,
    pub input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<Value>,
    pub outputs: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    pub name: String,
    pub description: String,
    pub device: Value,
    pub client: Value,
    pub steps: Vec<Step>,
}

/// A device as a transcript drives it, with the store its `persist` effects write.
pub struct DeviceRunner {
    config: DeviceConfig,
    pub device: Device,
    pub store: MemStore,
}

impl DeviceRunner {
    pub fn new(config: Value) -> Result<DeviceRunner, ShapeError> {
        let config = json::device_config(config)?;
        let device = Device::new(config.clone(), Time::ZERO).map_err(|e| ShapeError(e.0))?;
        Ok(DeviceRunner {
            config,
            device,
            store: MemStore::default(),
        })
    }

    /// Feed one input at `at`; returns what it returned and every output drained after it.
    pub fn step(
        &mut self,
        input: &Value,
        at: u64,
    ) -> Result<(Option<Value>, Vec<Value>), ShapeError> {
        let now = Time(at);
        let input = match input["type"].as_str() {
            // Steps of the transcript alone, not inputs of the device: the process dies and
            // comes back, or a `load_session` effect is answered from the transcript's store.
            Some("restart") => return self.restart(now),
            Some("session_loaded") if input.get("entries").is_none() => {
                let session = input["sessionId"].as_str().unwrap_or_default();
                Input::SessionLoaded {
                    request: input["request"].as_u64().ok_or_else(|| {
                        ShapeError("session_loaded: `request` is not a number".into())
                    })?,
                    entries: self.store.session_entries(session),
                }
            }
            _ => json::read::<Input>("device input", input.clone())?,
        };
        let returns = match self.device.handle(input, now) {
            Ok(Handled::Opened(conn)) => Some(json!(conn.0)),
            Ok(Handled::Changed(b) | Handled::Wanted(b)) => Some(json!(b)),
            Ok(Handled::Unreadable(bad)) if !bad.is_empty() => {
                return Err(ShapeError(format!("unreadable store entries: {bad:?}")))
            }
            Ok(_) => None,
            Err(e) => return Err(ShapeError(e.to_string())),
        };
        Ok((returns, self.drain()))
    }

    /// The process dies and comes back: `Device::restore` from every record its `persist`
    /// effects wrote so far.
    fn restart(&mut self, now: Time) -> Result<(Option<Value>, Vec<Value>), ShapeError> {
        let (device, unreadable) = Device::restore(self.config.clone(), self.store.entries(), now)
            .map_err(|e| ShapeError(e.0))?;
        if !unreadable.is_empty() {
            return Err(ShapeError(format!(
                "unreadable store entries: {unreadable:?}"
            )));
        }
        self.device = device;
        Ok((None, self.drain()))
    }

    /// Every output ready now; the records of `persist` effects go to the store.
    fn drain(&mut self) -> Vec<Value> {
        let mut outputs = Vec::new();
        while let Some(o) = self.device.poll_output() {
            if let Output::Effect(Effect::Persist { records, .. }) = &o {
                self.store.apply(records);
            }
            outputs.push(json::out(&o));
        }
        outputs
    }
}

/// A client as a transcript drives it.
pub struct ClientRunner {
    pub client: Client,
}

impl ClientRunner {
    pub fn new(config: Value) -> Result<ClientRunner, ShapeError> {
        let config = json::client_config(config)?;
        Ok(ClientRunner {
            client: Client::new(config, Time::ZERO).map_err(|e| ShapeError(e.0))?,
        })
    }

    pub fn step(
        &mut self,
        input: &Value,
        at: u64,
    ) -> Result<(Option<Value>, Vec<Value>), ShapeError> {
        let input = json::read::<ClientInput>("client input", input.clone())?;
        let returns = match self.client.handle(input, Time(at)) {
            Ok(ClientHandled::Called(id)) => Some(json::id_value(&id)),
            Ok(ClientHandled::Prompted(turn)) => Some(json!(turn)),
            // A respond's "was it sent" is not recorded (the transcripts never did).
            Ok(_) => None,
            Err(e) => return Err(ShapeError(e.to_string())),
        };
        let mut outputs = Vec::new();
        while let Some(o) = self.client.poll_output() {
            outputs.push(json::out(&o));
        }
        Ok((returns, outputs))
    }
}

/// Where a replay first differed from its transcript.
#[derive(Debug)]
pub struct Mismatch {
    pub step: usize,
    pub role: Role,
    pub input: Value,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {} ({:?}, input {}): {}",
            self.step, self.role, self.input, self.what
        )
    }
}

/// Replay one role of a transcript against a fresh machine; the first difference is an error.
pub fn replay(t: &Transcript, role: Role) -> Result<usize, Mismatch> {
    let fail = |step: usize, s: &Step, what: String| Mismatch {
        step,
        role: s.role,
        input: s.input.clone(),
        what,
    };
    let setup = |e: ShapeError| Mismatch {
        step: 0,
        role,
        input: Value::Null,
        what: e.0,
    };
    let mut device = DeviceRunner::new(t.device.clone()).map_err(setup)?;
    let mut client = ClientRunner::new(t.client.clone()).map_err(setup)?;
    let mut n = 0;
    for (i, s) in t.steps.iter().enumerate().filter(|(_, s)| s.role == role) {
        let got = match role {
            Role::Device => device.step(&s.input, s.at),
            Role::Client => client.step(&s.input, s.at),
        }
        .map_err(|e| fail(i, s, e.0))?;
        if s.returns.is_some() && got.0 != s.returns {
            return Err(fail(
                i,
                s,
                format!("returned {:?}, the transcript says {:?}", got.0, s.returns),
            ));
        }
        if got.1 != s.outputs {
            return Err(fail(
                i,
                s,
                format!(
                    "outputs differ\n  got:      {}\n  expected: {}",
                    Value::Array(got.1),
                    Value::Array(s.outputs.clone())
                ),
            ));
        }
        n += 1;
    }
    Ok(n)
}
