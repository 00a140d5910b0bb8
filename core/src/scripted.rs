//! The scripted engine: deterministic, driven by the prompt's own text, so tests, the demo and
//! a web UI's harness get an engine that behaves the same everywhere. Sans-IO like the rest:
//! it takes turns and time, and hands back engine events.
//!
//! A prompt without directive lines is answered `echo: <text>`. Otherwise each line is a step:
//! `say <text>`, `think <text>`, `sleep <ms>`, `tool <title>` (a tool call, then its completed
//! update), `chunks <n> <bytes>` (n text chunks of that many bytes, each beginning with its
//! 0-based number in ten digits, then `x`s), `fail <message>`,
//! `permit <title>` (an approval card; then says `allowed`, `allowed always`,
//! `allowed with: <command>`, `denied`, `denied: <feedback>` or `dismissed`),
//! `ask <question> | <option> | <option> …` (a question card; then says `answer: <labels or text>`
//! or `dismissed`), `plan <title>` (a plan card; then says `approved <mode>`, `revise: <feedback>`
//! or `dismissed`); any other line is said as it is. While a card is open the turn waits.
//! Steered messages are taken in between steps and said as `steered: <text>`. A compaction
//! (`TurnStart::compact`) says `summary: ` and what it folds, each turn as `<prompt> => <answer>`.
//!
//! Like a model streaming its answer, the engine makes a chunk only when it is polled for one:
//! a shell that stops polling a session (`poll_event_unless`, while a holder of the session is
//! not reading) holds its turn where it is, and nothing piles up in between.

use std::collections::VecDeque;

pub use crate::engine::Report;
use crate::engine::{
    Ask, Card, Decision, Engine, EngineCommand, EngineEvent, PermissionDecision, PlanDecision,
    Question, QuestionAnswer, QuestionDecision, QuestionOption, StopReason, ToolStatus, TurnStart,
};
use crate::engine_io::{IoCall, IoId, IoReply};
use crate::time::Time;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Say(String),
    Think(String),
    Sleep(u64),
    Tool(String),
    /// `n` chunks of `bytes`, the next numbered `next`.
    Chunks {
        next: u32,
        n: u32,
        bytes: usize,
    },
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
                        (Some(Ok(n)), Some(Ok(b))) => chunks(n, b),
                        _ => Step::Say(line.to_string()),
                    }
                }
                _ => Step::Say(line.to_string()),
            }
        })
        .collect()
}

/// A compaction's summary, made from what it folds alone: the summary before it, then each
/// turn's prompt and answer (`summary: earlier: <summary> | <prompt> => <answer> | …`).
fn summary_of(turn: &TurnStart) -> String {
    let mut parts: Vec<String> = turn
        .summary
        .iter()
        .map(|s| format!("earlier: {s}"))
        .collect();
    parts.extend(
        turn.history
            .iter()
            .map(|t| format!("{} => {}", t.prompt, t.answer)),
    );
    format!("summary: {}", parts.join(" | "))
}

/// The largest chunk `chunks` makes: one chunk is one frame, well inside every frame limit.
/// The count needs no bound of its own: chunks are made one a poll, as the reader takes them.
const MAX_CHUNK_BYTES: usize = 65_536;

