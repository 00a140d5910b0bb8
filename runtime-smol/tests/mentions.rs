//! `@path` mentions end to end: the built `lembas link` on the model engine, a test instance
//! whose chat completions record what the model was given, and real files in a temp project.
//! A mentioned file reaches the model line-numbered, a range from its first line, a directory
//! as a listing; a symlink leading outside the roots, a path through `..` and a protected
//! `.git` are never read, and a notice says each stayed text.

use lembas::instance::{ChatReply, Event};

mod common;

use common::model::{linked_to, model_session, prompt, user_text, MODEL};

/// What the files outside the project hold: the model is never given it.
const SECRET: &str = "secret-outside-ZQX";

fn notices(seen: &[Event]) -> Vec<String> {
    seen.iter()
        .filter_map(|e| match e {
            Event::Client(e) => e
                .lembas_event()
                .and_then(|ev| serde_json::to_value(&ev.event).ok())
                .filter(|v| v["type"] == "notice")
                .and_then(|v| v["text"].as_str().map(str::to_string)),
            _ => None,
        })
        .collect()
}

#[test]
fn mentions_reach_the_model_and_nothing_outside_is_read() {
    smol::block_on(async {
        let (instance, home, _device) =
            linked_to(vec![ChatReply::text(&["seen"]), ChatReply::text(&["seen"])]).await;
        let proj = home.work.join("proj");
        std::fs::create_dir_all(proj.join("src")).unwrap();
        std::fs::create_dir_all(proj.join(".git")).unwrap();
        std::fs::write(proj.join("src/main.rs"), "fn main() {\n    hello();\n}\n").unwrap();
        std::fs::write(proj.join("my notes.md"), "remember\n").unwrap();
        std::fs::write(proj.join(".git/config"), SECRET).unwrap();
        std::fs::write(home.work.join("sibling.txt"), SECRET).unwrap();
        let outside = home.path().join("outside.txt");
        std::fs::write(&outside, SECRET).unwrap();
        std::os::unix::fs::symlink(&outside, proj.join("escape.txt")).unwrap();
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap();

        let (outcome, seen) = prompt(
            &instance,
            id,
            r"see @src/main.rs#2-3, @my\ notes.md and @src/",
            "t1",
        )
        .await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        let given = user_text(&instance, 0);
        assert!(
            given.starts_with(r"see @src/main.rs#2-3, @my\ notes.md and @src/"),
            "{given}"
        );
        assert!(
            given.contains("src/main.rs#2-3:\n   2|     hello();\n   3| }"),
            "{given}"
        );
        assert!(given.contains("my notes.md:\n   1| remember"), "{given}");
        assert!(given.contains("src/:\nmain.rs"), "{given}");
        assert!(notices(&seen).is_empty(), "{:?}", notices(&seen));

        let (outcome, seen) = prompt(
            &instance,
            id,
            "and @escape.txt @../sibling.txt @.git/config",
            "t2",
        )
        .await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        let given = user_text(&instance, 1);
        assert!(!given.contains(SECRET), "{given}");
        let said = notices(&seen);
        assert_eq!(said.len(), 3, "{said:?}");
        for (n, word) in ["@escape.txt", "@../sibling.txt", "@.git/config"]
            .iter()
            .enumerate()
        {
            assert!(
                said[n].starts_with(&format!("{word} stayed text")),
                "{said:?}"
            );
        }
        assert!(
            !said
                .iter()
                .any(|s| s.contains(SECRET) || s.contains("outside.txt")),
            "{said:?}"
        );
    });
}
