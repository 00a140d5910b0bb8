//! What a turn answered its prompt with: kept in the session's turn ledger and in the store, so
//! a duplicate of the prompt gets the very same answer, across restarts too. Neutral ground for
//! the device (which makes answers) and the store (which keeps them).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::engine::StopReason;
use crate::jsonrpc::{self, Id, RpcError};
use crate::wire::session::{PromptResult, TurnNotes};
use crate::wire::{need, one_pass};

/// How a finished turn answered its prompt, kept so a duplicate gets the very same answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    Stopped {
        stop_reason: StopReason,
        /// `_meta.lembas` beside `turnId`, `None` when it says nothing more (most turns, so a
        /// ledger of them stays small). Stored as `extra`, the notes as a JSON object's text,
        /// as stores written before they had a type hold them.
        #[serde(
            rename = "extra",
            skip_serializing_if = "Option::is_none",
            serialize_with = "notes_as_text"
        )]
        notes: Option<Box<TurnNotes>>,
    },
    Failed {
        code: i64,
        message: String,
    },
}

fn notes_as_text<S: Serializer>(notes: &Option<Box<TurnNotes>>, s: S) -> Result<S::Ok, S::Error> {
    let text = serde_json::to_string(notes).map_err(serde::ser::Error::custom)?;
    s.serialize_str(&text)
}

/// Notes that cannot be read are left out, not the answer: a turn record refused whole would
/// be forgotten, and its prompt sent again would run again (the answer as written before the
/// notes had a type did the same, at each frame).
fn notes_from_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<TurnNotes>>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    let notes = text.and_then(|t| serde_json::from_str::<TurnNotes>(&t).ok());
    Ok(notes.filter(|n| !n.is_empty()).map(Box::new))
}

/// A stored answer as it is read back, in one pass (an internally tagged enum would buffer it).
#[derive(Deserialize)]
struct AnswerFields {
    kind: AnswerKind,
    #[serde(default)]
    stop_reason: Option<StopReason>,
    #[serde(default, deserialize_with = "notes_from_text")]
    extra: Option<Box<TurnNotes>>,
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
                    notes: f.extra,
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
    pub fn stopped(stop_reason: StopReason, notes: TurnNotes) -> Answer {
        Answer::Stopped {
            stop_reason,
            notes: (!notes.is_empty()).then(|| Box::new(notes)),
        }
    }

    /// The response frame to the prompt request `id` for turn `turn_id`.
    pub fn frame(&self, id: &Id, turn_id: &str) -> Vec<u8> {
        match self {
            Answer::Stopped { stop_reason, notes } => {
                let result = PromptResult::new(*stop_reason, turn_id, notes.as_deref());
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
        let notes = TurnNotes {
            unsent: vec!["later".into()],
            ..TurnNotes::default()
        };
        let a = Answer::stopped(StopReason::Cancelled, notes);
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

    /// Stores written while the notes were an untyped object's text read back as the same
    /// notes, and write the same prompt answer; `undone: null` stays `null`, not absent; notes
    /// that cannot be read leave the answer kept without them.
    #[test]
    fn stored_notes_read_back_typed_and_answer_as_before() {
        let stored = r#"{"kind":"stopped","stop_reason":"end_turn","extra":"{\"command\":\"undo\",\"undone\":null}"}"#;
        let a: Answer = serde_json::from_str(stored).unwrap();
        let undo = TurnNotes {
            command: Some("undo".into()),
            undone: Some(None),
            ..TurnNotes::default()
        };
        assert_eq!(a, Answer::stopped(StopReason::EndTurn, undo));
        assert_eq!(serde_json::to_string(&a).unwrap(), stored);
        let frame: serde_json::Value =
            serde_json::from_slice(&a.frame(&Id::number(1), "t")).unwrap();
        assert_eq!(
            frame["result"],
            serde_json::json!({ "stopReason": "end_turn",
                "_meta": { "lembas": { "turnId": "t", "command": "undo", "undone": null } } })
        );

        let said_nothing =
            r#"{"kind":"stopped","stop_reason":"cancelled","extra":"{\"unsent\":[]}"}"#;
        let a: Answer = serde_json::from_str(said_nothing).unwrap();
        assert_eq!(
            a,
            Answer::stopped(StopReason::Cancelled, TurnNotes::default())
        );
        assert!(matches!(a, Answer::Stopped { notes: None, .. }));

        let broken = r#"{"kind":"stopped","stop_reason":"end_turn","extra":"{\"unsent\":7}"}"#;
        let a: Answer =
            serde_json::from_str(broken).expect("kept, so its prompt does not run again");
        assert_eq!(
            a,
            Answer::stopped(StopReason::EndTurn, TurnNotes::default())
        );
    }

    /// Every note at once writes the bytes a sorted JSON object would: the frames the
    /// conformance transcripts recorded before the notes had a type.
    #[test]
    fn a_prompt_answer_with_every_note_keeps_its_bytes() {
        let notes = TurnNotes {
            command: Some("undo".into()),
            message: Some("m".into()),
            mode: Some(crate::config::Mode::Plan),
            summary: Some("s".into()),
            undone: Some(Some(crate::wire::session::UndoneTurn {
                prompt: "p".into(),
                files: vec!["a.rs".into()],
            })),
            unsent: vec!["later".into()],
        };
        let a = Answer::stopped(StopReason::MaxTokens, notes.clone());
        let mut lembas = serde_json::to_value(&notes).unwrap();
        lembas["turnId"] = "t9".into();
        let sorted =
            serde_json::json!({ "stopReason": "max_tokens", "_meta": { "lembas": lembas } });
        let id = Id::number(3);
        assert_eq!(
            String::from_utf8(a.frame(&id, "t9")).unwrap(),
            String::from_utf8(jsonrpc::encode_result(&id, &sorted)).unwrap()
        );
    }
}
