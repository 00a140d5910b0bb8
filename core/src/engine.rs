//! The engine boundary. What answers a prompt (the model loop) lives outside the core: the core
//! emits "start turn T of session S" with everything the turn is given, "cancel" and "steer";
//! the shell feeds back what the engine reports as [`EngineEvent`]s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Mode;
use crate::wire::{need, one_pass};

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub personalization: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
}

/// Everything a turn is given.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EngineEvent {
    Text(String),
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
    },
    /// The engine took in these steered messages (by the ids the core gave them).
    Steered {
        ids: Vec<u64>,
    },
    ModeChanged(Mode),
    /// The session's structured plan changed (`None`: cleared).
    Plan(Option<Value>),
    /// Ask a person: an approval, a question or a plan. Answered with `Effect::CardDecided`.
    Ask(Card),
    /// The turn ended.
    Done(StopReason),
    /// The turn failed (the model went away, say); the prompt is answered with this error.
    Failed(String),
}

/// A card the engine puts before a person; `tool_call_id` keys it.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub tool_call_id: String,
    pub ask: Ask,
}

#[derive(Clone, Debug, PartialEq)]
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

/// How a card was decided, as the engine is told.
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

#[derive(Clone, Debug, PartialEq, Eq)]
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

/// One answer per question, in order.
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuestionDecision {
    Answered(Vec<QuestionAnswer>),
    Dismissed { timed_out: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanDecision {
    Approve { mode: Mode },
    Revise { feedback: String },
    Dismissed { timed_out: bool },
}
