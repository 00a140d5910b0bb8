//! Which engine answers the device's prompts: the model engine on the instance's models (the
//! default), or the scripted one (`engine: scripted` in config.yaml: tests and `lembas demo`).
//! config.yaml's `engine:` is `model`, `scripted`, or a block of the model engine's settings
//! (`engine.<field>`, as its refusals name them; an unknown field is refused).

use lembas_core::config::Model;
use lembas_core::engine::{Engine, EngineCommand, Report};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::scripted::ScriptedEngine;
use lembas_core::Time;

use crate::personalization::FromInstance;

/// config.yaml's `engine:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// Streamed chat completions on the instance's models, with these settings.
    Model(ModelEngineConfig),
    /// Replies made up from the prompt's text (see `lembas_core::scripted`).
    Scripted,
}

impl Default for EngineChoice {
    fn default() -> Self {
        EngineChoice::Model(ModelEngineConfig::default())
    }
}

impl<'de> serde::Deserialize<'de> for EngineChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, Deserialize};
        struct Choice;
        impl<'de> de::Visitor<'de> for Choice {
            type Value = EngineChoice;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`model`, `scripted`, or a block of the model engine's settings")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<EngineChoice, E> {
                match s {
                    "model" => Ok(EngineChoice::default()),
                    "scripted" => Ok(EngineChoice::Scripted),
                    other => Err(E::unknown_variant(other, &["model", "scripted"])),
                }
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<EngineChoice, A::Error> {
                ModelEngineConfig::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(EngineChoice::Model)
            }
        }
        d.deserialize_any(Choice)
    }
}

impl EngineChoice {
    /// The model engine's settings with what the device knows beyond config.yaml's `engine:`:
    /// its own personalization, and the instance's name (the login's host) for
    /// `## Instructions from <instance>`.
    pub fn with_device(
        mut self,
        personalization: Option<serde_json::Value>,
        instance_name: Option<String>,
    ) -> EngineChoice {
        if let EngineChoice::Model(config) = &mut self {
            config.personalization = personalization;
            config.instance_name = instance_name;
        }
        self
    }
}

/// The engine a driver runs.
pub enum DeviceEngine {
    Scripted(ScriptedEngine),
    Model {
        engine: Box<ModelEngine>,
        /// The device's own personalization (config.yaml's), used when the instance has none
        /// available.
        own_personalization: Option<serde_json::Value>,
    },
}

impl DeviceEngine {
    /// The model engine's settings carry the device's own personalization.
    pub fn new(choice: EngineChoice, models: Vec<Model>) -> DeviceEngine {
        match choice {
            EngineChoice::Scripted => DeviceEngine::Scripted(ScriptedEngine::new()),
            EngineChoice::Model(config) => DeviceEngine::Model {
                own_personalization: config.personalization.clone(),
                engine: Box::new(ModelEngine::new(config, models)),
            },
        }
    }

    /// What the instance said of the account's personalization (fetched at a dial): it, or
    /// the device's own, is what turns from now on are composed with.
    pub fn set_instance_personalization(&mut self, from: &FromInstance) {
        if let DeviceEngine::Model {
            engine,
            own_personalization,
        } = self
        {
            engine.config_mut().personalization = from.effective(own_personalization.clone());
        }
    }

    /// The instance's model list changed (fetched at a dial); the scripted engine has none.
    pub fn set_models(&mut self, models: Vec<Model>) {
        if let DeviceEngine::Model { engine, .. } = self {
            engine.set_models(models);
        }
    }

    fn inner(&self) -> &dyn Engine {
        match self {
            DeviceEngine::Scripted(e) => e,
            DeviceEngine::Model { engine, .. } => &**engine,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Engine {
        match self {
            DeviceEngine::Scripted(e) => e,
            DeviceEngine::Model { engine, .. } => &mut **engine,
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
