//! Chunk coalescing under backpressure: while a connection's queue is past its pause mark, a
//! text chunk frame of a burst (the frames written at once) is merged into its session's
//! latest frame *of its stream* in that burst (`session/update`s one stream, `_lembas/event`s
//! the other) when that frame is a chunk frame of the same kind: one frame, the texts in order,
//! the later seq. Nothing is dropped and the frames of the connection say the same; only their
//! count falls (and the bytes of the frames' envelopes, which dominate small chunks).
//!
//! Frames of other sessions and of the session's other stream may lie between the two: the
//! chunk then leaves ahead of them. What keeps each session's order within a stream is that a
//! chunk merges only into its session's latest frame of that stream, and any frame that is not
//! a chunk frame (an answer, a tool call, a settled notice, whoever it is for) ends every run.
//! So with sessions streaming at once, and a link client hearing each chunk twice, the burst
//! still merges, where merging only adjacent frames merged almost nothing.
//!
//! The client (client/resume.rs) keeps its last seq per stream, resumes from the lower, and
//! drops a frame at or below its own stream's last. A link's chunks come as an update and an
//! event of consecutive seqs; `u1 e2 u3 e4` goes out as `U(u1+u3, seq 3) E(e2+e4, seq 4)`.
//! The cuts, the client's lasts (update, event) before them both 0:
//! - before `U`: nothing heard, `since` 0: the log gives 1 to 4, each handed out once.
//! - after `U`: lasts (3, 0), `since` 0: `u1`, `u3` dropped as seen, `e2`, `e4` handed out.
//!   (With one last seq the client would be at 3 and resume past `e2`, never heard: the
//!   reason merging across streams waited for the client's per-stream rule.)
//! - after `E`: lasts (3, 4), `since` 3: `e4` dropped.
//! - `U` or `E` again (a duplicate): at or below its stream's last, dropped.
//! - a frame that is not a chunk, of seq `s`: no chunk made before it is written after it, so
//!   every seq below `s` came before it; the client lifts both lasts to `s`, and `since` does
//!   not lag behind a stream that is quiet a while (merged frames never straddle it).
//! - a new link: the answer to `_lembas/session/events` ends every run too, so a live frame
//!   after it holds only chunks made after the page; one before it, only chunks the pages
//!   hold. The client hands out no live frame of a session catching up, and ends the catch-up
//!   on a page reaching the newest seq it heard live: a merged frame is never handed out
//!   beside a page holding part of it.
//!
//! The frames are those `chunks.rs` writes (the generic path writes the same bytes), so a
//! frame of that exact shape is recognized by its bytes; anything else is left alone.

use std::collections::BTreeMap;
use std::ops::Range;

/// The `session/update` kinds merged, and the `_lembas/event` types: the client's resume
/// (client/resume.rs) reads the same lists to know which frames may have been merged.
pub const MERGED_UPDATES: [&str; 2] = ["agent_message_chunk", "agent_thought_chunk"];
pub const MERGED_EVENTS: [&str; 2] = ["text", "reasoning"];

/// The most bytes a merged frame grows to: a peer's frame limit is never approached, and a
/// writer's burst stays a burst of several frames.
pub const MAX_MERGED_BYTES: usize = 64 * 1024;

const UPDATE_HEAD: &[u8] =
    br#"{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{"lembas":{"seq":"#;
const EVENT_HEAD: &[u8] =
    br#"{"jsonrpc":"2.0","method":"_lembas/event","params":{"_meta":{"lembas":{"seq":"#;

fn is_merged(kinds: &[&str], kind: &[u8]) -> bool {
    kinds.iter().any(|k| k.as_bytes() == kind)
}

/// Where the parts of a chunk frame are.
struct Parts {
    update: bool,
    seq: Range<usize>,
    session: Range<usize>,
    /// The text's escaped bytes, inside its quotes.
    text: Range<usize>,
    kind: Range<usize>,
}

