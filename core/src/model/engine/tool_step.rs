//! The tool calls of a step: gathered as they stream in, then worked one at a time in order.
//! Each is reported (`ToolCall`, pending), ruled on by the mode (`policy.rs`), and then refused
//! (its reason is its result), put to a person (a card, waited for without an idle timeout),
//! or done: by the shell (`IoCall::Tool`), or by the engine itself (asking, planning). When the
//! last is done, the next step is asked, given the calls and their results.
//!
//! A command (`run`) is read like the model's stream: one `Read` at a time, the next only once
//! the session's events are taken. Its output reaches the client at most once per
//! `engine.tools.progress_interval_ms`, is kept up to `engine.tools.run_max_output_bytes` (the
//! rest read and dropped), and the command is stopped after `engine.tools.run_timeout_ms`.
//! Every result given to the model is cut at `engine.tools.max_result_bytes`, saying so.

use serde_json::Value;

use super::{no_tools, ModelEngine, Phase};
use crate::config::Mode;
use crate::engine::{
    Ask, Card, Decision, EngineEvent, PermissionDecision, PlanDecision, Question, QuestionAnswer,
    QuestionDecision, StopReason, ToolStatus,
};
use crate::engine_io::{FileDiff, IoCall, IoId, IoReply, ToolOp, ToolRequest};
use crate::model::chat::{Message, Part, Role, ToolCall};
use crate::model::policy::{self, Verdict};
use crate::model::prompt::base64_encode;
use crate::model::tools::{self, Action, Call, ToolsConfig};
use crate::text::floor_char;
use crate::time::Time;

/// A tool call as its pieces stream in.
#[derive(Debug)]
pub(super) struct Draft {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    /// Its id, name and arguments went past `engine.tools.max_argument_bytes`: what came is
    /// dropped, and the call is refused to the model.
    oversize: bool,
}

/// Take a piece of the `index`th call; more calls than a step may make fail the turn.
pub(super) fn draft(
    drafts: &mut Vec<Draft>,
    c: &ToolsConfig,
    index: u64,
    id: Option<String>,
    name: Option<String>,
    arguments: &str,
) -> Result<(), String> {
    // A piece with an id other than its index's call begins a new call: servers that send
    // each call whole leave the index out, so every call comes as the first.
    let new_id = id.as_deref().filter(|i| !i.is_empty());
    let at = match drafts.iter().rposition(|d| d.index == index) {
        Some(at) if !new_id.is_some_and(|i| !drafts[at].id.is_empty() && drafts[at].id != i) => at,
        _ => {
            if drafts.len() >= c.max_calls_per_step {
                return Err(format!(
                    "the model made more than {} tool calls in one step \
                     (engine.tools.max_calls_per_step)",
                    c.max_calls_per_step
                ));
            }
            drafts.push(Draft {
                index,
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
                oversize: false,
            });
            drafts.len() - 1
        }
    };
    let d = &mut drafts[at];
    if d.oversize {
        return Ok(());
    }
    let id = id.unwrap_or_default();
    let name = name.unwrap_or_default();
    let size = d.id.len() + d.name.len() + d.arguments.len();
    if size + id.len() + name.len() + arguments.len() > c.max_argument_bytes {
        d.oversize = true;
        d.arguments = String::new();
        return Ok(());
    }
    d.id.push_str(&id);
    d.name.push_str(&name);
    d.arguments.push_str(arguments);
    Ok(())
}

/// The step's calls at work.
pub(super) struct Tools {
    calls: Vec<Pending>,
    /// The call being worked; those before it are done.
    next: usize,
    wait: Wait,
    /// Said to the model before the current call's result (a corrected command).
    note: Option<String>,
    /// Images read, given to the model after the results (a tool message holds text only).
    images: Vec<Part>,
}

struct Pending {
    /// The model's id for it (its result names it).
    model_id: String,
    /// The client's (`toolCallId`): unique in the session, unlike some servers' ids.
    acp_id: String,
    name: String,
    title: String,
    raw_input: Value,
    /// Taken when the call is worked.
    call: Option<Result<Call, String>>,
}

