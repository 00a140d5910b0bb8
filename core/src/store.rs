//! What persists, as key-value records in a few tables. The core emits changes as
//! `Effect::Persist`; the shell writes them (a redb transaction, IndexedDB, a map in tests),
//! acknowledges with `handle_persisted`, and at start-up hands every stored entry back to
//! `Device::restore`. Frames that announce a change wait until it is durable.

use serde::{Deserialize, Serialize};

use crate::wire::need;

/// Serde: its [`Table::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Table {
    /// Session id → [`SessionRecord`].
    Sessions,
    /// `<session>/<turnId>` → [`TurnRecord`]: the turn ledger.
    Turns,
    /// `<session>/<index, 10 digits>` → a history turn (user or assistant).
    History,
    /// Session id → `""`: a delete made on the device, not yet sent to a client.
    Deletes,
    /// [`EPOCH_KEY`] → the number of the device's latest start on this store (decimal), the
    /// prefix of every request id it sends, so no id repeats across restarts.
    Device,
    /// `<session>/<first seq, 20 digits>` → a block of the session's event log: a JSON array,
    /// oldest first, of `{ seq, method, params }` and, for a text chunk, `{ chunk: { text,
    /// update: [seq, sessionUpdate], event: [seq, type] } }` (its text once for both events;
    /// blocks written before hold both as events, and read as before; device/event_log.rs).
    Events,
}

/// The key in [`Table::Device`] of the device's start number.
pub const EPOCH_KEY: &str = "epoch";

impl Table {
    pub const ALL: [Table; 6] = [
        Table::Sessions,
        Table::Turns,
        Table::History,
        Table::Deletes,
        Table::Device,
        Table::Events,
    ];

    /// The tables whose keys are `<session>/...`: a session's own entries besides its record.
    pub const OF_SESSION: [Table; 3] = [Table::Turns, Table::History, Table::Events];

    pub fn name(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Turns => "turns",
            Table::History => "history",
            Table::Deletes => "deletes",
            Table::Device => "device",
            Table::Events => "events",
        }
    }
}

/// One change to the store. Serde: `{"op": "put", "table": "turns", "key": ..., "value": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Record {
    Put {
        table: Table,
        key: String,
        value: String,
    },
    Delete {
        table: Table,
        key: String,
    },
    /// Delete every key that starts with `prefix` (a session's turns or history).
    DeletePrefix {
        table: Table,
        prefix: String,
    },
}

/// A record as it arrives, read in one pass (see [`crate::shape`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordFields {
    op: RecordOp,
    table: Table,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RecordOp {
    Put,
    Delete,
    DeletePrefix,
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::wire::one_pass(d, "a store record", |f: RecordFields| {
            let takes: &[&str] = match f.op {
                RecordOp::Put => &["key", "value"],
                RecordOp::Delete => &["key"],
                RecordOp::DeletePrefix => &["prefix"],
            };
            let given = [
                ("key", f.key.is_some()),
                ("value", f.value.is_some()),
                ("prefix", f.prefix.is_some()),
            ];
            crate::wire::only(&given, takes)?;
            Ok(match f.op {
                RecordOp::Put => Record::Put {
                    table: f.table,
                    key: need(f.key, "key")?,
                    value: need(f.value, "value")?,
                },
                RecordOp::Delete => Record::Delete {
                    table: f.table,
                    key: need(f.key, "key")?,
                },
                RecordOp::DeletePrefix => Record::DeletePrefix {
                    table: f.table,
                    prefix: need(f.prefix, "prefix")?,
                },
            })
        })
    }
}

/// One stored entry, as the shell hands it back at start-up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub table: Table,
    pub key: String,
    pub value: String,
}

