//! `_lembas/event`: `{ sessionId, event }`, the engine events of a session, to a client that said
//! `_meta.lembas`. The spec lists more event types than the device sends; these are the ones it
//! sends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Mode;
use crate::engine::StopReason;
use crate::wire::session::AttachmentMeta;

/// `_lembas/event` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventParams {
    /// The session's event sequence number (our extension).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<super::seq::SeqMeta>,
    pub event: LembasEvent,
    pub session_id: String,
}

/// One event, by its `type`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LembasEvent {
    /// A turn's prompt, as the person sees it.
    Prompt(PromptEvent),
    /// A turn began or ended.
    Task(TaskEvent),
    /// A chunk of the answer's text.
    Text(TextEvent),
    /// A chunk of reasoning.
    Reasoning(TextEvent),
    /// A tool call began.
    ToolStart(ToolStartEvent),
    /// A tool call finished.
    ToolEnd(ToolEndEvent),
    /// `_lembas/steer` messages taken in at this step.
    Steered(SteeredEvent),
    /// The session's mode changed.
    Mode(ModeEvent),
    /// The session's model or effort changed.
    Model(ModelEvent),
    /// The session's title changed.
    Title(TitleEvent),
    /// The session's plan changed (`plan: null`: cleared).
    Plan(PlanEvent),
    /// The session's earlier turns were folded into this summary (`/compact`).
    Compacted(CompactedEvent),
    /// A model call began.
    Step(StepEvent),
    /// Tokens a model call counted.
    Usage(UsageEvent),
    /// Something the person should know (what was cut, and by which bound).
    Notice(NoticeEvent),
    /// The turn ended, and why.
    Done(DoneEvent),
    /// The turn failed, with the reason (its prompt is answered with the error).
    Error(ErrorEvent),
}

impl LembasEvent {
    /// The `task` event of turn `turn_id` in `state`: a turn's first event and its last.
    pub fn task(state: TaskState, turn_id: String) -> LembasEvent {
        LembasEvent::Task(TaskEvent { state, turn_id })
    }

    /// Its `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            LembasEvent::Prompt(_) => "prompt",
            LembasEvent::Task(_) => "task",
            LembasEvent::Text(_) => "text",
            LembasEvent::Reasoning(_) => "reasoning",
            LembasEvent::ToolStart(_) => "tool_start",
            LembasEvent::ToolEnd(_) => "tool_end",
            LembasEvent::Steered(_) => "steered",
            LembasEvent::Mode(_) => "mode",
            LembasEvent::Model(_) => "model",
            LembasEvent::Title(_) => "title",
            LembasEvent::Plan(_) => "plan",
            LembasEvent::Compacted(_) => "compacted",
            LembasEvent::Step(_) => "step",
            LembasEvent::Usage(_) => "usage",
            LembasEvent::Notice(_) => "notice",
            LembasEvent::Done(_) => "done",
            LembasEvent::Error(_) => "error",
        }
    }
}

/// The fields, then `type`: every event's own keys sort before `type`, and the device wrote
/// them sorted (a derived internally tagged enum would write `type` first).
impl Serialize for LembasEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match self {
            LembasEvent::Prompt(b) => type_last(b, kind, s),
            LembasEvent::Task(b) => type_last(b, kind, s),
            LembasEvent::Text(b) | LembasEvent::Reasoning(b) => type_last(b, kind, s),
            LembasEvent::ToolStart(b) => type_last(b, kind, s),
            LembasEvent::ToolEnd(b) => type_last(b, kind, s),
            LembasEvent::Steered(b) => type_last(b, kind, s),
            LembasEvent::Mode(b) => type_last(b, kind, s),
            LembasEvent::Model(b) => type_last(b, kind, s),
            LembasEvent::Title(b) => type_last(b, kind, s),
            LembasEvent::Plan(b) => type_last(b, kind, s),
            LembasEvent::Compacted(b) => type_last(b, kind, s),
            LembasEvent::Step(b) => type_last(b, kind, s),
            LembasEvent::Usage(b) => type_last(b, kind, s),
            LembasEvent::Notice(b) => type_last(b, kind, s),
            LembasEvent::Done(b) => type_last(b, kind, s),
            LembasEvent::Error(b) => type_last(b, kind, s),
        }
    }
}

