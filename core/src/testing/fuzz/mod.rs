//! The fuzz drivers: pure functions of one byte string that panic when a promise of the core
//! is broken. The cargo-fuzz targets in `fuzz/` call them, and `core/tests/fuzz_corpus.rs`
//! replays the committed corpus through them in plain `cargo test`, so every CI run exercises
//! the corpus on stable. Neither function does I/O, reads a clock or draws global randomness:
//! a failing input replays the same way everywhere.
//!
//! By job: this file holds the drivers and the frame checks; `turn_table.rs`, `outbox.rs`,
//! `event_log.rs`, `link.rs` and `cards.rs` drivers of one concern alone, each against a model
//! of its rules (a session's turns, the persist-gated output queue, a session's event log, the
//! instance link, the open cards); `grammar.rs` what the `device` driver reads from its
//! input; `run.rs` the shell it plays around the device (on `testing/fake_os.rs`, the Pair's
//! fake OS) and
//! the invariants it checks after every operation (those on what is said on each connection are
//! `testing/oracle.rs`, and those of the link's life, opens, closes, dials and stops,
//! `testing/connections.rs`: the Pair runs both too); `model_engine.rs` a driver of the model
//! engine alone, against an instance that answers anything. The `session` driver, one session
//! alone against a model of the store, is `device/session_fuzz.rs`: it drives the session's
//! own steps, which are the device's.

use arbitrary::{Arbitrary, Unstructured};
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::config::{DeviceConfig, Model};
use crate::jsonrpc::{self, code, FrameLimits, Id, Message, RpcError};

/// The tight limits `frame` and `device` also decode under, so the limit errors are reached
/// by small inputs.
pub const SMALL_LIMITS: FrameLimits = FrameLimits {
    max_frame_bytes: 4096,
    max_depth: 8,
};

/// At most this many operations are read from one `device` input.
pub const MAX_OPS: usize = 256;

/// Draining the device after one operation must end within this many outputs; more is a
/// livelock.
pub const MAX_OUTPUTS_PER_OP: usize = 10_000;

// ---------------------------------------------------------------------------------------------
// frame

/// Decode `data` as one frame, under the default limits and under [`SMALL_LIMITS`], and check
/// what the codec makes of it:
///
/// - a frame refused by `decode` gets an error response that is JSON with `jsonrpc: "2.0"`, an
///   `error.code` of -32700 (then with `id: null`) or -32600, the frame's id when it could be
///   read, and no raw newline;
/// - a request's id is a string or a number and round-trips byte for byte through a result
///   and an error response;
/// - a response's error, and a notification's "method not found", encode to frames the codec
///   reads back.
///
/// Panics on a broken promise; must return for every other input.
pub fn frame(data: &[u8]) {
    for limits in [FrameLimits::default(), SMALL_LIMITS] {
        check_frame(data, &limits);
    }
}

fn check_frame(data: &[u8], limits: &FrameLimits) {
    match jsonrpc::decode(data, limits) {
        Err(e) => {
            assert!(
                matches!(e.error.code, code::PARSE_ERROR | code::INVALID_REQUEST),
                "a refused frame gets -32700 or -32600, not {}: {:?}",
                e.error.code,
                e.error
            );
            if e.error.code == code::PARSE_ERROR {
                assert!(e.id.is_none(), "a parse error has no id: {e:?}");
            }
            if let Some(id) = &e.id {
                assert_id_text(id);
            }
            let out = e.response();
            match check_out_frame(&out) {
                Message::Response(r) => {
                    assert_eq!(
                        r.id.as_ref().map(Id::as_json),
                        e.id.as_ref().map(Id::as_json),
                        "the error response carries the frame's id (or null): {}",
                        lossy(&out)
                    );
                    let err = r.outcome.expect_err("an error response");
                    assert_eq!(err, e.error, "the error reads back as it was written");
                }
                other => panic!("an error response decodes as {other:?}: {}", lossy(&out)),
            }
        }
        Ok(Message::Request(r)) => {
            assert_id_text(&r.id);
            let out = jsonrpc::encode_result(&r.id, &serde_json::json!({}));
            assert_answer_has_id(&out, &r.id);
            let out = jsonrpc::encode_error(Some(&r.id), &RpcError::method_not_found(&r.method));
            assert_answer_has_id(&out, &r.id);
        }
        Ok(Message::Notification(n)) => {
            let out = jsonrpc::encode_error(None, &RpcError::method_not_found(&n.method));
            check_out_frame(&out);
        }
        Ok(Message::Response(r)) => {
            if let Some(id) = &r.id {
                assert_id_text(id);
            }
            if let Err(e) = &r.outcome {
                let out = jsonrpc::encode_error(r.id.as_ref(), e);
                check_out_frame(&out);
            }
            if let Some(id) = &r.id {
                let out = jsonrpc::encode_result(id, &Value::Null);
                assert_answer_has_id(&out, id);
            }
        }
    }
}

