//! A turn while it runs: `session/cancel`, `_lembas/steer`, what the engine reports, the
//! next queued turn started (`pump`), and the prior turns the model is given. A prompt's
//! admission is turn_prompt.rs; a turn's start, turn_start.rs; its end, turn_end.rs.

use serde_json::{json, Value};

use super::chunks::Chunk;
use super::outbox::Lane;
use super::sessions::plan_update;
use super::sessions::Session;
use super::turn_start::{StartRules, StartTell};
use super::turn_table::{Running, Unsteered};
use super::{ConnId, Device};
use crate::config::{Mode, SessionLimits};
use crate::engine::{EngineCommand, EngineEvent, PriorTurn, StopReason, ToolStatus};
use crate::engine_io::FileDiff;
use crate::jsonrpc::RpcError;
use crate::store::Record;
use crate::wire::event::lembas::{
    LembasEvent, NoticeEvent, PlanEvent, SteeredEvent, StepEvent, ToolEndEvent, ToolStartEvent,
    UsageEvent,
};
use crate::wire::event::update::{SessionUpdate, ToolCall, ToolCallContent, ToolCallUpdate};
use crate::wire::session::{HistoryTurn, SessionIdParams, SteerParams};

/// The session's finished turns that answered (a prompt and the non-empty answer after it),
/// oldest first, at most the last `max`. A prompt with no answer (cancelled before a word),
/// no answer kept (the device stopped mid-turn), or whose turn `failed` (as far as the ledger
/// still says: a failure's partial text would mislead the model) gives the model nothing.
pub(super) fn prior_turns(
    history: &[HistoryTurn],
    max: usize,
    max_bytes: usize,
    failed: impl Fn(&str) -> bool,
) -> Vec<PriorTurn> {
    let mut prior = Vec::new();
    let mut answer: Option<&str> = None;
    let mut bytes = 0usize;
    for turn in history.iter().rev() {
        if prior.len() >= max {
            break;
        }
        match turn {
            HistoryTurn::Assistant { text, .. } => answer = Some(text),
            HistoryTurn::User { text, turn_id, .. } => {
                let answer = answer.take().filter(|a| !a.is_empty());
                let failed = turn_id.as_deref().is_some_and(&failed);
                if let Some(a) = answer.filter(|_| !failed) {
                    bytes = bytes.saturating_add(text.len() + a.len());
                    if bytes > max_bytes {
                        break;
                    }
                    prior.push(PriorTurn {
                        prompt: text.clone(),
                        answer: a.to_owned(),
                    });
                }
            }
        }
    }
    prior.reverse();
    prior
}

impl Running {
    /// The engine called a tool: kept in the turn, and the update and event announcing it.
    fn tool_call(
        &mut self,
        id: String,
        title: String,
        kind: String,
        raw_input: Value,
    ) -> (SessionUpdate, LembasEvent) {
        self.tool_called(&id, &title, &raw_input);
        let update = SessionUpdate::ToolCall(ToolCall {
            kind,
            raw_input: raw_input.clone(),
            status: ToolStatus::Pending,
            title: title.clone(),
            tool_call_id: id.clone(),
        });
        let event = LembasEvent::ToolStart(ToolStartEvent {
            args: raw_input,
            id,
            name: title,
        });
        (update, event)
    }

    /// The engine gave the turn the steered messages `ids`: the event saying which (the
    /// client's message ids, where given) and what they said, unless none of them waited.
    fn steered(&mut self, ids: &[u64]) -> Option<LembasEvent> {
        let taken = self.take_steered(ids);
        if taken.is_empty() {
            return None;
        }
        let ids = taken.iter().filter_map(|m| m.message_id.clone()).collect();
        let texts = taken.into_iter().map(|m| m.text).collect();
        Some(LembasEvent::Steered(SteeredEvent { ids, texts }))
    }

    /// The engine's tool call moved on: kept in the turn, and the update announcing it, with
    /// the end event when it completed or failed.
    fn tool_call_update(
        &mut self,
        id: String,
        status: ToolStatus,
        output: Option<String>,
        diff: Option<FileDiff>,
    ) -> (SessionUpdate, Option<LembasEvent>) {
        self.tool_updated(&id, status, output.as_ref());
        let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            content: output
                .iter()
                .map(ToolCallContent::text)
                .chain(diff.map(ToolCallContent::diff))
                .collect(),
            status,
            tool_call_id: id.clone(),
        });
        let ended = matches!(status, ToolStatus::Completed | ToolStatus::Failed).then(|| {
            LembasEvent::ToolEnd(ToolEndEvent {
                id,
                is_error: status == ToolStatus::Failed,
                output,
            })
        });
        (update, ended)
    }
}

