//! The folder chooser (`_lembas/directories`) over the fake OS: a disk of directories and
//! symlinks, the calls, and what the answer's places and entries say.

use cucumber::{given, then, when};
use serde_json::{json, Value};

use super::roots;
use super::sessions::{answer, call};
use crate::LinkWorld;

#[given(regex = r#"^the device's disk has the directories "([^"]*)"$"#)]
fn disk_has(w: &mut LinkWorld, list: String) {
    let os = &mut w.pair().os;
    os.dirs.extend(roots(&list));
}

#[given(regex = r#"^"([^"]+)" is a symlink to "([^"]+)"$"#)]
fn symlink(w: &mut LinkWorld, from: String, to: String) {
    w.pair().os.links.insert(from, Some(to));
}

#[given(regex = r"^the device lists at most (\d+) entries of a directory$")]
fn at_most(w: &mut LinkWorld, max: usize) {
    let pair = w.pair();
    let mut remote = pair.device.config().remote.clone();
    remote.max_directory_entries = max;
    assert_eq!(pair.device.reconfigure(remote, pair.now), Ok(true));
    pair.settle().expect("the link settles");
}

#[when("the client asks for the directories")]
fn asks_places(w: &mut LinkWorld) {
    call(w, "_lembas/directories", json!({}));
}

#[when(regex = r#"^the client asks for the directory "([^"]*)"$"#)]
fn asks_directory(w: &mut LinkWorld, path: String) {
    call(w, "_lembas/directories", json!({ "path": path }));
}

/// The answer, which must be a result.
fn result(w: &LinkWorld) -> Value {
    answer(w).unwrap_or_else(|e| panic!("the call failed: {} {}", e.code, e.message))
}

/// The paths (places) or names (entries) listed under `member`.
fn listed(v: &Value, member: &str, key: &str) -> Vec<String> {
    v[member]
        .as_array()
        .unwrap_or_else(|| panic!("no `{member}` in {v}"))
        .iter()
        .map(|d| d[key].as_str().expect("a string").to_string())
        .collect()
}

#[then(regex = r#"^the answer lists the places "([^"]*)"$"#)]
fn lists_places(w: &mut LinkWorld, list: String) {
    assert_eq!(listed(&result(w), "places", "path"), roots(&list));
}

#[then(regex = r#"^the answer lists the entries "([^"]*)"$"#)]
fn lists_entries(w: &mut LinkWorld, list: String) {
    assert_eq!(listed(&result(w), "entries", "name"), roots(&list));
}

/// The Dir at `path` among the answer's places or entries.
fn dir(w: &LinkWorld, path: &str) -> Value {
    let v = result(w);
    ["places", "entries"]
        .iter()
        .filter_map(|m| v[*m].as_array())
        .flatten()
        .find(|d| d["path"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("`{path}` is not listed in {v}"))
}

#[then(regex = r#"^the answer's "([^"]+)" is accepted$"#)]
fn accepted(w: &mut LinkWorld, path: String) {
    let d = dir(w, &path);
    assert_eq!(d["accepted"], true, "{d}");
    assert!(
        d.get("reason").is_none(),
        "an accepted one has no reason: {d}"
    );
}

#[then(regex = r#"^the answer's "([^"]+)" is not accepted, because "([^"]+)"$"#)]
fn not_accepted(w: &mut LinkWorld, path: String, words: String) {
    let d = dir(w, &path);
    assert_eq!(d["accepted"], false, "{d}");
    let reason = d["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("no reason: {d}"));
    assert!(
        reason.contains(&words),
        "the reason does not say `{words}`: {reason}"
    );
}

#[then(regex = r#"^nothing in the answer names "([^"]+)"$"#)]
fn names_nothing(w: &mut LinkWorld, words: String) {
    let said = match answer(w) {
        Ok(v) => v.to_string(),
        Err(e) => e.message,
    };
    assert!(!said.contains(&words), "the answer names `{words}`: {said}");
}
