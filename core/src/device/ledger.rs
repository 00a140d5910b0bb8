//! The turn ledger of one session: the last N turn ids accepted, each queued, running or done
//! (with its answer). A prompt whose turn id is here never runs again. Lookups are O(1).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::engine::StopReason;
use crate::jsonrpc::{self, Id, RpcError};
use crate::wire::{need, one_pass};

/// A fixed-key hasher: iteration order and cost stay deterministic (no OS randomness in the
/// core), and a map of 200 ids a session gives a peer nothing to flood.
pub(crate) type Fixed = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// How a finished turn answered its prompt, kept so a duplicate gets the very same answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    Stopped {
        stop_reason: StopReason,
        /// Further `_meta.lembas` members beside `turnId` (`unsent`, `message`), as a JSON
        /// object's text, or `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extra: Option<String>,
    },
    Failed {
        code: i64,
        message: String,
    },
}

/// A stored answer as it is read back, in one pass (an internally tagged enum would buffer it).
#[derive(Deserialize)]
struct AnswerFields {
    kind: AnswerKind,
    #[serde(default)]
    stop_reason: Option<StopReason>,
    #[serde(default)]
    extra: Option<String>,
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AnswerKind {
    Stopped,
    Failed,
}

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a stored answer", |f: AnswerFields| {
            Ok(match f.kind {
                AnswerKind::Stopped => Answer::Stopped {
                    stop_reason: need(f.stop_reason, "stop_reason")?,
                    extra: f.extra,
                },
                AnswerKind::Failed => Answer::Failed {
                    code: need(f.code, "code")?,
                    message: need(f.message, "message")?,
                },
            })
        })
    }
}

impl Answer {
    pub fn stopped(stop_reason: StopReason, extra: Map<String, Value>) -> Answer {
        Answer::Stopped {
            stop_reason,
            extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        }
    }

    /// The response frame to the prompt request `id` for turn `turn_id`.
    pub fn frame(&self, id: &Id, turn_id: &str) -> Vec<u8> {
        match self {
            Answer::Stopped { stop_reason, extra } => {
                let mut lembas = extra
                    .as_deref()
                    .and_then(|e| serde_json::from_str::<Map<String, Value>>(e).ok())
                    .unwrap_or_default();
                lembas.insert("turnId".into(), Value::String(turn_id.into()));
                let result = serde_json::json!({
                    "stopReason": stop_reason,
                    "_meta": { "lembas": lembas },
                });
                jsonrpc::encode_result(id, &result)
            }
            Answer::Failed { code, message } => jsonrpc::encode_error(
                Some(id),
                &RpcError::new(*code, message.clone()).with_data(serde_json::json!({
                    "turnId": turn_id
                })),
            ),
        }
    }
}

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
}

#[derive(Debug)]
pub struct Ledger {
    slots: HashMap<Rc<str>, Slot, Fixed>,
    /// Turn ids, oldest first.
    order: VecDeque<Rc<str>>,
    next_order: u64,
    capacity: usize,
    last_done: Option<Rc<str>>,
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
            last_done: None,
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
        let Some((key, _)) = self.slots.get_key_value(turn) else {
            return;
        };
        if matches!(state, TurnState::Done(_)) {
            self.last_done = Some(key.clone());
        }
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

    /// Put back a turn read from the store (in any order; `finish_restore` sorts them).
    pub fn restore(&mut self, turn: &str, order: u64, state: TurnState) {
        self.insert(turn, order, state);
    }

    pub fn finish_restore(&mut self) -> Vec<String> {
        let mut ids: Vec<Rc<str>> = self.order.drain(..).collect();
        ids.sort_by_key(|t| self.slots[t].order);
        self.order = ids.into();
        self.last_done = self
            .order
            .iter()
            .filter(|t| matches!(self.slots[*t].state, TurnState::Done(_)))
            .max_by_key(|t| self.slots[*t].order)
            .cloned();
        self.evict()
    }

    /// The last turn that finished.
    pub fn last_done(&self) -> Option<&str> {
        self.last_done.as_deref()
    }

    /// How many turn ids the ledger holds.
    pub fn order_len(&self) -> usize {
        self.slots.len()
    }

    fn insert(&mut self, turn: &str, order: u64, state: TurnState) {
        let id: Rc<str> = Rc::from(turn);
        if self
            .slots
            .insert(id.clone(), Slot { order, state })
            .is_none()
        {
            self.order.push_back(id);
        }
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
            if self.last_done.as_ref() == Some(&id) {
                self.last_done = None;
            }
            forgotten.push(id.to_string());
        }
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done() -> TurnState {
        TurnState::Done(Answer::stopped(StopReason::EndTurn, Map::new()))
    }

    #[test]
    fn the_201st_turn_forgets_the_oldest() {
        let mut l = Ledger::new(200);
        for i in 0..200 {
            let t = format!("t{i}");
            l.accept(&t);
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
    fn unfinished_turns_are_never_forgotten() {
        let mut l = Ledger::new(2);
        l.accept("a");
        l.accept("b");
        let (_, forgotten) = l.accept("c");
        assert!(forgotten.is_empty());
        l.set("a", done());
        assert_eq!(l.accept("d").1, vec!["a".to_string()]);
    }

    #[test]
    fn answers_rebuild_the_same_frame() {
        let mut extra = Map::new();
        extra.insert("unsent".into(), serde_json::json!(["later"]));
        let a = Answer::stopped(StopReason::Cancelled, extra);
        let stored = serde_json::to_string(&a).unwrap();
        let back: Answer = serde_json::from_str(&stored).unwrap();
        assert_eq!(
            a.frame(&Id::number(4), "t1"),
            back.frame(&Id::number(4), "t1")
        );
        let text = String::from_utf8(a.frame(&Id::number(4), "t1")).unwrap();
        assert!(text.contains(r#""stopReason":"cancelled""#), "{text}");
        assert!(text.contains(r#""unsent":["later"]"#), "{text}");
    }
}
