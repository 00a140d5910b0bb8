//! Every method of the protocol, in one table: who sends it, whether it is answered, the
//! capability that gates it, the connections it works on, and how this device serves it.
//! Dispatch looks requests and notifications up here, `initialize`'s capability list is derived
//! from it, and a test holds it against `spec/methods.json`. Adding a method is a row here, a
//! handler in `device/handlers.rs`, a params type and a scenario.

use crate::device::handlers::{self as h, NotificationHandler, RequestHandler};
use Direction::*;
use Kind::*;
use On::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// LLeMbas (the web UI, or an editor) to the device.
    ClientToAgent,
    /// The device to LLeMbas.
    AgentToClient,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
}

/// The connections a method works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// The instance link and local connections (`serve --stdio`, a terminal's).
    Any,
    /// The instance link alone.
    Link,
}

/// How this build serves a method.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Serve {
    /// A client's request, answered by this handler.
    Request(RequestHandler),
    /// A client's notification, acted on by this handler.
    Notification(NotificationHandler),
    /// One the device sends.
    Sends,
    /// Not in this build: a request of it is answered -32601.
    No,
}

#[derive(Clone, Copy, Debug)]
pub struct MethodSpec {
    pub name: &'static str,
    pub direction: Direction,
    pub kind: Kind,
    /// The capability string the device must list before the method may be used; `None` for
    /// the base protocol.
    pub capability: Option<&'static str>,
    pub on: On,
    pub(crate) serve: Serve,
}

impl PartialEq for MethodSpec {
    /// Rows are equal when they say the same of the protocol; the handler is this build's.
    fn eq(&self, other: &MethodSpec) -> bool {
        (
            self.name,
            self.direction,
            self.kind,
            self.capability,
            self.on,
        ) == (
            other.name,
            other.direction,
            other.kind,
            other.capability,
            other.on,
        )
    }
}

impl Eq for MethodSpec {}

impl MethodSpec {
    /// Whether this build serves the method: handles it, or sends it.
    pub fn served(&self) -> bool {
        !matches!(self.serve, Serve::No)
    }
}

/// A client's request the device answers with `handler`.
const fn request(
    name: &'static str,
    capability: Option<&'static str>,
    on: On,
    handler: RequestHandler,
) -> MethodSpec {
    row(
        name,
        ClientToAgent,
        Request,
        capability,
        on,
        Serve::Request(handler),
    )
}

/// A client's notification the device acts on with `handler`.
const fn notification(
    name: &'static str,
    capability: Option<&'static str>,
    on: On,
    handler: NotificationHandler,
) -> MethodSpec {
    row(
        name,
        ClientToAgent,
        Notification,
        capability,
        on,
        Serve::Notification(handler),
    )
}

/// A method the device sends.
const fn sends(
    name: &'static str,
    kind: Kind,
    capability: Option<&'static str>,
    on: On,
) -> MethodSpec {
    row(name, AgentToClient, kind, capability, on, Serve::Sends)
}

/// A method of the protocol this build does not serve yet.
const fn not_yet(
    name: &'static str,
    direction: Direction,
    kind: Kind,
    capability: Option<&'static str>,
    on: On,
) -> MethodSpec {
    row(name, direction, kind, capability, on, Serve::No)
}

const fn row(
    name: &'static str,
    direction: Direction,
    kind: Kind,
    capability: Option<&'static str>,
    on: On,
    serve: Serve,
) -> MethodSpec {
    MethodSpec {
        name,
        direction,
        kind,
        capability,
        on,
        serve,
    }
}

// The order is spec/methods.json's; the fuzzer picks methods by position.
pub const METHODS: &[MethodSpec] = &[
    request("initialize", None, Any, h::initialize),
    request("session/new", None, Any, h::session_new),
    request("session/prompt", None, Any, h::prompt),
    request("session/set_mode", None, Any, h::set_mode),
    notification("session/cancel", None, Any, h::cancel),
    sends("session/update", Notification, None, Any),
    sends("session/request_permission", Request, None, Any),
    sends("_lembas/hello", Notification, None, Link),
    sends("_lembas/event", Notification, None, Any),
    not_yet(
        "_lembas/directories",
        ClientToAgent,
        Request,
        Some("directories"),
        Link,
    ),
    not_yet(
        "_lembas/configure",
        ClientToAgent,
        Request,
        Some("configure"),
        Any,
    ),
    request("_lembas/steer", Some("steer"), Any, h::steer),
    request("_lembas/session/history", Some("sessions"), Any, h::history),
    request("_lembas/session/status", Some("status"), Any, h::status),
    not_yet("_lembas/jobs", ClientToAgent, Request, Some("jobs"), Any),
    not_yet(
        "_lembas/job/output",
        ClientToAgent,
        Request,
        Some("jobs"),
        Any,
    ),
    not_yet(
        "_lembas/job/stop",
        ClientToAgent,
        Request,
        Some("jobs"),
        Any,
    ),
    not_yet(
        "_lembas/job/send",
        ClientToAgent,
        Request,
        Some("jobs"),
        Any,
    ),
    not_yet(
        "_lembas/job/transcript",
        ClientToAgent,
        Request,
        Some("jobs"),
        Any,
    ),
    request("_lembas/session/delete", Some("delete"), Any, h::delete),
    not_yet(
        "_lembas/session/rewind",
        ClientToAgent,
        Request,
        Some("rewind"),
        Any,
    ),
    not_yet("_lembas/show", AgentToClient, Request, Some("show"), Any),
    not_yet(
        "_lembas/session/compact",
        ClientToAgent,
        Request,
        Some("compact"),
        Any,
    ),
    request("_lembas/session/title", Some("title"), Any, h::title),
    not_yet(
        "_lembas/session/announce",
        AgentToClient,
        Notification,
        Some("sessions"),
        Any,
    ),
    not_yet(
        "_lembas/session/left",
        AgentToClient,
        Notification,
        Some("sessions"),
        Any,
    ),
    sends("_lembas/session/deleted", Notification, Some("delete"), Any),
    sends("_lembas/permission/settled", Notification, None, Any),
    sends("_lembas/question", Request, Some("ask"), Any),
    sends("_lembas/plan", Request, Some("plan"), Any),
    not_yet(
        "_lembas/files/search",
        ClientToAgent,
        Request,
        Some("files"),
        Any,
    ),
    not_yet(
        "_lembas/commands",
        ClientToAgent,
        Request,
        Some("commands"),
        Any,
    ),
    request(
        "_lembas/terminal/open",
        Some("terminal"),
        Link,
        h::terminal_open,
    ),
    notification(
        "_lembas/terminal/input",
        Some("terminal"),
        Link,
        h::terminal_input,
    ),
    notification(
        "_lembas/terminal/resize",
        Some("terminal"),
        Link,
        h::terminal_resize,
    ),
    notification(
        "_lembas/terminal/close",
        Some("terminal"),
        Link,
        h::terminal_close,
    ),
    sends(
        "_lembas/terminal/output",
        Notification,
        Some("terminal"),
        Link,
    ),
    sends(
        "_lembas/terminal/exit",
        Notification,
        Some("terminal"),
        Link,
    ),
];

/// The table's row for `name`, if the protocol has such a method.
pub fn find(name: &str) -> Option<&'static MethodSpec> {
    METHODS.iter().find(|m| m.name == name)
}