/// An event's own fields, then its `type`.
fn type_last<S: serde::Serializer, B: Serialize>(
    body: &B,
    kind: &'static str,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct TypeLast<'a, B> {
        #[serde(flatten)]
        body: &'a B,
        r#type: &'static str,
    }
    TypeLast { body, r#type: kind }.serialize(s)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptEvent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentMeta>,
    pub text: String,
    pub turn_id: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Start,
    End,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEvent {
    pub state: TaskState,
    pub turn_id: String,
}

/// `text` and `reasoning`: a chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextEvent {
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolStartEvent {
    pub args: Value,
    pub id: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEndEvent {
    pub id: String,
    pub is_error: bool,
    pub output: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteeredEvent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    pub texts: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeEvent {
    pub mode: Mode,
}

/// `model`: the session's model as the device names it (`ref`, its served id for an instance
/// model), its effort (a level or `"off"`), the device connection it is spoken to through, and
/// whether that is this link's instance. Fields in the order they sort.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelEvent {
    pub connection: Option<String>,
    pub effort: Option<String>,
    pub instance: bool,
    pub r#ref: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TitleEvent {
    pub id: String,
    pub title: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanEvent {
    pub plan: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactedEvent {
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepEvent {
    /// The model call's number in its turn, from 1.
    pub step: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageEvent {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoticeEvent {
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DoneEvent {
    pub stop_reason: StopReason,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub message: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// Every event, with every optional field given.
    pub(crate) fn every_event() -> Vec<LembasEvent> {
        let s = String::from;
        vec![
            LembasEvent::Prompt(PromptEvent {
                attachments: vec![AttachmentMeta {
                    name: s("a.png"),
                    mime_type: s("image/png"),
                    size: 4,
                }],
                text: s("hi \"you\""),
                turn_id: s("t1"),
            }),
            LembasEvent::Prompt(PromptEvent {
                attachments: vec![],
                text: s("hi"),
                turn_id: s("t1"),
            }),
            LembasEvent::Task(TaskEvent {
                state: TaskState::Start,
                turn_id: s("t1"),
            }),
            LembasEvent::Task(TaskEvent {
                state: TaskState::End,
                turn_id: s("t1"),
            }),
            LembasEvent::Text(TextEvent { text: s("a\nb") }),
            LembasEvent::Reasoning(TextEvent { text: s("hm") }),
            LembasEvent::ToolStart(ToolStartEvent {
                args: serde_json::json!({ "path": "a", "command": "ls" }),
                id: s("call_1"),
                name: s("bash"),
            }),
            LembasEvent::ToolEnd(ToolEndEvent {
                id: s("call_1"),
                is_error: false,
                output: None,
            }),
            LembasEvent::ToolEnd(ToolEndEvent {
                id: s("call_1"),
                is_error: true,
                output: Some(s("no")),
            }),
            LembasEvent::Steered(SteeredEvent {
                ids: vec![s("m1")],
                texts: vec![s("also this")],
            }),
            LembasEvent::Steered(SteeredEvent {
                ids: vec![],
                texts: vec![s("also this")],
            }),
            LembasEvent::Mode(ModeEvent { mode: Mode::Edit }),
            LembasEvent::Model(ModelEvent {
                connection: Some(s("home")),
                effort: Some(s("high")),
                instance: true,
                r#ref: Some(s("deepseek/flash")),
            }),
            LembasEvent::Model(ModelEvent {
                connection: None,
                effort: None,
                instance: false,
                r#ref: None,
            }),
            LembasEvent::Title(TitleEvent {
                id: s("ses_1"),
                title: s("Fix it"),
            }),
            LembasEvent::Plan(PlanEvent {
                plan: Some(serde_json::json!({ "title": "p", "phases": [] })),
            }),
            LembasEvent::Plan(PlanEvent { plan: None }),
            LembasEvent::Compacted(CompactedEvent {
                summary: s("we fixed the parser"),
            }),
            LembasEvent::Step(StepEvent { step: 2 }),
            LembasEvent::Usage(UsageEvent {
                input_tokens: 12,
                output_tokens: 3,
            }),
            LembasEvent::Notice(NoticeEvent {
                text: s("2 earlier turns were left out"),
            }),
            LembasEvent::Done(DoneEvent {
                stop_reason: StopReason::MaxTokens,
            }),
            LembasEvent::Error(ErrorEvent {
                message: s("the model went away"),
            }),
        ]
    }

    /// The typed encoding writes what encoding the same message as a `Value` (sorted keys, the
    /// device's encoding before these types) writes, and reads back as itself.
    #[test]
    fn events_encode_as_their_value_did_and_decode_to_themselves() {
        for (i, event) in every_event().into_iter().enumerate() {
            let params = EventParams {
                meta: (i % 2 == 0).then(|| super::super::seq::SeqMeta::new(i as u64 + 1)),
                event,
                session_id: "ses_1".into(),
            };
            let typed = serde_json::to_string(&params).unwrap();
            let as_value = serde_json::to_value(&params).unwrap().to_string();
            assert_eq!(typed, as_value);
            let back: EventParams = serde_json::from_str(&typed).unwrap();
            assert_eq!(back, params);
            let v = serde_json::from_str::<Value>(&typed).unwrap();
            assert_eq!(v["event"]["type"], params.event.kind());
            if let LembasEvent::Model(m) = &params.event {
                // The spec's key, not the Rust name.
                assert_eq!(v["event"]["ref"], json!(m.r#ref), "{typed}");
            }
        }
    }
}
