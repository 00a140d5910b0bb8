//! The model engine: runs a turn as streamed chat completions on the instance's models.
//! Sans-IO: it asks the shell for HTTP and file reads ([`IoCall`]) and parses what comes back.
//!
//! A turn: read its attachments, compose the messages (`prompt.rs`), then one model call per
//! step. A step is `POST /v1/chat/completions` with `stream: true`; its body is read one piece
//! at a time, and the next piece is asked for only once every event made from the last one
//! has been taken (`poll_event_unless`), so a session whose reader is behind holds its stream
//! at the socket, not in memory. Steered messages join at the next step: a step that ends with
//! messages waiting is followed by another, given the answer so far and the messages.
//!
//! A step whose stream ends with tool calls is followed by the calls, one at a time in order,
//! as the mode rules (`tool_step.rs`, `policy.rs`), then by the next step, given the calls and
//! their results.

mod tool_step;

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, Mode, Model};
use crate::engine::{Engine, EngineCommand, EngineEvent, Report, StopReason, TurnStart};
use crate::engine_io::{HttpMethod, IoCall, IoId, IoReply};
use crate::model::chat::{self, Delta, Finish, Message, Part, Role};
use crate::model::prompt::{self, ReadAttachment, SystemParts};
use crate::model::sse::{SseEvent, SseLimits, SseParser};
use crate::model::tools::{self, ToolsConfig};
use crate::text::floor_char;
use crate::time::Time;
use tool_step::{Draft, Tools};

/// The engine's bounds and manners, each named where it refuses or gives up
/// (`engine.<field>` in config.yaml).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ModelEngineConfig {
    /// The context budget, in tokens, for a model whose `/v1/models` entry gives no length.
    pub context_tokens: u64,
    /// Retries of a request the instance answered 429 (waiting its `Retry-After`).
    pub max_rate_limited: u32,
    /// Retries of a 5xx, or of a connection that failed before its first byte.
    pub max_retries: u32,
    /// The first retry's wait; it doubles, up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// The longest `Retry-After` honoured; a longer one fails the turn, saying so.
    pub max_retry_after_ms: u64,
    /// A request or a stream silent this long while the engine waits on it is given up (the
    /// turn fails, naming this setting).
    pub idle_timeout_ms: u64,
    /// Bytes asked for per body read.
    pub read_bytes: usize,
    /// The bytes of an error response's body read for its words.
    pub max_error_body_bytes: usize,
    /// The SSE parser's bounds.
    pub sse: SseLimits,
    /// An attachment's bytes given to the model; more is cut, and a notice says so.
    pub max_attachment_bytes: u64,
    /// Chat models kept of the instance's `/v1/models` list; more are left out, and a log line
    /// says how many (`engine.max_models`).
    pub max_models: usize,
    /// The device's own system text, before the instance's instructions.
    pub system_text: String,
    /// The device's own personalization (`{ personality, personality_custom, instructions }`),
    /// used unless the client sends the account's: config.yaml's, or the instance's
    /// `/v1/me/personalization` when it has one available.
    pub personalization: Option<serde_json::Value>,
    /// The instance's name, for `## Instructions from <instance>`.
    pub instance_name: Option<String>,
    /// The model's tools and their bounds (`engine.tools.*`).
    pub tools: ToolsConfig,
}

impl Default for ModelEngineConfig {
    fn default() -> Self {
        ModelEngineConfig {
            context_tokens: 32_768,
            max_rate_limited: 3,
            max_retries: 3,
            retry_initial_ms: 500,
            retry_max_ms: 8_000,
            max_retry_after_ms: 60_000,
            idle_timeout_ms: 120_000,
            read_bytes: 16 * 1024,
            max_error_body_bytes: 16 * 1024,
            sse: SseLimits::default(),
            max_attachment_bytes: 1024 * 1024,
            max_models: crate::model::models::DEFAULT_MAX_MODELS,
            system_text: "You are LLeMbas CLI, a coding assistant working in the person's \
                          project on their machine."
                .into(),
            personalization: None,
            instance_name: None,
            tools: ToolsConfig::default(),
        }
    }
}

