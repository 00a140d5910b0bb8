//! The model engine's tool loop and mode table, driven by hand: the fake instance answers a
//! step with tool calls, the test plays the shell that performs them and the person who decides
//! the cards, and checks what the engine asks, reports, and tells the model at the next step.

mod common;

use common::model::*;
use lembas_core::config::Mode;
use lembas_core::engine::{
    Ask, Card, Decision, Engine, EngineCommand, EngineEvent, PermissionDecision, PlanDecision,
    QuestionAnswer, QuestionDecision, StopReason, ToolStatus, TurnStart,
};
use lembas_core::engine_io::{FileDiff, IoCall, IoId, IoReply, ToolOp};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::Time;
use serde_json::{json, Value};

fn tool_turn(mode: Mode) -> TurnStart {
    let mut t = turn("t1", Some("lembas/small"));
    t.mode = mode;
    t.roots = vec!["/w".into()];
    t
}

fn engine_with(config: impl FnOnce(&mut ModelEngineConfig)) -> ModelEngine {
    let mut c = ModelEngineConfig::default();
    config(&mut c);
    ModelEngine::new(c, models())
}

/// One piece of the `index`th call: its id and name when given, and arguments text.
fn call_piece(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut function = json!({ "arguments": args });
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut call = json!({ "index": index, "function": function });
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    json!({"choices":[{"index":0,"delta":{"tool_calls":[call]}}]})
}

/// The chunks of a step that makes these calls (name, arguments), each call's arguments cut
/// into pieces of three characters, the pieces of the calls interleaved.
fn call_chunks(calls: &[(&str, &str)]) -> Vec<Value> {
    let mut chunks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, _))| call_piece(i, Some(&format!("m{i}")), Some(name), ""))
        .collect();
    let pieces: Vec<Vec<String>> = calls
        .iter()
        .map(|(_, args)| {
            let chars: Vec<char> = args.chars().collect();
            chars.chunks(3).map(|c| c.iter().collect()).collect()
        })
        .collect();
    let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
    for n in 0..longest {
        for (i, p) in pieces.iter().enumerate() {
            if let Some(piece) = p.get(n) {
                chunks.push(call_piece(i, None, None, piece));
            }
        }
    }
    chunks.push(finish("tool_calls"));
    chunks
}

/// The model answers step `id` with these calls: what the engine reported meanwhile.
fn answer_calls(
    e: &mut ModelEngine,
    id: IoId,
    calls: &[(&str, &str)],
    now: u64,
) -> Vec<EngineEvent> {
    head(e, id, 200, None, now);
    stream(e, id, &sse(&call_chunks(calls)), 7, now)
}

/// The tool calls among `calls`.
fn tools_asked(calls: &[IoCall]) -> Vec<(IoId, ToolOp)> {
    calls
        .iter()
        .filter_map(|c| match c {
            IoCall::Tool { id, request } => {
                assert_eq!(request.project, "/w");
                assert_eq!(request.roots, vec!["/w".to_string()]);
                Some((*id, request.op.clone()))
            }
            _ => None,
        })
        .collect()
}

fn one_tool(calls: &[IoCall]) -> (IoId, ToolOp) {
    let mut asked = tools_asked(calls);
    assert_eq!(asked.len(), 1, "{calls:?}");
    asked.remove(0)
}

fn done(e: &mut ModelEngine, id: IoId, output: &str, now: u64) {
    let reply = IoReply::Tool {
        output: output.into(),
        diff: None,
    };
    e.handle_io(id, reply, Time(now));
}

fn decide(e: &mut ModelEngine, tool_call_id: &str, decision: Decision, now: u64) {
    e.handle_command(
        EngineCommand::Decide {
            session_id: SESSION.into(),
            turn_id: "t1".into(),
            tool_call_id: tool_call_id.into(),
            decision,
        },
        Time(now),
    );
}

/// The messages of a model call's body.
fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

