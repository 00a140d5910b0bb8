//! `_lembas/directories` on the Pair over the fake OS: the places, a directory's entries and
//! what each says (`accepted` exactly as `session/new` answers, its reason when not), the
//! bound on entries, and the refusals (outside the roots, through a symlink, on stdio, with
//! remote work off or no roots).

use lembas_core::device::{ConnKind, Effect};
use lembas_core::jsonrpc::{code, RpcError};
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";

/// A device over `ROOT` whose disk has `app`, `.git`, `zeta` and `untrusted/inner`, a symlink
/// `inside` to `app`, `out` leading to `/etc`, and a dangling `gone`; `app` is trusted,
/// `untrusted` is not (trust required).
fn disk(tweak: impl FnOnce(&mut lembas_core::config::DeviceConfig)) -> Pair {
    let mut p = Pair::default_with(&[ROOT], |d| {
        d.remote.trusted = vec![format!("{ROOT}/app"), format!("{ROOT}/zeta"), "/etc".into()];
        tweak(d);
    });
    for dir in ["app", ".git", "zeta", "untrusted", "untrusted/inner"] {
        p.os.dirs.insert(format!("{ROOT}/{dir}"));
    }
    p.os.dirs.insert("/etc/secret".into());
    p.os.links
        .insert(format!("{ROOT}/inside"), Some(format!("{ROOT}/app")));
    p.os.links
        .insert(format!("{ROOT}/out"), Some("/etc".into()));
    p.os.links.insert(format!("{ROOT}/gone"), None);
    p.start().unwrap();
    p
}

fn list(p: &mut Pair, path: &str) -> Result<Value, RpcError> {
    p.call("_lembas/directories", json!({ "path": path }))
}

fn refused(r: Result<Value, RpcError>) -> String {
    let e = r.expect_err("refused");
    assert_eq!(e.code, code::INVALID_PARAMS, "{e:?}");
    e.message
}

fn entry<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no entry `{name}` in {answer}"))
}

fn listings_asked(p: &Pair) -> usize {
    p.device_effects
        .iter()
        .filter(|e| matches!(e, Effect::ListDirectory { .. }))
        .count()
}

#[test]
fn the_places_are_the_roots_and_the_trusted_directories_inside_them() {
    let mut p = disk(|_| {});
    // A trusted directory that became a symlink leading outside since the settings were read.
    p.os.links
        .insert(format!("{ROOT}/zeta"), Some("/etc".into()));
    let answer = p.call("_lembas/directories", json!({})).unwrap();
    assert_eq!(answer["path"], "");
    let places: Vec<(&str, bool)> = answer["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap(),
                d["accepted"].as_bool().unwrap(),
            )
        })
        .collect();
    let app = format!("{ROOT}/app");
    let zeta = format!("{ROOT}/zeta");
    // The root itself is not trusted: listed, not accepted; `/etc` is outside the roots.
    assert_eq!(
        places,
        [(ROOT, false), (app.as_str(), true), (zeta.as_str(), false)]
    );
    let zeta_reason = answer["places"][2]["reason"].as_str().unwrap();
    assert!(zeta_reason.contains("leads outside"), "{zeta_reason}");
    assert!(!answer.to_string().contains("/etc"), "{answer}");
    let root = &answer["places"][0];
    assert_eq!(root["name"], "work");
    assert!(
        root["reason"]
            .as_str()
            .unwrap()
            .contains("not in a trusted project"),
        "{root}"
    );
    assert!(answer["places"][1].get("reason").is_none(), "{answer}");
    assert_eq!(listings_asked(&p), 0, "the places are resolved, not listed");
}

#[test]
fn a_directory_lists_its_subdirectories_sorted_hidden_ones_included() {
    let mut p = disk(|_| {});
    let answer = list(&mut p, ROOT).unwrap();
    let names: Vec<&str> = answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [".git", "app", "gone", "inside", "out", "untrusted", "zeta"]
    );
    assert_eq!(answer["path"], ROOT);
    assert_eq!(answer["name"], "work");
    assert_eq!(answer["accepted"], false, "the root is not trusted");
    assert!(answer["parent"].is_null(), "nothing above a root: {answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(entry(&answer, "app")["accepted"], true);
    assert_eq!(entry(&answer, "app")["path"], format!("{ROOT}/app"));
    assert_eq!(
        entry(&answer, "inside")["accepted"],
        true,
        "it leads to app"
    );
    let untrusted = entry(&answer, "untrusted");
    assert_eq!(untrusted["accepted"], false);
    assert!(
        untrusted["reason"]
            .as_str()
            .unwrap()
            .contains("remote.require_trust"),
        "{untrusted}"
    );
    let out = entry(&answer, "out");
    assert_eq!(out["accepted"], false);
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("leads outside the device's roots"),
        "{out}"
    );
    let gone = entry(&answer, "gone");
    assert_eq!(gone["accepted"], false);
    assert!(
        gone["reason"].as_str().unwrap().contains("cannot be used"),
        "{gone}"
    );
    // Nothing outside the roots is named anywhere in the answer.
    assert!(!answer.to_string().contains("/etc"), "{answer}");
}

