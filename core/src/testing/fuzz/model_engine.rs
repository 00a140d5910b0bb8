//! The `model_engine` driver: the model engine alone, against an instance that answers
//! anything (any status, any bytes, in any split, resets, silence), and a shell that performs
//! the engine's calls correctly. What comes from the instance is peer input: nothing it sends
//! may panic the device or lose track of a turn.
//!
//! The promises checked after every operation:
//! - every started turn ends exactly once (`Done` or `Failed`), and nothing is reported for a
//!   turn after its end or for a turn never started;
//! - the engine asks only for calls it may: a read of a request whose head came and whose
//!   previous read was answered, never of one it aborted or that ended;
//! - when a turn has ended, none of its calls is left open, and `running()` counts the turns
//!   not yet ended;
//! - the model's tool calls (its stream can make them) reach the shell only as the mode allows:
//!   in plan mode (no plan approved), nothing is run or written but the plan's own record;
//! - a card is put once, and deciding it (any decision, of any kind) never panics.

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::{Arbitrary, Unstructured};

use crate::config::{Mode, Model};
use crate::engine::{
    Ask, Attachment, Decision, Engine, EngineCommand, EngineEvent, PermissionDecision,
    PlanDecision, QuestionAnswer, QuestionDecision, TurnStart,
};
use crate::engine_io::{FileDiff, IoCall, IoId, IoReply, ToolOp};
use crate::model::engine::{ModelEngine, ModelEngineConfig};
use crate::time::Time;

/// At most this many operations are read from one input.
const MAX_ENGINE_OPS: usize = 256;

const SESSIONS: u8 = 2;

#[derive(Arbitrary, Debug)]
enum Op {
    /// A turn starts in a session (ignored while one runs there).
    Start {
        session: u8,
        /// 0: a served model; 1: one not served; 2: none.
        model: u8,
        attachments: u8,
        vision: bool,
        mode: u8,
    },
    /// The `pick`-th open card is decided.
    Decide {
        pick: u8,
        decision: u8,
    },
    /// The shell answers the `pick`-th open call.
    Reply {
        pick: u8,
        reply: Reply,
    },
    Steer {
        session: u8,
        text: u8,
    },
    Cancel {
        session: u8,
    },
    /// Time passes; the engine's timers fire.
    Wait {
        ms: u16,
    },
    /// Events are taken (`paused`: session 0's reader is behind).
    Take {
        paused: bool,
    },
    CancelAll,
}

#[derive(Arbitrary, Debug)]
enum Reply {
    Head {
        status: Status,
        retry_after: u8,
    },
    /// Body bytes, built from pieces an SSE stream is made of.
    Body(Vec<Piece>),
    /// Body bytes as they come.
    Raw(Vec<u8>),
    End,
    Failed,
    File {
        bytes: u8,
        size: u8,
    },
    /// A tool's result (a file changed, when `diff`).
    Tool {
        diff: bool,
    },
    /// A command's end (`None`: a signal).
    Exit {
        code: Option<i8>,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Status {
    Ok,
    Unauthorized,
    Forbidden,
    RateLimited,
    Server,
    NotFound,
    Other(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Piece {
    Data,
    Text,
    Thought,
    FinishStop,
    FinishLength,
    Usage,
    Done,
    Error,
    Newline,
    CarriageReturn,
    Comment,
    Junk,
    MultiByte,
    CallRead,
    CallRun,
    CallWrite,
    CallAsk,
    CallPlan,
    CallSubmit,
    CallUnknown,
    /// A piece of the first call's arguments.
    CallArguments,
    FinishToolCalls,
}

impl Piece {
    fn bytes(self) -> &'static [u8] {
        match self {
            Piece::Data => b"data: ",
            Piece::Text => br#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
            Piece::Thought => br#"{"choices":[{"index":0,"delta":{"reasoning":"h"}}]}"#,
            Piece::FinishStop => br#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            Piece::FinishLength => {
                br#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#
            }
            Piece::Usage => br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            Piece::Done => b"[DONE]",
            Piece::Error => br#"{"error":{"message":"overloaded"}}"#,
            Piece::Newline => b"\n",
            Piece::CarriageReturn => b"\r",
            Piece::Comment => b": keep-alive\n",
            Piece::Junk => b"{\"choices\":[{\"delta\":{\"content\":7}}]}",
            Piece::MultiByte => "☃".as_bytes(),
            Piece::CallRead => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\""}}]}}]}"#,
            Piece::CallRun => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c1","function":{"name":"run","arguments":"{\"command\":\"make x\"}"}}]}}]}"#,
            Piece::CallWrite => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c2","function":{"name":"write","arguments":"{\"path\":\"b\",\"content\":\"y\"}"}}]}}]}"#,
            Piece::CallAsk => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c3","function":{"name":"ask_user","arguments":"{\"questions\":[{\"header\":\"h\",\"question\":\"q\",\"options\":[{\"label\":\"l\"}]}]}"}}]}}]}"#,
            Piece::CallPlan => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":4,"id":"c4","function":{"name":"plan_write","arguments":"{\"plan\":{\"phases\":[{\"tasks\":[{\"title\":\"t\"}]}]}}"}}]}}]}"#,
            Piece::CallSubmit => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"id":"c5","function":{"name":"plan_submit","arguments":"{\"text\":\"- p\"}"}}]}}]}"#,
            Piece::CallUnknown => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":6,"function":{"name":"zap","arguments":"{"}}]}}]}"#,
            Piece::CallArguments => br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}"#,
            Piece::FinishToolCalls => {
                br#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#
            }
        }
    }
}

