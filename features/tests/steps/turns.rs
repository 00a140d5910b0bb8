//! Turns: prompts with turn ids and the device's answers to them, the engine's starts, the
//! queue, cancel, steer, and the client's reattach of a turn left incomplete.

use cucumber::{then, when};
use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::device::TurnPhase;
use lembas_core::testing::Dir;
use serde_json::{json, Value};

use super::sessions::call;
use super::{at, json_arg, method_of, parse};
use crate::LinkWorld;

/// A prompt as a step writes it: `\n` is a line break (one directive of the scripted engine a
/// line).
pub fn script(text: &str) -> String {
    text.replace("\\n", "\n")
}

/// The session the link's client opened.
pub fn session(w: &LinkWorld) -> String {
    w.session
        .clone()
        .expect("a step before must open a session (`a client with a session on the device`)")
}

pub fn prompt(w: &mut LinkWorld, text: &str, turn: &str) {
    let session = session(w);
    let pair = w.pair();
    pair.client
        .prompt(
            &session,
            json!([{ "type": "text", "text": script(text) }]),
            Some(turn),
            pair.now,
        )
        .expect("the client may prompt");
    pair.drive().expect("the link settles");
}

#[when(regex = r#"^the client prompts "(.*)" as turn "([^"]+)"$"#)]
fn prompts(w: &mut LinkWorld, text: String, turn: String) {
    prompt(w, &text, &turn);
}

#[when(
    regex = r#"^the client prompts (\d+) turns "([^"]+)-1" to "[^"]+", each answered before the next$"#
)]
fn prompts_many(w: &mut LinkWorld, n: usize, stem: String) {
    for i in 1..=n {
        let turn = format!("{stem}-{i}");
        prompt(w, &format!("hi {i}"), &turn);
        let answered = w.built().client_events.iter().rev().any(|e| {
            matches!(e, ClientEvent::PromptAnswered { turn_id, outcome: Ok(_), .. } if *turn_id == turn)
        });
        assert!(answered, "turn {turn} was not answered at once");
    }
}

/// The `session/prompt` requests of `turn` the device received, as their JSON-RPC ids.
fn prompt_ids(w: &LinkWorld, turn: &str) -> Vec<Value> {
    let mut ids: Vec<Value> = Vec::new();
    for (_, f) in w.link_frames(Dir::ToDevice) {
        let f = parse(&f);
        if method_of(&f) == Some("session/prompt")
            && at(&f, "params._meta.lembas.turnId") == Some(&json!(turn))
        {
            let id = f["id"].clone();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

/// The device's answers on the link to the prompts of `turn`: (request id, answer frame).
fn prompt_answers(w: &LinkWorld, turn: &str) -> Vec<(Value, Value)> {
    let ids = prompt_ids(w, turn);
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f).is_none())
        .filter_map(|f| {
            let id = f.get("id")?.clone();
            ids.contains(&id).then_some((id, f))
        })
        .collect()
}

/// The one result the prompts of `turn` were answered with (every answer the same).
pub fn turn_result(w: &LinkWorld, turn: &str) -> Value {
    let answers = prompt_answers(w, turn);
    assert!(!answers.is_empty(), "no prompt of turn {turn} was answered");
    let first = answers[0]
        .1
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("turn {turn} was answered with an error: {}", answers[0].1));
    for (_, a) in &answers {
        assert_eq!(a.get("result"), Some(&first), "turn {turn}: {answers:?}");
    }
    first
}

#[then(regex = r#"^turn "([^"]+)" is answered with the stop reason "([^"]+)"$"#)]
fn answered_with(w: &mut LinkWorld, turn: String, reason: String) {
    let result = turn_result(w, &turn);
    assert_eq!(result["stopReason"], json!(reason), "{result}");
    assert_eq!(result["_meta"]["lembas"]["turnId"], json!(turn), "{result}");
}

#[then(regex = r#"^in the answer of turn "([^"]+)", "([^"]+)" is (.+)$"#)]
fn answer_field(w: &mut LinkWorld, turn: String, path: String, expected: String) {
    let result = turn_result(w, &turn);
    let got = at(&result, &path);
    if expected == "absent" {
        assert_eq!(got, None, "`{path}` in {result}");
    } else {
        assert_eq!(got, Some(&json_arg(&expected)), "`{path}` in {result}");
    }
}

