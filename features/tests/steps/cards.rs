//! Cards: approvals, questions and plans put to the web (the link's client), a terminal on the
//! device and an editor on stdio; the answers each gives, and what the engine is told.

use cucumber::{given, then, when};
use lembas_core::client::ClientEvent;
use lembas_core::device::{ConnId, ConnKind};
use lembas_core::engine::{Decision, PermissionDecision, PlanDecision, QuestionDecision};
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::testing::Dir;
use lembas_core::wire::card::{Answer, PermissionAnswer};
use lembas_core::wire::event::card::{CardParams, PERMISSION, PLAN, QUESTION};
use serde_json::{json, Value};

use super::turns::{script, session};
use super::{json_arg, method_of, must_at, parse};
use crate::LinkWorld;

const CARD_METHODS: [&str; 3] = [PERMISSION, QUESTION, PLAN];

/// A card's toolCallId, wherever the request carries it.
fn tool_call_id(params: &Value) -> Option<String> {
    params["toolCall"]["toolCallId"]
        .as_str()
        .or_else(|| params["toolCallId"].as_str())
        .map(String::from)
}

/// Write one frame on a local connection (a terminal, an editor); returns what it got back.
fn local_send(w: &mut LinkWorld, conn: ConnId, frame: &Value) -> Vec<Value> {
    w.pair()
        .stdio(conn, frame.to_string().as_bytes())
        .expect("the device settles")
        .iter()
        .map(|l| parse(&String::from_utf8_lossy(l)))
        .collect()
}

/// Everything the device wrote on a local connection, parsed.
fn local_frames(w: &LinkWorld, conn: ConnId) -> Vec<Value> {
    w.built()
        .stdio_out
        .get(&conn)
        .map(|lines| {
            lines
                .iter()
                .map(|l| parse(&String::from_utf8_lossy(l)))
                .collect()
        })
        .unwrap_or_default()
}

fn local(w: &LinkWorld, who: &str) -> ConnId {
    match who {
        "terminal" => w.terminal.expect("a step before must open a terminal"),
        "editor" => w.editor.expect("a step before must open an editor's stdio"),
        other => panic!("no local connection is called `{other}`"),
    }
}

fn initialize(w: &mut LinkWorld, conn: ConnId, capabilities: Value) {
    let out = local_send(
        w,
        conn,
        &json!({ "jsonrpc": "2.0", "id": "init", "method": "initialize",
                 "params": { "protocolVersion": 1, "clientCapabilities": capabilities } }),
    );
    assert!(
        out.iter()
            .any(|f| f["id"] == "init" && f.get("result").is_some()),
        "initialize was not answered: {out:?}"
    );
}

#[given(regex = r#"^a terminal on the device whose initialize said "lembas": (.+)$"#)]
fn terminal(w: &mut LinkWorld, said: String) {
    let conn = w.pair().open_local(ConnKind::Terminal);
    initialize(w, conn, json!({ "_meta": { "lembas": json_arg(&said) } }));
    w.terminal = Some(conn);
}

/// The terminal comes to hold the link's session (it asks its status, as one resuming it).
#[given("the terminal shares the session")]
fn terminal_shares(w: &mut LinkWorld) {
    let s = session(w);
    let conn = local(w, "terminal");
    let out = local_send(
        w,
        conn,
        &json!({ "jsonrpc": "2.0", "id": "status", "method": "_lembas/session/status",
                 "params": { "sessionId": s } }),
    );
    let answer = out
        .iter()
        .find(|f| f["id"] == "status")
        .unwrap_or_else(|| panic!("status was not answered: {out:?}"));
    assert_eq!(answer["result"]["exists"], true, "{answer}");
}

#[given(regex = r#"^the terminal opens a session of its own in "([^"]*)"$"#)]
fn terminal_session(w: &mut LinkWorld, cwd: String) {
    let conn = local(w, "terminal");
    local_session(w, conn, &cwd);
}

