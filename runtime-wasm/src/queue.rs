//! The work a driver does in JS (send a frame, call `onEvent`, write the store, ...), kept in
//! the order the core asked for it. A JS callback may call back into the driver (an `onEvent`
//! that answers a card with `respond`): what that call makes joins the end of the queue, and
//! the call already performing it on the stack gets to it, so frames leave in the core's
//! order and no state is borrowed while JS runs.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

pub struct Queue<A> {
    items: RefCell<VecDeque<A>>,
    performing: Cell<bool>,
}

impl<A> Default for Queue<A> {
    fn default() -> Self {
        Queue {
            items: RefCell::new(VecDeque::new()),
            performing: Cell::new(false),
        }
    }
}

impl<A> Queue<A> {
    pub fn push(&self, more: impl IntoIterator<Item = A>) {
        self.items.borrow_mut().extend(more);
    }

    /// Perform every item with `perform`, in order, unless a call further up the stack is
    /// already doing so. Returns whether this call did (and so should finish the round: arm
    /// the timer).
    pub fn perform(&self, mut perform: impl FnMut(A)) -> bool {
        if self.performing.replace(true) {
            return false;
        }
        loop {
            // The borrow ends with this statement: `perform` may push more.
            let next = self.items.borrow_mut().pop_front();
            match next {
                Some(item) => perform(item),
                None => break,
            }
        }
        self.performing.set(false);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_pushed_while_performing_come_after_those_already_queued() {
        let q = Queue::default();
        q.push([1, 2]);
        let mut seen = Vec::new();
        let outer = q.perform(|n| {
            seen.push(n);
            if n == 1 {
                q.push([3]);
                // A nested round (a callback calling back in) leaves them to this one.
                assert!(!q.perform(|_| unreachable!("the outer round performs")));
            }
        });
        assert!(outer);
        assert_eq!(seen, [1, 2, 3]);
    }
}
