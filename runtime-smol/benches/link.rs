//! `cargo bench -p lembas`: issue 5's figures, each measured side by side with its baseline in
//! one run, printed as ratios.
//!
//! - stdio: `agent_message_chunk` updates of 64 B from `lembas serve --stdio` (a scripted
//!   `chunks` turn) against writing the same lines to the same kind of pipe raw (this bench
//!   re-executed as a plain writer). Target: at least 0.5 of raw.
//! - turns/s with every ledger change durable in redb: the driver's group commit (one
//!   transaction per pump of the device) against one commit per `Effect::Persist`. Target: at
//!   least 1,000 turns/s.
//! - resident memory of an idle `lembas link` to the in-process test instance. Target: at most
//!   20 MB.
//! - websocket: the same 64 B chunk stream from the device's driver over its link (a loopback
//!   WebSocket to a minimal receiver in this process) against a raw async-tungstenite client
//!   sending the identical frames, one `send` each, to the same receiver. Target: at least 0.7.
//!   Also printed: the ratio to a raw client that feeds every frame and flushes once (the
//!   fewest socket writes; the device's writer flushes whenever its queue runs dry).
//! - interleaved (issue 16): 100 sessions streaming 1,000 chunks of 64 B each at once, against
//!   one session streaming 100,000, to the same reader: over `serve --stdio` (with its redb
//!   store, and in memory with the store held elsewhere) and over the link (the driver, its
//!   store in memory). Chunks/s (a reader behind gets a session's run of chunks merged into
//!   one frame: counted by their text) with the update frames that carried them, and the
//!   ratio: the median of 7 trials alternating the two sides, with its range; target: at
//!   least 0.8 of the single session's rate. With the store, each of the 100 turns also writes its event log (up to
//!   `sessions.event_log_bytes`) and its history when it ends, where the one turn writes once.
//! - catch-up (issue 16): a turn streaming 1,000 chunks/s, the link cut (the instance refusing
//!   the device's dials) for 10 s: from the new link's `initialize` answer to the client
//!   having handed out every chunk made meanwhile, fetched from the session's event log (made
//!   big enough here to hold 10 s of it). Target: under 100 ms.
//! - sessions (issue 12): resident memory after 100,000 `session/new`, each left idle, against
//!   the same process before the first (the baseline, same run): `lembas link` (redb store:
//!   every one made, at most `sessions.max_live` = 1,000 kept in memory, the rest set aside) and
//!   `lembas serve --stdio` (no store: past 1,000 refused). Target: growth within the bound,
//!   1,000 sessions in memory plus the ids of those set aside — at most 32 MB over the baseline
//!   (before: 576 MiB on stdio).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lembas::store::RedbStore;
use lembas_core::device::{ConnKind, Device, Effect, Output};
use lembas_core::host::{Host, ShellOutput};
use lembas_core::jsonrpc::FrameLimits;
use lembas_core::scripted::ScriptedEngine;
use lembas_core::{DeviceConfig, Time};
use serde_json::{json, Value};

use common::{rss_of, threads_of};

mod common;
#[path = "../tests/common/scripted.rs"]
mod scripted;

const CHUNKS: usize = 20_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("raw-writer") {
        return raw_writer(&args[2]);
    }
    // `cargo bench` passes `--bench`; a filter word picks one figure.
    let only = args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    if want("stdio") {
        stdio();
    }
    if want("turns") {
        turns();
    }
    if want("rss") {
        rss();
    }
    if want("websocket") {
        websocket();
    }
    if want("sessions") {
        sessions();
    }
    if want("interleaved-stdio") {
        interleaved("serve --stdio (store)", stdio_streams);
        interleaved("serve --stdio (memory)", stdio_streams_in_memory);
    }
    if want("interleaved-link") {
        interleaved("link", link_streams);
    }
    if want("catch-up") {
        catch_up();
    }
}

const SESSIONS: usize = 100_000;
const SESSION_BATCH: usize = 1_000;

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn sessions() {
    sessions_in_the_device();
    sessions_over_the_link();
    if std::env::var_os("SESSIONS_LINK_ONLY").is_none() {
        sessions_on_stdio();
    }
}

/// The device alone, in this process: 100,000 `session/new` on a link (paths resolved as given,
/// persists acknowledged at once), against this process's memory before the first.
fn sessions_in_the_device() {
    let mut config = DeviceConfig::default();
    config.remote.enabled = true;
    config.remote.roots = vec!["/w".into()];
    config.remote.require_trust = false;
    let mut d = Device::new(config, Time(0)).unwrap();
    let settle = |d: &mut Device| {
        while let Some(o) = d.poll_output() {
            match o {
                Output::Effect(Effect::ResolvePath { request, path }) => {
                    d.handle_path_resolved(request, Ok(path), Time(0))
                }
                Output::Effect(Effect::Persist { seq, .. }) => d.handle_persisted(seq, Time(0)),
                _ => {}
            }
        }
    };
    d.start_link(Time(0));
    settle(&mut d);
    let link = d.handle_open(ConnKind::Link, Time(0)).unwrap();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                      "params":{"protocolVersion":1}});
    d.handle_frame(link, init.to_string().as_bytes(), Time(0))
        .unwrap();
    settle(&mut d);
    let (before, _) = rss_of(std::process::id());
    let start = Instant::now();
    for i in 0..SESSIONS {
        let new = json!({"jsonrpc":"2.0","id":i + 1,"method":"session/new",
                         "params":{"cwd":"/w/p","mcpServers":[]}});
        d.handle_frame(link, new.to_string().as_bytes(), Time(0))
            .unwrap();
        settle(&mut d);
    }
    let took = start.elapsed();
    let (after, _) = rss_of(std::process::id());
    println!(
        "sessions, the device alone: {} made, {} in memory, in {:.2} s; this process's RSS \
         +{:.1} MB ({:.0} bytes a session); target: at most +32 MB",
        d.session_count(),
        d.live_session_count(),
        took.as_secs_f64(),
        mb(after.saturating_sub(before)),
        (after.saturating_sub(before) * 1024) as f64 / SESSIONS as f64,
    );
}

