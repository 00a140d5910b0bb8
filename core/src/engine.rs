//! The engine boundary. What answers a prompt (the model loop) lives outside the device: the
//! device asks for a turn's start, cancel, steer and card decisions as [`EngineCommand`]s
//! (`device::Output::Engine`), and an [`Engine`] reports back [`EngineEvent`]s. The host loop
//! (`crate::host`) joins the two, so a shell never routes them by hand.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Mode;
use crate::engine_io::{FileDiff, IoCall, IoId, IoReply};
use crate::shape;
use crate::time::Time;
use crate::wire::{need, one_pass, only};

/// What the device asks of its engine. Each is answered, in time, by the engine's reports.
///
/// Its serde shape is the JS API's engine effects (`{"kind": "start_turn", "turn": {...}}`,
/// `cancel_turn`, `steer`, `card_decided`), which a JS `ScriptedEngine.handle` takes.
#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all_fields = "camelCase")]
pub enum EngineCommand {
    /// Run a turn; it reports events and ends with `Done` or `Failed`.
    #[serde(rename = "start_turn", serialize_with = "turn_member")]
    Start(Box<TurnStart>),
    /// Stop the running turn; the engine still reports `Done` (the prompt answers `cancelled`).
    #[serde(rename = "cancel_turn")]
    Cancel { session_id: String, turn_id: String },
    /// Give the running turn this message at its next step; the engine reports `Steered`.
    #[serde(rename = "steer")]
    Steer {
        session_id: String,
        turn_id: String,
        id: u64,
        text: String,
    },
    /// A card the engine put (`EngineEvent::Ask`) was decided.
    #[serde(rename = "card_decided")]
    Decide {
        session_id: String,
        turn_id: String,
        tool_call_id: String,
        decision: Decision,
    },
}

shape::member_fn!(turn_member, "turn", TurnStart);

/// One event an engine reports: the session and the turn it belongs to, and the event.
pub type Report = (String, String, EngineEvent);

/// What answers prompts, as the host loop (`crate::host`) drives it: it takes the device's
/// commands, reports events when polled, and keeps a timer of its own. Nothing here blocks or
/// reads a clock: time is an argument, as everywhere in the core.
///
/// An engine need not be pure. One that does its work on the shell's side (an HTTP stream read
/// by a task of the shell's, say) starts that work from `handle_command`, keeps what arrives in
/// a queue of its own, and hands it out from `poll_event_unless`. Whatever delivers the
/// arrival to that queue must also wake the shell's loop (in runtime-smol, an input on the
/// driver's channel, which carries the arrival itself); the shell then polls the host, which
/// polls the engine. The engine must stop reading a session's source while that session is
/// paused, so backpressure reaches the model, not memory.
pub trait Engine {
    /// Take one of the device's commands at `now`.
    fn handle_command(&mut self, command: EngineCommand, now: Time);

    /// The next event of a session that is not `paused` (a holder of it is not reading): a
    /// paused session's turn waits where it is, its events kept in order, while other
    /// sessions go on.
    #[must_use]
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report>;

    /// When the engine next has something to do without being told (a sleeping step wakes).
    #[must_use]
    fn poll_timeout(&self) -> Option<Time>;

    /// Time passed: what is due makes its events when polled. Early or repeated is harmless.
    fn handle_timeout(&mut self, now: Time);

    /// The next thing the shell must do for the engine (an HTTP request to the instance, a
    /// read of its body, a file read), or `None`. See [`crate::engine_io`].
    #[must_use]
    fn poll_io(&mut self) -> Option<IoCall>;

    /// A reply to one of the engine's [`IoCall`]s, as it arrived at `now`.
    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time);

    /// Stop every running turn (the shell is shutting down): each reports `Done(Cancelled)`.
    fn cancel_all(&mut self);

    /// Forget every turn without a word (the process died with them).
    fn forget_all(&mut self);

    /// Turns running now.
    fn running(&self) -> usize;
}