/// Reads a frame's bytes in order.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.at + lit.len();
        (self.bytes.get(self.at..end)? == lit).then(|| self.at = end)
    }

    fn digits(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        while self.bytes.get(self.at)?.is_ascii_digit() {
            self.at += 1;
        }
        (self.at > start).then_some(start..self.at)
    }

    /// A JSON string, quotes included.
    fn string(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        self.literal(b"\"")?;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => break,
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        Some(start..self.at)
    }

    /// A kind name: plain lowercase letters and underscores, up to its closing quote.
    fn name(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        while matches!(self.bytes.get(self.at)?, b'a'..=b'z' | b'_') {
            self.at += 1;
        }
        (self.at > start).then_some(start..self.at)
    }

    fn end(&self) -> Option<()> {
        (self.at == self.bytes.len()).then_some(())
    }
}

fn parse(frame: &[u8]) -> Option<Parts> {
    let mut c = Cursor {
        bytes: frame,
        at: 0,
    };
    let inner = |s: Range<usize>| s.start + 1..s.end - 1;
    if c.literal(UPDATE_HEAD).is_some() {
        let seq = c.digits()?;
        c.literal(br#"}},"sessionId":"#)?;
        let session = c.string()?;
        c.literal(br#","update":{"content":{"text":"#)?;
        let text = inner(c.string()?);
        c.literal(br#","type":"text"},"sessionUpdate":""#)?;
        let kind = c.name()?;
        c.literal(br#""}}}"#)?;
        c.end()?;
        is_merged(&MERGED_UPDATES, &frame[kind.clone()]).then_some(Parts {
            update: true,
            seq,
            session,
            text,
            kind,
        })
    } else {
        c.literal(EVENT_HEAD)?;
        let seq = c.digits()?;
        c.literal(br#"}},"event":{"text":"#)?;
        let text = inner(c.string()?);
        c.literal(br#","type":""#)?;
        let kind = c.name()?;
        c.literal(br#""},"sessionId":"#)?;
        let session = c.string()?;
        c.literal(b"}}")?;
        c.end()?;
        is_merged(&MERGED_EVENTS, &frame[kind.clone()]).then_some(Parts {
            update: false,
            seq,
            session,
            text,
            kind,
        })
    }
}

fn seq_of(frame: &[u8], at: &Range<usize>) -> Option<u64> {
    std::str::from_utf8(&frame[at.clone()]).ok()?.parse().ok()
}

/// A frame that following chunk frames may merge into, its layout read once: a merge then
/// costs the bytes of the merged chunk's text, however long the frame has grown.
pub struct ChunkRun {
    frame: Vec<u8>,
    /// `None`: not a chunk frame (nothing merges into it).
    parts: Option<Parts>,
}

impl ChunkRun {
    pub fn new(frame: Vec<u8>) -> ChunkRun {
        let parts = parse(&frame);
        ChunkRun { frame, parts }
    }

    /// Merge `next` into this frame when both are text chunk frames of one session and kind,
    /// `next` the later, and the merged frame stays within [`MAX_MERGED_BYTES`]: it then
    /// carries both texts and `next`'s seq. The caller says they are adjacent in the
    /// connection's queue (no frame of the session between them). Returns whether it merged;
    /// if not, nothing changed.
    pub fn merge(&mut self, next: &[u8]) -> bool {
        parse(next).is_some_and(|b| self.merge_parsed(next, &b))
    }

    /// [`Self::merge`] of a frame whose layout was read already.
    fn merge_run(&mut self, next: &ChunkRun) -> bool {
        next.parts
            .as_ref()
            .is_some_and(|b| self.merge_parsed(&next.frame, b))
    }

    fn merge_parsed(&mut self, next: &[u8], b: &Parts) -> bool {
        let Some(a) = &mut self.parts else {
            return false;
        };
        if self.frame.len() + next.len() > MAX_MERGED_BYTES {
            return false;
        }
        let into = &mut self.frame;
        let same = a.update == b.update
            && into[a.session.clone()] == next[b.session.clone()]
            && into[a.kind.clone()] == next[b.kind.clone()];
        if !same || seq_of(into, &a.seq) >= seq_of(next, &b.seq) {
            return false;
        }
        // The text first (it comes after the seq, so the seq's place holds), then the seq;
        // each shifts what follows it.
        let at = a.text.end;
        let added = b.text.len();
        into.splice(at..at, next[b.text.clone()].iter().copied());
        a.shift_from(at, added as isize);
        let old = a.seq.clone();
        into.splice(old.clone(), next[b.seq.clone()].iter().copied());
        a.shift_from(old.end, b.seq.len() as isize - old.len() as isize);
        a.seq = old.start..old.start + b.seq.len();
        true
    }

    /// A frame nothing merges into (one written while the queue is under its mark: its
    /// layout is not read).
    pub fn plain(frame: Vec<u8>) -> ChunkRun {
        ChunkRun { frame, parts: None }
    }

    /// Its bytes so far.
    pub fn bytes(&self) -> usize {
        self.frame.len()
    }

    pub fn into_frame(self) -> Vec<u8> {
        self.frame
    }

    /// The session's id as the frame spells it (quoted, escaped), and whether the frame is a
    /// `session/update` (its stream), for a chunk frame.
    fn stream(&self) -> Option<(&[u8], bool)> {
        self.parts
            .as_ref()
            .map(|p| (&self.frame[p.session.clone()], p.update))
    }
}

/// The frames of one write to a connection, in the order they go, each chunk frame still open
/// to later chunks of its session (see the module's header).
#[derive(Default)]
pub struct Burst {
    frames: Vec<ChunkRun>,
    /// Where each session's latest frame of each stream is in `frames`, when that frame is a
    /// chunk frame and no frame that is not one came after it: by the hash of the session's id
    /// and the stream (two that collide only merge less: [`ChunkRun::merge`] checks both).
    open: BTreeMap<u64, usize>,
    bytes: usize,
}

impl Burst {
    /// Add `frame`; with `merge` (the connection is behind), a chunk frame is merged into its
    /// session's latest frame of its stream if that one takes it.
    pub fn push(&mut self, frame: Vec<u8>, merge: bool) {
        let run = if merge {
            ChunkRun::new(frame)
        } else {
            ChunkRun::plain(frame)
        };
        let Some(key) = run.stream().map(|(s, update)| fnv1a(s) ^ u64::from(update)) else {
            // Its session is not known: every session's run ends here.
            self.open.clear();
            self.bytes += run.bytes();
            self.frames.push(run);
            return;
        };
        if let Some(&at) = self.open.get(&key) {
            let before = self.frames[at].bytes();
            if self.frames[at].merge_run(&run) {
                self.bytes += self.frames[at].bytes() - before;
                return;
            }
        }
        self.open.insert(key, self.frames.len());
        self.bytes += run.bytes();
        self.frames.push(run);
    }

    /// The bytes of its frames.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Its frames in order, leaving it empty for the next burst.
    pub fn drain(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.open.clear();
        self.bytes = 0;
        self.frames.drain(..).map(ChunkRun::into_frame)
    }
}

/// FNV-1a: a session's id hashed with no allocation and no random key.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Parts {
    /// Bytes were inserted (or removed, `by` < 0) at `at`: the parts at or after it move.
    fn shift_from(&mut self, at: usize, by: isize) {
        for r in [&mut self.session, &mut self.kind] {
            if r.start >= at {
                *r = r.start.wrapping_add_signed(by)..r.end.wrapping_add_signed(by);
            }
        }
        // The text ends where the insertion was made: it grows there.
        if self.text.end >= at {
            self.text.end = self.text.end.wrapping_add_signed(by);
            if self.text.start > at {
                self.text.start = self.text.start.wrapping_add_signed(by);
            }
        }
    }
}

/// [`ChunkRun::merge`] on a frame whose layout is read again (the tests' form).
#[cfg(test)]
fn merge_chunks(into: &mut Vec<u8>, next: &[u8]) -> bool {
    let mut run = ChunkRun::new(std::mem::take(into));
    let merged = run.merge(next);
    *into = run.into_frame();
    merged
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::jsonrpc;

    fn update(session: &str, seq: u64, kind: &str, text: &str) -> Vec<u8> {
        jsonrpc::encode_notification(
            "session/update",
            &json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": session,
                     "update": { "sessionUpdate": kind,
                                 "content": { "type": "text", "text": text } } }),
        )
    }

    fn event(session: &str, seq: u64, kind: &str, text: &str) -> Vec<u8> {
        jsonrpc::encode_notification(
            "_lembas/event",
            &json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": session,
                     "event": { "type": kind, "text": text } }),
        )
    }

    /// As a writer merges a burst: each frame into the run before it, if it can.
    fn merged(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut run: Option<ChunkRun> = None;
        for f in frames {
            if !run.as_mut().is_some_and(|r| r.merge(f)) {
                out.extend(
                    run.replace(ChunkRun::new(f.clone()))
                        .map(ChunkRun::into_frame),
                );
            }
        }
        out.extend(run.map(ChunkRun::into_frame));
        out
    }

    #[test]
    fn a_run_of_one_sessions_chunks_becomes_one_frame_with_the_last_seq() {
        let texts = ["plain, ", "a \"quote\"\n\t\\ é \u{1}", "", "\u{1f600} end"];
        for (kind, make) in [
            (
                "agent_message_chunk",
                update as fn(&str, u64, &str, &str) -> Vec<u8>,
            ),
            ("agent_thought_chunk", update),
            ("text", event),
            ("reasoning", event),
        ] {
            // Seqs crossing a power of ten: the seq's width changes in place.
            let frames: Vec<_> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| make("ses_\"1\"", 7 + 2 * i as u64, kind, t))
                .collect();
            let out = merged(&frames);
            assert_eq!(out.len(), 1, "{kind}");
            assert_eq!(
                out[0],
                make("ses_\"1\"", 13, kind, &texts.concat()),
                "{kind}"
            );
            let v: Value = serde_json::from_slice(&out[0]).unwrap();
            assert_eq!(v["params"]["_meta"]["lembas"]["seq"], 13);
        }
    }

    #[test]
    fn only_adjacent_chunks_of_one_session_kind_and_stream_merge() {
        let a = |seq, t| update("ses_a", seq, "agent_message_chunk", t);
        let frames = vec![
            a(1, "a1"),
            // Another kind, another session, another stream: each ends a run.
            update("ses_a", 2, "agent_thought_chunk", "think"),
            a(3, "a3"),
            update("ses_b", 1, "agent_message_chunk", "b1"),
            a(4, "a4"),
            event("ses_a", 5, "text", "a4"),
            a(6, "a6"),
            a(8, "a8"),
            // Not a chunk (a tool call); then an older seq (never merged backwards).
            jsonrpc::encode_notification(
                "session/update",
                &json!({ "sessionId": "ses_a", "update": { "sessionUpdate": "tool_call" } }),
            ),
            a(10, "a10"),
            a(9, "a9"),
        ];
        let out = merged(&frames);
        assert_eq!(
            out,
            vec![
                a(1, "a1"),
                frames[1].clone(),
                a(3, "a3"),
                frames[3].clone(),
                a(4, "a4"),
                frames[5].clone(),
                a(8, "a6a8"),
                frames[8].clone(),
                a(10, "a10"),
                a(9, "a9"),
            ]
        );
    }

    #[test]
    fn a_merged_frame_stays_under_its_bound_and_odd_bytes_are_left_alone() {
        let big = "x".repeat(MAX_MERGED_BYTES / 2);
        let mut into = update("s", 1, "agent_message_chunk", &big);
        let next = update("s", 2, "agent_message_chunk", &big);
        assert!(!merge_chunks(&mut into, &next));
        assert_eq!(into, update("s", 1, "agent_message_chunk", &big));
        for odd in [
            &b""[..],
            b"{",
            &update("s", 2, "agent_message_chunk", "x")[..60],
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{"lembas":{"seq":}},"#,
        ] {
            let mut into = update("s", 1, "agent_message_chunk", "x");
            assert!(!merge_chunks(&mut into, odd));
            let mut odd = odd.to_vec();
            assert!(!merge_chunks(&mut odd, &into));
        }
    }

    fn burst(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut b = Burst::default();
        for f in frames {
            b.push(f.clone(), true);
        }
        let bytes = b.bytes();
        let out: Vec<_> = b.drain().collect();
        assert_eq!(bytes, out.iter().map(Vec::len).sum::<usize>());
        out
    }

    #[test]
    fn a_burst_merges_each_sessions_chunks_across_other_sessions_frames() {
        let m = |s, seq, t| update(s, seq, "agent_message_chunk", t);
        let tool = jsonrpc::encode_notification(
            "session/update",
            &json!({ "sessionId": "ses_b", "update": { "sessionUpdate": "tool_call" } }),
        );
        let out = burst(&[
            m("ses_a", 1, "a1"),
            m("ses_b", 1, "b1"),
            m("ses_a", 2, "a2"),
            update("ses_b", 2, "agent_thought_chunk", "think"),
            m("ses_b", 3, "b3"),
            m("ses_a", 3, "a3"),
            // Not a chunk: every run ends here, whoever it is for.
            tool.clone(),
            m("ses_a", 4, "a4"),
            m("ses_b", 4, "b4"),
            m("ses_a", 5, "a5"),
        ]);
        assert_eq!(
            out,
            vec![
                m("ses_a", 3, "a1a2a3"),
                m("ses_b", 1, "b1"),
                update("ses_b", 2, "agent_thought_chunk", "think"),
                m("ses_b", 3, "b3"),
                tool,
                m("ses_a", 5, "a4a5"),
                m("ses_b", 4, "b4"),
            ]
        );
    }

    /// A link client's update and event pairs: each session's chunks merge per stream, the
    /// update run where its first update was, the event run where its first event was; a
    /// frame that is no chunk (a settled notice of another session here) ends every run.
    #[test]
    fn a_burst_merges_a_links_update_and_event_pairs_per_stream() {
        let settled = jsonrpc::encode_notification(
            "_lembas/permission/settled",
            &json!({ "_meta": { "lembas": { "seq": 9 } }, "sessionId": "ses_b",
                     "toolCallId": "call_1" }),
        );
        let mut frames = Vec::new();
        for seq in [1, 3] {
            for s in ["ses_a", "ses_b"] {
                frames.push(update(s, seq, "agent_message_chunk", &format!("u{seq}")));
                frames.push(event(s, seq + 1, "text", &format!("e{}", seq + 1)));
            }
        }
        frames.push(settled.clone());
        frames.push(update("ses_a", 5, "agent_message_chunk", "u5"));
        frames.push(event("ses_a", 6, "text", "e6"));
        let m = |s, seq, t| update(s, seq, "agent_message_chunk", t);
        let e = |s, seq, t| event(s, seq, "text", t);
        assert_eq!(
            burst(&frames),
            vec![
                m("ses_a", 3, "u1u3"),
                e("ses_a", 4, "e2e4"),
                m("ses_b", 3, "u1u3"),
                e("ses_b", 4, "e2e4"),
                settled,
                m("ses_a", 5, "u5"),
                e("ses_a", 6, "e6"),
            ]
        );
        let mut b = Burst::default();
        b.push(update("s", 1, "agent_message_chunk", "t"), false);
        b.push(update("s", 2, "agent_message_chunk", "t"), false);
        assert_eq!(b.drain().count(), 2, "not merging: every frame as it came");
    }
}
