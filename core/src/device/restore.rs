//! Rebuilding a device from its store at start-up. A turn that was running when the process
//! died is finished as `cancelled` (never run again); a queued one is forgotten, so the
//! client's resend runs it once; ledgers untouched past their time are pruned.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde_json::{json, Map};

use super::ledger::{Answer, Ledger, TurnState};
use super::sessions::Session;
use super::turns::turn_record;
use super::Device;
use crate::config::{ConfigError, DeviceConfig};
use crate::engine::StopReason;
use crate::store::{self, Entry, Record, SessionRecord, StoredTurnState, Table, TurnRecord};
use crate::time::Time;
use crate::wire::session::HistoryTurn;

/// What `restore` met in the store that it could not read (kept out, and reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub table: Table,
    pub key: String,
    pub why: String,
}

/// The sentence a turn cut by a restart is answered with.
pub const RESTARTED: &str =
    "the device restarted while this turn ran; it was stopped and will not run again";

impl Device {
    /// A device rebuilt from every entry of its store. Records it had to write to make the store
    /// consistent (cut turns finished, queued ones forgotten, old ledgers pruned) come out as the
    /// first `Effect::Persist`; entries it could not read are returned, not fatal.
    pub fn restore(
        config: DeviceConfig,
        entries: Vec<Entry>,
        now: Time,
    ) -> Result<(Device, Vec<Unreadable>), ConfigError> {
        let mut device = Device::new(config, now)?;
        let mut bad = Vec::new();
        let mut turns: BTreeMap<String, Vec<(String, TurnRecord)>> = BTreeMap::new();
        let mut history: BTreeMap<String, Vec<(String, HistoryTurn)>> = BTreeMap::new();
        for e in entries {
            let unreadable = |why: String| Unreadable {
                table: e.table,
                key: e.key.clone(),
                why,
            };
            match e.table {
                Table::Sessions => match serde_json::from_str::<SessionRecord>(&e.value) {
                    Ok(rec) => {
                        let s = device.session_from(rec);
                        device.sessions.insert(s.id.clone(), s);
                    }
                    Err(err) => bad.push(unreadable(err.to_string())),
                },
                Table::Turns => match (
                    e.key.split_once('/'),
                    serde_json::from_str::<TurnRecord>(&e.value),
                ) {
                    (Some((session, turn)), Ok(rec)) => turns
                        .entry(session.to_string())
                        .or_default()
                        .push((turn.to_string(), rec)),
                    (None, _) => bad.push(unreadable("key has no session part".into())),
                    (_, Err(err)) => bad.push(unreadable(err.to_string())),
                },
                Table::Deletes => {
                    device.pending_deletes.insert(e.key.clone());
                }
                Table::History => match (
                    e.key.split_once('/'),
                    serde_json::from_str::<HistoryTurn>(&e.value),
                ) {
                    (Some((session, _)), Ok(turn)) => history
                        .entry(session.to_string())
                        .or_default()
                        .push((e.key.clone(), turn)),
                    (None, _) => bad.push(unreadable("key has no session part".into())),
                    (_, Err(err)) => bad.push(unreadable(err.to_string())),
                },
            }
        }
        let mut records = Vec::new();
        for (session, mut list) in history {
            list.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(s) = device.sessions.get_mut(&session) {
                s.history = list.into_iter().map(|(_, t)| t).collect();
            }
        }
        let ttl = device.config.sessions.ledger_ttl_ms;
        for (session, list) in turns {
            let Some(s) = device.sessions.get_mut(&session) else {
                // Turns of a session the store no longer has: clean them up.
                records.push(Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: store::session_prefix(&session),
                });
                continue;
            };
            let newest = list.iter().map(|(_, r)| r.touched).max().unwrap_or(0);
            if newest.max(s.touched).saturating_add(ttl) < now.0 {
                records.push(Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: store::session_prefix(&session),
                });
                continue;
            }
            for (turn, rec) in list {
                let state = match rec.state {
                    StoredTurnState::Done { answer } => TurnState::Done(answer),
                    StoredTurnState::Running => {
                        let mut extra = Map::new();
                        extra.insert("message".into(), json!(RESTARTED));
                        let answer = Answer::stopped(StopReason::Cancelled, extra);
                        records.push(turn_record(
                            &session,
                            &turn,
                            rec.order,
                            StoredTurnState::Done {
                                answer: answer.clone(),
                            },
                            now.0,
                        ));
                        TurnState::Done(answer)
                    }
                    StoredTurnState::Queued => {
                        records.push(Record::Delete {
                            table: Table::Turns,
                            key: store::turn_key(&session, &turn),
                        });
                        continue;
                    }
                };
                s.ledger.restore(&turn, rec.order, state);
            }
            for forgotten in s.ledger.finish_restore() {
                records.push(Record::Delete {
                    table: Table::Turns,
                    key: store::turn_key(&session, &forgotten),
                });
            }
        }
        if !records.is_empty() {
            device.persist(records);
        }
        Ok((device, bad))
    }

    fn session_from(&self, rec: SessionRecord) -> Session {
        Session {
            id: rec.id,
            cwd: rec.cwd,
            root: rec.root,
            title: rec.title,
            mode: rec.mode,
            model: rec.model,
            effort: rec.effort,
            instance: rec.instance,
            context: rec.context,
            ledger: Ledger::new(self.config.sessions.ledger_turns),
            open: false,
            running: None,
            queue: VecDeque::new(),
            waiters: HashMap::default(),
            holders: BTreeSet::new(),
            history: Vec::new(),
            touched: rec.touched,
            plan: rec.plan,
            given: rec.given,
            capped: true,
        }
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
            let idle = s.running.is_none() && s.queue.is_empty();
            if idle && s.ledger.order_len() > 0 && s.touched.saturating_add(ttl) < now.0 {
                s.ledger = Ledger::new(capacity);
                records.push(Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: store::session_prefix(&s.id),
                });
            }
        }
        if !records.is_empty() {
            self.persist(records);
        }
    }
}
