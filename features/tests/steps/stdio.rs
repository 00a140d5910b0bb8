//! An editor on `lembas serve --stdio`: plain ACP, one message a line.

use cucumber::{given, then, when};

use super::{method_of, parse};
use crate::LinkWorld;

#[when("an editor opens stdio")]
fn open_stdio(w: &mut LinkWorld) {
    let conn = w.pair().open_stdio();
    w.editor = Some(conn);
}

/// A local process on the service's hub socket: written to and read as the editor.
#[when("a local process connects to the hub")]
fn open_hub(w: &mut LinkWorld) {
    let conn = w.pair().open_local(lembas_core::device::ConnKind::Hub);
    w.editor = Some(conn);
}

/// One line from the editor; the device's lines in return become "the answer".
#[when(regex = r"^the editor sends: (.+)$")]
fn editor_sends(w: &mut LinkWorld, line: String) {
    let conn = w.editor.expect("a step before must open stdio");
    let lines = w
        .pair()
        .stdio(conn, line.as_bytes())
        .expect("stdio settles");
    w.answers = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
}

fn stdio_lines(w: &LinkWorld) -> Vec<String> {
    let conn = w.editor.expect("a step before must open stdio");
    w.built().stdio_out[&conn]
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

#[then(regex = r"^the device has written (\d+) lines? on stdio$")]
fn lines_written(w: &mut LinkWorld, n: usize) {
    let lines = stdio_lines(w);
    assert_eq!(lines.len(), n, "{lines:?}");
}

#[then(regex = r#"^no frame the device wrote on stdio has a method starting with "([^"]*)"$"#)]
fn no_method_prefix(w: &mut LinkWorld, prefix: String) {
    let all: Vec<String> = w
        .built()
        .stdio_out
        .values()
        .flatten()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    assert!(!all.is_empty(), "the device wrote nothing on stdio at all");
    for line in &all {
        let frame = parse(line);
        let method = method_of(&frame).unwrap_or("");
        assert!(
            !method.starts_with(&prefix),
            "the device wrote {method} on stdio: {line}"
        );
    }
}

#[given("the device keeps its sessions in memory only")]
fn sessions_in_memory(w: &mut LinkWorld) {
    w.config_mut().has_store = false;
}

/// The capabilities the device's answer to the editor's `initialize` (id 0) listed.
fn editor_capabilities(w: &LinkWorld) -> Vec<String> {
    let init = stdio_lines(w)
        .iter()
        .map(|l| parse(l))
        .find(|f| f["id"] == 0 && f.get("result").is_some())
        .expect("the editor's initialize (id 0) was answered");
    serde_json::from_value(init["result"]["_meta"]["lembas"]["capabilities"].clone())
        .unwrap_or_else(|e| panic!("no capability list ({e}): {init}"))
}

#[then(regex = r#"^the editor's initialize (lists|does not list) "([^"]*)"$"#)]
fn editor_listed(w: &mut LinkWorld, verb: String, capability: String) {
    let caps = editor_capabilities(w);
    let listed = caps.contains(&capability);
    assert_eq!(listed, verb == "lists", "`{capability}` in {caps:?}");
}

#[then(regex = r#"^the client was not listed "([^"]*)"$"#)]
fn client_not_listed(w: &mut LinkWorld, capability: String) {
    let caps = w.built().client.capabilities();
    assert!(!caps.contains(&capability), "`{capability}` in {caps:?}");
}
