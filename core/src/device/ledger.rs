//! The turn ledger of one session: the last N turn ids accepted, each queued, running or done
//! (with its answer). A prompt whose turn id is here never runs again. Lookups are O(1).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use crate::turn::Answer;

/// A fixed-key hasher: iteration order and cost stay deterministic (no OS randomness in the
/// core), and a map of 200 ids a session gives a peer nothing to flood.
pub(crate) type Fixed = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnState {
    Queued,
    Running,
    Done(Answer),
}

#[derive(Debug)]
struct Slot {
    order: u64,
    state: TurnState,
    /// The history entry its prompt is, while the model is given it (rewind.rs).
    history: Option<u64>,
}

#[derive(Debug)]
pub struct Ledger {
    slots: HashMap<Rc<str>, Slot, Fixed>,
    /// Turn ids, oldest first.
    order: VecDeque<Rc<str>>,
    next_order: u64,
    capacity: usize,
}

impl Ledger {
    pub fn new(capacity: usize) -> Ledger {
        Ledger {
            // Grown as turns come: a session that never prompts (most of those a device keeps
            // in memory at once) costs nothing here.
            slots: HashMap::with_hasher(Fixed::default()),
            order: VecDeque::new(),
            next_order: 0,
            capacity: capacity.max(1),
        }
    }

    pub fn get(&self, turn: &str) -> Option<&TurnState> {
        self.slots.get(turn).map(|s| &s.state)
    }

    /// Accept a new turn as queued; returns its order and the ids forgotten to make room (the
    /// oldest finished ones).
    pub fn accept(&mut self, turn: &str) -> (u64, Vec<String>) {
        let order = self.next_order;
        self.insert(turn, order, TurnState::Queued);
        (order, self.evict())
    }

    pub fn set(&mut self, turn: &str, state: TurnState) {
        if let Some(slot) = self.slots.get_mut(turn) {
            slot.state = state;
        }
    }

    /// Forget a turn that never started (its prompt was refused after it was accepted): the
    /// same id sent again is a new prompt.
    pub fn forget(&mut self, turn: &str) {
        if self.slots.remove(turn).is_some() {
            self.order.retain(|t| &**t != turn);
        }
    }

    pub fn order_of(&self, turn: &str) -> Option<u64> {
        self.slots.get(turn).map(|s| s.order)
    }

    /// The history entry turn `turn`'s prompt is, while it is not reverted.
    pub fn history_of(&self, turn: &str) -> Option<u64> {
        self.slots.get(turn).and_then(|s| s.history)
    }

    /// The turn whose prompt is the newest history entry the model is still given, with it.
    pub fn last_given(&self) -> Option<(String, u64)> {
        self.order
            .iter()
            .filter_map(|id| Some((id, self.slots.get(id)?.history?)))
            .max_by_key(|(_, index)| *index)
            .map(|(id, index)| (id.to_string(), index))
    }

    /// Turn `turn`'s prompt is history entry `index`.
    pub fn set_history(&mut self, turn: &str, index: u64) {
        if let Some(slot) = self.slots.get_mut(turn) {
            slot.history = Some(index);
        }
    }

    /// The turns whose prompts are history entries `from` and after are reverted: they keep
    /// their answers (a prompt sent again with one of their ids gets it) and lose their
    /// entries. Each, oldest first, with its order and state, to store it so.
    pub fn revert_from(&mut self, from: u64) -> Vec<(String, u64, TurnState)> {
        let mut reverted = Vec::new();
        for id in &self.order {
            let Some(slot) = self.slots.get_mut(id) else {
                continue;
            };
            if slot.history.is_some_and(|h| h >= from) {
                slot.history = None;
                reverted.push((id.to_string(), slot.order, slot.state.clone()));
            }
        }
        reverted
    }

    /// Put back a turn read from the store (in any order; `finish_restore` sorts them).
    pub fn restore(&mut self, turn: &str, order: u64, state: TurnState, history: Option<u64>) {
        self.insert(turn, order, state);
        if let Some(index) = history {
            self.set_history(turn, index);
        }
    }

