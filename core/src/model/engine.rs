//! The model engine: runs a turn as streamed chat completions on the instance's models.
//! Sans-IO: it asks the shell for HTTP (`IoCall`) and parses what comes back.

use serde::{Deserialize, Serialize};

use crate::config::Model;
use crate::engine::{Engine, EngineCommand, EngineEvent, Report};
use crate::engine_io::{IoCall, IoId, IoReply};
use crate::time::Time;

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
    /// A stream silent this long is given up (the turn fails, naming this setting).
    pub idle_timeout_ms: u64,
    /// Bytes asked for per body read.
    pub read_bytes: usize,
    /// An attachment's bytes given to the model; more is cut, and a notice says so.
    pub max_attachment_bytes: u64,
    /// The device's own system text, before the instance's instructions.
    pub system_text: String,
    /// The instance's name, for `## Instructions from <instance>`.
    pub instance_name: Option<String>,
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
            max_attachment_bytes: 1024 * 1024,
            system_text: String::new(),
            instance_name: None,
        }
    }
}

/// Runs turns on the instance's chat models.
pub struct ModelEngine {
    config: ModelEngineConfig,
    models: Vec<Model>,
    out: Vec<Report>,
}

impl ModelEngine {
    pub fn new(config: ModelEngineConfig, models: Vec<Model>) -> ModelEngine {
        ModelEngine {
            config,
            models,
            out: Vec::new(),
        }
    }

    /// The instance's model list changed (fetched again at a dial).
    pub fn set_models(&mut self, models: Vec<Model>) {
        self.models = models;
    }

    pub fn config(&self) -> &ModelEngineConfig {
        &self.config
    }
}

impl Engine for ModelEngine {
    fn handle_command(&mut self, command: EngineCommand, _now: Time) {
        if let EngineCommand::Start(turn) = command {
            self.out.push((
                turn.session_id,
                turn.turn_id,
                EngineEvent::Failed("the model engine is not built yet".into()),
            ));
        }
    }
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        let i = self.out.iter().position(|(s, _, _)| !paused(s))?;
        Some(self.out.remove(i))
    }
    fn poll_timeout(&self) -> Option<Time> {
        None
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_io(&mut self) -> Option<IoCall> {
        None
    }
    fn handle_io(&mut self, _id: IoId, _reply: IoReply, _now: Time) {}
    fn cancel_all(&mut self) {}
    fn forget_all(&mut self) {
        self.out.clear()
    }
    fn running(&self) -> usize {
        0
    }
}
