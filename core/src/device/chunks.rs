//! The streaming hot path: a text or thought chunk of the running turn, to every holder of its
//! session. One `session/update` and one `_lembas/event` per chunk, written straight into the
//! frame (no `serde_json::Value` tree built and dropped per chunk, no key escaped), and the
//! event only when a holder takes events. The bytes are the same as the generic path's (keys
//! in the order a `Value` map sorts them); a test holds the two to it.

use super::connection::Phase;
use super::outbox::Lane;
use super::{ConnId, Device};
use crate::wire::event::lembas::{LembasEvent, TextEvent};
use crate::wire::event::update::{ContentChunk, SessionUpdate, TextContent};

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

    /// Its `session/update`, typed (what the fast path writes by hand).
    fn update(self, text: &str) -> SessionUpdate {
        let chunk = ContentChunk {
            content: TextContent::new(text),
        };
        match self {
            Chunk::Message => SessionUpdate::AgentMessageChunk(chunk),
            Chunk::Thought => SessionUpdate::AgentThoughtChunk(chunk),
        }
    }

    /// Its `_lembas/event`, typed (what the fast path writes by hand).
    fn event(self, text: &str) -> LembasEvent {
        let text = TextEvent { text: text.into() };
        match self {
            Chunk::Message => LembasEvent::Text(text),
            Chunk::Thought => LembasEvent::Reasoning(text),
        }
    }
}

/// A JSON string: as serde_json writes it (the same escaping), with a plain copy when nothing
/// in it needs escaping (the usual chunk).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("a string always serializes");
    }
}

/// `session/update` for a chunk, written directly: the fixed parts are literals, and only the
/// session id and the text are escaped (serde_json spent most of a chunk on the keys).
fn update_frame(session: &str, update: &'static str, text: &str) -> Vec<u8> {
    let mut f = Vec::with_capacity(160 + session.len() + text.len());
    f.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#);
    push_json_str(&mut f, session);
    f.extend_from_slice(br#","update":{"content":{"text":"#);
    push_json_str(&mut f, text);
    f.extend_from_slice(br#","type":"text"},"sessionUpdate":""#);
    f.extend_from_slice(update.as_bytes());
    f.extend_from_slice(br#""}}}"#);
    f
}

/// `_lembas/event` for a chunk, written as [`update_frame`] is.
fn event_frame(session: &str, event: &'static str, text: &str) -> Vec<u8> {
    let mut f = Vec::with_capacity(120 + session.len() + text.len());
    f.extend_from_slice(br#"{"jsonrpc":"2.0","method":"_lembas/event","params":{"event":{"text":"#);
    push_json_str(&mut f, text);
    f.extend_from_slice(br#","type":""#);
    f.extend_from_slice(event.as_bytes());
    f.extend_from_slice(br#""},"sessionId":"#);
    push_json_str(&mut f, session);
    f.extend_from_slice(b"}}");
    f
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
            return self.broadcast_chunk_slow(session, chunk, text);
        }
        // The session's own frames: not held behind another session's persists.
        let lane = Lane::of(session);
        if nu > 0 {
            let frame = update_frame(session, update, text);
            self.out.send_to_all_in(lane, &updates[..nu], frame);
        }
        if ne > 0 {
            let frame = event_frame(session, event, text);
            self.out.send_to_all_in(lane, &events[..ne], frame);
        }
    }

    /// More holders than the fast path keeps: the generic broadcasts.
    fn broadcast_chunk_slow(&mut self, session: &str, chunk: Chunk, text: &str) {
        self.broadcast_update(session, chunk.update(text));
        self.broadcast_event(session, chunk.event(text));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc;
    use crate::wire::event::lembas::EventParams;
    use crate::wire::event::update::UpdateParams;

    #[test]
    fn the_fast_frames_are_the_generic_frames_byte_for_byte() {
        let texts = [
            "plain 64 B of text, as a model streams it, with no escapes at all.",
            "a \"quoted\" word,\n a tab\t, a \\ backslash, é, \u{7f}, \u{1} and \u{1f600}",
            "",
        ];
        for (chunk, text) in [Chunk::Message, Chunk::Thought]
            .into_iter()
            .flat_map(|c| texts.iter().map(move |t| (c, *t)))
        {
            let (update, event) = chunk.names();
            let generic = jsonrpc::encode_notification(
                "session/update",
                &json!({ "sessionId": "ses_1",
                         "update": { "sessionUpdate": update,
                                     "content": { "type": "text", "text": text } } }),
            );
            assert_eq!(update_frame("ses_1", update, text), generic);
            let typed = jsonrpc::encode_notification(
                "session/update",
                &UpdateParams {
                    session_id: "ses_1".into(),
                    update: chunk.update(text),
                },
            );
            assert_eq!(update_frame("ses_1", update, text), typed);
            let generic = jsonrpc::encode_notification(
                "_lembas/event",
                &json!({ "sessionId": "ses_1", "event": { "type": event, "text": text } }),
            );
            assert_eq!(event_frame("ses_1", event, text), generic);
            let typed = jsonrpc::encode_notification(
                "_lembas/event",
                &EventParams {
                    event: chunk.event(text),
                    session_id: "ses_1".into(),
                },
            );
            assert_eq!(event_frame("ses_1", event, text), typed);
        }
    }
}
