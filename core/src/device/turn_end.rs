//! A turn's end: how it comes out (a compaction's, or a prompt's answer kept in the history),
//! what a prompt's end tells, in order, and who is answered.

use super::connection::Connections;
use super::outbox::Lane;
use super::sessions::Session;
use super::turn_table::{Compacting, Finished, Running, Waiter};
use super::{ConnId, Device};
use crate::config::SessionLimits;
use crate::engine::StopReason;
use crate::store::{done_record, history_record, Record};
use crate::turn::Answer;
use crate::wire::event::lembas::{DoneEvent, ErrorEvent, LembasEvent, TaskState};

/// The event saying how a turn ended: `done` with its stop reason, or `error` with the
/// engine's message.
fn end_event(outcome: &Result<StopReason, String>) -> LembasEvent {
    match outcome {
        Ok(stop_reason) => LembasEvent::Done(DoneEvent {
            stop_reason: *stop_reason,
        }),
        Err(message) => LembasEvent::Error(ErrorEvent {
            message: message.clone(),
        }),
    }
}

/// Turn `turn_id`'s `answer` to each prompt request `waiting` for it whose connection is still
/// open (in `conns`), as the answer to that request's own id; in the order they came.
pub(super) fn answers<'a>(
    waiting: Vec<Waiter>,
    conns: &'a Connections,
    answer: &'a Answer,
    turn_id: &'a str,
) -> impl Iterator<Item = (ConnId, Vec<u8>)> + 'a {
    waiting
        .into_iter()
        .filter(|(conn, _)| conns.contains_key(conn))
        .map(move |(conn, id)| (conn, answer.frame(&id, turn_id)))
}

impl Session {
    /// The running turn ended with `outcome` (`Err`: failed, with the engine's message) at
    /// `now`: what finished, and the event saying how, unless nothing ran.
    pub(super) fn finish(
        &mut self,
        outcome: Result<StopReason, String>,
        now: u64,
    ) -> Option<(Finished, LembasEvent)> {
        let end = end_event(&outcome);
        let finished = self.turns.finish(outcome)?;
        self.durable.touched = now;
        Some((finished, end))
    }

    /// A finished turn's answer (`running` ended with `answer`, at `order` in the ledger): what
    /// it said goes into the history (a failed one's gives the model nothing). Its records:
    /// the turn done, its history entry, and the session as it is now.
    pub(super) fn record_answer(
        &mut self,
        running: Running,
        answer: &Answer,
        order: u64,
        now: u64,
        limits: &SessionLimits,
    ) -> Vec<Record> {
        let session = self.durable.id.clone();
        let turn_id = running.turn_id.clone();
        let assistant = running.into_history(limits.max_answer_bytes);
        let failed = matches!(answer, Answer::Failed { .. });
        let index = self.recent.push(&assistant, failed, limits) as usize;
        let prompt = self.turns.ledger().history_of(&turn_id);
        vec![
            done_record(&session, &turn_id, order, answer, now, prompt),
            history_record(&session, index, &assistant),
            self.record(),
        ]
    }

    /// The running turn ended with `outcome` at `now`: a compaction's goes to compaction.rs as
    /// it finished, a prompt's answer goes into the history (kept to `limits`). `None` when
    /// nothing ran.
    pub(super) fn end_turn(
        &mut self,
        outcome: Result<StopReason, String>,
        now: u64,
        limits: &SessionLimits,
    ) -> Option<Ended> {
        let (finished, end) = self.finish(outcome, now)?;
        if let Some(via) = finished.running.compact {
            return Some(Ended::Compaction(via, Box::new(finished), end));
        }
        let Finished {
            running,
            answer,
            order,
            waiting,
        } = finished;
        let turn_id = running.turn_id.clone();
        let records = self.record_answer(running, &answer, order, now, limits);
        Some(Ended::Answered(Answered {
            turn_id,
            answer,
            waiting,
            records,
            end,
        }))
    }
}

/// How a running turn's end comes out, for the device to pass on.
pub(super) enum Ended {
    /// A compaction's turn (asked for as `Compacting` says): compaction.rs takes what finished
    /// and the event saying how.
    Compaction(Compacting, Box<Finished>, LembasEvent),
    /// A prompt's turn, answered.
    Answered(Answered),
}

/// A prompt's turn that ended: what Device persists, then announces and answers.
pub(super) struct Answered {
    pub turn_id: String,
    pub answer: Answer,
    /// The prompt requests that wait for its answer.
    pub waiting: Vec<Waiter>,
    /// The turn done, its history entry and the session as it is now.
    pub records: Vec<Record>,
    /// The event saying how it ended.
    pub end: LembasEvent,
}

/// One thing a prompt's turn's end tells, for the device to do in order.
pub(super) enum EndTell {
    /// Its records, persisted in its session's lane.
    Persist(Vec<Record>),
    /// The cards it asked (by its id) that are still open, dropped.
    DropCards(String),
    /// An event to the session's clients.
    Event(LembasEvent),
    /// Its answer (its id, the answer) to the prompt requests waiting for it.
    Answer(String, Answer, Vec<Waiter>),
    /// The session's command set read again, to tell its holders if it changed.
    RecheckCommands,
}