impl Session {
    /// `_lembas/steer`'s `text` (the device's number `id` for it) for the running turn, within
    /// `limits` (`TurnTable::steer`): the turn's id and how many wait now.
    pub(super) fn steer(
        &mut self,
        id: u64,
        text: String,
        message_id: Option<String>,
        limits: &SessionLimits,
    ) -> Result<(String, usize), RpcError> {
        self.turns
            .steer(id, text, message_id, limits)
            .map_err(|why| match why {
                Unsteered::NothingRuns => RpcError::invalid_params(format!(
                    "nothing runs in session `{}`: send it as a prompt instead",
                    self.durable.id
                )),
                Unsteered::Full => RpcError::invalid_params(format!(
                    "{} steered messages already wait for this turn, the limit \
                     (sessions.max_steer)",
                    limits.max_steer
                )),
                Unsteered::TooLarge { size } => RpcError::invalid_params(format!(
                    "the steered message is {size} bytes, over the limit of {} bytes a block \
                     (sessions.max_block_bytes)",
                    limits.max_block_bytes
                ))
                .with_data(json!({ "size": size, "limit": limits.max_block_bytes })),
                Unsteered::OverTotal { total } => RpcError::invalid_params(format!(
                    "with it the steered messages waiting for this turn would be {total} bytes, \
                     over the limit of {} bytes a prompt (sessions.max_prompt_bytes)",
                    limits.max_prompt_bytes
                ))
                .with_data(json!({ "size": total, "limit": limits.max_prompt_bytes })),
            })
    }

    /// [`Session::steer`], and the command that gives the message to the engine.
    pub(super) fn steer_command(
        &mut self,
        id: u64,
        text: String,
        message_id: Option<String>,
        limits: &SessionLimits,
    ) -> Result<(EngineCommand, usize), RpcError> {
        let (turn_id, queued) = self.steer(id, text.clone(), message_id, limits)?;
        let session_id = self.durable.id.clone();
        let steer = EngineCommand::Steer {
            session_id,
            turn_id,
            id,
            text,
        };
        Ok((steer, queued))
    }

    /// `session/cancel`: the command that stops the running turn, the first time only.
    pub(super) fn cancel(&mut self) -> Option<EngineCommand> {
        let turn_id = self.turns.cancel()?;
        let session_id = self.durable.id.clone();
        Some(EngineCommand::Cancel {
            session_id,
            turn_id,
        })
    }

    /// The engine changed the session's mode to `mode` (capped at `max` when the session is):
    /// the mode it has now, and its record.
    pub(super) fn engine_mode(&mut self, mode: Mode, max: Mode) -> (Mode, Record) {
        let mode = if self.capped { mode.capped(max) } else { mode };
        self.durable.mode = mode;
        (mode, self.record())
    }

    /// The engine's plan for the session is `plan` now: its record.
    pub(super) fn engine_plan(&mut self, plan: &Option<Value>) -> Record {
        self.durable.plan.clone_from(plan);
        self.record()
    }
}

/// What an engine's report about a session's running turn comes to, for the device to pass on.
pub(super) enum Reported {
    /// Streamed text to pass on as it came.
    Chunk(Chunk, String),
    /// The session's records to persist, then updates and events for its clients, in order.
    Shown {
        records: Vec<Record>,
        updates: Vec<SessionUpdate>,
        events: Vec<LembasEvent>,
    },
    /// The session's mode is this now (its record).
    Mode(Mode, Record),
    /// The turn asks a card.
    Ask(crate::engine::Card),
    /// The turn ended, how.
    Ended(Result<StopReason, String>),
}

