//! The interleaved ratio of the core alone, in this process: 100 sessions streaming 1,000
//! chunks of 64 B at once against one session streaming 100,000, through the device and the
//! scripted engine joined by the host loop; every frame taken and dropped, every persist
//! acknowledged at once. No process, pipe, thread or store, so what is left of the gap is the
//! core's own, and a trial takes a second, not ten (issue 16's target is 0.8 end to end: the
//! `interleaved-*` benches of `lembas`).
//! Run: `cargo bench -p lembas-core --bench interleaved` (`LEMBAS_BENCH_TRIALS`, default 11).

use std::time::Instant;

use lembas_core::device::{ConnKind, Device, Effect};
use lembas_core::host::{Host, ShellOutput};
use lembas_core::scripted::ScriptedEngine;
use lembas_core::{DeviceConfig, Time};

/// Everything the host has to give, as a shell that does it at once would; the frames sent,
/// and the ids of the sessions made.
fn settle(host: &mut Host<ScriptedEngine>, made: &mut Vec<String>) -> usize {
    let mut frames = 0;
    while let Some(out) = host.poll_output(Time(1), |_| false) {
        match out {
            ShellOutput::Send { frame, .. } => {
                frames += 1;
                // Only answers are parsed (a chunk is a notification).
                if frame.starts_with(br#"{"jsonrpc":"2.0","id":"#) {
                    let v: serde_json::Value = serde_json::from_slice(&frame).unwrap();
                    if let Some(s) = v["result"]["sessionId"].as_str() {
                        made.push(s.to_owned());
                    }
                }
            }
            ShellOutput::Effect(Effect::Persist { seq, .. }) => {
                host.device_mut().handle_persisted(seq, Time(1))
            }
            ShellOutput::Effect(Effect::ResolvePath { request, path }) => host
                .device_mut()
                .handle_path_resolved(request, Ok(path), Time(1)),
            _ => {}
        }
    }
    frames
}

/// Chunks a second: `sessions` prompted at once, each streaming `each` chunks of 64 B; the
/// better of two rounds (the second finds the first's logs full).
fn run(sessions: usize, each: usize) -> f64 {
    let device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
    let mut host = Host::new(device, ScriptedEngine::new());
    let stdio = host
        .device_mut()
        .handle_open(ConnKind::Stdio, Time(0))
        .unwrap();
    let mut ids = Vec::new();
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    host.device_mut()
        .handle_frame(stdio, init, Time(1))
        .unwrap();
    settle(&mut host, &mut ids);
    for i in 0..sessions {
        let new = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"session/new","params":{{"cwd":"/w/p","mcpServers":[]}}}}"#,
            i + 1
        );
        host.device_mut()
            .handle_frame(stdio, new.as_bytes(), Time(1))
            .unwrap();
        settle(&mut host, &mut ids);
    }
    assert_eq!(ids.len(), sessions, "every session was made");
    let mut best = 0f64;
    for round in 0..2 {
        let start = Instant::now();
        for (i, s) in ids.iter().enumerate() {
            let prompt = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"session/prompt","params":{{"sessionId":"{s}","prompt":[{{"type":"text","text":"chunks {each} 64"}}],"_meta":{{"lembas":{{"turnId":"msg_{round}"}}}}}}}}"#,
                10_000 * (round + 1) + i
            );
            host.device_mut()
                .handle_frame(stdio, prompt.as_bytes(), Time(1))
                .unwrap();
        }
        let frames = settle(&mut host, &mut Vec::new());
        // An update a chunk (an editor that asked for no `_lembas/event`), and the answers.
        assert!(
            frames > sessions * each,
            "{frames} frames for {} chunks",
            sessions * each
        );
        best = best.max((sessions * each) as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let trials: usize = std::env::var("LEMBAS_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(11);
    let (mut ones, mut manys, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // The two sides in turn, so a machine that slows down slows both.
    for _ in 0..trials {
        let one = run(1, 100_000);
        let many = run(100, 1_000);
        ones.push(one);
        manys.push(many);
        ratios.push(many / one);
    }
    for v in [&mut ones, &mut manys, &mut ratios] {
        v.sort_by(f64::total_cmp);
    }
    let m = trials / 2;
    println!(
        "interleaved, the core alone ({trials} trials, medians): 100 sessions x 1,000 chunks of \
         64 B at once {:.0} chunks/s, one session x 100,000 {:.0} chunks/s; ratio {:.2} \
         ({:.2}-{:.2})",
        manys[m],
        ones[m],
        ratios[m],
        ratios[0],
        ratios[trials - 1]
    );
}
