//! `lembas serve --stdio`: plain ACP on stdin/stdout, one message a line. stdin is read in
//! pieces through the core's `LineReader` (bounded by the device's frame limit); stdout carries
//! nothing but protocol (logs go to stderr).
//!
//! A slow editor is waited for, never disconnected: the engine waits at `outbound.pause_bytes`
//! (see the driver), and stdin is not read while `outbound.max_bytes` of answers wait for the
//! editor, so an editor that writes requests and reads nothing blocks on its own pipe instead
//! of growing the device.

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use lembas_core::device::ConnId;
use lembas_core::framing::{Line, LineReader};
use smol::channel::{Receiver, Sender};
use std::sync::Arc;

use crate::channels::{Input, Outgoing};
use crate::outbox::Gauge;

/// Read stdin until EOF, handing the driver each line; while `queue` (stdout's gauge and its
/// bound) is full, or `inbound`'s mark of lines not yet handled is reached, read nothing.
pub async fn read_stdin(
    conn: ConnId,
    limit: usize,
    inbound: Arc<Gauge>,
    queue: (Arc<Gauge>, usize),
    tx: Sender<Input>,
) {
    let (gauge, max_queued) = queue;
    let mut stdin = blocking::Unblock::new(std::io::stdin());
    let mut reader = LineReader::new(limit);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        gauge.below(max_queued).await;
        inbound.below_pause().await;
        let n = match stdin.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("reading stdin: {e}");
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
                Line::TooLong { size, limit } => Input::TooLong { conn, size, limit },
            };
            if tx.send(input).await.is_err() {
                return;
            }
        }
    }
    if reader.pending() > 0 {
        log::warn!(
            "stdin ended inside a line ({} bytes without a newline); dropped",
            reader.pending()
        );
    }
    let _ = tx.send(Input::Closed { conn, code: None }).await;
}

/// Write each frame as one line on stdout. What is queued is gathered into one buffer and
/// written at once (one pipe write for a burst of streamed chunks, not one a line), then
/// flushed when the queue runs dry. The frames' gauge tokens are held until their write.
/// A failed write (the editor closed stdout) is told to the driver: output was lost.
pub async fn write_stdout(conn: ConnId, rx: Receiver<Outgoing>, tx: Sender<Input>) {
    if let Err(e) = write_lines(rx).await {
        let error = e.to_string();
        let _ = tx.send(Input::OutputLost { conn, error }).await;
    }
}

async fn write_lines(rx: Receiver<Outgoing>) -> std::io::Result<()> {
    // Room for the pipe's whole buffer: a bigger burst is written in several writes.
    let mut stdout = blocking::Unblock::with_capacity(256 * 1024, std::io::stdout());
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
        stdout.write_all(&buf).await?;
        buf.clear();
        held.clear();
        if rx.is_empty() {
            stdout.flush().await?;
        }
    }
    stdout.flush().await
}
