//! Many seeded runs of prompts, duplicates and retries over a faulty link (frames dropped,
//! duplicated and reordered, the link cut, the device restarted from its store): every turn id
//! runs on the engine at most once, and every prompt the client retries to the end gets exactly
//! the original answer.

use std::collections::BTreeMap;

use lembas_core::client::ClientEvent;
use lembas_core::rng::Rng;
use lembas_core::testing::{Faults, Pair};
use lembas_core::{ClientConfig, DeviceConfig};
use serde_json::{json, Value};

mod property;

fn session(p: &mut Pair) -> String {
    let id = p
        .client
        .call("session/new", &json!({ "cwd": "/home/dev/work" }), p.now)
        .unwrap();
    p.settle().unwrap();
    p.client_events
        .iter()
        .find_map(|e| match e {
            ClientEvent::Answer {
                id: i,
                outcome: Ok(v),
                ..
            } if *i == id => Some(v["sessionId"].as_str().unwrap().to_string()),
            _ => None,
        })
        .expect("session/new answered")
}

fn run(seed: u64) {
    let mut d = DeviceConfig::default();
    d.remote.enabled = true;
    d.remote.roots = vec!["/home/dev/work".into()];
    d.remote.trusted = d.remote.roots.clone();
    d.seed = seed;
    let mut c = ClientConfig::default();
    c.seed = seed.wrapping_add(1);
    let mut p = Pair::new(d, c, Faults::none(), seed);
    let mut rng = Rng::new(seed.wrapping_mul(31));
    p.start().unwrap();
    let sessions = [session(&mut p), session(&mut p)];
    p.faults = Faults {
        drop_permille: 30,
        duplicate_permille: 50,
        max_delay_ms: 40,
        cut_permille: 15,
        drop_only_to_device: false,
    };
    let mut turns: Vec<(String, String, String)> = Vec::new();
    for step in 0..40 {
        match rng.below(10) {
            0..=4 => {
                let s = sessions[rng.below(2) as usize].clone();
                let turn = format!("t{step}");
                let text = format!("say {turn}\nsleep {}\nsay end", rng.below(300));
                if p.client.is_ready() {
                    let _ = p.client.prompt(
                        &s,
                        json!([{ "type": "text", "text": text }]),
                        Some(&turn),
                        p.now,
                    );
                }
                turns.push((s, turn, text));
            }
            5 | 6 if !turns.is_empty() => {
                let (s, t, text) = turns[rng.below(turns.len() as u64) as usize].clone();
                if p.client.is_ready() {
                    let _ = p.client.prompt(
                        &s,
                        json!([{ "type": "text", "text": text }]),
                        Some(&t),
                        p.now,
                    );
                }
            }
            7 => p.cut().unwrap(),
            8 if rng.below(3) == 0 => p.restart_device().unwrap(),
            _ => {}
        }
        p.advance(rng.below(200)).unwrap();
    }
    // Retry to the end: a clean link, then every turn sent again until answered.
    p.faults = Faults::none();
    p.cut().unwrap();
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready(), "seed {seed}: the device linked again");
    for (s, t, text) in &turns {
        p.client
            .prompt(s, json!([{ "type": "text", "text": text }]), Some(t), p.now)
            .unwrap();
    }
    p.advance(60_000).unwrap();

    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &p.started {
        *runs.entry(t.turn_id.as_str()).or_default() += 1;
    }
    for (turn, n) in &runs {
        assert!(*n <= 1, "seed {seed}: turn {turn} ran {n} times");
    }
    let mut answers: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in &p.client_events {
        if let ClientEvent::PromptAnswered {
            turn_id, outcome, ..
        } = e
        {
            let v = outcome
                .clone()
                .unwrap_or_else(|e| json!({ "error": e.message }));
            answers.entry(turn_id.clone()).or_default().push(v);
        }
    }
    for (_, t, _) in &turns {
        let got = answers
            .get(t)
            .unwrap_or_else(|| panic!("seed {seed}: {t} never answered"));
        assert!(
            got.windows(2).all(|w| w[0] == w[1]),
            "seed {seed}: {t} got different answers: {got:?}"
        );
    }
}

/// 200 seeds, or as `property::seeds` says (`LEMBAS_PROPERTY_SEEDS`, `LEMBAS_PROPERTY_SEED_OFFSET`,
/// `LEMBAS_PROPERTY_SEED`).
#[test]
fn turns_run_at_most_once_and_retries_get_the_original_answer() {
    if let Some(seed) = property::seeds(&[], 200, run) {
        run(seed);
    }
}
