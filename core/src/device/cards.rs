//! Cards: approvals (`session/request_permission`), questions (`_lembas/question`) and plans
//! (`_lembas/plan`) put to every connection that holds the session and may be asked. The first
//! answer decides; every other copy is taken down with `_lembas/permission/settled`; a later
//! answer changes nothing. No answer by `remote.approval_timeout` denies or dismisses. A card
//! still open when its link drops is offered again, same `toolCallId`, to the next connection
//! that holds the session. An answer counts only on the connection its request went to, under
//! an id never used before (see `Device::request_id`), and not when it names another card
//! (`wire::card`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::connection::{Connection, RequestIds};
use super::outbox::Outbox;
use super::{ConnId, ConnKind, Device};
use crate::config::Mode;
use crate::engine::{
    Ask, Card, Decision, EngineCommand, PermissionDecision, PlanDecision, QuestionAnswer,
    QuestionDecision, ToolStatus,
};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::time::Time;
use crate::wire::event::card::{
    CardMeta, CardOption, CardParams, CardQuestion, CardToolCall, Patience, PermissionLembas,
    PermissionMeta, PermissionOption, PermissionParams, PlanParams, QuestionParams,
};
use crate::wire::event::notice::SettledParams;

/// The spec's bounds on a question card.
pub const MAX_QUESTIONS: usize = 4;
pub const MAX_OPTIONS: usize = 6;
/// Characters of an option's label shown on the card (the engine is told the whole label).
pub const MAX_LABEL_CHARS: usize = 240;

/// (session id, tool call id): cards are keyed by tool call, several open at once.
pub(crate) type CardKey = (String, String);

#[derive(Debug)]
pub(crate) struct OpenCard {
    pub turn_id: String,
    pub card: Card,
    pub deadline: Time,
    /// The request each connection was sent for it.
    pub asked: BTreeMap<ConnId, Id>,
    /// Whether the session's mode is capped (a plan's approved mode is lowered).
    pub capped: bool,
}

impl OpenCard {
    fn method(&self) -> &'static str {
        match self.card.ask {
            Ask::Permission { .. } => "session/request_permission",
            Ask::Question { .. } => "_lembas/question",
            Ask::Plan { .. } => "_lembas/plan",
        }
    }
}

pub(crate) type Cards = BTreeMap<CardKey, OpenCard>;

/// Whether a person at a terminal holds the session (of `holders`): a card's web copy is
/// then not timed out, since that person may answer.
pub(super) fn holds_terminal(
    holders: &BTreeSet<ConnId>,
    conns: &BTreeMap<ConnId, Connection>,
) -> bool {
    holders
        .iter()
        .any(|h| conns.get(h).is_some_and(|c| c.kind == ConnKind::Terminal))
}

/// Put every open card of `session` to `conn`, which just came to hold it (`c`), where it may
/// be asked and was not yet. `patient`: a terminal holds the session.
pub(super) fn offer_open(
    cards: &mut Cards,
    session: &str,
    conn: ConnId,
    c: &mut Connection,
    patient: bool,
    ids: &mut RequestIds,
    out: &mut Outbox,
) {
    for (key, open) in cards.iter_mut().filter(|((s, _), _)| s == session) {
        offer_one(key, open, conn, c, patient, ids, out);
    }
}

/// Send the card to `conn` if it may be asked and has not been yet.
fn offer_one(
    key: &CardKey,
    open: &mut OpenCard,
    conn: ConnId,
    c: &mut Connection,
    patient: bool,
    ids: &mut RequestIds,
    out: &mut Outbox,
) {
    let method = open.method();
    if open.asked.contains_key(&conn) || !c.may_receive(method) {
        return;
    }
    let params = card_params(&key.0, &open.card, patient);
    let id = ids.next();
    c.expect_answer(id.clone(), method);
    open.asked.insert(conn, id.clone());
    out.send(conn, jsonrpc::encode_request(&id, method, &params));
}

