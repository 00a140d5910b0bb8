//! Sessions and turns end to end on the Pair: dedup, queueing, cancel, steer, restart, reattach.

use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::config::Mode;
use lembas_core::engine::{Context, EngineCommand, EngineEvent};
use lembas_core::jsonrpc::{code, RpcError};
use lembas_core::store::{Record, Table};
use lembas_core::testing::{reattached, Pair};
use lembas_core::wire::event::update::SessionUpdate;
use serde_json::{json, Value};

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&["/home/dev/work"]);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

fn call(
    p: &mut Pair,
    method: &str,
    params: Value,
) -> Result<Value, lembas_core::jsonrpc::RpcError> {
    p.call(method, params)
}

fn new_session(p: &mut Pair) -> String {
    p.new_session("/home/dev/work/app")
}

#[test]
fn a_prompt_streams_and_is_answered() {
    let mut p = linked();
    let s = new_session(&mut p);
    assert!(s.starts_with("ses_"));
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "hello" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let a = p.answers("t1");
    assert_eq!(a.len(), 1);
    let a = a[0].as_ref().unwrap();
    assert_eq!(a["stopReason"], "end_turn");
    assert_eq!(a["_meta"]["lembas"]["turnId"], "t1");
    let chunks: Vec<String> = p
        .client_events
        .iter()
        .filter_map(|e| match &e.update()?.update {
            SessionUpdate::AgentMessageChunk(c) => Some(c.content.text.clone()),
            _ => None,
        })
        .collect();
    assert!(chunks.iter().any(|t| t == "echo: hello"), "{chunks:?}");
}

#[test]
fn a_duplicate_of_a_finished_turn_gets_the_original_answer_and_starts_nothing() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "hello" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "changed" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let a = p.answers("t1");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0], a[1]);
    assert_eq!(p.starts("t1"), 1);
}

#[test]
fn a_duplicate_of_a_running_turn_is_answered_once_when_it_ends() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "say a\nsleep 1000\nsay b" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "say a\nsleep 1000\nsay b" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    assert!(p.answers("t1").is_empty());
    p.advance(1000).unwrap();
    // The client keeps one row per turn id: both requests are answered; the first answer
    // closes the row, so exactly one PromptAnswered event reaches the UI.
    let frames: Vec<Value> = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["result"]["_meta"]["lembas"]["turnId"] == "t1")
        .collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0]["result"], frames[1]["result"]);
    assert_eq!(p.starts("t1"), 1);
}

#[test]
fn a_finished_turn_survives_a_device_restart() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "hello" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    p.restart_device().unwrap();
    p.settle().unwrap();
    assert!(p.client.is_ready());
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "hello" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let a = p.answers("t1");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0], a[1]);
    assert_eq!(p.starts("t1"), 1);
}

/// A device restarted on its store with the same seed (`--seed`, a JS harness's `seed` option,
/// a transcript) draws new ids: the session made after the restart is a second one, not the
/// first one's record written over. (Found by the `device` fuzz target once it could delete
/// sessions: `ses_…` came out twice, and deleting one left the other.)
#[test]
fn a_restart_with_the_same_seed_never_makes_an_id_twice() {
    let mut p = linked();
    let first = new_session(&mut p);
    p.restart_device().unwrap();
    p.settle().unwrap();
    let second = new_session(&mut p);
    assert_ne!(first, second);
    assert_eq!(p.device.session_count(), 2);
}

#[test]
fn a_turn_cut_by_a_restart_is_cancelled_and_never_runs_again() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 5000\nsay late" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    p.restart_device().unwrap();
    p.settle().unwrap();
    // The client reattached: status says not running, history has the turn: imported.
    let how = reattached(&p.client_events);
    assert_eq!(how.len(), 1, "{how:?}");
    assert!(matches!(how[0], Reattach::Imported(_)), "{how:?}");
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "x" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let a = p.answers("t1");
    assert_eq!(
        a.last().unwrap().as_ref().unwrap()["stopReason"],
        "cancelled"
    );
    assert_eq!(p.starts("t1"), 1);
}

