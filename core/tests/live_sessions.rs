//! Sessions in memory are bounded (`sessions.max_live`): an idle session is set aside and read
//! back from the store when named again, with its ledger, status and delete working as if it
//! had never left; where none can be set aside, `session/new` is refused naming the limit.

use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::device::ConnId;
use lembas_core::jsonrpc::{code, RpcError};
use lembas_core::store::Table;
use lembas_core::testing::{reattached, Pair};
use serde_json::{json, Value};

/// A linked pair whose device keeps at most `max_live` sessions in memory.
fn linked(max_live: usize) -> Pair {
    let mut p = Pair::default_with(&["/home/dev/work"], |d| d.sessions.max_live = max_live);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

fn prompt(p: &mut Pair, s: &str, text: &str, turn: &str) {
    p.prompt_text(s, turn, text);
}

/// Two more sessions than fit beside `s` with `max_live: 2`: `s`, the least recently used, is
/// set aside.
fn set_aside(p: &mut Pair, s: &str) {
    p.new_session("/home/dev/work/b");
    p.new_session("/home/dev/work/c");
    assert_eq!(p.device.live_session_count(), 2);
    assert_eq!(p.device.session_count(), 3);
    assert!(
        p.device.turn_state(s, "t1").is_none(),
        "the session is no longer in memory"
    );
}

/// The client's `_lembas/session/events` for all of session `s`'s events (`since: 0`).
fn events_from_start(p: &mut Pair, s: &str) -> Result<Value, RpcError> {
    p.call(
        "_lembas/session/events",
        json!({ "sessionId": s, "since": 0 }),
    )
}

fn stdio_line(p: &mut Pair, conn: ConnId, line: Value) -> Value {
    p.stdio_answer(conn, line.to_string().as_bytes())
        .expect("an answer on stdio")
}

fn editor(p: &mut Pair) -> ConnId {
    let e = p.open_stdio();
    stdio_line(
        p,
        e,
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": 1 } }),
    );
    e
}

#[test]
fn a_session_set_aside_and_prompted_again_answers_a_duplicate_from_its_ledger() {
    let mut p = linked(2);
    let s = p.new_session("/home/dev/work/a");
    prompt(&mut p, &s, "hello", "t1");
    p.settle().unwrap();
    set_aside(&mut p, &s);
    assert!(p.os.loads.is_empty());
    // The client sends t1 again (it missed the answer, say): read back, not run again.
    prompt(&mut p, &s, "hello", "t1");
    p.settle().unwrap();
    assert_eq!(p.os.loads, vec![s.clone()]);
    let a = p.answers("t1");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(a[0], a[1]);
    assert_eq!(p.starts("t1"), 1);
    // It is in memory again, and still bounded: another idle one went out for it.
    assert_eq!(p.device.live_session_count(), 2);
    assert_eq!(p.device.session_count(), 3);
    // A new turn runs in it, after its history.
    prompt(&mut p, &s, "again", "t2");
    p.settle().unwrap();
    assert_eq!(p.starts("t2"), 1);
    let h = p
        .call("_lembas/session/history", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(h["turns"].as_array().unwrap().len(), 4, "{h}");
}

#[test]
fn status_and_reattach_of_a_session_set_aside_read_it_back() {
    let mut p = linked(2);
    let s = p.new_session("/home/dev/work/a");
    p.call(
        "_lembas/session/title",
        json!({ "sessionId": s, "title": "first" }),
    )
    .unwrap();
    prompt(&mut p, &s, "sleep 1000\nsay end", "t1");
    p.drive().unwrap();
    // The link drops and stays down while the turn ends and an editor makes two sessions.
    p.reachable = false;
    p.cut().unwrap();
    p.advance(1_000).unwrap();
    let e = editor(&mut p);
    for (id, cwd) in [(1, "/srv/x"), (2, "/srv/y")] {
        let v = stdio_line(
            &mut p,
            e,
            json!({ "jsonrpc": "2.0", "id": id, "method": "session/new", "params": { "cwd": cwd } }),
        );
        assert!(v["result"]["sessionId"].is_string(), "{v}");
    }
    assert_eq!(p.device.live_session_count(), 2);
    assert_eq!(p.device.session_count(), 3);
    assert!(p.device.turn_state(&s, "t1").is_none());
    // The editor goes (its sessions can be set aside now, to make room for `s`).
    p.device.handle_closed(e, None, p.now).unwrap();
    // The link comes back: the client reattaches the unanswered t1 through status and history.
    p.reachable = true;
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready());
    assert_eq!(p.os.loads, vec![s.clone()]);
    let how = reattached(&p.client_events);
    assert!(
        matches!(how.as_slice(), [Reattach::Imported(turns)] if turns.len() == 2),
        "{how:?}"
    );
    assert_eq!(p.starts("t1"), 1);
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(st["exists"], true, "{st}");
    assert_eq!(st["title"], "first");
    assert_eq!(st["lastTurnId"], "t1");
    assert_eq!(st["busy"], false);
}

#[test]
fn a_session_set_aside_is_deleted_by_the_client_and_on_the_device() {
    let mut p = linked(2);
    let a = p.new_session("/home/dev/work/a");
    prompt(&mut p, &a, "hello", "t1");
    p.settle().unwrap();
    let b = p.new_session("/home/dev/work/b");
    p.new_session("/home/dev/work/c");
    p.new_session("/home/dev/work/d");
    assert_eq!(p.device.session_count(), 4);
    assert_eq!(p.device.live_session_count(), 2);
    // `a` and `b` are set aside: the client deletes one, the device the other.
    let r = p
        .call("_lembas/session/delete", json!({ "sessionId": a }))
        .unwrap();
    assert_eq!(r["deleted"], true, "{r}");
    assert!(p.device.delete_session(&b, p.now));
    p.settle().unwrap();
    assert_eq!(p.device.session_count(), 2);
    for gone in [&a, &b] {
        assert!(
            !p.os
                .store
                .entries()
                .iter()
                .any(|e| e.table != Table::Deletes && e.key.starts_with(gone.as_str())),
            "{gone} is still in the store"
        );
        let st = p
            .call("_lembas/session/status", json!({ "sessionId": gone }))
            .unwrap();
        assert_eq!(st["exists"], false, "{st}");
    }
    assert!(
        p.client_events.iter().any(|e| matches!(e,
            ClientEvent::Notification { method, params }
                if method == "_lembas/session/deleted" && params["sessionId"] == b.as_str())),
        "the client heard the device-side delete"
    );
    // Deleting twice is done as well.
    let r = p
        .call("_lembas/session/delete", json!({ "sessionId": a }))
        .unwrap();
    assert_eq!(r["deleted"], false);
}

#[test]
fn session_new_is_refused_at_the_bound_when_none_can_be_set_aside() {
    let mut p = linked(2);
    for (i, cwd) in ["/home/dev/work/a", "/home/dev/work/b"].iter().enumerate() {
        let s = p.new_session(cwd);
        prompt(&mut p, &s, "sleep 60000", &format!("t{i}"));
    }
    p.drive().unwrap();
    let e = p
        .call("session/new", json!({ "cwd": "/home/dev/work/c" }))
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("sessions.max_live") && e.message.contains('2'),
        "{}",
        e.message
    );
    assert_eq!(p.device.session_count(), 2);
    // Once a turn ends its session is idle, and the next one takes its place.
    p.advance(60_000).unwrap();
    p.new_session("/home/dev/work/c");
    assert_eq!(p.device.session_count(), 3);
    assert_eq!(p.device.live_session_count(), 2);
}

