//! The streaming hot path: a text or thought chunk of the running turn, to every holder of its
//! session. One `session/update` and one `_lembas/event` per chunk, encoded straight from
//! borrowed fields (no `serde_json::Value` tree built and dropped per chunk), and the event
//! only when a holder takes events. The bytes are the same as the generic path's: fields are
//! declared in the order a `Value` map sorts them.

use serde::Serialize;

use super::connection::Phase;
use super::{ConnId, Device};
use crate::jsonrpc;

/// `{ "type": "text", "text": … }`, as a map sorts it.
#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Update<'a> {
    content: Text<'a>,
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
}

#[derive(Serialize)]
struct UpdateParams<'a> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    update: Update<'a>,
}

#[derive(Serialize)]
struct EventParams<'a> {
    event: Text<'a>,
    #[serde(rename = "sessionId")]
    session_id: &'a str,
}

/// Which stream a chunk belongs to.
#[derive(Clone, Copy)]
pub(super) enum Chunk {
    /// The answer's text: `agent_message_chunk`, event `text`.
    Message,
    /// Reasoning: `agent_thought_chunk`, event `reasoning`.
    Thought,
}

impl Chunk {
    /// Its `sessionUpdate` and its event's `type`.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Chunk::Message => ("agent_message_chunk", "text"),
            Chunk::Thought => ("agent_thought_chunk", "reasoning"),
        }
    }
}

fn update_frame(session: &str, update: &'static str, text: &str) -> Vec<u8> {
    jsonrpc::encode_notification(
        "session/update",
        &UpdateParams {
            session_id: session,
            update: Update {
                content: Text { text, kind: "text" },
                session_update: update,
            },
        },
    )
}

fn event_frame(session: &str, event: &'static str, text: &str) -> Vec<u8> {
    jsonrpc::encode_notification(
        "_lembas/event",
        &EventParams {
            event: Text { text, kind: event },
            session_id: session,
        },
    )
}

impl Device {
    /// Send one chunk of `session`'s running turn to its holders.
    pub(super) fn broadcast_chunk(&mut self, session: &str, chunk: Chunk, text: &str) {
        let (update, event) = chunk.names();
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        // Few holders (a link, an editor, a terminal): a small array, not a Vec per chunk.
        let mut updates = [ConnId(0); 8];
        let mut events = [ConnId(0); 8];
        let (mut nu, mut ne) = (0, 0);
        let mut more = false;
        for c in &s.holders {
            let Some(conn) = self.conns.get(c) else {
                continue;
            };
            if nu == updates.len() || ne == events.len() {
                more = true;
                break;
            }
            if conn.phase == Phase::Ready {
                updates[nu] = *c;
                nu += 1;
            }
            if conn.may_receive("_lembas/event") {
                events[ne] = *c;
                ne += 1;
            }
        }
        if more {
            return self.broadcast_chunk_slow(session, update, event, text);
        }
        if nu > 0 {
            let frame = update_frame(session, update, text);
            self.send_to_all(&updates[..nu], frame);
        }
        if ne > 0 {
            let frame = event_frame(session, event, text);
            self.send_to_all(&events[..ne], frame);
        }
    }

    /// More holders than the fast path keeps: the generic broadcasts.
    fn broadcast_chunk_slow(&mut self, session: &str, update: &str, event: &str, text: &str) {
        self.broadcast_update(
            session,
            serde_json::json!({ "sessionUpdate": update,
                                "content": { "type": "text", "text": text } }),
        );
        self.broadcast_event(session, serde_json::json!({ "type": event, "text": text }));
    }

    /// The last one gets the frame itself, the others a copy.
    fn send_to_all(&mut self, to: &[ConnId], frame: Vec<u8>) {
        if let Some((last, rest)) = to.split_last() {
            for c in rest {
                self.send(*c, frame.clone());
            }
            self.send(*last, frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_fast_frames_are_the_generic_frames_byte_for_byte() {
        let text = "a \"quoted\" word,\n a tab\t, é and \u{1f600}";
        for chunk in [Chunk::Message, Chunk::Thought] {
            let (update, event) = chunk.names();
            let generic = jsonrpc::encode_notification(
                "session/update",
                &json!({ "sessionId": "ses_1",
                         "update": { "sessionUpdate": update,
                                     "content": { "type": "text", "text": text } } }),
            );
            assert_eq!(update_frame("ses_1", update, text), generic);
            let generic = jsonrpc::encode_notification(
                "_lembas/event",
                &json!({ "sessionId": "ses_1", "event": { "type": event, "text": text } }),
            );
            assert_eq!(event_frame("ses_1", event, text), generic);
        }
    }
}