impl Status {
    fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::Unauthorized => 401,
            Status::Forbidden => 403,
            Status::RateLimited => 429,
            Status::Server => 503,
            Status::NotFound => 404,
            Status::Other(n) => n % 1000,
        }
    }
}

/// A call the engine asked for, as the shell holds it.
#[derive(Debug, PartialEq, Eq)]
enum Open {
    /// A request: waiting for its head.
    Asked,
    /// Its head came: `reading` when a read is out.
    Headed { reading: bool },
    /// An attachment read.
    File,
    /// A tool call: `reading` when a read of a command's output is out.
    Tool { reading: bool },
}

/// The shell and the record of what the engine said.
struct Run {
    engine: ModelEngine,
    now: Time,
    open: BTreeMap<IoId, Open>,
    /// Calls the shell finished or the engine let go of: nothing more may be asked of them.
    closed: BTreeSet<IoId>,
    /// The running turn of each session (by its turn id), as the shell saw it start.
    running: BTreeMap<String, String>,
    ended: BTreeSet<String>,
    next_turn: u32,
    /// Open cards: (session, toolCallId) → (turn, a plan's card).
    cards: BTreeMap<(String, String), (String, bool)>,
    /// The mode ruling each session's running turn, as far as the shell knows.
    modes: BTreeMap<String, Mode>,
}

fn session_name(n: u8) -> String {
    format!("ses_{}", n % SESSIONS)
}

/// Drive a [`ModelEngine`] through operations read from `data`; panics on a broken promise.
pub fn model_engine(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut config = ModelEngineConfig::default();
    // Small bounds, so each is reached by small inputs.
    config.sse.max_line_bytes = 256;
    config.sse.max_event_bytes = 512;
    config.max_error_body_bytes = 64;
    config.read_bytes = 32;
    config.max_retries = 2;
    config.max_rate_limited = 2;
    config.idle_timeout_ms = 5_000;
    config.context_tokens = 200;
    config.tools.max_argument_bytes = 96;
    config.tools.max_calls_per_step = 4;
    config.tools.max_steps = 4;
    config.tools.max_result_bytes = 32;
    config.tools.run_max_output_bytes = 16;
    config.tools.run_timeout_ms = 3_000;
    config.tools.progress_interval_ms = 100;
    config.tools.max_remembered = 2;
    let models = vec![
        Model {
            vision: true,
            ..Model::served("m/vision")
        },
        Model::served("m/plain"),
    ];
    let mut run = Run {
        engine: ModelEngine::new(config, models),
        now: Time::ZERO,
        open: BTreeMap::new(),
        closed: BTreeSet::new(),
        running: BTreeMap::new(),
        ended: BTreeSet::new(),
        next_turn: 0,
        cards: BTreeMap::new(),
        modes: BTreeMap::new(),
    };
    for _ in 0..MAX_ENGINE_OPS {
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        run.apply(op);
        run.drain(false);
        run.check(true);
    }
    // However the input ended, cancelling everything ends every turn.
    run.engine.cancel_all();
    run.drain(false);
    run.check(true);
    assert!(
        run.running.is_empty(),
        "turns never ended: {:?}",
        run.running
    );
    assert_eq!(run.engine.running(), 0);
}

