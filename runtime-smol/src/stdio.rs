//! `lembas serve --stdio`: plain ACP on stdin/stdout, one message a line ([`crate::lines`]).
//! stdin is read on a thread of its own, its lines bounded by the device's frame limit; stdout
//! carries nothing but protocol (logs go to stderr). The reader can be paused between two
//! reads and handed back whole ([`StdinReader`]): a `serve --stdio` that hands its editor to a
//! service started later relays the rest of stdin from exactly there.
//!
//! A slow editor is waited for, never disconnected: the engine waits at `outbound.pause_bytes`
//! (see the driver), and stdin is not read while `outbound.max_bytes` of answers wait for the
//! editor, so an editor that writes requests and reads nothing blocks on its own pipe instead
//! of growing the device.

use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::future::Future;

use futures_lite::AsyncRead;
use lembas_core::device::ConnId;
use lembas_core::framing::LineReader;
use smol::channel::{Receiver, Sender};

use crate::channels::{Input, Outgoing};
use crate::lines::{write_lines, Ended, Reading};
use crate::outbox::{Gauge, Returns};

/// stdin's bytes, read on a thread of their own and handed over a small bounded channel in the
/// order read: whoever holds the receiver gets every byte, none twice (the driver's reader,
/// then, after a hand-over to a service, the relay). The thread reads one piece ahead at most,
/// and ends at EOF (the channel closes) or once nobody takes its pieces.
pub fn stdin_pieces() -> Receiver<Vec<u8>> {
    let (tx, rx) = smol::channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        log::warn!("reading stdin: {e}");
                        return;
                    }
                };
                if tx.send_blocking(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        // The receiver sees the end at once: the editor is served nothing, and told so.
        log::error!("could not start stdin's reader: {e}");
    }
    rx
}

/// A wait for stdin's next piece (`None`: stdin ended).
type NextPiece = Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send>>;

/// stdin's pieces as a byte stream. Cancel-safe: a read dropped before it is ready took
/// nothing, and its wait for the next piece is kept for the next read.
pub struct Pieces {
    rx: Receiver<Vec<u8>>,
    next: Option<NextPiece>,
    piece: Vec<u8>,
    at: usize,
}

impl Pieces {
    pub fn new(rx: Receiver<Vec<u8>>) -> Pieces {
        Pieces {
            rx,
            next: None,
            piece: Vec::new(),
            at: 0,
        }
    }

    /// What is left: the rest of the piece being read, and the channel of the pieces after it.
    pub fn into_parts(self) -> (Vec<u8>, Receiver<Vec<u8>>) {
        (self.piece[self.at..].to_vec(), self.rx)
    }
}

// The receiver is only ever cloned and moved, never polled in place: nothing here is pinned.
impl Unpin for Pieces {}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.at == this.piece.len() {
            let rx = this.rx.clone();
            // A piece is taken from the channel only when this is ready: dropping it unready
            // (the rest handed over) loses nothing.
            let next = this
                .next
                .get_or_insert_with(|| Box::pin(async move { rx.recv().await.ok() }));
            let got = std::task::ready!(next.as_mut().poll(cx));
            this.next = None;
            match got {
                Some(piece) => {
                    this.piece = piece;
                    this.at = 0;
                }
                None => return Poll::Ready(Ok(0)),
            }
        }
        let n = buf.len().min(this.piece.len() - this.at);
        buf[..n].copy_from_slice(&this.piece[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(n))
    }
}

/// stdin as the driver reads it: its pieces, and the line being read.
pub struct StdinReader {
    pub pieces: Pieces,
    pub lines: LineReader,
}

impl StdinReader {
    pub fn new(limit: usize) -> StdinReader {
        StdinReader {
            pieces: Pieces::new(stdin_pieces()),
            lines: LineReader::new(limit),
        }
    }

    /// Everything not handed to the driver, in order: the start of the line being read, the
    /// rest of the piece being read, and the channel of the pieces after them.
    pub fn into_rest(mut self) -> (Vec<u8>, Receiver<Vec<u8>>) {
        let mut rest = self.lines.take_pending();
        let (piece, rx) = self.pieces.into_parts();
        rest.extend_from_slice(&piece);
        (rest, rx)
    }
}

/// Read stdin until EOF, handing the driver each line (see [`crate::lines::Reading`]); when
/// `stop` says so (between two reads), hand the reader back to the driver instead
/// (`Input::StdinPaused`), every line before it already handed on.
pub async fn read_stdin(
    mut stdin: StdinReader,
    conn: ConnId,
    inbound: Arc<Gauge>,
    queue: (Arc<Gauge>, usize),
    tx: Sender<Input>,
    stop: Receiver<()>,
) {
    let reading = Reading {
        what: "stdin",
        conn,
        key: "max_frame_bytes",
        inbound,
        queue,
        tx: tx.clone(),
    };
    let stopped = async {
        let _ = stop.recv().await;
    };
    let ended = reading
        .until(&mut stdin.pieces, &mut stdin.lines, stopped)
        .await;
    if ended == Ended::Stopped {
        let _ = tx.send(Input::StdinPaused(Box::new(stdin))).await;
    }
}

/// Write each frame as one line on stdout (see [`write_lines`]), on a thread of its own that
/// writes with plain blocking writes: a burst goes from the driver's queue to the pipe with one
/// thread woken, where an async writer woke the executor's thread and then handed each burst to
/// another thread to write (100 sessions streaming at once spent a fifth of the device's time
/// in those wake-ups). A failed write (the editor closed stdout) is told to the driver: output
/// was lost. The task ends once the queue is closed and written, or a write failed.
pub fn write_stdout(
    conn: ConnId,
    rx: Receiver<Outgoing>,
    gauge: Arc<Gauge>,
    returns: Returns,
    tx: Sender<Input>,
) -> smol::Task<()> {
    blocking::unblock(move || {
        // Blocking is this thread's whole job: nothing else waits on it.
        let mut stdout = futures_lite::io::AssertAsync::new(std::io::stdout().lock());
        if let Err(e) =
            futures_lite::future::block_on(write_lines(&mut stdout, rx, &gauge, &returns))
        {
            let error = e.to_string();
            let _ = tx.send_blocking(Input::OutputLost { conn, error });
        }
    })
}
