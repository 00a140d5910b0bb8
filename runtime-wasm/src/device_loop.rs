//! The device's run loop without JS: the core's `Host` (a `Device` joined to the scripted
//! engine), and what is left over for the shell as [`DeviceAction`]s. Pure, so the routing is
//! tested natively.
//!
//! No backpressure reaches the engine here: a JS socket reports `bufferedAmount` but has no
//! event for when it drains, and this loop performs its sends only after a whole pump, so a
//! pause would need a polling timer and a pump cut short. Until then a turn's frames wait in
//! the socket's own buffer (a browser's or `ws`'s), as they did before the host loop.

use lembas_core::device::{ConnId, Device, Effect};
use lembas_core::engine_io::{IoCall, IoReply};
use lembas_core::host::{Host, ShellOutput};
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
    host: Host<ScriptedEngine>,
    store_in_js: bool,
    resolve_in_js: bool,
}

impl DeviceLoop {
    /// `store_in_js`: persists go to the shell; without, the device's own state is all there
    /// is and a persist is acknowledged at once. `resolve_in_js`: paths go to the shell;
    /// without, a path resolves to itself.
    pub fn new(device: Device, store_in_js: bool, resolve_in_js: bool) -> DeviceLoop {
        DeviceLoop {
            host: Host::new(device, ScriptedEngine::new()),
            store_in_js,
            resolve_in_js,
        }
    }

    pub fn device(&self) -> &Device {
        self.host.device()
    }

    /// The device, for an input; `pump` after it.
    pub fn device_mut(&mut self) -> &mut Device {
        self.host.device_mut()
    }

    /// Drain the device and the engine until both are quiet.
    pub fn pump(&mut self, now: Time, out: &mut Vec<DeviceAction>) {
        while let Some(o) = self.host.poll_output(now, |_| false) {
            self.route(o, now, out);
        }
    }

    fn route(&mut self, o: ShellOutput, now: Time, out: &mut Vec<DeviceAction>) {
        let effect = match o {
            ShellOutput::Send { conn, frame } => {
                let frame = json::frame_string(frame);
                return out.push(DeviceAction::Send { conn, frame });
            }
            ShellOutput::Close { conn, code, reason } => {
                return out.push(DeviceAction::Close { conn, code, reason })
            }
            ShellOutput::Effect(e) => e,
            // Never asked for: the wasm device runs without liveness (`json::device_config`),
            // since a JS socket cannot ping.
            ShellOutput::Ping { .. } => return,
            // The wasm device's engine is scripted, which asks for nothing; until it can
            // fetch, say so rather than leave a call unanswered.
            ShellOutput::Io(IoCall::Abort { .. }) => return,
            ShellOutput::Io(call) => {
                let reason = "this shell performs no engine I/O yet".into();
                return self
                    .host
                    .handle_io(call.id(), IoReply::Failed { reason }, now);
            }
        };
        let device = self.host.device_mut();
        match effect {
            Effect::Dial => out.push(DeviceAction::Dial),
            Effect::Stop { message } => out.push(DeviceAction::Stop(message)),
            Effect::Persist { seq, records } if self.store_in_js => {
                out.push(DeviceAction::Persist { seq, records })
            }
            Effect::Persist { seq, .. } => device.handle_persisted(seq, now),
            Effect::LoadSession {
                request,
                session_id,
            } if self.store_in_js => out.push(DeviceAction::LoadSession {
                request,
                session_id,
            }),
            // Without a store nothing is set aside (`has_store: false`): nothing to read.
            Effect::LoadSession { request, .. } => {
                device.handle_session_loaded(request, Vec::new(), now);
            }
            Effect::ResolvePath { request, path } if self.resolve_in_js => {
                out.push(DeviceAction::ResolvePath { request, path })
            }
            Effect::ResolvePath { request, path } => {
                device.handle_path_resolved(request, Ok(path), now)
            }
            // For JS's `onEffect` (attachments, terminals), named one by one so that a new
            // effect is decided here rather than passed on unnoticed.
            e @ (Effect::WriteAttachment { .. }
            | Effect::RemoveAttachments { .. }
            | Effect::OpenTerminal { .. }
            | Effect::TerminalInput { .. }
            | Effect::ResizeTerminal { .. }
            | Effect::CloseTerminal { .. }) => out.push(DeviceAction::Effect(e)),
        }
    }

    pub fn tick(&mut self, now: Time) {
        self.host.handle_timeout(now);
    }

    /// The earliest deadline of the device and the engine.
    pub fn deadline(&self) -> Option<Time> {
        self.host.poll_timeout()
    }
}
