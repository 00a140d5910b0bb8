//! Optional: a real `lembas link` on the model engine against a real OpenAI-compatible server
//! (llama.cpp's `llama-server`, vLLM, Ollama, a hosted API) for its chat completions. The test
//! instance still serves discovery, the link and `/v1/models` (listing the one model given); it
//! passes `POST /v1/chat/completions` on to the server ([`lembas::instance::Upstream`]).
//!
//!     LEMBAS_E2E_OPENAI_URL=http://127.0.0.1:8080 LEMBAS_E2E_OPENAI_MODEL=qwen2.5-0.5b \
//!         cargo test -p lembas --test e2e_openai
//!
//! (`LEMBAS_E2E_OPENAI_TOKEN` too if the server wants a key.) Without the variables it says it
//! skipped and passes. The second test runs the same path against a small OpenAI-compatible
//! server started here (a second test instance, which checks its own key), so the path is
//! proven on every run.

use std::io::Write;
use std::time::Duration;

use lembas::instance::{ChatReply, ChatStream, Event, InstanceOptions, TestInstance, Upstream};
use lembas_core::client::ClientEvent;
use serde_json::{json, Value};

mod common;

use common::{call, ready, Home, TOKEN};

const URL: &str = "LEMBAS_E2E_OPENAI_URL";
const MODEL: &str = "LEMBAS_E2E_OPENAI_MODEL";
const KEY: &str = "LEMBAS_E2E_OPENAI_TOKEN";

/// A real model on a CPU may take its time.
const ANSWER_WITHIN: Duration = Duration::from_secs(300);

/// The server to test against, from the variables `var` gives.
struct OpenAi {
    url: String,
    model: String,
    token: Option<String>,
}

impl OpenAi {
    /// `Err`: the sentence saying which variable is missing.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<OpenAi, String> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        Ok(OpenAi {
            url: set(URL).ok_or(format!("{URL} is not set"))?,
            model: set(MODEL).ok_or(format!("{MODEL} is not set"))?,
            token: set(KEY),
        })
    }
}

/// A `lembas link` on the model engine, a session on the server's model, one prompt: the
/// streamed answer's text and reasoning, and the stop reason.
async fn prompt_through(openai: OpenAi) -> (String, String, String) {
    let instance = TestInstance::start(InstanceOptions {
        token: TOKEN.into(),
        models: vec![json!({ "id": openai.model, "object": "model", "kind": "chat" })],
        upstream: Some(Upstream {
            url: openai.url,
            token: openai.token,
        }),
        ..InstanceOptions::default()
    })
    .await
    .unwrap();
    let home = Home::new();
    home.write_config(&format!(
        "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nengine: model\n",
        w = home.work.display()
    ));
    let out = home.login(&instance.url());
    assert!(out.status.success(), "{out:?}");
    let _device = home.link();
    ready(&instance).await;
    let session = call(
        &instance,
        "session/new",
        json!({ "cwd": home.work.join("proj"), "mcpServers": [],
                "_meta": { "lembas_model": openai.model } }),
    )
    .await
    .unwrap();
    let id = session["sessionId"].as_str().unwrap();
    let words = json!([{ "type": "text", "text": "Say hello in one short sentence." }]);
    instance.prompt(id, words, Some("t1")).await.unwrap();
    let (e, seen) = instance
        .wait_for(ANSWER_WITHIN, |e| {
            matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
        })
        .await;
    let Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) = e else {
        panic!("no answer within {ANSWER_WITHIN:?}: {seen:?}");
    };
    let stop = match outcome {
        Ok(v) => v["stopReason"].as_str().unwrap_or("?").to_string(),
        Err(e) => panic!("the turn failed: {}", e.message),
    };
    let said = |kind: &str| -> String {
        seen.iter()
            .filter_map(|e| match e {
                Event::Client(e) => e.update().filter(|u| u.update.kind() == kind),
                _ => None,
            })
            .filter_map(|u| u.update.chunk_text().map(String::from))
            .collect()
    };
    (
        said("agent_message_chunk"),
        said("agent_thought_chunk"),
        stop,
    )
}

#[test]
fn a_real_openai_compatible_server_answers_a_lembas_model_prompt() {
    let openai = match OpenAi::from_vars(|k| std::env::var(k).ok()) {
        Ok(o) => o,
        Err(why) => {
            let thread = std::thread::current();
            // Straight to the process's stderr, as `common::programs` skips: libtest captures
            // `eprintln!` in a passing test. Never a failure: no server is part of CI.
            let _ = writeln!(
                std::io::stderr(),
                "skipped {}: {why} (start an OpenAI-compatible server, e.g. `llama-server -m \
                 model.gguf --port 8080`, then run with {URL}=http://127.0.0.1:8080 \
                 {MODEL}=<its model id> and {KEY} if it wants a key)",
                thread.name().unwrap_or("a test")
            );
            return;
        }
    };
    smol::block_on(async {
        let (text, _, stop) = prompt_through(openai).await;
        assert!(!text.trim().is_empty(), "an empty answer");
        assert_eq!(stop, "end_turn");
    });
}

/// The same path, the variables given by a map: a second test instance is the OpenAI-compatible
/// server (it takes only its own key, so the key is proven to be passed on).
#[test]
fn the_path_runs_against_a_local_openai_compatible_server() {
    assert_eq!(
        OpenAi::from_vars(|k| (k == URL).then(|| "http://x".into())).err(),
        Some(format!("{MODEL} is not set"))
    );
    smol::block_on(async {
        let server = TestInstance::start(InstanceOptions {
            token: "server-key".into(),
            chat: vec![ChatReply::Stream(ChatStream {
                reasoning: vec!["A greeting.".into()],
                text: vec!["Hello".into(), ", world.".into()],
                delay: Duration::from_millis(20),
                ..ChatStream::default()
            })],
            ..InstanceOptions::default()
        })
        .await
        .unwrap();
        let vars = [
            (URL, format!("{}/v1", server.url())),
            (MODEL, "local/tiny".to_string()),
            (KEY, "server-key".to_string()),
        ];
        let openai = OpenAi::from_vars(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.clone())
        })
        .unwrap();
        let (text, thought, stop) = prompt_through(openai).await;
        assert_eq!(
            (text.as_str(), stop.as_str()),
            ("Hello, world.", "end_turn")
        );
        assert_eq!(thought, "A greeting.");
        let sent: Vec<Value> = server.chat_requests();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["model"], "local/tiny");
        assert_eq!(sent[0]["stream"], true);
    });
}
