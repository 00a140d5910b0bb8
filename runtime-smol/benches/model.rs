//! `cargo bench -p lembas --bench model`: issue 14's added latency, end to end. The test
//! instance in this process streams `POST /v1/chat/completions` to the built `lembas link` on
//! the model engine (real HTTP and server-sent events on loopback), 100 sessions at once, each
//! event 10 ms after the last (100 tokens/s a session, 10,000 a second in all); the device's
//! frames come back over its link to the instance's client, in this process too.
//!
//! Latency: from when the instance's write of an event (its last byte) returned to when its
//! frame was read from the instance's event channel (one clock, `Instant`); every frame counted,
//! the `session/update` and the `_lembas/event` of each token. Baseline, the same run: the
//! same kind of streams from the same instance read by a raw HTTP client in this process, each
//! event timed when the read that completes it returns: loopback and this process's executor,
//! no device. Three runs of each, alternating. Printed: p50, p99 and max of each over every
//! run's samples, and over each sample's least latency of the runs (a token's frame is the same
//! sample in every run: the least filters the scheduler slices a busy machine takes from one
//! run and not the others); the device's less the raw's at p50 and p99. Target: the device's
//! p99 under 5 ms.
//!
//! The core's own share (no sockets) is `cargo bench -p lembas-core --bench model -- latency`.
//! `LEMBAS_BENCH_TRACE=1` adds where in each run the latencies over the target fall.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use lembas::instance::{ChatReply, ChatStream, Event, InstanceOptions, TestInstance};
use lembas_core::client::ClientEvent;
use serde_json::{json, Value};

const SESSIONS: usize = 100;
const EVENTS: usize = 200;
const GAP: Duration = Duration::from_millis(10);
const TARGET_P99: Duration = Duration::from_millis(5);
const MODEL: &str = "test/chat-small";
const TOKEN: &str = "test-token";
const WAIT: Duration = Duration::from_secs(30);
/// Runs of each side, alternating.
const RUNS: usize = 3;

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if only.is_some_and(|o| !"model latency".contains(o.as_str())) {
        return;
    }
    smol::block_on(latency());
}

/// Token `k` of stream `r`: unique over the run, so a frame finds its event.
fn token(r: usize, k: usize) -> String {
    format!("{r:03}.{k:03} ")
}

/// One stream per session, `EVENTS` tokens `GAP` apart.
fn streams(first: usize) -> Vec<ChatReply> {
    (first..first + SESSIONS)
        .map(|r| {
            ChatReply::Stream(ChatStream {
                text: (0..EVENTS).map(|k| token(r, k)).collect(),
                delay: GAP,
                ..ChatStream::default()
            })
        })
        .collect()
}

/// The text a chunk's data carries, if it is a text delta.
fn delta_text(data: &str) -> Option<String> {
    let v: Value = serde_json::from_str(data).ok()?;
    Some(v["choices"][0]["delta"]["content"].as_str()?.to_string())
}

/// When each token's event was written, by token.
fn written(instance: &TestInstance) -> HashMap<String, Instant> {
    instance
        .sse_writes()
        .into_iter()
        .filter_map(|(data, at)| Some((delta_text(&data)?, at)))
        .collect()
}

fn percentile(sorted: &[u64], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    Duration::from_nanos(sorted[i])
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Figures {
    p50: Duration,
    p99: Duration,
    max: Duration,
    samples: usize,
}

fn figures(mut ns: Vec<u64>) -> Figures {
    ns.sort_unstable();
    Figures {
        p50: percentile(&ns, 0.50),
        p99: percentile(&ns, 0.99),
        max: Duration::from_nanos(*ns.last().unwrap()),
        samples: ns.len(),
    }
}

fn load() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!("load average {avg} on {cores} cores")
}

/// Latencies by sample (a token and, through the device, which frame of it), in ns.
type Samples = HashMap<(String, bool), u64>;

/// Every run's samples, and each sample's least over the runs.
fn every_and_least(runs: &[Samples]) -> (Figures, Figures) {
    let every = runs.iter().flat_map(|r| r.values().copied()).collect();
    let least = runs[0]
        .iter()
        .map(|(k, v)| {
            runs.iter()
                .filter_map(|r| r.get(k))
                .copied()
                .min()
                .unwrap_or(*v)
        })
        .collect();
    (figures(every), figures(least))
}

