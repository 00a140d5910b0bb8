//! The core's method table and dispatch, held against `spec/methods.json`: the same methods
//! with the same direction, kind and capability, and a real `Device` that answers -32601 for
//! exactly the methods it must refuse.

use std::collections::{BTreeMap, BTreeSet};

use lembas_core::config::Model;
use lembas_core::device::{ConnId, ConnKind, Device, Output};
use lembas_core::jsonrpc::code;
use lembas_core::methods::{
    self, capability_built, Direction, Gates, Kind, On, CAPABILITIES, METHODS,
};
use lembas_core::{DeviceConfig, Time};
use serde_json::{json, Value};

/// One row of `spec/methods.json`, in the core's terms.
#[derive(Debug, PartialEq)]
struct Row {
    direction: Direction,
    kind: Kind,
    capability: Option<String>,
    /// Our extension, not the spec's (`"beyond_spec": true`).
    beyond_spec: bool,
}

fn spec_rows() -> BTreeMap<String, Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/methods.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let spec: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut rows = BTreeMap::new();
    for entry in spec["methods"].as_array().expect("`methods` is an array") {
        let name = entry["method"].as_str().expect("`method` is a string");
        let direction = match entry["direction"].as_str() {
            Some("client_to_agent") => Direction::ClientToAgent,
            Some("agent_to_client") => Direction::AgentToClient,
            other => panic!("{name}: unknown direction {other:?}"),
        };
        let kind = match entry["kind"].as_str() {
            Some("request") => Kind::Request,
            Some("notification") => Kind::Notification,
            other => panic!("{name}: unknown kind {other:?}"),
        };
        let capability = match &entry["capability"] {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => panic!("{name}: capability must be a string or null, not {other}"),
        };
        let beyond_spec = match &entry["beyond_spec"] {
            Value::Null => false,
            Value::Bool(b) => *b,
            other => panic!("{name}: beyond_spec must be a boolean, not {other}"),
        };
        let row = Row {
            direction,
            kind,
            capability,
            beyond_spec,
        };
        assert!(
            rows.insert(name.to_string(), row).is_none(),
            "spec/methods.json lists `{name}` twice"
        );
    }
    rows
}

fn core_rows() -> BTreeMap<String, Row> {
    let mut rows = BTreeMap::new();
    for m in METHODS {
        let row = Row {
            direction: m.direction,
            kind: m.kind,
            capability: m.capability.map(str::to_string),
            beyond_spec: m.beyond_spec,
        };
        assert!(
            rows.insert(m.name.to_string(), row).is_none(),
            "methods::METHODS lists `{}` twice",
            m.name
        );
    }
    rows
}

