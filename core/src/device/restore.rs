//! Rebuilding a device from its store at start-up, and a session from its entries (at start-up,
//! and when one set aside is read back, see `live.rs`). A turn that was running when the process
//! died is finished as `cancelled` (never run again), but for an `/undo` whose revert is stored
//! (`SessionRecord::undoing`): that one stays running and the shell is asked again to put the
//! files back (undo.rs). A queued one is forgotten, so the client's resend runs it once;
//! ledgers untouched past their time are pruned. Each start stores its number (the epoch of its
//! request ids) before anything it sends leaves.

use std::collections::{BTreeMap, BTreeSet};

use super::event_block::read_block;
use super::event_log::{LoggedEvent, SEQ_EPOCH_BITS, SEQ_MAX};
use super::history::Recent;
use super::ledger::TurnState;
use super::sessions::Session;
use super::turn_table::TurnTable;
use crate::turn::Answer;

use super::Device;
use crate::config::{ConfigError, DeviceConfig, SessionLimits};
use crate::engine::StopReason;
use crate::rng::Rng;
use crate::store::{self, Entry, Record, SessionRecord, StoredTurnState, Table, TurnRecord};
use crate::time::Time;
use crate::wire::session::{HistoryTurn, TurnNotes};

/// What `restore` met in the store that it could not read (kept out, and reported).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    pub table: Table,
    pub key: String,
    pub why: String,
}

/// The sentence a turn cut by a restart is answered with.
pub const RESTARTED: &str =
    "the device restarted while this turn ran; it was stopped and will not run again";

/// One session's entries as read from the store, before it is rebuilt.
#[derive(Default)]
pub(super) struct StoredSession {
    pub record: Option<SessionRecord>,
    pub turns: Vec<(String, TurnRecord)>,
    /// Its history entries (index, turn): only the last few stay in memory (history.rs).
    pub history: Vec<(u64, HistoryTurn)>,
    /// Its event log's blocks: (first seq, events).
    pub events: Vec<(u64, Vec<LoggedEvent>)>,
}

/// Store entries grouped by session; the deletes kept; the last start's epoch; what could not
/// be read.
#[derive(Default)]
pub(super) struct Grouped {
    pub sessions: BTreeMap<String, StoredSession>,
    pub deletes: Vec<String>,
    pub epoch: u64,
    /// The recent files of the `@` picker (frecency.rs).
    pub frecency: Option<super::frecency::Frecency>,
    pub bad: Vec<Unreadable>,
}

/// Epochs below this are read: the next start's seqs (`seq_base`) then stay within
/// [`SEQ_MAX`]. A greater one is damage (2^31 starts), and `epoch + 1` or its shift would
/// overflow or wrap, the new start reusing an earlier one's seqs.
const EPOCH_MAX: u64 = SEQ_MAX >> SEQ_EPOCH_BITS;

/// The greatest turn order read: orders count up one a turn accepted, so one past half of u64
/// is damage, and counting on from it (`Ledger::insert`) never overflows.
const ORDER_MAX: u64 = u64::MAX / 2;

