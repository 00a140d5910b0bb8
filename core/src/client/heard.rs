//! A device notification a [`ClientEvent`] carries, read as its `wire::event` type: what a
//! client does with an update or an event without picking at a `Value`.

use serde::de::DeserializeOwned;

use super::ClientEvent;
use crate::wire::event::lembas::EventParams;
use crate::wire::event::update::UpdateParams;

impl ClientEvent {
    /// The `session/update` this is, typed; `None` for any other event, or an update the
    /// vocabulary does not know (the `Value` still has it).
    pub fn update(&self) -> Option<UpdateParams> {
        self.notification("session/update")
    }

    /// The `_lembas/event` this is, typed; `None` as for [`ClientEvent::update`].
    pub fn lembas_event(&self) -> Option<EventParams> {
        self.notification("_lembas/event")
    }

    fn notification<T: DeserializeOwned>(&self, wanted: &str) -> Option<T> {
        match self {
            ClientEvent::Notification { method, params } if method == wanted => {
                T::deserialize(params).ok()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::event::lembas::LembasEvent;
    use crate::wire::event::update::SessionUpdate;
    use serde_json::json;

    fn heard(method: &str, params: serde_json::Value) -> ClientEvent {
        ClientEvent::Notification {
            method: method.into(),
            params,
        }
    }

    #[test]
    fn known_notifications_read_typed_and_others_do_not() {
        let chunk = heard(
            "session/update",
            json!({ "sessionId": "ses_1", "update": { "sessionUpdate": "agent_message_chunk",
                                                      "content": { "type": "text", "text": "hi" } } }),
        );
        let u = chunk.update().expect("a chunk reads typed");
        assert!(matches!(u.update, SessionUpdate::AgentMessageChunk(c) if c.content.text == "hi"));
        assert!(chunk.lembas_event().is_none());
        let mode = heard(
            "_lembas/event",
            json!({ "sessionId": "ses_1", "event": { "type": "mode", "mode": "plan" } }),
        );
        assert!(matches!(
            mode.lembas_event().unwrap().event,
            LembasEvent::Mode(_)
        ));
        let unknown = heard(
            "session/update",
            json!({ "sessionId": "ses_1", "update": { "sessionUpdate": "available_commands_update" } }),
        );
        assert!(unknown.update().is_none());
    }
}
