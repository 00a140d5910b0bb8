//! One session's turns: its ledger (every turn id accepted, and a finished turn's answer), the
//! turns waiting to run, the one running, and the prompt requests waiting for each answer. They
//! change together, only through the transitions here, so they always agree: a turn id in the
//! queue or running is in the ledger, and every request waiting for a turn is answered when it
//! ends or is refused.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::chunks::Chunk;
use super::ledger::{Fixed, Ledger, TurnState};
use super::ConnId;
use crate::config::SessionLimits;
use crate::engine::{StopReason, ToolStatus, TurnStart};
use crate::jsonrpc::{code, Id};
use crate::review::ReviewTarget;
use crate::turn::Answer;
use crate::wire::session::{HistoryTurn, ToolRecord, TurnNotes};

/// A prompt request waiting for a turn's answer: where it came from and its id.
pub(crate) type Waiter = (ConnId, Id);

/// A turn waiting for the one before it, for its `@path` mentions to be read and for its
/// attachments to be written.
#[derive(Debug)]
pub(crate) struct Queued {
    pub start: TurnStart,
    /// The `WriteAttachment` requests not answered yet: it starts only once there are none.
    pub writing: Vec<u64>,
    /// The `ReadMentions` request not answered yet: it starts only once it is.
    pub reading: Option<u64>,
    /// What its mentions' reading has to say (said once it starts).
    pub notices: Vec<String>,
    /// The `ReadCommands` request that tells whether its `/name` is a command: it starts only
    /// once it is answered.
    pub looking_up: Option<u64>,
    /// The command it is, if it is one.
    pub command: Option<CommandUse>,
    /// A compaction, and who asked for it.
    pub compact: Option<Compacting>,
    /// A `/review` that waits to know there is something to review: it starts only once
    /// that is known (review_check.rs).
    pub review: Option<ReviewGate>,
    /// An `/undo` (undo.rs).
    pub undo: bool,
}

/// What a new turn is, and what it waits for besides the turn before it: all of it given when
/// the turn is accepted ([`TurnTable::admit`]).
#[derive(Debug, Default)]
pub(crate) struct Admission {
    /// The `WriteAttachment` requests for its attachments.
    pub writing: Vec<u64>,
    /// The `ReadMentions` request for its `@path` mentions.
    pub reading: Option<u64>,
    /// The `ReadCommands` request that tells whether its `/name` is a command.
    pub looking_up: Option<u64>,
    /// A `/review`: what to look at for changes once it is next to run.
    pub review: Option<ReviewTarget>,
    /// The command it is, if known already.
    pub command: Option<CommandUse>,
    pub compact: Option<Compacting>,
    pub undo: bool,
}

/// Where a `/review`'s look for changes stands. It is asked for only once the turn is next
/// to run, so the turns before it have made their changes.
#[derive(Debug, PartialEq)]
pub(crate) enum ReviewGate {
    /// Not asked yet: what to look at.
    Due(ReviewTarget),
    /// Asked as this `CheckChanges` request, for this.
    Asked(u64, ReviewTarget),
}

/// A turn that folds the session's earlier turns into a summary (compaction.rs), asked for by
/// a `/compact` prompt or by `_lembas/session/compact` (whose answer is `{ summary }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compacting {
    Prompt,
    Method,
}

/// A prompt that is a command: its name, its text as typed (what the transcript shows), and
/// the model it asks for, for this prompt only.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CommandUse {
    pub name: String,
    pub shown: String,
    pub model: Option<String>,
}

/// The turn a session runs now.
#[derive(Debug)]
pub(crate) struct Running {
    pub turn_id: String,
    pub cancelling: bool,
    /// Steered messages the engine has not taken in yet.
    pub steer: Vec<Steered>,
    /// What the reading of its mentions had to say, until the turn's start is announced.
    pub notices: Vec<String>,
    /// The command its prompt was.
    pub command: Option<CommandUse>,
    /// A compaction: what it says is the summary, shown to no one as it streams.
    pub compact: Option<Compacting>,
    /// An `/undo`: it ends when the shell has put the files back (undo.rs).
    pub undo: bool,
    /// The answer and the reasoning so far, as the history keeps them (their first
    /// `sessions.max_answer_bytes` each), and the bytes streamed past that.
    pub text: Kept,
    pub reasoning: Kept,
    pub tools: Vec<ToolRecord>,
}

impl Running {
    fn new(turn_id: String) -> Running {
        Running {
            turn_id,
            cancelling: false,
            steer: Vec::new(),
            notices: Vec::new(),
            command: None,
            compact: None,
            undo: false,
            text: Kept::default(),
            reasoning: Kept::default(),
            tools: Vec::new(),
        }
    }

