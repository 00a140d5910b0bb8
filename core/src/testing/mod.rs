//! Test machinery, behind the `testing` feature: the in-memory `Pair`, the fuzz drivers, and what
//! both run: the fake OS a device runs on, the oracle of what it says on its connections, and the
//! order of its persists.

mod connections;
pub mod device_frames;
pub mod fake_instance;
mod fake_os;
pub mod fuzz;
mod oracle;
mod pair;
mod persist_order;

pub use fake_os::{FakeOs, FakeRepo, USER_CONFIG};
pub use pair::{Dir, Faults, Livelock, Pair, Trace};

use crate::client::{ClientEvent, Reattach};

/// How each reattached turn among `events` was picked up, in order.
pub fn reattached(events: &[ClientEvent]) -> Vec<&Reattach> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reattached { how, .. } => Some(how),
            _ => None,
        })
        .collect()
}