impl Grouped {
    pub fn read(entries: Vec<Entry>) -> Grouped {
        let mut g = Grouped::default();
        for e in entries {
            let unreadable = |why: String| Unreadable {
                table: e.table,
                key: e.key.clone(),
                why,
            };
            match e.table {
                Table::Sessions => match serde_json::from_str::<SessionRecord>(&e.value) {
                    // A log counts on from its next seq: past `SEQ_MAX` it could run out and
                    // send a seq twice.
                    Ok(rec) if rec.seq_next > SEQ_MAX => g.bad.push(unreadable(format!(
                        "seq_next {} is not one a device sends",
                        rec.seq_next
                    ))),
                    Ok(rec) => {
                        let id = rec.id.clone();
                        g.sessions.entry(id).or_default().record = Some(rec);
                    }
                    Err(err) => g.bad.push(unreadable(err.to_string())),
                },
                Table::Turns => match (
                    e.key.split_once('/'),
                    serde_json::from_str::<TurnRecord>(&e.value),
                ) {
                    (Some(_), Ok(rec)) if rec.order > ORDER_MAX => g.bad.push(unreadable(format!(
                        "order {} is past any turn's",
                        rec.order
                    ))),
                    (Some((session, turn)), Ok(rec)) => g
                        .sessions
                        .entry(session.to_string())
                        .or_default()
                        .turns
                        .push((turn.to_string(), rec)),
                    (None, _) => g.bad.push(unreadable("key has no session part".into())),
                    (_, Err(err)) => g.bad.push(unreadable(err.to_string())),
                },
                Table::Deletes => g.deletes.push(e.key.clone()),
                Table::Device if e.key == store::EPOCH_KEY => match e.value.parse::<u64>() {
                    Ok(epoch) if epoch < EPOCH_MAX => g.epoch = epoch,
                    Ok(_) => g
                        .bad
                        .push(unreadable(format!("epoch `{}`: past any start's", e.value))),
                    Err(err) => g
                        .bad
                        .push(unreadable(format!("epoch `{}`: {err}", e.value))),
                },
                Table::Device if e.key == super::frecency::KEY => {
                    match super::frecency::Frecency::from_record(&e.value) {
                        Some(f) => g.frecency = Some(f),
                        None => g.bad.push(unreadable("not a list of recent files".into())),
                    }
                }
                Table::Device => g.bad.push(unreadable("not a key the device keeps".into())),
                Table::Events => match e
                    .key
                    .split_once('/')
                    .and_then(|(s, first)| Some((s, first.parse::<u64>().ok()?)))
                    .map(|(session, first)| (session, first, read_block(&e.value, session)))
                {
                    Some((session, first, Ok(events))) => g
                        .sessions
                        .entry(session.to_string())
                        .or_default()
                        .events
                        .push((first, events)),
                    None => g
                        .bad
                        .push(unreadable("key is not `<session>/<first seq>`".into())),
                    Some((_, _, Err(err))) => g.bad.push(unreadable(err)),
                },
                Table::History => match (
                    e.key
                        .split_once('/')
                        .and_then(|(s, _)| Some((s, store::history_index(&e.key)?))),
                    serde_json::from_str::<HistoryTurn>(&e.value),
                ) {
                    (Some((session, index)), Ok(turn)) => g
                        .sessions
                        .entry(session.to_string())
                        .or_default()
                        .history
                        .push((index, turn)),
                    (None, _) => g.bad.push(unreadable(
                        "key is not `<session>/<index>` as the device writes it".into(),
                    )),
                    (_, Err(err)) => g.bad.push(unreadable(err.to_string())),
                },
            }
        }
        g
    }
}

impl Device {
    /// A device rebuilt from every entry of its store. Records it had to write to make the store
    /// consistent (cut turns finished, queued ones forgotten, old ledgers pruned) come out as the
    /// first `Effect::Persist`; entries it could not read are returned, not fatal. At most
    /// `sessions.max_live` sessions (the most recently touched) are kept in memory; the others
    /// stay in the store and are read back when a client names them.
    pub fn restore(
        config: DeviceConfig,
        entries: Vec<Entry>,
        now: Time,
    ) -> Result<(Device, Vec<Unreadable>), ConfigError> {
        let mut device = Device::new(config, now)?;
        let Grouped {
            sessions,
            deletes,
            epoch,
            frecency,
            bad,
        } = Grouped::read(entries);
        device.frecency = frecency.unwrap_or_default();
        for id in deletes {
            device.deletes.keep(id);
        }
        // A new start: its number is durable before any of its request ids leaves (every frame
        // waits for the persists issued before it). Below `EPOCH_MAX`, as read.
        device.request_ids.epoch = epoch + 1;
        // Ids drawn from here on must not repeat those of an earlier start, whatever the seed.
        device.rng = Rng::for_start(device.config.seed, device.request_ids.epoch);
        let mut records = vec![Record::Put {
            table: Table::Device,
            key: store::EPOCH_KEY.into(),
            value: device.request_ids.epoch.to_string(),
        }];
        let keep = if device.config.has_store {
            device.config.sessions.max_live
        } else {
            usize::MAX
        };
        let live = newest(&sessions, keep);
        let mut live_ids = Vec::new();
        for (id, stored) in sessions {
            // Each one is rebuilt (its cut turns finished, its old ledger pruned) whether or not
            // it stays in memory, so the store is consistent for a later read.
            match device.rebuild(&id, stored, now, &mut records) {
                Some(s) if live.contains(&id) => {
                    device.sessions.insert_live(s);
                    live_ids.push(id);
                }
                // An `/undo` under way in one set aside goes on when it is read back.
                Some(s) => device.sessions.keep_aside(&s),
                None => {}
            }
        }
        device.out.persist(records);
        for id in live_ids {
            device.resume_undo(&id);
        }
        device.after_input();
        Ok((device, bad))
    }

