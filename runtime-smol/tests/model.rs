//! The model engine end to end: the built `lembas link` on its default engine, against the
//! test instance's `/v1/models` and streamed `/v1/chat/completions` (real HTTP and server-sent
//! events on loopback, the replies scripted per test).

use std::time::{Duration, Instant};

use lembas::instance::{ChatReply, ChatStream, Event, InstanceOptions, TestInstance};
use lembas_core::client::ClientEvent;
use lembas_core::wire::event::lembas::LembasEvent;
use serde_json::json;

mod common;

use common::model::{
    answered, eventually, linked_to, model_home, model_session, prompt, text, updates, MODEL,
};
use common::{answer, call, ready, Device, Home, T, TOKEN};

/// A linked device whose session `t1` is streaming `words` slowly (one each 100 ms): returned
/// once the first chunk came, with the session's id.
async fn streaming(words: Vec<String>) -> (TestInstance, Home, Device, String) {
    let (instance, home, device) = linked_to(vec![ChatReply::Stream(ChatStream {
        text: words,
        delay: Duration::from_millis(100),
        ..ChatStream::default()
    })])
    .await;
    let session = model_session(&instance, &home, MODEL).await.unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    instance
        .prompt(&id, text("talk"), Some("t1"))
        .await
        .unwrap();
    let (first, _) = instance
        .wait_for(T, |e| {
            !updates(std::slice::from_ref(e), "agent_message_chunk").is_empty()
        })
        .await;
    assert!(first.is_some(), "the turn never streamed");
    (instance, home, device, id)
}

#[test]
fn a_lembas_model_session_streams_text_and_reasoning() {
    smol::block_on(async {
        let (instance, home, _device) = linked_to(vec![ChatReply::Stream(ChatStream {
            reasoning: vec!["Let me ".into(), "think.".into()],
            text: vec!["Hel".into(), "lo ".into(), "there".into()],
            usage: Some((12, 3)),
            ..ChatStream::default()
        })])
        .await;
        // Login set the library's embedding model, as `<connection>/<served id>`.
        let config = std::fs::read_to_string(home.path().join("config/lembas/config.yaml"));
        assert!(
            config
                .as_deref()
                .unwrap_or_default()
                .contains("embedding: \"127.0.0.1/test/embed\""),
            "{config:?}"
        );
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap();
        let (outcome, seen) = prompt(&instance, id, "hi there", "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(
            updates(&seen, "agent_message_chunk").concat(),
            "Hello there"
        );
        assert_eq!(
            updates(&seen, "agent_thought_chunk").concat(),
            "Let me think."
        );
        let sent = instance.chat_requests();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["model"], MODEL);
        assert_eq!(sent[0]["stream"], true);
        let last = sent[0]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string();
        assert!(last.contains("hi there"), "{last}");
    });
}

#[test]
fn a_model_the_instance_does_not_serve_is_refused() {
    smol::block_on(async {
        let (instance, home, _device) = linked_to(Vec::new()).await;
        let refused = model_session(&instance, &home, "test/not-served").await;
        let e = refused.unwrap_err();
        assert!(e.starts_with("-32602"), "{e}");
        assert!(e.contains("test/not-served"), "{e}");
        assert!(instance.chat_requests().is_empty());
    });
}

#[test]
fn cancel_mid_stream_aborts_the_http_request() {
    smol::block_on(async {
        let words = (0..100).map(|i| format!("w{i} ")).collect();
        let (instance, _home, _device, id) = streaming(words).await;
        instance
            .notify("session/cancel", json!({ "sessionId": id }))
            .await
            .unwrap();
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "cancelled");
        // The instance saw its stream closed long before its 10 s end.
        eventually(Duration::from_secs(2), "the HTTP stream aborted", || {
            instance.aborted_streams() == 1
        })
        .await;
    });
}

#[test]
fn a_rate_limited_request_waits_and_then_succeeds() {
    smol::block_on(async {
        let (instance, home, _device) =
            linked_to(vec![ChatReply::rate_limited(1), ChatReply::text(&["ok"])]).await;
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap();
        let start = Instant::now();
        let (outcome, seen) = prompt(&instance, id, "hi", "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(updates(&seen, "agent_message_chunk").concat(), "ok");
        assert_eq!(instance.chat_requests().len(), 2);
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "Retry-After: 1 not waited ({:?})",
            start.elapsed()
        );
    });
}

#[test]
fn a_refused_token_fails_the_turn_saying_to_log_in_again() {
    smol::block_on(async {
        let (instance, home, _device) =
            linked_to(vec![ChatReply::status(401, "the token was revoked")]).await;
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap();
        let (outcome, _) = prompt(&instance, id, "hi", "t1").await;
        let message = outcome.unwrap_err();
        assert!(
            message.contains("lembas login") || message.contains("log in"),
            "{message}"
        );
        assert_eq!(instance.chat_requests().len(), 1, "a 401 is not retried");
    });
}

#[test]
fn a_link_cut_during_a_stream_is_reattached_and_the_turn_finishes_once() {
    smol::block_on(async {
        let words: Vec<String> = (0..15).map(|i| format!("w{i} ")).collect();
        let (instance, _home, _device, _id) = streaming(words).await;
        instance.cut().await;
        let (re, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Reattached { .. }))
            })
            .await;
        assert!(re.is_some(), "no reattach after {seen:?}");
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        // The device kept the stream while unlinked: one request, not aborted, not redone.
        assert_eq!(instance.chat_requests().len(), 1);
        assert_eq!(instance.aborted_streams(), 0);
    });
}