#[test]
fn accepted_is_exactly_what_session_new_answers() {
    let mut p = disk(|_| {});
    let answer = list(&mut p, ROOT).unwrap();
    for e in answer["entries"].as_array().unwrap() {
        let path = e["path"].as_str().unwrap();
        let made = p.call("session/new", json!({ "cwd": path }));
        assert_eq!(
            made.is_ok(),
            e["accepted"].as_bool().unwrap(),
            "{path}: {made:?} vs {e}"
        );
        if let (Err(why), Some(reason)) = (&made, e["reason"].as_str()) {
            if reason.contains("trusted project") {
                assert_eq!(&why.message, reason, "{path}");
            }
        }
    }
    let p_untrust = disk(|d| d.remote.require_trust = false);
    let mut p = p_untrust;
    let answer = list(&mut p, ROOT).unwrap();
    assert_eq!(
        entry(&answer, "untrusted")["accepted"],
        true,
        "trust not required"
    );
    assert_eq!(answer["accepted"], true);
}

#[test]
fn a_subdirectory_names_its_parent() {
    let mut p = disk(|_| {});
    let answer = list(&mut p, &format!("{ROOT}/untrusted/")).unwrap();
    assert_eq!(answer["path"], format!("{ROOT}/untrusted"));
    assert_eq!(answer["parent"], ROOT);
    assert_eq!(
        answer["entries"][0]["path"],
        format!("{ROOT}/untrusted/inner")
    );
    // A symlink inside the roots is listed as where it leads.
    let answer = list(&mut p, &format!("{ROOT}/inside")).unwrap();
    assert_eq!(answer["path"], format!("{ROOT}/app"));
    assert_eq!(answer["accepted"], true);
}

#[test]
fn outside_the_roots_nothing_is_read_or_listed() {
    let mut p = disk(|_| {});
    for path in ["/etc", "/home/dev", &format!("{ROOT}/../other"), "/"] {
        let why = refused(list(&mut p, path));
        assert!(why.contains("outside the device's roots"), "{path}: {why}");
    }
    assert_eq!(
        listings_asked(&p),
        0,
        "nothing outside the roots is asked of the disk"
    );
    let why = refused(list(&mut p, "relative/dir"));
    assert!(why.contains("not an absolute path"), "{why}");
}

#[test]
fn a_symlink_leading_outside_is_refused_and_its_target_never_listed() {
    let mut p = disk(|_| {});
    let why = refused(list(&mut p, &format!("{ROOT}/out")));
    assert!(why.contains("leads outside the device's roots"), "{why}");
    assert!(!why.contains("/etc"), "the target is not named: {why}");
    let why = refused(list(&mut p, &format!("{ROOT}/out/secret")));
    assert!(!why.contains("secret\""), "{why}");
    let why = refused(list(&mut p, &format!("{ROOT}/gone")));
    assert!(why.contains("cannot be listed"), "{why}");
}

#[test]
fn entries_past_the_bound_are_cut_and_the_cut_is_said() {
    let mut p = disk(|d| d.remote.max_directory_entries = 2);
    let answer = list(&mut p, ROOT).unwrap();
    assert_eq!(answer["entries"].as_array().unwrap().len(), 2, "{answer}");
    assert_eq!(answer["entries"][0]["name"], ".git");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("remote.max_directory_entries") && error.contains("of 7"),
        "{error}"
    );
    let mut config = lembas_core::config::DeviceConfig::default();
    config.remote.max_directory_entries = 0;
    let e = config.validate().unwrap_err();
    assert!(e.0.contains("max_directory_entries"), "{e}");
}

#[test]
fn stdio_is_refused_it_is_not_listed_there() {
    let mut p = disk(|_| {});
    assert!(p.client.capabilities().iter().any(|c| c == "directories"));
    let conn = p.open_local(ConnKind::Stdio);
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": 1 } });
    let out = p.stdio(conn, init.to_string().as_bytes()).unwrap();
    let initialized: Value = serde_json::from_slice(out.last().expect("an answer")).unwrap();
    let caps = &initialized["result"]["_meta"]["lembas"]["capabilities"];
    assert!(
        !caps.as_array().unwrap().iter().any(|c| c == "directories"),
        "{caps}"
    );
    let frame = json!({ "jsonrpc": "2.0", "id": 1, "method": "_lembas/directories", "params": {} });
    let out = p.stdio(conn, frame.to_string().as_bytes()).unwrap();
    let answer: Value = serde_json::from_slice(out.last().expect("an answer")).unwrap();
    assert_eq!(answer["error"]["code"], code::INVALID_PARAMS, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only over the instance link"),
        "{answer}"
    );
}

#[test]
fn remote_work_off_or_no_roots_is_refused_as_session_new_is() {
    for (tweak, says) in [
        (
            (|d: &mut lembas_core::config::DeviceConfig| d.remote.enabled = false)
                as fn(&mut lembas_core::config::DeviceConfig),
            "remote work is off",
        ),
        (|d| d.remote.roots.clear(), "allows no folder yet"),
    ] {
        let mut p = disk(tweak);
        let places = refused(p.call("_lembas/directories", json!({})));
        assert!(places.contains(says), "{places}");
        let listing = refused(list(&mut p, ROOT));
        let made = refused(p.call("session/new", json!({ "cwd": ROOT })));
        assert_eq!(listing, made, "the same refusal as session/new");
        assert_eq!(listings_asked(&p), 0);
    }
}
