//! A prompt's admission (`session/prompt`): a turn id seen before never runs again, the
//! text classified (a `/command`, plan mode), the blocks held to their limits, attachments
//! written and mentions read before the turn is queued, and what the queued prompt asks of
//! the device, in order.

use super::command_prompt::{classify, AsCommand, Invoked};
use super::command_set::Purpose;
use super::compaction;
use super::given_context::bounded;
use super::mentioning::Asked as MentionsAsked;
use super::outbox::Lane;
use super::prompt_blocks::{check_sizes, prepare};
use super::sessions::Session;
use super::turn_end::answers;
use super::turn_table::{Admission, Compacting, Seen};
use super::{ConnId, Device, Effect};
use crate::config::{Mode, SessionLimits};
use crate::engine::Attachment;
use crate::jsonrpc::{code, Id, RpcError};
use crate::mentions::Mention;
use crate::rng::Rng;
use crate::store::{self, turn_record, Record, StoredTurnState, Table};
use crate::turn::Answer;
use crate::wire::session::{ContentBlock, PromptParams};

/// A client's turn id: something a person's message id can be, and bounded.
const MAX_TURN_ID: usize = 200;

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

    /// The attachment `name` the queued turn `turn_id` waited for (write `request`) could not
    /// be written (`why`): the turn never runs. Its answer, the requests waiting for it, and the delete of
    /// its stored turn; `None` when no turn waited for this write.
    fn refuse_unwritten(
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
        let context = bounded(context, &self.config.sessions)?;
        check_sizes(&p.prompt, &self.config.sessions)?;
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
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    use crate::device::prompt_blocks::tests::image;
    use crate::device::turns::tests::{put_tables, running};
    use crate::engine::StopReason;

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
        let Answer::Failed { code: c, message } = answer else {
            panic!("a failure: {answer:?}");
        };
        assert_eq!(c, code::INTERNAL_ERROR);
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
}
