//! `lembas serve --stdio`: plain ACP on stdin/stdout, one message a line. stdin is read in
//! pieces through the core's `LineReader` (bounded by the device's frame limit); stdout carries
//! nothing but protocol (logs go to stderr).

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use lembas_core::device::ConnId;
use lembas_core::framing::{Line, LineReader};
use smol::channel::{Receiver, Sender};

use crate::driver::{Input, Outgoing};

/// Read stdin until EOF, handing the driver each line.
pub async fn read_stdin(conn: ConnId, limit: usize, tx: Sender<Input>) {
    let mut stdin = blocking::Unblock::new(std::io::stdin());
    let mut reader = LineReader::new(limit);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
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
                Line::Frame(bytes) => Input::Frame { conn, bytes },
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
pub async fn write_stdout(rx: Receiver<Outgoing>) {
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
        if let Err(e) = stdout.write_all(&buf).await {
            log::warn!("writing stdout: {e}");
            return;
        }
        buf.clear();
        held.clear();
        if rx.is_empty() && stdout.flush().await.is_err() {
            return;
        }
    }
    let _ = stdout.flush().await;
}
