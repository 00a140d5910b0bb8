//! The `turn_table` driver: one session's [`TurnTable`] alone (quinn-proto's way of fuzzing a
//! sub-state), driven by prompts, retries, attachment writes, starts, cancels, ends, dropped
//! connections and pruning, against a model of what each prompt request must get. Far from
//! the device's frames and shell, the fuzzer reaches the table's corners in a few operations.
//!
//! The promises checked after every operation:
//! - a turn id the ledger still holds never starts twice, and turns start in the order they
//!   were accepted, one at a time, only once their attachments are written;
//! - every prompt request gets exactly one answer (the turn's, a refusal, or nothing because
//!   its connection went away), and a retry of a finished turn gets the answer the first got;
//! - a queued or running turn is never forgotten by the ledger, whatever its capacity.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use arbitrary::{Arbitrary, Unstructured};

use crate::device::turn_table::{Admission, Seen, TurnTable};
use crate::device::ConnId;
use crate::engine::{StopReason, TurnStart};
use crate::jsonrpc::Id;
use crate::turn::Answer;

/// At most this many operations are read from one input.
const MAX_TABLE_OPS: usize = 512;

/// Turn ids come from a small set, so retries and reuse after forgetting are common.
const TURN_IDS: u8 = 6;
const CONNS: u8 = 3;

