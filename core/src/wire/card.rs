//! A card's answer, as a client sends it and the device reads it: an approval's
//! ([`PermissionAnswer`]), a question card's ([`QuestionAnswers`]) or a plan's ([`PlanAnswer`]).
//! (The cards themselves are `wire::event::card`.)
//!
//! Each is read leniently, as the spec asks: a member of the wrong shape reads as absent, and an
//! answer that is not a well-formed one then reads as a denial (an approval) or a dismissal (a
//! question or plan), never as an error.
//!
//! The card an answer is for: an answer may name its card in `_meta.lembas.toolCallId`; the
//! spec's answers need not, so one that names none is taken as the answer to the request it
//! answers. One that names another card is not: the client does not send it, and the device
//! does not count it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::config::Mode;
use crate::engine::QuestionAnswer;

/// Whether `answer` names, in `_meta.lembas.toolCallId`, a card other than `tool_call_id`.
/// Read from the `Value` both roles hold (the web client's module has no `Value` decoder).
pub fn names_another_card(answer: &Value, tool_call_id: &str) -> bool {
    answer["_meta"]["lembas"]["toolCallId"]
        .as_str()
        .is_some_and(|named| named != tool_call_id)
}

/// A member read as `None` when it is absent or not of its type.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// `v` as `T` if it is an object: serde would also read a struct from an array, by position,
/// which no answer is.
fn from_object<T: DeserializeOwned>(v: Value) -> Option<T> {
    v.is_object().then(|| T::deserialize(v).ok()).flatten()
}

/// An object member read as `None` when it is absent or not such an object.
fn object<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(from_object(Value::deserialize(d)?))
}

/// A list of objects, `None` when it is absent or any one of them is not such an object.
fn objects<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let Value::Array(items) = Value::deserialize(d)? else {
        return Ok(None);
    };
    Ok(items.into_iter().map(from_object).collect())
}

/// `answer` read as `T`, or `T`'s default (nothing said) when it is not such an object.
pub fn read<T: DeserializeOwned + Default>(answer: &Value) -> T {
    from_object(answer.clone()).unwrap_or_default()
}

/// A card's answer as a client sends it ([`crate::client::Client::answer`]).
pub trait Answer: Serialize {
    /// The answer as the result of the card's request.
    fn to_value(&self) -> Value {
        // Strings, enums and lists of them: these always encode.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Answer for PermissionAnswer {}
impl Answer for QuestionAnswers {}
impl Answer for PlanAnswer {}

/// An approval's answer: `{ outcome: { outcome: "selected", optionId }, _meta.lembas: {
/// command?, feedback? } }`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PermissionAnswer {
    #[serde(
        default,
        deserialize_with = "object",
        skip_serializing_if = "Option::is_none"
    )]
    pub outcome: Option<PermissionOutcome>,
    #[serde(
        rename = "_meta",
        default,
        deserialize_with = "object",
        skip_serializing_if = "Option::is_none"
    )]
    pub meta: Option<AnswerMeta>,
}

/// ACP's permission outcome.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// `optionId`: one of the card's options (`once`, `session`, `deny`).
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
    },
    Cancelled,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerMeta {
    #[serde(
        default,
        deserialize_with = "object",
        skip_serializing_if = "Option::is_none"
    )]
    pub lembas: Option<AnswerLembas>,
}

/// An approval's `_meta.lembas`: the command as the person edited it (allow once), or why
/// they denied it.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerLembas {
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub command: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub feedback: Option<String>,
}

impl PermissionAnswer {
    /// One of the card's options selected (`once`, `session`, `deny`).
    pub fn select(option_id: &str) -> PermissionAnswer {
        PermissionAnswer {
            outcome: Some(PermissionOutcome::Selected {
                option_id: option_id.into(),
            }),
            meta: None,
        }
    }

    /// The card cancelled, no option selected.
    pub fn cancelled() -> PermissionAnswer {
        PermissionAnswer {
            outcome: Some(PermissionOutcome::Cancelled),
            meta: None,
        }
    }

