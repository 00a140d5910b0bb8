//! `_lembas/session/history` of the built binary (`serve --stdio`, its history in a store of
//! its own on disk): a long history is answered within `sessions.history_bytes`, the newest
//! turns first, saying how many older ones it left out; `before` pages back to the first; a
//! single turn over the budget is answered alone, cut, saying so.

use serde_json::{json, Value};

#[path = "common/editor.rs"]
mod editor;
#[path = "common/scripted.rs"]
mod scripted;

use editor::Editor;

/// The default `sessions.history_bytes`.
const BUDGET: usize = 512 * 1024;

fn prompt(e: &mut Editor, session: &str, text: &str) {
    let r = e.ask_result(
        "session/prompt",
        json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
}

/// The turns' bytes as the answer carries them (the array's contents).
fn turns_bytes(r: &Value) -> usize {
    serde_json::to_string(&r["turns"]).unwrap().len() - 2
}

#[test]
fn a_long_history_is_answered_within_its_budget_saying_how_many_turns_it_left_out() {
    let mut e = Editor::start(&[]);
    e.ask_result(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    let cwd = tempfile::tempdir().unwrap();
    let s = e.ask_result(
        "session/new",
        json!({ "cwd": cwd.path().to_str().unwrap(), "mcpServers": [] }),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // 40 turns of 32 KiB answers: 80 history turns, about 1.3 MB, well past the budget.
    const TURNS: u64 = 40;
    for i in 0..TURNS {
        prompt(&mut e, &s, &format!("chunks 4 8192\nsay end {i}"));
    }
    let total = 2 * TURNS;
    let h = e.ask_result("_lembas/session/history", json!({ "sessionId": s }));
    let turns = h["turns"].as_array().unwrap();
    assert!(turns_bytes(&h) <= BUDGET, "{} bytes", turns_bytes(&h));
    assert_eq!(h["truncated"], true);
    let dropped = h["dropped"].as_u64().unwrap();
    assert!(dropped > 0);
    assert_eq!(
        dropped + turns.len() as u64,
        total,
        "every turn answered or counted"
    );
    // The newest turn last, as the spec orders them; and the next older one would not fit.
    assert!(turns.last().unwrap()["text"]
        .as_str()
        .unwrap()
        .ends_with(&format!("end {}", TURNS - 1)));
    assert!(turns_bytes(&h) + 2 * 32 * 1024 > BUDGET, "cut early");

    // `before` pages back from where it stopped, down to the first turn.
    let mut seen = turns.len() as u64;
    let mut before = dropped;
    while before > 0 {
        let page = e.ask_result(
            "_lembas/session/history",
            json!({ "sessionId": s, "before": before, "limit": 7 }),
        );
        let n = page["turns"].as_array().unwrap().len() as u64;
        assert!(n > 0 && n <= 7, "{n} turns");
        assert_eq!(page["dropped"].as_u64().unwrap(), before - n);
        assert!(turns_bytes(&page) <= BUDGET);
        seen += n;
        before -= n;
    }
    assert_eq!(seen, total);
    let first = e.ask_result(
        "_lembas/session/history",
        json!({ "sessionId": s, "before": 2 }),
    );
    assert_eq!(first["turns"][0]["text"], "chunks 4 8192\nsay end 0");
    assert_eq!(
        (first["truncated"].clone(), first["dropped"].clone()),
        (json!(false), json!(0))
    );

    // One answer of 600 KB: answered alone, cut to the budget, saying so.
    prompt(&mut e, &s, "chunks 10 60000");
    let h = e.ask_result("_lembas/session/history", json!({ "sessionId": s }));
    let turns = h["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert!(turns_bytes(&h) <= BUDGET);
    let text = turns[0]["text"].as_str().unwrap();
    assert!(
        text.contains("(sessions.history_bytes): it is cut"),
        "{}",
        &text[text.len() - 200..]
    );
    assert_eq!(h["dropped"].as_u64().unwrap(), total + 1);
    assert_eq!(h["truncated"], true);

    // A limit past the most it answers is refused, naming the bound.
    let refused = e.ask(
        "_lembas/session/history",
        json!({ "sessionId": s, "limit": 1001 }),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(why.contains("sessions.max_history_turns"), "{why}");
}