#[test]
fn prompts_wait_their_turn_and_cancel_answers_cancelled() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 1000\nsay one" }]),
            Some("a"),
            p.now,
        )
        .unwrap();
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "two" }]),
            Some("b"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    assert_eq!(p.starts("b"), 0);
    let status = call(&mut p, "_lembas/session/status", json!({ "sessionId": s })).unwrap();
    assert_eq!(status["turnId"], "a");
    assert_eq!(status["queued"], json!(["b"]));
    assert_eq!(status["busy"], true);
    p.client
        .notify("session/cancel", &json!({ "sessionId": s }), p.now)
        .unwrap();
    p.settle().unwrap();
    assert_eq!(
        p.answers("a")[0].as_ref().unwrap()["stopReason"],
        "cancelled"
    );
    assert_eq!(
        p.answers("b")[0].as_ref().unwrap()["stopReason"],
        "end_turn"
    );
    let status = call(&mut p, "_lembas/session/status", json!({ "sessionId": s })).unwrap();
    assert_eq!(status["lastTurnId"], "b");
    assert_eq!(status["busy"], false);
}

#[test]
fn steer_needs_a_running_turn_and_unsent_messages_come_back() {
    let mut p = linked();
    let s = new_session(&mut p);
    let e = call(
        &mut p,
        "_lembas/steer",
        json!({ "sessionId": s, "text": "hi" }),
    )
    .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(e.message.contains("nothing runs"), "{}", e.message);
    // Taken in between steps:
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 100\nsay done" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let r = call(
        &mut p,
        "_lembas/steer",
        json!({ "sessionId": s, "text": "also this" }),
    )
    .unwrap();
    assert_eq!(r["queued"], 1);
    p.advance(200).unwrap();
    let a = p.answers("t1");
    assert!(a[0].as_ref().unwrap()["_meta"]["lembas"]
        .get("unsent")
        .is_none());
    // Not taken in: the turn is cancelled first.
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 100\nsay done" }]),
            Some("t2"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    call(
        &mut p,
        "_lembas/steer",
        json!({ "sessionId": s, "text": "too late" }),
    )
    .unwrap();
    p.engine.cancel(&s, "t2");
    p.settle().unwrap();
    let a = p.answers("t2");
    assert_eq!(
        a[0].as_ref().unwrap()["_meta"]["lembas"]["unsent"],
        json!(["too late"])
    );
}

/// Past `sessions.max_steer` messages waiting for the running turn, another is refused naming
/// the key a person sets it with.
#[test]
fn steer_past_its_limit_is_refused_naming_the_key() {
    let mut p = linked();
    p.restart_device_with(|d| d.sessions.max_steer = 2).unwrap();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 100\nsay done" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    for n in 1..=2 {
        let r = call(
            &mut p,
            "_lembas/steer",
            json!({ "sessionId": s, "text": "more" }),
        )
        .unwrap();
        assert_eq!(r["queued"], n);
    }
    let e = call(
        &mut p,
        "_lembas/steer",
        json!({ "sessionId": s, "text": "more" }),
    )
    .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("2 steered messages") && e.message.contains("(sessions.max_steer)"),
        "{}",
        e.message
    );
}

/// A prompt over the block or prompt bounds is refused before anything else is done or
/// checked for it (its session attached, its place in the queue): its refusal names the size,
/// even where the queue is full too.
#[test]
fn a_prompt_over_its_bounds_is_refused_for_its_size_first() {
    let mut p = linked();
    p.restart_device_with(|d| {
        d.sessions.max_block_bytes = 20;
        d.sessions.max_prompt_bytes = 30;
        d.sessions.max_queued = 1;
    })
    .unwrap();
    let s = new_session(&mut p);
    p.prompt_text(&s, "t1", "sleep 100\nsay done");
    p.prompt_text(&s, "t2", "say queued");
    p.drive().unwrap();
    let prompt = |text: &str, turn: &str| {
        json!({ "sessionId": s, "prompt": [{ "type": "text", "text": text }],
                "_meta": { "lembas": { "turnId": turn } } })
    };
    let e = call(&mut p, "session/prompt", prompt("say three", "t3")).unwrap_err();
    assert!(e.message.contains("(sessions.max_queued)"), "{}", e.message);
    let e = call(&mut p, "session/prompt", prompt(&"x".repeat(21), "t4")).unwrap_err();
    assert!(e.message.contains("(max_block_bytes)"), "{}", e.message);
}