#[test]
fn the_core_table_is_the_spec_table() {
    let spec = spec_rows();
    let core = core_rows();
    let mut wrong = Vec::new();
    for (name, row) in &spec {
        match core.get(name) {
            None => wrong.push(format!(
                "`{name}` is in spec/methods.json but not in METHODS"
            )),
            Some(c) if c != row => {
                wrong.push(format!("`{name}`: spec says {row:?}, METHODS says {c:?}"))
            }
            Some(_) => {}
        }
    }
    for name in core.keys() {
        if !spec.contains_key(name) {
            wrong.push(format!(
                "`{name}` is in METHODS but not in spec/methods.json"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for m in METHODS {
        assert_eq!(methods::find(m.name), Some(m), "find(`{}`)", m.name);
    }
    assert_eq!(methods::find("session/nope"), None);
}

#[test]
fn our_extensions_beyond_the_spec_are_marked_and_gated_by_a_capability_of_their_own() {
    let ours: Vec<_> = METHODS.iter().filter(|m| m.beyond_spec).collect();
    assert!(
        ours.iter().any(|m| m.name == "_lembas/session/events"),
        "{ours:?}"
    );
    for m in ours {
        // A plain client never sees it: it is named by a capability only ours use.
        let cap = m
            .capability
            .unwrap_or_else(|| panic!("`{}` is ours yet ungated", m.name));
        assert!(
            METHODS
                .iter()
                .filter(|o| o.capability == Some(cap))
                .all(|o| o.beyond_spec),
            "`{cap}` gates a method of the spec too"
        );
    }
}

#[test]
fn a_row_that_answers_a_refusal_itself_is_a_checked_request() {
    let answering: Vec<&str> = METHODS
        .iter()
        .filter(|m| m.answers_refusal)
        .inspect(|m| {
            assert!(
                m.dir_checked && m.direction == Direction::ClientToAgent && m.kind == Kind::Request,
                "`{}` answers a refusal of a check it never gets",
                m.name
            )
        })
        .map(|m| m.name)
        .collect();
    // The spec says `status` answers a refused session with `exists: true` and no more.
    assert!(
        answering.contains(&"_lembas/session/status"),
        "{answering:?}"
    );
}

#[test]
fn capabilities_are_listed_once() {
    // Not every capability gates a method: some gate a feature of one (`turns`, `attachments`
    // and `context` gate parts of `session/prompt` and `session/new`).
    let mut sorted: Vec<&str> = CAPABILITIES.iter().map(|c| c.name).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), CAPABILITIES.len(), "CAPABILITIES repeats one");
}

#[test]
fn the_capabilities_that_gate_methods_are_the_specs() {
    // Each capability spec/methods.json gates a method with has a row, so it can be listed
    // once built; and a row that says it gates methods gates some, or it never would be.
    let spec: BTreeSet<String> = spec_rows()
        .into_values()
        .filter_map(|r| r.capability)
        .collect();
    let table: BTreeSet<String> = CAPABILITIES
        .iter()
        .filter(|c| c.gates == Gates::Methods)
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(
        spec, table,
        "spec/methods.json's capabilities, then CAPABILITIES' `Methods` rows"
    );
    for c in CAPABILITIES {
        if let Gates::PartOf(method) = c.gates {
            assert!(
                methods::find(method).is_some(),
                "`{}` is part of `{method}`, which is not in METHODS",
                c.name
            );
        }
    }
}

#[test]
fn a_capability_is_built_when_every_request_it_gates_is_served() {
    for c in CAPABILITIES.iter().filter(|c| c.gates == Gates::Methods) {
        let requests: Vec<_> = METHODS
            .iter()
            .filter(|m| m.capability == Some(c.name) && m.kind == Kind::Request)
            .collect();
        let served = requests.iter().all(|m| m.served());
        assert_eq!(c.built(), served, "`{}`: {requests:?}", c.name);
        let on_link_alone = METHODS
            .iter()
            .any(|m| m.capability == Some(c.name) && m.on == On::Link);
        assert_eq!(c.on() == On::Link, on_link_alone, "`{}`", c.name);
    }
}

/// A device with one initialized stdio connection.
struct Harness {
    device: Device,
    conn: ConnId,
    next_id: u64,
    initialize_result: Value,
}

impl Harness {
    fn new() -> Harness {
        // Terminals on and a model, so every capability this build implements is listed.
        let mut config = DeviceConfig::default();
        config.remote.terminal = true;
        config.models = vec![Model::served("lembas/default")];
        let mut device = Device::new(config, Time(0)).expect("default config");
        let conn = device
            .handle_open(ConnKind::Stdio, Time(0))
            .expect("a stdio connection opens");
        let mut h = Harness {
            device,
            conn,
            next_id: 0,
            initialize_result: Value::Null,
        };
        let answer = h
            .request("initialize", json!({ "protocolVersion": 1 }))
            .expect("initialize is answered at once");
        h.initialize_result = answer
            .get("result")
            .unwrap_or_else(|| panic!("initialize failed: {answer}"))
            .clone();
        h
    }

    /// Send a request and return the response with its id, if one came (a request may be
    /// answered later); every output is drained.
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": method,
            "params": params,
        }))
        .unwrap();
        self.device
            .handle_frame(self.conn, &frame, Time(1))
            .expect("the connection is open");
        let mut answer = None;
        while let Some(out) = self.device.poll_output() {
            if let Output::Send { conn, frame } = out {
                assert_eq!(conn, self.conn, "a frame for another connection");
                let msg: Value = serde_json::from_slice(&frame).expect("the device sends JSON");
                if msg.get("id") == Some(&json!(id)) {
                    assert!(answer.is_none(), "`{method}` was answered twice");
                    answer = Some(msg);
                }
            }
        }
        answer
    }

    /// The error of the answer to `method`, which must be an error.
    fn error(&mut self, method: &str, params: Value) -> (i64, String) {
        let answer = self
            .request(method, params)
            .unwrap_or_else(|| panic!("`{method}` got no answer"));
        let error = answer
            .get("error")
            .unwrap_or_else(|| panic!("`{method}` should fail, got {answer}"));
        (
            error["code"].as_i64().expect("an error code"),
            error["message"].as_str().expect("an error message").into(),
        )
    }
}

