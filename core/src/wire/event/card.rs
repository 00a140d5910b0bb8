//! The cards the device puts to a person: `session/request_permission` (an approval),
//! `_lembas/question` and `_lembas/plan`. Fields are declared in the order they sort, the order
//! the device wrote them in when it built them as `Value`s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::ToolStatus;

/// A card's params, whichever method carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CardParams {
    Permission(PermissionParams),
    Question(QuestionParams),
    Plan(PlanParams),
}

/// The method that carries an approval.
pub const PERMISSION: &str = "session/request_permission";
/// The method that carries a question card.
pub const QUESTION: &str = "_lembas/question";
/// The method that carries a plan card.
pub const PLAN: &str = "_lembas/plan";

impl CardParams {
    /// The method that carries this card.
    pub fn method(&self) -> &'static str {
        match self {
            CardParams::Permission(_) => PERMISSION,
            CardParams::Question(_) => QUESTION,
            CardParams::Plan(_) => PLAN,
        }
    }

    pub fn session_id(&self) -> &str {
        match self {
            CardParams::Permission(p) => &p.session_id,
            CardParams::Question(q) => &q.session_id,
            CardParams::Plan(p) => &p.session_id,
        }
    }

    /// The tool call the card is for (an approval's `toolCall.toolCallId`).
    pub fn tool_call_id(&self) -> &str {
        match self {
            CardParams::Permission(p) => &p.tool_call.tool_call_id,
            CardParams::Question(q) => &q.tool_call_id,
            CardParams::Plan(p) => &p.tool_call_id,
        }
    }

    /// A person may also answer at the terminal: the client does not time the card out.
    pub fn patient(&self) -> bool {
        match self {
            CardParams::Permission(p) => p.meta.lembas.patient,
            CardParams::Question(q) => q.meta.lembas.patient,
            CardParams::Plan(p) => p.meta.lembas.patient,
        }
    }

    /// The session's event sequence number of the card, where it has one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            CardParams::Permission(p) => p.meta.lembas.seq,
            CardParams::Question(q) => q.meta.lembas.seq,
            CardParams::Plan(p) => p.meta.lembas.seq,
        }
    }
}

/// `session/request_permission` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionParams {
    #[serde(rename = "_meta")]
    pub meta: PermissionMeta,
    pub options: Vec<PermissionOption>,
    pub session_id: String,
    pub tool_call: CardToolCall,
}

/// `_meta` of an approval: `{ lembas: { always?, patient?, purpose?, reason } }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermissionMeta {
    pub lembas: PermissionLembas,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermissionLembas {
    /// "Allow always" is offered (absent, like the option, where it never is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always: bool,
    /// A person may also answer at the terminal: the client does not time the card out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub patient: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    pub reason: String,
    /// The session's event sequence number of the card (our extension): the same on every
    /// copy of it, offered again to a later connection too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// An approval's option.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    pub kind: OptionKind,
    pub name: String,
    pub option_id: String,
}

impl PermissionOption {
    /// `once`: allow this call.
    pub fn once() -> PermissionOption {
        PermissionOption::new(OptionKind::AllowOnce, "Allow once", "once")
    }

    /// `session`: allow such calls for the session.
    pub fn always() -> PermissionOption {
        PermissionOption::new(OptionKind::AllowAlways, "Allow always", "session")
    }

    /// `deny`.
    pub fn deny() -> PermissionOption {
        PermissionOption::new(OptionKind::RejectOnce, "Deny", "deny")
    }

    fn new(kind: OptionKind, name: &str, option_id: &str) -> PermissionOption {
        PermissionOption {
            kind,
            name: name.into(),
            option_id: option_id.into(),
        }
    }
}

/// ACP's option kinds, those the device offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
}

/// The tool call an approval is for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardToolCall {
    pub kind: String,
    pub raw_input: Value,
    /// `pending`: it waits for the answer.
    pub status: ToolStatus,
    pub title: String,
    pub tool_call_id: String,
}

/// `_meta` of a question or plan card: `{ lembas: { patient? } }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CardMeta {
    pub lembas: Patience,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Patience {
    /// A person may also answer at the terminal: the client does not time the card out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub patient: bool,
    /// The session's event sequence number of the card (our extension), as an approval's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// `_lembas/question` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionParams {
    #[serde(rename = "_meta")]
    pub meta: CardMeta,
    pub questions: Vec<CardQuestion>,
    pub session_id: String,
    pub tool_call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// One question of a question card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardQuestion {
    pub header: String,
    pub multiple: bool,
    pub options: Vec<CardOption>,
    pub question: String,
}

