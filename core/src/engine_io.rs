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
}

impl IoCall {
    pub fn id(&self) -> IoId {
        match self {
            IoCall::Fetch { id, .. }
            | IoCall::Read { id, .. }
            | IoCall::Abort { id }
            | IoCall::ReadAttachment { id, .. } => *id,
        }
    }
}