/// A session as it is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub cwd: String,
    /// The root of `remote.roots` the session lives under (its cwd on stdio).
    pub root: String,
    pub title: Option<String>,
    pub mode: crate::config::Mode,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub instance: bool,
    /// Milliseconds (the shell's clock) of the last change, for pruning.
    pub touched: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
    /// A client on the link was given it (so it may delete it).
    #[serde(default)]
    pub given: bool,
    /// The client's `_meta.lembas` Context, kept so a restarted device composes the same prompt
    /// (a record written before it was kept reads as none said).
    #[serde(default, skip_serializing_if = "crate::engine::Context::is_empty")]
    pub context: crate::engine::Context,
    /// While the session's event log is sealed (every event sent is in the store's log), the
    /// seq its next event gets; 0 from its first event after that until it is sealed again
    /// (device/event_log.rs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq_next: u64,
    /// How far back the sealed log reached: every event sent with a seq above it is in the
    /// store's log. Seqs between it and the first stored event were never sent (a start that
    /// sent none, the jump to a later start's base), so a client there missed nothing. A record
    /// written before it was kept reads as none: the log reaches back to its first event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_floor: Option<u64>,
    /// The summary `/compact` last folded the session's earlier turns into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// An `/undo` whose messages are reverted and whose files the shell was asked to put
    /// back, until its answer is stored: a restart in between carries it out (undo.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoing: Option<Undoing>,
}

/// An `/undo` under way: its own turn, the turn it undoes and that turn's prompt as the
/// person sees it (what its answer says).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undoing {
    pub turn_id: String,
    pub undone: String,
    pub prompt: String,
    /// The shell was told to keep to `remote.roots` as well as the project (a session on the
    /// link): asked again, it is told the roots as they are then.
    #[serde(default)]
    pub confined: bool,
}

#[cfg(any(test, feature = "testing"))]
impl SessionRecord {
    /// A bare record for tests: session `id` in `/w` (its root too), mode edit, nothing else
    /// set.
    pub fn testing(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            cwd: "/w".into(),
            root: "/w".into(),
            title: None,
            mode: crate::config::Mode::Edit,
            model: None,
            effort: None,
            instance: false,
            touched: 0,
            plan: None,
            given: false,
            context: Default::default(),
            seq_next: 0,
            compaction: None,
            undoing: None,
            events_floor: None,
        }
    }
}

/// A session's earlier turns folded into a summary: the model is given the summary in place
/// of the history entries before `folded`; the history itself still has them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    pub summary: String,
    /// The index of the first history entry after the summary.
    pub folded: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A turn ledger entry as it is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Acceptance order within the session (oldest first).
    pub order: u64,
    pub state: StoredTurnState,
    pub touched: u64,
    /// The index of the history entry its prompt is stored under, while the model is given
    /// it (none for an action such as `/compact`, and once it is reverted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StoredTurnState {
    Queued,
    Running,
    Done { answer: crate::turn::Answer },
}

/// A stored turn state as it is read back, in one pass (an internally tagged enum would
/// buffer it).
#[derive(Deserialize)]
struct StateFields {
    state: StateKind,
    #[serde(default)]
    answer: Option<crate::turn::Answer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum StateKind {
    Queued,
    Running,
    Done,
}

impl<'de> Deserialize<'de> for StoredTurnState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::wire::one_pass(d, "a stored turn state", |f: StateFields| {
            Ok(match f.state {
                StateKind::Queued => StoredTurnState::Queued,
                StateKind::Running => StoredTurnState::Running,
                StateKind::Done => StoredTurnState::Done {
                    answer: crate::wire::need(f.answer, "answer")?,
                },
            })
        })
    }
}

/// Key of a session's turn in [`Table::Turns`].
pub fn turn_key(session: &str, turn: &str) -> String {
    format!("{session}/{turn}")
}

/// Key of a session's history entry in [`Table::History`].
pub fn history_key(session: &str, index: usize) -> String {
    format!("{session}/{index:010}")
}

/// Key of a block of a session's event log in [`Table::Events`]: its first seq, zero-padded so
/// keys sort by it.
pub fn events_key(session: &str, first_seq: u64) -> String {
    format!("{session}/{first_seq:020}")
}

/// The prefix every key of a session has in the [`Table::OF_SESSION`] tables.
pub fn session_prefix(session: &str) -> String {
    format!("{session}/")
}

/// The change that stores a turn of the ledger (one with no history entry of its own yet).
pub fn turn_record(
    session: &str,
    turn: &str,
    order: u64,
    state: StoredTurnState,
    now: u64,
) -> Record {
    turn_record_at(session, turn, order, state, now, None)
}

