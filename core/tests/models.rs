//! A session's model and effort on the link: `session/new` names a model by its served id or
//! the older forms, `_lembas/configure` changes it between prompts (a `model` event follows),
//! and a model the device cannot speak to, or a turn in the way, leaves it as it was.

use lembas_core::config::Model;
use lembas_core::jsonrpc::code;
use lembas_core::testing::Pair;
use lembas_core::wire::event::lembas::LembasEvent;
use serde_json::{json, Value};

const ROOT: &str = "/work";

/// A linked device logged in as `home` to an instance serving two models.
fn linked() -> Pair {
    let mut p = Pair::default_with(&[ROOT], |d| {
        d.connection = Some("home".into());
        d.models = vec![
            Model {
                vision: true,
                context_length: Some(65_536),
                ..Model::served("deepseek/flash")
            },
            Model::served("qwen/coder"),
        ];
    });
    p.start().unwrap();
    p
}

fn open(p: &mut Pair, meta: Value) -> Result<Value, lembas_core::jsonrpc::RpcError> {
    p.call(
        "session/new",
        json!({ "cwd": format!("{ROOT}/app"), "_meta": meta }),
    )
}

/// The `model` events the client heard for `session`, as sent.
fn model_events(p: &Pair, session: &str) -> Vec<Value> {
    p.client_events
        .iter()
        .filter_map(|e| e.lembas_event())
        .filter(|e| e.session_id == session && matches!(e.event, LembasEvent::Model(_)))
        .map(|e| serde_json::to_value(&e.event).unwrap())
        .collect()
}

#[test]
fn every_form_of_a_name_opens_the_session_on_the_served_id() {
    let mut p = linked();
    for meta in [
        json!({ "lembas_model": "qwen/coder" }),
        json!({ "lembas_model": "home/qwen/coder" }),
        json!({ "lembas_model": "home/coder" }),
        json!({ "model": "qwen/coder" }),
        json!({ "model": "home/coder", "effort": "off" }),
    ] {
        let r = open(&mut p, meta.clone()).unwrap();
        let lembas = &r["_meta"]["lembas"];
        assert_eq!(lembas["model"], "qwen/coder", "{meta}: {r}");
        assert_eq!(lembas["instance"], true, "{meta}: {r}");
        assert_eq!(
            lembas["effort"],
            meta.get("effort").cloned().unwrap_or(Value::Null)
        );
    }
}

#[test]
fn an_unknown_model_or_effort_is_refused_and_no_session_is_made() {
    let mut p = linked();
    let cases = [
        (
            json!({ "lembas_model": "other/model" }),
            "model `other/model` is not one this device can speak to",
        ),
        (
            json!({ "lembas_model": "away/coder" }),
            "model `away/coder` is not one",
        ),
        (json!({ "model": "nope" }), "model `nope` is not one"),
        (
            json!({ "effort": "max" }),
            "effort `max` is not one of off, minimal, low, medium, high, xhigh",
        ),
    ];
    for (meta, says) in cases {
        let e = open(&mut p, meta.clone()).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS, "{meta}");
        assert!(e.message.contains(says), "{meta}: {}", e.message);
    }
    assert_eq!(p.device.session_count(), 0);
}

#[test]
fn configure_changes_model_and_effort_durably_and_a_model_event_follows() {
    let mut p = linked();
    let r = open(&mut p, json!({ "lembas_model": "deepseek/flash" })).unwrap();
    let s = r["sessionId"].as_str().unwrap().to_string();
    let r = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "model": "home/coder", "effort": "high" }),
        )
        .unwrap();
    assert_eq!(r, json!({ "model": "qwen/coder", "effort": "high" }));
    assert_eq!(
        model_events(&p, &s),
        [
            json!({ "type": "model", "ref": "qwen/coder", "effort": "high",
                 "connection": "home", "instance": true })
        ]
    );
    // Effort alone; then nothing new: no event for what did not change.
    let r = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "effort": "off" }),
        )
        .unwrap();
    assert_eq!(r, json!({ "model": "qwen/coder", "effort": "off" }));
    let r = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "model": "qwen/coder" }),
        )
        .unwrap();
    assert_eq!(r, json!({ "model": "qwen/coder", "effort": "off" }));
    assert_eq!(model_events(&p, &s).len(), 2);
    // The next turn runs on what was configured, and the store says it after a restart.
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "say hi" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let start = p.started.iter().find(|t| t.turn_id == "t1").unwrap();
    assert_eq!(
        (start.model.as_deref(), start.effort.as_deref()),
        (Some("qwen/coder"), Some("off"))
    );
    p.restart_device().unwrap();
    let r = p
        .call("_lembas/configure", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(r, json!({ "model": "qwen/coder", "effort": "off" }));
}

