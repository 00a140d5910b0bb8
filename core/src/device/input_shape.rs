//! An [`Input`]'s serde shape: the transcripts', tagged by `type` (`{"type": "start_link"}`,
//! `{"type": "open", "kind": "link"}`, `{"type": "frame", "conn": 0, "frame": "{...}"}`), read in
//! one pass like every tagged shape the core reads (see [`crate::shape`]), and written in the
//! same shape, so what records inputs (a transcript, the JS class) writes what replays them.

use base64::Engine as _;
use serde::ser::{Error as _, SerializeMap};
use serde::{Deserialize, Serialize, Serializer};

use super::input::Input;
use super::{ConnId, ConnKind, DialFailure, FilesUndone, FoundFiles, Listing, ShellInfo};
use crate::config::{Model, Remote};
use crate::engine::EngineEvent;
use crate::mentions::MentionRead;
use crate::store::Entry;
use crate::wire::{need, one_pass, only, Misfit};

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
    listing: Option<Listing>,
    read: Option<Vec<MentionRead>>,
    found: Option<FoundFiles>,
    commands: Option<crate::commands::CommandsRead>,
    changes: Option<crate::review::Changes>,
    undone: Option<FilesUndone>,
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
    DirectoryListed,
    MentionsRead,
    FilesFound,
    CommandsRead,
    ChangesChecked,
    FilesUndone,
    SessionLoaded,
    SessionLoadFailed,
    HistoryRead,
    EventsRead,
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
    fn given(&self) -> [(&'static str, bool); 25] {
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
            ("listing", self.listing.is_some()),
            ("read", self.read.is_some()),
            ("found", self.found.is_some()),
            ("commands", self.commands.is_some()),
            ("changes", self.changes.is_some()),
            ("undone", self.undone.is_some()),
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
        Tag::DirectoryListed => &["request", "listing", "error"],
        Tag::MentionsRead => &["request", "read", "error"],
        Tag::FilesFound => &["request", "found", "error"],
        Tag::CommandsRead => &["request", "commands", "error"],
        Tag::ChangesChecked => &["request", "changes", "error"],
        Tag::FilesUndone => &["request", "undone", "error"],
        Tag::SessionLoaded => &["request", "entries"],
        Tag::HistoryRead | Tag::EventsRead => &["request", "entries", "error"],
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
        Tag::DirectoryListed => Input::DirectoryListed {
            request: need(f.request, "request")?,
            listed: either(f.listing, f.error, "listing or error (exactly one)")?,
        },
        Tag::MentionsRead => Input::MentionsRead {
            request: need(f.request, "request")?,
            read: either(f.read, f.error, "read or error (exactly one)")?,
        },
        Tag::FilesFound => Input::FilesFound {
            request: need(f.request, "request")?,
            found: either(f.found, f.error, "found or error (exactly one)")?,
        },
        Tag::CommandsRead => Input::CommandsRead {
            request: need(f.request, "request")?,
            read: either(f.commands, f.error, "commands or error (exactly one)")?,
        },
        Tag::ChangesChecked => Input::ChangesChecked {
            request: need(f.request, "request")?,
            changes: either(f.changes, f.error, "changes or error (exactly one)")?,
        },
        Tag::FilesUndone => Input::FilesUndone {
            request: need(f.request, "request")?,
            undone: either(f.undone, f.error, "undone or error (exactly one)")?,
        },
        Tag::SessionLoaded => Input::SessionLoaded {
            request: need(f.request, "request")?,
            entries: need(f.entries, "entries")?,
        },
        Tag::SessionLoadFailed => Input::SessionLoadFailed {
            request: need(f.request, "request")?,
            error: need(f.error, "error")?,
        },
        Tag::HistoryRead => Input::HistoryRead {
            request: need(f.request, "request")?,
            read: either(f.entries, f.error, "entries or error (exactly one)")?,
        },
        Tag::EventsRead => Input::EventsRead {
            request: need(f.request, "request")?,
            read: either(f.entries, f.error, "entries or error (exactly one)")?,
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

impl Input {
    /// Its `type`.
    fn tag(&self) -> &'static str {
        match self {
            Input::StartLink => "start_link",
            Input::Open { .. } => "open",
            Input::DialFailed { .. } => "dial_failed",
            Input::Frame { .. } => "frame",
            Input::Activity { .. } => "activity",
            Input::Closed { .. } => "closed",
            Input::Tick => "tick",
            Input::Persisted { .. } => "persisted",
            Input::PathResolved { .. } => "path_resolved",
            Input::DirectoryListed { .. } => "directory_listed",
            Input::MentionsRead { .. } => "mentions_read",
            Input::FilesFound { .. } => "files_found",
            Input::CommandsRead { .. } => "commands_read",
            Input::ChangesChecked { .. } => "changes_checked",
            Input::FilesUndone { .. } => "files_undone",
            Input::SessionLoaded { .. } => "session_loaded",
            Input::SessionLoadFailed { .. } => "session_load_failed",
            Input::HistoryRead { .. } => "history_read",
            Input::EventsRead { .. } => "events_read",
            Input::AttachmentWritten { .. } => "attachment_written",
            Input::Engine { .. } => "engine",
            Input::TerminalOpened { .. } => "terminal_opened",
            Input::TerminalOutput { .. } => "terminal_output",
            Input::TerminalExit { .. } => "terminal_exit",
            Input::Reconfigure { .. } => "reconfigure",
            Input::Models { .. } => "models",
            Input::DeleteSession { .. } => "delete_session",
        }
    }
}

/// The shape [`Input`]'s `Deserialize` reads: `type`, then the members of that input. A frame
/// that is not UTF-8 cannot be written as the text the shape has, and is refused.
impl Serialize for Input {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.tag())?;
        match self {
            Input::StartLink | Input::Tick => {}
            Input::Open { kind } => m.serialize_entry("kind", kind)?,
            Input::DialFailed { failure } => m.serialize_entry("failure", failure)?,
            Input::Frame { conn, frame } => {
                let text = std::str::from_utf8(frame)
                    .map_err(|_| S::Error::custom("a frame input is not UTF-8 text"))?;
                m.serialize_entry("conn", &conn.0)?;
                m.serialize_entry("frame", text)?;
            }
            Input::Activity { conn } => m.serialize_entry("conn", &conn.0)?,
            Input::Closed { conn, code } => {
                m.serialize_entry("conn", &conn.0)?;
                m.serialize_entry("code", code)?;
            }
            Input::Persisted { seq } => m.serialize_entry("seq", seq)?,
            Input::PathResolved { request, resolved } => {
                m.serialize_entry("request", request)?;
                match resolved {
                    Ok(path) => m.serialize_entry("path", path)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::DirectoryListed { request, listed } => {
                m.serialize_entry("request", request)?;
                match listed {
                    Ok(listing) => m.serialize_entry("listing", listing)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::MentionsRead { request, read } => {
                m.serialize_entry("request", request)?;
                match read {
                    Ok(read) => m.serialize_entry("read", read)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::FilesFound { request, found } => {
                m.serialize_entry("request", request)?;
                match found {
                    Ok(found) => m.serialize_entry("found", found)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::CommandsRead { request, read } => {
                m.serialize_entry("request", request)?;
                match read {
                    Ok(read) => m.serialize_entry("commands", read)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::ChangesChecked { request, changes } => {
                m.serialize_entry("request", request)?;
                match changes {
                    Ok(changes) => m.serialize_entry("changes", changes)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::FilesUndone { request, undone } => {
                m.serialize_entry("request", request)?;
                match undone {
                    Ok(undone) => m.serialize_entry("undone", undone)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::SessionLoaded { request, entries } => {
                m.serialize_entry("request", request)?;
                m.serialize_entry("entries", entries)?;
            }
            Input::SessionLoadFailed { request, error } => {
                m.serialize_entry("request", request)?;
                m.serialize_entry("error", error)?;
            }
            Input::HistoryRead { request, read } | Input::EventsRead { request, read } => {
                m.serialize_entry("request", request)?;
                match read {
                    Ok(entries) => m.serialize_entry("entries", entries)?,
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::AttachmentWritten { request, written } => {
                m.serialize_entry("request", request)?;
                if let Err(error) = written {
                    m.serialize_entry("error", error)?;
                }
            }
            Input::Engine {
                session_id,
                turn_id,
                event,
            } => {
                m.serialize_entry("sessionId", session_id)?;
                m.serialize_entry("turnId", turn_id)?;
                m.serialize_entry("event", event)?;
            }
            Input::TerminalOpened {
                terminal_id,
                started,
            } => {
                m.serialize_entry("terminalId", terminal_id)?;
                match started {
                    Ok(info) => {
                        m.serialize_entry("shell", &info.shell)?;
                        m.serialize_entry("integration", &info.integration)?;
                    }
                    Err(error) => m.serialize_entry("error", error)?,
                }
            }
            Input::TerminalOutput { terminal_id, bytes } => {
                m.serialize_entry("terminalId", terminal_id)?;
                let base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                m.serialize_entry("base64", &base64)?;
            }
            Input::TerminalExit { terminal_id, code } => {
                m.serialize_entry("terminalId", terminal_id)?;
                m.serialize_entry("code", code)?;
            }
            Input::Reconfigure { remote } => m.serialize_entry("remote", remote)?,
            Input::Models { models } => m.serialize_entry("models", models)?,
            Input::DeleteSession { session_id } => m.serialize_entry("sessionId", session_id)?,
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_pass(d, "a device input", pick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// Every variant, and each `Ok`/`Err` and present/absent form a member has.
    fn every_input() -> Vec<Input> {
        use crate::engine::StopReason;
        use crate::store::Table;
        let s = String::from;
        let remote = Remote {
            enabled: true,
            roots: vec![s("/w")],
            ..Remote::default()
        };
        vec![
            Input::StartLink,
            Input::Open {
                kind: ConnKind::Stdio,
            },
            Input::DialFailed {
                failure: DialFailure::Transient,
            },
            Input::DialFailed {
                failure: DialFailure::Unsupported(s("update the server")),
            },
            Input::Frame {
                conn: ConnId(1),
                frame: br#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#.to_vec(),
            },
            Input::Activity { conn: ConnId(2) },
            Input::Closed {
                conn: ConnId(0),
                code: Some(1008),
            },
            Input::Closed {
                conn: ConnId(0),
                code: None,
            },
            Input::Tick,
            Input::Persisted { seq: 7 },
            Input::PathResolved {
                request: 3,
                resolved: Ok(s("/w/app")),
            },
            Input::PathResolved {
                request: 3,
                resolved: Err(s("gone")),
            },
            Input::DirectoryListed {
                request: 6,
                listed: Ok(Listing {
                    path: s("/w"),
                    dirs: vec![
                        crate::device::ListedDir {
                            name: s("app"),
                            real: Ok(s("/w/app")),
                        },
                        crate::device::ListedDir {
                            name: s("gone"),
                            real: Err(s("dangling")),
                        },
                    ],
                    total: 3,
                }),
            },
            Input::DirectoryListed {
                request: 6,
                listed: Err(s("permission denied")),
            },
            Input::MentionsRead {
                request: 7,
                read: Ok(vec![
                    MentionRead::File {
                        real: s("/w/a.rs"),
                        bytes: b"fn a() {}\n".to_vec(),
                        size: 10,
                        text: true,
                        lines_total: None,
                    },
                    MentionRead::Refused {
                        reason: s("outside"),
                    },
                ]),
            },
            Input::MentionsRead {
                request: 7,
                read: Err(s("no disk")),
            },
            Input::FilesFound {
                request: 8,
                found: Ok(FoundFiles {
                    root: s("/w/app"),
                    files: vec![crate::device::FoundFile {
                        path: s("src/a.rs"),
                        kind: s("file"),
                    }],
                    indexed: 9,
                    truncated: false,
                }),
            },
            Input::FilesFound {
                request: 8,
                found: Err(s("gone")),
            },
            Input::FilesUndone {
                request: 10,
                undone: Ok(FilesUndone {
                    restored: vec![s("/w/app/a.rs")],
                    kept: vec![crate::device::FileKept {
                        path: s("/w/app/b.rs"),
                        why: s("changed since the turn"),
                    }],
                }),
            },
            Input::FilesUndone {
                request: 10,
                undone: Err(s("no disk")),
            },
            Input::CommandsRead {
                request: 9,
                read: Ok(crate::commands::CommandsRead {
                    root: s("/w/app"),
                    files: vec![crate::commands::CommandFile {
                        kind: crate::commands::FileKind::Custom,
                        name: s("fix"),
                        source: s("/w/app/.agent/commands/fix.md"),
                        text: s("Fix it"),
                    }],
                    too_large: vec![s("/w/app/.agent/commands/big.md")],
                    left_out: 2,
                }),
            },
            Input::CommandsRead {
                request: 9,
                read: Err(s("no disk")),
            },
            Input::ChangesChecked {
                request: 10,
                changes: Ok(crate::review::Changes::UnknownBranch),
            },
            Input::ChangesChecked {
                request: 10,
                changes: Err(s("git is not installed")),
            },
            Input::SessionLoaded {
                request: 4,
                entries: vec![Entry {
                    table: Table::Sessions,
                    key: s("ses_1"),
                    value: s("{}"),
                }],
            },
            Input::SessionLoadFailed {
                request: 4,
                error: s("locked"),
            },
            Input::HistoryRead {
                request: 8,
                read: Ok(vec![Entry {
                    table: Table::History,
                    key: s("ses_1/0000000000"),
                    value: s("{}"),
                }]),
            },
            Input::HistoryRead {
                request: 8,
                read: Err(s("locked")),
            },
            Input::EventsRead {
                request: 9,
                read: Ok(vec![Entry {
                    table: Table::Events,
                    key: s("ses_1/00000000000000000001"),
                    value: s("[]"),
                }]),
            },
            Input::EventsRead {
                request: 9,
                read: Err(s("locked")),
            },
            Input::AttachmentWritten {
                request: 5,
                written: Ok(()),
            },
            Input::AttachmentWritten {
                request: 5,
                written: Err(s("disk full")),
            },
            Input::Engine {
                session_id: s("ses_1"),
                turn_id: s("t1"),
                event: EngineEvent::Text(s("hi")),
            },
            Input::Engine {
                session_id: s("ses_1"),
                turn_id: s("t1"),
                event: EngineEvent::Done(StopReason::EndTurn),
            },
            Input::TerminalOpened {
                terminal_id: s("term_1"),
                started: Ok(ShellInfo {
                    shell: s("bash"),
                    integration: true,
                }),
            },
            Input::TerminalOpened {
                terminal_id: s("term_1"),
                started: Err(s("no shell")),
            },
            Input::TerminalOutput {
                terminal_id: s("term_1"),
                bytes: vec![0, 0xff, b'h', b'i'],
            },
            Input::TerminalExit {
                terminal_id: s("term_1"),
                code: -1,
            },
            Input::Reconfigure { remote },
            Input::Models {
                models: vec![Model::served("a/b")],
            },
            Input::DeleteSession {
                session_id: s("ses_1"),
            },
        ]
    }

    /// Which variant it is, by a match with no catch-all: a new input does not compile here
    /// until [`every_input`] has it too (the test below counts them).
    fn variant(i: &Input) -> usize {
        match i {
            Input::StartLink => 0,
            Input::Open { .. } => 1,
            Input::DialFailed { .. } => 2,
            Input::Frame { .. } => 3,
            Input::Activity { .. } => 4,
            Input::Closed { .. } => 5,
            Input::Tick => 6,
            Input::Persisted { .. } => 7,
            Input::PathResolved { .. } => 8,
            Input::SessionLoaded { .. } => 9,
            Input::SessionLoadFailed { .. } => 10,
            Input::AttachmentWritten { .. } => 11,
            Input::Engine { .. } => 12,
            Input::TerminalOpened { .. } => 13,
            Input::TerminalOutput { .. } => 14,
            Input::TerminalExit { .. } => 15,
            Input::Reconfigure { .. } => 16,
            Input::Models { .. } => 17,
            Input::DeleteSession { .. } => 18,
            Input::DirectoryListed { .. } => 19,
            Input::MentionsRead { .. } => 20,
            Input::HistoryRead { .. } => 21,
            Input::FilesFound { .. } => 22,
            Input::CommandsRead { .. } => 23,
            Input::ChangesChecked { .. } => 24,
            Input::FilesUndone { .. } => 25,
            Input::EventsRead { .. } => 26,
        }
    }

    #[test]
    fn every_input_writes_the_shape_it_is_read_from() {
        let inputs = every_input();
        let seen: std::collections::BTreeSet<usize> = inputs.iter().map(variant).collect();
        assert_eq!(seen.len(), 27, "a variant has no sample: {seen:?}");
        for input in inputs {
            let text = serde_json::to_string(&input).unwrap();
            let back: Input = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back, input, "{text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["type"], input.tag(), "{text}");
        }
        // The transcripts' own spelling, member for member.
        let closed = Input::Closed {
            conn: ConnId(0),
            code: None,
        };
        assert_eq!(
            serde_json::to_value(&closed).unwrap(),
            json!({ "type": "closed", "conn": 0, "code": null })
        );
        let output = Input::TerminalOutput {
            terminal_id: "t".into(),
            bytes: b"hi".to_vec(),
        };
        assert_eq!(
            serde_json::to_value(&output).unwrap(),
            json!({ "type": "terminal_output", "terminalId": "t", "base64": "aGk=" })
        );
    }

    #[test]
    fn a_frame_that_is_not_utf8_is_refused_when_written() {
        let bad = Input::Frame {
            conn: ConnId(0),
            frame: vec![b'{', 0xff, b'}'],
        };
        let e = serde_json::to_string(&bad).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
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
}