enum Wait {
    /// Nothing: the current call is to be worked.
    Nothing,
    /// A person decides the current call's card.
    Card(Box<Call>),
    /// The shell performs it.
    Shell {
        call: IoId,
    },
    /// The plan is being written for the record; its card follows.
    PlanFile {
        call: IoId,
        path: String,
        text: String,
        plan: Option<Value>,
    },
    Run(Box<Running>),
}

struct Running {
    call: IoId,
    started: Time,
    reading: bool,
    /// The output kept (at most `run_max_output_bytes`), and the bytes dropped after it.
    output: Vec<u8>,
    dropped: u64,
    /// Output came since the client was last shown it, and when that was.
    unsent: bool,
    shown: Option<Time>,
}

impl Tools {
    /// When a running command's time is up, or its held-back output is due.
    pub(super) fn due(&self, c: &ToolsConfig) -> Option<Time> {
        let Wait::Run(r) = &self.wait else {
            return None;
        };
        let stop = r.started.plus_ms(c.run_timeout_ms);
        let show = r.unsent.then(|| {
            r.shown
                .map_or(r.started, |t| t.plus_ms(c.progress_interval_ms))
        });
        Some(show.map_or(stop, |s| s.min(stop)))
    }

    /// A running command with no read out: its next read is asked (the caller checked that
    /// the session's events are taken).
    pub(super) fn read_next(&mut self) -> Option<IoId> {
        match &mut self.wait {
            Wait::Run(r) if !r.reading => {
                r.reading = true;
                Some(r.call)
            }
            _ => None,
        }
    }

    fn current(&self) -> Option<&Pending> {
        self.calls.get(self.next)
    }
}

/// What a call's end tells: the client's status and output, the model's result, a diff.
struct Outcome {
    status: ToolStatus,
    output: String,
    diff: Option<FileDiff>,
}

impl Outcome {
    fn done(output: impl Into<String>) -> Outcome {
        Outcome {
            status: ToolStatus::Completed,
            output: output.into(),
            diff: None,
        }
    }

    fn failed(output: impl Into<String>) -> Outcome {
        Outcome {
            status: ToolStatus::Failed,
            output: output.into(),
            diff: None,
        }
    }
}

/// `text` cut to `max` bytes, saying so.
fn bounded(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    format!(
        "{}\n(cut: {} of {} bytes shown, engine.tools.max_result_bytes)",
        floor_char(&text, max),
        floor_char(&text, max).len(),
        text.len()
    )
}

/// What a call is, for a card's reason and the model's messages.
fn what(name: &str, op: &ToolOp) -> String {
    match op {
        ToolOp::Run { command } => format!("run `{command}`"),
        op => format!("{name} `{}`", op.path().unwrap_or(".")),
    }
}

fn image_mime(path: &str) -> Option<&'static str> {
    let ext = path.rsplit('.').next()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// A file name from a turn id: what is not a letter, a digit, `-` or `_` becomes `_`.