/// The tool messages' contents of a body, in order.
fn results(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn updates(seen: &[EngineEvent]) -> Vec<(String, ToolStatus, Option<String>)> {
    seen.iter()
        .filter_map(|ev| match ev {
            EngineEvent::ToolCallUpdate {
                id, status, output, ..
            } => Some((id.clone(), *status, output.clone())),
            _ => None,
        })
        .collect()
}

fn cards(seen: &[EngineEvent]) -> Vec<Card> {
    seen.iter()
        .filter_map(|ev| match ev {
            EngineEvent::Ask(card) => Some(card.clone()),
            _ => None,
        })
        .collect()
}

/// Start a turn in `mode` and have the model make these calls: the engine's reports and calls
/// after the first step.
fn first_step(
    e: &mut ModelEngine,
    mode: Mode,
    made: &[(&str, &str)],
) -> (Vec<EngineEvent>, Vec<IoCall>) {
    start(e, tool_turn(mode), 0);
    let (id, _) = fetched(&calls(e));
    let seen = answer_calls(e, id, made, 1);
    (seen, calls(e))
}

#[test]
fn arguments_in_many_pieces_make_one_call_and_the_next_step_carries_calls_and_results() {
    let mut e = engine();
    start(&mut e, tool_turn(Mode::Edit), 0);
    let (id, request) = fetched(&calls(&mut e));
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"read") && offered.contains(&"run"),
        "{offered:?}"
    );
    let args = r#"{"path": "src/é.rs", "offset": 3}"#;
    let seen = answer_calls(&mut e, id, &[("read", args)], 1);
    assert!(
        seen.contains(&EngineEvent::ToolCall {
            id: "t1-1-1".into(),
            title: "Read src/é.rs".into(),
            kind: "read".into(),
            raw_input: json!({"path": "src/é.rs", "offset": 3}),
        }),
        "{seen:?}"
    );
    let asked = calls(&mut e);
    assert!(
        matches!(&asked[0], IoCall::Tool { request, .. } if request.session_id == SESSION),
        "{asked:?}"
    );
    let (tool, op) = one_tool(&asked);
    let c = ModelEngineConfig::default().tools;
    assert_eq!(
        op,
        ToolOp::Read {
            path: "src/é.rs".into(),
            first_line: 3,
            max_lines: c.read_max_lines,
            max_bytes: c.read_max_bytes,
        }
    );
    done(&mut e, tool, "   3| fn main() {}", 2);
    let seen = events(&mut e);
    assert_eq!(
        updates(&seen),
        vec![(
            "t1-1-1".into(),
            ToolStatus::Completed,
            Some("   3| fn main() {}".into())
        )]
    );
    assert!(seen.contains(&EngineEvent::Step(2)), "{seen:?}");
    let (_, next) = fetched(&calls(&mut e));
    let m = messages(&next);
    let n = m.len();
    assert_eq!(
        m[n - 2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "m0", "type": "function", "function": {"name": "read", "arguments": args}}]})
    );
    assert_eq!(
        m[n - 1],
        json!({"role": "tool", "tool_call_id": "m0", "content": "   3| fn main() {}"})
    );
}

