//! A [`ClientEvent`] as a plain JSON object (`{"kind": "answer", "id": 3, "result": ...}`): the
//! shape the wasm bindings hand to JS (`ClientEvent` in bindings/lembas.d.ts) and
//! `lembas test-instance` prints, written once for both; it is `ClientEvent`'s serde shape.

use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use super::{ClientEvent, Reattach};
use crate::jsonrpc::RpcError;

pub fn event_json(e: &ClientEvent) -> Value {
    match e {
        ClientEvent::Hello(h) => json!({ "kind": "hello", "hello": h }),
        ClientEvent::Ready { capabilities } => {
            json!({ "kind": "ready", "capabilities": capabilities })
        }
        ClientEvent::Refused { code, reason } => {
            json!({ "kind": "refused", "code": code, "reason": reason })
        }
        ClientEvent::Answer {
            id,
            method,
            outcome: o,
        } => with_outcome(json!({ "kind": "answer", "id": id, "method": method }), o),
        ClientEvent::PromptAnswered {
            session_id,
            turn_id,
            outcome: o,
        } => with_outcome(
            json!({ "kind": "prompt_answered", "sessionId": session_id, "turnId": turn_id }),
            o,
        ),
        ClientEvent::Reattached {
            session_id,
            turn_id,
            how,
        } => {
            let mut v = json!({ "kind": "reattached", "sessionId": session_id, "turnId": turn_id });
            v["how"] = json!(match how {
                Reattach::Following => "following",
                Reattach::Waiting => "waiting",
                Reattach::Imported(_) => "imported",
                Reattach::Resent => "resent",
                Reattach::Gone => "gone",
            });
            if let Reattach::Imported(turns) = how {
                v["turns"] = Value::Array(turns.clone());
            }
            v
        }
        ClientEvent::Deleted {
            session_id,
            existed,
        } => json!({ "kind": "deleted", "sessionId": session_id, "existed": existed }),
        ClientEvent::DeleteGivenUp { session_id, reason } => {
            json!({ "kind": "delete_given_up", "sessionId": session_id, "reason": reason })
        }
        ClientEvent::CardSettled {
            session_id,
            tool_call_id,
        } => json!({ "kind": "card_settled", "sessionId": session_id, "toolCallId": tool_call_id }),
        ClientEvent::Notification { method, params } => {
            json!({ "kind": "notification", "method": method, "params": params })
        }
        ClientEvent::Request { id, method, params } => {
            json!({ "kind": "request", "id": id, "method": method, "params": params })
        }
    }
}

impl Serialize for ClientEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        event_json(self).serialize(s)
    }
}

/// `base` with the answer's `result` or `error` member.
fn with_outcome(mut base: Value, outcome: &Result<Value, RpcError>) -> Value {
    if let Value::Object(m) = &mut base {
        let (key, value) = match outcome {
            Ok(v) => ("result", v.clone()),
            Err(e) => ("error", json!(e)),
        };
        m.insert(key.into(), value);
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;

    #[test]
    fn answers_carry_their_outcome_and_ids_stay_json() {
        let e = ClientEvent::Answer {
            id: Id::string("a"),
            method: "session/new".into(),
            outcome: Err(RpcError::new(-32602, "bad")),
        };
        assert_eq!(
            event_json(&e),
            json!({ "kind": "answer", "id": "a", "method": "session/new",
                    "error": { "code": -32602, "message": "bad" } })
        );
        let e = ClientEvent::Reattached {
            session_id: "s".into(),
            turn_id: "t".into(),
            how: Reattach::Imported(vec![json!({ "role": "user" })]),
        };
        let v = event_json(&e);
        assert_eq!(
            (v["how"].as_str(), v["turns"][0]["role"].as_str()),
            (Some("imported"), Some("user"))
        );
    }
}