/// A boxed engine is an engine (a shell that picks its engine when it starts).
impl<E: Engine + ?Sized> Engine for Box<E> {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        (**self).handle_command(command, now)
    }
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        (**self).poll_event_unless(paused)
    }
    fn poll_timeout(&self) -> Option<Time> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now: Time) {
        (**self).handle_timeout(now)
    }
    fn poll_io(&mut self) -> Option<IoCall> {
        (**self).poll_io()
    }
    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        (**self).handle_io(id, reply, now)
    }
    fn cancel_all(&mut self) {
        (**self).cancel_all()
    }
    fn forget_all(&mut self) {
        (**self).forget_all()
    }
    fn running(&self) -> usize {
        (**self).running()
    }
}

/// Why a turn ended, as `session/prompt`'s `stopReason` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTurnRequests,
    MaxTokens,
    Cancelled,
}

/// What the client's `_meta.lembas` said about the chat (`Context`), kept per session and
/// replaced field by field by every prompt that carries a newer value. `None`: never said;
/// `Some(Value::Null)`: said `null` (for `personalization`, "the device's own").
///
/// Serde (a stored session's, a JS `TurnStart`'s): a member written `null` reads back as
/// `Some(Value::Null)`, so "said null" outlives a restart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_prompt: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub personalization: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub library: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub prototypes: Option<Value>,
}

impl Context {
    /// Nothing said at all (what a record written without a context reads as).
    pub fn is_empty(&self) -> bool {
        *self == Context::default()
    }

    /// The newer replaces the older, field by field.
    pub fn merge(&mut self, newer: &Context) {
        for (mine, theirs) in [
            (&mut self.system_prompt, &newer.system_prompt),
            (&mut self.personalization, &newer.personalization),
            (&mut self.library, &newer.library),
            (&mut self.prototypes, &newer.prototypes),
        ] {
            if theirs.is_some() {
                mine.clone_from(theirs);
            }
        }
    }
}

/// An attachment of a turn, written under the session's attachment directory beforehand
/// (`Effect::WriteAttachment`) and referred to by its file name there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// `<time>-<random>-<name>`: unique in the directory, so two uploads of one name stay two.
    pub file_name: String,
    /// The name the client gave (the uri's last segment).
    pub name: String,
    pub mime_type: String,
    pub size: u64,
    /// A text resource (attached like an `@file`), as opposed to an image or a binary blob.
    pub text: bool,
    /// An `@file#10-20` mention's lines: the text is those lines, numbered from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_line: Option<u64>,
}

/// The mime type of an `@dir/` mention's listing: a text shown as it is, not line-numbered.
pub const LISTING_MIME: &str = "inode/directory";

/// Everything a turn is given. Serde: camelCase (the `context` keeps the core's snake_case).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnStart {
    pub session_id: String,
    pub turn_id: String,
    /// Text blocks joined by a blank line, resource links as `(see <uri>)`.
    pub text: String,
    pub attachments: Vec<Attachment>,
    pub context: Context,
    pub mode: Mode,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub cwd: String,
    /// Where the turn's tools may act besides its project: the device's `remote.roots` for a
    /// session under the limits (one opened from the link), none for one that is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// The session's finished turns, oldest first, as the model is to see them again. An
    /// engine keeps what fits its context budget, dropping the oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<PriorTurn>,
    /// What the session's earlier turns were folded into by `/compact`: the model is given it
    /// before `history` (the turns since), in place of the turns it summarizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// A compaction, not a prompt: answer with a summary of `summary` and `history` (the text
    /// says how), using no tools. What the engine says is the summary; nothing else of it is
    /// shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compact: bool,
}

#[cfg(any(test, feature = "testing"))]
impl TurnStart {
    /// A bare start for tests: turn `turn` of session `s` in `/w`, saying `text`, in mode edit,
    /// nothing else given.
    pub fn testing(turn: &str, text: &str) -> TurnStart {
        TurnStart {
            session_id: "s".into(),
            turn_id: turn.into(),
            text: text.into(),
            attachments: Vec::new(),
            context: Default::default(),
            mode: Mode::Edit,
            model: None,
            effort: None,
            cwd: "/w".into(),
            roots: Vec::new(),
            history: Vec::new(),
            summary: None,
            compact: false,
        }
    }
}

/// One finished turn of a session: what the person asked and what the model answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorTurn {
    pub prompt: String,
    pub answer: String,
}

