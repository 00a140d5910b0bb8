//! Many seeded runs of turns streaming in two sessions over a faulty link (the client's frames
//! dropped, frames duplicated, the link cut, the device restarted from its store, its event log
//! sometimes too short to reach back over a cut): the text the client's UI assembles for each turn is the
//! turn's whole text, no chunk missing or doubled. Where the log no longer reached back, the
//! client said so (`Gap`) and the UI's import of `history` has the whole turn.
//!
//! The UI here is the simplest a web UI could be: it appends every `agent_message_chunk` it is
//! handed to the turn the chunk names, and on a `Gap` (or a turn imported on reattach) takes
//! the session's turns from `history` instead. The `_lembas/event` texts it is handed, the
//! same chunks in the other stream, are held to the same.
//!
//! And the same with the link's writer behind its pause mark (a small mark, chunks said in
//! runs with no pause between): each session's runs of chunks merge per stream
//! (device/coalesce.rs), and the client's per-stream seqs still lose and double nothing.

use std::collections::{BTreeMap, BTreeSet};

use lembas_core::client::{event_json, ClientEvent, Reattach};
use lembas_core::rng::Rng;
use lembas_core::testing::{Faults, Pair};
use lembas_core::{ClientConfig, DeviceConfig};
use serde_json::{json, Value};

mod property;

const ROOT: &str = "/home/dev/work";

/// A turn the client sent: its session and how many chunks its script says.
struct Sent {
    session: usize,
    chunks: usize,
}

/// The `i`th chunk of turn `turn`: unique across the run, so a doubled chunk shows.
fn chunk(turn: &str, i: usize) -> String {
    format!("{turn}.{i};")
}

