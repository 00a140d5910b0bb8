//! The scripted engine: deterministic, driven by the prompt's own text, so tests, the demo and
//! a web UI's harness get an engine that behaves the same everywhere. Sans-IO like the rest:
//! it takes turns and time, and hands back engine events.
//!
//! A prompt without directive lines is answered `echo: <text>`. Otherwise each line is a step:
//! `say <text>`, `think <text>`, `sleep <ms>`, `tool <title>` (a tool call, then its completed
//! update), `chunks <n> <bytes>` (n text chunks of that many bytes), `fail <message>`,
//! `permit <title>` (an approval card; then says `allowed`, `allowed always`,
//! `allowed with: <command>`, `denied`, `denied: <feedback>` or `dismissed`),
//! `ask <question> | <option> | <option> …` (a question card; then says `answer: <labels or text>`
//! or `dismissed`), `plan <title>` (a plan card; then says `approved <mode>`, `revise: <feedback>`
//! or `dismissed`); any other line is said as it is. While a card is open the turn waits.
//! Steered messages are taken in between steps and said as `steered: <text>`.

use std::collections::{BTreeMap, VecDeque};

use crate::device::Effect;
use crate::engine::{
    Ask, Card, Decision, EngineEvent, PermissionDecision, PlanDecision, Question, QuestionAnswer,
    QuestionDecision, QuestionOption, StopReason, ToolStatus, TurnStart,
};
use crate::time::Time;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Say(String),
    Think(String),
    Sleep(u64),
    Tool(String),
    Chunks(u32, usize),
    Fail(String),
    Permit(String),
    Ask(String, Vec<String>),
    Plan(String),
}

const DIRECTIVES: [&str; 9] = [
    "say", "think", "sleep", "tool", "chunks", "fail", "permit", "ask", "plan",
];

fn parse(text: &str) -> VecDeque<Step> {
    let directive = |line: &str| {
        let word = line.split_whitespace().next().unwrap_or("");
        DIRECTIVES.contains(&word)
    };
    if !text.lines().any(directive) {
        return VecDeque::from([Step::Say(format!("echo: {text}"))]);
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (word, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
            let rest = rest.trim().to_string();
            match word {
                "say" => Step::Say(rest),
                "think" => Step::Think(rest),
                "sleep" => rest
                    .parse()
                    .map_or(Step::Say(line.to_string()), Step::Sleep),
                "tool" => Step::Tool(rest),
                "fail" => Step::Fail(rest),
                "permit" => Step::Permit(rest),
                "plan" => Step::Plan(rest),
                "ask" => {
                    let mut parts = rest.split('|').map(|p| p.trim().to_string());
                    let question = parts.next().unwrap_or_default();
                    Step::Ask(question, parts.filter(|p| !p.is_empty()).collect())
                }
                "chunks" => {
                    let mut it = rest.split_whitespace().map(str::parse::<usize>);
                    match (it.next(), it.next()) {
                        (Some(Ok(n)), Some(Ok(b))) => {
                            Step::Chunks(n.min(100_000) as u32, b.min(65_536))
                        }
                        _ => Step::Say(line.to_string()),
                    }
                }
                _ => Step::Say(line.to_string()),
            }
        })
        .collect()
}

#[derive(Debug)]
struct Run {
    steps: VecDeque<Step>,
    next_at: Time,
    steer: Vec<(u64, String)>,
    tools: u32,
    /// The card the turn waits on.
    waiting: Option<String>,
}

/// Events the engine reports, for the session and turn they belong to.
pub type Report = (String, String, EngineEvent);

#[derive(Debug, Default)]
pub struct ScriptedEngine {
    runs: BTreeMap<(String, String), Run>,
    out: VecDeque<Report>,
}

impl ScriptedEngine {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn start(&mut self, turn: &TurnStart, now: Time) {
        let key = (turn.session_id.clone(), turn.turn_id.clone());
        self.runs.insert(
            key,
            Run {
                steps: parse(&turn.text),
                next_at: now,
                steer: Vec::new(),
                tools: 0,
                waiting: None,
            },
        );
        self.handle_timeout(now);
    }

