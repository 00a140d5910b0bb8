//! The plain objects that cross the JS boundary, as JSON. A core type JS hands in or gets out
//! (a config, an effect, an output, an engine event, a decision, a store record) is its own
//! serde shape ([`out`], [`read`]); what is here besides is only what exists at the boundary
//! alone: answers JS gives as `{ path } | { error }`, a call's `{ result } | { error }`, request
//! ids, a scripted engine's report, the lists the classes return. Pure Rust (no
//! `wasm_bindgen`), so the native tests check exactly the objects the JS classes and the
//! drivers hand out. The TypeScript declarations are in `bindings/lembas.d.ts`, checked
//! against samples of these by bindings/tests/dts_samples.rs and `npx tsc -p test-types`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use lembas_core::device::ConnKind;
use lembas_core::engine::{EngineCommand, EngineEvent};
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::{ClientConfig, DeviceConfig};

/// A shape that did not fit: the sentence says which and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

/// A core value as the plain object JS gets: its serde shape.
pub fn out<T: Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A core value from the plain object JS gave (`what` names it in the error, with the path of
/// the member at fault: `` engine event: `ask.rawInput`: missing field ... ``).
pub fn read<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, ShapeError> {
    lembas_core::jsonrpc::parse_at_path(&v.to_string())
        .map_err(|why| ShapeError(format!("{what}: {why}")))
}

fn from_value<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, ShapeError> {
    read(what, v)
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

fn options<T: DeserializeOwned + Default>(what: &str, v: Value) -> Result<T, ShapeError> {
    if v.is_null() {
        return Ok(T::default());
    }
    read(what, v)
}

/// A connection kind from its name, the sentence naming the ones there are.
pub fn conn_kind(s: &str) -> Result<ConnKind, ShapeError> {
    serde_json::from_value(Value::String(s.into())).map_err(|_| {
        ShapeError(format!(
            "connection kind `{s}` is not one of link, stdio, terminal"
        ))
    })
}

// ---------------------------------------------------------------------------------------------
// Shapes of the boundary alone

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

/// A request id as JS sees it (a number or a string).
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

/// A frame the core made, as the string a socket sends: no copy (the core writes UTF-8 JSON;
/// anything else would be shown lossily rather than dropped).
pub fn frame_string(frame: Vec<u8>) -> String {
    String::from_utf8(frame).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
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

/// A scripted engine's report: which turn, and what happened.
pub fn report(session: &str, turn: &str, e: &EngineEvent) -> Value {
    json!({ "sessionId": session, "turnId": turn, "event": e })
}

/// The engine command in an effect JS hands a `ScriptedEngine` (`start_turn`, `cancel_turn`,
/// `steer`, `card_decided`: `EngineCommand`'s serde shape), or `None` for an effect that is
/// not the engine's. Read by hand by its `kind`: a derived internally tagged reader would
/// buffer the object first, and weigh on the module.
pub fn engine_command_from(e: &Value) -> Result<Option<EngineCommand>, ShapeError> {
    let kind = e["kind"].as_str().unwrap_or_default();
    let text = |k: &str| {
        e[k].as_str()
            .map(str::to_string)
            .ok_or_else(|| ShapeError(format!("{kind}: `{k}` is not a string")))
    };
    Ok(Some(match kind {
        "start_turn" => EngineCommand::Start(Box::new(read("turn", e["turn"].clone())?)),
        "cancel_turn" => EngineCommand::Cancel {
            session_id: text("sessionId")?,
            turn_id: text("turnId")?,
        },
        "steer" => EngineCommand::Steer {
            session_id: text("sessionId")?,
            turn_id: text("turnId")?,
            id: e["id"]
                .as_u64()
                .ok_or_else(|| ShapeError("steer: `id` is not a number".into()))?,
            text: text("text")?,
        },
        "card_decided" => EngineCommand::Decide {
            session_id: text("sessionId")?,
            turn_id: text("turnId")?,
            tool_call_id: text("toolCallId")?,
            decision: read("decision", e["decision"].clone())?,
        },
        _ => return Ok(None),
    }))
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
    use lembas_core::config::Mode;
    use lembas_core::engine::{Ask, Card, Decision, PermissionDecision, StopReason};
    use lembas_core::store::{Record, Table};

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
            assert_eq!(read::<EngineEvent>("engine event", out(&e)).unwrap(), e);
        }
        let d = Decision::Permission(PermissionDecision::Deny {
            feedback: Some("no".into()),
            timed_out: false,
        });
        assert_eq!(read::<Decision>("decision", out(&d)).unwrap(), d);
        assert_eq!(
            out(&d),
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
        assert_eq!(
            out(&r[1]),
            json!({ "op": "delete_prefix", "table": "turns", "prefix": "s/" })
        );
        assert_eq!(read::<Vec<Record>>("records", out(&r)).unwrap(), r);
        let e = read::<Vec<Record>>("records", json!([{ "op": "put", "table": "turns" }]));
        assert_eq!(e.unwrap_err().0, "records: `[0]`: missing field `key`");
    }
}
