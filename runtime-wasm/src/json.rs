//! The plain-object shapes that cross the JS boundary, as JSON: configs in, outputs out, engine
//! events and card decisions both ways, store records both ways. Pure Rust (no `wasm_bindgen`),
//! so the native conformance test checks exactly the objects the JS classes and the drivers hand
//! out. The TypeScript declarations of every shape here are in `bindings/lembas.d.ts`; keep the
//! two in step.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use lembas_core::client::{ClientEvent, ClientOutput};
use lembas_core::config::Mode;
use lembas_core::device::{ConnKind, DialFailure, Effect, Output, TurnPhase, Unreadable};
use lembas_core::engine::{
    Ask, Attachment, Card, Context, Decision, EngineEvent, PermissionDecision, PlanDecision,
    Question, QuestionAnswer, QuestionDecision, StopReason, ToolStatus, TurnStart,
};
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::store::{Entry, Record, Table};
use lembas_core::{ClientConfig, DeviceConfig};

use crate::tagged::{TagName, Tagged};

/// A shape that did not fit: the sentence says which and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

fn from_value<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T, ShapeError> {
    serde_json::from_value(v).map_err(|e| ShapeError(format!("{what}: {e}")))
}

// ---------------------------------------------------------------------------------------------
// Configs

/// A device config from its JS object (`null` or `{}`: the core's defaults): the core type's own
/// serde shape. Unknown members are refused, so a misspelt limit is an error rather than a
/// silent default.
pub fn device_config(v: Value) -> Result<DeviceConfig, ShapeError> {
    let mut c: DeviceConfig = options("device config", v)?;
    // A JS socket (a browser's WebSocket, npm `ws` through `addEventListener`) can neither send
    // a ping nor report a pong, so the core's heartbeat would give up every quiet link: off
    // here; the socket's own `close`/`error` events are the only way a link is seen to die.
    c.liveness = None;
    Ok(c)
}

/// A client config from its JS object (`null` or `{}`: the core's defaults).
pub fn client_config(v: Value) -> Result<ClientConfig, ShapeError> {
    let mut c: ClientConfig = options("client config", v)?;
    // As for the device: a JS socket cannot ping or report pongs.
    c.liveness = None;
    Ok(c)
}

/// An options object read as text, so the error names the member at fault by its path
/// (`` `remote.maxmode` ``) as well as what was wrong.
fn options<T: serde::de::DeserializeOwned + Default>(
    what: &str,
    v: Value,
) -> Result<T, ShapeError> {
    if v.is_null() {
        return Ok(T::default());
    }
    lembas_core::jsonrpc::parse_at_path(&v.to_string())
        .map_err(|why| ShapeError(format!("{what}: {why}")))
}

// ---------------------------------------------------------------------------------------------
// Small enums

pub fn conn_kind(s: &str) -> Result<ConnKind, ShapeError> {
    match s {
        "link" => Ok(ConnKind::Link),
        "stdio" => Ok(ConnKind::Stdio),
        "terminal" => Ok(ConnKind::Terminal),
        other => Err(ShapeError(format!(
            "connection kind `{other}` is not one of link, stdio, terminal"
        ))),
    }
}

pub fn conn_kind_name(k: ConnKind) -> &'static str {
    match k {
        ConnKind::Link => "link",
        ConnKind::Stdio => "stdio",
        ConnKind::Terminal => "terminal",
        _ => "unknown",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DialFailureJs {
    Transient {},
    TokenRefused {},
    Unsupported { message: String },
}

impl TagName for DialFailureJs {
    const TAG: &'static str = "type";
}

pub fn dial_failure(v: Value) -> Result<DialFailure, ShapeError> {
    Ok(
        match from_value::<Tagged<DialFailureJs>>("dial failure", v)?.0 {
            DialFailureJs::Transient {} => DialFailure::Transient,
            DialFailureJs::TokenRefused {} => DialFailure::TokenRefused,
            DialFailureJs::Unsupported { message } => DialFailure::Unsupported(message),
        },
    )
}

pub fn table_name(t: Table) -> &'static str {
    t.name()
}

