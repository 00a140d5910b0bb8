//! The fuzzer's invariants on what a device says on its connections, as a ledger a harness keeps
//! beside the device (the fuzz `Run`, the Pair): told every frame the device is given and every
//! frame it writes, it panics when a promise is broken:
//!
//! - every frame written is JSON, a JSON-RPC 2.0 message, with no raw newline;
//! - on each connection, a request id is answered at most as many times as it was received;
//! - a link's first frame is its one `_lembas/hello`; no other connection gets one; nothing else
//!   is sent before the connection's `initialize` was answered, and that answer succeeds at most
//!   once;
//! - every notification the device sends that `wire::event` types (updates, events, notices)
//!   reads as its type, and that type writes it back unchanged: a client can decode all of it
//!   into typed values, losing nothing.
//!
//! Whether the connection is open at all is the harness's to check: it knows when it opened and
//! closed them.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::fuzz::{check_out_frame, lossy};
use crate::device::{ConnId, ConnKind};
use crate::jsonrpc::{self, FrameLimits, Message};
use crate::wire::event::card::{PermissionParams, PlanParams, QuestionParams};
use crate::wire::event::lembas::EventParams;
use crate::wire::event::notice::{DeletedParams, SettledParams, DELETED, SETTLED};
use crate::wire::event::update::UpdateParams;

/// What was said on each connection of one device process.
#[derive(Debug, Default)]
pub(crate) struct Conversations {
    /// Request ids received, and answers sent, per connection and id text.
    received: BTreeMap<(ConnId, String), u64>,
    answered: BTreeMap<(ConnId, String), u64>,
    /// Connections whose `initialize` succeeded, and how many times it did.
    initialized: BTreeMap<ConnId, u32>,
    hello: BTreeSet<ConnId>,
    /// Connections that have had any frame sent on them.
    spoke: BTreeSet<ConnId>,
    /// `(conn, id)` of each `initialize` received and not yet answered (its answer may wait
    /// behind a held persist).
    init_pending: BTreeSet<(ConnId, String)>,
}

impl Conversations {
    /// The device was given `frame` on `conn` (decoded as the device does, under `limits`).
    pub(crate) fn heard(&mut self, conn: ConnId, frame: &[u8], limits: &FrameLimits) {
        let id = match jsonrpc::decode(frame, limits) {
            Ok(Message::Request(r)) => {
                let id = r.id.as_json().to_string();
                if r.method == "initialize" {
                    self.init_pending.insert((conn, id.clone()));
                }
                Some(id)
            }
            Err(e) => e.id.map(|id| id.as_json().to_string()),
            Ok(_) => None,
        };
        if let Some(id) = id {
            *self.received.entry((conn, id)).or_default() += 1;
        }
    }

    /// The device wrote `frame` on `conn`, an open connection of `kind`: check it. Returns the
    /// session id a successful result names, if any.
    pub(crate) fn said(&mut self, conn: ConnId, kind: ConnKind, frame: &[u8]) -> Option<String> {
        let first = self.spoke.insert(conn);
        let msg = check_out_frame(frame);
        let method = match &msg {
            Message::Request(r) => Some(r.method.to_string()),
            Message::Notification(n) => Some(n.method.to_string()),
            Message::Response(_) => None,
        };

        if kind == ConnKind::Link && first {
            assert_eq!(
                method.as_deref(),
                Some("_lembas/hello"),
                "a link's first frame is `_lembas/hello`: {}",
                lossy(frame)
            );
        }
        match msg {
            Message::Response(r) => {
                let id = r.id?;
                let key = (conn, id.as_json().to_string());
                let answers = self.answered.entry(key.clone()).or_default();
                *answers += 1;
                let received = self.received.get(&key).copied().unwrap_or(0);
                assert!(
                    *answers <= received,
                    "id {} on {conn:?} answered {} times but received {received} times: {}",
                    key.1,
                    *answers,
                    lossy(frame)
                );
                let result = r.outcome.ok()?;
                let Ok(Value::Object(o)) = serde_json::from_str::<Value>(result.get()) else {
                    return None;
                };
                // A peer may reuse an id while a request is in flight: only the answer that is
                // an `initialize` result takes the pending `initialize` of that id (an earlier
                // error to another request with the same id must not).
                let is_init_answer =
                    o.contains_key("agentCapabilities") && self.init_pending.remove(&key);
                if is_init_answer {
                    let n = self.initialized.entry(conn).or_default();
                    *n += 1;
                    assert!(
                        *n <= 1,
                        "`initialize` succeeded twice on {conn:?}: {}",
                        lossy(frame)
                    );
                }
                match o.get("sessionId") {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => None,
                }
            }
            _ if method.as_deref() == Some("_lembas/hello") => {
                assert_eq!(
                    kind,
                    ConnKind::Link,
                    "`_lembas/hello` goes on the link only"
                );
                assert!(
                    self.hello.insert(conn),
                    "`_lembas/hello` sent twice on {conn:?}"
                );
                None
            }
            _ => {
                assert!(
                    self.initialized.contains_key(&conn),
                    "{} sent on {conn:?} before its `initialize` was answered: {}",
                    method.as_deref().unwrap_or("?"),
                    lossy(frame)
                );
                // Requests are left out: `Device::test_request` sends any params it is given.
                let Message::Notification(jsonrpc::Notification { params, .. }) = &msg else {
                    return None;
                };
                let m = method.as_deref().unwrap_or("?");
                if let Err(why) = reads_as_typed(m, *params) {
                    panic!(
                        "{m} does not read as its wire::event type: {why}: {}",
                        lossy(frame)
                    );
                }
                None
            }
        }
    }
}

