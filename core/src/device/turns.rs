//! Turns: `session/prompt` (dedup by turn id, blocks and their limits, the queue),
//! `session/cancel`, `_lembas/steer`, and what the engine reports while a turn runs. How a
//! turn starts is turn_start.rs; how it ends, turn_end.rs.

use serde_json::{json, Value};

use super::chunks::Chunk;
use super::command_prompt::{classify, AsCommand, Invoked};
use super::command_set::Purpose;
use super::compaction;
use super::mentioning::Asked as MentionsAsked;
use super::outbox::Lane;
use super::prompt_blocks::prepare;
use super::sessions::plan_update;
use super::sessions::Session;
use super::turn_end::answers;
use super::turn_start::{StartRules, StartTell};
use super::turn_table::{Admission, Compacting, Running, Seen, Unsteered};
use super::{ConnId, Device, Effect};
use crate::config::{Mode, SessionLimits};
use crate::engine::{Attachment, EngineCommand, EngineEvent, PriorTurn, StopReason, ToolStatus};
use crate::engine_io::FileDiff;
use crate::jsonrpc::{code, Id, RpcError};
use crate::mentions::Mention;
use crate::rng::Rng;
use crate::store::{self, turn_record, Record, StoredTurnState, Table};
use crate::turn::Answer;
use crate::wire::event::lembas::{
    LembasEvent, NoticeEvent, PlanEvent, SteeredEvent, StepEvent, ToolEndEvent, ToolStartEvent,
    UsageEvent,
};
use crate::wire::event::update::{SessionUpdate, ToolCall, ToolCallContent, ToolCallUpdate};
use crate::wire::session::{ContentBlock, HistoryTurn, PromptParams, SessionIdParams, SteerParams};

/// A client's turn id: something a person's message id can be, and bounded.
const MAX_TURN_ID: usize = 200;

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

/// A prompt's turn as its text makes it (command_prompt.rs classifies the text).
struct Classified {
    /// What the turn is given.
    text: String,
    /// Its session goes to plan mode first.
    plan: bool,
    /// The `/name` to look up before it may run.
    look_up: Option<Invoked>,
    admission: Admission,
}

/// What the prompt `typed` in `session` becomes: a turn admitted as `admission` says and as
/// its text makes it (a `/name` looked up as `command_read`), or `None` for an action answered
/// at once (`/plan`, plan_action).
fn classified(
    typed: String,
    session: &str,
    mut admission: Admission,
    command_read: u64,
) -> Option<Classified> {
    let (text, plan, look_up) = match classify(&typed) {
        AsCommand::PlanAction => return None,
        AsCommand::Text => (typed, false, None),
        AsCommand::Send {
            text,
            command,
            plan,
        } => {
            admission.command = Some(command);
            (text, plan, None)
        }
        AsCommand::Review {
            text,
            command,
            target,
        } => {
            admission.command = Some(command);
            admission.review = target;
            (text, false, None)
        }
        AsCommand::Compact { command, focus } => {
            admission.command = Some(command);
            admission.compact = Some(Compacting::Prompt);
            (compaction::text(&focus), false, None)
        }
        AsCommand::Undo { command } => {
            admission.command = Some(command);
            admission.undo = true;
            (typed, false, None)
        }
        AsCommand::LookUp { name, args } => {
            let invoked = Invoked {
                session: session.to_string(),
                name,
                args,
                typed: typed.clone(),
            };
            admission.looking_up = Some(command_read);
            (typed, false, Some(invoked))
        }
    };
    Some(Classified {
        text,
        plan,
        look_up,
        admission,
    })
}

/// The records of a turn just queued (at `order`) in `session`: it is queued, and the
/// finished turns its ledger `forgot` to make room are gone.
pub(super) fn queued_records(
    session: &str,
    turn_id: &str,
    order: u64,
    forgot: &[String],
    now: u64,
) -> Vec<Record> {
    let queued = turn_record(session, turn_id, order, StoredTurnState::Queued, now);
    let forgotten = forgot.iter().map(|t| Record::Delete {
        table: Table::Turns,
        key: store::turn_key(session, t),
    });
    std::iter::once(queued).chain(forgotten).collect()
}

/// The turn id a prompt gave (checked: something a person's message id can be, and bounded),
/// or one drawn from `rng` when it gave none.
fn turn_id_given(given: Option<String>, rng: &mut Rng) -> Result<String, RpcError> {
    match given {
        Some(t) if t.is_empty() || t.chars().count() > MAX_TURN_ID => {
            Err(RpcError::invalid_params(format!(
                "`_meta.lembas.turnId` must be 1 to {MAX_TURN_ID} characters"
            )))
        }
        Some(t) => Ok(t),
        None => Ok(format!("turn_{}", rng.token(16))),
    }
}

