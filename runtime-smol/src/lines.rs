//! One JSON-RPC message a line, both ways, over any byte stream: stdin/stdout for
//! `serve --stdio`, a hub connection's socket. Lines are read through the core's `LineReader`
//! (bounded); frames are written whole, a queued burst gathered into one write.

use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use lembas_core::device::ConnId;
use lembas_core::framing::{Line, LineReader};
use smol::channel::{Receiver, Sender};
use std::sync::Arc;

use crate::channels::{Input, Outgoing};
use crate::outbox::Gauge;

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
    let (gauge, max_queued) = queue;
    let mut reader = LineReader::new(limit.bytes);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        gauge.below(max_queued).await;
        inbound.below_pause().await;
        let n = match input.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("reading {what}: {e}");
                break;
            }
        };
        reader.push(&buf[..n]);
        while let Some(line) = reader.next_line() {
            let input = match line {
                Line::Frame(bytes) => Input::Frame {
                    conn,
                    held: inbound.hold(bytes.len()),
                    bytes,
                },
                Line::TooLong { size, limit: max } => Input::TooLong {
                    conn,
                    size,
                    limit: max,
                    key: limit.key,
                },
            };
            if tx.send(input).await.is_err() {
                return;
            }
        }
    }
    if reader.pending() > 0 {
        log::warn!(
            "{what} ended inside a line ({} bytes without a newline); dropped",
            reader.pending()
        );
    }
    let _ = tx.send(Input::Closed { conn, code: None }).await;
}

/// Write each frame as one line on `output`. What is queued is gathered into one buffer and
/// written at once (one write for a burst of streamed chunks, not one a line), then flushed
/// when the queue runs dry. The frames' gauge tokens are held until their write. Ends when the
/// queue is closed (everything before the close written) or a write fails.
pub async fn write_lines<W: AsyncWrite + Unpin>(
    output: &mut W,
    rx: Receiver<Outgoing>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut held = Vec::new();
    while let Ok(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next.take() {
            if let Outgoing::Frame(frame, sent) = out {
                buf.extend_from_slice(&frame);
                buf.push(b'\n');
                held.extend(sent);
            }
            if buf.len() >= 64 * 1024 {
                break;
            }
            next = rx.try_recv().ok();
        }
        output.write_all(&buf).await?;
        buf.clear();
        held.clear();
        if rx.is_empty() {
            output.flush().await?;
        }
    }
    output.flush().await
}
