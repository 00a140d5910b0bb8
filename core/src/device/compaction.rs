//! `/compact` and `_lembas/session/compact`: the session's earlier turns are folded into a
//! summary its engine writes (the model asked to summarize them, using no tools; the scripted
//! engine makes one of their text). From then on the model is given the summary in place of
//! the turns it folds (`TurnStart::summary`), and a later compaction folds the summary too.
//! The summary is kept in the session's record (`SessionRecord::compaction`), at most
//! `sessions.max_summary_bytes` of it, the cut said; the history still shows every turn.
//!
//! A compaction runs as a turn of the session (it waits for the turns before it, and the
//! prompts after it wait for it), but it is no turn of the conversation: it adds nothing to
//! the history, and its text is not streamed; the `compacted` event says the summary once it
//! is made. With no earlier turn to fold, a `/compact` prompt answers `message` and runs
//! nothing; the method is refused (-32602), as it is while the session works.

use serde_json::json;

use super::outbox::Lane;
use super::sessions::Session;
use super::turn_table::{Admission, Compacting, Finished, Waiter};
use super::{ConnId, Device};
use crate::config::SessionLimits;
use crate::engine::{EngineCommand, StopReason, TurnStart};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::store::{done_record, Compaction, Record};
use crate::turn::Answer;
use crate::wire::event::lembas::{CompactedEvent, LembasEvent, NoticeEvent, TaskState};
use crate::wire::session::{SessionIdParams, TurnNotes};

/// What a `/compact` prompt answers when there is nothing to fold.
const NOTHING_TO_COMPACT: &str =
    "nothing to compact: the model is given no earlier turn of this session";

/// What the engine is asked: a summary of the turns it is given (and of the summary before
/// them), `focus` being what the person asked to keep (the text after `/compact`).
pub(super) fn text(focus: &str) -> String {
    let mut text = String::from(
        "Summarize the conversation so far, to stand in for it from now on: what was asked, \
         what was decided and done (the files changed, the commands run and what they \
         showed), what is still open, and anything the person said to keep in mind. Be \
         brief and concrete; keep names, paths and numbers exact. Answer with the summary \
         alone.",
    );
    let focus = focus.trim();
    if !focus.is_empty() {
        text.push_str("\n\nKeep in particular: ");
        text.push_str(focus);
    }
    text
}

/// A compaction's start for `s`, as its turn `turn_id` (what `pump` completes with the turns
/// to fold).
fn start_of(s: &Session, turn_id: String, focus: &str) -> TurnStart {
    TurnStart {
        compact: true,
        ..s.turn_start(turn_id, text(focus), Vec::new())
    }
}

/// How a compaction ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The turns were folded into this summary.
    Folded(String),
    /// Nothing was folded: there was nothing to (`message`), or the engine failed or was
    /// stopped (the answer it had).
    Not(Answer),
}

/// What a `/compact` prompt answers when there is nothing to fold.
fn nothing_to_compact() -> Answer {
    let notes = TurnNotes {
        command: Some("compact".into()),
        message: Some(NOTHING_TO_COMPACT.into()),
        ..TurnNotes::default()
    };
    Answer::stopped(StopReason::EndTurn, notes)
}

/// What a compaction's turn that ended (`finished`) came to: the summary the engine said,
/// bounded by `max` bytes (`sessions.max_summary_bytes`) with the notice that says the cut,
/// or nothing folded when it failed, was stopped or said nothing.
fn outcome_of(finished: &Finished, max: usize) -> (Outcome, Option<String>) {
    let stopped = matches!(
        finished.answer,
        Answer::Stopped {
            stop_reason: StopReason::Cancelled,
            ..
        }
    );
    let said = &finished.running.text;
    let whole = said.text.len() + said.left_out;
    match &finished.answer {
        Answer::Failed { .. } => (Outcome::Not(finished.answer.clone()), None),
        _ if stopped => (Outcome::Not(finished.answer.clone()), None),
        _ if said.text.trim().is_empty() => {
            let failed = Answer::Failed {
                code: code::INTERNAL_ERROR,
                message: "the compaction failed: the engine gave no summary, so nothing was \
                          folded"
                    .into(),
            };
            (Outcome::Not(failed), None)
        }
        _ => {
            let kept = crate::text::floor_char(&said.text, max).to_string();
            let cut = (kept.len() < whole).then(|| {
                format!(
                    "the summary was cut to {} of its {whole} bytes \
                     (sessions.max_summary_bytes)",
                    kept.len()
                )
            });
            (Outcome::Folded(kept), cut)
        }
    }
}

