//! An editor on `lembas serve --stdio`: one JSON-RPC message a line on its pipes. It uses
//! nothing of the `dev` feature, so a test without it includes this file by path (beside
//! `scripted.rs`, as `mod scripted`).

// Each test file uses its own part of these.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::scripted;

/// An editor on `lembas serve --stdio`: one JSON-RPC message a line on its pipes.
pub struct Editor {
    pub child: Child,
    /// `None` once closed (a test may write raw bytes to it).
    pub stdin: Option<ChildStdin>,
    /// `None` once the editor stops reading.
    pub stdout: Option<BufReader<ChildStdout>>,
    /// The process's stderr, where it was sent to a file.
    log: Option<PathBuf>,
    /// The id of the next [`Editor::ask`].
    next_id: i64,
    /// A HOME made for this editor alone, removed with it.
    _home: Option<tempfile::TempDir>,
}

/// The built `lembas` with `args`, in the scratch HOME `home` choosing the scripted engine: no
/// part of the person's environment reaches it.
pub fn lembas_in(home: &Path, args: &[&str]) -> Command {
    scripted::use_scripted_engine(home);
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"));
    c
}

impl Editor {
    /// `serve --stdio` as `cmd` says (its stdin and stdout become the editor's pipes); its
    /// stderr goes to `log`, or nowhere.
    pub fn spawn(mut cmd: Command, log: Option<PathBuf>) -> Editor {
        let stderr = match &log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Editor {
            stdin: child.stdin.take(),
            stdout: Some(BufReader::new(child.stdout.take().unwrap())),
            child,
            log,
            next_id: 0,
            _home: None,
        }
    }

    /// `serve --stdio --seed 7` with `extra` arguments in a scratch HOME of its own.
    pub fn start(extra: &[&str]) -> Editor {
        let home = tempfile::tempdir().unwrap();
        let mut e = Editor::start_in(home.path(), extra);
        e._home = Some(home);
        e
    }

    /// [`Editor::start`] in a HOME the test keeps (a `config.yaml` in it, a second process);
    /// stderr to `stderr.log` there.
    pub fn start_in(home: &Path, extra: &[&str]) -> Editor {
        let mut args = vec!["serve", "--stdio", "--seed", "7"];
        args.extend_from_slice(extra);
        Editor::spawn(lembas_in(home, &args), Some(home.join("stderr.log")))
    }

    /// What the process wrote to stderr so far ("" where it went nowhere).
    pub fn stderr(&self) -> String {
        let log = self.log.as_ref();
        log.and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    pub fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line, which must be one whole JSON message.
    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
        assert!(n > 0, "serve --stdio ended; stderr:\n{}", self.stderr());
        assert!(line.ends_with('\n'), "a line cut short: {line:.200}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:.200}"))
    }

    /// Every message until the answer to `id`, that answer last.
    pub fn until_answer(&mut self, id: i64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = self.recv();
            let done = m["id"] == json!(id) && m.get("method").is_none();
            seen.push(m);
            if done {
                return seen;
            }
        }
    }

    /// Every message until the answer to `id`, that answer last.
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Vec<Value> {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.until_answer(id)
    }

    pub fn result(&mut self, id: i64, method: &str, params: Value) -> Value {
        let seen = self.call(id, method, params);
        let last = seen.last().unwrap();
        assert!(last.get("result").is_some(), "{method}: {last}");
        last["result"].clone()
    }

    /// The answer to `method`, called with the next of the editor's own ids (from 0): for a
    /// test that numbers none of its calls itself.
    pub fn ask(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.call(id, method, params).pop().unwrap()
    }

    /// [`Editor::ask`], which must succeed; its result.
    pub fn ask_result(&mut self, method: &str, params: Value) -> Value {
        let answer = self.ask(method, params);
        assert!(answer.get("result").is_some(), "{method}: {answer}");
        answer["result"].clone()
    }

    /// `initialize` as id 0; its result.
    pub fn initialize(&mut self) -> Value {
        self.result(
            0,
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        )
    }

    /// `session/new` in `cwd` as id 1; the session's id.
    pub fn new_session(&mut self, cwd: &Path) -> String {
        let made = self.result(1, "session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        made["sessionId"].as_str().unwrap().to_string()
    }

    /// Send `text` as a prompt of `session` with `id`, not waiting for it.
    pub fn send_prompt(&mut self, id: i64, session: &str, text: &str) {
        self.send(&prompt_frame(id, session, text));
    }

    /// `text` prompted in `session` as `id`; every message until its answer, that answer last.
    pub fn prompt(&mut self, id: i64, session: &str, text: &str) -> Vec<Value> {
        self.send_prompt(id, session, text);
        self.until_answer(id)
    }

    /// [`Editor::prompt`], which must end its turn (`end_turn`) with a chunk that `says` this.
    pub fn prompt_says(&mut self, id: i64, session: &str, text: &str, says: &str) -> Vec<Value> {
        let seen = self.prompt(id, session, text);
        assert_eq!(
            seen.last().unwrap()["result"]["stopReason"],
            "end_turn",
            "{seen:?}"
        );
        assert!(chunks(&seen).iter().any(|c| c.contains(says)), "{seen:?}");
        seen
    }

    /// The exit code once the process ended (-1 for a signal), `None` if not within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Close stdin; the exit code and how long the process took to end after it (at most 10 s).
    pub fn close_and_time(mut self) -> (i32, Duration) {
        drop(self.stdin.take());
        let start = Instant::now();
        let code = self
            .wait(Duration::from_secs(10))
            .expect("no exit after EOF");
        (code, start.elapsed())
    }

    /// Close stdin, read what is left; the exit code once it ends.
    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let mut rest = String::new();
        if let Some(stdout) = self.stdout.as_mut() {
            let _ = std::io::Read::read_to_string(stdout, &mut rest);
        }
        self.child.wait().unwrap().code()
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `session/prompt` of `text` in `session`, as `id`.
pub fn prompt_frame(id: i64, session: &str, text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": { "sessionId": session, "prompt": [{ "type": "text", "text": text }] } })
}

/// A chunk's text, when `v` is an `agent_message_chunk`.
pub fn chunk(v: &Value) -> Option<&str> {
    (v["method"] == "session/update"
        && v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .then(|| v["params"]["update"]["content"]["text"].as_str())
        .flatten()
}

/// The texts of the `agent_message_chunk`s among `frames`.
pub fn chunks(frames: &[Value]) -> Vec<String> {
    frames.iter().filter_map(chunk).map(String::from).collect()
}
