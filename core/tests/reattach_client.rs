//! The client's catch-up on a new link (client/resume.rs), frame by frame against a device played
//! here: the missed events are asked from the last seq handed out and handed out before the
//! live ones heard meanwhile; a seq handed out once is never again; pages are bounded; what
//! cannot be had is a `Gap`.

mod common;

use common::lone::Lone;
use lembas_core::client::event_json;
use lembas_core::ClientConfig;
use serde_json::{json, Value};

const S: &str = "ses_1";

fn chunk_params(seq: u64, text: &str) -> Value {
    json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": S,
            "update": { "sessionUpdate": "agent_message_chunk",
                        "content": { "type": "text", "text": text } } })
}

fn event_params(seq: u64, text: &str) -> Value {
    json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": S,
            "event": { "type": "text", "text": text } })
}

/// A chunk the device sends live as an update.
fn chunk(seq: u64, text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": "session/update", "params": chunk_params(seq, text) })
}

/// A chunk the device sends live as an event.
fn event(seq: u64, text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": "_lembas/event", "params": event_params(seq, text) })
}

/// The `n`th chunk (from 1) as a link client hears it: an update and an event, seqs `2n - 1`
/// and `2n`.
fn pair(n: u64, text: &str) -> [Value; 2] {
    [chunk(2 * n - 1, text), event(2 * n, text)]
}

/// The answer to events request `ask` with chunks `(n, text)`, each as its update and event.
fn page(ask: &Value, chunks: &[(u64, &str)], truncated: bool) -> Value {
    let events: Vec<Value> = chunks
        .iter()
        .flat_map(|(n, t)| {
            [
                json!({ "seq": 2 * n - 1, "method": "session/update",
                        "params": chunk_params(2 * n - 1, t) }),
                json!({ "seq": 2 * n, "method": "_lembas/event", "params": event_params(2 * n, t) }),
            ]
        })
        .collect();
    let next = chunks.last().map_or(0, |(n, _)| 2 * n);
    json!({ "jsonrpc": "2.0", "id": ask["id"],
            "result": { "events": events, "next": next, "truncated": truncated } })
}

/// The one events request among `sent`, asking from `since`.
fn asked(sent: &[Value], since: u64) -> Value {
    let asks: Vec<&Value> = sent
        .iter()
        .filter(|f| f["method"] == "_lembas/session/events")
        .collect();
    assert_eq!(asks.len(), 1, "{sent:?}");
    assert_eq!(asks[0]["params"], json!({ "sessionId": S, "since": since }));
    asks[0].clone()
}

fn hear_all(l: &mut Lone, frames: impl IntoIterator<Item = Value>) {
    for f in frames {
        l.hear(f);
    }
}

/// The text of the `_lembas/event` chunks handed out.
fn event_text(l: &Lone) -> String {
    l.events
        .iter()
        .map(event_json)
        .filter_map(|e| e["params"]["event"]["text"].as_str().map(String::from))
        .collect()
}

/// Both streams' texts: `(updates, events)`.
fn texts(l: &Lone) -> (String, String) {
    (l.text(), event_text(l))
}

fn both(text: &str) -> (String, String) {
    (text.to_string(), text.to_string())
}

/// Linked with `events`, chunks `a` and `b` heard (seqs 1 to 4), then cut: the updates'
/// last seq, 3, is the lower.
fn heard_two_then_cut(tweak: impl FnOnce(&mut ClientConfig)) -> Lone {
    let mut l = Lone::with(tweak);
    let sent = l.link(&["events"]);
    assert!(
        sent.iter().all(|f| f["method"] != "_lembas/session/events"),
        "nothing followed yet: {sent:?}"
    );
    hear_all(&mut l, pair(1, "a"));
    hear_all(&mut l, pair(2, "b"));
    l.hear(chunk(3, "b"));
    assert_eq!(texts(&l), both("ab"), "a duplicate frame is dropped");
    l.cut();
    l
}

#[test]
fn live_events_heard_while_catching_up_come_with_the_pages() {
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 3);
    // Live ones, and a repeat of one handed out already, before the answer.
    hear_all(&mut l, pair(5, "e"));
    l.hear(chunk(3, "b"));
    assert_eq!(texts(&l), both("ab"), "left to the pages");
    let more = l.hear(page(&ask, &[(3, "c"), (4, "d"), (5, "e")], false));
    assert!(
        more.is_empty(),
        "reached the newest live one: no more pages"
    );
    assert_eq!(texts(&l), both("abcde"));
    hear_all(&mut l, pair(5, "e"));
    hear_all(&mut l, pair(6, "f"));
    assert_eq!(
        texts(&l),
        both("abcdef"),
        "seen ones dropped, new ones straight out"
    );
    assert_eq!(l.gaps(), Vec::<u64>::new());
}

