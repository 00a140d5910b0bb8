//! A device notification read as its `wire::event` type: with the `typed-events` feature the
//! client hands its UI a `session/update` or an `_lembas/event` typed ([`ClientEvent::Update`],
//! [`ClientEvent::Event`]), so no one picks at a `Value` for them. One it cannot read typed (an
//! update kind the vocabulary does not know, a newer device's) stays a
//! [`ClientEvent::Notification`], as every notification does without the feature.

use serde_json::Value;

use super::ClientEvent;

impl ClientEvent {
    /// The event a notification the device sent is: typed where the vocabulary knows it.
    pub(super) fn heard(method: String, params: Value) -> ClientEvent {
        typed::read(&method, &params).unwrap_or(ClientEvent::Notification { method, params })
    }
}

#[cfg(not(feature = "typed-events"))]
mod typed {
    use super::*;

    pub(super) fn read(_method: &str, _params: &Value) -> Option<ClientEvent> {
        None
    }
}

#[cfg(feature = "typed-events")]
pub(super) use typed::{EVENT, UPDATE};

#[cfg(feature = "typed-events")]
mod typed {
    use serde::Deserialize;

    use super::*;
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
    }
}

#[cfg(all(test, feature = "typed-events"))]
mod tests {
    use super::typed::{EVENT, UPDATE};
    use super::*;
    use crate::client::event_json;
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
}
