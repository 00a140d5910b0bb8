//! The model's tool calls through the whole device: the Pair runs the model engine against a
//! fake instance whose model calls the tools a step names, and whose machine performs them on
//! nothing, noting each. What a mode lets a call do is read from three facts: whether it was
//! performed, whether the client was asked, and the call's last `tool_call_update`.

use cucumber::{given, then, when};
use lembas_core::testing::fake_instance::{op_name, ModelReply};
use lembas_core::testing::Dir;
use serde_json::{json, Value};

use super::cards::web_open_card;
use super::{json_arg, method_of, parse};
use crate::LinkWorld;

#[given("the device runs the model engine")]
fn runs_model_engine(w: &mut LinkWorld) {
    assert!(
        w.pair.is_none(),
        "the engine is chosen before the device starts"
    );
    w.model_engine = true;
}

#[given(regex = r#"^the model will call "([a-z_]+)" with (\{.*\})$"#)]
#[when(regex = r#"^the model will call "([a-z_]+)" with (\{.*\})$"#)]
fn model_will_call(w: &mut LinkWorld, tool: String, args: String) {
    let args = json_arg(&args);
    w.pair()
        .instance
        .script
        .push_back(ModelReply::Tools(vec![(tool, args)]));
}

/// The `session/update`s the client heard, in order.
fn updates(w: &LinkWorld) -> Vec<Value> {
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f) == Some("session/update"))
        .map(|f| f["params"]["update"].clone())
        .collect()
}

/// The toolCallIds of `tool`'s calls: those whose `tool_call` is titled for it (`Run …`).
fn call_ids(w: &LinkWorld, tool: &str) -> Vec<String> {
    let mut title = tool.to_string();
    title[..1].make_ascii_uppercase();
    let title = format!("{title} ");
    updates(w)
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .filter(|u| u["title"].as_str().is_some_and(|t| t.starts_with(&title)))
        .filter_map(|u| u["toolCallId"].as_str().map(str::to_owned))
        .collect()
}

/// The `session/request_permission` requests the client was sent for `tool`'s calls.
fn permission_requests(w: &LinkWorld, tool: &str) -> Vec<Value> {
    let ids = call_ids(w, tool);
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f) == Some("session/request_permission"))
        .filter(|f| {
            f["params"]["toolCall"]["toolCallId"]
                .as_str()
                .is_some_and(|id| ids.iter().any(|i| i == id))
        })
        .collect()
}

/// The last `tool_call_update` the client heard for `tool`'s calls.
fn last_update(w: &LinkWorld, tool: &str) -> Option<Value> {
    let ids = call_ids(w, tool);
    updates(w).into_iter().rev().find(|u| {
        u["sessionUpdate"] == "tool_call_update"
            && u["toolCallId"]
                .as_str()
                .is_some_and(|id| ids.iter().any(|i| i == id))
    })
}

/// How many of the model's `tool` calls the machine performed (the engine's own write of a
/// submitted plan's record, under `.lembas/plans/`, is not one).
fn performed(w: &LinkWorld, tool: &str) -> usize {
    w.built()
        .instance
        .performed
        .iter()
        .filter(|r| op_name(&r.op) == tool)
        .filter(|r| !r.op.path().is_some_and(|p| p.starts_with(".lembas/plans/")))
        .count()
}

#[then(regex = r#"^the model's "([a-z_]+)" went ahead without asking$"#)]
fn went_ahead(w: &mut LinkWorld, tool: String) {
    assert_eq!(performed(w, &tool), 1, "`{tool}` was not performed once");
    let asked = permission_requests(w, &tool);
    assert!(asked.is_empty(), "the client was asked: {asked:?}");
    let update = last_update(w, &tool).expect("no tool_call_update");
    assert_eq!(update["status"], "completed", "{update}");
}

#[then(regex = r#"^the model's "([a-z_]+)" waits for the client's approval$"#)]
fn waits(w: &mut LinkWorld, tool: String) {
    assert_eq!(
        performed(w, &tool),
        0,
        "`{tool}` ran before it was approved"
    );
    let asked = permission_requests(w, &tool);
    assert_eq!(asked.len(), 1, "the client was asked {} times", asked.len());
    let reason = &asked[0]["params"]["_meta"]["lembas"]["reason"];
    assert!(
        reason.as_str().is_some_and(|r| !r.is_empty()),
        "a card says why it asks: {reason}"
    );
}

#[then(regex = r#"^the model's "([a-z_]+)" was refused, saying "([^"]+)"$"#)]
fn refused(w: &mut LinkWorld, tool: String, words: String) {
    assert_eq!(performed(w, &tool), 0, "`{tool}` was performed");
    let asked = permission_requests(w, &tool);
    assert!(asked.is_empty(), "the client was asked: {asked:?}");
    let update = last_update(w, &tool).expect("no tool_call_update");
    assert_eq!(update["status"], "failed", "{update}");
    assert!(update.to_string().contains(&words), "{update}");
}

#[then(regex = r#"^the model's "([a-z_]+)" went ahead once approved$"#)]
fn went_ahead_approved(w: &mut LinkWorld, tool: String) {
    assert_eq!(performed(w, &tool), 1, "`{tool}` was not performed once");
    let update = last_update(w, &tool).expect("no tool_call_update");
    assert_eq!(update["status"], "completed", "{update}");
}

#[when(regex = r#"^the web denies the card, saying "([^"]+)"$"#)]
fn web_denies(w: &mut LinkWorld, feedback: String) {
    let id = web_open_card(w);
    let pair = w.pair();
    let answer = json!({ "outcome": { "outcome": "selected", "optionId": "deny" },
                         "_meta": { "lembas": { "feedback": feedback } } });
    pair.client.respond(&id, Ok(answer), pair.now);
    pair.settle().expect("the link settles");
}

#[when(regex = r#"^the web approves the plan in the mode "([a-z]+)"$"#)]
fn web_approves_plan(w: &mut LinkWorld, mode: String) {
    let id = web_open_card(w);
    let pair = w.pair();
    let answer = json!({ "outcome": "approve", "mode": mode });
    pair.client.respond(&id, Ok(answer), pair.now);
    pair.settle().expect("the link settles");
}

#[then(regex = r#"^the model's next request carries "([^"]+)" as a tool result$"#)]
fn next_request_carries(w: &mut LinkWorld, words: String) {
    let request = w
        .built()
        .instance
        .requests
        .last()
        .expect("the model was never called")
        .clone();
    let carried = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .any(|m| m["content"].to_string().contains(&words));
    assert!(carried, "no tool result says `{words}`: {request}");
}

#[then(regex = r#"^the client was asked for (\d+) "([a-z_]+)" in all$"#)]
fn asked_in_all(w: &mut LinkWorld, n: usize, tool: String) {
    assert_eq!(permission_requests(w, &tool).len(), n);
}

#[then(regex = r#"^the model was called (\d+) times$"#)]
fn model_called(w: &mut LinkWorld, n: usize) {
    assert_eq!(w.built().instance.requests.len(), n);
}