#[test]
fn pages_go_on_until_one_is_empty_and_no_further_than_the_bound() {
    let mut l = heard_two_then_cut(|c| c.catch_up_pages = 2);
    let ask = asked(&l.link(&["events"]), 3);
    let ask = asked(&l.hear(page(&ask, &[(3, "c")], false)), 6);
    // The bound: what is left is a gap, after what was had.
    let more = l.hear(page(&ask, &[(4, "d")], false));
    assert!(more.is_empty(), "{more:?}");
    assert_eq!(texts(&l), both("abcd"));
    assert_eq!(l.gaps(), vec![8]);
    hear_all(&mut l, pair(9, "i"));
    assert_eq!(texts(&l), both("abcdi"), "followed live after the gap");

    // An empty page is the end: no gap.
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 3);
    let ask = asked(&l.hear(page(&ask, &[(3, "c")], false)), 6);
    assert!(l.hear(page(&ask, &[], false)).is_empty());
    assert_eq!((texts(&l), l.gaps()), (both("abc"), vec![]));
}

#[test]
fn pages_go_on_until_they_reach_the_newest_seq_heard_live() {
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 3);
    hear_all(&mut l, pair(5, "e"));
    hear_all(&mut l, pair(6, "f"));
    // 12 was heard: the page reaching 8 is not enough.
    let ask = asked(&l.hear(page(&ask, &[(3, "c"), (4, "d")], false)), 8);
    assert!(l.hear(page(&ask, &[(5, "e"), (6, "f")], false)).is_empty());
    assert_eq!(texts(&l), both("abcdef"));
    assert_eq!(l.gaps(), Vec::<u64>::new());
}

#[test]
fn a_log_that_no_longer_reaches_back_is_a_gap_then_the_newest() {
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 3);
    let ask = asked(&l.hear(page(&ask, &[(8, "h"), (9, "i")], true)), 18);
    assert!(l.hear(page(&ask, &[], false)).is_empty());
    assert_eq!(l.gaps(), vec![3]);
    assert_eq!(texts(&l), both("abhi"));
}

#[test]
fn a_device_without_events_a_refused_page_or_no_page_is_a_gap() {
    let mut l = heard_two_then_cut(|_| {});
    let sent = l.link(&[]);
    assert!(sent.iter().all(|f| f["method"] != "_lembas/session/events"));
    assert_eq!(l.gaps(), vec![3]);
    // Still followed: the next link with `events` asks from where it was.
    l.cut();
    let ask = asked(&l.link(&["events"]), 3);
    l.hear(json!({ "jsonrpc": "2.0", "id": ask["id"],
                   "error": { "code": -32602, "message": "no such session" } }));
    assert_eq!(l.gaps(), vec![3, 3]);
    // An answer that is no page (events not a list, no `next`) is as good as none.
    l.cut();
    let ask = asked(&l.link(&["events"]), 3);
    l.hear(json!({ "jsonrpc": "2.0", "id": ask["id"],
                   "result": { "events": "c", "truncated": false } }));
    assert_eq!(l.gaps(), vec![3, 3, 3]);
    assert_eq!(texts(&l), both("ab"));
}

#[test]
fn the_session_heard_of_longest_ago_is_forgotten_past_the_bound() {
    let mut l = Lone::with(|c| c.followed_sessions = 1);
    l.link(&["events"]);
    l.hear(chunk(1, "a"));
    let mut other = chunk(1, "z");
    other["params"]["sessionId"] = json!("ses_2");
    l.hear(other);
    l.cut();
    let sent = l.link(&["events"]);
    let asks: Vec<&Value> = sent
        .iter()
        .filter(|f| f["method"] == "_lembas/session/events")
        .collect();
    assert_eq!(asks.len(), 1, "{sent:?}");
    assert_eq!(asks[0]["params"]["sessionId"], "ses_2");
}

#[test]
fn a_cut_mid_catch_up_asks_again_for_all_it_heard() {
    let mut l = heard_two_then_cut(|_| {});
    asked(&l.link(&["events"]), 3);
    hear_all(&mut l, pair(5, "e"));
    l.cut();
    assert_eq!(texts(&l), both("ab"), "5 waits for 3 and 4");
    let ask = asked(&l.link(&["events"]), 3);
    let ask = asked(&l.hear(page(&ask, &[(3, "c"), (4, "d")], false)), 8);
    assert!(l.hear(page(&ask, &[(5, "e")], false)).is_empty());
    assert_eq!(texts(&l), both("abcde"));
}

