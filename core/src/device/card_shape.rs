//! What a card says and how its answer is read: a card held to the spec's bounds (the
//! recommended option first, labels cut for the card), its params as its method carries them,
//! and an answer read into the engine's decision (a plan's mode lowered as the rules say). Who
//! is asked and which answer counts is cards.rs.

use serde_json::Value;

use crate::config::Mode;
use crate::engine::{
    Ask, Card, Decision, PermissionDecision, PlanDecision, QuestionAnswer, QuestionDecision,
    ToolStatus,
};
use crate::wire::card::{
    self as answer, PermissionAnswer, PlanAnswer, PlanOutcome, QuestionAnswers, QuestionOutcome,
};
use crate::wire::event::card::{
    CardMeta, CardOption, CardParams, CardQuestion, CardToolCall, Patience, PermissionLembas,
    PermissionMeta, PermissionOption, PermissionParams, PlanParams, QuestionParams,
};

/// The spec's bounds on a question card: its questions, and a question's options.
pub const MAX_QUESTIONS: usize = 4;
pub const MAX_OPTIONS: usize = 6;

/// Characters of an option's label shown on the card (the engine is told the whole label).
pub const MAX_LABEL_CHARS: usize = 240;

pub(super) fn cut(label: &str) -> String {
    label.chars().take(MAX_LABEL_CHARS).collect()
}

pub(super) fn is_permission(card: &Card) -> bool {
    matches!(card.ask, Ask::Permission { .. })
}

/// A card not agreed to: a denial, or a dismissal; `timed_out` when nobody answered in time
/// (otherwise an error answer).
pub(super) fn refusal(card: &Card, timed_out: bool) -> Decision {
    match card.ask {
        Ask::Permission { .. } => Decision::Permission(PermissionDecision::Deny {
            feedback: None,
            timed_out,
        }),
        Ask::Question { .. } => Decision::Question(QuestionDecision::Dismissed { timed_out }),
        Ask::Plan { .. } => Decision::Plan(PlanDecision::Dismissed { timed_out }),
    }
}

/// The spec's bounds, and the recommended option first.
pub(super) fn check_card(card: &mut Card) -> Result<(), String> {
    if card.tool_call_id.is_empty() {
        return Err("a card needs a toolCallId".into());
    }
    if let Ask::Question { questions, .. } = &mut card.ask {
        if questions.is_empty() || questions.len() > MAX_QUESTIONS {
            return Err(format!(
                "a question card holds 1 to {MAX_QUESTIONS} questions (got {})",
                questions.len()
            ));
        }
        for (i, q) in questions.iter_mut().enumerate() {
            if q.options.len() > MAX_OPTIONS {
                return Err(format!(
                    "question {} has {} options, over the limit of {MAX_OPTIONS}",
                    i + 1,
                    q.options.len()
                ));
            }
            if let Some(r) = q.options.iter().position(|o| o.recommended) {
                let rec = q.options.remove(r);
                q.options.insert(0, rec);
            }
        }
    }
    Ok(())
}

pub(super) fn card_params(
    session: &str,
    card: &Card,
    patient: bool,
    seq: Option<u64>,
) -> CardParams {
    let meta = CardMeta {
        lembas: Patience { patient, seq },
    };
    let session_id = session.to_owned();
    let tool_call_id = card.tool_call_id.clone();
    match &card.ask {
        Ask::Permission {
            title,
            kind,
            raw_input,
            always_offered,
            reason,
            purpose,
        } => {
            let mut options = vec![PermissionOption::once()];
            if *always_offered {
                options.push(PermissionOption::always());
            }
            options.push(PermissionOption::deny());
            CardParams::Permission(PermissionParams {
                meta: PermissionMeta {
                    lembas: PermissionLembas {
                        // Said in `_meta.lembas` too; absent, like the option, where "always"
                        // is never offered.
                        always: *always_offered,
                        patient,
                        purpose: purpose.clone(),
                        reason: reason.clone(),
                        seq,
                    },
                },
                options,
                session_id,
                tool_call: CardToolCall {
                    kind: kind.clone(),
                    raw_input: raw_input.clone(),
                    status: ToolStatus::Pending,
                    title: title.clone(),
                    tool_call_id,
                },
            })
        }
        Ask::Question { why, questions } => CardParams::Question(QuestionParams {
            meta,
            questions: questions
                .iter()
                .map(|q| CardQuestion {
                    header: q.header.clone(),
                    multiple: q.multiple,
                    options: q
                        .options
                        .iter()
                        .map(|o| CardOption {
                            description: o.description.clone(),
                            label: cut(&o.label),
                            recommended: o.recommended,
                        })
                        .collect(),
                    question: q.question.clone(),
                })
                .collect(),
            session_id,
            tool_call_id,
            why: why.clone(),
        }),
        Ask::Plan { path, text, plan } => CardParams::Plan(PlanParams {
            meta,
            path: path.clone(),
            plan: plan.clone(),
            session_id,
            text: text.clone(),
            tool_call_id,
        }),
    }
}