impl Answered {
    /// What the end tells, in order: its records first (its answers wait for them and for the
    /// session's frames before them, not for another session's commit), its cards dropped, the
    /// event saying how it ended, the answer to who waits, the task's end, then a look at the
    /// command set, since the turn may have written a command file or made a skill.
    pub(super) fn tells(self) -> Vec<EndTell> {
        let task = LembasEvent::task(TaskState::End, self.turn_id.clone());
        vec![
            EndTell::Persist(self.records),
            EndTell::DropCards(self.turn_id.clone()),
            EndTell::Event(self.end),
            EndTell::Answer(self.turn_id, self.answer, self.waiting),
            EndTell::Event(task),
            EndTell::RecheckCommands,
        ]
    }
}

impl Device {
    /// Answer the prompt requests `waiting` for turn `turn_id` with `answer`, on the
    /// connections still open, in the session's lane: after the persist recording it.
    pub(super) fn answer_waiting(
        &mut self,
        session: &str,
        turn_id: &str,
        answer: &Answer,
        waiting: Vec<Waiter>,
    ) {
        let lane = Lane::of(session);
        for (conn, frame) in answers(waiting, &self.conns, answer, turn_id) {
            self.out.send_in(lane, conn, frame);
        }
    }

    /// The running turn ended: its answer is made durable, then every waiting prompt gets it.
    pub(super) fn finish(&mut self, session: &str, outcome: Result<StopReason, String>) {
        let now = self.clock.now().0;
        let limits = self.config.sessions;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let done = match s.end_turn(outcome, now, &limits) {
            None => return,
            Some(Ended::Compaction(via, finished, end)) => {
                self.compaction_finished(session, via, *finished, end);
                return self.pump(session);
            }
            Some(Ended::Answered(done)) => done,
        };
        for tell in done.tells() {
            match tell {
                EndTell::Persist(records) => self.out.persist_in(Lane::of(session), records),
                EndTell::DropCards(turn_id) => self.drop_turn_cards(session, &turn_id),
                EndTell::Event(event) => self.broadcast_event(session, event),
                EndTell::Answer(turn_id, answer, waiting) => {
                    self.answer_waiting(session, &turn_id, &answer, waiting);
                }
                EndTell::RecheckCommands => self.recheck_commands(session),
            }
        }
        self.pump(session);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::device::connection::Connection;
    use crate::device::turn_table::Admission;
    use crate::device::turns::tests::{put_tables, running};
    use crate::jsonrpc::Id;
    use crate::store::Table;

    #[test]
    fn a_finished_turns_answer_goes_into_the_history_with_its_records() {
        let mut s = crate::device::live::tests::session("s");
        let waiter = (ConnId(1), Id::number(1));
        let start = s.turn_start("t".into(), "hi".into(), Vec::new());
        s.turns.admit(start, Admission::default(), waiter);
        s.turns.start_next();
        let running = s.turns.running_mut("t").expect("t runs");
        running.text.push("the answer", 100);
        let done = s.turns.finish(Ok(StopReason::EndTurn)).expect("t ran");
        let next = s.recent.next_index();
        let limits = SessionLimits::default();
        let records = s.record_answer(done.running, &done.answer, done.order, 9, &limits);
        assert_eq!(s.recent.next_index(), next + 1);
        let Record::Put { value, .. } = &records[1] else {
            panic!("a history entry: {records:?}");
        };
        assert!(value.contains("\"the answer\""), "{value}");
        assert_eq!(
            put_tables(&records),
            [Table::Turns, Table::History, Table::Sessions]
        );
    }

    #[test]
    fn a_turn_finishes_once_touching_its_session_and_saying_how() {
        let mut s = crate::device::live::tests::session("s");
        assert!(
            s.finish(Ok(StopReason::EndTurn), 3).is_none(),
            "nothing runs"
        );
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let (done, end) = s.finish(Err("boom".into()), 8).expect("t ran");
        assert_eq!(done.running.turn_id, "t");
        assert!(matches!(end, LembasEvent::Error(ErrorEvent { ref message }) if message == "boom"));
        assert_eq!(s.durable.touched, 8);
        assert!(s.finish(Ok(StopReason::EndTurn), 9).is_none(), "once");
        running(&mut s, "u", Admission::default());
        s.turns.start_next().expect("u starts");
        let (_, end) = s.finish(Ok(StopReason::EndTurn), 10).expect("u ran");
        assert!(matches!(
            end,
            LembasEvent::Done(DoneEvent {
                stop_reason: StopReason::EndTurn
            })
        ));
    }

    #[test]
    fn a_turns_end_is_told_as_done_or_error_then_its_task_ends() {
        let told = |event: &LembasEvent| serde_json::to_value(event).unwrap();
        let done = end_event(&Ok(StopReason::MaxTokens));
        assert_eq!(
            told(&done),
            json!({ "type": "done", "stopReason": "max_tokens" })
        );
        let failed = end_event(&Err("boom".into()));
        assert_eq!(told(&failed), json!({ "type": "error", "message": "boom" }));
        assert_eq!(
            told(&LembasEvent::task(TaskState::End, "t".into())),
            json!({ "type": "task", "state": "end", "turnId": "t" })
        );
    }

    #[test]
    fn a_turns_end_is_a_compactions_or_an_answer_kept_in_the_history() {
        let mut s = crate::device::live::tests::session("s");
        let limits = SessionLimits::default();
        assert!(
            s.end_turn(Ok(StopReason::EndTurn), 3, &limits).is_none(),
            "nothing runs"
        );
        let compacting = Admission {
            compact: Some(Compacting::Prompt),
            ..Admission::default()
        };
        running(&mut s, "c", compacting);
        s.turns.start_next().expect("c starts");
        let next = s.recent.next_index();
        let Some(Ended::Compaction(via, finished, end)) =
            s.end_turn(Ok(StopReason::EndTurn), 4, &limits)
        else {
            panic!("a compaction's end");
        };
        assert_eq!(via, Compacting::Prompt);
        assert_eq!(finished.running.turn_id, "c");
        assert!(matches!(end, LembasEvent::Done(_)));
        assert_eq!(s.recent.next_index(), next, "nothing kept in the history");
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let r = s.turns.running_mut("t").expect("t runs");
        r.text.push("the answer", 100);
        let Some(Ended::Answered(answered)) = s.end_turn(Ok(StopReason::EndTurn), 5, &limits)
        else {
            panic!("a prompt's answer");
        };
        assert_eq!(answered.turn_id, "t");
        assert!(matches!(
            answered.answer,
            Answer::Stopped {
                stop_reason: StopReason::EndTurn,
                ..
            }
        ));
        assert_eq!(answered.waiting, vec![(ConnId(1), Id::number(1))]);
        assert!(matches!(answered.end, LembasEvent::Done(_)));
        assert_eq!(
            put_tables(&answered.records),
            [Table::Turns, Table::History, Table::Sessions]
        );
        assert_eq!(s.recent.next_index(), next + 1, "kept in the history");
        assert_eq!(s.durable.touched, 5);
    }

    #[test]
    fn an_answered_turns_end_persists_drops_its_cards_tells_answers_ends_its_task_then_rechecks() {
        let answer = Answer::Stopped {
            stop_reason: StopReason::MaxTokens,
            notes: None,
        };
        let records = vec![done_record("s", "t", 1, &answer, 5, None)];
        let answered = Answered {
            turn_id: "t".into(),
            answer,
            waiting: vec![(ConnId(2), Id::number(3))],
            records,
            end: end_event(&Ok(StopReason::MaxTokens)),
        };
        let told: Vec<String> = answered
            .tells()
            .into_iter()
            .map(|tell| match tell {
                EndTell::Persist(records) => format!("persist {}", records.len()),
                EndTell::DropCards(turn_id) => format!("drop cards {turn_id}"),
                EndTell::Event(LembasEvent::Task(task)) => {
                    format!("task {:?} {}", task.state, task.turn_id)
                }
                EndTell::Event(event) => format!("event {}", event.kind()),
                EndTell::Answer(turn_id, answer, waiting) => {
                    let Answer::Stopped { stop_reason, .. } = answer else {
                        panic!("the turn's answer");
                    };
                    format!("answer {turn_id} {stop_reason:?} to {}", waiting.len())
                }
                EndTell::RecheckCommands => "recheck commands".into(),
            })
            .collect();
        assert_eq!(
            told,
            [
                "persist 1",
                "drop cards t",
                "event done",
                "answer t MaxTokens to 1",
                "task End t",
                "recheck commands"
            ]
        );
    }

    #[test]
    fn a_turns_answer_goes_to_each_request_waiting_whose_connection_is_open() {
        use crate::device::ConnKind;
        let conns = Connections::from_iter([
            (ConnId(1), Connection::new(ConnKind::Link)),
            (ConnId(3), Connection::new(ConnKind::Stdio)),
        ]);
        let answer = Answer::stopped(StopReason::EndTurn, Default::default());
        // 2 is gone; 1 asked twice, under two ids.
        let waiting = vec![
            (ConnId(3), Id::number(7)),
            (ConnId(2), Id::number(8)),
            (ConnId(1), Id::number(9)),
            (ConnId(1), Id::number(10)),
        ];
        let sent: Vec<_> = answers(waiting, &conns, &answer, "t1").collect();
        let expected = [(3, 7), (1, 9), (1, 10)]
            .map(|(conn, id)| (ConnId(conn), answer.frame(&Id::number(id), "t1")));
        assert_eq!(sent, expected);
        let none: Vec<_> = answers(Vec::new(), &conns, &answer, "t1").collect();
        assert!(none.is_empty());
    }
}
