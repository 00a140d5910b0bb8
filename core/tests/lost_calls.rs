//! A call whose link goes down before its answer: the device answers on the link that asked,
//! so the answer can never come, and the client says so itself. Each call the UI made is
//! answered at `link_down` (or when a new link replaces the old one) with a `LINK_LOST` error,
//! so nothing waiting on it hangs in any shell; the client's own calls and prompts are not (a
//! prompt is reattached on the next link).

mod common;

use common::lone::Lone;
use lembas_core::client::ClientEvent;
use lembas_core::jsonrpc::{code, Id, RpcError};
use lembas_core::Time;
use serde_json::{json, Value};

/// The device's capabilities here.
const CAPABILITIES: &[&str] = &["status", "delete"];

fn lost(answer: &(Id, String, Result<Value, RpcError>)) -> bool {
    matches!(&answer.2, Err(e) if e.code == code::LINK_LOST && e.message.contains("link went down"))
}

#[test]
fn the_uis_calls_waiting_at_link_down_are_answered_with_the_link_loss() {
    let mut l = Lone::new();
    l.link(CAPABILITIES);
    let new = l.call("session/new", json!({ "cwd": "/w" }));
    let status = l.call("_lembas/session/status", json!({ "sessionId": "s1" }));
    let answered = l.call("_lembas/session/status", json!({ "sessionId": "s2" }));
    l.hear(
        json!({ "jsonrpc": "2.0", "id": serde_json::from_str::<Value>(answered.as_json()).unwrap(),
                   "result": { "exists": false } }),
    );
    l.c.prompt(
        "s1",
        json!([{ "type": "text", "text": "hi" }]),
        Some("t1"),
        Time::ZERO,
    )
    .unwrap();
    l.sent();
    let before = l.events.len();
    l.cut();

    let answers = l.answers(before);
    let ids: Vec<(&Id, &str)> = answers.iter().map(|(i, m, _)| (i, m.as_str())).collect();
    assert_eq!(
        ids,
        [(&new, "session/new"), (&status, "_lembas/session/status")],
        "each call still waiting, once; not the one answered, nor the prompt"
    );
    assert!(answers.iter().all(lost), "{answers:?}");
    assert!(
        !l.events[before..]
            .iter()
            .any(|e| matches!(e, ClientEvent::PromptAnswered { .. })),
        "a prompt is reattached, not failed"
    );
    assert_eq!(l.c.incomplete(), [("s1".to_string(), "t1".to_string())]);

    // The device's late answer to a lost call, on the next link, is not handed out again.
    l.link(CAPABILITIES);
    let before = l.events.len();
    l.hear(
        json!({ "jsonrpc": "2.0", "id": serde_json::from_str::<Value>(new.as_json()).unwrap(),
                   "result": { "sessionId": "late" } }),
    );
    assert!(l.answers(before).is_empty());
}

#[test]
fn a_link_replaced_without_link_down_answers_its_calls_too() {
    let mut l = Lone::new();
    l.link(CAPABILITIES);
    let new = l.call("session/new", json!({ "cwd": "/w" }));
    let before = l.events.len();
    l.c.handle_link_up(Time::ZERO);
    l.sent();
    let answers = l.answers(before);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].0 == new && lost(&answers[0]));
}

#[test]
fn the_clients_own_calls_are_not_handed_out() {
    let mut l = Lone::new();
    // Down while initialize waits: the next link initializes again, and the UI hears nothing.
    l.hello();
    l.cut();
    assert!(l.answers(0).is_empty(), "{:?}", l.events);
    l.link(CAPABILITIES);
    // A delete kept for the next link, and down before its answer: it is sent again there.
    l.c.delete_session("s1", Time::ZERO);
    let sent = l.sent();
    assert!(
        sent.iter().any(|f| f["method"] == "_lembas/session/delete"),
        "{sent:?}"
    );
    l.cut();
    assert!(l.answers(0).is_empty(), "{:?}", l.events);
}