#[test]
fn an_editors_sessions_are_never_set_aside() {
    let mut p = linked(2);
    let e = editor(&mut p);
    for id in 1..=2 {
        let v = stdio_line(
            &mut p,
            e,
            json!({ "jsonrpc": "2.0", "id": id, "method": "session/new", "params": { "cwd": "/srv/x" } }),
        );
        assert!(v["result"]["sessionId"].is_string(), "{v}");
    }
    let v = stdio_line(
        &mut p,
        e,
        json!({ "jsonrpc": "2.0", "id": 3, "method": "session/new", "params": { "cwd": "/srv/x" } }),
    );
    assert_eq!(v["error"]["code"], code::INVALID_PARAMS, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the limit of 2 (sessions.max_live)"),
        "{v}"
    );
    assert_eq!(p.device.session_count(), 2);
}

#[test]
fn without_a_store_nothing_is_set_aside() {
    let mut p = Pair::default_with(&["/home/dev/work"], |d| {
        d.sessions.max_live = 2;
        d.has_store = false;
    });
    p.start().unwrap();
    p.new_session("/home/dev/work/a");
    p.new_session("/home/dev/work/b");
    let e = p
        .call("session/new", json!({ "cwd": "/home/dev/work/c" }))
        .unwrap_err();
    assert!(
        e.message.contains("sessions.max_live") && e.message.contains("without a store"),
        "{}",
        e.message
    );
    assert_eq!(p.device.session_count(), 2);
    assert!(p.os.loads.is_empty());
}