/// A steered message is bounded like a prompt's block, and what waits for a turn like a whole
/// prompt: past either it is refused naming the key, and the turn is given nothing of it.
#[test]
fn a_steer_over_a_block_or_a_prompt_is_refused_naming_the_key() {
    let mut p = linked();
    p.restart_device_with(|d| {
        d.sessions.max_block_bytes = 20;
        d.sessions.max_prompt_bytes = 30;
    })
    .unwrap();
    let s = new_session(&mut p);
    p.prompt_text(&s, "t1", "sleep 100\nsay done");
    p.drive().unwrap();
    let steer = |p: &mut Pair, text: &str| {
        call(p, "_lembas/steer", json!({ "sessionId": s, "text": text }))
    };
    let e = steer(&mut p, "twenty-one bytes long").unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("21 bytes") && e.message.contains("(sessions.max_block_bytes)"),
        "{}",
        e.message
    );
    assert_eq!(steer(&mut p, "twenty bytes of text").unwrap()["queued"], 1);
    let e = steer(&mut p, "eleven byte").unwrap_err();
    assert!(
        e.message.contains("31 bytes") && e.message.contains("(sessions.max_prompt_bytes)"),
        "{}",
        e.message
    );
    assert_eq!(steer(&mut p, "ten bytes.").unwrap()["queued"], 2);
    p.engine.cancel(&s, "t1");
    p.settle().unwrap();
    let a = p.answers("t1");
    assert_eq!(
        a[0].as_ref().unwrap()["_meta"]["lembas"]["unsent"],
        json!(["twenty bytes of text", "ten bytes."]),
        "only the messages taken wait, in order"
    );
}

/// The `_meta.lembas` context a client gives (its authored prompt, personalization, library,
/// prototypes) is kept in the session's record, written at every turn: past
/// `sessions.max_meta_bytes` of JSON a `session/new` or a prompt is refused naming the key,
/// and neither a session nor a turn is made of it.
#[test]
fn a_context_over_its_bound_is_refused_naming_the_key() {
    let mut p = linked();
    p.restart_device_with(|d| d.sessions.max_meta_bytes = 100)
        .unwrap();
    let big = "x".repeat(99);
    let sessions = p.device.session_count();
    let e = call(
        &mut p,
        "session/new",
        json!({ "cwd": "/home/dev/work/app", "mcpServers": [],
                "_meta": { "lembas": { "system_prompt": big } } }),
    )
    .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("101 bytes") && e.message.contains("(sessions.max_meta_bytes)"),
        "{}",
        e.message
    );
    assert_eq!(p.device.session_count(), sessions, "no session made");
    let s = new_session(&mut p);
    let prompt = |p: &mut Pair, turn: &str, system_prompt: &str| {
        let meta = json!({ "turnId": turn, "system_prompt": system_prompt });
        let params = json!({ "sessionId": s, "prompt": [{ "type": "text", "text": "hi" }],
                             "_meta": { "lembas": meta } });
        call(p, "session/prompt", params)
    };
    let e = prompt(&mut p, "t1", &big).unwrap_err();
    assert!(
        e.message.contains("(sessions.max_meta_bytes)"),
        "{}",
        e.message
    );
    assert_eq!(p.device.turn_state(&s, "t1"), None, "no turn made");
    // Within it, the same prompt runs.
    let a = prompt(&mut p, "t2", &"x".repeat(98)).unwrap();
    assert_eq!(a["stopReason"], "end_turn");
}

