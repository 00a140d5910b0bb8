//! The fuzz drivers: pure functions of one byte string that panic when a promise of the core
//! is broken. The cargo-fuzz targets in `fuzz/` call them, and `core/tests/fuzz_corpus.rs`
//! replays the committed corpus through them in plain `cargo test`, so every CI run exercises
//! the corpus on stable. Neither function does I/O, reads a clock or draws global randomness:
//! a failing input replays the same way everywhere.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use arbitrary::{Arbitrary, Unstructured};
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::config::{DeviceConfig, Mode, Model, Remote};
use crate::device::{ConnId, ConnKind, Device, DialFailure, Effect, Misuse};
use crate::engine::Engine;
use crate::host::{self, ShellOutput};
use crate::jsonrpc::{self, code, FrameLimits, Id, Message, RpcError};
use crate::methods::{Direction, Kind, METHODS};
use crate::scripted::ScriptedEngine;
use crate::store::{MemStore, Record};
use crate::time::Time;

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
fn check_out_frame(out: &[u8]) -> Message<'_> {
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

fn lossy(bytes: &[u8]) -> String {
    const SHOW: usize = 600;
    let s = String::from_utf8_lossy(bytes);
    if s.len() > SHOW {
        let mut cut = SHOW;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}... ({} bytes)", &s[..cut], bytes.len())
    } else {
        s.into_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// device

/// How the device under test is configured, read from the input's first bytes.
#[derive(Arbitrary, Debug)]
struct Setup {
    seed: u64,
    /// Decode under [`SMALL_LIMITS`] rather than the defaults.
    small_limits: bool,
    /// Remote work on, over the trusted root `/tmp`.
    remote: bool,
    /// Hold `Effect::Persist` until an `Op::Persisted` rather than acknowledging it at once.
    defer_persist: bool,
}

/// One input the shell could give the device.
#[derive(Arbitrary, Debug)]
enum Op {
    /// `start_link` if needed, then report the dial asked for as open.
    OpenLink,
    /// An editor connects on stdio.
    OpenStdio,
    /// A frame (often well-formed) on the `conn % open`-th open connection.
    Frame { conn: u8, frame: Frame },
    /// A well-formed request or notification on an open connection.
    Rpc { conn: u8, rpc: Rpc },
    /// The peer closed a connection (or the transport failed).
    Close { conn: u8, code: CloseCode },
    /// The dial failed.
    DialFailed(Failure),
    /// Time passes; then `handle_timeout` (device and engine).
    Advance { ms: u16 },
    /// Jump to the earliest deadline (device or engine), and fire it.
    Fire,
    /// A shell hands in a stale clock reading.
    Stale { ms: u16 },
    /// The device sends one of its requests (the test hook), to be answered by a `Frame`.
    Ask { conn: u8, method: u8 },
    /// A frame on a connection that is not open: a `Misuse`, and nothing is sent.
    FrameToUnknown { back: u8 },
    /// The shell finishes writing held persists (all, or the oldest one).
    Persisted { all: bool },
    /// The process dies and starts again from its store (unacknowledged persists are lost).
    Restart,
    /// The person edits `remote:` in config.yaml and the runtime reloads it: remote work, the
    /// roots, the mode cap, trust and terminals change under running sessions and open cards.
    Reconfigure(Reconfig),
    /// `lembas sessions delete` on the device: of a session it handed out, or of a stranger.
    DeleteSession { pick: u8 },
    /// A terminal's shell writes on its own (any bytes, not an echo of keystrokes).
    TerminalOutput { pick: u8, bytes: Vec<u8> },
    /// A terminal's shell exits on its own.
    TerminalExit { pick: u8, code: i32 },
}

/// A `remote:` block as a reload could give it, over a few roots that nest.
#[derive(Arbitrary, Debug)]
struct Reconfig {
    enabled: bool,
    /// Which of [`RELOAD_ROOTS`] are roots, and which trusted (bit i: the i-th).
    roots: u8,
    trusted: u8,
    max_mode: u8,
    require_trust: bool,
    terminal: bool,
    approval_timeout_ms: u16,
}

const RELOAD_ROOTS: &[&str] = &["/tmp", "/tmp/sub", "/etc", "/"];

impl Reconfig {
    fn remote(&self, mut remote: Remote) -> Remote {
        let pick = |bits: u8| -> Vec<String> {
            RELOAD_ROOTS
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, r)| r.to_string())
                .collect()
        };
        remote.enabled = self.enabled;
        remote.roots = pick(self.roots);
        remote.trusted = pick(self.trusted);
        remote.max_mode = Mode::ALL[usize::from(self.max_mode) % Mode::ALL.len()];
        remote.require_trust = self.require_trust;
        remote.terminal = self.terminal;
        remote.approval_timeout_ms = u64::from(self.approval_timeout_ms);
        remote
    }
}

