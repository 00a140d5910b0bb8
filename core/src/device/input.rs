//! Every input a device takes, as one type, and the one place that routes it
//! ([`Device::handle`]). The `handle_*` methods are the typed entry points a shell calls; an
//! [`Input`] is the same call as a value, which is what the conformance transcripts, the JS
//! class's `handle` and the test harnesses speak, so the vocabulary is written once. Its serde
//! shape (the transcripts') is input_shape.rs.

use super::{
    ConnId, ConnKind, Device, DialFailure, FilesUndone, FoundFiles, Listing, Misuse, ShellInfo,
    Unreadable,
};
use crate::config::{ConfigError, Model, Remote};
use crate::engine::EngineEvent;
use crate::mentions::MentionRead;
use crate::store::Entry;
use crate::time::Time;

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
    /// `directory_listed {request, listing | error}`: the answer to a `list_directory` effect.
    DirectoryListed {
        request: u64,
        listed: Result<Listing, String>,
    },
    /// `mentions_read {request, read | error}`: the answer to a `read_mentions` effect, one
    /// read a mention asked, in order; `error`: none could be (a page has no disk).
    MentionsRead {
        request: u64,
        read: Result<Vec<MentionRead>, String>,
    },
    /// `files_found {request, found | error}`: the answer to a `search_files` effect.
    FilesFound {
        request: u64,
        found: Result<FoundFiles, String>,
    },
    /// `commands_read {request, read | error}`: the answer to a `read_commands` effect.
    CommandsRead {
        request: u64,
        read: Result<crate::commands::CommandsRead, String>,
    },
    /// `changes_checked {request, changes | error}`: the answer to a `check_changes` effect
    /// (`changes`: `found`, `none`, `no_repository`, `unknown_branch`, `no_disk`).
    ChangesChecked {
        request: u64,
        changes: Result<crate::review::Changes, String>,
    },
    /// `files_undone {request, undone | error}`: the answer to an `undo_files` effect.
    FilesUndone {
        request: u64,
        undone: Result<FilesUndone, String>,
    },
    /// `session_loaded {request, entries}`: the answer to a `load_session` effect.
    SessionLoaded { request: u64, entries: Vec<Entry> },
    /// `session_load_failed {request, error}`.
    SessionLoadFailed { request: u64, error: String },
    /// `history_read {request, entries | error}`: the answer to a `read_history` effect.
    HistoryRead {
        request: u64,
        read: Result<Vec<Entry>, String>,
    },
    /// `events_read {request, entries | error}`: the answer to a `read_events` effect.
    EventsRead {
        request: u64,
        read: Result<Vec<Entry>, String>,
    },
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
            Input::DirectoryListed { request, listed } => {
                self.handle_directory_listed(request, listed, now);
                Handled::Done
            }
            Input::MentionsRead { request, read } => {
                self.handle_mentions_read(request, read, now);
                Handled::Done
            }
            Input::FilesFound { request, found } => {
                self.handle_files_found(request, found, now);
                Handled::Done
            }
            Input::CommandsRead { request, read } => {
                self.handle_commands_read(request, read, now);
                Handled::Done
            }
            Input::ChangesChecked { request, changes } => {
                self.handle_changes_checked(request, changes, now);
                Handled::Done
            }
            Input::FilesUndone { request, undone } => {
                self.handle_files_undone(request, undone, now);
                Handled::Done
            }
            Input::SessionLoaded { request, entries } => {
                Handled::Unreadable(self.handle_session_loaded(request, entries, now))
            }
            Input::SessionLoadFailed { request, error } => {
                self.handle_session_load_failed(request, &error, now);
                Handled::Done
            }
            Input::HistoryRead { request, read } => {
                self.handle_history_read(request, read, now);
                Handled::Done
            }
            Input::EventsRead { request, read } => {
                self.handle_events_read(request, read, now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;

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
