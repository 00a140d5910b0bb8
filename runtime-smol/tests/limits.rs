//! The device's limits as they are at each request, end to end: `lembas link` restarted with
//! remote work off, or without the root a session was made in, refuses that session's prompt
//! with -32602 naming the rule, and runs nothing.

mod common;

use common::{linked, new_session, Home, T};
use lembas::instance::{Event, TestInstance};
use lembas_core::client::ClientEvent;
use serde_json::{json, Value};

/// A prompt with turn id `turn` saying `say <turn>`; its answer (an error as
/// `"<code> <message>"`).
async fn prompt(instance: &TestInstance, session: &str, turn: &str) -> Result<Value, String> {
    let params = json!({
        "sessionId": session,
        "prompt": [{ "type": "text", "text": format!("say {turn}") }],
        "_meta": { "lembas": { "turnId": turn } },
    });
    let id = instance.call("session/prompt", params).await.unwrap();
    common::answer(instance, &id)
        .await
        .0
        .map_err(|e| format!("{} {}", e.code, e.message))
}

/// Make a session and run a turn in it; kill the device, write `config`, start it again; the
/// answer to a new prompt in the old session, and the second device's log.
async fn prompt_after_a_restart_with(config: impl FnOnce(&Home) -> String) -> (String, String) {
    let (instance, home, mut device, _) = linked(Home::new()).await;
    let session = new_session(&instance, &home.work.join("proj")).await;
    let before = prompt(&instance, &session, "msg_before").await.unwrap();
    assert_eq!(before["stopReason"], "end_turn");
    let first_log = device.sigkill();
    assert!(first_log.contains("turn msg_before of"), "{first_log}");
    drop(device);
    home.write_config(&config(&home));
    let device = home.link();
    let (ready, seen) = instance
        .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
        .await;
    assert!(ready.is_some(), "no second link: {seen:?}");
    let after = prompt(&instance, &session, "msg_after")
        .await
        .expect_err("the old session's prompt ran");
    (after, device.stderr())
}

#[test]
fn remote_work_turned_off_refuses_an_old_sessions_prompt_after_a_restart() {
    smol::block_on(async {
        let (error, log) = prompt_after_a_restart_with(|home| {
            let w = home.work.display();
            format!("remote:\n  enabled: false\n  roots: [{w}]\ntrusted: [{w}]\n")
        })
        .await;
        assert!(error.starts_with("-32602 "), "{error}");
        assert!(error.contains("remote.enabled is false"), "{error}");
        assert!(!log.contains("turn msg_after of"), "the turn ran: {log}");
    });
}

#[test]
fn a_removed_root_refuses_an_old_sessions_prompt_after_a_restart() {
    smol::block_on(async {
        let (error, log) = prompt_after_a_restart_with(|home| {
            let other = home.path().join("other");
            std::fs::create_dir_all(&other).unwrap();
            let other = std::fs::canonicalize(other).unwrap();
            let o = other.display();
            format!("remote:\n  enabled: true\n  roots: [{o}]\ntrusted: [{o}]\n")
        })
        .await;
        assert!(error.starts_with("-32602 "), "{error}");
        assert!(error.contains("is outside the device's roots"), "{error}");
        assert!(!log.contains("turn msg_after of"), "the turn ran: {log}");
    });
}
