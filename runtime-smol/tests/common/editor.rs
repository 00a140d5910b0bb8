//! An editor on `lembas serve --stdio` in a test's HOME (relayed to the hub when a service runs
//! there): one JSON-RPC message a line on its pipes, its log in the HOME.

use std::io::{BufRead, BufReader, Write};

use serde_json::{json, Value};

use super::Home;

/// An editor on `lembas serve --stdio`: one JSON-RPC message a line on its pipes.
pub struct Editor {
    pub child: std::process::Child,
    pub stdin: Option<std::process::ChildStdin>,
    pub stdout: BufReader<std::process::ChildStdout>,
}

impl Editor {
    pub fn start(home: &Home) -> Editor {
        use std::process::Stdio;
        let log = home.path().join(format!(
            "serve-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut child = home
            .cmd(&["serve", "--stdio", "-v"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        Editor {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    pub fn send(&mut self, v: &Value) {
        writeln!(self.stdin.as_mut().unwrap(), "{v}").unwrap();
    }

    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "serve --stdio ended"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Every message until the answer to `id`, that answer last.
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Vec<Value> {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
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

    pub fn result(&mut self, id: i64, method: &str, params: Value) -> Value {
        let seen = self.call(id, method, params);
        let last = seen.last().unwrap();
        assert!(last.get("result").is_some(), "{method}: {last}");
        last["result"].clone()
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
    pub fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let made = self.result(1, "session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        made["sessionId"].as_str().unwrap().to_string()
    }

    /// Close stdin; the exit code once it ends.
    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stdout, &mut rest);
        self.child.wait().unwrap().code()
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
