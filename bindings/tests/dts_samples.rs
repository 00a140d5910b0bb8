//! `lembas.d.ts` held against what the core really serializes: a sample of every JS-visible
//! type (each variant of the tagged ones), as the bindings hand it out, written to
//! `bindings/test-types/samples.mts` as `const x: Type = <sample>;`. `npx tsc -p test-types`
//! (in .ci/run's bindings step) compiles it, so a member the `.d.ts` lacks, misnames or types
//! wrongly fails the compile; this test fails when the committed file is not what the core
//! writes now. Rewrite it with `LEMBAS_WRITE_SAMPLES=1 cargo test -p lembas-bindings --test
//! dts_samples`. The shapes JS hands in are read back here too: a sample must be accepted.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use lembas_core::client::{ClientEvent, ClientOutput, Reattach};
use lembas_core::config::{Mode, Model};
use lembas_core::device::{ConnId, ConnKind, DialFailure, Effect, Output, TurnPhase};
use lembas_core::engine::{
    Ask, Attachment, Card, Context, Decision, EngineCommand, EngineEvent, PermissionDecision,
    PlanDecision, Question, QuestionAnswer, QuestionDecision, QuestionOption, StopReason,
    ToolStatus, TurnStart,
};
use lembas_core::engine_io::FileDiff;
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::model::engine::ModelEngineConfig;
use lembas_core::store::{Entry, Record, Table};
use lembas_core::wire::handshake::{DeviceInfo, Hello, Limits};
use lembas_core::{ClientConfig, DeviceConfig};
use lembas_runtime_wasm::json;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/test-types/samples.mts");

#[derive(Default)]
struct Samples {
    text: String,
    count: usize,
    /// The `.d.ts` types the samples name.
    imports: BTreeSet<String>,
}

impl Samples {
    /// `const sN: ty = value;` (`ty` a type of lembas.d.ts, or an expression over `import`).
    fn add(&mut self, ty: &str, value: Value) {
        let import = ty
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or(ty);
        self.add_as(ty, import, value);
    }

    fn add_as(&mut self, ty: &str, import: &str, value: Value) {
        self.imports.insert(import.to_string());
        self.text.push_str(&format!(
            "export const s{}: {ty} = {};\n",
            self.count,
            serde_json::to_string(&value).unwrap()
        ));
        self.count += 1;
    }

    fn out<T: Serialize>(&mut self, ty: &str, v: &T) -> Value {
        let value = json::out(v);
        self.add(ty, value.clone());
        value
    }

    /// A shape JS hands in: sampled, and read back to the same value.
    fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
        &mut self,
        ty: &str,
        v: T,
    ) {
        let value = self.out(ty, &v);
        assert_eq!(json::read::<T>(ty, value).unwrap(), v, "{ty} reads back");
    }
}

fn turn() -> TurnStart {
    TurnStart {
        session_id: "ses_1".into(),
        turn_id: "t1".into(),
        text: "hi".into(),
        attachments: vec![Attachment {
            file_name: "1-a-notes.md".into(),
            name: "notes.md".into(),
            mime_type: "text/markdown".into(),
            size: 12,
            text: true,
            first_line: Some(3),
        }],
        context: Context {
            system_prompt: Some(json!("be brief")),
            personalization: Some(Value::Null),
            library: Some(json!([])),
            prototypes: Some(json!({})),
        },
        mode: Mode::Edit,
        model: Some("lembas/default".into()),
        effort: None,
        cwd: "/w".into(),
        roots: vec!["/w".into()],
        history: Vec::new(),
        summary: Some("we fixed the parser".into()),
        compact: true,
    }
}

/// The engine's commands: in the JS API, effects like the others (`Output::Engine`).
fn engine_commands() -> Vec<EngineCommand> {
    let decided = |decision| EngineCommand::Decide {
        session_id: "ses_1".into(),
        turn_id: "t1".into(),
        tool_call_id: "c1".into(),
        decision,
    };
    vec![
        EngineCommand::Start(Box::new(turn())),
        EngineCommand::Cancel {
            session_id: "ses_1".into(),
            turn_id: "t1".into(),
        },
        decided(Decision::NobodyToAsk),
        EngineCommand::Steer {
            session_id: "ses_1".into(),
            turn_id: "t1".into(),
            id: 7,
            text: "also this".into(),
        },
    ]
}

