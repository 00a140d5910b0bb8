//! The `session` fuzz driver: one [`Session`] alone (quinn-proto's way of fuzzing a sub-state),
//! driven through the steps the device takes with it: prompts and their retries, `/undo`,
//! turn starts under settings that change between them (the mode cap, the roots' cap, the
//! first model), ends, cancels, mode changes by the client and by the engine, and rewinds.
//! Every record a step returns is applied to a model of the store, as the shell would.
//!
//! It lives in `device/`, not `testing/fuzz/`, because it drives the session's own steps,
//! which are the device's alone (`pub(super)`); `testing::fuzz::session` calls it.
//!
//! The promises checked after every step:
//! - the store holds the session exactly as memory does, so a restart finds what was there:
//!   its record, a stored turn for each turn the ledger holds and in the same state (queued,
//!   running, or done with the same answer, and the same history entry), and the history
//!   entries `0..` the next one;
//! - a turn starts only from its stored queued state: a turn id the store holds as running or
//!   done never runs again;
//! - the undo under way is stored while the shell puts its files back, and only then;
//! - a capped session's turn starts at most at the cap and leaves the session there; a session
//!   with a model keeps it, one without adopts the first there is;
//! - a start tells what it changed of the session, then the turn's records, then who runs it,
//!   and only a prompt's start shows anything after that.

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::{Arbitrary, Unstructured};

use super::ledger::TurnState;
use super::sessions::Session;
use super::turn_end::Ended;
use super::turn_prompt::{Given, PromptRequests, Prompted};
use super::turn_start::{StartRules, StartTell};
use super::undo::{FilesUndone, UndoStart};
use super::ConnId;
use crate::config::{Mode, SessionLimits};
use crate::engine::StopReason;
use crate::jsonrpc::Id;
use crate::rng::Rng;
use crate::store::{self, Record, SessionRecord, StoredTurnState, Table, TurnRecord};
use crate::wire::session::ContentBlock;

/// At most this many steps are read from one input.
const MAX_SESSION_OPS: usize = 256;

/// Turn ids come from a small set, so retries and reuse after the ledger forgets are common.
const TURN_IDS: u8 = 6;

const SESSION: &str = "s";

#[derive(Arbitrary, Debug)]
enum Op {
    /// A prompt with this turn id: text, or `/undo`.
    Prompt {
        turn: u8,
        undo: bool,
    },
    /// The device starts the next turn if it may.
    StartNext,
    /// The engine ends the running prompt's turn.
    End {
        failed: bool,
    },
    Cancel,
    /// The shell answers the running `/undo`: the files put back, or not.
    Undone {
        put_back: bool,
    },
    /// `session/set_mode`, on the link or not.
    SetMode {
        mode: u8,
        on_link: bool,
    },
    /// The engine sets the mode.
    EngineMode {
        mode: u8,
    },
    /// `_lembas/session/rewind` to this turn, when the session is idle.
    Rewind {
        turn: u8,
    },
    /// The settings change: `remote.max_mode`, the first model (none, or one of two), and
    /// whether the session is on the link.
    Settings {
        max_mode: u8,
        model: u8,
        capped: bool,
    },
}

fn mode(n: u8) -> Mode {
    Mode::ALL[usize::from(n % 4)]
}

/// The session's part of the store as the shell keeps it, each record read back once, as it
/// is written (the checks after every step then compare values, not JSON).
#[derive(Default)]
struct Stored {
    session: Option<SessionRecord>,
    /// Its stored turns, by turn id.
    turns: BTreeMap<String, TurnRecord>,
    /// The indices of its stored history entries.
    history: BTreeSet<u64>,
}

