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
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(stderr)))
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