/// A tool call's status, as ACP's `tool_call_update` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// What an engine reports about the turn it runs.
///
/// Serde: the JS API's `EngineEvent`, tagged by `type` (`{"type": "text", "text": "hi"}`,
/// `{"type": "done", "stopReason": "end_turn"}`, a card's fields beside `"type": "ask"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum EngineEvent {
    #[serde(serialize_with = "text_member")]
    Text(String),
    #[serde(serialize_with = "text_member")]
    Thought(String),
    ToolCall {
        id: String,
        title: String,
        kind: String,
        raw_input: Value,
    },
    ToolCallUpdate {
        id: String,
        status: ToolStatus,
        output: Option<String>,
        /// The file the call changed, shown as ACP `diff` content.
        #[serde(skip_serializing_if = "Option::is_none")]
        diff: Option<FileDiff>,
    },
    /// The engine took in these steered messages (by the ids the core gave them).
    Steered { ids: Vec<u64> },
    #[serde(serialize_with = "mode_member")]
    ModeChanged(Mode),
    /// The session's structured plan changed (`None`: cleared).
    #[serde(serialize_with = "plan_member")]
    Plan(Option<Value>),
    /// Ask a person: an approval, a question or a plan. Answered with `EngineCommand::Decide`.
    Ask(Card),
    /// A model call began (the `n`th of the turn, from 1): the `step` event.
    #[serde(serialize_with = "step_member")]
    Step(u32),
    /// Tokens the model call counted: the `usage` event.
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// Something the person should know (context dropped, an attachment cut): the `notice`
    /// event.
    #[serde(serialize_with = "text_member")]
    Notice(String),
    /// The turn ended.
    #[serde(serialize_with = "stop_reason_member")]
    Done(StopReason),
    /// The turn failed (the model went away, say); the prompt is answered with this error.
    #[serde(serialize_with = "message_member")]
    Failed(String),
}

shape::member_fn!(text_member, "text", String);
shape::member_fn!(mode_member, "mode", Mode);
shape::member_fn!(step_member, "step", u32);
shape::member_fn!(plan_member, "plan", Option<Value>);
shape::member_fn!(stop_reason_member, "stopReason", StopReason);
shape::member_fn!(message_member, "message", String);
shape::member_fn!(reason_member, "reason", String);
shape::member_fn!(answers_member, "answers", Vec<QuestionAnswer>);

/// An engine event as it arrives, read in one pass (see [`crate::shape`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventFields {
    #[serde(rename = "type")]
    tag: EventTag,
    text: Option<String>,
    id: Option<String>,
    title: Option<String>,
    kind: Option<String>,
    #[serde(default, deserialize_with = "present")]
    raw_input: Option<Value>,
    status: Option<ToolStatus>,
    output: Option<String>,
    diff: Option<FileDiff>,
    ids: Option<Vec<u64>>,
    mode: Option<Mode>,
    plan: Option<Value>,
    tool_call_id: Option<String>,
    ask: Option<Ask>,
    stop_reason: Option<StopReason>,
    message: Option<String>,
    step: Option<u32>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum EventTag {
    Text,
    Thought,
    ToolCall,
    ToolCallUpdate,
    Steered,
    ModeChanged,
    Plan,
    Ask,
    Step,
    Usage,
    Notice,
    Done,
    Failed,
}