/// A script saying `chunks` chunks, a random pause after each (with `runs`, mostly none: the
/// chunks come in runs a writer behind merges).
fn script(turn: &str, chunks: usize, runs: bool, rng: &mut Rng) -> String {
    (0..chunks)
        .map(|i| {
            let pause = if runs && rng.below(3) > 0 {
                0
            } else {
                rng.below(120)
            };
            format!("say {}\nsleep {pause}", chunk(turn, i))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each turn's chunk numbers as the UI was handed them, in order: of the `session/update`
/// chunks, or with `events` of the `_lembas/event` texts.
fn live_view(p: &Pair, events: bool) -> BTreeMap<String, Vec<usize>> {
    let mut view: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for e in p.client_events.iter().map(event_json) {
        let text = if events {
            if e["method"] != "_lembas/event" || e["params"]["event"]["type"] != "text" {
                continue;
            }
            &e["params"]["event"]["text"]
        } else {
            if e["method"] != "session/update"
                || e["params"]["update"]["sessionUpdate"] != "agent_message_chunk"
            {
                continue;
            }
            &e["params"]["update"]["content"]["text"]
        };
        let text = text.as_str().unwrap();
        for piece in text.split_terminator(';') {
            let (turn, i) = piece.split_once('.').expect("a chunk names its turn");
            view.entry(turn.to_string())
                .or_default()
                .push(i.parse().unwrap());
        }
    }
    view
}

/// The chunk numbers in `text` (an answer from `history`) of `turn`.
fn numbers(turn: &str, text: &str) -> Vec<usize> {
    text.split_terminator(';')
        .map(|piece| {
            let (t, i) = piece.split_once('.').expect("a chunk names its turn");
            assert_eq!(t, turn, "history's answer of {turn} says {text}");
            i.parse().unwrap()
        })
        .collect()
}

/// The answers in `history` turns, by the turn id of the user turn before each.
fn answers(turns: &[Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut user = None;
    for t in turns {
        if t["role"] == "user" {
            user = t["turnId"].as_str().map(String::from);
        } else if let Some(u) = user.take() {
            out.insert(u, t["text"].as_str().unwrap_or("").to_string());
        }
    }
    out
}

/// How the link's writer goes: every frame as it comes, or behind its pause mark.
#[derive(Clone, Copy, PartialEq)]
enum Writer {
    Plain,
    Behind,
}

fn run(seed: u64, verbose: bool, writer: Writer) -> Tally {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9));
    let mut d = DeviceConfig::default();
    d.remote.enabled = true;
    d.remote.roots = vec![ROOT.into()];
    d.remote.trusted = d.remote.roots.clone();
    d.seed = seed;
    // A third of the runs keep a log too short for most cuts.
    let short_log = rng.below(3) == 0;
    if short_log {
        d.sessions.event_log_events = 4 + rng.below(30) as usize;
    }
    let mut c = ClientConfig::default();
    c.seed = seed.wrapping_add(1);
    let mut p = Pair::new(d, c, Faults::none(), seed);
    let runs = writer == Writer::Behind;
    if runs {
        // Merging from the first byte queued, or only past a few frames.
        p.link_merge_at = Some(rng.below(3) as usize * 400);
    }
    p.start().unwrap();
    let sessions = [p.new_session(ROOT), p.new_session(ROOT)];
    p.faults = Faults {
        drop_permille: rng.below(20) as u32,
        duplicate_permille: rng.below(80) as u32,
        // A link carries its frames in order: a delay is the same for all.
        max_delay_ms: 0,
        // Behind its mark, more cuts: one amid a burst, between a session's merged update and
        // its merged event, is what the client's per-stream seqs are for.
        cut_permille: rng.below(if runs { 40 } else { 8 }) as u32,
        drop_only_to_device: true,
    };
    let mut sent: BTreeMap<String, Sent> = BTreeMap::new();
    for step in 0..30 {
        match rng.below(10) {
            0..=3 => {
                let session = rng.below(2) as usize;
                let turn = format!("t{step}");
                let chunks = 1 + rng.below(12) as usize;
                let text = script(&turn, chunks, runs, &mut rng);
                if p.client.is_ready() {
                    p.prompt_text(&sessions[session], &turn, &text);
                    sent.insert(turn, Sent { session, chunks });
                }
            }
            4 | 5 => {
                p.reachable = false;
                p.cut().unwrap();
                p.advance(rng.below(2_000)).unwrap();
                p.reachable = true;
            }
            6 if rng.below(3) == 0 => p.restart_device().unwrap(),
            _ => {}
        }
        p.advance(rng.below(300)).unwrap();
    }
    // A clean link to the end: every incomplete turn is reattached, every session caught up.
    p.faults = Faults::none();
    p.cut().unwrap();
    p.advance(120_000).unwrap();
    p.settle().unwrap();
    assert!(p.client.is_ready(), "seed {seed}: linked again");

    let live = live_view(&p, false);
    let live_events = live_view(&p, true);
    let mut gapped = BTreeSet::new();
    // Turns imported on reattach: whether history had their answer.
    let mut imported = BTreeMap::new();
    let mut ended: BTreeMap<String, String> = BTreeMap::new();
    for e in &p.client_events {
        match e {
            ClientEvent::Gap { session_id, .. } => {
                gapped.insert(session_id.clone());
            }
            ClientEvent::Reattached {
                turn_id,
                how: Reattach::Imported(turns),
                ..
            } => {
                let answered = turns.iter().any(|t| t["role"] == "assistant");
                imported.insert(turn_id.clone(), answered);
            }
            ClientEvent::PromptAnswered {
                turn_id,
                outcome: Ok(v),
                ..
            } => {
                let stop = v["stopReason"].as_str().unwrap_or("").to_string();
                ended.insert(turn_id.clone(), stop);
            }
            _ => {}
        }
    }
    if verbose {
        for e in &p.client_events {
            eprintln!("{}", event_json(e));
        }
        eprintln!("gapped {gapped:?} imported {imported:?} ended {ended:?}");
    }
    // What the UI imports: the history of every session it was told a gap of, or that a
    // turn of was imported on reattach.
    let mut from_history: BTreeMap<String, String> = BTreeMap::new();
    for (i, s) in sessions.iter().enumerate() {
        let needed = gapped.contains(s)
            || sent
                .iter()
                .any(|(t, x)| x.session == i && imported.contains_key(t));
        if needed {
            let h = p
                .call("_lembas/session/history", json!({ "sessionId": s }))
                .unwrap_or_else(|e| panic!("seed {seed}: history of {s}: {e:?}"));
            from_history.extend(answers(h["turns"].as_array().unwrap()));
        }
    }

    let mut tally = Tally::default();
    for (turn, x) in &sent {
        let session = &sessions[x.session];
        let whole: Vec<usize> = (0..x.chunks).collect();
        let seen = live.get(turn).cloned().unwrap_or_default();
        let seen_events = live_events.get(turn).cloned().unwrap_or_default();
        // Live, whatever happened: in order, and never twice, in either stream.
        for seen in [&seen, &seen_events] {
            assert!(
                seen.windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: {turn} was handed out of order or twice: {seen:?}"
            );
        }
        assert!(
            ended.contains_key(turn) || imported.contains_key(turn),
            "seed {seed}: {turn} never reached its end in the UI"
        );
        // Cut short by a restart of the device (it never runs a turn twice): answered as
        // cancelled, or in history without an answer. There is no more to have.
        let cut_short =
            ended.get(turn).is_some_and(|s| s == "cancelled") || imported.get(turn) == Some(&false);
        let got = match from_history.get(turn) {
            Some(text) if gapped.contains(session) || imported.contains_key(turn) => {
                tally.from_history += 1;
                numbers(turn, text)
            }
            _ => seen.clone(),
        };
        if !gapped.contains(session) {
            // No gap told: both streams, fetched or live, say the same, and all of the turn
            // (all it said, cut short), whether or not the UI took it from history too.
            assert_eq!(
                seen_events, seen,
                "seed {seed}: {turn}'s two streams differ"
            );
            if !cut_short {
                assert_eq!(seen, whole, "seed {seed}: {turn} is not whole live");
            }
        }
        if cut_short {
            tally.cut_short += 1;
            // What it said before the restart, all of it unless the client told a gap (then
            // history, which keeps no answer of a turn cut short, has nothing to fill it).
            assert!(
                whole.starts_with(&got) || gapped.contains(session),
                "seed {seed}: {turn}, cut short, has {got:?}"
            );
        } else {
            tally.whole += 1;
            assert_eq!(got, whole, "seed {seed}: {turn} is not whole");
        }
    }
    tally.gaps = gapped.len();
    tally.short_log = usize::from(short_log);
    // Frames the client heard holding more than one chunk.
    tally.merged = p
        .frames_to_client()
        .iter()
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .filter(|t| t.matches(';').count() > 1)
        .count();
    tally
}

#[derive(Default, Debug)]
struct Tally {
    whole: usize,
    cut_short: usize,
    from_history: usize,
    gaps: usize,
    short_log: usize,
    merged: usize,
}

/// Seeds that once failed: the client did not follow a session it prompted until it heard
/// an event of it, so a cut before the first lost the turn's start; a turn cut short by a
/// restart after a gap in its session (a hole the client told, not a prefix).
const KNOWN: [u64; 2] = [16695619090558418261, 9833136402283605995];

/// 100 seeds, or as `property::seeds` says (`LEMBAS_PROPERTY_SEEDS`,
/// `LEMBAS_PROPERTY_SEED_OFFSET`, `LEMBAS_PROPERTY_SEED`).
#[test]
fn every_turn_reaches_the_ui_whole_or_is_recovered_from_history() {
    seeds(&KNOWN, Writer::Plain);
}

/// The same with the link's writer behind its pause mark: chunks merged per stream.
#[test]
fn every_turn_reaches_the_ui_whole_with_the_links_chunks_merged() {
    seeds(&[], Writer::Behind);
}

fn seeds(known: &[u64], writer: Writer) {
    let mut total = Tally::default();
    let mut runs = 0;
    let replay = property::seeds(known, 100, |seed| {
        let t = run(seed, false, writer);
        runs += 1;
        total.whole += t.whole;
        total.cut_short += t.cut_short;
        total.from_history += t.from_history;
        total.gaps += t.gaps;
        total.short_log += t.short_log;
        total.merged += t.merged;
    });
    if let Some(seed) = replay {
        run(seed, true, writer);
        return;
    }
    eprintln!("{runs} runs: {total:?}");
    if runs >= 50 {
        // Every way a turn reaches the UI was tried; behind its mark, the writer merged.
        assert!(total.whole > 0 && total.gaps > 0 && total.from_history > 0);
        assert_eq!(total.merged > 0, writer == Writer::Behind, "{total:?}");
    }
}