#[then(regex = r#"^no prompt of turn "([^"]+)" has been answered yet$"#)]
fn not_answered(w: &mut LinkWorld, turn: String) {
    assert!(
        !prompt_ids(w, &turn).is_empty(),
        "turn {turn} was never sent"
    );
    let answers = prompt_answers(w, &turn);
    assert!(answers.is_empty(), "turn {turn} was answered: {answers:?}");
}

#[then(
    regex = r#"^the (\d+) prompts of turn "([^"]+)" were answered, each once, with the same result$"#
)]
fn each_answered_once(w: &mut LinkWorld, n: usize, turn: String) {
    let ids = prompt_ids(w, &turn);
    assert_eq!(ids.len(), n, "the device received {ids:?} for turn {turn}");
    let answers = prompt_answers(w, &turn);
    for id in &ids {
        let count = answers.iter().filter(|(i, _)| i == id).count();
        assert_eq!(
            count, 1,
            "prompt {id} of turn {turn} was answered {count} times"
        );
    }
    turn_result(w, &turn);
}

#[then(regex = r#"^the client was told the answer of turn "([^"]+)" once$"#)]
fn told_once(w: &mut LinkWorld, turn: String) {
    let told = w
        .built()
        .client_events
        .iter()
        .filter(|e| matches!(e, ClientEvent::PromptAnswered { turn_id, .. } if *turn_id == turn))
        .count();
    assert_eq!(
        told, 1,
        "the client's UI heard turn {turn}'s answer {told} times"
    );
}

fn starts(w: &LinkWorld, turn: &str) -> Vec<String> {
    w.built()
        .started
        .iter()
        .filter(|t| t.turn_id == turn)
        .map(|t| t.text.clone())
        .collect()
}

#[then(regex = r#"^the engine started turn "([^"]+)" (once|\d+ times)$"#)]
fn started_n(w: &mut LinkWorld, turn: String, times: String) {
    let n: usize = match times.as_str() {
        "once" => 1,
        t => t.trim_end_matches(" times").parse().expect("a count"),
    };
    let got = starts(w, &turn);
    assert_eq!(got.len(), n, "turn {turn} started with {got:?}");
}

#[then(regex = r#"^the engine was last given "(.*)" for turn "([^"]+)"$"#)]
fn last_given(w: &mut LinkWorld, text: String, turn: String) {
    let got = starts(w, &turn);
    assert_eq!(
        got.last(),
        Some(&script(&text)),
        "turn {turn} started with {got:?}"
    );
}

#[then(regex = r#"^the engine has not started turn "([^"]+)"$"#)]
fn not_started(w: &mut LinkWorld, turn: String) {
    let got = starts(w, &turn);
    assert!(got.is_empty(), "turn {turn} started with {got:?}");
}

#[then(regex = r#"^the device holds turn "([^"]+)" as (queued|running|done)$"#)]
fn device_holds(w: &mut LinkWorld, turn: String, phase: String) {
    let phase = match phase.as_str() {
        "queued" => TurnPhase::Queued,
        "running" => TurnPhase::Running,
        _ => TurnPhase::Done,
    };
    let s = session(w);
    assert_eq!(w.built().device.turn_state(&s, &turn), Some(phase));
}

#[then(
    regex = r#"^the answer of turn "([^"]+)" reached the client before the answer of turn "([^"]+)"$"#
)]
fn answered_before(w: &mut LinkWorld, first: String, second: String) {
    let index = |turn: &str| {
        let ids = prompt_ids(w, turn);
        w.link_frames(Dir::ToClient)
            .into_iter()
            .find(|(_, f)| {
                let f = parse(f);
                method_of(&f).is_none() && f.get("id").is_some_and(|id| ids.contains(id))
            })
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("turn {turn} was not answered"))
    };
    assert!(index(&first) < index(&second));
}