#[test]
fn tools_off_offers_none() {
    let mut e = engine_with(|c| c.tools.enabled = false);
    start(&mut e, tool_turn(Mode::Auto), 0);
    let (id, request) = fetched(&calls(&mut e));
    assert!(request.get("tools").is_none(), "{request}");
    answer_calls(&mut e, id, &[("read", r#"{"path":"a"}"#)], 1);
    let asked = calls(&mut e);
    assert!(tools_asked(&asked).is_empty());
    let (_, next) = fetched(&asked);
    assert!(results(&next)[0].contains("engine.tools.enabled"), "{next}");
}

/// What the engine did with a call in a mode: "allow" (the shell asked), "ask" (a card),
/// "refuse" (failed, nothing asked of the shell).
fn ruling(mode: Mode, name: &str, args: &str) -> &'static str {
    let mut e = engine();
    let (seen, asked) = first_step(&mut e, mode, &[(name, args)]);
    let tools = tools_asked(&asked);
    let cards = cards(&seen);
    let failed = updates(&seen)
        .iter()
        .any(|(_, s, _)| *s == ToolStatus::Failed);
    match (tools.len(), cards.len(), failed) {
        (1, 0, false) => "allow",
        (0, 1, false) => "ask",
        (0, 0, true) => {
            let (_, next) = fetched(&asked);
            assert!(
                results(&next)[0].contains("plan mode"),
                "the reason reaches the model: {next}"
            );
            "refuse"
        }
        // The engine's own tools: neither the shell nor a permission card.
        (0, 0, false) => "own",
        other => panic!("{name} in {mode:?}: {other:?} {seen:?} {asked:?}"),
    }
}

#[test]
fn the_mode_table_tool_by_tool() {
    let table: [(&str, &str, [&str; 4]); 7] = [
        ("read", r#"{"path":"a"}"#, ["allow"; 4]),
        ("list", "{}", ["allow"; 4]),
        ("find", r#"{"pattern":"*.rs"}"#, ["allow"; 4]),
        ("search", r#"{"pattern":"fn"}"#, ["allow"; 4]),
        (
            "write",
            r#"{"path":"a","content":"x"}"#,
            ["refuse", "ask", "allow", "allow"],
        ),
        (
            "edit",
            r#"{"path":"a","old_string":"x","new_string":"y"}"#,
            ["refuse", "ask", "allow", "allow"],
        ),
        (
            "run",
            r#"{"command":"ls"}"#,
            ["refuse", "ask", "ask", "allow"],
        ),
    ];
    for (name, args, row) in table {
        for (mode, want) in Mode::ALL.into_iter().zip(row) {
            assert_eq!(ruling(mode, name, args), want, "{name} in {mode:?}");
        }
    }
    for mode in Mode::ALL {
        assert_eq!(
            ruling(mode, "plan_write", r#"{"plan":{"phases":[]}}"#),
            "own",
            "{mode:?}"
        );
    }
}

#[test]
fn a_card_says_what_and_why_and_allow_once_runs_it() {
    let mut e = engine();
    let (seen, asked) = first_step(
        &mut e,
        Mode::Edit,
        &[(
            "run",
            r#"{"command":"cargo test","description":"the tests"}"#,
        )],
    );
    assert!(tools_asked(&asked).is_empty());
    assert_eq!(
        cards(&seen),
        vec![Card {
            tool_call_id: "t1-1-1".into(),
            ask: Ask::Permission {
                title: "Run cargo test".into(),
                kind: "execute".into(),
                raw_input: json!({"command": "cargo test", "description": "the tests"}),
                always_offered: true,
                reason: "run `cargo test`: edit mode asks before every command".into(),
                purpose: Some("the tests".into()),
            }
        }]
    );
    // No idle timer while a person decides.
    assert_eq!(e.poll_timeout(), None);
    // A decision for another card is not this one's.
    decide(
        &mut e,
        "t1-9-9",
        Decision::Permission(PermissionDecision::AllowAlways),
        2,
    );
    assert!(calls(&mut e).is_empty());
    decide(
        &mut e,
        "t1-1-1",
        Decision::Permission(PermissionDecision::AllowOnce { command: None }),
        3,
    );
    let (_, op) = one_tool(&calls(&mut e));
    assert_eq!(
        op,
        ToolOp::Run {
            command: "cargo test".into()
        }
    );
}

#[test]
fn a_corrected_command_runs_instead_and_the_model_is_told() {
    let mut e = engine();
    first_step(
        &mut e,
        Mode::Manual,
        &[("run", r#"{"command":"rm -rf build"}"#)],
    );
    decide(
        &mut e,
        "t1-1-1",
        Decision::Permission(PermissionDecision::AllowOnce {
            command: Some("rm -rf build/tmp".into()),
        }),
        2,
    );
    let asked = calls(&mut e);
    let (run, op) = one_tool(&asked);
    assert_eq!(
        op,
        ToolOp::Run {
            command: "rm -rf build/tmp".into()
        }
    );
    e.handle_io(run, IoReply::Exit { code: Some(0) }, Time(3));
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    let said = &results(&next)[0];
    assert!(
        said.contains("`rm -rf build/tmp` ran instead of `rm -rf build`")
            && said.contains("exit code 0"),
        "{said}"
    );
}

#[test]
fn a_denial_with_feedback_reaches_the_next_request_and_nothing_is_done() {
    let mut e = engine();
    first_step(
        &mut e,
        Mode::Manual,
        &[("write", r#"{"path":"a.txt","content":"x"}"#)],
    );
    decide(
        &mut e,
        "t1-1-1",
        Decision::Permission(PermissionDecision::Deny {
            feedback: Some("use b.txt".into()),
            timed_out: false,
        }),
        2,
    );
    let seen = events(&mut e);
    assert_eq!(updates(&seen)[0].1, ToolStatus::Failed);
    let asked = calls(&mut e);
    assert!(tools_asked(&asked).is_empty());
    let (_, next) = fetched(&asked);
    assert_eq!(results(&next), vec!["Denied by the person: use b.txt"]);
}

#[test]
fn a_card_nobody_answered_in_time_is_a_denial_saying_so() {
    let mut e = engine();
    first_step(&mut e, Mode::Edit, &[("run", r#"{"command":"make"}"#)]);
    decide(
        &mut e,
        "t1-1-1",
        Decision::Permission(PermissionDecision::Deny {
            feedback: None,
            timed_out: true,
        }),
        2,
    );
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    assert!(
        results(&next)[0].contains("remote.approval_timeout"),
        "{next}"
    );
    // With nobody to ask at all, likewise refused, saying so.
    let mut e = engine();
    first_step(&mut e, Mode::Edit, &[("run", r#"{"command":"make"}"#)]);
    decide(&mut e, "t1-1-1", Decision::NobodyToAsk, 2);
    events(&mut e);
    let asked = calls(&mut e);
    assert!(tools_asked(&asked).is_empty());
    let (_, next) = fetched(&asked);
    assert!(results(&next)[0].contains("nobody can be asked"), "{next}");
}

/// Run a turn whose model runs `command` in edit mode, answer its card with `decision` (if one
/// is put), finish the command: whether a card was put.
fn run_asks(e: &mut ModelEngine, session: &str, command: &str, decision: Option<Decision>) -> bool {
    let mut t = tool_turn(Mode::Edit);
    t.session_id = session.into();
    e.handle_command(EngineCommand::Start(Box::new(t)), Time(0));
    let (id, _) = fetched(&drain(e));
    head(e, id, 200, None, 1);
    take(e, session);
    let args = json!({ "command": command }).to_string();
    let bytes = sse(&call_chunks(&[("run", &args)]));
    let asked = drain(e);
    assert!(asked.contains(&IoCall::Read { id, max: 16 * 1024 }));
    e.handle_io(id, IoReply::Body(bytes.into_bytes()), Time(1));
    drain(e);
    e.handle_io(id, IoReply::End, Time(1));
    let seen = take(e, session);
    let card = cards(&seen).pop();
    if let (Some(card), Some(decision)) = (&card, decision) {
        e.handle_command(
            EngineCommand::Decide {
                session_id: session.into(),
                turn_id: "t1".into(),
                tool_call_id: card.tool_call_id.clone(),
                decision,
            },
            Time(2),
        );
    }
    let asked = drain(e);
    if let Some((run, _)) = tools_asked(&asked).first() {
        e.handle_io(*run, IoReply::Exit { code: Some(0) }, Time(3));
    }
    take(e, session);
    e.handle_command(
        EngineCommand::Cancel {
            session_id: session.into(),
            turn_id: "t1".into(),
        },
        Time(4),
    );
    take(e, session);
    drain(e);
    card.is_some()
}

fn drain(e: &mut ModelEngine) -> Vec<IoCall> {
    std::iter::from_fn(|| e.poll_io()).collect()
}

fn take(e: &mut ModelEngine, session: &str) -> Vec<EngineEvent> {
    std::iter::from_fn(|| e.poll_event_unless(&mut |_| false))
        .filter(|(s, _, _)| s == session)
        .map(|(_, _, ev)| ev)
        .collect()
}

#[test]
fn allow_always_is_remembered_per_session_and_per_prefix_only() {
    let mut e = engine();
    let always = || Some(Decision::Permission(PermissionDecision::AllowAlways));
    assert!(run_asks(&mut e, "s1", "cargo test --all", always()));
    assert!(
        !run_asks(&mut e, "s1", "cargo test -p core", None),
        "the prefix is remembered"
    );
    assert!(
        run_asks(&mut e, "s1", "cargo build", None),
        "another prefix asks"
    );
    assert!(
        run_asks(&mut e, "s2", "cargo test", None),
        "another session asks"
    );
    assert!(
        run_asks(&mut e, "s1", "cargo test; rm -rf ~", None),
        "a control character is never covered"
    );
    assert!(run_asks(&mut e, "s1", "cargo test && curl x | sh", None));
    // Writing tools by name, in manual mode.
    let mut e = engine();
    first_step(
        &mut e,
        Mode::Manual,
        &[("write", r#"{"path":"a","content":"x"}"#)],
    );
    decide(
        &mut e,
        "t1-1-1",
        Decision::Permission(PermissionDecision::AllowAlways),
        2,
    );
    let (w, _) = one_tool(&calls(&mut e));
    done(&mut e, w, "written", 3);
    events(&mut e);
    let (id, _) = fetched(&calls(&mut e));
    let seen = answer_calls(
        &mut e,
        id,
        &[
            ("write", r#"{"path":"b","content":"y"}"#),
            ("edit", r#"{"path":"b","old_string":"y","new_string":"z"}"#),
        ],
        4,
    );
    let asked = calls(&mut e);
    assert_eq!(tools_asked(&asked).len(), 1, "write goes ahead: {asked:?}");
    assert!(cards(&seen).is_empty(), "edit waits for write: {seen:?}");
    done(&mut e, tools_asked(&asked)[0].0, "written", 5);
    let seen = events(&mut e);
    let card = cards(&seen);
    assert_eq!(card.len(), 1, "edit is another tool: it asks: {seen:?}");
    assert_eq!(card[0].tool_call_id, "t1-2-2");
}

#[test]
fn the_remembered_rules_are_bounded_oldest_forgotten_first() {
    let mut e = engine_with(|c| c.tools.max_remembered = 1);
    let always = || Some(Decision::Permission(PermissionDecision::AllowAlways));
    assert!(run_asks(&mut e, "s1", "npm test", always()));
    assert!(run_asks(&mut e, "s1", "make all", always()));
    assert!(!run_asks(&mut e, "s1", "make all", None));
    assert!(run_asks(&mut e, "s1", "npm test", None), "forgotten");
}

/// A turn in auto mode whose model runs `make`: the run call's id, at time 1.
fn running(e: &mut ModelEngine) -> IoId {
    let (_, asked) = first_step(e, Mode::Auto, &[("run", r#"{"command":"make"}"#)]);
    let (run, _) = one_tool(&asked);
    assert!(
        asked.contains(&IoCall::Read {
            id: run,
            max: 16 * 1024
        }),
        "{asked:?}"
    );
    run
}

fn output(e: &mut ModelEngine, run: IoId, bytes: &str, now: u64) {
    e.handle_io(run, IoReply::Body(bytes.as_bytes().to_vec()), Time(now));
}

#[test]
fn a_commands_output_is_shown_at_most_once_per_interval() {
    let mut e = engine();
    let run = running(&mut e);
    output(&mut e, run, "a", 10);
    let seen = events(&mut e);
    assert_eq!(
        updates(&seen),
        vec![("t1-1-1".into(), ToolStatus::InProgress, Some("a".into()))]
    );
    for (i, piece) in ["b", "c", "d"].iter().enumerate() {
        assert!(read_of(&calls(&mut e), run));
        output(&mut e, run, piece, 20 + i as u64 * 50);
        assert_eq!(updates(&events(&mut e)), vec![], "held back");
    }
    assert_eq!(e.poll_timeout(), Some(Time(260)));
    e.handle_timeout(Time(260));
    assert_eq!(
        updates(&events(&mut e)),
        vec![("t1-1-1".into(), ToolStatus::InProgress, Some("abcd".into()))]
    );
    assert!(read_of(&calls(&mut e), run));
    e.handle_io(run, IoReply::Exit { code: Some(2) }, Time(300));
    let seen = events(&mut e);
    assert_eq!(
        updates(&seen),
        vec![(
            "t1-1-1".into(),
            ToolStatus::Failed,
            Some("exit code 2\nabcd".into())
        )]
    );
}

#[test]
fn a_commands_output_past_the_cap_is_dropped_and_the_cut_said() {
    let mut e = engine_with(|c| c.tools.run_max_output_bytes = 10);
    let run = running(&mut e);
    for n in 0..5 {
        output(&mut e, run, "12345", 10 + n);
        events(&mut e);
        assert!(read_of(&calls(&mut e), run), "read on and dropped");
    }
    e.handle_io(run, IoReply::Exit { code: Some(0) }, Time(20));
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    let said = &results(&next)[0];
    assert!(said.starts_with("exit code 0\n1234512345\n"), "{said}");
    assert!(
        said.contains("15 more bytes were dropped, engine.tools.run_max_output_bytes is 10"),
        "{said}"
    );
}

#[test]
fn a_command_past_its_time_is_aborted_and_the_model_told() {
    let mut e = engine_with(|c| c.tools.run_timeout_ms = 5_000);
    let run = running(&mut e);
    assert_eq!(e.poll_timeout(), Some(Time(5_001)));
    e.handle_timeout(Time(5_000));
    assert!(
        !calls(&mut e).contains(&IoCall::Abort { id: run }),
        "not yet"
    );
    e.handle_timeout(Time(5_001));
    let asked = calls(&mut e);
    assert!(asked.contains(&IoCall::Abort { id: run }), "{asked:?}");
    let seen = events(&mut e);
    assert_eq!(updates(&seen)[0].1, ToolStatus::Failed);
    let (_, next) = fetched(&asked);
    assert!(
        results(&next)[0].contains("stopped after 5000 ms (engine.tools.run_timeout_ms)"),
        "{next}"
    );
}

#[test]
fn cancel_aborts_a_running_command() {
    let mut e = engine();
    let run = running(&mut e);
    e.handle_command(
        EngineCommand::Cancel {
            session_id: SESSION.into(),
            turn_id: "t1".into(),
        },
        Time(2),
    );
    assert!(calls(&mut e).contains(&IoCall::Abort { id: run }));
    assert_eq!(
        events(&mut e).last(),
        Some(&EngineEvent::Done(StopReason::Cancelled))
    );
    // What the command says after is moot.
    output(&mut e, run, "late", 3);
    e.handle_io(run, IoReply::Exit { code: Some(0) }, Time(3));
    assert!(events(&mut e).is_empty());
    assert_eq!(e.running(), 0);
}

#[test]
fn a_paused_session_reads_no_more_of_its_commands_output() {
    let mut e = engine();
    let run = running(&mut e);
    output(&mut e, run, "a", 10);
    assert!(e.poll_event_unless(&mut |_| true).is_none());
    assert!(calls(&mut e).is_empty(), "read on while paused");
    assert_eq!(events(&mut e).len(), 1);
    assert!(read_of(&calls(&mut e), run));
}

#[test]
fn ask_user_is_a_question_card_and_the_answers_reach_the_model() {
    let args = json!({"why": "to pick", "questions": [
        {"header": "DB", "question": "Which database?", "options": [{"label": "SQLite"}, {"label": "Postgres"}]},
        {"header": "Name", "question": "What name?", "options": []},
        {"header": "X", "question": "Skip me?", "options": []},
    ]})
    .to_string();
    let mut e = engine();
    let (seen, asked) = first_step(&mut e, Mode::Plan, &[("ask_user", &args)]);
    assert!(tools_asked(&asked).is_empty());
    let card = cards(&seen);
    assert!(
        matches!(&card[0].ask, Ask::Question { why: Some(w), questions } if w == "to pick" && questions.len() == 3),
        "{card:?}"
    );
    decide(
        &mut e,
        "t1-1-1",
        Decision::Question(QuestionDecision::Answered(vec![
            QuestionAnswer::Options {
                labels: vec!["Postgres".into()],
            },
            QuestionAnswer::Custom {
                text: "lembas".into(),
            },
            QuestionAnswer::Skipped,
        ])),
        2,
    );
    let seen = events(&mut e);
    assert_eq!(updates(&seen)[0].1, ToolStatus::Completed);
    let (_, next) = fetched(&calls(&mut e));
    let said = &results(&next)[0];
    assert!(
        said.contains("DB — Which database?\n→ Postgres")
            && said.contains("→ (in their own words) lembas")
            && said.contains("Skip me?\n→ (no answer)"),
        "{said}"
    );
    // Nobody to ask: the model is told so.
    let mut e = engine();
    first_step(&mut e, Mode::Plan, &[("ask_user", &args)]);
    decide(&mut e, "t1-1-1", Decision::NobodyToAsk, 2);
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    assert!(
        results(&next)[0].starts_with("Nobody can be asked"),
        "{next}"
    );
}

#[test]
fn plan_tools_keep_the_plan_and_an_approved_plan_changes_the_ruling_mode() {
    let plan = json!({"phases": [{"title": "one", "tasks": [{"title": "write a"}]}]});
    let write = json!({ "plan": plan }).to_string();
    let update = r#"{"tasks":[{"title":"write a","status":"in_progress"}]}"#;
    let submit = json!({ "text": "# Plan\n- write a" }).to_string();
    let mut e = engine();
    let (seen, asked) = first_step(
        &mut e,
        Mode::Plan,
        &[
            ("plan_write", &write),
            ("plan_update", update),
            ("write", r#"{"path":"a","content":"x"}"#),
            ("plan_submit", &submit),
        ],
    );
    let plans: Vec<&Value> = seen
        .iter()
        .filter_map(|ev| match ev {
            EngineEvent::Plan(Some(p)) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(plans[0], &plan);
    assert_eq!(plans[1]["phases"][0]["tasks"][0]["status"], "in_progress");
    // The write was refused in plan mode; the plan's record is written whatever the mode.
    let (file, op) = one_tool(&asked);
    assert_eq!(
        op,
        ToolOp::Write {
            path: ".lembas/plans/t1.md".into(),
            text: "# Plan\n- write a".into(),
            max_bytes: ModelEngineConfig::default().tools.max_file_bytes,
        }
    );
    e.handle_io(
        file,
        IoReply::Tool {
            output: "written".into(),
            diff: Some(FileDiff {
                path: "/w/.lembas/plans/t1.md".into(),
                old_text: None,
                new_text: "# Plan\n- write a".into(),
            }),
        },
        Time(2),
    );
    let card = cards(&events(&mut e));
    assert_eq!(
        card,
        vec![Card {
            tool_call_id: "t1-1-4".into(),
            ask: Ask::Plan {
                path: ".lembas/plans/t1.md".into(),
                text: "# Plan\n- write a".into(),
                plan: Some(plans[1].clone()),
            }
        }]
    );
    decide(
        &mut e,
        "t1-1-4",
        Decision::Plan(PlanDecision::Approve { mode: Mode::Edit }),
        3,
    );
    assert_eq!(e.ruling_mode(SESSION), Some(Mode::Edit));
    events(&mut e);
    let (id, next) = fetched(&calls(&mut e));
    let said = results(&next);
    assert!(said[2].contains("plan mode"), "{said:?}");
    assert!(said[3].contains("now in edit mode"), "{said:?}");
    // The write the plan mode refused now goes ahead.
    answer_calls(&mut e, id, &[("write", r#"{"path":"a","content":"x"}"#)], 4);
    assert_eq!(tools_asked(&calls(&mut e)).len(), 1);
}

#[test]
fn a_plan_nobody_can_approve_is_saved_and_the_model_told_to_stop() {
    let mut e = engine();
    let (_, asked) = first_step(
        &mut e,
        Mode::Plan,
        &[("plan_submit", r##"{"text":"# P"}"##)],
    );
    let (file, _) = one_tool(&asked);
    done(&mut e, file, "written", 2);
    events(&mut e);
    decide(&mut e, "t1-1-1", Decision::NobodyToAsk, 3);
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    let said = &results(&next)[0];
    assert!(
        said.contains(".lembas/plans/t1.md") && said.contains("Stop here"),
        "{said}"
    );
    assert_eq!(e.ruling_mode(SESSION), Some(Mode::Plan));
}

#[test]
fn bad_arguments_are_told_to_the_model_and_nothing_is_done() {
    let mut e = engine();
    let (seen, asked) = first_step(
        &mut e,
        Mode::Auto,
        &[
            ("read", r#"{"path": "#),
            ("edit", r#"{"path":"a"}"#),
            ("launch", "{}"),
        ],
    );
    assert!(tools_asked(&asked).is_empty());
    assert_eq!(
        updates(&seen).iter().map(|u| u.1).collect::<Vec<_>>(),
        vec![ToolStatus::Failed; 3]
    );
    let (_, next) = fetched(&asked);
    let said = results(&next);
    assert!(said[0].contains("arguments of `read`"), "{said:?}");
    assert!(said[1].contains("missing field `old_string`"), "{said:?}");
    assert!(said[2].contains("no tool named `launch`"), "{said:?}");
}

#[test]
fn oversize_arguments_are_refused_and_too_many_calls_fail_the_turn() {
    let mut e = engine_with(|c| c.tools.max_argument_bytes = 40);
    let long = json!({ "path": "a", "content": "x".repeat(100) }).to_string();
    let (_, asked) = first_step(&mut e, Mode::Auto, &[("write", &long)]);
    assert!(tools_asked(&asked).is_empty());
    let (_, next) = fetched(&asked);
    assert!(
        results(&next)[0].contains("engine.tools.max_argument_bytes (40 bytes)"),
        "{next}"
    );
    let mut e = engine_with(|c| c.tools.max_calls_per_step = 2);
    start(&mut e, tool_turn(Mode::Auto), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    events(&mut e);
    assert!(read_of(&calls(&mut e), id));
    let body = sse(&call_chunks(&[("list", "{}"); 3]));
    e.handle_io(id, IoReply::Body(body.into_bytes()), Time(2));
    let seen = events(&mut e);
    assert_eq!(calls(&mut e), vec![IoCall::Abort { id }]);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("engine.tools.max_calls_per_step")),
        "{seen:?}"
    );
}

#[test]
fn a_result_past_the_bound_is_cut_saying_so() {
    let mut e = engine_with(|c| c.tools.max_result_bytes = 8);
    let (_, asked) = first_step(&mut e, Mode::Auto, &[("read", r#"{"path":"a"}"#)]);
    let (id, _) = one_tool(&asked);
    done(&mut e, id, "0123456789abcdef", 2);
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    assert_eq!(
        results(&next)[0],
        "01234567\n(cut: 8 of 16 bytes shown, engine.tools.max_result_bytes)"
    );
}

#[test]
fn the_steps_of_a_turn_are_bounded() {
    let mut e = engine_with(|c| c.tools.max_steps = 2);
    start(&mut e, tool_turn(Mode::Auto), 0);
    let mut seen = Vec::new();
    for step in 0..2 {
        let (id, _) = fetched(&calls(&mut e));
        seen.extend(answer_calls(&mut e, id, &[("list", "{}")], step));
        let (tool, _) = one_tool(&calls(&mut e));
        done(&mut e, tool, "a/", step);
        seen.extend(events(&mut e));
    }
    assert!(calls(&mut e).is_empty(), "no third model call");
    let n = seen.len();
    assert!(
        matches!(&seen[n - 2], EngineEvent::Notice(m) if m.contains("engine.tools.max_steps")),
        "{seen:?}"
    );
    assert_eq!(seen[n - 1], EngineEvent::Done(StopReason::MaxTurnRequests));
    assert_eq!(e.running(), 0);
}

#[test]
fn an_image_read_is_shown_to_a_vision_model_after_the_results() {
    let mut e = engine();
    let mut t = tool_turn(Mode::Auto);
    t.model = Some("lembas/vision".into());
    start(&mut e, t, 0);
    let (id, _) = fetched(&calls(&mut e));
    answer_calls(&mut e, id, &[("read", r#"{"path":"logo.png"}"#)], 1);
    let (tool, _) = one_tool(&calls(&mut e));
    e.handle_io(
        tool,
        IoReply::File {
            bytes: b"PNG".to_vec(),
            size: 3,
        },
        Time(2),
    );
    events(&mut e);
    let (_, next) = fetched(&calls(&mut e));
    assert!(results(&next)[0].contains("logo.png is an image"), "{next}");
    let last = messages(&next).last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"][1]["image_url"]["url"],
        "data:image/png;base64,UE5H"
    );
}

#[test]
fn whole_calls_sent_without_an_index_are_calls_of_their_own() {
    let mut e = engine();
    start(&mut e, tool_turn(Mode::Auto), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let whole = |id: &str, path: &str| {
        json!({"choices":[{"index":0,"delta":{"tool_calls":[
            {"id": id, "type": "function",
             "function": {"name": "read", "arguments": json!({"path": path}).to_string()}}]}}]})
    };
    let body = sse(&[whole("a1", "a"), whole("b2", "b"), finish("tool_calls")]);
    stream(&mut e, id, &body, 64, 1);
    let (first, op) = one_tool(&calls(&mut e));
    assert_eq!(op.path(), Some("a"));
    done(&mut e, first, "A", 2);
    events(&mut e);
    let (_, op) = one_tool(&calls(&mut e));
    assert_eq!(op.path(), Some("b"));
}

#[test]
fn a_turn_grown_past_the_context_drops_its_oldest_tool_results_first_and_says_so() {
    // 2,000 tokens: a quarter kept for the answer leaves room for about 6,000 bytes.
    let mut e = engine_with(|c| c.context_tokens = 2_000);
    start(&mut e, tool_turn(Mode::Auto), 0);
    let big = |c: char| c.to_string().repeat(4_000);
    let mut seen = Vec::new();
    let (mut id, mut body) = fetched(&calls(&mut e));
    for (step, fill) in ['a', 'b'].into_iter().enumerate() {
        seen.extend(answer_calls(
            &mut e,
            id,
            &[("read", r#"{"path":"f"}"#)],
            step as u64,
        ));
        let (tool, _) = one_tool(&calls(&mut e));
        done(&mut e, tool, &big(fill), step as u64);
        seen.extend(events(&mut e));
        (id, body) = fetched(&calls(&mut e));
    }
    let results = results(&body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0], lembas_core::model::prompt::DROPPED_RESULT);
    assert!(
        results[1].contains(&big('b')),
        "the newest result is kept whole"
    );
    assert!(
        seen.iter().any(|e| matches!(e, EngineEvent::Notice(m)
            if m.contains("1 earlier tool result") && m.contains("2000 tokens"))),
        "{seen:?}"
    );
}

#[test]
fn a_compaction_offers_no_tools_and_a_later_turn_is_given_the_summary() {
    let mut e = engine();
    let mut compaction = tool_turn(Mode::Auto);
    compaction.compact = true;
    start(&mut e, compaction, 0);
    let (id, request) = fetched(&calls(&mut e));
    assert!(request.get("tools").is_none(), "{request}");

    // Called anyway, a tool is not run, and the model is told why: the compaction, not the
    // device's tools being off.
    answer_calls(&mut e, id, &[("read", r#"{"path":"a"}"#)], 1);
    let asked = calls(&mut e);
    assert!(tools_asked(&asked).is_empty(), "{asked:?}");
    let (_, next) = fetched(&asked);
    let result = &results(&next)[0];
    assert!(result.contains("a compaction only writes"), "{next}");
    assert!(!result.contains("engine.tools.enabled"), "{next}");

    let mut e = engine();
    let mut later = tool_turn(Mode::Edit);
    later.summary = Some("we fixed the parser".into());
    start(&mut e, later, 0);
    let (_, request) = fetched(&calls(&mut e));
    let system = messages(&request)[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.ends_with("follow on from it.\n\nwe fixed the parser"),
        "{system}"
    );
    assert!(request.get("tools").is_some(), "{request}");
}