impl Run {
    fn apply(&mut self, op: Op) {
        match op {
            Op::Start {
                session,
                model,
                attachments,
                vision,
                mode,
            } => {
                let session = session_name(session);
                if self.running.contains_key(&session) {
                    return;
                }
                self.next_turn += 1;
                let turn_id = format!("t{}", self.next_turn);
                let model = match model % 3 {
                    0 if vision => Some("m/vision".to_string()),
                    0 => Some("m/plain".to_string()),
                    1 => Some("m/gone".to_string()),
                    _ => None,
                };
                let attachments = (0..attachments % 3)
                    .map(|i| Attachment {
                        file_name: format!("{i}-f"),
                        name: format!("f{i}"),
                        mime_type: if i == 0 { "image/png" } else { "text/plain" }.into(),
                        size: 4,
                        text: i != 0,
                        first_line: None,
                    })
                    .collect();
                self.running.insert(session.clone(), turn_id.clone());
                let mode = Mode::ALL[usize::from(mode) % Mode::ALL.len()];
                self.modes.insert(session.clone(), mode);
                let start = TurnStart {
                    session_id: session,
                    attachments,
                    mode,
                    model,
                    ..TurnStart::testing(&turn_id, "hi")
                };
                self.engine
                    .handle_command(EngineCommand::Start(Box::new(start)), self.now);
            }
            Op::Reply { pick, reply } => {
                let Some((&id, _)) = self
                    .open
                    .iter()
                    .filter(|(_, o)| **o != Open::Headed { reading: false })
                    .nth(usize::from(pick) % self.open.len().max(1))
                else {
                    return;
                };
                self.reply(id, reply);
            }
            Op::Steer { session, text } => {
                let session = session_name(session);
                if let Some(turn) = self.running.get(&session) {
                    let command = EngineCommand::Steer {
                        session_id: session,
                        turn_id: turn.clone(),
                        id: u64::from(text),
                        text: format!("steer {text}"),
                    };
                    self.engine.handle_command(command, self.now);
                }
            }
            Op::Cancel { session } => {
                let session = session_name(session);
                if let Some(turn) = self.running.get(&session) {
                    let command = EngineCommand::Cancel {
                        session_id: session,
                        turn_id: turn.clone(),
                    };
                    self.engine.handle_command(command, self.now);
                }
            }
            Op::Wait { ms } => {
                self.now = self.now.plus_ms(u64::from(ms));
                self.engine.handle_timeout(self.now);
                // A timer the engine set for now or earlier has fired.
                if let Some(at) = self.engine.poll_timeout() {
                    assert!(
                        at > self.now,
                        "a timer at {at:?} is still due at {:?}",
                        self.now
                    );
                }
            }
            Op::Take { paused } => self.drain(paused),
            Op::Decide { pick, decision } => {
                let Some((key, (turn, plan))) = self
                    .cards
                    .iter()
                    .nth(usize::from(pick) % self.cards.len().max(1))
                    .map(|(k, v)| (k.clone(), v.clone()))
                else {
                    return;
                };
                self.cards.remove(&key);
                let decision = any_decision(decision);
                if plan {
                    if let Decision::Plan(PlanDecision::Approve { mode }) = &decision {
                        self.modes.insert(key.0.clone(), *mode);
                    }
                }
                let command = EngineCommand::Decide {
                    session_id: key.0,
                    turn_id: turn,
                    tool_call_id: key.1,
                    decision,
                };
                self.engine.handle_command(command, self.now);
            }
            Op::CancelAll => self.engine.cancel_all(),
        }
    }

