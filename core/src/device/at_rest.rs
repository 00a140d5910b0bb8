//! Whether the device is at rest: nothing in flight that ending it now would cut. A shell that
//! hands its store and its editor's connection to another process (`lembas serve --stdio`
//! yielding to a `lembas link` started later) does so only then, so no turn, answer or write is
//! lost on the way; the other process then holds the same sessions for that editor
//! ([`Device::held_sessions`]).

use super::{ConnId, Device};

impl Device {
    /// No turn runs or waits to run, no prompt waits for its answer, no peer's request waits
    /// for the shell (a directory check, a read of the store or of files, an attachment
    /// write) or for a session read back, no request of the device's waits for a peer's
    /// answer (a permission card), no event log waits to be written and nothing waits in the
    /// output queue (every persist acknowledged, every frame handed over).
    pub fn at_rest(&self) -> bool {
        self.sessions
            .values()
            .all(|s| s.turns.idle() && !s.turns.has_waiters())
            && self
                .conns
                .values()
                .all(|c| c.pending.is_empty() && c.gate.is_none() && c.held.is_empty())
            && self.resolving.is_empty()
            && self.writes.is_empty()
            && self.mention_reads.is_empty()
            && self.history_reads.is_empty()
            && self.event_reads.is_empty()
            && self.command_reads.is_empty()
            && self.change_checks.is_empty()
            && self.searches.is_empty()
            && self.unflushed_logs.is_empty()
            && self.out.is_empty()
    }

    /// The sessions `conn` holds, each with its working directory: what a `session/resume`
    /// (`{ sessionId, cwd }`) takes to hold them again on another connection.
    pub fn held_sessions(&self, conn: ConnId) -> Vec<(String, String)> {
        self.sessions
            .held_by(conn)
            .map(|s| (s.durable.id.clone(), s.durable.cwd.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::DeviceConfig;
    use crate::device::{ConnKind, Device, Output};
    use crate::engine::EngineCommand;
    use crate::time::Time;

    /// Every output until none is left, persists acknowledged and paths resolved as asked;
    /// the engine's commands, in order.
    fn drain(d: &mut Device) -> Vec<EngineCommand> {
        let mut engine = Vec::new();
        while let Some(out) = d.poll_output() {
            match out {
                Output::Effect(crate::device::Effect::Persist { seq, .. }) => {
                    d.handle_persisted(seq, Time(1))
                }
                Output::Effect(crate::device::Effect::ResolvePath { request, path }) => {
                    d.handle_path_resolved(request, Ok(path), Time(1))
                }
                Output::Effect(crate::device::Effect::ReadCommands { request, .. }) => {
                    d.handle_commands_read(request, Err("none here".into()), Time(1))
                }
                Output::Engine(c) => engine.push(c),
                _ => {}
            }
        }
        engine
    }

    fn request(
        d: &mut Device,
        conn: crate::device::ConnId,
        id: u64,
        method: &str,
        p: serde_json::Value,
    ) {
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": p });
        d.handle_frame(conn, frame.to_string().as_bytes(), Time(1))
            .unwrap();
    }

    #[test]
    fn a_running_turn_or_an_unacknowledged_persist_is_not_rest_and_its_end_is() {
        let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        let conn = d.handle_open(ConnKind::Stdio, Time(0)).unwrap();
        assert!(d.at_rest(), "a new device");
        request(
            &mut d,
            conn,
            0,
            "initialize",
            json!({ "protocolVersion": 1 }),
        );
        drain(&mut d);
        request(
            &mut d,
            conn,
            1,
            "session/new",
            json!({ "cwd": "/p", "mcpServers": [] }),
        );
        assert!(!d.at_rest(), "a session/new waits for its directory check");
        drain(&mut d);
        assert!(d.at_rest(), "{:?}", d.poll_output());
        let held = d.held_sessions(conn);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].1, "/p");
        let session = held[0].0.clone();
        request(
            &mut d,
            conn,
            2,
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] }),
        );
        // The prompt's persist, not yet acknowledged.
        let Some(Output::Effect(crate::device::Effect::Persist { seq, .. })) = d.poll_output()
        else {
            panic!("the prompt is persisted first");
        };
        assert!(!d.at_rest(), "a persist waits");
        d.handle_persisted(seq, Time(1));
        let started = drain(&mut d);
        assert!(
            started.iter().any(|c| matches!(c, EngineCommand::Start(_))),
            "{started:?}"
        );
        assert!(!d.at_rest(), "a turn runs");
        let other = d.handle_open(ConnKind::Stdio, Time(1)).unwrap();
        assert!(d.held_sessions(other).is_empty());
    }
}
