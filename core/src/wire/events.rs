//! `_lembas/session/events` (our extension, capability `events`): its params, and its answer,
//! a page of a session's event log. The device writes a page by hand (device/event_log.rs,
//! byte for byte what serializing an [`EventsPage`] writes, as its test holds); the client
//! decodes it as one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request: the events of `session_id` sent after `since`, at most `limit` of them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsParams {
    pub session_id: String,
    pub since: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// The answer: the events after `since`, oldest first; `next`, the seq to ask from for the
/// page after; `truncated`, the log no longer reaches back to `since` (the client imports
/// `history` instead).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    pub events: Vec<PagedEvent>,
    pub next: u64,
    pub truncated: bool,
}

/// One event as it was sent: its method, its params and its seq (fields in the order a
/// `Value` map sorts them, as the device writes them).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct PagedEvent {
    pub method: String,
    pub params: Value,
    pub seq: u64,
}