    /// The shell answers a call as the instance (or the disk) would.
    fn reply(&mut self, id: IoId, reply: Reply) {
        let state = self.open.get(&id).expect("picked among the open");
        let reply = match (state, reply) {
            (Open::File, Reply::File { bytes, size }) => IoReply::File {
                bytes: vec![b'a'; usize::from(bytes % 8)],
                size: u64::from(size).max(u64::from(bytes % 8)),
            },
            (Open::File, _) => IoReply::Failed {
                reason: "No such file".into(),
            },
            (
                Open::Asked,
                Reply::Head {
                    status,
                    retry_after,
                },
            ) => IoReply::Head {
                status: status.code(),
                retry_after: (retry_after > 0).then(|| (retry_after % 4).to_string()),
            },
            (Open::Asked, _) => IoReply::Failed {
                reason: "connection refused".into(),
            },
            (Open::Headed { .. }, Reply::Body(pieces)) if !pieces.is_empty() => {
                IoReply::Body(pieces.iter().flat_map(|p| p.bytes()).copied().collect())
            }
            (Open::Headed { .. }, Reply::Raw(bytes)) if !bytes.is_empty() => IoReply::Body(bytes),
            (Open::Headed { .. }, Reply::Failed) => IoReply::Failed {
                reason: "connection reset".into(),
            },
            (Open::Headed { .. }, _) => IoReply::End,
            // A tool's shell may answer anything: the engine copes with what makes no sense.
            (Open::Tool { reading: true }, Reply::Body(pieces)) if !pieces.is_empty() => {
                IoReply::Body(pieces.iter().flat_map(|p| p.bytes()).copied().collect())
            }
            (Open::Tool { reading: true }, Reply::Raw(bytes)) if !bytes.is_empty() => {
                IoReply::Body(bytes)
            }
            (Open::Tool { .. }, Reply::Exit { code }) => IoReply::Exit {
                code: code.map(i32::from),
            },
            (Open::Tool { .. }, Reply::Failed) => IoReply::Failed {
                reason: "outside the project".into(),
            },
            (Open::Tool { .. }, Reply::File { bytes, size }) => IoReply::File {
                bytes: vec![b'a'; usize::from(bytes % 8)],
                size: u64::from(size).max(u64::from(bytes % 8)),
            },
            (Open::Tool { .. }, Reply::Tool { diff: true }) => IoReply::Tool {
                output: "changed".into(),
                diff: Some(FileDiff {
                    path: "/w/a".into(),
                    old_text: Some("x".into()),
                    new_text: "y".into(),
                }),
            },
            (Open::Tool { .. }, _) => IoReply::Tool {
                output: "done ☃".repeat(8),
                diff: None,
            },
        };
        let tool = matches!(state, Open::Tool { .. });
        match &reply {
            IoReply::Head { .. } => {
                self.open.insert(id, Open::Headed { reading: false });
            }
            IoReply::Body(_) if tool => {
                self.open.insert(id, Open::Tool { reading: false });
            }
            IoReply::Body(_) => {
                self.open.insert(id, Open::Headed { reading: false });
            }
            IoReply::End
            | IoReply::Failed { .. }
            | IoReply::File { .. }
            | IoReply::Tool { .. }
            | IoReply::Exit { .. } => {
                self.open.remove(&id);
                self.closed.insert(id);
            }
        }
        self.engine.handle_io(id, reply, self.now);
    }

    /// Take every call the engine asks for and, unless `paused` holds session 0, every event.
    fn drain(&mut self, paused: bool) {
        for _ in 0..10_000 {
            let mut progress = false;
            while let Some(call) = self.engine.poll_io() {
                progress = true;
                self.asked(call);
            }
            let held = session_name(0);
            if let Some((session, turn, event)) =
                self.engine.poll_event_unless(&mut |s| paused && s == held)
            {
                progress = true;
                self.reported(session, turn, event);
            }
            if !progress {
                return;
            }
        }
        panic!("the engine never went quiet: a livelock");
    }

