//! Cards settled by the first answer, on the Pair: the web, a terminal, timeouts, versions.

use lembas_core::client::ClientEvent;
use lembas_core::device::ConnKind;
use lembas_core::engine::{Decision, PermissionDecision, QuestionAnswer, QuestionDecision};
use lembas_core::testing::Pair;
use lembas_core::wire::card::{PermissionAnswer, QuestionAnswers};
use lembas_core::wire::event::card::{PERMISSION, QUESTION};
use lembas_core::wire::event::update::SessionUpdate;
use serde_json::{json, Value};

fn linked() -> (Pair, String) {
    let mut p = Pair::default_with_roots(&["/home/dev/work"]);
    p.start().unwrap();
    let s = p.new_session("/home/dev/work");
    (p, s)
}

/// A terminal on the device that initializes and takes the session.
fn terminal(p: &mut Pair, session: &str) -> lembas_core::device::ConnId {
    let t = p.open_local(ConnKind::Terminal);
    p.stdio(
        t,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}}"#,
    )
    .unwrap();
    let status = json!({ "jsonrpc": "2.0", "id": 1, "method": "_lembas/session/status",
                         "params": { "sessionId": session } });
    p.stdio(t, status.to_string().as_bytes()).unwrap();
    t
}

fn terminal_frames(p: &Pair, t: lembas_core::device::ConnId) -> Vec<Value> {
    p.stdio_out[&t]
        .iter()
        .map(|f| serde_json::from_slice(f).unwrap())
        .collect()
}

fn said(p: &Pair) -> String {
    p.client_events
        .iter()
        .filter_map(|e| match &e.update()?.update {
            SessionUpdate::AgentMessageChunk(c) | SessionUpdate::AgentThoughtChunk(c) => {
                Some(c.content.text.clone())
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("|")
}

#[test]
fn the_web_answers_first_and_the_terminal_card_is_settled() {
    let (mut p, s) = linked();
    let t = terminal(&mut p, &s);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "permit rm -rf build" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let asks = p.cards(PERMISSION);
    assert_eq!(asks.len(), 1);
    assert!(asks[0].1.patient());
    let term = terminal_frames(&p, t);
    let term_ask = term
        .iter()
        .find(|f| f["method"] == "session/request_permission")
        .unwrap()
        .clone();
    p.client.respond(
        &asks[0].0,
        Ok(json!({ "outcome": { "outcome": "selected", "optionId": "once" } })),
        p.now,
    );
    p.settle().unwrap();
    assert_eq!(p.decisions.len(), 1);
    assert_eq!(
        p.decisions[0].1,
        Decision::Permission(PermissionDecision::AllowOnce { command: None })
    );
    let term = terminal_frames(&p, t);
    assert!(term
        .iter()
        .any(|f| f["method"] == "_lembas/permission/settled"
            && f["params"]["toolCallId"] == term_ask["params"]["toolCall"]["toolCallId"]));
    // The terminal's late answer changes nothing.
    let late = json!({ "jsonrpc": "2.0", "id": term_ask["id"], "result": { "outcome": { "outcome": "selected", "optionId": "deny" } } });
    p.stdio(t, late.to_string().as_bytes()).unwrap();
    p.settle().unwrap();
    assert_eq!(p.decisions.len(), 1);
    assert!(said(&p).contains("allowed"), "{}", said(&p));
}

#[test]
fn the_terminal_answers_first_and_the_web_card_is_settled() {
    let (mut p, s) = linked();
    let t = terminal(&mut p, &s);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "permit deploy" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let term_ask = terminal_frames(&p, t)
        .into_iter()
        .find(|f| f["method"] == "session/request_permission")
        .unwrap();
    let answer = json!({ "jsonrpc": "2.0", "id": term_ask["id"],
        "result": { "outcome": { "outcome": "selected", "optionId": "deny" }, "_meta": { "lembas": { "feedback": "not now" } } } });
    p.stdio(t, answer.to_string().as_bytes()).unwrap();
    p.settle().unwrap();
    assert!(p
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::CardSettled { .. })));
    assert_eq!(p.client.open_cards().count(), 0);
    assert!(said(&p).contains("denied: not now"), "{}", said(&p));
}

#[test]
fn no_answer_in_time_denies_and_settles() {
    let (mut p, s) = linked();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "permit x" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    p.advance(300_000).unwrap();
    assert_eq!(
        p.decisions[0].1,
        Decision::Permission(PermissionDecision::Deny {
            feedback: None,
            timed_out: true
        })
    );
    assert!(p
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::CardSettled { .. })));
}

#[test]
fn questions_reach_no_editor_and_a_minus_32601_downgrades() {
    let (mut p, s) = linked();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "ask Which DB? | SQLite | Postgres" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let asks = p.cards(QUESTION);
    assert_eq!(asks.len(), 1);
    p.client.respond(
        &asks[0].0,
        Err(lembas_core::jsonrpc::RpcError::method_not_found(
            "_lembas/question",
        )),
        p.now,
    );
    p.settle().unwrap();
    assert_eq!(p.decisions[0].1, Decision::NobodyToAsk);
    // Downgraded: the next question is not even sent.
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "ask Again? | yes" }]),
            Some("t2"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    assert_eq!(p.cards(QUESTION).len(), 1);
    assert_eq!(p.decisions[1].1, Decision::NobodyToAsk);
}

