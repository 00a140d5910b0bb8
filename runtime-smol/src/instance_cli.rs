//! `lembas test-instance`: the test instance on loopback as a process, for tests written in
//! other languages (the node and browser tests of the wasm bindings). It prints one line,
//! `{"port":N,"url":"http://127.0.0.1:N"}`, then takes commands on stdin and prints what the
//! instance sees on stdout, one JSON object a line each way:
//!
//! - in: `{"call":METHOD,"params":P}`, `{"prompt":SESSION,"blocks":[..],"turnId":T}`,
//!   `{"respond":ID,"result":R}` or `{"respond":ID,"error":E}`, `{"close":CODE,"reason":S}`,
//!   `{"cut":true}`; a call or a prompt is answered with `{"called":ID}`, `{"prompted":TURN}`
//!   or `{"refused":SENTENCE}`.
//! - out: `{"event":"link_up"}`, `link_down`, `relay_up`, `relay_down`,
//!   `{"event":"refused","status":401}`, and `{"event":"client","client":{"kind":..}}` for
//!   what the instance's client reports (the shapes of the bindings' `ClientEvent`).
//!
//! The process ends when stdin closes. The device token comes from `LEMBAS_TOKEN` (never an
//! argument, which any process on the machine can read).

use std::io::{BufRead, Write};
use std::time::Duration;

use futures_lite::future;
use lembas_core::client::event_json;
use serde_json::{json, Value};

use crate::instance::{Event, InstanceOptions, TestInstance};

pub fn run(relay: bool) -> Result<(), String> {
    let token = std::env::var("LEMBAS_TOKEN")
        .map_err(|_| "give the test instance's device token in LEMBAS_TOKEN".to_string())?;
    smol::block_on(async move {
        let instance = TestInstance::start(InstanceOptions {
            token: token.trim().to_string(),
            relay,
            ..InstanceOptions::default()
        })
        .await
        .map_err(|e| format!("test instance: {e}"))?;
        say(&json!({ "port": instance.addr.port(), "url": instance.url() }));
        let (lines_tx, lines_rx) = smol::channel::unbounded::<String>();
        // stdin blocks; it is read on a thread of its own.
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if lines_tx.send_blocking(line).is_err() {
                    break;
                }
            }
        });
        loop {
            let next = future::or(
                async { Some(lines_rx.recv().await.map_err(|_| ())) },
                async {
                    let e = instance.next_event(Duration::from_secs(3600)).await;
                    if let Some(e) = e {
                        if let Some(v) = event(e) {
                            say(&v);
                        }
                    }
                    None
                },
            )
            .await;
            match next {
                Some(Ok(line)) => command(&instance, &line).await,
                Some(Err(())) => return Ok(()),
                None => {}
            }
        }
    })
}

fn say(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

async fn command(instance: &TestInstance, line: &str) {
    let Ok(c) = serde_json::from_str::<Value>(line) else {
        say(&json!({ "refused": "not a JSON object" }));
        return;
    };
    let s = |k: &str| c[k].as_str().map(str::to_string);
    if let Some(method) = s("call") {
        say(&match instance.call(&method, c["params"].clone()).await {
            Ok(id) => json!({ "called": id }),
            Err(e) => json!({ "refused": e.to_string() }),
        });
    } else if let Some(session) = s("prompt") {
        let turn = s("turnId");
        say(&match instance
            .prompt(&session, c["blocks"].clone(), turn.as_deref())
            .await
        {
            Ok(t) => json!({ "prompted": t }),
            Err(e) => json!({ "refused": e.to_string() }),
        });
    } else if c.get("respond").is_some() {
        let Some(id) = lembas_core::jsonrpc::Id::from_json(&c["respond"].to_string()) else {
            say(&json!({ "refused": "`respond` is not a request id" }));
            return;
        };
        let outcome = match c.get("error") {
            Some(e) => match serde_json::from_value(e.clone()) {
                Ok(e) => Err(e),
                Err(e) => {
                    say(&json!({ "refused": format!("`error`: {e}") }));
                    return;
                }
            },
            None => Ok(c["result"].clone()),
        };
        instance.respond(id, outcome).await;
    } else if let Some(code) = c["close"].as_u64() {
        let reason = s("reason").unwrap_or_default();
        instance.close(code as u16, &reason).await;
    } else if c["cut"] == json!(true) {
        instance.cut().await;
    } else {
        say(&json!({ "refused": "no such command" }));
    }
}

fn event(e: Event) -> Option<Value> {
    Some(match e {
        Event::LinkUp => json!({ "event": "link_up" }),
        Event::LinkDown => json!({ "event": "link_down" }),
        Event::RelayUp => json!({ "event": "relay_up" }),
        Event::RelayDown => json!({ "event": "relay_down" }),
        Event::Refused(status) => json!({ "event": "refused", "status": status }),
        Event::Frame { .. } => return None,
        Event::Client(c) => json!({ "event": "client", "client": event_json(&c) }),
    })
}
