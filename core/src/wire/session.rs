//! Sessions and turns on the wire: `session/new`, `session/prompt`, `session/set_mode`,
//! `session/cancel`, `_lembas/steer`, `_lembas/session/status`, `history` and `title`.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::engine::Context;

/// A member captured even when it is `null` (`personalization: null` means "the device's own",
/// which is not the same as not saying).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `_meta.lembas`'s `Context` fields as they arrive.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ContextParams {
    #[serde(default, deserialize_with = "present")]
    pub system_prompt: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub personalization: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub library: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub prototypes: Option<Value>,
}

impl From<ContextParams> for Context {
    fn from(c: ContextParams) -> Context {
        Context {
            system_prompt: c.system_prompt,
            personalization: c.personalization,
            library: c.library,
            prototypes: c.prototypes,
        }
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
    pub lembas: Option<ContextParams>,
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

/// One content block of a prompt. Base64 payloads borrow from the frame.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock<'a> {
    Text {
        text: String,
    },
    ResourceLink {
        uri: String,
    },
    Image {
        #[serde(borrow)]
        data: Cow<'a, str>,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(default)]
        uri: Option<String>,
    },
    Resource {
        #[serde(borrow)]
        resource: EmbeddedResource<'a>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource<'a> {
    pub uri: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default, borrow)]
    pub blob: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptLembas {
    #[serde(default)]
    pub turn_id: Option<String>,
    #[serde(flatten)]
    pub context: ContextParams,
}

#[derive(Debug, Default, Deserialize)]
pub struct PromptMeta {
    #[serde(default)]
    pub lembas: Option<PromptLembas>,
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    pub session_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerParams {
    pub session_id: String,
    pub text: String,
    #[serde(default)]
    pub message_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitleParams {
    pub session_id: String,
    pub title: String,
}

/// Attachment metadata, as prompt events and history give it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentMeta {
    pub name: String,
    pub mime_type: String,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult<'a> {
    pub session_id: &'a str,
    pub exists: bool,
    pub held: &'static str,
    pub busy: bool,
    pub title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<&'a str>,
    pub queued: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_turn_id: Option<&'a str>,
    /// The session's plan, `null` when it has none (capability `plan_state`).
    pub plan: Option<&'a Value>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryResult<'a> {
    pub session_id: &'a str,
    pub title: Option<&'a str>,
    pub root: &'a str,
    pub turns: &'a [HistoryTurn],
}