#[test]
fn a_restart_keeps_the_most_recent_sessions_in_memory_and_reads_the_others_back() {
    let mut p = linked(2);
    let a = p.new_session("/home/dev/work/a");
    prompt(&mut p, &a, "hello", "t1");
    p.settle().unwrap();
    p.advance(10).unwrap();
    p.new_session("/home/dev/work/b");
    p.advance(10).unwrap();
    p.new_session("/home/dev/work/c");
    p.restart_device().unwrap();
    p.settle().unwrap();
    assert_eq!(p.device.session_count(), 3);
    assert_eq!(p.device.live_session_count(), 2);
    prompt(&mut p, &a, "hello", "t1");
    p.settle().unwrap();
    // Read back by the prompt alone: the client's catch-up on the new link, on every session
    // it heard of (each was told its command set, an event with a seq), reads none back.
    assert_eq!(p.os.loads, vec![a.clone()]);
    assert_eq!(p.device.live_session_count(), 2);
    let got = p.answers("t1");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], got[1]);
    assert_eq!(p.starts("t1"), 1);
}

#[test]
fn a_session_read_back_passes_the_limits_of_the_moment() {
    let mut p = linked(2);
    let s = p.new_session("/home/dev/work/a");
    prompt(&mut p, &s, "hello", "t1");
    p.settle().unwrap();
    set_aside(&mut p, &s);
    let mut remote = p.device.config().remote.clone();
    remote.roots = vec!["/home/dev/other".into()];
    remote.trusted = remote.roots.clone();
    p.device.reconfigure(remote, p.now).unwrap();
    p.settle().unwrap();
    assert!(p.client.is_ready());
    let e = p
        .call(
            "session/prompt",
            json!({ "sessionId": s, "prompt": [{ "type": "text", "text": "again" }],
                    "_meta": { "lembas": { "turnId": "t2" } } }),
        )
        .unwrap_err();
    // Read back by the prompt alone, then judged.
    assert_eq!(p.os.loads, vec![s.clone()]);
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("cannot be used over the link now")
            && e.message.contains("/home/dev/other"),
        "{}",
        e.message
    );
    assert_eq!(p.starts("t2"), 0);
}

#[test]
fn a_failed_read_back_refuses_the_waiting_request_with_the_reason_and_keeps_the_session() {
    let mut p = linked(2);
    let s = p.new_session("/home/dev/work/a");
    prompt(&mut p, &s, "hello", "t1");
    p.settle().unwrap();
    set_aside(&mut p, &s);
    p.os.load_fails = Some("disk I/O error".into());
    let e = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap_err();
    assert_eq!(e.code, code::INTERNAL_ERROR);
    assert!(
        e.message.contains("could not be read back"),
        "{}",
        e.message
    );
    assert!(e.message.contains("disk I/O error"), "{}", e.message);
    // Not lost: the next request naming it reads it again.
    p.os.load_fails = None;
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(st["exists"], true, "{st}");
    assert_eq!(st["lastTurnId"], "t1", "{st}");
    assert_eq!(p.os.loads, vec![s.clone(), s.clone()]);
}