/// The change that stores a turn of the ledger whose prompt is history entry `history`.
pub fn turn_record_at(
    session: &str,
    turn: &str,
    order: u64,
    state: StoredTurnState,
    now: u64,
    history: Option<u64>,
) -> Record {
    Record::Put {
        table: Table::Turns,
        key: turn_key(session, turn),
        value: serde_json::to_string(&TurnRecord {
            order,
            state,
            touched: now,
            history,
        })
        .expect("records serialize"),
    }
}

/// The change that stores a finished turn of the ledger, with its answer (and the history
/// entry its prompt is, if any).
pub fn done_record(
    session: &str,
    turn: &str,
    order: u64,
    answer: &crate::turn::Answer,
    now: u64,
    history: Option<u64>,
) -> Record {
    let state = StoredTurnState::Done {
        answer: answer.clone(),
    };
    turn_record_at(session, turn, order, state, now, history)
}

/// The change that stores a history entry.
pub fn history_record(
    session: &str,
    index: usize,
    turn: &crate::wire::session::HistoryTurn,
) -> Record {
    Record::Put {
        table: Table::History,
        key: history_key(session, index),
        value: serde_json::to_string(turn).expect("records serialize"),
    }
}

/// The greatest history index read back: indexes count up one an entry and are written from
/// a `usize` ([`history_key`]), 32 bits on wasm, so one past this is damage, and counting on
/// from it would soon write over an earlier entry's key.
pub const HISTORY_INDEX_MAX: u64 = u32::MAX as u64 / 2;

/// The index of a history entry from its key (`<session>/<index>`), only when the key is the
/// one [`history_key`] writes for it and the index is within [`HISTORY_INDEX_MAX`]: `s/0` and
/// `s/00` would both say 0, and a session holding more entries than indexes counts its next
/// one wrong.
pub fn history_index(key: &str) -> Option<u64> {
    let digits = key.rsplit_once('/')?.1;
    let index: u64 = digits.parse().ok()?;
    (index <= HISTORY_INDEX_MAX && digits == format!("{index:010}")).then_some(index)
}

/// The keys of a session's history entries before index `before` (all of them for `None`):
/// from the first key to the end key, exclusive.
pub fn history_range(session: &str, before: Option<u64>) -> (String, String) {
    let start = session_prefix(session);
    let end = match before {
        Some(i) => history_key(session, i as usize),
        // The first key after every `<session>/…` ('0' follows '/').
        None => format!("{session}0"),
    };
    (start, end)
}

/// The rule every shell reads a history by (`Effect::ReadHistory`): entries are offered newest
/// first, and taken while fewer than `limit` are and their stored values fit `max_bytes` in
/// all; the newest is always taken (the core cuts a turn too big for the budget). Reading
/// stops at the first one not taken.
#[derive(Clone, Copy, Debug)]
pub struct HistoryPick {
    limit: usize,
    max_bytes: usize,
    taken: usize,
    bytes: usize,
}

impl HistoryPick {
    pub fn new(limit: usize, max_bytes: usize) -> HistoryPick {
        HistoryPick {
            limit,
            max_bytes,
            taken: 0,
            bytes: 0,
        }
    }

    /// Offer the next entry (newest first), its stored value `value_bytes` long: whether it
    /// is taken; `false` ends the read.
    pub fn take(&mut self, value_bytes: usize) -> bool {
        let bytes = self.bytes.saturating_add(value_bytes);
        if self.taken >= self.limit || (self.taken > 0 && bytes > self.max_bytes) {
            return false;
        }
        self.taken += 1;
        self.bytes = bytes;
        true
    }
}

/// [`MemStore::history`] over a whole store's entries in any order (a JS store's `entries()`).
pub fn history_of(
    entries: Vec<Entry>,
    session: &str,
    before: Option<u64>,
    limit: usize,
    max_bytes: usize,
) -> Vec<Entry> {
    let (start, end) = history_range(session, before);
    let mut mine: Vec<Entry> = entries
        .into_iter()
        .filter(|e| e.table == Table::History && e.key >= start && e.key < end)
        .collect();
    mine.sort_by(|a, b| b.key.cmp(&a.key));
    let mut pick = HistoryPick::new(limit, max_bytes);
    mine.into_iter()
        .take_while(|e| pick.take(e.value.len()))
        .collect()
}

