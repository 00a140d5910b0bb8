//! One JSON-RPC message a line, both ways, over any byte stream: stdin/stdout for
//! `serve --stdio`, a hub connection's socket. Lines are read through the core's `LineReader`
//! (bounded); frames are written whole, a queued burst gathered into one write.

use futures_lite::{future, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use lembas_core::device::{Burst, ConnId};
use lembas_core::framing::{Line, LineReader};
use smol::channel::{Receiver, Sender};
use std::sync::Arc;

use crate::channels::{Input, Outgoing};
use crate::outbox::{Gauge, Returns};

/// How a reader is bounded: the longest line and the key that sets it (named in the refusal).
#[derive(Clone, Copy, Debug)]
pub struct LineLimit {
    pub bytes: usize,
    pub key: &'static str,
}

/// Read `input` until EOF, handing the driver each line; while `queue` (the connection's
/// outbound gauge and its bound) is full, or `inbound`'s mark of lines not yet handled is
/// reached, read nothing: a peer that writes requests and reads no answers blocks on its own
/// pipe or socket instead of growing the device. `what` names the stream in the log.
pub async fn read_lines<R: AsyncRead + Unpin>(
    mut input: R,
    what: &str,
    conn: ConnId,
    limit: LineLimit,
    inbound: Arc<Gauge>,
    queue: (Arc<Gauge>, usize),
    tx: Sender<Input>,
) {
    let reading = Reading {
        what,
        conn,
        key: limit.key,
        inbound,
        queue,
        tx,
    };
    let mut reader = LineReader::new(limit.bytes);
    reading
        .until(&mut input, &mut reader, future::pending())
        .await;
}

/// Where [`Reading::until`] stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The stream ended (the driver was told: `Input::Closed`), or the driver is gone.
    Closed,
    /// `stop` came, between two reads: every line read so far is with the driver, and the
    /// reader holds only the start of a line not yet ended.
    Stopped,
}

/// A stream being read into the driver as lines, and what it needs to go on: the name it has in
/// the log, its connection, the key bounding its lines, its gauges and the driver's queue.
pub struct Reading<'a> {
    pub what: &'a str,
    pub conn: ConnId,
    pub key: &'static str,
    pub inbound: Arc<Gauge>,
    pub queue: (Arc<Gauge>, usize),
    pub tx: Sender<Input>,
}

impl Reading<'_> {
    /// Read `input` through `reader` until it ends or `stop` is ready. `stop` is looked at
    /// only between reads and never inside an over-long line, so stopping loses nothing: the
    /// bytes after the last line handed on are `reader`'s pending ones, and the rest are still
    /// in `input`.
    pub async fn until<R: AsyncRead + Unpin>(
        &self,
        input: &mut R,
        reader: &mut LineReader,
        stop: impl std::future::Future<Output = ()>,
    ) -> Ended {
        let (gauge, max_queued) = (&self.queue.0, self.queue.1);
        let mut buf = vec![0u8; 64 * 1024];
        let mut stop = std::pin::pin!(stop);
        loop {
            let read = async {
                gauge.below(max_queued).await;
                self.inbound.below_pause().await;
                Some(input.read(&mut buf).await)
            };
            let read = if reader.skipping() {
                read.await
            } else {
                future::or(read, async {
                    stop.as_mut().await;
                    None
                })
                .await
            };
            let n = match read {
                None => return Ended::Stopped,
                Some(Ok(0)) => break,
                Some(Ok(n)) => n,
                Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Some(Err(e)) => {
                    log::warn!("reading {}: {e}", self.what);
                    break;
                }
            };
            reader.push(&buf[..n]);
            while let Some(line) = reader.next_line() {
                let input = match line {
                    Line::Frame(bytes) => Input::Frame {
                        conn: self.conn,
                        held: self.inbound.hold(bytes.len()),
                        bytes,
                    },
                    Line::TooLong { size, limit: max } => Input::TooLong {
                        conn: self.conn,
                        size,
                        limit: max,
                        key: self.key,
                    },
                };
                if self.tx.send(input).await.is_err() {
                    return Ended::Closed;
                }
            }
        }
        if reader.pending() > 0 {
            log::warn!(
                "{} ended inside a line ({} bytes without a newline); dropped",
                self.what,
                reader.pending()
            );
        }
        let conn = self.conn;
        let _ = self.tx.send(Input::Closed { conn, code: None }).await;
        Ended::Closed
    }
}