/// The card the device put to `conn` with the request `id`, if it did (and it is still open).
pub(super) fn asked_with(cards: &Cards, conn: ConnId, id: &Id) -> Option<CardKey> {
    cards
        .iter()
        .find(|(_, open)| open.asked.get(&conn) == Some(id))
        .map(|(key, _)| key.clone())
}

fn cut(label: &str) -> String {
    label.chars().take(MAX_LABEL_CHARS).collect()
}

impl Device {
    /// The engine asks a person.
    pub(super) fn ask(&mut self, session: &str, turn: &str, mut card: Card) {
        let key = (session.to_string(), card.tool_call_id.clone());
        if let Err(why) = check_card(&mut card) {
            return self.decide_engine(session, turn, &card.tool_call_id, Decision::Refused(why));
        }
        if self.cards.contains_key(&key) {
            let why = format!(
                "a card with toolCallId `{}` is already open",
                card.tool_call_id
            );
            return self.decide_engine(session, turn, &card.tool_call_id, Decision::Refused(why));
        }
        let capped = self.sessions.get(session).is_some_and(|s| s.capped);
        let deadline = self
            .clock
            .now()
            .plus_ms(self.config.remote.approval_timeout_ms);
        let needs_lembas = !matches!(card.ask, Ask::Permission { .. });
        self.cards.insert(
            key.clone(),
            OpenCard {
                turn_id: turn.to_string(),
                card,
                deadline,
                asked: BTreeMap::new(),
                capped,
            },
        );
        let holders: Vec<ConnId> = self
            .sessions
            .get(session)
            .map(|s| s.holders.iter().copied().collect())
            .unwrap_or_default();
        for conn in holders {
            self.offer(conn, &key);
        }
        // A question or a plan nobody here can be asked is not left waiting: the engine is told.
        if needs_lembas && self.cards.get(&key).is_some_and(|c| c.asked.is_empty()) {
            self.close_card(&key, Decision::NobodyToAsk, None);
        }
    }

    /// Send the card to `conn` if it may be asked and has not been yet.
    fn offer(&mut self, conn: ConnId, key: &CardKey) {
        let patient = self
            .sessions
            .get(&key.0)
            .is_some_and(|s| holds_terminal(&s.holders, &self.conns));
        let (Some(open), Some(c)) = (self.cards.get_mut(key), self.conns.get_mut(&conn)) else {
            return;
        };
        offer_one(
            key,
            open,
            conn,
            c,
            patient,
            &mut self.request_ids,
            &mut self.out,
        );
    }

    /// A connection answered a card's request.
    pub(super) fn card_answered(
        &mut self,
        conn: ConnId,
        key: CardKey,
        outcome: Result<Value, RpcError>,
    ) {
        let Some(open) = self.cards.get_mut(&key) else {
            // Decided already, or taken down: a late answer changes nothing.
            return;
        };
        open.asked.remove(&conn);
        let decision = match outcome {
            Err(e) if e.code == code::METHOD_NOT_FOUND && !is_permission(&open.card) => {
                // That client cannot be asked (it is protocol 1 now); the others still may.
                if open.asked.is_empty() {
                    self.close_card(&key, Decision::NobodyToAsk, None);
                }
                return;
            }
            Err(_) => refusal(&open.card),
            Ok(value) => read_answer(
                &open.card,
                &value,
                open.capped.then_some(self.config.remote.max_mode),
            ),
        };
        self.close_card(&key, decision, Some(conn));
    }

    /// Decide a card: the engine is told, every other copy is taken down.
    fn close_card(&mut self, key: &CardKey, decision: Decision, answered_by: Option<ConnId>) {
        let Some(open) = self.cards.remove(key) else {
            return;
        };
        // An approved plan sets the session's mode (lowered already when the session is
        // capped), not only what the engine is told.
        if let Decision::Plan(PlanDecision::Approve { mode }) = decision {
            self.change_mode(&key.0, mode);
        }
        self.decide_engine(&key.0, &open.turn_id, &key.1, decision);
        self.settle(key, open, answered_by);
    }

