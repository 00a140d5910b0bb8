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
