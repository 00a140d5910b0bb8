//! The streamed chat completion path against a raw parse, side by side in one process.
//!
//! core: `SseParser::feed` on the stream in TCP-sized pieces (1460 bytes), then
//!       `chat::parse_chunk` on each event's data (rows "+chunks"); or the parser alone.
//! raw:  the whole body at once, checked as UTF-8 in one go, `str::lines`, `strip_prefix("data: ")`, then
//!       `serde_json::from_str::<Value>` and the delta's text copied out (rows "+chunks"); or
//!       the data lines copied out alone. Raw gets the easy case (no pieces, no CR, no
//!       multi-line events, no bounds), so core/raw near 1 is good.
//!
//! Each case is warmed up, then core and raw alternate for ROUNDS rounds of about ROUND_TIME
//! each; the table shows the median ns/op of each side and the median of the per-round
//! ratios. Run with `cargo bench -p lembas-core --bench sse`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lembas_core::model::chat::{parse_chunk, Delta};
use lembas_core::model::sse::{SseEvent, SseLimits, SseParser};
use serde_json::Value;

const ROUNDS: usize = 11;
const ROUND_TIME: Duration = Duration::from_millis(50);
const WARM_UP: Duration = Duration::from_millis(100);
const PIECE: usize = 1460;

// ---- the streams ----

/// A llama.cpp-style stream: `n` small deltas (with the fields llama.cpp adds), a finish, a
/// usage chunk and `[DONE]`.
fn token_stream(n: usize, field: &str) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"{field}\":\"tok{i} \"}}}}],\"created\":1760000000,\"id\":\"chatcmpl-abc\",\"model\":\"qwen3\",\"system_fingerprint\":\"b6000\",\"object\":\"chat.completion.chunk\"}}\n\n"
        ));
    }
    s.push_str("data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\"object\":\"chat.completion.chunk\"}\n\n");
    s.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":500,\"total_tokens\":600},\"timings\":{\"prompt_n\":100,\"predicted_per_second\":41.5}}\n\n");
    s.push_str("data: [DONE]\n\n");
    s
}

/// A few big deltas (a server that batches), each a long line crossing many pieces.
fn big_deltas(n: usize, bytes: usize) -> String {
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(bytes)
        .collect();
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s
}

// ---- the two sides ----

fn core_events(stream: &[u8], events: &mut Vec<SseEvent>) {
    let mut parser = SseParser::new(SseLimits::default());
    events.clear();
    for piece in stream.chunks(PIECE) {
        parser.feed(piece, events).unwrap();
    }
    parser.finish();
}

fn core_deltas(stream: &[u8], events: &mut Vec<SseEvent>, deltas: &mut Vec<Delta>) {
    let mut parser = SseParser::new(SseLimits::default());
    deltas.clear();
    for piece in stream.chunks(PIECE) {
        events.clear();
        parser.feed(piece, events).unwrap();
        for event in events.iter() {
            parse_chunk(&event.data, deltas).unwrap();
        }
    }
    parser.finish();
}

fn raw_events(stream: &[u8]) -> Vec<String> {
    std::str::from_utf8(stream)
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

fn raw_deltas(stream: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let stream = std::str::from_utf8(stream).unwrap();
    for data in stream.lines().filter_map(|l| l.strip_prefix("data: ")) {
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

// ---- the harness ----

fn time_ns(op: &mut dyn FnMut(), iters: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        op();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn calibrate(op: &mut dyn FnMut()) -> u64 {
    let warm = Instant::now();
    let mut n = 0u64;
    while warm.elapsed() < WARM_UP {
        op();
        n += 1;
    }
    let per = WARM_UP.as_secs_f64() / n.max(1) as f64;
    ((ROUND_TIME.as_secs_f64() / per) as u64).max(1)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Median ns/op of core and raw, and the median of the per-round core/raw ratios.
fn core_vs_raw(core: &mut dyn FnMut(), raw: &mut dyn FnMut()) -> (f64, f64, f64) {
    let (ci, ri) = (calibrate(core), calibrate(raw));
    let (mut c, mut r) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which side goes first, so neither always runs on a cache the other warmed.
        if round % 2 == 0 {
            c.push(time_ns(core, ci));
            r.push(time_ns(raw, ri));
        } else {
            r.push(time_ns(raw, ri));
            c.push(time_ns(core, ci));
        }
    }
    let paired = c.iter().zip(&r).map(|(c, r)| c / r).collect();
    (median(c), median(r), median(paired))
}

fn main() {
    let streams = [
        ("500 text tokens", token_stream(500, "content")),
        ("500 thought tokens", token_stream(500, "reasoning_content")),
        ("8 deltas of 64 KiB", big_deltas(8, 64 * 1024)),
    ];
    println!(
        "sse: core (SseParser in {PIECE}-byte pieces [+ parse_chunk]) vs raw (whole body, \
         lines + strip_prefix [+ Value]), median of {ROUNDS} alternating rounds of ~{} ms",
        ROUND_TIME.as_millis()
    );
    println!(
        "{:<30} {:>9} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "stream", "bytes", "core ns/op", "raw ns/op", "core/raw", "paired", "core MB/s"
    );
    for (name, stream) in &streams {
        let bytes = stream.as_bytes();
        // Both sides see the same events before either is timed.
        let mut events = Vec::new();
        core_events(bytes, &mut events);
        let datas: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, raw_events(bytes), "{name}: events differ");

        let mut deltas = Vec::new();
        let row = |what: &str, (c, r, paired): (f64, f64, f64)| {
            println!(
                "{:<30} {:>9} {:>12.0} {:>12.0} {:>9.3} {:>9.3} {:>9.0}",
                format!("{name}{what}"),
                bytes.len(),
                c,
                r,
                c / r,
                paired,
                bytes.len() as f64 / c * 1e3
            );
        };
        row(
            "",
            core_vs_raw(
                &mut || core_events(black_box(bytes), &mut events),
                &mut || {
                    black_box(raw_events(black_box(bytes)));
                },
            ),
        );
        row(
            " +chunks",
            core_vs_raw(
                &mut || core_deltas(black_box(bytes), &mut events, &mut deltas),
                &mut || {
                    black_box(raw_deltas(black_box(bytes)));
                },
            ),
        );
    }
}
