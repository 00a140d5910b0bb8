//! The codec against a raw serde_json round trip, side by side in one process.
//!
//! core: `jsonrpc::decode`, dispatch (`methods::find` plus `jsonrpc::parse_params` into the
//! method's borrowed params type), and encoding the message back from that type.
//! raw:  `serde_json::from_slice::<Value>` plus `serde_json::to_vec`.
//!
//! Each case is warmed up, then core and raw alternate for ROUNDS rounds of about ROUND_TIME
//! each; the table shows the median ns/op of each side. The issue's target is core/raw at most
//! 1.2 (aim: below 1.0).
//!
//! Run with `cargo bench -p lembas-core --bench codec`; `-- --breakdown` adds the cost of each
//! stage of the core path.

use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

use lembas_core::jsonrpc::{self, FrameLimits, Message};
use lembas_core::methods;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

const ROUNDS: usize = 15;
const ROUND_TIME: Duration = Duration::from_millis(50);
const WARM_UP: Duration = Duration::from_millis(100);

// ---- params types, borrowing from the frame, in the shapes ACP peers send ----

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams<'a> {
    session_id: &'a str,
    #[serde(borrow)]
    prompt: Vec<Block<'a>>,
    #[serde(
        rename = "_meta",
        default,
        skip_serializing_if = "Option::is_none",
        borrow
    )]
    meta: Option<&'a RawValue>,
}

#[derive(Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        #[serde(borrow)]
        text: Cow<'a, str>,
    },
    Image {
        #[serde(borrow)]
        data: Cow<'a, str>,
        #[serde(rename = "mimeType")]
        mime_type: &'a str,
    },
    Resource {
        #[serde(borrow)]
        resource: EmbeddedResource<'a>,
    },
    ResourceLink {
        #[serde(borrow)]
        uri: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
    },
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbeddedResource<'a> {
    #[serde(borrow)]
    uri: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    blob: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct UpdateParams<'a> {
    session_id: &'a str,
    #[serde(borrow)]
    update: Update<'a>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Update<'a> {
    session_update: &'a str,
    #[serde(borrow)]
    content: Content<'a>,
}

#[derive(Deserialize, Serialize)]
struct Content<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct PermissionParams<'a> {
    session_id: &'a str,
    #[serde(borrow)]
    tool_call: ToolCall<'a>,
    #[serde(borrow)]
    options: Vec<PermissionOption<'a>>,
    #[serde(
        rename = "_meta",
        default,
        skip_serializing_if = "Option::is_none",
        borrow
    )]
    meta: Option<PermissionMeta<'a>>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCall<'a> {
    tool_call_id: &'a str,
    #[serde(borrow)]
    title: Cow<'a, str>,
    kind: &'a str,
    status: &'a str,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    raw_input: Option<&'a RawValue>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct PermissionOption<'a> {
    option_id: &'a str,
    #[serde(borrow)]
    name: Cow<'a, str>,
    kind: &'a str,
}

#[derive(Deserialize, Serialize)]
struct PermissionMeta<'a> {
    #[serde(borrow)]
    lembas: PermissionLembas<'a>,
}

#[derive(Deserialize, Serialize)]
struct PermissionLembas<'a> {
    #[serde(borrow)]
    reason: Cow<'a, str>,
}

// ---- the two paths ----

fn core(frame: &[u8], limits: &FrameLimits) -> Vec<u8> {
    match jsonrpc::decode(frame, limits).expect("the corpus decodes") {
        Message::Request(req) => {
            let spec = methods::find(&req.method).expect("a known method");
            match spec.name {
                "session/prompt" => {
                    let p: PromptParams = jsonrpc::parse_params(spec.name, req.params).unwrap();
                    jsonrpc::encode_request(&req.id, spec.name, &p)
                }
                "session/request_permission" => {
                    let p: PermissionParams = jsonrpc::parse_params(spec.name, req.params).unwrap();
                    jsonrpc::encode_request(&req.id, spec.name, &p)
                }
                other => unreachable!("no request {other} in the corpus"),
            }
        }
        Message::Notification(n) => {
            let spec = methods::find(&n.method).expect("a known method");
            match spec.name {
                "session/update" => {
                    let p: UpdateParams = jsonrpc::parse_params(spec.name, n.params).unwrap();
                    jsonrpc::encode_notification(spec.name, &p)
                }
                other => unreachable!("no notification {other} in the corpus"),
            }
        }
        Message::Response(_) => unreachable!("no responses in the corpus"),
    }
}

