//! What flows between the driver and the tasks around it: the [`Input`]s they feed it, the
//! [`Outgoing`] messages a connection's writer is told, and the [`Dialer`] it dials with. A
//! module of its own so the socket, stdio, outbox and terminal code depend on these types and
//! not on the driver that consumes them.

use futures_lite::future;
use lembas_core::device::{ConnId, DialFailure};
use lembas_core::store::Entry;

use crate::outbox::Sent;

/// What the driver hears from the tasks around it.
pub enum Input {
    /// A dial asked for by `Effect::Dial` ended.
    Dialed(Result<Box<crate::link::LinkSocket>, DialFailure>),
    /// One message on a connection, counted in its reader's inbound gauge until handled.
    Frame {
        conn: ConnId,
        bytes: Vec<u8>,
        held: Sent,
    },
    /// A line over its limit was skipped (stdin's, or a hub connection's).
    TooLong {
        conn: ConnId,
        size: usize,
        limit: usize,
        /// The setting that bounds it, for the refusal.
        key: &'static str,
    },
    /// A process of this user connected to the hub.
    HubAccepted(smol::net::unix::UnixStream),
    /// A ping or pong arrived on a connection: it is alive.
    Heard { conn: ConnId },
    /// A connection ended (EOF on stdin; a WebSocket closed, with its close code when it sent one).
    Closed { conn: ConnId, code: Option<u16> },
    /// stdout could not be written (the editor closed it): what was not written is lost.
    OutputLost { conn: ConnId, error: String },
    /// A group of persists is durable (or failed to be).
    Persisted {
        seq: u64,
        result: Result<(), String>,
    },
    PathResolved {
        request: u64,
        result: Result<String, String>,
    },
    /// A directory was listed (`Effect::ListDirectory`).
    DirectoryListed {
        request: u64,
        result: Result<lembas_core::device::Listing, String>,
    },
    /// A prompt's mentions were read (`Effect::ReadMentions`).
    MentionsRead {
        request: u64,
        read: Vec<lembas_core::mentions::MentionRead>,
    },
    /// A root was searched (`Effect::SearchFiles`).
    FilesFound {
        request: u64,
        found: Result<lembas_core::device::FoundFiles, String>,
    },
    /// A session's command files were read (`Effect::ReadCommands`).
    CommandsRead {
        request: u64,
        read: Result<lembas_core::commands::CommandsRead, String>,
    },
    /// A `/review` looked for changes (`Effect::CheckChanges`).
    ChangesChecked {
        request: u64,
        changes: Result<lembas_core::review::Changes, String>,
    },
    /// A turn's files were put back (`Effect::UndoFiles`).
    FilesUndone {
        request: u64,
        undone: Result<lembas_core::device::FilesUndone, String>,
    },
    /// A session set aside was read back from the store (`Effect::LoadSession`).
    SessionLoaded {
        request: u64,
        result: Result<Vec<Entry>, String>,
    },
    /// A session's history was read from the store (`Effect::ReadHistory`).
    HistoryRead {
        request: u64,
        result: Result<Vec<Entry>, String>,
    },
    /// A set-aside session's event log was read from the store (`Effect::ReadEvents`).
    EventsRead {
        request: u64,
        result: Result<Vec<Entry>, String>,
    },
    /// A terminal's shell wrote this (counted in its link's queue gauge until handed over).
    TerminalOutput {
        id: String,
        bytes: Vec<u8>,
        _held: Sent,
    },
    /// A terminal's shell ended (after all its output).
    TerminalExit { id: String, code: i32 },
    /// config.yaml was read again (see `reload`): its `remote:` block, and
    /// `remote.terminal_integration` (the runtime's own, for terminals opened from now on).
    Reconfigure {
        remote: lembas_core::Remote,
        terminal_integration: bool,
    },
    /// A reply to one of the engine's I/O calls (see `engine_io`).
    Io {
        id: lembas_core::engine_io::IoId,
        reply: lembas_core::engine_io::IoReply,
    },
    /// The instance's chat models, fetched at a dial (`GET /v1/models`).
    Models(Vec<lembas_core::config::Model>),
    /// What the instance said of the account's personalization, fetched at a dial.
    Personalization(crate::personalization::FromInstance),
    /// stdin's reader paused as asked, every line before it handed on (see `stdio`).
    StdinPaused(Box<crate::stdio::StdinReader>),
    /// A service waits for the store this `serve --stdio` holds (see `store_yield`).
    YieldAsked,
    /// Stop now (the demo's end).
    Shutdown,
}

/// What a connection's writer task is told.
pub enum Outgoing {
    /// A frame, and its count in the queue's gauge (released once written).
    Frame(Vec<u8>, Option<Sent>),
    /// The frames the driver gathered for one hand-over, in order, and their count in the
    /// gauge (all of them, released at once): one message and one token, so the writer is
    /// woken and the gauge touched by both threads once for them, not once a frame.
    Frames(Vec<Vec<u8>>, Sent),
    /// A WebSocket ping (the link has been quiet).
    Ping,
    Close {
        code: u16,
        reason: String,
    },
}

/// Something that can dial the instance (the `lembas link` dialer, or a test's).
pub trait Dialer: Send + Sync + 'static {
    fn dial(&self) -> future::Boxed<Result<Box<crate::link::LinkSocket>, DialFailure>>;
}