fn effects() -> Vec<Effect> {
    vec![
        Effect::Dial,
        Effect::Stop {
            message: "the token was refused".into(),
        },
        Effect::Persist {
            seq: 4,
            records: records(),
        },
        Effect::ResolvePath {
            request: 1,
            path: "/w".into(),
        },
        Effect::ListDirectory {
            request: 4,
            path: "/w".into(),
            max_entries: 1000,
        },
        Effect::ReadMentions {
            request: 5,
            project: "/w/app".into(),
            roots: vec!["/w".into()],
            mentions: lembas_core::mentions::find(r"@src/a.rs#2-4 @docs/ @my\ notes.md"),
            max_file_bytes: 1_048_576,
            max_entries: 200,
        },
        Effect::SearchFiles {
            request: 6,
            root: "/w/app".into(),
            roots: vec!["/w".into()],
            query: "main".into(),
            limit: 20,
            recent: vec!["src/main.rs".into()],
        },
        Effect::ReadCommands {
            request: 7,
            project: "/w/app".into(),
            roots: vec!["/w".into()],
            max_files: 64,
            max_file_bytes: 32_768,
        },
        Effect::CheckChanges {
            request: 8,
            project: "/w/app".into(),
            roots: vec!["/w".into()],
            branch: None,
        },
        Effect::CheckChanges {
            request: 8,
            project: "/w/app".into(),
            roots: Vec::new(),
            branch: Some("main".into()),
        },
        Effect::LoadSession {
            request: 2,
            session_id: "ses_1".into(),
        },
        Effect::ReadHistory {
            request: 5,
            session_id: "ses_1".into(),
            before: Some(40),
            limit: 1000,
            max_bytes: 524_288,
        },
        Effect::ReadHistory {
            request: 6,
            session_id: "ses_1".into(),
            before: None,
            limit: 1000,
            max_bytes: 524_288,
        },
        Effect::ReadEvents {
            request: 9,
            session_id: "ses_1".into(),
        },
        Effect::WriteAttachment {
            request: 3,
            session_id: "ses_1".into(),
            file_name: "1-a-notes.md".into(),
            bytes: b"# notes".to_vec(),
        },
        Effect::RemoveAttachments {
            session_id: "ses_1".into(),
        },
        Effect::OpenTerminal {
            terminal_id: "term_1".into(),
            cwd: "/w".into(),
            cols: 80,
            rows: 24,
        },
        Effect::TerminalInput {
            terminal_id: "term_1".into(),
            bytes: b"ls\r".to_vec(),
        },
        Effect::ResizeTerminal {
            terminal_id: "term_1".into(),
            cols: 100,
            rows: 30,
        },
        Effect::CloseTerminal {
            terminal_id: "term_1".into(),
        },
    ]
}

fn records() -> Vec<Record> {
    vec![
        Record::Put {
            table: Table::Sessions,
            key: "ses_1".into(),
            value: "{}".into(),
        },
        Record::Delete {
            table: Table::Deletes,
            key: "ses_0".into(),
        },
        Record::DeletePrefix {
            table: Table::History,
            prefix: "ses_0/".into(),
        },
    ]
}

