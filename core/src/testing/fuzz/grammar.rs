//! The fuzzer's grammar: what [`super::device`] reads from its input, a setup and the
//! operations a shell could perform on a device (frames from templates of every method, time,
//! persists, restarts, config reloads, ...).

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Map, Value};

use crate::config::{Mode, Remote};
use crate::methods::METHODS;

/// How the device under test is configured, read from the input's first bytes.
#[derive(Arbitrary, Debug)]
pub(crate) struct Setup {
    pub(crate) seed: u64,
    /// Decode under [`SMALL_LIMITS`] rather than the defaults.
    pub(crate) small_limits: bool,
    /// Remote work on, over the trusted root `/tmp`.
    pub(crate) remote: bool,
    /// Hold `Effect::Persist` until an `Op::Persisted` rather than acknowledging it at once.
    pub(crate) defer_persist: bool,
}

/// One input the shell could give the device.
#[derive(Arbitrary, Debug)]
pub(crate) enum Op {
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
    /// A local process connects to the service's hub socket (an editor relayed by
    /// `serve --stdio`, `lembas sessions`).
    OpenHub,
}

/// A `remote:` block as a reload could give it, over a few roots that nest.
#[derive(Arbitrary, Debug)]
pub(crate) struct Reconfig {
    pub(crate) enabled: bool,
    /// Which of [`RELOAD_ROOTS`] are roots, and which trusted (bit i: the i-th).
    pub(crate) roots: u8,
    pub(crate) trusted: u8,
    pub(crate) max_mode: u8,
    pub(crate) require_trust: bool,
    pub(crate) terminal: bool,
    pub(crate) approval_timeout_ms: u16,
}

pub(crate) const RELOAD_ROOTS: &[&str] = &["/tmp", "/tmp/sub", "/etc", "/"];

