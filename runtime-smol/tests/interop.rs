//! Interop: the official ACP TypeScript SDK client (npm `@agentclientprotocol/sdk`, installed in
//! `tests/acp-interop/` by `.ci/run`) drives `lembas serve --stdio` through initialize,
//! session/new and a prompt with a permission round trip. Skipped, saying so, when `node` or the
//! installed package is missing, unless `LEMBAS_TEST_PROGRAMS_REQUIRED` is set (as `.ci/run` sets
//! it): then that fails the test.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod common;

use common::{programs, scripted};

#[test]
fn the_acp_typescript_sdk_client_drives_serve_stdio_with_a_permission_round_trip() {
    let Some(node) = programs::require("node", "apt-get install nodejs npm") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp-interop");
    if !dir
        .join("node_modules/@agentclientprotocol/sdk/package.json")
        .exists()
    {
        programs::missing(
            "the ACP SDK is not installed",
            &format!("npm ci in {}", dir.display()),
        );
        return;
    }
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = stdout.lines().last().unwrap_or_default();
    let r: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(r["protocolVersion"], 1, "{r}");
    assert_eq!(r["loadSession"], false, "{r}");
    assert!(r["sessionId"].as_str().unwrap().starts_with("ses_"), "{r}");
    assert_eq!(r["asks"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["asks"][0]["title"], "run the tests", "{r}");
    assert_eq!(
        r["said"],
        serde_json::json!(["before", "allowed", "after"]),
        "{r}"
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}
