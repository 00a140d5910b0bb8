//! Every input a device takes, as one type, and the one place that routes it
//! ([`Device::handle`]). The `handle_*` methods are the typed entry points a shell calls; an
//! [`Input`] is the same call as a value, which is what the conformance transcripts, the JS
//! class's `handle` and the test harnesses speak, so the vocabulary is written once.
//!
//! Serde: the transcripts' shape, tagged by `type` (`{"type": "start_link"}`,
//! `{"type": "open", "kind": "link"}`, `{"type": "frame", "conn": 0, "frame": "{...}"}`), read in
//! one pass like every tagged shape the core reads (see [`crate::shape`]).

use base64::Engine as _;
use serde::Deserialize;

use super::{ConnId, ConnKind, Device, DialFailure, Misuse, ShellInfo, Unreadable};
use crate::config::{ConfigError, Model, Remote};
use crate::engine::EngineEvent;
use crate::store::Entry;
use crate::time::Time;
use crate::wire::{need, one_pass, only, Misfit};

/// One input to a [`Device`]; each variant is the `handle_*` method of the same name.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Input {
    /// `start_link`: start keeping a link to the instance up.
    StartLink,
    /// `open {kind}`: a connection opened ([`Device::handle_open`]).
    Open { kind: ConnKind },
    /// `dial_failed {failure}`.
    DialFailed { failure: DialFailure },
    /// `frame {conn, frame}`: one message, as its text.
    Frame { conn: ConnId, frame: Vec<u8> },
    /// `activity {conn}`: a pong or ping on a connection.
    Activity { conn: ConnId },
    /// `closed {conn, code?}`: the peer's close code, `null` or absent when it sent none.
    Closed { conn: ConnId, code: Option<u16> },
    /// `tick`: time passed ([`Device::handle_timeout`]).
    Tick,
    /// `persisted {seq}`.
    Persisted { seq: u64 },
    /// `path_resolved {request, path | error}`.
    PathResolved {
        request: u64,
        resolved: Result<String, String>,
    },
    /// `session_loaded {request, entries}`: the answer to a `load_session` effect.
    SessionLoaded { request: u64, entries: Vec<Entry> },
    /// `session_load_failed {request, error}`.
    SessionLoadFailed { request: u64, error: String },
    /// `attachment_written {request, error?}`: `error` absent when it was written.
    AttachmentWritten {
        request: u64,
        written: Result<(), String>,
    },
    /// `engine {sessionId, turnId, event}`.
    Engine {
        session_id: String,
        turn_id: String,
        event: EngineEvent,
    },
    /// `terminal_opened {terminalId, shell, integration | error}`.
    TerminalOpened {
        terminal_id: String,
        started: Result<ShellInfo, String>,
    },
    /// `terminal_output {terminalId, base64}`: bytes the terminal's shell wrote.
    TerminalOutput { terminal_id: String, bytes: Vec<u8> },
    /// `terminal_exit {terminalId, code}`.
    TerminalExit { terminal_id: String, code: i32 },
    /// `reconfigure {remote}`: new `remote:` settings ([`Device::reconfigure`]).
    Reconfigure { remote: Remote },
    /// `models {models}`: the instance's model list, fetched again ([`Device::set_models`]).
    Models { models: Vec<Model> },
    /// `delete_session {sessionId}`: a delete on the device's own account.
    DeleteSession { session_id: String },
}

/// What an input gave back, for the inputs that give something.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handled {
    /// Nothing to report.
    Done,
    /// `open`: the new connection's id.
    Opened(ConnId),
    /// `delete_session`: whether there was such a session; `reconfigure` and `models`:
    /// whether anything changed.
    Changed(bool),
    /// `terminal_opened`: whether the device still wants the terminal (`false`: hang it up).
    Wanted(bool),
    /// `session_loaded`: the entries it could not read (kept out).
    Unreadable(Vec<Unreadable>),
}

/// An input the device refused: a call the shell should not have made, or settings that fail
/// validation (the old ones are kept).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    Misuse(Misuse),
    Config(ConfigError),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Misuse(m) => m.fmt(f),
            Refused::Config(c) => f.write_str(&c.0),
        }
    }
}

impl std::error::Error for Refused {}

