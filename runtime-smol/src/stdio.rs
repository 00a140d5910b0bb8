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

/// Write each frame as one line on stdout, flushing whenever the queue runs dry.
pub async fn write_stdout(rx: Receiver<Outgoing>) {
    let mut stdout = blocking::Unblock::new(std::io::stdout());
    while let Ok(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next.take() {
            if let Outgoing::Frame(mut frame, _sent) = out {
                frame.push(b'\n');
                if let Err(e) = stdout.write_all(&frame).await {
                    log::warn!("writing stdout: {e}");
                    return;
                }
            }
            next = rx.try_recv().ok();
        }
        if stdout.flush().await.is_err() {
            return;
        }
    }
    let _ = stdout.flush().await;
}
