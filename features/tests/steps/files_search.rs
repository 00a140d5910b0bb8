//! The `@` picker (`_lembas/files/search`) over the fake OS: the calls and the paths found.

use cucumber::{then, when};
use serde_json::json;

use super::roots;
use super::sessions::{answer, call};
use crate::LinkWorld;

fn session(w: &LinkWorld) -> String {
    w.session.clone().expect("a step before opens a session")
}

#[when(regex = r#"^the client searches the session's files for "([^"]*)"$"#)]
fn search_session(w: &mut LinkWorld, query: String) {
    let params = json!({ "sessionId": session(w), "query": query });
    call(w, "_lembas/files/search", params);
}

#[when(regex = r#"^the client searches the session's files for "([^"]*)" with limit (\d+)$"#)]
fn search_session_limit(w: &mut LinkWorld, query: String, limit: u64) {
    let params = json!({ "sessionId": session(w), "query": query, "limit": limit });
    call(w, "_lembas/files/search", params);
}

#[when(regex = r#"^the client searches the files of "([^"]+)" for "([^"]*)"$"#)]
fn search_cwd(w: &mut LinkWorld, cwd: String, query: String) {
    call(
        w,
        "_lembas/files/search",
        json!({ "cwd": cwd, "query": query }),
    );
}

#[when(regex = r#"^the client searches the files of "([^"]+)" for "([^"]*)" with limit (\d+)$"#)]
fn search_cwd_limit(w: &mut LinkWorld, cwd: String, query: String, limit: u64) {
    let params = json!({ "cwd": cwd, "query": query, "limit": limit });
    call(w, "_lembas/files/search", params);
}

#[when(regex = r#"^the client searches with no session and no cwd for "([^"]*)"$"#)]
fn search_nothing(w: &mut LinkWorld, query: String) {
    call(w, "_lembas/files/search", json!({ "query": query }));
}

#[then(regex = r#"^the search found "([^"]*)"$"#)]
fn found(w: &mut LinkWorld, list: String) {
    let v = answer(w).unwrap_or_else(|e| panic!("the search failed: {}", e.message));
    let paths: Vec<String> = v["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files: {v}"))
        .iter()
        .map(|f| f["path"].as_str().expect("a path").to_string())
        .collect();
    assert_eq!(paths, roots(&list), "in {v}");
}
