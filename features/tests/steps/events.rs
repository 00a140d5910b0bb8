//! The session event log (our extension, capability `events`): seqs on the link, and
//! `_lembas/session/events` after a cut.

use cucumber::{given, then, when};
use lembas_core::client::{event_json, ClientEvent};
use lembas_core::testing::Dir;
use serde_json::{json, Value};

use super::parse;
use super::sessions::{answer, call};
use super::turns::session;
use crate::LinkWorld;

fn seq_of(params: &Value) -> Option<u64> {
    params["_meta"]["lembas"]["seq"].as_u64()
}

/// The session's frames the link carried to the client, parsed, in order.
fn session_frames(w: &LinkWorld) -> Vec<Value> {
    let s = session(w);
    w.built()
        .frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["sessionId"] == s.as_str())
        .collect()
}

/// The events of the last `_lembas/session/events` answer.
fn answered(w: &LinkWorld) -> Vec<Value> {
    let v = answer(w).unwrap_or_else(|e| panic!("the events call failed: {}", e.message));
    v["events"].as_array().expect("events is an array").clone()
}

/// The message text among `{ method, params }` values.
fn said(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| {
            e["method"] == "session/update"
                && e["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .filter_map(|e| e["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[given(regex = r"^the device keeps at most (\d+) events of a session$")]
fn log_events(w: &mut LinkWorld, n: usize) {
    w.config_mut().sessions.event_log_events = n;
}

#[when("the client notes the last seq it heard")]
fn notes_seq(w: &mut LinkWorld) {
    let last = session_frames(w)
        .iter()
        .filter_map(|f| seq_of(&f["params"]))
        .next_back()
        .expect("the link carried an event of the session");
    w.noted_seq = Some(last);
}

#[when("the client asks the session's events since the noted seq")]
fn asks_since_noted(w: &mut LinkWorld) {
    let s = session(w);
    let since = w.noted_seq.expect("a step before must note a seq");
    call(
        w,
        "_lembas/session/events",
        json!({ "sessionId": s, "since": since }),
    );
}

#[when(regex = r"^the client asks the session's events since (\d+), at most (\d+)$")]
fn asks_limited(w: &mut LinkWorld, since: u64, limit: u64) {
    let s = session(w);
    call(
        w,
        "_lembas/session/events",
        json!({ "sessionId": s, "since": since, "limit": limit }),
    );
}

#[when(regex = r#"^the client asks the events of session "([^"]+)" since (\d+)$"#)]
fn asks_of(w: &mut LinkWorld, s: String, since: u64) {
    call(
        w,
        "_lembas/session/events",
        json!({ "sessionId": s, "since": since }),
    );
}

#[then("every event of the session on the link carries a seq one more than the last")]
fn seqs_follow(w: &mut LinkWorld) {
    let frames = session_frames(w);
    assert!(frames.len() > 4, "{frames:?}");
    let seqs: Vec<u64> = frames
        .iter()
        .map(|f| seq_of(&f["params"]).unwrap_or_else(|| panic!("no seq on {f}")))
        .collect();
    assert!(seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");
}

#[then("the events answered follow the noted seq one by one")]
fn follow_noted(w: &mut LinkWorld) {
    let noted = w.noted_seq.expect("a step before must note a seq");
    let events = answered(w);
    assert!(!events.is_empty(), "nothing answered");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(noted + 1 + i as u64), "{e}");
        assert_eq!(
            seq_of(&e["params"]),
            e["seq"].as_u64(),
            "the params as sent: {e}"
        );
    }
}

#[then(regex = r#"^what the link carried and the events answered say "(.*)"$"#)]
fn whole_text(w: &mut LinkWorld, text: String) {
    let heard: Vec<Value> = session_frames(w)
        .into_iter()
        .map(|f| json!({ "method": f["method"], "params": f["params"] }))
        .collect();
    assert_eq!(format!("{}{}", said(&heard), said(&answered(w))), text);
}

#[then(regex = r"^(\d+) events are answered$")]
fn count_answered(w: &mut LinkWorld, n: usize) {
    assert_eq!(answered(w).len(), n);
}

fn is_commands(params: &Value) -> bool {
    params["update"]["sessionUpdate"] == "available_commands_update"
}

fn command_names(params: &Value) -> Vec<String> {
    params["update"]["availableCommands"]
        .as_array()
        .unwrap_or_else(|| panic!("no commands: {params}"))
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_string())
        .collect()
}

#[then("the last command set on the link carries the seq after the session's event before it")]
fn commands_seq(w: &mut LinkWorld) {
    let frames = session_frames(w);
    let at = frames
        .iter()
        .rposition(|f| is_commands(&f["params"]))
        .expect("the link carried an available_commands_update");
    let before = frames[..at]
        .iter()
        .filter_map(|f| seq_of(&f["params"]))
        .next_back()
        .expect("an event of the session before it");
    assert_eq!(
        seq_of(&frames[at]["params"]),
        Some(before + 1),
        "{}",
        frames[at]
    );
}

#[then(regex = r#"^the last event answered is the command set "([^"]*)"$"#)]
fn last_answered_commands(w: &mut LinkWorld, list: String) {
    let events = answered(w);
    let last = events.last().expect("nothing answered");
    assert_eq!(last["method"], "session/update", "{last}");
    assert!(is_commands(&last["params"]), "{last}");
    assert_eq!(
        command_names(&last["params"]),
        super::roots(&list),
        "{last}"
    );
}

/// The editor's session (editor_sessions.rs opens it).
fn editor_session(w: &LinkWorld) -> String {
    w.local_session
        .clone()
        .expect("a step before must open the editor's session")
}

#[then("the client asked the events of the editor's session, and was answered nothing of it but command sets")]
fn unheld_catch_up(w: &mut LinkWorld) {
    let s = editor_session(w);
    let ids: Vec<Value> = w
        .link_frames(Dir::ToDevice)
        .iter()
        .map(|(_, f)| parse(f))
        .filter(|f| f["method"] == "_lembas/session/events" && f["params"]["sessionId"] == s)
        .map(|f| f["id"].clone())
        .collect();
    assert!(
        !ids.is_empty(),
        "the client did not catch up on the editor's session"
    );
    let answers: Vec<Value> = w
        .link_frames(Dir::ToClient)
        .iter()
        .map(|(_, f)| parse(f))
        .filter(|f| f.get("method").is_none() && ids.contains(&f["id"]))
        .collect();
    assert_eq!(answers.len(), ids.len(), "{answers:?}");
    for a in &answers {
        let events = a["result"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("not a page: {a}"));
        for e in events {
            assert!(is_commands(&e["params"]), "more than its sets: {e}");
        }
    }
}

#[then("the client was handed each command set of the editor's session once, and no chunk or gap of it")]
fn unheld_handed(w: &mut LinkWorld) {
    let s = editor_session(w);
    let pair = w.built();
    let handed: Vec<Value> = pair
        .client_events
        .iter()
        .map(event_json)
        .filter(|e| e["params"]["sessionId"] == s && seq_of(&e["params"]).is_some())
        .collect();
    let sets: Vec<u64> = handed
        .iter()
        .filter(|e| is_commands(&e["params"]))
        .filter_map(|e| seq_of(&e["params"]))
        .collect();
    assert!(!sets.is_empty(), "no set handed: {handed:?}");
    assert!(
        sets.windows(2).all(|p| p[0] < p[1]),
        "a set twice: {sets:?}"
    );
    assert!(
        handed.iter().all(|e| is_commands(&e["params"])),
        "an event of it not a set: {handed:?}"
    );
    let gap = pair
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::Gap { session_id, .. } if *session_id == s));
    assert!(!gap, "a gap in the editor's session");
}

#[then("the link carried no chunk of the editor's session")]
fn no_editor_chunk(w: &mut LinkWorld) {
    let s = editor_session(w);
    let chunks: Vec<Value> = w
        .built()
        .frames_to_client()
        .into_iter()
        .filter(|f| {
            f["params"]["sessionId"] == s
                && (f["method"] == "_lembas/event"
                    || f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        })
        .collect();
    assert!(chunks.is_empty(), "{chunks:?}");
}