/// An id is a JSON string or number, kept as its text.
fn assert_id_text(id: &Id) {
    let text = id.as_json();
    assert!(
        matches!(text.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')),
        "an id is a string or a number: {text}"
    );
    assert!(
        serde_json::from_str::<IgnoredAny>(text).is_ok(),
        "an id is one JSON value: {text}"
    );
}

/// `out` is a response whose id is `id`, byte for byte.
fn assert_answer_has_id(out: &[u8], id: &Id) {
    match check_out_frame(out) {
        Message::Response(r) => assert_eq!(
            r.id.as_ref().map(Id::as_json),
            Some(id.as_json()),
            "the id round-trips exactly: {}",
            lossy(out)
        ),
        other => panic!("an answer decodes as {other:?}: {}", lossy(out)),
    }
}

/// A frame the core wrote: JSON (checked without reading numbers into floats, since an id such
/// as `1e400` is valid JSON the core echoes as it came), no raw newline (stdio's framing relies
/// on it), and a JSON-RPC 2.0 message the core's own decoder reads back.
pub(crate) fn check_out_frame(out: &[u8]) -> Message<'_> {
    assert!(
        !out.contains(&b'\n'),
        "a frame the core wrote holds a raw newline: {}",
        lossy(out)
    );
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(out) {
        panic!("a frame the core wrote is not JSON ({e}): {}", lossy(out));
    }
    jsonrpc::decode(out, &FrameLimits::default()).unwrap_or_else(|e| {
        panic!(
            "a frame the core wrote is not a JSON-RPC 2.0 message ({}): {}",
            e.error,
            lossy(out)
        )
    })
}

pub(crate) fn lossy(bytes: &[u8]) -> String {
    const SHOW: usize = 600;
    let s = String::from_utf8_lossy(bytes);
    if s.len() > SHOW {
        let shown = crate::text::floor_char(&s, SHOW);
        format!("{shown}... ({} bytes)", bytes.len())
    } else {
        s.into_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// device

mod cards;
mod event_log;
mod grammar;
mod link;
mod model_engine;
mod outbox;
mod run;
mod turn_table;

/// An input as a target of one concern reads it: its setup, then up to `max` operations,
/// ending where the bytes run out or no longer make one. The target and its `_script` read it
/// alike, so a script shows exactly what the target ran.
fn read_input<'a, S: Arbitrary<'a>, O: Arbitrary<'a>>(
    data: &'a [u8],
    max: usize,
) -> Option<(S, impl Iterator<Item = O> + 'a)> {
    let mut u = Unstructured::new(data);
    let setup = S::arbitrary(&mut u).ok()?;
    let ops = std::iter::from_fn(move || {
        if u.is_empty() {
            return None;
        }
        O::arbitrary(&mut u).ok()
    });
    Some((setup, ops.take(max)))
}

/// [`read_input`]'s setup (named `label`) and operations, one a line: to read a failing input.
fn script<'a, S, O>(data: &'a [u8], max: usize, label: &str) -> String
where
    S: Arbitrary<'a> + std::fmt::Debug,
    O: Arbitrary<'a> + std::fmt::Debug,
{
    let Some((setup, ops)) = read_input::<S, O>(data, max) else {
        return format!("(too short for the {label})");
    };
    std::iter::once(format!("{label} {setup:?}"))
        .chain(ops.map(|op: O| format!("{op:?}")))
        .collect::<Vec<_>>()
        .join("\n")
}