    /// Take the card's other copies down, and drop the requests still out for it.
    fn settle(&mut self, key: &CardKey, open: OpenCard, answered_by: Option<ConnId>) {
        let frame = jsonrpc::encode_notification(
            "_lembas/permission/settled",
            &SettledParams {
                session_id: key.0.clone(),
                tool_call_id: key.1.clone(),
            },
        );
        for (conn, id) in open.asked {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            // The answer to that request, should it come, now changes nothing.
            c.pending.remove(&id);
            if Some(conn) != answered_by && c.may_receive("_lembas/permission/settled") {
                self.out.send(conn, frame.clone());
            }
        }
    }

    fn decide_engine(&mut self, session: &str, turn: &str, tool_call_id: &str, decision: Decision) {
        self.out.engine(EngineCommand::Decide {
            session_id: session.to_string(),
            turn_id: turn.to_string(),
            tool_call_id: tool_call_id.to_string(),
            decision,
        });
    }

    /// Cards past their time: denied or dismissed, and taken down everywhere.
    pub(super) fn expire_cards(&mut self, now: Time) {
        let due: Vec<CardKey> = self
            .cards
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let decision = match self.cards[&key].card.ask {
                Ask::Permission { .. } => Decision::Permission(PermissionDecision::Deny {
                    feedback: None,
                    timed_out: true,
                }),
                Ask::Question { .. } => {
                    Decision::Question(QuestionDecision::Dismissed { timed_out: true })
                }
                Ask::Plan { .. } => Decision::Plan(PlanDecision::Dismissed { timed_out: true }),
            };
            self.close_card(&key, decision, None);
        }
    }

    /// A turn ended: its cards are no longer waited for.
    pub(super) fn drop_turn_cards(&mut self, session: &str, turn: &str) {
        let keys: Vec<CardKey> = self
            .cards
            .iter()
            .filter(|((s, _), c)| s == session && c.turn_id == turn)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(open) = self.cards.remove(&key) {
                self.settle(&key, open, None);
            }
        }
    }

    pub(super) fn cards_deadline(&self) -> Option<Time> {
        self.cards.values().map(|c| c.deadline).min()
    }

    /// A connection went away: the cards it was asked stay open for the others and the next.
    pub(super) fn forget_card_requests(&mut self, conn: ConnId) {
        for open in self.cards.values_mut() {
            open.asked.remove(&conn);
        }
    }
}

fn is_permission(card: &Card) -> bool {
    matches!(card.ask, Ask::Permission { .. })
}

/// An error answer: a denial, or a dismissal.
fn refusal(card: &Card) -> Decision {
    match card.ask {
        Ask::Permission { .. } => Decision::Permission(PermissionDecision::Deny {
            feedback: None,
            timed_out: false,
        }),
        Ask::Question { .. } => {
            Decision::Question(QuestionDecision::Dismissed { timed_out: false })
        }
        Ask::Plan { .. } => Decision::Plan(PlanDecision::Dismissed { timed_out: false }),
    }
}