/// The writes of turn `turn_id`'s `attachments` (in `session`), numbered from `first` as the
/// turn waits for them: each request's number, what its answer is about (session, turn, the
/// name the client gave) and the shell's effect.
fn attachment_writes<'a>(
    session: &'a str,
    turn_id: &'a str,
    first: u64,
    attachments: Vec<(Attachment, Vec<u8>)>,
) -> impl Iterator<Item = (u64, (String, String, String), Effect)> + 'a {
    attachments
        .into_iter()
        .zip(first..)
        .map(move |((a, bytes), request)| {
            let asked = (session.to_owned(), turn_id.to_owned(), a.name);
            let effect = Effect::WriteAttachment {
                request,
                session_id: session.to_owned(),
                file_name: a.file_name,
                bytes,
            };
            (request, asked, effect)
        })
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

/// The request numbers a prompt's turn may wait for, drawn before it is queued: its
/// attachments' writes from `first_write` on, its mentions' read, its `/name`'s look-up.
#[derive(Clone, Copy, Debug)]
pub(super) struct PromptRequests {
    pub first_write: u64,
    pub mention_read: u64,
    pub command_read: u64,
}

/// A new prompt (its turn id not seen before) as the client gave it.
pub(super) struct Given<'a> {
    pub turn_id: String,
    pub blocks: Vec<ContentBlock<'a>>,
    pub context: crate::engine::Context,
    /// Who gets its answer.
    pub waiter: super::turn_table::Waiter,
}

/// What an attachment's write (or its failure) comes to for the turn that waited for it.
pub(super) enum Wrote {
    /// Written: the turn may start once nothing else holds it.
    Written,
    /// Not written: the turn never runs. Its answer, the requests waiting for it, and the
    /// delete of its stored turn.
    Refused(Answer, Vec<super::turn_table::Waiter>, Record),
}

/// A prompt's turn just queued, and what Device must then do for it.
pub(super) struct QueuedPrompt {
    /// The turn queued (and the ledger's forgotten ones deleted), and the session as it is now.
    pub records: Vec<Record>,
    /// To be written, in order, as the requests from `PromptRequests::first_write` on.
    pub attachments: Vec<(Attachment, Vec<u8>)>,
    /// To be read as `PromptRequests::mention_read`, when there are any.
    pub mentions: Vec<Mention>,
    /// Its session goes to plan mode first.
    pub plan: bool,
    /// To be looked up as `PromptRequests::command_read`.
    pub look_up: Option<Invoked>,
    pub project: String,
    pub capped: bool,
}

/// One thing a queued prompt asks of the device, with the request number its turn waits for.
pub(super) enum PromptAsk {
    /// Its records, persisted in its session's lane.
    Persist(Vec<Record>),
    /// An attachment written: the request's number, what its answer is about (session, turn,
    /// the name the client gave) and the shell's effect.
    Write(u64, (String, String, String), Effect),
    /// Its mentions read: the request's number, whose they are, and they.
    ReadMentions(u64, MentionsAsked, Vec<Mention>),
    /// Its session goes to plan mode.
    PlanMode,
    /// Its `/name` looked up: the request's number, the session's directory, whether it is
    /// held to the roots, and what the set is read for.
    LookUp(u64, String, bool, Purpose),
}

impl QueuedPrompt {
    /// What turn `turn_id` of `session`, queued waiting for `numbers`, asks of the device, in
    /// the order it is to be done: its records first (only its session's frames wait for
    /// them), its attachments' writes from `numbers.first_write` on, its mentions' read, plan
    /// mode, its `/name`'s look-up.
    pub(super) fn asks(
        mut self,
        session: &str,
        turn_id: &str,
        numbers: PromptRequests,
    ) -> Vec<PromptAsk> {
        let mentions = self.mentions_asked(session, turn_id);
        let mut asks = vec![PromptAsk::Persist(self.records)];
        let writes = attachment_writes(session, turn_id, numbers.first_write, self.attachments);
        asks.extend(
            writes.map(|(request, asked, effect)| PromptAsk::Write(request, asked, effect)),
        );
        if let Some((asked, mentions)) = mentions {
            asks.push(PromptAsk::ReadMentions(
                numbers.mention_read,
                asked,
                mentions,
            ));
        }
        if self.plan {
            asks.push(PromptAsk::PlanMode);
        }
        if let Some(invoked) = self.look_up {
            let purpose = Purpose::Prompt(invoked);
            let read = PromptAsk::LookUp(numbers.command_read, self.project, self.capped, purpose);
            asks.push(read);
        }
        asks
    }

