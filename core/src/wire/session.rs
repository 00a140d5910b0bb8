//! Sessions and turns on the wire: `session/new`, `session/prompt`, `session/set_mode`,
//! `session/cancel`, `_lembas/configure`, `_lembas/steer`, `_lembas/session/status`, `history`
//! and `title`.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::config::Mode;
use crate::engine::{Context, StopReason};
use crate::wire::{need, one_pass};

/// A member captured even when it is `null` (`personalization: null` means "the device's own",
/// which is not the same as not saying).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `_meta.lembas` of `session/new` and `session/prompt`: the `Context` fields (snake_case, as
/// the spec writes them) and, in a prompt, its `turnId`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LembasMeta {
    #[serde(rename = "turnId", default)]
    pub turn_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub system_prompt: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub personalization: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub library: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub prototypes: Option<Value>,
}

impl LembasMeta {
    /// The turn id and the context.
    pub fn into_parts(self) -> (Option<String>, Context) {
        let context = Context {
            system_prompt: self.system_prompt,
            personalization: self.personalization,
            library: self.library,
            prototypes: self.prototypes,
        };
        (self.turn_id, context)
    }
}

impl From<LembasMeta> for Context {
    fn from(m: LembasMeta) -> Context {
        m.into_parts().1
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct NewSessionMeta {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub lembas_model: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub lembas: Option<LembasMeta>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionParams {
    pub cwd: String,
    #[serde(default)]
    pub mcp_servers: Vec<serde::de::IgnoredAny>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<NewSessionMeta>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeInfo {
    pub id: &'static str,
    pub name: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Modes {
    pub current_mode_id: &'static str,
    pub available_modes: Vec<ModeInfo>,
}

/// `session/new`'s answer; `session/load`'s and `session/resume`'s are the same without
/// `sessionId` (the request named it) and say in `_meta.lembas` when turns were left out.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResult<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<&'a str>,
    pub modes: Modes,
    #[serde(rename = "_meta")]
    pub meta: SessionResultMeta<'a>,
}

#[derive(Debug, Serialize)]
pub struct SessionResultMeta<'a> {
    pub lembas: SessionResultLembas<'a>,
}

#[derive(Debug, Serialize)]
pub struct SessionResultLembas<'a> {
    pub model: Option<&'a str>,
    pub mode: Mode,
    pub effort: Option<&'a str>,
    pub instance: bool,
    /// A load's: whether turns were left out of its replay, and how many.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
}

/// One content block of a prompt. Base64 payloads borrow from the frame.
#[derive(Debug)]
pub enum ContentBlock<'a> {
    Text {
        text: String,
    },
    ResourceLink {
        uri: String,
    },
    Image {
        data: Cow<'a, str>,
        mime_type: String,
        uri: Option<String>,
    },
    Resource {
        resource: EmbeddedResource<'a>,
    },
}

/// A block as it arrives: every variant's fields side by side, so it is read in one pass. An
/// internally tagged enum (`#[serde(tag = "type")]`) buffers each block first, which costs a
/// copy per block and a second decoder per variant (most of the wasm module's serde code).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockFields<'a> {
    #[serde(rename = "type")]
    kind: BlockKind,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(default, borrow)]
    data: Option<Borrowed<'a>>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default, borrow)]
    resource: Option<EmbeddedResource<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum BlockKind {
    Text,
    ResourceLink,
    Image,
    Resource,
}

/// A string that borrows from the frame unless it has escapes. serde borrows a `Cow` only as
/// a field of its own, never inside an `Option`, so an optional one goes through this.
#[derive(Deserialize)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for ContentBlock<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a content block", |f: BlockFields<'a>| {
            Ok(match f.kind {
                BlockKind::Text => ContentBlock::Text {
                    text: need(f.text, "text")?,
                },
                BlockKind::ResourceLink => ContentBlock::ResourceLink {
                    uri: need(f.uri, "uri")?,
                },
                BlockKind::Image => ContentBlock::Image {
                    data: need(f.data, "data")?.0,
                    mime_type: need(f.mime_type, "mimeType")?,
                    uri: f.uri,
                },
                BlockKind::Resource => ContentBlock::Resource {
                    resource: need(f.resource, "resource")?,
                },
            })
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource<'a> {
    pub uri: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub blob: Option<Cow<'a, str>>,
}

fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    Option::<Borrowed<'a>>::deserialize(d).map(|b| b.map(|b| b.0))
}

#[derive(Debug, Default, Deserialize)]
pub struct PromptMeta {
    #[serde(default)]
    pub lembas: Option<LembasMeta>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams<'a> {
    pub session_id: String,
    #[serde(borrow)]
    pub prompt: Vec<ContentBlock<'a>>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<PromptMeta>,
}

/// What a prompt's answer says in `_meta.lembas` beside `turnId` (the table under the spec's
/// `session/prompt` Result), each member only when it applies. A turn's answer keeps these, so
/// a duplicate prompt gets them too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnNotes {
    /// The command the prompt was, without its slash (`compact`, `undo`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// What a command that had nothing to do said instead (`/review` with no changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `/plan` without a task: the mode now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// `/compact`: the summary the older turns were folded into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `/undo`: what it undid, `Some(None)` (`null` on the wire) when there was nothing.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "null_kept"
    )]
    pub undone: Option<Option<UndoneTurn>>,
    /// Messages sent with `_lembas/steer` that the turn ended before taking in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsent: Vec<String>,
}

/// Notes that say nothing (what `default()` gives), for an answer without any to borrow.
static NO_NOTES: TurnNotes = TurnNotes {
    command: None,
    message: None,
    mode: None,
    summary: None,
    undone: None,
    unsent: Vec::new(),
};

impl TurnNotes {
    pub fn is_empty(&self) -> bool {
        *self == NO_NOTES
    }
}

/// `undone: { prompt, files }`: the files put back, and the undone turn's prompt (members in
/// the order of their names, as answers recorded before this type have them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoneTurn {
    pub files: Vec<String>,
    pub prompt: String,
}

/// An optional member whose `null` is a value (`undone: null`, nothing to undo), not absence.
fn null_kept<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `session/prompt`'s result: `{ _meta: { lembas: { turnId, ...notes } }, stopReason }`.
/// Members in the order of their names, as the frames recorded in `spec/conformance` have them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult<'a> {
    #[serde(rename = "_meta")]
    pub meta: PromptResultMeta<'a>,
    pub stop_reason: StopReason,
}

impl<'a> PromptResult<'a> {
    pub fn new(stop_reason: StopReason, turn_id: &'a str, notes: Option<&'a TurnNotes>) -> Self {
        let n = notes.unwrap_or(&NO_NOTES);
        let lembas = PromptResultLembas {
            command: n.command.as_deref(),
            message: n.message.as_deref(),
            mode: n.mode,
            summary: n.summary.as_deref(),
            turn_id,
            undone: n.undone.as_ref().map(Option::as_ref),
            unsent: &n.unsent,
        };
        PromptResult {
            meta: PromptResultMeta { lembas },
            stop_reason,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PromptResultMeta<'a> {
    pub lembas: PromptResultLembas<'a>,
}

/// [`TurnNotes`] borrowed, with the turn's id among them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResultLembas<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a str>,
    pub turn_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undone: Option<Option<&'a UndoneTurn>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub unsent: &'a [String],
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    pub session_id: String,
}

/// `session/list` params (ACP v1): the sessions in one directory, or all; the page after
/// `cursor` (a previous answer's `nextCursor`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsParams {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `session/list`'s answer (ACP v1): a page of sessions, and where the next begins when more
/// follow.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListResult<'a> {
    pub sessions: Vec<ListedSession<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One session of a `session/list` page (ACP's `SessionInfo`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession<'a> {
    pub session_id: &'a str,
    pub cwd: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
    /// ISO 8601, UTC.
    pub updated_at: String,
}

/// `session/load` and `session/resume` params (ACP v1): the session, and the editor's
/// working directory (absolute). Its MCP servers are not taken (`mcpCapabilities` says none).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionParams {
    pub session_id: String,
    pub cwd: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode_id: String,
}

/// `_lembas/configure`: the instance's name of a model, and an effort (a level or `"off"`);
/// either may be left out.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureParams {
    pub session_id: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerParams {
    pub session_id: String,
    pub text: String,
    #[serde(default)]
    pub message_id: Option<String>,
}

/// `_lembas/session/rewind` params: the turn to revert, with every later one.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindParams {
    pub session_id: String,
    pub turn_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitleParams {
    pub session_id: String,
    pub title: String,
}

/// Attachment metadata, as prompt events and history give it. Fields in the order they sort:
/// the `prompt` event writes them so (wire::event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentMeta {
    pub mime_type: String,
    pub name: String,
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    pub id: String,
    pub name: String,
    pub args: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, rename = "isError", skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// One turn of `_lembas/session/history`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum HistoryTurn {
    User {
        text: String,
        #[serde(rename = "turnId", default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<AttachmentMeta>,
    },
    Assistant {
        text: String,
        reasoning: String,
        tools: Vec<ToolRecord>,
    },
}

