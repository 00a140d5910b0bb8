//! `cargo bench -p lembas-core --bench model`: issue 14's figures for the model engine, each
//! against its baseline in the same run. The core alone, in this process: a `Host` joining a
//! `Device` to the `ModelEngine`, its HTTP played by the bench (a virtual shell), so what is
//! measured is the core's own path from SSE bytes to link frames, no sockets.
//!
//! - throughput: text tokens from SSE bytes to link frames, against a raw SSE parse of the
//!   same bytes. A stdio connection that said `_meta.lembas` (so each token makes a
//!   `session/update` and a `_lembas/event`, as for the web UI), a session on a served model
//!   (`_meta.lembas_model`), a prompt; the engine's Fetch is answered 200 and the body, a
//!   llama.cpp-style stream of 20,000 one-token chunks, is fed in 16 KiB pieces as the engine
//!   asks for them; every frame is drained. Raw: the whole body at once, split on `\n`,
//!   `strip_prefix("data: ")`, `serde_json::from_str::<Value>`, `choices[0].delta.content`
//!   copied out. Target: core/raw tokens/s at least 0.5.
//! - latency: 100 sessions streaming at once on one connection, the time from handing the
//!   engine the bytes that complete an event to its frames leaving `Host::poll_output`, p50
//!   and p99 (the core-level share of issue 14's "last byte to frame written"; the end-to-end
//!   figure over real HTTP is the runtime's). Two shapes: staggered (one session's event at a
//!   time, each drained before the next arrives) and burst (an event for each of the 100
//!   sessions handed in together, then one drain: the last waits for the other 99). Target:
//!   p99 under 5 ms. Printed over every run's frames, and over each frame's least latency of
//!   the runs: on a shared machine a scheduler slice (4 ms) that lands in a burst delays every
//!   frame after it, and the least of five runs shows what the core itself costs.
//!
//! A filter word picks one: `cargo bench -p lembas-core --bench model -- latency`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lembas_core::config::Model;
use lembas_core::device::{ConnId, ConnKind, Device, Effect};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::host::{Host, ShellOutput};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::{DeviceConfig, Time};
use serde_json::{json, Value};

const TOKENS: usize = 20_000;
const PIECE: usize = 16 * 1024;
const ROUNDS: usize = 11;
const WARM_UP: usize = 2;
const TARGET_RATIO: f64 = 0.5;

const SESSIONS: usize = 100;
const EVENTS_PER_SESSION: usize = 200;
const TARGET_P99: Duration = Duration::from_millis(5);
/// Runs of each latency shape (after one to warm up).
const RUNS: usize = 5;

const MODEL: &str = "lembas/bench";
const ROOT: &str = "/w";

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    if want("throughput") {
        throughput();
    }
    if want("latency") {
        latency();
    }
}

// ---- the stream ----

/// Token `i`: four characters, all different over the stream, so order can be checked.
fn token(i: usize) -> String {
    format!("{:04x}", i)
}

/// One chunk as llama.cpp and OpenAI send it, carrying `text`.
fn chunk(text: &str) -> String {
    format!(
        "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\
         \"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
    )
}

/// The end of a stream: a finish with usage, then `[DONE]`.
const FINISH: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\
     \"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20000}}\n\n\
     data: [DONE]\n\n";

fn body(tokens: usize) -> String {
    let mut s: String = (0..tokens).map(|i| chunk(&token(i))).collect();
    s.push_str(FINISH);
    s
}

// ---- a host, as a shell drives it ----

struct Bench {
    host: Host<ModelEngine>,
    conn: ConnId,
    next_id: u64,
    now: u64,
}

impl Bench {
    fn new() -> Bench {
        let mut config = DeviceConfig::default();
        config.remote.enabled = true;
        config.remote.roots = vec![ROOT.into()];
        config.remote.require_trust = false;
        config.connection = Some("lembas".into());
        config.models = vec![Model::served(MODEL)];
        config.sessions.max_live = config.sessions.max_live.max(SESSIONS);
        let device = Device::new(config.clone(), Time(0)).unwrap();
        let engine = ModelEngine::new(ModelEngineConfig::default(), config.models.clone());
        let mut host = Host::new(device, engine);
        let conn = host
            .device_mut()
            .handle_open(ConnKind::Stdio, Time(0))
            .unwrap();
        let mut b = Bench {
            host,
            conn,
            next_id: 0,
            now: 0,
        };
        let init = b.call(
            "initialize",
            json!({"protocolVersion":1,
                   "clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}),
        );
        assert!(init["result"].is_object(), "{init}");
        b
    }

    /// Send a request and drain until its answer; the answer.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let mut answer = None;
        let mut ios = Vec::new();
        self.drain(
            &mut |frame| {
                let v: Value = serde_json::from_slice(&frame).unwrap();
                if v["id"] == id && v.get("method").is_none() {
                    answer = Some(v);
                }
            },
            &mut ios,
        );
        assert!(ios.is_empty(), "{method} asked the shell {ios:?}");
        answer.unwrap_or_else(|| panic!("no answer to {method}"))
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":self.next_id,"method":method,"params":params});
        self.host
            .device_mut()
            .handle_frame(self.conn, frame.to_string().as_bytes(), Time(self.now))
            .unwrap();
        self.next_id
    }

    /// A session on the served model.
    fn session(&mut self) -> String {
        let new = self.call(
            "session/new",
            json!({"cwd": format!("{ROOT}/p"), "mcpServers": [],
                   "_meta": {"lembas_model": MODEL}}),
        );
        new["result"]["sessionId"].as_str().unwrap().to_string()
    }

    fn prompt(&mut self, session: &str) -> u64 {
        self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type":"text","text":"go"}]}),
        )
    }

