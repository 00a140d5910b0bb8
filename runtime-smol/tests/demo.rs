//! `lembas demo` (the README's run command) prints a readable transcript of a real loopback link.

use std::process::Command;

#[test]
fn the_demo_streams_asks_reattaches_deduplicates_delivers_an_offline_delete_and_runs_a_model() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lembas"))
        .arg("demo")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "_lembas/hello: protocol 3",
        "chunk \"Streaming,\"",
        "msg_1 answered: end_turn",
        "session/request_permission \"run the test suite\": Allow once",
        "client -> device  Allow once",
        "chunk \"allowed\"",
        "msg_p answered: end_turn",
        "the server drops its side of the socket",
        "status for msg_2: it is still running: following it",
        "chunk \"done, after the cut.\"",
        "msg_2 answered: end_turn",
        "did not run it again",
        "-- the device stops; the link is down",
        "-- the device starts again, on the model engine",
        "_meta.lembas_model test/chat-small",
        "POST /v1/chat/completions",
        "thought \"The person \"",
        "chunk \"the model.\"",
        "msg_m answered: end_turn",
        "session/set_mode manual",
        "(read)",
        "(edit)",
        "(execute)",
        "; diff of ",
        "greet the model",
        "msg_t answered: end_turn",
        "== done",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert_eq!(text.matches("msg_2 answered").count(), 1, "{text}");
    // The model's reasoning streams before its text.
    let thought = text.find("thought \"says hello.\"").expect("the reasoning");
    assert!(
        thought < text.find("chunk \"Hello \"").expect("the text"),
        "{text}"
    );
    assert!(!text.contains("this must not run"), "{text}");
    // In manual mode the edit and the command each asked, and each ran once allowed: the file
    // changed on the disk, and the command counted what the edit added.
    let acting = &text[text.find("== the model acts").expect("the tools part")..];
    assert_eq!(
        acting.matches("client -> device  Allow once").count(),
        2,
        "{acting}"
    );
    assert!(
        acting.contains(
            "notes.md on the disk now: \"# Notes\\n\\n- greet the world\\n- greet the model\\n\""
        ),
        "{acting}"
    );
    assert!(
        acting.contains("\"exit code 0 | 2\""),
        "the command's output: {acting}"
    );
    // The session the client made is the one deleted offline and announced on the next link.
    let session = text
        .lines()
        .find_map(|l| l.split("session/new in ").nth(1))
        .and_then(|l| l.rsplit(": ").next())
        .expect("a session/new line")
        .to_string();
    assert!(
        text.contains(&format!("`lembas sessions delete {session}`")),
        "{text}"
    );
    assert!(
        text.contains(&format!("_lembas/session/deleted {session}")),
        "{text}"
    );
}
