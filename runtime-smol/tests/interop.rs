//! Interop: the official ACP TypeScript SDK client (npm `@agentclientprotocol/sdk`, installed in
//! `tests/acp-interop/` by `.ci/run`) drives `lembas serve --stdio` through initialize,
//! session/new and a prompt with a permission round trip, on the scripted engine and on the
//! model engine whose model edits a file and asks to run a command. Skipped, saying so, when `node` or the
//! installed package is missing, unless `LEMBAS_TEST_PROGRAMS_REQUIRED` is set (as `.ci/run` sets
//! it): then that fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use lembas::instance::{ChatReply, InstanceOptions, TestInstance};
use serde_json::{json, Value};

mod common;

use common::model::model_home;
use common::{programs, scripted, TOKEN};

/// node and the installed SDK, or `None` after saying what is missing.
fn sdk() -> Option<(PathBuf, PathBuf)> {
    let node = programs::require("node", "apt-get install nodejs npm")?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp-interop");
    if !dir
        .join("node_modules/@agentclientprotocol/sdk/package.json")
        .exists()
    {
        programs::missing(
            "the ACP SDK is not installed",
            &format!("npm ci in {}", dir.display()),
        );
        return None;
    }
    Some((node, dir))
}

/// The SDK client's one line of what happened.
fn report(stdout: &[u8], stderr: &[u8]) -> Value {
    let stdout = String::from_utf8_lossy(stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let r: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(stderr)));
    // Every frame the editor's side received holds to the ACP v1 JSON schema (frames.mjs).
    assert_eq!(r["invalid"], json!([]), "frames off the ACP schema: {r}");
    r
}

