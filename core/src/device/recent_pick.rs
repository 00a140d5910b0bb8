//! What a shell reads of a session's history when it restores the session (at start, or a
//! session set aside read back): only what [`super::history::Recent`] can keep, so a
//! restart's memory does not grow with a session's age. Entries are offered newest first,
//! with the walk `Recent` trims by (the last `max_context_turns` answered turns within
//! `max_context_bytes`, at most `max_context_turns × 8` entries, a failed answer counted as
//! empty); the entry the walk stops at is still taken, and the read ends after it. `Recent`
//! built from those entries equals `Recent` built from the whole history (a test holds it).

use std::collections::BTreeSet;

use crate::config::SessionLimits;
use crate::store::{Entry, StoredTurnState, Table, TurnRecord};
use crate::turn::Answer;
use crate::wire::session::HistoryTurn;

/// The read of one session's history at restore (see the module).
#[derive(Debug)]
pub struct RecentPick {
    max_pairs: usize,
    max_bytes: usize,
    max_entries: usize,
    /// Its turns whose answers failed (counted as empty, as `Recent` keeps them).
    failed: BTreeSet<String>,
    entries: usize,
    bytes: usize,
    pairs: usize,
    /// The text bytes of an answer whose prompt (next, newest first) says whether it failed.
    pending: Option<usize>,
    /// Whether the newer answer, resolved, had text.
    answer: Option<bool>,
    done: bool,
}