/// A connection behind its pause mark merges each stream's run (device/coalesce.rs): `u3 e4
/// u5 e6` goes out as `u(3+5) e(4+6)`. Cut between the two, the client resumes from its
/// events' last seq, not the merged update's, and drops what each stream has seen.
#[test]
fn a_merged_update_cut_before_its_event_resumes_from_the_lower_stream() {
    let mut l = Lone::new();
    l.link(&["events"]);
    hear_all(&mut l, pair(1, "a"));
    l.hear(chunk(5, "bc"));
    assert_eq!(texts(&l), (String::from("abc"), String::from("a")));
    l.cut();
    let ask = asked(&l.link(&["events"]), 2);
    let ask = asked(&l.hear(page(&ask, &[(2, "b"), (3, "c")], false)), 6);
    assert!(l.hear(page(&ask, &[], false)).is_empty());
    assert_eq!(
        texts(&l),
        both("abc"),
        "the updates' 3 and 5 seen, the events' 4 and 6 not"
    );
    // Each stream drops what it has seen, whatever the other's last.
    l.hear(chunk(5, "bc"));
    l.hear(event(6, "c"));
    l.hear(event(4, "b"));
    hear_all(&mut l, pair(4, "d"));
    assert_eq!(texts(&l), both("abcd"));
}

/// A frame that is not a chunk is never merged and no chunk passes it: every seq below it has
/// come, so it lifts both streams, and `since` does not lag behind a quiet one.
#[test]
fn a_frame_that_is_no_chunk_lifts_both_streams() {
    let mut l = Lone::new();
    l.link(&["events"]);
    hear_all(&mut l, pair(1, "a"));
    l.hear(chunk(3, "b"));
    l.hear(
        json!({ "jsonrpc": "2.0", "method": "_lembas/permission/settled",
                   "params": { "_meta": { "lembas": { "seq": 4 } }, "sessionId": S,
                               "toolCallId": "call_1" } }),
    );
    l.cut();
    asked(&l.link(&["events"]), 4);
    // An update chunk alone does not: the event of its seq + 1 may still come.
    let mut l = Lone::new();
    l.link(&["events"]);
    hear_all(&mut l, pair(1, "a"));
    l.hear(chunk(3, "b"));
    l.cut();
    asked(&l.link(&["events"]), 2);
}

/// A client linked with `capabilities` that prompted turn `t1`, was cut before its answer and
/// linked again; the status request it sent for the turn.
fn prompted_then_relinked(capabilities: &[&str]) -> (Lone, Value) {
    let mut l = Lone::new();
    l.link(capabilities);
    l.c.prompt(
        S,
        json!([{ "type": "text", "text": "hi" }]),
        Some("t1"),
        lembas_core::Time::ZERO,
    )
    .unwrap();
    l.sent();
    l.cut();
    let sent = l.link(capabilities);
    let status = sent
        .iter()
        .find(|f| f["method"] == "_lembas/session/status")
        .unwrap_or_else(|| panic!("the status is asked: {sent:?}"))
        .clone();
    (l, status)
}

/// A prompt left unanswered by a cut is asked after by `_lembas/session/status` on the next
/// link: the status says where its turn is. An answer that is no status (a device that is
/// broken) is taken as one that does not know the turn: the prompt is sent again, with its
/// turn id (which keeps it from running twice), and the UI is told.
#[test]
fn a_status_says_where_the_turn_is_and_one_that_is_no_status_resends_it() {
    use lembas_core::client::Reattach;
    use lembas_core::testing::reattached;
    for (answer, how) in [
        (
            json!({ "sessionId": S, "exists": false, "held": "none", "busy": false,
                 "title": null, "queued": [], "plan": null }),
            Reattach::Gone,
        ),
        (
            json!({ "sessionId": S, "exists": true, "held": "here", "busy": true,
                 "title": null, "turnId": "t1", "queued": [], "plan": null }),
            Reattach::Following,
        ),
        (
            json!({ "sessionId": S, "exists": "yes", "turnId": "t1" }),
            Reattach::Resent,
        ),
        (
            json!({ "sessionId": S, "exists": true, "queued": "t1" }),
            Reattach::Resent,
        ),
    ] {
        let (mut l, status) = prompted_then_relinked(&["status"]);
        let sent =
            l.hear(json!({ "jsonrpc": "2.0", "id": status["id"], "result": answer.clone() }));
        let resent = sent.iter().any(|f| {
            f["method"] == "session/prompt" && f["params"]["_meta"]["lembas"]["turnId"] == "t1"
        });
        assert_eq!(resent, how != Reattach::Gone, "{answer}: {sent:?}");
        assert_eq!(reattached(&l.events), [&how], "{answer}");
    }
}

/// A device without capability `turns` leaves the turn fields out of its status: that is a
/// status, and the turn is looked for in the session's history, not sent again at once.
#[test]
fn a_status_without_turn_fields_sends_the_client_to_the_history() {
    let (mut l, status) = prompted_then_relinked(&["status", "sessions"]);
    let answer = json!({ "sessionId": S, "exists": true, "held": "here", "busy": false,
                         "title": null });
    let sent = l.hear(json!({ "jsonrpc": "2.0", "id": status["id"], "result": answer }));
    assert!(
        sent.iter()
            .any(|f| f["method"] == "_lembas/session/history"),
        "{sent:?}"
    );
    assert!(
        sent.iter().all(|f| f["method"] != "session/prompt"),
        "{sent:?}"
    );
}