impl Session {
    /// What the engine's `event` about turn `turn` comes to: nothing when `turn` is not the
    /// running one (late, after a cancel or a restart), or for streamed text not shown as it
    /// streams (a compaction's). What it streams is kept to `max_answer` bytes; a mode the
    /// engine sets is capped at `max_mode`.
    pub(super) fn engine_report(
        &mut self,
        turn: &str,
        event: EngineEvent,
        max_mode: Mode,
        max_answer: usize,
    ) -> Option<Reported> {
        let r = self.turns.running_mut(turn)?;
        let shown = |updates: Vec<SessionUpdate>, events: Vec<LembasEvent>| Reported::Shown {
            records: Vec::new(),
            updates,
            events,
        };
        let one = |event| shown(Vec::new(), vec![event]);
        Some(match event {
            EngineEvent::Text(text) => r
                .streamed(Chunk::Message, &text, max_answer)
                .then_some(Reported::Chunk(Chunk::Message, text))?,
            EngineEvent::Thought(text) => r
                .streamed(Chunk::Thought, &text, max_answer)
                .then_some(Reported::Chunk(Chunk::Thought, text))?,
            EngineEvent::ToolCall {
                id,
                title,
                kind,
                raw_input,
            } => {
                let (update, started) = r.tool_call(id, title, kind, raw_input);
                shown(vec![update], vec![started])
            }
            EngineEvent::ToolCallUpdate {
                id,
                status,
                output,
                diff,
            } => {
                let (update, ended) = r.tool_call_update(id, status, output, diff);
                shown(vec![update], ended.into_iter().collect())
            }
            EngineEvent::Steered { ids } => one(r.steered(&ids)?),
            EngineEvent::ModeChanged(mode) => {
                let (mode, record) = self.engine_mode(mode, max_mode);
                Reported::Mode(mode, record)
            }
            EngineEvent::Plan(plan) => Reported::Shown {
                records: vec![self.engine_plan(&plan)],
                updates: vec![plan_update(plan.as_ref())],
                events: vec![LembasEvent::Plan(PlanEvent { plan })],
            },
            EngineEvent::Ask(card) => Reported::Ask(card),
            EngineEvent::Step(step) => one(LembasEvent::Step(StepEvent { step })),
            EngineEvent::Usage {
                input_tokens,
                output_tokens,
            } => one(LembasEvent::Usage(UsageEvent {
                input_tokens,
                output_tokens,
            })),
            EngineEvent::Notice(text) => one(LembasEvent::Notice(NoticeEvent { text })),
            EngineEvent::Done(reason) => Reported::Ended(Ok(reason)),
            EngineEvent::Failed(message) => Reported::Ended(Err(message)),
        })
    }
}

impl Device {
    /// Start the next waiting turn when nothing runs (turn_start.rs makes it ready), and pass
    /// it to who runs it.
    pub(super) fn pump(&mut self, session: &str) {
        // A `/review` next in line looks for changes first (it starts once answered).
        self.ask_review(session);
        let rules = StartRules::of(&self.config, self.clock.now().0);
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(started) = s.start_next(&rules) else {
            return;
        };
        let lane = Lane::of(session);
        for tell in started.tells() {
            match tell {
                StartTell::Mode(mode, record) => self.announce_mode(session, mode, record),
                StartTell::Persist(records) => self.out.persist_in(lane, records),
                StartTell::ModelEvent => {
                    if let Some(event) = self.model_event(session) {
                        self.broadcast_event(session, event);
                    }
                }
                StartTell::Event(event) => self.broadcast_event(session, event),
                StartTell::Engine(start) => {
                    self.out
                        .engine_in(lane, EngineCommand::Start(Box::new(start)));
                }
                StartTell::Undo(turn_id) => self.start_undo(session, turn_id),
                StartTell::Compaction(start, via) => self.start_compaction(session, start, via),
            }
        }
    }

    /// `session/cancel`: the running turn stops, and its prompt is answered `cancelled`.
    /// Stopping runs nothing, so it is not held to the limits: a turn that started before they
    /// changed can still be stopped.
    pub(super) fn cancel(&mut self, p: SessionIdParams) {
        let Some(s) = self.sessions.get_mut(&p.session_id) else {
            return;
        };
        let Some(command) = s.cancel() else {
            return;
        };
        self.out.engine_in(Lane::of(&p.session_id), command);
    }

    /// `_lembas/steer`: a message for the running turn, at its next step.
    pub(super) fn steer(&mut self, conn: ConnId, p: SteerParams) -> Result<Value, RpcError> {
        let limits = self.config.sessions;
        let id = self.next_steer;
        let s = self.attach(conn, &p.session_id)?;
        let (command, queued) = s.steer_command(id, p.text, p.message_id, &limits)?;
        self.next_steer += 1;
        self.out.engine_in(Lane::of(&p.session_id), command);
        Ok(json!({ "queued": queued }))
    }