impl ModelEngineConfig {
    /// Settings that would stop every turn are refused, naming the setting and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least_one = [
            ("engine.context_tokens", self.context_tokens),
            ("engine.retry_initial_ms", self.retry_initial_ms),
            ("engine.idle_timeout_ms", self.idle_timeout_ms),
            ("engine.read_bytes", self.read_bytes as u64),
            (
                "engine.max_error_body_bytes",
                self.max_error_body_bytes as u64,
            ),
            ("engine.sse.max_line_bytes", self.sse.max_line_bytes as u64),
            ("engine.max_models", self.max_models as u64),
            (
                "engine.sse.max_event_bytes",
                self.sse.max_event_bytes as u64,
            ),
        ];
        if let Some((name, _)) = at_least_one.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError(format!("{name} must be at least 1 (got 0)")));
        }
        self.tools.validate()?;
        if self.retry_max_ms < self.retry_initial_ms {
            return Err(ConfigError(format!(
                "engine.retry_max_ms ({}) must be at least engine.retry_initial_ms ({})",
                self.retry_max_ms, self.retry_initial_ms
            )));
        }
        Ok(())
    }
}

/// Runs turns on the instance's chat models.
pub struct ModelEngine {
    config: ModelEngineConfig,
    models: Vec<Model>,
    /// Running turns, by session (a session runs one turn at a time).
    turns: BTreeMap<String, Turn>,
    /// Which turn each outstanding call belongs to.
    calls: BTreeMap<IoId, String>,
    io: VecDeque<IoCall>,
    out: VecDeque<Report>,
    next_io: u64,
    now: Time,
    /// The function tools offered to the model, made once.
    tool_definitions: serde_json::Value,
    /// "Allow always" rules, by session (never written anywhere).
    remembered: crate::model::policy::Remembered,
}

/// An attachment's bytes (perhaps cut) and its whole size, or why it could not be read.
pub type FileRead = Result<(Vec<u8>, u64), String>;

struct Turn {
    start: Box<TurnStart>,
    model: Model,
    /// Attachments read so far (in the turn's order), while they are being read, and the
    /// call reading each.
    files: Vec<Option<FileRead>>,
    file_calls: Vec<IoId>,
    messages: Vec<Message>,
    phase: Phase,
    step: u32,
    /// Steered messages not yet given to the model.
    steered: Vec<(u64, String)>,
    /// This step's answer so far (given back to the model at the next step), at most as many
    /// bytes as the model's context could hold: the stream itself is never cut, the copy is.
    answer: String,
    answer_cap: usize,
    finish: Option<Finish>,
    /// Retries of this step so far.
    retries: u32,
    rate_limited: u32,
    /// Its events reported and not yet taken: its stream reads on only at 0. Counted here, not
    /// found by scanning `out`, which with many sessions streaming made every `poll_io` cost
    /// sessions x queued events.
    queued: usize,
    /// The mode that rules its tools: the turn's (lowered by the device at its start), then
    /// the one an approved plan gave.
    mode: Mode,
    /// This step's tool calls as they stream in.
    drafts: Vec<Draft>,
    /// The plan this turn wrote (`plan_update` changes it).
    plan: Option<serde_json::Value>,
}

enum Phase {
    /// Waiting for its attachments.
    Reading,
    /// Waiting to (re)try its step until then.
    Backoff { until: Time },
    /// The request is out; waiting for its head since `since`.
    Asked { call: IoId, since: Time },
    /// An error response's body is being read for its words.
    Refused {
        call: IoId,
        status: u16,
        retry_after: Option<String>,
        body: Vec<u8>,
        since: Time,
    },
    /// Streaming: `reading` since when a read is out (else the next is asked once the events
    /// made so far are taken).
    Streaming {
        call: IoId,
        sse: Box<SseParser>,
        reading: Option<Time>,
        done: bool,
    },
    /// The step's tool calls are being worked, one at a time.
    Tools(Box<Tools>),
}

