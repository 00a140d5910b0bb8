//! Every method of the protocol, in one table: who sends it, whether it is answered, the
//! capability that gates it, the connections it works on, and how this device serves it.
//! Dispatch looks requests and notifications up here, `initialize`'s capability list is derived
//! from it, and a test holds it against `spec/methods.json`. Adding a method is a row here, a
//! handler in `device/handlers.rs`, a params type and a scenario; its capability is listed once
//! every request it gates is served (a new capability also gets a row in [`CAPABILITIES`]).

use crate::device::handlers::{NotificationHandler, RequestHandler};
use crate::wire::event::notice;
use Direction::*;
use Kind::*;
use NotificationHandler as N;
use On::*;
use RequestHandler as R;

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
    /// An editor's connection alone (`serve --stdio`, the hub): ACP's session surface, whose
    /// listing shows sessions the link's limits do not admit.
    Local,
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
    /// Over the link, the request waits for its session's directory to be resolved (symlinks
    /// followed) and checked again before it runs: it runs, changes or reads a session's
    /// content.
    pub dir_checked: bool,
    /// When that check refuses the session, the request runs anyway and its handler answers
    /// the refusal itself (`status` says the session exists, and no more) instead of the
    /// rule's -32602.
    pub answers_refusal: bool,
    /// Ours, beyond the spec (`beyond_spec` in spec/methods.json): a client that never asks
    /// for it sees nothing of it.
    pub beyond_spec: bool,
    /// A request naming a session set aside (past `sessions.max_live`) may be answered from
    /// what the device keeps of it while it is out (its event log's two seqs,
    /// `device::event_log::AtRest`) when that answers it, without reading it back. Every
    /// other request naming one waits until it is read back (device/live.rs `park`).
    pub at_rest: bool,
    pub(crate) serve: Serve,
}

impl PartialEq for MethodSpec {
    /// Rows are equal when they say the same of the protocol; the handler is this build's.
    fn eq(&self, other: &MethodSpec) -> bool {
        let row = |m: &MethodSpec| {
            (
                m.name,
                m.direction,
                m.kind,
                m.capability,
                m.on,
                m.dir_checked,
                m.answers_refusal,
                m.beyond_spec,
                m.at_rest,
            )
        };
        row(self) == row(other)
    }
}

impl Eq for MethodSpec {}

impl MethodSpec {
    /// The same row, its request checked against its session's directory (`dir_checked`).
    const fn checked(self) -> MethodSpec {
        MethodSpec {
            dir_checked: true,
            ..self
        }
    }

    /// The same row checked, and answering a refusal of its session itself
    /// (`answers_refusal`).
    const fn checked_answering_refusal(self) -> MethodSpec {
        MethodSpec {
            answers_refusal: true,
            ..self.checked()
        }
    }

    /// The same row, marked as our extension beyond the spec.
    const fn beyond_spec(self) -> MethodSpec {
        MethodSpec {
            beyond_spec: true,
            ..self
        }
    }

    /// The same row, answered from what a set-aside session keeps when that answers it
    /// (`at_rest`).
    const fn at_rest(self) -> MethodSpec {
        MethodSpec {
            at_rest: true,
            ..self
        }
    }

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
        dir_checked: false,
        answers_refusal: false,
        beyond_spec: false,
        at_rest: false,
        serve,
    }
}