impl Session {
    /// Whether `_lembas/session/compact` may compact it now: not while it works, and only with
    /// an earlier turn the model is given (as `limits` count them) to fold.
    fn may_compact(&self, limits: &SessionLimits) -> Result<(), RpcError> {
        if !self.turns.idle() {
            return Err(RpcError::invalid_params(format!(
                "session `{}` is working: compact it once its turns are done",
                self.durable.id
            )));
        }
        let ledger = self.turns.ledger();
        let foldable = super::turns::prior_turns(
            self.recent.turns(),
            limits.max_context_turns,
            limits.max_context_bytes,
            |turn| {
                matches!(
                    ledger.get(turn),
                    Some(super::ledger::TurnState::Done(Answer::Failed { .. }))
                )
            },
        );
        if foldable.is_empty() {
            return Err(RpcError::invalid_params(format!(
                "session `{}` has no earlier turn the model is given, so nothing to compact",
                self.durable.id
            )));
        }
        Ok(())
    }

    /// `_lembas/session/compact`'s turn `turn_id`, queued at `now` for `waiter`: the records
    /// that store it.
    fn queue_compaction(&mut self, turn_id: String, waiter: Waiter, now: u64) -> Vec<Record> {
        let start = start_of(self, turn_id.clone(), "");
        let admission = Admission {
            compact: Some(Compacting::Method),
            ..Admission::default()
        };
        let (order, forgotten) = self.turns.admit(start, admission, waiter);
        let session = self.durable.id.as_str();
        super::turn_prompt::queued_records(session, &turn_id, order, &forgotten, now)
    }

    /// Keep what the compaction `turn_id` (`order` in the ledger, asked `via`) came to, at
    /// `now`: folded, the history before now is the summary's and the summary is in the
    /// session's record. Its answer, the summary if any, and the records that store both.
    fn settle_compaction(
        &mut self,
        turn_id: &str,
        order: u64,
        via: Compacting,
        outcome: Outcome,
        now: u64,
    ) -> (Answer, Option<String>, Vec<Record>) {
        let (answer, summary) = match outcome {
            Outcome::Folded(summary) => {
                let folded = self.recent.next_index();
                self.recent.fold_before(folded);
                self.durable.compaction = Some(Compaction {
                    summary: summary.clone(),
                    folded,
                });
                let notes = TurnNotes {
                    command: (via == Compacting::Prompt).then(|| "compact".into()),
                    summary: Some(summary.clone()),
                    ..TurnNotes::default()
                };
                (Answer::stopped(StopReason::EndTurn, notes), Some(summary))
            }
            Outcome::Not(answer) => (answer, None),
        };
        self.turns.settle(turn_id, answer.clone());
        let records = vec![
            done_record(&self.durable.id, turn_id, order, &answer, now, None),
            self.record(),
        ];
        (answer, summary, records)
    }
}

impl Device {
    /// `_lembas/session/compact`: answered `{ summary }` once the engine has made it.
    pub(super) fn compact_method(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: SessionIdParams,
    ) -> Result<(), RpcError> {
        let limits = self.config.sessions;
        let now = self.clock.now().0;
        let (s, rng) = self.attach_drawing(conn, &p.session_id)?;
        s.may_compact(&limits)?;
        let turn_id = format!("compact_{}", rng.token(16));
        let records = s.queue_compaction(turn_id, (conn, id.clone()), now);
        let session = s.durable.id.clone();
        self.out.persist_in(Lane::of(&session), records);
        self.pump(&session);
        Ok(())
    }

    /// A compaction's turn starts (`pump` gave it the turns to fold and the summary before
    /// them): the engine is asked for the summary, or, with nothing to fold, it ends at once.
    pub(super) fn start_compaction(
        &mut self,
        session: &str,
        mut start: TurnStart,
        via: Compacting,
    ) {
        start.compact = true;
        if start.history.is_empty() {
            let Some(s) = self.sessions.get_mut(session) else {
                return;
            };
            let Some(finished) = s.turns.finish(Ok(StopReason::EndTurn)) else {
                return;
            };
            let answer = nothing_to_compact();
            self.settle_compaction(session, via, finished, Outcome::Not(answer), None);
            self.pump(session);
            return;
        }
        let turn_id = start.turn_id.clone();
        self.out
            .engine_in(Lane::of(session), EngineCommand::Start(Box::new(start)));
        self.broadcast_event(session, LembasEvent::task(TaskState::Start, turn_id));
    }