impl ModelEngine {
    pub fn new(config: ModelEngineConfig, models: Vec<Model>) -> ModelEngine {
        ModelEngine {
            config,
            models,
            turns: BTreeMap::new(),
            calls: BTreeMap::new(),
            io: VecDeque::new(),
            out: VecDeque::new(),
            next_io: 0,
            now: Time::ZERO,
            tool_definitions: tools::definitions(),
            remembered: Default::default(),
        }
    }

    /// The instance's model list changed (fetched again at a dial). Running turns keep the
    /// model they started on.
    pub fn set_models(&mut self, models: Vec<Model>) {
        self.models = models;
    }

    pub fn config(&self) -> &ModelEngineConfig {
        &self.config
    }

    /// For what the shell learns after start: the personalization the instance keeps, the
    /// instance's name. Turns already running keep what they were composed with.
    pub fn config_mut(&mut self) -> &mut ModelEngineConfig {
        &mut self.config
    }

    fn io_id(&mut self) -> IoId {
        self.next_io += 1;
        IoId(self.next_io)
    }

    fn report(&mut self, session: &str, event: EngineEvent) {
        if let Some(t) = self.turns.get_mut(session) {
            t.queued += 1;
            self.out
                .push_back((session.to_string(), t.start.turn_id.clone(), event));
        }
    }

    /// The turn ends: its calls are let go, and its last event is reported.
    fn end(&mut self, session: &str, event: EngineEvent) {
        self.report(session, event);
        if self.turns.remove(session).is_some() {
            // Its request, and attachment reads still out, are let go.
            let mine: Vec<IoId> = self
                .calls
                .iter()
                .filter(|(_, s)| *s == session)
                .map(|(id, _)| *id)
                .collect();
            for id in mine {
                self.calls.remove(&id);
                self.io.push_back(IoCall::Abort { id });
            }
        }
    }

    fn start(&mut self, start: Box<TurnStart>, now: Time) {
        let session = start.session_id.clone();
        if let Some(old) = self.turns.get(&session) {
            // The device runs one turn a session; a second start means the first is over.
            let old_turn = old.start.turn_id.clone();
            self.end(&session, EngineEvent::Done(StopReason::Cancelled));
            debug_assert!(false, "turn {old_turn} of {session} was still running");
        }
        let model = match &start.model {
            None => {
                self.out.push_back((
                    session,
                    start.turn_id.clone(),
                    EngineEvent::Failed(
                        "this session has no model: the device is not logged in to an \
                         instance that serves one (run `lembas login <url>`)"
                            .into(),
                    ),
                ));
                return;
            }
            Some(id) => match self.models.iter().find(|m| &m.id == id) {
                Some(m) => m.clone(),
                None => {
                    self.out.push_back((
                        session,
                        start.turn_id.clone(),
                        EngineEvent::Failed(format!(
                            "model `{id}` is not served by the instance any more; choose \
                             another with _lembas/configure"
                        )),
                    ));
                    return;
                }
            },
        };
        let files = vec![None; start.attachments.len()];
        let mode = start.mode;
        let mut turn = Turn {
            start,
            model,
            files,
            file_calls: Vec::new(),
            messages: Vec::new(),
            phase: Phase::Reading,
            step: 0,
            steered: Vec::new(),
            answer: String::new(),
            answer_cap: 0,
            finish: None,
            retries: 0,
            rate_limited: 0,
            queued: 0,
            mode,
            drafts: Vec::new(),
            plan: None,
        };
        let reads: Vec<IoCall> = turn
            .start
            .attachments
            .iter()
            .map(|a| IoCall::ReadAttachment {
                id: self.io_id(),
                session_id: session.clone(),
                file_name: a.file_name.clone(),
                max: self.config.max_attachment_bytes,
            })
            .collect();
        for r in reads {
            turn.file_calls.push(r.id());
            self.calls.insert(r.id(), session.clone());
            self.io.push_back(r);
        }
        let ready = turn.files.is_empty();
        self.turns.insert(session.clone(), turn);
        if ready {
            self.compose(&session);
            self.next_step(&session, now);
        }
    }