/// The answers the device sent to the client's `_lembas/session/events` requests since
/// transcript frame `from`, by session: (since, the answer's result or error).
fn catch_ups(p: &Pair, from: usize) -> Vec<(String, u64, Value)> {
    let asked: Vec<Value> = p.frames_to_device().into_iter().skip(from).collect();
    let answers = p.frames_to_client();
    asked
        .iter()
        .filter(|f| f["method"] == "_lembas/session/events")
        .map(|f| {
            let answer = answers
                .iter()
                .rev()
                .find(|a| a["id"] == f["id"] && a.get("method").is_none())
                .cloned()
                .unwrap_or(Value::Null);
            let session = f["params"]["sessionId"].as_str().unwrap().to_string();
            (session, f["params"]["since"].as_u64().unwrap(), answer)
        })
        .collect()
}

#[test]
fn a_catch_up_on_many_sessions_set_aside_over_a_new_link_reads_none_back() {
    let mut p = linked(2);
    let ids: Vec<String> = (0..6)
        .map(|i| {
            let s = p.new_session(&format!("/home/dev/work/s{i}"));
            prompt(&mut p, &s, "hello", &format!("t{i}"));
            p.settle().unwrap();
            s
        })
        .collect();
    assert_eq!(p.device.live_session_count(), 2);
    assert!(p.os.loads.is_empty());
    let before = p.frames_to_device().len();
    // The link drops and comes back: the client catches up on every session it follows.
    p.cut().unwrap();
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready());
    let asked = catch_ups(&p, before);
    for s in &ids {
        let (_, since, answer) = asked
            .iter()
            .find(|(id, _, _)| id == s)
            .unwrap_or_else(|| panic!("no catch-up on {s}: {asked:?}"));
        let r = &answer["result"];
        assert!(since > &0, "it heard events of {s}");
        assert_eq!(r["events"], json!([]), "{s}: {answer}");
        assert_eq!(r["truncated"], false, "{s}: {answer}");
        assert_eq!(r["next"].as_u64(), Some(*since), "{s}: {answer}");
    }
    // None was read back, none evicted another, and the client saw no gap.
    assert_eq!(p.os.loads, Vec::<String>::new());
    assert_eq!(p.device.live_session_count(), 2);
    assert!(
        !p.client_events
            .iter()
            .any(|e| matches!(e, ClientEvent::Gap { .. })),
        "{:?}",
        p.client_events
    );
    // A seq past the log's end is still told `truncated`, without a read.
    let r = p
        .call(
            "_lembas/session/events",
            json!({ "sessionId": ids[0], "since": u64::from(u32::MAX) << 8 }),
        )
        .unwrap();
    assert_eq!(r["truncated"], true, "{r}");
    assert!(r["events"].as_array().unwrap().is_empty(), "{r}");
    // Outside the roots of this moment, a session set aside is refused as one in memory is.
    let mut remote = p.device.config().remote.clone();
    remote.roots = vec!["/home/dev/other".into()];
    remote.trusted = remote.roots.clone();
    p.device.reconfigure(remote, p.now).unwrap();
    p.settle().unwrap();
    let e = events_from_start(&mut p, &ids[0]).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("cannot be used over the link now"),
        "{}",
        e.message
    );
    assert_eq!(p.os.loads, Vec::<String>::new());
}

