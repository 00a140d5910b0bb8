//! `lembas serve --stdio`, the built binary, driven over real pipes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

#[path = "common/editor.rs"]
mod editor;
#[path = "common/scripted.rs"]
mod scripted;

use editor::{chunks, lembas_in, prompt_frame, Editor};

/// A session in `cwd`, prompted with a turn that runs until it is cancelled.
fn endless_turn(e: &mut Editor, cwd: &std::path::Path) {
    e.initialize();
    let session = e.new_session(cwd);
    e.send_prompt(2, &session, "say started\nsleep 600000\nsay never");
}

fn initialize() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize",
           "params":{"protocolVersion":1,"clientCapabilities":{}}})
}

fn new_session(id: i64, cwd: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}})
}

#[test]
fn initialize_new_session_and_a_streamed_prompt() {
    let cwd = tempfile::tempdir().unwrap();
    let mut e = Editor::start(&[]);
    let result = &e.initialize();
    // An editor's session surface: its sessions can be listed and loaded again.
    assert_eq!(result["agentCapabilities"]["loadSession"], json!(true));
    assert_eq!(
        result["agentCapabilities"]["sessionCapabilities"]["list"],
        json!({})
    );
    assert_eq!(result["_meta"]["lembas"]["limits"], Value::Null);
    let session = e.new_session(cwd.path());
    let frames = e.prompt(2, &session, "say hello\nsleep 30\nsay world");
    assert_eq!(chunks(&frames), vec!["hello", "world"]);
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
    // Plain ACP: no `_lembas` notification reaches an editor.
    assert!(frames
        .iter()
        .all(|f| !f["method"].as_str().unwrap_or("").starts_with("_lembas/")));
    let (code, _) = e.close_and_time();
    assert_eq!(code, 0);
}

/// Everything the process writes for `input`, fed in pieces of `piece` bytes.
fn transcript(input: &[u8], piece: usize) -> Vec<u8> {
    let home = tempfile::tempdir().unwrap();
    let mut child = lembas_in(home.path(), &["serve", "--stdio", "--seed", "7"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // stdin stays open until every answer is in: an EOF cancels the turns still running (the
    // store's writes are not done at once), which would make the transcript a race.
    let (done, close) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        for chunk in input.chunks(piece) {
            stdin.write_all(chunk).unwrap();
            stdin.flush().unwrap();
        }
        let _ = close.recv();
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    let mut answered = std::collections::BTreeSet::new();
    while !(answered.contains("3") && answered.contains("4") && answered.contains("null")) {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "ended early");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v.get("method").is_none() {
            answered.insert(v["id"].to_string());
        }
        out.extend_from_slice(line.as_bytes());
    }
    done.send(()).unwrap();
    stdout.read_to_end(&mut out).unwrap();
    writer.join().unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    out
}

/// A transcript's lines in order, their seqs put aside, and apart from them, sorted, its
/// `available_commands_update`s: each follows a read of the command files done off the
/// device's thread, so where it falls among the other frames, and so which seq it and the
/// frames after it take, is timing, not framing. The seqs (one session's) must rise in the
/// order the lines were written (not one by one: an editor hears no `_lembas/event`).
fn commands_apart(out: &[u8]) -> (Vec<String>, Vec<String>) {
    let mut seqs = Vec::new();
    let (mut commands, frames): (Vec<String>, Vec<String>) = String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let seq = &mut v["params"]["_meta"]["lembas"]["seq"];
            if let Some(n) = seq.as_u64() {
                seqs.push(n);
                *seq = json!("put aside");
            }
            v.to_string()
        })
        .partition(|l| l.contains(r#""sessionUpdate":"available_commands_update""#));
    assert!(seqs.len() > 3, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    commands.sort();
    (frames, commands)
}

#[test]
fn the_same_input_whole_or_byte_by_byte_gives_the_same_frames() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path().to_str().unwrap();
    // Learn the session id seed 7 makes, then script a whole conversation with it.
    let mut e = Editor::start(&[]);
    e.initialize();
    let session = e.new_session(Path::new(cwd));
    e.close_and_time();

    let mut input = Vec::new();
    for v in [
        initialize(),
        new_session(1, cwd),
        prompt_frame(2, &session, "say one\nthink two\ntool three"),
        prompt_frame(3, &session, "plain words"),
        json!({"jsonrpc":"2.0","id":4,"method":"session/nope"}),
    ] {
        input.extend_from_slice(format!("{v}\r\n").as_bytes());
    }
    input.extend_from_slice(b"\n{not json}\n");
    let whole = transcript(&input, input.len());
    let bytewise = transcript(&input, 1);
    let (whole_frames, whole_commands) = commands_apart(&whole);
    let (bytewise_frames, bytewise_commands) = commands_apart(&bytewise);
    assert_eq!(whole_frames, bytewise_frames);
    assert_eq!(whole_commands, bytewise_commands);
    assert!(!whole_commands.is_empty(), "no available_commands_update");
    let frames: Vec<Value> = whole
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert!(chunks(&frames).contains(&"echo: plain words".to_string()));
    assert!(frames
        .iter()
        .any(|f| f["id"] == 4 && f["error"]["code"] == -32601));
    assert!(frames
        .iter()
        .any(|f| f["id"].is_null() && f["error"]["code"] == -32700));
}

#[test]
fn a_line_over_the_limit_is_refused_naming_it_and_the_process_goes_on() {
    let mut e = Editor::start(&["--max-frame-bytes", "1024"]);
    {
        let stdin = e.stdin.as_mut().unwrap();
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"params\":\"{}\"}}\n",
            "a".repeat(3000)
        );
        stdin.write_all(long.as_bytes()).unwrap();
    }
    let err = e.recv();
    assert_eq!(err["id"], Value::Null, "{err}");
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("1024"),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["limit"], 1024);
    assert!(e.initialize().is_object());
    assert_eq!(e.close_and_time().0, 0);
}