#[test]
fn the_acp_typescript_sdk_client_drives_serve_stdio_with_a_permission_round_trip() {
    let Some((node, dir)) = sdk() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    scripted::use_scripted_engine(home.path());
    let out = Command::new(node)
        .arg(dir.join("client.mjs"))
        .arg(env!("CARGO_BIN_EXE_lembas"))
        .arg(&work)
        .current_dir(&dir)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .output()
        .unwrap();
    let r = report(&out.stdout, &out.stderr);
    assert!(out.status.success(), "{r}");
    assert_eq!(r["protocolVersion"], 1, "{r}");
    // Without a service, the editor's sessions are kept in the store: they can be loaded.
    assert_eq!(r["loadSession"], true, "{r}");
    assert!(r["sessionId"].as_str().unwrap().starts_with("ses_"), "{r}");
    assert_eq!(r["asks"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["asks"][0]["title"], "run the tests", "{r}");
    assert_eq!(r["said"], json!(["before", "allowed", "after"]), "{r}");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}

/// The SDK as an editor coming back: a session one editor made (no service runs, so
/// `serve --stdio` keeps it in the store) is listed for its directory and loaded by the next,
/// its history replayed before the answer, then prompted, resumed (no replay) and closed.
#[test]
fn the_acp_typescript_sdk_client_lists_and_loads_a_session_with_its_history_replayed() {
    let Some((node, dir)) = sdk() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(home.path()).unwrap().join("work");
    std::fs::create_dir_all(&work).unwrap();
    scripted::use_scripted_engine(home.path());
    let run = |script: &str, args: &[&str]| {
        let out = Command::new(&node)
            .arg(dir.join(script))
            .arg(env!("CARGO_BIN_EXE_lembas"))
            .args(args)
            .current_dir(&dir)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_STATE_HOME", home.path().join("state"))
            .output()
            .unwrap();
        let r = report(&out.stdout, &out.stderr);
        assert!(out.status.success(), "{r}");
        r
    };
    let w = work.to_str().unwrap();
    let first = run("client.mjs", &[w, "say made before"]);
    let session = first["sessionId"].as_str().unwrap().to_string();
    let r = run("sessions.mjs", &[w, &session]);
    assert_eq!(r["loadSession"], true, "{r}");
    assert_eq!(
        r["sessionCapabilities"],
        json!({ "list": {}, "resume": {}, "close": {}, "delete": {} }),
        "{r}"
    );
    assert_eq!(r["listed"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["listed"][0]["sessionId"], json!(session), "{r}");
    assert_eq!(r["listed"][0]["cwd"], json!(w), "{r}");
    assert_eq!(
        r["replayed"],
        json!(["user_message_chunk", "agent_message_chunk"]),
        "{r}"
    );
    assert_eq!(
        r["replayedTexts"],
        json!(["say made before", "made before"]),
        "{r}"
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(r["said"], json!(["from the sdk"]), "{r}");
    assert_eq!(r["resumedReplayed"], json!([]), "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}

/// On the model engine: the model edits a file (the client sees a `tool_call` of kind `edit`
/// and the change as `diff` content) and asks to run a command (a permission request of kind
/// `execute`, allowed once). The SDK parsed every one of them with its schemas.
#[test]
fn the_acp_typescript_sdk_client_sees_tool_calls_diffs_and_permission_requests() {
    let Some((node, dir)) = sdk() else {
        return;
    };
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            chat: vec![
                ChatReply::tools(&[(
                    "edit",
                    json!({ "path": "a.txt", "old_string": "world", "new_string": "there" }),
                )]),
                ChatReply::tools(&[("run", json!({ "command": "echo ran > ran.txt" }))]),
                ChatReply::text(&["done"]),
            ],
            ..InstanceOptions::default()
        })
        .await
        .unwrap();
        let home = model_home();
        let out = home.login(&instance.url());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let project = home.work.join("proj");
        std::fs::write(project.join("a.txt"), "hello world\n").unwrap();
        let out = Command::new(node)
            .arg(dir.join("client.mjs"))
            .arg(env!("CARGO_BIN_EXE_lembas"))
            .arg(&project)
            .arg("edit a.txt, then run something")
            .current_dir(&dir)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_STATE_HOME", home.path().join("state"))
            .output()
            .unwrap();
        let r = report(&out.stdout, &out.stderr);
        assert!(out.status.success(), "{r}");
        assert_eq!(r["stopReason"], "end_turn", "{r}");
        assert_eq!(
            std::fs::read_to_string(project.join("a.txt")).unwrap(),
            "hello there\n"
        );
        assert!(project.join("ran.txt").exists(), "{r}");
        let tools = r["tools"].as_array().unwrap();
        assert!(
            tools
                .iter()
                .any(|t| t["update"] == "tool_call" && t["kind"] == "edit"),
            "{r}"
        );
        let diff = tools
            .iter()
            .find_map(|t| t["diff"].as_object())
            .unwrap_or_else(|| panic!("no diff content: {r}"));
        assert_eq!(diff["oldText"], "hello world\n", "{r}");
        assert_eq!(diff["newText"], "hello there\n", "{r}");
        assert_eq!(r["asks"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(r["asks"][0]["kind"], "execute", "{r}");
    });
}

/// The SDK as an editor on a running service, in a session it shares with the web (announced,
/// and drawn by the web): first answer wins across both. The card the web answers is withdrawn in the editor (`$/cancel_request`, which
/// the SDK turns into the handler's abort signal); the card the editor answers is settled on the
/// web (`_lembas/permission/settled`). The turn runs once, to its end.
#[test]
fn a_card_answered_on_the_web_is_withdrawn_in_the_sdk_editor_and_the_reverse() {
    use common::{linked, Home, T};
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    use lembas_core::wire::card::PermissionAnswer;
    use lembas_core::wire::event::card::CardParams;
    let Some((node, dir)) = sdk() else {
        return;
    };
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let mut editor = Command::new(&node);
        editor
            .arg(dir.join("shared.mjs"))
            .arg(env!("CARGO_BIN_EXE_lembas"))
            .arg(home.work.join("proj"))
            .current_dir(&dir)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_STATE_HOME", home.path().join("state"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = editor.spawn().unwrap();
        // The web draws the session the editor shares (its status): from then on it hears the
        // session's events and is put its cards, open ones too.
        let (announce, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Notification { method, .. })
                    if method == "_lembas/session/announce")
            })
            .await;
        let Some(Event::Client(ClientEvent::Notification { params, .. })) = announce else {
            panic!("the editor's session was not announced: {seen:?}");
        };
        // (Its answer is not waited for here: the open card may come first.)
        instance
            .call(
                "_lembas/session/status",
                json!({ "sessionId": params["sessionId"] }),
            )
            .await
            .unwrap();
        let approval = |e: &Event| match e {
            Event::Client(e) => match e.card()? {
                (id, CardParams::Permission(card)) => Some((id.clone(), card.clone())),
                _ => None,
            },
            _ => None,
        };
        let card = |title: &'static str| {
            move |e: &Event| approval(e).is_some_and(|(_, card)| card.tool_call.title == title)
        };
        // The web answers the first card while the editor's dialog is up.
        let (first, seen) = instance.wait_for(T, card("answered on the web")).await;
        let Some((id, first)) = first.as_ref().and_then(approval) else {
            panic!("the web never saw the first card: {seen:?}");
        };
        assert!(first.meta.lembas.patient, "{first:?}");
        instance.answer(id, &PermissionAnswer::select("deny")).await;
        // The editor answers the second at once: the web's card is taken down.
        let (second, seen) = instance.wait_for(T, card("answered here")).await;
        let Some((_, second)) = second.as_ref().and_then(approval) else {
            panic!("the web never saw the second card: {seen:?}");
        };
        let tool_call = second.tool_call.tool_call_id;
        let (settled, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::CardSettled { tool_call_id, .. })
                    if *tool_call_id == tool_call)
            })
            .await;
        assert!(settled.is_some(), "the web's card stayed up: {seen:?}");
        let out = child.wait_with_output().unwrap();
        let r = report(&out.stdout, &out.stderr);
        assert_eq!(r["exitCode"], 0, "{r}");
        assert_eq!(r["stopReason"], "end_turn", "{r}");
        assert_eq!(
            r["asks"],
            json!([
                { "title": "answered on the web", "withdrawn": true },
                { "title": "answered here", "withdrawn": false },
            ]),
            "{r}"
        );
        // Each card decided once, by whoever answered first: the web denied, the editor allowed.
        assert_eq!(
            r["said"],
            json!(["first", "denied", "second", "allowed", "third"]),
            "{r}"
        );
    });
}