impl RecentPick {
    /// For a session whose ledger entries (`Table::Turns`, any order, others ignored) are
    /// `turns`.
    pub fn new<'a>(
        limits: &SessionLimits,
        turns: impl IntoIterator<Item = &'a Entry>,
    ) -> RecentPick {
        let failed = turns
            .into_iter()
            .filter(|e| e.table == Table::Turns)
            .filter_map(|e| {
                let record: TurnRecord = serde_json::from_str(&e.value).ok()?;
                let failed = matches!(
                    record.state,
                    StoredTurnState::Done {
                        answer: Answer::Failed { .. }
                    }
                );
                let (_, turn) = e.key.split_once('/')?;
                failed.then(|| turn.to_string())
            })
            .collect();
        RecentPick {
            max_pairs: limits.max_context_turns,
            max_bytes: limits.max_context_bytes,
            max_entries: limits.max_context_turns.saturating_mul(8),
            failed,
            entries: 0,
            bytes: 0,
            pairs: 0,
            pending: None,
            answer: None,
            done: false,
        }
    }

    /// Offer the next entry's stored value (newest first): whether it is taken; `false` ends
    /// the read. An entry that does not read as a turn is taken (the restore reports it).
    pub fn take(&mut self, value: &str) -> bool {
        if self.done {
            return false;
        }
        match serde_json::from_str::<HistoryTurn>(value) {
            // Whether it failed is known at its prompt, the next offered. One answer after
            // another (no prompt between) is counted as empty: the walk then goes further,
            // never less far, than `Recent`'s.
            Ok(HistoryTurn::Assistant { text, .. }) => {
                self.resolve(true);
                self.pending = Some(text.len());
            }
            Ok(HistoryTurn::User { text, turn_id, .. }) => {
                let failed = turn_id.is_some_and(|t| self.failed.contains(&t));
                self.resolve(failed);
                if !self.done && self.visit(text.len()) && self.answer.take() == Some(true) {
                    self.pairs += 1;
                }
            }
            Err(_) => {}
        }
        true
    }

    /// The answer waiting for its prompt is counted: as empty if `failed`.
    fn resolve(&mut self, failed: bool) {
        if let Some(len) = self.pending.take() {
            let len = if failed { 0 } else { len };
            if !self.done && self.visit(len) {
                self.answer = Some(len > 0);
            }
        }
    }

    /// The walk visits an entry of `len` text bytes: whether it goes on past it.
    fn visit(&mut self, len: usize) -> bool {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(len);
        if self.pairs >= self.max_pairs
            || self.bytes > self.max_bytes
            || self.entries > self.max_entries
        {
            self.done = true;
        }
        !self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::history::Recent;
    use crate::rng::Rng;
    use crate::store::{turn_record, Record};

    fn entry(record: Record) -> Entry {
        match record {
            Record::Put { table, key, value } => Entry { table, key, value },
            other => panic!("{other:?}"),
        }
    }

    /// Histories of every shape (answered, failed, unanswered prompts, answers in a row,
    /// texts of every size) under small limits: `Recent` from what the pick reads is `Recent`
    /// from the whole history, and the pick reads no more than the walk needs.
    #[test]
    fn recent_from_the_picked_entries_is_recent_from_all_of_them() {
        for seed in 0..2_000u64 {
            let mut rng = Rng::new(seed);
            let limits = SessionLimits {
                max_context_turns: 1 + rng.below(4) as usize,
                max_context_bytes: 1 + rng.below(300) as usize,
                ..SessionLimits::default()
            };
            let mut history = Vec::new();
            let mut turns = Vec::new();
            for i in 0..rng.below(60) {
                let text = "x".repeat(rng.below(80) as usize);
                let turn = if rng.below(6) == 0 {
                    HistoryTurn::Assistant {
                        text,
                        reasoning: String::new(),
                        tools: Vec::new(),
                    }
                } else {
                    let id = format!("t{i}");
                    if rng.below(4) == 0 {
                        let failed = Answer::Failed {
                            code: -32603,
                            message: "boom".into(),
                        };
                        let state = StoredTurnState::Done { answer: failed };
                        turns.push(entry(turn_record("ses", &id, i, state, 0)));
                    }
                    HistoryTurn::User {
                        text,
                        turn_id: Some(id),
                        attachments: Vec::new(),
                    }
                };
                history.push((i, turn));
            }
            let failed = |t: &str| {
                turns
                    .iter()
                    .any(|e| e.key.split_once('/').is_some_and(|(_, id)| id == t))
            };
            let mut pick = RecentPick::new(&limits, &turns);
            let picked: Vec<(u64, HistoryTurn)> = history
                .iter()
                .rev()
                .take_while(|(_, t)| pick.take(&serde_json::to_string(t).unwrap()))
                .cloned()
                .collect();
            let mut whole = Recent::restored(history.clone(), failed, &limits);
            let mut read = Recent::restored(picked.clone(), failed, &limits);
            assert_eq!(read.turns(), whole.turns(), "seed {seed}: {limits:?}");
            // A compaction's fold leaves the same entries either way: those stored at or
            // after it, the newest kept.
            let folded = rng.below(history.len() as u64 + 2);
            let (mut read_folded, mut whole_folded) = (
                Recent::restored(picked.clone(), failed, &limits),
                Recent::restored(history.clone(), failed, &limits),
            );
            read_folded.fold_before(folded);
            whole_folded.fold_before(folded);
            assert_eq!(read_folded.turns(), whole_folded.turns(), "seed {seed}");
            let after: Vec<&HistoryTurn> = history
                .iter()
                .filter(|(i, _)| *i >= folded)
                .map(|(_, t)| t)
                .collect();
            let kept = whole_folded.turns().len();
            assert!(kept <= after.len(), "seed {seed}: fold {folded}");
            assert_eq!(
                whole_folded.next_index(),
                whole.next_index(),
                "seed {seed}: a fold keeps the next index"
            );
            let next = HistoryTurn::User {
                text: String::new(),
                turn_id: None,
                attachments: Vec::new(),
            };
            // A rewind after the fold (rewind.rs): live, the entries from `from` on leave and
            // the fold moves back to it; a restart then reads the store without them. Both
            // count on from `from`, and what the live session keeps is the newest of what the
            // restart reads (the window may hold fewer older turns until it is read afresh).
            let from = rng.below(history.len() as u64 + 2);
            let mut live = whole_folded;
            live.revert_from(from);
            let left: Vec<(u64, HistoryTurn)> =
                history.iter().filter(|(i, _)| *i < from).cloned().collect();
            let mut restarted = Recent::restored(left, failed, &limits);
            restarted.fold_before(folded.min(from));
            let expect_next = from.min(whole.next_index());
            assert_eq!(live.next_index(), expect_next, "seed {seed}: from {from}");
            assert_eq!(
                restarted.next_index(),
                expect_next,
                "seed {seed}: from {from}"
            );
            assert!(
                restarted.turns().ends_with(live.turns()),
                "seed {seed}: from {from}, fold {folded}: {:?} against {:?}",
                live.turns(),
                restarted.turns()
            );
            assert_eq!(
                live.push(&next, false, &limits),
                restarted.push(&next, false, &limits),
                "seed {seed}: the next index after a rewind"
            );
            assert_eq!(
                read.push(&next, false, &limits),
                whole.push(&next, false, &limits),
                "seed {seed}: the next index"
            );
            // Bounded by the walk: its entries, the one it stops at, and one prompt.
            assert!(
                picked.len() <= limits.max_context_turns * 8 + 2,
                "seed {seed}"
            );
        }
    }
}