    /// The turn's messages, once its attachments are read; what was cut is said.
    fn compose(&mut self, session: &str) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let files = std::mem::take(&mut t.files);
        let read: Vec<ReadAttachment<'_>> = t
            .start
            .attachments
            .iter()
            .zip(files)
            .map(|(attachment, read)| ReadAttachment {
                attachment,
                read: read.unwrap_or_else(|| Err("it was not read".into())),
            })
            .collect();
        let system = SystemParts {
            own: &self.config.system_text,
            personalization: self.config.personalization.as_ref(),
            instance: self.config.instance_name.as_deref(),
            summary: t.start.summary.as_deref(),
        };
        let budget = t.model.context_length.unwrap_or(self.config.context_tokens);
        t.answer_cap = usize::try_from(budget.saturating_mul(4)).unwrap_or(usize::MAX);
        let composed = prompt::compose(
            &system,
            &t.start.context,
            &t.start.history,
            &t.start.text,
            &read,
            t.model.vision,
            budget,
        );
        t.messages = composed.messages;
        // The messages hold what the model is to see of them: no second copy for the turn.
        t.start.history = Vec::new();
        for notice in composed.notices {
            self.report(session, EngineEvent::Notice(notice));
        }
    }

    /// Make the next model call (a new step, or a retry of this one).
    fn call_model(&mut self, session: &str, now: Time) {
        let id = self.io_id();
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let budget = t.model.context_length.unwrap_or(self.config.context_tokens);
        let dropped = prompt::fit_tool_results(&mut t.messages, budget);
        let tools = no_tools(&self.config.tools, &t.start)
            .is_none()
            .then_some(&self.tool_definitions);
        let body = chat::body_of(&t.model.id, &t.messages, t.start.effort.as_deref(), tools);
        t.phase = Phase::Asked {
            call: id,
            since: now,
        };
        t.answer.clear();
        t.drafts.clear();
        t.finish = None;
        self.calls.insert(id, session.to_string());
        self.io.push_back(IoCall::Fetch {
            id,
            method: HttpMethod::Post,
            path: "/v1/chat/completions".into(),
            body,
        });
        if dropped > 0 {
            self.report(
                session,
                EngineEvent::Notice(format!(
                    "{dropped} earlier tool result{} of this turn {} dropped from the model's \
                     context, to keep within its {budget} tokens",
                    if dropped == 1 { "" } else { "s" },
                    if dropped == 1 { "was" } else { "were" },
                )),
            );
        }
    }

    /// A new step: the steered messages join, and the model is called.
    fn next_step(&mut self, session: &str, now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        t.step += 1;
        t.retries = 0;
        t.rate_limited = 0;
        let step = t.step;
        let steered = std::mem::take(&mut t.steered);
        if !steered.is_empty() {
            if !t.answer.is_empty() {
                t.messages.push(Message::new(
                    Role::Assistant,
                    vec![Part::Text(std::mem::take(&mut t.answer))],
                ));
            }
            for (_, text) in &steered {
                t.messages
                    .push(Message::new(Role::User, vec![Part::Text(text.clone())]));
            }
            let ids = steered.iter().map(|(id, _)| *id).collect();
            self.report(session, EngineEvent::Steered { ids });
        }
        self.report(session, EngineEvent::Step(step));
        self.call_model(session, now);
    }

    /// A step failed in a way worth trying again: wait, or give up with `reason`.
    fn retry_or_fail(&mut self, session: &str, reason: String, wait: Option<u64>, now: Time) {
        let c = &self.config;
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let (tried, most, setting) = if wait.is_some() {
            (
                &mut t.rate_limited,
                c.max_rate_limited,
                "engine.max_rate_limited",
            )
        } else {
            (&mut t.retries, c.max_retries, "engine.max_retries")
        };
        let tries = *tried + 1;
        if *tried >= most {
            self.end(
                session,
                EngineEvent::Failed(format!("{reason} (gave up after {tries} tries, {setting})")),
            );
            return;
        }
        let backoff = c
            .retry_initial_ms
            .saturating_mul(1 << (*tried).min(20))
            .min(c.retry_max_ms);
        *tried = tries;
        t.phase = Phase::Backoff {
            until: now.plus_ms(wait.unwrap_or(backoff)),
        };
    }

    fn on_head(
        &mut self,
        session: &str,
        call: IoId,
        status: u16,
        retry_after: Option<String>,
        now: Time,
    ) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        if (200..300).contains(&status) {
            t.phase = Phase::Streaming {
                call,
                sse: Box::new(SseParser::new(self.config.sse)),
                reading: None,
                done: false,
            };
        } else {
            t.phase = Phase::Refused {
                call,
                status,
                retry_after,
                body: Vec::new(),
                since: now,
            };
            self.read(call, self.config.max_error_body_bytes, session, now);
        }
    }

    fn read(&mut self, call: IoId, max: usize, session: &str, now: Time) {
        if let Some(Turn {
            phase: Phase::Streaming { reading, .. },
            ..
        }) = self.turns.get_mut(session)
        {
            *reading = Some(now);
        }
        self.io.push_back(IoCall::Read { id: call, max });
    }

    /// An error response ended (or its body is as long as it may be): decide.
    fn refused(&mut self, session: &str, now: Time) {
        let Some(Turn {
            phase:
                Phase::Refused {
                    call,
                    status,
                    retry_after,
                    body,
                    ..
                },
            ..
        }) = self.turns.get_mut(session)
        else {
            return;
        };
        let (call, status, retry_after) = (*call, *status, retry_after.take());
        let words = instance_words(body);
        self.calls.remove(&call);
        self.io.push_back(IoCall::Abort { id: call });
        let said = match &words {
            Some(w) => format!("the instance answered HTTP {status}: {w}"),
            None => format!("the instance answered HTTP {status}"),
        };
        match status {
            401 | 403 => self.end(
                session,
                EngineEvent::Failed(format!(
                    "{said}; the device token was refused: log in again (`lembas login <url>`)"
                )),
            ),
            429 => {
                let wait = retry_after
                    .as_deref()
                    .and_then(retry_after_ms)
                    .unwrap_or(self.config.retry_initial_ms);
                if wait > self.config.max_retry_after_ms {
                    let most = self.config.max_retry_after_ms;
                    self.end(
                        session,
                        EngineEvent::Failed(format!(
                            "{said}; it asked to wait {wait} ms, longer than \
                             engine.max_retry_after_ms ({most} ms)"
                        )),
                    );
                } else {
                    self.retry_or_fail(session, said, Some(wait), now);
                }
            }
            500..=599 => self.retry_or_fail(session, said, None, now),
            _ => self.end(session, EngineEvent::Failed(said)),
        }
    }

    fn on_body(&mut self, session: &str, bytes: &[u8], now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        match &mut t.phase {
            Phase::Refused { body, call, .. } => {
                let room = self.config.max_error_body_bytes.saturating_sub(body.len());
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                if body.len() >= self.config.max_error_body_bytes {
                    self.refused(session, now);
                } else {
                    let call = *call;
                    let max = self.config.max_error_body_bytes - body.len();
                    self.read(call, max, session, now);
                }
            }
            Phase::Streaming { sse, reading, .. } => {
                *reading = None;
                let mut events = Vec::new();
                let fed = sse.feed(bytes, &mut events);
                for e in events {
                    if !self.on_sse(session, e) {
                        return;
                    }
                }
                if let Err(e) = fed {
                    self.end(
                        session,
                        EngineEvent::Failed(format!("the model's stream was refused: {e}")),
                    );
                }
            }
            _ => {}
        }
    }

    /// One server-sent event of the stream; false when it ended the turn.
    fn on_sse(&mut self, session: &str, event: SseEvent) -> bool {
        let mut deltas = Vec::new();
        if let Err(e) = chat::parse_chunk(&event.data, &mut deltas) {
            self.end(
                session,
                EngineEvent::Failed(format!("the model sent a chunk that is not one: {e}")),
            );
            return false;
        }
        for d in deltas {
            let Some(t) = self.turns.get_mut(session) else {
                return false;
            };
            match d {
                Delta::Text(text) => {
                    if t.answer.len() < t.answer_cap {
                        let room = t.answer_cap - t.answer.len();
                        t.answer.push_str(floor_char(&text, room));
                    }
                    self.report(session, EngineEvent::Text(text));
                }
                Delta::Thought(text) => self.report(session, EngineEvent::Thought(text)),
                Delta::ToolCall {
                    index,
                    id,
                    name,
                    arguments,
                } => {
                    if let Err(why) = tool_step::draft(
                        &mut t.drafts,
                        &self.config.tools,
                        index,
                        id,
                        name,
                        &arguments,
                    ) {
                        self.end(session, EngineEvent::Failed(why));
                        return false;
                    }
                }
                Delta::Usage(u) => self.report(
                    session,
                    EngineEvent::Usage {
                        input_tokens: u.input_tokens,
                        output_tokens: u.output_tokens,
                    },
                ),
                Delta::Finish(f) => t.finish = Some(f),
                Delta::Done => {
                    if let Phase::Streaming { done, .. } = &mut t.phase {
                        *done = true;
                    }
                }
                Delta::Error(message) => {
                    self.end(
                        session,
                        EngineEvent::Failed(format!("the model failed: {message}")),
                    );
                    return false;
                }
            }
        }
        true
    }

    /// The stream's body ended: the step is over.
    fn on_end(&mut self, session: &str, now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        match &mut t.phase {
            Phase::Refused { .. } => self.refused(session, now),
            Phase::Streaming {
                call, sse, done, ..
            } => {
                let call = *call;
                let unterminated = sse.finish();
                let complete = *done || t.finish.is_some();
                self.calls.remove(&call);
                if !complete {
                    let why = if unterminated {
                        "the model's stream ended in the middle of an event"
                    } else {
                        "the model's stream ended before the model finished"
                    };
                    self.end(session, EngineEvent::Failed(why.into()));
                } else if !t.drafts.is_empty() {
                    self.begin_tools(session, now);
                } else if !t.steered.is_empty() {
                    self.next_step(session, now);
                } else {
                    let reason = match t.finish {
                        Some(Finish::Length) => StopReason::MaxTokens,
                        _ => StopReason::EndTurn,
                    };
                    self.end(session, EngineEvent::Done(reason));
                }
            }
            _ => {}
        }
    }

    fn on_failed(&mut self, session: &str, reason: String, now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        match &t.phase {
            // Nothing came back: a reset before the first byte is worth another try.
            Phase::Asked { call, .. } => {
                self.calls.remove(call);
                self.retry_or_fail(
                    session,
                    format!("the instance could not be reached: {reason}"),
                    None,
                    now,
                );
            }
            Phase::Refused { .. } => self.refused(session, now),
            _ => self.end(
                session,
                EngineEvent::Failed(format!("the model's stream broke: {reason}")),
            ),
        }
    }

    fn on_file(&mut self, session: &str, call: IoId, read: FileRead, now: Time) {
        let Some(t) = self.turns.get_mut(session) else {
            return;
        };
        let Some(i) = t.file_calls.iter().position(|c| *c == call) else {
            return;
        };
        t.files[i] = Some(read);
        if t.files.iter().all(Option::is_some) {
            self.compose(session);
            self.next_step(session, now);
        }
    }
}