/// A prompt whose frame is over `frames.max_frame_bytes` is refused unread, but answered with
/// its id: the client's prompt gets its error, where an error of id `null` left it waiting.
#[test]
fn a_prompt_over_the_frame_limit_is_answered_with_its_id() {
    let mut p = linked();
    p.restart_device_with(|d| d.frames.max_frame_bytes = 64 * 1024)
        .unwrap();
    let s = new_session(&mut p);
    p.prompt_text(&s, "tbig", &"x".repeat(100_000));
    p.settle().unwrap();
    let a = p.answers("tbig");
    assert_eq!(a.len(), 1, "answered once");
    let e = a[0].as_ref().unwrap_err();
    assert_eq!(e.code, code::INVALID_REQUEST);
    assert!(e.message.contains("(max_frame_bytes)"), "{}", e.message);
    assert_eq!(p.device.turn_state(&s, "tbig"), None, "no turn made");
}

#[test]
fn reattach_follows_a_running_turn_after_a_cut() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 60000\nsay end" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    p.cut().unwrap();
    p.advance(5_000).unwrap();
    assert!(p.client.is_ready(), "the device redialled");
    let how = reattached(&p.client_events);
    assert_eq!(how, vec![&Reattach::Following]);
    p.advance(60_000).unwrap();
    let a = p.answers("t1");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].as_ref().unwrap()["stopReason"], "end_turn");
    assert_eq!(p.starts("t1"), 1);
}

#[test]
fn session_new_is_confined_to_roots_trust_and_models() {
    let mut p = linked();
    let e = call(&mut p, "session/new", json!({ "cwd": "/etc" })).unwrap_err();
    assert!(
        e.message
            .contains("outside the device's roots (/home/dev/work)"),
        "{}",
        e.message
    );
    let e = call(
        &mut p,
        "session/new",
        json!({ "cwd": "/home/dev/work/../../../etc" }),
    )
    .unwrap_err();
    assert!(e.message.contains("outside"), "{}", e.message);
    p.os.links
        .insert("/home/dev/work/escape".into(), Some("/etc".into()));
    let e = call(
        &mut p,
        "session/new",
        json!({ "cwd": "/home/dev/work/escape/x" }),
    )
    .unwrap_err();
    assert!(e.message.contains("`/etc/x` is outside"), "{}", e.message);
    let e = call(
        &mut p,
        "session/new",
        json!({ "cwd": "/home/dev/work/a", "_meta": { "lembas_model": "other/model" } }),
    )
    .unwrap_err();
    assert!(e.message.contains("`other/model`"), "{}", e.message);
    let r = call(
        &mut p,
        "session/new",
        json!({ "cwd": "/home/dev/work/a", "_meta": { "mode": "auto", "lembas_model": "lembas/default" } }),
    )
    .unwrap();
    assert_eq!(r["modes"]["currentModeId"], "edit");
    assert_eq!(r["_meta"]["lembas"]["instance"], true);
    assert_eq!(r["_meta"]["lembas"]["model"], "lembas/default");
}