/// The spec's bounds, and the recommended option first.
fn check_card(card: &mut Card) -> Result<(), String> {
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

fn card_params(session: &str, card: &Card, patient: bool) -> CardParams {
    let meta = CardMeta {
        lembas: Patience { patient },
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
/// approval) or a dismissal (a question or plan), as the spec says.
fn read_answer(card: &Card, v: &Value, max_mode: Option<Mode>) -> Decision {
    let text = |v: &Value| v.as_str().map(str::to_string);
    match &card.ask {
        Ask::Permission { always_offered, .. } => {
            let lembas = &v["_meta"]["lembas"];
            let outcome = &v["outcome"];
            let option = (outcome["outcome"] == "selected")
                .then(|| outcome["optionId"].as_str())
                .flatten();
            Decision::Permission(match option {
                Some("once") => PermissionDecision::AllowOnce {
                    command: text(&lembas["command"]),
                },
                Some("session") if *always_offered => PermissionDecision::AllowAlways,
                Some("deny") => PermissionDecision::Deny {
                    feedback: text(&lembas["feedback"]),
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
            if v["outcome"] != "answered" {
                return dismissed;
            }
            let Some(answers) = v["answers"]
                .as_array()
                .filter(|a| a.len() == questions.len())
            else {
                return dismissed;
            };
            let mut out = Vec::new();
            for (q, a) in questions.iter().zip(answers) {
                let answer = match a["kind"].as_str() {
                    Some("options") => {
                        let Some(labels) = a["labels"].as_array() else {
                            return dismissed;
                        };
                        let mut whole = Vec::new();
                        for l in labels {
                            // The card showed cut labels: give the engine the option's whole one.
                            let Some(o) = l
                                .as_str()
                                .and_then(|l| q.options.iter().find(|o| cut(&o.label) == l))
                            else {
                                return dismissed;
                            };
                            whole.push(o.label.clone());
                        }
                        QuestionAnswer::Options { labels: whole }
                    }
                    Some("custom") => match text(&a["text"]) {
                        Some(text) => QuestionAnswer::Custom { text },
                        None => return dismissed,
                    },
                    Some("back") => match text(&a["text"]) {
                        Some(text) => QuestionAnswer::Back { text },
                        None => return dismissed,
                    },
                    Some("skipped") => QuestionAnswer::Skipped,
                    _ => return dismissed,
                };
                out.push(answer);
            }
            Decision::Question(QuestionDecision::Answered(out))
        }
        Ask::Plan { .. } => Decision::Plan(match v["outcome"].as_str() {
            Some("approve") => {
                let mode = match v["mode"].as_str() {
                    Some("edit") => Mode::Edit,
                    Some("manual") => Mode::Manual,
                    _ => return Decision::Plan(PlanDecision::Dismissed { timed_out: false }),
                };
                let mode = max_mode.map_or(mode, |max| mode.capped(max));
                if mode < Mode::Manual {
                    // Even manual is beyond the device's limit: nothing is decided.
                    PlanDecision::Dismissed { timed_out: false }
                } else {
                    PlanDecision::Approve { mode }
                }
            }
            Some("revise") => match text(&v["feedback"]) {
                Some(feedback) => PlanDecision::Revise { feedback },
                None => PlanDecision::Dismissed { timed_out: false },
            },
            _ => PlanDecision::Dismissed { timed_out: false },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Question, QuestionOption};
    use serde_json::json;

    fn question(labels: &[&str]) -> Card {
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
    fn a_card_is_answered_only_by_the_connection_and_id_it_was_asked_with() {
        let (web, terminal) = (ConnId(1), ConnId(2));
        let open = |asked: &[(ConnId, &str)]| OpenCard {
            turn_id: "t".into(),
            card: question(&["a"]),
            deadline: Time(0),
            asked: asked.iter().map(|(c, id)| (*c, Id::string(id))).collect(),
            capped: false,
        };
        let mut cards = Cards::new();
        cards.insert(
            ("s".into(), "call_1".into()),
            open(&[(web, "0-1"), (terminal, "0-2")]),
        );
        cards.insert(("s".into(), "call_2".into()), open(&[(web, "0-3")]));
        let key = |call: &str| Some(("s".to_string(), call.to_string()));
        assert_eq!(asked_with(&cards, web, &Id::string("0-1")), key("call_1"));
        assert_eq!(
            asked_with(&cards, terminal, &Id::string("0-2")),
            key("call_1")
        );
        assert_eq!(asked_with(&cards, web, &Id::string("0-3")), key("call_2"));
        // The id another connection was asked with, or none at all, answers nothing.
        assert_eq!(asked_with(&cards, terminal, &Id::string("0-1")), None);
        assert_eq!(asked_with(&cards, web, &Id::string("0-9")), None);
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

    fn permission(always_offered: bool) -> Card {
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
        let offered = serde_json::to_value(card_params("ses_1", &permission(true), true)).unwrap();
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
        let never = serde_json::to_value(card_params("ses_1", &permission(false), false)).unwrap();
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
    }
}