    /// A session from its stored entries ([`Session::rebuild`]) under the device's limits, at
    /// this start.
    pub(super) fn rebuild(
        &self,
        id: &str,
        stored: StoredSession,
        now: Time,
        records: &mut Vec<Record>,
    ) -> Option<Session> {
        let seq_base = self.seq_base();
        Session::rebuild(id, stored, now, seq_base, &self.config.sessions, records)
    }
}

/// The ids of the `keep` most recently touched sessions with a record: those a start keeps in
/// memory.
fn newest(sessions: &BTreeMap<String, StoredSession>, keep: usize) -> BTreeSet<String> {
    let mut newest: Vec<(u64, &str)> = sessions
        .iter()
        .filter_map(|(id, s)| Some((s.record.as_ref()?.touched, id.as_str())))
        .collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    newest
        .iter()
        .take(keep)
        .map(|(_, id)| id.to_string())
        .collect()
}

impl Session {
    /// A session from its stored entries (`None` without its record; its turns and events are
    /// then cleaned up). Its event log and recent history are read back within `limits`
    /// (`seq_base`: this start's first seq), its turns as a restart leaves them
    /// ([`TurnTable::restore_stored`]), and a ledger untouched past `ledger_ttl_ms` is pruned:
    /// the records that make the store say so are added to `records`.
    pub(super) fn rebuild(
        id: &str,
        stored: StoredSession,
        now: Time,
        seq_base: u64,
        limits: &SessionLimits,
        records: &mut Vec<Record>,
    ) -> Option<Session> {
        let Some(rec) = stored.record else {
            records.extend(orphan_records(id, &stored));
            return None;
        };
        let mut s = Session::new(rec, limits.ledger_turns);
        s.restore_events(stored.events, seq_base, limits, records);
        let failed: BTreeSet<&str> = stored
            .turns
            .iter()
            .filter(|(_, r)| {
                matches!(
                    r.state,
                    StoredTurnState::Done {
                        answer: Answer::Failed { .. }
                    }
                )
            })
            .map(|(t, _)| t.as_str())
            .collect();
        s.recent = Recent::restored(stored.history, |turn| failed.contains(turn), limits);
        if let Some(c) = &s.durable.compaction {
            s.recent.fold_before(c.folded);
        }
        let list = stored.turns;
        if list.is_empty() {
            return Some(s);
        }
        let newest = list.iter().map(|(_, r)| r.touched).max().unwrap_or(0);
        if newest
            .max(s.durable.touched)
            .saturating_add(limits.ledger_ttl_ms)
            < now.0
        {
            records.push(Record::DeletePrefix {
                table: Table::Turns,
                prefix: store::session_prefix(id),
            });
            if s.durable.undoing.take().is_some() {
                records.push(s.record());
            }
            return Some(s);
        }
        let undoing = s.durable.undoing.as_ref().map(|u| u.turn_id.clone());
        let (restored, resumed) = s.turns.restore_stored(id, list, now, undoing.as_deref());
        records.extend(restored);
        // An undo whose turn ended (or is gone from the ledger) is under way no more.
        if !resumed && s.durable.undoing.take().is_some() {
            records.push(s.record());
        }
        Some(s)
    }

    /// The ledger forgotten when the session is idle and untouched for `ttl_ms` before `now`
    /// (a fresh one of `capacity`): the record that deletes it from the store.
    pub(super) fn prune_ledger(
        &mut self,
        now: Time,
        ttl_ms: u64,
        capacity: usize,
    ) -> Option<Record> {
        let stale = self.durable.touched.saturating_add(ttl_ms) < now.0;
        (stale && self.turns.forget_ledger(capacity)).then(|| Record::DeletePrefix {
            table: Table::Turns,
            prefix: store::session_prefix(&self.durable.id),
        })
    }
}

/// The records that clean up what the store keeps of a session it has no record of (its
/// turns, its events).
fn orphan_records(id: &str, stored: &StoredSession) -> Vec<Record> {
    let mut records = Vec::new();
    if !stored.turns.is_empty() {
        records.push(Record::DeletePrefix {
            table: Table::Turns,
            prefix: store::session_prefix(id),
        });
    }
    if !stored.events.is_empty() {
        records.push(Record::DeletePrefix {
            table: Table::Events,
            prefix: store::session_prefix(id),
        });
    }
    records
}