/// A `chunks <n> <bytes>` step, or a failed turn naming the bound it is over (never a silent
/// clamp: a test asking for 200,000 chunks gets them or is told why not).
fn chunks(n: usize, bytes: usize) -> Step {
    if bytes > MAX_CHUNK_BYTES {
        return Step::Fail(format!(
            "chunks: {bytes} bytes a chunk is over the scripted engine's limit of {MAX_CHUNK_BYTES}"
        ));
    }
    match u32::try_from(n) {
        Ok(n) => Step::Chunks { next: 0, n, bytes },
        Err(_) => Step::Fail(format!(
            "chunks: {n} chunks is over the scripted engine's limit of {}",
            u32::MAX
        )),
    }
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

impl Run {
    /// Whether it has a step to take at `now` (so a poll makes its next event).
    fn ready(&self, now: Time) -> bool {
        self.waiting.is_none() && self.next_at <= now
    }
}

/// A run's key: its session and turn.
type Key = (String, String);

#[derive(Debug, Default)]
pub struct ScriptedEngine {
    /// The runs in key order.
    runs: Vec<(Key, Run)>,
    /// Where the runs after the one that took the last step begin: the next poll looks at
    /// them first, so turns running at once take turns, as a model's streams do, rather than
    /// the first in order streaming whole before the next starts. Kept as a place, not a key
    /// looked up each poll (with 100 turns at once, a chunk cost a search of the runs by two
    /// strings and a clone of both).
    cursor: Cursor,
    out: VecDeque<Report>,
    /// The latest time given: a run ready by then makes its next step when polled.
    now: Time,
    /// Scripts for the next turns, one each in order, in place of their prompts' text: a
    /// harness scripting what its device answers whatever a web UI sends. Given once, so it
    /// only shrinks.
    replies: VecDeque<String>,
}

/// The place of the run that took the last step, `last`, among the runs in key order: the
/// runs before `next` are at or before it, those from `next` on after it. The position moves as
/// runs come and go, so every poll finds the runs after `last` without comparing keys.
#[derive(Debug, Default)]
struct Cursor {
    next: usize,
    /// A run has taken a step (else every run is after `last`).
    stepped: bool,
    /// `last`'s key once its run is gone (it ended, or was cancelled): a run started later
    /// at or before that key goes before the cursor. While its run is there, it is the one
    /// just before `next`.
    gone: Option<Key>,
}

impl ScriptedEngine {
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, key: &(&str, &str)) -> Result<usize, usize> {
        self.runs
            .binary_search_by(|((s, t), _)| (s.as_str(), t.as_str()).cmp(key))
    }

    /// Put `run` in its place by key (in place of a run with the same key), the cursor kept
    /// on the same runs.
    fn insert(&mut self, key: Key, run: Run) {
        let at = match self.find(&(key.0.as_str(), key.1.as_str())) {
            Ok(at) => {
                self.runs[at].1 = run;
                return;
            }
            Err(at) => at,
        };
        let c = &mut self.cursor;
        // At the cursor, it is after `last` unless `last` is gone and it is at or before it.
        let before_cursor =
            at < c.next || (at == c.next && c.gone.as_ref().is_some_and(|g| key <= *g));
        if before_cursor {
            c.next += 1;
            if c.gone.as_ref() == Some(&key) {
                // `last`'s key is back, just before the cursor.
                c.gone = None;
            }
        }
        self.runs.insert(at, (key, run));
    }

    /// Take the run at `at` out, the cursor kept on the same runs.
    fn remove(&mut self, at: usize) -> (Key, Run) {
        let removed = self.runs.remove(at);
        let c = &mut self.cursor;
        if at < c.next {
            if at + 1 == c.next && c.stepped && c.gone.is_none() {
                // `last` itself: its key is kept to place runs started later.
                c.gone = Some(removed.0.clone());
            }
            c.next -= 1;
        }
        removed
    }

    /// Answer the next turns with `replies`, one each, whatever their prompts say (replacing
    /// those not used yet); past them a prompt's own text is its script again.
    pub fn set_replies(&mut self, replies: Vec<String>) {
        self.replies = replies.into();
    }

    pub fn start(&mut self, turn: &TurnStart, now: Time) {
        self.now = self.now.max(now);
        let key = (turn.session_id.clone(), turn.turn_id.clone());
        // A compaction is no prompt: it takes no scripted reply, and says its summary.
        let steps = if turn.compact {
            VecDeque::from([Step::Say(summary_of(turn))])
        } else {
            let script = self.replies.pop_front();
            parse(script.as_deref().unwrap_or(&turn.text))
        };
        self.insert(
            key,
            Run {
                steps,
                next_at: now,
                steer: Vec::new(),
                tools: 0,
                waiting: None,
            },
        );
    }

    /// Stop a turn at once: it reports `Done(Cancelled)`.
    pub fn cancel(&mut self, session: &str, turn: &str) {
        if let Ok(at) = self.find(&(session, turn)) {
            let (key, _) = self.remove(at);
            self.out
                .push_back((key.0, key.1, EngineEvent::Done(StopReason::Cancelled)));
        }
    }

    pub fn steer(&mut self, session: &str, turn: &str, id: u64, text: &str) {
        if let Ok(at) = self.find(&(session, turn)) {
            self.runs[at].1.steer.push((id, text.to_string()));
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
        self.now = self.now.max(now);
        let Ok(at) = self.find(&(session, turn)) else {
            return;
        };
        let run = &mut self.runs[at].1;
        if run.waiting.as_deref() != Some(tool_call_id) {
            return;
        }
        run.waiting = None;
        run.next_at = now;
        let said = say_decision(decision);
        self.out
            .push_back((session.into(), turn.into(), EngineEvent::Text(said)));
    }

    /// Stop every running turn (the shell is shutting down): each reports `Done(Cancelled)`.
    pub fn cancel_all(&mut self) {
        let keys: Vec<Key> = self.runs.iter().map(|(k, _)| k.clone()).collect();
        for (session, turn) in keys {
            self.cancel(&session, &turn);
        }
    }

    /// Forget every run (the process died).
    pub fn clear(&mut self) {
        while !self.runs.is_empty() {
            self.remove(self.runs.len() - 1);
        }
        self.out.clear();
    }

    /// The run at `at` takes its steps up to its next event.
    fn advance(&mut self, at: usize, now: Time) {
        let report = |out: &mut VecDeque<Report>, key: &Key, e: EngineEvent| {
            out.push_back((key.0.clone(), key.1.clone(), e));
        };
        loop {
            let (key, run) = &mut self.runs[at];
            let key = &*key;
            if run.next_at > now || run.waiting.is_some() {
                return;
            }
            if !run.steer.is_empty() {
                let taken: Vec<(u64, String)> = std::mem::take(&mut run.steer);
                report(
                    &mut self.out,
                    key,
                    EngineEvent::Steered {
                        ids: taken.iter().map(|(id, _)| *id).collect(),
                    },
                );
                for (_, text) in taken {
                    report(
                        &mut self.out,
                        key,
                        EngineEvent::Text(format!("steered: {text}\n")),
                    );
                }
            }
            let Some(step) = run.steps.pop_front() else {
                report(&mut self.out, key, EngineEvent::Done(StopReason::EndTurn));
                self.remove(at);
                return;
            };
            match step {
                Step::Say(t) => report(&mut self.out, key, EngineEvent::Text(t)),
                Step::Think(t) => report(&mut self.out, key, EngineEvent::Thought(t)),
                Step::Sleep(ms) => run.next_at = now.plus_ms(ms),
                Step::Tool(title) => {
                    run.tools += 1;
                    let id = format!("call_{}", run.tools);
                    report(
                        &mut self.out,
                        key,
                        EngineEvent::ToolCall {
                            id: id.clone(),
                            title: title.clone(),
                            kind: "other".into(),
                            raw_input: serde_json::json!({ "title": title }),
                        },
                    );
                    report(
                        &mut self.out,
                        key,
                        EngineEvent::ToolCallUpdate {
                            id,
                            status: ToolStatus::Completed,
                            output: Some(format!("{title}: done")),
                            diff: None,
                        },
                    );
                }
                Step::Chunks { next, n, bytes } => {
                    if next >= n {
                        continue;
                    }
                    report(
                        &mut self.out,
                        key,
                        EngineEvent::Text(numbered_chunk(next, bytes)),
                    );
                    if next + 1 < n {
                        run.steps.push_front(Step::Chunks {
                            next: next + 1,
                            n,
                            bytes,
                        });
                    }
                    // One chunk a poll: the next is made when it is asked for.
                    return;
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
                    report(
                        &mut self.out,
                        key,
                        EngineEvent::Ask(Card { tool_call_id, ask }),
                    );
                    return;
                }
                Step::Fail(message) => {
                    report(&mut self.out, key, EngineEvent::Failed(message));
                    self.remove(at);
                    return;
                }
            }
        }
    }

    /// The next event of any session.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Report> {
        self.poll_event_unless(&mut |_| false)
    }

    /// When a sleeping run wakes. A run ready now needs no timer (a poll makes its next
    /// event), and one waiting on a card has nothing to do until it is decided.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        self.runs
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.waiting.is_none() && r.next_at > self.now)
            .map(|r| r.next_at)
            .min()
    }

    /// Time passed: sleeping runs that are due take their next step when polled.
    pub fn handle_timeout(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    /// Turns running now.
    pub fn running(&self) -> usize {
        self.runs.len()
    }
}