/// `serve --stdio` on a logged-in device runs the model engine too: the instance's models are
/// fetched before the editor is read, so its first `session/new` (here on a slow instance) finds
/// them, and a session on one streams its answer.
#[test]
fn serve_stdio_runs_turns_on_the_instances_models() {
    use common::editor::{chunks, Editor};
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            chat: vec![ChatReply::text(&["from ", "the model"])],
            models_delay: Duration::from_millis(700),
            ..InstanceOptions::default()
        })
        .await
        .unwrap();
        let home = model_home();
        assert!(home.login(&instance.url()).status.success());
        let mut editor = Editor::spawn(home.cmd(&["serve", "--stdio"]), None);
        // All at once, as an editor does: nothing waits for the list but the device.
        editor.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                    "params":{"protocolVersion":1,"clientCapabilities":{}}}));
        editor.send(
            &json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{
            "cwd": home.work.join("proj"), "mcpServers": [],
            "_meta": { "lembas_model": MODEL }}}),
        );
        let answer = editor.until_answer(1).pop().unwrap();
        let session = answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("the first session/new did not take {MODEL}: {answer}"))
            .to_string();
        let seen = editor.prompt(2, &session, "hi");
        assert_eq!(
            seen.last().unwrap()["result"]["stopReason"],
            "end_turn",
            "{seen:?}"
        );
        assert_eq!(chunks(&seen).concat(), "from the model");
        assert_eq!(instance.chat_requests().len(), 1);
    });
}

/// The list is fetched again at every dial; a dial whose fetch fails keeps the last list (the
/// session on its model still runs), and a dial's fetch comes before its link.
#[test]
fn a_failed_model_fetch_at_a_dial_keeps_the_last_list() {
    smol::block_on(async {
        let (instance, home, device) = linked_to(vec![ChatReply::text(&["still ", "here"])]).await;
        // Login's fetch and the first dial's.
        assert_eq!(instance.models_served(), 2);
        instance.fail_models(Some(500));
        instance.cut().await;
        let (up, _) = instance.wait_for(T, |e| matches!(e, Event::LinkUp)).await;
        assert!(up.is_some(), "no redial");
        ready(&instance).await;
        assert_eq!(instance.models_served(), 3, "the redial fetched the list");
        assert!(
            device.stderr().contains("the last one is kept"),
            "{}",
            device.stderr()
        );
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap();
        let (outcome, seen) = prompt(&instance, id, "hi", "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(updates(&seen, "agent_message_chunk").concat(), "still here");
    });
}

/// `_lembas/configure` between prompts: the next turn runs on the new model and effort, a
/// `model` event says so, and the second turn is given the first as context.
#[test]
fn configure_changes_the_model_of_the_next_turn() {
    smol::block_on(async {
        let reply = |words: &str| {
            ChatReply::Stream(ChatStream {
                text: vec![words.into()],
                ..ChatStream::default()
            })
        };
        let (instance, home, _device) =
            linked_to(vec![reply("first answer"), reply("second answer")]).await;
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap().to_string();
        let (outcome, _) = prompt(&instance, &id, "one", "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        // An unserved model is refused, and the session keeps its own.
        let refused = call(
            &instance,
            "_lembas/configure",
            json!({ "sessionId": id, "model": "test/not-served" }),
        )
        .await
        .unwrap_err();
        assert!(
            refused.starts_with("-32602") && refused.contains(MODEL),
            "{refused}"
        );
        let asked = instance
            .call(
                "_lembas/configure",
                json!({ "sessionId": id, "model": "test/chat-large", "effort": "high" }),
            )
            .await
            .unwrap();
        let (changed, before_answer) = answer(&instance, &asked).await;
        assert_eq!(
            changed.unwrap(),
            json!({ "model": "test/chat-large", "effort": "high" })
        );
        // The change is announced to the session's holders.
        let model_event = before_answer.iter().any(|e| {
            let Event::Client(e) = e else { return false };
            matches!(&e.lembas_event().map(|e| &e.event), Some(LembasEvent::Model(m))
                if m.r#ref.as_deref() == Some("test/chat-large")
                    && m.effort.as_deref() == Some("high")
                    && m.instance)
        });
        assert!(model_event, "no model event: {before_answer:?}");
        let (outcome, seen) = prompt(&instance, &id, "two", "t2").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(
            updates(&seen, "agent_message_chunk").concat(),
            "second answer"
        );
        let sent = instance.chat_requests();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0]["model"], MODEL);
        assert_eq!(sent[1]["model"], "test/chat-large");
        assert_eq!(sent[1]["reasoning_effort"], "high");
        // The first turn went in as context of the second.
        let roles: Vec<(&str, String)> = sent[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["role"].as_str().unwrap(), m["content"].to_string()))
            .collect();
        let tail: Vec<&str> = roles[roles.len() - 3..].iter().map(|(r, _)| *r).collect();
        assert_eq!(tail, ["user", "assistant", "user"], "{roles:?}");
        assert!(
            roles[roles.len() - 2].1.contains("first answer"),
            "{roles:?}"
        );
    });
}

/// `engine.max_models` bounds the list the device keeps of the instance's: past it a model is
/// one the device cannot speak to, said as for any other.
#[test]
fn the_device_keeps_at_most_engine_max_models_of_the_instances_list() {
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            ..InstanceOptions::default()
        })
        .await
        .unwrap();
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nengine:\n  max_models: 1\n",
            w = home.work.display()
        ));
        assert!(home.login(&instance.url()).status.success());
        let _device = home.link();
        ready(&instance).await;
        assert!(model_session(&instance, &home, MODEL).await.is_ok());
        let cut = model_session(&instance, &home, "test/chat-large").await;
        let e = cut.unwrap_err();
        assert!(
            e.starts_with("-32602") && e.contains("test/chat-large"),
            "{e}"
        );
    });
}
