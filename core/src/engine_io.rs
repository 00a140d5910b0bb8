//! What an engine asks the shell to do for it, and what comes back. An engine is sans-IO like
//! the device: the real one decides its HTTP requests to the instance and the files it reads,
//! the shell performs them and feeds the replies in ([`crate::host::Host::handle_io`]).
//!
//! The device token never enters the core: a [`IoCall::Fetch`] names a path on the instance,
//! and the shell adds the base URL and the `Authorization` header.

/// Names one call, so its replies find it. Given by the engine, unique among its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IoId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        }
    }
}

/// One thing the shell must do for the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoCall {
    /// Send a request to the instance the device is logged in to: the shell joins `path`
    /// (`/v1/chat/completions`) to the instance's base URL and adds `Authorization: Bearer`
    /// with the device token. A `Post` body is JSON. Answered by [`IoReply::Head`] once the
    /// status line and headers are in, or [`IoReply::Failed`].
    Fetch {
        id: IoId,
        method: HttpMethod,
        path: String,
        body: Vec<u8>,
    },
    /// Read the next piece of `id`'s body, at most `max` bytes: answered by [`IoReply::Body`]
    /// or [`IoReply::End`] (or `Failed`). One read is outstanding per request at a time: the
    /// shell reads the socket only when asked, so a reader who is behind holds the instance
    /// back through TCP, not through a queue that grows.
    Read { id: IoId, max: usize },
    /// Stop `id` at once (close its connection, stop reading its file). Nothing more is
    /// reported for it.
    Abort { id: IoId },
    /// Read a turn's attachment, `file_name` in the session's attachment directory (where
    /// `Effect::WriteAttachment` put it; the shell refuses a name that is not a plain file
    /// name): answered by [`IoReply::File`] with its first `max` bytes and its whole size, or
    /// `Failed`.
    ReadAttachment {
        id: IoId,
        session_id: String,
        file_name: String,
        max: u64,
    },
    /// Perform a tool the model called, on this machine, confined (see [`ToolRequest`]).
    /// Answered by [`IoReply::Tool`] (for a `read` of an image, [`IoReply::File`]), or, for
    /// [`ToolOp::Run`], by `Body` pieces to `Read`s and then [`IoReply::Exit`]; or `Failed`,
    /// whose reason is given to the model. `Abort` stops it (a command's whole process group
    /// is killed).
    Tool { id: IoId, request: Box<ToolRequest> },
}

/// A tool call to perform. Every path it names is resolved against `project` (symlinks
/// followed) and must lie inside `project`, inside one of `roots` when there are any (a
/// session opened from the link), and outside the shell's protected paths; anything else is
/// refused with the reason, and nothing is read or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRequest {
    pub session_id: String,
    /// The turn whose model called it: what a change is kept under for `/undo`.
    pub turn_id: String,
    /// The session's directory (absolute).
    pub project: String,
    /// The device's `remote.roots` for a session under the limits; empty for one that is not.
    pub roots: Vec<String>,
    pub op: ToolOp,
}

/// What a tool does. Paths are as the model gave them: relative to the project, or absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOp {
    /// Lines `first_line..` (from 1), at most `max_lines` of them and `max_bytes` in all, each
    /// numbered; an image comes back whole as `IoReply::File` (at most `max_bytes`).
    Read {
        path: String,
        first_line: u64,
        max_lines: u64,
        max_bytes: u64,
    },
    /// A directory's entries, at most `max_entries`, directories marked with a trailing `/`.
    List { path: String, max_entries: usize },
    /// Files under `path` whose relative path matches `glob`, ignore-aware, at most
    /// `max_results`.
    Find {
        path: String,
        glob: String,
        max_results: usize,
    },
    /// Lines matching the regex `pattern` in files under `path` (only those matching `glob`,
    /// when given), ignore-aware, at most `max_matches`.
    Search {
        path: String,
        pattern: String,
        glob: Option<String>,
        max_matches: usize,
    },
    /// Create or replace a file with `text` (at most `max_bytes` of the old one kept for the
    /// diff).
    Write {
        path: String,
        text: String,
        max_bytes: u64,
    },
    /// Replace the one occurrence of `old` in the file with `new`: no occurrence, or more than
    /// one, is refused (saying how many). The file is at most `max_bytes`.
    Edit {
        path: String,
        old: String,
        new: String,
        max_bytes: u64,
    },
    /// `command` through the user's shell, in the project, in a process group of its own; its
    /// output (stdout and stderr together) is read with `Read`s. The engine keeps the time and
    /// the output's bound, and `Abort`s a command past either.
    Run { command: String },
}

impl ToolOp {
    /// The path the call names, if it names one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ToolOp::Read { path, .. }
            | ToolOp::List { path, .. }
            | ToolOp::Find { path, .. }
            | ToolOp::Search { path, .. }
            | ToolOp::Write { path, .. }
            | ToolOp::Edit { path, .. } => Some(path),
            ToolOp::Run { .. } => None,
        }
    }
}

/// A file a tool changed, as ACP's `diff` content shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// Absolute, resolved.
    pub path: String,
    /// `None`: the file is new.
    pub old_text: Option<String>,
    pub new_text: String,
}

/// What came back for a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoReply {
    /// The response's status and the headers the engine reads.
    Head {
        status: u16,
        /// `Retry-After`, as sent (seconds, or an HTTP date).
        retry_after: Option<String>,
    },
    /// The next bytes of the body (never empty).
    Body(Vec<u8>),
    /// The body ended.
    End,
    /// A file read: its bytes (at most the `max` asked) and its whole size.
    File { bytes: Vec<u8>, size: u64 },
    /// The call failed: refused, reset, timed out, or a file that cannot be read. The reason
    /// names what failed, never the token.
    Failed { reason: String },
    /// A tool's result, for the model, and the change it made to a file, if any.
    Tool {
        output: String,
        diff: Option<FileDiff>,
    },
    /// A command ended: its exit code (`None`: a signal ended it).
    Exit { code: Option<i32> },
}

impl IoCall {
    pub fn id(&self) -> IoId {
        match self {
            IoCall::Fetch { id, .. }
            | IoCall::Read { id, .. }
            | IoCall::Abort { id }
            | IoCall::ReadAttachment { id, .. }
            | IoCall::Tool { id, .. } => *id,
        }
    }
}
