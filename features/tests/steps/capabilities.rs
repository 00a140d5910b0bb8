//! Capabilities: the client calls only what the device listed in `initialize`, and nothing
//! before the link is ready; a refused call sends nothing.

use cucumber::{given, then, when};
use lembas_core::client::{CallError, ClientOutput};
use lembas_core::jsonrpc::Id;
use lembas_core::testing::{device_frames, Dir};
use lembas_core::Time;
use serde_json::Value;

use super::handshake::subject;
use super::{json_arg, method_of, must_at, parse, roots};
use crate::LinkWorld;

#[given(regex = r#"^the device did not list the capability "([^"]*)"$"#)]
fn not_listed(w: &mut LinkWorld, capability: String) {
    let answer = subject(w, "the initialize answer");
    let listed = must_at(&answer, "result._meta.lembas.capabilities");
    assert!(
        !listed
            .as_array()
            .is_some_and(|l| l.iter().any(|c| c == capability.as_str())),
        "the device lists `{capability}` now: pick a capability it does not list ({listed})"
    );
    assert!(!w.built().client.capabilities().contains(&capability));
}

/// The lone client's `initialize` is answered by a device listing exactly `list`.
#[when(regex = r#"^the device answers initialize listing the capabilities "([^"]*)"$"#)]
fn answer_initialize(w: &mut LinkWorld, list: String) {
    let id = lone_frames(&w.lone_outputs)
        .into_iter()
        .find(|f| method_of(f) == Some("initialize"))
        .map(|f| must_at(&f, "id").clone())
        .expect("the client sent no initialize to answer");
    let capabilities = roots(&list);
    let capabilities: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    let answer = device_frames::initialize_answer(&id, &capabilities);
    let client = w.lone_client.as_mut().expect("a lone client");
    client.handle_frame(answer.to_string().as_bytes(), Time(10));
    while let Some(out) = client.poll_output() {
        w.lone_outputs.push(out);
    }
}

/// The frames a lone client asked to send, parsed.
pub fn lone_frames(outputs: &[ClientOutput]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match o {
            ClientOutput::Send(frame) => Some(parse(&String::from_utf8_lossy(frame))),
            _ => None,
        })
        .collect()
}

/// Call through the client's API, then let whatever the call sent out reach the link (the
/// pair's client) or the output list (a lone client).
#[when(regex = r#"^the client calls "([^"]*)" with (.+)$"#)]
fn calls(w: &mut LinkWorld, method: String, params: String) {
    let params = json_arg(&params);
    if let Some(client) = w.lone_client.as_mut() {
        w.sent_before_call = w.lone_outputs.len();
        w.call = Some(client.call(&method, &params, Time(10)));
        while let Some(out) = client.poll_output() {
            w.lone_outputs.push(out);
        }
        return;
    }
    let pair = w.pair();
    let before = pair.transcript.len();
    let result = pair.client.call(&method, &params, pair.now);
    pair.drive().expect("the link settles");
    w.sent_before_call = before;
    w.call = Some(result);
}

fn call_result(w: &LinkWorld) -> &Result<Id, CallError> {
    w.call.as_ref().expect("a step before must make a call")
}

/// The frames sent since the last call.
fn sent_since_call(w: &LinkWorld) -> Vec<Value> {
    match &w.lone_client {
        Some(_) => lone_frames(&w.lone_outputs[w.sent_before_call..]),
        None => w.built().transcript[w.sent_before_call..]
            .iter()
            .filter(|t| t.dir == Dir::ToDevice)
            .map(|t| parse(&t.frame))
            .collect(),
    }
}

#[then(
    regex = r#"^the call is refused: "([^"]*)" needs the capability "([^"]*)", which was not listed$"#
)]
fn refused_not_listed(w: &mut LinkWorld, method: String, capability: String) {
    assert_eq!(
        call_result(w),
        &Err(CallError::NotListed { method, capability })
    );
}

#[then("the call is refused: the link is not ready")]
fn refused_not_ready(w: &mut LinkWorld) {
    assert_eq!(call_result(w), &Err(CallError::NotReady));
}

#[then(regex = r#"^the call is refused: "([^"]*)" is not a request a client sends$"#)]
fn refused_unknown(w: &mut LinkWorld, method: String) {
    assert_eq!(call_result(w), &Err(CallError::UnknownMethod(method)));
}

#[then("nothing was sent on the link")]
fn nothing_sent(w: &mut LinkWorld) {
    let sent = sent_since_call(w);
    assert!(sent.is_empty(), "the refused call sent {sent:?}");
    if let Some(pair) = &w.pair {
        assert_eq!(
            pair.transcript.len(),
            w.sent_before_call,
            "frames moved on the link: {w:?}"
        );
    }
}

#[then(regex = r#"^the call went out on the link as a "([^"]*)" request with its id$"#)]
fn call_sent(w: &mut LinkWorld, method: String) {
    let id = match call_result(w) {
        Ok(id) => json_arg(id.as_json()),
        Err(e) => panic!("the call was refused: {e}"),
    };
    let sent = sent_since_call(w);
    assert!(
        sent.iter()
            .any(|f| method_of(f) == Some(method.as_str()) && f.get("id") == Some(&id)),
        "no {method} request with id {id} went out: {sent:?}"
    );
}