async fn latency() {
    // Each run takes SESSIONS replies for the raw client, then SESSIONS for the device.
    let mut chat = Vec::new();
    for _ in 0..RUNS {
        chat.extend(streams(0));
        chat.extend(streams(SESSIONS));
    }
    let instance = TestInstance::start(InstanceOptions {
        token: TOKEN.into(),
        chat,
        record_sse_writes: true,
        ..InstanceOptions::default()
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut device = linked_device(&instance, home.path()).await;
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        raw.push(raw_client(&instance).await);
        ours.push(through_the_device(&instance, home.path()).await);
    }
    let _ = device.kill();
    let _ = device.wait();

    println!(
        "model latency, end to end: {SESSIONS} sessions streaming at once, {EVENTS} events \
         each, {} ms apart, {RUNS} runs; from the instance's write of an event to each of its \
         frames read back over the link ({})",
        GAP.as_millis(),
        load()
    );
    let (raw_every, raw_least) = every_and_least(&raw);
    let (ours_every, ours_least) = every_and_least(&ours);
    for (what, raw, ours) in [
        ("every run", &raw_every, &ours_every),
        ("least of the runs", &raw_least, &ours_least),
    ] {
        for (name, f) in [("raw client", raw), ("lembas link", ours)] {
            println!(
                "  {:<32} {:>6} samples: p50 {:>9.1} µs, p99 {:>9.1} µs, max {:>9.1} µs",
                format!("{name}, {what}"),
                f.samples,
                us(f.p50),
                us(f.p99),
                us(f.max)
            );
        }
        println!(
            "  {:<32} p50 {:.1} µs, p99 {:.1} µs; target p99 < {} ms: {}",
            format!("added by the device, {what}:"),
            us(ours.p50.saturating_sub(raw.p50)),
            us(ours.p99.saturating_sub(raw.p99)),
            TARGET_P99.as_millis(),
            if ours.p99 < TARGET_P99 {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}

// ---- the baseline ----

/// One stream read raw: each event's token and when the read completing it returned.
async fn raw_stream(addr: String) -> Vec<(String, Instant)> {
    let mut s = smol::net::TcpStream::connect(&addr).await.unwrap();
    let body = json!({"model": MODEL, "stream": true,
                      "messages": [{"role": "user", "content": "go"}]})
    .to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending = Vec::new();
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return got;
        }
        let at = Instant::now();
        pending.extend_from_slice(&buf[..n]);
        // Each event is `data: <json>\n\n` (inside the chunked framing, which never splits it
        // from its own bytes' point of view: only whole events are taken).
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event = String::from_utf8_lossy(&pending[..end]).into_owned();
            pending.drain(..end + 2);
            if let Some(data) = event.rfind("data: ").map(|i| &event[i + 6..]) {
                if let Some(t) = delta_text(data) {
                    got.push((t, at));
                }
            }
        }
    }
}

async fn raw_client(instance: &TestInstance) -> Samples {
    let addr = instance.url().trim_start_matches("http://").to_string();
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|_| smol::spawn(raw_stream(addr.clone())))
        .collect();
    let mut read = Vec::new();
    for t in tasks {
        read.extend(t.await);
    }
    let written = written(instance);
    assert_eq!(
        read.len(),
        SESSIONS * EVENTS,
        "the raw client missed events"
    );
    read.into_iter()
        .map(|(t, at)| {
            let ns = at.duration_since(written[&t]).as_nanos() as u64;
            ((t, true), ns)
        })
        .collect()
}

// ---- the device ----

fn scratch_env(c: &mut Command, home: &Path) {
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env_remove("LEMBAS_LOG");
}

/// `lembas link` on the model engine, logged in to `instance`, linked and ready.
async fn linked_device(instance: &TestInstance, home: &Path) -> Child {
    let work = home.join("work");
    std::fs::create_dir_all(work.join("proj")).unwrap();
    let config = home.join("config/lembas");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.yaml"),
        format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nengine: model\n",
            w = work.display()
        ),
    )
    .unwrap();
    let token = home.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.args([
        "login",
        &instance.url(),
        "--token-file",
        token.to_str().unwrap(),
    ])
    .stdout(Stdio::null());
    scratch_env(&mut c, home);
    assert!(c.status().unwrap().success(), "login failed");
    let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
    c.arg("link").stderr(Stdio::null());
    scratch_env(&mut c, home);
    let child = c.spawn().unwrap();
    let (ready, _) = instance
        .wait_for(WAIT, |e| {
            matches!(e, Event::Client(ClientEvent::Ready { .. }))
        })
        .await;
    assert!(ready.is_some(), "the device never linked");
    child
}