    /// A compaction's turn ended (`end`: its `done` or `error` event): what the engine said is
    /// the summary, bounded by `sessions.max_summary_bytes`.
    pub(super) fn compaction_finished(
        &mut self,
        session: &str,
        via: Compacting,
        finished: Finished,
        end: LembasEvent,
    ) {
        let max = self.config.sessions.max_summary_bytes;
        let (outcome, cut) = outcome_of(&finished, max);
        if let Some(text) = cut {
            self.broadcast_event(session, LembasEvent::Notice(NoticeEvent { text }));
        }
        self.settle_compaction(session, via, finished, outcome, Some(end));
    }

    /// Keep what a compaction came to, and answer whoever asked for it.
    fn settle_compaction(
        &mut self,
        session: &str,
        via: Compacting,
        finished: Finished,
        outcome: Outcome,
        end: Option<LembasEvent>,
    ) {
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let Finished {
            running: r,
            order,
            waiting,
            ..
        } = finished;
        let (answer, summary, records) = s.settle_compaction(&r.turn_id, order, via, outcome, now);
        self.out.persist_in(Lane::of(session), records);
        if let Some(summary) = summary.clone() {
            self.broadcast_event(session, LembasEvent::Compacted(CompactedEvent { summary }));
        }
        let started = end.is_some();
        if let Some(end) = end {
            self.broadcast_event(session, end);
        }
        for (conn, id) in waiting {
            if !self.conns.contains_key(&conn) {
                continue;
            }
            let frame = match via {
                Compacting::Prompt => answer.frame(&id, &r.turn_id),
                Compacting::Method => method_frame(&id, &answer, summary.as_deref()),
            };
            self.out.send_in(Lane::of(session), conn, frame);
        }
        if started {
            self.broadcast_event(session, LembasEvent::task(TaskState::End, r.turn_id));
        }
    }
}