/// 100,000 `session/new` from the instance's client over the link, in batches answered before
/// the next; every one is made and left idle.
fn sessions_over_the_link() {
    smol::block_on(async {
        use lembas::instance::{Event, InstanceOptions, TestInstance};
        use lembas_core::client::ClientEvent;
        let instance = TestInstance::start(InstanceOptions::default())
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = std::fs::canonicalize(work).unwrap();
        let config = home.path().join("config/lembas");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.yaml"),
            format!(
                "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\n",
                w = work.display()
            ),
        )
        .unwrap();
        let mut child = linked_device(&instance, home.path()).await;
        smol::Timer::after(Duration::from_secs(1)).await;
        let (before, _) = rss_of(child.id());
        let start = Instant::now();
        let mut made = 0usize;
        let mut refused = 0usize;
        let count: usize = std::env::var("SESSIONS_COUNT")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(SESSIONS);
        for _ in 0..count / SESSION_BATCH {
            for _ in 0..SESSION_BATCH {
                instance
                    .call("session/new", json!({ "cwd": work, "mcpServers": [] }))
                    .await
                    .unwrap();
            }
            let mut answered = 0;
            while answered < SESSION_BATCH {
                match instance.next_event(Duration::from_secs(60)).await {
                    Some(Event::Client(ClientEvent::Answer { outcome, .. })) => {
                        answered += 1;
                        match outcome {
                            Ok(_) => made += 1,
                            Err(_) => refused += 1,
                        }
                    }
                    Some(_) => {}
                    None => panic!("no answer for 60 s after {made} sessions"),
                }
            }
        }
        let took = start.elapsed();
        smol::Timer::after(Duration::from_secs(1)).await;
        let (after, peak) = rss_of(child.id());
        let threads = threads_of(child.id());
        println!(
            "sessions, lembas link (redb): {made} made and idle, {refused} refused, in {:.1} s; \
             RSS {:.1} MB after against {:.1} MB before (+{:.1} MB, ratio {:.2}; peak {:.1} MB; \
             {threads} threads); target: at most +32 MB (1,000 in memory, the rest set aside)",
            took.as_secs_f64(),
            mb(after),
            mb(before),
            mb(after.saturating_sub(before)),
            after as f64 / before as f64,
            mb(peak),
        );
        let _ = child.kill();
        let _ = child.wait();
    });
}

/// 100,000 `session/new` from an editor on `serve --stdio`, in batches answered before the
/// next: with no store, the first 1,000 are made and the rest refused.
fn sessions_on_stdio() {
    let home = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    scratch_env(&mut c, home.path());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                      "params":{"protocolVersion":1,"clientCapabilities":{}}});
    writeln!(stdin, "{init}").unwrap();
    stdin.flush().unwrap();
    lines.read_line(&mut line).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (before, _) = rss_of(child.id());
    let start = Instant::now();
    let (mut made, mut refused) = (0usize, 0usize);
    let mut batch = String::new();
    for b in 0..SESSIONS / SESSION_BATCH {
        batch.clear();
        for i in 0..SESSION_BATCH {
            let id = 1 + b * SESSION_BATCH + i;
            let new = json!({"jsonrpc":"2.0","id":id,"method":"session/new",
                             "params":{"cwd": home.path(), "mcpServers": []}});
            batch.push_str(&new.to_string());
            batch.push('\n');
        }
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin.flush().unwrap();
        for _ in 0..SESSION_BATCH {
            line.clear();
            lines.read_line(&mut line).unwrap();
            if line.contains("\"sessionId\"") {
                made += 1;
            } else {
                refused += 1;
            }
        }
    }
    let took = start.elapsed();
    let (after, peak) = rss_of(child.id());
    println!(
        "sessions, serve --stdio (no store): {made} made, {refused} refused (sessions.max_live), \
         in {:.1} s; RSS {:.1} MB after against {:.1} MB before (+{:.1} MB, ratio {:.2}; peak \
         {:.1} MB); target: at most +32 MB",
        took.as_secs_f64(),
        mb(after),
        mb(before),
        mb(after.saturating_sub(before)),
        after as f64 / before as f64,
        mb(peak),
    );
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

/// Wait for one byte on stdin, then write the file's lines to stdout, one write each.
fn raw_writer(path: &str) {
    let text = std::fs::read(path).unwrap();
    let mut go = [0u8; 1];
    std::io::stdin().read_exact(&mut go).unwrap();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in text.split_inclusive(|b| *b == b'\n') {
        out.write_all(line).unwrap();
    }
    out.flush().unwrap();
}

