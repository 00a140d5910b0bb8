//! Every input a client takes, as one type, and the one place that routes it
//! ([`Client::handle`]): what the conformance transcripts and the JS class's `handle` speak.
//! Serde: the transcripts' shape, tagged by `type` (`{"type": "link_up"}`,
//! `{"type": "call", "method": "session/new", "params": {...}}`), read in one pass (see
//! [`crate::shape`]; this module is in the web client's wasm, within its size budget).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{CallError, Client};
use crate::jsonrpc::{Id, RpcError};
use crate::time::Time;
use crate::wire::{need, one_pass, only, Misfit};

/// One input to a [`Client`]; each variant is the method of the same name.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Input {
    /// `link_up`: a link to the device opened.
    LinkUp,
    /// `link_down`: the link is gone.
    LinkDown,
    /// `frame {frame}`: one message from the device, as its text.
    Frame { frame: Vec<u8> },
    /// `activity`: a pong or ping on the link.
    Activity,
    /// `tick`: time passed ([`Client::handle_timeout`]).
    Tick,
    /// `call {method, params}`: send a request.
    Call { method: String, params: Value },
    /// `notify {method, params}`: send a notification.
    Notify { method: String, params: Value },
    /// `respond {id, result | error}`: answer a request the device sent.
    Respond {
        id: Id,
        outcome: Result<Value, RpcError>,
    },
    /// `prompt {sessionId, blocks, turnId?}`.
    Prompt {
        session_id: String,
        blocks: Value,
        turn_id: Option<String>,
    },
    /// `delete_session {sessionId}`.
    DeleteSession { session_id: String },
    /// `restore_pending_deletes {kept: [{sessionId, refusals?}]}`: deletes kept across a
    /// reload.
    RestorePendingDeletes { kept: Vec<(String, u32)> },
}

/// What an input gave back, for the inputs that give something.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handled {
    /// Nothing to report.
    Done,
    /// `call`: the request's id.
    Called(Id),
    /// `prompt`: the turn id.
    Prompted(String),
    /// `respond`: whether the answer was sent.
    Sent(bool),
}

impl Client {
    /// Take one input: the one place an [`Input`] is routed to its method.
    pub fn handle(&mut self, input: Input, now: Time) -> Result<Handled, CallError> {
        Ok(match input {
            Input::LinkUp => {
                self.handle_link_up(now);
                Handled::Done
            }
            Input::LinkDown => {
                self.handle_link_down(now);
                Handled::Done
            }
            Input::Frame { frame } => {
                self.handle_frame(&frame, now);
                Handled::Done
            }
            Input::Activity => {
                self.handle_activity(now);
                Handled::Done
            }
            Input::Tick => {
                self.handle_timeout(now);
                Handled::Done
            }
            Input::Call { method, params } => Handled::Called(self.call(&method, &params, now)?),
            Input::Notify { method, params } => {
                self.notify(&method, &params, now)?;
                Handled::Done
            }
            Input::Respond { id, outcome } => Handled::Sent(self.respond(&id, outcome, now)),
            Input::Prompt {
                session_id,
                blocks,
                turn_id,
            } => Handled::Prompted(self.prompt(&session_id, blocks, turn_id.as_deref(), now)?),
            Input::DeleteSession { session_id } => {
                self.delete_session(&session_id, now);
                Handled::Done
            }
            Input::RestorePendingDeletes { kept } => {
                self.restore_pending_deletes(&kept);
                Handled::Done
            }
        })
    }
}

/// Every member any input has, read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Fields {
    #[serde(rename = "type")]
    tag: Tag,
    frame: Option<String>,
    method: Option<String>,
    /// `null` is a value here (no params), not an absent member.
    #[serde(default, deserialize_with = "given")]
    params: Option<Value>,
    id: Option<Value>,
    /// `null` is a result like any other.
    #[serde(default, deserialize_with = "given")]
    result: Option<Value>,
    error: Option<RpcError>,
    session_id: Option<String>,
    blocks: Option<Value>,
    turn_id: Option<String>,
    kept: Option<Vec<Kept>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Kept {
    session_id: String,
    #[serde(default)]
    refusals: u32,
}

fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Tag {
    LinkUp,
    LinkDown,
    Frame,
    Activity,
    Tick,
    Call,
    Notify,
    Respond,
    Prompt,
    DeleteSession,
    RestorePendingDeletes,
}

