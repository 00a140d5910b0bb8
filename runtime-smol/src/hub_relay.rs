//! `lembas serve --stdio` while a service runs: a thin relay between the editor's stdio and the
//! service's hub, so the editor's sessions live in the service's store and reach the web.
//!
//! Bytes in, bytes out, each way in its own task, each read made only once the write before it
//! is done: a slow editor slows the hub's writer (which stops the turn, as on stdio), a slow
//! service blocks the editor's writes. What reaches the editor is whole lines only: a line the
//! service was cut in the middle of (it died) is dropped, never written in part. The other way
//! needs no such care: the hub drops a line a peer ended inside of, as stdin's reader does.

use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use smol::net::unix::UnixStream;

/// Relay until the editor's stdin ends and the service has written all it had for it, or the
/// service goes away. `max_line` bounds a line from the service held while its end is awaited.
pub fn run(stream: std::os::unix::net::UnixStream, max_line: usize) -> Result<(), String> {
    smol::block_on(async move {
        let stream = UnixStream::try_from(stream).map_err(|e| e.to_string())?;
        let to_hub = smol::spawn({
            let stream = stream.clone();
            async move {
                let r = stdin_to_hub(stream.clone()).await;
                // The editor is done: the service answers what is in flight and hangs up,
                // which ends the other half.
                let _ = stream.shutdown(std::net::Shutdown::Write);
                r
            }
        });
        hub_to_stdout(stream, max_line).await?;
        // The service hung up. After the editor's end, that is the end; before it, the
        // service went away under the editor.
        let bound = async {
            smol::Timer::after(std::time::Duration::from_millis(500)).await;
            Err(
                "the lembas service closed the hub connection while the editor was attached; \
                 its sessions stay in the service's store"
                    .to_string(),
            )
        };
        future::or(to_hub, bound).await
    })
}

async fn stdin_to_hub(mut hub: UnixStream) -> Result<(), String> {
    let mut stdin = blocking::Unblock::new(std::io::stdin());
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf).await {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading stdin: {e}")),
        };
        hub.write_all(&buf[..n])
            .await
            .map_err(|e| format!("writing to the lembas service: {e}"))?;
    }
}

async fn hub_to_stdout(mut hub: UnixStream, max_line: usize) -> Result<(), String> {
    // Room for the pipe's whole buffer, as `serve --stdio` writes it.
    let mut stdout = blocking::Unblock::with_capacity(256 * 1024, std::io::stdout());
    let mut buf = vec![0u8; 64 * 1024];
    // The start of a line whose end has not come yet.
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let n = match hub.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("reading the lembas service: {e}");
                break;
            }
        };
        let chunk = &buf[..n];
        match chunk.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                if !partial.is_empty() {
                    stdout.write_all(&partial).await.map_err(lost)?;
                    partial.clear();
                }
                stdout.write_all(&chunk[..=last]).await.map_err(lost)?;
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
        if partial.is_empty() || n < buf.len() {
            stdout.flush().await.map_err(lost)?;
        }
    }
    if !partial.is_empty() {
        log::warn!(
            "the lembas service ended inside a line ({} bytes); dropped, not written in part",
            partial.len()
        );
    }
    stdout.flush().await.map_err(lost)
}

fn lost(e: std::io::Error) -> String {
    format!("could not write stdout ({e}): output from then on was lost")
}
