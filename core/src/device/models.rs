//! A session's model and effort: what `session/new` picks, what `_lembas/configure` changes
//! between prompts, and whether the device still serves it when a prompt comes. The chat's
//! model, full stop: a model the device cannot speak to is refused, never replaced.

use serde_json::{json, Value};

use super::sessions::Session;
use super::{ConnId, Device};
use crate::config::Model;
use crate::jsonrpc::RpcError;
use crate::model::{effort, models};
use crate::store::{Record, SessionRecord};
use crate::wire::event::lembas::{LembasEvent, ModelEvent};
use crate::wire::session::ConfigureParams;

/// `effort` as given, or -32602 naming the levels.
pub(super) fn check_effort(effort: Option<&str>) -> Result<(), RpcError> {
    effort.map_or(Ok(()), |e| {
        effort::check(e).map_err(RpcError::invalid_params)
    })
}

/// The model `name` names among `models` (`instance_only`: an instance's name, not a ref of
/// the device's own; `connection`: the instance's, a name may be prefixed with it), as
/// `(ref, instance)`; or -32602 with the reason.
fn resolve_model(
    models: &[Model],
    connection: Option<&str>,
    name: &str,
    instance_only: bool,
) -> Result<(String, bool), RpcError> {
    models::resolve(models, name, connection, instance_only)
        .map(|m| (m.id.clone(), m.instance))
        .map_err(|miss| RpcError::invalid_params(miss.reason(name)))
}

/// The model a new session runs on: the instance's `lembas_model`, else a ref the device
/// knows, else the device's default (the first of `models`).
fn pick_model(
    models: &[Model],
    connection: Option<&str>,
    lembas_model: Option<&str>,
    model: Option<&str>,
) -> Result<Option<(String, bool)>, RpcError> {
    if let Some(name) = lembas_model {
        return resolve_model(models, connection, name, true).map(Some);
    }
    if let Some(name) = model {
        return resolve_model(models, connection, name, false).map(Some);
    }
    Ok(models.first().map(|m| (m.id.clone(), m.instance)))
}

/// The `model` event saying session `s`'s model and effort as they are now (`connection`:
/// the device's, named only for an instance's model).
fn model_event(s: &SessionRecord, connection: Option<&str>) -> LembasEvent {
    LembasEvent::Model(ModelEvent {
        connection: connection.map(str::to_string).filter(|_| s.instance),
        effort: s.effort.clone(),
        instance: s.instance,
        r#ref: s.model.clone(),
    })
}

/// Why session `s` cannot run a turn now on its model, as `models` stand: the instance no
/// longer serves it to this device (its list changed, or the device logged out).
fn unserved(s: &SessionRecord, models: &[Model]) -> Option<String> {
    let model = s.model.as_deref().filter(|_| s.instance)?;
    if models.iter().any(|m| m.instance && m.id == model) {
        return None;
    }
    Some(if models.is_empty() {
        format!(
            "session `{}` runs on model `{model}`, and the device is not logged in to an \
             instance that serves it models",
            s.id
        )
    } else {
        format!(
            "session `{}` runs on model `{model}`, which the instance no longer serves to \
             this device: choose another with `_lembas/configure`",
            s.id
        )
    })
}

/// `_lembas/configure` made: its answer, and the change to store and the `model` event to
/// announce when it changed anything.
pub(super) struct Configured {
    pub result: Value,
    pub changed: Option<(Record, LembasEvent)>,
}

