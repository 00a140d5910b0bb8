//! `_lembas/directories` end to end: `lembas link` over a real temp tree, called through the
//! test instance's client. A symlink inside the root that leads outside is never accepted,
//! and what it leads to is never listed nor named.

mod common;

use common::{call, linked, Home};
use serde_json::{json, Value};

/// What the directory outside the root holds: no answer may name it.
const OUTSIDE_NAME: &str = "secret-outside-ZQX";

fn names(v: &Value) -> Vec<&str> {
    v["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {v}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

fn entry<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` in {v}"))
}

#[test]
fn the_chooser_lists_real_directories_and_never_what_a_symlink_leads_outside_to() {
    smol::block_on(async {
        let home = Home::new();
        let work = home.work.clone();
        let outside = home.path().join("outside");
        std::fs::create_dir_all(outside.join(OUTSIDE_NAME)).unwrap();
        for dir in [".hidden", "é 日本", "untrusted"] {
            std::fs::create_dir_all(work.join(dir)).unwrap();
        }
        std::fs::write(work.join("file.txt"), "not a directory").unwrap();
        std::os::unix::fs::symlink(&outside, work.join("escape")).unwrap();
        std::os::unix::fs::symlink("proj", work.join("inner")).unwrap();
        std::os::unix::fs::symlink(work.join("nowhere"), work.join("dangling")).unwrap();
        let (instance, _home, _device, caps) = linked(home).await;
        assert!(caps.iter().any(|c| c == "directories"), "{caps:?}");

        let places = call(&instance, "_lembas/directories", json!({}))
            .await
            .unwrap();
        assert_eq!(places["path"], "");
        assert_eq!(places["places"][0]["path"], work.to_str().unwrap());
        assert_eq!(places["places"][0]["accepted"], true, "{places}");

        let listed = call(&instance, "_lembas/directories", json!({ "path": work }))
            .await
            .unwrap();
        // Sorted, hidden ones included, files and dangling links left out.
        assert_eq!(
            names(&listed),
            [".hidden", "escape", "inner", "proj", "untrusted", "é 日本"]
        );
        assert!(listed["parent"].is_null(), "{listed}");
        assert_eq!(entry(&listed, "proj")["accepted"], true);
        assert_eq!(
            entry(&listed, "inner")["accepted"],
            true,
            "it leads to proj"
        );
        let escape = entry(&listed, "escape");
        assert_eq!(escape["accepted"], false, "{escape}");
        assert!(
            escape["reason"].as_str().unwrap().contains("leads outside"),
            "{escape}"
        );
        let text = listed.to_string();
        assert!(
            !text.contains("outside/") && !text.contains(OUTSIDE_NAME),
            "{text}"
        );

        // Its target's entries are never listed.
        let e = call(
            &instance,
            "_lembas/directories",
            json!({ "path": work.join("escape") }),
        )
        .await
        .unwrap_err();
        assert!(
            e.starts_with("-32602") && e.contains("leads outside"),
            "{e}"
        );
        assert!(!e.contains(OUTSIDE_NAME), "{e}");
        let e = call(
            &instance,
            "_lembas/directories",
            json!({ "path": work.join("escape").join(OUTSIDE_NAME) }),
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("-32602"), "{e}");
        let e = call(&instance, "_lembas/directories", json!({ "path": outside }))
            .await
            .unwrap_err();
        assert!(e.contains("outside the device's roots"), "{e}");

        // A subdirectory, and the same answer session/new gives.
        let sub = call(
            &instance,
            "_lembas/directories",
            json!({ "path": work.join("é 日本") }),
        )
        .await
        .unwrap();
        assert_eq!(sub["parent"], work.to_str().unwrap());
        assert_eq!(sub["name"], "é 日本");
        assert_eq!(
            sub["accepted"], true,
            "work is trusted, and so what is in it"
        );
        let made = call(
            &instance,
            "session/new",
            json!({ "cwd": work.join("escape"), "mcpServers": [] }),
        )
        .await;
        assert!(made.is_err(), "session/new refuses it too: {made:?}");
    });
}