/// Write each frame as one line on `output`. What is queued is gathered into one buffer and
/// written at once (one write for a burst of streamed chunks, whichever sessions they come
/// from, not one a line), then flushed when the queue runs dry. While `gauge` (the
/// connection's) is past its pause mark, a text chunk is merged into its session's latest
/// chunk frame of its stream in the burst ([`Burst`]): the reader is behind, and the frames'
/// envelopes are most of what it has to read. The frames' gauge tokens are held until their
/// write; the frames themselves then go back through `returns`, to be freed by the thread
/// that made them. Ends when the queue is closed (everything before the close written) or a
/// write fails.
pub async fn write_lines<W: AsyncWrite + Unpin>(
    output: &mut W,
    rx: Receiver<Outgoing>,
    gauge: &Gauge,
    returns: &Returns,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut held = Vec::new();
    let mut burst = Burst::default();
    // Whether the queue was past its mark when the last burst was written, that burst still
    // counted: the sources stop at the mark, so the queue hovers there, and it is the
    // written burst's release that takes it under.
    let mut behind = false;
    while let Ok(first) = rx.recv().await {
        behind |= gauge.paused();
        let mut next = Some(first);
        while let Some(out) = next.take() {
            // Under the mark nothing merges: a frame goes as it came.
            match out {
                Outgoing::Frame(frame, sent) => {
                    held.extend(sent);
                    burst.push(frame, behind);
                }
                Outgoing::Frames(frames, sent) => {
                    held.push(sent);
                    for frame in frames {
                        burst.push(frame, behind);
                    }
                }
                Outgoing::Ping | Outgoing::Close { .. } => {}
            }
            if burst.bytes() >= 64 * 1024 {
                break;
            }
            next = rx.try_recv().ok();
        }
        let written: Vec<Vec<u8>> = burst.drain().collect();
        for frame in &written {
            buf.extend_from_slice(frame);
            buf.push(b'\n');
        }
        output.write_all(&buf).await?;
        buf.clear();
        returns.give(written);
        behind = gauge.paused();
        held.clear();
        if rx.is_empty() {
            output.flush().await?;
        }
    }
    output.flush().await
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn chunk(seq: u64, text: &str) -> Vec<u8> {
        chunk_of("ses_1", seq, text)
    }

    fn chunk_of(session: &str, seq: u64, text: &str) -> Vec<u8> {
        lembas_core::jsonrpc::encode_notification(
            "session/update",
            &json!({ "_meta": { "lembas": { "seq": seq } }, "sessionId": session,
                     "update": { "sessionUpdate": "agent_message_chunk",
                                 "content": { "type": "text", "text": text } } }),
        )
    }

    /// The lines `write_lines` writes for `frames` queued at once, with the queue's pause mark
    /// at `pause_at` bytes.
    fn written(frames: &[Vec<u8>], pause_at: usize) -> Vec<Value> {
        written_with(frames, pause_at, &crate::outbox::returns_nowhere())
    }

    fn written_with(frames: &[Vec<u8>], pause_at: usize, returns: &Returns) -> Vec<Value> {
        let (tx, rx) = smol::channel::unbounded();
        let gauge = Gauge::new(pause_at);
        for f in frames {
            let sent = gauge.hold(f.len());
            tx.try_send(Outgoing::Frame(f.clone(), Some(sent))).unwrap();
        }
        tx.close();
        let mut out = Vec::new();
        smol::block_on(write_lines(&mut out, rx, &gauge, returns)).unwrap();
        assert_eq!(gauge.queued(), 0, "every token released once written");
        out.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    /// What was written goes back to the queue's owner to be freed there, in the order written
    /// (merged frames as merged), one batch a write.
    #[test]
    fn the_frames_written_go_back_to_the_driver() {
        let (tx, rx) = smol::channel::unbounded();
        let out = crate::outbox::Outbox::new(tx, rx, 1 << 20, None);
        let frames = [chunk(1, "a"), chunk(2, "b"), b"{}".to_vec()];
        let lines = written_with(&frames, 1 << 20, &out.returns());
        assert_eq!(lines.len(), 3);
        assert_eq!(out.written_back(), [frames.to_vec()]);
    }

    #[test]
    fn behind_its_pause_mark_a_burst_of_chunks_goes_out_merged() {
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec();
        let frames = [
            chunk(1, "a"),
            chunk(2, "b"),
            chunk(3, "c"),
            answer.clone(),
            chunk(4, "d"),
            chunk(5, "e"),
        ];
        let text = |v: &Value| v["params"]["update"]["content"]["text"].clone();
        let seq = |v: &Value| v["params"]["_meta"]["lembas"]["seq"].clone();
        let merged = written(&frames, 1);
        assert_eq!(merged.len(), 3);
        assert_eq!(
            (text(&merged[0]), seq(&merged[0])),
            (json!("abc"), json!(3))
        );
        assert_eq!(merged[1], serde_json::from_slice::<Value>(&answer).unwrap());
        assert_eq!((text(&merged[2]), seq(&merged[2])), (json!("de"), json!(5)));
        // Under the mark (a reader keeping up): every frame as it was.
        let plain = written(&frames, usize::MAX);
        let expected: Vec<Value> = frames
            .iter()
            .map(|f| serde_json::from_slice(f).unwrap())
            .collect();
        assert_eq!(plain, expected);
    }

    #[test]
    fn behind_its_pause_mark_interleaved_sessions_each_go_out_merged() {
        let frames = [
            chunk_of("ses_1", 1, "a"),
            chunk_of("ses_2", 1, "x"),
            chunk_of("ses_1", 2, "b"),
            chunk_of("ses_2", 2, "y"),
            chunk_of("ses_1", 3, "c"),
        ];
        let line = |v: &Value| {
            (
                v["params"]["sessionId"].clone(),
                v["params"]["update"]["content"]["text"].clone(),
                v["params"]["_meta"]["lembas"]["seq"].clone(),
            )
        };
        let merged: Vec<_> = written(&frames, 1).iter().map(line).collect();
        assert_eq!(
            merged,
            vec![
                (json!("ses_1"), json!("abc"), json!(3)),
                (json!("ses_2"), json!("xy"), json!(2)),
            ]
        );
    }
}
