//! A [`ClientEvent`] as a plain JSON object (`{"kind": "answer", "id": 3, "result": ...}`): the
//! shape the wasm bindings hand to JS (`ClientEvent` in bindings/lembas.d.ts) and
//! `lembas test-instance` prints, written once for both: what `ClientEvent`'s serde derive cannot
//! say on its own.

use serde::ser::SerializeMap;
use serde::Serializer;
use serde_json::Value;

#[cfg(feature = "typed-events")]
use super::heard::{EVENT, UPDATE};
use super::{ClientEvent, Reattach};
use crate::jsonrpc::RpcError;
#[cfg(feature = "typed-events")]
use crate::wire::event::{card::CardParams, lembas::EventParams, update::UpdateParams};
use crate::wire::handshake::Hello;

/// An event as a JSON value (what `lembas test-instance` prints).
pub fn event_json(e: &ClientEvent) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

crate::shape::member_fn!(hello_member, "hello", Hello);

/// A typed notification as the JS API has it: `{ method, params }` beside its `kind`.
#[cfg(feature = "typed-events")]
fn notification<S: Serializer, P: serde::Serialize>(
    method: &str,
    params: &P,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("method", method)?;
    m.serialize_entry("params", params)?;
    m.end()
}

#[cfg(feature = "typed-events")]
pub(super) fn update_notification<S: Serializer>(
    params: &UpdateParams,
    s: S,
) -> Result<S::Ok, S::Error> {
    notification(UPDATE, params, s)
}

#[cfg(feature = "typed-events")]
pub(super) fn event_notification<S: Serializer>(
    params: &EventParams,
    s: S,
) -> Result<S::Ok, S::Error> {
    notification(EVENT, params, s)
}

/// A typed card as the JS API has it: `{ id, method, params }` beside its `kind`, as the
/// request it came in.
#[cfg(feature = "typed-events")]
#[allow(clippy::borrowed_box)] // serde hands the field as it is held
pub(super) fn card_request<S: Serializer>(
    id: &crate::jsonrpc::Id,
    card: &Box<CardParams>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(3))?;
    m.serialize_entry("id", id)?;
    m.serialize_entry("method", card.method())?;
    m.serialize_entry("params", card)?;
    m.end()
}

/// An answer's `result` or `error` member.
pub(super) fn outcome<S: Serializer>(
    outcome: &Result<Value, RpcError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(1))?;
    match outcome {
        Ok(v) => m.serialize_entry("result", v)?,
        Err(e) => m.serialize_entry("error", e)?,
    }
    m.end()
}

/// `how` by name, and an import's `turns` beside it.
pub(super) fn reattach<S: Serializer>(how: &Reattach, s: S) -> Result<S::Ok, S::Error> {
    let name = match how {
        Reattach::Following => "following",
        Reattach::Waiting => "waiting",
        Reattach::Imported(_) => "imported",
        Reattach::Resent => "resent",
        Reattach::Gone => "gone",
    };
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("how", name)?;
    if let Reattach::Imported(turns) = how {
        m.serialize_entry("turns", turns)?;
    }
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;
    use serde_json::json;

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