#[derive(Arbitrary, Debug)]
enum CloseCode {
    None,
    Normal,
    GoingAway,
    /// 4400: the server refuses link protocol 3.
    Protocol,
    Other(u16),
}

impl CloseCode {
    fn code(&self) -> Option<u16> {
        match self {
            CloseCode::None => None,
            CloseCode::Normal => Some(1000),
            CloseCode::GoingAway => Some(1001),
            CloseCode::Protocol => Some(crate::device::CLOSE_PROTOCOL),
            CloseCode::Other(c) => Some(*c),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Failure {
    Transient,
    TokenRefused,
    Unsupported(String),
}

/// A frame for the device: mostly well-formed JSON-RPC.
#[derive(Debug)]
enum Frame {
    Raw(Vec<u8>),
    Rpc(Rpc),
    /// An answer to a request the device sent (ids are small integers).
    Response {
        id: u8,
        outcome: Outcome,
    },
}

impl<'a> Arbitrary<'a> for Frame {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=9)? {
            0 | 1 => Frame::Raw(u.arbitrary()?),
            2 => Frame::Response {
                id: u.arbitrary()?,
                outcome: u.arbitrary()?,
            },
            _ => Frame::Rpc(u.arbitrary()?),
        })
    }
}

#[derive(Arbitrary, Debug)]
enum Outcome {
    Result,
    Null,
    MethodNotFound,
    Error(i32),
    /// Answers to the device's cards (approval, question, plan).
    Allow,
    AllowAlways,
    Deny,
    Cancelled,
    Answered,
    Approve,
    Revise,
}

/// A request (with an id) or notification (without) of a method from the method table (or one
/// of a few unknown names), with params from templates.
#[derive(Arbitrary, Debug)]
struct Rpc {
    method: u8,
    id: Option<IdPick>,
    params: Params,
    /// Written with newlines and indentation, as a WebSocket peer may.
    pretty: bool,
}

#[derive(Arbitrary, Debug)]
enum IdPick {
    /// Small, so ids repeat.
    Int(u8),
    Big(u64),
    Str(String),
    Fixed(u8),
}

const ODD_IDS: &[&str] = &[
    "0",
    "-1",
    "1.50",
    "1e3",
    "-0",
    "\"\"",
    "\"a\\u0041\"",
    "\"6f1c2b9e-1d7a-4f7e-9c1a-2b3c4d5e6f70\"",
    "\"\\n\"",
    "18446744073709551616",
];

impl IdPick {
    fn json(&self) -> String {
        match self {
            IdPick::Int(n) => n.to_string(),
            IdPick::Big(n) => n.to_string(),
            IdPick::Str(s) => Value::from(s.as_str()).to_string(),
            IdPick::Fixed(i) => ODD_IDS[usize::from(*i) % ODD_IDS.len()].to_string(),
        }
    }
}

const UNKNOWN_METHODS: &[&str] = &["nope", "_lembas/nope", "", "rpc.discover"];

fn method_name(pick: u8) -> &'static str {
    let i = usize::from(pick) % (METHODS.len() + UNKNOWN_METHODS.len());
    METHODS
        .get(i)
        .map_or_else(|| UNKNOWN_METHODS[i - METHODS.len()], |m| m.name)
}

/// Prompt texts; the scripted engine reads directives from them.
const PROMPTS: &[&str] = &[
    "hi",
    "say a\nsleep 50\nsay b",
    "think hmm\ntool build\nsay done",
    "sleep 2000",
    "fail boom",
    "chunks 3 10",
    "",
    "permit run tests\nsay after",
    "ask which one? | a | b",
    "plan do it\nsay planned",
];

const CWDS: &[&str] = &["/tmp", "/tmp/sub/../x", "/etc", "/tmp/missing", "tmp", "/"];

const MODES: &[&str] = &["plan", "manual", "edit", "auto", "yolo"];

#[derive(Arbitrary, Debug)]
enum Params {
    Absent,
    Empty,
    Initialize,
    InitializeLembas {
        protocol: Option<u8>,
        show: bool,
    },
    InitializeTrue,
    SessionNew {
        cwd: u8,
        mode: Option<u8>,
    },
    /// `session/prompt` params for the `session`-th session the device opened.
    Prompt {
        session: u8,
        text: u8,
        turn: Option<u8>,
    },
    PromptAttachment {
        session: u8,
    },
    /// `{"sessionId": ...}` of a session the device opened.
    Session {
        session: u8,
    },
    SetMode {
        session: u8,
        mode: u8,
    },
    Steer {
        session: u8,
    },
    Title {
        session: u8,
        title: String,
    },
    /// The brief's fixed templates, with a session id the device never made.
    Prompt0,
    SessionNew0,
    Array,
    /// Valid JSON of a random shape.
    Json(Json),
    /// Any text spliced in as the params.
    Text(String),
}

fn pick<'s>(list: &[&'s str], i: u8) -> &'s str {
    list[usize::from(i) % list.len()]
}