fn pick(f: Fields) -> Result<Input, Misfit> {
    let takes: &[&str] = match f.tag {
        Tag::LinkUp | Tag::LinkDown | Tag::Activity | Tag::Tick => &[],
        Tag::Frame => &["frame"],
        Tag::Call | Tag::Notify => &["method", "params"],
        Tag::Respond => &["id", "result", "error"],
        Tag::Prompt => &["sessionId", "blocks", "turnId"],
        Tag::DeleteSession => &["sessionId"],
        Tag::RestorePendingDeletes => &["kept"],
    };
    only(
        &[
            ("frame", f.frame.is_some()),
            ("method", f.method.is_some()),
            ("params", f.params.is_some()),
            ("id", f.id.is_some()),
            ("result", f.result.is_some()),
            ("error", f.error.is_some()),
            ("sessionId", f.session_id.is_some()),
            ("blocks", f.blocks.is_some()),
            ("turnId", f.turn_id.is_some()),
            ("kept", f.kept.is_some()),
        ],
        takes,
    )?;
    let params = f.params.unwrap_or(Value::Null);
    Ok(match f.tag {
        Tag::LinkUp => Input::LinkUp,
        Tag::LinkDown => Input::LinkDown,
        Tag::Frame => Input::Frame {
            frame: need(f.frame, "frame")?.into_bytes(),
        },
        Tag::Activity => Input::Activity,
        Tag::Tick => Input::Tick,
        Tag::Call => Input::Call {
            method: need(f.method, "method")?,
            params,
        },
        Tag::Notify => Input::Notify {
            method: need(f.method, "method")?,
            params,
        },
        Tag::Respond => Input::Respond {
            id: match need(f.id, "id")? {
                Value::String(s) => Id::string(&s),
                Value::Number(n) => Id::number(
                    n.as_u64()
                        .ok_or(Misfit::Missing("id (a number ≥ 0 or a string)"))?,
                ),
                _ => return Err(Misfit::Missing("id (a number ≥ 0 or a string)")),
            },
            outcome: match (f.result, f.error) {
                (Some(r), None) => Ok(r),
                (None, Some(e)) => Err(e),
                _ => return Err(Misfit::Missing("result or error (exactly one)")),
            },
        },
        Tag::Prompt => Input::Prompt {
            session_id: need(f.session_id, "sessionId")?,
            blocks: need(f.blocks, "blocks")?,
            turn_id: f.turn_id,
        },
        Tag::DeleteSession => Input::DeleteSession {
            session_id: need(f.session_id, "sessionId")?,
        },
        Tag::RestorePendingDeletes => Input::RestorePendingDeletes {
            kept: need(f.kept, "kept")?
                .into_iter()
                .map(|k| (k.session_id, k.refusals))
                .collect(),
        },
    })
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a client input", pick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;
    use serde_json::json;

    fn read(v: Value) -> Result<Input, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_the_transcripts_vocabulary() {
        assert_eq!(read(json!({ "type": "link_up" })), Ok(Input::LinkUp));
        assert_eq!(
            read(json!({ "type": "respond", "id": 4, "result": null })),
            Ok(Input::Respond {
                id: Id::number(4),
                outcome: Ok(Value::Null)
            })
        );
        assert_eq!(
            read(json!({ "type": "prompt", "sessionId": "s", "blocks": [] })),
            Ok(Input::Prompt {
                session_id: "s".into(),
                blocks: json!([]),
                turn_id: None
            })
        );
        assert_eq!(
            read(json!({ "type": "restore_pending_deletes", "kept": [{ "sessionId": "s" }] })),
            Ok(Input::RestorePendingDeletes {
                kept: vec![("s".into(), 0)]
            })
        );
    }

    #[test]
    fn refuses_a_member_of_another_input_or_a_missing_one() {
        let e = read(json!({ "type": "link_up", "frame": "{}" })).unwrap_err();
        assert!(e.contains("unknown field `frame`"), "{e}");
        let e = read(json!({ "type": "respond", "id": 1 })).unwrap_err();
        assert!(e.contains("result or error"), "{e}");
        let e = read(json!({ "type": "call", "params": {} })).unwrap_err();
        assert!(e.contains("missing field `method`"), "{e}");
    }

    #[test]
    fn handle_routes_to_the_methods_and_says_what_they_gave() {
        let mut c = Client::new(ClientConfig::default(), Time::ZERO).unwrap();
        let call = Input::Call {
            method: "session/new".into(),
            params: json!({}),
        };
        assert_eq!(c.handle(call, Time::ZERO), Err(CallError::NotReady));
        let respond = Input::Respond {
            id: Id::number(1),
            outcome: Ok(Value::Null),
        };
        assert_eq!(c.handle(respond, Time::ZERO), Ok(Handled::Sent(false)));
        assert_eq!(c.handle(Input::Tick, Time::ZERO), Ok(Handled::Done));
    }
}
