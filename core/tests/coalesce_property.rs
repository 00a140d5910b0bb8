//! Many seeded bursts of frames from sessions streaming at once (an editor's `session/update`
//! chunks, a link client's update and event pairs, other frames between them, some with a seq,
//! chunks big enough to reach the merged frame's bound), gathered by a connection's writer
//! (`Burst`), with and without merging: every chunk comes out once, each session's frames of
//! each stream (`session/update`, `_lembas/event`) in their order with rising seqs, none moved
//! across a frame that is not a chunk; a merged frame is a run of its session's consecutive
//! chunks of one stream and kind with the last one's seq; and no chunk is left unmerged that
//! could have joined its session's latest frame of its stream (the merge reaches across other
//! sessions' frames and the other stream's, not only to an adjacent one).
//!
//! And the client's side: a client that followed the sessions from their start hears the
//! written frames up to a cut (some twice), links again and fetches what it missed from the
//! sessions' logs; it hands out every chunk and every other event of each stream once, in
//! order, and tells no gap.

use std::collections::{BTreeMap, VecDeque};

use common::lone::Lone;
use lembas_core::client::event_json;
use lembas_core::device::{Burst, MAX_MERGED_BYTES};
use lembas_core::jsonrpc;
use lembas_core::rng::Rng;
use lembas_core::Time;
use serde_json::{json, Value};

mod common;
mod property;