impl Params {
    /// The params' JSON text; `sessions` are the ids the device handed out so far.
    fn json(&self, sessions: &[String]) -> Option<String> {
        let session = |i: &u8| {
            if sessions.is_empty() {
                "ses_x".to_string()
            } else {
                sessions[usize::from(*i) % sessions.len()].clone()
            }
        };
        let v = match self {
            Params::Absent => return None,
            Params::Empty => serde_json::json!({}),
            Params::Initialize => serde_json::json!({"protocolVersion": 1}),
            Params::InitializeLembas { protocol, show } => {
                let mut lembas = Map::new();
                if let Some(p) = protocol {
                    lembas.insert("protocol".into(), Value::from(*p));
                }
                lembas.insert("show".into(), Value::from(*show));
                serde_json::json!({
                    "protocolVersion": 1,
                    "clientCapabilities": {"_meta": {"lembas": lembas}},
                })
            }
            Params::InitializeTrue => serde_json::json!({
                "protocolVersion": 1,
                "clientCapabilities": {"_meta": {"lembas": true}},
            }),
            Params::SessionNew { cwd, mode } => {
                let mut v = serde_json::json!({"cwd": pick(CWDS, *cwd), "mcpServers": []});
                if let Some(m) = mode {
                    v["_meta"] = serde_json::json!({"mode": pick(MODES, *m)});
                }
                v
            }
            Params::Prompt {
                session: s,
                text,
                turn,
            } => {
                let mut v = serde_json::json!({
                    "sessionId": session(s),
                    "prompt": [{"type": "text", "text": pick(PROMPTS, *text)}],
                });
                if let Some(t) = turn {
                    v["_meta"] = serde_json::json!({"lembas": {"turnId": format!("turn_{t}")}});
                }
                v
            }
            Params::PromptAttachment { session: s } => serde_json::json!({
                "sessionId": session(s),
                "prompt": [
                    {"type": "text", "text": "see"},
                    {"type": "image", "mimeType": "image/png", "data": "aGk="},
                    {"type": "resource", "resource": {"uri": "file:///tmp/a.txt", "text": "x"}},
                    {"type": "resource_link", "uri": "file:///tmp/b.txt", "name": "b.txt"},
                ],
            }),
            Params::Session { session: s } => serde_json::json!({"sessionId": session(s)}),
            Params::SetMode { session: s, mode } => {
                serde_json::json!({"sessionId": session(s), "modeId": pick(MODES, *mode)})
            }
            Params::Steer { session: s } => {
                serde_json::json!({"sessionId": session(s), "text": "go on"})
            }
            Params::Title { session: s, title } => {
                serde_json::json!({"sessionId": session(s), "title": title})
            }
            Params::Prompt0 => serde_json::json!({
                "sessionId": "ses_x",
                "prompt": [{"type": "text", "text": "hi"}],
            }),
            Params::SessionNew0 => serde_json::json!({"cwd": "/tmp"}),
            Params::Array => serde_json::json!([]),
            Params::Json(j) => j.0.clone(),
            Params::Text(t) => return Some(t.clone()),
        };
        Some(v.to_string())
    }
}

/// A JSON value of bounded depth (deep enough to cross [`SMALL_LIMITS`]).
#[derive(Debug)]
struct Json(Value);

const KEYS: &[&str] = &[
    "sessionId",
    "cwd",
    "prompt",
    "protocolVersion",
    "clientCapabilities",
    "_meta",
    "lembas",
    "modeId",
    "type",
    "text",
    "mcpServers",
];

