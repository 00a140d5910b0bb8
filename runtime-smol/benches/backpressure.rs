//! `cargo bench -p lembas --bench backpressure`: the resident memory of `lembas serve --stdio`
//! while its editor stalls for 5 s during an 800 MB turn (`chunks 100000 8192`), then reads
//! everything; against the same turn read at full speed by a fresh process, in the same run.
//! Targets: every chunk arrives, in order; peak RSS at most 64 MiB above idle.
//!
//! Printed for each: idle RSS, peak RSS while stalled and over the whole turn, the chunks
//! received, and the time (the stalled run's time less its 5 s, as a ratio to the baseline's).
//!
//! Then chunk coalescing: a turn of 100,000 chunks of 64 B read by an editor that reads at
//! most 4 MB/s (slower than the device writes), against the same turn read at full speed: the
//! frames and bytes each received, and the chunks a second. Behind its pause mark the queue
//! merges a session's adjacent chunks, so the slow reader gets fewer, larger frames.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;
#[path = "../tests/common/scripted.rs"]
mod scripted;

use common::rss_kib;

const CHUNKS: usize = 100_000;
const CHUNK_BYTES: usize = 8192;
const STALL: Duration = Duration::from_secs(5);
const TARGET_GROWTH_KIB: u64 = 64 * 1024;
const SMALL_CHUNKS: usize = 100_000;
const SMALL_CHUNK_BYTES: usize = 64;
/// The slow editor's pace: well under what the device writes a second.
const SLOW_BYTES_PER_S: f64 = 4e6;

fn main() {
    // `cargo bench` passes `--bench`; a filter word (`cargo bench -p lembas -- stdio`) that is
    // not part of this bench's name skips it.
    // Its two parts by name: `-- coalescing` runs the second alone.
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |part: &str| only.as_ref().is_none_or(|o| part.contains(o.as_str()));
    if wanted("backpressure") {
        memory();
    }
    if wanted("coalescing") {
        coalescing();
    }
}

/// RSS while the editor stalls, against a full-speed read.
fn memory() {
    let fast = run(None);
    let slow = run(Some(STALL));
    let mb = (CHUNKS * CHUNK_BYTES) as f64 / 1e6;
    println!("backpressure: a {mb:.0} MB turn ({CHUNKS} chunks of {CHUNK_BYTES} B) on stdio");
    for (name, r) in [
        ("read at full speed", &fast),
        ("stalled 5 s, then read", &slow),
    ] {
        println!(
            "  {name:<24} idle {:>7} KiB, peak while stalled {:>7} KiB, peak {:>7} KiB \
             (+{} KiB), {}/{CHUNKS} chunks in order, {:.2} s",
            r.idle_kib,
            r.stalled_peak_kib
                .map_or("-".to_string(), |k| k.to_string()),
            r.peak_kib,
            r.peak_kib.saturating_sub(r.idle_kib),
            r.chunks,
            r.took.as_secs_f64()
        );
    }
    let slow_work = slow.took.saturating_sub(STALL).as_secs_f64();
    println!(
        "  time less the stall / full speed: {:.2}; the stalled run's peak above idle: {} KiB \
         (target <= {TARGET_GROWTH_KIB} KiB: {}), every chunk in order: {}",
        slow_work / fast.took.as_secs_f64(),
        slow.peak_kib.saturating_sub(slow.idle_kib),
        if slow.peak_kib.saturating_sub(slow.idle_kib) <= TARGET_GROWTH_KIB {
            "met"
        } else {
            "NOT met"
        },
        if slow.chunks == CHUNKS && fast.chunks == CHUNKS {
            "yes"
        } else {
            "NO"
        }
    );
}

/// Frames and pace of a slow editor, against a full-speed one.
fn coalescing() {
    let fast = stream_small(None);
    let slow = stream_small(Some(SLOW_BYTES_PER_S));
    println!("coalescing: {SMALL_CHUNKS} chunks of {SMALL_CHUNK_BYTES} B on stdio, one session");
    for (name, r) in [
        ("read at full speed".to_string(), &fast),
        (format!("read at {:.0} MB/s", SLOW_BYTES_PER_S / 1e6), &slow),
    ] {
        println!(
            "  {name:<24} {:>7} frames ({:.1} chunks a frame), {:>6.1} MB, {:>8.0} chunks/s, \
             {}/{SMALL_CHUNKS} chunks in order",
            r.frames,
            r.chunks as f64 / r.frames.max(1) as f64,
            r.bytes as f64 / 1e6,
            r.chunks as f64 / r.took.as_secs_f64(),
            r.chunks,
        );
    }
}

