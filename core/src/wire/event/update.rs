//! `session/update`: `{ sessionId, update }`, ACP's stream of a session, to every holder that
//! finished `initialize`.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::lembas::PlanEvent;
use crate::config::Mode;
use crate::engine::ToolStatus;

/// `session/update` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateParams {
    /// The session's event sequence number (our extension; absent from a client's view of
    /// an older device).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<super::seq::SeqMeta>,
    pub session_id: String,
    pub update: SessionUpdate,
}

/// One update, by its `sessionUpdate`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// A chunk of what the person said: only in a history replayed by `session/load`, to an
    /// editor.
    UserMessageChunk(ContentChunk),
    /// A chunk of the answer's text.
    AgentMessageChunk(ContentChunk),
    /// A chunk of reasoning.
    AgentThoughtChunk(ContentChunk),
    /// A tool call began.
    ToolCall(ToolCall),
    /// A tool call's status changed, with its output once it has one.
    ToolCallUpdate(ToolCallUpdate),
    /// The session's mode changed.
    CurrentModeUpdate(CurrentModeUpdate),
    /// The session's plan (capability `plan_state`).
    Plan(PlanUpdate),
    /// The session's title or time of last activity changed (ACP v1's `session_info_update`;
    /// to an editor's connection only).
    SessionInfoUpdate(SessionInfo),
    /// The session's command set (capability `commands`).
    AvailableCommandsUpdate(AvailableCommands),
}

/// `available_commands_update`'s field: each command `{ name, description, input?: { hint },
/// _meta: { lembas: { kind } } }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCommands {
    pub available_commands: Vec<Value>,
}

/// `session_info_update`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub title: Option<String>,
    pub updated_at: Option<String>,
}

impl SessionUpdate {
    /// Its `sessionUpdate`.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionUpdate::UserMessageChunk(_) => "user_message_chunk",
            SessionUpdate::AgentMessageChunk(_) => "agent_message_chunk",
            SessionUpdate::AgentThoughtChunk(_) => "agent_thought_chunk",
            SessionUpdate::ToolCall(_) => "tool_call",
            SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
            SessionUpdate::CurrentModeUpdate(_) => "current_mode_update",
            SessionUpdate::Plan(_) => "plan",
            SessionUpdate::SessionInfoUpdate(_) => "session_info_update",
            SessionUpdate::AvailableCommandsUpdate(_) => "available_commands_update",
        }
    }
}

impl SessionUpdate {
    /// The text of an answer's chunk (`agent_message_chunk`); `None` for any other update.
    pub fn message_text(&self) -> Option<&str> {
        match self {
            SessionUpdate::AgentMessageChunk(c) => Some(&c.content.text),
            _ => None,
        }
    }

    /// The text of a chunk, of the answer or of reasoning; `None` for any other update.
    pub fn chunk_text(&self) -> Option<&str> {
        match self {
            SessionUpdate::AgentMessageChunk(c) | SessionUpdate::AgentThoughtChunk(c) => {
                Some(&c.content.text)
            }
            _ => None,
        }
    }
}

