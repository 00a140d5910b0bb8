//! The device's run loop without JS: the core's `Host` (a `Device` joined to its engine, the
//! scripted one or the model engine: [`EngineChoice`]), and what is left over for the shell as
//! [`DeviceAction`]s. Pure, so the routing is tested natively.
//!
//! No backpressure reaches the engine here: a JS socket reports `bufferedAmount` but has no
//! event for when it drains, and this loop performs its sends only after a whole pump, so a
//! pause would need a polling timer and a pump cut short. Until then a turn's frames wait in
//! the socket's own buffer (a browser's or `ws`'s), as they did before the host loop.

use lembas_core::config::Model;
use lembas_core::device::{ConnId, Device, Effect};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::host::{Host, ShellOutput};
use lembas_core::store::Record;
use lembas_core::Time;

use crate::engine::{DeviceEngine, EngineChoice};
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
    /// The engine's HTTP to the instance or an attachment read: answer with `handle_io`.
    Io(IoCall),
    /// What neither the loop nor the shell performs (attachments, terminals): `onEffect`.
    Effect(Effect),
}

pub struct DeviceLoop {
    host: Host<DeviceEngine>,
    store_in_js: bool,
    resolve_in_js: bool,
}

impl DeviceLoop {
    /// `store_in_js`: persists go to the shell; without, the device's own state is all there
    /// is and a persist is acknowledged at once. `resolve_in_js`: paths go to the shell;
    /// without, a path resolves to itself. `engine`: the scripted engine, or the model engine
    /// on the device config's models (until [`DeviceLoop::set_models`]).
    pub fn new(
        device: Device,
        store_in_js: bool,
        resolve_in_js: bool,
        engine: EngineChoice,
    ) -> DeviceLoop {
        let engine = DeviceEngine::new(engine, device.config().models.clone());
        DeviceLoop {
            host: Host::new(device, engine),
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

    /// The instance's chat models, fetched again: the engine and the device both take them (a
    /// change the hello shows restarts the link once idle). Returns whether the device's list
    /// changed; `pump` after it.
    pub fn set_models(&mut self, models: Vec<Model>, now: Time) -> bool {
        self.host.engine_mut().set_models(models.clone());
        self.host.device_mut().set_models(models, now)
    }

    /// A reply to a [`DeviceAction::Io`]; `pump` after it.
    pub fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.host.handle_io(id, reply, now);
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
            // The model engine's (the scripted one asks for nothing): the driver performs it.
            ShellOutput::Io(call) => return out.push(DeviceAction::Io(call)),
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