/// What a restart makes of one stored turn.
#[derive(Debug, PartialEq)]
pub(super) enum Restored {
    /// Back in the ledger as `state`; `record` makes the store say so when it changed.
    Kept {
        state: TurnState,
        record: Option<Record>,
    },
    /// Forgotten (the client's resend runs it once); the record deletes it.
    Forgotten(Record),
}

/// A stored turn of `session` as a restart at `now` leaves it: a done one stays done, one
/// that was running when the process died is finished as `cancelled` (never run again, the
/// answer saying [`RESTARTED`]), a queued one is forgotten.
pub(super) fn restored_turn(session: &str, turn: &str, rec: &TurnRecord, now: u64) -> Restored {
    match &rec.state {
        StoredTurnState::Done { answer } => Restored::Kept {
            state: TurnState::Done(answer.clone()),
            record: None,
        },
        StoredTurnState::Running => {
            let notes = TurnNotes {
                message: Some(RESTARTED.into()),
                ..TurnNotes::default()
            };
            let answer = Answer::stopped(StopReason::Cancelled, notes);
            let record = store::done_record(session, turn, rec.order, &answer, now, rec.history);
            Restored::Kept {
                state: TurnState::Done(answer),
                record: Some(record),
            }
        }
        StoredTurnState::Queued => Restored::Forgotten(Record::Delete {
            table: Table::Turns,
            key: store::turn_key(session, turn),
        }),
    }
}

impl TurnTable {
    /// Put back the stored turns of `session` (`list`, in any order) as a restart at `now`
    /// leaves them ([`restored_turn`]); turns over the ledger's capacity are forgotten. But the
    /// `/undo` turn `undoing`, when it was running: its revert is stored, so it runs again
    /// ([`TurnTable::resume_undo`]). The records that make the store say so, and whether that
    /// `/undo` runs again.
    pub(super) fn restore_stored(
        &mut self,
        session: &str,
        list: Vec<(String, TurnRecord)>,
        now: Time,
        undoing: Option<&str>,
    ) -> (Vec<Record>, bool) {
        let mut records = Vec::new();
        let mut resumed = None;
        for (turn, rec) in list {
            if undoing == Some(turn.as_str()) && matches!(rec.state, StoredTurnState::Running) {
                self.restore(&turn, rec.order, TurnState::Running, rec.history);
                resumed = Some(turn);
                continue;
            }
            match restored_turn(session, &turn, &rec, now.0) {
                Restored::Kept { state, record } => {
                    records.extend(record);
                    self.restore(&turn, rec.order, state, rec.history);
                }
                Restored::Forgotten(record) => records.push(record),
            }
        }
        for forgotten in self.finish_restore() {
            records.push(Record::Delete {
                table: Table::Turns,
                key: store::turn_key(session, &forgotten),
            });
        }
        if let Some(turn) = &resumed {
            self.resume_undo(turn);
        }
        (records, resumed.is_some())
    }
}

/// How often a long-running device looks for stale ledgers.
const PRUNE_EVERY_MS: u64 = 24 * 60 * 60 * 1000;