// The order is spec/methods.json's; the fuzzer picks methods by position. Delete keeps the
// spec's own rule and cancel runs nothing: neither is `checked`; `status` is, and answers a
// refusal itself (`exists: true` alone).
#[rustfmt::skip]
pub const METHODS: &[MethodSpec] = &[
    request("initialize", None, Any, R::Initialize),
    request("session/new", None, Any, R::SessionNew),
    request("session/prompt", None, Any, R::Prompt).checked(),
    request("session/set_mode", None, Any, R::SetMode).checked(),
    notification("session/cancel", None, Any, N::Cancel),
    sends("session/update", Notification, None, Any),
    sends("session/request_permission", Request, None, Any),
    sends("_lembas/hello", Notification, None, Link),
    sends("_lembas/event", Notification, None, Any),
    request("_lembas/directories", Some("directories"), Link, R::Directories),
    request("_lembas/configure", Some("configure"), Any, R::Configure).checked(),
    request("_lembas/steer", Some("steer"), Any, R::Steer).checked(),
    request("_lembas/session/history", Some("sessions"), Any, R::History).checked(),
    request("_lembas/session/status", Some("status"), Any, R::Status).checked_answering_refusal(),
    not_yet("_lembas/jobs", ClientToAgent, Request, Some("jobs"), Any).checked(),
    not_yet("_lembas/job/output", ClientToAgent, Request, Some("jobs"), Any).checked(),
    not_yet("_lembas/job/stop", ClientToAgent, Request, Some("jobs"), Any).checked(),
    not_yet("_lembas/job/send", ClientToAgent, Request, Some("jobs"), Any).checked(),
    not_yet("_lembas/job/transcript", ClientToAgent, Request, Some("jobs"), Any).checked(),
    request("_lembas/session/delete", Some("delete"), Any, R::Delete),
    request("_lembas/session/rewind", Some("rewind"), Any, R::Rewind).checked(),
    not_yet("_lembas/show", AgentToClient, Request, Some("show"), Any),
    request("_lembas/session/compact", Some("compact"), Any, R::Compact).checked(),
    request("_lembas/session/title", Some("title"), Any, R::Title).checked(),
    sends("_lembas/session/announce", Notification, Some("sessions"), Any),
    sends("_lembas/session/left", Notification, Some("sessions"), Any),
    sends(notice::DELETED, Notification, Some("delete"), Any),
    sends(notice::SETTLED, Notification, None, Any),
    sends("_lembas/question", Request, Some("ask"), Any),
    sends("_lembas/plan", Request, Some("plan"), Any),
    request("_lembas/files/search", Some("files"), Any, R::FilesSearch).checked(),
    request("_lembas/commands", Some("commands"), Any, R::Commands).checked(),
    request("_lembas/terminal/open", Some("terminal"), Link, R::TerminalOpen),
    notification("_lembas/terminal/input", Some("terminal"), Link, N::TerminalInput),
    notification("_lembas/terminal/resize", Some("terminal"), Link, N::TerminalResize),
    notification("_lembas/terminal/close", Some("terminal"), Link, N::TerminalClose),
    sends("_lembas/terminal/output", Notification, Some("terminal"), Link),
    sends("_lembas/terminal/exit", Notification, Some("terminal"), Link),
    // Ours, beyond the spec (issue 16): a reattaching client's missed events; a new link asks
    // on every session it follows, so one set aside that missed none is not read back for it.
    request("_lembas/session/events", Some("events"), Any, R::Events).checked().beyond_spec().at_rest(),
    // ACP v1's session surface, for an editor (issue 17); `sessionCapabilities` and
    // `loadSession` in its `initialize`.
    request("session/list", None, Local, R::SessionList),
    request("session/load", None, Local, R::SessionLoad),
    request("session/resume", None, Local, R::SessionResume),
    request("session/close", None, Local, R::SessionClose),
    request("session/delete", None, Local, R::SessionDelete),
    // ACP's cancellation: a card an editor was asked, answered elsewhere or timed out.
    sends(notice::CANCEL_REQUEST, Notification, None, Any),
];

/// The table's row for `name`, if the protocol has such a method.
pub fn find(name: &str) -> Option<&'static MethodSpec> {
    METHODS.iter().find(|m| m.name == name)
}

/// What gates a capability's promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gates {
    /// The methods of [`METHODS`] that name it: built once every request among them is served
    /// (the notifications that come with them follow), and works where all of them work.
    Methods,
    /// A part of one method (a field, a block kind) that this build has: works where that
    /// method works.
    PartOf(&'static str),
}

/// The device setting a capability needs besides working on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// A store that outlives the process (`DeviceConfig::has_store`): a session id lasts.
    Store,
    /// `remote.terminal: true`.
    RemoteTerminal,
    /// Models to speak to (`DeviceConfig::models` not empty): the device is logged in to an
    /// instance that serves it some.
    Models,
}

/// One capability string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapabilitySpec {
    pub name: &'static str,
    pub gates: Gates,
    pub needs: Needs,
}

const fn cap(name: &'static str, gates: Gates, needs: Needs) -> CapabilitySpec {
    CapabilitySpec { name, gates, needs }
}