    /// What the engine reports about a running turn. Reports about a turn that is not the
    /// session's running one (late, after a cancel or a restart) are ignored.
    pub fn handle_engine(
        &mut self,
        session: &str,
        turn: &str,
        event: EngineEvent,
        now: crate::Time,
    ) {
        // A chunk comes only for a running turn and ends none: every log the flush would look
        // at still waits for its turn's end, so it is not looked at (with many sessions
        // streaming, that look at each of them per chunk was most of a chunk's cost).
        let chunk = matches!(event, EngineEvent::Text(_) | EngineEvent::Thought(_));
        self.engine_event(session, turn, event, now);
        if chunk {
            self.after_chunk();
        } else {
            self.after_input();
        }
    }

    fn engine_event(&mut self, session: &str, turn: &str, event: EngineEvent, now: crate::Time) {
        self.clock.advance(now);
        let max_mode = self.config.remote.max_mode;
        let max_answer = self.config.sessions.max_answer_bytes;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(reported) = s.engine_report(turn, event, max_mode, max_answer) else {
            return;
        };
        match reported {
            Reported::Chunk(chunk, text) => self.broadcast_chunk(session, chunk, &text),
            Reported::Shown {
                records,
                updates,
                events,
            } => {
                if !records.is_empty() {
                    self.out.persist_in(Lane::of(session), records);
                }
                for update in updates {
                    self.broadcast_update(session, update);
                }
                for event in events {
                    self.broadcast_event(session, event);
                }
            }
            Reported::Mode(mode, record) => self.announce_mode(session, mode, record),
            Reported::Ask(card) => self.ask(session, turn, card),
            Reported::Ended(outcome) => self.finish(session, outcome),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device::turn_table::tests::steer_max;
    use crate::device::turn_table::Admission;
    use crate::jsonrpc::Id;
    use crate::store::Table;

    /// The tables `records` put to, in order; a record that is no put fails the test.
    pub(crate) fn put_tables(records: &[Record]) -> Vec<Table> {
        records
            .iter()
            .map(|r| match r {
                Record::Put { table, .. } => *table,
                other => panic!("only puts: {other:?}"),
            })
            .collect()
    }

    fn user(text: &str) -> HistoryTurn {
        HistoryTurn::User {
            text: text.into(),
            turn_id: Some(format!("turn {text}")),
            attachments: Vec::new(),
        }
    }

    fn assistant(text: &str) -> HistoryTurn {
        HistoryTurn::Assistant {
            text: text.into(),
            reasoning: String::new(),
            tools: Vec::new(),
        }
    }

    #[test]
    fn prior_turns_are_the_last_that_answered_oldest_first() {
        let history = vec![
            user("one"),
            assistant("1"),
            user("cancelled"),
            assistant(""),
            user("two"),
            assistant("2"),
            user("lost when the device stopped"),
            user("failed"),
            assistant("half an answer"),
            user("three"),
            assistant("3"),
        ];
        let got = |max| -> Vec<(String, String)> {
            prior_turns(&history, max, usize::MAX, |turn| turn == "turn failed")
                .into_iter()
                .map(|t| (t.prompt, t.answer))
                .collect()
        };
        let pair = |p: &str, a: &str| (p.to_string(), a.to_string());
        assert_eq!(
            got(50),
            [pair("one", "1"), pair("two", "2"), pair("three", "3")]
        );
        assert_eq!(got(2), [pair("two", "2"), pair("three", "3")]);
        assert!(got(0).is_empty());
        assert!(prior_turns(&[user("running")], 50, usize::MAX, |_| false).is_empty());
        // Not known to have failed (the ledger forgot it): given as it is.
        let kept = prior_turns(&history, 50, usize::MAX, |_| false);
        assert!(kept.iter().any(|t| t.answer == "half an answer"));
        // Bytes bound it too, newest first: "three" + "3" is 6 bytes, "two" + "2" 4 more.
        let within = |bytes| prior_turns(&history, 50, bytes, |turn| turn == "turn failed");
        assert_eq!(within(9).len(), 1);
        assert_eq!(within(10).len(), 2);
        assert!(within(5).is_empty());
    }

    #[test]
    fn a_steer_is_refused_when_nothing_runs_and_when_full() {
        let mut s = crate::device::live::tests::session("s");
        let b = &SessionLimits {
            max_steer: 2,
            max_block_bytes: 3,
            max_prompt_bytes: 5,
            ..SessionLimits::default()
        };
        let err = s.steer(1, "hi".into(), None, b).expect_err("nothing runs");
        assert_eq!(
            err.message,
            "nothing runs in session `s`: send it as a prompt instead"
        );
        let start = s.turn_start("t".into(), "go".into(), Vec::new());
        s.turns
            .admit(start, Admission::default(), (ConnId(1), Id::number(1)));
        s.turns.start_next().expect("t starts");
        let err = s
            .steer(1, "abcd".into(), None, b)
            .expect_err("over a block");
        assert_eq!(
            err.message,
            "the steered message is 4 bytes, over the limit of 3 bytes a block \
             (sessions.max_block_bytes)"
        );
        assert_eq!(err.data, Some(json!({ "size": 4, "limit": 3 })));
        assert_eq!(s.steer(1, "abc".into(), None, b).unwrap(), ("t".into(), 1));
        let err = s
            .steer(2, "xyz".into(), None, b)
            .expect_err("over a prompt");
        assert_eq!(
            err.message,
            "with it the steered messages waiting for this turn would be 6 bytes, over the \
             limit of 5 bytes a prompt (sessions.max_prompt_bytes)"
        );
        assert_eq!(err.data, Some(json!({ "size": 6, "limit": 5 })));
        assert_eq!(s.steer(2, "b".into(), None, b).unwrap(), ("t".into(), 2));
        let err = s.steer(3, "c".into(), None, b).expect_err("full");
        assert_eq!(
            err.message,
            "2 steered messages already wait for this turn, the limit (sessions.max_steer)"
        );
    }

    #[test]
    fn the_engines_mode_is_capped_for_a_capped_session_and_its_plan_kept() {
        let mut s = crate::device::live::tests::session("s");
        s.capped = false;
        let (mode, _) = s.engine_mode(Mode::Auto, Mode::Edit);
        assert_eq!((mode, s.durable.mode), (Mode::Auto, Mode::Auto));
        s.capped = true;
        let (mode, _) = s.engine_mode(Mode::Auto, Mode::Edit);
        assert_eq!((mode, s.durable.mode), (Mode::Edit, Mode::Edit));
        let plan = Some(json!({ "entries": [] }));
        let record = s.engine_plan(&plan);
        assert_eq!(s.durable.plan, plan);
        assert_eq!(record, s.record());
    }

    pub(crate) fn running(s: &mut Session, turn: &str, admission: Admission) {
        let start = s.turn_start(turn.into(), "go".into(), Vec::new());
        s.turns.admit(start, admission, (ConnId(1), Id::number(1)));
    }

    #[test]
    fn a_tool_call_is_kept_announced_and_ended_once_it_completes_or_fails() {
        let mut s = crate::device::live::tests::session("s");
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let r = s.turns.running_mut("t").expect("t runs");
        let (update, event) = r.tool_call("c".into(), "read".into(), "read".into(), json!({}));
        assert!(matches!(
            update,
            SessionUpdate::ToolCall(ToolCall {
                status: ToolStatus::Pending,
                ..
            })
        ));
        assert!(
            matches!(event, LembasEvent::ToolStart(ToolStartEvent { ref id, .. }) if id == "c")
        );
        assert_eq!(r.tools.len(), 1, "kept in the turn");
        let mut ended = |status| {
            r.tool_call_update("c".into(), status, Some("out".into()), None)
                .1
        };
        assert!(ended(ToolStatus::InProgress).is_none());
        let failed = ended(ToolStatus::Failed).expect("an end");
        assert!(matches!(
            failed,
            LembasEvent::ToolEnd(ToolEndEvent { is_error: true, .. })
        ));
        let done = ended(ToolStatus::Completed).expect("an end");
        assert!(matches!(
            done,
            LembasEvent::ToolEnd(ToolEndEvent {
                is_error: false,
                ..
            })
        ));
    }

    #[test]
    fn a_steered_event_names_the_messages_taken_and_none_comes_for_none() {
        let mut s = crate::device::live::tests::session("s");
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        s.steer(1, "a".into(), Some("m1".into()), &steer_max(5))
            .unwrap();
        s.steer(2, "b".into(), None, &steer_max(5)).unwrap();
        s.steer(3, "c".into(), Some("m3".into()), &steer_max(5))
            .unwrap();
        let r = s.turns.running_mut("t").expect("t runs");
        assert!(r.steered(&[9]).is_none(), "none of them waited");
        let Some(LembasEvent::Steered(SteeredEvent { ids, texts })) = r.steered(&[1, 2]) else {
            panic!("a steered event");
        };
        assert_eq!(ids, ["m1"]);
        assert_eq!(texts, ["a", "b"]);
        assert!(r.steered(&[1]).is_none(), "taken once");
    }

    #[test]
    fn an_engines_report_comes_to_what_the_device_passes_on() {
        let mut s = crate::device::live::tests::session("s");
        let report = |s: &mut Session, event| s.engine_report("t", event, Mode::Edit, 100);
        assert!(
            report(&mut s, EngineEvent::Text("hi".into())).is_none(),
            "nothing runs"
        );
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let late = s.engine_report("u", EngineEvent::Notice("n".into()), Mode::Edit, 100);
        assert!(late.is_none(), "not the running turn");
        assert!(matches!(
            report(&mut s, EngineEvent::Text("hi".into())),
            Some(Reported::Chunk(Chunk::Message, ref t)) if t == "hi"
        ));
        assert!(matches!(
            report(&mut s, EngineEvent::Thought("hm".into())),
            Some(Reported::Chunk(Chunk::Thought, ref t)) if t == "hm"
        ));
        let update = EngineEvent::ToolCallUpdate {
            id: "c".into(),
            status: ToolStatus::InProgress,
            output: None,
            diff: None,
        };
        let Some(Reported::Shown {
            records,
            updates,
            events,
        }) = report(&mut s, update)
        else {
            panic!("shown");
        };
        assert!(records.is_empty() && events.is_empty());
        assert!(matches!(updates[..], [SessionUpdate::ToolCallUpdate(_)]));
        let plan = Some(json!({ "entries": [] }));
        let Some(Reported::Shown {
            records,
            updates,
            events,
        }) = report(&mut s, EngineEvent::Plan(plan.clone()))
        else {
            panic!("shown");
        };
        assert_eq!(records, [s.record()]);
        assert_eq!(s.durable.plan, plan);
        assert_eq!(updates.len(), 1);
        assert!(matches!(events[..], [LembasEvent::Plan(_)]));
        let Some(Reported::Shown { events, .. }) = report(&mut s, EngineEvent::Notice("n".into()))
        else {
            panic!("shown");
        };
        assert!(
            matches!(events[..], [LembasEvent::Notice(NoticeEvent { ref text })] if text == "n")
        );
        s.capped = true;
        assert!(matches!(
            report(&mut s, EngineEvent::ModeChanged(Mode::Auto)),
            Some(Reported::Mode(Mode::Edit, _))
        ));
        assert!(matches!(
            report(&mut s, EngineEvent::Failed("boom".into())),
            Some(Reported::Ended(Err(ref m))) if m == "boom"
        ));
        assert!(matches!(
            report(&mut s, EngineEvent::Done(StopReason::EndTurn)),
            Some(Reported::Ended(Ok(StopReason::EndTurn)))
        ));
    }

    #[test]
    fn a_steer_is_given_to_the_engine_with_its_number_and_text() {
        let mut s = crate::device::live::tests::session("s");
        let refused = s
            .steer_command(1, "hi".into(), None, &steer_max(2))
            .expect_err("nothing runs");
        assert_eq!(
            refused.message,
            "nothing runs in session `s`: send it as a prompt instead"
        );
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let (command, queued) = s
            .steer_command(4, "hi".into(), None, &steer_max(2))
            .expect("runs");
        let steer = EngineCommand::Steer {
            session_id: "s".into(),
            turn_id: "t".into(),
            id: 4,
            text: "hi".into(),
        };
        assert_eq!((command, queued), (steer, 1));
    }

    #[test]
    fn a_cancel_stops_the_running_turn_once() {
        let mut s = crate::device::live::tests::session("s");
        assert!(s.cancel().is_none(), "nothing runs");
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let cancel = EngineCommand::Cancel {
            session_id: "s".into(),
            turn_id: "t".into(),
        };
        assert_eq!(s.cancel(), Some(cancel));
        assert!(s.cancel().is_none(), "once");
    }
}
