//! Requests the device makes of its shell whose answers come back as inputs (a path to resolve,
//! an attachment to write): each gets the next number, and what it was made for is kept under
//! that number until it is answered. An answer to a number not waited for (answered already, or
//! let go) finds nothing.

use std::collections::BTreeMap;

#[derive(Debug)]
pub(super) struct Asked<T> {
    waiting: BTreeMap<u64, T>,
    next: u64,
}

impl<T> Default for Asked<T> {
    fn default() -> Self {
        Asked {
            waiting: BTreeMap::new(),
            next: 0,
        }
    }
}

impl<T> Asked<T> {
    /// Keep `what` until its answer: the number of its request.
    pub fn ask(&mut self, what: T) -> u64 {
        let request = self.next;
        self.next += 1;
        self.waiting.insert(request, what);
        request
    }

    /// The number the next request will get (for one whose number is needed before it is
    /// made).
    pub fn next_number(&self) -> u64 {
        self.next
    }

    /// Request `request` was answered: what it was made for, once.
    pub fn answered(&mut self, request: u64) -> Option<T> {
        self.waiting.remove(&request)
    }

    /// How many are waited for.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Nothing is waited for.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Let go of the requests `keep` says no to (their answers will find nothing).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.waiting.retain(|_, what| keep(what));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_numbered_and_answered_once() {
        let mut asked = Asked::default();
        assert_eq!(asked.next_number(), 0);
        let a = asked.ask("a");
        let b = asked.ask("b");
        assert_eq!((a, b, asked.next_number()), (0, 1, 2));
        assert_eq!(asked.answered(b), Some("b"));
        assert_eq!(asked.answered(b), None, "answered once");
        asked.retain(|w| *w != "a");
        assert_eq!(asked.answered(a), None, "let go");
        // Numbers never repeat.
        assert_eq!(asked.ask("c"), 2);
    }
}