    /// With the command as the person edited it (allow once).
    pub fn with_command(mut self, command: &str) -> PermissionAnswer {
        self.lembas_mut().command = Some(command.into());
        self
    }

    /// With why the person denied it.
    pub fn with_feedback(mut self, feedback: &str) -> PermissionAnswer {
        self.lembas_mut().feedback = Some(feedback.into());
        self
    }

    fn lembas_mut(&mut self) -> &mut AnswerLembas {
        self.meta
            .get_or_insert_with(AnswerMeta::default)
            .lembas
            .get_or_insert_with(AnswerLembas::default)
    }

    /// The option selected, if one was.
    pub fn option(&self) -> Option<&str> {
        match &self.outcome {
            Some(PermissionOutcome::Selected { option_id }) => Some(option_id),
            _ => None,
        }
    }

    fn lembas(&self) -> Option<&AnswerLembas> {
        self.meta.as_ref()?.lembas.as_ref()
    }

    pub fn command(&self) -> Option<String> {
        self.lembas()?.command.clone()
    }

    pub fn feedback(&self) -> Option<String> {
        self.lembas()?.feedback.clone()
    }
}

/// A question card's answer: `{ outcome: "answered", answers: [one per question] }`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuestionAnswers {
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub outcome: Option<QuestionOutcome>,
    /// `None` when any one of them is not a well-formed answer. An option's label is as the
    /// card showed it (cut to `MAX_LABEL_CHARS`), which the device maps to the whole one.
    #[serde(
        default,
        deserialize_with = "objects",
        skip_serializing_if = "Option::is_none"
    )]
    pub answers: Option<Vec<QuestionAnswer>>,
}

impl QuestionAnswers {
    /// One answer per question, in order.
    pub fn answered(answers: Vec<QuestionAnswer>) -> QuestionAnswers {
        QuestionAnswers {
            outcome: Some(QuestionOutcome::Answered),
            answers: Some(answers),
        }
    }

