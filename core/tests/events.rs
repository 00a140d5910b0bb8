//! The session event log on the Pair (our extension, capability `events`): every event about a
//! session carries `_meta.lembas.seq`, and a client that missed some while its link was down
//! gets exactly those, in order, from `_lembas/session/events`; `truncated` when the log was
//! outrun; seqs never repeat across a restart.

use lembas_core::config::DeviceConfig;
use lembas_core::device::{ConnId, ConnKind};
use lembas_core::jsonrpc::code;
use lembas_core::store::Table;
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";

fn linked(tweak: impl FnOnce(&mut DeviceConfig)) -> (Pair, String) {
    let mut p = Pair::default_with(&[ROOT], tweak);
    p.start().unwrap();
    let s = p.new_session(ROOT);
    (p, s)
}

fn seq_of(params: &Value) -> Option<u64> {
    params["_meta"]["lembas"]["seq"].as_u64()
}

/// The session's events the client heard on the link, in order.
fn session_frames(p: &Pair, session: &str) -> Vec<Value> {
    p.frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["sessionId"] == session)
        .collect()
}

/// The seqs of the session's events the client heard on the link, in order.
fn heard_seqs(p: &Pair, session: &str) -> Vec<u64> {
    session_frames(p, session)
        .iter()
        .filter_map(|f| seq_of(&f["params"]))
        .collect()
}

/// Whether a frame or a logged event is an `available_commands_update`.
fn is_commands(event: &Value) -> bool {
    event["params"]["update"]["sessionUpdate"] == "available_commands_update"
}

/// The text of the message chunks among `events` (`{ method, params }` each).
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

/// Prompt `text` as turn `turn` and drive until the device is quiet at this instant.
fn prompt(p: &mut Pair, s: &str, turn: &str, text: &str) {
    p.prompt_text(s, turn, text);
    p.drive().unwrap();
}

/// Cut the link mid-turn, let the turn run on while it is down for `down_ms`, then link again.
fn cut_for(p: &mut Pair, down_ms: u64) {
    p.reachable = false;
    p.cut().unwrap();
    p.advance(down_ms).unwrap();
    p.reachable = true;
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready(), "linked again");
}

fn events(p: &mut Pair, s: &str, since: u64) -> Value {
    p.call(
        "_lembas/session/events",
        json!({ "sessionId": s, "since": since }),
    )
    .expect("events answers")
}

#[test]
fn every_event_about_a_session_carries_a_seq_one_more_than_the_last() {
    let (mut p, s) = linked(|_| {});
    prompt(&mut p, &s, "t1", "say hello\ntool build\nthink hmm");
    p.settle().unwrap();
    let seqs = heard_seqs(&p, &s);
    assert!(seqs.len() > 6, "{seqs:?}");
    // The link client hears every one (updates and events alike), so none is skipped.
    let expected: Vec<u64> = (seqs[0]..seqs[0] + seqs.len() as u64).collect();
    assert_eq!(seqs, expected);
    // And nothing else it hears carries one.
    for f in p.frames_to_client() {
        if f["params"]["sessionId"].is_null() {
            assert_eq!(seq_of(&f["params"]), None, "{f}");
        }
    }
}