    /// Stop a turn at once: it reports `Done(Cancelled)`.
    pub fn cancel(&mut self, session: &str, turn: &str) {
        let key = (session.to_string(), turn.to_string());
        if self.runs.remove(&key).is_some() {
            self.out
                .push_back((key.0, key.1, EngineEvent::Done(StopReason::Cancelled)));
        }
    }

    pub fn steer(&mut self, session: &str, turn: &str, id: u64, text: &str) {
        if let Some(run) = self.runs.get_mut(&(session.to_string(), turn.to_string())) {
            run.steer.push((id, text.to_string()));
        }
    }

    /// A card the turn put was decided: say so, and go on.
    pub fn decide(
        &mut self,
        session: &str,
        turn: &str,
        tool_call_id: &str,
        decision: &Decision,
        now: Time,
    ) {
        let key = (session.to_string(), turn.to_string());
        let Some(run) = self.runs.get_mut(&key) else {
            return;
        };
        if run.waiting.as_deref() != Some(tool_call_id) {
            return;
        }
        run.waiting = None;
        run.next_at = now;
        let said = say_decision(decision);
        self.out
            .push_back((key.0.clone(), key.1.clone(), EngineEvent::Text(said)));
        self.advance(&key, now);
    }

    /// Stop every running turn (the shell is shutting down): each reports `Done(Cancelled)`.
    pub fn cancel_all(&mut self) {
        let keys: Vec<(String, String)> = self.runs.keys().cloned().collect();
        for (session, turn) in keys {
            self.cancel(&session, &turn);
        }
    }

    /// Perform one of the device's engine effects (`StartTurn`, `CancelTurn`, `Steer`,
    /// `CardDecided`): what every shell that runs this engine does with them. Returns false,
    /// doing nothing, for any other effect.
    pub fn perform(&mut self, effect: &Effect, now: Time) -> bool {
        match effect {
            Effect::StartTurn(turn) => self.start(turn, now),
            Effect::CancelTurn {
                session_id,
                turn_id,
            } => self.cancel(session_id, turn_id),
            Effect::Steer {
                session_id,
                turn_id,
                id,
                text,
            } => self.steer(session_id, turn_id, *id, text),
            Effect::CardDecided {
                session_id,
                turn_id,
                tool_call_id,
                decision,
            } => self.decide(session_id, turn_id, tool_call_id, decision, now),
            _ => return false,
        }
        true
    }

    /// Forget every run (the process died).
    pub fn clear(&mut self) {
        self.runs.clear();
        self.out.clear();
    }

    pub fn handle_timeout(&mut self, now: Time) {
        let keys: Vec<(String, String)> = self.runs.keys().cloned().collect();
        for key in keys {
            self.advance(&key, now);
        }
    }