impl Device {
    /// Forget the turn ledgers of sessions untouched for `ledger_ttl_ms` (idle ones only).
    pub(super) fn prune_stale_ledgers(&mut self, now: Time) {
        if now < self.next_prune {
            return;
        }
        self.next_prune = now.plus_ms(PRUNE_EVERY_MS);
        let limits = &self.config.sessions;
        let records: Vec<Record> = self
            .sessions
            .values_mut()
            .filter_map(|s| s.prune_ledger(now, limits.ledger_ttl_ms, limits.ledger_turns))
            .collect();
        if !records.is_empty() {
            self.out.persist(records);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Effect, Output};
    use crate::store::{Entry, EPOCH_KEY};

    fn epoch(value: &str) -> Entry {
        Entry {
            table: Table::Device,
            key: EPOCH_KEY.into(),
            value: value.into(),
        }
    }

    /// The epoch the first persist of a restored device stores.
    fn stored_epoch(entries: Vec<Entry>) -> (String, Vec<Unreadable>) {
        let (mut d, bad) = Device::restore(DeviceConfig::default(), entries, Time(0)).unwrap();
        let Some(Output::Effect(Effect::Persist { records, .. })) = d.poll_output() else {
            panic!("a restored device persists its start first");
        };
        let value = records
            .iter()
            .find_map(|r| match r {
                Record::Put { table, key, value }
                    if *table == Table::Device && key == EPOCH_KEY =>
                {
                    Some(value.clone())
                }
                _ => None,
            })
            .expect("the epoch is stored");
        (value, bad)
    }

    #[test]
    fn each_start_stores_the_next_epoch_and_an_unreadable_one_is_reported() {
        assert_eq!(stored_epoch(Vec::new()), ("1".into(), Vec::new()));
        assert_eq!(stored_epoch(vec![epoch("41")]), ("42".into(), Vec::new()));
        let (value, bad) = stored_epoch(vec![epoch("many")]);
        assert_eq!(value, "1");
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].why.contains("epoch `many`"), "{bad:?}");
    }

    #[test]
    fn a_stored_epoch_at_u64_max_is_refused_not_overflowed() {
        let (value, bad) = stored_epoch(vec![epoch(&u64::MAX.to_string())]);
        assert_eq!(value, "1");
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].why.contains("past any start's"), "{bad:?}");
    }

    #[test]
    fn a_stored_epoch_whose_seqs_would_wrap_is_refused_and_the_last_good_one_counts_on() {
        // `seq_base(2^32)` shifts its number out: the start's seqs would begin at 1 again.
        let (value, bad) = stored_epoch(vec![epoch(&(1u64 << 32).to_string())]);
        assert_eq!((value.as_str(), bad.len()), ("1", 1), "{bad:?}");
        let last = EPOCH_MAX - 1;
        let (value, bad) = stored_epoch(vec![epoch(&last.to_string())]);
        assert_eq!((value, bad), (EPOCH_MAX.to_string(), Vec::new()));
        assert!(super::super::event_log::seq_base(EPOCH_MAX) <= SEQ_MAX);
    }

    /// `s`'s record (sealed at `seq_next`) among `entries`, restored.
    fn restore_session(seq_next: u64, mut entries: Vec<Entry>) -> (Device, Vec<Unreadable>) {
        let mut record = SessionRecord::testing("s");
        record.seq_next = seq_next;
        entries.push(Entry {
            table: Table::Sessions,
            key: "s".into(),
            value: serde_json::to_string(&record).unwrap(),
        });
        Device::restore(DeviceConfig::default(), entries, Time(0)).unwrap()
    }

    #[test]
    fn a_session_record_with_seq_next_at_u64_max_is_refused_so_no_seq_is_sent_twice() {
        let (mut d, bad) = restore_session(u64::MAX, Vec::new());
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!((bad[0].table, bad[0].key.as_str()), (Table::Sessions, "s"));
        assert!(bad[0].why.contains("seq_next"), "{bad:?}");
        assert_eq!(d.next_seq("s"), None, "no log counts on from it");
        // The greatest a device may have written is read, and counts on.
        let (mut d, bad) = restore_session(SEQ_MAX, Vec::new());
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(d.next_seq("s"), Some(SEQ_MAX));
        assert_eq!(d.next_seq("s"), Some(SEQ_MAX + 1));
    }

    #[test]
    fn a_stored_turn_order_at_u64_max_is_refused_not_overflowed() {
        let turn = |order| Entry {
            table: Table::Turns,
            key: format!("s/t{order}"),
            value: serde_json::to_string(&stored_turn(order, done(StopReason::EndTurn), 0))
                .unwrap(),
        };
        let (d, bad) = restore_session(1, vec![turn(u64::MAX), turn(3)]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].key, format!("s/t{}", u64::MAX));
        let ledger = d.sessions.get("s").expect("restored").turns.ledger();
        assert_eq!(ledger.order_len(), 1);
        assert_eq!(ledger.order_of("t3"), Some(3));
    }

    fn history(key: &str) -> Entry {
        Entry {
            table: Table::History,
            key: key.into(),
            value: r#"{"role":"user","text":"hi"}"#.into(),
        }
    }

    #[test]
    fn a_history_index_at_u64_max_is_refused_not_overflowed() {
        let max = format!("s/{}", u64::MAX);
        let (d, bad) = restore_session(1, vec![history(&max), history("s/0000000000")]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!((bad[0].table, bad[0].key.as_str()), (Table::History, &*max));
        let recent = &d.sessions.get("s").expect("restored").recent;
        assert_eq!((recent.next_index(), recent.turns().len()), (1, 1));
    }

    #[test]
    fn history_keys_that_differ_only_in_zero_padding_are_refused_not_counted_twice() {
        // All three say index 0; only the first is the key the device writes. Read, the
        // session would hold two turns below its next index 1, and a compaction's fold
        // would count back past 0.
        let mut record = SessionRecord::testing("s");
        record.compaction = Some(store::Compaction {
            summary: "earlier".into(),
            folded: 1,
        });
        let entries = vec![
            history("s/0000000000"),
            history("s/0"),
            history("s/00"),
            Entry {
                table: Table::Sessions,
                key: "s".into(),
                value: serde_json::to_string(&record).unwrap(),
            },
        ];
        let (d, bad) = Device::restore(DeviceConfig::default(), entries, Time(0)).unwrap();
        let keys: Vec<&str> = bad.iter().map(|b| b.key.as_str()).collect();
        assert_eq!(keys, ["s/0", "s/00"], "{bad:?}");
        let recent = &d.sessions.get("s").expect("restored").recent;
        assert_eq!(recent.next_index(), 1);
        assert!(recent.turns().is_empty(), "folded by the compaction");
    }

    fn stored_turn(order: u64, state: StoredTurnState, touched: u64) -> TurnRecord {
        TurnRecord {
            order,
            state,
            touched,
            history: Some(order),
        }
    }

    fn done(reason: StopReason) -> StoredTurnState {
        StoredTurnState::Done {
            answer: Answer::stopped(reason, TurnNotes::default()),
        }
    }

    #[test]
    fn a_restart_finishes_a_cut_turn_as_cancelled_and_forgets_a_queued_one() {
        let kept = restored_turn("s", "t1", &stored_turn(1, done(StopReason::EndTurn), 5), 9);
        assert_eq!(
            kept,
            Restored::Kept {
                state: TurnState::Done(Answer::stopped(StopReason::EndTurn, TurnNotes::default())),
                record: None,
            }
        );
        let Restored::Kept {
            state: TurnState::Done(answer),
            record: Some(record),
        } = restored_turn("s", "t2", &stored_turn(2, StoredTurnState::Running, 5), 9)
        else {
            panic!("a cut turn is kept, finished");
        };
        let Answer::Stopped { stop_reason, notes } = &answer else {
            panic!("stopped: {answer:?}");
        };
        assert_eq!(*stop_reason, StopReason::Cancelled);
        assert_eq!(notes.as_ref().unwrap().message.as_deref(), Some(RESTARTED));
        assert_eq!(
            record,
            store::done_record("s", "t2", 2, &answer, 9, Some(2))
        );
        assert_eq!(
            restored_turn("s", "t3", &stored_turn(3, StoredTurnState::Queued, 5), 9),
            Restored::Forgotten(Record::Delete {
                table: Table::Turns,
                key: store::turn_key("s", "t3"),
            })
        );
    }

    #[test]
    fn a_turn_table_takes_back_its_stored_turns_within_its_capacity() {
        let mut table = TurnTable::new(2);
        let list = vec![
            ("t3".to_owned(), stored_turn(3, StoredTurnState::Running, 5)),
            (
                "t1".to_owned(),
                stored_turn(1, done(StopReason::EndTurn), 5),
            ),
            ("t4".to_owned(), stored_turn(4, StoredTurnState::Queued, 5)),
            (
                "t2".to_owned(),
                stored_turn(2, done(StopReason::EndTurn), 5),
            ),
        ];
        let (records, resumed) = table.restore_stored("s", list, Time(9), None);
        assert!(!resumed);
        let deleted: Vec<&str> = records
            .iter()
            .filter_map(|r| match r {
                Record::Delete { key, .. } => Some(key.as_str()),
                _ => None,
            })
            .collect();
        // The queued one, then the oldest over a capacity of two.
        assert_eq!(
            deleted,
            [store::turn_key("s", "t4"), store::turn_key("s", "t1")]
        );
        assert_eq!(records.len(), 3, "and the cut one finished: {records:?}");
        assert!(table.ledger().get("t1").is_none() && table.ledger().get("t4").is_none());
        assert!(matches!(table.ledger().get("t3"), Some(TurnState::Done(_))));
        assert_eq!(table.ledger().last_done(), Some("t3"));
    }

    #[test]
    fn a_session_rebuilt_without_its_record_leaves_only_cleanup_and_a_stale_ledger_is_pruned() {
        let limits = SessionLimits::default();
        let turns = vec![("t1".to_owned(), stored_turn(1, StoredTurnState::Running, 5))];
        let orphan = StoredSession {
            turns: turns.clone(),
            ..StoredSession::default()
        };
        let mut records = Vec::new();
        assert!(Session::rebuild("s", orphan, Time(9), 1, &limits, &mut records).is_none());
        assert_eq!(
            records,
            [Record::DeletePrefix {
                table: Table::Turns,
                prefix: store::session_prefix("s"),
            }]
        );
        let record = crate::device::live::tests::session("s").durable;
        let stored = || StoredSession {
            record: Some(record.clone()),
            turns: turns.clone(),
            ..StoredSession::default()
        };
        // Fresh: the cut turn is finished.
        let mut records = Vec::new();
        let s = Session::rebuild("s", stored(), Time(9), 1, &limits, &mut records).unwrap();
        assert!(matches!(
            s.turns.ledger().get("t1"),
            Some(TurnState::Done(_))
        ));
        assert!(
            matches!(
                records.as_slice(),
                [Record::Put {
                    table: Table::Turns,
                    ..
                }]
            ),
            "{records:?}"
        );
        // Untouched past the ttl: the ledger goes, nothing is finished.
        let late = Time(5 + limits.ledger_ttl_ms + 1);
        let mut records = Vec::new();
        let s = Session::rebuild("s", stored(), late, 1, &limits, &mut records).unwrap();
        assert!(s.turns.ledger().get("t1").is_none());
        assert_eq!(
            records,
            [Record::DeletePrefix {
                table: Table::Turns,
                prefix: store::session_prefix("s"),
            }]
        );
    }

    #[test]
    fn an_undo_whose_turn_ended_or_whose_ledger_is_pruned_is_stored_as_over() {
        let limits = SessionLimits::default();
        let mut record = crate::device::live::tests::session("s").durable;
        record.undoing = Some(store::Undoing {
            turn_id: "t2".into(),
            undone: "t1".into(),
            prompt: "/undo".into(),
            confined: false,
        });
        let stored = |state| StoredSession {
            record: Some(record.clone()),
            turns: vec![("t2".to_owned(), stored_turn(2, state, 5))],
            ..StoredSession::default()
        };
        // The `/undo` turn ended (its answer and the clearing were cut apart): over, stored so.
        let mut records = Vec::new();
        let ended = stored(done(StopReason::EndTurn));
        let s = Session::rebuild("s", ended, Time(9), 1, &limits, &mut records).unwrap();
        assert!(s.durable.undoing.is_none());
        assert_eq!(records.last(), Some(&s.record()), "{records:?}");
        // Untouched past the ttl: the ledger goes with the `/undo` turn in it, so no restart
        // may ask the shell again; the record says the undo is over in the same write.
        let late = Time(5 + limits.ledger_ttl_ms + 1);
        let mut records = Vec::new();
        let running = stored(StoredTurnState::Running);
        let s = Session::rebuild("s", running, late, 1, &limits, &mut records).unwrap();
        assert!(s.durable.undoing.is_none());
        assert!(s.turns.ledger().get("t2").is_none());
        assert_eq!(
            records,
            [
                Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: store::session_prefix("s"),
                },
                s.record(),
            ]
        );
    }

    #[test]
    fn an_idle_ledger_untouched_past_its_time_is_pruned_once() {
        let limits = SessionLimits::default();
        let mut records = Vec::new();
        let turns = vec![(
            "t1".to_owned(),
            stored_turn(1, done(StopReason::EndTurn), 0),
        )];
        let stored = StoredSession {
            record: Some(crate::device::live::tests::session("s").durable),
            turns,
            ..StoredSession::default()
        };
        let mut s = Session::rebuild("s", stored, Time(0), 1, &limits, &mut records).unwrap();
        let ttl = limits.ledger_ttl_ms;
        assert_eq!(
            s.prune_ledger(Time(ttl), ttl, 10),
            None,
            "not past its time"
        );
        assert_eq!(
            s.prune_ledger(Time(ttl + 1), ttl, 10),
            Some(Record::DeletePrefix {
                table: Table::Turns,
                prefix: store::session_prefix("s"),
            })
        );
        assert_eq!(
            s.prune_ledger(Time(ttl + 1), ttl, 10),
            None,
            "nothing left to forget"
        );
    }
}
