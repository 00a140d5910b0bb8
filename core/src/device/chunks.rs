//! The streaming hot path: a text or thought chunk of the running turn, to every holder of its
//! session. One `session/update` and one `_lembas/event` per chunk, each with its seq, written
//! straight into the params (no `serde_json::Value` tree built and dropped per chunk, no key
//! escaped), sent to the holders that hear it and kept in the session's event log whoever
//! does. The bytes are the same as the generic path's (keys in the order a `Value` map sorts
//! them); a test holds the two to it.

use super::chunk_params::written;
#[cfg(test)]
use super::chunk_params::{event_params, update_params, Text};
use super::connection::Phase;
use super::event_log::notification_frame;
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

impl Device {
    /// Send one chunk of `session`'s running turn to its holders.
    pub(super) fn broadcast_chunk(&mut self, session: &str, chunk: Chunk, text: &str) {
        let (update, event) = chunk.names();
        // One lookup of the session for both frames, their seqs and their log entries.
        let Some(s) = self.sessions.get_mut(session) else {
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
        // The session's own frames: not held behind another session's persists. Both are
        // logged whoever hears them now: a client cut off asks for them later.
        let lane = Lane::of(session);
        // Two seqs, the event's the update's next (`written` gives it so).
        let seq = s.take_seq(&mut self.out, lane);
        s.take_seq(&mut self.out, lane);
        // Written into reused buffers (the event's from the update's escaped text): the frames
        // copy them, the log keeps the text alone.
        let bufs = (&mut self.chunk_params, &mut self.chunk_event_params);
        let logged = written(bufs, session, seq, (update, event), text);
        if nu > 0 {
            let frame = notification_frame("session/update", logged.update.params);
            self.out.send_to_all_in(lane, &updates[..nu], frame);
        }
        if ne > 0 {
            let frame = notification_frame("_lembas/event", logged.event.params);
            self.out.send_to_all_in(lane, &events[..ne], frame);
        }
        let limits = &self.config.sessions;
        if s.events.push_chunk(logged, limits) {
            self.unflushed_logs.push(session.to_owned());
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
    use crate::wire::event::seq::SeqMeta;
    use crate::wire::event::update::UpdateParams;

    // A seq of several digits, and a buffer that held something longer before.
    fn update_frame(session: &str, update: &'static str, text: &str) -> Vec<u8> {
        let mut params = "stale".repeat(100);
        update_params(&mut params, session, 1234567890, update, Text::Raw(text));
        notification_frame("session/update", &params)
    }

    fn event_frame(session: &str, event: &'static str, text: &str) -> Vec<u8> {
        let mut params = "stale".repeat(100);
        event_params(&mut params, session, 1234567890, event, Text::Raw(text));
        notification_frame("_lembas/event", &params)
    }

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
                &json!({ "_meta": { "lembas": { "seq": 1234567890 } }, "sessionId": "ses_1",
                         "update": { "sessionUpdate": update,
                                     "content": { "type": "text", "text": text } } }),
            );
            assert_eq!(update_frame("ses_1", update, text), generic);
            let typed = jsonrpc::encode_notification(
                "session/update",
                &UpdateParams {
                    meta: SeqMeta::some(1234567890),
                    session_id: "ses_1".into(),
                    update: chunk.update(text),
                },
            );
            assert_eq!(update_frame("ses_1", update, text), typed);
            let generic = jsonrpc::encode_notification(
                "_lembas/event",
                &json!({ "_meta": { "lembas": { "seq": 1234567890 } }, "sessionId": "ses_1",
                         "event": { "type": event, "text": text } }),
            );
            assert_eq!(event_frame("ses_1", event, text), generic);
            let typed = jsonrpc::encode_notification(
                "_lembas/event",
                &EventParams {
                    meta: SeqMeta::some(1234567890),
                    event: chunk.event(text),
                    session_id: "ses_1".into(),
                },
            );
            assert_eq!(event_frame("ses_1", event, text), typed);
        }
    }
}