/// The capability strings, in the order `initialize` lists those that are built and work on
/// the connection under the settings. A part capability joins in the change that makes its
/// part work.
pub const CAPABILITIES: &[CapabilitySpec] = &[
    cap("sessions", Gates::Methods, Needs::Store),
    cap("status", Gates::Methods, Needs::Nothing),
    cap("turns", Gates::PartOf("session/prompt"), Needs::Nothing),
    cap("steer", Gates::Methods, Needs::Nothing),
    cap("title", Gates::Methods, Needs::Nothing),
    cap("context", Gates::PartOf("session/new"), Needs::Nothing),
    cap(
        "attachments",
        Gates::PartOf("session/prompt"),
        Needs::Nothing,
    ),
    cap("ask", Gates::Methods, Needs::Nothing),
    cap("plan", Gates::Methods, Needs::Nothing),
    cap(
        "plan_state",
        Gates::PartOf("session/update"),
        Needs::Nothing,
    ),
    cap("model", Gates::PartOf("session/new"), Needs::Models),
    cap("configure", Gates::Methods, Needs::Models),
    cap("delete", Gates::Methods, Needs::Nothing),
    // Ours, beyond the spec: `_lembas/session/events` and `_meta.lembas.seq` on events.
    cap("events", Gates::Methods, Needs::Nothing),
    cap("terminal", Gates::Methods, Needs::RemoteTerminal),
    cap(
        "shell",
        Gates::PartOf("_lembas/terminal/open"),
        Needs::RemoteTerminal,
    ),
    // Listed from the change that serves their methods.
    cap("directories", Gates::Methods, Needs::Nothing),
    cap("jobs", Gates::Methods, Needs::Nothing),
    cap("rewind", Gates::Methods, Needs::Nothing),
    cap("show", Gates::Methods, Needs::Nothing),
    cap("compact", Gates::Methods, Needs::Nothing),
    cap("files", Gates::Methods, Needs::Nothing),
    cap("commands", Gates::Methods, Needs::Nothing),
];

impl CapabilitySpec {
    /// The methods whose use it gates, or the one it is part of.
    fn methods(&self) -> impl Iterator<Item = &'static MethodSpec> + '_ {
        METHODS.iter().filter(move |m| match self.gates {
            Gates::Methods => m.capability == Some(self.name),
            Gates::PartOf(method) => m.name == method,
        })
    }

    /// Whether this build has it: every request it gates is served (a part, once listed here,
    /// is built). A capability that gates no method of the table is not.
    pub fn built(&self) -> bool {
        let mut requests = self.methods().filter(|m| m.kind == Request).peekable();
        match self.gates {
            Gates::Methods => requests.peek().is_some() && requests.all(|m| m.served()),
            Gates::PartOf(_) => self.methods().next().is_some(),
        }
    }

    /// The connections it works on: those every method it gates works on.
    pub fn on(&self) -> On {
        if self.methods().all(|m| m.on == Any) {
            Any
        } else {
            Link
        }
    }
}

/// The capability table's row for `name`.
pub fn capability(name: &str) -> Option<&'static CapabilitySpec> {
    CAPABILITIES.iter().find(|c| c.name == name)
}

/// Whether this build has capability `name`: a method it gates is answered -32601 if not.
pub fn capability_built(name: &str) -> bool {
    capability(name).is_some_and(CapabilitySpec::built)
}

/// The capabilities this build has, in listing order (what the link lists with every setting
/// on).
pub fn capabilities_built() -> impl Iterator<Item = &'static str> {
    CAPABILITIES.iter().filter(|c| c.built()).map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a reattaching client's catch-up is answered at rest: every other request naming a
    /// set-aside session needs it live (a prompt runs it, `history` reads its turns, `status`
    /// takes it up). What is kept at rest answers a page of events and nothing else, so a row
    /// marked so is a client's request, of a session, checked against its directory as any
    /// request reading a session's content.
    #[test]
    fn only_the_events_page_is_answered_from_what_a_set_aside_session_keeps() {
        let at_rest: Vec<&str> = METHODS
            .iter()
            .filter(|m| m.at_rest)
            .map(|m| m.name)
            .collect();
        assert_eq!(at_rest, ["_lembas/session/events"]);
        for m in METHODS.iter().filter(|m| m.at_rest) {
            assert_eq!(
                (m.direction, m.kind),
                (ClientToAgent, Request),
                "{}",
                m.name
            );
            assert!(m.dir_checked, "{} reads a session's content", m.name);
            assert!(matches!(m.serve, Serve::Request(_)), "{} is served", m.name);
        }
        for name in [
            "session/prompt",
            "_lembas/session/history",
            "_lembas/session/status",
        ] {
            assert!(
                !find(name).is_some_and(|m| m.at_rest),
                "{name} needs its session live"
            );
        }
    }
}