/// Each variant's fields with `sessionUpdate` where it sorts among them: the device wrote these
/// as `Value` maps, whose keys sort, and the bytes stay what they were (a derived internally
/// tagged enum would write the tag first).
impl Serialize for SessionUpdate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let session_update = self.kind();
        match self {
            SessionUpdate::UserMessageChunk(c)
            | SessionUpdate::AgentMessageChunk(c)
            | SessionUpdate::AgentThoughtChunk(c) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    content: &'a TextContent,
                    session_update: &'static str,
                }
                View {
                    content: &c.content,
                    session_update,
                }
                .serialize(s)
            }
            SessionUpdate::ToolCall(t) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    kind: &'a str,
                    raw_input: &'a Value,
                    session_update: &'static str,
                    status: ToolStatus,
                    title: &'a str,
                    tool_call_id: &'a str,
                }
                View {
                    kind: &t.kind,
                    raw_input: &t.raw_input,
                    session_update,
                    status: t.status,
                    title: &t.title,
                    tool_call_id: &t.tool_call_id,
                }
                .serialize(s)
            }
            SessionUpdate::ToolCallUpdate(u) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    #[serde(skip_serializing_if = "<[_]>::is_empty")]
                    content: &'a [ToolCallContent],
                    session_update: &'static str,
                    status: ToolStatus,
                    tool_call_id: &'a str,
                }
                View {
                    content: &u.content,
                    session_update,
                    status: u.status,
                    tool_call_id: &u.tool_call_id,
                }
                .serialize(s)
            }
            SessionUpdate::CurrentModeUpdate(m) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View {
                    current_mode_id: Mode,
                    session_update: &'static str,
                }
                View {
                    current_mode_id: m.current_mode_id,
                    session_update,
                }
                .serialize(s)
            }
            SessionUpdate::Plan(p) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    #[serde(rename = "_meta")]
                    meta: &'a PlanMeta,
                    entries: &'a [PlanEntry],
                    session_update: &'static str,
                }
                View {
                    meta: &p.meta,
                    entries: &p.entries,
                    session_update,
                }
                .serialize(s)
            }
            SessionUpdate::SessionInfoUpdate(i) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    session_update: &'static str,
                    title: &'a Option<String>,
                    updated_at: &'a Option<String>,
                }
                View {
                    session_update,
                    title: &i.title,
                    updated_at: &i.updated_at,
                }
                .serialize(s)
            }
            SessionUpdate::AvailableCommandsUpdate(a) => {
                #[derive(Serialize)]
                #[serde(rename_all = "camelCase")]
                struct View<'a> {
                    available_commands: &'a [Value],
                    session_update: &'static str,
                }
                View {
                    available_commands: &a.available_commands,
                    session_update,
                }
                .serialize(s)
            }
        }
    }
}

/// A chunk: its text.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ContentChunk {
    pub content: TextContent,
}

/// ACP's text content block, `{ text, type: "text" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    pub text: String,
    #[serde(rename = "type")]
    pub kind: TextKind,
}

impl TextContent {
    pub fn new(text: impl Into<String>) -> TextContent {
        TextContent {
            text: text.into(),
            kind: TextKind::Text,
        }
    }
}

/// The one `type` a [`TextContent`] has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextKind {
    Text,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub kind: String,
    pub raw_input: Value,
    /// `pending`: the device announces a call as it begins.
    pub status: ToolStatus,
    pub title: String,
    pub tool_call_id: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call's output, once it has one (absent before).
    #[serde(default)]
    pub content: Vec<ToolCallContent>,
    pub status: ToolStatus,
    pub tool_call_id: String,
}

/// ACP's tool call content: `{ type: "content", content: TextContent }`, or a file's change,
/// `{ type: "diff", path, oldText, newText }` (`oldText` null for a new file).
///
/// Serialized by hand so its keys come sorted, as every other frame's do.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ToolCallContent {
    Content {
        content: TextContent,
    },
    Diff {
        path: String,
        old_text: Option<String>,
        new_text: String,
    },
}

impl Serialize for ToolCallContent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged, rename_all_fields = "camelCase")]
        enum View<'a> {
            Content {
                content: &'a TextContent,
                #[serde(rename = "type")]
                kind: &'static str,
            },
            Diff {
                new_text: &'a str,
                old_text: &'a Option<String>,
                path: &'a str,
                #[serde(rename = "type")]
                kind: &'static str,
            },
        }
        match self {
            ToolCallContent::Content { content } => View::Content {
                content,
                kind: "content",
            },
            ToolCallContent::Diff {
                path,
                old_text,
                new_text,
            } => View::Diff {
                new_text,
                old_text,
                path,
                kind: "diff",
            },
        }
        .serialize(s)
    }
}

impl ToolCallContent {
    /// The output `text` of a call.
    pub fn text(text: impl Into<String>) -> ToolCallContent {
        ToolCallContent::Content {
            content: TextContent::new(text),
        }
    }