fn file_stem(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The answers as the model reads them: each question, then its answer.
fn answers_text(questions: &[Question], answers: &[QuestionAnswer]) -> String {
    let mut out = String::from("The person answered:");
    for (i, q) in questions.iter().enumerate() {
        let answer = match answers.get(i) {
            Some(QuestionAnswer::Options { labels }) => labels.join(", "),
            Some(QuestionAnswer::Custom { text }) => format!("(in their own words) {text}"),
            Some(QuestionAnswer::Back { text }) => format!(
                "(they asked a question of their own: answer it, then ask again if you still \
                 need to) {text}"
            ),
            Some(QuestionAnswer::Skipped) | None => "(no answer)".into(),
        };
        out.push_str(&format!("\n{} — {}\n→ {answer}", q.header, q.question));
    }
    out
}

const NOBODY_TO_ASK: &str = "Nobody can be asked: no person is there to answer questions in \
                             this session. Go on with your best judgement, and say what you \
                             assumed.";

impl ModelEngine {
    /// The step ended with tool calls: the assistant's message is kept, and they are worked.
    pub(super) fn begin_tools(&mut self, session: &str, now: Time) {
        let c = &self.config.tools;
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let drafts = std::mem::take(&mut t.drafts);
        let answer = std::mem::take(&mut t.answer);
        let mut calls = Vec::with_capacity(drafts.len());
        let mut asked = Vec::with_capacity(drafts.len());
        for (i, d) in drafts.into_iter().enumerate() {
            let model_id = if d.id.is_empty() {
                format!("call_{}_{}", t.step, i + 1)
            } else {
                d.id
            };
            let call = if d.oversize {
                Err(format!(
                    "the call was refused: its arguments are longer than \
                     engine.tools.max_argument_bytes ({} bytes); make smaller calls (a large \
                     file can be written in parts with edit)",
                    c.max_argument_bytes
                ))
            } else if let Some(refused) = no_tools(c, &t.start) {
                // Offered none, it called one anyway.
                Err(refused.into())
            } else {
                tools::parse(&d.name, &d.arguments, c)
            };
            let raw_input = serde_json::from_str(&d.arguments)
                .unwrap_or_else(|_| Value::String(d.arguments.clone()));
            let title = match &call {
                Ok(call) => call.title.clone(),
                Err(_) => floor_char(&d.name, 80).to_string(),
            };
            calls.push(Pending {
                model_id: model_id.clone(),
                acp_id: format!("{}-{}-{}", t.start.turn_id, t.step, i + 1),
                name: floor_char(&d.name, 80).to_string(),
                title,
                raw_input,
                call: Some(call),
            });
            asked.push(ToolCall {
                id: model_id,
                name: d.name,
                arguments: if d.oversize { "{}".into() } else { d.arguments },
            });
        }
        let parts = if answer.is_empty() {
            Vec::new()
        } else {
            vec![Part::Text(answer)]
        };
        t.messages.push(Message {
            tool_calls: asked,
            ..Message::new(Role::Assistant, parts)
        });
        t.phase = Phase::Tools(Box::new(Tools {
            calls,
            next: 0,
            wait: Wait::Nothing,
            note: None,
            images: Vec::new(),
        }));
        self.work(session, now);
    }

    fn tools_mut(&mut self, session: &str) -> Option<&mut Tools> {
        tools_of(&mut self.turns, session)
    }

    /// Work calls until one waits (a card, the shell) or all are done.
    fn work(&mut self, session: &str, now: Time) {
        loop {
            let Some(tools) = self.tools_mut(session) else {
                return;
            };
            if !matches!(tools.wait, Wait::Nothing) {
                return;
            }
            let Some(p) = tools.calls.get_mut(tools.next) else {
                return self.after_tools(session, now);
            };
            let call = p.call.take();
            let event = EngineEvent::ToolCall {
                id: p.acp_id.clone(),
                title: p.title.clone(),
                kind: tools::kind(&p.name).into(),
                raw_input: p.raw_input.clone(),
            };
            self.report(session, event);
            match call {
                Some(Ok(call)) => self.start_call(session, call, now),
                Some(Err(why)) => self.finish_call(session, Outcome::failed(why)),
                // Worked already (cannot be: `next` moves on as each ends).
                None => self.finish_call(session, Outcome::failed("the call was lost")),
            }
        }
    }

    fn start_call(&mut self, session: &str, call: Call, now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let Phase::Tools(tools) = &mut t.phase else {
            return;
        };
        let Some(p) = tools.current() else {
            return;
        };
        let acp_id = p.acp_id.clone();
        match call.action {
            Action::Op(ref op) => {
                let command = match op {
                    ToolOp::Run { command } => Some(command.as_str()),
                    _ => None,
                };
                let what = what(call.name, op);
                let remembered = self.remembered.covers(session, call.name, command);
                match policy::decide(t.mode, call.class(), &what, remembered) {
                    Verdict::Allow => {
                        if let Action::Op(op) = call.action {
                            self.perform(session, op, now);
                        }
                    }
                    Verdict::Refuse(why) => self.finish_call(session, Outcome::failed(why)),
                    Verdict::Ask(reason) => {
                        let card = Ask::Permission {
                            title: call.title.clone(),
                            kind: tools::kind(call.name).into(),
                            raw_input: p.raw_input.clone(),
                            always_offered: policy::rule_for(call.name, command).is_some(),
                            reason,
                            purpose: call.purpose.clone(),
                        };
                        tools.wait = Wait::Card(Box::new(call));
                        self.ask(session, acp_id, card);
                    }
                }
            }
            Action::AskUser {
                ref why,
                ref questions,
            } => {
                let card = Ask::Question {
                    why: why.clone(),
                    questions: questions.clone(),
                };
                tools.wait = Wait::Card(Box::new(call));
                self.ask(session, acp_id, card);
            }
            Action::PlanWrite(plan) => {
                t.plan = Some(plan.clone());
                self.report(session, EngineEvent::Plan(Some(plan)));
                self.finish_call(session, Outcome::done("The plan is saved."));
            }
            Action::PlanUpdate(changes) => {
                let updated = match &mut t.plan {
                    None => Err(
                        "plan_update changes the plan written in this turn, and none \
                                 was: call plan_write with the whole plan"
                            .to_string(),
                    ),
                    Some(plan) => tools::update_plan(plan, &changes).map(|()| plan.clone()),
                };
                let outcome = match updated {
                    Ok(plan) => {
                        self.report(session, EngineEvent::Plan(Some(plan)));
                        Outcome::done("The plan is updated.")
                    }
                    Err(why) => Outcome::failed(why),
                };
                self.finish_call(session, outcome);
            }
            Action::PlanSubmit { text, plan } => {
                let path = format!(".lembas/plans/{}.md", file_stem(&t.start.turn_id));
                let plan = plan.or_else(|| t.plan.clone());
                let id = self.io_id();
                // The engine's own record: written whatever the mode, confined by the shell.
                let op = ToolOp::Write {
                    path: path.clone(),
                    text: text.clone(),
                    max_bytes: self.config.tools.max_file_bytes,
                };
                if let Some(tools) = self.tools_mut(session) {
                    tools.wait = Wait::PlanFile {
                        call: id,
                        path,
                        text,
                        plan,
                    };
                }
                self.tool_io(session, id, op);
            }
        }
    }

    fn ask(&mut self, session: &str, tool_call_id: String, ask: Ask) {
        self.report(session, EngineEvent::Ask(Card { tool_call_id, ask }));
    }

    /// Ask the shell to perform `op` (allowed by the mode or a person).
    fn perform(&mut self, session: &str, op: ToolOp, now: Time) {
        let id = self.io_id();
        let Some(tools) = self.tools_mut(session) else {
            return;
        };
        tools.wait = match op {
            ToolOp::Run { .. } => Wait::Run(Box::new(Running {
                call: id,
                started: now,
                reading: false,
                output: Vec::new(),
                dropped: 0,
                unsent: false,
                shown: None,
            })),
            _ => Wait::Shell { call: id },
        };
        self.tool_io(session, id, op);
    }

    fn tool_io(&mut self, session: &str, id: IoId, op: ToolOp) {
        let Some(t) = self.turns.get(session) else {
            return;
        };
        let request = ToolRequest {
            session_id: session.to_string(),
            turn_id: t.start.turn_id.clone(),
            project: t.start.cwd.clone(),
            roots: t.start.roots.clone(),
            op,
        };
        self.calls.insert(id, session.to_string());
        self.io.push_back(IoCall::Tool {
            id,
            request: Box::new(request),
        });
    }

    /// The current call ended: the client is told, the model's result kept, and the next
    /// call is worked (by the caller's loop, or from here when called from outside it).
    fn finish_call(&mut self, session: &str, outcome: Outcome) {
        let max = self.config.tools.max_result_bytes;
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let Phase::Tools(tools) = &mut t.phase else {
            return;
        };
        let Some(p) = tools.calls.get(tools.next) else {
            return;
        };
        let (acp_id, model_id) = (p.acp_id.clone(), p.model_id.clone());
        let result = match tools.note.take() {
            Some(note) => format!("{note}\n{}", outcome.output),
            None => outcome.output.clone(),
        };
        tools.next += 1;
        tools.wait = Wait::Nothing;
        t.messages
            .push(Message::tool_result(&model_id, bounded(result, max)));
        self.report(
            session,
            EngineEvent::ToolCallUpdate {
                id: acp_id,
                status: outcome.status,
                output: Some(bounded(outcome.output, max)),
                diff: outcome.diff,
            },
        );
    }

    /// Every call of the step is done: the next step, within the turn's bound.
    fn after_tools(&mut self, session: &str, now: Time) {
        let max_steps = self.config.tools.max_steps;
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let Phase::Tools(tools) = &mut t.phase else {
            return;
        };
        let images = std::mem::take(&mut tools.images);
        if !images.is_empty() {
            let mut parts = vec![Part::Text("The images the tools read:".into())];
            parts.extend(images);
            t.messages.push(Message::new(Role::User, parts));
        }
        if t.step >= max_steps {
            self.report(
                session,
                EngineEvent::Notice(format!(
                    "the turn stopped after {max_steps} model calls (engine.tools.max_steps)"
                )),
            );
            self.end(session, EngineEvent::Done(StopReason::MaxTurnRequests));
            return;
        }
        self.next_step(session, now);
    }

    /// A card of this turn was decided.
    pub(super) fn decided(
        &mut self,
        session: &str,
        tool_call_id: &str,
        decision: Decision,
        now: Time,
    ) {
        let Some(tools) = self.tools_mut(session) else {
            return;
        };
        if !tools
            .current()
            .is_some_and(|p| p.acp_id == tool_call_id && matches!(tools.wait, Wait::Card(_)))
        {
            return;
        }
        let Wait::Card(call) = std::mem::replace(&mut tools.wait, Wait::Nothing) else {
            return;
        };
        let call = *call;
        match call.action {
            Action::Op(op) => self.permission_decided(session, call.name, op, decision, now),
            Action::AskUser { questions, .. } => {
                let outcome = match decision {
                    Decision::Question(QuestionDecision::Answered(answers)) => {
                        Outcome::done(answers_text(&questions, &answers))
                    }
                    Decision::Question(QuestionDecision::Dismissed { timed_out: true }) => {
                        Outcome::failed(
                            "Nobody answered the question within the approval timeout. Go on \
                             with your best judgement, and say what you assumed.",
                        )
                    }
                    Decision::Question(QuestionDecision::Dismissed { .. }) => Outcome::failed(
                        "The person dismissed the question without answering. Go on with your \
                         best judgement, or stop and say what you need.",
                    ),
                    Decision::NobodyToAsk => Outcome::failed(NOBODY_TO_ASK),
                    other => wrong_or_refused(other),
                };
                self.finish_call(session, outcome);
            }
            Action::PlanSubmit { .. } => {
                let outcome = self.plan_decided(session, decision);
                self.finish_call(session, outcome);
            }
            // No card is put for the others.
            Action::PlanWrite(_) | Action::PlanUpdate(_) => {
                self.finish_call(session, Outcome::failed("the call was lost"))
            }
        }
        self.work(session, now);
    }

    fn permission_decided(
        &mut self,
        session: &str,
        name: &str,
        op: ToolOp,
        decision: Decision,
        now: Time,
    ) {
        match decision {
            Decision::Permission(PermissionDecision::AllowOnce { command }) => {
                let op = match (op, command) {
                    (ToolOp::Run { command: asked }, Some(corrected))
                        if !corrected.trim().is_empty() && corrected != asked =>
                    {
                        if let Some(tools) = self.tools_mut(session) {
                            tools.note = Some(format!(
                                "The person corrected the command: `{corrected}` ran instead \
                                 of `{asked}`."
                            ));
                        }
                        ToolOp::Run { command: corrected }
                    }
                    (op, _) => op,
                };
                self.perform(session, op, now);
            }
            Decision::Permission(PermissionDecision::AllowAlways) => {
                let command = match &op {
                    ToolOp::Run { command } => Some(command.as_str()),
                    _ => None,
                };
                if let Some(rule) = policy::rule_for(name, command) {
                    let max = self.config.tools.max_remembered;
                    self.remembered.remember(session, rule, max);
                }
                self.perform(session, op, now);
            }
            Decision::Permission(PermissionDecision::Deny {
                feedback,
                timed_out,
            }) => {
                let what = what(name, &op);
                let said = if timed_out {
                    format!(
                        "Denied: nobody answered the request to {what} within the approval \
                         timeout (remote.approval_timeout). Do not do it without asking."
                    )
                } else {
                    match feedback.filter(|f| !f.trim().is_empty()) {
                        Some(f) => format!("Denied by the person: {f}"),
                        None => format!("Denied by the person: do not {what}."),
                    }
                };
                self.finish_call(session, Outcome::failed(said));
            }
            Decision::NobodyToAsk => {
                let what = what(name, &op);
                self.finish_call(
                    session,
                    Outcome::failed(format!(
                        "Refused: the session's mode asks before you {what}, and nobody can be \
                         asked (no client that answers approvals is connected)."
                    )),
                );
            }
            other => self.finish_call(session, wrong_or_refused(other)),
        }
    }

    fn plan_decided(&mut self, session: &str, decision: Decision) -> Outcome {
        let path = match self.turns.get(session) {
            Some(t) => format!(".lembas/plans/{}.md", file_stem(&t.start.turn_id)),
            None => String::new(),
        };
        match decision {
            Decision::Plan(PlanDecision::Approve { mode }) => {
                if let Some(t) = self.turns.get_mut(session) {
                    t.mode = mode;
                }
                Outcome::done(format!(
                    "The plan was approved: the session is now in {} mode. Carry it out.",
                    mode.as_str()
                ))
            }
            Decision::Plan(PlanDecision::Revise { feedback }) => Outcome::done(format!(
                "The person asks you to revise the plan: {feedback}"
            )),
            Decision::Plan(PlanDecision::Dismissed { timed_out }) => {
                Outcome::failed(if timed_out {
                    "Nobody answered the plan within the approval timeout. Stop here and wait for \
                 the person."
                } else {
                    "The person dismissed the plan. Stop here and wait for the person."
                })
            }
            Decision::NobodyToAsk => Outcome::failed(format!(
                "The plan is saved at {path}, but nobody can be asked to approve it. Stop here: \
                 end your turn."
            )),
            other => wrong_or_refused(other),
        }
    }

    /// A reply to a call of the tools phase.
    pub(super) fn on_tool_reply(&mut self, session: &str, id: IoId, reply: IoReply, now: Time) {
        let vision = self.turns.get(session).is_some_and(|t| t.model.vision);
        let c = self.config.tools.clone();
        let Some(tools) = tools_of(&mut self.turns, session) else {
            return;
        };
        match &mut tools.wait {
            Wait::Shell { call } if *call == id => {
                self.calls.remove(&id);
                let outcome = match reply {
                    IoReply::Tool { output, diff } => Outcome {
                        status: ToolStatus::Completed,
                        output,
                        diff,
                    },
                    IoReply::File { bytes, size } => {
                        let path = tools
                            .current()
                            .and_then(|p| p.raw_input.get("path"))
                            .and_then(Value::as_str)
                            .unwrap_or("the file")
                            .to_string();
                        match image_mime(&path) {
                            Some(mime) if vision && bytes.len() as u64 == size => {
                                tools.images.push(Part::Image {
                                    url: format!("data:{mime};base64,{}", base64_encode(&bytes)),
                                });
                                Outcome::done(format!(
                                    "{path} is an image: it is shown after the tools' results."
                                ))
                            }
                            Some(_) if vision => Outcome::done(format!(
                                "{path} is an image of {size} bytes, larger than \
                                 engine.tools.read_max_bytes: it was not shown."
                            )),
                            Some(_) => Outcome::done(format!(
                                "{path} is an image ({size} bytes); this model cannot see images."
                            )),
                            None => Outcome::done(format!("{path}: (binary file, {size} bytes)")),
                        }
                    }
                    IoReply::Failed { reason } => Outcome::failed(reason),
                    other => Outcome::failed(format!(
                        "the tool's answer was not one ({})",
                        reply_name(&other)
                    )),
                };
                self.finish_call(session, outcome);
                self.work(session, now);
            }
            Wait::PlanFile {
                call,
                path,
                text,
                plan,
            } if *call == id => {
                self.calls.remove(&id);
                match reply {
                    IoReply::Tool { .. } => {
                        let card = Ask::Plan {
                            path: std::mem::take(path),
                            text: std::mem::take(text),
                            plan: plan.take(),
                        };
                        let Some(p) = tools.current() else {
                            return;
                        };
                        let acp_id = p.acp_id.clone();
                        // What the card's decision needs of the call: that it is a plan's.
                        let call = Call {
                            name: "plan_submit",
                            action: Action::PlanSubmit {
                                text: String::new(),
                                plan: None,
                            },
                            title: String::new(),
                            purpose: None,
                        };
                        tools.wait = Wait::Card(Box::new(call));
                        self.ask(session, acp_id, card);
                    }
                    IoReply::Failed { reason } => {
                        self.finish_call(
                            session,
                            Outcome::failed(format!("the plan could not be saved: {reason}")),
                        );
                        self.work(session, now);
                    }
                    other => {
                        self.finish_call(
                            session,
                            Outcome::failed(format!(
                                "the plan could not be saved: the answer was not one ({})",
                                reply_name(&other)
                            )),
                        );
                        self.work(session, now);
                    }
                }
            }
            Wait::Run(r) if r.call == id => match reply {
                IoReply::Body(bytes) => {
                    r.reading = false;
                    let room = c.run_max_output_bytes.saturating_sub(r.output.len());
                    let keep = bytes.len().min(room);
                    r.output.extend_from_slice(&bytes[..keep]);
                    r.dropped += (bytes.len() - keep) as u64;
                    r.unsent = true;
                    let due = r
                        .shown
                        .is_none_or(|t| t.plus_ms(c.progress_interval_ms) <= now);
                    if due {
                        self.show_progress(session, now);
                    }
                }
                IoReply::Exit { code } => {
                    self.calls.remove(&id);
                    let (status, said) = match code {
                        Some(0) => (ToolStatus::Completed, "exit code 0".to_string()),
                        Some(n) => (ToolStatus::Failed, format!("exit code {n}")),
                        None => (ToolStatus::Failed, "ended by a signal".to_string()),
                    };
                    self.end_run(session, status, said, now);
                }
                IoReply::Tool { output, diff } => {
                    self.calls.remove(&id);
                    let outcome = Outcome {
                        status: ToolStatus::Completed,
                        output,
                        diff,
                    };
                    self.finish_call(session, outcome);
                    self.work(session, now);
                }
                IoReply::Failed { reason } => {
                    self.calls.remove(&id);
                    self.end_run(
                        session,
                        ToolStatus::Failed,
                        format!("failed: {reason}"),
                        now,
                    );
                }
                other => {
                    self.calls.remove(&id);
                    self.io.push_back(IoCall::Abort { id });
                    let said = format!("the command's answer was not one ({})", reply_name(&other));
                    self.end_run(session, ToolStatus::Failed, said, now);
                }
            },
            // A reply to a call let go of.
            _ => {}
        }
    }

    /// A running command's output so far reaches the client.
    fn show_progress(&mut self, session: &str, now: Time) {
        let Some(tools) = self.tools_mut(session) else {
            return;
        };
        let Some(acp_id) = tools.current().map(|p| p.acp_id.clone()) else {
            return;
        };
        let Wait::Run(r) = &mut tools.wait else {
            return;
        };
        r.unsent = false;
        r.shown = Some(now);
        let output = String::from_utf8_lossy(&r.output).into_owned();
        self.report(
            session,
            EngineEvent::ToolCallUpdate {
                id: acp_id,
                status: ToolStatus::InProgress,
                output: Some(output),
                diff: None,
            },
        );
    }

    /// The command ended (`said`: how): its output, and where it was cut, go to the model.
    fn end_run(&mut self, session: &str, status: ToolStatus, said: String, now: Time) {
        let max_output = self.config.tools.run_max_output_bytes;
        let Some(tools) = self.tools_mut(session) else {
            return;
        };
        let Wait::Run(r) = std::mem::replace(&mut tools.wait, Wait::Nothing) else {
            return;
        };
        let mut output = String::from_utf8_lossy(&r.output).into_owned();
        if r.dropped > 0 {
            output.push_str(&format!(
                "\n(output cut here: {} more bytes were dropped, engine.tools.run_max_output_bytes \
                 is {max_output})",
                r.dropped
            ));
        }
        let output = format!("{said}\n{output}");
        self.finish_call(
            session,
            Outcome {
                status,
                output,
                diff: None,
            },
        );
        self.work(session, now);
    }

    /// A command's time is up, or its held-back output is due.
    pub(super) fn tool_timeout(&mut self, session: &str, now: Time) {
        let c = &self.config.tools;
        let (timeout, interval) = (c.run_timeout_ms, c.progress_interval_ms);
        let Some(tools) = tools_of(&mut self.turns, session) else {
            return;
        };
        let Wait::Run(r) = &mut tools.wait else {
            return;
        };
        if r.started.plus_ms(timeout) <= now {
            let id = r.call;
            self.calls.remove(&id);
            self.io.push_back(IoCall::Abort { id });
            self.end_run(
                session,
                ToolStatus::Failed,
                format!("stopped after {timeout} ms (engine.tools.run_timeout_ms)"),
                now,
            );
        } else if r.unsent && r.shown.is_none_or(|t| t.plus_ms(interval) <= now) {
            self.show_progress(session, now);
        }
    }

    /// The ruling mode of a session's running turn (for tests and the shell's status).
    pub fn ruling_mode(&self, session: &str) -> Option<Mode> {
        self.turns.get(session).map(|t| t.mode)
    }
}

fn tools_of<'a>(
    turns: &'a mut std::collections::BTreeMap<String, super::Turn>,
    session: &str,
) -> Option<&'a mut Tools> {
    match &mut turns.get_mut(session)?.phase {
        Phase::Tools(tools) => Some(tools),
        _ => None,
    }
}

/// A decision of another kind of card, or the device's refusal of the card.
fn wrong_or_refused(decision: Decision) -> Outcome {
    match decision {
        Decision::Refused(reason) => Outcome::failed(format!("The card was refused: {reason}")),
        _ => Outcome::failed("The card was answered with a decision of another kind."),
    }
}

fn reply_name(reply: &IoReply) -> &'static str {
    match reply {
        IoReply::Head { .. } => "a response head",
        IoReply::Body(_) => "output",
        IoReply::End => "an end",
        IoReply::File { .. } => "a file",
        IoReply::Failed { .. } => "a failure",
        IoReply::Tool { .. } => "a result",
        IoReply::Exit { .. } => "an exit",
    }
}
