//! What a turn answered its prompt with: kept in the session's turn ledger and in the store, so
//! a duplicate of the prompt gets the very same answer, across restarts too. Neutral ground for
//! the device (which makes answers) and the store (which keeps them).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::engine::StopReason;
use crate::jsonrpc::{self, Id, RpcError};
use crate::wire::{need, one_pass};

/// How a finished turn answered its prompt, kept so a duplicate gets the very same answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    Stopped {
        stop_reason: StopReason,
        /// Further `_meta.lembas` members beside `turnId` (`unsent`, `message`), as a JSON
        /// object's text, or `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extra: Option<String>,
    },
    Failed {
        code: i64,
        message: String,
    },
}

/// A stored answer as it is read back, in one pass (an internally tagged enum would buffer it).
#[derive(Deserialize)]
struct AnswerFields {
    kind: AnswerKind,
    #[serde(default)]
    stop_reason: Option<StopReason>,
    #[serde(default)]
    extra: Option<String>,
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AnswerKind {
    Stopped,
    Failed,
}

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a stored answer", |f: AnswerFields| {
            Ok(match f.kind {
                AnswerKind::Stopped => Answer::Stopped {
                    stop_reason: need(f.stop_reason, "stop_reason")?,
                    extra: f.extra,
                },
                AnswerKind::Failed => Answer::Failed {
                    code: need(f.code, "code")?,
                    message: need(f.message, "message")?,
                },
            })
        })
    }
}

impl Answer {
    pub fn stopped(stop_reason: StopReason, extra: Map<String, Value>) -> Answer {
        Answer::Stopped {
            stop_reason,
            extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        }
    }

    /// The response frame to the prompt request `id` for turn `turn_id`.
    pub fn frame(&self, id: &Id, turn_id: &str) -> Vec<u8> {
        match self {
            Answer::Stopped { stop_reason, extra } => {
                let mut lembas = extra
                    .as_deref()
                    .and_then(|e| serde_json::from_str::<Map<String, Value>>(e).ok())
                    .unwrap_or_default();
                lembas.insert("turnId".into(), Value::String(turn_id.into()));
                let result = serde_json::json!({
                    "stopReason": stop_reason,
                    "_meta": { "lembas": lembas },
                });
                jsonrpc::encode_result(id, &result)
            }
            Answer::Failed { code, message } => jsonrpc::encode_error(
                Some(id),
                &RpcError::new(*code, message.clone()).with_data(serde_json::json!({
                    "turnId": turn_id
                })),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_rebuild_the_same_frame() {
        let mut extra = Map::new();
        extra.insert("unsent".into(), serde_json::json!(["later"]));
        let a = Answer::stopped(StopReason::Cancelled, extra);
        let stored = serde_json::to_string(&a).unwrap();
        let back: Answer = serde_json::from_str(&stored).unwrap();
        assert_eq!(
            a.frame(&Id::number(4), "t1"),
            back.frame(&Id::number(4), "t1")
        );
        let text = String::from_utf8(a.frame(&Id::number(4), "t1")).unwrap();
        assert!(text.contains(r#""stopReason":"cancelled""#), "{text}");
        assert!(text.contains(r#""unsent":["later"]"#), "{text}");
    }
}
