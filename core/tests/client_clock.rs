//! The client's calls take `now`: a shell that calls without ticking first (a JS caller, a web
//! UI's click handler) still gets deadlines counted from the moment of the call.

use lembas_core::client::{Client, ClientOutput};
use lembas_core::testing::device_frames;
use lembas_core::{ClientConfig, Time};
use serde_json::Value;

fn sent(c: &mut Client) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(o) = c.poll_output() {
        if let ClientOutput::Send(f) = o {
            out.push(serde_json::from_slice(&f).unwrap());
        }
    }
    out
}

/// A lone client on a link to a device that listed `delete`, at time 0. No heartbeat: the
/// delete's deadline is the only timer looked at here.
fn ready() -> Client {
    let mut config = ClientConfig::default();
    config.liveness = None;
    let mut c = Client::new(config, Time::ZERO).unwrap();
    c.handle_link_up(Time::ZERO);
    let hello = device_frames::hello(3, "2.0.0", "box");
    c.handle_frame(hello.to_string().as_bytes(), Time::ZERO);
    let init = sent(&mut c)
        .into_iter()
        .find(|f| f["method"] == "initialize")
        .expect("initialize is sent after the hello");
    let answer = device_frames::initialize_answer(&init["id"], &["delete"]);
    c.handle_frame(answer.to_string().as_bytes(), Time::ZERO);
    sent(&mut c);
    assert!(c.is_ready());
    c
}

#[test]
fn a_delete_waits_for_its_answer_from_the_now_it_was_made_at() {
    let mut c = ready();
    let at = Time(100_000);
    c.delete_session("ses_1", at);
    let frames = sent(&mut c);
    assert!(
        frames
            .iter()
            .any(|f| f["method"] == "_lembas/session/delete"),
        "{frames:?}"
    );
    let wait = ClientConfig::default().request_timeout_ms;
    assert_eq!(c.poll_timeout(), Some(at.plus_ms(wait)));
    // Not given up before its time, though no tick came between the link and the delete.
    c.handle_timeout(Time(wait + 1));
    assert_eq!(c.pending_deletes(), vec![("ses_1".to_string(), 0)]);
}
