//! ACP's session surface for an editor (on stdio or the hub): `session/list`, `session/load`
//! with its replay, `session/resume`, `session/close`, `session/delete`.

use cucumber::{given, then, when};
use lembas_core::device::ConnKind;
use serde_json::{json, Value};

use super::{method_of, must_at, parse};
use crate::LinkWorld;

#[given(regex = r#"^a local process on the hub, initialized, with a session in "([^"]*)"$"#)]
fn hub_with_session(w: &mut LinkWorld, cwd: String) {
    let conn = w.pair().open_local(ConnKind::Hub);
    w.editor = Some(conn);
    let sent = send(
        w,
        &json!({ "jsonrpc": "2.0", "id": "init", "method": "initialize",
                 "params": { "protocolVersion": 1, "clientCapabilities": {} } }),
    );
    assert!(
        sent.iter()
            .any(|f| f["id"] == "init" && f.get("result").is_some()),
        "{sent:?}"
    );
    let sent = send(
        w,
        &json!({ "jsonrpc": "2.0", "id": "new", "method": "session/new",
                 "params": { "cwd": cwd, "mcpServers": [] } }),
    );
    let id = sent
        .iter()
        .find(|f| f["id"] == "new")
        .map(|f| must_at(f, "result.sessionId").as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("session/new was not answered: {sent:?}"));
    w.local_session = Some(id);
}

/// One frame from the editor; what the device wrote back becomes "the answer".
fn send(w: &mut LinkWorld, frame: &Value) -> Vec<Value> {
    let conn = w
        .editor
        .expect("a step before must open the editor's connection");
    let lines = w
        .pair()
        .stdio(conn, frame.to_string().as_bytes())
        .expect("the device settles");
    w.answers = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    w.answers.iter().map(|l| parse(l)).collect()
}

fn named(w: &LinkWorld, which: &str) -> String {
    match which {
        "the link's session" => w
            .session
            .clone()
            .expect("a step before must open the link's session"),
        "its own session" => w
            .local_session
            .clone()
            .expect("a step before must open the editor's session"),
        other => panic!("no session is called `{other}`"),
    }
}

/// A request from the editor whose `$SESSION` is the session named.
#[when(regex = r"^the editor sends, for (the link's session|its own session): (.+)$")]
fn sends_for(w: &mut LinkWorld, which: String, frame: String) {
    let frame = frame.replace("$SESSION", &named(w, &which));
    send(w, &parse(&frame));
}

#[then(regex = r#"^before the answer to id (\S+) the editor was sent the updates "([^"]*)"$"#)]
fn updates_before(w: &mut LinkWorld, id: String, kinds: String) {
    let frames: Vec<Value> = w.answers.iter().map(|l| parse(l)).collect();
    let id = super::json_arg(&id);
    let at = frames
        .iter()
        .position(|f| f["id"] == id && method_of(f).is_none())
        .unwrap_or_else(|| panic!("no answer to {id}: {frames:?}"));
    assert!(frames[at].get("result").is_some(), "{}", frames[at]);
    let seen: Vec<&str> = frames[..at]
        .iter()
        .filter(|f| method_of(f) == Some("session/update"))
        .map(|f| must_at(f, "params.update.sessionUpdate").as_str().unwrap())
        .collect();
    let expected: Vec<&str> = kinds
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    assert_eq!(seen, expected, "{frames:?}");
    for f in &frames[..at] {
        assert!(
            f["params"].get("_meta").is_none(),
            "a replayed update has no seq: {f}"
        );
    }
}

#[then(
    regex = r"^the editor's list holds (\d+) sessions?(?:, the first (the link's session|its own session))?$"
)]
fn list_holds(w: &mut LinkWorld, n: usize, first: String) {
    assert_eq!(w.answers.len(), 1, "{:?}", w.answers);
    let answer = parse(&w.answers[0]);
    let sessions = must_at(&answer, "result.sessions")
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(sessions.len(), n, "{answer}");
    for s in &sessions {
        assert!(s["cwd"].as_str().unwrap().starts_with('/'), "{s}");
        assert!(s["updatedAt"].as_str().unwrap().ends_with('Z'), "{s}");
    }
    if !first.is_empty() {
        assert_eq!(
            sessions[0]["sessionId"],
            json!(named(w, &first)),
            "{answer}"
        );
    }
}

#[then(
    regex = r#"^the editor's last frame is a "([^"]+)" update of (the link's session|its own session)$"#
)]
fn last_update(w: &mut LinkWorld, kind: String, which: String) {
    let conn = w.editor.expect("an editor");
    let last = w.built().stdio_out[&conn]
        .last()
        .map(|l| parse(&String::from_utf8_lossy(l)))
        .expect("the editor was sent nothing");
    assert_eq!(method_of(&last), Some("session/update"), "{last}");
    assert_eq!(
        last["params"]["update"]["sessionUpdate"],
        json!(kind),
        "{last}"
    );
    assert_eq!(
        last["params"]["sessionId"],
        json!(named(w, &which)),
        "{last}"
    );
}

#[then(regex = r#"^the editor was sent a chunk "([^"]*)" of the link's session$"#)]
fn editor_chunk(w: &mut LinkWorld, text: String) {
    let conn = w.editor.expect("an editor");
    let session = named(w, "the link's session");
    let seen = w.built().stdio_out[&conn].iter().any(|l| {
        let f = parse(&String::from_utf8_lossy(l));
        f["params"]["sessionId"] == json!(session)
            && f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            && f["params"]["update"]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains(&text))
    });
    assert!(seen, "no chunk `{text}` on the editor's connection");
}

/// The device's requests to the editor of `method`.
fn asked(w: &LinkWorld, method: &str) -> Vec<Value> {
    let conn = w.editor.expect("an editor");
    w.built().stdio_out[&conn]
        .iter()
        .map(|l| parse(&String::from_utf8_lossy(l)))
        .filter(|f| method_of(f) == Some(method) && f.get("id").is_some())
        .collect()
}

#[then(regex = r#"^the editor was asked "([^"]+)" once$"#)]
fn editor_asked(w: &mut LinkWorld, method: String) {
    let asks = asked(w, &method);
    assert_eq!(asks.len(), 1, "{asks:?}");
}

#[then(regex = r#"^the editor was sent "\$/cancel_request" for the request it was asked$"#)]
fn editor_cancelled(w: &mut LinkWorld) {
    let asks = asked(w, "session/request_permission");
    let id = asks.first().expect("the editor was asked")["id"].clone();
    let conn = w.editor.expect("an editor");
    let cancels: Vec<Value> = w.built().stdio_out[&conn]
        .iter()
        .map(|l| parse(&String::from_utf8_lossy(l)))
        .filter(|f| method_of(f) == Some("$/cancel_request"))
        .collect();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(cancels[0]["params"]["requestId"], id, "{cancels:?}");
}

/// The editor answers the permission request it was asked with the option of `kind`.
#[when(regex = r#"^the editor answers the card with the option "([^"]+)"$"#)]
fn editor_answers(w: &mut LinkWorld, kind: String) {
    let asks = asked(w, "session/request_permission");
    let ask = asks.first().expect("the editor was asked").clone();
    let option = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == json!(kind))
        .unwrap_or_else(|| panic!("no option `{kind}` in {ask}"))["optionId"]
        .clone();
    send(
        w,
        &json!({ "jsonrpc": "2.0", "id": ask["id"],
                 "result": { "outcome": { "outcome": "selected", "optionId": option } } }),
    );
}
