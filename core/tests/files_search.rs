//! `_lembas/files/search` on the Pair over the fake OS: the root (a session's directory, or a
//! `cwd` judged as `session/new` judges it), the bounds on `limit` and `query` (refused, never
//! clamped), the recent files (attached by a mention) first for an empty query, and nothing
//! searched outside the roots.

use lembas_core::confine::Protected;
use lembas_core::device::Effect;
use lembas_core::jsonrpc::code;
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";
const PROJECT: &str = "/home/dev/work/app";

fn disk() -> (Pair, String) {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    for path in [
        "app/src/main.rs",
        "app/src/util.rs",
        "app/README.md",
        "app/.git/config",
        "other/x.rs",
    ] {
        p.os.files.insert(format!("{ROOT}/{path}"), b"x\n".to_vec());
    }
    p.os.files.insert("/etc/passwd".into(), b"root".to_vec());
    p.os.links
        .insert(format!("{ROOT}/escape"), Some("/etc".into()));
    p.os.protected = vec![Protected::Name(".git".into())];
    p.start().unwrap();
    let s = p.new_session(PROJECT);
    (p, s)
}

fn paths(v: &Value) -> Vec<&str> {
    v["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files: {v}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect()
}

fn refused(p: &mut Pair, params: Value) -> String {
    let e = p.call("_lembas/files/search", params).expect_err("refused");
    assert_eq!(e.code, code::INVALID_PARAMS, "{e:?}");
    e.message
}

#[test]
fn a_session_is_searched_from_its_directory_fuzzily() {
    let (mut p, s) = disk();
    let v = p
        .call(
            "_lembas/files/search",
            json!({ "sessionId": s, "query": "main" }),
        )
        .unwrap();
    assert_eq!(v["root"], PROJECT);
    assert_eq!(paths(&v), ["src/main.rs"]);
    assert_eq!(v["files"][0]["kind"], "file");
    let v = p
        .call(
            "_lembas/files/search",
            json!({ "cwd": PROJECT, "query": "src", "limit": 1 }),
        )
        .unwrap();
    assert_eq!(paths(&v), ["src"], "a directory, kind dir");
    assert_eq!(v["files"][0]["kind"], "dir");
}

#[test]
fn limits_and_params_are_refused_not_clamped() {
    let (mut p, s) = disk();
    assert!(
        refused(&mut p, json!({ "sessionId": s, "query": "", "limit": 51 }))
            .contains("must be 1 to 50")
    );
    assert!(
        refused(&mut p, json!({ "sessionId": s, "query": "", "limit": 0 }))
            .contains("must be 1 to 50")
    );
    let long = "x".repeat(257);
    assert!(refused(&mut p, json!({ "sessionId": s, "query": long })).contains("at most 256"));
    assert!(refused(&mut p, json!({ "query": "" })).contains("exactly one"));
    assert!(refused(
        &mut p,
        json!({ "sessionId": s, "cwd": PROJECT, "query": "" })
    )
    .contains("exactly one"));
    assert!(
        refused(&mut p, json!({ "sessionId": "ses_nope", "query": "" })).contains("no session")
    );
}

#[test]
fn nothing_outside_the_roots_is_searched() {
    let (mut p, _) = disk();
    let before = searches(&p);
    assert!(refused(&mut p, json!({ "cwd": "/etc", "query": "" }))
        .contains("outside the device's roots"));
    assert!(
        refused(&mut p, json!({ "cwd": "relative", "query": "" })).contains("not an absolute path")
    );
    assert_eq!(searches(&p), before, "nothing asked of the shell");
    // Inside as written, outside once its symlink is followed: refused, the target unnamed.
    let e = refused(
        &mut p,
        json!({ "cwd": format!("{ROOT}/escape"), "query": "" }),
    );
    assert!(e.contains("outside") && !e.contains("/etc"), "{e}");
}

#[test]
fn an_empty_query_gives_the_files_used_lately_first() {
    let (mut p, s) = disk();
    p.prompt_text(&s, "t1", "@src/util.rs");
    p.settle().unwrap();
    let v = p
        .call(
            "_lembas/files/search",
            json!({ "sessionId": s, "query": "" }),
        )
        .unwrap();
    assert_eq!(paths(&v), ["src/util.rs"], "{v}");
    // Kept in the store: a restart remembers it.
    p.restart_device().unwrap();
    let v = p
        .call(
            "_lembas/files/search",
            json!({ "sessionId": s, "query": "" }),
        )
        .unwrap();
    assert_eq!(paths(&v), ["src/util.rs"], "{v}");
}

fn searches(p: &Pair) -> usize {
    p.device_effects
        .iter()
        .filter(|e| matches!(e, Effect::SearchFiles { .. }))
        .count()
}
