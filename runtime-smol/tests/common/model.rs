//! What the model engine's end-to-end tests share: a device on the model engine, linked to a
//! test instance whose chat completions are scripted, and the prompt-and-wait helpers.

use std::time::{Duration, Instant};

use lembas::instance::{ChatReply, Event, InstanceOptions, TestInstance};
use lembas_core::client::ClientEvent;
use serde_json::{json, Value};

use super::{call, ready, Device, Home, T, TOKEN};

/// A chat model the test instance serves by default.
pub const MODEL: &str = "test/chat-small";

/// A home whose device runs the model engine (the default; said here against the helper's
/// `engine: scripted`).
pub fn model_home() -> Home {
    model_home_with("")
}

/// [`model_home`], with `extra` lines in the `remote:` block (each `  key: value\n`).
pub fn model_home_with(extra: &str) -> Home {
    let home = Home::new();
    home.write_config(&format!(
        "remote:\n  enabled: true\n  roots: [{w}]\n{extra}trusted: [{w}]\nengine: model\n",
        w = home.work.display()
    ));
    home
}

/// A test instance answering chat completions with `chat`, and `lembas link` on the model
/// engine, logged in to it and linked.
pub async fn linked_to(chat: Vec<ChatReply>) -> (TestInstance, Home, Device) {
    linked_to_home(model_home(), chat).await
}

/// [`linked_to`], from `home`.
pub async fn linked_to_home(home: Home, chat: Vec<ChatReply>) -> (TestInstance, Home, Device) {
    let instance = TestInstance::start(InstanceOptions {
        token: TOKEN.into(),
        chat,
        ..InstanceOptions::default()
    })
    .await
    .unwrap();
    let out = home.login(&instance.url());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let device = home.link();
    ready(&instance).await;
    (instance, home, device)
}

/// A session on `model` (the instance's served id, as the web UI sends it).
pub async fn model_session(
    instance: &TestInstance,
    home: &Home,
    model: &str,
) -> Result<Value, String> {
    call(
        instance,
        "session/new",
        json!({ "cwd": home.work.join("proj"), "mcpServers": [],
                "_meta": { "lembas_model": model } }),
    )
    .await
}

pub fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

/// The `session/update` texts of one kind (`agent_message_chunk`, `agent_thought_chunk`).
pub fn updates(events: &[Event], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Client(e) => e.update().filter(|u| u.update.kind() == kind),
            _ => None,
        })
        .filter_map(|u| Some(u.update.chunk_text()?.to_string()))
        .collect()
}

/// Prompt and wait for the answer: its outcome (an error as its message) and every event seen.
pub async fn prompt(
    instance: &TestInstance,
    session: &str,
    words: &str,
    turn: &str,
) -> (Result<Value, String>, Vec<Event>) {
    instance
        .prompt(session, text(words), Some(turn))
        .await
        .unwrap();
    answered(instance, turn).await
}

pub async fn answered(instance: &TestInstance, turn: &str) -> (Result<Value, String>, Vec<Event>) {
    let (e, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if turn_id == turn)
        })
        .await;
    match e {
        Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) => {
            (outcome.map_err(|e| e.message), seen)
        }
        other => panic!("no answer to {turn}: {other:?} after {seen:?}"),
    }
}

/// Wait until `check` holds, or fail after `within`.
pub async fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        smol::Timer::after(Duration::from_millis(20)).await;
    }
}

/// The user message of the instance's `nth` chat request, as text.
pub fn user_text(instance: &TestInstance, nth: usize) -> String {
    let requests = instance.chat_requests();
    let request = requests
        .get(nth)
        .unwrap_or_else(|| panic!("no chat request {nth}: {requests:?}"));
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