impl Phase {
    /// Since when the engine has waited on the instance, if it waits on it now.
    fn waiting_since(&self) -> Option<Time> {
        match self {
            Phase::Asked { since, .. } | Phase::Refused { since, .. } => Some(*since),
            Phase::Streaming { reading, .. } => *reading,
            // A person deciding, or a tool at work (a command keeps its own timeout).
            Phase::Reading | Phase::Backoff { .. } | Phase::Tools(_) => None,
        }
    }
}

/// Why a turn is offered no tools, worded as the refusal of a call the model makes anyway;
/// `None` when it is offered them. One rule decides both the offer and the refusal.
fn no_tools(config: &ToolsConfig, start: &TurnStart) -> Option<&'static str> {
    if start.compact {
        // A compaction only writes its summary: it acts on nothing.
        Some(
            "the call was refused: a compaction only writes the summary of the \
             conversation, and uses no tools; answer with the summary alone",
        )
    } else if !config.enabled {
        Some("tools are off on this device (engine.tools.enabled)")
    } else {
        None
    }
}

/// The instance's own words from an error body: `{"error": {"message"}}`, `{"detail"}`, or the
/// text itself, cut short.
fn instance_words(body: &[u8]) -> Option<String> {
    let v: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let from_json = v.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("detail").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    let words = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    if words.is_empty() {
        return None;
    }
    const MOST: usize = 500;
    Some(match words.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}…", &words[..cut]),
        None => words,
    })
}