    /// A chunk of the answer or of its reasoning, kept as the history keeps it (the first `max`
    /// bytes of each): whether it is shown as it streams. A compaction's answer is its summary,
    /// said whole once it is done, and its reasoning is not kept.
    pub(super) fn streamed(&mut self, chunk: Chunk, text: &str, max: usize) -> bool {
        match (chunk, self.compact.is_some()) {
            (Chunk::Message, compacting) => {
                self.text.push(text, max);
                !compacting
            }
            (Chunk::Thought, true) => false,
            (Chunk::Thought, false) => {
                self.reasoning.push(text, max);
                true
            }
        }
    }

    /// The engine called a tool: it is kept for the history, its output not known yet.
    pub fn tool_called(&mut self, id: &str, title: &str, args: &Value) {
        self.tools.push(ToolRecord {
            id: id.to_string(),
            name: title.to_string(),
            args: args.clone(),
            output: None,
            is_error: None,
        });
    }

    /// A tool call's progress: its output, when one came, replaces what was kept; a failure
    /// marks it an error. A call never announced is ignored.
    pub fn tool_updated(&mut self, id: &str, status: ToolStatus, output: Option<&String>) {
        let Some(t) = self.tools.iter_mut().find(|t| t.id == id) else {
            return;
        };
        if let Some(output) = output {
            t.output = Some(output.clone());
        }
        if status == ToolStatus::Failed {
            t.is_error = Some(true);
        }
    }

    /// The steered messages the engine took in (`ids`), in the order they were sent; the
    /// others still wait.
    pub fn take_steered(&mut self, ids: &[u64]) -> Vec<Steered> {
        let (taken, left) = std::mem::take(&mut self.steer)
            .into_iter()
            .partition(|m| ids.contains(&m.id));
        self.steer = left;
        taken
    }

    /// What the history keeps of the turn's answer (each stream's first `max` bytes).
    pub fn into_history(self, max: usize) -> HistoryTurn {
        HistoryTurn::Assistant {
            text: self.text.into_history(max),
            reasoning: self.reasoning.into_history(max),
            tools: self.tools,
        }
    }

    /// Steered messages the turn ended before taking in, for `_meta.lembas.unsent`, and the
    /// command its prompt was, for `command`.
    fn end_notes(&self) -> TurnNotes {
        TurnNotes {
            command: self.command.as_ref().map(|c| c.name.clone()),
            unsent: self.steer.iter().map(|m| m.text.clone()).collect(),
            ..TurnNotes::default()
        }
    }
}

/// A stream's text as the history keeps it: its first `max` bytes, and how many came after.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub text: String,
    pub left_out: usize,
}

impl Kept {
    pub fn push(&mut self, more: &str, max: usize) {
        let room = max.saturating_sub(self.text.len());
        if self.left_out == 0 && more.len() <= room {
            self.text.push_str(more);
            crate::prefetch::next_append(&self.text);
            return;
        }
        let mut cut = crate::text::floor_char(more, room).len();
        if self.left_out == 0 {
            self.text.push_str(&more[..cut]);
        } else {
            cut = 0;
        }
        self.left_out += more.len() - cut;
    }

    /// The kept text, ending with a note of what was left out, if anything was.
    pub fn into_history(self, max: usize) -> String {
        let mut text = self.text;
        note_left_out(&mut text, self.left_out, max);
        text
    }

    /// What [`Kept::into_history`] would give now, the stream still going.
    pub fn so_far(&self, max: usize) -> String {
        let mut text = self.text.clone();
        note_left_out(&mut text, self.left_out, max);
        text
    }
}

fn note_left_out(text: &mut String, left_out: usize, max: usize) {
    if left_out > 0 {
        text.push_str(&format!(
            "\n\n[{left_out} more bytes were streamed and not kept: the history keeps the first \
             {max} (sessions.max_answer_bytes)]"
        ));
    }
}

#[derive(Debug)]
pub(crate) struct Steered {
    pub id: u64,
    pub text: String,
    pub message_id: Option<String>,
}

/// Why a steered message was not taken.
#[derive(Debug, PartialEq)]
pub(crate) enum Unsteered {
    /// Nothing runs, or what runs is being stopped.
    NothingRuns,
    /// `max` messages already wait for the running turn.
    Full,
    /// The message alone is over the bytes of a prompt's block.
    TooLarge { size: u64 },
    /// With it, the messages waiting would be over the bytes of a whole prompt.
    OverTotal { total: u64 },
}

/// What the ledger knows of a prompt's turn id.
#[derive(Debug, PartialEq)]
pub(crate) enum Seen<'a> {
    /// It finished: this is its answer, for the duplicate too.
    Done(&'a Answer),
    /// It is queued or running: the request now waits for its answer with the first one.
    Waiting,
    /// A new turn.
    New,
}

