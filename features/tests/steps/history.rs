//! `_lembas/session/history` read from the store and bounded: `before`, `limit`, the byte
//! budget, and what the answer says it left out.

use cucumber::{given, then, when};
use serde_json::{json, Value};

use super::sessions::{answer, call};
use super::turns::session;
use crate::LinkWorld;

#[given(regex = r"^one history answer holds at most (\d+) bytes$")]
fn history_bytes(w: &mut LinkWorld, bytes: usize) {
    w.config_mut().sessions.history_bytes = bytes;
}

fn asks(w: &mut LinkWorld, before: Option<u64>, limit: Option<u64>) {
    let s = session(w);
    let mut params = json!({ "sessionId": s });
    if let Some(b) = before {
        params["before"] = json!(b);
    }
    if let Some(l) = limit {
        params["limit"] = json!(l);
    }
    call(w, "_lembas/session/history", params);
}

#[when(regex = r"^the client asks the session's history, at most (\d+) turns$")]
fn asks_limited(w: &mut LinkWorld, limit: u64) {
    asks(w, None, Some(limit));
}

#[when(regex = r"^the client asks the session's history before turn (\d+)$")]
fn asks_before(w: &mut LinkWorld, before: u64) {
    asks(w, Some(before), None);
}

#[when(regex = r"^the client asks the session's history before turn (\d+), at most (\d+) turns$")]
fn asks_before_limited(w: &mut LinkWorld, before: u64, limit: u64) {
    asks(w, Some(before), Some(limit));
}

fn history(w: &mut LinkWorld) -> Value {
    answer(w).unwrap_or_else(|e| panic!("the history was refused: {} {}", e.code, e.message))
}

fn turns(v: &Value) -> &Vec<Value> {
    v["turns"]
        .as_array()
        .unwrap_or_else(|| panic!("no turns in {v}"))
}

#[then(regex = r#"^the history answered is "(.*)"$"#)]
fn answered_texts(w: &mut LinkWorld, texts: String) {
    let v = history(w);
    let got: Vec<&str> = turns(&v)
        .iter()
        .filter_map(|t| t["text"].as_str())
        .collect();
    let want: Vec<&str> = texts.split(r#"", ""#).collect();
    assert_eq!(got, want, "in {v}");
}

#[then(regex = r"^the history answered says truncated (true|false), dropped (\d+)$")]
fn answered_cut(w: &mut LinkWorld, truncated: bool, dropped: u64) {
    let v = history(w);
    assert_eq!(v["truncated"], truncated, "in {v}");
    assert_eq!(v["dropped"], dropped, "in {v}");
}

#[then(regex = r"^the history answered has (\d+) turns?, within (\d+) bytes$")]
fn answered_within(w: &mut LinkWorld, n: usize, bytes: usize) {
    let v = history(w);
    let turns = turns(&v);
    assert_eq!(turns.len(), n, "in {v}");
    let size = serde_json::to_string(turns).unwrap().len() - 2;
    assert!(size <= bytes, "the turns are {size} bytes, over {bytes}");
}

#[then(regex = r#"^the history answered's last turn says "(.*)"$"#)]
fn last_turn_says(w: &mut LinkWorld, words: String) {
    let v = history(w);
    let last = turns(&v).last().expect("a turn");
    let text = last["text"].as_str().unwrap_or_default();
    assert!(text.contains(&words), "the last turn says {text}");
}