pub fn table(s: &str) -> Result<Table, ShapeError> {
    Table::ALL
        .into_iter()
        .find(|t| t.name() == s)
        .ok_or_else(|| ShapeError(format!("store table `{s}` is not known")))
}

/// A request id as the core keeps it, from its JS value (a number or a string).
pub fn id(v: &Value) -> Result<Id, ShapeError> {
    match v {
        Value::String(s) => Ok(Id::string(s)),
        Value::Number(n) => n
            .as_u64()
            .map(Id::number)
            .ok_or_else(|| ShapeError(format!("request id {n} is not a whole number ≥ 0"))),
        other => Err(ShapeError(format!(
            "request id {other} is neither a number nor a string"
        ))),
    }
}

pub fn id_value(id: &Id) -> Value {
    serde_json::from_str(id.as_json()).unwrap_or(Value::Null)
}

/// The answer to a `resolve_path` effect: `{ path }` (resolved, symlinks followed) or
/// `{ error }` (why it could not be).
pub fn path_resolution(v: Value) -> Result<Result<String, String>, ShapeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Js {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        error: Option<String>,
    }
    match from_value::<Js>("path resolution", v)? {
        Js {
            path: Some(p),
            error: None,
        } => Ok(Ok(p)),
        Js {
            path: None,
            error: Some(e),
        } => Ok(Err(e)),
        _ => Err(ShapeError(
            "path resolution: give exactly one of `path` or `error`".into(),
        )),
    }
}

