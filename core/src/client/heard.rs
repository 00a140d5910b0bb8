//! A device notification or card read as its `wire::event` type: with the `typed-events`
//! feature the client hands its UI a `session/update`, an `_lembas/event` or a card typed
//! ([`ClientEvent::Update`], [`ClientEvent::Event`], [`ClientEvent::Card`]), so no one picks at
//! a `Value` for them. One it cannot read typed (an update kind the vocabulary does not know, a
//! newer device's) stays a [`ClientEvent::Notification`] or [`ClientEvent::Request`], as every
//! one does without the feature.

use serde_json::Value;

use super::ClientEvent;
use crate::jsonrpc::Id;

impl ClientEvent {
    /// The event a notification the device sent is: typed where the vocabulary knows it.
    pub(super) fn heard(method: String, params: Value) -> ClientEvent {
        typed::read(&method, &params).unwrap_or(ClientEvent::Notification { method, params })
    }

    /// The event a request the device sent is: a typed card where the vocabulary knows it.
    pub(super) fn asked(id: Id, method: String, params: Value) -> ClientEvent {
        typed::asked(id, method, params)
    }
}

#[cfg(not(feature = "typed-events"))]
mod typed {
    use super::*;

    pub(super) fn read(_method: &str, _params: &Value) -> Option<ClientEvent> {
        None
    }

    pub(super) fn asked(id: Id, method: String, params: Value) -> ClientEvent {
        ClientEvent::Request { id, method, params }
    }
}

#[cfg(feature = "typed-events")]
pub(super) use typed::{EVENT, UPDATE};

#[cfg(feature = "typed-events")]
mod typed {
    use serde::Deserialize;

    use super::*;
    use crate::wire::event::card::{CardParams, PERMISSION, PLAN, QUESTION};
    use crate::wire::event::lembas::EventParams;
    use crate::wire::event::update::UpdateParams;

    pub(in crate::client) const UPDATE: &str = "session/update";
    pub(in crate::client) const EVENT: &str = "_lembas/event";

    pub(super) fn read(method: &str, params: &Value) -> Option<ClientEvent> {
        match method {
            UPDATE => UpdateParams::deserialize(params)
                .ok()
                .map(ClientEvent::Update),
            EVENT => EventParams::deserialize(params)
                .ok()
                .map(ClientEvent::Event),
            _ => None,
        }
    }

    /// The card `params` are, if `method` carries one and the card encodes back to exactly
    /// `params`: one with a member the vocabulary does not know (a newer device's) or writes
    /// otherwise stays a request, so the UI is handed all that came, and the JS shape of a
    /// typed card is the request's byte for byte.
    fn card(method: &str, params: &Value) -> Option<CardParams> {
        let card = match method {
            PERMISSION => CardParams::Permission(Deserialize::deserialize(params).ok()?),
            QUESTION => CardParams::Question(Deserialize::deserialize(params).ok()?),
            PLAN => CardParams::Plan(Deserialize::deserialize(params).ok()?),
            _ => return None,
        };
        (serde_json::to_value(&card).ok()? == *params).then_some(card)
    }

    pub(super) fn asked(id: Id, method: String, params: Value) -> ClientEvent {
        match card(&method, &params) {
            Some(card) => ClientEvent::Card {
                id,
                card: Box::new(card),
            },
            None => ClientEvent::Request { id, method, params },
        }
    }

    impl ClientEvent {
        /// The `session/update` this is; `None` for any other event.
        pub fn update(&self) -> Option<&UpdateParams> {
            match self {
                ClientEvent::Update(u) => Some(u),
                _ => None,
            }
        }

        /// The `_lembas/event` this is; `None` for any other event.
        pub fn lembas_event(&self) -> Option<&EventParams> {
            match self {
                ClientEvent::Event(e) => Some(e),
                _ => None,
            }
        }

        /// The card this is, and the request to answer; `None` for any other event.
        pub fn card(&self) -> Option<(&Id, &CardParams)> {
            match self {
                ClientEvent::Card { id, card } => Some((id, card.as_ref())),
                _ => None,
            }
        }
    }
}

