//! A session's seqs, and when its event log is written to the store (issue 16). Seqs are never
//! reused, and nothing mid-turn waits for a write to make sure of it: each start of the device
//! counts from its own base ([`super::event_log::seq_base`]). A written log is *sealed*: the
//! session's record says its exact next seq (`seq_next`); the first event after that unseals
//! it, in the store before that event leaves. A log is sealed when its session goes idle (in a
//! commit after the one its turn's answer waits for, a mebibyte of logs a commit at most) and
//! when the session is set aside. The log in memory, its bounds and its pages are
//! event_log.rs; its blocks' stored form, event_block.rs.

use super::event_log::{seq_base, EventLog, Logged, LoggedEvent};
use super::outbox::{Lane, Outbox};
use super::sessions::Session;
use super::Device;
use crate::config::SessionLimits;
use crate::store::Record;

/// How many bytes of logs are sealed at a time (or one session's, if more); the rest wait
/// until those are written. 100 sessions ending at once sealed 25 MB in one commit, and a
/// prompt sent then waited for all of it before its turn could start.
const SEAL_BYTES_PER_COMMIT: usize = 1 << 20;

impl Session {
    /// The seq of this session's next event. The first after its log was sealed unseals it
    /// in the store before any frame of the session queued from here on leaves (at a turn's
    /// start that write goes with the turn's own); after that nothing waits.
    pub fn take_seq(&mut self, out: &mut Outbox, lane: Lane) -> u64 {
        let (seq, unsealed) = self.events.take_unsealing();
        if unsealed {
            self.durable.seq_next = 0;
            self.durable.events_floor = None;
            out.persist_in(lane, vec![self.record()]);
        }
        seq
    }

    /// Its log read back from the store's `blocks`, as its record left it, within `limits`
    /// (`base`: this start's first seq). When that moved how far back the log reaches (trimmed
    /// to smaller bounds, its evicted blocks deleted; a record from before it was kept), the
    /// record saying so goes in the same write (`records`): a later read must not vouch for
    /// events deleted here.
    pub(crate) fn restore_events(
        &mut self,
        blocks: Vec<(u64, Vec<LoggedEvent>)>,
        base: u64,
        limits: &SessionLimits,
        records: &mut Vec<Record>,
    ) {
        let stored = (self.durable.seq_next, self.durable.events_floor);
        self.events = EventLog::restore(&self.durable.id, blocks, stored, base, limits, records);
        let floor = self.events.sealed_floor();
        if floor != self.durable.events_floor {
            self.durable.events_floor = floor;
            records.push(self.record());
        }
    }

    /// The records that bring the store up to this session's log and seal it with its exact
    /// next seq, so read back (or after a restart) it reaches as far.
    pub(crate) fn seal_records(&mut self) -> Vec<Record> {
        let (mut records, floor) = self.events.seal();
        let next = self.events.next_seq();
        let floor = Some(floor);
        // An unsealed log's record says `seq_next: 0` (take_seq), never a next seq: the record
        // alone tells whether it must be written.
        if self.durable.seq_next != next || self.durable.events_floor != floor {
            self.durable.seq_next = next;
            self.durable.events_floor = floor;
            records.push(self.record());
        }
        records
    }
}

impl Device {
    /// The seq of `session`'s next event (none for a session not in memory; see
    /// [`Session::take_seq`]).
    pub(super) fn next_seq(&mut self, session: &str) -> Option<u64> {
        let s = self.sessions.get_mut(session)?;
        Some(s.take_seq(&mut self.out, Lane::of(session)))
    }

    /// The first seq of this start of the device.
    pub(super) fn seq_base(&self) -> u64 {
        seq_base(self.request_ids.epoch)
    }

    /// Keep an event sent about `session` with `seq` in its log.
    pub(super) fn log_event(&mut self, session: &str, seq: u64, method: Logged, params: &str) {
        let limits = &self.config.sessions;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        if s.events.push(seq, method, params, limits) {
            self.unflushed_logs.push(session.to_string());
        }
    }