    /// A file the call changed.
    pub fn diff(diff: crate::engine_io::FileDiff) -> ToolCallContent {
        ToolCallContent::Diff {
            path: diff.path,
            old_text: diff.old_text,
            new_text: diff.new_text,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentModeUpdate {
    pub current_mode_id: Mode,
}

/// `plan`: ACP's flat `entries` and the structure in `_meta.lembas.plan` (`null`: cleared).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PlanUpdate {
    #[serde(rename = "_meta")]
    pub meta: PlanMeta,
    pub entries: Vec<PlanEntry>,
}

/// `_meta` of a plan update: `{ lembas: { plan } }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanMeta {
    pub lembas: PlanEvent,
}

/// One task of a plan, as an editor lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub content: String,
    /// Always `medium`: the plan has no priorities.
    pub priority: String,
    pub status: PlanEntryStatus,
}

/// ACP's task states (a dropped task is `completed` there, ACP having no word for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    Pending,
    InProgress,
    Completed,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// Every update, with and without its optional parts.
    pub(crate) fn every_update() -> Vec<SessionUpdate> {
        let s = String::from;
        vec![
            SessionUpdate::AgentMessageChunk(ContentChunk {
                content: TextContent::new("a \"b\"\n"),
            }),
            SessionUpdate::AgentThoughtChunk(ContentChunk {
                content: TextContent::new("hm"),
            }),
            SessionUpdate::ToolCall(ToolCall {
                kind: s("execute"),
                raw_input: json!({ "command": "ls", "cwd": "." }),
                status: ToolStatus::Pending,
                title: s("ls"),
                tool_call_id: s("call_1"),
            }),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                content: vec![],
                status: ToolStatus::InProgress,
                tool_call_id: s("call_1"),
            }),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                content: vec![ToolCallContent::text("out")],
                status: ToolStatus::Failed,
                tool_call_id: s("call_1"),
            }),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                content: vec![
                    ToolCallContent::text("edited"),
                    ToolCallContent::Diff {
                        path: s("/w/a.txt"),
                        old_text: None,
                        new_text: s("new\n"),
                    },
                ],
                status: ToolStatus::Completed,
                tool_call_id: s("call_2"),
            }),
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
                current_mode_id: Mode::Plan,
            }),
            SessionUpdate::Plan(PlanUpdate {
                meta: PlanMeta {
                    lembas: PlanEvent {
                        plan: Some(json!({ "phases": [{ "tasks": [{ "title": "t" }] }] })),
                    },
                },
                entries: vec![PlanEntry {
                    content: s("t"),
                    priority: s("medium"),
                    status: PlanEntryStatus::InProgress,
                }],
            }),
            SessionUpdate::Plan(PlanUpdate {
                meta: PlanMeta {
                    lembas: PlanEvent { plan: None },
                },
                entries: vec![],
            }),
            SessionUpdate::AvailableCommandsUpdate(AvailableCommands {
                available_commands: vec![json!({ "name": "review", "description": "r",
                    "input": { "hint": "head" }, "_meta": { "lembas": { "kind": "builtin" } } })],
            }),
        ]
    }

    /// The typed encoding writes what encoding the same message as a `Value` (sorted keys, the
    /// device's encoding before these types) writes, and reads back as itself.
    #[test]
    fn updates_encode_as_their_value_did_and_decode_to_themselves() {
        for (i, update) in every_update().into_iter().enumerate() {
            // With a seq and without (as an older device sent them).
            let params = UpdateParams {
                meta: (i % 2 == 0).then(|| super::super::seq::SeqMeta::new(i as u64 + 1)),
                session_id: "ses_1".into(),
                update,
            };
            let typed = serde_json::to_string(&params).unwrap();
            let as_value = serde_json::to_value(&params).unwrap().to_string();
            assert_eq!(typed, as_value);
            let back: UpdateParams = serde_json::from_str(&typed).unwrap();
            assert_eq!(back, params);
            assert_eq!(
                serde_json::from_str::<Value>(&typed).unwrap()["update"]["sessionUpdate"],
                params.update.kind()
            );
        }
    }
}