#[test]
fn a_client_cut_off_mid_turn_gets_exactly_the_missed_events_in_order() {
    let (mut p, s) = linked(|_| {});
    prompt(
        &mut p,
        &s,
        "t1",
        "say before\nsleep 1000\nchunks 30 20\nsay after",
    );
    let seen = *heard_seqs(&p, &s)
        .last()
        .expect("the turn began on the link");
    cut_for(&mut p, 10_000);
    // Nothing of the turn was heard while down: only the command set, told to the new link
    // when it took the session up again.
    let heard = session_frames(&p, &s);
    let at = heard
        .iter()
        .position(|f| seq_of(&f["params"]) == Some(seen))
        .unwrap();
    assert!(
        heard[at + 1..].iter().all(is_commands),
        "nothing sent while down: {:?}",
        &heard[at + 1..]
    );

    let answer = events(&mut p, &s, seen);
    assert_eq!(answer["truncated"], false, "{answer}");
    let got = answer["events"].as_array().unwrap().clone();
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (seen + 1..=seen + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "every missed one, in order, none twice");
    for e in &got {
        assert_eq!(
            seq_of(&e["params"]),
            e["seq"].as_u64(),
            "the params as sent: {e}"
        );
    }
    assert_eq!(answer["next"], json!(seqs.last().unwrap()));
    // What the client heard and what it fetched make the whole answer.
    let heard: Vec<Value> = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["sessionId"] == s.as_str())
        .map(|f| json!({ "method": f["method"], "params": f["params"] }))
        .collect();
    let whole = format!("{}{}", said(&heard), said(&got));
    let chunks: String = (0..30)
        .map(|i| format!("{i:010}{}", "x".repeat(10)))
        .collect();
    assert_eq!(whole, format!("before{chunks}after"));
    assert!(
        got.iter().any(|e| e["params"]["event"]["type"] == "done"),
        "the turn's end too"
    );

    // Asked again from where it ends: nothing more, and the client follows live from here.
    let after = events(&mut p, &s, answer["next"].as_u64().unwrap());
    assert_eq!(after["events"], json!([]));
    assert_eq!(after["truncated"], false);
    prompt(&mut p, &s, "t2", "say live");
    p.settle().unwrap();
    let last = *heard_seqs(&p, &s).last().unwrap();
    assert!(last > answer["next"].as_u64().unwrap());
}

#[test]
fn a_log_outrun_says_truncated_and_keeps_the_newest() {
    let (mut p, s) = linked(|d| d.sessions.event_log_events = 10);
    prompt(&mut p, &s, "t1", "say before\nsleep 1000\nchunks 40 8");
    let seen = *heard_seqs(&p, &s).last().unwrap();
    cut_for(&mut p, 10_000);
    let answer = events(&mut p, &s, seen);
    assert_eq!(answer["truncated"], true, "{answer}");
    let got = answer["events"].as_array().unwrap();
    assert_eq!(got.len(), 10, "the log's bound");
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(seqs[0] > seen + 1, "the oldest gave way");
    // From the log's reach on, nothing is missing.
    let from = events(&mut p, &s, seqs[0] - 1);
    assert_eq!(from["truncated"], false, "{from}");
}