/// A turn that ended, for its session to record and announce.
#[derive(Debug)]
pub(crate) struct Finished {
    pub running: Running,
    pub answer: Answer,
    /// Its place in the ledger (for its stored record).
    pub order: u64,
    /// Every request waiting for its answer.
    pub waiting: Vec<Waiter>,
}

#[derive(Debug)]
pub(crate) struct TurnTable {
    ledger: Ledger,
    queue: VecDeque<Queued>,
    running: Option<Running>,
    /// Prompt requests waiting for a turn's answer: the first and every duplicate.
    waiters: HashMap<String, Vec<Waiter>, Fixed>,
}

impl TurnTable {
    /// Empty, with a ledger of `capacity` turn ids.
    pub fn new(capacity: usize) -> TurnTable {
        TurnTable {
            ledger: Ledger::new(capacity),
            queue: VecDeque::new(),
            running: None,
            waiters: HashMap::default(),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The dedup check a prompt makes: a known turn id never runs again. For one not finished
    /// yet, `waiter` is added to those its answer goes to.
    pub fn seen(&mut self, turn: &str, waiter: Waiter) -> Seen<'_> {
        match self.ledger.get(turn) {
            Some(TurnState::Done(answer)) => Seen::Done(answer),
            Some(_) => {
                self.waiters
                    .entry(turn.to_string())
                    .or_default()
                    .push(waiter);
                Seen::Waiting
            }
            None => Seen::New,
        }
    }

    /// Turns waiting to run.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The ids of the turns waiting to run, first first.
    pub fn queued_ids(&self) -> impl Iterator<Item = &str> {
        self.queue.iter().map(|q| q.start.turn_id.as_str())
    }

    /// Queue a new turn (its id not [`Seen`] before) as `admission` says it is and what it
    /// waits for; `waiter` gets its answer. Returns its order in the ledger and the finished
    /// turn ids forgotten to make room.
    pub fn admit(
        &mut self,
        start: TurnStart,
        admission: Admission,
        waiter: Waiter,
    ) -> (u64, Vec<String>) {
        let turn = start.turn_id.clone();
        let accepted = self.ledger.accept(&turn);
        self.waiters.insert(turn, vec![waiter]);
        let Admission {
            writing,
            reading,
            looking_up,
            review,
            command,
            compact,
            undo,
        } = admission;
        self.queue.push_back(Queued {
            start,
            writing,
            reading,
            notices: Vec::new(),
            looking_up,
            command,
            compact,
            review: review.map(ReviewGate::Due),
            undo,
        });
        accepted
    }

    /// When nothing runs and the next turn waits only for its review's look for changes,
    /// not asked yet: it is asked now as `request`. Its session's project and what to look at.
    pub fn ask_review(&mut self, request: u64) -> Option<(String, ReviewTarget)> {
        if self.running.is_some() {
            return None;
        }
        let q = self.queue.front_mut()?;
        if !q.writing.is_empty() || q.reading.is_some() || q.looking_up.is_some() {
            return None;
        }
        let Some(ReviewGate::Due(target)) = &q.review else {
            return None;
        };
        let target = target.clone();
        q.review = Some(ReviewGate::Asked(request, target.clone()));
        Some((q.start.cwd.clone(), target))
    }

    /// A review's look for changes (`request`) was answered: what it looked at, if a turn
    /// still waits for it. The turn may start now, with `notices` said when it does.
    pub fn review_checked(&mut self, request: u64, notices: Vec<String>) -> Option<ReviewTarget> {
        let q = self.queue.front_mut()?;
        match q.review.take() {
            Some(ReviewGate::Asked(r, target)) if r == request => {
                q.notices.extend(notices);
                Some(target)
            }
            other => {
                q.review = other;
                None
            }
        }
    }

    /// A review found nothing to review: the next turn (the one that waited for the look,
    /// [`TurnTable::review_checked`]) is answered `answer` without running, kept in the ledger
    /// as done. Its id, its order in the ledger, and every request waiting for its answer.
    pub fn answer_next(&mut self, answer: Answer) -> Option<(String, u64, Vec<Waiter>)> {
        let q = self.queue.pop_front()?;
        let turn = q.start.turn_id;
        self.ledger.set(&turn, TurnState::Done(answer));
        let order = self.ledger.order_of(&turn).unwrap_or_default();
        let waiting = self.waiters.remove(&turn).unwrap_or_default();
        Some((turn, order, waiting))
    }

    /// A finished turn's answer is `answer` after all (a compaction's, once its summary is
    /// known), for a duplicate of its prompt too.
    pub fn settle(&mut self, turn: &str, answer: Answer) {
        self.ledger.set(turn, TurnState::Done(answer));
    }

    /// A prompt answered without running (a command that is an action): kept in the ledger
    /// as done with `answer`, so the same turn id sent again gets it. Its order in the ledger
    /// and the finished turn ids forgotten to make room.
    pub fn answer_at_once(&mut self, turn: &str, answer: Answer) -> (u64, Vec<String>) {
        let accepted = self.ledger.accept(turn);
        self.ledger.set(turn, TurnState::Done(answer));
        accepted
    }

    /// A turn's `/name` was looked up (`request`): `found`, the command's text and use, or
    /// plain text; `notices` said when it starts. Whether a turn waited for it.
    pub fn command_looked_up(
        &mut self,
        request: u64,
        found: Option<(String, CommandUse)>,
        notices: Vec<String>,
    ) -> bool {
        let Some(q) = self
            .queue
            .iter_mut()
            .find(|q| q.looking_up == Some(request))
        else {
            return false;
        };
        q.looking_up = None;
        if let Some((text, command)) = found {
            q.start.text = text;
            q.command = Some(command);
        }
        q.notices.extend(notices);
        true
    }

    /// A turn's mentions were read (`request`): it is given the attachments made of them,
    /// waits for their writes too, and keeps what is to be said. Whether a turn waited for
    /// this read (one whose other writes failed is gone).
    pub fn mentions_read(
        &mut self,
        request: u64,
        attachments: Vec<crate::engine::Attachment>,
        writing: Vec<u64>,
        notices: Vec<String>,
    ) -> bool {
        let Some(q) = self.queue.iter_mut().find(|q| q.reading == Some(request)) else {
            return false;
        };
        q.reading = None;
        q.start.attachments.extend(attachments);
        q.writing.extend(writing);
        q.notices.extend(notices);
        true
    }

    /// The turn whose mentions `request` reads, if one still waits for it.
    pub fn reading(&self, request: u64) -> Option<&TurnStart> {
        self.queue
            .iter()
            .find(|q| q.reading == Some(request))
            .map(|q| &q.start)
    }

    /// An attachment write a queued turn waited for is done. Whether one waited for it.
    pub fn written(&mut self, request: u64) -> bool {
        let Some(q) = self.queue.iter_mut().find(|q| q.writing.contains(&request)) else {
            return false;
        };
        q.writing.retain(|r| *r != request);
        true
    }

    /// An attachment write failed: the turn waiting for it never runs, and its id is forgotten
    /// (sent again, it is a new prompt). The requests that waited for it, or `None` when no
    /// queued turn waited for this write.
    pub fn refuse_unwritten(&mut self, request: u64) -> Option<Vec<Waiter>> {
        let pos = self
            .queue
            .iter()
            .position(|q| q.writing.contains(&request))?;
        let q = self.queue.remove(pos)?;
        let turn = q.start.turn_id;
        self.ledger.forget(&turn);
        Some(self.waiters.remove(&turn).unwrap_or_default())
    }

    /// Start the next queued turn, when nothing runs and its attachments are written (the
    /// ones behind it wait for it): its start and its order in the ledger.
    pub fn start_next(&mut self) -> Option<(TurnStart, u64)> {
        let waits = |q: &Queued| {
            !q.writing.is_empty()
                || q.reading.is_some()
                || q.looking_up.is_some()
                || q.review.is_some()
        };
        if self.running.is_some() || self.queue.front().is_none_or(waits) {
            return None;
        }
        let Queued {
            start,
            notices,
            command,
            compact,
            undo,
            ..
        } = self.queue.pop_front()?;
        self.ledger.set(&start.turn_id, TurnState::Running);
        let order = self.ledger.order_of(&start.turn_id).unwrap_or_default();
        let mut running = Running::new(start.turn_id.clone());
        running.notices = notices;
        running.command = command;
        running.compact = compact;
        running.undo = undo;
        self.running = Some(running);
        Some((start, order))
    }

    pub fn running(&self) -> Option<&Running> {
        self.running.as_ref()
    }

    /// The running turn if it is `turn` (a report about any other is late).
    pub fn running_mut(&mut self, turn: &str) -> Option<&mut Running> {
        self.running.as_mut().filter(|r| r.turn_id == turn)
    }

    /// The running turn, unless it is being stopped.
    pub fn steerable(&mut self) -> Option<&mut Running> {
        self.running.as_mut().filter(|r| !r.cancelling)
    }

    /// A message (`id`, the device's number for it) for the running turn at its next step,
    /// within `limits`: at most `max_steer` wait, a message is a block the model is given
    /// (`max_block_bytes`), and what waits together at most a prompt (`max_prompt_bytes`; each
    /// is held until the engine takes it in). The turn's id and how many wait now.
    pub fn steer(
        &mut self,
        id: u64,
        text: String,
        message_id: Option<String>,
        limits: &SessionLimits,
    ) -> Result<(String, usize), Unsteered> {
        let r = self.steerable().ok_or(Unsteered::NothingRuns)?;
        if r.steer.len() >= limits.max_steer {
            return Err(Unsteered::Full);
        }
        let size = text.len() as u64;
        if size > limits.max_block_bytes {
            return Err(Unsteered::TooLarge { size });
        }
        let total = r.steer.iter().map(|m| m.text.len() as u64).sum::<u64>() + size;
        if total > limits.max_prompt_bytes {
            return Err(Unsteered::OverTotal { total });
        }
        r.steer.push(Steered {
            id,
            text,
            message_id,
        });
        Ok((r.turn_id.clone(), r.steer.len()))
    }

    /// Stop the running turn: its id, the first time only.
    pub fn cancel(&mut self) -> Option<String> {
        let r = self.running.as_mut().filter(|r| !r.cancelling)?;
        r.cancelling = true;
        Some(r.turn_id.clone())
    }

    /// The running turn ended (`Err`: failed, with the engine's message): its answer is kept
    /// in the ledger, and handed back with every request waiting for it. A stopped turn
    /// answers `cancelled` whatever the engine said.
    pub fn finish(&mut self, outcome: Result<StopReason, String>) -> Option<Finished> {
        let running = self.running.take()?;
        let answer = match (running.cancelling, outcome) {
            (true, _) => Answer::stopped(StopReason::Cancelled, running.end_notes()),
            (false, Ok(reason)) => Answer::stopped(reason, running.end_notes()),
            (false, Err(message)) => Answer::Failed {
                code: code::INTERNAL_ERROR,
                message: format!("the turn failed: {message}"),
            },
        };
        self.ledger
            .set(&running.turn_id, TurnState::Done(answer.clone()));
        let order = self.ledger.order_of(&running.turn_id).unwrap_or_default();
        let waiting = self.waiters.remove(&running.turn_id).unwrap_or_default();
        Some(Finished {
            running,
            answer,
            order,
            waiting,
        })
    }

    /// The session is going (deleted): its running turn, and every request still waiting,
    /// by turn id.
    pub fn abandon(self) -> (Option<Running>, HashMap<String, Vec<Waiter>, Fixed>) {
        (self.running, self.waiters)
    }

    /// Nothing runs or waits to run.
    pub fn idle(&self) -> bool {
        self.running.is_none() && self.queue.is_empty()
    }

    /// Some request still waits for an answer.
    pub fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// A connection went away: its requests wait for nothing.
    pub fn forget_connection(&mut self, conn: ConnId) {
        for waiting in self.waiters.values_mut() {
            waiting.retain(|(c, _)| *c != conn);
        }
    }

    /// Put back a turn read from the store (in any order; then [`TurnTable::finish_restore`]).
    pub fn restore(&mut self, turn: &str, order: u64, state: TurnState, history: Option<u64>) {
        self.ledger.restore(turn, order, state, history);
    }

    /// The ledger, to mark a turn's history entry or revert turns (rewind.rs).
    pub fn ledger_mut(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// An `/undo` that was under way when the device stopped runs again (its turn restored as
    /// running): it ends when the shell has put the files back (undo.rs).
    pub fn resume_undo(&mut self, turn: &str) {
        if self.ledger.get(turn) != Some(&TurnState::Running) {
            return;
        }
        let mut running = Running::new(turn.to_string());
        running.undo = true;
        self.running = Some(running);
    }

    /// Every stored turn is back: the ids forgotten for being over capacity.
    pub fn finish_restore(&mut self) -> Vec<String> {
        self.ledger.finish_restore()
    }

    /// Forget the ledger of an idle session (a fresh one of `capacity`): whether there was
    /// anything to forget.
    pub fn forget_ledger(&mut self, capacity: usize) -> bool {
        if !self.idle() || self.ledger.order_len() == 0 {
            return false;
        }
        self.ledger = Ledger::new(capacity);
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn start(turn: &str) -> TurnStart {
        TurnStart::testing(turn, "hi")
    }

    fn waiter(n: u64) -> Waiter {
        (ConnId(n), Id::number(n))
    }

    fn writes(writing: Vec<u64>) -> Admission {
        Admission {
            writing,
            ..Admission::default()
        }
    }

    fn reviewing(target: ReviewTarget) -> Admission {
        Admission {
            review: Some(target),
            ..Admission::default()
        }
    }

    #[test]
    fn a_retried_prompt_never_runs_twice() {
        let mut t = TurnTable::new(10);
        assert_eq!(t.seen("a", waiter(1)), Seen::New);
        t.admit(start("a"), Admission::default(), waiter(1));
        // Retried while queued, then while running: it waits, and is queued once.
        assert_eq!(t.seen("a", waiter(2)), Seen::Waiting);
        assert_eq!(t.queued(), 1);
        assert_eq!(t.start_next().map(|(s, _)| s.turn_id), Some("a".into()));
        assert_eq!(t.seen("a", waiter(3)), Seen::Waiting);
        assert!(t.start_next().is_none());
        let done = t.finish(Ok(StopReason::EndTurn)).expect("it ran");
        // Retried once finished: the same answer, and nothing to start.
        assert_eq!(t.seen("a", waiter(4)), Seen::Done(&done.answer));
        assert!(t.start_next().is_none());
        assert!(t.idle());
    }

    #[test]
    fn a_finished_turn_answers_every_waiter_and_no_one_twice() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.seen("a", waiter(2));
        t.start_next();
        t.seen("a", waiter(3));
        let done = t.finish(Ok(StopReason::EndTurn)).expect("it ran");
        assert_eq!(done.waiting, vec![waiter(1), waiter(2), waiter(3)]);
        assert_eq!(
            done.answer,
            Answer::stopped(StopReason::EndTurn, TurnNotes::default())
        );
        assert!(!t.has_waiters());
        assert!(t.finish(Ok(StopReason::EndTurn)).is_none());
    }

    #[test]
    fn a_gone_connection_is_not_answered() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.seen("a", waiter(2));
        t.forget_connection(ConnId(1));
        t.start_next();
        assert_eq!(
            t.finish(Ok(StopReason::EndTurn)).unwrap().waiting,
            vec![waiter(2)]
        );
    }

    #[test]
    fn turns_run_one_at_a_time_in_order() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.admit(start("b"), Admission::default(), waiter(2));
        assert_eq!(
            t.start_next().map(|(s, o)| (s.turn_id, o)),
            Some(("a".into(), 0))
        );
        assert!(t.start_next().is_none(), "a runs");
        assert_eq!(t.queued_ids().collect::<Vec<_>>(), vec!["b"]);
        t.finish(Ok(StopReason::EndTurn));
        assert_eq!(
            t.start_next().map(|(s, o)| (s.turn_id, o)),
            Some(("b".into(), 1))
        );
    }