/// `lembas login` to the test instance, then `lembas link` in the scratch home `home`, once the
/// instance's client says the device is ready.
async fn linked_device(
    instance: &lembas::instance::TestInstance,
    home: &std::path::Path,
) -> std::process::Child {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    let token = home.join("token");
    std::fs::write(&token, "test-token").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.args([
        "login",
        &instance.url(),
        "--token-file",
        token.to_str().unwrap(),
    ])
    .stdout(Stdio::null());
    scratch_env(&mut c, home);
    assert!(c.status().unwrap().success());
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.arg("link").stderr(Stdio::null());
    scratch_env(&mut c, home);
    let child = c.spawn().unwrap();
    let (ready, _) = instance
        .wait_for(Duration::from_secs(10), |e| {
            matches!(e, Event::Client(ClientEvent::Ready { .. }))
        })
        .await;
    assert!(ready.is_some(), "the device never linked");
    child
}

fn scratch_env(c: &mut Command, home: &std::path::Path) {
    scripted::use_scripted_engine(home);
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env_remove("LEMBAS_LOG");
}

/// `lembas serve --stdio` in the scratch home `home`: the child, its stdin, its stdout's lines.
fn serve_stdio(
    home: &std::path::Path,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    scratch_env(&mut c, home);
    let mut child = c.spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap());
    (child, stdin, lines)
}