struct Streamed {
    frames: usize,
    bytes: usize,
    chunks: usize,
    took: Duration,
}

/// One turn of small chunks, read as fast as possible or at most `pace` bytes a second.
fn stream_small(pace: Option<f64>) -> Streamed {
    let (mut e, session, _home) = start();
    let start = Instant::now();
    e.send(
        json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{
        "sessionId": session,
        "prompt":[{"type":"text",
                   "text":format!("chunks {SMALL_CHUNKS} {SMALL_CHUNK_BYTES}")}]}}),
    );
    let (mut frames, mut bytes, mut chunks) = (0, 0, 0);
    loop {
        let v = e.read();
        bytes += e.line.len();
        if let Some(pace) = pace {
            let due = Duration::from_secs_f64(bytes as f64 / pace);
            if let Some(ahead) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
        let numbers = chunk_numbers(&v, SMALL_CHUNK_BYTES);
        if !numbers.is_empty() {
            frames += 1;
        }
        for n in numbers {
            if n == chunks {
                chunks += 1;
            }
        }
        if v["id"] == 2 && v.get("method").is_none() {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            break;
        }
    }
    let took = start.elapsed();
    drop(e.stdin);
    let _ = e.child.wait();
    Streamed {
        frames,
        bytes,
        chunks,
        took,
    }
}

struct Figures {
    idle_kib: u64,
    stalled_peak_kib: Option<u64>,
    peak_kib: u64,
    /// Chunks received whole and in order.
    chunks: usize,
    /// From the prompt to its answer.
    took: Duration,
}

/// Samples a process's RSS every few milliseconds, keeping the highest.
struct Sampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (peak, stop) = (peak.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kib) = rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Sampler { peak, stop, thread }
    }

    fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let peak = self.peak();
        self.thread.join().unwrap();
        peak.max(self.peak.load(Ordering::Relaxed))
    }
}

struct Editor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Editor {
    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        self.line.clear();
        assert!(
            self.stdout.read_line(&mut self.line).unwrap() > 0,
            "stdout ended"
        );
        serde_json::from_str(&self.line).expect("a whole JSON line")
    }

    fn until(&mut self, id: u64) -> Value {
        loop {
            let v = self.read();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }
}

/// The numbers of the chunks of `bytes` each an `agent_message_chunk` frame carries (several
/// once merged behind the pause mark), or none for another frame.
fn chunk_numbers(v: &Value, bytes: usize) -> Vec<usize> {
    if v["params"]["update"]["sessionUpdate"] != "agent_message_chunk" {
        return Vec::new();
    }
    let text = v["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap_or("");
    assert_eq!(text.len() % bytes, 0, "a chunk of another size");
    text.as_bytes()
        .chunks(bytes)
        .map(|c| std::str::from_utf8(&c[..10]).unwrap().parse().unwrap())
        .collect()
}

/// `lembas serve --stdio` with an editor that opened a session (and its home, kept while it
/// runs).
fn start() -> (Editor, String, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    scripted::use_scripted_engine(home.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_lembas"))
        .args(["serve", "--stdio"])
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
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
    };
    e.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                  "params":{"protocolVersion":1,"clientCapabilities":{}}}));
    e.until(0);
    e.send(json!({"jsonrpc":"2.0","id":1,"method":"session/new",
                  "params":{"cwd": home.path(), "mcpServers": []}}));
    let session = e.until(1)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    (e, session, home)
}

fn run(stall: Option<Duration>) -> Figures {
    let (mut e, session, _home) = start();
    std::thread::sleep(Duration::from_millis(300));
    let pid = e.child.id();
    let idle_kib = rss_kib(pid).unwrap();
    let sampler = Sampler::start(pid);

    let start = Instant::now();
    e.send(
        json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{
        "sessionId": session,
        "prompt":[{"type":"text","text":format!("chunks {CHUNKS} {CHUNK_BYTES}")}]}}),
    );
    let mut chunks = 0usize;
    let mut stalled_peak_kib = None;
    loop {
        let v = e.read();
        let numbers = chunk_numbers(&v, CHUNK_BYTES);
        for &n in &numbers {
            if n == chunks {
                chunks += 1;
            }
            if n == 0 {
                if let Some(stall) = stall {
                    std::thread::sleep(stall);
                    stalled_peak_kib = Some(sampler.peak());
                }
            }
        }
        if numbers.is_empty() && v["id"] == 2 {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            break;
        }
    }
    let took = start.elapsed();
    let peak_kib = sampler.finish();
    drop(e.stdin);
    let _ = e.child.wait();
    Figures {
        idle_kib,
        stalled_peak_kib,
        peak_kib,
        chunks,
        took,
    }
}
