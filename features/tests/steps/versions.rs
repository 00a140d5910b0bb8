//! Protocol versions: the client refusing an older device's hello with 4400, and the device
//! that stops for good when the server refuses it with 4400 (while it redials a cut link).

use cucumber::{given, then, when};
use lembas_core::client::{Client, ClientEvent, ClientOutput};
use lembas_core::device::Effect;
use lembas_core::testing::device_frames;
use lembas_core::{ClientConfig, Time};
use serde_json::json;

use super::method_of;
use crate::LinkWorld;

#[given("a client whose link has just come up")]
fn lone_client(w: &mut LinkWorld) {
    let mut client =
        Client::new(ClientConfig::default(), Time::ZERO).expect("the default config is valid");
    client.handle_link_up(Time::ZERO);
    w.lone_client = Some(client);
}

/// Feed the lone client a `_lembas/hello` of a device speaking `protocol`, and keep everything
/// it asks for in return.
#[when(regex = r"^the device's hello says protocol (\d+)$")]
fn hello_says(w: &mut LinkWorld, protocol: u32) {
    let version = if protocol < 3 { "1.9.0" } else { "2.0.0" };
    let hello = device_frames::hello(protocol, version, "oldbox");
    let client = w
        .lone_client
        .as_mut()
        .expect("a step before must bring a client's link up");
    client.handle_frame(hello.to_string().as_bytes(), Time(5));
    while let Some(out) = client.poll_output() {
        w.lone_outputs.push(out);
    }
}

fn lone_sent(w: &LinkWorld) -> Vec<serde_json::Value> {
    super::capabilities::lone_frames(&w.lone_outputs)
}

#[then(regex = r#"^the client closes the link with (\d+) and the reason "([^"]*)"$"#)]
fn closes_with(w: &mut LinkWorld, code: u16, reason: String) {
    let closes: Vec<(u16, &str)> = w
        .lone_outputs
        .iter()
        .filter_map(|o| match o {
            ClientOutput::Close { code, reason } => Some((*code, reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(closes, vec![(code, reason.as_str())], "{w:?}");
    let refused = w.lone_outputs.iter().any(|o| {
        matches!(o, ClientOutput::Event(ClientEvent::Refused { code: c, reason: r })
            if *c == code && *r == reason)
    });
    assert!(
        refused,
        "the client's UI was not told of the refusal: {w:?}"
    );
}

#[then("the client does not close the link")]
fn does_not_close(w: &mut LinkWorld) {
    let closed = w
        .lone_outputs
        .iter()
        .any(|o| matches!(o, ClientOutput::Close { .. }));
    assert!(!closed, "{w:?}");
}

#[then(regex = r#"^the client sends no "([^"]*)"$"#)]
fn sends_no(w: &mut LinkWorld, method: String) {
    let sent = lone_sent(w);
    assert!(
        sent.iter().all(|f| method_of(f) != Some(method.as_str())),
        "the client sent {method}: {sent:?}"
    );
}

#[then(regex = r#"^the client sends an? "([^"]*)" request saying protocol (\d+)$"#)]
fn sends_request(w: &mut LinkWorld, method: String, protocol: u64) {
    let sent = lone_sent(w);
    let request = sent
        .iter()
        .find(|f| method_of(f) == Some(method.as_str()))
        .unwrap_or_else(|| panic!("the client sent no {method}: {sent:?}"));
    assert!(request.get("id").is_some(), "{request}");
    assert_eq!(
        super::must_at(request, "params.clientCapabilities._meta.lembas.protocol"),
        &json!(protocol),
        "{request}"
    );
}

#[when(regex = r"^the server closes the link with (\d+)$")]
fn server_closes(w: &mut LinkWorld, code: u16) {
    w.dials_before = w.pair().dials;
    let pair = w.pair();
    assert!(pair.link().is_some(), "no link to close");
    pair.close_from_server(code).expect("the close settles");
}

#[when("the link is cut")]
fn cut(w: &mut LinkWorld) {
    w.dials_before = w.pair().dials;
    let pair = w.pair();
    assert!(pair.link().is_some(), "no link to cut");
    pair.cut().expect("the cut settles");
}

#[when(regex = r"^(\d+) minutes? pass(?:es)?$")]
fn minutes_pass(w: &mut LinkWorld, minutes: u64) {
    w.pair()
        .advance(minutes * 60 * 1000)
        .expect("time passes without a livelock");
}

#[then("the device does not dial again")]
fn no_redial(w: &mut LinkWorld) {
    let pair = w.built();
    assert_eq!(pair.dials, w.dials_before, "the device redialled: {w:?}");
    assert!(pair.link().is_none(), "{w:?}");
}

#[then("the device dials again")]
fn redials(w: &mut LinkWorld) {
    let pair = w.built();
    assert!(pair.dials > w.dials_before, "no redial: {w:?}");
    assert!(pair.link().is_some(), "{w:?}");
}

#[then(regex = r#"^the device stops linking, saying "([^"]*)"$"#)]
fn stops_saying(w: &mut LinkWorld, words: String) {
    let pair = w.built();
    assert!(pair.device.link_stopped(), "{w:?}");
    let said = pair.device_effects.iter().any(|e| match e {
        Effect::Stop { message } => message.contains(&words),
        _ => false,
    });
    assert!(said, "no Stop effect saying `{words}`: {w:?}");
}

#[then("the device has not stopped linking")]
fn not_stopped(w: &mut LinkWorld) {
    let pair = w.built();
    assert!(!pair.device.link_stopped(), "{w:?}");
    assert!(
        !pair
            .device_effects
            .iter()
            .any(|e| matches!(e, Effect::Stop { .. })),
        "{w:?}"
    );
}