    fn advance(&mut self, key: &(String, String), now: Time) {
        let report = |out: &mut VecDeque<Report>, e: EngineEvent| {
            out.push_back((key.0.clone(), key.1.clone(), e));
        };
        loop {
            let Some(run) = self.runs.get_mut(key) else {
                return;
            };
            if run.next_at > now || run.waiting.is_some() {
                return;
            }
            if !run.steer.is_empty() {
                let taken: Vec<(u64, String)> = std::mem::take(&mut run.steer);
                report(
                    &mut self.out,
                    EngineEvent::Steered {
                        ids: taken.iter().map(|(id, _)| *id).collect(),
                    },
                );
                for (_, text) in taken {
                    report(
                        &mut self.out,
                        EngineEvent::Text(format!("steered: {text}\n")),
                    );
                }
            }
            let Some(step) = run.steps.pop_front() else {
                self.runs.remove(key);
                report(&mut self.out, EngineEvent::Done(StopReason::EndTurn));
                return;
            };
            match step {
                Step::Say(t) => report(&mut self.out, EngineEvent::Text(t)),
                Step::Think(t) => report(&mut self.out, EngineEvent::Thought(t)),
                Step::Sleep(ms) => run.next_at = now.plus_ms(ms),
                Step::Tool(title) => {
                    run.tools += 1;
                    let id = format!("call_{}", run.tools);
                    report(
                        &mut self.out,
                        EngineEvent::ToolCall {
                            id: id.clone(),
                            title: title.clone(),
                            kind: "other".into(),
                            raw_input: serde_json::json!({ "title": title }),
                        },
                    );
                    report(
                        &mut self.out,
                        EngineEvent::ToolCallUpdate {
                            id,
                            status: ToolStatus::Completed,
                            output: Some(format!("{title}: done")),
                        },
                    );
                }
                Step::Chunks(n, bytes) => {
                    for _ in 0..n {
                        report(&mut self.out, EngineEvent::Text("x".repeat(bytes)));
                    }
                }
                Step::Permit(_) | Step::Ask(..) | Step::Plan(_) => {
                    run.tools += 1;
                    let tool_call_id = format!("call_{}", run.tools);
                    run.waiting = Some(tool_call_id.clone());
                    let ask = match step {
                        Step::Permit(title) => Ask::Permission {
                            raw_input: serde_json::json!({ "command": title }),
                            title,
                            kind: "execute".into(),
                            always_offered: true,
                            reason: "the script asks".into(),
                            purpose: None,
                        },
                        Step::Ask(question, options) => Ask::Question {
                            why: None,
                            questions: vec![Question {
                                header: "Question".into(),
                                question,
                                multiple: false,
                                options: options
                                    .into_iter()
                                    .map(|label| QuestionOption {
                                        label,
                                        description: None,
                                        recommended: false,
                                    })
                                    .collect(),
                            }],
                        },
                        Step::Plan(title) => Ask::Plan {
                            path: "plan.md".into(),
                            text: format!("# {title}"),
                            plan: Some(
                                serde_json::json!({ "version": 1, "title": title, "phases": [] }),
                            ),
                        },
                        _ => unreachable!("matched above"),
                    };
                    report(&mut self.out, EngineEvent::Ask(Card { tool_call_id, ask }));
                    return;
                }
                Step::Fail(message) => {
                    self.runs.remove(key);
                    report(&mut self.out, EngineEvent::Failed(message));
                    return;
                }
            }
        }
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Report> {
        self.out.pop_front()
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        // A run waiting on a card has nothing to do until it is decided.
        self.runs
            .values()
            .filter(|r| r.waiting.is_none())
            .map(|r| r.next_at)
            .min()
    }

    /// Turns running now.
    pub fn running(&self) -> usize {
        self.runs.len()
    }
}

/// What the script says about a decided card.
fn say_decision(d: &Decision) -> String {
    match d {
        Decision::Permission(PermissionDecision::AllowOnce { command: Some(c) }) => {
            format!("allowed with: {c}")
        }
        Decision::Permission(PermissionDecision::AllowOnce { command: None }) => "allowed".into(),
        Decision::Permission(PermissionDecision::AllowAlways) => "allowed always".into(),
        Decision::Permission(PermissionDecision::Deny {
            feedback: Some(f), ..
        }) => {
            format!("denied: {f}")
        }
        Decision::Permission(PermissionDecision::Deny { feedback: None, .. }) => "denied".into(),
        Decision::Question(QuestionDecision::Answered(answers)) => {
            let parts: Vec<String> = answers
                .iter()
                .map(|a| match a {
                    QuestionAnswer::Options { labels } => labels.join(", "),
                    QuestionAnswer::Custom { text } | QuestionAnswer::Back { text } => text.clone(),
                    QuestionAnswer::Skipped => "(skipped)".into(),
                })
                .collect();
            format!("answer: {}", parts.join("; "))
        }
        Decision::Plan(PlanDecision::Approve { mode }) => format!("approved {}", mode.as_str()),
        Decision::Plan(PlanDecision::Revise { feedback }) => format!("revise: {feedback}"),
        Decision::Question(QuestionDecision::Dismissed { .. })
        | Decision::Plan(PlanDecision::Dismissed { .. }) => "dismissed".into(),
        Decision::NobodyToAsk => "nobody can be asked".into(),
        Decision::Refused(why) => format!("refused: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_echoed_and_directives_are_steps() {
        assert_eq!(
            parse("hello"),
            VecDeque::from([Step::Say("echo: hello".into())])
        );
        assert_eq!(
            parse("say a\nsleep 50\nthink b\nchunks 2 3"),
            VecDeque::from([
                Step::Say("a".into()),
                Step::Sleep(50),
                Step::Think("b".into()),
                Step::Chunks(2, 3)
            ])
        );
    }
}
