//! The turn ledger at scale: a device holding 1,000 sessions with full 200-turn ledgers
//! (answers of about 200 bytes), rebuilt from its store. Reports the heap bytes per ledger
//! entry (counted by a wrapping allocator, against the same device with empty ledgers) and the
//! median time of a dedup check. Targets: O(1), median under 1 µs; at most 64 MiB in all.
//! Run: `cargo bench -p lembas-core --bench ledger`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use lembas_core::device::{Answer, Device};
use lembas_core::engine::StopReason;
use lembas_core::store::{self, Entry, SessionRecord, StoredTurnState, Table, TurnRecord};
use lembas_core::wire::session::TurnNotes;
use lembas_core::{DeviceConfig, Mode, Time};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Relaxed);
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const SESSIONS: usize = 1_000;
const TURNS: usize = 200;

fn entries(turns: usize) -> Vec<Entry> {
    let mut out = Vec::new();
    for s in 0..SESSIONS {
        let id = format!("ses_{s:020}");
        let rec = SessionRecord {
            id: id.clone(),
            cwd: "/home/dev/work/app".into(),
            root: "/home/dev/work".into(),
            title: Some(format!("session {s}")),
            mode: Mode::Edit,
            model: Some("lembas/default".into()),
            effort: None,
            instance: true,
            touched: 1_000,
            plan: None,
            given: true,
            context: Default::default(),
            seq_next: 0,
            compaction: None,
            undoing: None,
            events_floor: None,
        };
        out.push(Entry {
            table: Table::Sessions,
            key: id.clone(),
            value: serde_json::to_string(&rec).unwrap(),
        });
        for t in 0..turns {
            let turn = format!("msg_{s:06}_{t:06}_0123456789");
            // ~200 bytes of answer, as a turn with a note and unsent steer messages has.
            let notes = TurnNotes {
                message: Some("m".repeat(120)),
                unsent: vec!["one more thing".into(), "and this".into()],
                ..TurnNotes::default()
            };
            let rec = TurnRecord {
                order: t as u64,
                state: StoredTurnState::Done {
                    answer: Answer::stopped(StopReason::EndTurn, notes),
                },
                touched: 1_000,
                history: Some(t as u64 * 2),
            };
            out.push(Entry {
                table: Table::Turns,
                key: store::turn_key(&id, &turn),
                value: serde_json::to_string(&rec).unwrap(),
            });
        }
    }
    out
}

/// A restored device and the heap it holds (the store entries it was built from are consumed
/// and freed by then, so only the device's own memory is counted).
fn build(turns: usize) -> (Device, usize) {
    let before = LIVE.load(Relaxed);
    let (device, bad) =
        Device::restore(DeviceConfig::default(), entries(turns), Time(2_000)).unwrap();
    assert!(bad.is_empty());
    // The restore's own persist effects (none for done turns) are not the device's memory.
    let after = LIVE.load(Relaxed);
    (device, after.saturating_sub(before))
}

fn main() {
    let (empty, empty_bytes) = build(0);
    drop(empty);
    let (device, full_bytes) = build(TURNS);
    assert_eq!(device.session_count(), SESSIONS);
    let ledger_bytes = full_bytes - empty_bytes;
    let n = SESSIONS * TURNS;
    println!("ledgers: {SESSIONS} sessions x {TURNS} turns = {n} entries");
    println!(
        "ledger heap: {:.1} MiB in all, {} bytes per entry (target: at most 64 MiB)",
        ledger_bytes as f64 / (1024.0 * 1024.0),
        ledger_bytes / n
    );

    // Dedup checks: hits spread over all sessions, and misses.
    let keys: Vec<(String, String)> = (0..4096)
        .map(|i| {
            let s = (i * 7919) % SESSIONS;
            let t = (i * 104_729) % (TURNS + 20); // some past the end: misses
            (
                format!("ses_{s:020}"),
                format!("msg_{s:06}_{t:06}_0123456789"),
            )
        })
        .collect();
    let mut samples = Vec::new();
    for _ in 0..41 {
        let start = Instant::now();
        let mut hits = 0usize;
        for (s, t) in &keys {
            hits += device.turn_state(black_box(s), black_box(t)).is_some() as usize;
        }
        black_box(hits);
        samples.push(start.elapsed().as_nanos() as f64 / keys.len() as f64);
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "dedup check: median {:.0} ns (min {:.0}, max {:.0}) over {} lookups a sample (target: under 1000 ns)",
        samples[samples.len() / 2],
        samples[0],
        samples[samples.len() - 1],
        keys.len()
    );
}