#[cfg(all(test, feature = "typed-events"))]
mod tests {
    use super::typed::{EVENT, UPDATE};
    use super::*;
    use crate::client::event_json;
    use crate::wire::event::card::{PLAN, QUESTION};
    use crate::wire::event::lembas::LembasEvent;
    use crate::wire::event::update::SessionUpdate;
    use serde_json::json;

    #[test]
    fn known_notifications_read_typed_and_others_stay_values() {
        let chunk = json!({ "sessionId": "ses_1", "update": { "sessionUpdate": "agent_message_chunk",
                                                     "content": { "type": "text", "text": "hi" } } });
        let heard = ClientEvent::heard(UPDATE.into(), chunk.clone());
        let u = heard.update().expect("a chunk reads typed");
        assert!(matches!(&u.update, SessionUpdate::AgentMessageChunk(c) if c.content.text == "hi"));
        assert!(heard.lembas_event().is_none());
        // The JS shape is the notification's, whole.
        assert_eq!(
            event_json(&heard),
            json!({ "kind": "notification", "method": UPDATE, "params": chunk })
        );

        let mode = json!({ "sessionId": "ses_1", "event": { "type": "mode", "mode": "plan" } });
        let heard = ClientEvent::heard(EVENT.into(), mode.clone());
        assert!(matches!(
            heard.lembas_event().unwrap().event,
            LembasEvent::Mode(_)
        ));
        assert_eq!(
            event_json(&heard),
            json!({ "kind": "notification", "method": EVENT, "params": mode })
        );

        let unknown = json!({ "sessionId": "ses_1",
                              "update": { "sessionUpdate": "a_newer_devices_update" } });
        let heard = ClientEvent::heard(UPDATE.into(), unknown.clone());
        assert_eq!(
            heard,
            ClientEvent::Notification {
                method: UPDATE.into(),
                params: unknown
            }
        );
        let other = json!({ "sessionId": "ses_1" });
        let heard = ClientEvent::heard("_lembas/session/deleted".into(), other.clone());
        assert_eq!(
            event_json(&heard),
            json!({ "kind": "notification", "method": "_lembas/session/deleted", "params": other })
        );
    }

    /// A card reads typed, and its JS shape is the request's byte for byte; one the vocabulary
    /// would not write back as it came, and any other request, stay requests.
    #[test]
    fn cards_read_typed_and_encode_as_the_request_did() {
        let request = |method: &str, params: &Value| ClientEvent::Request {
            id: Id::number(7),
            method: method.into(),
            params: params.clone(),
        };
        for card in crate::wire::event::card::tests::every_card() {
            let params = serde_json::to_value(&card).unwrap();
            let asked = ClientEvent::asked(Id::number(7), card.method().into(), params.clone());
            assert_eq!(asked.card(), Some((&Id::number(7), &card)));
            assert_eq!(
                serde_json::to_string(&asked).unwrap(),
                serde_json::to_string(&request(card.method(), &params)).unwrap()
            );
        }

        let plan = json!({ "_meta": { "lembas": {} }, "path": "plan.md", "sessionId": "ses_1",
                           "text": "# p", "toolCallId": "call_4" });
        assert!(ClientEvent::asked(Id::number(7), PLAN.into(), plan.clone())
            .card()
            .is_some());
        let mut newer = plan.clone();
        newer["estimate"] = json!("2h");
        let mut said_default = plan.clone();
        said_default["_meta"]["lembas"]["patient"] = json!(false);
        let mut not_a_plan = plan.clone();
        not_a_plan["text"] = json!(3);
        for (method, params) in [
            (PLAN, newer),
            (PLAN, said_default),
            (PLAN, not_a_plan),
            (QUESTION, plan.clone()),
            ("_lembas/newer_card", plan),
        ] {
            assert_eq!(
                ClientEvent::asked(Id::number(7), method.into(), params.clone()),
                request(method, &params)
            );
        }
    }
}