#[test]
fn configure_is_refused_while_a_turn_runs_or_for_a_model_not_served_and_nothing_changes() {
    let mut p = linked();
    let r = open(
        &mut p,
        json!({ "lembas_model": "deepseek/flash", "effort": "low" }),
    )
    .unwrap();
    let s = r["sessionId"].as_str().unwrap().to_string();
    let e = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "model": "other/model" }),
        )
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message
            .contains("model `other/model` is not one this device can speak to")
            && e.message.contains("keeps model `deepseek/flash`"),
        "{}",
        e.message
    );
    let e = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "effort": "turbo" }),
        )
        .unwrap_err();
    assert!(
        e.message.contains("effort `turbo` is not one of"),
        "{}",
        e.message
    );
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 5000\nsay done" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.advance(100).unwrap();
    let e = p
        .call(
            "_lembas/configure",
            json!({ "sessionId": s, "model": "qwen/coder" }),
        )
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("a turn runs or waits in session"),
        "{}",
        e.message
    );
    assert!(model_events(&p, &s).is_empty());
    p.advance(6000).unwrap();
    // Between prompts again: it is the model it was.
    let r = p
        .call("_lembas/configure", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(r, json!({ "model": "deepseek/flash", "effort": "low" }));
}

#[test]
fn model_and_configure_are_listed_only_with_models() {
    let p = linked();
    let caps = p.client.capabilities();
    assert!(caps.iter().any(|c| c == "model") && caps.iter().any(|c| c == "configure"));
    let mut p = Pair::default_with(&[ROOT], |d| d.models.clear());
    p.start().unwrap();
    let caps = p.client.capabilities();
    assert!(
        !caps.iter().any(|c| c == "model" || c == "configure"),
        "{caps:?}"
    );
}

/// An editor's session opened while the model list was still on its way has no model; its
/// first turn runs on the device's default (the first) once the list came, and keeps it. A
/// session that named its model is never moved to another.
#[test]
fn a_session_made_before_the_device_had_models_runs_on_the_default_once_it_has_them() {
    let mut p = Pair::default_with(&[ROOT], |d| d.models = Vec::new());
    p.start().unwrap();
    let session = p.new_session(&format!("{ROOT}/app"));
    p.device.set_models(
        vec![Model::served("qwen/coder"), Model::served("deepseek/flash")],
        p.now,
    );
    p.settle().unwrap();
    assert!(p.client.is_ready(), "the link came back with the new list");
    p.prompt_text(&session, "t1", "hi");
    p.settle().unwrap();
    let started = p.started.last().expect("the turn started");
    assert_eq!(started.model.as_deref(), Some("qwen/coder"));
    let events = model_events(&p, &session);
    assert_eq!(
        events.last().map(|e| e["ref"].clone()),
        Some(json!("qwen/coder")),
        "{events:?}"
    );
    // Kept, durably: after a restart whose list puts another model first, the session still
    // runs on the one it took.
    p.restart_device_with(|d| {
        d.models = vec![Model::served("deepseek/flash"), Model::served("qwen/coder")];
    })
    .unwrap();
    p.prompt_text(&session, "t2", "again");
    p.settle().unwrap();
    let again = p.started.last().expect("the second turn started");
    assert_eq!(again.turn_id, "t2");
    assert_eq!(again.model.as_deref(), Some("qwen/coder"));
}