/// One frame put in a burst, as the generator made it.
#[derive(Clone, Debug)]
struct Made {
    /// The session's index, and for a chunk its stream and seq; `None`: not a chunk.
    chunk: Option<Chunk>,
    /// A frame that is not a chunk but carries a seq (a tool call, a settled notice): its
    /// session's index and seq.
    sequenced: Option<(usize, u64)>,
    bytes: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunk {
    session: usize,
    /// 0, 1: `session/update` message / thought chunks; 2, 3: `_lembas/event` text /
    /// reasoning.
    stream: usize,
    seq: u64,
}

/// A chunk stream's method: 0 for `session/update`, 1 for `_lembas/event` (the client's
/// streams, and the runs the writer keeps).
fn method_of(stream: usize) -> usize {
    stream / 2
}

const SESSIONS: [&str; 4] = ["ses_a", "ses_b", "ses_\"q\"", "ses_d"];
const JUNK: [&str; 6] = ["", "\"", "\n", "é", "\\", "\u{1f600}"];

/// A chunk's text says its seq first, then `;` (and nothing else in it is a digit or `;`), so
/// a merged frame's text says which chunks it holds.
fn chunk_frame(c: Chunk, filler: usize, rng: &mut Rng) -> Vec<u8> {
    let junk = JUNK[rng.below(JUNK.len() as u64) as usize];
    let text = format!("{}{junk}{};", c.seq, "x".repeat(filler));
    let session = SESSIONS[c.session];
    let meta = json!({ "lembas": { "seq": c.seq } });
    if c.stream < 2 {
        let kind = ["agent_message_chunk", "agent_thought_chunk"][c.stream];
        jsonrpc::encode_notification(
            "session/update",
            &json!({ "_meta": meta, "sessionId": session,
                     "update": { "sessionUpdate": kind,
                                 "content": { "type": "text", "text": text } } }),
        )
    } else {
        let kind = ["text", "reasoning"][c.stream - 2];
        jsonrpc::encode_notification(
            "_lembas/event",
            &json!({ "_meta": meta, "sessionId": session,
                     "event": { "type": kind, "text": text } }),
        )
    }
}

/// Frames as sessions streaming at once queue them: each session's seqs rising, a link's
/// chunk an update then an event of the next seq, now and then a frame that is no chunk.
fn generate(rng: &mut Rng) -> Vec<Made> {
    let sessions = 1 + rng.below(SESSIONS.len() as u64) as usize;
    let link = rng.below(3) == 0;
    let mut seqs = vec![1u64; sessions];
    let mut out = Vec::new();
    for _ in 0..rng.below(120) {
        let session = rng.below(sessions as u64) as usize;
        if rng.below(12) == 0 {
            // A tool call or a settled notice of the session, each with its seq (a link
            // client's way; an editor's tool call has one too), or an answer: no chunk.
            let seq = seqs[session];
            let (bytes, sequenced) = match rng.below(3) {
                0 => (
                    jsonrpc::encode_notification(
                        "session/update",
                        &json!({ "_meta": { "lembas": { "seq": seq } },
                                 "sessionId": SESSIONS[session],
                                 "update": { "sessionUpdate": "tool_call" } }),
                    ),
                    Some((session, seq)),
                ),
                1 if link => (
                    jsonrpc::encode_notification(
                        "_lembas/permission/settled",
                        &json!({ "_meta": { "lembas": { "seq": seq } },
                                 "sessionId": SESSIONS[session], "toolCallId": "call_1" }),
                    ),
                    Some((session, seq)),
                ),
                _ => (br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(), None),
            };
            if sequenced.is_some() {
                seqs[session] += 1;
            }
            out.push(Made {
                chunk: None,
                sequenced,
                bytes,
            });
            continue;
        }
        // Mostly small chunks, one in twenty near a third of the merged frame's bound.
        let filler = if rng.below(20) == 0 {
            MAX_MERGED_BYTES / 3
        } else {
            rng.below(40) as usize
        };
        let thought = (rng.below(4) == 0) as usize;
        let streams: &[usize] = if link {
            &[thought, 2 + thought]
        } else {
            &[thought]
        };
        for &stream in streams {
            let c = Chunk {
                session,
                stream,
                seq: seqs[session],
            };
            seqs[session] += 1;
            let bytes = chunk_frame(c, filler, rng);
            out.push(Made {
                chunk: Some(c),
                sequenced: None,
                bytes,
            });
        }
    }
    out
}

/// A frame written: what it says, for the checks.
#[derive(Debug)]
struct Written {
    /// `None`: not a chunk (its bytes are those of the frame made).
    chunk: Option<Chunk>,
    /// The seqs of the chunks it holds, in order.
    holds: Vec<u64>,
    bytes: usize,
    /// Its burst, and whether that burst merged.
    burst: usize,
    merging: bool,
}

fn read(frame: &[u8], burst: usize, merging: bool) -> Written {
    let v: Value = serde_json::from_slice(frame).unwrap();
    let p = &v["params"];
    let (stream, text) = match v["method"].as_str() {
        Some("session/update") if p["update"]["content"]["text"].is_string() => {
            let kind = p["update"]["sessionUpdate"].as_str().unwrap();
            let stream = usize::from(kind == "agent_thought_chunk");
            (Some(stream), p["update"]["content"]["text"].as_str())
        }
        Some("_lembas/event") => {
            let stream = 2 + usize::from(p["event"]["type"] == "reasoning");
            (Some(stream), p["event"]["text"].as_str())
        }
        _ => (None, None),
    };
    let (Some(stream), Some(text)) = (stream, text) else {
        return Written {
            chunk: None,
            holds: Vec::new(),
            bytes: frame.len(),
            burst,
            merging,
        };
    };
    let session = SESSIONS.iter().position(|s| p["sessionId"] == *s).unwrap();
    let holds: Vec<u64> = text
        .split_terminator(';')
        .map(|piece| {
            let digits: String = piece.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    Written {
        chunk: Some(Chunk {
            session,
            stream,
            seq: p["_meta"]["lembas"]["seq"].as_u64().unwrap(),
        }),
        holds,
        bytes: frame.len(),
        burst,
        merging,
    }
}

fn run(seed: u64) {
    let mut rng = Rng::new(seed);
    let made = generate(&mut rng);
    // Cut into bursts as a writer meets them, each merging or not (the queue behind its mark
    // or not).
    let mut written = Vec::new();
    let mut burst = Burst::default();
    let (mut at, mut index) = (0, 0);
    while at < made.len() {
        let end = (at + 1 + rng.below(made.len() as u64) as usize).min(made.len());
        let merging = rng.below(4) != 0;
        for m in &made[at..end] {
            burst.push(m.bytes.clone(), merging);
        }
        let bytes = burst.bytes();
        let frames: Vec<Vec<u8>> = burst.drain().collect();
        assert_eq!(
            bytes,
            frames.iter().map(Vec::len).sum::<usize>(),
            "a burst counts its bytes"
        );
        assert!(burst.is_empty() && burst.bytes() == 0);
        for f in frames {
            written.push((read(&f, index, merging), f));
        }
        at = end;
        index += 1;
    }
    check(&made, &written);
    for _ in 0..3 {
        let cut = rng.below(written.len() as u64 + 1) as usize;
        resume(&made, &written, cut, &mut rng);
    }
}

/// The client's side of a cut: one that followed every session from its start (it prompted
/// them) hears the written frames up to `cut`, now and then one twice, links again, and is
/// answered from the sessions' logs (the frames made with a seq, in seq order). It hands out
/// every chunk and tool call of each session's `session/update`s, and every chunk of its
/// `_lembas/event`s, once and in order, and tells no gap.
fn resume(made: &[Made], written: &[(Written, Vec<u8>)], cut: usize, rng: &mut Rng) {
    let mut l = Lone::new();
    l.link(&["events"]);
    for (i, s) in SESSIONS.iter().enumerate() {
        let turn = format!("t{i}");
        let prompt = json!([{ "type": "text", "text": "go" }]);
        l.c.prompt(s, prompt, Some(&turn), Time::ZERO).unwrap();
    }
    l.sent();
    for (_, f) in &written[..cut] {
        let v: Value = serde_json::from_slice(f).unwrap();
        if rng.below(10) == 0 {
            l.hear(v.clone());
        }
        l.hear(v);
    }
    l.cut();
    let mut asks: VecDeque<Value> = l.link(&["events"]).into();
    while let Some(ask) = asks.pop_front() {
        if ask["method"] != "_lembas/session/events" {
            continue;
        }
        let session = ask["params"]["sessionId"].as_str().unwrap();
        let since = ask["params"]["since"].as_u64().unwrap();
        let events: Vec<Value> = logged(made, session)
            .filter(|(seq, _)| *seq > since)
            .map(|(seq, v)| json!({ "seq": seq, "method": v["method"], "params": v["params"] }))
            .collect();
        let next = events.last().map_or(since, |e| e["seq"].as_u64().unwrap());
        let page = json!({ "jsonrpc": "2.0", "id": ask["id"],
                           "result": { "events": events, "next": next, "truncated": false } });
        asks.extend(l.hear(page));
    }
    assert_eq!(l.gaps(), Vec::<u64>::new(), "cut after frame {cut}");
    // What was handed out, by session and stream: the seqs each frame holds, in order.
    let mut handed: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
    for e in l.events.iter().map(event_json) {
        let Some(session) = SESSIONS.iter().position(|s| e["params"]["sessionId"] == *s) else {
            continue;
        };
        let method = usize::from(e["method"] != "session/update");
        let bytes = serde_json::to_vec(&json!({ "method": e["method"], "params": e["params"] }));
        let w = read(&bytes.unwrap(), 0, false);
        let seqs = match w.chunk {
            Some(_) => w.holds,
            None => vec![e["params"]["_meta"]["lembas"]["seq"].as_u64().unwrap()],
        };
        handed.entry((session, method)).or_default().extend(seqs);
    }
    for s in 0..SESSIONS.len() {
        for method in 0..2 {
            let whole: Vec<u64> = made
                .iter()
                .filter_map(|m| match (m.chunk, m.sequenced) {
                    (Some(c), _) if c.session == s && method_of(c.stream) == method => Some(c.seq),
                    // A tool call is handed out; a settled notice of no open card is not.
                    (None, Some((ms, seq))) if ms == s && method == 0 => (m
                        .bytes
                        .starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\""))
                    .then_some(seq),
                    _ => None,
                })
                .collect();
            let got = handed.remove(&(s, method)).unwrap_or_default();
            assert_eq!(
                got, whole,
                "session {s}, stream {method}, cut after frame {cut}: each once and in order"
            );
        }
    }
}

/// A session's log: the frames made with a seq, in seq order (as made).
fn logged<'a>(made: &'a [Made], session: &'a str) -> impl Iterator<Item = (u64, Value)> + 'a {
    made.iter().filter_map(move |m| {
        let seq = m.chunk.map(|c| (c.session, c.seq)).or(m.sequenced)?;
        (SESSIONS[seq.0] == session).then(|| (seq.1, serde_json::from_slice(&m.bytes).unwrap()))
    })
}

fn check(made: &[Made], written: &[(Written, Vec<u8>)]) {
    // Where each chunk made went: (session, seq) to the index of the frame holding it.
    let mut into: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    let mut others = Vec::new();
    for (i, (w, bytes)) in written.iter().enumerate() {
        let Some(c) = w.chunk else {
            others.push((i, bytes.clone()));
            continue;
        };
        assert_eq!(
            w.holds.last(),
            Some(&c.seq),
            "a merged frame has its last chunk's seq"
        );
        if w.holds.len() > 1 {
            assert!(w.merging, "only a merging burst merges");
            assert!(w.bytes <= MAX_MERGED_BYTES, "a merged frame stays in bound");
        }
        for &seq in &w.holds {
            assert!(
                into.insert((c.session, seq), i).is_none(),
                "chunk {seq} of session {} written twice",
                c.session
            );
        }
    }
    // Every frame made is written once: each chunk in one frame, the others as they were and
    // in their order.
    let chunks: Vec<Chunk> = made.iter().filter_map(|m| m.chunk).collect();
    assert_eq!(into.len(), chunks.len(), "every chunk written");
    let made_others: Vec<Vec<u8>> = made
        .iter()
        .filter(|m| m.chunk.is_none())
        .map(|m| m.bytes.clone())
        .collect();
    assert_eq!(
        others.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
        made_others,
        "the frames that are no chunk, as they were and in order"
    );
    // Each session's chunks of each stream: in the frames in their order (so the seqs a
    // client sees of the stream rise), a frame holding a run of consecutive chunks of the
    // session and stream, all of one kind.
    for s in 0..SESSIONS.len() {
        for method in 0..2 {
            let mine: Vec<&Chunk> = chunks
                .iter()
                .filter(|c| c.session == s && method_of(c.stream) == method)
                .collect();
            let at = |seq: u64| mine.iter().position(|c| c.seq == seq).unwrap();
            let mut last: Option<(usize, u64)> = None;
            for (k, c) in mine.iter().enumerate() {
                let f = into[&(s, c.seq)];
                let w = &written[f].0;
                let wc = w.chunk.unwrap();
                assert_eq!(wc.stream, c.stream, "one kind a frame");
                if let Some((prev, prev_seq)) = last.filter(|(prev, _)| *prev != f) {
                    assert!(
                        f > prev && wc.seq > prev_seq,
                        "session {s}'s chunk {} went before its elder of its stream",
                        c.seq
                    );
                }
                assert!(
                    w.holds.windows(2).all(|h| at(h[1]) == at(h[0]) + 1),
                    "a frame holds consecutive chunks of its stream: {:?}",
                    w.holds
                );
                assert!(at(w.holds[0]) <= k && k <= at(wc.seq));
                last = Some((f, wc.seq));
            }
        }
    }
    // No chunk passes a frame that is no chunk: made before it, written before it, and after.
    let mut before_other = 0;
    let mut made_at = BTreeMap::new();
    for m in made {
        match m.chunk {
            Some(c) => {
                made_at.insert((c.session, c.seq), before_other);
            }
            None => before_other += 1,
        }
    }
    for ((s, seq), f) in &into {
        let written_before = others.iter().filter(|(i, _)| i < f).count();
        assert_eq!(
            written_before,
            made_at[&(*s, *seq)],
            "session {s}'s chunk {seq} crossed a frame that is no chunk"
        );
    }
    // Merging is whole: in a merging burst, a chunk frame that follows its session's latest
    // frame of its stream, a chunk frame of its kind, with no frame that is no chunk between,
    // was merged unless that would pass the bound.
    for (j, (w, _)) in written.iter().enumerate() {
        let Some(c) = w.chunk.filter(|_| w.merging) else {
            continue;
        };
        let prior = written[..j]
            .iter()
            .enumerate()
            .rev()
            .take_while(|(_, (p, _))| p.burst == w.burst)
            .find(|(_, (p, _))| {
                p.chunk.is_none_or(|pc| {
                    pc.session == c.session && method_of(pc.stream) == method_of(c.stream)
                })
            });
        let Some((i, (p, _))) = prior else {
            continue;
        };
        let Some(pc) = p.chunk.filter(|pc| pc.stream == c.stream) else {
            continue;
        };
        // The first chunk this frame holds, as it was made.
        let first = made
            .iter()
            .find(|m| {
                m.chunk
                    .is_some_and(|mc| mc.session == c.session && mc.seq == w.holds[0])
            })
            .unwrap();
        assert!(
            p.bytes + first.bytes.len() > MAX_MERGED_BYTES,
            "frame {j} (session {}, seq {}) could have merged into frame {i} (seq {})",
            c.session,
            c.seq,
            pc.seq
        );
    }
}

/// 500 seeds, or as `property::seeds` says (`LEMBAS_PROPERTY_SEEDS`,
/// `LEMBAS_PROPERTY_SEED_OFFSET`, `LEMBAS_PROPERTY_SEED`).
#[test]
fn interleaved_sessions_chunks_merge_whole_in_order_and_nothing_lost() {
    if let Some(seed) = property::seeds(&[], 500, run) {
        let mut rng = Rng::new(seed);
        for m in generate(&mut rng) {
            eprintln!("{:?} {}", m.chunk, String::from_utf8_lossy(&m.bytes));
        }
        run(seed);
    }
}
