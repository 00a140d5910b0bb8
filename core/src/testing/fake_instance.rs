//! The instance and the machine as the model engine sees them in a `Pair`: chat completions
//! answered from a script (text, or tool calls streamed as servers send them), and tool calls
//! performed on nothing, each noted so a test can say what ran. Replies come one per `Read`, as
//! a shell's do, so the engine's backpressure is exercised as it is for real.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

use crate::engine_io::{FileDiff, IoCall, IoId, IoReply, ToolOp, ToolRequest};

/// One scripted answer of the model.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelReply {
    /// Say this, and stop.
    Text(String),
    /// Call these tools (name, arguments), and finish with `tool_calls`.
    Tools(Vec<(String, Value)>),
}

#[derive(Debug, Default)]
pub struct FakeInstance {
    /// What the model answers next, in order; once empty it says `done`.
    pub script: VecDeque<ModelReply>,
    /// Every chat request's body, in order.
    pub requests: Vec<Value>,
    /// Every tool call performed, in order.
    pub performed: Vec<ToolRequest>,
    /// Calls aborted while open (a command killed, a stream let go).
    pub aborted: Vec<IoId>,
    /// What each open call gives next, one piece per `Read`.
    open: BTreeMap<IoId, VecDeque<IoReply>>,
    ready: VecDeque<(IoId, IoReply)>,
}

impl FakeInstance {
    /// Do what the engine asked; replies wait in [`FakeInstance::poll_reply`].
    pub fn perform(&mut self, call: IoCall) {
        match call {
            IoCall::Fetch { id, body, .. } => {
                let request = serde_json::from_slice(&body).unwrap_or(Value::Null);
                self.requests.push(request);
                let reply = self
                    .script
                    .pop_front()
                    .unwrap_or_else(|| ModelReply::Text("done".into()));
                let body = sse(&reply, self.requests.len());
                self.open
                    .insert(id, [IoReply::Body(body), IoReply::End].into());
                self.ready.push_back((
                    id,
                    IoReply::Head {
                        status: 200,
                        retry_after: None,
                    },
                ));
            }
            IoCall::Read { id, .. } => {
                let next = self.open.get_mut(&id).and_then(VecDeque::pop_front);
                if self.open.get(&id).is_some_and(VecDeque::is_empty) {
                    self.open.remove(&id);
                }
                let reply = next.unwrap_or_else(|| IoReply::Failed {
                    reason: format!("no call {} is open to read", id.0),
                });
                self.ready.push_back((id, reply));
            }
            IoCall::Abort { id } => {
                if self.open.remove(&id).is_some() {
                    self.aborted.push(id);
                }
                self.ready.retain(|(i, _)| *i != id);
            }
            IoCall::ReadAttachment { id, file_name, .. } => self.ready.push_back((
                id,
                IoReply::Failed {
                    reason: format!("{file_name}: the fake instance keeps no attachments"),
                },
            )),
            IoCall::Tool { id, request } => {
                match &request.op {
                    // A command's output comes with reads, then its exit.
                    ToolOp::Run { command } => {
                        self.open.insert(
                            id,
                            [
                                IoReply::Body(format!("ran {command}\n").into_bytes()),
                                IoReply::Exit { code: Some(0) },
                            ]
                            .into(),
                        );
                    }
                    op => self.ready.push_back((id, done(&request.project, op))),
                }
                self.performed.push(*request);
            }
        }
    }

    /// The next reply to hand the engine.
    pub fn poll_reply(&mut self) -> Option<(IoId, IoReply)> {
        self.ready.pop_front()
    }

    /// Forget every open call (the process died).
    pub fn forget_all(&mut self) {
        self.open.clear();
        self.ready.clear();
    }

    /// The names of the tools performed, in order.
    pub fn performed_ops(&self) -> Vec<&'static str> {
        self.performed.iter().map(|r| op_name(&r.op)).collect()
    }
}

pub fn op_name(op: &ToolOp) -> &'static str {
    match op {
        ToolOp::Read { .. } => "read",
        ToolOp::List { .. } => "list",
        ToolOp::Find { .. } => "find",
        ToolOp::Search { .. } => "search",
        ToolOp::Write { .. } => "write",
        ToolOp::Edit { .. } => "edit",
        ToolOp::Run { .. } => "run",
    }
}

/// A tool's result on a machine where every call succeeds; a change is shown as its diff.
fn done(project: &str, op: &ToolOp) -> IoReply {
    let diff = match op {
        ToolOp::Write { path, text, .. } => Some(FileDiff {
            path: format!("{project}/{path}"),
            old_text: None,
            new_text: text.clone(),
        }),
        ToolOp::Edit { path, old, new, .. } => Some(FileDiff {
            path: format!("{project}/{path}"),
            old_text: Some(old.clone()),
            new_text: new.clone(),
        }),
        _ => None,
    };
    IoReply::Tool {
        output: format!("{} {}: done", op_name(op), op.path().unwrap_or("")),
        diff,
    }
}

/// The whole event stream of the `nth` reply, as an OpenAI-compatible server sends it (its
/// call ids unique across replies, as a server's are).
fn sse(reply: &ModelReply, nth: usize) -> Vec<u8> {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({ "object": "chat.completion.chunk",
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
    };
    let mut events = Vec::new();
    match reply {
        ModelReply::Text(text) => {
            events.push(chunk(json!({ "role": "assistant", "content": text }), None));
            events.push(chunk(json!({}), Some("stop")));
        }
        ModelReply::Tools(calls) => {
            for (index, (name, arguments)) in calls.iter().enumerate() {
                events.push(chunk(
                    json!({ "tool_calls": [{ "index": index, "id": format!("call_{nth}_{index}_{name}"),
                            "type": "function",
                            "function": { "name": name, "arguments": arguments.to_string() } }] }),
                    None,
                ));
            }
            events.push(chunk(json!({}), Some("tool_calls")));
        }
    }
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}
