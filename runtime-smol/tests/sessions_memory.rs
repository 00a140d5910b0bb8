//! `lembas link` with `sessions: { max_live: 1 }` in config.yaml: the idle session is set aside
//! and read back from the redb store when named again (its ledger with it), and where nothing
//! can be set aside `session/new` is refused naming the limit.

use lembas::instance::{Event, TestInstance};
use serde_json::{json, Value};

mod common;

use common::{linked, new_session, Home};

/// A prompt of turn `turn` through the instance's client: its answer and the events until it.
async fn prompt(
    instance: &TestInstance,
    session: &str,
    turn: &str,
    script: &str,
) -> (Result<Value, String>, Vec<Event>) {
    let params = json!({
        "sessionId": session,
        "prompt": [{ "type": "text", "text": script }],
        "_meta": { "lembas": { "turnId": turn } },
    });
    let id = instance.call("session/prompt", params).await.unwrap();
    let (outcome, seen) = common::answer(instance, &id).await;
    (
        outcome.map_err(|e| format!("{} {}", e.code, e.message)),
        seen,
    )
}

fn said(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Client(e) => e.update()?.update.message_text().map(str::to_string),
            _ => None,
        })
        .collect()
}

/// Turn `turn` of `session` started and left running (it says "long", then sleeps a minute):
/// the session is busy, so it cannot be set aside.
async fn start_long(instance: &TestInstance, session: &str, turn: &str) {
    let params = json!({
        "sessionId": session,
        "prompt": [{ "type": "text", "text": "say long\nsleep 60000" }],
        "_meta": { "lembas": { "turnId": turn } },
    });
    instance.call("session/prompt", params).await.unwrap();
    let (started, _) = instance
        .wait_for(common::T, |e| said(std::slice::from_ref(e)) == ["long"])
        .await;
    assert!(started.is_some(), "turn {turn} did not start");
}

#[test]
fn an_idle_session_is_set_aside_in_redb_and_read_back_and_the_bound_refuses_new_ones() {
    smol::block_on(async {
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nsessions:\n  max_live: 1\n",
            w = home.work.display()
        ));
        let (instance, home, _device, _) = linked(home).await;
        let a = new_session(&instance, &home.work.join("proj")).await;
        let (first, seen) = prompt(&instance, &a, "t1", "say one").await;
        assert_eq!(first.as_ref().unwrap()["stopReason"], "end_turn");
        assert_eq!(said(&seen), vec!["one"]);
        // A second session: `a`, idle, leaves memory for it.
        let b = new_session(&instance, &home.work.join("proj")).await;
        assert_ne!(a, b);
        // `a` named again: read back from the store, its ledger answers the duplicate.
        let (again, seen) = prompt(&instance, &a, "t1", "say one").await;
        assert_eq!(again, first);
        assert!(said(&seen).is_empty(), "turn t1 ran again: {seen:?}");
        // `a` busy: nothing can be set aside, so a third session is refused.
        start_long(&instance, &a, "t2").await;
        let refused = common::call(
            &instance,
            "session/new",
            json!({ "cwd": home.work.join("proj"), "mcpServers": [] }),
        )
        .await
        .unwrap_err();
        assert!(
            refused.starts_with("-32602 ")
                && refused.contains("the limit of 1 (sessions.max_live)"),
            "{refused}"
        );
    });
}

