//! The client's catch-up on a new link (client/resume.rs), frame by frame against a device played
//! here: the missed events are asked from the last seq handed out and handed out before the
//! live ones heard meanwhile; a seq handed out once is never again; pages are bounded; what
//! cannot be had is a `Gap`.

mod common;

use common::lone::Lone;
use lembas_core::ClientConfig;
use serde_json::{json, Value};

const S: &str = "ses_1";

fn chunk_params(seq: u64, text: &str) -> Value {
    json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": S,
            "update": { "sessionUpdate": "agent_message_chunk",
                        "content": { "type": "text", "text": text } } })
}

/// A chunk the device sends live.
fn chunk(seq: u64, text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": "session/update", "params": chunk_params(seq, text) })
}

/// The answer to events request `ask` with these chunks.
fn page(ask: &Value, chunks: &[(u64, &str)], next: u64, truncated: bool) -> Value {
    let events: Vec<Value> = chunks
        .iter()
        .map(|(seq, t)| json!({ "seq": seq, "method": "session/update", "params": chunk_params(*seq, t) }))
        .collect();
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

/// Linked with `events`, `a` and `b` heard (seqs 1 and 2), then cut.
fn heard_two_then_cut(tweak: impl FnOnce(&mut ClientConfig)) -> Lone {
    let mut l = Lone::with(tweak);
    let sent = l.link(&["events"]);
    assert!(
        sent.iter().all(|f| f["method"] != "_lembas/session/events"),
        "nothing followed yet: {sent:?}"
    );
    l.hear(chunk(1, "a"));
    l.hear(chunk(2, "b"));
    l.hear(chunk(2, "b"));
    assert_eq!(l.text(), "ab", "a duplicate frame is dropped");
    l.cut();
    l
}

#[test]
fn live_events_heard_while_catching_up_follow_the_missed_ones() {
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 2);
    // Live ones, and a repeat of one handed out already, before the answer.
    l.hear(chunk(5, "e"));
    l.hear(chunk(2, "b"));
    assert_eq!(l.text(), "ab", "held until the missed ones are in");
    let more = l.hear(page(&ask, &[(3, "c"), (4, "d"), (5, "e")], 5, false));
    assert!(more.is_empty(), "reached the live ones: no more pages");
    assert_eq!(l.text(), "abcde");
    l.hear(chunk(5, "e"));
    l.hear(chunk(6, "f"));
    assert_eq!(
        l.text(),
        "abcdef",
        "seen ones dropped, new ones straight out"
    );
    assert_eq!(l.gaps(), Vec::<u64>::new());
}

#[test]
fn pages_go_on_until_one_is_empty_and_no_further_than_the_bound() {
    let mut l = heard_two_then_cut(|c| c.catch_up_pages = 2);
    let ask = asked(&l.link(&["events"]), 2);
    let ask = asked(&l.hear(page(&ask, &[(3, "c")], 3, false)), 3);
    // The bound: what is left is a gap, after what was had.
    let more = l.hear(page(&ask, &[(4, "d")], 4, false));
    assert!(more.is_empty(), "{more:?}");
    assert_eq!(l.text(), "abcd");
    assert_eq!(l.gaps(), vec![4]);
    l.hear(chunk(9, "i"));
    assert_eq!(l.text(), "abcdi", "followed live after the gap");

    // An empty page is the end: no gap.
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 2);
    let ask = asked(&l.hear(page(&ask, &[(3, "c")], 3, false)), 3);
    assert!(l.hear(page(&ask, &[], 3, false)).is_empty());
    assert_eq!((l.text().as_str(), l.gaps()), ("abc", vec![]));
}

#[test]
fn live_events_past_the_held_bound_are_fetched_instead() {
    let mut l = heard_two_then_cut(|c| c.held_events = 1);
    let ask = asked(&l.link(&["events"]), 2);
    l.hear(chunk(5, "e"));
    l.hear(chunk(6, "f"));
    // 5 was held, 6 was not: the page reaching 5 is not enough.
    let ask = asked(&l.hear(page(&ask, &[(3, "c"), (4, "d")], 4, false)), 4);
    assert!(l
        .hear(page(&ask, &[(5, "e"), (6, "f")], 6, false))
        .is_empty());
    assert_eq!(l.text(), "abcdef");
    assert_eq!(l.gaps(), Vec::<u64>::new());
}

#[test]
fn a_log_that_no_longer_reaches_back_is_a_gap_then_the_newest() {
    let mut l = heard_two_then_cut(|_| {});
    let ask = asked(&l.link(&["events"]), 2);
    let ask = asked(&l.hear(page(&ask, &[(8, "h"), (9, "i")], 9, true)), 9);
    assert!(l.hear(page(&ask, &[], 9, false)).is_empty());
    assert_eq!(l.gaps(), vec![2]);
    assert_eq!(l.text(), "abhi");
}

#[test]
fn a_device_without_events_or_a_refused_page_is_a_gap() {
    let mut l = heard_two_then_cut(|_| {});
    let sent = l.link(&[]);
    assert!(sent.iter().all(|f| f["method"] != "_lembas/session/events"));
    assert_eq!(l.gaps(), vec![2]);
    // Still followed: the next link with `events` asks from where it was.
    l.cut();
    let ask = asked(&l.link(&["events"]), 2);
    l.hear(json!({ "jsonrpc": "2.0", "id": ask["id"],
                   "error": { "code": -32602, "message": "no such session" } }));
    assert_eq!(l.gaps(), vec![2, 2]);
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
fn a_cut_mid_catch_up_keeps_what_was_held_for_the_next_link() {
    let mut l = heard_two_then_cut(|_| {});
    asked(&l.link(&["events"]), 2);
    l.hear(chunk(5, "e"));
    l.cut();
    assert_eq!(l.text(), "ab", "5 still waits for 3 and 4");
    let ask = asked(&l.link(&["events"]), 2);
    assert!(l
        .hear(page(&ask, &[(3, "c"), (4, "d")], 4, false))
        .is_empty());
    assert_eq!(l.text(), "abcde");
}