/// Whether `entry` is a block of session `session`'s event log (`Table::Events`, keys
/// `<session>/<first seq>`): what a shell hands back for `Effect::ReadEvents`, all of them.
pub fn is_event_block_of(entry: &Entry, session: &str) -> bool {
    entry.table == Table::Events
        && entry
            .key
            .strip_prefix(session)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The first seq of an event log block from its key (`<session>/<first seq>`).
pub fn event_block_first(key: &str) -> Option<u64> {
    key.rsplit_once('/')?.1.parse().ok()
}

/// [`MemStore::session_events`] over a whole store's entries in any order (a JS store's
/// `entries()`).
pub fn events_of(entries: Vec<Entry>, session: &str) -> Vec<Entry> {
    let mut mine: Vec<Entry> = entries
        .into_iter()
        .filter(|e| is_event_block_of(e, session))
        .collect();
    mine.sort_by(|a, b| a.key.cmp(&b.key));
    mine
}

/// Whether `entry` is part of session `session`: its record, or one of its turns or history
/// entries (what a shell hands back for `Effect::LoadSession`).
pub fn belongs_to(entry: &Entry, session: &str) -> bool {
    match entry.table {
        Table::Sessions => entry.key == session,
        Table::Turns | Table::History | Table::Events => entry
            .key
            .strip_prefix(session)
            .is_some_and(|rest| rest.starts_with('/')),
        _ => false,
    }
}

/// An in-memory store that applies records as a real one would: the Pair's disk, and the
/// reference the runtimes' stores are tested against.
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    map: std::collections::BTreeMap<(Table, String), String>,
}

impl MemStore {
    pub fn apply(&mut self, records: &[Record]) {
        for r in records {
            match r {
                Record::Put { table, key, value } => {
                    self.map.insert((*table, key.clone()), value.clone());
                }
                Record::Delete { table, key } => {
                    self.map.remove(&(*table, key.clone()));
                }
                Record::DeletePrefix { table, prefix } => self
                    .map
                    .retain(|(t, k), _| !(t == table && k.starts_with(prefix.as_str()))),
            }
        }
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.map
            .iter()
            .map(|((table, key), value)| Entry {
                table: *table,
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }

    /// The entries of one session (its record, turns, history and event log), as `Effect::LoadSession`
    /// asks for them.
    pub fn session_entries(&self, session: &str) -> Vec<Entry> {
        let prefix = session_prefix(session);
        let mut out = Vec::new();
        if let Some(v) = self.map.get(&(Table::Sessions, session.to_string())) {
            out.push(Entry {
                table: Table::Sessions,
                key: session.to_string(),
                value: v.clone(),
            });
        }
        for table in Table::OF_SESSION {
            out.extend(
                self.map
                    .range((table, prefix.clone())..)
                    .take_while(|((t, k), _)| *t == table && k.starts_with(prefix.as_str()))
                    .map(|((t, k), v)| Entry {
                        table: *t,
                        key: k.clone(),
                        value: v.clone(),
                    }),
            );
        }
        out
    }

    /// A session's event log as `Effect::ReadEvents` asks for it: every block of it, oldest
    /// first (a prefix range, as [`is_event_block_of`] says).
    pub fn session_events(&self, session: &str) -> Vec<Entry> {
        let prefix = session_prefix(session);
        self.map
            .range((Table::Events, prefix.clone())..)
            .take_while(|((t, k), _)| *t == Table::Events && k.starts_with(prefix.as_str()))
            .map(|((t, k), v)| Entry {
                table: *t,
                key: k.clone(),
                value: v.clone(),
            })
            .collect()
    }

    /// A session's history as `Effect::ReadHistory` asks for it: the entries before
    /// `before`, newest first, as [`HistoryPick`] takes them.
    pub fn history(
        &self,
        session: &str,
        before: Option<u64>,
        limit: usize,
        max_bytes: usize,
    ) -> Vec<Entry> {
        let (start, end) = history_range(session, before);
        let mut pick = HistoryPick::new(limit, max_bytes);
        self.map
            .range((Table::History, start)..(Table::History, end))
            .rev()
            .take_while(|(_, v)| pick.take(v.len()))
            .map(|((t, k), v)| Entry {
                table: *t,
                key: k.clone(),
                value: v.clone(),
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