    pub fn finish_restore(&mut self) -> Vec<String> {
        let mut ids: Vec<Rc<str>> = self.order.drain(..).collect();
        ids.sort_by_key(|t| self.slots[t].order);
        self.order = ids.into();
        self.evict()
    }

    /// The last turn that finished whose prompt the history still has (`lastTurnId` in
    /// `_lembas/session/status`): a client reattaching imports that one from the history, so a
    /// reverted turn (`/undo`, rewind) or an action (`/compact`, `/undo`), which the history
    /// does not have, is never named; a resend of its id gets its answer instead. Turns run one
    /// at a time and take history entries as they start, so the newest entry is the last.
    pub fn last_done(&self) -> Option<&str> {
        self.slots
            .iter()
            .filter(|(_, s)| matches!(s.state, TurnState::Done(_)))
            .filter_map(|(id, s)| Some((id, s.history?)))
            .max_by_key(|(_, index)| *index)
            .map(|(id, _)| &**id)
    }

    /// How many turn ids the ledger holds.
    pub fn order_len(&self) -> usize {
        self.slots.len()
    }

    fn insert(&mut self, turn: &str, order: u64, state: TurnState) {
        let id: Rc<str> = Rc::from(turn);
        if self
            .slots
            .insert(
                id.clone(),
                Slot {
                    order,
                    state,
                    history: None,
                },
            )
            .is_none()
        {
            self.order.push_back(id);
        }
        // An order read back is at most `ORDER_MAX` (restore.rs): no overflow.
        self.next_order = self.next_order.max(order + 1);
    }

    /// Forget the oldest finished turns while over capacity. Queued and running turns are
    /// never forgotten (the session's queue bound keeps them well under the capacity).
    fn evict(&mut self) -> Vec<String> {
        let mut forgotten = Vec::new();
        while self.slots.len() > self.capacity {
            let Some(pos) = self
                .order
                .iter()
                .position(|t| matches!(self.slots[t].state, TurnState::Done(_)))
            else {
                break;
            };
            let id = self.order.remove(pos).expect("position is in range");
            self.slots.remove(&id);
            forgotten.push(id.to_string());
        }
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StopReason;

    fn done() -> TurnState {
        TurnState::Done(Answer::stopped(StopReason::EndTurn, Default::default()))
    }

    #[test]
    fn the_201st_turn_forgets_the_oldest() {
        let mut l = Ledger::new(200);
        for i in 0..200 {
            let t = format!("t{i}");
            l.accept(&t);
            l.set_history(&t, i);
            l.set(&t, done());
        }
        assert!(l.get("t0").is_some());
        let (_, forgotten) = l.accept("t200");
        assert_eq!(forgotten, vec!["t0".to_string()]);
        assert!(l.get("t0").is_none());
        assert_eq!(l.order_len(), 200);
        assert_eq!(l.last_done(), Some("t199"));
    }

    #[test]
    fn a_revert_takes_the_history_of_the_turns_from_an_entry_on_once() {
        let mut l = Ledger::new(10);
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            l.accept(t);
            l.set_history(t, 2 * i as u64);
            l.set(t, done());
        }
        l.accept("action");
        l.set("action", done());
        let reverted: Vec<String> = l.revert_from(2).into_iter().map(|(t, ..)| t).collect();
        assert_eq!(reverted, ["b", "c"]);
        assert_eq!(l.history_of("a"), Some(0));
        assert_eq!((l.history_of("b"), l.history_of("c")), (None, None));
        // The answers stay for a duplicate prompt; a second revert finds nothing.
        assert_eq!(l.get("b"), Some(&done()));
        assert!(l.revert_from(2).is_empty());
        // The last finished turn the history still has: not the reverted ones, not the action.
        assert_eq!(l.last_done(), Some("a"));
        l.revert_from(0);
        assert_eq!(l.last_done(), None);
    }

    #[test]
    fn unfinished_turns_are_never_forgotten() {
        let mut l = Ledger::new(2);
        l.accept("a");
        l.accept("b");
        let (_, forgotten) = l.accept("c");
        assert!(forgotten.is_empty());
        l.set("a", done());
        assert_eq!(l.accept("d").1, vec!["a".to_string()]);
    }
}
