//! `lembas serve --stdio` behind a slow editor, over real pipes: the engine waits while the
//! editor does not read (the device's memory stays near `outbound.pause_bytes`), the editor is
//! never disconnected for it, every chunk then arrives whole and in order, and a process that
//! could not write its output does not exit 0.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "common/scripted.rs"]
mod scripted;

/// A turn far past every buffer on the way: ~100 MB of chunks.
const CHUNKS: usize = 25_000;
const CHUNK_BYTES: usize = 4096;
/// What the device may grow by while the editor stalls: the pause mark (1 MiB by default), the
/// writer's buffers and the allocator's slack; far under the turn.
const STALL_GROWTH_KIB: u64 = 48 * 1024;

struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
    home: tempfile::TempDir,
}

impl Editor {
    fn start() -> Editor {
        let home = tempfile::tempdir().unwrap();
        scripted::use_scripted_engine(home.path());
        let log = std::fs::File::create(home.path().join("stderr.log")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_lembas"))
            .args(["serve", "--stdio", "--seed", "7"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_STATE_HOME", home.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        Editor {
            stdin: child.stdin.take(),
            stdout: Some(BufReader::new(child.stdout.take().unwrap())),
            child,
            home,
        }
    }

    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line, which must be one whole JSON message.
    fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
        assert!(n > 0, "stdout ended; stderr:\n{}", self.stderr());
        assert!(line.ends_with('\n'), "a line cut short: {line:.200}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:.200}"))
    }

    fn until_response(&mut self, id: u64) -> Value {
        loop {
            let v = self.read();
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// A session in a fresh directory; its id.
    fn session(&mut self) -> String {
        self.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                          "params":{"protocolVersion":1,"clientCapabilities":{}}}));
        self.until_response(0);
        let cwd = self.home.path().to_str().unwrap().to_string();
        self.send(&json!({"jsonrpc":"2.0","id":1,"method":"session/new",
                          "params":{"cwd":cwd,"mcpServers":[]}}));
        self.until_response(1)["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn prompt(&mut self, id: u64, session: &str, text: &str) {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":"session/prompt",
                          "params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}}));
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.path().join("stderr.log")).unwrap_or_default()
    }

    fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A chunk's text, when `v` is an `agent_message_chunk`.
fn chunk(v: &Value) -> Option<&str> {
    (v["method"] == "session/update"
        && v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .then(|| v["params"]["update"]["content"]["text"].as_str())
        .flatten()
}

#[test]
fn a_stalled_editor_holds_the_turn_and_then_gets_every_chunk_in_order() {
    let mut e = Editor::start();
    let session = e.session();
    std::thread::sleep(Duration::from_millis(200));
    let idle = e.rss_kib();
    e.prompt(
        2,
        &session,
        &format!("chunks {CHUNKS} {CHUNK_BYTES}\nsay finished"),
    );
    let first = loop {
        let v = e.read();
        if let Some(text) = chunk(&v) {
            break text.to_string();
        }
    };
    assert!(first.starts_with("0000000000"), "{first:.20}");

    // The editor reads nothing for three seconds.
    let stalled = Instant::now();
    let mut peak = idle;
    while stalled.elapsed() < Duration::from_secs(3) {
        peak = peak.max(e.rss_kib());
        std::thread::sleep(Duration::from_millis(25));
    }
    eprintln!("idle {idle} KiB, peak while stalled {peak} KiB");
    assert_eq!(e.child.try_wait().unwrap(), None, "the process ended");
    assert!(
        peak <= idle + STALL_GROWTH_KIB,
        "the device grew from {idle} KiB to {peak} KiB while the editor stalled \
         (bound: {STALL_GROWTH_KIB} KiB above idle)"
    );

    // It reads again: every chunk comes, whole and in order, then the answer.
    let mut next = 1usize;
    let answer = loop {
        let v = e.read();
        if let Some(mut text) = chunk(&v) {
            // Behind the pause mark a burst of chunks comes merged: a frame holds several,
            // whole and in order.
            while !text.is_empty() {
                if next == CHUNKS {
                    assert_eq!(text, "finished");
                    next += 1;
                    break;
                }
                assert!(text.len() >= CHUNK_BYTES, "chunk {next} cut");
                let (one, rest) = text.split_at(CHUNK_BYTES);
                assert_eq!(
                    &one[..10],
                    format!("{next:010}"),
                    "chunk {next} out of order"
                );
                next += 1;
                text = rest;
            }
        } else if v["id"] == 2 {
            break v;
        }
    };
    assert_eq!(next, CHUNKS + 1, "chunks and the closing line received");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    drop(e.stdin.take());
    assert_eq!(e.wait(Duration::from_secs(10)), Some(0), "{}", e.stderr());
}

#[test]
fn an_editor_that_closes_stdout_makes_the_process_fail_not_exit_0() {
    let mut e = Editor::start();
    let session = e.session();
    e.prompt(2, &session, &format!("chunks {CHUNKS} {CHUNK_BYTES}"));
    while chunk(&e.read()).is_none() {}
    // The editor goes away from stdout while the turn streams; stdin stays open.
    drop(e.stdout.take());
    let code = e.wait(Duration::from_secs(10));
    assert_eq!(code, Some(1), "output was lost; stderr:\n{}", e.stderr());
    assert!(
        e.stderr().contains("could not write stdout"),
        "{}",
        e.stderr()
    );
}