/// Everything the engine said in the session, as the link's `session/update`s carried it.
fn said(w: &LinkWorld) -> Vec<String> {
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| {
            method_of(f) == Some("session/update")
                && f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .filter_map(|f| {
            f["params"]["update"]["content"]["text"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

#[then(regex = r#"^the engine said "(.*)"$"#)]
fn engine_said(w: &mut LinkWorld, words: String) {
    let said = said(w);
    assert!(
        said.iter().any(|t| t.contains(&script(&words))),
        "the engine never said `{words}`: {said:?}"
    );
}

#[then(regex = r#"^the engine never said "(.*)"$"#)]
fn engine_never_said(w: &mut LinkWorld, words: String) {
    let said = said(w);
    assert!(
        !said.iter().any(|t| t.contains(&script(&words))),
        "the engine said `{words}`: {said:?}"
    );
}

#[when("the client cancels the session's turn")]
fn cancels(w: &mut LinkWorld) {
    let s = session(w);
    let pair = w.pair();
    pair.client
        .notify("session/cancel", &json!({ "sessionId": s }), pair.now)
        .expect("the client may cancel");
    pair.drive().expect("the link settles");
}

#[when(regex = r#"^the client steers the session with "(.*)"$"#)]
fn steers(w: &mut LinkWorld, text: String) {
    let s = session(w);
    call(w, "_lembas/steer", json!({ "sessionId": s, "text": text }));
}

#[when("the client asks the session's status")]
fn asks_status(w: &mut LinkWorld) {
    let s = session(w);
    call(w, "_lembas/session/status", json!({ "sessionId": s }));
}

/// The prompt leaves the client on the link and is lost before it reaches the device.
#[when(
    regex = r#"^the client's prompt "(.*)" as turn "([^"]+)" is lost on the way to the device$"#
)]
fn prompt_lost(w: &mut LinkWorld, text: String, turn: String) {
    let faults = w.pair().faults;
    w.pair().faults.drop_permille = 1000;
    prompt(w, &text, &turn);
    w.pair().faults = faults;
    assert!(
        prompt_ids(w, &turn).is_empty(),
        "the prompt reached the device after all"
    );
    let incomplete = w.built().client.incomplete();
    assert!(
        incomplete.iter().any(|(_, t)| *t == turn),
        "the client does not keep turn {turn} as unanswered: {incomplete:?}"
    );
}

fn reattached(w: &LinkWorld, turn: &str) -> Vec<Reattach> {
    w.built()
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reattached { turn_id, how, .. } if turn_id == turn => Some(how.clone()),
            _ => None,
        })
        .collect()
}

#[then(
    regex = r#"^the client reattached turn "([^"]+)" by (following it|waiting for it|sending it again)$"#
)]
fn reattached_by(w: &mut LinkWorld, turn: String, how: String) {
    let expected = match how.as_str() {
        "following it" => Reattach::Following,
        "waiting for it" => Reattach::Waiting,
        _ => Reattach::Resent,
    };
    assert_eq!(reattached(w, &turn), vec![expected], "turn {turn}");
}

#[then(
    regex = r#"^the client reattached turn "([^"]+)" by importing it, with the assistant's text "(.*)"$"#
)]
fn reattached_imported(w: &mut LinkWorld, turn: String, text: String) {
    let how = reattached(w, &turn);
    let [Reattach::Imported(turns)] = how.as_slice() else {
        panic!("turn {turn} was reattached {how:?}");
    };
    assert_eq!(
        turns.first().map(|t| &t["role"]),
        Some(&json!("user")),
        "{turns:?}"
    );
    assert_eq!(turns[0]["turnId"], json!(turn), "{turns:?}");
    assert!(
        turns[1..]
            .iter()
            .any(|t| t["role"] == "assistant" && t["text"] == json!(text)),
        "no assistant turn says `{text}`: {turns:?}"
    );
}

#[then(regex = r#"^the client was never told an answer of turn "([^"]+)"$"#)]
fn never_told(w: &mut LinkWorld, turn: String) {
    let told = w
        .built()
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::PromptAnswered { turn_id, .. } if *turn_id == turn));
    assert!(!told, "the client's UI heard an answer of turn {turn}");
}
