//! Sessions: a client with a session to work in, `session/new`'s refusals (roots, trust,
//! models), the bounds of a prompt, and the answers to calls made through the client.

use cucumber::{given, then, when};
use lembas_core::client::ClientEvent;
use lembas_core::config::Model;
use lembas_core::jsonrpc::RpcError;
use serde_json::{json, Value};

use super::handshake::DEFAULT_ROOT;
use super::{json_arg, must_at, roots};
use crate::LinkWorld;

/// The model a device set up by these steps can speak to, served by its instance.
pub const DEFAULT_MODEL: &str = "lembas/default";

#[given("the device requires trust and trusts no project")]
fn trusts_nothing(w: &mut LinkWorld) {
    let c = w.config_mut();
    c.remote.require_trust = true;
    c.remote.trusted.clear();
}

#[given(regex = r#"^the device trusts "([^"]*)"$"#)]
fn trusts(w: &mut LinkWorld, list: String) {
    w.config_mut().remote.trusted = roots(&list);
}

#[given(regex = r#"^the device can speak to the instance's model "([^"]*)"$"#)]
fn speaks_to(w: &mut LinkWorld, model: String) {
    w.config_mut().models = vec![Model::served(model)];
}

/// A linked device whose remote work is on over the default root, trusting it, with one
/// model; and a session the link's client opened there.
#[given("a client with a session on the device")]
fn client_with_session(w: &mut LinkWorld) {
    if w.pair.is_none() {
        let c = w.config_mut();
        c.remote.enabled = true;
        if c.remote.roots.is_empty() {
            c.remote.roots = vec![DEFAULT_ROOT.to_string()];
        }
        c.remote.trusted = c.remote.roots.clone();
        if c.models.is_empty() {
            c.models = vec![Model::served(DEFAULT_MODEL)];
        }
    }
    if !w.pair().client.is_ready() {
        w.pair().start().expect("the handshake settles");
    }
    assert!(w.built().client.is_ready(), "the handshake did not finish");
    let cwd = format!("{DEFAULT_ROOT}/app");
    open_session(w, json!({ "cwd": cwd, "mcpServers": [] }));
    let result =
        answer(w).unwrap_or_else(|e| panic!("session/new in {cwd} was refused: {}", e.message));
    let id = must_at(&result, "sessionId")
        .as_str()
        .expect("sessionId is a string");
    assert!(id.starts_with("ses_"), "a session id is `ses_…`: {id}");
    w.session = Some(id.to_string());
}

fn open_session(w: &mut LinkWorld, params: Value) {
    call(w, "session/new", params);
}

/// Call `method` through the client and let the link settle; "the call" is this one.
pub fn call(w: &mut LinkWorld, method: &str, params: Value) {
    let pair = w.pair();
    let before = pair.transcript.len();
    let id = pair.client.call(method, &params, pair.now);
    pair.drive().expect("the link settles");
    w.sent_before_call = before;
    w.call = Some(id);
}

#[when(regex = r#"^the client opens a session in "([^"]*)"$"#)]
fn opens_session(w: &mut LinkWorld, cwd: String) {
    open_session(w, json!({ "cwd": cwd, "mcpServers": [] }));
}

#[when(regex = r#"^the client opens a session in "([^"]*)" on the instance's model "([^"]*)"$"#)]
fn opens_session_on(w: &mut LinkWorld, cwd: String, model: String) {
    open_session(
        w,
        json!({ "cwd": cwd, "mcpServers": [], "_meta": { "lembas_model": model } }),
    );
}

/// What the device answered the last call made through the client.
pub fn answer(w: &LinkWorld) -> Result<Value, RpcError> {
    let id = match w.call.as_ref().expect("a step before must make a call") {
        Ok(id) => id.clone(),
        Err(e) => panic!("the call was refused before it was sent: {e}"),
    };
    let answers: Vec<&Result<Value, RpcError>> = w
        .built()
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Answer { id: i, outcome, .. } if *i == id => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers.len(),
        1,
        "the call {} was answered {} times",
        id.as_json(),
        answers.len()
    );
    answers[0].clone()
}

