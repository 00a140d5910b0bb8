//! The person's personalization end to end: config.yaml's `personality`, `personality_custom`
//! and `instructions`, unless the instance the device is logged in to has the account's
//! available (`GET /v1/me/personalization`), fetched at login and at each dial and put in the
//! model engine's system text; and `lembas config set`, which writes the key and, logged in to
//! an instance that has it available, `PUT`s the changed field alone with `enabled: true`.

use lembas::instance::{ChatReply, Event, InstanceOptions, TestInstance};
use lembas_core::client::ClientEvent;
use serde_json::{json, Value};

mod common;

use common::{call, ready, Home, T, TOKEN};

/// The device's own, in config.yaml.
const OWN: &str = "personality: terse\ninstructions: \"local words\"\n";

/// A home on the model engine with the device's own personalization.
fn home() -> Home {
    let home = Home::new();
    home.write_config(&format!(
        "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nengine: model\n{OWN}",
        w = home.work.display()
    ));
    home
}

async fn instance(personalization: Option<Value>) -> TestInstance {
    TestInstance::start(InstanceOptions {
        token: TOKEN.into(),
        chat: vec![ChatReply::text(&["ok"])],
        personalization,
        ..InstanceOptions::default()
    })
    .await
    .unwrap()
}

/// The account's state as the instance answers it.
fn account(enabled: bool, available: bool) -> Value {
    json!({ "enabled": enabled, "available": available, "personality": "warm",
            "personality_custom": "", "instructions": "Use British spelling" })
}

/// Log in (what login says), link, run one turn on a session whose chat sends instructions,
/// and return the system message the model was sent.
async fn system_text_sent(instance: &TestInstance, home: &Home) -> (String, String) {
    let out = home.login(&instance.url());
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let _device = home.link();
    ready(instance).await;
    let session = call(
        instance,
        "session/new",
        json!({ "cwd": home.work.join("proj"), "mcpServers": [],
                "_meta": { "lembas_model": "test/chat-small",
                           "lembas": { "system_prompt": "Be brief." } } }),
    )
    .await
    .unwrap();
    let id = session["sessionId"].as_str().unwrap();
    instance
        .prompt(id, json!([{ "type": "text", "text": "hi" }]), Some("t1"))
        .await
        .unwrap();
    let (e, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
        })
        .await;
    assert!(e.is_some(), "no answer after {seen:?}");
    let sent = instance.chat_requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let system = &sent[0]["messages"][0];
    assert_eq!(system["role"], "system", "{system}");
    (said, system["content"].to_string())
}

#[test]
fn the_instances_personalization_is_used_in_place_of_the_devices_own() {
    smol::block_on(async {
        let instance = instance(Some(account(true, true))).await;
        let home = home();
        let (said, system) = system_text_sent(&instance, &home).await;
        assert!(said.contains("personalization: the account's"), "{said}");
        assert!(system.contains("Personality: warm"), "{system}");
        assert!(system.contains("Use British spelling"), "{system}");
        assert!(
            !system.contains("terse") && !system.contains("local words"),
            "{system}"
        );
        // The instance's name is the login's host.
        assert!(
            system.contains("## Instructions from 127.0.0.1") && system.contains("Be brief."),
            "{system}"
        );
    });
}

#[test]
fn config_yamls_applies_unless_the_instance_has_it_available_and_none_when_turned_off() {
    smol::block_on(async {
        for (state, want_own, want_said) in [
            // Not served (404), and served but not available: the device's own.
            (None, true, "config.yaml's"),
            (Some(account(true, false)), true, "config.yaml's"),
            // Available but turned off on the account: none of it.
            (Some(account(false, true)), false, "none (turned off"),
        ] {
            let instance = instance(state.clone()).await;
            let home = home();
            let (said, system) = system_text_sent(&instance, &home).await;
            assert!(said.contains(want_said), "{state:?}: {said}");
            assert_eq!(
                system.contains("Personality: terse") && system.contains("local words"),
                want_own,
                "{state:?}: {system}"
            );
            assert!(!system.contains("British"), "{state:?}: {system}");
        }
    });
}

fn config_text(home: &Home) -> String {
    std::fs::read_to_string(home.path().join("config/lembas/config.yaml")).unwrap()
}

