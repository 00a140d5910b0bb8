//! The fuzzer's invariant on persists, which every Pair test checks too: within one process,
//! each `Effect::Persist` the device asks for is numbered above the one before (a shell
//! acknowledges by number, so a repeat or a step back would acknowledge the wrong write).

/// The last persist number asked for in this device process (a restart starts a new ledger).
#[derive(Debug, Default)]
pub(crate) struct PersistOrder {
    last: u64,
}

impl PersistOrder {
    /// The device asked to persist `seq`; panics unless it is above the last one.
    pub(crate) fn asked(&mut self, seq: u64) {
        assert!(
            seq > self.last,
            "persists are numbered upwards: {seq} after {}",
            self.last
        );
        self.last = seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_must_go_up() {
        let mut order = PersistOrder::default();
        order.asked(1);
        order.asked(5);
        let repeat = std::panic::catch_unwind(move || order.asked(5));
        assert!(repeat.is_err(), "a repeated number is refused");
    }
}