#[then(regex = r#"^the call is answered with the error (-?\d+), saying "([^"]*)"$"#)]
fn answered_error(w: &mut LinkWorld, code: i64, words: String) {
    match answer(w) {
        Ok(v) => panic!("the call succeeded: {v}"),
        Err(e) => {
            assert_eq!(e.code, code, "{}", e.message);
            assert!(
                e.message.contains(&words),
                "the error does not say `{words}`: {}",
                e.message
            );
        }
    }
}

#[then(regex = r#"^the call is answered with a result where "([^"]+)" is (.+)$"#)]
fn answered_result(w: &mut LinkWorld, path: String, expected: String) {
    match answer(w) {
        Ok(v) => assert_eq!(must_at(&v, &path), &json_arg(&expected), "in {v}"),
        Err(e) => panic!("the call failed: {} {}", e.code, e.message),
    }
}

#[then("the device has no session")]
fn no_session(w: &mut LinkWorld) {
    let pair = w.built();
    assert_eq!(pair.device.session_count(), 0);
    let kept = pair
        .os
        .store
        .entries()
        .into_iter()
        .filter(|e| e.table == lembas_core::store::Table::Sessions)
        .count();
    assert_eq!(kept, 0, "the store keeps a session");
}

#[when("the device restarts from its store")]
fn restarts(w: &mut LinkWorld) {
    w.pair().restart_device().expect("the restart settles");
}

#[when("the instance becomes unreachable")]
fn unreachable(w: &mut LinkWorld) {
    w.pair().reachable = false;
}

#[when("the instance becomes reachable again")]
fn reachable(w: &mut LinkWorld) {
    w.pair().reachable = true;
}

#[when(regex = r"^(\d+) seconds? pass(?:es)?$")]
fn seconds_pass(w: &mut LinkWorld, seconds: u64) {
    w.pair()
        .advance(seconds * 1000)
        .expect("time passes without a livelock");
}

/// A prompt of `blocks`, sent through the client as `turn` and left to settle.
fn prompt_blocks(w: &mut LinkWorld, blocks: Value, turn: &str) {
    let session = w
        .session
        .clone()
        .expect("a step before must open a session");
    let pair = w.pair();
    pair.client
        .prompt(&session, blocks, Some(turn), pair.now)
        .expect("the client may prompt");
    pair.drive().expect("the link settles");
}

#[when(regex = r#"^the client prompts with an image of (\d+) bytes decoded as turn "([^"]+)"$"#)]
fn prompts_image(w: &mut LinkWorld, bytes: usize, turn: String) {
    assert_eq!(bytes % 3, 0, "a size base64 says exactly: a multiple of 3");
    let data = "A".repeat(bytes / 3 * 4);
    prompt_blocks(
        w,
        json!([{ "type": "image", "mimeType": "image/png", "data": data }]),
        &turn,
    );
}

#[when(
    regex = r#"^the client prompts with (\d+) text blocks of (\d+) bytes each as turn "([^"]+)"$"#
)]
fn prompts_texts(w: &mut LinkWorld, n: usize, bytes: usize, turn: String) {
    let block = json!({ "type": "text", "text": "x".repeat(bytes) });
    prompt_blocks(w, Value::Array(vec![block; n]), &turn);
}

#[then(regex = r#"^turn "([^"]+)" is refused with the error (-?\d+), saying "([^"]*)"$"#)]
fn turn_refused(w: &mut LinkWorld, turn: String, code: i64, words: String) {
    let outcomes: Vec<&Result<Value, RpcError>> = w
        .built()
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::PromptAnswered {
                turn_id, outcome, ..
            } if *turn_id == turn => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes.len(), 1, "turn {turn} was answered {outcomes:?}");
    match outcomes[0] {
        Ok(v) => panic!("turn {turn} was not refused: {v}"),
        Err(e) => {
            assert_eq!(e.code, code, "{}", e.message);
            assert!(
                e.message.contains(&words),
                "the refusal does not say `{words}`: {}",
                e.message
            );
        }
    }
}

#[then("the engine started no turn")]
fn started_none(w: &mut LinkWorld) {
    let started: Vec<&str> = w
        .built()
        .started
        .iter()
        .map(|t| t.turn_id.as_str())
        .collect();
    assert!(started.is_empty(), "the engine started {started:?}");
}