    /// Everything the host has for the shell: frames to `sent`, the engine's calls to `ios`,
    /// persists and path resolutions done at once (a store that never lags).
    fn drain(&mut self, sent: &mut dyn FnMut(Vec<u8>), ios: &mut Vec<IoCall>) {
        let now = Time(self.now);
        while let Some(out) = self.host.poll_output(now, |_| false) {
            match out {
                ShellOutput::Send { frame, .. } => sent(frame),
                ShellOutput::Io(call) => ios.push(call),
                ShellOutput::Effect(Effect::Persist { seq, .. }) => {
                    self.host.device_mut().handle_persisted(seq, now)
                }
                ShellOutput::Effect(Effect::ResolvePath { request, path }) => self
                    .host
                    .device_mut()
                    .handle_path_resolved(request, Ok(path), now),
                ShellOutput::Effect(_) | ShellOutput::Close { .. } | ShellOutput::Ping { .. } => {}
            }
        }
    }

    fn io(&mut self, id: IoId, reply: IoReply) {
        self.host.handle_io(id, reply, Time(self.now));
    }
}

/// The stream id a prompt's Fetch was given, among `ios`.
fn fetch_of(ios: &[IoCall]) -> Vec<IoId> {
    ios.iter()
        .filter_map(|c| match c {
            IoCall::Fetch { id, path, .. } => {
                assert_eq!(path, "/v1/chat/completions");
                Some(*id)
            }
            _ => None,
        })
        .collect()
}

fn reads_of(ios: &[IoCall]) -> impl Iterator<Item = (IoId, usize)> + '_ {
    ios.iter().filter_map(|c| match c {
        IoCall::Read { id, max } => Some((*id, *max)),
        _ => None,
    })
}

/// A frame's chunk text and whether it is the update (else the event), if it carries one.
fn chunk_text(frame: &[u8]) -> Option<(bool, String)> {
    let v: Value = serde_json::from_slice(frame).unwrap();
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

// ---- throughput ----

/// One turn on a fresh host (made before the clock starts): the time from the prompt to its
/// answer, and every frame sent meanwhile.
fn core_turn(stream: &[u8], frames: &mut Vec<Vec<u8>>) -> Duration {
    let mut b = Bench::new();
    let session = b.session();
    frames.clear();
    let mut ios = Vec::new();
    let start = Instant::now();
    let prompt = b.prompt(&session);
    b.drain(&mut |f| frames.push(f), &mut ios);
    let [id] = fetch_of(&ios)[..] else {
        panic!("one fetch, not {ios:?}");
    };
    b.io(
        id,
        IoReply::Head {
            status: 200,
            retry_after: None,
        },
    );
    let mut rest = stream;
    loop {
        ios.clear();
        b.drain(&mut |f| frames.push(f), &mut ios);
        let Some((_, max)) = reads_of(&ios).find(|(r, _)| *r == id) else {
            break;
        };
        if rest.is_empty() {
            b.io(id, IoReply::End);
            continue;
        }
        let n = rest.len().min(max).min(PIECE);
        b.io(id, IoReply::Body(rest[..n].to_vec()));
        rest = &rest[n..];
    }
    let took = start.elapsed();
    assert!(
        rest.is_empty(),
        "the engine stopped reading with {} bytes left",
        rest.len()
    );
    let answered = frames.iter().rev().any(|f| {
        let v: Value = serde_json::from_slice(f).unwrap();
        v["id"] == prompt && v["result"]["stopReason"] == "end_turn"
    });
    assert!(answered, "the prompt was not answered end_turn");
    took
}

/// Every token arrived, in order, once as an update and once as an event.
fn check_frames(frames: &[Vec<u8>], tokens: usize) {
    let (mut updates, mut events) = (Vec::new(), Vec::new());
    for f in frames {
        match chunk_text(f) {
            Some((true, t)) => updates.push(t),
            Some((false, t)) => events.push(t),
            None => {}
        }
    }
    let want: Vec<String> = (0..tokens).map(token).collect();
    assert_eq!(updates, want, "the updates are not the tokens in order");
    assert_eq!(events, want, "the events are not the tokens in order");
}

fn raw_parse(stream: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let stream = std::str::from_utf8(stream).unwrap();
    for data in stream.split('\n').filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str() {
            out.push(text.to_string());
        }
    }
    out
}

