//! Which engine answers the wasm device's prompts: the scripted one (the default: tests and
//! demos with no instance), or the model engine on an instance's models, whose HTTP the driver
//! performs with the global `fetch` (`instance_http.rs`).

use lembas_core::config::Model;
use lembas_core::engine::{Engine, EngineCommand, Report};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::scripted::ScriptedEngine;
use lembas_core::Time;

/// The engine a device loop is built with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EngineChoice {
    /// Replies made up from the prompt's text (see `lembas_core::scripted`).
    #[default]
    Scripted,
    /// Streamed chat completions on the instance's models, with these settings.
    Model(ModelEngineConfig),
}

/// The engine a device loop runs.
pub enum DeviceEngine {
    Scripted(ScriptedEngine),
    Model(Box<ModelEngine>),
}

impl DeviceEngine {
    /// The chosen engine, knowing `models` (the device config's, until the instance's come).
    pub fn new(choice: EngineChoice, models: Vec<Model>) -> DeviceEngine {
        match choice {
            EngineChoice::Scripted => DeviceEngine::Scripted(ScriptedEngine::new()),
            EngineChoice::Model(config) => {
                DeviceEngine::Model(Box::new(ModelEngine::new(config, models)))
            }
        }
    }

    /// The instance's model list changed; the scripted engine has none.
    pub fn set_models(&mut self, models: Vec<Model>) {
        if let DeviceEngine::Model(m) = self {
            m.set_models(models);
        }
    }

    fn inner(&self) -> &dyn Engine {
        match self {
            DeviceEngine::Scripted(e) => e,
            DeviceEngine::Model(e) => &**e,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Engine {
        match self {
            DeviceEngine::Scripted(e) => e,
            DeviceEngine::Model(e) => &mut **e,
        }
    }
}

impl Engine for DeviceEngine {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        self.inner_mut().handle_command(command, now)
    }
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        self.inner_mut().poll_event_unless(paused)
    }
    fn poll_timeout(&self) -> Option<Time> {
        self.inner().poll_timeout()
    }
    fn handle_timeout(&mut self, now: Time) {
        self.inner_mut().handle_timeout(now)
    }
    fn poll_io(&mut self) -> Option<IoCall> {
        self.inner_mut().poll_io()
    }
    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.inner_mut().handle_io(id, reply, now)
    }
    fn cancel_all(&mut self) {
        self.inner_mut().cancel_all()
    }
    fn forget_all(&mut self) {
        self.inner_mut().forget_all()
    }
    fn running(&self) -> usize {
        self.inner().running()
    }
}