#[test]
fn an_idle_session_keeps_its_log_and_its_seqs_across_a_restart() {
    let (mut p, s) = linked(|_| {});
    prompt(&mut p, &s, "t1", "say one");
    p.settle().unwrap();
    let before = *heard_seqs(&p, &s).last().unwrap();
    p.restart_device().unwrap();
    p.advance(120_000).unwrap();
    // Idle when it stopped: its log was written, up to its exact next seq; after it only the
    // command set told to the link that opened it again from the store, counted from the new
    // start's base.
    let answer = events(&mut p, &s, 0);
    assert_eq!(answer["truncated"], false, "{answer}");
    let got = answer["events"].as_array().unwrap();
    assert_eq!(said(got), "one");
    let at = got.iter().position(|e| e["seq"] == before).unwrap();
    let reopened = &got[at + 1..];
    assert!(
        !reopened.is_empty() && reopened.iter().all(is_commands),
        "{answer}"
    );
    assert!(reopened[0]["seq"].as_u64() > Some(before + 1), "{answer}");
    prompt(&mut p, &s, "t2", "say two");
    p.settle().unwrap();
    let seqs = heard_seqs(&p, &s);
    // Counted from the new start's base: above every seq before it, one by one from there.
    let at = seqs.iter().position(|q| *q == before).unwrap();
    let after = &seqs[at + 1..];
    assert!(after.first().is_some_and(|q| *q > before), "{seqs:?}");
    assert!(after.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let answer = events(&mut p, &s, before);
    assert_eq!(answer["truncated"], false, "nothing was missed: {answer}");
    assert_eq!(said(answer["events"].as_array().unwrap()), "two");
}

#[test]
fn seqs_never_repeat_across_a_restart_mid_turn_and_a_seq_from_before_it_is_truncated() {
    let (mut p, s) = linked(|_| {});
    prompt(&mut p, &s, "t1", "say one\nsleep 60000\nsay never");
    let before = *heard_seqs(&p, &s).last().unwrap();
    // The process dies mid-turn: what it sent of the turn was never written.
    p.restart_device().unwrap();
    p.advance(120_000).unwrap();
    prompt(&mut p, &s, "t2", "say two");
    p.settle().unwrap();
    let seqs = heard_seqs(&p, &s);
    let at = seqs.iter().position(|q| *q == before).unwrap();
    assert!(
        seqs[at + 1..].iter().all(|q| *q > before),
        "every seq after the restart is above every one before: {seqs:?}"
    );
    // The restarted device cannot vouch for what it may have sent unwritten before it died.
    let answer = events(&mut p, &s, before);
    assert_eq!(answer["truncated"], true, "{answer}");
    // From what it sent since, it can.
    let first_after = seqs[at + 1];
    let answer = events(&mut p, &s, first_after - 1);
    assert_eq!(answer["truncated"], false, "{answer}");
    assert_eq!(said(answer["events"].as_array().unwrap()), "two");
}

/// How many blocks of event log the device's store holds.
fn stored_blocks(p: &Pair) -> usize {
    p.os.store
        .entries()
        .iter()
        .filter(|e| e.table == Table::Events)
        .count()
}

#[test]
fn without_a_lasting_store_the_log_is_kept_in_memory_only() {
    let script = "say before\nchunks 30 20\nsay after";
    // With a store, the turn's end writes its log.
    let (mut p, s) = linked(|_| {});
    prompt(&mut p, &s, "t1", script);
    p.settle().unwrap();
    assert!(stored_blocks(&p) > 0);
    // Without one (`serve --stdio` beside a service), nothing would read it back: it is
    // not written, and `events` answers from memory all the same.
    let (mut p, s) = linked(|d| d.has_store = false);
    prompt(&mut p, &s, "t1", script);
    p.settle().unwrap();
    assert_eq!(stored_blocks(&p), 0);
    let answer = events(&mut p, &s, 0);
    let got = answer["events"].as_array().unwrap().clone();
    assert!(said(&got).starts_with("before"), "{answer}");
    assert!(said(&got).ends_with("after"), "{answer}");
    assert!(p.device.at_rest());
}

#[test]
fn bad_requests_are_refused_naming_the_rule() {
    let (mut p, s) = linked(|d| {
        d.sessions.events_page = 5;
        d.sessions.max_events_page = 5;
    });
    let refused = |p: &mut Pair, params: Value| {
        p.call("_lembas/session/events", params)
            .expect_err("refused")
    };
    let e = refused(&mut p, json!({ "sessionId": s, "since": 0, "limit": 6 }));
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("sessions.max_events_page"),
        "{}",
        e.message
    );
    let e = refused(&mut p, json!({ "sessionId": s, "since": 0, "limit": 0 }));
    assert!(
        e.message.contains("limit must be at least 1"),
        "{}",
        e.message
    );
    let e = refused(&mut p, json!({ "sessionId": "ses_nope", "since": 0 }));
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(e.message.contains("no session `ses_nope`"), "{}", e.message);
    let e = refused(&mut p, json!({ "sessionId": s, "since": -1 }));
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(e.message.contains("since"), "{}", e.message);
    let e = refused(&mut p, json!({ "sessionId": s }));
    assert!(e.message.contains("since"), "{}", e.message);
}