    /// Its mentions, to be read for turn `turn_id` of `session` (from its directory, held to
    /// the roots when the session is capped); `None` when it has none. Taken: asked once.
    fn mentions_asked(
        &mut self,
        session: &str,
        turn_id: &str,
    ) -> Option<(MentionsAsked, Vec<Mention>)> {
        if self.mentions.is_empty() {
            return None;
        }
        let asked = MentionsAsked {
            session: session.to_owned(),
            turn_id: turn_id.to_owned(),
            project: self.project.clone(),
            capped: self.capped,
        };
        Some((asked, std::mem::take(&mut self.mentions)))
    }
}

/// What a prompt comes to in its session.
pub(super) enum Prompted {
    /// Its turn finished before: the answer's frame, sent at once.
    Answered(Vec<u8>),
    /// Its turn is queued or runs: answered when it ends.
    Waiting,
    /// An action answered at once (`/plan`), with no turn.
    Action,
    /// A new turn, queued.
    Queued(QueuedPrompt),
}

impl Session {
    /// A new prompt `given` to this session, within `limits` (the queue's, a block's and a
    /// prompt's): its turn queued waiting for the requests `numbers` it needs, or `None` for an
    /// action answered at once (`/plan`). Either way the prompt's context is the session's now.
    pub(super) fn queue_prompt(
        &mut self,
        given: Given<'_>,
        numbers: PromptRequests,
        limits: &SessionLimits,
        rng: &mut Rng,
        now: u64,
    ) -> Result<Option<QueuedPrompt>, RpcError> {
        if self.turns.queued() >= limits.max_queued {
            return Err(RpcError::invalid_params(format!(
                "session `{}` already has {} prompts waiting, the limit (sessions.max_queued)",
                self.durable.id, limits.max_queued
            )));
        }
        let prepared = prepare(given.blocks, *limits, rng, now)?;
        self.durable.context.merge(&given.context);
        self.durable.touched = now;
        let mentions = prepared.mentions;
        let admission = Admission {
            writing: (0..prepared.attachments.len() as u64)
                .map(|i| numbers.first_write + i)
                .collect(),
            reading: (!mentions.is_empty()).then_some(numbers.mention_read),
            ..Admission::default()
        };
        let Some(Classified {
            text,
            plan,
            look_up,
            admission,
        }) = classified(
            prepared.text,
            &self.durable.id,
            admission,
            numbers.command_read,
        )
        else {
            return Ok(None);
        };
        let turn_id = given.turn_id;
        let attachments = prepared.attachments.iter().map(|(a, _)| a.clone());
        let start = self.turn_start(turn_id.clone(), text, attachments.collect());
        let (order, forgotten) = self.turns.admit(start, admission, given.waiter);
        let mut records = queued_records(&self.durable.id, &turn_id, order, &forgotten, now);
        records.push(self.record());
        Ok(Some(QueuedPrompt {
            records,
            attachments: prepared.attachments,
            mentions,
            plan,
            look_up,
            project: self.durable.cwd.clone(),
            capped: self.capped,
        }))
    }

    /// A prompt `given` to this session. A turn id seen before never runs again: a finished
    /// turn's answer comes at once, an unfinished one's when it ends. A new one is refused
    /// when the session's model is `unserved` (the reason), else queued as
    /// [`Session::queue_prompt`] says.
    pub(super) fn prompt(
        &mut self,
        given: Given<'_>,
        unserved: Option<String>,
        numbers: PromptRequests,
        limits: &SessionLimits,
        rng: &mut Rng,
        now: u64,
    ) -> Result<Prompted, RpcError> {
        let (_, id) = &given.waiter;
        match self.turns.seen(&given.turn_id, given.waiter.clone()) {
            Seen::Done(answer) => return Ok(Prompted::Answered(answer.frame(id, &given.turn_id))),
            Seen::Waiting => return Ok(Prompted::Waiting),
            Seen::New => {}
        }
        if let Some(why) = unserved {
            return Err(RpcError::invalid_params(why));
        }
        Ok(match self.queue_prompt(given, numbers, limits, rng, now)? {
            Some(queued) => Prompted::Queued(queued),
            None => Prompted::Action,
        })
    }

    /// `_lembas/steer`'s `text` (the device's number `id` for it) for the running turn, while
    /// fewer than `max` wait for it: the turn's id and how many wait now.
    pub(super) fn steer(
        &mut self,
        id: u64,
        text: String,
        message_id: Option<String>,
        max: usize,
    ) -> Result<(String, usize), RpcError> {
        self.turns
            .steer(id, text, message_id, max)
            .map_err(|why| match why {
                Unsteered::NothingRuns => RpcError::invalid_params(format!(
                    "nothing runs in session `{}`: send it as a prompt instead",
                    self.durable.id
                )),
                Unsteered::Full => RpcError::invalid_params(format!(
                "{max} steered messages already wait for this turn, the limit (sessions.max_steer)"
            )),
            })
    }

