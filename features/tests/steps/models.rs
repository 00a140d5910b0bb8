//! Models: the instance's models the device is logged in to, `_lembas/configure`, the model a
//! turn runs on, and the capabilities `model` and `configure`.

use cucumber::{given, then, when};
use lembas_core::config::Model;
use lembas_core::device::{Handled, Input};
use serde_json::json;

use super::sessions::call;
use super::turns::session;
use super::{json_arg, roots};
use crate::LinkWorld;

#[given(regex = r#"^the device is logged in as "([^"]*)" to an instance serving "([^"]*)"$"#)]
fn logged_in(w: &mut LinkWorld, connection: String, models: String) {
    let c = w.config_mut();
    c.connection = Some(connection);
    c.models = roots(&models).into_iter().map(Model::served).collect();
}

#[given("the device is logged in to no instance that serves it models")]
fn no_models(w: &mut LinkWorld) {
    let c = w.config_mut();
    c.connection = None;
    c.models.clear();
}

/// `_lembas/configure` on the session with these params (its `sessionId` added).
#[when(regex = r"^the client configures the session with (\{.*\})$")]
fn configures(w: &mut LinkWorld, params: String) {
    let mut params = json_arg(&params);
    params["sessionId"] = json!(session(w));
    call(w, "_lembas/configure", params);
}

#[then(
    regex = r#"^the engine started turn "([^"]+)" on the model "([^"]*)" with the effort (.+)$"#
)]
fn started_on(w: &mut LinkWorld, turn: String, model: String, effort: String) {
    let effort: Option<String> = serde_json::from_value(json_arg(&effort))
        .unwrap_or_else(|e| panic!("the effort is a string or null: {e}"));
    let starts: Vec<(Option<String>, Option<String>)> = w
        .built()
        .started
        .iter()
        .filter(|t| t.turn_id == turn)
        .map(|t| (t.model.clone(), t.effort.clone()))
        .collect();
    assert_eq!(starts, vec![(Some(model), effort)], "turn {turn}");
}

#[then(regex = r#"^the client was listed "([^"]*)"$"#)]
fn client_listed(w: &mut LinkWorld, capability: String) {
    let caps = w.built().client.capabilities();
    assert!(caps.contains(&capability), "`{capability}` not in {caps:?}");
}

/// The instance's list, fetched again at a dial (`models` input): these, or none.
#[when(regex = r#"^the instance's models become "([^"]*)"$"#)]
fn models_become(w: &mut LinkWorld, models: String) {
    set_models(w, &models);
}

#[when("the instance serves the device no models any more")]
fn models_gone(w: &mut LinkWorld) {
    set_models(w, "");
}

fn set_models(w: &mut LinkWorld, models: &str) {
    let models = roots(models).into_iter().map(Model::served).collect();
    let pair = w.pair();
    let handled = pair
        .device_input(Input::Models { models })
        .expect("the link settles");
    assert_eq!(
        handled,
        Ok(Handled::Changed(true)),
        "the list did not change"
    );
    pair.settle().expect("the link settles");
}