impl Reconfig {
    pub(crate) fn remote(&self, mut remote: Remote) -> Remote {
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
pub(crate) enum CloseCode {
    None,
    Normal,
    GoingAway,
    /// 4400: the server refuses link protocol 3.
    Protocol,
    Other(u16),
}

impl CloseCode {
    pub(crate) fn code(&self) -> Option<u16> {
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
pub(crate) enum Failure {
    Transient,
    TokenRefused,
    Unsupported(String),
}

/// A frame for the device: mostly well-formed JSON-RPC.
#[derive(Debug)]
pub(crate) enum Frame {
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
pub(crate) enum Outcome {
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
pub(crate) struct Rpc {
    pub(crate) method: u8,
    pub(crate) id: Option<IdPick>,
    pub(crate) params: Params,
    /// Written with newlines and indentation, as a WebSocket peer may.
    pub(crate) pretty: bool,
}

#[derive(Arbitrary, Debug)]
pub(crate) enum IdPick {
    /// Small, so ids repeat.
    Int(u8),
    Big(u64),
    Str(String),
    Fixed(u8),
}

pub(crate) const ODD_IDS: &[&str] = &[
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
    pub(crate) fn json(&self) -> String {
        match self {
            IdPick::Int(n) => n.to_string(),
            IdPick::Big(n) => n.to_string(),
            IdPick::Str(s) => Value::from(s.as_str()).to_string(),
            IdPick::Fixed(i) => ODD_IDS[usize::from(*i) % ODD_IDS.len()].to_string(),
        }
    }
}

pub(crate) const UNKNOWN_METHODS: &[&str] = &["nope", "_lembas/nope", "", "rpc.discover"];

pub(crate) fn method_name(pick: u8) -> &'static str {
    let i = usize::from(pick) % (METHODS.len() + UNKNOWN_METHODS.len());
    METHODS
        .get(i)
        .map_or_else(|| UNKNOWN_METHODS[i - METHODS.len()], |m| m.name)
}

/// Prompt texts; the scripted engine reads directives from them.
pub(crate) const PROMPTS: &[&str] = &[
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
    // `@path` mentions: a file, a range, a listing, escapes, and paths outside or protected.
    "say @a.md @a.md#2-3 @src/ @my\\ notes.md @a\\#b.md @../x/secret @/etc/passwd @.git/config @a.md#0",
];

pub(crate) const CWDS: &[&str] = &["/tmp", "/tmp/sub/../x", "/etc", "/tmp/missing", "tmp", "/"];

/// `_lembas/directories` paths: the session directories' and a few of the chooser's own.
pub(crate) const DIRECTORY_PATHS: &[&str] = &[
    "/tmp",
    "/tmp/sub/../x",
    "/etc",
    "/tmp/missing",
    "tmp",
    "/",
    "",
    "/tmp/../etc",
    "/tmp/é 日本",
];

pub(crate) const MODES: &[&str] = &["plan", "manual", "edit", "auto", "yolo"];

#[derive(Arbitrary, Debug)]
pub(crate) enum Params {
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
    /// `_lembas/session/events` params: a small `since` (often inside the log, sometimes past
    /// it), and a `limit` that may be 0 or over the bound.
    Events {
        session: u8,
        since: u8,
        limit: Option<u8>,
    },
    /// `_lembas/directories` params: a path inside, through `..`, outside, relative, empty.
    Directories {
        path: u8,
    },
    /// `_lembas/files/search` params: a session's or a `cwd`'s (the chooser's paths), a query,
    /// and a `limit` that may be 0 or over the bound.
    FilesSearch {
        session: Option<u8>,
        path: u8,
        query: u8,
        limit: Option<u8>,
    },
    /// The brief's fixed templates, with a session id the device never made.
    Prompt0,
    SessionNew0,
    Array,
    /// Valid JSON of a random shape.
    Json(Json),
    /// Any text spliced in as the params.
    Text(String),
    /// `session/load` and `session/resume` params: a session the device opened and a cwd.
    Load {
        session: u8,
        cwd: u8,
    },
    /// `session/list` params: a directory filter, and a cursor (a made-up one, or none).
    List {
        cwd: Option<u8>,
        cursor: Option<String>,
    },
    /// `_lembas/commands` params for a composer with a directory and no session yet: a `cwd`
    /// of the chooser's paths (inside, through `..`, outside, relative, empty), now and then
    /// with a `sessionId` too.
    Commands {
        path: u8,
        session: Option<u8>,
    },
}

pub(crate) fn pick<'s>(list: &[&'s str], i: u8) -> &'s str {
    list[usize::from(i) % list.len()]
}

impl Params {
    /// The params' JSON text; `sessions` are the ids the device handed out so far.
    pub(crate) fn json(&self, sessions: &[String]) -> Option<String> {
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
            Params::Events {
                session: s,
                since,
                limit,
            } => {
                let mut v = serde_json::json!({"sessionId": session(s), "since": since});
                if let Some(l) = limit {
                    // 0, small, and over `sessions.max_events_page`'s default.
                    v["limit"] = Value::from(u32::from(*l) * 64);
                }
                v
            }
            Params::Directories { path } => {
                serde_json::json!({ "path": pick(DIRECTORY_PATHS, *path) })
            }
            Params::FilesSearch {
                session: s,
                path,
                query,
                limit,
            } => {
                let query = pick(&["", "a", "src/lib", "../x", "é", "\u{0}"], *query);
                let mut v = match s {
                    Some(s) => serde_json::json!({ "sessionId": session(s), "query": query }),
                    None => {
                        serde_json::json!({ "cwd": pick(DIRECTORY_PATHS, *path), "query": query })
                    }
                };
                if let Some(l) = limit {
                    v["limit"] = Value::from(u32::from(*l) % 64);
                }
                v
            }
            Params::Prompt0 => serde_json::json!({
                "sessionId": "ses_x",
                "prompt": [{"type": "text", "text": "hi"}],
            }),
            Params::SessionNew0 => serde_json::json!({"cwd": "/tmp"}),
            Params::Load { session: s, cwd } => {
                serde_json::json!({"sessionId": session(s), "cwd": pick(CWDS, *cwd), "mcpServers": []})
            }
            Params::List { cwd, cursor } => {
                let mut v = serde_json::json!({});
                if let Some(c) = cwd {
                    v["cwd"] = Value::from(pick(CWDS, *c));
                }
                if let Some(c) = cursor {
                    v["cursor"] = Value::from(c.as_str());
                }
                v
            }
            Params::Commands { path, session: s } => {
                let mut v = serde_json::json!({ "cwd": pick(DIRECTORY_PATHS, *path) });
                if let Some(s) = s {
                    v["sessionId"] = Value::from(session(s));
                }
                v
            }
            Params::Array => serde_json::json!([]),
            Params::Json(j) => j.0.clone(),
            Params::Text(t) => return Some(t.clone()),
        };
        Some(v.to_string())
    }
}

/// A JSON value of bounded depth (deep enough to cross [`SMALL_LIMITS`]).
#[derive(Debug)]
pub(crate) struct Json(Value);

pub(crate) const KEYS: &[&str] = &[
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

pub(crate) fn arb_json(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
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
    pub(crate) fn bytes(&self, sessions: &[String]) -> Vec<u8> {
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
    pub(crate) fn bytes(&self, sessions: &[String]) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The grammar reaches `_lembas/commands` with a `cwd` (a composer that has a directory and
    /// no session), not with a `sessionId` alone: some input writes it with exactly the shape the
    /// method takes.
    #[test]
    fn the_grammar_writes_commands_with_a_cwd() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut data = [0u8; 48];
        let mut shapes = std::collections::BTreeSet::new();
        for _ in 0..200_000 {
            for b in &mut data {
                // xorshift: fixed, so the search is the same every run.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = state as u8;
            }
            let Ok(rpc) = Rpc::arbitrary(&mut Unstructured::new(&data)) else {
                continue;
            };
            if method_name(rpc.method) != "_lembas/commands" {
                continue;
            }
            let Some(params) = rpc.params.json(&["ses_a".into()]) else {
                continue;
            };
            let Ok(Value::Object(p)) = serde_json::from_str::<Value>(&params) else {
                continue;
            };
            let keys: Vec<&str> = p.keys().map(String::as_str).collect();
            shapes.insert(keys.join(","));
            if keys == ["cwd"] || keys == ["cwd", "sessionId"] {
                shapes.insert(format!("found {params}"));
            }
        }
        assert!(
            shapes
                .iter()
                .any(|s| s.starts_with("found") && s.contains("\"cwd\"")),
            "no `_lembas/commands` with a cwd among the shapes {shapes:?}"
        );
        assert!(
            shapes.contains("cwd") && shapes.contains("cwd,sessionId"),
            "{shapes:?}"
        );
    }
}
