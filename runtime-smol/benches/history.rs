//! `cargo bench -p lembas --bench history`: a session's history costs `lembas serve --stdio`
//! no memory as it grows, and one `_lembas/session/history` of a long session is quick.
//!
//! - rss: one session, 1,000 turns of 1 MiB of output each (`chunks 16 65536`); the process's
//!   resident memory after the first turn and after the last (each after a short settle).
//!   Target: the last within 32 MiB of the first.
//! - answer: a store holding one session of 10,000 turns (a 200 B prompt and a 2 KiB answer
//!   each), opened by `serve --stdio`; `history` with the default budget (512 KiB), asked 20
//!   times, newest first and from the middle (`before`). Target: each answered in under 50 ms
//!   (the time from the request's write to its answer's last byte, pipes included).
//! - restart: a store holding one session of 1,000 turns of 1 MiB answers, opened by
//!   `serve --stdio`; its resident memory once initialized, against the same with a store of
//!   one such turn. Target: within 32 MiB (a restart reads only what the session's next
//!   turns' context takes, not its history).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use lembas_core::store::{history_record, Record, SessionRecord, Table};
use lembas_core::wire::session::HistoryTurn;
use serde_json::{json, Value};

mod common;
#[path = "../tests/common/scripted.rs"]
mod scripted;

use common::rss_kib;

const TURNS: usize = 1000;
const CHUNKS: usize = 16;
const CHUNK_BYTES: usize = 65_536;
const TARGET_GROWTH_KIB: u64 = 32 * 1024;

const STORED_TURNS: usize = 10_000;
const ASKS: usize = 20;
const TARGET_ANSWER: Duration = Duration::from_millis(50);

fn main() {
    // `cargo bench` passes `--bench`; a filter word that is not part of this bench's name
    // skips it.
    // Its parts by name too: `-- restart` runs that one alone.
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |part: &str| {
        only.as_ref()
            .is_none_or(|o| "history".contains(o.as_str()) || part.contains(o.as_str()))
    };
    if wanted("rss") {
        rss();
    }
    if wanted("answer") {
        answer();
    }
    if wanted("restart") {
        restart();
    }
}

const RESTART_TURNS: usize = 1000;
const RESTART_ANSWER_BYTES: usize = 1 << 20;

fn restart() {
    let rss_with = |turns: usize| {
        let home = home();
        let session = "ses_bench_restart";
        write_store_of(home.path(), session, turns, RESTART_ANSWER_BYTES, 50);
        let e = Editor::start(home.path());
        e.settled_rss_kib()
    };
    let one = rss_with(1);
    let many = rss_with(RESTART_TURNS);
    let growth = many.saturating_sub(one);
    println!(
        "history restart: serve --stdio opening a store of one session, turns of {} KiB answers",
        RESTART_ANSWER_BYTES / 1024
    );
    println!(
        "  RSS once initialized: 1 turn {one} KiB; {RESTART_TURNS} turns {many} KiB; \
         growth {growth} KiB (target <= {TARGET_GROWTH_KIB} KiB: {})",
        if growth <= TARGET_GROWTH_KIB {
            "met"
        } else {
            "NOT met"
        }
    );
}

fn rss() {
    let home = home();
    let mut e = Editor::start(home.path());
    let session = e.new_session(home.path());
    let mut after_first = 0;
    let start = Instant::now();
    for turn in 0..TURNS {
        let text = format!("chunks {CHUNKS} {CHUNK_BYTES}");
        let answer = e.call(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        );
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        if turn == 0 {
            after_first = e.settled_rss_kib();
        }
    }
    let took = start.elapsed();
    let after_last = e.settled_rss_kib();
    let growth = after_last.saturating_sub(after_first);
    println!(
        "history rss: serve --stdio, one session, {TURNS} turns of {} KiB output ({:.1} s)",
        CHUNKS * CHUNK_BYTES / 1024,
        took.as_secs_f64()
    );
    println!(
        "  RSS after turn 1: {after_first} KiB; after turn {TURNS}: {after_last} KiB; \
         growth {growth} KiB (target <= {TARGET_GROWTH_KIB} KiB: {})",
        if growth <= TARGET_GROWTH_KIB {
            "met"
        } else {
            "NOT met"
        }
    );
}