/// `Retry-After` in seconds. An HTTP date is not read (the core has no wall clock): the
/// engine's own backoff applies then.
fn retry_after_ms(value: &str) -> Option<u64> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).ceil() as u64)
}

impl Engine for ModelEngine {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        self.now = self.now.max(now);
        match command {
            EngineCommand::Start(start) => self.start(start, now),
            EngineCommand::Cancel {
                session_id,
                turn_id,
            } => {
                if self
                    .turns
                    .get(&session_id)
                    .is_some_and(|t| t.start.turn_id == turn_id)
                {
                    self.end(&session_id, EngineEvent::Done(StopReason::Cancelled));
                }
            }
            EngineCommand::Steer {
                session_id,
                turn_id,
                id,
                text,
            } => {
                if let Some(t) = self.turns.get_mut(&session_id) {
                    if t.start.turn_id == turn_id {
                        t.steered.push((id, text));
                    }
                }
            }
            EngineCommand::Decide {
                session_id,
                turn_id,
                tool_call_id,
                decision,
            } => {
                if self
                    .turns
                    .get(&session_id)
                    .is_some_and(|t| t.start.turn_id == turn_id)
                {
                    self.decided(&session_id, &tool_call_id, decision, now);
                }
            }
        }
    }

    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        let i = self.out.iter().position(|(s, _, _)| !paused(s))?;
        let report = self.out.remove(i)?;
        if let Some(t) = self.turns.get_mut(&report.0) {
            // An ended turn's last events may outlive it; only this turn's own are counted.
            if t.start.turn_id == report.1 {
                t.queued = t.queued.saturating_sub(1);
            }
        }
        Some(report)
    }

    fn poll_timeout(&self) -> Option<Time> {
        let idle = self.config.idle_timeout_ms;
        self.turns
            .values()
            .filter_map(|t| match &t.phase {
                Phase::Backoff { until } => Some(*until),
                Phase::Tools(tools) => tools.due(&self.config.tools),
                p => p.waiting_since().map(|since| since.plus_ms(idle)),
            })
            .min()
    }

    fn handle_timeout(&mut self, now: Time) {
        self.now = self.now.max(now);
        let idle = self.config.idle_timeout_ms;
        let due: Vec<(String, bool)> = self
            .turns
            .iter()
            .filter_map(|(s, t)| match &t.phase {
                Phase::Backoff { until } if *until <= now => Some((s.clone(), true)),
                p => p
                    .waiting_since()
                    .filter(|since| since.plus_ms(idle) <= now)
                    .map(|_| (s.clone(), false)),
            })
            .collect();
        let tools_due: Vec<String> = self
            .turns
            .iter()
            .filter(|(_, t)| match &t.phase {
                Phase::Tools(tools) => tools.due(&self.config.tools).is_some_and(|at| at <= now),
                _ => false,
            })
            .map(|(s, _)| s.clone())
            .collect();
        for session in tools_due {
            self.tool_timeout(&session, now);
        }
        for (session, backoff_over) in due {
            if backoff_over {
                self.call_model(&session, now);
            } else {
                self.end(
                    &session,
                    EngineEvent::Failed(format!(
                        "the instance sent nothing for {idle} ms (engine.idle_timeout_ms)"
                    )),
                );
            }
        }
    }

    fn poll_io(&mut self) -> Option<IoCall> {
        if let Some(call) = self.io.pop_front() {
            return Some(call);
        }
        // A stream whose events have all been taken reads on.
        let now = self.now;
        let read_bytes = self.config.read_bytes;
        let next = self
            .turns
            .iter_mut()
            .find_map(|(s, t)| match &mut t.phase {
                Phase::Streaming {
                    call,
                    reading: None,
                    ..
                } if t.queued == 0 => Some((s.clone(), *call)),
                // A running command's output is read on the same terms.
                Phase::Tools(tools) if t.queued == 0 => tools.read_next().map(|c| (s.clone(), c)),
                _ => None,
            })?;
        self.read(next.1, read_bytes, &next.0, now);
        self.io.pop_front()
    }

    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.now = self.now.max(now);
        let Some(session) = self.calls.get(&id).cloned() else {
            // A call let go of (cancelled, or its turn ended): what it says is moot.
            return;
        };
        if self
            .turns
            .get(&session)
            .is_some_and(|t| matches!(t.phase, Phase::Tools(_)))
        {
            return self.on_tool_reply(&session, id, reply, now);
        }
        match reply {
            IoReply::Head {
                status,
                retry_after,
            } => self.on_head(&session, id, status, retry_after, now),
            IoReply::Body(bytes) => self.on_body(&session, &bytes, now),
            IoReply::End => self.on_end(&session, now),
            IoReply::File { bytes, size } => {
                self.calls.remove(&id);
                self.on_file(&session, id, Ok((bytes, size)), now)
            }
            IoReply::Failed { reason } => {
                if self
                    .turns
                    .get(&session)
                    .is_some_and(|t| matches!(t.phase, Phase::Reading))
                {
                    self.calls.remove(&id);
                    self.on_file(&session, id, Err(reason), now);
                } else {
                    self.on_failed(&session, reason, now)
                }
            }
            // A tool's reply to a call that is not a tool's.
            IoReply::Tool { .. } | IoReply::Exit { .. } => {
                self.on_failed(&session, "a tool's reply to no tool call".into(), now)
            }
        }
    }

    fn cancel_all(&mut self) {
        let sessions: Vec<String> = self.turns.keys().cloned().collect();
        for s in sessions {
            self.end(&s, EngineEvent::Done(StopReason::Cancelled));
        }
    }

    fn forget_all(&mut self) {
        self.turns.clear();
        self.calls.clear();
        self.io.clear();
        self.out.clear();
    }

    fn running(&self) -> usize {
        self.turns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_as_config_yaml_writes_them_and_bad_ones_are_refused_by_name() {
        let c: ModelEngineConfig =
            serde_json::from_str(r#"{"max_retries": 7, "sse": {"max_line_bytes": 10}}"#).unwrap();
        assert_eq!((c.max_retries, c.sse.max_line_bytes), (7, 10));
        assert_eq!(c.sse.max_event_bytes, SseLimits::default().max_event_bytes);
        assert_eq!(c.validate(), Ok(()));
        let zero: ModelEngineConfig =
            serde_json::from_str(r#"{"sse": {"max_event_bytes": 0}}"#).unwrap();
        assert_eq!(
            zero.validate().unwrap_err().0,
            "engine.sse.max_event_bytes must be at least 1 (got 0)"
        );
        let upside_down: ModelEngineConfig =
            serde_json::from_str(r#"{"retry_initial_ms": 10, "retry_max_ms": 5}"#).unwrap();
        assert!(upside_down
            .validate()
            .unwrap_err()
            .0
            .contains("engine.retry_max_ms (5)"));
        assert!(
            serde_json::from_str::<ModelEngineConfig>(r#"{"sse": {"maxLineBytes": 1}}"#).is_err()
        );
    }
}