fn engine_events() -> Vec<EngineEvent> {
    let ask = |tool_call_id: &str, ask| {
        EngineEvent::Ask(Card {
            tool_call_id: tool_call_id.into(),
            ask,
        })
    };
    vec![
        EngineEvent::Text("hi".into()),
        EngineEvent::Thought("hm".into()),
        EngineEvent::ToolCall {
            id: "c1".into(),
            title: "ls".into(),
            kind: "read".into(),
            raw_input: json!({ "path": "." }),
        },
        EngineEvent::ToolCallUpdate {
            id: "c1".into(),
            status: ToolStatus::Completed,
            output: Some("a b".into()),
            diff: None,
        },
        EngineEvent::ToolCallUpdate {
            id: "c2".into(),
            status: ToolStatus::Completed,
            output: None,
            diff: Some(FileDiff {
                path: "/w/a.txt".into(),
                old_text: Some("a\n".into()),
                new_text: "b\n".into(),
            }),
        },
        EngineEvent::Steered { ids: vec![1, 2] },
        EngineEvent::ModeChanged(Mode::Plan),
        EngineEvent::Plan(Some(json!({ "entries": [] }))),
        EngineEvent::Plan(None),
        ask(
            "c2",
            Ask::Permission {
                title: "rm".into(),
                kind: "execute".into(),
                raw_input: json!({ "command": "rm x" }),
                always_offered: true,
                reason: "it deletes".into(),
                purpose: Some("cleanup".into()),
            },
        ),
        ask(
            "c3",
            Ask::Question {
                why: Some("to pick".into()),
                questions: vec![Question {
                    header: "Colour".into(),
                    question: "Which?".into(),
                    multiple: true,
                    options: vec![QuestionOption {
                        label: "red".into(),
                        description: Some("warm".into()),
                        recommended: true,
                    }],
                }],
            },
        ),
        ask(
            "c4",
            Ask::Plan {
                path: "/w/plan.md".into(),
                text: "1. do".into(),
                plan: None,
            },
        ),
        EngineEvent::Step(1),
        EngineEvent::Usage {
            input_tokens: 12,
            output_tokens: 3,
        },
        EngineEvent::Notice("2 earlier turns were left out".into()),
        EngineEvent::Done(StopReason::EndTurn),
        EngineEvent::Failed("the model went away".into()),
    ]
}

fn decisions() -> Vec<Decision> {
    vec![
        Decision::Permission(PermissionDecision::AllowOnce {
            command: Some("rm x".into()),
        }),
        Decision::Permission(PermissionDecision::AllowAlways),
        Decision::Permission(PermissionDecision::Deny {
            feedback: Some("no".into()),
            timed_out: false,
        }),
        Decision::Question(QuestionDecision::Answered(vec![
            QuestionAnswer::Options {
                labels: vec!["red".into()],
            },
            QuestionAnswer::Custom {
                text: "blue".into(),
            },
            QuestionAnswer::Back {
                text: "why?".into(),
            },
            QuestionAnswer::Skipped,
        ])),
        Decision::Question(QuestionDecision::Dismissed { timed_out: true }),
        Decision::Plan(PlanDecision::Approve { mode: Mode::Auto }),
        Decision::Plan(PlanDecision::Revise {
            feedback: "smaller".into(),
        }),
        Decision::Plan(PlanDecision::Dismissed { timed_out: false }),
        Decision::NobodyToAsk,
        Decision::Refused("too many questions".into()),
    ]
}

