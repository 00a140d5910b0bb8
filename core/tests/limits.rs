//! The device's limits as they are at each request (the spec: "the device's limits apply to
//! every request as they are at that moment"): a session made while remote work was on is not
//! used over the link once the limits no longer admit it, after a restart or a reload alike;
//! the limits hold for every session request, lexically and after symlinks; a turn runs at its
//! session's mode lowered to `max_mode` as it is when the turn starts.

use lembas_core::client::ClientEvent;
use lembas_core::config::Mode;
use lembas_core::jsonrpc::{code, RpcError};
use lembas_core::testing::Pair;
use lembas_core::wire::card::PlanAnswer;
use lembas_core::wire::event::card::PLAN;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";
const APP: &str = "/home/dev/work/app";

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&[ROOT]);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

/// Send a prompt with turn id `turn` and settle; its answer.
fn prompt(p: &mut Pair, session: &str, turn: &str) -> Result<Value, RpcError> {
    p.client
        .prompt(
            session,
            json!([{ "type": "text", "text": "hello" }]),
            Some(turn),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    p.client_events
        .iter()
        .rev()
        .find_map(|e| match e {
            ClientEvent::PromptAnswered {
                turn_id, outcome, ..
            } if turn_id == turn => Some(outcome.clone()),
            _ => None,
        })
        .expect("the prompt was answered")
}

/// Every request that runs, changes or reads the session is refused with -32602 whose message
/// contains `rule`; nothing runs.
fn every_session_request_is_refused(p: &mut Pair, session: &str, rule: &str) {
    let started = p.started.len();
    let titles_before = title_events(p);
    let e = prompt(p, session, "t_after").unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS, "{e:?}");
    assert!(e.message.contains(rule), "{}", e.message);
    assert!(e.message.contains(session), "{}", e.message);
    assert_eq!(p.started.len(), started, "a refused prompt started a turn");
    let calls = [
        (
            "session/set_mode",
            json!({ "sessionId": session, "modeId": "plan" }),
        ),
        (
            "_lembas/steer",
            json!({ "sessionId": session, "text": "more" }),
        ),
        (
            "_lembas/session/title",
            json!({ "sessionId": session, "title": "renamed" }),
        ),
        ("_lembas/session/history", json!({ "sessionId": session })),
    ];
    for (method, params) in calls {
        let e = p.call(method, params).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS, "{method}: {e:?}");
        assert!(e.message.contains(rule), "{method}: {}", e.message);
    }
    // Nothing changed: no new title was announced.
    assert_eq!(title_events(p), titles_before);
    // `status` still says the session exists, and no more than that.
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": session }))
        .unwrap();
    assert_eq!(st["exists"], true, "{st}");
    assert_eq!(st["title"], Value::Null, "{st}");
    assert!(st.get("lastTurnId").is_none(), "{st}");
}

fn title_events(p: &Pair) -> usize {
    p.frames_to_client()
        .iter()
        .filter(|f| f["params"]["event"]["type"] == "title")
        .count()
}

/// A session with a finished turn, named "before".
fn session_with_a_turn(p: &mut Pair) -> String {
    let s = p.new_session(APP);
    p.call(
        "_lembas/session/title",
        json!({ "sessionId": s, "title": "before" }),
    )
    .unwrap();
    assert_eq!(prompt(p, &s, "t_before").unwrap()["stopReason"], "end_turn");
    s
}

#[test]
fn remote_work_turned_off_across_a_restart_refuses_the_old_session() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    p.restart_device_with(|d| d.remote.enabled = false).unwrap();
    assert!(p.client.is_ready());
    every_session_request_is_refused(&mut p, &s, "remote.enabled is false");
}

#[test]
fn a_root_removed_across_a_restart_refuses_the_old_session() {
    let mut p = Pair::default_with_roots(&[ROOT, "/srv/other"]);
    p.start().unwrap();
    let s = session_with_a_turn(&mut p);
    p.restart_device_with(|d| {
        d.remote.roots = vec!["/srv/other".into()];
        d.remote.trusted = d.remote.roots.clone();
    })
    .unwrap();
    every_session_request_is_refused(&mut p, &s, "outside the device's roots (/srv/other)");
}

#[test]
fn a_directory_untrusted_across_a_restart_refuses_the_old_session() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    p.restart_device_with(|d| d.remote.trusted.clear()).unwrap();
    every_session_request_is_refused(&mut p, &s, "remote.require_trust is on");
    // Without require_trust, the same session works again: the rule, not the session, refused.
    p.restart_device_with(|d| d.remote.require_trust = false)
        .unwrap();
    assert_eq!(
        prompt(&mut p, &s, "t_again").unwrap()["stopReason"],
        "end_turn"
    );
}

#[test]
fn remote_work_turned_off_while_linked_refuses_the_open_session() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    let mut remote = p.device.config().remote.clone();
    remote.enabled = false;
    assert_eq!(p.device.reconfigure(remote, p.now), Ok(true));
    p.settle().unwrap();
    every_session_request_is_refused(&mut p, &s, "remote.enabled is false");
}

