//! Backpressure through the core's host loop, on the Pair: a session whose reader is behind
//! gets no engine event (its turn waits where it is), while sessions of other readers go on.

use lembas_core::device::TurnPhase;
use lembas_core::testing::Pair;
use lembas_core::wire::event::update::SessionUpdate;
use serde_json::{json, Value};

fn web_chunks(p: &Pair, session: &str) -> Vec<String> {
    p.client_events
        .iter()
        .filter_map(|e| e.update())
        .filter(|u| u.session_id == session)
        .filter_map(|u| match &u.update {
            SessionUpdate::AgentMessageChunk(c) => Some(c.content.text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_slow_reader_holds_its_sessions_turn_and_an_editors_session_goes_on() {
    let mut p = Pair::default_with_roots(&["/w"]);
    p.start().unwrap();
    let web = p.new_session("/w/app");
    let editor = p.open_stdio();
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    p.stdio(editor, init).unwrap();
    let new = br#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w/lib"}}"#;
    let v = p.stdio_answer(editor, new).unwrap();
    let local = v["result"]["sessionId"].as_str().unwrap().to_string();

    // The web client stops reading: its link's queue is past the pause mark.
    let link = p.link().unwrap();
    p.slow_readers.insert(link);
    p.client
        .prompt(
            &web,
            json!([{ "type": "text", "text": "chunks 50 8" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    let prompt = json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{
        "sessionId": local, "prompt":[{"type":"text","text":"chunks 20 8"}]}});
    p.stdio(editor, prompt.to_string().as_bytes()).unwrap();
    p.settle().unwrap();

    let answered = p.stdio_out[&editor].iter().any(|f| {
        let v: Value = serde_json::from_slice(f).unwrap();
        v["id"] == 3 && v["result"]["stopReason"] == "end_turn"
    });
    assert!(answered, "the editor's session waited for the web reader");
    assert!(
        web_chunks(&p, &web).is_empty(),
        "the slow reader's session made progress: {:?}",
        web_chunks(&p, &web)
    );
    assert_eq!(p.device.turn_state(&web, "t1"), Some(TurnPhase::Running));

    // It reads again: the turn goes on from where it waited, every chunk once and in order.
    p.slow_readers.clear();
    p.settle().unwrap();
    let chunks = web_chunks(&p, &web);
    let expected: Vec<String> = (0..50).map(|i| format!("{i:08}")).collect();
    assert_eq!(chunks, expected);
    let a = p.answers("t1");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].as_ref().unwrap()["stopReason"], "end_turn");
}
