//! `cargo bench -p lembas --bench hub`: issue 17's cost of reaching the running service through
//! its hub. An editor's `serve --stdio` either owns the store itself (direct: no service runs)
//! or relays every line to `lembas link`'s hub socket and back (hub). On the same HOME, one after
//! the other: the time from a prompt's write to its first chunk's arrival, for `ROUNDS` turns
//! (`say x` on the scripted engine) after `WARMUP`, `RUNS` times each, alternating. That round
//! trip crosses the relay twice (the prompt in, the chunk out), so its added p99 bounds the
//! added latency of a chunk from the engine to the editor from above. Printed over every sample
//! and over each turn's least of the runs (as the `model` bench does). Target: the added p99
//! under 2 ms.

use std::time::{Duration, Instant};

use serde_json::json;

#[path = "../tests/common/mod.rs"]
mod common;

use common::Home;

const ROUNDS: usize = 400;
const WARMUP: usize = 40;
const TARGET_ADDED_P99: Duration = Duration::from_millis(2);
/// Runs of each side, alternating.
const RUNS: usize = 3;

fn main() {
    // `cargo bench` passes `--bench`; a filter word that is not part of this bench's name
    // skips it.
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if only.is_some_and(|o| !"hub".contains(o.as_str())) {
        return;
    }
    smol::block_on(async {
        let instance = common::instance().await;
        let mut home = Home::new();
        home.log_level = "warn";
        assert!(home.login(&instance.url()).status.success());
        let (mut direct, mut hub) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            direct.push(round_trips(&home));
            let device = home.link();
            common::ready(&instance).await;
            hub.push(round_trips(&home));
            drop(device);
        }
        println!(
            "hub: prompt → first chunk, {RUNS} runs of each alternating, {ROUNDS} turns a run \
             (after {WARMUP})"
        );
        for (name, figures) in [
            (
                "every sample",
                Figures::pooled as fn(&[Vec<Duration>]) -> Figures,
            ),
            ("least of the runs", Figures::least),
        ] {
            let (d, h) = (figures(&direct), figures(&hub));
            let added = h.p99.saturating_sub(d.p99);
            println!("  {name}:");
            println!("    direct (serve --stdio owns the store): {d}");
            println!("    through the hub (relayed to lembas link): {h}");
            println!(
                "    added p99 {:.3} ms (target under {} ms: {})",
                ms(added),
                TARGET_ADDED_P99.as_millis(),
                if added < TARGET_ADDED_P99 {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
    });
}

/// One editor's `ROUNDS` round trips, after `WARMUP`.
fn round_trips(home: &Home) -> Vec<Duration> {
    let mut e = home.editor();
    e.initialize();
    let session = e.new_session(&home.work.join("proj"));
    let mut took = Vec::with_capacity(ROUNDS);
    for round in 0..WARMUP + ROUNDS {
        let id = json!(2 + round);
        let start = Instant::now();
        e.send(
            &json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{ "type": "text", "text": "say x" }] } }),
        );
        let mut first = None;
        loop {
            let m = e.recv();
            if first.is_none() && m["method"] == "session/update" {
                first = Some(start.elapsed());
            }
            if m["id"] == id && m.get("method").is_none() {
                assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
                break;
            }
        }
        if round >= WARMUP {
            took.push(first.expect("the turn sent a chunk"));
        }
    }
    took
}

struct Figures {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Figures {
    /// Over every run's samples.
    fn pooled(runs: &[Vec<Duration>]) -> Figures {
        Figures::of(runs.concat())
    }

    /// Over each turn's least time of the runs (the n-th turn of every run is the same work):
    /// this filters the scheduler slices a busy machine takes from one run and not the others.
    fn least(runs: &[Vec<Duration>]) -> Figures {
        Figures::of(
            (0..ROUNDS)
                .map(|i| runs.iter().map(|r| r[i]).min().expect("runs"))
                .collect(),
        )
    }

    fn of(mut d: Vec<Duration>) -> Figures {
        d.sort();
        let at = |q: f64| d[((d.len() as f64 * q) as usize).min(d.len() - 1)];
        Figures {
            p50: at(0.50),
            p99: at(0.99),
            max: d[d.len() - 1],
        }
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(self.p50),
            ms(self.p99),
            ms(self.max)
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