impl Device {
    /// Take one input: the one place an [`Input`] is routed to its `handle_*` method.
    pub fn handle(&mut self, input: Input, now: Time) -> Result<Handled, Refused> {
        let done = |r: Result<(), Misuse>| r.map(|()| Handled::Done).map_err(Refused::Misuse);
        Ok(match input {
            Input::StartLink => {
                self.start_link(now);
                Handled::Done
            }
            Input::Open { kind } => {
                Handled::Opened(self.handle_open(kind, now).map_err(Refused::Misuse)?)
            }
            Input::DialFailed { failure } => {
                self.handle_dial_failed(failure, now);
                Handled::Done
            }
            Input::Frame { conn, frame } => return done(self.handle_frame(conn, &frame, now)),
            Input::Activity { conn } => return done(self.handle_activity(conn, now)),
            Input::Closed { conn, code } => return done(self.handle_closed(conn, code, now)),
            Input::Tick => {
                self.handle_timeout(now);
                Handled::Done
            }
            Input::Persisted { seq } => {
                self.handle_persisted(seq, now);
                Handled::Done
            }
            Input::PathResolved { request, resolved } => {
                self.handle_path_resolved(request, resolved, now);
                Handled::Done
            }
            Input::SessionLoaded { request, entries } => {
                Handled::Unreadable(self.handle_session_loaded(request, entries, now))
            }
            Input::SessionLoadFailed { request, error } => {
                self.handle_session_load_failed(request, &error, now);
                Handled::Done
            }
            Input::AttachmentWritten { request, written } => {
                self.handle_attachment_written(request, written, now);
                Handled::Done
            }
            Input::Engine {
                session_id,
                turn_id,
                event,
            } => {
                self.handle_engine(&session_id, &turn_id, event, now);
                Handled::Done
            }
            Input::TerminalOpened {
                terminal_id,
                started,
            } => Handled::Wanted(self.handle_terminal_opened(&terminal_id, started, now)),
            Input::TerminalOutput { terminal_id, bytes } => {
                self.handle_terminal_output(&terminal_id, &bytes, now);
                Handled::Done
            }
            Input::TerminalExit { terminal_id, code } => {
                self.handle_terminal_exit(&terminal_id, code, now);
                Handled::Done
            }
            Input::Reconfigure { remote } => {
                Handled::Changed(self.reconfigure(remote, now).map_err(Refused::Config)?)
            }
            Input::Models { models } => Handled::Changed(self.set_models(models, now)),
            Input::DeleteSession { session_id } => {
                Handled::Changed(self.delete_session(&session_id, now))
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
    kind: Option<ConnKind>,
    failure: Option<DialFailure>,
    conn: Option<u64>,
    frame: Option<String>,
    /// A close code (`closed`, may be `null`) or an exit code (`terminal_exit`).
    code: Option<i64>,
    seq: Option<u64>,
    request: Option<u64>,
    path: Option<String>,
    error: Option<String>,
    entries: Option<Vec<Entry>>,
    session_id: Option<String>,
    turn_id: Option<String>,
    event: Option<EngineEvent>,
    terminal_id: Option<String>,
    shell: Option<String>,
    integration: Option<bool>,
    base64: Option<String>,
    remote: Option<Remote>,
    models: Option<Vec<Model>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Tag {
    StartLink,
    Open,
    DialFailed,
    Frame,
    Activity,
    Closed,
    Tick,
    Persisted,
    PathResolved,
    SessionLoaded,
    SessionLoadFailed,
    AttachmentWritten,
    Engine,
    TerminalOpened,
    TerminalOutput,
    TerminalExit,
    Reconfigure,
    Models,
    DeleteSession,
}

impl Fields {
    fn given(&self) -> [(&'static str, bool); 19] {
        [
            ("kind", self.kind.is_some()),
            ("failure", self.failure.is_some()),
            ("conn", self.conn.is_some()),
            ("frame", self.frame.is_some()),
            ("code", self.code.is_some()),
            ("seq", self.seq.is_some()),
            ("request", self.request.is_some()),
            ("path", self.path.is_some()),
            ("error", self.error.is_some()),
            ("entries", self.entries.is_some()),
            ("sessionId", self.session_id.is_some()),
            ("turnId", self.turn_id.is_some()),
            ("event", self.event.is_some()),
            ("terminalId", self.terminal_id.is_some()),
            ("shell", self.shell.is_some()),
            ("integration", self.integration.is_some()),
            ("base64", self.base64.is_some()),
            ("remote", self.remote.is_some()),
            ("models", self.models.is_some()),
        ]
    }
}

/// Exactly one of `a` (`Ok`) or `b` (`Err`).
fn either<A, B>(a: Option<A>, b: Option<B>, names: &'static str) -> Result<Result<A, B>, Misfit> {
    match (a, b) {
        (Some(a), None) => Ok(Ok(a)),
        (None, Some(b)) => Ok(Err(b)),
        _ => Err(Misfit::Missing(names)),
    }
}

fn pick(f: Fields) -> Result<Input, Misfit> {
    let takes: &[&str] = match f.tag {
        Tag::StartLink | Tag::Tick => &[],
        Tag::Open => &["kind"],
        Tag::DialFailed => &["failure"],
        Tag::Frame => &["conn", "frame"],
        Tag::Activity => &["conn"],
        Tag::Closed => &["conn", "code"],
        Tag::Persisted => &["seq"],
        Tag::PathResolved => &["request", "path", "error"],
        Tag::SessionLoaded => &["request", "entries"],
        Tag::SessionLoadFailed | Tag::AttachmentWritten => &["request", "error"],
        Tag::Engine => &["sessionId", "turnId", "event"],
        Tag::TerminalOpened => &["terminalId", "shell", "integration", "error"],
        Tag::TerminalOutput => &["terminalId", "base64"],
        Tag::TerminalExit => &["terminalId", "code"],
        Tag::Reconfigure => &["remote"],
        Tag::Models => &["models"],
        Tag::DeleteSession => &["sessionId"],
    };
    only(&f.given(), takes)?;
    let conn = |c: Option<u64>| need(c, "conn").map(ConnId);
    Ok(match f.tag {
        Tag::StartLink => Input::StartLink,
        Tag::Open => Input::Open {
            kind: need(f.kind, "kind")?,
        },
        Tag::DialFailed => Input::DialFailed {
            failure: need(f.failure, "failure")?,
        },
        Tag::Frame => Input::Frame {
            conn: conn(f.conn)?,
            frame: need(f.frame, "frame")?.into_bytes(),
        },
        Tag::Activity => Input::Activity {
            conn: conn(f.conn)?,
        },
        Tag::Closed => Input::Closed {
            conn: conn(f.conn)?,
            code: match f.code {
                None => None,
                Some(c) => Some(u16::try_from(c).map_err(|_| Misfit::Missing("code (0..=65535)"))?),
            },
        },
        Tag::Tick => Input::Tick,
        Tag::Persisted => Input::Persisted {
            seq: need(f.seq, "seq")?,
        },
        Tag::PathResolved => Input::PathResolved {
            request: need(f.request, "request")?,
            resolved: either(f.path, f.error, "path or error (exactly one)")?,
        },
        Tag::SessionLoaded => Input::SessionLoaded {
            request: need(f.request, "request")?,
            entries: need(f.entries, "entries")?,
        },
        Tag::SessionLoadFailed => Input::SessionLoadFailed {
            request: need(f.request, "request")?,
            error: need(f.error, "error")?,
        },
        Tag::AttachmentWritten => Input::AttachmentWritten {
            request: need(f.request, "request")?,
            written: f.error.map_or(Ok(()), Err),
        },
        Tag::Engine => Input::Engine {
            session_id: need(f.session_id, "sessionId")?,
            turn_id: need(f.turn_id, "turnId")?,
            event: need(f.event, "event")?,
        },
        Tag::TerminalOpened => {
            let info = match (f.shell, f.integration) {
                (Some(shell), Some(integration)) => Some(ShellInfo { shell, integration }),
                (None, None) => None,
                (Some(_), None) => return Err(Misfit::Missing("integration")),
                (None, Some(_)) => return Err(Misfit::Missing("shell")),
            };
            Input::TerminalOpened {
                terminal_id: need(f.terminal_id, "terminalId")?,
                started: either(info, f.error, "shell and integration, or error")?,
            }
        }
        Tag::TerminalOutput => Input::TerminalOutput {
            terminal_id: need(f.terminal_id, "terminalId")?,
            bytes: base64::engine::general_purpose::STANDARD
                .decode(need(f.base64, "base64")?)
                .map_err(|_| Misfit::Missing("base64 (standard base64)"))?,
        },
        Tag::TerminalExit => Input::TerminalExit {
            terminal_id: need(f.terminal_id, "terminalId")?,
            code: i32::try_from(need(f.code, "code")?)
                .map_err(|_| Misfit::Missing("code (a 32-bit exit code)"))?,
        },
        Tag::Reconfigure => Input::Reconfigure {
            remote: need(f.remote, "remote")?,
        },
        Tag::Models => Input::Models {
            models: need(f.models, "models")?,
        },
        Tag::DeleteSession => Input::DeleteSession {
            session_id: need(f.session_id, "sessionId")?,
        },
    })
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a device input", pick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use serde_json::json;

    fn read(v: serde_json::Value) -> Result<Input, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_the_transcripts_vocabulary() {
        assert_eq!(read(json!({ "type": "start_link" })), Ok(Input::StartLink));
        assert_eq!(
            read(json!({ "type": "open", "kind": "link" })),
            Ok(Input::Open {
                kind: ConnKind::Link
            })
        );
        assert_eq!(
            read(json!({ "type": "frame", "conn": 2, "frame": "{}" })),
            Ok(Input::Frame {
                conn: ConnId(2),
                frame: b"{}".to_vec()
            })
        );
        assert_eq!(
            read(json!({ "type": "closed", "conn": 0, "code": null })),
            Ok(Input::Closed {
                conn: ConnId(0),
                code: None
            })
        );
        assert_eq!(
            read(json!({ "type": "path_resolved", "request": 3, "error": "gone" })),
            Ok(Input::PathResolved {
                request: 3,
                resolved: Err("gone".into())
            })
        );
        assert_eq!(
            read(json!({ "type": "terminal_output", "terminalId": "t", "base64": "aGk=" })),
            Ok(Input::TerminalOutput {
                terminal_id: "t".into(),
                bytes: b"hi".to_vec()
            })
        );
        assert_eq!(
            read(
                json!({ "type": "models", "models": [{ "id": "a/b", "instance": true,
                "vision": true, "contextLength": 8192 }] })
            ),
            Ok(Input::Models {
                models: vec![Model {
                    vision: true,
                    context_length: Some(8192),
                    ..Model::served("a/b")
                }]
            })
        );
        assert_eq!(
            read(json!({ "type": "attachment_written", "request": 1 })),
            Ok(Input::AttachmentWritten {
                request: 1,
                written: Ok(())
            })
        );
    }

    #[test]
    fn refuses_a_member_of_another_input_or_a_missing_one() {
        let e = read(json!({ "type": "tick", "conn": 1 })).unwrap_err();
        assert!(e.contains("unknown field `conn`"), "{e}");
        let e = read(json!({ "type": "frame", "conn": 1 })).unwrap_err();
        assert!(e.contains("missing field `frame`"), "{e}");
        let e = read(json!({ "type": "path_resolved", "request": 1 })).unwrap_err();
        assert!(e.contains("path or error"), "{e}");
        let e = read(json!({ "type": "closed", "conn": 1, "code": 70000 })).unwrap_err();
        assert!(e.contains("0..=65535"), "{e}");
        let e = read(json!({ "type": "fly" })).unwrap_err();
        assert!(e.contains("unknown variant `fly`"), "{e}");
    }

    #[test]
    fn handle_routes_to_the_typed_entry_points_and_says_what_they_gave() {
        let mut d = Device::new(DeviceConfig::default(), Time::ZERO).unwrap();
        assert_eq!(
            d.handle(
                Input::Open {
                    kind: ConnKind::Link
                },
                Time::ZERO
            ),
            Err(Refused::Misuse(Misuse::NotDialing))
        );
        assert_eq!(d.handle(Input::StartLink, Time::ZERO), Ok(Handled::Done));
        let opened = d.handle(
            Input::Open {
                kind: ConnKind::Link,
            },
            Time::ZERO,
        );
        assert_eq!(opened, Ok(Handled::Opened(ConnId(0))));
        assert_eq!(
            d.handle(
                Input::DeleteSession {
                    session_id: "ses_none".into()
                },
                Time::ZERO
            ),
            Ok(Handled::Changed(false))
        );
        let models = vec![Model::served("a/b")];
        for changed in [true, false] {
            let input = Input::Models {
                models: models.clone(),
            };
            assert_eq!(d.handle(input, Time::ZERO), Ok(Handled::Changed(changed)));
        }
        assert_eq!(d.config().models, models);
        assert_eq!(
            d.handle(Input::Activity { conn: ConnId(9) }, Time::ZERO),
            Err(Refused::Misuse(Misuse::UnknownConnection(ConnId(9))))
        );
    }
}