#[given(regex = r#"^an editor on stdio that said nothing of lembas, with a session in "([^"]*)"$"#)]
fn editor_session(w: &mut LinkWorld, cwd: String) {
    let conn = w.pair().open_stdio();
    initialize(w, conn, json!({}));
    w.editor = Some(conn);
    local_session(w, conn, &cwd);
}

fn local_session(w: &mut LinkWorld, conn: ConnId, cwd: &str) {
    let out = local_send(
        w,
        conn,
        &json!({ "jsonrpc": "2.0", "id": "new", "method": "session/new",
                 "params": { "cwd": cwd, "mcpServers": [] } }),
    );
    let answer = out
        .iter()
        .find(|f| f["id"] == "new")
        .unwrap_or_else(|| panic!("session/new was not answered: {out:?}"));
    let id = must_at(answer, "result.sessionId")
        .as_str()
        .expect("a session id");
    w.local_session = Some(id.to_string());
}

#[when(regex = r#"^the (terminal|editor) prompts "(.*)" as turn "([^"]+)"$"#)]
fn local_prompts(w: &mut LinkWorld, who: String, text: String, turn: String) {
    let conn = local(w, &who);
    let s = w
        .local_session
        .clone()
        .expect("a step before must open the session of its own");
    local_send(
        w,
        conn,
        &json!({ "jsonrpc": "2.0", "id": format!("prompt-{turn}"), "method": "session/prompt",
                 "params": { "sessionId": s,
                             "prompt": [{ "type": "text", "text": script(&text) }],
                             "_meta": { "lembas": { "turnId": turn } } } }),
    );
}

#[then(
    regex = r#"^the (terminal|editor)'s prompt of turn "([^"]+)" is answered with the stop reason "([^"]+)"$"#
)]
fn local_answered(w: &mut LinkWorld, who: String, turn: String, reason: String) {
    let conn = local(w, &who);
    let answers: Vec<Value> = local_frames(w, conn)
        .into_iter()
        .filter(|f| f["id"] == json!(format!("prompt-{turn}")))
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["result"]["stopReason"],
        json!(reason),
        "{}",
        answers[0]
    );
}

/// The cards the web was asked: (request id, card).
fn web_cards(w: &LinkWorld) -> Vec<(Id, CardParams)> {
    w.built()
        .client_events
        .iter()
        .filter_map(ClientEvent::card)
        .map(|(id, card)| (id.clone(), card.clone()))
        .collect()
}

/// The card requests written on a local connection.
fn local_cards(w: &LinkWorld, conn: ConnId) -> Vec<Value> {
    local_frames(w, conn)
        .into_iter()
        .filter(|f| {
            method_of(f).is_some_and(|m| CARD_METHODS.contains(&m)) && f.get("id").is_some()
        })
        .collect()
}

/// The toolCallId of the card this scenario is about: the first one anyone was asked.
fn the_card(w: &LinkWorld) -> String {
    if let Some((_, card)) = web_cards(w).first() {
        return card.tool_call_id().to_string();
    }
    if let Some(conn) = w.terminal {
        if let Some(f) = local_cards(w, conn).first() {
            return tool_call_id(&f["params"]).expect("a card names its toolCallId");
        }
    }
    panic!("nobody was asked a card")
}

#[then(
    regex = r#"^the web and the terminal were both asked "([^"]+)" for one toolCallId, as patient$"#
)]
fn both_asked(w: &mut LinkWorld, method: String) {
    let web: Vec<CardParams> = web_cards(w)
        .into_iter()
        .filter(|(_, card)| card.method() == method)
        .map(|(_, card)| card)
        .collect();
    let conn = local(w, "terminal");
    let term: Vec<Value> = local_cards(w, conn)
        .into_iter()
        .filter(|f| method_of(f) == Some(method.as_str()))
        .map(|f| f["params"].clone())
        .collect();
    assert_eq!(web.len(), 1, "the web was asked {web:?}");
    assert_eq!(term.len(), 1, "the terminal was asked {term:?}");
    assert_eq!(
        Some(web[0].tool_call_id().to_string()),
        tool_call_id(&term[0])
    );
    assert!(web[0].patient(), "{:?}", web[0]);
    assert_eq!(term[0]["_meta"]["lembas"]["patient"], true, "{}", term[0]);
}

