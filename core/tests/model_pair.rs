//! The model engine inside a `Pair`: the whole device (sessions, turns, cards, modes) with the
//! real engine, against a fake instance whose model answers from a script.

use lembas_core::config::Mode;
use lembas_core::jsonrpc::Id;
use lembas_core::testing::fake_instance::ModelReply;
use lembas_core::testing::Pair;
use lembas_core::wire::card::{PermissionAnswer, PlanAnswer};
use lembas_core::wire::event::card::{CardParams, PermissionParams, PERMISSION, PLAN};
use serde_json::{json, Value};

const ROOT: &str = "/work";

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&[ROOT]).with_model_engine();
    p.start().unwrap();
    p
}

fn prompt(p: &mut Pair, session: &str, turn: &str, text: &str) {
    p.prompt_text(session, turn, text);
    p.settle().unwrap();
}

/// The agent message chunks the client heard.
fn said(p: &Pair) -> String {
    p.client_events
        .iter()
        .filter_map(|e| e.update()?.update.message_text())
        .collect()
}

#[test]
fn a_prompt_is_answered_by_the_model_through_the_whole_device() {
    let mut p = linked();
    p.instance
        .script
        .push_back(ModelReply::Text("hello from the model".into()));
    let session = p.new_session(&format!("{ROOT}/app"));
    prompt(&mut p, &session, "t1", "say hello");
    let answers = p.answers("t1");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].as_ref().unwrap()["stopReason"], "end_turn");
    assert_eq!(said(&p), "hello from the model");
    let request = &p.instance.requests[0];
    assert_eq!(request["model"], "lembas/default");
    let last: &Value = request["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last["content"].to_string().contains("say hello"), "{last}");
}

/// The approvals the client was put: their request ids and params.
fn approvals(p: &Pair) -> Vec<(Id, PermissionParams)> {
    p.cards(PERMISSION)
        .into_iter()
        .filter_map(|(id, card)| match card {
            CardParams::Permission(params) => Some((id, params)),
            _ => None,
        })
        .collect()
}

/// The session updates of this kind the client heard, as sent.
fn updates(p: &Pair, kind: &str) -> Vec<Value> {
    p.client_events
        .iter()
        .filter_map(|e| e.update())
        .filter(|u| u.update.kind() == kind)
        .map(|u| serde_json::to_value(&u.update).unwrap())
        .collect()
}

/// The tool messages' contents of a chat request, in order.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn session_in(p: &mut Pair, mode: &str) -> String {
    let r = p
        .call(
            "session/new",
            json!({ "cwd": format!("{ROOT}/app"), "_meta": { "mode": mode } }),
        )
        .expect("session/new succeeds");
    r["sessionId"].as_str().unwrap().to_string()
}

fn tools(calls: &[(&str, Value)]) -> ModelReply {
    ModelReply::Tools(
        calls
            .iter()
            .map(|(name, args)| (name.to_string(), args.clone()))
            .collect(),
    )
}

#[test]
fn in_edit_mode_an_edit_goes_ahead_with_its_diff_and_a_command_waits_for_its_card() {
    let mut p = linked();
    p.instance.script.push_back(tools(&[
        (
            "edit",
            json!({"path": "src/a.rs", "old_string": "a", "new_string": "b"}),
        ),
        (
            "run",
            json!({"command": "cargo test", "description": "the tests"}),
        ),
    ]));
    p.instance
        .script
        .push_back(ModelReply::Text("fixed".into()));
    let session = session_in(&mut p, "edit");
    prompt(&mut p, &session, "t1", "fix it");
    assert_eq!(p.instance.performed_ops(), vec!["edit"]);
    let calls = updates(&p, "tool_call");
    assert_eq!(
        calls.iter().map(|c| c["kind"].clone()).collect::<Vec<_>>(),
        vec![json!("edit"), json!("execute")]
    );
    let diff = updates(&p, "tool_call_update")
        .into_iter()
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "diff")
        .expect("the edit's diff reached the client");
    assert_eq!(diff["path"], "/work/app/src/a.rs");
    assert_eq!(diff["newText"], "b");
    let asks = approvals(&p);
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(
        asks[0].1.meta.lembas.reason,
        "run `cargo test`: edit mode asks before every command"
    );
    assert!(p.answers("t1").is_empty(), "the turn waits for the card");
    p.client
        .answer(&asks[0].0, &PermissionAnswer::select("once"), p.now);
    p.settle().unwrap();
    assert_eq!(p.instance.performed_ops(), vec!["edit", "run"]);
    assert_eq!(
        p.answers("t1")[0].as_ref().unwrap()["stopReason"],
        "end_turn"
    );
    assert_eq!(said(&p), "fixed");
    let results = tool_results(&p.instance.requests[1]);
    assert_eq!(results[0], "edit src/a.rs: done");
    assert_eq!(results[1], "exit code 0\nran cargo test\n");
}

#[test]
fn a_denial_with_feedback_reaches_the_models_next_request() {
    let mut p = linked();
    p.instance
        .script
        .push_back(tools(&[("run", json!({"command": "rm -rf build"}))]));
    let session = session_in(&mut p, "manual");
    prompt(&mut p, &session, "t1", "clean up");
    let asks = approvals(&p);
    let deny = PermissionAnswer::select("deny").with_feedback("keep build/cache");
    p.client.answer(&asks[0].0, &deny, p.now);
    p.settle().unwrap();
    assert!(p.instance.performed.is_empty(), "nothing ran");
    assert_eq!(
        tool_results(&p.instance.requests[1]),
        vec!["Denied by the person: keep build/cache"]
    );
}

#[test]
fn an_approved_plans_mode_takes_effect_lowered_to_max_mode() {
    let mut p =
        Pair::default_with(&[ROOT], |d| d.remote.max_mode = Mode::Manual).with_model_engine();
    p.start().unwrap();
    p.instance.script.push_back(tools(&[
        ("write", json!({"path": "a.txt", "content": "x"})),
        ("plan_submit", json!({"text": "# Plan\n- write a.txt"})),
    ]));
    p.instance.script.push_back(tools(&[(
        "write",
        json!({"path": "a.txt", "content": "x"}),
    )]));
    let session = session_in(&mut p, "plan");
    prompt(&mut p, &session, "t1", "plan it");
    // The write is refused in plan mode; the plan's record is written, and the card put.
    assert_eq!(p.instance.performed_ops(), vec!["write"]);
    assert!(matches!(
        &p.instance.performed[0].op,
        lembas_core::engine_io::ToolOp::Write { path, .. } if path.starts_with(".lembas/plans/")
    ));
    let asks = p.cards(PLAN);
    assert_eq!(asks.len(), 1, "{:?}", p.client_events);
    p.client
        .answer(&asks[0].0, &PlanAnswer::approve(Mode::Edit), p.now);
    p.settle().unwrap();
    let results = tool_results(&p.instance.requests[1]);
    assert!(results[0].contains("plan mode"), "{results:?}");
    // Lowered to the device's max_mode: manual, where the next write asks first.
    assert!(results[1].contains("now in manual mode"), "{results:?}");
    assert_eq!(p.instance.performed_ops(), vec!["write"]);
    let asks = approvals(&p);
    assert_eq!(asks.len(), 1, "{:?}", p.client_events);
    assert_eq!(
        asks[0].1.meta.lembas.reason,
        "write `a.txt`: manual mode asks before every change to a file"
    );
}
