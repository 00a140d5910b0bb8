//! A session's model and effort: what `session/new` picks, what `_lembas/configure` changes
//! between prompts, and whether the device still serves it when a prompt comes. The chat's
//! model, full stop: a model the device cannot speak to is refused, never replaced.

use serde_json::{json, Value};

use super::{ConnId, Device};
use crate::jsonrpc::RpcError;
use crate::model::{effort, models};
use crate::store::SessionRecord;
use crate::wire::event::lembas::{LembasEvent, ModelEvent};
use crate::wire::session::ConfigureParams;

/// `effort` as given, or -32602 naming the levels.
pub(super) fn check_effort(effort: Option<&str>) -> Result<(), RpcError> {
    effort.map_or(Ok(()), |e| {
        effort::check(e).map_err(RpcError::invalid_params)
    })
}

impl Device {
    /// The model `name` names (`instance_only`: an instance's name, not a ref of the device's
    /// own), as `(ref, instance)`; or -32602 with the reason.
    fn resolve_model(&self, name: &str, instance_only: bool) -> Result<(String, bool), RpcError> {
        let connection = self.config.connection.as_deref();
        models::resolve(&self.config.models, name, connection, instance_only)
            .map(|m| (m.id.clone(), m.instance))
            .map_err(|miss| RpcError::invalid_params(miss.reason(name)))
    }

    /// The model a new session runs on: the instance's `lembas_model`, else a ref the device
    /// knows, else the device's default.
    pub(super) fn pick_model(
        &self,
        lembas_model: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<(String, bool)>, RpcError> {
        if let Some(name) = lembas_model {
            return self.resolve_model(name, true).map(Some);
        }
        if let Some(name) = model {
            return self.resolve_model(name, false).map(Some);
        }
        let first = self.config.models.first();
        Ok(first.map(|m| (m.id.clone(), m.instance)))
    }

    /// `_lembas/configure`: the session's model (an instance's name) or effort, between
    /// prompts. While a turn runs or waits, or for a model the device cannot speak to, -32602
    /// and nothing changes. A change is made durable, then announced in a `model` event.
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
        let s = self.attach(conn, &p.session_id)?;
        let keeps = |s: &SessionRecord| match &s.model {
            Some(m) => format!("session `{}` keeps model `{m}`", s.id),
            None => format!("session `{}` keeps its model", s.id),
        };
        if !s.turns.idle() {
            return Err(RpcError::invalid_params(format!(
                "a turn runs or waits in session `{}`: configure it between prompts; {}",
                s.durable.id,
                keeps(&s.durable)
            )));
        }
        let before = (
            s.durable.model.clone(),
            s.durable.instance,
            s.durable.effort.clone(),
        );
        let kept = keeps(&s.durable);
        let (model, instance) = match &p.model {
            Some(name) => {
                let (m, instance) = self.resolve_model(name, true).map_err(|mut e| {
                    e.message = format!("{}; {kept}", e.message);
                    e
                })?;
                (Some(m), instance)
            }
            None => (before.0.clone(), before.1),
        };
        let effort = p.effort.or_else(|| before.2.clone());
        let result = json!({ "model": model, "effort": effort });
        let changed = (&model, instance, &effort) != (&before.0, before.1, &before.2);
        // Attached above, with nothing in between that could set it aside.
        if let Some(s) = self.sessions.get_mut(&p.session_id).filter(|_| changed) {
            s.durable.model = model;
            s.durable.instance = instance;
            s.durable.effort = effort;
            s.durable.touched = now;
            let record = s.record();
            self.out.persist(vec![record]);
            if let Some(event) = self.model_event(&p.session_id) {
                self.broadcast_event(&p.session_id, event);
            }
        }
        Ok(result)
    }

    /// The `model` event saying the session's model and effort as they are now.
    pub(super) fn model_event(&self, session: &str) -> Option<LembasEvent> {
        let s = &self.sessions.get(session)?.durable;
        Some(LembasEvent::Model(ModelEvent {
            connection: self.config.connection.clone().filter(|_| s.instance),
            effort: s.effort.clone(),
            instance: s.instance,
            r#ref: s.model.clone(),
        }))
    }

    /// Why session `session` cannot run a turn now on its model: the instance no longer serves
    /// it to this device (its list changed, or the device logged out). Its next prompt is
    /// refused with this rather than run on another model.
    pub(super) fn unserved(&self, session: &str) -> Option<String> {
        let s = &self.sessions.get(session)?.durable;
        let model = s.model.as_deref().filter(|_| s.instance)?;
        let served = self
            .config
            .models
            .iter()
            .any(|m| m.instance && m.id == model);
        if served {
            return None;
        }
        Some(if self.config.models.is_empty() {
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
}