impl Engine for ScriptedEngine {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        match command {
            EngineCommand::Start(turn) => self.start(&turn, now),
            EngineCommand::Cancel {
                session_id,
                turn_id,
            } => self.cancel(&session_id, &turn_id),
            EngineCommand::Steer {
                session_id,
                turn_id,
                id,
                text,
            } => self.steer(&session_id, &turn_id, id, &text),
            EngineCommand::Decide {
                session_id,
                turn_id,
                tool_call_id,
                decision,
            } => self.decide(&session_id, &turn_id, &tool_call_id, &decision, now),
        }
    }

    /// Like a model streaming its answer, a run makes its next step only when polled, so a
    /// paused session's turn stays where it is and nothing piles up in between.
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        loop {
            if let Some(i) = self.out.iter().position(|(s, _, _)| !paused(s)) {
                return self.out.remove(i);
            }
            // Nothing made yet: a ready run takes its next step (which reports something,
            // sleeps, waits on a card, or ends).
            let now = self.now;
            // The runs after the last, then those up to it.
            let next = self.cursor.next;
            let at = (next..self.runs.len()).chain(0..next).find(|&i| {
                let ((session, _), run) = &self.runs[i];
                run.ready(now) && !paused(session)
            })?;
            self.cursor = Cursor {
                next: at + 1,
                stepped: true,
                gone: None,
            };
            self.advance(at, now);
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        ScriptedEngine::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Time) {
        ScriptedEngine::handle_timeout(self, now)
    }

    /// A scripted turn needs nothing from the shell.
    fn poll_io(&mut self) -> Option<IoCall> {
        None
    }

    /// Never asked for anything, so nothing comes back.
    fn handle_io(&mut self, _id: IoId, _reply: IoReply, _now: Time) {}

    fn cancel_all(&mut self) {
        ScriptedEngine::cancel_all(self)
    }

    fn forget_all(&mut self) {
        self.clear()
    }

    fn running(&self) -> usize {
        ScriptedEngine::running(self)
    }
}