impl Stored {
    fn apply(&mut self, record: Record) {
        let prefix = store::session_prefix(SESSION);
        let of_session = |key: &str| key.strip_prefix(&prefix).map(str::to_owned);
        let index = |key: &str| -> u64 {
            of_session(key)
                .and_then(|i| i.parse().ok())
                .expect("a history key is the session's and its index")
        };
        match record {
            Record::Put { table, key, value } => match table {
                Table::Sessions => {
                    assert_eq!(key, SESSION);
                    let read = serde_json::from_str(&value).expect("the stored session reads back");
                    self.session = Some(read);
                }
                Table::Turns => {
                    let turn = of_session(&key).expect("a turn key is the session's");
                    let read = serde_json::from_str(&value).expect("a stored turn reads back");
                    self.turns.insert(turn, read);
                }
                Table::History => {
                    self.history.insert(index(&key));
                }
                _ => {}
            },
            Record::Delete { table, key } => match table {
                Table::Sessions => self.session = None,
                Table::Turns => {
                    self.turns
                        .remove(&of_session(&key).expect("a turn key is the session's"));
                }
                Table::History => {
                    self.history.remove(&index(&key));
                }
                _ => {}
            },
            Record::DeletePrefix { table, prefix: p } => {
                assert_eq!(p, prefix, "a session's entries go all at once");
                match table {
                    Table::Turns => self.turns.clear(),
                    Table::History => self.history.clear(),
                    _ => {}
                }
            }
        }
    }
}

/// What the driver plays around the session: the settings, the clock, the store, and the
/// `/undo` the shell is putting back.
struct World {
    session: Session,
    store: Stored,
    max_mode: Mode,
    roots: Vec<String>,
    first_model: Option<(String, bool)>,
    limits: SessionLimits,
    rng: Rng,
    now: u64,
    next_request: u64,
    /// The running `/undo` whose files the shell is putting back: its turn, what it undoes and
    /// that turn's prompt.
    undoing: Option<(String, String, String)>,
}

/// The setup (the ledger's capacity, 1 to 6) and the steps `data` reads as; `None` when it is
/// too short for the setup. The driver and the script read it alike.
fn read(data: &[u8]) -> Option<(usize, Vec<Op>)> {
    let mut u = Unstructured::new(data);
    let capacity = u8::arbitrary(&mut u).ok()?;
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_SESSION_OPS {
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        ops.push(op);
    }
    Some((usize::from(capacity % 6) + 1, ops))
}

/// Drive a `Session` through steps read from `data`; panics on a broken promise.
pub(crate) fn session(data: &[u8]) {
    let Some((ledger_turns, ops)) = read(data) else {
        return;
    };
    // A small ledger, so finished turns are let go (and their stored turns deleted).
    let mut w = World {
        session: Session::new(SessionRecord::testing(SESSION), ledger_turns),
        store: Stored::default(),
        max_mode: Mode::Edit,
        roots: vec!["/w".into()],
        first_model: None,
        limits: SessionLimits {
            max_context_turns: 4,
            ..SessionLimits::default()
        },
        rng: Rng::new(ledger_turns as u64),
        now: 0,
        next_request: 0,
        undoing: None,
    };
    let made = w.session.record();
    w.apply(vec![made]);
    for op in ops {
        w.now += 1;
        w.step(op);
        w.check();
    }
}

/// What [`session`] reads from `data`, a step a line: to read a failing input.
pub(crate) fn session_script(data: &[u8]) -> String {
    let Some((ledger_turns, ops)) = read(data) else {
        return "(too short for the setup)".into();
    };
    std::iter::once(format!("ledger_turns {ledger_turns}"))
        .chain(ops.iter().map(|op| format!("{op:?}")))
        .collect::<Vec<_>>()
        .join("\n")
}

impl World {
    fn apply(&mut self, records: Vec<Record>) {
        for r in records {
            self.store.apply(r);
        }
    }

    fn stored_turn(&self, turn: &str) -> Option<&TurnRecord> {
        self.store.turns.get(turn)
    }