    pub fn dismissed() -> QuestionAnswers {
        QuestionAnswers {
            outcome: Some(QuestionOutcome::Dismissed),
            answers: None,
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionOutcome {
    Answered,
    Dismissed,
}

/// A plan card's answer: `{ outcome: "approve", mode }` or `{ outcome: "revise", feedback }`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanAnswer {
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub outcome: Option<PlanOutcome>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<Mode>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub feedback: Option<String>,
}

impl PlanAnswer {
    /// Approved, to go on in `mode`.
    pub fn approve(mode: Mode) -> PlanAnswer {
        PlanAnswer {
            outcome: Some(PlanOutcome::Approve),
            mode: Some(mode),
            feedback: None,
        }
    }

    /// Sent back with what to change.
    pub fn revise(feedback: &str) -> PlanAnswer {
        PlanAnswer {
            outcome: Some(PlanOutcome::Revise),
            mode: None,
            feedback: Some(feedback.into()),
        }
    }

    pub fn dismissed() -> PlanAnswer {
        PlanAnswer {
            outcome: Some(PlanOutcome::Dismissed),
            ..PlanAnswer::default()
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOutcome {
    Approve,
    Revise,
    Dismissed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_answer_naming_another_card_is_for_another_card() {
        let named =
            |t: &str| json!({ "outcome": "dismissed", "_meta": { "lembas": { "toolCallId": t } } });
        assert!(names_another_card(&named("call_2"), "call_3"));
        assert!(!names_another_card(&named("call_3"), "call_3"));
        assert!(!names_another_card(
            &json!({ "outcome": "dismissed" }),
            "call_3"
        ));
        assert!(!names_another_card(&Value::Null, "call_3"));
    }

    #[test]
    fn answers_read_typed_and_a_member_of_the_wrong_shape_reads_as_absent() {
        let a: PermissionAnswer = read(&json!({
            "outcome": { "outcome": "selected", "optionId": "once" },
            "_meta": { "lembas": { "command": "npm test -w", "feedback": 3 } }
        }));
        assert_eq!(
            (a.option(), a.command(), a.feedback()),
            (Some("once"), Some("npm test -w".into()), None)
        );
        let a: PermissionAnswer = read(&json!({ "outcome": { "outcome": "cancelled" } }));
        assert_eq!(a.option(), None);
        assert_eq!(
            read::<PermissionAnswer>(&json!("yes")),
            PermissionAnswer::default()
        );
        // Not read by position from an array, as serde would a struct.
        let by_position = json!([{ "outcome": "selected", "optionId": "once" }]);
        assert_eq!(read::<PermissionAnswer>(&by_position).option(), None);
        let q: QuestionAnswers = read(&json!({ "outcome": "answered", "answers": [["skipped"]] }));
        assert_eq!(q.answers, None);

        let q: QuestionAnswers = read(&json!({ "outcome": "answered", "answers": [
            { "kind": "options", "labels": ["a"] }, { "kind": "skipped" },
            { "kind": "back", "text": "wait" }] }));
        assert_eq!(q.outcome, Some(QuestionOutcome::Answered));
        assert_eq!(
            q.answers,
            Some(vec![
                QuestionAnswer::Options {
                    labels: vec!["a".into()]
                },
                QuestionAnswer::Skipped,
                QuestionAnswer::Back {
                    text: "wait".into()
                }
            ])
        );
        let q: QuestionAnswers = read(&json!({ "outcome": "answered", "answers": [
            { "kind": "options", "labels": [1] }] }));
        assert_eq!(q.answers, None, "one malformed answer spoils them all");

        let p: PlanAnswer = read(&json!({ "outcome": "approve", "mode": "edit" }));
        assert_eq!(
            (p.outcome, p.mode),
            (Some(PlanOutcome::Approve), Some(Mode::Edit))
        );
        let p: PlanAnswer = read(&json!({ "outcome": "approve", "mode": "fast" }));
        assert_eq!(p.mode, None);
    }

    /// A client's typed answer is the JSON the spec writes, and the device reads it back as
    /// itself.
    #[test]
    fn typed_answers_encode_as_the_spec_writes_them_and_read_back() {
        fn check<A: Answer + DeserializeOwned + Default + PartialEq + std::fmt::Debug>(
            answer: A,
            spec: Value,
        ) {
            assert_eq!(answer.to_value(), spec);
            assert_eq!(read::<A>(&spec), answer);
        }
        check(
            PermissionAnswer::select("once"),
            json!({ "outcome": { "outcome": "selected", "optionId": "once" } }),
        );
        check(
            PermissionAnswer::select("deny").with_feedback("not now"),
            json!({ "outcome": { "outcome": "selected", "optionId": "deny" },
                    "_meta": { "lembas": { "feedback": "not now" } } }),
        );
        check(
            PermissionAnswer::select("once").with_command("npm test -w"),
            json!({ "outcome": { "outcome": "selected", "optionId": "once" },
                    "_meta": { "lembas": { "command": "npm test -w" } } }),
        );
        check(
            PermissionAnswer::cancelled(),
            json!({ "outcome": { "outcome": "cancelled" } }),
        );
        check(
            QuestionAnswers::answered(vec![
                QuestionAnswer::Options {
                    labels: vec!["Postgres".into()],
                },
                QuestionAnswer::Skipped,
            ]),
            json!({ "outcome": "answered", "answers": [
                { "kind": "options", "labels": ["Postgres"] }, { "kind": "skipped" }] }),
        );
        check(
            QuestionAnswers::dismissed(),
            json!({ "outcome": "dismissed" }),
        );
        check(
            PlanAnswer::approve(Mode::Edit),
            json!({ "outcome": "approve", "mode": "edit" }),
        );
        check(
            PlanAnswer::revise("more tests"),
            json!({ "outcome": "revise", "feedback": "more tests" }),
        );
        check(PlanAnswer::dismissed(), json!({ "outcome": "dismissed" }));
    }
}
