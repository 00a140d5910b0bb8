//! The model engine inside a `Pair`: the whole device (sessions, turns, cards, modes) with the
//! real engine, against a fake instance whose model answers from a script.

use lembas_core::client::ClientEvent;
use lembas_core::testing::fake_instance::ModelReply;
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/work";

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&[ROOT]).with_model_engine();
    p.start().unwrap();
    p
}

fn prompt(p: &mut Pair, session: &str, turn: &str, text: &str) {
    p.client
        .prompt(
            session,
            json!([{ "type": "text", "text": text }]),
            Some(turn),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
}

/// The agent message chunks the client heard.
fn said(p: &Pair) -> String {
    p.client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Notification { method, params }
                if method == "session/update"
                    && params["update"]["sessionUpdate"] == "agent_message_chunk" =>
            {
                params["update"]["content"]["text"]
                    .as_str()
                    .map(str::to_owned)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_prompt_is_answered_by_the_model_through_the_whole_device() {
    let mut p = linked();
    p.instance
        .script
        .push_back(ModelReply::Text("hello from the model".into()));
    let session = p.new_session(&format!("{ROOT}/app"));
    prompt(&mut p, &session, "t1", "say hello");
    let answers = p.answers("t1");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].as_ref().unwrap()["stopReason"], "end_turn");
    assert_eq!(said(&p), "hello from the model");
    let request = &p.instance.requests[0];
    assert_eq!(request["model"], "lembas/default");
    let last: &Value = request["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last["content"].to_string().contains("say hello"), "{last}");
}