    fn step(&mut self, op: Op) {
        let s = &mut self.session;
        match op {
            Op::Prompt { turn, undo } => {
                let turn_id = format!("t{}", turn % TURN_IDS);
                let text = if undo {
                    "/undo".to_string()
                } else {
                    format!("text of {turn_id}")
                };
                self.next_request += 1;
                let given = Given {
                    turn_id: turn_id.clone(),
                    blocks: vec![ContentBlock::Text { text }],
                    context: Default::default(),
                    waiter: (ConnId(1), Id::number(self.next_request)),
                };
                let numbers = PromptRequests {
                    first_write: self.next_request,
                    mention_read: self.next_request,
                    command_read: self.next_request,
                };
                let limits = self.limits;
                let prompted = s.prompt(given, None, numbers, &limits, &mut self.rng, self.now);
                match prompted {
                    Ok(Prompted::Queued(queued)) => {
                        let asks = queued.asks(SESSION, &turn_id, numbers);
                        for ask in asks {
                            match ask {
                                super::turn_prompt::PromptAsk::Persist(records) => {
                                    self.apply(records)
                                }
                                _ => panic!("a text prompt or /undo asks only its records"),
                            }
                        }
                    }
                    Ok(Prompted::Answered(_) | Prompted::Waiting) => {}
                    Ok(Prompted::Action) => panic!("neither is an action"),
                    // The queue's limit.
                    Err(e) => assert!(e.message.contains("sessions.max_queued"), "{e:?}"),
                }
            }
            Op::StartNext => self.start_next(),
            Op::End { failed } => {
                // Only a prompt's turn is the engine's to end.
                if self.undoing.is_some() || s.turns.running().is_none() {
                    return;
                }
                let outcome = if failed {
                    Err("boom".to_string())
                } else {
                    Ok(StopReason::EndTurn)
                };
                match s.end_turn(outcome, self.now, &self.limits) {
                    Some(Ended::Answered(a)) => self.apply(a.records),
                    Some(Ended::Compaction(..)) => panic!("no compaction was queued"),
                    None => panic!("a turn was running"),
                }
            }
            Op::Cancel => {
                let _ = s.cancel();
            }
            Op::Undone { put_back } => {
                let Some((turn_id, undone, prompt)) = self.undoing.take() else {
                    return;
                };
                let files = if put_back {
                    Ok(FilesUndone {
                        restored: vec!["a.txt".into()],
                        kept: Vec::new(),
                    })
                } else {
                    Err("denied".to_string())
                };
                let end = s
                    .finish_undo(&turn_id, Some((undone, prompt, files)), self.now)
                    .expect("the undo runs");
                self.apply(end.records);
            }
            Op::SetMode { mode: m, on_link } => {
                let (_, record) = s.mode_set(mode(m), on_link, self.max_mode, self.now);
                self.apply(vec![record]);
            }
            Op::EngineMode { mode: m } => {
                let (set, record) = s.engine_mode(mode(m), self.max_mode);
                if s.capped {
                    assert!(set <= self.max_mode, "the engine's mode is capped");
                }
                self.apply(vec![record]);
            }
            Op::Rewind { turn } => {
                let turn_id = format!("t{}", turn % TURN_IDS);
                if !s.turns.idle() {
                    return;
                }
                let Some(from) = s.turns.ledger().history_of(&turn_id) else {
                    return;
                };
                let (_, records) = s.revert_from(from, self.now);
                self.apply(records);
            }
            Op::Settings {
                max_mode,
                model,
                capped,
            } => {
                self.max_mode = mode(max_mode);
                self.first_model = match model % 3 {
                    0 => None,
                    n => Some((format!("model {n}"), n == 1)),
                };
                s.capped = capped;
            }
        }
    }