fn stdio() {
    let home = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut lines) = serve_stdio(home.path());
    let mut send = |v: Value| {
        let mut s = v.to_string();
        s.push('\n');
        stdin.write_all(s.as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                "params":{"protocolVersion":1,"clientCapabilities":{}}}));
    send(json!({"jsonrpc":"2.0","id":1,"method":"session/new",
                "params":{"cwd": home.path(), "mcpServers": []}}));
    let mut line = String::new();
    let session = loop {
        line.clear();
        lines.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 1 {
            break v["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    let prompt = |id: u64, turn: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{
            "sessionId": session, "prompt":[{"type":"text","text":format!("chunks {CHUNKS} 64")}],
            "_meta":{"lembas":{"turnId": turn}}}})
    };
    // A warm-up turn, then the measured one.
    let mut captured = Vec::new();
    let mut best = Duration::MAX;
    for round in 0..3u64 {
        send(prompt(2 + round, &format!("msg_{round}")));
        let start = Instant::now();
        let mut got = Vec::new();
        loop {
            line.clear();
            lines.read_line(&mut line).unwrap();
            got.extend_from_slice(line.as_bytes());
            if line.contains("\"stopReason\"") {
                break;
            }
        }
        let took = start.elapsed();
        if round > 0 {
            best = best.min(took);
        }
        captured = got;
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();

    let file = home.path().join("lines");
    std::fs::write(&file, &captured).unwrap();
    let mut raw_best = Duration::MAX;
    for _ in 0..3 {
        let mut raw = Command::new(std::env::current_exe().unwrap())
            .args(["raw-writer", file.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut go = raw.stdin.take().unwrap();
        let mut lines = BufReader::new(raw.stdout.take().unwrap());
        let start = Instant::now();
        go.write_all(b"g").unwrap();
        go.flush().unwrap();
        let mut n = 0;
        loop {
            line.clear();
            if lines.read_line(&mut line).unwrap() == 0 {
                break;
            }
            n += line.len();
            if line.contains("\"stopReason\"") {
                break;
            }
        }
        raw_best = raw_best.min(start.elapsed());
        assert_eq!(n, captured.len());
        let _ = raw.wait();
    }
    let mb = captured.len() as f64 / 1e6;
    println!(
        "stdio: {CHUNKS} chunks of 64 B ({mb:.1} MB of lines): lembas {:.1} ms ({:.0} chunks/s), \
         raw pipe {:.1} ms; ratio {:.2} of raw (target >= 0.5)",
        best.as_secs_f64() * 1e3,
        CHUNKS as f64 / best.as_secs_f64(),
        raw_best.as_secs_f64() * 1e3,
        raw_best.as_secs_f64() / best.as_secs_f64()
    );
}

/// Drive a device over one stdio connection with the scripted engine (the core's host loop) and
/// a redb store, as the driver does, with the persists of each pump in one transaction
/// (`group`) or each in its own.
struct Bench {
    host: Host<ScriptedEngine>,
    store: RedbStore,
    group: bool,
    conn: lembas_core::device::ConnId,
    answers: Vec<Value>,
    commits: usize,
}

impl Bench {
    fn new(dir: &std::path::Path, group: bool) -> Bench {
        let mut config = DeviceConfig::default();
        config.seed = 7;
        let mut device = Device::new(config, Time(1)).unwrap();
        let conn = device.handle_open(ConnKind::Stdio, Time(1)).unwrap();
        Bench {
            host: Host::new(device, ScriptedEngine::new()),
            store: RedbStore::open(&dir.join(if group { "g.redb" } else { "o.redb" })).unwrap(),
            group,
            conn,
            answers: Vec::new(),
            commits: 0,
        }
    }

    fn frame(&mut self, v: Value) {
        self.host
            .device_mut()
            .handle_frame(self.conn, v.to_string().as_bytes(), Time(2))
            .unwrap();
        self.pump();
    }

    fn pump(&mut self) {
        let now = Time(2);
        let mut batch = Vec::new();
        let mut batch_seq = 0;
        loop {
            // One reader, always keeping up: nothing is paused.
            if let Some(out) = self.host.poll_output(now, |_| false) {
                match out {
                    ShellOutput::Send { frame, .. } => {
                        let v: Value = serde_json::from_slice(&frame).unwrap();
                        if v.get("id").is_some() && v.get("method").is_none() {
                            self.answers.push(v);
                        }
                    }
                    ShellOutput::Effect(Effect::Persist { seq, records }) => {
                        if self.group {
                            batch.extend(records);
                            batch_seq = seq;
                        } else {
                            self.store.commit(&records).unwrap();
                            self.commits += 1;
                            self.host.device_mut().handle_persisted(seq, now);
                        }
                    }
                    ShellOutput::Effect(Effect::ResolvePath { request, path }) => self
                        .host
                        .device_mut()
                        .handle_path_resolved(request, Ok(path), now),
                    // No command files: the built-ins alone.
                    ShellOutput::Effect(Effect::ReadCommands {
                        request, project, ..
                    }) => self.host.device_mut().handle_commands_read(
                        request,
                        Ok(lembas_core::commands::CommandsRead {
                            root: project,
                            ..Default::default()
                        }),
                        now,
                    ),
                    other @ (ShellOutput::Close { .. }
                    | ShellOutput::Ping { .. }
                    | ShellOutput::Io(_)
                    | ShellOutput::Effect(
                        Effect::Dial
                        | Effect::Stop { .. }
                        | Effect::LoadSession { .. }
                        | Effect::ReadHistory { .. }
                        | Effect::ReadEvents { .. }
                        | Effect::ListDirectory { .. }
                        | Effect::CheckChanges { .. }
                        | Effect::ReadMentions { .. }
                        | Effect::SearchFiles { .. }
                        | Effect::WriteAttachment { .. }
                        | Effect::RemoveAttachments { .. }
                        | Effect::OpenTerminal { .. }
                        | Effect::TerminalInput { .. }
                        | Effect::ResizeTerminal { .. }
                        | Effect::CloseTerminal { .. }
                        | Effect::UndoFiles { .. },
                    )) => panic!("a stdio turn bench asks for no {other:?}"),
                }
                continue;
            }
            if batch.is_empty() {
                return;
            }
            self.store.commit(&batch).unwrap();
            self.commits += 1;
            batch.clear();
            self.host.device_mut().handle_persisted(batch_seq, now);
        }
    }
}

fn turns_per_second(group: bool, sessions: usize, rounds: usize) -> (f64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let mut b = Bench::new(dir.path(), group);
    b.frame(json!({"jsonrpc":"2.0","id":0,"method":"initialize",
                   "params":{"protocolVersion":1,"clientCapabilities":{}}}));
    let mut ids = Vec::new();
    for i in 0..sessions {
        b.frame(json!({"jsonrpc":"2.0","id":1000 + i,"method":"session/new",
                       "params":{"cwd": cwd, "mcpServers": []}}));
        let a = b.answers.pop().unwrap();
        ids.push(a["result"]["sessionId"].as_str().unwrap().to_string());
    }
    b.answers.clear();
    let commits0 = b.commits;
    let start = Instant::now();
    let mut id = 10_000u64;
    for r in 0..rounds {
        // Every session gets a prompt before the device is pumped: what a busy link brings in
        // one read.
        for s in &ids {
            id += 1;
            let v = json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{
                "sessionId": s, "prompt":[{"type":"text","text":"say ok"}],
                "_meta":{"lembas":{"turnId": format!("msg_{r}")}}}});
            b.host
                .device_mut()
                .handle_frame(b.conn, v.to_string().as_bytes(), Time(2))
                .unwrap();
        }
        b.pump();
    }
    let took = start.elapsed();
    let turns = sessions * rounds;
    assert_eq!(b.answers.len(), turns);
    assert!(b
        .answers
        .iter()
        .all(|a| a["result"]["stopReason"] == "end_turn"));
    (turns as f64 / took.as_secs_f64(), b.commits - commits0)
}

fn turns() {
    let (group, gc) = turns_per_second(true, 50, 20);
    let (one, oc) = turns_per_second(false, 50, 4);
    println!(
        "turns/s, every ledger change durable (redb): group commit {group:.0} turns/s \
         ({gc} commits for 1000 turns), one commit per change {one:.0} turns/s ({oc} commits \
         for 200 turns); ratio {:.1}x (target >= 1000 turns/s)",
        group / one
    );
}

fn rss() {
    smol::block_on(async {
        use lembas::instance::{InstanceOptions, TestInstance};
        let instance = TestInstance::start(InstanceOptions::default())
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut child = linked_device(&instance, home.path()).await;
        smol::Timer::after(Duration::from_secs(2)).await;
        let (rss, hwm) = rss_of(child.id());
        println!(
            "idle lembas link (linked, 2 s after initialize): RSS {:.1} MB (peak {:.1} MB); \
             target <= 20 MB",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        let _ = child.kill();
        let _ = child.wait();
    });
}

/// The receiving end of a link: read messages until one carries `stopReason`; the frames seen
/// (from `keep` on) and how long it took from `start`.
async fn receive_until_answer<S>(
    ws: &mut async_tungstenite::WebSocketStream<S>,
    keep: bool,
) -> (Vec<String>, Instant)
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    use async_tungstenite::tungstenite::Message;
    use futures_lite::StreamExt;
    let mut frames = Vec::new();
    while let Some(m) = ws.next().await {
        let Ok(Message::Text(t)) = m else {
            panic!("the link ended early: {m:?}");
        };
        let done = t.contains("\"stopReason\"");
        if keep {
            frames.push(t.as_str().to_string());
        }
        if done {
            break;
        }
    }
    (frames, Instant::now())
}

