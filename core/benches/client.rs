//! What the client pays to hand its UI a device's text chunk, against a raw serde_json parse of
//! the same frame, side by side in one process.
//!
//! The frames are a link's stream of one session: each chunk as a `session/update` and an
//! `_lembas/event` of consecutive seqs, 260 bytes or so, as the device writes them.
//!
//! - raw:     `serde_json::from_slice::<Value>` of each frame (the baseline);
//! - typed:   `Client::handle_frame` of each frame and the events drained: decode, the seq
//!   check, and (`typed-events`) the params read as their `wire::event` type, encoded back and
//!   compared, so only a message that round-trips exactly is typed;
//! - untyped: the same, with the methods renamed to ones of the same length the vocabulary does
//!   not know, so the client hands them out as the `Value`s it read: typed − untyped is what the
//!   typing costs.
//!
//! Each round feeds every side a fresh ready client and the same CHUNKS frames (a seq seen is
//! dropped, so a frame cannot be fed twice); sides alternate which goes first; the table shows
//! medians of ROUNDS rounds, and the median of the rounds' paired ratios.
//!
//! Run with `cargo bench -p lembas-core --bench client`.

use std::hint::black_box;
use std::time::Instant;

use lembas_core::client::{Client, ClientEvent, ClientOutput};
use lembas_core::testing::device_frames;
use lembas_core::{ClientConfig, Time};
use serde_json::Value;

const ROUNDS: usize = 15;
/// Frames a round feeds each side: half updates, half events.
const CHUNKS: u64 = 20_000;
const SESSION: &str = "ses_0123456789abcdef";

/// A link's frames of one session's chunks, seqs 1.., with `update` and `event` as the methods.
fn stream(update: &str, event: &str) -> Vec<Vec<u8>> {
    let text =
        serde_json::to_string(&"a model's answer, streamed a few words at a time, ".repeat(2))
            .expect("a string serializes");
    (1..=CHUNKS)
        .map(|seq| {
            let frame = if seq % 2 == 1 {
                format!(
                    r#"{{"jsonrpc":"2.0","method":"{update}","params":{{"_meta":{{"lembas":{{"seq":{seq}}}}},"sessionId":"{SESSION}","update":{{"content":{{"text":{text},"type":"text"}},"sessionUpdate":"agent_message_chunk"}}}}}}"#
                )
            } else {
                format!(
                    r#"{{"jsonrpc":"2.0","method":"{event}","params":{{"_meta":{{"lembas":{{"seq":{seq}}}}},"event":{{"text":{text},"type":"text"}},"sessionId":"{SESSION}"}}}}"#
                )
            };
            frame.into_bytes()
        })
        .collect()
}

/// A client on a link to a device, ready, with no heartbeat.
fn ready() -> Client {
    let mut config = ClientConfig::default();
    config.liveness = None;
    let mut c = Client::new(config, Time::ZERO).expect("the default config is valid");
    c.handle_link_up(Time::ZERO);
    c.handle_frame(
        device_frames::hello(3, "2.0.0", "box")
            .to_string()
            .as_bytes(),
        Time::ZERO,
    );
    let mut init = None;
    while let Some(out) = c.poll_output() {
        if let ClientOutput::Send(f) = out {
            let f: Value = serde_json::from_slice(&f).expect("the client sends JSON");
            if f["method"] == "initialize" {
                init = Some(f);
            }
        }
    }
    let init = init.expect("initialize follows the hello");
    let answer = device_frames::initialize_answer(&init["id"], &["events"]);
    c.handle_frame(answer.to_string().as_bytes(), Time::ZERO);
    while c.poll_output().is_some() {}
    assert!(c.is_ready());
    c
}

/// Feed `frames` to `c`; the events it hands out, by kind: (typed, as a `Value`, other).
fn feed(c: &mut Client, frames: &[Vec<u8>]) -> (u64, u64, u64) {
    let mut kinds = (0, 0, 0);
    for f in frames {
        c.handle_frame(black_box(f), Time::ZERO);
        while let Some(out) = c.poll_output() {
            match out {
                ClientOutput::Event(ClientEvent::Update(_) | ClientEvent::Event(_)) => kinds.0 += 1,
                ClientOutput::Event(ClientEvent::Notification { .. }) => kinds.1 += 1,
                other => {
                    black_box(other);
                    kinds.2 += 1;
                }
            }
        }
    }
    kinds
}

/// ns per frame of one side's round.
fn time_round(side: usize, typed: &[Vec<u8>], untyped: &[Vec<u8>]) -> f64 {
    let n = typed.len() as f64;
    match side {
        0 => {
            let t = Instant::now();
            for f in typed {
                black_box(serde_json::from_slice::<Value>(black_box(f)).expect("JSON"));
            }
            t.elapsed().as_nanos() as f64 / n
        }
        _ => {
            let frames = if side == 1 { typed } else { untyped };
            let mut c = ready();
            let t = Instant::now();
            black_box(feed(&mut c, frames));
            t.elapsed().as_nanos() as f64 / n
        }
    }
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

fn main() {
    let started = Instant::now();
    let typed = stream("session/update", "_lembas/event");
    let untyped = stream("session/updatX", "_lembas/evenX");
    // Each side does what it claims: every frame is handed out, typed or as a `Value`.
    assert_eq!(feed(&mut ready(), &typed), (CHUNKS, 0, 0), "typed");
    assert_eq!(feed(&mut ready(), &untyped), (0, CHUNKS, 0), "untyped");
    let bytes: usize = typed.iter().map(Vec::len).sum();

    // Warm up, then alternate which side goes first.
    for side in 0..3 {
        time_round(side, &typed, &untyped);
    }
    let mut ns = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for k in 0..3 {
            let side = if round % 2 == 0 { k } else { 2 - k };
            ns[side].push(time_round(side, &typed, &untyped));
        }
    }
    let paired =
        |a: usize, b: usize| median(ns[a].iter().zip(&ns[b]).map(|(x, y)| x / y).collect());
    let (raw, typed_ns, untyped_ns) = (
        median(ns[0].clone()),
        median(ns[1].clone()),
        median(ns[2].clone()),
    );
    println!(
        "client: {CHUNKS} chunk frames a round ({} B each on average), median of {ROUNDS} rounds",
        bytes / CHUNKS as usize
    );
    println!("{:<34} {:>10} {:>10}", "side", "ns/frame", "/ raw");
    println!(
        "{:<34} {:>10.0} {:>10.3}",
        "raw (serde_json Value)", raw, 1.0
    );
    println!(
        "{:<34} {:>10.0} {:>10.3}",
        "client, typed (typed-events)",
        typed_ns,
        paired(1, 0)
    );
    println!(
        "{:<34} {:>10.0} {:>10.3}",
        "client, untyped (Value handed out)",
        untyped_ns,
        paired(2, 0)
    );
    println!(
        "typing costs {:.0} ns a frame; typed / untyped (paired) = {:.3}",
        typed_ns - untyped_ns,
        paired(1, 2)
    );
    println!("({:.1} s)", started.elapsed().as_secs_f64());
}
