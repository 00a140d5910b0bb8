//! `_lembas/files/search` end to end: `lembas link` over a real temp tree, called through the
//! test instance's client. Gitignored, hidden and protected entries are left out, a symlink
//! leading outside is never listed nor followed, a new file is found once the index is
//! checked again, and the bounds are refused.

mod common;

use common::{call, linked, new_session, Home};
use serde_json::{json, Value};

/// What the directory outside the root holds: no answer may name it.
const OUTSIDE: &str = "secret-outside-ZQX";

fn paths(v: &Value) -> Vec<&str> {
    v["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files: {v}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect()
}

#[test]
fn the_picker_searches_real_files_and_never_outside() {
    smol::block_on(async {
        let home = Home::new();
        let proj = home.work.join("proj");
        let outside = home.path().join("outside");
        std::fs::create_dir_all(outside.join(format!("{OUTSIDE}-dir"))).unwrap();
        std::fs::write(outside.join(format!("{OUTSIDE}.rs")), "x").unwrap();
        for dir in ["src/util", "target", ".git", "é 日本"] {
            std::fs::create_dir_all(proj.join(dir)).unwrap();
        }
        for file in [
            "src/main.rs",
            "src/util/mod.rs",
            "target/main.o",
            ".git/main",
            "é 日本/main.md",
        ] {
            std::fs::write(proj.join(file), "x").unwrap();
        }
        std::fs::write(proj.join(".gitignore"), "target/\n").unwrap();
        std::os::unix::fs::symlink(&outside, proj.join("escape")).unwrap();
        let (instance, _home, _device, caps) = linked(home).await;
        assert!(caps.iter().any(|c| c == "files"), "{caps:?}");
        let session = new_session(&instance, &proj).await;

        let found = call(
            &instance,
            "_lembas/files/search",
            json!({ "sessionId": session, "query": "main" }),
        )
        .await
        .unwrap();
        assert_eq!(found["root"], proj.to_str().unwrap());
        let mut got = paths(&found);
        got.sort();
        assert_eq!(got, ["src/main.rs", "é 日本/main.md"], "{found}");
        let text = found.to_string();
        assert!(
            !text.contains(OUTSIDE) && !text.contains("escape"),
            "{text}"
        );

        let all = call(
            &instance,
            "_lembas/files/search",
            json!({ "cwd": proj, "query": "", "limit": 50 }),
        )
        .await
        .unwrap();
        for left_out in ["target", ".git", "escape", ".gitignore"] {
            assert!(
                !paths(&all).iter().any(|p| p.starts_with(left_out)),
                "{all}"
            );
        }

        let e = call(
            &instance,
            "_lembas/files/search",
            json!({ "sessionId": session, "query": "", "limit": 51 }),
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("-32602") && e.contains("1 to 50"), "{e}");
        let e = call(
            &instance,
            "_lembas/files/search",
            json!({ "cwd": proj.join("escape"), "query": "" }),
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("-32602") && !e.contains(OUTSIDE), "{e}");

        // A file made now is found once the index looks at its directories again.
        std::fs::write(proj.join("src/fresh.rs"), "x").unwrap();
        std::thread::sleep(lembas::file_index::RECHECK);
        let found = call(
            &instance,
            "_lembas/files/search",
            json!({ "sessionId": session, "query": "fresh" }),
        )
        .await
        .unwrap();
        assert_eq!(paths(&found), ["src/fresh.rs"], "{found}");
    });
}
