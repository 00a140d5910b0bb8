//! Setting up a device and a client, the link's handshake (`_lembas/hello`, then `initialize`),
//! and assertions on the frames it carried.

use cucumber::{given, then, when};
use lembas_core::testing::Dir;
use serde_json::Value;

use super::{json_arg, method_of, must_at, parse, roots};
use crate::LinkWorld;

/// The root a device gets when a scenario does not care which.
pub const DEFAULT_ROOT: &str = "/home/dev/work";

#[given(regex = r#"^a device whose remote work is on over "([^"]*)"$"#)]
fn remote_on(w: &mut LinkWorld, list: String) {
    let c = w.config_mut();
    c.remote.enabled = true;
    c.remote.roots = roots(&list);
}

#[given(regex = r#"^a device whose remote work is off, with the roots "([^"]*)" configured$"#)]
fn remote_off(w: &mut LinkWorld, list: String) {
    let c = w.config_mut();
    c.remote.enabled = false;
    c.remote.roots = roots(&list);
}

#[given(regex = r#"^the device runs on host "([^"]*)", platform "([^"]*)"$"#)]
fn host_platform(w: &mut LinkWorld, host: String, platform: String) {
    let c = w.config_mut();
    c.host = host;
    c.platform = platform;
}

#[given(regex = r"^the device allows frames of at most (\d+) bytes$")]
fn max_frame(w: &mut LinkWorld, bytes: usize) {
    w.config_mut().frames.max_frame_bytes = bytes;
}

#[given("a device and a client past the handshake")]
fn past_handshake(w: &mut LinkWorld) {
    if w.pair.is_none() && !w.device_config.remote.enabled {
        remote_on(w, DEFAULT_ROOT.into());
    }
    handshake_done(w);
}

#[given("the device and the client have completed the handshake")]
fn handshake_done(w: &mut LinkWorld) {
    links(w);
    assert!(
        w.built().client.is_ready(),
        "the handshake did not finish: {w:?}"
    );
}

#[given("the device has not linked yet")]
fn not_linked(w: &mut LinkWorld) {
    let pair = w.pair();
    assert!(pair.link().is_none() && pair.transcript.is_empty());
}

#[when("the device links to the instance")]
fn links(w: &mut LinkWorld) {
    w.pair().start().expect("the handshake settles");
}

/// A frame of the link, or of the last answer, named the way the feature files name it.
pub fn subject(w: &LinkWorld, which: &str) -> Value {
    match which {
        "the hello" => w
            .link_frames(Dir::ToClient)
            .iter()
            .map(|(_, f)| parse(f))
            .find(|f| method_of(f) == Some("_lembas/hello"))
            .unwrap_or_else(|| panic!("the device sent no _lembas/hello: {w:?}")),
        "the initialize request" => initialize_request(w),
        "the initialize answer" => {
            let id = must_at(&initialize_request(w), "id").clone();
            w.link_frames(Dir::ToClient)
                .iter()
                .map(|(_, f)| parse(f))
                .find(|f| method_of(f).is_none() && f.get("id") == Some(&id))
                .unwrap_or_else(|| panic!("initialize (id {id}) was not answered: {w:?}"))
        }
        "the answer" => {
            // The one response (a new session's `available_commands_update` may follow it).
            let responses: Vec<Value> = w
                .answers
                .iter()
                .map(|a| parse(a))
                .filter(|a| method_of(a).is_none())
                .collect();
            assert_eq!(
                responses.len(),
                1,
                "expected exactly one answer, got {:?}",
                w.answers
            );
            responses[0].clone()
        }
        other => panic!("no frame is called `{other}` in these steps"),
    }
}

fn initialize_request(w: &LinkWorld) -> Value {
    w.link_frames(Dir::ToDevice)
        .iter()
        .map(|(_, f)| parse(f))
        .find(|f| method_of(f) == Some("initialize"))
        .unwrap_or_else(|| panic!("the client sent no initialize: {w:?}"))
}

#[then(
    regex = r#"^in (the hello|the initialize request|the initialize answer|the answer), "([^"]+)" is (.+)$"#
)]
fn field_is(w: &mut LinkWorld, which: String, path: String, expected: String) {
    let frame = subject(w, &which);
    let expected = match expected.as_str() {
        "this build's version" => Value::String(lembas_core::VERSION.into()),
        json => json_arg(json),
    };
    assert_eq!(
        must_at(&frame, &path),
        &expected,
        "`{path}` in {which}: {frame}"
    );
}

#[then(
    regex = r#"^in (the hello|the initialize request|the initialize answer|the answer), "([^"]+)" holds a list of strings$"#
)]
fn field_is_list(w: &mut LinkWorld, which: String, path: String) {
    let frame = subject(w, &which);
    let list = must_at(&frame, &path)
        .as_array()
        .unwrap_or_else(|| panic!("`{path}` is not a list in {frame}"));
    assert!(
        list.iter().all(Value::is_string),
        "`{path}` holds a non-string: {frame}"
    );
}

#[then(regex = r#"^the first frame the device sends on the link is a "([^"]*)" notification$"#)]
fn first_device_frame(w: &mut LinkWorld, method: String) {
    let frames = w.link_frames(Dir::ToClient);
    let (_, first) = frames
        .first()
        .unwrap_or_else(|| panic!("the device sent nothing on the link: {w:?}"));
    let first = parse(first);
    assert_eq!(
        method_of(&first),
        Some(method.as_str()),
        "first frame: {first}"
    );
    assert!(
        first.get("id").is_none(),
        "a notification has no id: {first}"
    );
}

#[then(
    regex = r#"^the first frame the client sends on the link is an? "([^"]*)" request, after the hello arrived$"#
)]
fn first_client_frame(w: &mut LinkWorld, method: String) {
    let sent = w.link_frames(Dir::ToDevice);
    let (at, first) = sent
        .first()
        .unwrap_or_else(|| panic!("the client sent nothing on the link: {w:?}"));
    let first = parse(first);
    assert_eq!(
        method_of(&first),
        Some(method.as_str()),
        "first frame: {first}"
    );
    assert!(first.get("id").is_some(), "a request has an id: {first}");
    let hello_at = w
        .link_frames(Dir::ToClient)
        .iter()
        .find(|(_, f)| method_of(&parse(f)) == Some("_lembas/hello"))
        .map(|(i, _)| *i)
        .unwrap_or_else(|| panic!("no hello on the link: {w:?}"));
    assert!(
        hello_at < *at,
        "the client spoke before the hello arrived: {w:?}"
    );
}

#[then("the client is ready")]
fn client_ready(w: &mut LinkWorld) {
    match &w.lone_client {
        Some(c) => assert!(c.is_ready(), "{w:?}"),
        None => assert!(w.built().client.is_ready(), "{w:?}"),
    }
}

#[then("the client is not ready")]
fn client_not_ready(w: &mut LinkWorld) {
    match &w.lone_client {
        Some(c) => assert!(!c.is_ready(), "{w:?}"),
        None => assert!(!w.built().client.is_ready(), "{w:?}"),
    }
}

#[then("the client keeps the capabilities the initialize answer listed")]
fn keeps_capabilities(w: &mut LinkWorld) {
    let answer = subject(w, "the initialize answer");
    let listed = must_at(&answer, "result._meta.lembas.capabilities");
    let kept: Vec<Value> = w
        .built()
        .client
        .capabilities()
        .iter()
        .map(|c| Value::String(c.clone()))
        .collect();
    assert_eq!(&Value::Array(kept), listed);
}