/// A history turn as it arrives, read in one pass (see [`BlockFields`]).
#[derive(Deserialize)]
struct HistoryFields {
    role: Role,
    #[serde(default)]
    text: Option<String>,
    #[serde(rename = "turnId", default)]
    turn_id: Option<String>,
    #[serde(default)]
    attachments: Vec<AttachmentMeta>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tools: Option<Vec<ToolRecord>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Role {
    User,
    Assistant,
}

impl<'de> Deserialize<'de> for HistoryTurn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a history turn", |f: HistoryFields| {
            Ok(match f.role {
                Role::User => HistoryTurn::User {
                    text: need(f.text, "text")?,
                    turn_id: f.turn_id,
                    attachments: f.attachments,
                },
                Role::Assistant => HistoryTurn::Assistant {
                    text: need(f.text, "text")?,
                    reasoning: need(f.reasoning, "reasoning")?,
                    tools: need(f.tools, "tools")?,
                },
            })
        })
    }
}

/// `_lembas/session/delete`'s answer: whether the device had the session (deleting one it
/// does not have is done as well).
#[derive(Debug, Serialize, Deserialize)]
pub struct DeleteResult {
    pub deleted: bool,
}

/// `_lembas/session/status`' answer: the device writes it borrowing from the session, a
/// client reads it owned.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult<'a> {
    pub session_id: Cow<'a, str>,
    pub exists: bool,
    pub held: Cow<'a, str>,
    pub busy: bool,
    pub title: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<Cow<'a, str>>,
    /// Always written; read as none when absent (the turn fields come with capability
    /// `turns`, and a device without it leaves them out).
    #[serde(default)]
    pub queued: Vec<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_turn_id: Option<Cow<'a, str>>,
    /// The session's plan, `null` when it has none (capability `plan_state`).
    pub plan: Option<Cow<'a, Value>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryResult<'a> {
    pub session_id: &'a str,
    pub title: Option<&'a str>,
    /// The session's working directory (what `@path` mentions resolve against).
    pub root: &'a str,
    pub turns: &'a [HistoryTurn],
    /// Ours, beyond the spec: whether turns were left out (older ones past the budget or the
    /// limit) or one was cut to fit.
    pub truncated: bool,
    /// The turns older than the first answered, left out: ask again with `before` set to this
    /// for the ones before.
    pub dropped: u64,
}

/// `_lembas/session/history` params: the spec's `sessionId`, and ours: `before`, a turn's
/// index in the session (0 the first): only turns before it are answered; `limit`, at most
/// this many turns.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryParams {
    pub session_id: String,
    #[serde(default)]
    pub before: Option<u64>,
    #[serde(default)]
    pub limit: Option<u64>,
}
