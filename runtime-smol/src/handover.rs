//! A `serve --stdio` that held the store hands its editor to a `lembas link` started later
//! (see [`crate::store_yield`]): once its driver is at rest it lets the store go and ends with a
//! [`Handover`], and [`relay`] carries on as a relay to the service's hub, as a `serve --stdio`
//! that found the service at its start does, without the editor noticing.
//!
//! Before any byte of the editor's goes to the hub, the hub connection is brought to where the
//! editor's was: the editor's own `initialize` is sent again, then a `session/resume` of each
//! session it held, and their answers are swallowed (the editor had its answers already). What
//! else the service says meanwhile (a session's commands, say) is the editor's, and passed on.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::hub_relay::{self, Stdin};

/// How long the service may take to answer the replayed requests (it answers them at once).
const REPLAY_ANSWERED_WITHIN: Duration = Duration::from_secs(30);

/// The ids of the replayed requests: strings an editor's own requests do not take.
const REPLAY_ID: &str = "lembas-handover-";

/// What a `serve --stdio` hands to its relay: where its editor stood, and the rest of stdin.
pub struct Handover {
    /// The params of the editor's `initialize`, as it sent them (`None`: it sent none).
    pub initialize: Option<Value>,
    /// The sessions the editor held, each with its working directory.
    pub sessions: Vec<(String, String)>,
    /// Bytes of stdin read and not handled (the start of the next line), in order.
    pub rest: Vec<u8>,
    /// The rest of stdin, from its reader's thread.
    pub pieces: smol::channel::Receiver<Vec<u8>>,
}

/// The `initialize` params of `frame` if it is an `initialize` request.
pub fn initialize_params(frame: &[u8]) -> Option<Value> {
    let mut m: Value = serde_json::from_slice(frame).ok()?;
    (m.get("method")? == "initialize" && m.get("id").is_some()).then(|| m["params"].take())
}

/// Wait for the hub of the service that asked for the store at `store` (it serves it right
/// after taking the store), replay the editor's place on it, then relay.
pub fn relay(handover: Handover, hub: &Path, store: &Path, max_line: usize) -> Result<(), String> {
    let stream = wait_for_hub(hub, store)?;
    log::info!(
        "the store went to the lembas service; relaying the editor to its hub at {}",
        hub.display()
    );
    let first = replay(&stream, &handover, max_line)?;
    let stdin = Stdin::Handed {
        rest: handover.rest,
        pieces: handover.pieces,
    };
    hub_relay::run_from(stream, max_line, stdin, first)
}

fn wait_for_hub(hub: &Path, store: &Path) -> Result<UnixStream, String> {
    loop {
        if let Some(stream) = crate::hub::connect(hub)? {
            return Ok(stream);
        }
        // The service keeps its request until its hub is served: without it, the service is
        // gone (unless it served the hub just now).
        if !crate::store_yield::asked(store) {
            return crate::hub::connect(hub)?.ok_or_else(|| {
                "the lembas service that asked for the store went away before serving its hub; \
                 the editor's sessions are in the store"
                    .to_string()
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send the editor's `initialize` and a `session/resume` of each session it held, and wait for
/// their answers, passing anything else on to stdout. Returns what was read after the last
/// answer. A line from the service is bounded by `max_line`, as the relay bounds it.
fn replay(stream: &UnixStream, handover: &Handover, max_line: usize) -> Result<Vec<u8>, String> {
    let Some(params) = &handover.initialize else {
        // Never initialized: the editor's next bytes start its connection, here as there.
        return Ok(Vec::new());
    };
    let mut frames = vec![json!({ "jsonrpc": "2.0", "id": format!("{REPLAY_ID}0"),
                                  "method": "initialize", "params": params })];
    for (i, (session, cwd)) in handover.sessions.iter().enumerate() {
        frames.push(
            json!({ "jsonrpc": "2.0", "id": format!("{REPLAY_ID}{}", i + 1),
            "method": "session/resume", "params": { "sessionId": session, "cwd": cwd } }),
        );
    }
    let mut out = String::new();
    for f in &frames {
        out.push_str(&f.to_string());
        out.push('\n');
    }
    let service = |e: std::io::Error| format!("the lembas service: {e}");
    (&*stream).write_all(out.as_bytes()).map_err(service)?;
    stream
        .set_read_timeout(Some(REPLAY_ANSWERED_WITHIN))
        .map_err(service)?;
    let mut waiting = frames.len();
    let mut buf = Vec::new();
    let mut piece = vec![0u8; 64 * 1024];
    let mut stdout = std::io::stdout().lock();
    while waiting > 0 {
        let n = match (&*stream).read(&mut piece) {
            Ok(0) => return Err("the lembas service hung up during the hand-over".into()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("the lembas service did not answer: {e}")),
        };
        buf.extend_from_slice(&piece[..n]);
        while waiting > 0 {
            let Some(end) = buf.iter().position(|&b| b == b'\n') else {
                break;
            };
            let line: Vec<u8> = buf.drain(..=end).collect();
            let m: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            let ours = m.get("method").is_none()
                && m["id"].as_str().is_some_and(|id| id.starts_with(REPLAY_ID));
            if !ours {
                stdout
                    .write_all(&line)
                    .and_then(|()| stdout.flush())
                    .map_err(|e| format!("could not write stdout: {e}"))?;
                continue;
            }
            waiting -= 1;
            if let Some(e) = m.get("error") {
                // The editor is told when it next names what was refused.
                log::warn!(
                    "the lembas service refused a replayed {}: {}",
                    if m["id"] == json!(format!("{REPLAY_ID}0")) {
                        "initialize"
                    } else {
                        "session/resume"
                    },
                    e["message"].as_str().unwrap_or("an error")
                );
            }
        }
        if buf.len() > max_line {
            return Err(format!(
                "the lembas service wrote a line of more than {max_line} bytes (max_frame_bytes) \
                 during the hand-over"
            ));
        }
    }
    stream.set_read_timeout(None).map_err(service)?;
    Ok(buf)
}