/// Chunk `index` of `bytes`: its number in ten digits (the last ones, in a smaller chunk),
/// then `x`s, so a reader can tell that every chunk came, in order.
fn numbered_chunk(index: u32, bytes: usize) -> String {
    let number = format!("{index:010}");
    let mut text = number[number.len().saturating_sub(bytes)..].to_string();
    text.extend(std::iter::repeat_n('x', bytes - text.len()));
    text
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
                Step::Chunks {
                    next: 0,
                    n: 2,
                    bytes: 3
                }
            ])
        );
    }

    #[test]
    fn chunks_past_a_bound_fail_the_turn_naming_it_instead_of_clamping() {
        assert_eq!(
            parse("chunks 200000 4096"),
            VecDeque::from([Step::Chunks {
                next: 0,
                n: 200_000,
                bytes: 4096
            }])
        );
        let steps = Vec::from(parse("chunks 2 70000"));
        let [Step::Fail(message)] = steps.as_slice() else {
            panic!("a chunk over the limit is not a failed turn: {steps:?}");
        };
        assert!(
            message.contains("70000") && message.contains("65536"),
            "{message}"
        );
        let steps = Vec::from(parse("chunks 5000000000 8"));
        let [Step::Fail(message)] = steps.as_slice() else {
            panic!("a count over the limit is not a failed turn: {steps:?}");
        };
        assert!(message.contains("5000000000"), "{message}");
    }

    fn turn(session: &str, text: &str) -> TurnStart {
        TurnStart {
            session_id: session.into(),
            turn_id: "t".into(),
            text: text.into(),
            attachments: Vec::new(),
            context: Default::default(),
            mode: crate::config::Mode::Edit,
            model: None,
            effort: None,
            cwd: "/".into(),
            roots: Vec::new(),
            history: Vec::new(),
            summary: None,
            compact: false,
        }
    }

    fn text(event: &EngineEvent) -> &str {
        match event {
            EngineEvent::Text(t) => t,
            other => panic!("not text: {other:?}"),
        }
    }

    #[test]
    fn replies_script_the_next_turns_in_order_then_prompts_script_themselves() {
        let mut engine = ScriptedEngine::new();
        engine.set_replies(vec!["say first".into(), "think hmm\nsay second".into()]);
        let mut said = Vec::new();
        for (session, prompt) in [("a", "anything"), ("b", "say ignored"), ("c", "say own")] {
            engine.start(&turn(session, prompt), Time(0));
            while let Some((_, _, e)) = engine.poll_event() {
                if let EngineEvent::Text(t) | EngineEvent::Thought(t) = e {
                    said.push(t);
                }
            }
        }
        assert_eq!(said, ["first", "hmm", "second", "own"]);
    }

    #[test]
    fn chunks_are_numbered_and_made_one_a_poll() {
        let mut engine = ScriptedEngine::new();
        engine.start(&turn("s", "chunks 3 12\nsay end"), Time(0));
        let first = engine.poll_event().unwrap();
        assert_eq!(text(&first.2), "0000000000xx");
        assert!(
            engine.out.is_empty(),
            "nothing is made before it is asked for"
        );
        let said: Vec<String> = std::iter::from_fn(|| engine.poll_event())
            .map(|(_, _, e)| match e {
                EngineEvent::Done(_) => "done".to_string(),
                e => text(&e).to_string(),
            })
            .collect();
        assert_eq!(said, ["0000000001xx", "0000000002xx", "end", "done"]);
        assert_eq!(numbered_chunk(12345, 3), "345");
        assert_eq!(engine.poll_timeout(), None, "nothing left to wake for");
    }

    /// Turns streaming at once take turns a chunk each, as a model's streams do, rather than
    /// the first in order streaming whole before the next one starts.
    #[test]
    fn turns_streaming_at_once_take_turns() {
        let mut engine = ScriptedEngine::new();
        for session in ["a", "b", "c"] {
            engine.start(&turn(session, "chunks 2 8"), Time(0));
        }
        let order: Vec<String> = std::iter::from_fn(|| engine.poll_event())
            .filter(|(_, _, e)| matches!(e, EngineEvent::Text(_)))
            .map(|(s, _, _)| s)
            .collect();
        assert_eq!(order, ["a", "b", "c", "a", "b", "c"]);
    }

    /// The order turns take their steps in, as the engine kept it when it looked the last run
    /// up by key each poll: the runs after it in key order, then those up to it; a run gone
    /// (ended, cancelled, cleared) still places the runs started after it.
    #[derive(Default)]
    struct ByKey {
        runs: std::collections::BTreeMap<Key, u32>,
        last: Option<Key>,
        out: VecDeque<(String, String, &'static str)>,
    }

    impl ByKey {
        fn poll(
            &mut self,
            paused: &dyn Fn(&str) -> bool,
        ) -> Option<(String, String, &'static str)> {
            use std::ops::Bound::{Excluded, Unbounded};
            if let Some(i) = self.out.iter().position(|(s, _, _)| !paused(s)) {
                return self.out.remove(i);
            }
            let (after, up_to) = match &self.last {
                Some(last) => (
                    self.runs.range::<Key, _>((Excluded(last), Unbounded)),
                    self.runs.range::<Key, _>(..=last),
                ),
                None => (self.runs.range(..), Default::default()),
            };
            let key = after
                .chain(up_to)
                .map(|(k, _)| k)
                .find(|k| !paused(&k.0))?
                .clone();
            self.last = Some(key.clone());
            let left = self.runs.get_mut(&key).unwrap();
            if *left > 0 {
                *left -= 1;
                return Some((key.0, key.1, "chunk"));
            }
            self.runs.remove(&key);
            Some((key.0, key.1, "end"))
        }
    }

    fn kind(e: &EngineEvent) -> &'static str {
        match e {
            EngineEvent::Text(_) => "chunk",
            EngineEvent::Done(StopReason::EndTurn) => "end",
            EngineEvent::Done(StopReason::Cancelled) => "cancelled",
            other => panic!("not scripted here: {other:?}"),
        }
    }

    /// Turns started, cancelled and cleared while others stream, some sessions paused: the
    /// engine takes its steps in exactly the order a lookup of the last run by key gave (the
    /// place it keeps instead moves as runs come and go).
    #[test]
    fn turns_take_turns_in_key_order_as_runs_come_and_go() {
        for seed in 1..=40u64 {
            let mut state = seed;
            let mut roll = |n: u64| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 33) % n
            };
            let mut engine = ScriptedEngine::new();
            let mut model = ByKey::default();
            for step in 0..600 {
                let session = format!("s{}", roll(5));
                let turn_id = format!("t{}", roll(2));
                match roll(10) {
                    0 | 1 => {
                        let n = roll(4) as u32;
                        let mut start = turn(&session, &format!("chunks {n} 4"));
                        start.turn_id = turn_id.clone();
                        engine.start(&start, Time(0));
                        model.runs.insert((session, turn_id), n);
                    }
                    2 => {
                        engine.cancel(&session, &turn_id);
                        let key = (session, turn_id);
                        if model.runs.remove(&key).is_some() {
                            model.out.push_back((key.0, key.1, "cancelled"));
                        }
                    }
                    3 if roll(8) == 0 => {
                        engine.clear();
                        model.runs.clear();
                        model.out.clear();
                    }
                    _ => {
                        let still = format!("s{}", roll(8));
                        let paused = |s: &str| s == still;
                        let got = engine
                            .poll_event_unless(&mut |s| paused(s))
                            .map(|(s, t, e)| (s, t, kind(&e)));
                        assert_eq!(got, model.poll(&paused), "seed {seed}, step {step}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_paused_session_waits_where_it_is_and_the_others_go_on() {
        let mut engine = ScriptedEngine::new();
        engine.start(&turn("a", "chunks 1000 8"), Time(0));
        engine.start(&turn("b", "chunks 2 8"), Time(0));
        let first = engine.poll_event_unless(&mut |s| s == "a").unwrap();
        assert_eq!(first.0, "b");
        let second = engine.poll_event_unless(&mut |s| s == "a").unwrap();
        assert_eq!((second.0.as_str(), text(&second.2)), ("b", "00000001"));
        assert!(matches!(
            engine.poll_event_unless(&mut |s| s == "a"),
            Some((s, _, EngineEvent::Done(StopReason::EndTurn))) if s == "b"
        ));
        // Only `a` is left, paused: nothing comes, nothing is made, and no timer spins.
        assert!(engine.poll_event_unless(&mut |s| s == "a").is_none());
        assert!(
            engine.out.is_empty(),
            "{} events made while paused",
            engine.out.len()
        );
        assert_eq!(engine.poll_timeout(), None);
        // Resumed: `a`'s chunks come whole and in order.
        let numbers: Vec<String> = std::iter::from_fn(|| engine.poll_event())
            .filter_map(|(_, _, e)| match e {
                EngineEvent::Text(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(numbers.len(), 1000);
        assert!(numbers
            .iter()
            .enumerate()
            .all(|(i, t)| *t == format!("{:08}", i)));
    }
}
