//! Which engine answers a device's prompts, the same for every shell: the model engine on the
//! instance's models, or the scripted one (tests, demos, a harness with no instance). A shell
//! picks its default; config.yaml's `engine:` reads as `model`, `scripted`, or a block of the
//! model engine's settings (`engine.<field>`, as its refusals name them).

use serde_json::Value;

use crate::config::Model;
use crate::engine::{Engine, EngineCommand, Report};
use crate::engine_io::{IoCall, IoId, IoReply};
use crate::model::engine::{ModelEngine, ModelEngineConfig};
use crate::scripted::ScriptedEngine;
use crate::time::Time;

/// The engine a device is built with.
// One value per device, read once at its start: the settings' size (grown with the tools')
// costs nothing worth a box every shell would have to open.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// Streamed chat completions on the instance's models, with these settings.
    Model(ModelEngineConfig),
    /// Replies made up from the prompt's text (see [`crate::scripted`]).
    Scripted,
}

impl EngineChoice {
    /// The model engine with its default settings.
    pub fn model() -> EngineChoice {
        EngineChoice::Model(ModelEngineConfig::default())
    }

    /// How many of the instance's chat models the device keeps (`engine.max_models`; the
    /// default for the scripted engine, which has no settings, since the list is fetched all
    /// the same).
    pub fn max_models(&self) -> usize {
        match self {
            EngineChoice::Model(config) => config.max_models,
            EngineChoice::Scripted => crate::model::models::DEFAULT_MAX_MODELS,
        }
    }

    /// The model engine's settings with what the device knows beyond them: its own
    /// personalization, and the instance's name for `## Instructions from <instance>`.
    pub fn with_device(
        mut self,
        personalization: Option<Value>,
        instance_name: Option<String>,
    ) -> EngineChoice {
        if let EngineChoice::Model(config) = &mut self {
            config.personalization = personalization;
            config.instance_name = instance_name;
        }
        self
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
                    "model" => Ok(EngineChoice::model()),
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

/// The engine a device runs.
pub enum DeviceEngine {
    Scripted(ScriptedEngine),
    Model {
        engine: Box<ModelEngine>,
        /// The device's own personalization (its settings'), used when the instance has
        /// none available.
        own_personalization: Option<Value>,
    },
}

impl DeviceEngine {
    /// The chosen engine, knowing `models` (until the instance's come).
    pub fn new(choice: EngineChoice, models: Vec<Model>) -> DeviceEngine {
        match choice {
            EngineChoice::Scripted => DeviceEngine::Scripted(ScriptedEngine::new()),
            EngineChoice::Model(config) => DeviceEngine::Model {
                own_personalization: config.personalization.clone(),
                engine: Box::new(ModelEngine::new(config, models)),
            },
        }
    }

    /// The personalization turns are composed with from now on, given the device's own:
    /// `effective(own)` (the instance's when it has one available, else the device's own).
    pub fn set_personalization(&mut self, effective: impl FnOnce(Option<Value>) -> Option<Value>) {
        if let DeviceEngine::Model {
            engine,
            own_personalization,
        } = self
        {
            engine.config_mut().personalization = effective(own_personalization.clone());
        }
    }

    /// The instance's model list changed; the scripted engine has none.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_reads_as_a_word_or_a_block_of_settings() {
        let read = |s: &str| serde_json::from_str::<EngineChoice>(s);
        assert_eq!(read(r#""scripted""#).unwrap(), EngineChoice::Scripted);
        assert_eq!(read(r#""model""#).unwrap(), EngineChoice::model());
        let EngineChoice::Model(c) = read(r#"{"max_retries": 7}"#).unwrap() else {
            panic!("a block is the model engine's settings");
        };
        assert_eq!(c.max_retries, 7);
        assert!(read(r#""scriptd""#).is_err());
        assert!(read(r#"{"max_retrys": 7}"#).is_err());
    }

    #[test]
    fn the_instances_personalization_replaces_the_devices_own_and_can_give_it_back() {
        let own = serde_json::json!({ "personality": "terse" });
        let choice = EngineChoice::model().with_device(Some(own.clone()), None);
        let mut engine = DeviceEngine::new(choice, Vec::new());
        let account = serde_json::json!({ "personality": "friendly" });
        engine.set_personalization(|_| Some(account.clone()));
        let DeviceEngine::Model { engine: m, .. } = &engine else {
            panic!("the model engine");
        };
        assert_eq!(m.config().personalization, Some(account));
        engine.set_personalization(|own| own);
        let DeviceEngine::Model { engine: m, .. } = &engine else {
            panic!("the model engine");
        };
        assert_eq!(m.config().personalization, Some(own));
    }
}
