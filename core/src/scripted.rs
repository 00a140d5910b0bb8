//! The scripted engine: deterministic, driven by the prompt's own text, so tests, the demo and
//! a web UI's harness get an engine that behaves the same everywhere. Sans-IO like the rest:
//! it takes turns and time, and hands back engine events.
//!
//! A prompt without directive lines is answered `echo: <text>`. Otherwise each line is a step:
//! `say <text>`, `think <text>`, `sleep <ms>`, `tool <title>` (a tool call, then its completed
//! update), `chunks <n> <bytes>` (n text chunks of that many bytes), `fail <message>`; any other
//! line is said as it is. Steered messages are taken in between steps and said as
//! `steered: <text>`.

use std::collections::{BTreeMap, VecDeque};

use crate::engine::{EngineEvent, StopReason, ToolStatus, TurnStart};
use crate::time::Time;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Say(String),
    Think(String),
    Sleep(u64),
    Tool(String),
    Chunks(u32, usize),
    Fail(String),
}

const DIRECTIVES: [&str; 6] = ["say", "think", "sleep", "tool", "chunks", "fail"];

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
            if run.next_at > now {
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
        self.runs.values().map(|r| r.next_at).min()
    }

    /// Turns running now.
    pub fn running(&self) -> usize {
        self.runs.len()
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