impl Session {
    /// `_lembas/configure` on this session: `chosen` is the model it names as resolved (an
    /// instance's name), `effort` the level given (checked). While a turn runs or waits, or
    /// for a model the device cannot speak to, -32602 and nothing changes.
    pub(super) fn configure(
        &mut self,
        chosen: Option<Result<(String, bool), RpcError>>,
        effort: Option<String>,
        connection: Option<&str>,
        now: u64,
    ) -> Result<Configured, RpcError> {
        let keeps = |s: &SessionRecord| match &s.model {
            Some(m) => format!("session `{}` keeps model `{m}`", s.id),
            None => format!("session `{}` keeps its model", s.id),
        };
        if !self.turns.idle() {
            return Err(RpcError::invalid_params(format!(
                "a turn runs or waits in session `{}`: configure it between prompts; {}",
                self.durable.id,
                keeps(&self.durable)
            )));
        }
        let before = (
            self.durable.model.clone(),
            self.durable.instance,
            self.durable.effort.clone(),
        );
        let kept = keeps(&self.durable);
        let (model, instance) = match chosen {
            Some(resolved) => {
                let (m, instance) = resolved.map_err(|mut e| {
                    e.message = format!("{}; {kept}", e.message);
                    e
                })?;
                (Some(m), instance)
            }
            None => (before.0.clone(), before.1),
        };
        let effort = effort.or_else(|| before.2.clone());
        let result = json!({ "model": model, "effort": effort });
        let changed = (&model, instance, &effort) != (&before.0, before.1, &before.2);
        if !changed {
            return Ok(Configured {
                result,
                changed: None,
            });
        }
        self.durable.model = model;
        self.durable.instance = instance;
        self.durable.effort = effort;
        self.durable.touched = now;
        let event = model_event(&self.durable, connection);
        Ok(Configured {
            result,
            changed: Some((self.record(), event)),
        })
    }
}