fn client_events() -> Vec<ClientEvent> {
    let hello = Hello {
        protocol: 3,
        version: "0.1.0".into(),
        harness_spec: Some("3.0.0".into()),
        device: DeviceInfo {
            host: "box".into(),
            platform: "linux".into(),
        },
        limits: Limits {
            roots: vec!["/w".into()],
            max_mode: Mode::Edit,
            require_trust: true,
        },
    };
    let reattached = |how| ClientEvent::Reattached {
        session_id: "ses_1".into(),
        turn_id: "t1".into(),
        how,
    };
    vec![
        ClientEvent::Hello(hello),
        ClientEvent::Ready {
            capabilities: vec!["turns".into()],
        },
        ClientEvent::Refused {
            code: 4400,
            reason: "protocol".into(),
        },
        ClientEvent::Answer {
            id: Id::number(3),
            method: "session/new".into(),
            outcome: Ok(json!({ "sessionId": "ses_1" })),
        },
        ClientEvent::Answer {
            id: Id::string("a"),
            method: "session/load".into(),
            outcome: Err(RpcError::new(-32602, "bad")),
        },
        ClientEvent::PromptAnswered {
            session_id: "ses_1".into(),
            turn_id: "t1".into(),
            outcome: Ok(json!({ "stopReason": "end_turn" })),
        },
        reattached(Reattach::Following),
        reattached(Reattach::Waiting),
        reattached(Reattach::Imported(vec![json!({ "role": "user" })])),
        reattached(Reattach::Resent),
        reattached(Reattach::Gone),
        ClientEvent::Deleted {
            session_id: "ses_1".into(),
            existed: true,
        },
        ClientEvent::DeleteGivenUp {
            session_id: "ses_1".into(),
            reason: "refused 3 times".into(),
        },
        ClientEvent::CardSettled {
            session_id: "ses_1".into(),
            tool_call_id: "c1".into(),
        },
        ClientEvent::Gap {
            session_id: "ses_1".into(),
            since: 4_294_967_301,
        },
        ClientEvent::Notification {
            method: "session/update".into(),
            params: json!({ "sessionId": "ses_1" }),
        },
        ClientEvent::Request {
            id: Id::number(9),
            method: "session/request_permission".into(),
            params: json!({}),
        },
    ]
}

/// One of every device input (`lembas_core::device::Input` reads them; it writes none).
fn device_inputs() -> Vec<Value> {
    let event = json::out(&EngineEvent::Text("hi".into()));
    vec![
        json!({ "type": "start_link" }),
        json!({ "type": "open", "kind": "link" }),
        json!({ "type": "dial_failed", "failure": { "type": "transient" } }),
        json!({ "type": "frame", "conn": 0, "frame": "{}" }),
        json!({ "type": "activity", "conn": 0 }),
        json!({ "type": "closed", "conn": 0, "code": null }),
        json!({ "type": "closed", "conn": 0, "code": 1000 }),
        json!({ "type": "tick" }),
        json!({ "type": "persisted", "seq": 1 }),
        json!({ "type": "path_resolved", "request": 1, "path": "/w" }),
        json!({ "type": "path_resolved", "request": 1, "error": "no such directory" }),
        json!({ "type": "directory_listed", "request": 4, "listing": { "path": "/w", "total": 3,
                "dirs": [{ "name": "app", "real": "/w/app" }, { "name": "gone", "error": "dangling" }] } }),
        json!({ "type": "directory_listed", "request": 4, "error": "permission denied" }),
        json!({ "type": "mentions_read", "request": 5, "read": [
                { "kind": "file", "real": "/w/app/src/a.rs", "bytes": "b25lCg==", "size": 4,
                  "text": true, "linesTotal": 9 },
                { "kind": "listing", "real": "/w/app/docs", "entries": ["a.md", "b/"], "total": 2 },
                { "kind": "refused", "reason": "outside" }] }),
        json!({ "type": "mentions_read", "request": 5, "error": "no disk" }),
        json!({ "type": "files_found", "request": 6, "found": { "root": "/w/app", "indexed": 2,
                "truncated": false, "files": [{ "path": "src/main.rs", "kind": "file" }] } }),
        json!({ "type": "files_found", "request": 6, "error": "gone" }),
        json!({ "type": "commands_read", "request": 7, "commands": { "root": "/w/app",
                "files": [{ "kind": "custom", "name": "fix", "source": "/w/app/.agent/commands/fix.md",
                            "text": "Fix $ARGUMENTS" }],
                "tooLarge": ["/w/app/.agent/commands/big.md"], "leftOut": 1 } }),
        json!({ "type": "commands_read", "request": 7, "commands": { "root": "/w/app", "files": [] } }),
        json!({ "type": "commands_read", "request": 7, "error": "no disk" }),
        json!({ "type": "changes_checked", "request": 8, "changes": "none" }),
        json!({ "type": "changes_checked", "request": 8, "error": "git could not be run" }),
        json!({ "type": "files_undone", "request": 8, "undone": { "restored": ["src/a.rs"],
                "kept": [{ "path": "b.rs", "why": "changed since the turn; left as it is" }] } }),
        json!({ "type": "files_undone", "request": 8, "undone": { "restored": [] } }),
        json!({ "type": "files_undone", "request": 8, "error": "no disk" }),
        json!({ "type": "session_loaded", "request": 2,
                "entries": [{ "table": "sessions", "key": "ses_1", "value": "{}" }] }),
        json!({ "type": "session_load_failed", "request": 2, "error": "disk" }),
        json!({ "type": "history_read", "request": 5,
                "entries": [{ "table": "history", "key": "ses_1/0000000000", "value": "{}" }] }),
        json!({ "type": "history_read", "request": 5, "error": "disk" }),
        json!({ "type": "events_read", "request": 9,
                "entries": [{ "table": "events", "key": "ses_1/00000000000000000001",
                              "value": "[]" }] }),
        json!({ "type": "events_read", "request": 9, "error": "disk" }),
        json!({ "type": "attachment_written", "request": 3 }),
        json!({ "type": "attachment_written", "request": 3, "error": "disk full" }),
        json!({ "type": "engine", "sessionId": "ses_1", "turnId": "t1", "event": event }),
        json!({ "type": "terminal_opened", "terminalId": "term_1", "shell": "bash",
                "integration": true }),
        json!({ "type": "terminal_opened", "terminalId": "term_1", "error": "no pty" }),
        json!({ "type": "terminal_output", "terminalId": "term_1", "base64": "aGk=" }),
        json!({ "type": "terminal_exit", "terminalId": "term_1", "code": 0 }),
        json!({ "type": "reconfigure", "remote": { "enabled": true, "roots": ["/w"] } }),
        json!({ "type": "models", "models": [{ "id": "a/b", "instance": true,
                "contextLength": 8192 }] }),
        json!({ "type": "delete_session", "sessionId": "ses_1" }),
    ]
}