#[test]
fn a_line_over_the_default_frame_limit_is_refused_too() {
    let limit = lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes;
    let mut e = Editor::start(&[]);
    {
        let stdin = e.stdin.as_mut().unwrap();
        let block = vec![b'x'; 1 << 20];
        let mut left = limit + 10;
        while left > 0 {
            let n = left.min(block.len());
            stdin.write_all(&block[..n]).unwrap();
            left -= n;
        }
        stdin.write_all(b"\n").unwrap();
    }
    let err = e.recv();
    assert_eq!(err["id"], Value::Null);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&limit.to_string()),
        "{err}"
    );
    assert!(e.initialize().is_object());
    assert_eq!(e.close_and_time().0, 0);
}

#[test]
fn eof_mid_turn_cancels_it_and_exits_cleanly() {
    let cwd = tempfile::tempdir().unwrap();
    let mut e = Editor::start(&[]);
    endless_turn(&mut e, cwd.path());
    // The first chunk shows the turn runs (the session's command set may come before it).
    loop {
        let v = e.recv();
        if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let (code, took) = e.close_and_time();
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// stdin ends right after a prompt, before its turn has started (it waits for its persist and
/// the session's command files): the turn is cancelled once it starts, and the process ends.
#[test]
fn eof_before_the_turn_starts_cancels_it_too_and_exits() {
    let cwd = tempfile::tempdir().unwrap();
    let mut e = Editor::start(&[]);
    endless_turn(&mut e, cwd.path());
    let (code, took) = e.close_and_time();
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// Where another editor's `serve --stdio` holds the store (and no service runs), sessions live
/// in memory only: past `sessions.max_live` none is set aside (it would be lost), so
/// `session/new` is refused naming the limit.
#[test]
fn past_max_live_session_new_is_refused_where_the_store_is_anothers() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path().to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/lembas");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.yaml"), "sessions:\n  max_live: 2\n").unwrap();
    // Another process's store (redb locks the file).
    let _held =
        lembas::store::RedbStore::open(&home.path().join("state/lembas/lembas.redb")).unwrap();
    let mut e = Editor::start_in(home.path(), &[]);
    let init = e.initialize();
    let caps = &init["_meta"]["lembas"]["capabilities"];
    assert!(
        !caps.as_array().unwrap().iter().any(|c| c == "sessions"),
        "{caps}"
    );
    for id in 1..=2 {
        e.send(&new_session(id, cwd));
        let answer = e.until_answer(id);
        assert!(
            answer.last().unwrap()["result"]["sessionId"].is_string(),
            "{answer:?}"
        );
    }
    e.send(&new_session(3, cwd));
    let answer = e.until_answer(3);
    let error = &answer.last().unwrap()["error"];
    assert_eq!(error["code"], json!(-32602), "{answer:?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the limit of 2 (sessions.max_live)")
            && message.contains("without a store"),
        "{message}"
    );
    let (code, _) = e.close_and_time();
    assert_eq!(code, 0);
}

/// Without a running service `serve --stdio` opens the store itself: a session one editor made
/// is there for the next one.
#[test]
fn without_a_service_the_editors_sessions_are_kept_in_the_store() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path().to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut e = Editor::start_in(home.path(), &[]);
    e.initialize();
    let session = e.new_session(Path::new(cwd));
    e.send(
        &json!({"jsonrpc":"2.0","id":2,"method":"_lembas/session/title",
        "params":{"sessionId": session, "title": "kept"}}),
    );
    e.until_answer(2);
    assert_eq!(e.close_and_time().0, 0);
    let mut e = Editor::start_in(home.path(), &[]);
    e.initialize();
    e.send(
        &json!({"jsonrpc":"2.0","id":1,"method":"_lembas/session/status",
        "params":{"sessionId": session}}),
    );
    let status = e.until_answer(1);
    let status = &status.last().unwrap()["result"];
    assert_eq!(status["exists"], true, "{status}");
    assert_eq!(status["title"], "kept", "{status}");
    assert_eq!(e.close_and_time().0, 0);
}