impl Device {
    /// The model a new session runs on ([`pick_model`] over the device's models).
    pub(super) fn pick_model(
        &self,
        lembas_model: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<(String, bool)>, RpcError> {
        let connection = self.config.connection.as_deref();
        pick_model(&self.config.models, connection, lembas_model, model)
    }

    /// `_lembas/configure`: the session's model (an instance's name) or effort, between
    /// prompts (`Session::configure`). A change is made durable, then announced in a `model`
    /// event.
    pub(super) fn configure(
        &mut self,
        conn: ConnId,
        p: ConfigureParams,
    ) -> Result<Value, RpcError> {
        if self.config.models.is_empty() {
            return Err(RpcError::invalid_params(
                "this device has no models (it is not logged in to an instance that serves it \
                 any), so there is nothing to configure",
            ));
        }
        check_effort(p.effort.as_deref())?;
        let now = self.clock.now().0;
        let connection = self.config.connection.clone();
        // Resolving changes nothing, so it is made before the session is looked up; its
        // refusal still comes after the lookup's and the idle check's.
        let chosen = p
            .model
            .as_deref()
            .map(|name| resolve_model(&self.config.models, connection.as_deref(), name, true));
        let s = self.attach(conn, &p.session_id)?;
        let configured = s.configure(chosen, p.effort, connection.as_deref(), now)?;
        if let Some((record, event)) = configured.changed {
            self.out.persist(vec![record]);
            self.broadcast_event(&p.session_id, event);
        }
        Ok(configured.result)
    }

    /// The `model` event saying the session's model and effort as they are now.
    pub(super) fn model_event(&self, session: &str) -> Option<LembasEvent> {
        let s = &self.sessions.get(session)?.durable;
        Some(model_event(s, self.config.connection.as_deref()))
    }

    /// Why session `session` cannot run a turn now on its model ([`unserved`]). Its next
    /// prompt is refused with this rather than run on another model.
    pub(super) fn unserved(&self, session: &str) -> Option<String> {
        unserved(&self.sessions.get(session)?.durable, &self.config.models)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::turn_table::Admission;
    use crate::engine::TurnStart;
    use crate::jsonrpc::Id;

    fn own(id: &str) -> Model {
        Model {
            instance: false,
            ..Model::served(id)
        }
    }

    fn session() -> Session {
        let mut rec = SessionRecord::testing("ses_a");
        rec.model = Some("old".into());
        rec.instance = true;
        rec.effort = Some("low".into());
        Session::new(rec, 10)
    }

    #[test]
    fn a_new_session_takes_the_instances_model_then_a_ref_then_the_default() {
        let models = [own("mine"), Model::served("org/m")];
        let pick = |l, m| pick_model(&models, Some("conn"), l, m);
        assert_eq!(pick(Some("conn/m"), None), Ok(Some(("org/m".into(), true))));
        // An instance's name only: the device's own ref is not one.
        assert!(pick(Some("mine"), Some("org/m")).is_err());
        assert_eq!(pick(None, Some("mine")), Ok(Some(("mine".into(), false))));
        assert_eq!(pick(None, None), Ok(Some(("mine".into(), false))));
        assert_eq!(pick_model(&[], None, None, None), Ok(None));
    }

    #[test]
    fn a_session_is_unserved_once_the_instance_stops_serving_its_model() {
        let mut rec = SessionRecord::testing("ses_a");
        rec.model = Some("org/m".into());
        assert_eq!(unserved(&rec, &[]), None, "the device's own model");
        rec.instance = true;
        assert_eq!(unserved(&rec, &[Model::served("org/m")]), None);
        assert_eq!(
            unserved(&rec, &[own("org/m")]).as_deref(),
            Some(
                "session `ses_a` runs on model `org/m`, which the instance no longer serves to \
                 this device: choose another with `_lembas/configure`"
            )
        );
        assert_eq!(
            unserved(&rec, &[]).as_deref(),
            Some(
                "session `ses_a` runs on model `org/m`, and the device is not logged in to an \
                 instance that serves it models"
            )
        );
    }

    #[test]
    fn configure_changes_an_idle_session_and_says_what_it_keeps_otherwise() {
        // Nothing changed: the answer, nothing to store or announce.
        let mut s = session();
        let same = s.configure(None, None, Some("conn"), 5).unwrap();
        assert_eq!(same.result, json!({ "model": "old", "effort": "low" }));
        assert!(same.changed.is_none());
        assert_eq!(s.durable.touched, 0);

        // A model that does not resolve: its reason, what the session keeps, and no change.
        let miss = RpcError::invalid_params("no model `x`");
        let e = s.configure(Some(Err(miss)), Some("high".into()), None, 5);
        assert_eq!(
            e.err().map(|e| e.message).as_deref(),
            Some("no model `x`; session `ses_a` keeps model `old`")
        );
        assert_eq!(s.durable.effort.as_deref(), Some("low"));

        // A change: stored with its time, announced naming the connection of an instance's
        // model only.
        let done = s
            .configure(Some(Ok(("org/m".into(), true))), None, Some("conn"), 5)
            .unwrap();
        assert_eq!(done.result, json!({ "model": "org/m", "effort": "low" }));
        let (record, event) = done.changed.expect("it changed");
        assert_eq!(record, s.record());
        assert_eq!(
            (s.durable.model.as_deref(), s.durable.touched),
            (Some("org/m"), 5)
        );
        let LembasEvent::Model(event) = event else {
            panic!("a model event")
        };
        assert_eq!(event.connection.as_deref(), Some("conn"));
        let own = s.configure(Some(Ok(("mine".into(), false))), None, Some("conn"), 6);
        let (_, LembasEvent::Model(event)) = own.unwrap().changed.expect("it changed") else {
            panic!("a model event")
        };
        assert_eq!((event.connection, event.instance), (None, false));

        // While a turn waits: refused, and nothing changes.
        s.turns.admit(
            TurnStart::testing("t1", "hi"),
            Admission::default(),
            (ConnId(1), Id::number(1)),
        );
        let e = s
            .configure(None, Some("high".into()), None, 7)
            .err()
            .unwrap();
        assert_eq!(
            e.message,
            "a turn runs or waits in session `ses_a`: configure it between prompts; session \
             `ses_a` keeps model `mine`"
        );
        assert_eq!(s.durable.effort.as_deref(), Some("low"));
    }
}
