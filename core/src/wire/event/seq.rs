//! `_meta.lembas.seq`: the session's sequence number on every event the device sends about a
//! session (`session/update`, `_lembas/event`, cards, `_lembas/permission/settled`). Our
//! extension (capability `events`): a client that reattaches asks `_lembas/session/events` for
//! what came after the last one it saw. `_meta` is open in ACP, so a client that does not know
//! it ignores it.

use serde::{Deserialize, Serialize};

/// `_meta` of an event: `{ lembas: { seq } }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqMeta {
    pub lembas: Seq,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seq {
    /// Per session, one more than the last, never reused: a restart of the device counts on
    /// from above every seq before it.
    pub seq: u64,
}

impl SeqMeta {
    pub fn new(seq: u64) -> SeqMeta {
        SeqMeta {
            lembas: Seq { seq },
        }
    }

    /// `Some` for the `_meta` member of a params struct.
    pub fn some(seq: u64) -> Option<SeqMeta> {
        Some(SeqMeta::new(seq))
    }
}