/// The bench's receiving end: the next loopback connection, as a WebSocket with the link's
/// settings (the lembas run and both baselines are read the same way).
async fn accept(
    listener: &smol::net::TcpListener,
) -> async_tungstenite::WebSocketStream<smol::net::TcpStream> {
    let (tcp, _) = listener.accept().await.unwrap();
    let _ = tcp.set_nodelay(true);
    async_tungstenite::accept_async_with_config(
        tcp,
        Some(lembas::link::ws_config(
            FrameLimits::default().max_frame_bytes,
        )),
    )
    .await
    .unwrap()
}

/// A dialer that opens a plain WebSocket to the bench's listener (no discovery, no token).
struct LoopbackDialer(std::net::SocketAddr);

impl lembas::driver::Dialer for LoopbackDialer {
    fn dial(
        &self,
    ) -> futures_lite::future::Boxed<
        Result<Box<lembas::link::LinkSocket>, lembas_core::device::DialFailure>,
    > {
        let addr = self.0;
        Box::pin(async move {
            let tcp = smol::net::TcpStream::connect(addr)
                .await
                .map_err(|_| lembas_core::device::DialFailure::Transient)?;
            let _ = tcp.set_nodelay(true);
            let (ws, _) = async_tungstenite::smol::client_async_tls_with_connector_and_config(
                format!("ws://{addr}/api/devices/link"),
                tcp,
                None,
                Some(lembas::link::ws_config(
                    FrameLimits::default().max_frame_bytes,
                )),
            )
            .await
            .map_err(|_| lembas_core::device::DialFailure::Transient)?;
            Ok(Box::new(ws))
        })
    }
}

/// The runtime's driver on its own thread, as `lembas link` runs it, linked to `listener` (a
/// plain WebSocket, no discovery, no token): its sender (to stop it) and its thread.
fn driver_thread(
    home: &std::path::Path,
    listener: &smol::net::TcpListener,
) -> (
    smol::channel::Sender<lembas::driver::Input>,
    std::thread::JoinHandle<lembas::driver::Exit>,
) {
    let addr = listener.local_addr().unwrap();
    let device_cwd = std::fs::canonicalize(home).unwrap();
    let attachments = home.join("attachments");
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    let device = std::thread::spawn(move || {
        let mut config = DeviceConfig::default();
        config.seed = 7;
        let mut remote = lembas_core::Remote::default();
        remote.enabled = true;
        remote.roots = vec![device_cwd.to_str().unwrap().to_string()];
        remote.require_trust = false;
        config.remote = remote;
        let device = Device::new(config, Time(0)).unwrap();
        let mut driver = lembas::driver::Driver::new(
            device,
            lembas::driver::Disk::Mem(Default::default()),
            attachments,
        );
        stop_tx.send(driver.sender()).unwrap();
        driver.start_link(std::sync::Arc::new(LoopbackDialer(addr)));
        smol::block_on(driver.run())
    });
    (stop_rx.recv().unwrap(), device)
}

/// A JSON-RPC request as a WebSocket message.
fn ws_call(id: u64, method: &str, params: Value) -> async_tungstenite::tungstenite::Message {
    async_tungstenite::tungstenite::Message::text(
        json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string(),
    )
}

