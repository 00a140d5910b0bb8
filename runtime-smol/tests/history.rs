//! `_lembas/session/history` of the built binary (`serve --stdio`, its history in a store of
//! its own on disk): a long history is answered within `sessions.history_bytes`, the newest
//! turns first, saying how many older ones it left out; `before` pages back to the first; a
//! single turn over the budget is answered alone, cut, saying so.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

#[path = "common/scripted.rs"]
mod scripted;

/// The default `sessions.history_bytes`.
const BUDGET: usize = 512 * 1024;

struct Editor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    _home: tempfile::TempDir,
}

impl Editor {
    fn start() -> Editor {
        let home = tempfile::tempdir().unwrap();
        scripted::use_scripted_engine(home.path());
        let mut child = Command::new(env!("CARGO_BIN_EXE_lembas"))
            .args(["serve", "--stdio", "--seed", "7"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_STATE_HOME", home.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Editor {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
            _home: home,
        }
    }

    /// Call `method` and read until its answer (what came before it is passed over).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{frame}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "stdout ended"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn result(&mut self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        assert!(v.get("error").is_none(), "{method} failed: {v}");
        v["result"].clone()
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prompt(e: &mut Editor, session: &str, text: &str) {
    let r = e.result(
        "session/prompt",
        json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
}

/// The turns' bytes as the answer carries them (the array's contents).
fn turns_bytes(r: &Value) -> usize {
    serde_json::to_string(&r["turns"]).unwrap().len() - 2
}

#[test]
fn a_long_history_is_answered_within_its_budget_saying_how_many_turns_it_left_out() {
    let mut e = Editor::start();
    e.result(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    let cwd = tempfile::tempdir().unwrap();
    let s = e.result(
        "session/new",
        json!({ "cwd": cwd.path().to_str().unwrap(), "mcpServers": [] }),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // 40 turns of 32 KiB answers: 80 history turns, about 1.3 MB, well past the budget.
    const TURNS: u64 = 40;
    for i in 0..TURNS {
        prompt(&mut e, &s, &format!("chunks 4 8192\nsay end {i}"));
    }
    let total = 2 * TURNS;
    let h = e.result("_lembas/session/history", json!({ "sessionId": s }));
    let turns = h["turns"].as_array().unwrap();
    assert!(turns_bytes(&h) <= BUDGET, "{} bytes", turns_bytes(&h));
    assert_eq!(h["truncated"], true);
    let dropped = h["dropped"].as_u64().unwrap();
    assert!(dropped > 0);
    assert_eq!(
        dropped + turns.len() as u64,
        total,
        "every turn answered or counted"
    );
    // The newest turn last, as the spec orders them; and the next older one would not fit.
    assert!(turns.last().unwrap()["text"]
        .as_str()
        .unwrap()
        .ends_with(&format!("end {}", TURNS - 1)));
    assert!(turns_bytes(&h) + 2 * 32 * 1024 > BUDGET, "cut early");

    // `before` pages back from where it stopped, down to the first turn.
    let mut seen = turns.len() as u64;
    let mut before = dropped;
    while before > 0 {
        let page = e.result(
            "_lembas/session/history",
            json!({ "sessionId": s, "before": before, "limit": 7 }),
        );
        let n = page["turns"].as_array().unwrap().len() as u64;
        assert!(n > 0 && n <= 7, "{n} turns");
        assert_eq!(page["dropped"].as_u64().unwrap(), before - n);
        assert!(turns_bytes(&page) <= BUDGET);
        seen += n;
        before -= n;
    }
    assert_eq!(seen, total);
    let first = e.result(
        "_lembas/session/history",
        json!({ "sessionId": s, "before": 2 }),
    );
    assert_eq!(first["turns"][0]["text"], "chunks 4 8192\nsay end 0");
    assert_eq!(
        (first["truncated"].clone(), first["dropped"].clone()),
        (json!(false), json!(0))
    );

    // One answer of 600 KB: answered alone, cut to the budget, saying so.
    prompt(&mut e, &s, "chunks 10 60000");
    let h = e.result("_lembas/session/history", json!({ "sessionId": s }));
    let turns = h["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert!(turns_bytes(&h) <= BUDGET);
    let text = turns[0]["text"].as_str().unwrap();
    assert!(
        text.contains("(sessions.history_bytes): it is cut"),
        "{}",
        &text[text.len() - 200..]
    );
    assert_eq!(h["dropped"].as_u64().unwrap(), total + 1);
    assert_eq!(h["truncated"], true);

    // A limit past the most it answers is refused, naming the bound.
    let refused = e.call(
        "_lembas/session/history",
        json!({ "sessionId": s, "limit": 1001 }),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(why.contains("sessions.max_history_turns"), "{why}");
}