/// `serve --stdio` lists exactly what works on it: no `terminal` or `shell` (terminals open over
/// the instance link alone), even with `remote.terminal: true`, and `sessions` (without a
/// running service it keeps its sessions in the store, where the next process finds them).
#[test]
fn initialize_lists_what_works_on_stdio_and_nothing_else() {
    let home = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(home.path()).unwrap().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let w = work.display();
    std::fs::create_dir_all(home.path().join("config/lembas")).unwrap();
    std::fs::write(
        home.path().join("config/lembas/config.yaml"),
        format!("remote:\n  enabled: true\n  terminal: true\n  roots: [{w}]\ntrusted: [{w}]\n"),
    )
    .unwrap();
    let mut e = Editor::start_in(home.path(), &[]);
    let init = e.initialize();
    let caps: Vec<String> =
        serde_json::from_value(init["_meta"]["lembas"]["capabilities"].clone()).unwrap();
    for absent in ["terminal", "shell", "directories"] {
        assert!(!caps.iter().any(|c| c == absent), "{absent} in {caps:?}");
    }
    for present in ["status", "turns", "steer", "title", "sessions", "files"] {
        assert!(
            caps.iter().any(|c| c == present),
            "{present} not in {caps:?}"
        );
    }
    // What is not listed does not work here.
    e.send(&json!({"jsonrpc":"2.0","id":1,"method":"_lembas/terminal/open","params":{}}));
    let open = e.until_answer(1);
    assert_eq!(open.last().unwrap()["error"]["code"], -32602, "{open:?}");
    e.send(&json!({"jsonrpc":"2.0","id":3,"method":"_lembas/directories","params":{"path": w.to_string()}}));
    let listed = e.until_answer(3);
    let error = &listed.last().unwrap()["error"];
    assert_eq!(error["code"], -32602, "{listed:?}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("only over the instance link"),
        "{listed:?}"
    );
    // The `@` picker works over stdio too.
    std::fs::write(work.join("notes.md"), "x").unwrap();
    e.send(
        &json!({"jsonrpc":"2.0","id":4,"method":"_lembas/files/search",
        "params":{"cwd": w.to_string(), "query": "note"}}),
    );
    let found = e.until_answer(4);
    let result = &found.last().unwrap()["result"];
    assert_eq!(
        result["files"],
        json!([{"path": "notes.md", "kind": "file"}]),
        "{found:?}"
    );
    // That a session of this process is known to the next one in the same HOME:
    // `without_a_service_the_editors_sessions_are_kept_in_the_store`.
    let (code, _) = e.close_and_time();
    assert_eq!(code, 0);
}

#[test]
fn a_prompt_whose_attachment_cannot_be_written_is_refused_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    // A file where the attachments directory belongs: no write under it can succeed, even as
    // root (whom a chmod would not stop).
    let state = home.path().join("state/lembas");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("attachments"), b"in the way").unwrap();
    let mut e = Editor::start_in(home.path(), &[]);
    e.initialize();
    let session = e.new_session(cwd.path());
    e.send(&json!({"jsonrpc":"2.0","id":2,"method":"session/prompt",
        "params":{"sessionId":session,"prompt":[
            {"type":"text","text":"say hello"},
            {"type":"image","mimeType":"image/png","data":"aGk=","uri":"file:///tmp/shot.png"}]}}));
    let frames = e.until_answer(2);
    let error = &frames.last().unwrap()["error"];
    assert_eq!(error["code"], -32603, "{frames:?}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("`shot.png`"), "{message}");
    assert!(
        message.contains("exists") || message.contains("directory"),
        "{message}"
    );
    // The turn never started: nothing streamed.
    assert!(chunks(&frames).is_empty(), "{frames:?}");
    let (code, _) = e.close_and_time();
    assert_eq!(code, 0);
}

#[test]
fn a_frame_bound_over_the_held_bytes_is_refused_naming_both_not_raised_silently() {
    let home = tempfile::tempdir().unwrap();
    let out = lembas_in(
        home.path(),
        &["serve", "--stdio", "--max-frame-bytes", "200000000"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--max-frame-bytes 200000000")
            && stderr.contains("max_held_bytes (100663296)")
            && stderr.contains("frames.max_frame_bytes (200000000)"),
        "{stderr}"
    );
}
