//! The Pair speaks the input vocabulary (`device::Input`, `client::Input`): what a transcript
//! or the fuzz grammar hands it reaches the machines through their one `handle`.

use lembas_core::client::{self, CallError};
use lembas_core::device::{self, ConnKind, Handled, Misuse, Refused};
use lembas_core::testing::Pair;
use serde_json::json;

const ROOT: &str = "/home/dev/work";

#[test]
fn device_inputs_reach_the_device_and_say_what_they_gave() {
    let mut p = Pair::default_with_roots(&[ROOT]);
    p.start().unwrap();
    let session = p.new_session(ROOT);
    // The Pair dials for itself: a link opened from outside is a misuse, named as such.
    let open = device::Input::Open {
        kind: ConnKind::Link,
    };
    assert_eq!(
        p.device_input(open).unwrap(),
        Err(Refused::Misuse(Misuse::NotDialing))
    );
    let mut remote = p.device.config().remote.clone();
    remote.enabled = false;
    let off = p
        .device_input(device::Input::Reconfigure { remote })
        .unwrap();
    assert_eq!(off, Ok(Handled::Changed(true)));
    p.settle().unwrap();
    assert!(p.client.is_ready(), "the link came back after the restart");
    let delete = device::Input::DeleteSession {
        session_id: session.clone(),
    };
    assert_eq!(p.device_input(delete).unwrap(), Ok(Handled::Changed(true)));
    p.settle().unwrap();
    assert_eq!(p.device.session_count(), 0);
    // A local connection opened here is written to through the same vocabulary.
    let Ok(Handled::Opened(conn)) = p
        .device_input(device::Input::Open {
            kind: ConnKind::Stdio,
        })
        .unwrap()
    else {
        panic!("a stdio connection opens at any time")
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    let frame = device::Input::Frame {
        conn,
        frame: init.as_bytes().to_vec(),
    };
    assert_eq!(p.device_input(frame).unwrap(), Ok(Handled::Done));
    assert_eq!(p.stdio_out[&conn].len(), 1, "initialize was answered");
}

#[test]
fn the_link_closed_by_an_input_is_gone_for_the_client_too() {
    let mut p = Pair::default_with_roots(&[ROOT]);
    p.start().unwrap();
    let conn = p.link().unwrap();
    let closed = device::Input::Closed {
        conn,
        code: Some(1001),
    };
    assert_eq!(p.device_input(closed).unwrap(), Ok(Handled::Done));
    assert!(p.link().is_none());
    assert!(!p.client.is_ready(), "the client heard the link go");
    // After its backoff the device dials again.
    p.advance(60_000).unwrap();
    assert!(p.link().is_some_and(|c| c != conn));
    assert!(p.client.is_ready());
}

#[test]
fn client_inputs_reach_the_client() {
    let mut p = Pair::default_with_roots(&[ROOT]);
    let call = client::Input::Call {
        method: "session/new".into(),
        params: json!({ "cwd": ROOT }),
    };
    assert_eq!(
        p.client_input(call.clone()).unwrap(),
        Err(CallError::NotReady)
    );
    p.start().unwrap();
    let Ok(client::Handled::Called(_)) = p.client_input(call).unwrap() else {
        panic!("the call is sent once the link is ready")
    };
    p.settle().unwrap();
    assert_eq!(p.device.session_count(), 1);
}