/// `{ shell, integration }` (the shell started) or `{ error }`.
pub fn terminal_start(
    v: Value,
) -> Result<Result<lembas_core::device::ShellInfo, String>, ShapeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Js {
        #[serde(default)]
        shell: Option<String>,
        #[serde(default)]
        integration: Option<bool>,
        #[serde(default)]
        error: Option<String>,
    }
    match from_value::<Js>("terminal start", v)? {
        Js {
            shell: Some(shell),
            integration: Some(integration),
            error: None,
        } => Ok(Ok(lembas_core::device::ShellInfo { shell, integration })),
        Js {
            shell: None,
            integration: None,
            error: Some(e),
        } => Ok(Err(e)),
        _ => Err(ShapeError(
            "terminal start: give `shell` and `integration`, or `error` alone".into(),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Store records

pub fn record(r: &Record) -> Value {
    match r {
        Record::Put { table, key, value } => {
            json!({ "op": "put", "table": table_name(*table), "key": key, "value": value })
        }
        Record::Delete { table, key } => {
            json!({ "op": "delete", "table": table_name(*table), "key": key })
        }
        Record::DeletePrefix { table, prefix } => {
            json!({ "op": "delete_prefix", "table": table_name(*table), "prefix": prefix })
        }
        other => json!({ "op": "unknown", "debug": format!("{other:?}") }),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum RecordJs {
    Put {
        table: String,
        key: String,
        value: String,
    },
    Delete {
        table: String,
        key: String,
    },
    DeletePrefix {
        table: String,
        prefix: String,
    },
}

impl TagName for RecordJs {
    const TAG: &'static str = "op";
}

pub fn records(v: Value) -> Result<Vec<Record>, ShapeError> {
    from_value::<Vec<Tagged<RecordJs>>>("records", v)?
        .into_iter()
        .map(|Tagged(r)| {
            Ok(match r {
                RecordJs::Put {
                    table: t,
                    key,
                    value,
                } => Record::Put {
                    table: table(&t)?,
                    key,
                    value,
                },
                RecordJs::Delete { table: t, key } => Record::Delete {
                    table: table(&t)?,
                    key,
                },
                RecordJs::DeletePrefix { table: t, prefix } => Record::DeletePrefix {
                    table: table(&t)?,
                    prefix,
                },
            })
        })
        .collect()
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryJs {
    table: String,
    key: String,
    value: String,
}

pub fn entry(e: &Entry) -> Value {
    json!({ "table": table_name(e.table), "key": e.key, "value": e.value })
}

pub fn entries(v: Value) -> Result<Vec<Entry>, ShapeError> {
    from_value::<Vec<EntryJs>>("store entries", v)?
        .into_iter()
        .map(|e| {
            Ok(Entry {
                table: table(&e.table)?,
                key: e.key,
                value: e.value,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Turns, engine events, cards and decisions

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TurnStartJs {
    session_id: String,
    turn_id: String,
    text: String,
    attachments: Vec<Attachment>,
    context: Context,
    mode: Mode,
    model: Option<String>,
    effort: Option<String>,
    cwd: String,
}

pub fn turn_start(t: &TurnStart) -> Value {
    json!({
        "sessionId": t.session_id,
        "turnId": t.turn_id,
        "text": t.text,
        "attachments": t.attachments,
        "context": t.context,
        "mode": t.mode,
        "model": t.model,
        "effort": t.effort,
        "cwd": t.cwd,
    })
}

pub fn turn_start_from(v: Value) -> Result<TurnStart, ShapeError> {
    let t: TurnStartJs = from_value("turn", v)?;
    Ok(TurnStart {
        session_id: t.session_id,
        turn_id: t.turn_id,
        text: t.text,
        attachments: t.attachments,
        context: t.context,
        mode: t.mode,
        model: t.model,
        effort: t.effort,
        cwd: t.cwd,
    })
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum AskJs {
    #[serde(rename_all = "camelCase")]
    Permission {
        title: String,
        kind: String,
        raw_input: Value,
        always_offered: bool,
        reason: String,
        #[serde(default)]
        purpose: Option<String>,
    },
    Question {
        #[serde(default)]
        why: Option<String>,
        questions: Vec<Question>,
    },
    Plan {
        path: String,
        text: String,
        #[serde(default)]
        plan: Option<Value>,
    },
}

impl TagName for AskJs {
    const TAG: &'static str = "type";
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum EngineEventJs {
    Text {
        text: String,
    },
    Thought {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCall {
        id: String,
        title: String,
        kind: String,
        raw_input: Value,
    },
    ToolCallUpdate {
        id: String,
        status: ToolStatus,
        #[serde(default)]
        output: Option<String>,
    },
    Steered {
        ids: Vec<u64>,
    },
    ModeChanged {
        mode: Mode,
    },
    Plan {
        plan: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    Ask {
        tool_call_id: String,
        ask: Tagged<AskJs>,
    },
    #[serde(rename_all = "camelCase")]
    Done {
        stop_reason: StopReason,
    },
    Failed {
        message: String,
    },
}

impl TagName for EngineEventJs {
    const TAG: &'static str = "type";
}

pub fn engine_event(e: &EngineEvent) -> Value {
    let js = match e.clone() {
        EngineEvent::Text(text) => EngineEventJs::Text { text },
        EngineEvent::Thought(text) => EngineEventJs::Thought { text },
        EngineEvent::ToolCall {
            id,
            title,
            kind,
            raw_input,
        } => EngineEventJs::ToolCall {
            id,
            title,
            kind,
            raw_input,
        },
        EngineEvent::ToolCallUpdate { id, status, output } => {
            EngineEventJs::ToolCallUpdate { id, status, output }
        }
        EngineEvent::Steered { ids } => EngineEventJs::Steered { ids },
        EngineEvent::ModeChanged(mode) => EngineEventJs::ModeChanged { mode },
        EngineEvent::Plan(plan) => EngineEventJs::Plan { plan },
        EngineEvent::Ask(Card { tool_call_id, ask }) => EngineEventJs::Ask {
            tool_call_id,
            ask: Tagged(match ask {
                Ask::Permission {
                    title,
                    kind,
                    raw_input,
                    always_offered,
                    reason,
                    purpose,
                } => AskJs::Permission {
                    title,
                    kind,
                    raw_input,
                    always_offered,
                    reason,
                    purpose,
                },
                Ask::Question { why, questions } => AskJs::Question { why, questions },
                Ask::Plan { path, text, plan } => AskJs::Plan { path, text, plan },
                other => {
                    return json!({ "type": "unknown", "debug": format!("{other:?}") });
                }
            }),
        },
        EngineEvent::Done(stop_reason) => EngineEventJs::Done { stop_reason },
        EngineEvent::Failed(message) => EngineEventJs::Failed { message },
        other => return json!({ "type": "unknown", "debug": format!("{other:?}") }),
    };
    serde_json::to_value(Tagged(js)).unwrap_or(Value::Null)
}

pub fn engine_event_from(v: Value) -> Result<EngineEvent, ShapeError> {
    Ok(
        match from_value::<Tagged<EngineEventJs>>("engine event", v)?.0 {
            EngineEventJs::Text { text } => EngineEvent::Text(text),
            EngineEventJs::Thought { text } => EngineEvent::Thought(text),
            EngineEventJs::ToolCall {
                id,
                title,
                kind,
                raw_input,
            } => EngineEvent::ToolCall {
                id,
                title,
                kind,
                raw_input,
            },
            EngineEventJs::ToolCallUpdate { id, status, output } => {
                EngineEvent::ToolCallUpdate { id, status, output }
            }
            EngineEventJs::Steered { ids } => EngineEvent::Steered { ids },
            EngineEventJs::ModeChanged { mode } => EngineEvent::ModeChanged(mode),
            EngineEventJs::Plan { plan } => EngineEvent::Plan(plan),
            EngineEventJs::Ask { tool_call_id, ask } => EngineEvent::Ask(Card {
                tool_call_id,
                ask: match ask.0 {
                    AskJs::Permission {
                        title,
                        kind,
                        raw_input,
                        always_offered,
                        reason,
                        purpose,
                    } => Ask::Permission {
                        title,
                        kind,
                        raw_input,
                        always_offered,
                        reason,
                        purpose,
                    },
                    AskJs::Question { why, questions } => Ask::Question { why, questions },
                    AskJs::Plan { path, text, plan } => Ask::Plan { path, text, plan },
                },
            }),
            EngineEventJs::Done { stop_reason } => EngineEvent::Done(stop_reason),
            EngineEventJs::Failed { message } => EngineEvent::Failed(message),
        },
    )
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum DecisionJs {
    AllowOnce {
        #[serde(default)]
        command: Option<String>,
    },
    AllowAlways {},
    #[serde(rename_all = "camelCase")]
    Deny {
        #[serde(default)]
        feedback: Option<String>,
        #[serde(default)]
        timed_out: bool,
    },
    Answered {
        answers: Vec<QuestionAnswer>,
    },
    #[serde(rename_all = "camelCase")]
    QuestionDismissed {
        #[serde(default)]
        timed_out: bool,
    },
    Approve {
        mode: Mode,
    },
    Revise {
        feedback: String,
    },
    #[serde(rename_all = "camelCase")]
    PlanDismissed {
        #[serde(default)]
        timed_out: bool,
    },
    NobodyToAsk {},
    Refused {
        reason: String,
    },
}

impl TagName for DecisionJs {
    const TAG: &'static str = "type";
}

pub fn decision(d: &Decision) -> Value {
    let js = match d.clone() {
        Decision::Permission(PermissionDecision::AllowOnce { command }) => {
            DecisionJs::AllowOnce { command }
        }
        Decision::Permission(PermissionDecision::AllowAlways) => DecisionJs::AllowAlways {},
        Decision::Permission(PermissionDecision::Deny {
            feedback,
            timed_out,
        }) => DecisionJs::Deny {
            feedback,
            timed_out,
        },
        Decision::Question(QuestionDecision::Answered(answers)) => DecisionJs::Answered { answers },
        Decision::Question(QuestionDecision::Dismissed { timed_out }) => {
            DecisionJs::QuestionDismissed { timed_out }
        }
        Decision::Plan(PlanDecision::Approve { mode }) => DecisionJs::Approve { mode },
        Decision::Plan(PlanDecision::Revise { feedback }) => DecisionJs::Revise { feedback },
        Decision::Plan(PlanDecision::Dismissed { timed_out }) => {
            DecisionJs::PlanDismissed { timed_out }
        }
        Decision::NobodyToAsk => DecisionJs::NobodyToAsk {},
        Decision::Refused(reason) => DecisionJs::Refused { reason },
        other => return json!({ "type": "unknown", "debug": format!("{other:?}") }),
    };
    serde_json::to_value(Tagged(js)).unwrap_or(Value::Null)
}

pub fn decision_from(v: Value) -> Result<Decision, ShapeError> {
    Ok(match from_value::<Tagged<DecisionJs>>("decision", v)?.0 {
        DecisionJs::AllowOnce { command } => {
            Decision::Permission(PermissionDecision::AllowOnce { command })
        }
        DecisionJs::AllowAlways {} => Decision::Permission(PermissionDecision::AllowAlways),
        DecisionJs::Deny {
            feedback,
            timed_out,
        } => Decision::Permission(PermissionDecision::Deny {
            feedback,
            timed_out,
        }),
        DecisionJs::Answered { answers } => Decision::Question(QuestionDecision::Answered(answers)),
        DecisionJs::QuestionDismissed { timed_out } => {
            Decision::Question(QuestionDecision::Dismissed { timed_out })
        }
        DecisionJs::Approve { mode } => Decision::Plan(PlanDecision::Approve { mode }),
        DecisionJs::Revise { feedback } => Decision::Plan(PlanDecision::Revise { feedback }),
        DecisionJs::PlanDismissed { timed_out } => {
            Decision::Plan(PlanDecision::Dismissed { timed_out })
        }
        DecisionJs::NobodyToAsk {} => Decision::NobodyToAsk,
        DecisionJs::Refused { reason } => Decision::Refused(reason),
    })
}

// ---------------------------------------------------------------------------------------------
// Outputs

fn frame_text(frame: &[u8]) -> String {
    String::from_utf8_lossy(frame).into_owned()
}

/// A frame the core made, as the string a socket sends: no copy (the core writes UTF-8 JSON;
/// anything else would be shown lossily rather than dropped).
pub fn frame_string(frame: Vec<u8>) -> String {
    String::from_utf8(frame).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub fn effect(e: &Effect) -> Value {
    match e {
        Effect::Dial => json!({ "kind": "dial" }),
        Effect::Stop { message } => json!({ "kind": "stop", "message": message }),
        Effect::Persist { seq, records } => json!({
            "kind": "persist",
            "seq": seq,
            "records": records.iter().map(record).collect::<Vec<_>>(),
        }),
        Effect::ResolvePath { request, path } => {
            json!({ "kind": "resolve_path", "request": request, "path": path })
        }
        Effect::LoadSession {
            request,
            session_id,
        } => json!({ "kind": "load_session", "request": request, "sessionId": session_id }),
        Effect::WriteAttachment {
            request,
            session_id,
            file_name,
            bytes,
        } => json!({
            "kind": "write_attachment",
            "request": request,
            "sessionId": session_id,
            "fileName": file_name,
            "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
        Effect::RemoveAttachments { session_id } => {
            json!({ "kind": "remove_attachments", "sessionId": session_id })
        }
        Effect::StartTurn(turn) => json!({ "kind": "start_turn", "turn": turn_start(turn) }),
        Effect::CancelTurn {
            session_id,
            turn_id,
        } => json!({ "kind": "cancel_turn", "sessionId": session_id, "turnId": turn_id }),
        Effect::CardDecided {
            session_id,
            turn_id,
            tool_call_id,
            decision: d,
        } => json!({
            "kind": "card_decided",
            "sessionId": session_id,
            "turnId": turn_id,
            "toolCallId": tool_call_id,
            "decision": decision(d),
        }),
        Effect::Steer {
            session_id,
            turn_id,
            id,
            text,
        } => json!({
            "kind": "steer", "sessionId": session_id, "turnId": turn_id, "id": id, "text": text,
        }),
        Effect::OpenTerminal {
            terminal_id,
            cwd,
            cols,
            rows,
        } => json!({
            "kind": "open_terminal", "terminalId": terminal_id, "cwd": cwd, "cols": cols,
            "rows": rows,
        }),
        Effect::TerminalInput { terminal_id, bytes } => json!({
            "kind": "terminal_input",
            "terminalId": terminal_id,
            "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
        Effect::ResizeTerminal {
            terminal_id,
            cols,
            rows,
        } => json!({
            "kind": "resize_terminal", "terminalId": terminal_id, "cols": cols, "rows": rows,
        }),
        Effect::CloseTerminal { terminal_id } => {
            json!({ "kind": "close_terminal", "terminalId": terminal_id })
        }
        other => json!({ "kind": "unknown", "debug": format!("{other:?}") }),
    }
}

pub fn device_output(o: &Output) -> Value {
    match o {
        Output::Send { conn, frame } => {
            json!({ "type": "send", "conn": conn.0, "frame": frame_text(frame) })
        }
        Output::Close { conn, code, reason } => {
            json!({ "type": "close", "conn": conn.0, "code": code, "reason": reason })
        }
        Output::Effect(e) => json!({ "type": "effect", "effect": effect(e) }),
        other => json!({ "type": "unknown", "debug": format!("{other:?}") }),
    }
}

/// An `{ result }` or `{ error: { code, message, data? } }` object, as `Client.respond` takes.
pub fn outcome_from(v: Value) -> Result<Result<Value, RpcError>, ShapeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct OutcomeJs {
        #[serde(default)]
        result: Option<Value>,
        #[serde(default)]
        error: Option<RpcError>,
    }
    let o: OutcomeJs = from_value("outcome", v)?;
    match (o.result, o.error) {
        (None, Some(e)) => Ok(Err(e)),
        (Some(r), None) => Ok(Ok(r)),
        _ => Err(ShapeError(
            "outcome: give exactly one of `result` or `error`".into(),
        )),
    }
}

pub fn client_event(e: &ClientEvent) -> Value {
    lembas_core::client::event_json(e)
}

pub fn client_output(o: &ClientOutput) -> Value {
    match o {
        ClientOutput::Send(frame) => json!({ "type": "send", "frame": frame_text(frame) }),
        ClientOutput::Close { code, reason } => {
            json!({ "type": "close", "code": code, "reason": reason })
        }
        ClientOutput::Event(e) => json!({ "type": "event", "event": client_event(e) }),
        other => json!({ "type": "unknown", "debug": format!("{other:?}") }),
    }
}

/// A scripted engine's report: which turn, and what happened.
pub fn report(session: &str, turn: &str, e: &EngineEvent) -> Value {
    json!({ "sessionId": session, "turnId": turn, "event": engine_event(e) })
}

// ---------------------------------------------------------------------------------------------
// What the device and the client tell about themselves

/// Store entries `Device::restore` could not read: `{ table, key, why }`.
pub fn unreadable(list: &[Unreadable]) -> Value {
    list.iter()
        .map(|u| json!({ "table": u.table.name(), "key": u.key, "why": u.why }))
        .collect()
}

pub fn turn_phase_name(p: TurnPhase) -> &'static str {
    match p {
        TurnPhase::Queued => "queued",
        TurnPhase::Running => "running",
        TurnPhase::Done => "done",
    }
}

/// A client's undelivered deletes, as a web UI keeps them across a reload.
pub fn pending_deletes(list: &[(String, u32)]) -> Value {
    list.iter()
        .map(|(s, r)| json!({ "sessionId": s, "refusals": r }))
        .collect()
}

/// Deletes kept from before a reload (what [`pending_deletes`] gave).
pub fn kept_deletes(v: Value) -> Result<Vec<(String, u32)>, ShapeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Kept {
        session_id: String,
        #[serde(default)]
        refusals: u32,
    }
    Ok(from_value::<Vec<Kept>>("pending deletes", v)?
        .into_iter()
        .map(|k| (k.session_id, k.refusals))
        .collect())
}

/// Prompts sent and not yet answered: `{ sessionId, turnId }`.
pub fn incomplete(list: &[(String, String)]) -> Value {
    list.iter()
        .map(|(s, t)| json!({ "sessionId": s, "turnId": t }))
        .collect()
}

/// Cards open now: `{ toolCallId, id }`, the id to respond to.
pub fn open_cards<'a>(cards: impl Iterator<Item = (&'a str, &'a Id)>) -> Value {
    cards
        .map(|(t, id)| json!({ "toolCallId": t, "id": id_value(id) }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_take_defaults_and_refuse_unknown_members() {
        let c = device_config(
            json!({ "seed": 7, "remote": { "enabled": true, "roots": ["/w"], "maxMode": "auto" } }),
        )
        .unwrap();
        assert_eq!(c.seed, 7);
        assert!(c.remote.enabled);
        assert_eq!(c.remote.max_mode, Mode::Auto);
        assert_eq!(c.backoff.initial_ms, 1_000);
        let e = device_config(json!({ "remote": { "maxmode": "auto" } })).unwrap_err();
        assert!(e.0.contains("maxmode"), "{e}");
        assert_eq!(client_config(Value::Null).unwrap().seed, 1);
    }

    #[test]
    fn every_config_member_is_settable_and_a_bad_one_is_named_by_its_path() {
        let c = device_config(json!({
            "terminals": { "maxPerLink": 1, "cols": [30, 200], "defaultSize": [100, 40] },
            "outbound": { "pauseBytes": 10, "maxBytes": 20 },
            "inbound": { "pauseBytes": 30 },
            "sessions": { "maxHeldBytes": 99_000_000, "maxAnswerBytes": 5 },
        }))
        .unwrap();
        assert_eq!(c.terminals.max_per_link, 1);
        assert_eq!(c.terminals.cols, (30, 200));
        assert_eq!(c.terminals.default_size, (100, 40));
        assert_eq!(
            c.terminals.rows,
            (5, 300),
            "a member left out keeps its default"
        );
        assert_eq!((c.outbound.pause_bytes, c.outbound.max_bytes), (10, 20));
        assert_eq!(c.inbound.pause_bytes, 30);
        assert_eq!(c.sessions.max_held_bytes, 99_000_000);
        assert_eq!(c.sessions.max_answer_bytes, 5);
        assert_eq!(c.liveness, None, "a JS socket cannot ping");
        let e = device_config(json!({ "terminals": { "maxPerLink": -1 } })).unwrap_err();
        assert!(
            e.0.starts_with("device config: `terminals.maxPerLink`: invalid value"),
            "{e}"
        );
        let e = device_config(json!({ "liveness": { "pingAfterMs": 1 } })).unwrap_err();
        assert!(e.0.contains("unknown field `liveness`"), "{e}");
        let e = client_config(json!({ "frames": { "maxDepth": "deep" } })).unwrap_err();
        assert!(
            e.0.starts_with("client config: `frames.maxDepth`: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn engine_events_and_decisions_round_trip() {
        let events = vec![
            EngineEvent::Text("hi".into()),
            EngineEvent::ToolCall {
                id: "c1".into(),
                title: "ls".into(),
                kind: "read".into(),
                raw_input: json!({ "path": "." }),
            },
            EngineEvent::Ask(Card {
                tool_call_id: "c2".into(),
                ask: Ask::Permission {
                    title: "rm".into(),
                    kind: "execute".into(),
                    raw_input: json!({}),
                    always_offered: true,
                    reason: "why".into(),
                    purpose: None,
                },
            }),
            EngineEvent::Done(StopReason::EndTurn),
        ];
        for e in events {
            assert_eq!(engine_event_from(engine_event(&e)).unwrap(), e);
        }
        let d = Decision::Permission(PermissionDecision::Deny {
            feedback: Some("no".into()),
            timed_out: false,
        });
        assert_eq!(decision_from(decision(&d)).unwrap(), d);
        assert_eq!(
            decision(&d),
            json!({ "type": "deny", "feedback": "no", "timedOut": false })
        );
    }

    #[test]
    fn kept_deletes_round_trip_and_refuse_other_shapes() {
        let kept = vec![("ses_a".to_string(), 0), ("ses_b".to_string(), 3)];
        assert_eq!(kept_deletes(pending_deletes(&kept)).unwrap(), kept);
        assert_eq!(
            kept_deletes(json!([{ "sessionId": "ses_c" }])).unwrap(),
            vec![("ses_c".to_string(), 0)]
        );
        let e = kept_deletes(json!([{ "session": "ses_c" }])).unwrap_err();
        assert!(e.0.starts_with("pending deletes:"), "{e}");
    }

    #[test]
    fn records_round_trip() {
        let r = vec![
            Record::Put {
                table: Table::Sessions,
                key: "s".into(),
                value: "{}".into(),
            },
            Record::DeletePrefix {
                table: Table::Turns,
                prefix: "s/".into(),
            },
        ];
        let v = Value::Array(r.iter().map(record).collect());
        assert_eq!(records(v).unwrap(), r);
    }
}