    fn start_next(&mut self) {
        let rules = StartRules {
            max_mode: self.max_mode,
            roots: &self.roots,
            default_model: self.first_model.clone(),
            limits: self.limits,
            now: self.now,
        };
        let s = &mut self.session;
        let (mode_before, model_before) = (s.durable.mode, s.durable.model.clone());
        let Some(started) = s.start_next(&rules) else {
            return;
        };
        let turn_id = started.start.turn_id.clone();
        let stored = self.stored_turn(&turn_id).map(|t| &t.state);
        assert_eq!(
            stored,
            Some(&StoredTurnState::Queued),
            "turn {turn_id} starts only from its stored queued state"
        );
        let s = &self.session;
        if s.capped {
            assert_eq!(started.start.mode, mode_before.min(self.max_mode));
            assert_eq!(
                started.start.roots, self.roots,
                "a capped turn has the roots"
            );
        } else {
            assert_eq!(
                started.start.mode, mode_before,
                "an uncapped turn keeps its mode"
            );
            assert!(started.start.roots.is_empty());
        }
        assert_eq!(
            s.durable.mode, started.start.mode,
            "the session keeps the mode it ran at"
        );
        let model = model_before.or_else(|| self.first_model.clone().map(|(id, _)| id));
        assert_eq!(
            s.durable.model, model,
            "a model is kept, or the first adopted"
        );
        assert_eq!(started.start.model, model);
        let history = started.start.history.len();
        assert!(
            history <= 2 * self.limits.max_context_turns,
            "{history} entries given"
        );

        // What it changed of the session, its records, who runs it, then what it shows.
        let mut phase = 0;
        let mut undo = None;
        for tell in started.tells() {
            let at = match tell {
                StartTell::Mode(_, record) => {
                    self.apply(vec![record]);
                    0
                }
                StartTell::ModelEvent => 0,
                StartTell::Persist(records) => {
                    // The turn's own records name it; the session's changes do not.
                    let own = records.iter().any(|r| {
                        matches!(r, Record::Put { table: Table::Turns, key, .. }
                            if *key == store::turn_key(SESSION, &turn_id))
                    });
                    self.apply(records);
                    if own {
                        1
                    } else {
                        0
                    }
                }
                StartTell::Engine(_) => 2,
                StartTell::Undo(id) => {
                    undo = Some(id);
                    2
                }
                StartTell::Compaction(..) => panic!("no compaction was queued"),
                StartTell::Event(_) => 3,
            };
            assert!(at >= phase, "a start tells in order: {at} after {phase}");
            assert!(
                at != 2 || phase == 1,
                "who runs it is told once, after the records"
            );
            phase = at;
        }
        assert!(phase >= 2, "who runs turn {turn_id} was told");
        if let Some(turn_id) = undo {
            self.start_undo(turn_id);
        }
    }

    /// An `/undo` starts as the device starts it ([`Session::start_undo`]): what it undoes
    /// reverted (the shell then puts the files back), or, with nothing to undo, ended at once.
    fn start_undo(&mut self, turn_id: String) {
        match self.session.start_undo(&turn_id, self.now) {
            Some(UndoStart::Revert { undoing, records }) => {
                self.apply(records);
                self.undoing = Some((turn_id, undoing.undone, undoing.prompt));
            }
            Some(UndoStart::Ended(end)) => self.apply(end.records),
            None => panic!("the undo runs"),
        }
    }

    fn check(&self) {
        let s = &self.session;
        assert_eq!(
            self.store.session.as_ref(),
            Some(&s.durable),
            "the store holds the session as memory does"
        );

        assert_eq!(
            s.durable.undoing.as_ref().map(|u| u.turn_id.as_str()),
            self.undoing.as_ref().map(|(turn, ..)| turn.as_str()),
            "the undo under way is stored while the shell puts its files back, and only then"
        );

        let ledger = s.turns.ledger();
        for n in 0..TURN_IDS {
            let turn = format!("t{n}");
            let stored = self.stored_turn(&turn);
            match (ledger.get(&turn), &stored) {
                (None, None) => continue,
                (Some(state), Some(t)) => {
                    let same = match (state, &t.state) {
                        (TurnState::Queued, StoredTurnState::Queued)
                        | (TurnState::Running, StoredTurnState::Running) => true,
                        (TurnState::Done(a), StoredTurnState::Done { answer }) => a == answer,
                        _ => false,
                    };
                    assert!(
                        same,
                        "turn {turn}: {state:?} in memory, {:?} stored",
                        t.state
                    );
                    assert_eq!(Some(t.order), ledger.order_of(&turn), "turn {turn}'s order");
                    assert_eq!(
                        t.history,
                        ledger.history_of(&turn),
                        "turn {turn}'s history entry"
                    );
                }
                (state, _) => panic!("turn {turn}: {state:?} in memory, {stored:?} stored"),
            }
        }

        let next = s.recent.next_index();
        let every = self.store.history.len() as u64 == next
            && self
                .store
                .history
                .last()
                .is_none_or(|&last| last + 1 == next);
        assert!(
            every,
            "the stored history is every entry up to the next ({next}): {:?}",
            self.store.history
        );
    }
}
