//! The host loop: one device joined to one engine, the same in every shell (smol, wasm, the
//! Pair, the fuzzer, the benches). It drains the device's outputs, hands the engine its
//! commands, feeds the engine's reports back into the device (except for sessions whose
//! readers are behind: backpressure), merges the two timers, and gives the shell only what the
//! shell must perform, as a [`ShellOutput`] it matches exhaustively: a new effect is a compile
//! error in every shell that must perform it, never a silent fall-through.
//!
//! ```
//! use lembas_core::device::{ConnKind, Device, Effect};
//! use lembas_core::host::{Host, ShellOutput};
//! use lembas_core::scripted::ScriptedEngine;
//! use lembas_core::{DeviceConfig, Time};
//!
//! let device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
//! let mut host = Host::new(device, ScriptedEngine::new());
//! let stdio = host.device_mut().handle_open(ConnKind::Stdio, Time(0)).unwrap();
//! let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
//! host.device_mut().handle_frame(stdio, init, Time(1)).unwrap();
//! // No connection is behind on its reading here: nothing is paused.
//! while let Some(out) = host.poll_output(Time(1), |_conn| false) {
//!     match out {
//!         ShellOutput::Send { conn, frame } => { /* write `frame` on `conn` */ }
//!         ShellOutput::Close { .. } | ShellOutput::Ping { .. } => {}
//!         ShellOutput::Io(call) => { /* do what the engine asked, then host.handle_io(..) */ }
//!         ShellOutput::Effect(effect) => match effect {
//!             Effect::Persist { seq, .. } => host.device_mut().handle_persisted(seq, Time(1)),
//!             _ => { /* a real shell performs each, by name */ }
//!         },
//!     }
//! }
//! let _wake_at = host.poll_timeout(); // then host.handle_timeout(now)
//! ```

use crate::device::{ConnId, Device, Effect, Output};
use crate::engine::Engine;
use crate::engine_io::{IoCall, IoId, IoReply};
use crate::time::Time;

/// What the shell must perform: the device's outputs less the engine's commands, which the
/// host has already handed to the engine. Not `#[non_exhaustive]`, on purpose: every shell
/// matches it (and [`Effect`]) in full.
#[derive(Debug, PartialEq)]
pub enum ShellOutput {
    /// Send one message (a WebSocket text message, or a stdio line) on a connection.
    Send {
        conn: ConnId,
        frame: Vec<u8>,
    },
    /// Close a connection (a WebSocket close code and reason; stdio just ends).
    Close {
        conn: ConnId,
        code: u16,
        reason: String,
    },
    /// Send a WebSocket ping on the link (see `device::Output::Ping`).
    Ping {
        conn: ConnId,
    },
    Effect(Effect),
    /// Something the engine needs done (an HTTP request to the instance, a file read): the
    /// shell performs it and answers with [`Host::handle_io`].
    Io(IoCall),
}

/// A device and the engine that answers its prompts.
pub struct Host<E> {
    device: Device,
    engine: E,
}

impl<E: Engine> Host<E> {
    pub fn new(device: Device, engine: E) -> Host<E> {
        Host { device, engine }
    }

    /// The device, for its getters.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device, for its inputs (`handle_*`); drain [`Host::poll_output`] after each.
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.device
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The engine, for what a shell-side engine is fed (see [`Engine`]) and `cancel_all`;
    /// drain [`Host::poll_output`] after.
    pub fn engine_mut(&mut self) -> &mut E {
        &mut self.engine
    }

    /// The process died and starts again as `device` (restored from its store): the engine's
    /// turns died with it.
    pub fn restart(&mut self, device: Device) {
        self.engine.forget_all();
        self.device = device;
    }

    /// The next thing the shell must perform, or `None` once the device and the engine are
    /// both quiet (then sleep until [`Host::poll_timeout`] or the next input). `paused(conn)`:
    /// whether the connection's outbound queue is past `outbound.pause_bytes`; a session any of
    /// whose holders is paused gets no engine event until it is not (its turn waits).
    #[must_use]
    pub fn poll_output(
        &mut self,
        now: Time,
        paused: impl FnMut(ConnId) -> bool,
    ) -> Option<ShellOutput> {
        poll_output(&mut self.device, &mut self.engine, now, paused)
    }

    /// A reply to one of the engine's [`ShellOutput::Io`] calls; drain [`Host::poll_output`]
    /// after.
    pub fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.engine.handle_io(id, reply, now)
    }

    /// The earliest deadline of the device and the engine.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        poll_timeout(&self.device, &self.engine)
    }

    /// Time passed: both the device's and the engine's due work is done (early is harmless).
    pub fn handle_timeout(&mut self, now: Time) {
        handle_timeout(&mut self.device, &mut self.engine, now)
    }
}

