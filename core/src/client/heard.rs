//! A device notification or card read as its `wire::event` type: with the `typed-events`
//! feature the client hands its UI a `session/update`, an `_lembas/event` or a card typed
//! ([`ClientEvent::Update`], [`ClientEvent::Event`], [`ClientEvent::Card`]), so no one picks at
//! a `Value` for them. One is typed only when its type encodes back to exactly the params that
//! came; one it cannot read typed or would not write back as it came (an update kind the
//! vocabulary does not know, a member a newer device added) stays a
//! [`ClientEvent::Notification`] or [`ClientEvent::Request`], as every one does without the
//! feature, so nothing that came is lost.

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
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use super::*;
    use crate::wire::event::card::{CardParams, PERMISSION, PLAN, QUESTION};
    use crate::wire::event::lembas::EventParams;
    use crate::wire::event::update::UpdateParams;

    pub(in crate::client) const UPDATE: &str = "session/update";
    pub(in crate::client) const EVENT: &str = "_lembas/event";

    pub(super) fn read(method: &str, params: &Value) -> Option<ClientEvent> {
        match method {
            UPDATE => exact(params).map(ClientEvent::Update),
            EVENT => exact(params).map(ClientEvent::Event),
            _ => None,
        }
    }

    /// `params` as a `T`, if it reads as one and encodes back to exactly `params`: one with a
    /// member the vocabulary does not know (a newer device's) or writes otherwise is `None`, so
    /// the UI is handed all that came, and the JS shape of a typed message is the one that
    /// came, byte for byte.
    fn exact<T: DeserializeOwned + Serialize>(params: &Value) -> Option<T> {
        let typed = T::deserialize(params).ok()?;
        (serde_json::to_value(&typed).ok()? == *params).then_some(typed)
    }

    /// The card `params` are, if `method` carries one and it encodes back exactly.
    fn card(method: &str, params: &Value) -> Option<CardParams> {
        Some(match method {
            PERMISSION => CardParams::Permission(exact(params)?),
            QUESTION => CardParams::Question(exact(params)?),
            PLAN => CardParams::Plan(exact(params)?),
            _ => return None,
        })
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

    /// Every update and event the device writes reads typed, and its JS shape is the
    /// notification's byte for byte.
    #[test]
    fn updates_and_events_read_typed_and_encode_as_the_notification_did() {
        use crate::wire::event::lembas::{tests::every_event, EventParams};
        use crate::wire::event::seq::SeqMeta;
        use crate::wire::event::update::{tests::every_update, UpdateParams};
        let as_it_came = |heard: &ClientEvent, method: &str, params: &Value| {
            assert_eq!(
                serde_json::to_string(heard).unwrap(),
                serde_json::to_string(&ClientEvent::Notification {
                    method: method.into(),
                    params: params.clone()
                })
                .unwrap()
            );
        };
        for (i, update) in every_update().into_iter().enumerate() {
            let typed = UpdateParams {
                meta: (i % 2 == 0).then(|| SeqMeta::new(i as u64 + 1)),
                session_id: "ses_1".into(),
                update,
            };
            let params = serde_json::to_value(&typed).unwrap();
            let heard = ClientEvent::heard(UPDATE.into(), params.clone());
            assert_eq!(heard.update(), Some(&typed));
            as_it_came(&heard, UPDATE, &params);
        }
        for (i, event) in every_event().into_iter().enumerate() {
            let typed = EventParams {
                meta: (i % 2 == 0).then(|| SeqMeta::new(i as u64 + 1)),
                event,
                session_id: "ses_1".into(),
            };
            let params = serde_json::to_value(&typed).unwrap();
            let heard = ClientEvent::heard(EVENT.into(), params.clone());
            assert_eq!(heard.lembas_event(), Some(&typed));
            as_it_came(&heard, EVENT, &params);
        }
    }

    /// An update or event with a member the vocabulary does not know (a newer device's), or one
    /// it would write otherwise, stays the notification it came as: nothing is lost.
    #[test]
    fn a_notification_that_would_not_encode_back_stays_whole() {
        let chunk = json!({ "_meta": { "lembas": { "seq": 4 } }, "sessionId": "ses_1",
                            "update": { "sessionUpdate": "agent_message_chunk",
                                        "content": { "type": "text", "text": "hi" } } });
        assert!(ClientEvent::heard(UPDATE.into(), chunk.clone())
            .update()
            .is_some());
        let mut in_update = chunk.clone();
        in_update["update"]["newer"] = json!(1);
        let mut in_content = chunk.clone();
        in_content["update"]["content"]["annotations"] = json!({ "priority": 1 });
        let mut in_params = chunk.clone();
        in_params["turnId"] = json!("t1");
        let mut in_meta = chunk.clone();
        in_meta["_meta"]["lembas"]["origin"] = json!("web");

        let text = json!({ "sessionId": "ses_1", "event": { "type": "text", "text": "hi" } });
        assert!(ClientEvent::heard(EVENT.into(), text.clone())
            .lembas_event()
            .is_some());
        let mut in_event = text.clone();
        in_event["event"]["final"] = json!(true);
        let mut event_in_params = text.clone();
        event_in_params["turnId"] = json!("t1");

        for (method, params) in [
            (UPDATE, in_update),
            (UPDATE, in_content),
            (UPDATE, in_params),
            (UPDATE, in_meta),
            (EVENT, in_event),
            (EVENT, event_in_params),
        ] {
            let heard = ClientEvent::heard(method.into(), params.clone());
            assert_eq!(
                heard,
                ClientEvent::Notification {
                    method: method.into(),
                    params: params.clone()
                }
            );
            assert_eq!(
                event_json(&heard),
                json!({ "kind": "notification", "method": method, "params": params })
            );
        }
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