#[test]
fn cards_and_their_settling_are_events_of_the_session_too() {
    let (mut p, s) = linked(|_| {});
    prompt(&mut p, &s, "t1", "permit deploy");
    let card = p
        .frames_to_client()
        .into_iter()
        .find(|f| f["method"] == "session/request_permission")
        .expect("the card was put");
    let card_seq = seq_of(&card["params"]).expect("the card has a seq");
    // Nobody answers: the device stops waiting and takes the card down.
    p.advance(p.device.config().remote.approval_timeout_ms + 1_000)
        .unwrap();
    let settled = p
        .frames_to_client()
        .into_iter()
        .find(|f| f["method"] == "_lembas/permission/settled")
        .expect("taken down");
    assert!(seq_of(&settled["params"]).unwrap() > card_seq);
    let seqs = heard_seqs(&p, &s);
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // Both are in the log, as sent.
    let answer = events(&mut p, &s, 0);
    let methods: Vec<&str> = answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["method"].as_str())
        .collect();
    assert!(
        methods.contains(&"session/request_permission"),
        "{methods:?}"
    );
    assert!(
        methods.contains(&"_lembas/permission/settled"),
        "{methods:?}"
    );
}

#[test]
fn a_session_set_aside_and_read_back_keeps_its_log() {
    let (mut p, s) = linked(|d| d.sessions.max_live = 1);
    prompt(&mut p, &s, "t1", "say kept");
    p.settle().unwrap();
    // A second session takes the only place in memory: the first is set aside.
    let _other = p.new_session(ROOT);
    assert_eq!(p.device.live_session_count(), 1);
    let answer = events(&mut p, &s, 0);
    assert_eq!(answer["truncated"], false, "{answer}");
    assert_eq!(said(answer["events"].as_array().unwrap()), "kept");
    // And its seqs go on from where they were.
    let last = answer["next"].as_u64().unwrap();
    prompt(&mut p, &s, "t2", "say more");
    p.settle().unwrap();
    let answer = events(&mut p, &s, last);
    assert_eq!(answer["truncated"], false, "{answer}");
    assert_eq!(answer["events"][0]["seq"], json!(last + 1));
}

/// A hub editor's session in `cwd`, made and idle, announced to the link: the editor's
/// connection and the session.
fn editor_session(p: &mut Pair, cwd: &str) -> (ConnId, String) {
    let editor = p.open_local(ConnKind::Hub);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": { "protocolVersion": 1 } });
    p.stdio(editor, init.to_string().as_bytes()).unwrap();
    let new = json!({ "jsonrpc": "2.0", "id": 2, "method": "session/new",
                      "params": { "cwd": cwd, "mcpServers": [] } });
    let answer = p
        .stdio_answer(editor, new.to_string().as_bytes())
        .expect("session/new answered");
    let s = answer["result"]["sessionId"].as_str().unwrap().to_string();
    p.settle().unwrap();
    (editor, s)
}

/// The command sets of `session` the link carried, in order.
fn sets_on_link(p: &Pair, session: &str) -> Vec<Value> {
    session_frames(p, session)
        .into_iter()
        .filter(is_commands)
        .collect()
}

/// What the store holds of `session`: its record and its log's blocks.
fn stored_of(p: &Pair, session: &str) -> Vec<(String, String)> {
    let blocks = format!("{session}/");
    p.os.store
        .entries()
        .into_iter()
        .filter(|e| e.key == session || e.key.starts_with(&blocks))
        .map(|e| (e.key, e.value))
        .collect()
}

/// Cut the link and let it come back.
fn reconnect(p: &mut Pair) {
    p.cut().unwrap();
    p.advance(120_000).unwrap();
    p.settle().unwrap();
    assert!(p.client.is_ready(), "linked again");
}

/// The device restarts, the link comes back, and the editor loads its session `s` again.
fn restart_and_reload(p: &mut Pair, s: &str) {
    p.restart_device().unwrap();
    p.advance(120_000).unwrap();
    let editor = p.open_local(ConnKind::Hub);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": { "protocolVersion": 1 } });
    p.stdio(editor, init.to_string().as_bytes()).unwrap();
    let load = json!({ "jsonrpc": "2.0", "id": 2, "method": "session/load",
                       "params": { "sessionId": s, "cwd": ROOT, "mcpServers": [] } });
    p.stdio(editor, load.to_string().as_bytes()).unwrap();
    p.settle().unwrap();
}