#[test]
fn config_set_writes_the_key_and_puts_only_that_field_with_enabled() {
    smol::block_on(async {
        let instance = instance(Some(account(false, true))).await;
        let home = home();
        assert!(home.login(&instance.url()).status.success());
        let before = config_text(&home);
        let (ok, out, err) = home.run(&["config", "set", "instructions", "Be kind"]);
        assert!(ok, "{err}");
        assert!(out.contains("instructions set in"), "{out}");
        assert!(out.contains("set on http://127.0.0.1"), "{out}");
        // Only that line changed: the rest of the file (the other keys, their order) is kept.
        let after = config_text(&home);
        assert_eq!(
            after,
            format!(
                "{}instructions: \"Be kind\"\n",
                before.replace("instructions: \"local words\"\n", "")
            )
        );
        assert_eq!(
            instance.personalization_puts(),
            vec![json!({ "instructions": "Be kind", "enabled": true })]
        );
        // The instance kept what it had for the other fields.
        let state = instance.personalization().unwrap();
        assert_eq!(state["personality"], "warm");
        assert_eq!(state["instructions"], "Be kind");
        assert_eq!(state["enabled"], true);
        // An unknown key is refused before anything is written.
        let (ok, _, err) = home.run(&["config", "set", "personalty", "x"]);
        assert!(!ok && err.contains("personalty"), "{err}");
        assert_eq!(config_text(&home), after);
        assert_eq!(instance.personalization_puts().len(), 1);
    });
}

#[test]
fn config_set_shows_the_instances_refusal_and_keeps_the_local_change() {
    smol::block_on(async {
        let instance = instance(Some(account(true, true))).await;
        let home = home();
        assert!(home.login(&instance.url()).status.success());
        instance.refuse_personalization_puts(Some("this token is not a device's token"));
        let (ok, _, err) = home.run(&["config", "set", "personality", "playful"]);
        assert!(!ok, "{err}");
        assert!(err.contains("this token is not a device's token"), "{err}");
        assert!(config_text(&home).contains("personality: \"playful\"\n"));
        // A 403 that says nothing: "not allowed".
        instance.refuse_personalization_puts(Some(""));
        let (ok, _, err) = home.run(&["config", "set", "personality_custom", "a pirate"]);
        assert!(!ok && err.contains("not allowed"), "{err}");
        assert_eq!(instance.personalization().unwrap()["personality"], "warm");
    });
}

#[test]
fn config_set_without_it_available_or_logged_out_writes_config_yaml_alone() {
    smol::block_on(async {
        let instance = instance(Some(account(true, false))).await;
        let home = home();
        let (ok, out, err) = home.run(&["config", "set", "personality", "calm"]);
        assert!(ok && !out.contains("set on"), "{out}{err}");
        assert!(home.login(&instance.url()).status.success());
        let (ok, out, err) = home.run(&["config", "set", "personality", "calm"]);
        assert!(ok, "{err}");
        assert!(out.contains("has no personalization available"), "{out}");
        assert!(instance.personalization_puts().is_empty());
        assert_eq!(config_text(&home).matches("personality:").count(), 1);
        assert!(config_text(&home).contains("personality: \"calm\"\n"));
    });
}

/// Fetched again at each dial: a change made on the instance (here by `lembas config set`) is
/// what the turns after the next dial are composed with, with no restart of `lembas link`.
#[test]
fn a_change_on_the_instance_is_taken_at_the_next_dial() {
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            chat: vec![ChatReply::text(&["one"]), ChatReply::text(&["two"])],
            personalization: Some(account(true, true)),
            ..InstanceOptions::default()
        })
        .await
        .unwrap();
        let home = home();
        assert!(home.login(&instance.url()).status.success());
        let _device = home.link();
        ready(&instance).await;
        let (ok, _, err) = home.run(&["config", "set", "instructions", "Answer in haiku"]);
        assert!(ok, "{err}");
        instance.cut().await;
        let (up, _) = instance.wait_for(T, |e| matches!(e, Event::LinkUp)).await;
        assert!(up.is_some(), "no redial");
        ready(&instance).await;
        let session = call(
            &instance,
            "session/new",
            json!({ "cwd": home.work.join("proj"), "mcpServers": [],
                    "_meta": { "lembas_model": "test/chat-small" } }),
        )
        .await
        .unwrap();
        let id = session["sessionId"].as_str().unwrap();
        instance
            .prompt(id, json!([{ "type": "text", "text": "hi" }]), Some("t1"))
            .await
            .unwrap();
        let (e, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
            })
            .await;
        assert!(e.is_some(), "no answer after {seen:?}");
        let system = instance.chat_requests()[0]["messages"][0]["content"].to_string();
        assert!(system.contains("Answer in haiku"), "{system}");
        assert!(system.contains("Personality: warm"), "{system}");
        assert!(!system.contains("British"), "{system}");
    });
}