#[test]
fn blocks_over_their_limits_are_refused_with_the_numbers() {
    let mut p = linked();
    let s = new_session(&mut p);
    let big = "A".repeat(14_000_000); // 10.5 MB decoded
    let id = p
        .client
        .call(
            "session/prompt",
            &json!({ "sessionId": s, "prompt": [{ "type": "image", "mimeType": "image/png", "data": big }] }), p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let e = p
        .client_events
        .iter()
        .find_map(|e| match e {
            ClientEvent::Answer {
                id: i,
                outcome: Err(e),
                ..
            } if *i == id => Some(e.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(e.message.contains("10500000 bytes"), "{}", e.message);
    assert!(
        e.message.contains("10000000 bytes a block"),
        "{}",
        e.message
    );
}

#[test]
fn a_ledger_untouched_for_30_days_is_pruned() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "hello" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    p.advance(29 * 24 * 3600 * 1000).unwrap();
    assert!(
        p.device.turn_state(&s, "t1").is_some(),
        "kept before 30 days"
    );
    p.advance(2 * 24 * 3600 * 1000).unwrap();
    assert!(
        p.device.turn_state(&s, "t1").is_none(),
        "pruned after 30 days"
    );
    assert!(!p.os.store.entries().iter().any(|e| e.key.ends_with("/t1")));
}

/// A finished turn's answer leaves only after the ledger change is acknowledged durable.
#[test]
fn no_frame_announces_a_change_before_it_is_durable() {
    use lembas_core::device::{ConnKind, Device, Effect, Output};
    use lembas_core::engine::{EngineEvent, StopReason};
    use lembas_core::{DeviceConfig, Time};

    let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
    let conn = d.handle_open(ConnKind::Stdio, Time(0)).unwrap();
    let mut held = Vec::new();
    let mut sent = Vec::new();
    let mut turn = None;
    let drain = |d: &mut Device,
                 held: &mut Vec<u64>,
                 sent: &mut Vec<Value>,
                 turn: &mut Option<(String, String)>| {
        while let Some(o) = d.poll_output() {
            match o {
                Output::Send { frame, .. } => sent.push(serde_json::from_slice(&frame).unwrap()),
                Output::Effect(Effect::Persist { seq, .. }) => held.push(seq),
                Output::Engine(EngineCommand::Start(t)) => *turn = Some((t.session_id, t.turn_id)),
                _ => {}
            }
        }
    };
    d.handle_frame(
        conn,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
        Time(1),
    )
    .unwrap();
    d.handle_frame(
        conn,
        br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work"}}"#,
        Time(1),
    )
    .unwrap();
    drain(&mut d, &mut held, &mut sent, &mut turn);
    assert_eq!(
        sent.len(),
        1,
        "only initialize's answer: session/new waits for its record"
    );
    for seq in held.drain(..) {
        d.handle_persisted(seq, Time(2));
    }
    drain(&mut d, &mut held, &mut sent, &mut turn);
    let session = sent[1]["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = json!({ "jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] } });
    d.handle_frame(conn, prompt.to_string().as_bytes(), Time(3))
        .unwrap();
    drain(&mut d, &mut held, &mut sent, &mut turn);
    assert!(
        turn.is_none(),
        "the turn starts only once it is durably queued"
    );
    for seq in held.drain(..) {
        d.handle_persisted(seq, Time(4));
    }
    drain(&mut d, &mut held, &mut sent, &mut turn);
    let (s, t) = turn.clone().expect("started");
    d.handle_engine(&s, &t, EngineEvent::Done(StopReason::EndTurn), Time(5));
    let before = sent.len();
    drain(&mut d, &mut held, &mut sent, &mut turn);
    assert_eq!(
        sent.len(),
        before,
        "the answer waits for the ledger's Done record"
    );
    assert!(!held.is_empty());
    for seq in held.drain(..) {
        d.handle_persisted(seq, Time(6));
    }
    drain(&mut d, &mut held, &mut sent, &mut turn);
    assert!(sent
        .iter()
        .any(|f| f["id"] == 2 && f["result"]["stopReason"] == "end_turn"));
}

/// `session/new` in the project with `meta` as its `_meta`; the session's id.
fn new_session_with(p: &mut Pair, meta: Value) -> String {
    let r = call(
        p,
        "session/new",
        json!({ "cwd": "/home/dev/work/app", "_meta": meta }),
    );
    r.unwrap()["sessionId"].as_str().unwrap().to_string()
}

/// `session/prompt` of one text block with `meta` as its `_meta`.
fn prompt_with(p: &mut Pair, session: &str, text: &str, meta: Value) -> Result<Value, RpcError> {
    let prompt = json!([{ "type": "text", "text": text }]);
    call(
        p,
        "session/prompt",
        json!({ "sessionId": session, "prompt": prompt, "_meta": meta }),
    )
}

