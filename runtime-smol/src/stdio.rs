//! `lembas serve --stdio`: plain ACP on stdin/stdout, one message a line ([`crate::lines`]).
//! stdin is read in pieces bounded by the device's frame limit; stdout carries nothing but
//! protocol (logs go to stderr).
//!
//! A slow editor is waited for, never disconnected: the engine waits at `outbound.pause_bytes`
//! (see the driver), and stdin is not read while `outbound.max_bytes` of answers wait for the
//! editor, so an editor that writes requests and reads nothing blocks on its own pipe instead
//! of growing the device.

use lembas_core::device::ConnId;
use smol::channel::{Receiver, Sender};
use std::sync::Arc;

use crate::channels::{Input, Outgoing};
use crate::lines::{read_lines, write_lines, LineLimit};
use crate::outbox::Gauge;

/// Read stdin until EOF, handing the driver each line (see [`read_lines`]).
pub async fn read_stdin(
    conn: ConnId,
    limit: usize,
    inbound: Arc<Gauge>,
    queue: (Arc<Gauge>, usize),
    tx: Sender<Input>,
) {
    let stdin = blocking::Unblock::new(std::io::stdin());
    let limit = LineLimit {
        bytes: limit,
        key: "max_frame_bytes",
    };
    read_lines(stdin, "stdin", conn, limit, inbound, queue, tx).await
}

/// Write each frame as one line on stdout (see [`write_lines`]). A failed write (the editor
/// closed stdout) is told to the driver: output was lost.
pub async fn write_stdout(
    conn: ConnId,
    rx: Receiver<Outgoing>,
    gauge: Arc<Gauge>,
    tx: Sender<Input>,
) {
    // Room for the pipe's whole buffer: a bigger burst is written in several writes.
    let mut stdout = blocking::Unblock::with_capacity(256 * 1024, std::io::stdout());
    if let Err(e) = write_lines(&mut stdout, rx, &gauge).await {
        let error = e.to_string();
        let _ = tx.send(Input::OutputLost { conn, error }).await;
    }
}