    #[test]
    fn a_turn_waits_for_its_attachments_and_the_next_waits_for_it() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), writes(vec![7, 8]), waiter(1));
        t.admit(start("b"), Admission::default(), waiter(2));
        assert!(t.start_next().is_none());
        assert!(t.written(7));
        assert!(!t.written(7), "answered once");
        assert!(t.start_next().is_none());
        assert!(t.written(8));
        assert_eq!(t.start_next().map(|(s, _)| s.turn_id), Some("a".into()));
    }

    #[test]
    fn a_failed_attachment_refuses_its_turn_and_forgets_its_id() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), writes(vec![7]), waiter(1));
        t.seen("a", waiter(2));
        assert_eq!(t.refuse_unwritten(7), Some(vec![waiter(1), waiter(2)]));
        assert_eq!(t.refuse_unwritten(7), None);
        assert!(t.idle() && !t.has_waiters());
        // Sent again, it is a new prompt.
        assert_eq!(t.seen("a", waiter(3)), Seen::New);
    }

    #[test]
    fn a_review_looks_for_changes_only_when_next_to_run_and_then_runs_or_is_answered() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.admit(start("r"), reviewing(ReviewTarget::Head), waiter(2));
        let main = reviewing(ReviewTarget::Branch("main".into()));
        t.admit(start("s"), main, waiter(3));
        assert_eq!(t.ask_review(7), None, "a is first");
        assert_eq!(t.start_next().map(|(s, _)| s.turn_id), Some("a".into()));
        assert_eq!(
            t.ask_review(7),
            None,
            "a runs: its changes are not all made"
        );
        t.finish(Ok(StopReason::EndTurn));
        assert!(t.start_next().is_none(), "r waits for its look");
        assert_eq!(t.ask_review(7), Some(("/w".into(), ReviewTarget::Head)));
        assert_eq!(t.ask_review(8), None, "asked once");
        assert_eq!(t.review_checked(8, Vec::new()), None, "another request");
        assert_eq!(
            t.review_checked(7, vec!["n".into()]),
            Some(ReviewTarget::Head)
        );
        assert_eq!(t.review_checked(7, Vec::new()), None, "answered once");
        // Something to review: r runs, its notice with it.
        let (started, _) = t.start_next().expect("r starts");
        assert_eq!(started.turn_id, "r");
        assert_eq!(
            t.running().map(|r| r.notices.clone()),
            Some(vec!["n".into()])
        );
        t.finish(Ok(StopReason::EndTurn));
        // Nothing to review: s is answered without running, and a retry gets the answer.
        assert_eq!(
            t.ask_review(9),
            Some(("/w".into(), ReviewTarget::Branch("main".into())))
        );
        assert!(t.review_checked(9, Vec::new()).is_some());
        let answer = Answer::stopped(StopReason::EndTurn, TurnNotes::default());
        let (turn, _, waiting) = t.answer_next(answer.clone()).expect("s waited");
        assert_eq!((turn.as_str(), waiting), ("s", vec![waiter(3)]));
        assert_eq!(t.seen("s", waiter(4)), Seen::Done(&answer));
        assert!(t.idle() && !t.has_waiters());
    }

    #[test]
    fn a_cancelled_turn_answers_cancelled_with_what_it_never_took_in() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.start_next();
        t.steerable().expect("runs").steer.push(Steered {
            id: 0,
            text: "later".into(),
            message_id: None,
        });
        assert_eq!(t.cancel(), Some("a".into()));
        assert_eq!(t.cancel(), None, "asked once");
        assert!(t.steerable().is_none());
        let done = t.finish(Ok(StopReason::EndTurn)).unwrap();
        let unsent = TurnNotes {
            unsent: vec!["later".into()],
            ..TurnNotes::default()
        };
        assert_eq!(done.answer, Answer::stopped(StopReason::Cancelled, unsent));
    }

    #[test]
    fn a_failed_turn_keeps_a_failed_answer() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.start_next();
        let done = t.finish(Err("boom".into())).unwrap();
        assert!(
            matches!(&done.answer, Answer::Failed { code: code::INTERNAL_ERROR, message } if message == "the turn failed: boom")
        );
        assert!(matches!(t.ledger().get("a"), Some(TurnState::Done(_))));
    }

    #[test]
    fn a_late_report_about_another_turn_finds_nothing_running() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.start_next();
        assert!(t.running_mut("b").is_none());
        assert!(t.running_mut("a").is_some());
    }

    #[test]
    fn only_an_idle_tables_ledger_is_forgotten() {
        let mut t = TurnTable::new(10);
        assert!(!t.forget_ledger(10), "nothing to forget");
        t.admit(start("a"), Admission::default(), waiter(1));
        assert!(!t.forget_ledger(10), "a waits to run");
        t.start_next();
        t.finish(Ok(StopReason::EndTurn));
        assert!(t.forget_ledger(10));
        assert!(t.ledger().get("a").is_none());
    }

    #[test]
    fn a_cancel_stops_the_running_turn_only_and_the_queued_one_runs_next() {
        let mut t = TurnTable::new(10);
        assert_eq!(t.cancel(), None, "nothing runs");
        t.admit(start("a"), Admission::default(), waiter(1));
        assert_eq!(t.cancel(), None, "a queued turn is not stopped");
        t.start_next();
        t.admit(start("b"), Admission::default(), waiter(2));
        assert_eq!(t.cancel(), Some("a".into()));
        let done = t.finish(Ok(StopReason::EndTurn)).expect("a ran");
        assert_eq!(
            done.answer,
            Answer::stopped(StopReason::Cancelled, TurnNotes::default())
        );
        // b was queued behind it: it runs, and a stop of a was not one of b.
        assert_eq!(t.start_next().map(|(s, _)| s.turn_id), Some("b".into()));
        let done = t.finish(Ok(StopReason::EndTurn)).expect("b ran");
        assert_eq!(
            done.answer,
            Answer::stopped(StopReason::EndTurn, TurnNotes::default())
        );
    }

    #[test]
    fn an_admitted_turn_waits_for_each_of_its_reads_and_runs_as_what_it_is() {
        let mut t = TurnTable::new(10);
        let command = CommandUse {
            name: "fix".into(),
            shown: "/fix".into(),
            model: None,
        };
        let admission = Admission {
            writing: vec![1],
            reading: Some(2),
            looking_up: Some(3),
            command: Some(command.clone()),
            compact: Some(Compacting::Prompt),
            undo: true,
            ..Admission::default()
        };
        t.admit(start("a"), admission, waiter(1));
        assert!(t.written(1));
        assert!(t.start_next().is_none(), "its mentions are not read");
        assert!(t.reading(2).is_some());
        assert!(t.mentions_read(2, Vec::new(), Vec::new(), vec!["m".into()]));
        assert!(t.start_next().is_none(), "its /name is not looked up");
        assert!(!t.command_looked_up(4, None, Vec::new()), "another request");
        assert!(t.command_looked_up(3, None, vec!["c".into()]));
        t.start_next().expect("a starts");
        let r = t.running().expect("a runs");
        assert_eq!(r.command, Some(command));
        assert_eq!(r.compact, Some(Compacting::Prompt));
        assert!(r.undo);
        assert_eq!(r.notices, vec!["m".to_string(), "c".to_string()]);
    }

    /// At most `max` steered messages, of the default sizes.
    pub(crate) fn steer_max(max: usize) -> SessionLimits {
        SessionLimits {
            max_steer: max,
            ..SessionLimits::default()
        }
    }

    #[test]
    fn a_steered_message_is_a_block_and_what_waits_at_most_a_prompt() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.start_next();
        let b = &SessionLimits {
            max_steer: 10,
            max_block_bytes: 4,
            max_prompt_bytes: 6,
            ..SessionLimits::default()
        };
        assert_eq!(
            t.steer(0, "12345".into(), None, b),
            Err(Unsteered::TooLarge { size: 5 })
        );
        assert_eq!(t.steer(1, "1234".into(), None, b), Ok(("a".into(), 1)));
        assert_eq!(
            t.steer(2, "123".into(), None, b),
            Err(Unsteered::OverTotal { total: 7 }),
            "4 bytes wait already"
        );
        assert_eq!(t.steer(3, "12".into(), None, b), Ok(("a".into(), 2)));
        // Taken in, a message no longer counts.
        let r = t.running_mut("a").expect("a runs");
        assert_eq!(r.take_steered(&[1]).len(), 1);
        assert_eq!(t.steer(4, "1234".into(), None, b), Ok(("a".into(), 2)));
    }

    #[test]
    fn steered_messages_wait_for_a_running_turn_within_the_limit() {
        let mut t = TurnTable::new(10);
        assert_eq!(
            t.steer(0, "x".into(), None, &steer_max(2)),
            Err(Unsteered::NothingRuns)
        );
        t.admit(start("a"), Admission::default(), waiter(1));
        assert_eq!(
            t.steer(0, "x".into(), None, &steer_max(2)),
            Err(Unsteered::NothingRuns),
            "a is only queued"
        );
        t.start_next();
        assert_eq!(
            t.steer(0, "one".into(), None, &steer_max(2)),
            Ok(("a".into(), 1))
        );
        let two = t.steer(1, "two".into(), Some("m2".into()), &steer_max(2));
        assert_eq!(two, Ok(("a".into(), 2)));
        assert_eq!(
            t.steer(2, "three".into(), None, &steer_max(2)),
            Err(Unsteered::Full)
        );
        let r = t.running_mut("a").expect("a runs");
        let taken = r.take_steered(&[1, 7]);
        assert_eq!(taken.len(), 1);
        assert_eq!(
            (taken[0].text.as_str(), taken[0].message_id.as_deref()),
            ("two", Some("m2"))
        );
        assert_eq!(r.steer.len(), 1, "one still waits");
        assert!(r.take_steered(&[1]).is_empty(), "taken once");
        assert_eq!(
            t.steer(3, "four".into(), None, &steer_max(2)),
            Ok(("a".into(), 2))
        );
        t.cancel();
        assert_eq!(
            t.steer(4, "x".into(), None, &steer_max(2)),
            Err(Unsteered::NothingRuns)
        );
    }

    #[test]
    fn a_running_turn_keeps_what_the_history_keeps_of_it() {
        let mut t = TurnTable::new(10);
        t.admit(start("a"), Admission::default(), waiter(1));
        t.start_next();
        let r = t.running_mut("a").expect("a runs");
        assert!(r.streamed(Chunk::Message, "hello", 8));
        assert!(r.streamed(Chunk::Message, " world", 8));
        assert!(r.streamed(Chunk::Thought, "hm", 8));
        r.tool_called("t1", "read", &serde_json::json!({ "path": "a" }));
        r.tool_called("t2", "write", &serde_json::json!({}));
        r.tool_updated("t1", ToolStatus::Completed, Some(&"text".to_string()));
        r.tool_updated("t2", ToolStatus::Failed, None);
        r.tool_updated("t3", ToolStatus::Failed, None);
        let done = t.finish(Ok(StopReason::EndTurn)).expect("a ran");
        let HistoryTurn::Assistant {
            text,
            reasoning,
            tools,
        } = done.running.into_history(8)
        else {
            panic!("an answer is the assistant's");
        };
        assert!(text.starts_with("hello wo\n\n[3 more bytes"), "{text}");
        assert_eq!(reasoning, "hm");
        assert_eq!(tools.len(), 2, "t3 was never called");
        assert_eq!(
            (tools[0].output.as_deref(), tools[0].is_error),
            (Some("text"), None)
        );
        assert_eq!(
            (tools[1].output.as_deref(), tools[1].is_error),
            (None, Some(true))
        );
    }

    #[test]
    fn a_compactions_text_is_kept_unshown_and_its_reasoning_dropped() {
        let mut t = TurnTable::new(10);
        let admission = Admission {
            compact: Some(Compacting::Method),
            ..Admission::default()
        };
        t.admit(start("c"), admission, waiter(1));
        t.start_next();
        let r = t.running_mut("c").expect("c runs");
        assert!(!r.streamed(Chunk::Message, "summary", 100));
        assert!(!r.streamed(Chunk::Thought, "hm", 100));
        assert_eq!(r.text.text, "summary");
        assert!(r.reasoning.text.is_empty());
    }
}
