//! Every method of the protocol: who sends it, whether it is answered, and the capability that
//! gates it. Dispatch consults this table, and a test holds it against `spec/methods.json`.

use Direction::*;
use Kind::*;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodSpec {
    pub name: &'static str,
    pub direction: Direction,
    pub kind: Kind,
    /// The capability string the device must list before the method may be used; `None` for
    /// the base protocol.
    pub capability: Option<&'static str>,
}

const fn m(
    name: &'static str,
    direction: Direction,
    kind: Kind,
    capability: Option<&'static str>,
) -> MethodSpec {
    MethodSpec {
        name,
        direction,
        kind,
        capability,
    }
}

pub const METHODS: &[MethodSpec] = &[
    m("initialize", ClientToAgent, Request, None),
    m("session/new", ClientToAgent, Request, None),
    m("session/prompt", ClientToAgent, Request, None),
    m("session/set_mode", ClientToAgent, Request, None),
    m("session/cancel", ClientToAgent, Notification, None),
    m("session/update", AgentToClient, Notification, None),
    m("session/request_permission", AgentToClient, Request, None),
    m("_lembas/hello", AgentToClient, Notification, None),
    m("_lembas/event", AgentToClient, Notification, None),
    m(
        "_lembas/directories",
        ClientToAgent,
        Request,
        Some("directories"),
    ),
    m(
        "_lembas/configure",
        ClientToAgent,
        Request,
        Some("configure"),
    ),
    m("_lembas/steer", ClientToAgent, Request, Some("steer")),
    m(
        "_lembas/session/history",
        ClientToAgent,
        Request,
        Some("sessions"),
    ),
    m(
        "_lembas/session/status",
        ClientToAgent,
        Request,
        Some("status"),
    ),
    m("_lembas/jobs", ClientToAgent, Request, Some("jobs")),
    m("_lembas/job/output", ClientToAgent, Request, Some("jobs")),
    m("_lembas/job/stop", ClientToAgent, Request, Some("jobs")),
    m("_lembas/job/send", ClientToAgent, Request, Some("jobs")),
    m(
        "_lembas/job/transcript",
        ClientToAgent,
        Request,
        Some("jobs"),
    ),
    m(
        "_lembas/session/delete",
        ClientToAgent,
        Request,
        Some("delete"),
    ),
    m(
        "_lembas/session/rewind",
        ClientToAgent,
        Request,
        Some("rewind"),
    ),
    m("_lembas/show", AgentToClient, Request, Some("show")),
    m(
        "_lembas/session/compact",
        ClientToAgent,
        Request,
        Some("compact"),
    ),
    m(
        "_lembas/session/title",
        ClientToAgent,
        Request,
        Some("title"),
    ),
    m(
        "_lembas/session/announce",
        AgentToClient,
        Notification,
        Some("sessions"),
    ),
    m(
        "_lembas/session/left",
        AgentToClient,
        Notification,
        Some("sessions"),
    ),
    m(
        "_lembas/session/deleted",
        AgentToClient,
        Notification,
        Some("delete"),
    ),
    m(
        "_lembas/permission/settled",
        AgentToClient,
        Notification,
        None,
    ),
    m("_lembas/question", AgentToClient, Request, Some("ask")),
    m("_lembas/plan", AgentToClient, Request, Some("plan")),
    m(
        "_lembas/files/search",
        ClientToAgent,
        Request,
        Some("files"),
    ),
    m("_lembas/commands", ClientToAgent, Request, Some("commands")),
    m(
        "_lembas/terminal/open",
        ClientToAgent,
        Request,
        Some("terminal"),
    ),
    m(
        "_lembas/terminal/input",
        ClientToAgent,
        Notification,
        Some("terminal"),
    ),
    m(
        "_lembas/terminal/resize",
        ClientToAgent,
        Notification,
        Some("terminal"),
    ),
    m(
        "_lembas/terminal/close",
        ClientToAgent,
        Notification,
        Some("terminal"),
    ),
    m(
        "_lembas/terminal/output",
        AgentToClient,
        Notification,
        Some("terminal"),
    ),
    m(
        "_lembas/terminal/exit",
        AgentToClient,
        Notification,
        Some("terminal"),
    ),
];

/// The table's row for `name`, if the protocol has such a method.
pub fn find(name: &str) -> Option<&'static MethodSpec> {
    METHODS.iter().find(|m| m.name == name)
}