/// [`Host::poll_output`] for a shell that keeps the device and the engine as fields of its own
/// (the Pair, whose tests reach into both).
#[must_use]
pub fn poll_output<E: Engine + ?Sized>(
    device: &mut Device,
    engine: &mut E,
    now: Time,
    mut paused: impl FnMut(ConnId) -> bool,
) -> Option<ShellOutput> {
    loop {
        if let Some(out) = device.poll_output() {
            return Some(match out {
                Output::Send { conn, frame } => ShellOutput::Send { conn, frame },
                Output::Close { conn, code, reason } => ShellOutput::Close { conn, code, reason },
                Output::Ping { conn } => ShellOutput::Ping { conn },
                Output::Effect(effect) => ShellOutput::Effect(effect),
                Output::Engine(command) => {
                    engine.handle_command(command, now);
                    continue;
                }
            });
        }
        if let Some(call) = engine.poll_io() {
            return Some(ShellOutput::Io(call));
        }
        let holders_of = &*device;
        let report = engine.poll_event_unless(&mut |session| {
            // `any` stops at the first paused holder: the shell's predicate may remember it
            // (to wake when that queue drains).
            holders_of.holders(session).any(&mut paused)
        })?;
        let (session, turn, event) = report;
        device.handle_engine(&session, &turn, event, now);
    }
}

/// [`Host::poll_timeout`] for a device and an engine kept apart.
#[must_use]
pub fn poll_timeout<E: Engine + ?Sized>(device: &Device, engine: &E) -> Option<Time> {
    [device.poll_timeout(), engine.poll_timeout()]
        .into_iter()
        .flatten()
        .min()
}

/// [`Host::handle_timeout`] for a device and an engine kept apart.
pub fn handle_timeout<E: Engine + ?Sized>(device: &mut Device, engine: &mut E, now: Time) {
    device.handle_timeout(now);
    engine.handle_timeout(now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::ConnKind;
    use crate::scripted::ScriptedEngine;
    use crate::DeviceConfig;

    fn frame(v: serde_json::Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    /// Drain, performing persists and path resolutions as a shell does; the frames sent.
    fn drain(
        host: &mut Host<ScriptedEngine>,
        now: Time,
        paused: &dyn Fn(ConnId) -> bool,
    ) -> Vec<serde_json::Value> {
        let mut sent = Vec::new();
        while let Some(out) = host.poll_output(now, paused) {
            match out {
                ShellOutput::Send { frame, .. } => {
                    sent.push(serde_json::from_slice(&frame).unwrap())
                }
                ShellOutput::Effect(Effect::Persist { seq, .. }) => {
                    host.device_mut().handle_persisted(seq, now)
                }
                ShellOutput::Effect(Effect::ResolvePath { request, path }) => host
                    .device_mut()
                    .handle_path_resolved(request, Ok(path), now),
                // No command files here: the built-ins alone.
                ShellOutput::Effect(Effect::ReadCommands {
                    request, project, ..
                }) => host.device_mut().handle_commands_read(
                    request,
                    Ok(crate::commands::CommandsRead {
                        root: project,
                        ..Default::default()
                    }),
                    now,
                ),
                other => panic!("not asked for here: {other:?}"),
            }
        }
        sent
    }

    fn chunks_of(sent: &[serde_json::Value]) -> usize {
        sent.iter()
            .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .count()
    }

    /// The engine's commands never reach the shell, its reports reach the device, and a
    /// session whose reader is paused makes no progress until it reads again.
    #[test]
    fn engine_commands_stay_inside_and_a_paused_reader_holds_its_turn() {
        let mut config = DeviceConfig::default();
        config.remote.enabled = true;
        config.remote.roots = vec!["/w".into()];
        config.remote.trusted = config.remote.roots.clone();
        let device = Device::new(config, Time(0)).unwrap();
        let mut host = Host::new(device, ScriptedEngine::new());
        let conn = host
            .device_mut()
            .handle_open(ConnKind::Stdio, Time(0))
            .unwrap();
        let now = Time(1);
        let running = |_: ConnId| false;
        let reads = [
            serde_json::json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                               "params":{"protocolVersion":1}}),
            serde_json::json!({"jsonrpc":"2.0","id":1,"method":"session/new",
                               "params":{"cwd":"/w","mcpServers":[]}}),
        ];
        let mut sent = Vec::new();
        for r in reads {
            host.device_mut()
                .handle_frame(conn, &frame(r), now)
                .unwrap();
            sent.extend(drain(&mut host, now, &running));
        }
        let session = sent[1]["result"]["sessionId"].as_str().unwrap().to_string();
        let prompt = serde_json::json!({"jsonrpc":"2.0","id":2,"method":"session/prompt",
            "params":{"sessionId": session, "prompt":[{"type":"text","text":"chunks 5 8"}]}});
        host.device_mut()
            .handle_frame(conn, &frame(prompt), now)
            .unwrap();
        // Its one reader is behind: the turn starts, and waits.
        let behind = |c: ConnId| c == conn;
        let sent = drain(&mut host, now, &behind);
        assert_eq!(chunks_of(&sent), 0, "{sent:?}");
        assert_eq!(host.engine().running(), 1);
        assert_eq!(
            host.engine().poll_timeout(),
            None,
            "a paused turn sets no timer to spin on"
        );
        // It reads again: the turn runs to its end.
        let sent = drain(&mut host, now, &running);
        assert_eq!(chunks_of(&sent), 5, "{sent:?}");
        assert!(sent
            .iter()
            .any(|f| f["id"] == 2 && f["result"]["stopReason"] == "end_turn"));
        assert_eq!(host.engine().running(), 0);
    }
}