fn raw(frame: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(frame).expect("the corpus is JSON");
    serde_json::to_vec(&v).expect("a Value serializes")
}

// ---- the corpus ----

const SESSION: &str = "sess_01JQ8ZK3V4X5Y6Z7A8B9C0D1E2";

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Text cut to exactly `n` bytes (the source is ASCII).
fn text_of(n: usize) -> String {
    let para = "Looking at `decode`, the frame is checked for UTF-8, then scanned for depth, \
                then parsed into the envelope.\n\n```rust\nlet env: Envelope<'a> = \
                serde_json::from_str(text)?;\n```\n\nThe \"params\" member stays a `&RawValue` \
                until the handler parses it, so nothing is copied.\n- step one\n- step two\n";
    let mut s = String::with_capacity(n + para.len());
    while s.len() < n {
        s.push_str(para);
    }
    s.truncate(n);
    s
}

/// Standard base64 of `n` pseudo-random bytes.
fn base64_of(n: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut out = String::with_capacity(n.div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(v >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn update_chunk(text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SESSION}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":{}}}}}}}}}"#,
        quoted(text)
    )
}

fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let prompt = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{{"sessionId":"{SESSION}","prompt":[{{"type":"text","text":"Run the tests and fix whatever fails in core/src/jsonrpc.rs"}}]}}}}"#
    );
    let permission = format!(
        r#"{{"jsonrpc":"2.0","id":12,"method":"session/request_permission","params":{{"sessionId":"{SESSION}","toolCall":{{"toolCallId":"call_7b1d2f0c9e","title":"Run `cargo test -p lembas-core`","kind":"execute","status":"pending","rawInput":{{"command":"cargo test -p lembas-core --features testing 2>&1 | tail -n 40","cwd":"/home/dev/lembas-link","timeout_ms":120000}}}},"options":[{{"optionId":"once","name":"Allow once","kind":"allow_once"}},{{"optionId":"session","name":"Allow for this session","kind":"allow_always"}},{{"optionId":"deny","name":"Deny","kind":"reject_once"}}],"_meta":{{"lembas":{{"reason":"`cargo` is not on the session's allow list; the command runs in the project root"}}}}}}}}"#
    );
    let attachment = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{{"sessionId":"{SESSION}","prompt":[{{"type":"text","text":"What is wrong in this capture?"}},{{"type":"resource","resource":{{"uri":"file:///home/dev/captures/link-trace.pcap","mimeType":"application/vnd.tcpdump.pcap","blob":"{}"}}}}]}}}}"#,
        base64_of(768 * 1024)
    );
    vec![
        ("prompt (short text)", prompt.into_bytes()),
        ("update chunk 64 B", update_chunk(&text_of(64)).into_bytes()),
        (
            "update chunk 4 KiB",
            update_chunk(&text_of(4096)).into_bytes(),
        ),
        ("request_permission", permission.into_bytes()),
        ("prompt + 1 MiB resource", attachment.into_bytes()),
    ]
}

// ---- the harness ----

/// Iterations of `op` that take about `target`.
fn calibrate(op: &mut dyn FnMut(), target: Duration) -> u64 {
    let mut n = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            op();
        }
        let took = t.elapsed();
        if took >= target / 10 || n >= 1 << 30 {
            let per = took.as_secs_f64() / n as f64;
            return ((target.as_secs_f64() / per) as u64).max(1);
        }
        n *= 2;
    }
}

