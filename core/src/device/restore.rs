//! Rebuilding a device from its store at start-up, and a session from its entries (at start-up,
//! and when one set aside is read back, see `live.rs`). A turn that was running when the process
//! died is finished as `cancelled` (never run again); a queued one is forgotten, so the
//! client's resend runs it once; ledgers untouched past their time are pruned. Each start
//! stores its number (the epoch of its request ids) before anything it sends leaves.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map};

use super::event_log::{read_block, EventLog, LoggedEvent};
use super::history::Recent;
use super::ledger::TurnState;
use super::sessions::Session;
use crate::turn::Answer;

use super::Device;
use crate::config::{ConfigError, DeviceConfig};
use crate::engine::StopReason;
use crate::rng::Rng;
use crate::store::{self, Entry, Record, SessionRecord, StoredTurnState, Table, TurnRecord};
use crate::time::Time;
use crate::wire::session::HistoryTurn;

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
                    Ok(epoch) => g.epoch = epoch,
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
                Table::Events => match (
                    e.key
                        .split_once('/')
                        .and_then(|(s, first)| Some((s, first.parse::<u64>().ok()?))),
                    read_block(&e.value),
                ) {
                    (Some((session, first)), Ok(events)) => g
                        .sessions
                        .entry(session.to_string())
                        .or_default()
                        .events
                        .push((first, events)),
                    (None, _) => g
                        .bad
                        .push(unreadable("key is not `<session>/<first seq>`".into())),
                    (_, Err(err)) => g.bad.push(unreadable(err)),
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
                    (None, _) => g
                        .bad
                        .push(unreadable("key is not `<session>/<index>`".into())),
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
        // waits for the persists issued before it).
        device.request_ids.epoch = epoch + 1;
        // Ids drawn from here on must not repeat those of an earlier start, whatever the seed.
        device.rng = Rng::for_start(device.config.seed, device.request_ids.epoch);
        let mut records = vec![Record::Put {
            table: Table::Device,
            key: store::EPOCH_KEY.into(),
            value: device.request_ids.epoch.to_string(),
        }];
        let mut newest: Vec<(u64, &str)> = sessions
            .iter()
            .filter_map(|(id, s)| Some((s.record.as_ref()?.touched, id.as_str())))
            .collect();
        newest.sort_unstable_by(|a, b| b.cmp(a));
        let keep = if device.config.has_store {
            device.config.sessions.max_live
        } else {
            usize::MAX
        };
        let live: BTreeSet<String> = newest
            .iter()
            .take(keep)
            .map(|(_, id)| id.to_string())
            .collect();
        for (id, stored) in sessions {
            // Each one is rebuilt (its cut turns finished, its old ledger pruned) whether or not
            // it stays in memory, so the store is consistent for a later read.
            match device.rebuild(&id, stored, now, &mut records) {
                Some(s) if live.contains(&id) => device.sessions.insert_live(s),
                Some(s) => device.sessions.keep_aside(&s),
                None => {}
            }
        }
        device.out.persist(records);
        device.after_input();
        Ok((device, bad))
    }

    /// A session from its stored entries (`None` without its record; its turns are then
    /// cleaned up). A turn that was running is finished as cut by a restart, a queued one is
    /// forgotten, and a ledger untouched past `ledger_ttl_ms` is pruned: the records that make
    /// the store say so are added to `records`.
    pub(super) fn rebuild(
        &self,
        id: &str,
        stored: StoredSession,
        now: Time,
        records: &mut Vec<Record>,
    ) -> Option<Session> {
        let Some(rec) = stored.record else {
            if !stored.turns.is_empty() {
                // Turns of a session the store no longer has: clean them up.
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
            return None;
        };
        let mut s = Session::new(rec, self.config.sessions.ledger_turns);
        s.events = EventLog::restore(
            id,
            stored.events,
            s.durable.seq_next,
            self.seq_base(),
            &self.config.sessions,
            records,
        );
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
        s.recent = Recent::restored(
            stored.history,
            |turn| failed.contains(turn),
            &self.config.sessions,
        );
        if let Some(c) = &s.durable.compaction {
            s.recent.fold_before(c.folded);
        }
        let list = stored.turns;
        if list.is_empty() {
            return Some(s);
        }
        let ttl = self.config.sessions.ledger_ttl_ms;
        let newest = list.iter().map(|(_, r)| r.touched).max().unwrap_or(0);
        if newest.max(s.durable.touched).saturating_add(ttl) < now.0 {
            records.push(Record::DeletePrefix {
                table: Table::Turns,
                prefix: store::session_prefix(id),
            });
            return Some(s);
        }
        for (turn, rec) in list {
            let state = match rec.state {
                StoredTurnState::Done { answer } => TurnState::Done(answer),
                StoredTurnState::Running => {
                    let mut extra = Map::new();
                    extra.insert("message".into(), json!(RESTARTED));
                    let answer = Answer::stopped(StopReason::Cancelled, extra);
                    records.push(store::done_record(
                        id,
                        &turn,
                        rec.order,
                        &answer,
                        now.0,
                        rec.history,
                    ));
                    TurnState::Done(answer)
                }
                StoredTurnState::Queued => {
                    records.push(Record::Delete {
                        table: Table::Turns,
                        key: store::turn_key(id, &turn),
                    });
                    continue;
                }
            };
            s.turns.restore(&turn, rec.order, state, rec.history);
        }
        for forgotten in s.turns.finish_restore() {
            records.push(Record::Delete {
                table: Table::Turns,
                key: store::turn_key(id, &forgotten),
            });
        }
        Some(s)
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
        let ttl = self.config.sessions.ledger_ttl_ms;
        let capacity = self.config.sessions.ledger_turns;
        let mut records = Vec::new();
        for s in self.sessions.values_mut() {
            if s.durable.touched.saturating_add(ttl) < now.0 && s.turns.forget_ledger(capacity) {
                records.push(Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: store::session_prefix(&s.durable.id),
                });
            }
        }
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
}