    /// [`Session::steer`], and the command that gives the message to the engine.
    pub(super) fn steer_command(
        &mut self,
        id: u64,
        text: String,
        message_id: Option<String>,
        max: usize,
    ) -> Result<(EngineCommand, usize), RpcError> {
        let (turn_id, queued) = self.steer(id, text.clone(), message_id, max)?;
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

    /// The attachment `name` the queued turn `turn_id` waited for (write `request`) could not
    /// be written (`why`): the turn never runs. Its answer, the requests waiting for it, and the delete of
    /// its stored turn; `None` when no turn waited for this write.
    pub(super) fn refuse_unwritten(
        &mut self,
        request: u64,
        turn_id: &str,
        name: &str,
        why: &str,
    ) -> Option<(Answer, Vec<super::turn_table::Waiter>, Record)> {
        let waiting = self.turns.refuse_unwritten(request)?;
        let answer = Answer::Failed {
            code: code::INTERNAL_ERROR,
            message: format!(
                "the attachment `{name}` could not be written, so the prompt did not run: \
                 {why}"
            ),
        };
        let delete = Record::Delete {
            table: Table::Turns,
            key: store::turn_key(&self.durable.id, turn_id),
        };
        Some((answer, waiting, delete))
    }

    /// The shell wrote the attachment `name` of turn `turn_id` (write `request`), or could
    /// not: what that comes to, or `None` when no queued turn waited for this write (its
    /// prompt was refused already).
    pub(super) fn attachment_written(
        &mut self,
        request: u64,
        turn_id: &str,
        name: &str,
        written: Result<(), String>,
    ) -> Option<Wrote> {
        match written {
            Err(why) => {
                let (answer, waiting, record) =
                    self.refuse_unwritten(request, turn_id, name, &why)?;
                Some(Wrote::Refused(answer, waiting, record))
            }
            Ok(()) => self.turns.written(request).then_some(Wrote::Written),
        }
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
    /// `session/prompt`. A known turn id never runs again: a finished turn's answer comes at
    /// once, an unfinished one's when it ends.
    pub(super) fn prompt(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: PromptParams<'_>,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        let (turn_id, context) = p
            .meta
            .and_then(|m| m.lembas)
            .unwrap_or_default()
            .into_parts();
        let turn_id = turn_id_given(turn_id, &mut self.rng)?;
        let limits = self.config.sessions;
        let now = self.clock.now().0;
        let numbers = PromptRequests {
            first_write: self.writes.next_number(),
            mention_read: self.mention_reads.next_number(),
            command_read: self.command_reads.next_number(),
        };
        let unserved = self.unserved(&p.session_id);
        let (s, rng) = self.attach_drawing(conn, &p.session_id)?;
        let given = Given {
            turn_id: turn_id.clone(),
            blocks: p.prompt,
            context,
            waiter: (conn, id.clone()),
        };
        let session = s.durable.id.clone();
        let queued = match s.prompt(given, unserved, numbers, &limits, rng, now)? {
            Prompted::Answered(frame) => return Ok(Some(frame)),
            Prompted::Waiting => return Ok(None),
            Prompted::Action => {
                let answer = self.plan_action(&session, &turn_id);
                return Ok(Some(answer.frame(id, &turn_id)));
            }
            Prompted::Queued(queued) => queued,
        };
        // The turn was queued waiting for these numbers; nothing asked a request since, so
        // each registry numbers its request as the turn expects.
        for ask in queued.asks(&session, &turn_id, numbers) {
            let (request, numbered) = match ask {
                PromptAsk::Persist(records) => {
                    self.out.persist_in(Lane::of(&session), records);
                    continue;
                }
                PromptAsk::Write(request, asked, effect) => {
                    let numbered = self.writes.ask(asked);
                    self.out.effect(effect);
                    (request, numbered)
                }
                PromptAsk::ReadMentions(request, asked, mentions) => {
                    (request, self.ask_mentions(asked, mentions))
                }
                PromptAsk::PlanMode => {
                    self.change_mode(&session, Mode::Plan);
                    continue;
                }
                PromptAsk::LookUp(request, project, capped, purpose) => {
                    (request, self.read_commands(project, capped, purpose))
                }
            };
            debug_assert_eq!(numbered, request);
        }
        self.pump(&session);
        Ok(None)
    }

    /// The shell wrote an attachment (`Effect::WriteAttachment`), or could not. Once all of a
    /// turn's are written it may start; a failed one refuses its prompt with -32603 and the
    /// reason, and the turn never starts. The turn was never run, so its id is forgotten (in
    /// the ledger and the store): the same prompt sent again is tried afresh, where a turn that
    /// ran and failed keeps its answer. Answers for a prompt already refused are ignored.
    pub fn handle_attachment_written(
        &mut self,
        request: u64,
        written: Result<(), String>,
        now: crate::Time,
    ) {
        self.attachment_written(request, written, now);
        self.after_input();
    }

    fn attachment_written(&mut self, request: u64, written: Result<(), String>, now: crate::Time) {
        self.clock.advance(now);
        let Some((session, turn_id, name)) = self.writes.answered(request) else {
            return;
        };
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let Some(wrote) = s.attachment_written(request, &turn_id, &name, written) else {
            return;
        };
        if let Wrote::Refused(answer, waiting, record) = wrote {
            self.out.persist(vec![record]);
            for (conn, frame) in answers(waiting, &self.conns, &answer, &turn_id) {
                self.out.send(conn, frame);
            }
        }
        self.pump(&session);
    }

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
        let max = self.config.sessions.max_steer;
        let id = self.next_steer;
        let s = self.attach(conn, &p.session_id)?;
        let (command, queued) = s.steer_command(id, p.text, p.message_id, max)?;
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
    use crate::device::prompt_blocks::tests::image;

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
    fn a_prompts_text_decides_how_its_turn_is_admitted() {
        let given = || Admission {
            writing: vec![4],
            reading: Some(5),
            ..Admission::default()
        };
        let of = |typed: &str| classified(typed.into(), "s", given(), 9);
        assert!(of("/plan").is_none(), "an action answered at once");
        let plain = of("hello").expect("a turn");
        assert_eq!(plain.text, "hello");
        assert!(!plain.plan && plain.look_up.is_none());
        let a = &plain.admission;
        assert_eq!((a.writing.clone(), a.reading), (vec![4], Some(5)));
        assert!(a.command.is_none() && a.compact.is_none() && !a.undo && a.looking_up.is_none());
        let plan = of("/plan fix it").expect("a turn");
        assert_eq!((plan.text.as_str(), plan.plan), ("fix it", true));
        assert_eq!(
            plan.admission.command.map(|c| c.shown),
            Some("/plan fix it".into())
        );
        let compact = of("/compact").expect("a turn");
        assert_eq!(compact.admission.compact, Some(Compacting::Prompt));
        assert!(of("/undo").expect("a turn").admission.undo);
        let looked = of("/mine some args").expect("a turn");
        assert_eq!(looked.admission.looking_up, Some(9));
        assert!(looked.admission.command.is_none(), "known once it is read");
        let invoked = looked.look_up.expect("looked up");
        assert_eq!(
            (
                invoked.session.as_str(),
                invoked.name.as_str(),
                invoked.args.as_str()
            ),
            ("s", "mine", "some args")
        );
        assert_eq!(
            looked.text, "/mine some args",
            "given as typed until it is read"
        );
    }

    #[test]
    fn a_queued_turns_records_forget_what_its_ledger_let_go() {
        let records = queued_records("s", "t", 3, &["old".to_string()], 7);
        assert_eq!(records.len(), 2);
        assert!(matches!(
            &records[0],
            Record::Put {
                table: Table::Turns,
                ..
            }
        ));
        assert_eq!(
            records[1],
            Record::Delete {
                table: Table::Turns,
                key: store::turn_key("s", "old"),
            }
        );
    }

    #[test]
    fn a_turn_id_is_checked_or_drawn() {
        let mut rng = Rng::new(3);
        let long = "x".repeat(MAX_TURN_ID + 1);
        for bad in [String::new(), long] {
            let err = turn_id_given(Some(bad), &mut rng).expect_err("refused");
            assert_eq!(
                err.message,
                "`_meta.lembas.turnId` must be 1 to 200 characters"
            );
        }
        let most = "é".repeat(MAX_TURN_ID);
        assert_eq!(turn_id_given(Some(most.clone()), &mut rng).unwrap(), most);
        let mut same = Rng::new(3);
        let drawn = turn_id_given(None, &mut rng).unwrap();
        assert_eq!(drawn, format!("turn_{}", same.token(16)));
    }

    fn text(t: &str) -> ContentBlock<'static> {
        ContentBlock::Text { text: t.into() }
    }

    fn given(turn: &str, blocks: Vec<ContentBlock<'static>>) -> Given<'static> {
        Given {
            turn_id: turn.into(),
            blocks,
            context: crate::engine::Context::default(),
            waiter: (ConnId(1), Id::number(1)),
        }
    }

    /// Session `s` in `/w/p`, held to the roots.
    fn capped_in_project() -> Session {
        let mut s = crate::device::live::tests::session("s");
        s.durable.cwd = "/w/p".into();
        s.capped = true;
        s
    }

    const NUMBERS: PromptRequests = PromptRequests {
        first_write: 4,
        mention_read: 7,
        command_read: 9,
    };

    #[test]
    fn a_prompt_is_queued_waiting_for_the_requests_it_was_numbered() {
        let mut s = crate::device::live::tests::session("s");
        let limits = SessionLimits::default();
        let blocks = vec![text("look at @src/a.rs"), image("a.png"), image("b.png")];
        let queued = s
            .queue_prompt(given("t", blocks), NUMBERS, &limits, &mut Rng::new(1), 5)
            .expect("within the limits")
            .expect("a turn");
        assert_eq!(queued.attachments.len(), 2);
        assert_eq!(queued.mentions.len(), 1);
        assert!(!queued.plan && queued.look_up.is_none());
        assert_eq!(s.turns.queued(), 1);
        assert_eq!(s.durable.touched, 5);
        assert_eq!(put_tables(&queued.records), [Table::Turns, Table::Sessions]);
        // Waits for both writes (4 and 5) and the read (7): the last write alone does not
        // let it start.
        assert!(s.turns.written(5));
        assert!(!s.turns.written(6), "no third write was numbered");
        assert!(s.turns.written(4));
        assert!(s.turns.reading(7).is_some());
        assert!(
            s.turns.start_next().is_none(),
            "it still waits for its read"
        );
    }

    #[test]
    fn a_queued_prompts_mentions_are_asked_once_for_its_turn_in_its_directory() {
        let mut s = capped_in_project();
        let limits = SessionLimits::default();
        let mut rng = Rng::new(1);
        let blocks = vec![text("look at @src/a.rs")];
        let mut queued = s
            .queue_prompt(given("t", blocks), NUMBERS, &limits, &mut rng, 5)
            .expect("within the limits")
            .expect("a turn");
        let (asked, mentions) = queued.mentions_asked("s", "t").expect("one");
        assert_eq!(
            (asked.session, asked.turn_id, asked.project, asked.capped),
            ("s".into(), "t".into(), "/w/p".into(), true)
        );
        let paths: Vec<_> = mentions.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["src/a.rs"]);
        assert!(queued.mentions_asked("s", "t").is_none(), "once");
        let mut plain = s
            .queue_prompt(given("u", vec![text("hi")]), NUMBERS, &limits, &mut rng, 6)
            .expect("within the limits")
            .expect("a turn");
        assert!(plain.mentions_asked("s", "u").is_none(), "none");
    }

    /// Each ask as what it is and the request number it carries (its record count for a
    /// persist), with what makes it this turn's.
    fn asked(asks: Vec<PromptAsk>) -> Vec<(&'static str, u64, String)> {
        asks.into_iter()
            .map(|ask| match ask {
                PromptAsk::Persist(records) => ("persist", records.len() as u64, String::new()),
                PromptAsk::Write(request, (session, turn, name), effect) => {
                    let Effect::WriteAttachment { request: r, .. } = effect else {
                        panic!("a write's effect writes an attachment");
                    };
                    assert_eq!(r, request, "the effect carries the request's number");
                    ("write", request, format!("{session} {turn} {name}"))
                }
                PromptAsk::ReadMentions(request, asked, mentions) => {
                    let paths: Vec<_> = mentions.iter().map(|m| m.path.clone()).collect();
                    let about = format!("{} {} {}", asked.session, asked.turn_id, paths.join(","));
                    ("mentions", request, about)
                }
                PromptAsk::PlanMode => ("plan", 0, String::new()),
                PromptAsk::LookUp(request, project, capped, purpose) => {
                    let Purpose::Prompt(invoked) = purpose else {
                        panic!("looked up for the prompt");
                    };
                    let about = format!("{} {project} {capped} {}", invoked.session, invoked.name);
                    ("look up", request, about)
                }
            })
            .collect()
    }

    #[test]
    fn a_queued_prompt_asks_its_records_writes_read_plan_and_look_up_in_order_as_numbered() {
        let mut s = capped_in_project();
        let limits = SessionLimits::default();
        let mut rng = Rng::new(1);
        let blocks = vec![text("/tidy @src/a.rs"), image("a.png"), image("b.png")];
        let queued = s
            .queue_prompt(given("t", blocks), NUMBERS, &limits, &mut rng, 5)
            .expect("within the limits")
            .expect("a turn");
        let say = |s: &str| s.to_string();
        assert_eq!(
            asked(queued.asks("s", "t", NUMBERS)),
            [
                ("persist", 2, say("")),
                ("write", 4, say("s t a.png")),
                ("write", 5, say("s t b.png")),
                ("mentions", 7, say("s t src/a.rs")),
                ("look up", 9, say("s /w/p true tidy")),
            ]
        );
        let plan = vec![text("/plan fix @src/b.rs")];
        let queued = s
            .queue_prompt(given("u", plan), NUMBERS, &limits, &mut rng, 6)
            .expect("within the limits")
            .expect("a turn");
        assert_eq!(
            asked(queued.asks("s", "u", NUMBERS)),
            [
                ("persist", 2, say("")),
                ("mentions", 7, say("s u src/b.rs")),
                ("plan", 0, say("")),
            ]
        );
        let plain = s
            .queue_prompt(given("v", vec![text("hi")]), NUMBERS, &limits, &mut rng, 7)
            .expect("within the limits")
            .expect("a turn");
        assert_eq!(
            asked(plain.asks("s", "v", NUMBERS)),
            [("persist", 2, say(""))]
        );
    }

    #[test]
    fn a_plan_action_is_answered_without_a_turn_and_a_full_queue_refuses() {
        let mut s = crate::device::live::tests::session("s");
        let limits = SessionLimits {
            max_queued: 1,
            ..SessionLimits::default()
        };
        let mut rng = Rng::new(1);
        let action = s.queue_prompt(
            given("p", vec![text("/plan")]),
            NUMBERS,
            &limits,
            &mut rng,
            5,
        );
        assert!(action.expect("not refused").is_none());
        assert_eq!(s.turns.queued(), 0);
        assert_eq!(s.durable.touched, 5, "the action touched it");
        let first = s.queue_prompt(given("a", vec![text("one")]), NUMBERS, &limits, &mut rng, 6);
        assert!(first.expect("room for one").is_some());
        let err = s
            .queue_prompt(given("b", vec![text("two")]), NUMBERS, &limits, &mut rng, 7)
            .err()
            .expect("refused");
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert_eq!(
            err.message,
            "session `s` already has 1 prompts waiting, the limit (sessions.max_queued)"
        );
        assert_eq!(s.turns.queued(), 1);
        assert_eq!(s.durable.touched, 6, "a refused prompt changes nothing");
    }

    #[test]
    fn a_steer_is_refused_when_nothing_runs_and_when_full() {
        let mut s = crate::device::live::tests::session("s");
        let err = s.steer(1, "hi".into(), None, 2).expect_err("nothing runs");
        assert_eq!(
            err.message,
            "nothing runs in session `s`: send it as a prompt instead"
        );
        let start = s.turn_start("t".into(), "go".into(), Vec::new());
        s.turns
            .admit(start, Admission::default(), (ConnId(1), Id::number(1)));
        s.turns.start_next().expect("t starts");
        assert_eq!(s.steer(1, "a".into(), None, 2).unwrap(), ("t".into(), 1));
        assert_eq!(s.steer(2, "b".into(), None, 2).unwrap(), ("t".into(), 2));
        let err = s.steer(3, "c".into(), None, 2).expect_err("full");
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
    fn a_failed_write_refuses_its_turn_naming_the_file_and_deletes_it() {
        let mut s = crate::device::live::tests::session("s");
        let writing = Admission {
            writing: vec![4],
            ..Admission::default()
        };
        running(&mut s, "t", writing);
        assert!(s.refuse_unwritten(5, "t", "a.png", "disk full").is_none());
        let (answer, waiting, record) = s
            .refuse_unwritten(4, "t", "a.png", "disk full")
            .expect("t waited for it");
        let Answer::Failed { code: c, message } = answer else {
            panic!("a failure: {answer:?}");
        };
        assert_eq!(c, code::INTERNAL_ERROR);
        assert_eq!(
            message,
            "the attachment `a.png` could not be written, so the prompt did not run: disk full"
        );
        assert_eq!(waiting, vec![(ConnId(1), Id::number(1))]);
        assert_eq!(
            record,
            Record::Delete {
                table: Table::Turns,
                key: store::turn_key("s", "t"),
            }
        );
        assert_eq!(s.turns.queued(), 0);
    }

    #[test]
    fn a_steered_event_names_the_messages_taken_and_none_comes_for_none() {
        let mut s = crate::device::live::tests::session("s");
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        s.steer(1, "a".into(), Some("m1".into()), 5).unwrap();
        s.steer(2, "b".into(), None, 5).unwrap();
        s.steer(3, "c".into(), Some("m3".into()), 5).unwrap();
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
    fn an_attachments_write_lets_its_turn_go_on_or_refuses_it_once() {
        let mut s = crate::device::live::tests::session("s");
        let writing = Admission {
            writing: vec![4, 5],
            ..Admission::default()
        };
        running(&mut s, "t", writing);
        let mut wrote = |request, name, written| s.attachment_written(request, "t", name, written);
        assert!(wrote(9, "a.png", Ok(())).is_none(), "no turn waited for 9");
        assert!(matches!(wrote(4, "a.png", Ok(())), Some(Wrote::Written)));
        assert!(wrote(4, "a.png", Ok(())).is_none(), "written once");
        let Some(Wrote::Refused(answer, waiting, record)) =
            wrote(5, "b.png", Err("disk full".into()))
        else {
            panic!("refused");
        };
        let Answer::Failed { message, .. } = answer else {
            panic!("a failure: {answer:?}");
        };
        assert_eq!(
            message,
            "the attachment `b.png` could not be written, so the prompt did not run: disk full"
        );
        assert_eq!(waiting, vec![(ConnId(1), Id::number(1))]);
        assert_eq!(
            record,
            Record::Delete {
                table: Table::Turns,
                key: store::turn_key("s", "t"),
            }
        );
        assert!(
            wrote(5, "b.png", Err("disk full".into())).is_none(),
            "refused once"
        );
        assert_eq!(s.turns.queued(), 0);
    }

    #[test]
    fn a_prompt_seen_before_never_runs_again_and_an_unserved_model_refuses_a_new_one() {
        let mut s = crate::device::live::tests::session("s");
        let limits = SessionLimits::default();
        let mut rng = Rng::new(1);
        let mut prompt = |s: &mut Session, turn: &str, typed: &str, unserved: Option<&str>| {
            let given = given(turn, vec![text(typed)]);
            let unserved = unserved.map(str::to_string);
            s.prompt(given, unserved, NUMBERS, &limits, &mut rng, 5)
        };
        let unserved = Some("the model `m` is not served");
        let err = prompt(&mut s, "t", "hi", unserved).err().expect("refused");
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert_eq!(err.message, "the model `m` is not served");
        assert_eq!(s.turns.queued(), 0);
        assert!(matches!(
            prompt(&mut s, "t", "hi", None),
            Ok(Prompted::Queued(_))
        ));
        // Known, it is answered when it ends, whatever its session's model is now.
        assert!(matches!(
            prompt(&mut s, "t", "hi", unserved),
            Ok(Prompted::Waiting)
        ));
        assert_eq!(s.turns.queued(), 1, "not queued twice");
        s.turns.start_next().expect("t starts");
        s.finish(Ok(StopReason::EndTurn), 6).expect("t ran");
        let Ok(Prompted::Answered(frame)) = prompt(&mut s, "t", "hi", unserved) else {
            panic!("answered at once");
        };
        let frame: Value = serde_json::from_slice(&frame).expect("a frame");
        assert_eq!(frame["id"], 1);
        assert_eq!(frame["result"]["stopReason"], "end_turn");
        assert_eq!(frame["result"]["_meta"]["lembas"]["turnId"], "t");
        assert!(matches!(
            prompt(&mut s, "p", "/plan", None),
            Ok(Prompted::Action)
        ));
    }

    #[test]
    fn a_steer_is_given_to_the_engine_with_its_number_and_text() {
        let mut s = crate::device::live::tests::session("s");
        let refused = s
            .steer_command(1, "hi".into(), None, 2)
            .expect_err("nothing runs");
        assert_eq!(
            refused.message,
            "nothing runs in session `s`: send it as a prompt instead"
        );
        running(&mut s, "t", Admission::default());
        s.turns.start_next().expect("t starts");
        let (command, queued) = s.steer_command(4, "hi".into(), None, 2).expect("runs");
        let steer = EngineCommand::Steer {
            session_id: "s".into(),
            turn_id: "t".into(),
            id: 4,
            text: "hi".into(),
        };
        assert_eq!((command, queued), (steer, 1));
    }

    #[test]
    fn a_turns_attachments_are_written_as_the_requests_it_waits_for_in_order() {
        let attachment = |name: &str| Attachment {
            file_name: format!("1-x-{name}"),
            name: name.into(),
            mime_type: "text/plain".into(),
            size: 1,
            text: true,
            first_line: None,
        };
        let attachments = vec![
            (attachment("a.txt"), b"a".to_vec()),
            (attachment("b.txt"), b"b".to_vec()),
        ];
        let writes: Vec<_> = attachment_writes("s", "t1", 4, attachments).collect();
        let asked: Vec<_> = writes.iter().map(|(r, a, _)| (*r, a.clone())).collect();
        let about = |name: &str| ("s".to_owned(), "t1".to_owned(), name.to_owned());
        assert_eq!(asked, [(4, about("a.txt")), (5, about("b.txt"))]);
        let effects: Vec<_> = writes.into_iter().map(|(_, _, e)| e).collect();
        let written = |request, name: &str, bytes: &[u8]| Effect::WriteAttachment {
            request,
            session_id: "s".into(),
            file_name: format!("1-x-{name}"),
            bytes: bytes.to_vec(),
        };
        assert_eq!(
            effects,
            [written(4, "a.txt", b"a"), written(5, "b.txt", b"b")]
        );
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