    /// Write the logs of the sessions gone idle (their turn ended): what the store lacks of
    /// them and their exact next seq, behind nothing, once what the turn's end asked is
    /// written, and at most [`SEAL_BYTES_PER_COMMIT`] of them at a time. A running session's
    /// waits for its end.
    /// Ends every input.
    pub(super) fn flush_event_logs(&mut self) {
        if self.unflushed_logs.is_empty() {
            return;
        }
        if !self.config.has_store {
            // Nothing reads a log back without a lasting store (no session is set aside, no id
            // outlives the process): the logs stay in memory, within their bounds, and the
            // store is spared a block a turn (100 turns streaming at once wrote 25 MB).
            for id in std::mem::take(&mut self.unflushed_logs) {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.events.kept_in_memory();
                }
            }
            return;
        }
        let mut pending = std::mem::take(&mut self.unflushed_logs);
        // The logs sealed last are not written yet: the rest wait for them.
        let mut budget = if self.out.written_through(self.sealing) {
            SEAL_BYTES_PER_COMMIT
        } else {
            0
        };
        pending.retain(|id| {
            let Some(s) = self.sessions.get_mut(id) else {
                return false;
            };
            if s.turns.running().is_some() {
                s.events.seal_after = None;
                return s.events.has_unflushed();
            }
            // Sealed only once what its turn's end asked is written: in the same commit, its
            // answer, which waits for that commit, would wait for the log's block too (100
            // sessions ending at once: 25 MB in the commit every answer waited for). The block
            // gates nothing, so it goes in a commit of its own, one later.
            let after = *s.events.seal_after.get_or_insert(self.out.last_issued());
            let bytes = s.events.unflushed_bytes();
            // Past the budget: only a log bigger than all of it goes alone.
            let over = bytes > budget && budget < SEAL_BYTES_PER_COMMIT;
            if !self.out.written_through(after) || over {
                return true;
            }
            s.events.seal_after = None;
            let records = s.seal_records();
            if !records.is_empty() {
                // Its acknowledgement seals the rest.
                budget = budget.saturating_sub(bytes);
                self.out.persist_quiet(records);
                self.sealing = self.out.last_issued();
            }
            false
        });
        self.unflushed_logs = pending;
    }

    /// A session about to leave memory: the store gets the rest of its log and its exact next
    /// seq, so when it is read back the log still reaches as far.
    pub(super) fn seal_event_log(&mut self, session: &str) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let records = s.seal_records();
        if !records.is_empty() {
            self.out.persist(records);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::event_log::tests::limits;
    use crate::device::ConnId;
    use crate::store::Table;

    /// A sealed session, and the outbox its records go to.
    fn session() -> (Session, Outbox) {
        let mut s = crate::device::live::tests::session("s");
        s.durable.seq_next = 1;
        (s, Outbox::default())
    }

    /// The persists issued so far: (number, the `seq_next` they store).
    fn seals(out: &mut Outbox) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| out.poll())
            .filter_map(|o| match o {
                crate::device::Output::Effect(crate::device::Effect::Persist { seq, records }) => {
                    let Some(Record::Put { value, .. }) = records.iter().find(|r| {
                        matches!(
                            r,
                            Record::Put {
                                table: Table::Sessions,
                                ..
                            }
                        )
                    }) else {
                        return None;
                    };
                    let rec: crate::store::SessionRecord = serde_json::from_str(value).unwrap();
                    Some((seq, rec.seq_next))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_first_event_after_a_seal_unseals_the_log_before_it_leaves_and_no_other_waits() {
        let (mut s, mut out) = session();
        let lane = Lane::of("s");
        assert_eq!(s.take_seq(&mut out, lane), 1);
        out.send_in(lane, ConnId(0), b"first".to_vec());
        assert_eq!(seals(&mut out), [(1, 0)], "unsealed in the store");
        assert_eq!(out.poll(), None, "the frame waits for it");
        out.acked(1);
        assert!(out.poll().is_some());
        // A long stream after it: nothing more is written, nothing waits.
        for _ in 0..10_000 {
            s.take_seq(&mut out, lane);
        }
        out.send_in(lane, ConnId(0), b"later".to_vec());
        assert!(out.poll().is_some());
        assert!(seals(&mut out).is_empty());
    }

    #[test]
    fn sealing_writes_the_rest_of_the_log_and_the_exact_next_seq() {
        let (mut s, mut out) = session();
        let l = limits(100, 1 << 20);
        for _ in 0..3 {
            let seq = s.take_seq(&mut out, Lane::of("s"));
            s.events.push(seq, Logged::Event, "{}", &l);
        }
        let records = s.seal_records();
        assert!(matches!(
            &records[0],
            Record::Put {
                table: Table::Events,
                ..
            }
        ));
        assert_eq!(s.durable.seq_next, 4);
        assert!(matches!(
            &records[1],
            Record::Put {
                table: Table::Sessions,
                ..
            }
        ));
        assert!(s.seal_records().is_empty(), "nothing more to say");
    }
}

/// A turn's end on a device with a store: its log's block is written in a commit after the
/// one its answer waits for.
#[cfg(test)]
mod seal_after_the_turns_end {
    use serde_json::json;

    use crate::config::DeviceConfig;
    use crate::device::{ConnId, ConnKind, Device, Effect, Output};
    use crate::engine::{EngineCommand, EngineEvent, StopReason};
    use crate::store::{Record, Table};
    use crate::time::Time;

    fn request(d: &mut Device, conn: ConnId, id: u64, method: &str, p: serde_json::Value) {
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": p });
        d.handle_frame(conn, frame.to_string().as_bytes(), Time(1))
            .unwrap();
    }

    /// Every output until none is left, each persist acknowledged and each path resolved as
    /// asked; the engine's commands.
    fn drain(d: &mut Device) -> Vec<EngineCommand> {
        let mut engine = Vec::new();
        while let Some(out) = d.poll_output() {
            match out {
                Output::Effect(Effect::Persist { seq, .. }) => d.handle_persisted(seq, Time(1)),
                Output::Effect(Effect::ResolvePath { request, path }) => {
                    d.handle_path_resolved(request, Ok(path), Time(1))
                }
                Output::Effect(Effect::ReadCommands { request, .. }) => {
                    d.handle_commands_read(request, Err("none here".into()), Time(1))
                }
                Output::Engine(c) => engine.push(c),
                _ => {}
            }
        }
        engine
    }

    /// The outputs until none is left, no persist acknowledged: the persists (number, whether
    /// they hold a log block) and whether the prompt's answer was sent.
    /// A device on stdio, initialized, with `n` sessions each running a turn: (session, turn).
    /// The prompts are requests `n + 1` on (`unacknowledged` looks for the answer to 2).
    fn turns_started(config: DeviceConfig, n: u64) -> (Device, ConnId, Vec<(String, String)>) {
        let mut d = Device::new(config, Time(0)).unwrap();
        let conn = d.handle_open(ConnKind::Stdio, Time(0)).unwrap();
        let init = json!({ "protocolVersion": 1 });
        request(&mut d, conn, 0, "initialize", init);
        drain(&mut d);
        for i in 0..n {
            let new = json!({ "cwd": "/p", "mcpServers": [] });
            request(&mut d, conn, 1 + i, "session/new", new);
            drain(&mut d);
        }
        let mut turns = Vec::new();
        for (i, (session, _)) in d.held_sessions(conn).into_iter().enumerate() {
            let text = json!([{ "type": "text", "text": "hi" }]);
            let prompt = json!({ "sessionId": session, "prompt": text });
            request(&mut d, conn, 1 + n + i as u64, "session/prompt", prompt);
            for c in drain(&mut d) {
                if let EngineCommand::Start(start) = c {
                    turns.push((session.clone(), start.turn_id));
                }
            }
        }
        assert_eq!(turns.len() as u64, n, "a turn started in each session");
        (d, conn, turns)
    }

    fn unacknowledged(d: &mut Device) -> (Vec<(u64, bool)>, bool) {
        let (mut persists, mut answered) = (Vec::new(), false);
        while let Some(out) = d.poll_output() {
            match out {
                Output::Effect(Effect::Persist { seq, records }) => {
                    let block = records.iter().any(|r| {
                        matches!(
                            r,
                            Record::Put {
                                table: Table::Events,
                                ..
                            }
                        )
                    });
                    persists.push((seq, block));
                }
                Output::Send { frame, .. } => {
                    let frame = String::from_utf8(frame).unwrap();
                    answered |= frame.contains(r#""id":2"#) && frame.contains("stopReason");
                }
                Output::Effect(Effect::ReadCommands { request, .. }) => {
                    d.handle_commands_read(request, Err("none here".into()), Time(1))
                }
                _ => {}
            }
        }
        (persists, answered)
    }

    /// Blocks asked in each commit until none is left: what is asked, then what another input
    /// on `conn` asks before the shell has written it; then all of it acknowledged.
    fn blocks_a_commit(d: &mut Device, conn: ConnId) -> Vec<usize> {
        let mut steps = Vec::new();
        loop {
            let (mut persists, _) = unacknowledged(d);
            d.handle_activity(conn, Time(3)).unwrap();
            persists.extend(unacknowledged(d).0);
            let Some(&(last, _)) = persists.last() else {
                return steps;
            };
            steps.push(persists.iter().filter(|(_, block)| *block).count());
            d.handle_persisted(last, Time(3));
        }
    }

    #[test]
    fn sessions_ending_at_once_have_their_logs_written_a_mebibyte_a_commit() {
        let mut config = DeviceConfig::default();
        // About 450 KB of params each: two fit in 1 MiB, three do not.
        config.sessions.event_log_bytes = 560 * 1024;
        config.sessions.event_log_events = 1_000_000;
        let (mut d, conn, turns) = turns_started(config, 3);
        // Each log ends at its bound.
        let text = "x".repeat(100);
        for (session, turn) in &turns {
            for _ in 0..5_000 {
                d.handle_engine(session, turn, EngineEvent::Text(text.clone()), Time(2));
            }
        }
        for (session, turn) in &turns {
            d.handle_engine(
                session,
                turn,
                EngineEvent::Done(StopReason::EndTurn),
                Time(2),
            );
        }
        // The turns' ends, then two logs (past 1 MiB), then the third, whatever came between.
        assert_eq!(blocks_a_commit(&mut d, conn), [0, 2, 1]);
        assert!(d.at_rest());
    }

    #[test]
    fn the_answer_waits_for_the_turns_end_and_the_block_is_written_after_it() {
        let (mut d, _, turns) = turns_started(DeviceConfig::default(), 1);
        let (session, turn) = turns[0].clone();
        for event in [
            EngineEvent::Text("hello".into()),
            EngineEvent::Done(StopReason::EndTurn),
        ] {
            d.handle_engine(&session, &turn, event, Time(2));
        }
        // The turn's end is asked, and the answer waits for it; the log's block is not in it.
        let (persists, answered) = unacknowledged(&mut d);
        assert!(
            !answered,
            "the answer waits for the turn's end to be written"
        );
        assert!(!persists.is_empty(), "the turn's end is written");
        assert!(
            persists.iter().all(|(_, block)| !block),
            "no log block beside the turn's end: {persists:?}"
        );
        assert!(!d.at_rest(), "the log waits to be written");
        // Written: the answer leaves, and the block is asked for, in a persist of its own.
        let last = persists.last().unwrap().0;
        d.handle_persisted(last, Time(3));
        let (persists, answered) = unacknowledged(&mut d);
        assert!(answered, "the answer left once the turn's end was written");
        assert!(
            matches!(persists[..], [(seq, true)] if seq > last),
            "{persists:?}"
        );
        d.handle_persisted(last + 1, Time(4));
        assert!(d.at_rest());
    }
}