#[test]
fn initialize_lists_exactly_the_capabilities_that_work_on_stdio() {
    let h = Harness::new();
    let listed = &h.initialize_result["_meta"]["lembas"]["capabilities"];
    // Terminals open, and directories are listed, over the instance link alone
    // (core/tests/capabilities.rs).
    let on_stdio: Vec<&str> = methods::capabilities_built()
        .filter(|c| !["terminal", "shell", "directories"].contains(c))
        .collect();
    assert_eq!(
        listed,
        &json!(on_stdio),
        "initialize result: {}",
        h.initialize_result
    );
}

#[test]
fn requests_gated_by_an_unlisted_capability_are_method_not_found_naming_it() {
    let mut h = Harness::new();
    let mut checked = 0;
    for m in METHODS {
        let (Direction::ClientToAgent, Kind::Request, Some(cap)) =
            (m.direction, m.kind, m.capability)
        else {
            continue;
        };
        if capability_built(cap) {
            continue;
        }
        let (code, message) = h.error(m.name, json!({ "sessionId": "s" }));
        assert_eq!(code, code::METHOD_NOT_FOUND, "`{}`: {message}", m.name);
        assert!(
            message.contains(&format!("`{cap}`")),
            "`{}`'s -32601 should name capability `{cap}`: {message}",
            m.name
        );
        checked += 1;
    }
    // The table has such methods as long as some capability is not yet implemented.
    let unlisted = METHODS
        .iter()
        .filter(|m| m.capability.is_some_and(|c| !capability_built(c)))
        .count();
    assert!(checked > 0 || unlisted == 0);
}

#[test]
fn requests_the_device_may_serve_are_not_refused_for_a_capability() {
    let mut h = Harness::new();
    for m in METHODS {
        if (m.direction, m.kind) != (Direction::ClientToAgent, Kind::Request) {
            continue;
        }
        if m.capability.is_some_and(|c| !capability_built(c)) {
            continue;
        }
        // Params that fit no method: -32602 is a fine answer, and so is none yet (a turn).
        let Some(answer) = h.request(m.name, json!({})) else {
            continue;
        };
        let Some(error) = answer.get("error") else {
            continue;
        };
        let code = error["code"].as_i64().expect("an error code");
        let message = error["message"].as_str().expect("an error message");
        if code != code::METHOD_NOT_FOUND {
            continue;
        }
        assert!(
            !message.contains("needs capability"),
            "`{}` is refused for a capability: {message}",
            m.name
        );
        assert!(
            m.capability.is_none(),
            "`{}` is gated by `{}`, which this build has, yet it is answered -32601: \
             {message}",
            m.name,
            m.capability.unwrap()
        );
        assert!(
            message.contains("not implemented by this device yet"),
            "`{}` (base protocol) is answered -32601: {message}",
            m.name
        );
    }
}

#[test]
fn methods_that_are_not_client_requests_are_method_not_found() {
    let mut h = Harness::new();
    for m in METHODS {
        if (m.direction, m.kind) == (Direction::ClientToAgent, Kind::Request) {
            continue;
        }
        // The agent's own methods (requests and notifications), and the client's notifications
        // sent with an id: none is a request the device serves.
        let (code, message) = h.error(m.name, json!({ "sessionId": "s" }));
        assert_eq!(
            code,
            code::METHOD_NOT_FOUND,
            "`{}` ({:?} {:?}) sent as a request: {message}",
            m.name,
            m.direction,
            m.kind
        );
    }
    for unknown in [
        "session/nope",
        "_lembas/nope",
        "",
        "initialize/",
        "Initialize",
    ] {
        let (code, message) = h.error(unknown, json!({}));
        assert_eq!(code, code::METHOD_NOT_FOUND, "`{unknown}`: {message}");
    }
}