pub use cards::{cards, cards_script};
pub use event_log::{event_log, event_log_script};
pub use link::{link, link_script};
pub use model_engine::model_engine;
pub use outbox::{outbox, outbox_script};
pub use turn_table::turn_table;

/// One session alone: see `device/session_fuzz.rs` (it drives the session's own steps, which
/// are the device's).
pub fn session(data: &[u8]) {
    crate::device::session_fuzz::session(data);
}

/// What [`session`] reads from `data`, a step a line.
pub fn session_script(data: &[u8]) -> String {
    crate::device::session_fuzz::session_script(data)
}

use grammar::{Op, Setup};
use run::Run;

/// Drive a [`Device`](crate::device::Device) through a sequence of operations read from `data` (at most [`MAX_OPS`]),
/// acting as its shell: links and stdio connections opening and closing (with close codes,
/// 4400 among them), dials failing, time passing and timers firing, persists acknowledged (at
/// once or later) into an in-memory store, paths resolved, turns run on the scripted engine,
/// the process restarting from its store, and frames arriving: mostly well-formed requests and
/// notifications of every method in [`METHODS`](crate::methods::METHODS) (so each handler is reached as it lands), with
/// params from templates (the sessions the device opened among them), some raw bytes. After
/// every operation the outputs are drained (at most [`MAX_OUTPUTS_PER_OP`] outputs and engine
/// events, else it is a livelock) and checked:
///
/// - every frame sent is JSON, a JSON-RPC 2.0 message, with no raw newline;
/// - on each connection, a request id is answered at most as many times as it was received;
/// - nothing is sent or closed on a connection after it closed, or before it opened;
/// - a link's first frame is its one `_lembas/hello`; stdio gets none; nothing else is sent
///   before the connection's `initialize` was answered, and that answer succeeds at most once;
/// - a `Dial` is asked for only while no link is up or being dialled, never after `Stop`, and
///   not at once after a transient dial failure; a link closed with 4400 stops linking;
/// - after `handle_timeout(now)` the device's next deadline is later than `now`;
/// - persists are numbered upwards, and a restart reads back every record the device wrote;
/// - the device's connections are exactly the ones opened and not closed.
///
/// Panics on a broken promise; must return for every other input.
pub fn device(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(setup) = Setup::arbitrary(&mut u) else {
        return;
    };
    let mut config = DeviceConfig {
        seed: setup.seed,
        ..DeviceConfig::default()
    };
    if setup.small_limits {
        config.frames = SMALL_LIMITS;
        config.terminals.max_output_frame_bytes = SMALL_LIMITS.max_frame_bytes;
        // Sessions are set aside and read back from the store all the time.
        config.sessions.max_live = 2;
    }
    if setup.remote {
        config.remote.enabled = true;
        config.remote.terminal = true;
        config.remote.roots = vec!["/tmp".into()];
        config.remote.trusted = vec!["/tmp".into()];
    }
    config.models = vec![Model::served("lembas/default")];
    let mut run = Run::new(config, setup.defer_persist);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        run.step(&op);
    }
}

/// The configuration and operations [`device`] reads from `data`, one a line: to read a
/// failing input (frames are shown as the session-less bytes they make).
pub fn device_script(data: &[u8]) -> String {
    let mut u = Unstructured::new(data);
    let Ok(setup) = Setup::arbitrary(&mut u) else {
        return "(too short for a setup)".into();
    };
    let mut lines = vec![format!("{setup:?}")];
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        let bytes = match &op {
            Op::Frame { frame, .. } => Some(frame.bytes(&[])),
            Op::Rpc { rpc, .. } => Some(rpc.bytes(&[])),
            _ => None,
        };
        lines.push(match bytes {
            Some(b) => format!("{op:?}\n    = {}", lossy(&b)),
            None => format!("{op:?}"),
        });
    }
    lines.join("\n")
}
