//! Capabilities per connection: `initialize` lists, on each connection, exactly what works on
//! it. Terminals work over the instance link alone; a session id lasts only where the store
//! outlives the process (`DeviceConfig::has_store`; `serve --stdio` keeps it in memory).

use lembas_core::device::{ConnId, ConnKind};
use lembas_core::jsonrpc::code;
use lembas_core::methods;
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";

fn linked(tweak: impl FnOnce(&mut lembas_core::DeviceConfig)) -> Pair {
    let mut p = Pair::default_with(&[ROOT], tweak);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

/// Write one request on a local connection; the answer to it.
fn local_call(p: &mut Pair, conn: ConnId, id: u64, method: &str, params: Value) -> Value {
    let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    p.stdio(conn, frame.to_string().as_bytes()).unwrap();
    p.settle().unwrap();
    p.stdio_out[&conn]
        .iter()
        .map(|f| serde_json::from_slice::<Value>(f).unwrap())
        .find(|f| f["id"] == id && f.get("method").is_none())
        .unwrap_or_else(|| panic!("`{method}` got no answer"))
}

/// A local connection of `kind`, initialized; what its `initialize` listed.
fn local(p: &mut Pair, kind: ConnKind) -> (ConnId, Vec<String>) {
    let conn = p.open_local(kind);
    let answer = local_call(p, conn, 0, "initialize", json!({ "protocolVersion": 1 }));
    let caps = serde_json::from_value(answer["result"]["_meta"]["lembas"]["capabilities"].clone())
        .unwrap_or_else(|e| panic!("no capability list ({e}): {answer}"));
    (conn, caps)
}

/// The capabilities this build has, less `gone`.
fn without(gone: &[&str]) -> Vec<String> {
    methods::capabilities_built()
        .filter(|c| !gone.contains(c))
        .map(|c| c.to_string())
        .collect()
}

#[test]
fn terminals_are_listed_on_the_link_alone_and_work_only_there() {
    let mut p = linked(|d| d.remote.terminal = true);
    // The link lists every capability of this build, and a terminal opens there.
    assert_eq!(p.client.capabilities(), without(&[]));
    let opened = p.call("_lembas/terminal/open", json!({})).unwrap();
    assert!(opened["terminalId"].is_string(), "{opened}");
    assert!(opened["shell"].is_string(), "{opened}");
    for kind in [ConnKind::Stdio, ConnKind::Terminal] {
        let (conn, caps) = local(&mut p, kind);
        assert_eq!(
            caps,
            without(&["terminal", "shell", "directories"]),
            "{kind:?}"
        );
        // What is not listed there does not work there.
        let answer = local_call(&mut p, conn, 1, "_lembas/terminal/open", json!({}));
        assert_eq!(answer["error"]["code"], code::INVALID_PARAMS, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("terminals open only over the instance link"),
            "{answer}"
        );
    }
}

#[test]
fn sessions_is_listed_only_where_a_session_id_outlives_the_process() {
    // A store that outlives the process: listed everywhere, and a session id does last.
    let mut p = linked(|_| {});
    assert!(p.client.capabilities().iter().any(|c| c == "sessions"));
    let (_, caps) = local(&mut p, ConnKind::Stdio);
    assert!(caps.iter().any(|c| c == "sessions"), "{caps:?}");
    let s = p.new_session(&format!("{ROOT}/app"));
    p.restart_device().unwrap();
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(st["exists"], true, "{st}");
    // Sessions in memory only: listed nowhere.
    let mut p = linked(|d| d.has_store = false);
    assert!(
        !p.client.capabilities().iter().any(|c| c == "sessions"),
        "{:?}",
        p.client.capabilities()
    );
    let (_, caps) = local(&mut p, ConnKind::Stdio);
    assert_eq!(
        caps,
        without(&["terminal", "shell", "directories", "sessions"])
    );
}
