//! What a device keeps of a long answer: the stream is never cut, but the history keeps the
//! first `sessions.max_answer_bytes` of the answer (and of the reasoning) and says how much
//! it left out, so a device's memory does not grow with an answer's length.

use lembas_core::testing::Pair;
use lembas_core::wire::event::update::SessionUpdate;
use serde_json::{json, Value};

fn streamed(p: &Pair) -> String {
    p.client_events
        .iter()
        .filter_map(|e| match &e.update()?.update {
            SessionUpdate::AgentMessageChunk(c) => Some(c.content.text.clone()),
            _ => None,
        })
        .collect()
}

fn last_answer(history: &Value) -> (String, String) {
    let turn = history["turns"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(turn["role"], "assistant");
    (
        turn["text"].as_str().unwrap().to_string(),
        turn["reasoning"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_long_answer_is_streamed_whole_and_kept_to_the_bound() {
    let mut p = Pair::default_with(&["/home/dev/work"], |c| {
        c.sessions.max_answer_bytes = 250;
    });
    p.start().unwrap();
    let s = p.new_session("/home/dev/work/app");
    // 10 chunks of 100 bytes, then a short line and a short thought.
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "chunks 10 100\nsay end\nthink why" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    let stream = streamed(&p);
    assert_eq!(stream.len(), 1003, "every chunk was streamed whole");
    assert!(stream.ends_with("end"));

    let history = p
        .call("_lembas/session/history", json!({ "sessionId": s }))
        .unwrap();
    let (text, reasoning) = last_answer(&history);
    assert!(text.starts_with(&stream[..250]), "the first 250 bytes kept");
    assert_eq!(
        &text[250..],
        "\n\n[753 more bytes were streamed and not kept: the history keeps the first 250 \
         (sessions.max_answer_bytes)]"
    );
    assert_eq!(reasoning, "why", "a short reasoning is kept whole");

    // The store kept the same: a restarted device says it too.
    p.restart_device().unwrap();
    p.settle().unwrap();
    let again = p
        .call("_lembas/session/history", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(last_answer(&again).0, text);
}

#[test]
fn the_bound_never_splits_a_character() {
    let mut p = Pair::default_with(&["/home/dev/work"], |c| {
        c.sessions.max_answer_bytes = 6;
    });
    p.start().unwrap();
    let s = p.new_session("/home/dev/work/app");
    // "héé" is 5 bytes; the next "é" would end at byte 7, past the bound of 6.
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "say héé\nsay éa" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    assert_eq!(streamed(&p), "héééa");
    let history = p
        .call("_lembas/session/history", json!({ "sessionId": s }))
        .unwrap();
    let (text, _) = last_answer(&history);
    assert!(text.starts_with("héé\n\n[3 more bytes"), "{text}");
}