fn answer() {
    let home = home();
    let session = "ses_bench_history";
    write_store(home.path(), session);
    let mut e = Editor::start(home.path());
    // The newest page (the default budget), then pages from the middle and the start.
    let mut times = Vec::new();
    let mut shape = None;
    for i in 0..ASKS {
        let mut params = json!({ "sessionId": session });
        if i % 2 == 1 {
            params["before"] = json!((2 * STORED_TURNS) as u64 * (i as u64) / ASKS as u64 + 2);
        }
        let start = Instant::now();
        let v = e.call("_lembas/session/history", params);
        times.push(start.elapsed());
        let r = &v["result"];
        let n = r["turns"].as_array().map_or(0, Vec::len);
        assert!(n > 0, "{v}");
        if i == 0 {
            let bytes = serde_json::to_string(&r["turns"]).unwrap().len();
            shape = Some((n, bytes, r["dropped"].clone(), r["truncated"].clone()));
        }
    }
    times.sort();
    let (n, bytes, dropped, truncated) = shape.unwrap();
    let max = *times.last().unwrap();
    println!(
        "history answer: one session of {STORED_TURNS} turns ({} history entries) in the \
         store, serve --stdio, default budget",
        2 * STORED_TURNS
    );
    println!(
        "  newest page: {n} turns, {bytes} B, dropped {dropped}, truncated {truncated}; \
         {ASKS} asks: median {:.2} ms, max {:.2} ms (target < {} ms: {})",
        times[ASKS / 2].as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
        TARGET_ANSWER.as_millis(),
        if max < TARGET_ANSWER {
            "met"
        } else {
            "NOT met"
        }
    );
}

/// A home under the build's own temporary directory (on disk: the store grows to a GB).
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    scripted::use_scripted_engine(home.path());
    home
}

/// The store `serve --stdio` opens in `home`, holding `session` with its history.
fn write_store(home: &std::path::Path, session: &str) {
    write_store_of(home, session, STORED_TURNS, 2037, STORED_TURNS);
}

/// A store holding `session` with `turns` turns (a 200 B prompt, an answer of `answer_bytes`
/// and a few), written `per_commit` turns a transaction.
fn write_store_of(
    home: &std::path::Path,
    session: &str,
    turns: usize,
    answer_bytes: usize,
    per_commit: usize,
) {
    let store =
        lembas::store::RedbStore::open(&home.join("state/lembas/lembas.redb")).expect("a store");
    let record = SessionRecord {
        cwd: home.to_str().unwrap().into(),
        root: home.to_str().unwrap().into(),
        title: Some("a long one".into()),
        ..SessionRecord::testing(session)
    };
    let mut records = vec![Record::Put {
        table: Table::Sessions,
        key: session.into(),
        value: serde_json::to_string(&record).unwrap(),
    }];
    for t in 0..turns {
        let user = HistoryTurn::User {
            text: format!("{t:010} {}", "p".repeat(189)),
            turn_id: Some(format!("turn_{t}")),
            attachments: Vec::new(),
        };
        let assistant = HistoryTurn::Assistant {
            text: format!("{t:010} {}", "a".repeat(answer_bytes)),
            reasoning: String::new(),
            tools: Vec::new(),
        };
        records.push(history_record(session, 2 * t, &user));
        records.push(history_record(session, 2 * t + 1, &assistant));
        if (t + 1) % per_commit == 0 {
            store.commit(&records).expect("the store is written");
            records.clear();
        }
    }
    store.commit(&records).expect("the store is written");
}

struct Editor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Editor {
    fn start(home: &std::path::Path) -> Editor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lembas"))
            .args(["serve", "--stdio"])
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            .env("XDG_RUNTIME_DIR", home.join("run"))
            .env_remove("LEMBAS_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut e = Editor {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::with_capacity(256 * 1024, child.stdout.take().unwrap()),
            child,
            line: String::new(),
            next_id: 0,
        };
        e.call(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        );
        e
    }

    fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let v = self.call("session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        v["result"]["sessionId"].as_str().unwrap().to_string()
    }

    /// Call `method` and read until its answer; the chunks streamed meanwhile are passed over
    /// unparsed.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{frame}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).unwrap() > 0,
                "stdout ended"
            );
            if self.line.starts_with(r#"{"jsonrpc":"2.0","method""#) {
                continue;
            }
            let v: Value = serde_json::from_str(&self.line).expect("a whole JSON line");
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn settled_rss_kib(&self) -> u64 {
        std::thread::sleep(Duration::from_millis(300));
        rss_kib(self.child.id()).expect("the process's VmRSS")
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