#[test]
fn a_catch_up_on_a_session_set_aside_that_missed_events_gets_them_from_its_log() {
    let mut p = linked(2);
    let s = p.new_session("/home/dev/work/a");
    prompt(&mut p, &s, "sleep 1000\nsay end", "t1");
    p.drive().unwrap();
    // The turn ends while the link is down, and the session is set aside after it.
    p.reachable = false;
    p.cut().unwrap();
    p.advance(1_000).unwrap();
    let e = editor(&mut p);
    for (id, cwd) in [(1, "/srv/x"), (2, "/srv/y")] {
        stdio_line(
            &mut p,
            e,
            json!({ "jsonrpc": "2.0", "id": id, "method": "session/new", "params": { "cwd": cwd } }),
        );
    }
    p.device.handle_closed(e, None, p.now).unwrap();
    assert!(p.device.turn_state(&s, "t1").is_none(), "set aside");
    let before = p.frames_to_device().len();
    p.reachable = true;
    p.advance(120_000).unwrap();
    let asked = catch_ups(&p, before);
    let (_, since, answer) = asked.iter().find(|(id, _, _)| id == &s).unwrap();
    let events = answer["result"]["events"].as_array().unwrap();
    assert!(!events.is_empty(), "{answer}");
    assert!(events.iter().all(|e| e["seq"].as_u64() > Some(*since)));
    // The catch-up read its log alone; the client's `status` on the turn it followed is what
    // reads the session back.
    assert_eq!(p.os.event_reads, vec![s.clone()]);
    assert_eq!(p.os.loads, vec![s.clone()]);
}

/// A session `s` with a finished turn, set aside (two more sessions took its place).
fn set_aside_after_a_turn(p: &mut Pair) -> String {
    let s = p.new_session("/home/dev/work/a");
    prompt(p, &s, "say kept and more", "t1");
    p.settle().unwrap();
    set_aside(p, &s);
    assert!(p.os.loads.is_empty());
    s
}

#[test]
fn a_page_of_a_set_aside_session_with_events_is_read_from_its_log_alone() {
    let mut p = linked(2);
    let s = set_aside_after_a_turn(&mut p);
    // A client that missed all of it (since 0) needs its events.
    let page = events_from_start(&mut p, &s).unwrap();
    let events = page["events"].as_array().unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs.first(), Some(&1), "{page}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(page["next"].as_u64(), seqs.last().copied(), "{page}");
    assert_eq!(page["truncated"], false, "{page}");
    let text: String = events
        .iter()
        .filter(|e| e["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|e| e["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "kept and more", "{page}");
    // Its log alone was read: not read back, no other evicted, still set aside, not held.
    assert_eq!(p.os.event_reads, vec![s.clone()]);
    assert_eq!(p.os.loads, Vec::<String>::new());
    assert_eq!(p.device.live_session_count(), 2);
    assert_eq!(p.device.session_count(), 3);
    assert!(p.device.turn_state(&s, "t1").is_none(), "still set aside");
    assert!(p.device.at_rest(), "no read left in flight");
    // A page cut by its limit says where to go on, as in memory.
    let cut = p
        .call(
            "_lembas/session/events",
            json!({ "sessionId": s, "since": 0, "limit": 2 }),
        )
        .unwrap();
    assert_eq!(cut["events"].as_array().unwrap().len(), 2, "{cut}");
    assert_eq!(cut["next"].as_u64(), Some(seqs[1]), "{cut}");
    // Each page is the one the log answers in memory: read back, the same asks get them.
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(st["exists"], true, "{st}");
    assert_eq!(p.os.loads, vec![s.clone()]);
    for (since, limit, read) in [(0, None, &page), (0, Some(2), &cut)] {
        let mut params = json!({ "sessionId": s, "since": since });
        if let Some(l) = limit {
            params["limit"] = json!(l);
        }
        let live = p.call("_lembas/session/events", params).unwrap();
        assert_eq!(&live, read, "since {since}, limit {limit:?}");
    }
}

#[test]
fn a_log_read_that_fails_refuses_the_catch_up_naming_why_and_leaves_the_session_set_aside() {
    let mut p = linked(2);
    let s = set_aside_after_a_turn(&mut p);
    p.os.load_fails = Some("disk I/O error".into());
    let e = events_from_start(&mut p, &s).unwrap_err();
    assert_eq!(e.code, code::INTERNAL_ERROR);
    assert!(
        e.message
            .contains("could not be read from the store: disk I/O error"),
        "{}",
        e.message
    );
    assert_eq!(p.os.loads, Vec::<String>::new());
    assert!(p.device.turn_state(&s, "t1").is_none(), "still set aside");
    assert!(p.device.at_rest(), "answered, not left waiting");
    // Not lost: asked again once the store reads, it is answered.
    p.os.load_fails = None;
    let page = events_from_start(&mut p, &s).unwrap();
    assert!(!page["events"].as_array().unwrap().is_empty(), "{page}");
}

/// The answer the client heard to its call `id`, if any yet.
fn answer_to(
    p: &Pair,
    id: &lembas_core::jsonrpc::Id,
) -> Option<Result<Value, lembas_core::jsonrpc::RpcError>> {
    p.client_events.iter().rev().find_map(|e| match e {
        ClientEvent::Answer { id: i, outcome, .. } if i == id => Some(outcome.clone()),
        _ => None,
    })
}

#[test]
fn log_reads_waiting_at_once_are_bounded_and_one_more_is_refused_naming_the_bound() {
    let mut p = Pair::default_with(&["/home/dev/work"], |d| {
        d.sessions.max_live = 2;
        d.sessions.max_event_reads = 1;
    });
    p.start().unwrap();
    let s = set_aside_after_a_turn(&mut p);
    let other = p.new_session("/home/dev/work/d");
    // A write not yet durable: the read asked behind it waits.
    p.os.hold_persists = true;
    let title = json!({ "sessionId": other, "title": "held" });
    p.client
        .call("_lembas/session/title", &title, p.now)
        .unwrap();
    p.drive().unwrap();
    let since = json!({ "sessionId": s, "since": 0 });
    let first = p
        .client
        .call("_lembas/session/events", &since, p.now)
        .unwrap();
    p.drive().unwrap();
    assert!(
        answer_to(&p, &first).is_none(),
        "the read waits for the write"
    );
    let second = p
        .client
        .call("_lembas/session/events", &since, p.now)
        .unwrap();
    p.drive().unwrap();
    assert!(p.os.event_reads.is_empty(), "the read waits for the write");
    assert!(!p.device.at_rest(), "a read is in flight");
    // The write is durable: the first read is made and answered; the second, asked while it
    // waited, was refused naming the bound (its answer queued behind the same write).
    p.os.hold_persists = false;
    let held = p.os.held.len();
    p.os.release(&mut p.device, held, p.now);
    p.settle().unwrap();
    let page = answer_to(&p, &first).expect("answered").unwrap();
    assert!(!page["events"].as_array().unwrap().is_empty(), "{page}");
    let e = answer_to(&p, &second).expect("answered").unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("(sessions.max_event_reads)"),
        "{}",
        e.message
    );
    assert_eq!(e.data, Some(json!({ "limit": 1 })));
    assert_eq!(p.os.event_reads, vec![s.clone()]);
    assert!(p.device.at_rest());
}