#[then(regex = r#"^the web was asked "([^"]+)" (\d+) times, with the same toolCallId$"#)]
fn web_asked_n(w: &mut LinkWorld, method: String, n: usize) {
    let ids: Vec<String> = web_cards(w)
        .into_iter()
        .filter(|(_, card)| card.method() == method)
        .map(|(_, card)| card.tool_call_id().to_string())
        .collect();
    assert_eq!(ids.len(), n, "{ids:?}");
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
}

/// The web's open card: the one request the client still waits to answer.
pub(crate) fn web_open_card(w: &LinkWorld) -> Id {
    let open: Vec<Id> = w
        .built()
        .client
        .open_cards()
        .map(|(_, id)| id.clone())
        .collect();
    assert_eq!(open.len(), 1, "the web has {} cards open", open.len());
    open[0].clone()
}

#[when(regex = r#"^the web answers the card with the option "([^"]+)"$"#)]
fn web_answers(w: &mut LinkWorld, option: String) {
    let id = web_open_card(w);
    let pair = w.pair();
    pair.client
        .answer(&id, &PermissionAnswer::select(&option), pair.now);
    pair.drive().expect("the link settles");
}

#[when(regex = r#"^the web answers the card with the error (-?\d+)$"#)]
fn web_refuses(w: &mut LinkWorld, code: i64) {
    let id = web_open_card(w);
    let pair = w.pair();
    pair.client.respond(
        &id,
        Err(RpcError::new(code, "this client does not know that method")),
        pair.now,
    );
    pair.drive().expect("the link settles");
}

/// The terminal's answer to the last card it was asked.
fn terminal_answer(w: &LinkWorld, option: &str) -> Value {
    let conn = local(w, "terminal");
    let card = local_cards(w, conn)
        .pop()
        .expect("the terminal was asked no card");
    let result = PermissionAnswer::select(option).to_value();
    json!({ "jsonrpc": "2.0", "id": card["id"], "result": result })
}

#[when(regex = r#"^the terminal answers the card with the option "([^"]+)"$"#)]
fn terminal_answers(w: &mut LinkWorld, option: String) {
    let answer = terminal_answer(w, &option);
    let conn = local(w, "terminal");
    local_send(w, conn, &answer);
}

/// Both answers reach the device with no time between them: the web's is handed to the client
/// (not yet sent), the terminal's is written, and the link's frame follows at the same instant.
#[when(
    regex = r#"^the web and the terminal answer the card at the same instant, with "([^"]+)" and "([^"]+)"$"#
)]
fn both_answer(w: &mut LinkWorld, web: String, term: String) {
    let id = web_open_card(w);
    let answer = terminal_answer(w, &term);
    let now = w.built().now;
    w.pair()
        .client
        .answer(&id, &PermissionAnswer::select(&web), now);
    let conn = local(w, "terminal");
    local_send(w, conn, &answer);
    assert_eq!(w.built().now, now, "time moved between the answers");
}

fn describe(d: &Decision) -> String {
    match d {
        Decision::Permission(PermissionDecision::AllowOnce { .. }) => "allow once".into(),
        Decision::Permission(PermissionDecision::AllowAlways) => "allow always".into(),
        Decision::Permission(PermissionDecision::Deny {
            timed_out: true, ..
        }) => "deny (timed out)".into(),
        Decision::Permission(PermissionDecision::Deny { .. }) => "deny".into(),
        Decision::Question(QuestionDecision::Answered(_)) => "answered".into(),
        Decision::Question(QuestionDecision::Dismissed { timed_out: true })
        | Decision::Plan(PlanDecision::Dismissed { timed_out: true }) => {
            "dismissed (timed out)".into()
        }
        Decision::Question(QuestionDecision::Dismissed { .. })
        | Decision::Plan(PlanDecision::Dismissed { .. }) => "dismissed".into(),
        Decision::Plan(PlanDecision::Approve { mode }) => format!("approve {}", mode.as_str()),
        Decision::Plan(PlanDecision::Revise { .. }) => "revise".into(),
        Decision::NobodyToAsk => "nobody to ask".into(),
        other => format!("{other:?}"),
    }
}