fn websocket() {
    use async_tungstenite::tungstenite::Message;
    use futures_lite::StreamExt;
    let home = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(home.path()).unwrap();
    let listener = smol::block_on(smol::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let (stop, device) = driver_thread(home.path(), &listener);
    let (lembas_best, captured) = smol::block_on(async {
        let mut ws = accept(&listener).await;
        let call = ws_call;
        let init = call(
            0,
            "initialize",
            json!({"protocolVersion":1,
            "clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}),
        );
        ws.send(init).await.unwrap();
        ws.send(call(
            1,
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        ))
        .await
        .unwrap();
        let session = loop {
            let Some(Ok(Message::Text(t))) = ws.next().await else {
                panic!("no session/new answer")
            };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["id"] == 1 {
                break v["result"]["sessionId"].as_str().unwrap().to_string();
            }
        };
        let mut best = Duration::MAX;
        let mut captured = Vec::new();
        for round in 0..4u64 {
            let prompt = call(
                2 + round,
                "session/prompt",
                json!({"sessionId": session,
                "prompt":[{"type":"text","text":format!("chunks {CHUNKS} 64")}],
                "_meta":{"lembas":{"turnId": format!("msg_{round}")}}}),
            );
            let start = Instant::now();
            ws.send(prompt).await.unwrap();
            // Frames are kept (copied) only in the untimed warm-up: the timed rounds read as
            // the baseline's receiver does.
            let (frames, end) = receive_until_answer(&mut ws, round == 0).await;
            if round > 0 {
                best = best.min(end - start);
            } else {
                captured = frames;
            }
        }
        (best, captured)
    });
    drop(listener);
    smol::block_on(stop.send(lembas::driver::Input::Shutdown)).unwrap();
    let chunks = captured
        .iter()
        .filter(|f| f.contains("agent_message_chunk"))
        .count();
    assert_eq!(chunks, CHUNKS);

    let raw_each = raw_websocket(&captured, false);
    let raw_fed = raw_websocket(&captured, true);
    let exit = device.join().unwrap();
    assert_eq!(exit.code, 0, "{exit:?}");
    let mb = captured.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    println!(
        "websocket: {CHUNKS} chunks of 64 B ({} frames, {mb:.1} MB): lembas link {:.1} ms \
         ({:.0} chunks/s), raw async-tungstenite sender {:.1} ms (one send a frame) and {:.1} \
         ms (frames fed, one flush); ratio {:.2} of raw (target >= 0.7), {:.2} of the fed one",
        captured.len(),
        lembas_best.as_secs_f64() * 1e3,
        CHUNKS as f64 / lembas_best.as_secs_f64(),
        raw_each.as_secs_f64() * 1e3,
        raw_fed.as_secs_f64() * 1e3,
        raw_each.as_secs_f64() / lembas_best.as_secs_f64(),
        raw_fed.as_secs_f64() / lembas_best.as_secs_f64()
    );
}

/// The baseline: a raw async-tungstenite client on its own thread sending `frames` to a
/// receiver like the one above, each with `send` (a flush a frame) or, with `fed`, all fed and
/// flushed once. The best of four.
fn raw_websocket(frames: &[String], fed: bool) -> Duration {
    use async_tungstenite::tungstenite::Message;
    use futures_lite::StreamExt;
    use futures_util::SinkExt;
    let mut best = Duration::MAX;
    for _ in 0..4 {
        let listener = smol::block_on(smol::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let frames = frames.to_vec();
        let (go_tx, go_rx) = smol::channel::bounded::<()>(1);
        let sender = std::thread::spawn(move || {
            smol::block_on(async move {
                let tcp = smol::net::TcpStream::connect(addr).await.unwrap();
                let _ = tcp.set_nodelay(true);
                let (mut ws, _) = async_tungstenite::client_async_with_config(
                    format!("ws://{addr}/"),
                    tcp,
                    Some(lembas::link::ws_config(
                        FrameLimits::default().max_frame_bytes,
                    )),
                )
                .await
                .unwrap();
                go_rx.recv().await.unwrap();
                for f in frames {
                    if fed {
                        ws.feed(Message::text(f)).await.unwrap();
                    } else {
                        ws.send(Message::text(f)).await.unwrap();
                    }
                }
                SinkExt::flush(&mut ws).await.unwrap();
                // Hold the socket until the receiver has read everything.
                let _ = ws.next().await;
            })
        });
        let took = smol::block_on(async {
            let mut ws = accept(&listener).await;
            let start = Instant::now();
            go_tx.send(()).await.unwrap();
            let (_, end) = receive_until_answer(&mut ws, false).await;
            let _ = ws.close(None).await;
            end - start
        });
        sender.join().unwrap();
        best = best.min(took);
    }
    best
}

/// Turns of `chunks <each> 64` in `sessions` sessions, all prompted at once: how many chunks
/// a second the reader gets in `agent_message_chunk` updates (a run merged into one update
/// under backpressure counts as its chunks), the best of two rounds.
fn stdio_streams(sessions: usize, each: usize) -> (f64, usize) {
    stdio_streams_in(sessions, each, true)
}

/// [`stdio_streams`] with no store: another process holds it (here, this one), so the editor's
/// sessions live in memory, as before the hub. What is left is the path from the engine to
/// the pipe alone.
fn stdio_streams_in_memory(sessions: usize, each: usize) -> (f64, usize) {
    stdio_streams_in(sessions, each, false)
}

fn stdio_streams_in(sessions: usize, each: usize, store: bool) -> (f64, usize) {
    let home = tempfile::tempdir().unwrap();
    let _held = (!store).then(|| {
        std::fs::create_dir_all(home.path().join("state/lembas")).unwrap();
        RedbStore::open(&home.path().join("state/lembas/lembas.redb")).unwrap()
    });
    let (mut child, mut stdin, mut lines) = serve_stdio(home.path());
    let mut batch = String::new();
    let mut line = String::new();
    let call = |batch: &mut String, id: usize, method: &str, params: Value| {
        batch.push_str(
            &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string(),
        );
        batch.push('\n');
    };
    call(
        &mut batch,
        0,
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    );
    for i in 0..sessions {
        call(
            &mut batch,
            1 + i,
            "session/new",
            json!({"cwd": home.path(), "mcpServers": []}),
        );
    }
    stdin.write_all(batch.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut ids = Vec::new();
    while ids.len() < sessions {
        line.clear();
        lines.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(s) = v["result"]["sessionId"].as_str() {
            ids.push(s.to_string());
        }
    }
    let mut best = (0f64, 0);
    for round in 0..2 {
        batch.clear();
        for (i, s) in ids.iter().enumerate() {
            call(
                &mut batch,
                10_000 * (round + 1) + i,
                "session/prompt",
                json!({"sessionId": s,
                       "prompt":[{"type":"text","text":format!("chunks {each} 64")}],
                       "_meta":{"lembas":{"turnId": format!("msg_{round}")}}}),
            );
        }
        let start = Instant::now();
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin.flush().unwrap();
        let mut reader = StreamReader::default();
        while reader.answered < sessions {
            line.clear();
            lines.read_line(&mut line).unwrap();
            reader.read(&line);
        }
        let updates = reader.chunks(sessions * each);
        let rate = updates as f64 / start.elapsed().as_secs_f64();
        if rate > best.0 {
            best = (rate, reader.frames);
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    best
}

/// The interleaved reader, the same for both sides of the ratio: every frame parsed (into the
/// fields it checks, borrowed, not a `serde_json::Value` tree), every chunk's text counted by
/// its bytes (a reader behind gets a run of a session's chunks merged into one update, 64
/// bytes a chunk), each session's update seqs rising, and the prompts' answers counted.
#[derive(Default)]
struct StreamReader {
    frames: usize,
    text_bytes: usize,
    answered: usize,
    last_seq: std::collections::HashMap<String, u64>,
}

#[derive(serde::Deserialize)]
struct ReadFrame<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<ReadParams<'a>>,
    #[serde(default)]
    result: Option<ReadResult>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadParams<'a> {
    #[serde(borrow, default)]
    session_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    update: Option<ReadUpdate<'a>>,
    #[serde(rename = "_meta", default)]
    meta: Option<ReadMeta>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadUpdate<'a> {
    #[serde(borrow)]
    session_update: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    content: Option<ReadContent<'a>>,
}

#[derive(serde::Deserialize)]
struct ReadContent<'a> {
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct ReadMeta {
    lembas: ReadSeq,
}

#[derive(serde::Deserialize)]
struct ReadSeq {
    seq: u64,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadResult {
    #[serde(default)]
    stop_reason: Option<serde::de::IgnoredAny>,
}

impl StreamReader {
    fn read(&mut self, frame: &str) {
        let f: ReadFrame<'_> = serde_json::from_str(frame).expect("a JSON-RPC frame");
        if f.method.is_none() {
            self.answered += usize::from(f.result.is_some_and(|r| r.stop_reason.is_some()));
            return;
        }
        if f.method.as_deref() != Some("session/update") {
            return;
        }
        let Some(p) = f.params else {
            panic!("an update without params: {frame}");
        };
        let Some(u) = p
            .update
            .filter(|u| u.session_update == "agent_message_chunk")
        else {
            return;
        };
        let text = u.content.and_then(|c| c.text).expect("a chunk's text");
        let session = p.session_id.expect("a chunk's sessionId");
        let seq = p.meta.expect("a chunk's seq").lembas.seq;
        let last = self.last_seq.entry(session.into_owned()).or_insert(0);
        assert!(seq > *last, "a session's seqs rise: {seq} after {last}");
        *last = seq;
        self.frames += 1;
        self.text_bytes += text.len();
    }

    /// The chunks read, checked to be `expected`, every one's 64 bytes once.
    fn chunks(&self, expected: usize) -> usize {
        assert_eq!(self.text_bytes, expected * 64, "every chunk's text, once");
        expected
    }
}

/// [`stdio_streams`] over the link: the driver on its thread, a LLeMbas client reading (so
/// each chunk is a `session/update` and an `_lembas/event`).
fn link_streams(sessions: usize, each: usize) -> (f64, usize) {
    use async_tungstenite::tungstenite::Message;
    use futures_lite::StreamExt;
    use futures_util::SinkExt;
    let home = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(home.path()).unwrap();
    let listener = smol::block_on(smol::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let (stop, device) = driver_thread(home.path(), &listener);
    let best = smol::block_on(async {
        let mut ws = accept(&listener).await;
        let init = json!({"protocolVersion":1,
                          "clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}});
        ws.send(ws_call(0, "initialize", init)).await.unwrap();
        for i in 0..sessions {
            let params = json!({"cwd": cwd, "mcpServers": []});
            ws.feed(ws_call(1 + i as u64, "session/new", params))
                .await
                .unwrap();
        }
        SinkExt::flush(&mut ws).await.unwrap();
        let mut ids = Vec::new();
        while ids.len() < sessions {
            let Some(Ok(Message::Text(t))) = ws.next().await else {
                panic!("no session/new answer")
            };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if let Some(s) = v["result"]["sessionId"].as_str() {
                ids.push(s.to_string());
            }
        }
        let mut best = (0f64, 0);
        for round in 0..2u64 {
            let start = Instant::now();
            for (i, s) in ids.iter().enumerate() {
                let params = json!({"sessionId": s,
                       "prompt":[{"type":"text","text":format!("chunks {each} 64")}],
                       "_meta":{"lembas":{"turnId": format!("msg_{round}")}}});
                ws.feed(ws_call(
                    10_000 * (round + 1) + i as u64,
                    "session/prompt",
                    params,
                ))
                .await
                .unwrap();
            }
            SinkExt::flush(&mut ws).await.unwrap();
            let mut reader = StreamReader::default();
            while reader.answered < sessions {
                let Some(Ok(Message::Text(t))) = ws.next().await else {
                    panic!("the link ended early")
                };
                reader.read(t.as_str());
            }
            let updates = reader.chunks(sessions * each);
            let rate = updates as f64 / start.elapsed().as_secs_f64();
            if rate > best.0 {
                best = (rate, reader.frames);
            }
        }
        best
    });
    drop(listener);
    smol::block_on(stop.send(lembas::driver::Input::Shutdown)).unwrap();
    let exit = device.join().unwrap();
    assert_eq!(exit.code, 0, "{exit:?}");
    best
}

/// 100 sessions x 1,000 chunks against one x 100,000 through `run` (chunks/s and the update
/// frames that carried them, of its best round), printed as a ratio. A round is a fraction of
/// a second, so one pair of runs moved the ratio by half (0.48-0.93 on a quiet machine): the
/// two sides run in turn `INTERLEAVED_TRIALS` times (7; `LEMBAS_BENCH_TRIALS` sets it) and the
/// median ratio is printed with its range, each side's median rate and frames beside it.
fn interleaved(name: &str, run: fn(usize, usize) -> (f64, usize)) {
    let trials: usize = std::env::var("LEMBAS_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(INTERLEAVED_TRIALS);
    let (mut ones, mut manys, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..trials {
        let one = run(1, 100_000);
        let many = run(100, 1_000);
        ratios.push(many.0 / one.0);
        ones.push(one);
        manys.push(many);
    }
    let ((one, one_frames), (many, many_frames)) = (median_run(&mut ones), median_run(&mut manys));
    let (low, ratio, high) = spread(&mut ratios);
    println!(
        "interleaved, {name} ({trials} trials, medians): 100 sessions x 1,000 chunks of 64 B at \
         once {many:.0} chunks/s ({many_frames} update frames), one session x 100,000 {one:.0} \
         chunks/s ({one_frames} update frames); ratio {ratio:.2} ({low:.2}-{high:.2}) (target \
         >= 0.8)"
    );
}

const INTERLEAVED_TRIALS: usize = 7;

/// The run of median rate (the upper one of an even count) among `runs`.
fn median_run(runs: &mut [(f64, usize)]) -> (f64, usize) {
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs[runs.len() / 2]
}

/// The least, the median (the upper one of an even count, as [`median_run`]'s) and the greatest.
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

/// 10 s of a 1,000 chunks/s stream made while the link is down, then how long the client takes
/// from the new link's readiness to having handed out all of it.
fn catch_up() {
    use lembas::instance::{Event, InstanceOptions, TestInstance};
    use lembas_core::client::ClientEvent;
    const STREAM_MS: usize = 10_000;
    const CHUNKS: usize = STREAM_MS;
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions::default())
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = std::fs::canonicalize(work).unwrap();
        let config = home.path().join("config/lembas");
        std::fs::create_dir_all(&config).unwrap();
        // A log that holds 10 s of the stream: 20,000 events (a chunk is an update and an
        // event) of about 230 bytes.
        std::fs::write(
            config.join("config.yaml"),
            format!(
                "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nsessions:\n  \
                 event_log_events: 32768\n  event_log_bytes: 16777216\n",
                w = work.display()
            ),
        )
        .unwrap();
        let mut child = linked_device(&instance, home.path()).await;
        let id = instance
            .call("session/new", json!({ "cwd": work, "mcpServers": [] }))
            .await
            .unwrap();
        let (answer, _) = instance
            .wait_for(
                Duration::from_secs(10),
                |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
            )
            .await;
        let Some(Event::Client(ClientEvent::Answer {
            outcome: Ok(answer),
            ..
        })) = answer
        else {
            panic!("no session: {answer:?}");
        };
        let session = answer["sessionId"].as_str().unwrap().to_string();
        // 1,000 chunks a second, ten every 10 ms; then a long pause before the turn's end.
        let script = format!(
            "{}\nsleep 60000\nsay end",
            vec!["chunks 10 64\nsleep 10"; CHUNKS / 10].join("\n")
        );
        let blocks = json!([{ "type": "text", "text": script }]);
        instance
            .prompt(&session, blocks, Some("msg_catch_up"))
            .await
            .unwrap();
        let is_chunk = |e: &Event| matches!(e, Event::Client(e) if e.update().is_some_and(|u| u.update.message_text().is_some()));
        let (first, _) = instance.wait_for(Duration::from_secs(10), is_chunk).await;
        assert!(first.is_some(), "the turn never streamed");
        instance.refuse_links(true);
        instance.cut().await;
        let mut handed = 1usize;
        let mut before_ready = 0;
        smol::Timer::after(Duration::from_millis(STREAM_MS as u64)).await;
        instance.refuse_links(false);
        let mut ready = None;
        let mut caught_up = None;
        while caught_up.is_none() {
            let Some(e) = instance.next_event(Duration::from_secs(60)).await else {
                panic!("stuck after {handed} chunks");
            };
            match &e {
                Event::Client(ClientEvent::Ready { .. }) => {
                    ready = Some(Instant::now());
                    before_ready = handed;
                }
                Event::Client(ClientEvent::Gap { .. }) => panic!("a gap: the log fell short"),
                e if is_chunk(e) => {
                    handed += 1;
                    if handed == CHUNKS {
                        caught_up = Some(Instant::now());
                    }
                }
                _ => {}
            }
        }
        let took = caught_up.unwrap() - ready.expect("linked again");
        println!(
            "catch-up: a 1,000 chunks/s stream, the link down for {} s: {} chunks fetched on \
             the new link in {:.1} ms (target < 100 ms)",
            STREAM_MS / 1000,
            CHUNKS - before_ready,
            took.as_secs_f64() * 1e3
        );
        let _ = child.kill();
        let _ = child.wait();
    });
}