/// A request through the instance's client, and its answer.
async fn call(instance: &TestInstance, method: &str, params: Value) -> Value {
    let id = instance.call(method, params).await.unwrap();
    let (e, _) = instance
        .wait_for(
            WAIT,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
        )
        .await;
    match e {
        Some(Event::Client(ClientEvent::Answer { outcome, .. })) => {
            outcome.unwrap_or_else(|e| panic!("{method}: {} {}", e.code, e.message))
        }
        other => panic!("no answer to {method}: {other:?}"),
    }
}

/// A chunk frame's text (the update's or the event's), if it is one.
fn frame_text(text: &str) -> Option<(bool, String)> {
    let v: Value = serde_json::from_str(text).ok()?;
    match v["method"].as_str()? {
        "session/update" if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" => {
            Some((
                true,
                v["params"]["update"]["content"]["text"].as_str()?.into(),
            ))
        }
        "_lembas/event" if v["params"]["event"]["type"] == "text" => {
            Some((false, v["params"]["event"]["text"].as_str()?.into()))
        }
        _ => None,
    }
}

async fn through_the_device(instance: &TestInstance, home: &Path) -> Samples {
    let cwd = home.join("work/proj");
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let new = call(
            instance,
            "session/new",
            json!({"cwd": cwd, "mcpServers": [], "_meta": {"lembas_model": MODEL}}),
        )
        .await;
        sessions.push(new["sessionId"].as_str().unwrap().to_string());
    }
    for s in &sessions {
        instance
            .prompt(
                s,
                json!([{"type":"text","text":"go"}]),
                Some(&format!("t-{s}")),
            )
            .await
            .unwrap();
    }
    // Read as fast as they come; parsed once the turns are over.
    let mut frames: Vec<(Instant, String)> = Vec::with_capacity(SESSIONS * EVENTS * 2 + 1000);
    let mut answered = 0;
    while answered < SESSIONS {
        match instance.next_event(WAIT).await {
            Some(Event::Frame {
                to_device: false,
                text,
            }) => frames.push((Instant::now(), text)),
            Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) => {
                let outcome = outcome.unwrap_or_else(|e| panic!("a turn failed: {}", e.message));
                assert_eq!(outcome["stopReason"], "end_turn", "{outcome}");
                answered += 1;
            }
            Some(_) => {}
            None => panic!("the turns stalled: {answered} of {SESSIONS} answered"),
        }
    }
    let written = written(instance);
    let (mut updates, mut events) = (0, 0);
    let mut latencies = Samples::with_capacity(frames.len());
    for (at, text) in &frames {
        let Some((update, token)) = frame_text(text) else {
            continue;
        };
        let wrote = written
            .get(&token)
            .unwrap_or_else(|| panic!("a frame of a token never written: {token:?}"));
        latencies.insert((token, update), at.duration_since(*wrote).as_nanos() as u64);
        if update {
            updates += 1;
        } else {
            events += 1;
        }
    }
    if std::env::var_os("LEMBAS_BENCH_TRACE").is_some() {
        trace(&frames, &written);
    }
    assert_eq!(
        (updates, events),
        (SESSIONS * EVENTS, SESSIONS * EVENTS),
        "every token an update and an event"
    );
    latencies
}

/// `LEMBAS_BENCH_TRACE=1`: the frames' latency by when their event was written, in 100 ms
/// steps from the run's first write, where any is over the target: whether the tail is spread
/// over the run or gathered (at turns' starts and ends, say).
fn trace(frames: &[(Instant, String)], written: &HashMap<String, Instant>) {
    let Some(first) = written.values().min().copied() else {
        return;
    };
    let mut by_step: std::collections::BTreeMap<u128, Vec<Duration>> = Default::default();
    for (at, text) in frames {
        if let Some(wrote) = frame_text(text).and_then(|(_, t)| written.get(&t)) {
            let step = wrote.duration_since(first).as_millis() / 100;
            by_step
                .entry(step)
                .or_default()
                .push(at.duration_since(*wrote));
        }
    }
    for (step, mut l) in by_step {
        l.sort_unstable();
        let (p50, max) = (l[l.len() / 2], l[l.len() - 1]);
        if max >= TARGET_P99 {
            eprintln!(
                "  written at +{:>5} ms: {:>5} frames, p50 {:>9.1} µs, max {:>9.1} µs",
                step * 100,
                l.len(),
                us(p50),
                us(max)
            );
        }
    }
}