/// The params of the last command set among a page's events, as logged.
fn last_set(page: &Value) -> Value {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| is_commands(e))
        .map(|e| e["params"].clone())
        .unwrap_or_else(|| panic!("no set logged: {page}"))
}

/// An idle session an editor holds is announced again on each link's connect, with its set:
/// the set it last logged, as that very event (its seq and bytes). Its log, its seqs and the
/// store do not grow with the reconnects.
#[test]
fn an_idle_shared_session_announced_again_sends_its_logged_set_and_logs_nothing() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.start().unwrap();
    let (_editor, s) = editor_session(&mut p, ROOT);
    assert_eq!(sets_on_link(&p, &s).len(), 1);
    let page = events(&mut p, &s, 0);
    let logged = last_set(&page);
    let stored = stored_of(&p, &s);
    for n in 1..=3 {
        reconnect(&mut p);
        let sent = sets_on_link(&p, &s);
        assert_eq!(sent.len(), n + 1, "announced with its set again");
        assert_eq!(sent[n]["params"], logged, "the logged event again");
    }
    assert_eq!(
        events(&mut p, &s, 0),
        page,
        "nothing logged, its last seq where it was"
    );
    assert_eq!(stored_of(&p, &s), stored, "nothing written");
}

/// The editor takes its session up again after a restart: the link is told the set the
/// session logged before the restart, at its seq (not above the session's last), and a
/// catch-up on the session returns it. Reconnects after that log nothing either.
#[test]
fn a_shared_session_after_a_restart_is_announced_with_the_set_its_log_holds() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.start().unwrap();
    let (_editor, s) = editor_session(&mut p, ROOT);
    let logged = last_set(&events(&mut p, &s, 0));
    let seq = seq_of(&logged).unwrap();
    restart_and_reload(&mut p, &s);
    let sent = sets_on_link(&p, &s);
    assert_eq!(sent.len(), 2, "announced again with its set: {sent:?}");
    assert_eq!(
        sent[1]["params"], logged,
        "the set its log holds, as logged"
    );
    let page = events(&mut p, &s, 0);
    assert_eq!(page["truncated"], false, "{page}");
    let got = page["events"].as_array().unwrap();
    assert!(
        got.iter().any(|e| e["params"] == logged),
        "the catch-up returns it: {page}"
    );
    assert!(page["next"].as_u64().unwrap() >= seq);
    let stored = stored_of(&p, &s);
    reconnect(&mut p);
    assert_eq!(sets_on_link(&p, &s)[2]["params"], last_set(&page));
    assert_eq!(events(&mut p, &s, 0), page);
    assert_eq!(stored_of(&p, &s), stored, "nothing written");
}

/// A log a restart cut mid-turn vouches for nothing from before the restart: the set
/// announced after it is logged anew, at a seq of this start, so a client following from it
/// is not told `truncated`.
#[test]
fn a_shared_session_whose_turn_a_restart_cut_is_announced_with_its_set_logged_anew() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.start().unwrap();
    let (editor, s) = editor_session(&mut p, ROOT);
    let before = seq_of(&sets_on_link(&p, &s)[0]["params"]).unwrap();
    let prompt = json!({ "jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": { "sessionId": s, "prompt": [{ "type": "text", "text": "say a\nsleep 5000\nsay b" }] } });
    p.stdio(editor, prompt.to_string().as_bytes()).unwrap();
    p.advance(1_000).unwrap();
    restart_and_reload(&mut p, &s);
    let sent = sets_on_link(&p, &s);
    let now = seq_of(&sent.last().unwrap()["params"]).unwrap();
    assert!(now > before, "logged anew: {before} then {now}");
    let page = events(&mut p, &s, now);
    assert_eq!(page["truncated"], false, "{page}");
}