#[test]
fn an_answered_question_goes_to_the_engine() {
    let (mut p, s) = linked();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "ask Which DB? | SQLite | Postgres" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let asks = p.cards(QUESTION);
    let postgres = QuestionAnswer::Options {
        labels: vec!["Postgres".into()],
    };
    p.client.answer(
        &asks[0].0,
        &QuestionAnswers::answered(vec![postgres]),
        p.now,
    );
    p.settle().unwrap();
    assert!(matches!(
        p.decisions[0].1,
        Decision::Question(QuestionDecision::Answered(_))
    ));
    assert!(said(&p).contains("answer: Postgres"), "{}", said(&p));
}

#[test]
fn a_card_open_when_the_link_drops_is_offered_again() {
    let (mut p, s) = linked();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "permit x" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let first = p.cards(PERMISSION);
    p.cut().unwrap();
    p.advance(5_000).unwrap();
    let asks = p.cards(PERMISSION);
    assert_eq!(asks.len(), 2, "offered again after the reattach");
    assert_eq!(asks[1].1.tool_call_id(), first[0].1.tool_call_id());
    p.client
        .answer(&asks[1].0, &PermissionAnswer::select("session"), p.now);
    p.advance(1_000).unwrap();
    assert_eq!(p.decisions.len(), 1);
    assert_eq!(
        p.decisions[0].1,
        Decision::Permission(PermissionDecision::AllowAlways)
    );
}

#[test]
fn a_delete_made_offline_is_delivered_after_the_next_initialize_once() {
    let (mut p, s) = linked();
    p.reachable = false;
    p.cut().unwrap();
    assert!(p.device.delete_session(&s, p.now));
    p.advance(1_000).unwrap();
    p.restart_device().unwrap(); // a crash in between loses nothing
    p.reachable = true;
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready());
    let deleted: Vec<Value> = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["method"] == "_lembas/session/deleted")
        .collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    p.cut().unwrap();
    p.advance(120_000).unwrap();
    let again = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["method"] == "_lembas/session/deleted")
        .count();
    assert_eq!(again, 1, "not sent twice");
}

/// The device's answer says whether it had the session: one it never had is deleted too, and
/// the client hears that it was not there.
#[test]
fn a_delete_of_a_session_the_device_never_had_is_done_and_says_so() {
    let (mut p, s) = linked();
    p.client.delete_session("ses_never", p.now);
    p.client.delete_session(&s, p.now);
    p.drive().unwrap();
    let heard: Vec<(&str, bool)> = p
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Deleted {
                session_id,
                existed,
            } => Some((session_id.as_str(), *existed)),
            _ => None,
        })
        .collect();
    assert_eq!(heard, [("ses_never", false), (s.as_str(), true)]);
    assert!(p.client.pending_deletes().is_empty());
}

#[test]
fn a_client_delete_survives_dropped_links_and_stops_a_running_turn() {
    let (mut p, s) = linked();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 100000\nsay late" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    p.reachable = false;
    p.cut().unwrap();
    p.client.delete_session(&s, p.now);
    for _ in 0..3 {
        p.advance(30_000).unwrap();
    }
    p.reachable = true;
    p.advance(120_000).unwrap();
    assert!(p
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::Deleted { existed: true, .. })));
    assert!(p.client.pending_deletes().is_empty());
    assert!(p.device.session_count() == 0);
}

/// A session an editor on stdio made in `cwd`: never given to the link's client.
fn editor_session(p: &mut Pair, cwd: &str) -> String {
    let e = p.open_stdio();
    p.stdio(
        e,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
    )
    .unwrap();
    let new = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "session/new",
                                  "params": { "cwd": cwd } });
    let out = p.stdio(e, new.to_string().as_bytes()).unwrap();
    let v: Value = serde_json::from_slice(&out[0]).unwrap();
    v["result"]["sessionId"].as_str().unwrap().to_string()
}

#[test]
fn five_refusals_give_a_delete_up() {
    let mut d = lembas_core::DeviceConfig::default();
    d.remote.enabled = true;
    d.remote.roots = vec!["/home/dev/work".into()];
    let mut p = Pair::new(d, Default::default(), Default::default(), 3);
    p.start().unwrap();
    // The editor's session: never given to the link's client, and outside the roots.
    let s = editor_session(&mut p, "/srv/other");
    p.client.delete_session(&s, p.now);
    p.settle().unwrap();
    for _ in 0..4 {
        p.cut().unwrap();
        p.advance(120_000).unwrap();
    }
    let given_up: Vec<&ClientEvent> = p
        .client_events
        .iter()
        .filter(|e| matches!(e, ClientEvent::DeleteGivenUp { .. }))
        .collect();
    assert_eq!(given_up.len(), 1, "{:?}", p.client.pending_deletes());
    assert!(p.client.pending_deletes().is_empty());
    assert_eq!(p.device.session_count(), 1);
}

