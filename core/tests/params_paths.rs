//! A params error names the member it is about. The path comes from where serde_json stopped
//! (`error_path`), not from a second, path-tracking decode: held here against
//! serde_path_to_error's path for the same text, on the core's own params types.

use lembas_core::jsonrpc::{code, parse_params};
use lembas_core::wire::handshake::InitializeParams;
use lembas_core::wire::session::{NewSessionParams, PromptParams, SteerParams};
use lembas_core::wire::terminal::{OpenParams, ResizeParams};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The path in our -32602 sentence (`.` when it names none).
fn ours<'a, T: Deserialize<'a>>(text: &'a RawValue) -> String {
    let e = match parse_params::<T>("m", Some(text)) {
        Ok(_) => panic!("{} should not fit", text.get()),
        Err(e) => e,
    };
    assert_eq!(e.code, code::INVALID_PARAMS);
    let rest = e.message.strip_prefix("invalid params for `m`: ").unwrap();
    match rest.strip_prefix('`') {
        Some(r) => r.split_once("`: ").unwrap().0.to_string(),
        None => ".".to_string(),
    }
}

fn theirs<'a, T: Deserialize<'a>>(text: &'a str) -> String {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => panic!("{text} should not fit"),
        Err(e) => e.path().to_string(),
    }
}

fn same<T: for<'a> Deserialize<'a>>(cases: &[&str]) {
    for text in cases {
        let raw = RawValue::from_string(text.to_string()).unwrap();
        assert_eq!(ours::<T>(&raw), theirs::<T>(text), "{text}");
    }
}

#[test]
fn prompt_paths_match_a_tracking_decode() {
    let cases = [
        r#"{"prompt":[]}"#,
        r#"{"sessionId":5,"prompt":[]}"#,
        r#"{"sessionId":"s","prompt":{}}"#,
        r#"{"sessionId":"s","prompt":[{"type":"text","text":"a"},{"type":"text","text":7}]}"#,
        r#"{"sessionId":"s","prompt":[{"type":"text"}]}"#,
        r#"{"sessionId":"s","prompt":[{"type":"video"}]}"#,
        r#"{"sessionId":"s","prompt":[{"type":"image","data":"x","mimeType":[1]}]}"#,
        r#"{"sessionId":"s","prompt":[{"type":"resource","resource":{"uri":"u","blob":9}}]}"#,
        r#"{"sessionId":"s","prompt":[],"_meta":{"lembas":{"turnId":3}}}"#,
        r#"{"sessionId":"s","prompt":[{"text":"a\"],{","type":"text"},{"type":1}]}"#,
        "{\n  \"sessionId\": \"s\",\n  \"prompt\": [\n    {\"type\": \"text\", \"text\": null}\n  ]\n}",
    ];
    for text in cases {
        let raw = RawValue::from_string(text.to_string()).unwrap();
        assert_eq!(
            ours::<PromptParams>(&raw),
            theirs::<PromptParams>(text),
            "{text}"
        );
    }
}

#[test]
fn other_params_paths_match_a_tracking_decode() {
    same::<NewSessionParams>(&[
        r#"{}"#,
        r#"{"cwd":["/w"]}"#,
        r#"{"cwd":"/w","mcpServers":{}}"#,
        r#"{"cwd":"/w","_meta":{"mode":5}}"#,
    ]);
    same::<InitializeParams>(&[
        r#"{"protocolVersion":"1"}"#,
        r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":"yes"}}}"#,
        r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":-3}}}}"#,
    ]);
    same::<OpenParams>(&[r#"{"cols":70000}"#, r#"{"cwd":1}"#]);
    same::<ResizeParams>(&[
        r#"{"terminalId":"t","cols":80}"#,
        r#"{"terminalId":"t","cols":80,"rows":-1}"#,
    ]);
    same::<SteerParams>(&[r#"{"sessionId":"s"}"#]);
}
