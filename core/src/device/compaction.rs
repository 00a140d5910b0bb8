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

use serde_json::{json, Map, Value};

use super::outbox::Lane;
use super::sessions::Session;
use super::turn_table::{Admission, Compacting, Finished};
use super::{ConnId, Device};
use crate::engine::{EngineCommand, StopReason, TurnStart};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::store::{done_record, Compaction};
use crate::turn::Answer;
use crate::wire::event::lembas::{CompactedEvent, LembasEvent, NoticeEvent, TaskEvent, TaskState};
use crate::wire::session::SessionIdParams;

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
enum Outcome {
    /// The turns were folded into this summary.
    Folded(String),
    /// Nothing was folded: there was nothing to (`message`), or the engine failed or was
    /// stopped (the answer it had).
    Not(Answer),
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
        if !s.turns.idle() {
            return Err(RpcError::invalid_params(format!(
                "session `{}` is working: compact it once its turns are done",
                s.durable.id
            )));
        }
        let ledger = s.turns.ledger();
        let foldable = super::turns::prior_turns(
            s.recent.turns(),
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
                s.durable.id
            )));
        }
        let turn_id = format!("compact_{}", rng.token(16));
        let start = start_of(s, turn_id.clone(), "");
        let admission = Admission {
            compact: Some(Compacting::Method),
            ..Admission::default()
        };
        let (order, forgotten) = s.turns.admit(start, admission, (conn, id.clone()));
        let session = s.durable.id.clone();
        let records = super::turns::queued_records(&session, &turn_id, order, &forgotten, now);
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
            let mut extra = Map::new();
            extra.insert("command".into(), json!("compact"));
            extra.insert("message".into(), json!(NOTHING_TO_COMPACT));
            let answer = Answer::stopped(StopReason::EndTurn, extra);
            self.settle_compaction(session, via, finished, Outcome::Not(answer), None);
            self.pump(session);
            return;
        }
        let turn_id = start.turn_id.clone();
        self.out
            .engine_in(Lane::of(session), EngineCommand::Start(Box::new(start)));
        self.broadcast_event(
            session,
            LembasEvent::Task(TaskEvent {
                state: TaskState::Start,
                turn_id,
            }),
        );
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
        let stopped = matches!(
            finished.answer,
            Answer::Stopped {
                stop_reason: StopReason::Cancelled,
                ..
            }
        );
        let said = &finished.running.text;
        let whole = said.text.len() + said.left_out;
        let outcome = match &finished.answer {
            Answer::Failed { .. } => Outcome::Not(finished.answer.clone()),
            _ if stopped => Outcome::Not(finished.answer.clone()),
            _ if said.text.trim().is_empty() => Outcome::Not(Answer::Failed {
                code: code::INTERNAL_ERROR,
                message: "the compaction failed: the engine gave no summary, so nothing was \
                          folded"
                    .into(),
            }),
            _ => {
                let kept = crate::text::floor_char(&said.text, max).to_string();
                if kept.len() < whole {
                    let text = format!(
                        "the summary was cut to {} of its {whole} bytes \
                         (sessions.max_summary_bytes)",
                        kept.len()
                    );
                    self.broadcast_event(session, LembasEvent::Notice(NoticeEvent { text }));
                }
                Outcome::Folded(kept)
            }
        };
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
        let (answer, summary) = match outcome {
            Outcome::Folded(summary) => {
                let folded = s.recent.next_index();
                s.recent.fold_before(folded);
                s.durable.compaction = Some(Compaction {
                    summary: summary.clone(),
                    folded,
                });
                let mut extra = Map::new();
                if via == Compacting::Prompt {
                    extra.insert("command".into(), json!("compact"));
                }
                extra.insert("summary".into(), json!(summary));
                (Answer::stopped(StopReason::EndTurn, extra), Some(summary))
            }
            Outcome::Not(answer) => (answer, None),
        };
        s.turns.settle(&r.turn_id, answer.clone());
        let records = vec![
            done_record(session, &r.turn_id, order, &answer, now, None),
            s.record(),
        ];
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
            self.broadcast_event(
                session,
                LembasEvent::Task(TaskEvent {
                    state: TaskState::End,
                    turn_id: r.turn_id,
                }),
            );
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
        (None, Answer::Stopped { extra, .. }) => {
            let said = extra
                .as_deref()
                .and_then(|e| serde_json::from_str::<Map<String, Value>>(e).ok())
                .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_owned));
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