/// One of every client input (`lembas_core::client::Input` reads them).
fn client_inputs() -> Vec<Value> {
    vec![
        json!({ "type": "link_up" }),
        json!({ "type": "link_down" }),
        json!({ "type": "frame", "frame": "{}" }),
        json!({ "type": "activity" }),
        json!({ "type": "tick" }),
        json!({ "type": "call", "method": "session/new", "params": { "cwd": "/w" } }),
        json!({ "type": "notify", "method": "session/cancel", "params": { "sessionId": "ses_1" } }),
        json!({ "type": "respond", "id": 4, "result": { "outcome": "selected" } }),
        json!({ "type": "respond", "id": "a", "error": { "code": -32601, "message": "no" } }),
        json!({ "type": "prompt", "sessionId": "ses_1", "blocks": [], "turnId": "t1" }),
        json!({ "type": "prompt", "sessionId": "ses_1", "blocks": [] }),
        json!({ "type": "delete_session", "sessionId": "ses_1" }),
        json!({ "type": "restore_pending_deletes", "kept": [{ "sessionId": "ses_1",
                "refusals": 1 }] }),
    ]
}

fn samples() -> String {
    let mut s = Samples::default();

    // Configs: every member the core has, so one the `.d.ts` lacks fails.
    let mut device = DeviceConfig::default();
    // Not this build's version: the file would go stale at every release.
    device.version = "0.0.0-sample".into();
    device.connection = Some("home".into());
    device.models = vec![
        Model {
            vision: true,
            context_length: Some(131_072),
            ..Model::served("lembas/default")
        },
        Model::served("lembas/small"),
    ];
    let v = s.out("DeviceConfig", &device);
    assert_eq!(
        json::out(&json::device_config(v).unwrap()),
        json::out(&device)
    );
    let v = s.out("ClientConfig", &ClientConfig::default());
    assert_eq!(
        json::out(&json::client_config(v).unwrap()),
        json::out(&ClientConfig::default())
    );

    // The device's outputs and effects.
    s.out(
        "DeviceOutput",
        &Output::Send {
            conn: ConnId(1),
            frame: br#"{"jsonrpc":"2.0"}"#.to_vec(),
        },
    );
    s.out(
        "DeviceOutput",
        &Output::Close {
            conn: ConnId(1),
            code: 1008,
            reason: "flood".into(),
        },
    );
    // The engine's commands where they stood when they were effects (the samples' order).
    let mut commands = Some(engine_commands());
    for e in effects() {
        if matches!(e, Effect::OpenTerminal { .. }) {
            for c in commands.take().into_iter().flatten() {
                s.out("DeviceOutput", &Output::Engine(c));
            }
        }
        s.out("DeviceOutput", &Output::Effect(e));
    }
    s.both("TurnStart", turn());
    for r in records() {
        s.both("StoreRecord", r);
    }
    s.both(
        "StoreEntry",
        Entry {
            table: Table::Turns,
            key: "ses_1/t1".into(),
            value: "{}".into(),
        },
    );
    for f in [
        DialFailure::Transient,
        DialFailure::TokenRefused,
        DialFailure::Unsupported("protocol 2".into()),
    ] {
        s.both("DialFailure", f);
    }
    for k in [
        ConnKind::Link,
        ConnKind::Stdio,
        ConnKind::Terminal,
        ConnKind::Hub,
    ] {
        s.out("ConnKind", &k);
    }
    for p in [TurnPhase::Queued, TurnPhase::Running, TurnPhase::Done] {
        s.out("TurnPhase", &p);
    }

    // The inputs `Device.handle` and `Client.handle` take: each must be read by the core.
    for v in device_inputs() {
        json::read::<lembas_core::device::Input>("DeviceInput", v.clone()).unwrap();
        s.add("DeviceInput", v);
    }
    for v in client_inputs() {
        json::read::<lembas_core::client::Input>("ClientInput", v.clone()).unwrap();
        s.add("ClientInput", v);
    }

    // The engine boundary.
    for e in engine_events() {
        s.both("EngineEvent", e.clone());
        s.add("EngineReport", json::report("ses_1", "t1", &e));
    }
    for d in decisions() {
        s.both("Decision", d);
    }

    // The client's outputs and events.
    s.out("ClientOutput", &ClientOutput::Send(b"{}".to_vec()));
    s.out(
        "ClientOutput",
        &ClientOutput::Close {
            code: 1000,
            reason: "bye".into(),
        },
    );
    for e in client_events() {
        s.out("ClientOutput", &ClientOutput::Event(e));
    }
    // What `KeptDeletes.save` is given (`ClientDriver.pendingDeletes()`).
    s.add_as(
        "Parameters<KeptDeletes[\"save\"]>[0]",
        "KeptDeletes",
        json::pending_deletes(&[("ses_1".into(), 2)]),
    );

    // The model engine's settings (`DeviceDriverOptions.model.engine`).
    let mut engine = ModelEngineConfig::default();
    engine.instance_name = Some("llembas.example".into());
    engine.personalization = Some(json!({
        "personality": "terse", "personality_custom": "", "instructions": "Use metric."
    }));
    s.both("ModelEngineConfig", engine);

    let mut header = String::from(
        "// Generated by bindings/tests/dts_samples.rs from the core's serde shapes; do not edit.\n\
         // `npx tsc -p test-types` checks each sample against lembas.d.ts.\n",
    );
    header.push_str(&format!(
        "import type {{ {} }} from \"../pkg-web/lembas_bindings.js\";\n",
        s.imports.iter().cloned().collect::<Vec<_>>().join(", ")
    ));
    header + &s.text
}

#[test]
fn the_committed_samples_are_what_the_core_serializes() {
    let now = samples();
    if std::env::var_os("LEMBAS_WRITE_SAMPLES").is_some() {
        std::fs::write(FILE, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(FILE).unwrap_or_default();
    assert!(
        committed == now,
        "bindings/test-types/samples.mts is not what the core serializes now; rewrite it with \
         `LEMBAS_WRITE_SAMPLES=1 cargo test -p lembas-bindings --test dts_samples`, then check \
         it with `npx tsc -p test-types` in bindings/"
    );
}