fn time_ns(op: &mut dyn FnMut(), iters: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        op();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The ns/op samples of each op, measured in alternating rounds.
fn sample(ops: &mut [&mut dyn FnMut()], rounds: usize, round_time: Duration) -> Vec<Vec<f64>> {
    let mut iters = Vec::new();
    for op in ops.iter_mut() {
        let warm = Instant::now();
        while warm.elapsed() < WARM_UP {
            op();
        }
        iters.push(calibrate(*op, round_time));
    }
    let mut samples = vec![Vec::with_capacity(rounds); ops.len()];
    for round in 0..rounds {
        // Alternate which side goes first, so neither always runs on a cache the other warmed.
        for k in 0..ops.len() {
            let i = if round % 2 == 0 { k } else { ops.len() - 1 - k };
            samples[i].push(time_ns(ops[i], iters[i]));
        }
    }
    samples
}

/// Median ns/op of each op.
fn compare(ops: &mut [&mut dyn FnMut()], rounds: usize, round_time: Duration) -> Vec<f64> {
    sample(ops, rounds, round_time)
        .into_iter()
        .map(median)
        .collect()
}

/// Core against raw: the median ns/op of each, and the median of the ratios of the rounds
/// (each round's two runs are back to back, so this one shrugs off load that comes and goes).
fn core_vs_raw(core: &mut dyn FnMut(), raw: &mut dyn FnMut()) -> (f64, f64, f64) {
    let s = sample(&mut [core, raw], ROUNDS, ROUND_TIME);
    let paired = s[0].iter().zip(&s[1]).map(|(c, r)| c / r).collect();
    (median(s[0].clone()), median(s[1].clone()), median(paired))
}

fn check_round_trip(name: &str, frame: &[u8], limits: &FrameLimits) {
    let back: Value = serde_json::from_slice(&core(frame, limits)).unwrap();
    let sent: Value = serde_json::from_slice(frame).unwrap();
    assert_eq!(
        back, sent,
        "{name}: the typed round trip changed the message"
    );
    assert_eq!(raw(frame), serde_json::to_vec(&sent).unwrap());
}

fn breakdown(corpus: &[(&'static str, Vec<u8>)], limits: &FrameLimits) {
    println!();
    println!(
        "breakdown, median ns/op (7 rounds of 20 ms): +params = decode, find and parse_params; \
         +encode = the whole core path; encode = encoding alone; +to_vec = the whole raw path"
    );
    println!(
        "{:<25} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9}",
        "frame", "utf8", "decode", "+params", "+encode", "encode", "Value", "+to_vec"
    );
    for (name, frame) in corpus {
        let f = frame.as_slice();
        let mut utf8 = || {
            black_box(std::str::from_utf8(black_box(f)).is_ok());
        };
        let mut dec = || {
            black_box(jsonrpc::decode(black_box(f), limits).is_ok());
        };
        let mut dec_params = || {
            let msg = jsonrpc::decode(black_box(f), limits).unwrap();
            let (method, params) = match &msg {
                Message::Request(r) => (r.method.as_ref(), r.params),
                Message::Notification(n) => (n.method.as_ref(), n.params),
                Message::Response(_) => unreachable!(),
            };
            let spec = methods::find(method).unwrap();
            let ok = match spec.name {
                "session/prompt" => {
                    jsonrpc::parse_params::<PromptParams>(spec.name, params).is_ok()
                }
                "session/request_permission" => {
                    jsonrpc::parse_params::<PermissionParams>(spec.name, params).is_ok()
                }
                _ => jsonrpc::parse_params::<UpdateParams>(spec.name, params).is_ok(),
            };
            black_box(ok);
        };
        let mut full = || {
            black_box(core(black_box(f), limits));
        };
        // Encoding alone, from params parsed once outside the loop.
        let text = std::str::from_utf8(f).unwrap();
        let env: Value = serde_json::from_str(text).unwrap();
        let params = RawValue::from_string(env["params"].to_string()).unwrap();
        let id = jsonrpc::Id::number(1);
        let mut enc: Box<dyn FnMut()> = match env["method"].as_str().unwrap() {
            "session/prompt" => {
                let p: PromptParams = serde_json::from_str(params.get()).unwrap();
                Box::new(move || {
                    black_box(jsonrpc::encode_request(
                        &id,
                        "session/prompt",
                        black_box(&p),
                    ));
                })
            }
            "session/request_permission" => {
                let p: PermissionParams = serde_json::from_str(params.get()).unwrap();
                Box::new(move || {
                    black_box(jsonrpc::encode_request(
                        &id,
                        "session/request_permission",
                        black_box(&p),
                    ));
                })
            }
            _ => {
                let p: UpdateParams = serde_json::from_str(params.get()).unwrap();
                Box::new(move || {
                    black_box(jsonrpc::encode_notification(
                        "session/update",
                        black_box(&p),
                    ));
                })
            }
        };
        let mut value = || {
            black_box(serde_json::from_slice::<Value>(black_box(f)).is_ok());
        };
        let mut raw_full = || {
            black_box(raw(black_box(f)));
        };
        let ns = compare(
            &mut [
                &mut utf8,
                &mut dec,
                &mut dec_params,
                &mut full,
                &mut *enc,
                &mut value,
                &mut raw_full,
            ],
            7,
            Duration::from_millis(20),
        );
        println!(
            "{:<25} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} | {:>9.0} {:>9.0}",
            name, ns[0], ns[1], ns[2], ns[3], ns[4], ns[5], ns[6]
        );
        drop(enc);
        drop(params);
    }
}

fn main() {
    let started = Instant::now();
    let limits = FrameLimits::default();
    let corpus = corpus();
    for (name, frame) in &corpus {
        check_round_trip(name, frame, &limits);
    }

    println!(
        "codec: core (decode + find + parse_params + encode) vs raw (Value + to_vec), \
         median of {ROUNDS} alternating rounds of ~{} ms",
        ROUND_TIME.as_millis()
    );
    println!(
        "{:<25} {:>9} {:>12} {:>12} {:>9} {:>9}",
        "frame", "bytes", "core ns/op", "raw ns/op", "core/raw", "paired"
    );
    let row = |name: &str, bytes: usize, (c, r, paired): (f64, f64, f64)| {
        println!(
            "{:<25} {:>9} {:>12.0} {:>12.0} {:>9.3} {:>9.3}",
            name,
            bytes,
            c,
            r,
            c / r,
            paired
        );
    };

    let (mut sum_core, mut sum_raw, mut log_ratio) = (0.0, 0.0, 0.0);
    for (name, frame) in &corpus {
        let f = frame.as_slice();
        let m = core_vs_raw(
            &mut || {
                black_box(core(black_box(f), &limits));
            },
            &mut || {
                black_box(raw(black_box(f)));
            },
        );
        row(name, f.len(), m);
        sum_core += m.0;
        sum_raw += m.1;
        log_ratio += m.2.ln();
    }

    let total: usize = corpus.iter().map(|(_, f)| f.len()).sum();
    let whole = core_vs_raw(
        &mut || {
            for (_, f) in &corpus {
                black_box(core(black_box(f), &limits));
            }
        },
        &mut || {
            for (_, f) in &corpus {
                black_box(raw(black_box(f)));
            }
        },
    );
    row("whole corpus (one op)", total, whole);
    println!();
    println!("core/raw = median core / median raw; paired = median over rounds of core/raw");
    println!(
        "sum of per-frame medians: core {sum_core:.0} ns / raw {sum_raw:.0} ns = {:.3}",
        sum_core / sum_raw
    );
    println!(
        "whole corpus, byte-weighted (one op runs every frame once): {:.3} (paired {:.3})",
        whole.0 / whole.1,
        whole.2
    );
    println!(
        "geometric mean of the paired per-frame ratios (each frame weighs the same): {:.3}",
        (log_ratio / corpus.len() as f64).exp()
    );
    println!("target: at most 1.2, aim below 1.0");

    if std::env::args().any(|a| a == "--breakdown") {
        breakdown(&corpus, &limits);
    }
    println!("({:.1} s)", started.elapsed().as_secs_f64());
}