#[test]
fn a_link_asking_after_a_set_aside_session_no_client_was_given_reads_its_sets_alone() {
    let mut p = linked(2);
    // An editor's session, announced to the link, runs a turn, and the editor goes.
    let e = editor(&mut p);
    let made = stdio_line(
        &mut p,
        e,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "session/new", "params": { "cwd": "/home/dev/work/ed", "mcpServers": [] } }),
    );
    let s = made["result"]["sessionId"].as_str().unwrap().to_string();
    stdio_line(
        &mut p,
        e,
        json!({ "jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": { "sessionId": s, "prompt": [{ "type": "text", "text": "say hidden" }] } }),
    );
    p.device.handle_closed(e, None, p.now).unwrap();
    p.settle().unwrap();
    // Two sessions of the link's take its place.
    p.new_session("/home/dev/work/b");
    p.new_session("/home/dev/work/c");
    assert_eq!(p.device.live_session_count(), 2);
    let page = events_from_start(&mut p, &s).unwrap();
    let events = page["events"].as_array().unwrap();
    assert!(!events.is_empty(), "its command sets: {page}");
    assert!(
        events
            .iter()
            .all(|e| e["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "only what the link was sent of it: {page}"
    );
    assert_eq!(p.os.event_reads, vec![s.clone()]);
    assert_eq!(p.os.loads, Vec::<String>::new());
    assert_eq!(p.device.live_session_count(), 2);
}