impl EventFields {
    fn given(&self) -> [(&'static str, bool); 18] {
        [
            ("text", self.text.is_some()),
            ("id", self.id.is_some()),
            ("title", self.title.is_some()),
            ("kind", self.kind.is_some()),
            ("rawInput", self.raw_input.is_some()),
            ("status", self.status.is_some()),
            ("output", self.output.is_some()),
            ("diff", self.diff.is_some()),
            ("ids", self.ids.is_some()),
            ("mode", self.mode.is_some()),
            ("plan", self.plan.is_some()),
            ("toolCallId", self.tool_call_id.is_some()),
            ("ask", self.ask.is_some()),
            ("stopReason", self.stop_reason.is_some()),
            ("message", self.message.is_some()),
            ("step", self.step.is_some()),
            ("inputTokens", self.input_tokens.is_some()),
            ("outputTokens", self.output_tokens.is_some()),
        ]
    }
}

/// A member given as `null` is still given (`rawInput: null`), unlike one left out.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for EngineEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "an engine event", |f: EventFields| {
            let takes: &[&str] = match f.tag {
                EventTag::Text | EventTag::Thought | EventTag::Notice => &["text"],
                EventTag::ToolCall => &["id", "title", "kind", "rawInput"],
                EventTag::ToolCallUpdate => &["id", "status", "output", "diff"],
                EventTag::Steered => &["ids"],
                EventTag::ModeChanged => &["mode"],
                EventTag::Plan => &["plan"],
                EventTag::Ask => &["toolCallId", "ask"],
                EventTag::Step => &["step"],
                EventTag::Usage => &["inputTokens", "outputTokens"],
                EventTag::Done => &["stopReason"],
                EventTag::Failed => &["message"],
            };
            only(&f.given(), takes)?;
            Ok(match f.tag {
                EventTag::Text => EngineEvent::Text(need(f.text, "text")?),
                EventTag::Thought => EngineEvent::Thought(need(f.text, "text")?),
                EventTag::ToolCall => EngineEvent::ToolCall {
                    id: need(f.id, "id")?,
                    title: need(f.title, "title")?,
                    kind: need(f.kind, "kind")?,
                    raw_input: need(f.raw_input, "rawInput")?,
                },
                EventTag::ToolCallUpdate => EngineEvent::ToolCallUpdate {
                    id: need(f.id, "id")?,
                    status: need(f.status, "status")?,
                    output: f.output,
                    diff: f.diff,
                },
                EventTag::Steered => EngineEvent::Steered {
                    ids: need(f.ids, "ids")?,
                },
                EventTag::ModeChanged => EngineEvent::ModeChanged(need(f.mode, "mode")?),
                EventTag::Plan => EngineEvent::Plan(f.plan),
                EventTag::Ask => EngineEvent::Ask(Card {
                    tool_call_id: need(f.tool_call_id, "toolCallId")?,
                    ask: need(f.ask, "ask")?,
                }),
                EventTag::Step => EngineEvent::Step(need(f.step, "step")?),
                EventTag::Usage => EngineEvent::Usage {
                    input_tokens: need(f.input_tokens, "inputTokens")?,
                    output_tokens: need(f.output_tokens, "outputTokens")?,
                },
                EventTag::Notice => EngineEvent::Notice(need(f.text, "text")?),
                EventTag::Done => EngineEvent::Done(need(f.stop_reason, "stopReason")?),
                EventTag::Failed => EngineEvent::Failed(need(f.message, "message")?),
            })
        })
    }
}

/// A card the engine puts before a person; `tool_call_id` keys it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Card {
    pub tool_call_id: String,
    pub ask: Ask,
}

/// Serde: tagged by `type` (`{"type": "permission", "title": ..., "rawInput": ...}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Ask {
    /// `session/request_permission`.
    Permission {
        title: String,
        kind: String,
        raw_input: Value,
        /// Whether "allow always" (`session`) is offered.
        always_offered: bool,
        reason: String,
        purpose: Option<String>,
    },
    /// `_lembas/question` (capability `ask`).
    Question {
        why: Option<String>,
        questions: Vec<Question>,
    },
    /// `_lembas/plan` (capability `plan`).
    Plan {
        path: String,
        text: String,
        plan: Option<Value>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub header: String,
    pub question: String,
    #[serde(default)]
    pub multiple: bool,
    pub options: Vec<QuestionOption>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recommended: bool,
}

/// An ask as it arrives, read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AskFields {
    #[serde(rename = "type")]
    tag: AskTag,
    title: Option<String>,
    kind: Option<String>,
    #[serde(default, deserialize_with = "present")]
    raw_input: Option<Value>,
    always_offered: Option<bool>,
    reason: Option<String>,
    purpose: Option<String>,
    why: Option<String>,
    questions: Option<Vec<Question>>,
    path: Option<String>,
    text: Option<String>,
    plan: Option<Value>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AskTag {
    Permission,
    Question,
    Plan,
}