#[test]
fn delete_keeps_its_own_rule_when_the_limits_refuse_the_session() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    p.restart_device_with(|d| d.remote.enabled = false).unwrap();
    // The client was given the session: it may delete it, remote work on or not.
    let r = p
        .call("_lembas/session/delete", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(r["deleted"], true);
}

#[test]
fn an_editor_on_stdio_is_not_held_to_the_remote_limits() {
    let mut p = Pair::default_with(&[], |d| d.remote.enabled = false);
    let conn = p.open_stdio();
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    p.stdio(conn, init).unwrap();
    let new =
        br#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/anywhere/proj"}}"#;
    let v = p.stdio_answer(conn, new).unwrap();
    let s = v["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{s}","prompt":[{{"type":"text","text":"hi"}}]}}}}"#
    );
    p.stdio(conn, prompt.as_bytes()).unwrap();
    p.settle().unwrap();
    let out = &p.stdio_out[&conn];
    let answered = out.iter().any(|f| {
        let v: Value = serde_json::from_slice(f).unwrap();
        v["id"] == 3 && v["result"]["stopReason"] == "end_turn"
    });
    assert!(
        answered,
        "{:?}",
        out.iter()
            .map(|f| String::from_utf8_lossy(f))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_session_directory_re_pointed_outside_the_roots_is_refused_after_symlinks() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    // The directory is now a symlink out of the roots: lexically it is still inside.
    p.os.links.insert(APP.into(), Some("/etc/elsewhere".into()));
    every_session_request_is_refused(&mut p, &s, "`/etc/elsewhere` is outside the device's roots");
    // Pointed back, the session works again.
    p.os.links.clear();
    assert_eq!(
        prompt(&mut p, &s, "t_back").unwrap()["stopReason"],
        "end_turn"
    );
}

#[test]
fn a_session_directory_that_no_longer_resolves_is_refused_with_the_reason() {
    let mut p = linked();
    let s = session_with_a_turn(&mut p);
    p.os.links.insert(APP.into(), None);
    every_session_request_is_refused(&mut p, &s, "cannot be checked: no such directory");
}

/// The mode of every turn the engine was asked to start in `session`, in order.
fn turn_modes(p: &Pair, session: &str) -> Vec<Mode> {
    p.started
        .iter()
        .filter(|t| t.session_id == session)
        .map(|t| t.mode)
        .collect()
}

#[test]
fn a_lowered_max_mode_lowers_the_next_turn_of_an_open_session() {
    let mut p = Pair::default_with(&[ROOT], |d| d.remote.max_mode = Mode::Auto);
    p.start().unwrap();
    let s = p.new_session(APP);
    p.call(
        "session/set_mode",
        json!({ "sessionId": s, "modeId": "auto" }),
    )
    .unwrap();
    prompt(&mut p, &s, "t1").unwrap();
    // While linked: the link restarts for the new limits, the session stays open.
    let mut remote = p.device.config().remote.clone();
    remote.max_mode = Mode::Manual;
    assert_eq!(p.device.reconfigure(remote, p.now), Ok(true));
    p.settle().unwrap();
    prompt(&mut p, &s, "t2").unwrap();
    // Across a restart with a lower max_mode still.
    p.restart_device_with(|d| d.remote.max_mode = Mode::Plan)
        .unwrap();
    prompt(&mut p, &s, "t3").unwrap();
    assert_eq!(
        turn_modes(&p, &s),
        vec![Mode::Auto, Mode::Manual, Mode::Plan]
    );
    // The session's own mode was lowered, and the client told.
    let updates: Vec<Value> = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .map(|f| f["params"]["update"]["currentModeId"].clone())
        .collect();
    assert_eq!(updates, vec![json!("auto"), json!("manual"), json!("plan")]);
}

#[test]
fn an_approved_plan_sets_the_sessions_mode_lowered() {
    let mut p = Pair::default_with(&[ROOT], |d| d.remote.max_mode = Mode::Manual);
    p.start().unwrap();
    let s = p.new_session(APP);
    p.call(
        "session/set_mode",
        json!({ "sessionId": s, "modeId": "plan" }),
    )
    .unwrap();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "plan Ship it" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let (id, _) = p.cards(PLAN).into_iter().next().expect("a plan card");
    let now = p.now;
    assert!(p.client.answer(&id, &PlanAnswer::approve(Mode::Edit), now));
    p.settle().unwrap();
    // The next turn runs in the approved mode, lowered to max_mode.
    prompt(&mut p, &s, "t2").unwrap();
    assert_eq!(turn_modes(&p, &s), vec![Mode::Plan, Mode::Manual]);
    let modes: Vec<Value> = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["event"]["type"] == "mode")
        .map(|f| f["params"]["event"]["mode"].clone())
        .collect();
    assert_eq!(modes, vec![json!("plan"), json!("manual")]);
}