/// `_lembas/session/compact`'s answer: `{ summary }`, or why there is none.
fn method_frame(id: &Id, answer: &Answer, summary: Option<&str>) -> Vec<u8> {
    match (summary, answer) {
        (Some(summary), _) => jsonrpc::encode_result(id, &json!({ "summary": summary })),
        (None, Answer::Failed { code, message }) => {
            jsonrpc::encode_error(Some(id), &RpcError::new(*code, message.clone()))
        }
        (None, Answer::Stopped { notes, .. }) => {
            let said = notes.as_ref().and_then(|n| n.message.clone());
            let error = match said {
                Some(message) => RpcError::invalid_params(message),
                None => RpcError::new(
                    code::INTERNAL_ERROR,
                    "the compaction was stopped (session/cancel) before it finished, so \
                     nothing was folded",
                ),
            };
            jsonrpc::encode_error(Some(id), &error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use crate::device::turn_start::StartRules;
    use crate::store::SessionRecord;

    fn waiter() -> Waiter {
        (ConnId(1), Id::number(1))
    }

    fn start(s: &mut Session) {
        let config = DeviceConfig::default();
        s.start_next(&StartRules::of(&config, 1))
            .expect("it starts");
    }

    /// A compaction's turn that said `said` (kept up to `kept` bytes, as a stream is) and
    /// ended with `outcome`, stopped first when `cancelled`.
    fn compacted(
        said: &str,
        kept: usize,
        cancelled: bool,
        outcome: Result<StopReason, String>,
    ) -> Finished {
        let mut s = Session::new(SessionRecord::testing("s"), 10);
        s.queue_compaction("c".into(), waiter(), 1);
        start(&mut s);
        s.turns
            .running_mut("c")
            .expect("c runs")
            .text
            .push(said, kept);
        if cancelled {
            s.turns.cancel();
        }
        s.turns.finish(outcome).expect("c ran")
    }

    #[test]
    fn a_compaction_folds_what_the_engine_said_cut_to_the_limit_and_says_the_cut() {
        let done = compacted("the summary", 100, false, Ok(StopReason::EndTurn));
        assert_eq!(
            outcome_of(&done, 100),
            (Outcome::Folded("the summary".into()), None)
        );
        // Six bytes said, four kept by the stream, three by the summary's limit.
        let done = compacted("abcdef", 4, false, Ok(StopReason::EndTurn));
        assert_eq!(
            outcome_of(&done, 3),
            (
                Outcome::Folded("abc".into()),
                Some("the summary was cut to 3 of its 6 bytes (sessions.max_summary_bytes)".into())
            )
        );
    }

    #[test]
    fn a_failed_stopped_or_empty_compaction_folds_nothing() {
        let done = compacted("half", 100, false, Err("boom".into()));
        let (outcome, cut) = outcome_of(&done, 100);
        assert!(
            matches!(outcome, Outcome::Not(Answer::Failed { ref message, .. }) if message == "the turn failed: boom")
        );
        assert_eq!(cut, None);
        let done = compacted("half", 100, true, Ok(StopReason::EndTurn));
        assert!(matches!(
            outcome_of(&done, 100).0,
            Outcome::Not(Answer::Stopped {
                stop_reason: StopReason::Cancelled,
                ..
            })
        ));
        let done = compacted(" \n", 100, false, Ok(StopReason::EndTurn));
        assert_eq!(
            outcome_of(&done, 100).0,
            Outcome::Not(Answer::Failed {
                code: code::INTERNAL_ERROR,
                message: "the compaction failed: the engine gave no summary, so nothing was \
                          folded"
                    .into(),
            })
        );
    }

    #[test]
    fn only_an_idle_session_with_a_turn_to_fold_may_be_compacted() {
        let limits = SessionLimits::default();
        let mut s = Session::new(SessionRecord::testing("s"), 10);
        let e = s.may_compact(&limits).expect_err("nothing to fold");
        assert_eq!(
            e.message,
            "session `s` has no earlier turn the model is given, so nothing to compact"
        );
        let first = s.turn_start("t".into(), "hi".into(), Vec::new());
        s.turns.admit(first, Admission::default(), waiter());
        let e = s.may_compact(&limits).expect_err("t waits to run");
        assert_eq!(
            e.message,
            "session `s` is working: compact it once its turns are done"
        );
        answer_hello(&mut s, &limits);
        assert_eq!(s.may_compact(&limits), Ok(()));
    }

    /// Turn `t`, waiting, starts, says "hello" and ends, kept in the session's history.
    fn answer_hello(s: &mut Session, limits: &SessionLimits) {
        start(s);
        s.turns
            .running_mut("t")
            .expect("t runs")
            .text
            .push("hello", 100);
        let done = s.turns.finish(Ok(StopReason::EndTurn)).expect("t ran");
        s.record_answer(done.running, &done.answer, done.order, 2, limits);
    }

    #[test]
    fn a_folded_summary_is_kept_in_the_record_and_answered_as_asked() {
        let limits = SessionLimits::default();
        let mut s = Session::new(SessionRecord::testing("s"), 10);
        let first = s.turn_start("t".into(), "hi".into(), Vec::new());
        s.turns.admit(first, Admission::default(), waiter());
        answer_hello(&mut s, &limits);
        let next = s.recent.next_index();

        let records = s.queue_compaction("c".into(), waiter(), 3);
        assert_eq!(records.len(), 1, "queued");
        start(&mut s);
        let done = s.turns.finish(Ok(StopReason::EndTurn)).expect("c ran");
        let folded = Outcome::Folded("sum".into());
        let (answer, summary, records) =
            s.settle_compaction("c", done.order, Compacting::Prompt, folded, 4);
        let notes = TurnNotes {
            command: Some("compact".into()),
            summary: Some("sum".into()),
            ..TurnNotes::default()
        };
        assert_eq!(answer, Answer::stopped(StopReason::EndTurn, notes));
        assert_eq!(summary.as_deref(), Some("sum"));
        assert_eq!(records.len(), 2, "its answer and the session's record");
        assert_eq!(
            s.durable.compaction,
            Some(Compaction {
                summary: "sum".into(),
                folded: next,
            })
        );

        let (answer, summary, _) = s.settle_compaction(
            "c",
            done.order,
            Compacting::Method,
            Outcome::Folded("again".into()),
            5,
        );
        let notes = TurnNotes {
            summary: Some("again".into()),
            ..TurnNotes::default()
        };
        assert_eq!(
            answer,
            Answer::stopped(StopReason::EndTurn, notes),
            "no command"
        );
        assert_eq!(summary.as_deref(), Some("again"));

        let (answer, summary, _) = s.settle_compaction(
            "c",
            done.order,
            Compacting::Prompt,
            Outcome::Not(nothing_to_compact()),
            6,
        );
        assert_eq!(answer, nothing_to_compact());
        assert_eq!(summary, None);
        assert_eq!(
            s.durable.compaction.as_ref().map(|c| c.summary.as_str()),
            Some("again"),
            "nothing folded: the summary before stays"
        );
    }
}