/// `_meta.lembas`'s context fields (snake_case, as the spec writes them) from `session/new`,
/// then a prompt's own over them, reach the turn; `null` is kept ("the device's own").
#[test]
fn context_from_session_new_and_the_prompt_reaches_the_turn() {
    let mut p = linked();
    let meta = json!({ "lembas": { "system_prompt": "from new", "library": ["a"] } });
    let s = new_session_with(&mut p, meta);
    let meta = json!({ "lembas": {
        "turnId": "t1", "system_prompt": "from prompt", "personalization": null,
    } });
    prompt_with(&mut p, &s, "hi", meta).unwrap();
    let turn = p.started.iter().find(|t| t.turn_id == "t1").unwrap();
    assert_eq!(turn.context.system_prompt, Some(json!("from prompt")));
    assert_eq!(turn.context.personalization, Some(Value::Null));
    assert_eq!(turn.context.library, Some(json!(["a"])));
    assert_eq!(turn.context.prototypes, None);
}

/// The chat's Context lives with the session in the store: after a restart, a prompt that says
/// nothing of it runs with what `session/new` and the last prompt said.
#[test]
fn context_survives_a_device_restart() {
    let mut p = linked();
    let personalization =
        json!({ "personality": "terse", "personality_custom": "", "instructions": "use metric" });
    let meta =
        json!({ "lembas": { "system_prompt": "from new", "personalization": personalization } });
    let s = new_session_with(&mut p, meta);
    let meta = json!({ "lembas": { "turnId": "t1", "system_prompt": "from prompt" } });
    prompt_with(&mut p, &s, "hi", meta).unwrap();
    p.restart_device().unwrap();
    p.settle().unwrap();
    let meta = json!({ "lembas": { "turnId": "t2" } });
    prompt_with(&mut p, &s, "again", meta).unwrap();
    let turn = p.started.iter().find(|t| t.turn_id == "t2").unwrap();
    assert_eq!(turn.context.system_prompt, Some(json!("from prompt")));
    assert_eq!(turn.context.personalization, Some(personalization));
}

/// A session record written before the Context was kept (no `context` field) still restores,
/// and its turns run with no Context, as they did.
#[test]
fn a_session_record_without_a_context_restores_as_before() {
    let mut p = linked();
    let old = r#"{"id":"ses_old","cwd":"/home/dev/work/app","root":"/home/dev/work","title":"old","mode":"edit","model":"lembas/default","effort":null,"instance":true,"touched":0,"given":true}"#;
    p.os.store.apply(&[Record::Put {
        table: Table::Sessions,
        key: "ses_old".into(),
        value: old.into(),
    }]);
    p.restart_device().unwrap();
    p.settle().unwrap();
    let meta = json!({ "lembas": { "turnId": "t1" } });
    let a = prompt_with(&mut p, "ses_old", "hi", meta).unwrap();
    assert_eq!(a["stopReason"], "end_turn");
    let turn = p.started.iter().find(|t| t.turn_id == "t1").unwrap();
    assert_eq!(turn.context, Context::default());
}

/// The `session/update`s with `sessionUpdate: "plan"` the client heard for `session`, as sent.
fn plan_updates(p: &Pair, session: &str) -> Vec<Value> {
    p.client_events
        .iter()
        .filter_map(|e| e.update())
        .filter(|u| u.session_id == session && matches!(u.update, SessionUpdate::Plan(_)))
        .map(|u| serde_json::to_value(&u.update).unwrap())
        .collect()
}

/// Spec, `plan`: sent "after a session is opened from the store when it has a plan", to the
/// connection that opened it; a session without a plan, or one already open, sends none.
#[test]
fn a_session_with_a_plan_opened_from_the_store_sends_its_plan() {
    let mut p = linked();
    let s = new_session(&mut p);
    let bare = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 1000\nsay planned" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let plan = json!({ "version": 1, "title": "Ship it", "phases": [
        { "title": "Build", "tasks": [{ "title": "compile", "status": "in_progress" }] } ] });
    p.device
        .handle_engine(&s, "t1", EngineEvent::Plan(Some(plan.clone())), p.now);
    p.settle().unwrap();
    let expected = json!({ "sessionUpdate": "plan",
        "entries": [{ "content": "compile", "priority": "medium", "status": "in_progress" }],
        "_meta": { "lembas": { "plan": plan } } });
    assert_eq!(plan_updates(&p, &s), vec![expected.clone()]);
    p.advance(1000).unwrap();
    assert_eq!(p.answers("t1").len(), 1);
    // Already open: asking its history opens nothing, and sends no plan again.
    call(&mut p, "_lembas/session/history", json!({ "sessionId": s })).unwrap();
    assert_eq!(plan_updates(&p, &s).len(), 1);

    p.restart_device().unwrap();
    p.settle().unwrap();
    call(&mut p, "_lembas/session/history", json!({ "sessionId": s })).unwrap();
    call(
        &mut p,
        "_lembas/session/history",
        json!({ "sessionId": bare }),
    )
    .unwrap();
    assert_eq!(plan_updates(&p, &s), vec![expected.clone(), expected]);
    assert_eq!(plan_updates(&p, &bare), Vec::<Value>::new());
}

