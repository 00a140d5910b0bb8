//! The device's run loop without JS: a core `Device` and the scripted engine, routed to each
//! other in Rust (a turn's start, cancel, steer and card decisions go to the engine, its
//! reports straight back to the device), and what is left over for the shell as
//! [`DeviceAction`]s. Pure, so the routing is tested natively.

use lembas_core::device::{ConnId, Device, Effect, Output};
use lembas_core::scripted::ScriptedEngine;
use lembas_core::store::Record;
use lembas_core::Time;

use crate::json;

/// Work for the shell, in the order the device asked for it.
#[derive(Debug, PartialEq)]
pub enum DeviceAction {
    Send {
        conn: ConnId,
        frame: String,
    },
    Close {
        conn: ConnId,
        code: u16,
        reason: String,
    },
    Dial,
    /// Only with a store in JS: write these, then `handle_persisted(seq)`.
    Persist {
        seq: u64,
        records: Vec<Record>,
    },
    /// Only with a `resolvePath` in JS.
    ResolvePath {
        request: u64,
        path: String,
    },
    /// Only with a store in JS: read back this session's entries, then
    /// `handle_session_loaded(request)`.
    LoadSession {
        request: u64,
        session_id: String,
    },
    Stop(String),
    /// What neither the loop nor the shell performs (attachments, terminals): `onEffect`.
    Effect(Effect),
}

pub struct DeviceLoop {
    pub device: Device,
    engine: ScriptedEngine,
    store_in_js: bool,
    resolve_in_js: bool,
}

impl DeviceLoop {
    /// `store_in_js`: persists go to the shell; without, the device's own state is all there
    /// is and a persist is acknowledged at once. `resolve_in_js`: paths go to the shell;
    /// without, a path resolves to itself.
    pub fn new(device: Device, store_in_js: bool, resolve_in_js: bool) -> DeviceLoop {
        DeviceLoop {
            device,
            engine: ScriptedEngine::new(),
            store_in_js,
            resolve_in_js,
        }
    }

    /// Drain the device and the engine until both are quiet.
    pub fn pump(&mut self, now: Time, out: &mut Vec<DeviceAction>) {
        loop {
            if let Some(o) = self.device.poll_output() {
                self.route(o, now, out);
            } else if let Some((session, turn, event)) = self.engine.poll_event() {
                self.device.handle_engine(&session, &turn, event, now);
            } else {
                return;
            }
        }
    }

    fn route(&mut self, o: Output, now: Time, out: &mut Vec<DeviceAction>) {
        let effect = match o {
            Output::Send { conn, frame } => {
                let frame = json::frame_string(frame);
                return out.push(DeviceAction::Send { conn, frame });
            }
            Output::Close { conn, code, reason } => {
                return out.push(DeviceAction::Close { conn, code, reason })
            }
            Output::Effect(e) => e,
            // Never asked for: the wasm device runs without liveness (`json::device_config`),
            // since a JS socket cannot ping.
            Output::Ping { .. } => return,
            // Outputs are non-exhaustive; this build routes every kind there is.
            _ => return,
        };
        if self.engine.perform(&effect, now) {
            return;
        }
        match effect {
            Effect::Dial => out.push(DeviceAction::Dial),
            Effect::Stop { message } => out.push(DeviceAction::Stop(message)),
            Effect::Persist { seq, records } if self.store_in_js => {
                out.push(DeviceAction::Persist { seq, records })
            }
            Effect::Persist { seq, .. } => self.device.handle_persisted(seq, now),
            Effect::LoadSession {
                request,
                session_id,
            } if self.store_in_js => out.push(DeviceAction::LoadSession {
                request,
                session_id,
            }),
            // Without a store nothing is set aside (`has_store: false`): nothing to read.
            Effect::LoadSession { request, .. } => {
                self.device.handle_session_loaded(request, Vec::new(), now);
            }
            Effect::ResolvePath { request, path } if self.resolve_in_js => {
                out.push(DeviceAction::ResolvePath { request, path })
            }
            Effect::ResolvePath { request, path } => {
                self.device.handle_path_resolved(request, Ok(path), now)
            }
            other => out.push(DeviceAction::Effect(other)),
        }
    }

    pub fn tick(&mut self, now: Time) {
        self.device.handle_timeout(now);
        self.engine.handle_timeout(now);
    }

    /// The earliest deadline of the device and the engine.
    pub fn deadline(&self) -> Option<Time> {
        [self.device.poll_timeout(), self.engine.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }
}