/// An editor's session under the roots is the link's to delete only while remote work is on:
/// with it off, the refusal names that rule, not the roots the session is under.
#[test]
fn a_delete_refused_because_remote_work_is_off_says_so() {
    let mut d = lembas_core::DeviceConfig::default();
    d.remote.enabled = false;
    d.remote.roots = vec!["/home/dev/work".into()];
    let mut p = Pair::new(d, Default::default(), Default::default(), 3);
    p.start().unwrap();
    let s = editor_session(&mut p, "/home/dev/work/app");
    let err = p
        .call(
            "_lembas/session/delete",
            serde_json::json!({ "sessionId": s }),
        )
        .unwrap_err();
    assert!(
        err.message.contains("remote work is off (remote.enabled)")
            && !err.message.contains("roots"),
        "{}",
        err.message
    );
    assert_eq!(p.device.session_count(), 1);
}

// ----- an answer decides only the card it was asked for ------------------------------------

fn permit(p: &mut Pair, s: &str, turn: &str, what: &str) {
    let text = json!([{ "type": "text", "text": format!("permit {what}") }]);
    p.client.prompt(s, text, Some(turn), p.now).unwrap();
    p.drive().unwrap();
}

fn tool_call_id(params: &Value) -> String {
    params["toolCall"]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// An answer that names, in `_meta.lembas.toolCallId`, another card than the one its request
/// asked is not sent by the client; the right one still is.
#[test]
fn the_client_does_not_send_an_answer_naming_another_card() {
    let (mut p, s) = linked();
    permit(&mut p, &s, "t1", "deploy");
    let (id, card) = p.cards(PERMISSION).remove(0);
    let card = card.tool_call_id().to_string();
    let named = |t: &str| {
        json!({ "outcome": { "outcome": "selected", "optionId": "once" },
                "_meta": { "lembas": { "toolCallId": t } } })
    };
    assert!(!p.client.respond(&id, Ok(named("call_elsewhere")), p.now));
    p.settle().unwrap();
    assert!(p.decisions.is_empty(), "{:?}", p.decisions);
    assert_eq!(p.client.open_cards().count(), 1, "the card is still open");
    assert!(p.client.respond(&id, Ok(named(&card)), p.now));
    p.settle().unwrap();
    assert_eq!(
        p.decisions,
        vec![(
            card,
            Decision::Permission(PermissionDecision::AllowOnce { command: None })
        )]
    );
}

/// The device does not count an answer naming another card (here from a terminal, which has
/// no client role in front of it): the request still waits for its own answer, which decides.
#[test]
fn the_device_does_not_count_an_answer_naming_another_card() {
    let (mut p, s) = linked();
    let t = terminal(&mut p, &s);
    permit(&mut p, &s, "t1", "deploy");
    let ask = terminal_frames(&p, t)
        .into_iter()
        .find(|f| f["method"] == "session/request_permission")
        .unwrap();
    let card = tool_call_id(&ask["params"]);
    let deny = |named: &str| {
        json!({ "jsonrpc": "2.0", "id": ask["id"],
                "result": { "outcome": { "outcome": "selected", "optionId": "deny" },
                            "_meta": { "lembas": { "toolCallId": named, "feedback": named } } } })
    };
    p.stdio(t, deny("call_elsewhere").to_string().as_bytes())
        .unwrap();
    p.settle().unwrap();
    assert!(p.decisions.is_empty(), "{:?}", p.decisions);
    assert_eq!(
        p.client.open_cards().count(),
        1,
        "the web's card is still up"
    );
    p.stdio(t, deny(&card).to_string().as_bytes()).unwrap();
    p.settle().unwrap();
    assert_eq!(
        p.decisions,
        vec![(
            card.clone(),
            Decision::Permission(PermissionDecision::Deny {
                feedback: Some(card),
                timed_out: false
            })
        )]
    );
}

/// Seed 420 of `cards_deletes_property`'s stale answers, cut down: a card is asked on a link,
/// the device restarts from its store, and on the next link another card is asked. The web's
/// late answer to the first card (its UI had not taken it down), sent with the id it was asked
/// under and naming no card, must decide nothing. The restarted device's ids once started where
/// the first start's had, so the second card was asked under the first one's id, and the
/// answer meant for one decided the other.
#[test]
fn an_answer_to_a_card_asked_before_a_restart_decides_no_card_after_it() {
    let (mut p, s) = linked();
    permit(&mut p, &s, "t1", "rm -rf build");
    let (old, _) = p.cards(PERMISSION).remove(0);
    p.restart_device().unwrap();
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready(), "linked again");
    permit(&mut p, &s, "t2", "deploy to production");
    let (new, card) = p.cards(PERMISSION).pop().unwrap();
    let second = card.tool_call_id();
    let deny = PermissionAnswer::select("deny").with_feedback("not the build");
    p.client.answer(&old, &deny, p.now);
    p.settle().unwrap();
    assert!(
        p.decisions.is_empty(),
        "{second} (deploy to production) was decided by the answer to the card before the \
         restart: {:?}",
        p.decisions
    );
    assert_ne!(old, new, "request ids are unique across restarts");
}