impl<'de> Deserialize<'de> for Ask {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "an ask", |f: AskFields| {
            let takes: &[&str] = match f.tag {
                AskTag::Permission => &[
                    "title",
                    "kind",
                    "rawInput",
                    "alwaysOffered",
                    "reason",
                    "purpose",
                ],
                AskTag::Question => &["why", "questions"],
                AskTag::Plan => &["path", "text", "plan"],
            };
            let given = [
                ("title", f.title.is_some()),
                ("kind", f.kind.is_some()),
                ("rawInput", f.raw_input.is_some()),
                ("alwaysOffered", f.always_offered.is_some()),
                ("reason", f.reason.is_some()),
                ("purpose", f.purpose.is_some()),
                ("why", f.why.is_some()),
                ("questions", f.questions.is_some()),
                ("path", f.path.is_some()),
                ("text", f.text.is_some()),
                ("plan", f.plan.is_some()),
            ];
            only(&given, takes)?;
            Ok(match f.tag {
                AskTag::Permission => Ask::Permission {
                    title: need(f.title, "title")?,
                    kind: need(f.kind, "kind")?,
                    raw_input: need(f.raw_input, "rawInput")?,
                    always_offered: need(f.always_offered, "alwaysOffered")?,
                    reason: need(f.reason, "reason")?,
                    purpose: f.purpose,
                },
                AskTag::Question => Ask::Question {
                    why: f.why,
                    questions: need(f.questions, "questions")?,
                },
                AskTag::Plan => Ask::Plan {
                    path: need(f.path, "path")?,
                    text: need(f.text, "text")?,
                    plan: f.plan,
                },
            })
        })
    }
}

/// How a card was decided, as the engine is told.
///
/// Serde: one flat shape tagged by `type`, the kind of card implied (`{"type": "deny",
/// "feedback": "no", "timedOut": false}`, `{"type": "question_dismissed", ...}`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Decision {
    Permission(PermissionDecision),
    Question(QuestionDecision),
    Plan(PlanDecision),
    /// The card could not be put to anyone (no client that can answer it); for a plan, it was
    /// saved and the turn should stop.
    NobodyToAsk,
    /// The engine's card broke a bound (too many questions, say); the sentence says which.
    Refused(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum PermissionDecision {
    AllowOnce {
        command: Option<String>,
    },
    AllowAlways,
    /// Denied by a person (with why), or by nobody answering in time.
    Deny {
        feedback: Option<String>,
        timed_out: bool,
    },
}

/// One answer per question, in order (as a client sends it too: `wire::card`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QuestionAnswer {
    /// The whole labels of the options chosen (never the cut ones shown on the card).
    Options {
        labels: Vec<String>,
    },
    Custom {
        text: String,
    },
    /// A question of the person's own, which the model answers before asking again.
    Back {
        text: String,
    },
    Skipped,
}

/// An answer as it arrives, read in one pass: an internally tagged enum would buffer it first
/// and build a second decoder per variant.
#[derive(Deserialize)]
struct AnswerFields {
    kind: AnswerKind,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AnswerKind {
    Options,
    Custom,
    Back,
    Skipped,
}

impl<'de> Deserialize<'de> for QuestionAnswer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a question answer", |f: AnswerFields| {
            Ok(match f.kind {
                AnswerKind::Options => QuestionAnswer::Options {
                    labels: need(f.labels, "labels")?,
                },
                AnswerKind::Custom => QuestionAnswer::Custom {
                    text: need(f.text, "text")?,
                },
                AnswerKind::Back => QuestionAnswer::Back {
                    text: need(f.text, "text")?,
                },
                AnswerKind::Skipped => QuestionAnswer::Skipped,
            })
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum QuestionDecision {
    #[serde(serialize_with = "answers_member")]
    Answered(Vec<QuestionAnswer>),
    #[serde(rename = "question_dismissed")]
    Dismissed { timed_out: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PlanDecision {
    Approve {
        mode: Mode,
    },
    Revise {
        feedback: String,
    },
    #[serde(rename = "plan_dismissed")]
    Dismissed {
        timed_out: bool,
    },
}

/// The two decisions that are not a kind of card's, as they are written.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum NoCard<'a> {
    NobodyToAsk,
    #[serde(serialize_with = "reason_member")]
    Refused(&'a String),
}

impl Serialize for Decision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Decision::Permission(p) => p.serialize(s),
            Decision::Question(q) => q.serialize(s),
            Decision::Plan(p) => p.serialize(s),
            Decision::NobodyToAsk => NoCard::NobodyToAsk.serialize(s),
            Decision::Refused(reason) => NoCard::Refused(reason).serialize(s),
        }
    }
}