fn raw_turn(stream: &[u8]) -> Duration {
    let start = Instant::now();
    let tokens = black_box(raw_parse(black_box(stream)));
    let took = start.elapsed();
    assert_eq!(tokens.len(), TOKENS);
    took
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn throughput() {
    let body = body(TOKENS);
    let stream = body.as_bytes();
    let mut frames = Vec::new();
    core_turn(stream, &mut frames);
    check_frames(&frames, TOKENS);
    assert_eq!(
        raw_parse(stream),
        (0..TOKENS).map(token).collect::<Vec<_>>()
    );
    let sent = frames.len();
    for _ in 0..WARM_UP {
        core_turn(stream, &mut frames);
        raw_turn(stream);
    }
    let (mut core, mut raw, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which side goes first, so neither always runs on a cache the other warmed.
        let (c, r) = if round % 2 == 0 {
            let c = core_turn(stream, &mut frames);
            (c, raw_turn(stream))
        } else {
            let r = raw_turn(stream);
            (core_turn(stream, &mut frames), r)
        };
        assert_eq!(frames.len(), sent, "a round sent other frames");
        let (c, r) = (
            TOKENS as f64 / c.as_secs_f64(),
            TOKENS as f64 / r.as_secs_f64(),
        );
        core.push(c);
        raw.push(r);
        paired.push(c / r);
    }
    let (c, r, ratio) = (median(core), median(raw), median(paired));
    println!(
        "model throughput: {TOKENS} text tokens ({} B of SSE) from bytes to frames ({sent} \
         frames: an update and an event each, every token in order), median of {ROUNDS} \
         alternating rounds",
        stream.len()
    );
    println!(
        "  core (Host + Device + ModelEngine, {PIECE} B reads)  {:>12.0} tokens/s  {:>7.1} MB/s",
        c,
        c * stream.len() as f64 / TOKENS as f64 / 1e6
    );
    println!(
        "  raw (split, strip, Value, content)            {:>12.0} tokens/s  {:>7.1} MB/s",
        r,
        r * stream.len() as f64 / TOKENS as f64 / 1e6
    );
    println!(
        "  core/raw {:.3} (paired: {ratio:.3}); target >= {TARGET_RATIO}: {}",
        c / r,
        if ratio >= TARGET_RATIO {
            "met"
        } else {
            "NOT met"
        }
    );
}

// ---- latency ----

/// The sessions' streams, each asked and answered 200, a read out on each.
struct Streams {
    b: Bench,
    sessions: Vec<String>,
    ids: Vec<IoId>,
    /// The read outstanding on each stream (its max), if one is.
    reading: Vec<Option<usize>>,
}

impl Streams {
    fn open() -> Streams {
        let mut b = Bench::new();
        let sessions: Vec<String> = (0..SESSIONS).map(|_| b.session()).collect();
        let mut ids = Vec::new();
        for s in &sessions {
            b.prompt(s);
            let mut ios = Vec::new();
            b.drain(&mut |_| {}, &mut ios);
            let [id] = fetch_of(&ios)[..] else {
                panic!("one fetch, not {ios:?}");
            };
            ids.push(id);
        }
        for id in &ids {
            b.io(
                *id,
                IoReply::Head {
                    status: 200,
                    retry_after: None,
                },
            );
        }
        let mut s = Streams {
            b,
            sessions,
            ids,
            reading: vec![None; SESSIONS],
        };
        s.drain(&mut |_| {});
        assert!(
            s.reading.iter().all(Option::is_some),
            "a stream was not read"
        );
        s
    }

    fn drain(&mut self, sent: &mut dyn FnMut(Vec<u8>)) {
        let mut ios = Vec::new();
        self.b.drain(sent, &mut ios);
        for (id, max) in reads_of(&ios) {
            let i = self
                .ids
                .iter()
                .position(|s| *s == id)
                .expect("a read of a stream");
            self.reading[i] = Some(max);
        }
    }

    /// Hand stream `i` its next bytes (a read must be out on it).
    fn feed(&mut self, i: usize, bytes: &[u8]) {
        let max = self.reading[i].take().expect("no read out on the stream");
        assert!(bytes.len() <= max);
        self.b.io(self.ids[i], IoReply::Body(bytes.to_vec()));
    }

    fn session_of(&self, frame: &[u8]) -> usize {
        let v: Value = serde_json::from_slice(frame).unwrap();
        let s = v["params"]["sessionId"]
            .as_str()
            .expect("a session's frame");
        self.sessions.iter().position(|x| x == s).unwrap()
    }
}

/// Added latency of every chunk frame, in ns: `burst` hands an event to each session, then
/// drains once; else each session's event is drained before the next is handed.
fn latency_run(burst: bool) -> Vec<u64> {
    let mut s = Streams::open();
    let mut latencies = Vec::with_capacity(SESSIONS * EVENTS_PER_SESSION * 2);
    let mut handed = vec![Instant::now(); SESSIONS];
    let mut sent: Vec<(Instant, Vec<u8>)> = Vec::with_capacity(SESSIONS * 2);
    let mut tokens_seen = vec![0usize; SESSIONS];
    for k in 0..EVENTS_PER_SESSION {
        let event = chunk(&token(k));
        // Every other event comes in two reads, its last bytes alone: what completes it is
        // what is timed.
        let cut = if k % 2 == 0 { 0 } else { event.len() - 3 };
        if cut > 0 {
            for i in 0..SESSIONS {
                s.feed(i, &event.as_bytes()[..cut]);
            }
            s.drain(&mut |f| panic!("a frame before its event was whole: {f:?}"));
        }
        for (i, handed) in handed.iter_mut().enumerate() {
            *handed = Instant::now();
            s.feed(i, &event.as_bytes()[cut..]);
            if !burst {
                s.drain(&mut |f| sent.push((Instant::now(), f)));
            }
        }
        if burst {
            s.drain(&mut |f| sent.push((Instant::now(), f)));
        }
        for (at, frame) in sent.drain(..) {
            let i = s.session_of(&frame);
            tokens_seen[i] += 1;
            latencies.push(at.duration_since(handed[i]).as_nanos() as u64);
        }
    }
    assert!(
        tokens_seen.iter().all(|n| *n == EVENTS_PER_SESSION * 2),
        "every event of every session makes two frames"
    );
    // The streams end, each turn answered.
    let mut answered = 0;
    for i in 0..SESSIONS {
        s.feed(i, FINISH.as_bytes());
        s.drain(&mut |_| {});
        s.b.io(s.ids[i], IoReply::End);
        s.drain(&mut |f| {
            let v: Value = serde_json::from_slice(&f).unwrap();
            if v["result"]["stopReason"] == "end_turn" {
                answered += 1;
            }
        });
    }
    assert_eq!(answered, SESSIONS, "every turn ends");
    latencies
}

fn percentile(sorted: &[u64], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    Duration::from_nanos(sorted[i])
}

/// The machine's load now (Linux), for reading the tails: on a busy machine a run is
/// preempted for whole scheduler slices (4 or 8 ms), and every frame of a burst caught behind
/// one waits that long.
fn load() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!("load average {avg} on {cores} cores")
}