/// One option of a question, its label cut to what the card shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardOption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub label: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recommended: bool,
}

/// `_lembas/plan` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanParams {
    #[serde(rename = "_meta")]
    pub meta: CardMeta,
    /// The plan file written for the record, relative to the project.
    pub path: String,
    /// The structure (capability `plan_state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    pub session_id: String,
    /// The plan as markdown.
    pub text: String,
    pub tool_call_id: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// One card of each shape, with and without its optional members.
    pub(crate) fn every_card() -> Vec<CardParams> {
        let s = String::from;
        let patient = CardMeta {
            lembas: Patience {
                patient: true,
                seq: Some(9),
            },
        };
        vec![
            CardParams::Permission(PermissionParams {
                meta: PermissionMeta {
                    lembas: PermissionLembas {
                        always: true,
                        patient: true,
                        purpose: Some(s("tests")),
                        reason: s("runs a command"),
                        seq: Some(8),
                    },
                },
                options: vec![
                    PermissionOption::once(),
                    PermissionOption::always(),
                    PermissionOption::deny(),
                ],
                session_id: s("ses_1"),
                tool_call: CardToolCall {
                    kind: s("execute"),
                    raw_input: json!({ "command": "npm test", "cwd": "." }),
                    status: ToolStatus::Pending,
                    title: s("npm test"),
                    tool_call_id: s("call_1"),
                },
            }),
            CardParams::Permission(PermissionParams {
                meta: PermissionMeta {
                    lembas: PermissionLembas {
                        always: false,
                        patient: false,
                        purpose: None,
                        reason: s("writes"),
                        seq: None,
                    },
                },
                options: vec![PermissionOption::once(), PermissionOption::deny()],
                session_id: s("ses_1"),
                tool_call: CardToolCall {
                    kind: s("edit"),
                    raw_input: json!({}),
                    status: ToolStatus::Pending,
                    title: s("a.rs"),
                    tool_call_id: s("call_2"),
                },
            }),
            CardParams::Question(QuestionParams {
                meta: patient.clone(),
                questions: vec![CardQuestion {
                    header: s("DB"),
                    multiple: false,
                    options: vec![
                        CardOption {
                            description: Some(s("small")),
                            label: s("SQLite"),
                            recommended: true,
                        },
                        CardOption {
                            description: None,
                            label: s("Postgres"),
                            recommended: false,
                        },
                    ],
                    question: s("Which database?"),
                }],
                session_id: s("ses_1"),
                tool_call_id: s("call_3"),
                why: Some(s("to pick a driver")),
            }),
            CardParams::Question(QuestionParams {
                meta: CardMeta::default(),
                questions: vec![],
                session_id: s("ses_1"),
                tool_call_id: s("call_3"),
                why: None,
            }),
            CardParams::Plan(PlanParams {
                meta: patient,
                path: s("plan.md"),
                plan: Some(json!({ "title": "p", "phases": [] })),
                session_id: s("ses_1"),
                text: s("# p"),
                tool_call_id: s("call_4"),
            }),
            CardParams::Plan(PlanParams {
                meta: CardMeta::default(),
                path: s("plan.md"),
                plan: None,
                session_id: s("ses_1"),
                text: s("# p"),
                tool_call_id: s("call_4"),
            }),
        ]
    }

    /// The typed encoding writes what encoding the same card as a `Value` (sorted keys, the
    /// device's encoding before these types) writes, and each method's params read back as
    /// themselves.
    #[test]
    fn cards_encode_as_their_value_did_and_decode_to_themselves() {
        for card in every_card() {
            let typed = serde_json::to_string(&card).unwrap();
            let as_value = serde_json::to_value(&card).unwrap().to_string();
            assert_eq!(typed, as_value);
            let back = match &card {
                CardParams::Permission(_) => {
                    CardParams::Permission(serde_json::from_str(&typed).unwrap())
                }
                CardParams::Question(_) => {
                    CardParams::Question(serde_json::from_str(&typed).unwrap())
                }
                CardParams::Plan(_) => CardParams::Plan(serde_json::from_str(&typed).unwrap()),
            };
            assert_eq!(back, card);
        }
    }
}