fn decisions(w: &LinkWorld) -> Vec<String> {
    w.built()
        .decisions
        .iter()
        .map(|(_, d)| describe(d))
        .collect()
}

#[then("no decision has reached the engine")]
fn no_decision(w: &mut LinkWorld) {
    assert_eq!(decisions(w), Vec::<String>::new());
}

#[then("exactly one decision reached the engine")]
fn one_decision(w: &mut LinkWorld) {
    assert_eq!(decisions(w).len(), 1, "{:?}", decisions(w));
}

#[then(regex = r#"^exactly one decision reached the engine: "([^"]+)"$"#)]
fn one_decision_is(w: &mut LinkWorld, decision: String) {
    assert_eq!(decisions(w), vec![decision]);
    let card = the_card(w);
    assert_eq!(
        w.built().decisions[0].0,
        card,
        "the decision is for another card"
    );
}

#[then(regex = r#"^the decisions that reached the engine are (.+)$"#)]
fn decisions_are(w: &mut LinkWorld, list: String) {
    let expected: Vec<String> = list
        .split(',')
        .map(|d| d.trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(decisions(w), expected);
}

fn settled_for(frames: &[Value], tool_call: &str) -> usize {
    frames
        .iter()
        .filter(|f| {
            method_of(f) == Some("_lembas/permission/settled")
                && f["params"]["toolCallId"] == json!(tool_call)
        })
        .count()
}

fn link_to_client(w: &LinkWorld) -> Vec<Value> {
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .collect()
}

#[then(
    regex = r#"^the link carried "_lembas/permission/settled" for the card, naming the session$"#
)]
fn link_settled(w: &mut LinkWorld) {
    let card = the_card(w);
    let frames = link_to_client(w);
    assert_eq!(settled_for(&frames, &card), 1, "settled for {card}");
    let settled = frames
        .iter()
        .find(|f| method_of(f) == Some("_lembas/permission/settled"))
        .expect("counted above");
    assert_eq!(
        settled["params"]["sessionId"],
        json!(session(w)),
        "{settled}"
    );
}

#[then(regex = r#"^the terminal was sent "_lembas/permission/settled" for the card$"#)]
fn terminal_settled(w: &mut LinkWorld) {
    let card = the_card(w);
    let conn = local(w, "terminal");
    assert_eq!(
        settled_for(&local_frames(w, conn), &card),
        1,
        "settled for {card}"
    );
}

#[then(regex = r#"^the link carried (\d+) "([^"]+)"$"#)]
fn link_carried(w: &mut LinkWorld, n: usize, method: String) {
    let count = link_to_client(w)
        .iter()
        .filter(|f| method_of(f) == Some(method.as_str()))
        .count();
    assert_eq!(count, n, "{method} on the link");
}

#[then(regex = r#"^the (terminal|editor) was sent no "([^"]+)"$"#)]
fn local_sent_no(w: &mut LinkWorld, who: String, method: String) {
    let conn = local(w, &who);
    let frames = local_frames(w, conn);
    assert!(!frames.is_empty(), "the {who} was sent nothing at all");
    let sent: Vec<&Value> = frames
        .iter()
        .filter(|f| method_of(f) == Some(method.as_str()))
        .collect();
    assert!(sent.is_empty(), "the {who} was sent {sent:?}");
}

#[then("the client took the card down")]
fn card_down(w: &mut LinkWorld) {
    let card = the_card(w);
    let settled = w
        .built()
        .client_events
        .iter()
        .filter(
            |e| matches!(e, ClientEvent::CardSettled { tool_call_id, .. } if *tool_call_id == card),
        )
        .count();
    assert_eq!(
        settled, 1,
        "the client's UI was told to take {card} down {settled} times"
    );
    assert_eq!(w.built().client.open_cards().count(), 0);
}