fn latency() {
    println!(
        "model latency (core level: no sockets): {SESSIONS} sessions streaming on one stdio \
         connection, {EVENTS_PER_SESSION} events each, from the bytes completing an event \
         handed to the engine to each of its frames out of poll_output; {RUNS} runs ({})",
        load()
    );
    for (name, burst) in [("staggered", false), ("burst of 100", true)] {
        latency_run(burst); // warm up
        let runs: Vec<Vec<u64>> = (0..RUNS).map(|_| latency_run(burst)).collect();
        // The runs are the same frames in the same order: a frame's least latency over the
        // runs is its cost without the preemptions that hit one run and not the others.
        let least: Vec<u64> = (0..runs[0].len())
            .map(|i| runs.iter().map(|r| r[i]).min().unwrap())
            .collect();
        for (what, mut all) in [("every run", runs.concat()), ("least of the runs", least)] {
            all.sort_unstable();
            let (p50, p99, max) = (
                percentile(&all, 0.50),
                percentile(&all, 0.99),
                Duration::from_nanos(*all.last().unwrap()),
            );
            println!(
                "  {:<32} {:>7} frames: p50 {:>8.1} µs, p99 {:>8.1} µs, max {:>8.1} µs; \
                 target p99 < {} ms: {}",
                format!("{name}, {what}"),
                all.len(),
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                max.as_secs_f64() * 1e6,
                TARGET_P99.as_millis(),
                if p99 < TARGET_P99 { "met" } else { "NOT met" }
            );
        }
    }
}