fn arb_json(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
    let kinds = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Value::from(u.arbitrary::<f64>()?),
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(arb_json(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=4)?;
            let mut map = Map::new();
            for _ in 0..n {
                let key = if u.arbitrary()? {
                    KEYS[u.choose_index(KEYS.len())?].to_string()
                } else {
                    u.arbitrary()?
                };
                map.insert(key, arb_json(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

impl<'a> Arbitrary<'a> for Json {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        arb_json(u, 12).map(Json)
    }
}

impl Rpc {
    fn bytes(&self, sessions: &[String]) -> Vec<u8> {
        let mut s = String::from(r#"{"jsonrpc":"2.0""#);
        if let Some(id) = &self.id {
            s.push_str(",\"id\":");
            s.push_str(&id.json());
        }
        s.push_str(",\"method\":");
        s.push_str(&Value::from(method_name(self.method)).to_string());
        if let Some(params) = self.params.json(sessions) {
            s.push_str(",\"params\":");
            s.push_str(&params);
        }
        s.push('}');
        if self.pretty {
            s = s.replace(",\"", ",\n  \"");
        }
        s.into_bytes()
    }
}

impl Frame {
    fn bytes(&self, sessions: &[String]) -> Vec<u8> {
        match self {
            Frame::Raw(b) => b.clone(),
            Frame::Rpc(r) => r.bytes(sessions),
            Frame::Response { id, outcome } => {
                let tail = match outcome {
                    Outcome::Result => r#""result":{}"#.to_string(),
                    Outcome::Null => r#""result":null"#.to_string(),
                    Outcome::MethodNotFound => {
                        r#""error":{"code":-32601,"message":"unknown method"}"#.to_string()
                    }
                    Outcome::Error(c) => format!(r#""error":{{"code":{c},"message":"no"}}"#),
                    Outcome::Allow => {
                        r#""result":{"outcome":{"outcome":"selected","optionId":"once"}}"#.into()
                    }
                    Outcome::AllowAlways => {
                        r#""result":{"outcome":{"outcome":"selected","optionId":"session"}}"#
                            .into()
                    }
                    Outcome::Deny => r#""result":{"outcome":{"outcome":"selected","optionId":"deny"},"_meta":{"lembas":{"feedback":"no"}}}"#.into(),
                    Outcome::Cancelled => r#""result":{"outcome":{"outcome":"cancelled"}}"#.into(),
                    Outcome::Answered => r#""result":{"outcome":"answered","answers":[{"kind":"custom","text":"x"}]}"#.into(),
                    Outcome::Approve => r#""result":{"outcome":"approve","mode":"edit"}"#.into(),
                    Outcome::Revise => r#""result":{"outcome":"revise","feedback":"more"}"#.into(),
                };
                format!(r#"{{"jsonrpc":"2.0","id":{id},{tail}}}"#).into_bytes()
            }
        }
    }
}

/// Drive a [`Device`] through a sequence of operations read from `data` (at most [`MAX_OPS`]),
/// acting as its shell: links and stdio connections opening and closing (with close codes,
/// 4400 among them), dials failing, time passing and timers firing, persists acknowledged (at
/// once or later) into an in-memory store, paths resolved, turns run on the scripted engine,
/// the process restarting from its store, and frames arriving: mostly well-formed requests and
/// notifications of every method in [`METHODS`] (so each handler is reached as it lands), with
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
    config.models = vec![Model {
        id: "lembas/default".into(),
        instance: true,
    }];
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

/// The shell around the device, and the ledger the checks are made against.
struct Run {
    config: DeviceConfig,
    device: Device,
    engine: ScriptedEngine,
    store: MemStore,
    defer_persist: bool,
    /// Persists written but not yet acknowledged (when deferring).
    held: VecDeque<(u64, Vec<Record>)>,
    last_persist: u64,
    now: Time,
    ops: usize,
    /// Session ids the device handed out (they outlive a restart, as the store does).
    sessions: Vec<String>,
    /// Everything below is per process.
    open: BTreeMap<ConnId, ConnKind>,
    closed: BTreeSet<ConnId>,
    started: bool,
    dialing: bool,
    stopped: bool,
    /// Request ids received, and answers sent, per connection and id text.
    received: BTreeMap<(ConnId, String), u64>,
    answered: BTreeMap<(ConnId, String), u64>,
    /// Connections whose `initialize` succeeded, and how many times it did.
    initialized: BTreeMap<ConnId, u32>,
    hello: BTreeSet<ConnId>,
    /// Connections that have had any frame sent on them.
    spoke: BTreeSet<ConnId>,
    /// `(conn, id)` of each `initialize` received and not yet answered (its answer may wait
    /// behind a held persist).
    init_pending: BTreeSet<(ConnId, String)>,
    /// Terminals whose shell runs: opened, and not exited or hung up.
    terminals: BTreeSet<String>,
    /// Terminals whose shell exited while outputs waited behind a held persist: keystrokes or
    /// a hang-up the device queued before it heard of the exit may still come out.
    exited: BTreeSet<String>,
    /// Connections the device let go of whose `Close` has not left yet (it waits behind a held
    /// persist): the shell still has them, and a frame on one is a misuse the device refuses.
    closing: BTreeMap<ConnId, ConnKind>,
}

/// What one drain saw.
#[derive(Default)]
struct Drained {
    dials: usize,
}

impl Run {
    fn new(config: DeviceConfig, defer_persist: bool) -> Run {
        let device = Device::new(config.clone(), Time::ZERO).expect("the fuzz config is valid");
        Run {
            config,
            device,
            engine: ScriptedEngine::new(),
            store: MemStore::default(),
            defer_persist,
            held: VecDeque::new(),
            last_persist: 0,
            now: Time::ZERO,
            ops: 0,
            sessions: Vec::new(),
            open: BTreeMap::new(),
            closed: BTreeSet::new(),
            started: false,
            dialing: false,
            stopped: false,
            received: BTreeMap::new(),
            answered: BTreeMap::new(),
            initialized: BTreeMap::new(),
            hello: BTreeSet::new(),
            spoke: BTreeSet::new(),
            init_pending: BTreeSet::new(),
            terminals: BTreeSet::new(),
            exited: BTreeSet::new(),
            closing: BTreeMap::new(),
        }
    }

    /// The process died: forget every per-process fact.
    fn forget_process(&mut self) {
        self.held.clear();
        self.last_persist = 0;
        self.engine.forget_all();
        self.open.clear();
        self.closed.clear();
        self.started = false;
        self.dialing = false;
        self.stopped = false;
        self.received.clear();
        self.answered.clear();
        self.initialized.clear();
        self.hello.clear();
        self.spoke.clear();
        self.init_pending.clear();
        self.terminals.clear();
        self.exited.clear();
        self.closing.clear();
    }

    fn pick(&self, k: u8) -> Option<(ConnId, ConnKind)> {
        if self.open.is_empty() {
            return None;
        }
        let i = usize::from(k) % self.open.len();
        self.open.iter().nth(i).map(|(c, k)| (*c, *k))
    }

    fn step(&mut self, op: &Op) {
        self.ops += 1;
        match op {
            Op::OpenLink => self.open_link(),
            Op::OpenStdio => {
                let conn = self
                    .device
                    .handle_open(ConnKind::Stdio, self.now)
                    .expect("stdio opens at any time");
                self.opened(conn, ConnKind::Stdio);
                self.drain();
            }
            Op::Frame { conn, frame } => {
                if let Some((conn, _)) = self.pick(*conn) {
                    let bytes = frame.bytes(&self.sessions);
                    self.feed(conn, &bytes);
                }
            }
            Op::Rpc { conn, rpc } => {
                if let Some((conn, _)) = self.pick(*conn) {
                    let bytes = rpc.bytes(&self.sessions);
                    self.feed(conn, &bytes);
                }
            }
            Op::Close { conn, code } => {
                if let Some((conn, kind)) = self.pick(*conn) {
                    self.close(conn, kind, code.code());
                }
            }
            Op::DialFailed(f) => self.dial_failed(f),
            Op::Advance { ms } => {
                self.now = self.now.plus_ms(u64::from(*ms));
                self.timeout();
            }
            Op::Fire => {
                if let Some(at) = host::poll_timeout(&self.device, &self.engine) {
                    self.now = self.now.max(at);
                }
                self.timeout();
            }
            Op::Stale { ms } => {
                let stale = Time(self.now.0.saturating_sub(u64::from(*ms)));
                self.device.handle_timeout(stale);
                self.drain();
            }
            Op::Ask { conn, method } => {
                let asks: Vec<&'static str> = METHODS
                    .iter()
                    .filter(|m| m.direction == Direction::AgentToClient && m.kind == Kind::Request)
                    .map(|m| m.name)
                    .collect();
                if let (Some((conn, _)), false) = (self.pick(*conn), asks.is_empty()) {
                    let method = asks[usize::from(*method) % asks.len()];
                    let _sent = self
                        .device
                        .test_request(conn, method, serde_json::json!({}));
                    self.drain();
                }
            }
            Op::FrameToUnknown { back } => {
                // A connection that closed, or one never opened.
                let conn = self
                    .closed
                    .iter()
                    .nth(usize::from(*back) % self.closed.len().max(1))
                    .copied()
                    .unwrap_or(ConnId(u64::MAX - u64::from(*back)));
                let r = self.device.handle_frame(conn, b"{}", self.now);
                assert_eq!(
                    r,
                    Err(Misuse::UnknownConnection(conn)),
                    "a frame on a connection that is not open is a misuse"
                );
                self.drain();
            }
            Op::Persisted { all } => {
                let n = if *all { self.held.len() } else { 1 };
                for _ in 0..n {
                    let Some((seq, records)) = self.held.pop_front() else {
                        break;
                    };
                    self.store.apply(&records);
                    self.device.handle_persisted(seq, self.now);
                }
                self.drain();
            }
            Op::Restart => self.restart(),
            Op::Reconfigure(r) => self.reconfigure(r),
            Op::DeleteSession { pick } => self.delete_session(*pick),
            Op::TerminalOutput { pick, bytes } => {
                if let Some(t) = self.pick_terminal(*pick) {
                    self.device.handle_terminal_output(&t, bytes, self.now);
                    self.drain();
                }
            }
            Op::TerminalExit { pick, code } => {
                if let Some(t) = self.pick_terminal(*pick) {
                    self.terminals.remove(&t);
                    if !self.held.is_empty() {
                        self.exited.insert(t.clone());
                    }
                    self.device.handle_terminal_exit(&t, *code, self.now);
                    self.drain();
                }
            }
        }
        self.check_state();
    }

    fn restart(&mut self) {
        self.forget_process();
        let (device, unreadable) =
            Device::restore(self.config.clone(), self.store.entries(), self.now)
                .expect("the fuzz config is valid");
        assert!(
            unreadable.is_empty(),
            "a restart cannot read records the device wrote itself: {unreadable:?}"
        );
        self.device = device;
        self.drain();
    }

    fn opened(&mut self, conn: ConnId, kind: ConnKind) {
        assert!(
            !self.open.contains_key(&conn) && !self.closed.contains(&conn),
            "connection ids are never reused: {conn:?}"
        );
        self.open.insert(conn, kind);
    }

    fn open_link(&mut self) {
        if !self.started {
            self.started = true;
            self.device.start_link(self.now);
            self.drain();
        }
        if self.dialing {
            let conn = self
                .device
                .handle_open(ConnKind::Link, self.now)
                .expect("the device asked for a dial, so a link may open");
            self.dialing = false;
            self.opened(conn, ConnKind::Link);
        } else if self.held.is_empty() {
            // (With persists held, a `Dial` may be waiting behind them.)
            let r = self.device.handle_open(ConnKind::Link, self.now);
            assert_eq!(
                r,
                Err(Misuse::NotDialing),
                "a link opened though no dial was asked for"
            );
        }
        self.drain();
    }

    fn dial_failed(&mut self, f: &Failure) {
        let failure = match f {
            Failure::Transient => DialFailure::Transient,
            Failure::TokenRefused => DialFailure::TokenRefused,
            Failure::Unsupported(s) => DialFailure::Unsupported(s.clone()),
        };
        if !self.dialing && !self.held.is_empty() {
            // A `Dial` may wait behind the held persists: the shell has not dialled yet.
            return;
        }
        let was_dialing = self.dialing;
        self.device.handle_dial_failed(failure, self.now);
        if was_dialing {
            self.dialing = false;
        }
        let d = self.drain();
        if was_dialing && matches!(f, Failure::Transient) {
            assert_eq!(
                d.dials, 0,
                "a transient dial failure is retried after a backoff, not at once"
            );
            // (Other timers share `poll_timeout`, so only its presence is checked here.)
            assert!(
                self.device.poll_timeout().is_some(),
                "a transient dial failure schedules a redial"
            );
        }
        if was_dialing && !matches!(f, Failure::Transient) {
            assert!(
                self.device.link_stopped(),
                "a refused token or an unsupported server stops linking"
            );
        }
    }

    fn close(&mut self, conn: ConnId, kind: ConnKind, code: Option<u16>) {
        self.device
            .handle_closed(conn, code, self.now)
            .expect("the connection is open");
        self.open.remove(&conn);
        self.closed.insert(conn);
        let d = self.drain();
        if kind == ConnKind::Link {
            if code == Some(crate::device::CLOSE_PROTOCOL) {
                assert!(
                    self.device.link_stopped(),
                    "a link closed with 4400 stops linking"
                );
            } else if !self.device.link_stopped() {
                assert!(
                    d.dials > 0 || self.device.poll_timeout().is_some(),
                    "a dropped link is redialled (now or at a deadline)"
                );
            }
        }
    }

    fn timeout(&mut self) {
        host::handle_timeout(&mut self.device, &mut self.engine, self.now);
        self.drain();
        let at = self.device.poll_timeout();
        assert!(
            at.is_none_or(|at| at > self.now),
            "after handle_timeout({:?}) the next deadline {at:?} is not in the future: a shell \
             would spin",
            self.now
        );
    }

    fn feed(&mut self, conn: ConnId, frame: &[u8]) {
        let limits = self.device.config().frames;
        let id = match jsonrpc::decode(frame, &limits) {
            Ok(Message::Request(r)) => {
                let id = r.id.as_json().to_string();
                if r.method == "initialize" {
                    self.init_pending.insert((conn, id.clone()));
                }
                Some(id)
            }
            Err(e) => e.id.map(|id| id.as_json().to_string()),
            Ok(_) => None,
        };
        if let Some(id) = id {
            *self.received.entry((conn, id)).or_default() += 1;
        }
        self.device
            .handle_frame(conn, frame, self.now)
            .expect("the connection is open");
        self.drain();
    }

    /// Drain the device's outputs and the engine's events until both are quiet.
    fn drain(&mut self) -> Drained {
        let mut d = Drained::default();
        let mut n = 0usize;
        loop {
            n += 1;
            assert!(
                n <= MAX_OUTPUTS_PER_OP,
                "more than {MAX_OUTPUTS_PER_OP} outputs after one input (op {}): livelock",
                self.ops
            );
            // Every reader keeps up here: nothing is paused.
            match host::poll_output(&mut self.device, &mut self.engine, self.now, |_| false) {
                Some(out) => self.output(out, &mut d),
                None => return d,
            }
        }
    }

    fn output(&mut self, out: ShellOutput, d: &mut Drained) {
        match out {
            ShellOutput::Send { conn, frame } => self.sent(conn, &frame),
            ShellOutput::Close { conn, .. } => {
                assert!(
                    !self.closed.contains(&conn),
                    "the device closed {conn:?} after it was closed"
                );
                assert!(
                    self.open.remove(&conn).is_some() || self.closing.remove(&conn).is_some(),
                    "the device closed {conn:?}, which never opened"
                );
                // The device has let go of a connection it closes.
                self.closed.insert(conn);
            }
            // Pings go unanswered here (a silent network): the link is given up in time. One
            // queued before the device closed the link leaves ahead of its close.
            ShellOutput::Ping { conn } => assert_eq!(
                self.open.get(&conn).or(self.closing.get(&conn)),
                Some(&ConnKind::Link),
                "a ping was asked for on {conn:?}, which is not an open link"
            ),
            ShellOutput::Effect(Effect::Dial) => {
                d.dials += 1;
                assert!(!self.stopped, "a dial was asked for after Stop");
                assert!(
                    !self.dialing,
                    "a second dial was asked for before the first ended"
                );
                assert!(
                    !self.open.values().any(|k| *k == ConnKind::Link),
                    "a dial was asked for while a link is up"
                );
                self.dialing = true;
            }
            ShellOutput::Effect(Effect::Stop { .. }) => {
                self.stopped = true;
                self.dialing = false;
            }
            ShellOutput::Effect(Effect::Persist { seq, records }) => {
                assert!(
                    seq > self.last_persist,
                    "persists are numbered upwards: {seq} after {}",
                    self.last_persist
                );
                self.last_persist = seq;
                if self.defer_persist {
                    self.held.push_back((seq, records));
                } else {
                    self.store.apply(&records);
                    self.device.handle_persisted(seq, self.now);
                }
            }
            ShellOutput::Effect(Effect::ResolvePath { request, path }) => {
                let resolved = if path.contains("missing") {
                    Err("no such directory".to_string())
                } else {
                    Ok(path)
                };
                self.device
                    .handle_path_resolved(request, resolved, self.now);
            }
            // Asked for only once every persist before it is acknowledged: the store is current.
            ShellOutput::Effect(Effect::LoadSession {
                request,
                session_id,
            }) => {
                let entries = self.store.session_entries(&session_id);
                let unreadable = self
                    .device
                    .handle_session_loaded(request, entries, self.now);
                assert!(
                    unreadable.is_empty(),
                    "a session read back holds records the device could not read: {unreadable:?}"
                );
            }
            // A disk that fails one write in five: a prompt refused for its attachment must
            // leave the device as consistent as one that ran.
            ShellOutput::Effect(Effect::WriteAttachment { request, .. }) => {
                let written = if request % 5 == 4 {
                    Err("no space left on device".to_string())
                } else {
                    Ok(())
                };
                self.device
                    .handle_attachment_written(request, written, self.now);
            }
            // A shell that echoes what it is sent and ends when hung up.
            ShellOutput::Effect(Effect::OpenTerminal { terminal_id, .. }) => {
                let info = crate::device::ShellInfo {
                    shell: "bash".into(),
                    integration: true,
                };
                self.terminals.insert(terminal_id.clone());
                self.device
                    .handle_terminal_opened(&terminal_id, Ok(info), self.now);
            }
            ShellOutput::Effect(Effect::TerminalInput { terminal_id, bytes }) => {
                assert!(
                    self.terminals.contains(&terminal_id) || self.exited.contains(&terminal_id),
                    "keystrokes for terminal {terminal_id}, whose shell is not running"
                );
                self.device
                    .handle_terminal_output(&terminal_id, &bytes, self.now);
            }
            ShellOutput::Effect(Effect::CloseTerminal { terminal_id }) => {
                assert!(
                    self.terminals.remove(&terminal_id) || self.exited.remove(&terminal_id),
                    "terminal {terminal_id} hung up, whose shell is not running"
                );
                self.device
                    .handle_terminal_exit(&terminal_id, 129, self.now);
            }
            // A resize changes nothing a fake shell shows; nothing comes back for a removal.
            ShellOutput::Effect(
                Effect::ResizeTerminal { .. } | Effect::RemoveAttachments { .. },
            ) => {}
        }
    }

    fn sent(&mut self, conn: ConnId, frame: &[u8]) {
        assert!(
            !self.closed.contains(&conn),
            "a frame was sent on {conn:?} after it closed: {}",
            lossy(frame)
        );
        let kind = *self
            .open
            .get(&conn)
            .or(self.closing.get(&conn))
            .unwrap_or_else(|| {
                panic!(
                    "a frame was sent on {conn:?}, which never opened: {}",
                    lossy(frame)
                )
            });
        let first = self.spoke.insert(conn);
        let msg = check_out_frame(frame);
        let method = match &msg {
            Message::Request(r) => Some(r.method.to_string()),
            Message::Notification(n) => Some(n.method.to_string()),
            Message::Response(_) => None,
        };
        if kind == ConnKind::Link && first {
            assert_eq!(
                method.as_deref(),
                Some("_lembas/hello"),
                "a link's first frame is `_lembas/hello`: {}",
                lossy(frame)
            );
        }
        match msg {
            Message::Response(r) => {
                let Some(id) = r.id else { return };
                let key = (conn, id.as_json().to_string());
                let answers = self.answered.entry(key.clone()).or_default();
                *answers += 1;
                let received = self.received.get(&key).copied().unwrap_or(0);
                assert!(
                    *answers <= received,
                    "id {} on {conn:?} answered {} times but received {received} times: {}",
                    key.1,
                    *answers,
                    lossy(frame)
                );
                let Ok(result) = r.outcome else { return };
                if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(result.get()) {
                    if let Some(Value::String(s)) = o.get("sessionId") {
                        if !self.sessions.contains(s) {
                            self.sessions.push(s.clone());
                        }
                    }
                    // A peer may reuse an id while a request is in flight: only the answer that
                    // is an `initialize` result takes the pending `initialize` of that id (an
                    // earlier error to another request with the same id must not).
                    let is_init_answer =
                        o.contains_key("agentCapabilities") && self.init_pending.remove(&key);
                    if is_init_answer {
                        let n = self.initialized.entry(conn).or_default();
                        *n += 1;
                        assert!(
                            *n <= 1,
                            "`initialize` succeeded twice on {conn:?}: {}",
                            lossy(frame)
                        );
                    }
                }
            }
            _ if method.as_deref() == Some("_lembas/hello") => {
                assert_eq!(
                    kind,
                    ConnKind::Link,
                    "`_lembas/hello` goes on the link only"
                );
                assert!(
                    self.hello.insert(conn),
                    "`_lembas/hello` sent twice on {conn:?}"
                );
            }
            _ => {
                assert!(
                    self.initialized.contains_key(&conn),
                    "{} sent on {conn:?} before its `initialize` was answered: {}",
                    method.as_deref().unwrap_or("?"),
                    lossy(frame)
                );
            }
        }
    }

    fn reconfigure(&mut self, r: &Reconfig) {
        let remote = r.remote(self.device.config().remote.clone());
        let same = remote == self.device.config().remote;
        match self.device.reconfigure(remote.clone(), self.now) {
            Ok(changed) => {
                assert!(
                    !(same && changed),
                    "an unchanged `remote:` changed the device"
                );
                assert_eq!(
                    self.device.config().remote,
                    remote,
                    "a valid `remote:` is the device's from the reload on"
                );
                // The next process starts with what the person saved.
                self.config.remote = remote;
            }
            Err(e) => assert_ne!(
                self.device.config().remote,
                remote,
                "a refused `remote:` ({}) was taken anyway",
                e.0
            ),
        }
        self.drain();
    }

    fn delete_session(&mut self, pick: u8) {
        let id = match self
            .sessions
            .get(usize::from(pick) % self.sessions.len().max(1))
        {
            Some(id) if pick < 200 => id.clone(),
            _ => format!("stranger-{pick}"),
        };
        let deleted = self.device.delete_session(&id, self.now);
        self.drain();
        if deleted {
            assert!(
                !self.device.delete_session(&id, self.now),
                "session {id} was deleted twice"
            );
            self.drain();
        }
    }

    /// A terminal whose shell is running (opened and neither exited nor hung up).
    fn pick_terminal(&self, pick: u8) -> Option<String> {
        let n = self.terminals.len();
        (n > 0).then(|| {
            self.terminals
                .iter()
                .nth(usize::from(pick) % n)
                .cloned()
                .expect("picked within the set")
        })
    }

    fn check_state(&mut self) {
        if self.held.is_empty() {
            // Nothing waits in the device's queue now: what it asks from here on, it asked
            // knowing of every exit.
            self.exited.clear();
        }
        let theirs: BTreeMap<ConnId, ConnKind> = self.device.connections().collect();
        // A connection the device closed on its own account behind a held persist: it has let
        // go of it, and the close leaves with that persist.
        let let_go: Vec<(ConnId, ConnKind)> = self
            .open
            .iter()
            .filter(|(c, _)| !theirs.contains_key(c))
            .map(|(c, k)| (*c, *k))
            .collect();
        for (conn, kind) in let_go {
            assert!(
                !self.held.is_empty(),
                "the device let go of {conn:?} without closing it"
            );
            self.open.remove(&conn);
            self.closing.insert(conn, kind);
            let r = self.device.handle_frame(conn, b"{}", self.now);
            assert_eq!(
                r,
                Err(Misuse::UnknownConnection(conn)),
                "a frame on a connection the device let go of is a misuse"
            );
        }
        assert_eq!(
            theirs, self.open,
            "the device's connections are the ones opened and not closed"
        );
        if self.held.is_empty() {
            assert_eq!(
                self.device.link_stopped(),
                self.stopped,
                "the device stopped linking exactly when it said Stop"
            );
        }
    }
}