/// A decision as it arrives, read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DecisionFields {
    #[serde(rename = "type")]
    tag: DecisionTag,
    command: Option<String>,
    feedback: Option<String>,
    timed_out: Option<bool>,
    answers: Option<Vec<QuestionAnswer>>,
    mode: Option<Mode>,
    reason: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum DecisionTag {
    AllowOnce,
    AllowAlways,
    Deny,
    Answered,
    QuestionDismissed,
    Approve,
    Revise,
    PlanDismissed,
    NobodyToAsk,
    Refused,
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a decision", |f: DecisionFields| {
            let takes: &[&str] = match f.tag {
                DecisionTag::AllowOnce => &["command"],
                DecisionTag::Deny => &["feedback", "timedOut"],
                DecisionTag::Answered => &["answers"],
                DecisionTag::QuestionDismissed | DecisionTag::PlanDismissed => &["timedOut"],
                DecisionTag::Approve => &["mode"],
                DecisionTag::Revise => &["feedback"],
                DecisionTag::Refused => &["reason"],
                DecisionTag::AllowAlways | DecisionTag::NobodyToAsk => &[],
            };
            let given = [
                ("command", f.command.is_some()),
                ("feedback", f.feedback.is_some()),
                ("timedOut", f.timed_out.is_some()),
                ("answers", f.answers.is_some()),
                ("mode", f.mode.is_some()),
                ("reason", f.reason.is_some()),
            ];
            only(&given, takes)?;
            let timed_out = f.timed_out.unwrap_or(false);
            Ok(match f.tag {
                DecisionTag::AllowOnce => {
                    Decision::Permission(PermissionDecision::AllowOnce { command: f.command })
                }
                DecisionTag::AllowAlways => Decision::Permission(PermissionDecision::AllowAlways),
                DecisionTag::Deny => Decision::Permission(PermissionDecision::Deny {
                    feedback: f.feedback,
                    timed_out,
                }),
                DecisionTag::Answered => {
                    Decision::Question(QuestionDecision::Answered(need(f.answers, "answers")?))
                }
                DecisionTag::QuestionDismissed => {
                    Decision::Question(QuestionDecision::Dismissed { timed_out })
                }
                DecisionTag::Approve => Decision::Plan(PlanDecision::Approve {
                    mode: need(f.mode, "mode")?,
                }),
                DecisionTag::Revise => Decision::Plan(PlanDecision::Revise {
                    feedback: need(f.feedback, "feedback")?,
                }),
                DecisionTag::PlanDismissed => Decision::Plan(PlanDecision::Dismissed { timed_out }),
                DecisionTag::NobodyToAsk => Decision::NobodyToAsk,
                DecisionTag::Refused => Decision::Refused(need(f.reason, "reason")?),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_member_of_another_variant_is_refused_by_name() {
        let e = serde_json::from_value::<EngineEvent>(
            json!({ "type": "text", "text": "hi", "stopReason": "end_turn" }),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown field `stopReason` for this kind of engine event"
        );
        let e = serde_json::from_value::<EngineEvent>(json!({
            "type": "ask", "toolCallId": "c1",
            "ask": { "type": "question", "questions": [], "title": "x" },
        }))
        .unwrap_err();
        assert_eq!(e.to_string(), "unknown field `title` for this kind of ask");
        let e =
            serde_json::from_value::<Decision>(json!({ "type": "allow_always", "feedback": "no" }))
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown field `feedback` for this kind of decision"
        );
        // What a variant takes is still read, and what it may leave out defaults.
        let d: Decision = serde_json::from_value(json!({ "type": "plan_dismissed" })).unwrap();
        assert_eq!(
            d,
            Decision::Plan(PlanDecision::Dismissed { timed_out: false })
        );
    }

    #[test]
    fn a_context_member_said_null_stays_said_through_serde() {
        let said = Context {
            personalization: Some(Value::Null),
            ..Context::default()
        };
        let text = serde_json::to_string(&said).unwrap();
        assert_eq!(text, r#"{"personalization":null}"#);
        assert_eq!(serde_json::from_str::<Context>(&text).unwrap(), said);
        let never: Context = serde_json::from_value(json!({})).unwrap();
        assert_eq!(never.personalization, None);
    }
}