/// Whether `params` of a message the device sent with `method` reads as the `wire::event` type
/// of that method, and that type writes the same JSON back (compared as values, so a number's
/// last digit a float parse may move does not count; the key order is held by wire::event's own
/// tests and the transcripts). A method the vocabulary does not type passes.
fn reads_as_typed(method: &str, params: Option<&RawValue>) -> Result<(), String> {
    fn again<T: DeserializeOwned + Serialize>(params: &str) -> Result<Value, String> {
        let typed: T = serde_json::from_str(params).map_err(|e| e.to_string())?;
        serde_json::to_value(&typed).map_err(|e| e.to_string())
    }
    let params = params.map_or("null", RawValue::get);
    let back = match method {
        "session/update" => again::<UpdateParams>(params),
        "_lembas/event" => again::<EventParams>(params),
        "session/request_permission" => again::<PermissionParams>(params),
        "_lembas/question" => again::<QuestionParams>(params),
        "_lembas/plan" => again::<PlanParams>(params),
        SETTLED => again::<SettledParams>(params),
        DELETED => again::<DeletedParams>(params),
        _ => return Ok(()),
    }?;
    let sent: Value = serde_json::from_str(params).map_err(|e| e.to_string())?;
    if back == sent {
        Ok(())
    } else {
        Err(format!("it writes back as {back}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_frame_bytes: 4096,
        max_depth: 8,
    };

    fn initialized(conn: ConnId) -> Conversations {
        let mut talk = Conversations::default();
        talk.heard(
            conn,
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
            &LIMITS,
        );
        talk.said(
            conn,
            ConnKind::Stdio,
            br#"{"jsonrpc":"2.0","id":0,"result":{"agentCapabilities":{}}}"#,
        );
        talk
    }

    #[test]
    fn an_answer_once_per_request_and_updates_after_initialize_pass() {
        let mut talk = initialized(ConnId(1));
        talk.heard(
            ConnId(1),
            br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#,
            &LIMITS,
        );
        let session = talk.said(
            ConnId(1),
            ConnKind::Stdio,
            br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"ses_1"}}"#,
        );
        assert_eq!(session.as_deref(), Some("ses_1"));
        talk.said(
            ConnId(1),
            ConnKind::Stdio,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"currentModeId":"plan","sessionUpdate":"current_mode_update"}}}"#,
        );
    }

    #[test]
    #[should_panic(expected = "does not read as its wire::event type")]
    fn an_update_the_vocabulary_cannot_read_is_caught() {
        let mut talk = initialized(ConnId(1));
        talk.said(
            ConnId(1),
            ConnKind::Stdio,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"mood"}}}"#,
        );
    }

    #[test]
    #[should_panic(expected = "answered 2 times but received 1 times")]
    fn a_request_answered_twice_is_caught() {
        let mut talk = initialized(ConnId(1));
        talk.heard(
            ConnId(1),
            br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#,
            &LIMITS,
        );
        for _ in 0..2 {
            talk.said(
                ConnId(1),
                ConnKind::Stdio,
                br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            );
        }
    }

    #[test]
    #[should_panic(expected = "before its `initialize` was answered")]
    fn an_update_before_initialize_is_caught() {
        let mut talk = Conversations::default();
        talk.said(
            ConnId(2),
            ConnKind::Stdio,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#,
        );
    }

    #[test]
    #[should_panic(expected = "a link's first frame is `_lembas/hello`")]
    fn a_link_that_does_not_begin_with_hello_is_caught() {
        let mut talk = Conversations::default();
        talk.said(
            ConnId(3),
            ConnKind::Link,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#,
        );
    }
}