/// The plan and the mode are part of the session's record and durable when the engine changes
/// them, not only when the turn ends: a device that dies mid-turn still has them (`status`'s
/// `plan`, the next turn's mode).
#[test]
fn a_plan_and_a_mode_set_mid_turn_survive_a_restart() {
    let mut p = linked();
    let s = new_session(&mut p);
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "sleep 60000\nsay late" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let plan = json!({ "version": 1, "title": "Ship it", "phases": [] });
    p.device
        .handle_engine(&s, "t1", EngineEvent::Plan(Some(plan.clone())), p.now);
    p.device
        .handle_engine(&s, "t1", EngineEvent::ModeChanged(Mode::Plan), p.now);
    p.drive().unwrap();
    p.restart_device().unwrap();
    p.settle().unwrap();
    let status = call(&mut p, "_lembas/session/status", json!({ "sessionId": s })).unwrap();
    assert_eq!(status["plan"], plan);
    let meta = json!({ "lembas": { "turnId": "t2" } });
    prompt_with(&mut p, &s, "next", meta).unwrap();
    let turn = p.started.iter().find(|t| t.turn_id == "t2").unwrap();
    assert_eq!(turn.mode, Mode::Plan);
}

/// One session's stream is not held behind another session's turn commit: while B's prompt
/// waits to be durable, A's chunk leaves at once; B's turn starts and announces itself only
/// once its own records are acknowledged.
#[test]
fn a_sessions_chunk_does_not_wait_for_another_sessions_turn_to_be_durable() {
    use lembas_core::device::{ConnKind, Device, Effect, Output};
    use lembas_core::engine::EngineEvent;
    use lembas_core::{DeviceConfig, Time};

    #[derive(Default)]
    struct Seen {
        held: Vec<u64>,
        sent: Vec<Value>,
        started: Vec<(String, String)>,
    }
    fn drain(d: &mut Device, seen: &mut Seen) {
        while let Some(o) = d.poll_output() {
            match o {
                Output::Send { frame, .. } => {
                    seen.sent.push(serde_json::from_slice(&frame).unwrap())
                }
                Output::Effect(Effect::Persist { seq, .. }) => seen.held.push(seq),
                Output::Engine(EngineCommand::Start(t)) => {
                    seen.started.push((t.session_id, t.turn_id))
                }
                _ => {}
            }
        }
    }
    /// The engine reports `event` of `session`'s turn `turn`; what it makes goes out.
    fn engine(d: &mut Device, seen: &mut Seen, at: (&str, &str), event: EngineEvent, t: u64) {
        d.handle_engine(at.0, at.1, event, Time(t));
        drain(d, seen);
    }
    fn ack_all(d: &mut Device, seen: &mut Seen) {
        for seq in seen.held.drain(..) {
            d.handle_persisted(seq, Time(2));
        }
        drain(d, seen);
    }
    let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
    let conn = d.handle_open(ConnKind::Stdio, Time(0)).unwrap();
    let mut seen = Seen::default();
    d.handle_frame(
        conn,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}}"#,
        Time(1),
    )
    .unwrap();
    let mut sessions = Vec::new();
    for id in [1, 2] {
        let new = json!({ "jsonrpc": "2.0", "id": id, "method": "session/new",
            "params": { "cwd": "/work" } });
        d.handle_frame(conn, new.to_string().as_bytes(), Time(1))
            .unwrap();
        drain(&mut d, &mut seen);
        ack_all(&mut d, &mut seen);
        let answer = seen.sent.iter().find(|f| f["id"] == id).expect("answered");
        sessions.push(answer["result"]["sessionId"].as_str().unwrap().to_string());
    }
    let (a, b) = (sessions[0].clone(), sessions[1].clone());
    let prompt = |id: u32, session: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] } })
        .to_string()
    };
    d.handle_frame(conn, prompt(3, &a).as_bytes(), Time(3))
        .unwrap();
    drain(&mut d, &mut seen);
    ack_all(&mut d, &mut seen);
    let (_, a_turn) = seen.started.pop().expect("A's turn started");

    // B's prompt: its records are asked for and not yet acknowledged.
    d.handle_frame(conn, prompt(4, &b).as_bytes(), Time(3))
        .unwrap();
    drain(&mut d, &mut seen);
    assert!(!seen.held.is_empty(), "B's turn is being written");
    assert!(
        seen.started.is_empty(),
        "B's turn starts once it is durable"
    );
    let chunk = |f: &Value, session: &str| {
        f["method"] == "session/update"
            && f["params"]["sessionId"] == session
            && f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    };
    let text = |t: &str| EngineEvent::Text(t.into());
    engine(&mut d, &mut seen, (&a, &a_turn), text("token"), 4);
    assert!(
        seen.sent.iter().any(|f| chunk(f, &a)),
        "A's chunk is not held behind B's write"
    );
    assert!(
        !seen
            .sent
            .iter()
            .any(|f| f["params"]["sessionId"] == b.as_str()),
        "nothing of B's turn is announced before it is durable"
    );
    ack_all(&mut d, &mut seen);
    assert_eq!(seen.started.len(), 1, "B's turn started once durable");
    assert!(
        seen.sent
            .iter()
            .any(|f| f["method"] == "_lembas/event" && f["params"]["sessionId"] == b.as_str()),
        "and is announced then"
    );
    let (_, b_turn) = seen.started.pop().unwrap();

    // A's engine changes A's mode: A's record is written, and its update waits for that, while
    // B's chunk does not.
    let plan = EngineEvent::ModeChanged(lembas_core::config::Mode::Plan);
    engine(&mut d, &mut seen, (&a, &a_turn), plan, 5);
    assert!(!seen.held.is_empty(), "A's mode is being written");
    let a_mode = |f: &Value| {
        f["params"]["sessionId"] == a.as_str()
            && f["params"]["update"]["sessionUpdate"] == "current_mode_update"
    };
    assert!(
        !seen.sent.iter().any(a_mode),
        "not before A's mode is durable"
    );
    let chunks_of_b = seen.sent.iter().filter(|f| chunk(f, &b)).count();
    engine(&mut d, &mut seen, (&b, &b_turn), text("first"), 5);
    assert_eq!(
        seen.sent.iter().filter(|f| chunk(f, &b)).count(),
        chunks_of_b + 1,
        "B's chunk is not held behind A's mode"
    );
    ack_all(&mut d, &mut seen);
    assert!(seen.sent.iter().any(a_mode), "A's mode once durable");

    // A's turn ends: its answer waits for A's end to be durable, and holds nothing of B's
    // behind it (it announces only A's turn end).
    let done = EngineEvent::Done(lembas_core::engine::StopReason::EndTurn);
    engine(&mut d, &mut seen, (&a, &a_turn), done, 6);
    assert!(!seen.held.is_empty(), "A's end is being written");
    assert!(
        !seen.sent.iter().any(|f| f["id"] == 3),
        "not before A's end is durable"
    );
    engine(&mut d, &mut seen, (&b, &b_turn), text("more"), 7);
    assert!(
        seen.sent.iter().any(|f| chunk(f, &b)),
        "B's chunk is not held behind A's answer"
    );
    ack_all(&mut d, &mut seen);
    assert!(
        seen.sent.iter().any(|f| f["id"] == 3),
        "A's answer once durable"
    );
}
