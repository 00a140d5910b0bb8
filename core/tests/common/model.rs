//! The model engine driven by hand, against a fake instance played by the test: its turns,
//! the calls it asks for, the replies fed back, and what it reports, at virtual times. Shared by
//! the model engine's test files.

use lembas_core::config::{Mode, Model};
use lembas_core::engine::{Context, Engine, EngineCommand, EngineEvent, TurnStart};
use lembas_core::engine_io::{HttpMethod, IoCall, IoId, IoReply};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::Time;
use serde_json::Value;

pub const SESSION: &str = "ses_1";

pub fn models() -> Vec<Model> {
    vec![
        Model {
            vision: true,
            context_length: Some(8_000),
            ..Model::served("lembas/vision")
        },
        Model::served("lembas/small"),
    ]
}

pub fn engine() -> ModelEngine {
    ModelEngine::new(ModelEngineConfig::default(), models())
}

pub fn turn(id: &str, model: Option<&str>) -> TurnStart {
    TurnStart {
        session_id: SESSION.into(),
        turn_id: id.into(),
        text: "hello".into(),
        attachments: Vec::new(),
        context: Context::default(),
        mode: Mode::Edit,
        model: model.map(str::to_string),
        effort: Some("low".into()),
        cwd: "/w".into(),
        roots: Vec::new(),
        history: Vec::new(),
        summary: None,
        compact: false,
    }
}

pub fn start(e: &mut ModelEngine, t: TurnStart, now: u64) {
    e.handle_command(EngineCommand::Start(Box::new(t)), Time(now));
}

pub fn calls(e: &mut ModelEngine) -> Vec<IoCall> {
    std::iter::from_fn(|| e.poll_io()).collect()
}

pub fn events(e: &mut ModelEngine) -> Vec<EngineEvent> {
    std::iter::from_fn(|| e.poll_event_unless(&mut |_| false))
        .map(|(s, _, ev)| {
            assert_eq!(s, SESSION);
            ev
        })
        .collect()
}

/// The one Fetch among `calls`: its id and its JSON body.
pub fn fetched(calls: &[IoCall]) -> (IoId, Value) {
    let mut fetches = calls.iter().filter_map(|c| match c {
        IoCall::Fetch {
            id,
            method,
            path,
            body,
        } => {
            assert_eq!(*method, HttpMethod::Post);
            assert_eq!(path, "/v1/chat/completions");
            Some((*id, serde_json::from_slice(body).unwrap()))
        }
        _ => None,
    });
    let one = fetches
        .next()
        .unwrap_or_else(|| panic!("no fetch in {calls:?}"));
    assert!(fetches.next().is_none(), "two fetches in {calls:?}");
    one
}

pub fn read_of(calls: &[IoCall], id: IoId) -> bool {
    calls
        .iter()
        .any(|c| matches!(c, IoCall::Read { id: r, .. } if *r == id))
}

pub fn head(e: &mut ModelEngine, id: IoId, status: u16, retry_after: Option<&str>, now: u64) {
    let retry_after = retry_after.map(str::to_string);
    e.handle_io(
        id,
        IoReply::Head {
            status,
            retry_after,
        },
        Time(now),
    );
}

pub fn body(e: &mut ModelEngine, id: IoId, bytes: &str, now: u64) {
    e.handle_io(id, IoReply::Body(bytes.as_bytes().to_vec()), Time(now));
}

pub fn sse(chunks: &[Value]) -> String {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    s.push_str("data: [DONE]\n\n");
    s
}

pub fn text(t: &str) -> Value {
    serde_json::json!({"choices":[{"index":0,"delta":{"content":t}}]})
}

pub fn thought(t: &str) -> Value {
    serde_json::json!({"choices":[{"index":0,"delta":{"reasoning_content":t}}]})
}

pub fn finish(why: &str) -> Value {
    serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":why}],
                       "usage":{"prompt_tokens":11,"completion_tokens":5}})
}

/// Stream `bytes` as the body, in pieces of `piece` bytes, each read asked for first.
pub fn stream(
    e: &mut ModelEngine,
    id: IoId,
    bytes: &str,
    piece: usize,
    now: u64,
) -> Vec<EngineEvent> {
    // What was made before the stream (the step) is taken first: only then is it read.
    let mut seen = events(e);
    for chunk in bytes.as_bytes().chunks(piece) {
        let asked = calls(e);
        assert!(
            read_of(&asked, id),
            "no read asked before a piece: {asked:?}"
        );
        e.handle_io(id, IoReply::Body(chunk.to_vec()), Time(now));
        seen.extend(events(e));
    }
    let asked = calls(e);
    assert!(
        read_of(&asked, id),
        "no read asked before the end: {asked:?}"
    );
    e.handle_io(id, IoReply::End, Time(now));
    seen.extend(events(e));
    seen
}