#[derive(Arbitrary, Debug)]
enum Op {
    /// A prompt with this turn id arrives on a connection, with some attachments to write.
    Prompt {
        turn: u8,
        conn: u8,
        attachments: u8,
    },
    /// The shell wrote (or failed to write) the `pick`-th attachment still pending.
    Written {
        pick: u8,
    },
    Unwritten {
        pick: u8,
    },
    /// The device starts the next turn if it may.
    StartNext,
    Cancel,
    /// The engine ends the running turn.
    Finish {
        reason: Reason,
    },
    ForgetConnection {
        conn: u8,
    },
    /// A prune of an idle session's ledger.
    ForgetLedger {
        capacity: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Reason {
    EndTurn,
    MaxTokens,
    Failed,
}

/// What the model expects of the table.
struct Model {
    /// Every request sent and not yet answered: `(conn, request number)` by turn id.
    waiting: BTreeMap<String, BTreeSet<(u64, u64)>>,
    /// Accepted turns not started yet, in order, with the attachment writes each waits for.
    queue: VecDeque<(String, BTreeSet<u64>)>,
    running: Option<String>,
    /// Finished turns the ledger still holds, and their answers.
    done: BTreeMap<String, Answer>,
    /// Ids started since the ledger last forgot them.
    started: BTreeSet<String>,
    next_request: u64,
    next_write: u64,
}

/// Drive a `TurnTable` through operations read from `data`; panics on a broken promise.
pub fn turn_table(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(capacity) = u8::arbitrary(&mut u) else {
        return;
    };
    // A small ledger, so eviction is reached (only finished turns may be evicted).
    let capacity = usize::from(capacity % 8) + 1;
    let mut table = TurnTable::new(capacity);
    let mut m = Model {
        waiting: BTreeMap::new(),
        queue: VecDeque::new(),
        running: None,
        done: BTreeMap::new(),
        started: BTreeSet::new(),
        next_request: 0,
        next_write: 0,
    };
    for _ in 0..MAX_TABLE_OPS {
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        step(&mut table, &mut m, op);
        check(&table, &m);
    }
}

fn start(turn: &str) -> TurnStart {
    TurnStart::testing(turn, "")
}

/// The answered requests, as the model keys them.
fn keys(waiters: &[(ConnId, Id)]) -> BTreeSet<(u64, u64)> {
    waiters
        .iter()
        .map(|(c, id)| {
            (
                c.0,
                id.as_json().parse().expect("the driver's ids are numbers"),
            )
        })
        .collect()
}

fn step(table: &mut TurnTable, m: &mut Model, op: Op) {
    match op {
        Op::Prompt {
            turn,
            conn,
            attachments,
        } => {
            let turn = format!("t{}", turn % TURN_IDS);
            let conn = u64::from(conn % CONNS);
            let request = m.next_request;
            m.next_request += 1;
            let waiter = (ConnId(conn), Id::number(request));
            match table.seen(&turn, waiter.clone()) {
                Seen::Done(answer) => {
                    let first = m.done.get(&turn);
                    assert_eq!(
                        Some(answer),
                        first,
                        "a retry of finished turn {turn} gets the answer the first request got"
                    );
                }
                Seen::Waiting => {
                    let pending = m.running.as_ref() == Some(&turn)
                        || m.queue.iter().any(|(t, _)| *t == turn);
                    assert!(
                        pending,
                        "{turn} is waited for, but it is not queued or running"
                    );
                    m.waiting.entry(turn).or_default().insert((conn, request));
                }
                Seen::New => {
                    assert!(
                        !m.done.contains_key(&turn)
                            && m.running.as_ref() != Some(&turn)
                            && !m.queue.iter().any(|(t, _)| *t == turn),
                        "{turn} is known to the ledger but was taken for a new turn"
                    );
                    let writes: BTreeSet<u64> = (0..attachments % 3)
                        .map(|_| {
                            m.next_write += 1;
                            m.next_write
                        })
                        .collect();
                    let admission = Admission {
                        writing: writes.iter().copied().collect(),
                        ..Admission::default()
                    };
                    let (_, forgotten) = table.admit(start(&turn), admission, waiter);
                    for id in forgotten {
                        assert!(
                            m.done.remove(&id).is_some(),
                            "the ledger forgot {id}, which had not finished"
                        );
                        m.started.remove(&id);
                    }
                    m.waiting
                        .entry(turn.clone())
                        .or_default()
                        .insert((conn, request));
                    m.queue.push_back((turn, writes));
                }
            }
        }
        Op::Written { pick } | Op::Unwritten { pick } => {
            let pending: Vec<u64> = m
                .queue
                .iter()
                .flat_map(|(_, w)| w.iter().copied())
                .collect();
            let Some(&write) = pending.get(usize::from(pick) % pending.len().max(1)) else {
                return;
            };
            let pos = m
                .queue
                .iter()
                .position(|(_, w)| w.contains(&write))
                .unwrap_or_default();
            if matches!(op, Op::Written { .. }) {
                assert!(table.written(write), "write {write} was waited for");
                m.queue[pos].1.remove(&write);
            } else {
                let refused = table
                    .refuse_unwritten(write)
                    .expect("a queued turn waited for the write");
                let (turn, _) = m.queue.remove(pos).unwrap_or_default();
                let expected = m.waiting.remove(&turn).unwrap_or_default();
                assert_eq!(
                    keys(&refused),
                    expected,
                    "a refused prompt {turn} answers exactly the requests waiting for it"
                );
                m.started.remove(&turn);
            }
        }
        Op::StartNext => {
            let may = m.running.is_none() && m.queue.front().is_some_and(|(_, w)| w.is_empty());
            match table.start_next() {
                Some((start, _)) => {
                    assert!(may, "{} started while it may not", start.turn_id);
                    let (turn, _) = m.queue.pop_front().unwrap_or_default();
                    assert_eq!(start.turn_id, turn, "turns start in the order accepted");
                    assert!(
                        m.started.insert(turn.clone()),
                        "turn {turn} started twice while the ledger held it"
                    );
                    m.running = Some(turn);
                }
                None => assert!(!may, "the next turn may start but did not"),
            }
        }
        Op::Cancel => {
            let _ = table.cancel();
        }
        Op::Finish { reason } => {
            let outcome = match reason {
                Reason::EndTurn => Ok(StopReason::EndTurn),
                Reason::MaxTokens => Ok(StopReason::MaxTokens),
                Reason::Failed => Err("boom".to_string()),
            };
            match table.finish(outcome) {
                Some(f) => {
                    let turn = m.running.take().expect("a turn was running");
                    assert_eq!(f.running.turn_id, turn);
                    let expected = m.waiting.remove(&turn).unwrap_or_default();
                    assert_eq!(
                        keys(&f.waiting),
                        expected,
                        "turn {turn}'s answer goes to exactly the requests waiting for it"
                    );
                    m.done.insert(turn, f.answer);
                }
                None => assert!(m.running.is_none(), "the running turn did not finish"),
            }
        }
        Op::ForgetConnection { conn } => {
            let conn = u64::from(conn % CONNS);
            table.forget_connection(ConnId(conn));
            for waiting in m.waiting.values_mut() {
                waiting.retain(|(c, _)| *c != conn);
            }
        }
        Op::ForgetLedger { capacity } => {
            let idle = m.running.is_none() && m.queue.is_empty();
            let held = !m.done.is_empty();
            let forgot = table.forget_ledger(usize::from(capacity % 8) + 1);
            assert_eq!(forgot, idle && held, "a ledger is forgotten only when idle");
            if forgot {
                m.done.clear();
                m.started.clear();
            }
        }
    }
}

fn check(table: &TurnTable, m: &Model) {
    assert_eq!(table.idle(), m.running.is_none() && m.queue.is_empty());
    assert_eq!(
        table.running().map(|r| r.turn_id.as_str()),
        m.running.as_deref(),
        "the running turn"
    );
    let queued: Vec<&str> = table.queued_ids().collect();
    let expected: Vec<&str> = m.queue.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(queued, expected, "the queue");
    for turn in expected.iter().chain(m.running.as_deref().iter()) {
        assert!(
            table.ledger().get(turn).is_some(),
            "{turn} is queued or running but the ledger forgot it"
        );
    }
    if table.idle() {
        assert!(
            !table.has_waiters(),
            "requests wait though no turn is queued or running"
        );
    }
}
