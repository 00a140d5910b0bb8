//! `lembas serve --stdio` while a service runs: a thin relay between the editor's stdio and the
//! service's hub, so the editor's sessions live in the service's store and reach the web.
//!
//! Bytes in, bytes out, each way on its own thread with blocking reads and writes: nothing
//! between a read and its write but the copy, so the relay adds two system calls a hop and no
//! executor or thread-pool hand-off (bench `hub`). Each read is made only once the write before
//! it is done: a slow editor slows the hub's writer (which stops the turn, as on stdio), a slow
//! service blocks the editor's writes. What reaches the editor is whole lines only: a line the
//! service was cut in the middle of (it died) is dropped, never written in part. The other way
//! needs no such care: the hub drops a line a peer ended inside of, as stdin's reader does.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

/// How long the editor's side may take to end once the service hung up.
const AFTER_HANG_UP: Duration = Duration::from_millis(500);

/// Where the editor's bytes come from.
pub enum Stdin {
    /// stdin itself, read here.
    Direct,
    /// What a `serve --stdio` that served the editor itself had read and not handled (`rest`),
    /// then the rest of stdin from its reader's thread (see `stdio::stdin_pieces`).
    Handed {
        rest: Vec<u8>,
        pieces: smol::channel::Receiver<Vec<u8>>,
    },
}

/// Relay until the editor's stdin ends and the service has written all it had for it, or the
/// service goes away. `max_line` bounds a line from the service held while its end is awaited.
pub fn run(stream: UnixStream, max_line: usize) -> Result<(), String> {
    run_from(stream, max_line, Stdin::Direct, Vec::new())
}

/// [`run`], the editor's bytes taken from `stdin`, and `first` (bytes already read from the
/// service) passed on before anything read from it after.
pub fn run_from(
    stream: UnixStream,
    max_line: usize,
    stdin: Stdin,
    first: Vec<u8>,
) -> Result<(), String> {
    let to_hub = stream.try_clone().map_err(|e| e.to_string())?;
    let (done, editor_ended) = mpsc::channel();
    std::thread::Builder::new()
        .name("stdin-to-hub".into())
        .spawn(move || {
            let r = match stdin {
                Stdin::Direct => stdin_to_hub(&to_hub),
                Stdin::Handed { rest, pieces } => pieces_to_hub(&to_hub, &rest, &pieces),
            };
            // The editor is done: the service answers what is in flight and hangs up, which
            // ends the other half.
            let _ = to_hub.shutdown(std::net::Shutdown::Write);
            let _ = done.send(r);
        })
        .map_err(|e| e.to_string())?;
    hub_to_stdout(stream, max_line, &first)?;
    // The service hung up. After the editor's end, that is the end; before it, the service
    // went away under the editor (the stdin thread, blocked in its read, ends with the process).
    editor_ended
        .recv_timeout(AFTER_HANG_UP)
        .unwrap_or_else(|_| {
            Err(
                "the lembas service closed the hub connection while the editor was attached; its \
             sessions stay in the service's store"
                    .to_string(),
            )
        })
}

fn stdin_to_hub(mut hub: &UnixStream) -> Result<(), String> {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading stdin: {e}")),
        };
        hub.write_all(&buf[..n])
            .map_err(|e| format!("writing to the lembas service: {e}"))?;
    }
}

fn pieces_to_hub(
    mut hub: &UnixStream,
    rest: &[u8],
    pieces: &smol::channel::Receiver<Vec<u8>>,
) -> Result<(), String> {
    let lost = |e: std::io::Error| format!("writing to the lembas service: {e}");
    hub.write_all(rest).map_err(lost)?;
    // The channel closes at stdin's end.
    while let Ok(piece) = pieces.recv_blocking() {
        hub.write_all(&piece).map_err(lost)?;
    }
    Ok(())
}

fn hub_to_stdout(mut hub: UnixStream, max_line: usize, first: &[u8]) -> Result<(), String> {
    // Unbuffered: each read's whole lines go out in one write (the pipe takes them whole or
    // blocks this thread, which is the backpressure).
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    // The start of a line whose end has not come yet.
    let mut partial: Vec<u8> = Vec::new();
    pass(&mut stdout, &mut partial, first, max_line)?;
    loop {
        let n = match hub.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("reading the lembas service: {e}");
                break;
            }
        };
        pass(&mut stdout, &mut partial, &buf[..n], max_line)?;
    }
    if !partial.is_empty() {
        log::warn!(
            "the lembas service ended inside a line ({} bytes); dropped, not written in part",
            partial.len()
        );
    }
    Ok(())
}

/// Write `chunk`'s whole lines (after `partial`, the start of the first), keeping the start of
/// a line not yet ended in `partial`.
fn pass(
    stdout: &mut impl Write,
    partial: &mut Vec<u8>,
    chunk: &[u8],
    max_line: usize,
) -> Result<(), String> {
    match chunk.iter().rposition(|&b| b == b'\n') {
        Some(last) => {
            if !partial.is_empty() {
                stdout.write_all(partial).map_err(lost)?;
                partial.clear();
            }
            stdout.write_all(&chunk[..=last]).map_err(lost)?;
            stdout.flush().map_err(lost)?;
            partial.extend_from_slice(&chunk[last + 1..]);
        }
        None => partial.extend_from_slice(chunk),
    }
    if partial.len() > max_line {
        return Err(format!(
            "the lembas service wrote a line of more than {max_line} bytes (max_frame_bytes); \
             relay stopped"
        ));
    }
    Ok(())
}

fn lost(e: std::io::Error) -> String {
    format!("could not write stdout ({e}): output from then on was lost")
}