/// A `sessions:` key other than `max_live` reaches the device too: with `max_queued: 1`, a
/// second prompt waiting behind a running turn is refused naming the bound (the default, 32,
/// would queue it).
#[test]
fn sessions_max_queued_from_config_yaml_bounds_the_waiting_prompts() {
    smol::block_on(async {
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nsessions:\n  max_queued: 1\n",
            w = home.work.display()
        ));
        let (instance, home, _device, _) = linked(home).await;
        let a = new_session(&instance, &home.work.join("proj")).await;
        let params = |turn: &str| {
            json!({
                "sessionId": a,
                "prompt": [{ "type": "text", "text": "say long\nsleep 60000" }],
                "_meta": { "lembas": { "turnId": turn } },
            })
        };
        instance.call("session/prompt", params("t1")).await.unwrap();
        let (started, _) = instance
            .wait_for(common::T, |e| said(std::slice::from_ref(e)) == ["long"])
            .await;
        assert!(started.is_some(), "turn t1 did not start");
        // t2 waits behind t1: the one prompt `max_queued: 1` lets wait.
        instance.call("session/prompt", params("t2")).await.unwrap();
        let refused = common::call(&instance, "session/prompt", params("t3"))
            .await
            .unwrap_err();
        assert!(
            refused.starts_with("-32602 ") && refused.contains("1 prompts waiting, the limit"),
            "{refused}"
        );
        assert!(refused.contains("(sessions.max_queued)"), "{refused}");
    });
}

/// A client that missed events of a session set aside in redb is answered from its log alone,
/// read from the store: the session is not read back, so with `max_live: 1` and the one in
/// memory busy (nothing can be set aside for it) the page still comes, whole and in order, where
/// reading the session back was refused naming `sessions.max_live`.
#[test]
fn a_missed_catch_up_on_a_session_set_aside_in_redb_reads_its_log_alone() {
    smol::block_on(async {
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nsessions:\n  max_live: 1\n",
            w = home.work.display()
        ));
        let (instance, home, _device, _) = linked(home).await;
        let a = new_session(&instance, &home.work.join("proj")).await;
        let (first, _) = prompt(&instance, &a, "t1", "say one\nsay two").await;
        assert_eq!(first.as_ref().unwrap()["stopReason"], "end_turn");
        // `b` takes the only place in memory, and is busy: `a` cannot come back.
        let b = new_session(&instance, &home.work.join("proj")).await;
        start_long(&instance, &b, "t2").await;
        // A client that missed everything of `a`: from before this start's first seq (its base,
        // `epoch << 32`; from 0 the page says truncated, as this start vouches for no earlier).
        let probe = common::call(
            &instance,
            "_lembas/session/events",
            json!({ "sessionId": a, "since": 0 }),
        )
        .await
        .unwrap();
        assert_eq!(probe["truncated"], true, "{probe}");
        let base = probe["events"][0]["seq"].as_u64().unwrap() - 1;
        let page = common::call(
            &instance,
            "_lembas/session/events",
            json!({ "sessionId": a, "since": base }),
        )
        .await
        .unwrap();
        assert_eq!(page["events"], probe["events"], "{page}");
        let events = page["events"].as_array().unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert!(!seqs.is_empty(), "{page}");
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        assert_eq!(page["next"].as_u64(), seqs.last().copied(), "{page}");
        assert_eq!(page["truncated"], false, "{page}");
        let text: Vec<&str> = events
            .iter()
            .filter(|e| e["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|e| e["params"]["update"]["content"]["text"].as_str())
            .collect();
        assert_eq!(text, ["one", "two"], "{page}");
        // From the middle, cut by its limit: the page goes on where the last one said.
        let second = common::call(
            &instance,
            "_lembas/session/events",
            json!({ "sessionId": a, "since": seqs[0], "limit": 1 }),
        )
        .await
        .unwrap();
        assert_eq!(
            second["events"][0]["seq"].as_u64(),
            Some(seqs[1]),
            "{second}"
        );
        assert_eq!(second["next"].as_u64(), Some(seqs[1]), "{second}");
        // `a` stayed set aside: `b` still holds the only place, so a new session is refused.
        let refused = common::call(
            &instance,
            "session/new",
            json!({ "cwd": home.work.join("proj"), "mcpServers": [] }),
        )
        .await
        .unwrap_err();
        assert!(
            refused.contains("the limit of 1 (sessions.max_live)"),
            "{refused}"
        );
    });
}