/// Read a client's answer. Anything that is not a well-formed answer reads as a denial (an
/// approval) or a dismissal (a question or plan), as the spec says (`wire::card`).
pub(super) fn read_answer(card: &Card, v: &Value, max_mode: Option<Mode>) -> Decision {
    match &card.ask {
        Ask::Permission { always_offered, .. } => {
            let said: PermissionAnswer = answer::read(v);
            Decision::Permission(match said.option() {
                Some("once") => PermissionDecision::AllowOnce {
                    command: said.command(),
                },
                Some("session") if *always_offered => PermissionDecision::AllowAlways,
                Some("deny") => PermissionDecision::Deny {
                    feedback: said.feedback(),
                    timed_out: false,
                },
                _ => PermissionDecision::Deny {
                    feedback: None,
                    timed_out: false,
                },
            })
        }
        Ask::Question { questions, .. } => {
            let dismissed = Decision::Question(QuestionDecision::Dismissed { timed_out: false });
            let said: QuestionAnswers = answer::read(v);
            if said.outcome != Some(QuestionOutcome::Answered) {
                return dismissed;
            }
            let Some(answers) = said.answers.filter(|a| a.len() == questions.len()) else {
                return dismissed;
            };
            let mut out = Vec::new();
            for (q, a) in questions.iter().zip(answers) {
                out.push(match a {
                    QuestionAnswer::Options { labels } => {
                        let mut whole = Vec::new();
                        for l in labels {
                            // The card showed cut labels: give the engine the option's whole one.
                            let Some(o) = q.options.iter().find(|o| cut(&o.label) == l) else {
                                return dismissed;
                            };
                            whole.push(o.label.clone());
                        }
                        QuestionAnswer::Options { labels: whole }
                    }
                    said => said,
                });
            }
            Decision::Question(QuestionDecision::Answered(out))
        }
        Ask::Plan { .. } => {
            let said: PlanAnswer = answer::read(v);
            let dismissed = PlanDecision::Dismissed { timed_out: false };
            Decision::Plan(match (said.outcome, said.mode, said.feedback) {
                // The spec lists edit and manual; issue 15 approves in auto too, lowered like
                // any other. Approving into plan would leave nothing approved: dismissed.
                (Some(PlanOutcome::Approve), Some(mode), _) if mode != Mode::Plan => {
                    let mode = max_mode.map_or(mode, |max| mode.capped(max));
                    if mode < Mode::Manual {
                        // Even manual is beyond the device's limit: nothing is decided.
                        dismissed
                    } else {
                        PlanDecision::Approve { mode }
                    }
                }
                (Some(PlanOutcome::Revise), _, Some(feedback)) => PlanDecision::Revise { feedback },
                _ => dismissed,
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::{Question, QuestionOption};
    use serde_json::json;

    pub(crate) fn question(labels: &[&str]) -> Card {
        Card {
            tool_call_id: "call_1".into(),
            ask: Ask::Question {
                why: None,
                questions: vec![Question {
                    header: "DB".into(),
                    question: "Which?".into(),
                    multiple: false,
                    options: labels
                        .iter()
                        .map(|l| QuestionOption {
                            label: l.to_string(),
                            description: None,
                            recommended: l.starts_with('*'),
                        })
                        .collect(),
                }],
            },
        }
    }

    #[test]
    fn the_recommended_option_goes_first_and_bounds_hold() {
        let mut c = question(&["a", "*b", "c"]);
        check_card(&mut c).unwrap();
        let Ask::Question { questions, .. } = &c.ask else {
            unreachable!()
        };
        assert_eq!(questions[0].options[0].label, "*b");
        let mut c = question(&["1", "2", "3", "4", "5", "6", "7"]);
        assert!(check_card(&mut c).unwrap_err().contains("7 options"));
    }

    #[test]
    fn a_cut_label_answers_with_the_whole_one() {
        let long = "x".repeat(300);
        let c = question(&[&long, "short"]);
        let shown = cut(&long);
        assert_eq!(shown.chars().count(), MAX_LABEL_CHARS);
        let d = read_answer(
            &c,
            &json!({ "outcome": "answered", "answers": [{ "kind": "options", "labels": [shown] }] }),
            None,
        );
        assert_eq!(
            d,
            Decision::Question(QuestionDecision::Answered(vec![QuestionAnswer::Options {
                labels: vec![long]
            }]))
        );
        let d = read_answer(
            &c,
            &json!({ "outcome": "answered", "answers": [{ "kind": "what" }] }),
            None,
        );
        assert_eq!(
            d,
            Decision::Question(QuestionDecision::Dismissed { timed_out: false })
        );
    }

    pub(crate) fn permission(always_offered: bool) -> Card {
        Card {
            tool_call_id: "call_1".into(),
            ask: Ask::Permission {
                title: "npm test".into(),
                kind: "execute".into(),
                raw_input: json!({ "command": "npm test" }),
                always_offered,
                reason: "runs a command".into(),
                purpose: None,
            },
        }
    }

    /// `session/request_permission`: `session` (allow_always) and `_meta.lembas.always: true`
    /// together where "always" is offered, neither where it is not.
    #[test]
    fn an_approval_says_always_exactly_when_allow_always_is_offered() {
        let offered =
            serde_json::to_value(card_params("ses_1", &permission(true), true, None)).unwrap();
        assert_eq!(
            offered,
            json!({
                "sessionId": "ses_1",
                "toolCall": { "toolCallId": "call_1", "title": "npm test", "kind": "execute",
                              "status": "pending", "rawInput": { "command": "npm test" } },
                "options": [
                    { "optionId": "once", "name": "Allow once", "kind": "allow_once" },
                    { "optionId": "session", "name": "Allow always", "kind": "allow_always" },
                    { "optionId": "deny", "name": "Deny", "kind": "reject_once" },
                ],
                "_meta": { "lembas": { "reason": "runs a command", "always": true, "patient": true } },
            })
        );
        let never =
            serde_json::to_value(card_params("ses_1", &permission(false), false, None)).unwrap();
        assert_eq!(
            never["options"],
            json!([
                { "optionId": "once", "name": "Allow once", "kind": "allow_once" },
                { "optionId": "deny", "name": "Deny", "kind": "reject_once" },
            ])
        );
        assert_eq!(
            never["_meta"]["lembas"],
            json!({ "reason": "runs a command" })
        );
    }

    #[test]
    fn plans_are_lowered_and_nothing_is_decided_below_manual() {
        let c = Card {
            tool_call_id: "p".into(),
            ask: Ask::Plan {
                path: "plan.md".into(),
                text: "t".into(),
                plan: None,
            },
        };
        let approve = json!({ "outcome": "approve", "mode": "edit" });
        assert_eq!(
            read_answer(&c, &approve, Some(Mode::Manual)),
            Decision::Plan(PlanDecision::Approve { mode: Mode::Manual })
        );
        assert_eq!(
            read_answer(&c, &approve, Some(Mode::Plan)),
            Decision::Plan(PlanDecision::Dismissed { timed_out: false })
        );
        // Approved in auto: auto where nothing caps it, lowered where max_mode does.
        let auto = json!({ "outcome": "approve", "mode": "auto" });
        assert_eq!(
            read_answer(&c, &auto, None),
            Decision::Plan(PlanDecision::Approve { mode: Mode::Auto })
        );
        assert_eq!(
            read_answer(&c, &auto, Some(Mode::Edit)),
            Decision::Plan(PlanDecision::Approve { mode: Mode::Edit })
        );
        let into_plan = json!({ "outcome": "approve", "mode": "plan" });
        assert_eq!(
            read_answer(&c, &into_plan, None),
            Decision::Plan(PlanDecision::Dismissed { timed_out: false })
        );
    }
}