    fn asked(&mut self, call: IoCall) {
        let id = call.id();
        match call {
            IoCall::Fetch { .. } => {
                assert!(
                    !self.open.contains_key(&id) && !self.closed.contains(&id),
                    "{id:?} was fetched twice"
                );
                self.open.insert(id, Open::Asked);
            }
            IoCall::ReadAttachment { .. } => {
                assert!(!self.open.contains_key(&id) && !self.closed.contains(&id));
                self.open.insert(id, Open::File);
            }
            IoCall::Read { max, .. } => {
                assert!(max > 0, "a read of nothing");
                match self.open.get_mut(&id) {
                    Some(Open::Headed { reading } | Open::Tool { reading }) => {
                        assert!(!*reading, "a second read of {id:?} while one was out");
                        *reading = true;
                    }
                    other => panic!("a read of {id:?}, which is {other:?}"),
                }
            }
            IoCall::Tool { request, .. } => {
                assert!(!self.open.contains_key(&id) && !self.closed.contains(&id));
                let mode = self.modes.get(&request.session_id).copied();
                let changes = match &request.op {
                    ToolOp::Run { .. } => true,
                    ToolOp::Write { path, .. } => !path.starts_with(".lembas/plans/"),
                    ToolOp::Edit { .. } => true,
                    _ => false,
                };
                assert!(
                    !(changes && mode == Some(Mode::Plan)),
                    "{:?} asked of the shell in plan mode",
                    request.op
                );
                self.open.insert(id, Open::Tool { reading: false });
            }
            IoCall::Abort { .. } => {
                // Letting go of a call the shell already finished is harmless.
                self.open.remove(&id);
                self.closed.insert(id);
            }
        }
    }

    fn reported(&mut self, session: String, turn: String, event: EngineEvent) {
        let key = format!("{session}/{turn}");
        assert!(
            !self.ended.contains(&key),
            "{event:?} reported after {key} ended"
        );
        assert_eq!(
            self.running.get(&session),
            Some(&turn),
            "{event:?} reported for {key}, which is not running"
        );
        if let EngineEvent::Ask(card) = &event {
            let plan = matches!(card.ask, Ask::Plan { .. });
            let card_key = (session.clone(), card.tool_call_id.clone());
            assert!(
                !self.cards.contains_key(&card_key),
                "card {card_key:?} put twice"
            );
            self.cards.insert(card_key, (turn.clone(), plan));
        }
        if matches!(event, EngineEvent::Done(_) | EngineEvent::Failed(_)) {
            self.ended.insert(key);
            self.running.remove(&session);
            self.cards
                .retain(|(s, _), (t, _)| !(*s == session && *t == turn));
        }
    }

    /// `drained`: every event was just taken.
    fn check(&self, drained: bool) {
        // Every open call belongs to a turn not yet ended: an ended turn leaves nothing open.
        if self.running.is_empty() {
            assert!(
                self.open.is_empty(),
                "calls left open with no turn running: {:?}",
                self.open
            );
        }
        // A turn the engine ended may still have its end waiting to be taken.
        let (ours, its) = (self.running.len(), self.engine.running());
        assert!(
            its <= ours,
            "the engine counts {its} turns, {ours} are not ended"
        );
        if drained {
            assert_eq!(
                its, ours,
                "the engine counts {its} turns, {ours} are not ended"
            );
        }
    }
}

/// Any decision, of any kind of card.
fn any_decision(n: u8) -> Decision {
    match n % 12 {
        0 => Decision::Permission(PermissionDecision::AllowOnce { command: None }),
        1 => Decision::Permission(PermissionDecision::AllowOnce {
            command: Some("make y; rm z".into()),
        }),
        2 => Decision::Permission(PermissionDecision::AllowAlways),
        3 => Decision::Permission(PermissionDecision::Deny {
            feedback: Some("no".into()),
            timed_out: n & 0x80 != 0,
        }),
        4 => Decision::Question(QuestionDecision::Answered(vec![
            QuestionAnswer::Options {
                labels: vec!["l".into()],
            },
            QuestionAnswer::Skipped,
        ])),
        5 => Decision::Question(QuestionDecision::Dismissed {
            timed_out: n & 0x80 != 0,
        }),
        6 => Decision::Plan(PlanDecision::Approve {
            mode: Mode::ALL[usize::from(n >> 4) % Mode::ALL.len()],
        }),
        7 => Decision::Plan(PlanDecision::Revise {
            feedback: "smaller".into(),
        }),
        8 => Decision::Plan(PlanDecision::Dismissed { timed_out: false }),
        9 => Decision::NobodyToAsk,
        10 => Decision::Refused("too many questions".into()),
        _ => Decision::Question(QuestionDecision::Answered(Vec::new())),
    }
}
