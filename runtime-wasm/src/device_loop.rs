//! The device's run loop without JS: the core's `Host` (a `Device` joined to its engine, the
//! scripted one or the model engine: [`EngineChoice`]), and what is left over for the shell as
//! [`DeviceAction`]s. Pure, so the routing is tested natively.
//!
//! Backpressure reaches the engine as in the `lembas` binary: the host takes no engine event of
//! a session while the link that holds it is behind, that is while the bytes the socket still
//! buffers (`bufferedAmount`, and what the driver has not handed it yet) plus the frames this
//! pump has made for it reach `outbound.pause_bytes`. A JS socket has no event for when it
//! drains, so [`DeviceLoop::pump`] says when it held a session back and the driver looks again
//! a moment later.

use std::collections::BTreeMap;

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
    /// Only with a store in JS: read this part of a session's history, then
    /// `handle_history_read(request)`.
    ReadHistory {
        request: u64,
        session_id: String,
        before: Option<u64>,
        limit: usize,
        max_bytes: usize,
    },
    /// Only with a store in JS: read a set-aside session's event log blocks, then
    /// `handle_events_read(request)`.
    ReadEvents {
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

    /// The scripted engine's scripts for the next turns (`ScriptedEngine::set_replies`).
    /// Returns false for the model engine, which takes none.
    pub fn set_replies(&mut self, replies: Vec<String>) -> bool {
        match self.host.engine_mut() {
            DeviceEngine::Scripted(engine) => {
                engine.set_replies(replies);
                true
            }
            DeviceEngine::Model { .. } => false,
        }
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

    /// Drain the device and the engine until both are quiet, or until only sessions held back
    /// are left: `backlog(conn)` is what the shell still has to write on a connection. Returns
    /// whether a session was held back at the end (look again once the socket may have
    /// drained).
    pub fn pump(
        &mut self,
        now: Time,
        backlog: impl Fn(ConnId) -> usize,
        out: &mut Vec<DeviceAction>,
    ) -> bool {
        let limits = self.host.device().config().outbound;
        // The frames of this pump, which reach the socket only after it.
        let mut made: BTreeMap<ConnId, usize> = BTreeMap::new();
        loop {
            let mut held_back = false;
            let next = self.host.poll_output(now, |conn| {
                let queued = backlog(conn) + made.get(&conn).copied().unwrap_or(0);
                let behind = limits.is_behind(queued);
                held_back |= behind;
                behind
            });
            let Some(o) = next else {
                return held_back;
            };
            if let ShellOutput::Send { conn, frame } = &o {
                *made.entry(*conn).or_default() += frame.len();
            }
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
            Effect::ReadHistory {
                request,
                session_id,
                before,
                limit,
                max_bytes,
            } if self.store_in_js => out.push(DeviceAction::ReadHistory {
                request,
                session_id,
                before,
                limit,
                max_bytes,
            }),
            // Without a store a session's history is kept nowhere: say so, not "no turns".
            Effect::ReadHistory { request, .. } => device.handle_history_read(
                request,
                Err("this device was given no store, so it keeps no history".into()),
                now,
            ),
            Effect::ReadEvents {
                request,
                session_id,
            } if self.store_in_js => out.push(DeviceAction::ReadEvents {
                request,
                session_id,
            }),
            // Without a store nothing is set aside (`has_store: false`), so nothing asks; were
            // one asked, the request is refused saying why rather than answered "no events".
            Effect::ReadEvents { request, .. } => device.handle_events_read(
                request,
                Err("this device was given no store, so it keeps no event log there".into()),
                now,
            ),
            Effect::ResolvePath { request, path } if self.resolve_in_js => {
                out.push(DeviceAction::ResolvePath { request, path })
            }
            Effect::ResolvePath { request, path } => {
                device.handle_path_resolved(request, Ok(path), now)
            }
            // A page has no disk of its own to list.
            Effect::ListDirectory { request, .. } => device.handle_directory_listed(
                request,
                Err("this device runs in a web page, which has no disk to list".into()),
                now,
            ),
            // Nor files to read: a prompt's `@path` mentions stay text, a notice says why.
            Effect::ReadMentions { request, .. } => device.handle_mentions_read(
                request,
                Err("this device runs in a web page, which has no disk to read them from".into()),
                now,
            ),
            // Nor command files: the set is the built-ins alone.
            Effect::ReadCommands {
                request, project, ..
            } => device.handle_commands_read(
                request,
                Ok(lembas_core::commands::CommandsRead {
                    root: project,
                    ..Default::default()
                }),
                now,
            ),
            // Nor a git work tree: a `/review` has nothing to review, and says so.
            Effect::CheckChanges { request, .. } => device.handle_changes_checked(
                request,
                Ok(lembas_core::review::Changes::NoDisk),
                now,
            ),
            // Nor an index of files to search.
            Effect::SearchFiles { request, .. } => device.handle_files_found(
                request,
                Err("this device runs in a web page, which has no disk to search".into()),
                now,
            ),
            // Nor files a tool changed: a page's engine has none to write, so nothing was kept
            // to put back.
            Effect::UndoFiles { request, .. } => {
                device.handle_files_undone(request, Ok(Default::default()), now)
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

#[cfg(test)]
mod tests {
    use super::*;
    use lembas_core::config::DeviceConfig;
    use lembas_core::device::ConnKind;

    /// A page has no disk: a directory asked for is refused saying so, and the places (the
    /// roots, resolved to themselves) are still answered.
    #[test]
    fn a_listing_is_answered_with_no_disk_and_the_places_still_are() {
        let mut config = DeviceConfig::default();
        config.remote.enabled = true;
        config.remote.roots = vec!["/w".into()];
        config.remote.trusted = vec!["/w".into()];
        let device = Device::new(config, Time::ZERO).unwrap();
        let mut run = DeviceLoop::new(device, false, false, EngineChoice::Scripted);
        let mut out = Vec::new();
        run.device_mut().start_link(Time::ZERO);
        let conn = run
            .device_mut()
            .handle_open(ConnKind::Link, Time::ZERO)
            .unwrap();
        let frames = [
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"_lembas/directories","params":{"path":"/w"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"_lembas/directories","params":{}}"#,
        ];
        for frame in frames {
            run.device_mut()
                .handle_frame(conn, frame.as_bytes(), Time::ZERO)
                .unwrap();
            run.pump(Time::ZERO, |_| 0, &mut out);
        }
        let answer = |id: i64| -> serde_json::Value {
            out.iter()
                .filter_map(|a| match a {
                    DeviceAction::Send { frame, .. } => serde_json::from_str(frame).ok(),
                    _ => None,
                })
                .find(|v: &serde_json::Value| v["id"] == id)
                .unwrap_or_else(|| panic!("no answer {id}"))
        };
        let listing = answer(1);
        assert_eq!(listing["error"]["code"], -32602, "{listing}");
        assert!(
            listing["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no disk"),
            "{listing}"
        );
        let places = answer(2);
        assert_eq!(places["result"]["places"][0]["path"], "/w", "{places}");
        assert_eq!(places["result"]["places"][0]["accepted"], true, "{places}");
    }

    /// A page has no disk: a prompt's `@path` mentions stay text, the turn runs, and a notice
    /// says why.
    #[test]
    fn mentions_stay_text_with_no_disk_and_a_notice_says_so() {
        let mut config = DeviceConfig::default();
        config.remote.enabled = true;
        config.remote.roots = vec!["/w".into()];
        config.remote.trusted = vec!["/w".into()];
        config.models = vec![lembas_core::config::Model::served("lembas/default")];
        let device = Device::new(config, Time::ZERO).unwrap();
        let mut run = DeviceLoop::new(device, false, false, EngineChoice::Scripted);
        let mut out = Vec::new();
        run.device_mut().start_link(Time::ZERO);
        let conn = run
            .device_mut()
            .handle_open(ConnKind::Link, Time::ZERO)
            .unwrap();
        let send = |run: &mut DeviceLoop, out: &mut Vec<DeviceAction>, frame: &str| {
            run.device_mut()
                .handle_frame(conn, frame.as_bytes(), Time::ZERO)
                .unwrap();
            run.pump(Time::ZERO, |_| 0, out);
        };
        send(
            &mut run,
            &mut out,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}}"#,
        );
        send(
            &mut run,
            &mut out,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}"#,
        );
        let frames = |out: &[DeviceAction]| -> Vec<serde_json::Value> {
            out.iter()
                .filter_map(|a| match a {
                    DeviceAction::Send { frame, .. } => serde_json::from_str(frame).ok(),
                    _ => None,
                })
                .collect()
        };
        let session = frames(&out).into_iter().find(|f| f["id"] == 1).unwrap()["result"]
            ["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let prompt = serde_json::json!({ "jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "see @a.rs" }] } });
        send(&mut run, &mut out, &prompt.to_string());
        for _ in 0..50 {
            run.pump(Time::ZERO, |_| 0, &mut out);
        }
        let all = frames(&out);
        let notice = all
            .iter()
            .find(|f| f["params"]["event"]["type"] == "notice")
            .unwrap_or_else(|| panic!("no notice in {all:?}"));
        let text = notice["params"]["event"]["text"].as_str().unwrap();
        assert!(
            text.starts_with("@a.rs stayed text") && text.contains("no disk"),
            "{text}"
        );
        assert!(
            out.iter()
                .all(|a| !matches!(a, DeviceAction::Effect(Effect::WriteAttachment { .. }))),
            "nothing attached"
        );
        // Nor an index to search: the picker is refused, saying why.
        let search = serde_json::json!({ "jsonrpc": "2.0", "id": 3, "method": "_lembas/files/search",
            "params": { "sessionId": session, "query": "a" } });
        send(&mut run, &mut out, &search.to_string());
        let all = frames(&out);
        let answer = all.iter().find(|f| f["id"] == 3).expect("answered");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no disk"),
            "{answer}"
        );
    }
}
