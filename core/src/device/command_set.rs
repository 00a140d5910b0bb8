//! A session's command set on the wire: `_lembas/commands { sessionId | cwd }`, and the
//! `available_commands_update` a session's holders are sent after `session/new`, when a
//! session is opened from the store or a connection takes it up, and after a turn that changed
//! the set; a link a shared session is announced to is sent it with the announce and after a
//! turn that changed it. Every one is an event of the session like any other (issue 16): the
//! session's next seq, kept in its log. But a set announced to a link that is the one the
//! session last logged (an idle session is announced again on every link's connect) is sent as
//! that event again, its seq and bytes, and nothing is logged or written: an idle session's
//! log, store and seqs do not grow with reconnects. A link that does not hold the session
//! hears of it nothing but these, so its catch-up on it reads these alone ([`heard_unheld`]).
//! The set is read fresh each time (`Effect::ReadCommands`: the shell reads the files, bounded
//! and confined; [`crate::commands`] decides the rest), so nothing of it is kept but a
//! fingerprint a session to tell a change, and the seq of the set it last logged.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::json;

use super::connection::{Connection, Connections, Phase};
use super::event_log::{notification_frame, EventView, Logged};
use super::files_search::judge_real_root;
use super::outbox::Lane;
use super::sessions::Session;
use super::{ConnId, Device, Effect};
use crate::commands::{self, CommandSet, CommandsRead};
use crate::jsonrpc::{Id, RpcError};
use crate::wire::event::seq::SeqMeta;
use crate::wire::event::update::{AvailableCommands, SessionUpdate, UpdateParams};
use crate::DeviceConfig;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CommandsParams {
    session_id: Option<String>,
    cwd: Option<String>,
}

/// A read asked of the shell, until its answer: what it is for.
#[derive(Debug)]
pub(crate) struct PendingCommands {
    /// The directory as judged (a session's, or the `cwd` given, normalized).
    root: String,
    /// Held to the roots (a link's request, or a session under the limits).
    capped: bool,
    purpose: Purpose,
}

#[derive(Debug)]
pub(crate) enum Purpose {
    /// `_lembas/commands`: answer the request.
    Method { conn: ConnId, id: Id },
    /// Tell `to` the set (a session made, opened from the store, or taken up by `to`).
    Tell { session: String, to: ConnId },
    /// Tell the link `to` the set of a terminal's session just announced to it.
    Announced { session: String, to: ConnId },
    /// A turn ended: tell the holders, and the links it is announced to, if the set changed.
    AfterTurn { session: String },
    /// A prompt's `/name` not among the built-ins: the turn waits for the set to know it.
    Prompt(super::command_prompt::Invoked),
}

/// Whether the device tells `c` of command sets: `commands` is listed on it.
pub(super) fn hears_commands(c: &Connection, config: &crate::DeviceConfig) -> bool {
    c.phase == Phase::Ready
        && super::handshake::capabilities(config, c.kind).any(|n| n == "commands")
}

/// Whether `conn` is there and the device tells it of command sets.
fn hears(conns: &Connections, conn: &ConnId, config: &DeviceConfig) -> bool {
    conns.get(conn).is_some_and(|c| hears_commands(c, config))
}

/// Who an update of a session held by `holders` goes to: of `to` alone (a holder that has
/// just taken it up) or else every holder, those that hear of sets.
fn recipients(
    holders: &BTreeSet<ConnId>,
    to: Option<ConnId>,
    conns: &Connections,
    config: &DeviceConfig,
) -> Vec<ConnId> {
    holders
        .iter()
        .filter(|c| to.is_none_or(|to| to == **c))
        .filter(|c| hears(conns, c, config))
        .copied()
        .collect()
}

/// The shell's read of `root`'s command files, asked as `request`: held to the roots when
/// `capped`, bounded by `commands.*`.
fn read_effect(request: u64, root: String, capped: bool, config: &DeviceConfig) -> Effect {
    Effect::ReadCommands {
        request,
        project: root,
        roots: if capped {
            config.remote.roots.clone()
        } else {
            Vec::new()
        },
        max_files: config.commands.max_files,
        max_file_bytes: config.commands.max_file_bytes,
    }
}

/// An `available_commands_update` of `session` listing `set`, as its event `seq`: the params
/// its log keeps, and the frame.
fn commands_update(session: &str, seq: u64, set: &CommandSet) -> (String, Vec<u8>) {
    let params = commands_params(session, SeqMeta::some(seq), set);
    let frame = notification_frame("session/update", &params);
    (params, frame)
}

impl Purpose {
    /// The lane its read waits in: a read about a session waits only for that session's
    /// writes; the method's, for every write before it.
    fn lane(&self) -> Option<Lane> {
        match self {
            Purpose::Method { .. } => None,
            Purpose::Tell { session, .. }
            | Purpose::Announced { session, .. }
            | Purpose::AfterTurn { session } => Some(Lane::of(session)),
            Purpose::Prompt(invoked) => Some(Lane::of(&invoked.session)),
        }
    }
}

/// What the shell read for `p` (or why it could not), judged under `config` as it is now: a
/// project that leads outside the roots gives no files (the caller keeps the built-ins).
fn judged(
    read: Result<CommandsRead, String>,
    p: &PendingCommands,
    config: &crate::DeviceConfig,
) -> Result<CommandSet, RpcError> {
    let read = read.map_err(|why| {
        RpcError::invalid_params(format!(
            "the commands of `{}` cannot be read: {why}",
            p.root
        ))
    })?;
    judge_real_root(&config.remote, &p.root, &read.root, p.capped)?;
    Ok(commands::build(&read, config.commands))
}

/// `_lembas/commands`' answer: the set listed, and what was left out of it, if anything.
fn listing(set: &CommandSet) -> serde_json::Value {
    let mut result = json!({ "commands": set.listed() });
    if !set.left_out.is_empty() {
        result["leftOut"] = json!(set.left_out);
    }
    result
}

impl Device {
    /// `_lembas/commands`: judged, then asked of the shell (answered once it has read).
    pub(super) fn commands_method(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: CommandsParams,
    ) -> Result<(), RpcError> {
        let (root, capped) = self.root_of(conn, p.session_id, p.cwd)?;
        self.read_commands(
            root,
            capped,
            Purpose::Method {
                conn,
                id: id.clone(),
            },
        );
        Ok(())
    }

    /// Ask the shell for the command files of `root`. The number of the request.
    pub(super) fn read_commands(&mut self, root: String, capped: bool, purpose: Purpose) -> u64 {
        let lane = purpose.lane();
        let request = self.command_reads.ask(PendingCommands {
            root: root.clone(),
            capped,
            purpose,
        });
        let effect = read_effect(request, root, capped, &self.config);
        match lane {
            Some(lane) => self.out.effect_in(lane, effect),
            None => self.out.effect(effect),
        }
        request
    }

    /// Tell `conn` session `session`'s set once read, if it hears of sets.
    pub(super) fn tell_commands(&mut self, session: &str, conn: ConnId) {
        let hears = hears(&self.conns, &conn, &self.config);
        let Some(s) = self.sessions.get(session).filter(|_| hears) else {
            return;
        };
        let (root, capped) = (s.durable.cwd.clone(), s.capped);
        let purpose = Purpose::Tell {
            session: session.to_owned(),
            to: conn,
        };
        self.read_commands(root, capped, purpose);
    }

    /// Spec: the set is sent "when a terminal's session is shared". `session` was just
    /// announced to `link`, which does not hold it: tell it the set once read, if it hears of
    /// sets and could take the session up (inside the roots; the read is held to them).
    pub(super) fn tell_announced(&mut self, session: &str, link: ConnId) {
        let hears = hears(&self.conns, &link, &self.config);
        let Some(s) = self.sessions.get(session).filter(|_| hears) else {
            return;
        };
        let root = s.durable.cwd.clone();
        if super::limits::check_directory(&self.config.remote, &root).is_err() {
            return;
        }
        let purpose = Purpose::Announced {
            session: session.to_owned(),
            to: link,
        };
        self.read_commands(root, true, purpose);
    }

    /// A turn of `session` ended: read its set again, to tell its holders (and the links it is
    /// announced to, which a local holder hearing sets always comes with) if it changed.
    pub(super) fn recheck_commands(&mut self, session: &str) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        if !recipients(&s.holders, None, &self.conns, &self.config).is_empty() {
            let (root, capped) = (s.durable.cwd.clone(), s.capped);
            let purpose = Purpose::AfterTurn {
                session: session.to_owned(),
            };
            self.read_commands(root, capped, purpose);
        }
    }

    /// The shell read a set's files (`Effect::ReadCommands`), or could not.
    pub fn handle_commands_read(
        &mut self,
        request: u64,
        read: Result<CommandsRead, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        if let Some(pending) = self.command_reads.answered(request) {
            self.commands_read(request, pending, read);
        }
        self.after_input();
    }

    fn commands_read(
        &mut self,
        request: u64,
        p: PendingCommands,
        read: Result<CommandsRead, String>,
    ) {
        // What was read, judged under the limits of this moment: a project that leads outside
        // the roots gives no files (the built-ins stay).
        let judged = judged(read, &p, &self.config);
        match p.purpose {
            Purpose::Method { conn, id } => {
                if self.conns.contains_key(&conn) {
                    self.reply(conn, &id, judged.map(|set| listing(&set)));
                }
            }
            Purpose::Tell { session, to } => {
                let set = or_builtins(judged);
                self.send_commands(&session, Some(to), &set);
            }
            Purpose::Announced { session, to } => {
                let set = or_builtins(judged);
                self.send_announced(&session, to, &set);
            }
            Purpose::AfterTurn { session } => {
                self.commands_after_turn(&session, &or_builtins(judged));
            }
            Purpose::Prompt(invoked) => {
                let set = judged.map_err(|e| e.message);
                self.command_found(request, invoked, set);
            }
        }
    }

    /// A turn of `session` ended and its set reads `set`: told to its holders, and to the links
    /// it is announced to, only if it changed.
    fn commands_after_turn(&mut self, session: &str, set: &CommandSet) {
        if !self
            .sessions
            .get(session)
            .is_some_and(|s| s.commands_changed(set))
        {
            return;
        }
        self.send_commands(session, None, set);
        // Read again for each, as with the announce: held to the roots.
        let announced = self
            .sessions
            .get(session)
            .map(|s| self.announced_links(s))
            .unwrap_or_default();
        for link in announced {
            self.tell_announced(session, link);
        }
    }

    /// An `available_commands_update` of `session` to `to`, a holder that has just taken it
    /// up, or to every holder that hears of sets. An event of the session like any other
    /// (issue 16): the session's next seq, kept in its log, so a client cut off before it
    /// fetches it with what else it missed.
    fn send_commands(&mut self, session: &str, to: Option<ConnId>, set: &CommandSet) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        s.commands_told = Some(set.fingerprint());
        let recipients = recipients(&s.holders, to, &self.conns, &self.config);
        // Told to one connection that has gone (or let go) since: nothing to say.
        if to.is_some() && recipients.is_empty() {
            return;
        }
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let (params, frame) = commands_update(session, seq, set);
        let lane = Lane::of(session);
        for conn in recipients {
            self.out.send_in(lane, conn, frame.clone());
        }
        self.log_set(session, seq, &params);
    }

    /// The set of `session` to `link`, to which it was announced: the session's next seq,
    /// kept in its log like every event of it, so the link's client follows the session and,
    /// cut off, fetches the sets it missed (without taking the session up: event_log.rs); or,
    /// unchanged since the set it last logged, that event as logged.
    fn send_announced(&mut self, session: &str, link: ConnId, set: &CommandSet) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        // Left since (the web heard so), or taken up by the link, which was told it then.
        if !self.editor_holds(s) || s.holders.contains(&link) {
            return;
        }
        if !hears(&self.conns, &link, &self.config) {
            return;
        }
        let lane = Lane::of(session);
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        // The set last logged, unchanged (an idle session is announced again on every link's
        // connect): that event again, its seq and bytes as logged, and nothing logged or
        // written. A client that heard it drops it; one that did not takes it.
        if let Some(logged) = s.logged_set() {
            if logged.params == commands_params(session, SeqMeta::some(logged.seq), set) {
                let frame = notification_frame(logged.method, &logged.params);
                self.out.send_in(lane, link, frame);
                return;
            }
        }
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let (params, frame) = commands_update(session, seq, set);
        self.out.send_in(lane, link, frame);
        self.log_set(session, seq, &params);
    }

    /// Keep the set sent about `session` with `seq` in its log, as the one it last logged.
    fn log_set(&mut self, session: &str, seq: u64, params: &str) {
        if let Some(s) = self.sessions.get_mut(session) {
            s.commands_logged = Some(seq);
        }
        self.log_event(session, seq, Logged::Update, params);
    }
}

impl Session {
    /// Whether `set` is not the one its holders were last told of: a turn's end tells them a
    /// set only when it changed.
    pub(super) fn commands_changed(&self, set: &CommandSet) -> bool {
        self.commands_told != Some(set.fingerprint())
    }

    /// The command set this session last logged, as logged, while its log vouches for it (a
    /// client following from it is not told `truncated`). Looked up in the log when this run
    /// has logged none: the session was read back, or the device restarted.
    fn logged_set(&mut self) -> Option<EventView<'_>> {
        if self.commands_logged.is_none() {
            self.commands_logged = self.events.last_vouched(heard_unheld).map(|e| e.seq);
        }
        self.events.vouched(self.commands_logged?)
    }
}

/// Whether a link that does not hold a session heard `event` of it live: a command set (sent
/// with the announce and after a turn that changed it), the one kind of event of a session a
/// link it is only announced to is sent. Nothing else of such a session is its client's to see.
pub(super) fn heard_unheld(event: &EventView<'_>) -> bool {
    #[derive(Deserialize)]
    struct Params {
        update: Update,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Update {
        session_update: String,
    }
    event.method == "session/update"
        && serde_json::from_str::<Params>(&event.params)
            .is_ok_and(|p| p.update.session_update == "available_commands_update")
}

/// The params of an `available_commands_update` of `session` listing `set`.
fn commands_params(session: &str, meta: Option<SeqMeta>, set: &CommandSet) -> String {
    serde_json::to_string(&UpdateParams {
        meta,
        session_id: session.to_owned(),
        update: SessionUpdate::AvailableCommandsUpdate(AvailableCommands {
            available_commands: set.listed(),
        }),
    })
    .expect("updates serialize")
}

/// A set that could not be read is the built-ins alone: what the device can run now.
fn or_builtins(judged: Result<CommandSet, RpcError>) -> CommandSet {
    judged.unwrap_or_else(|_| {
        commands::build(
            &CommandsRead::default(),
            crate::commands::CommandLimits::default(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Remote;
    use crate::device::ConnKind;

    #[test]
    fn a_read_about_a_session_waits_in_its_lane_and_the_methods_in_none() {
        let s = || "s".to_string();
        let method = Purpose::Method {
            conn: ConnId(1),
            id: Id::number(1),
        };
        assert_eq!(method.lane(), None);
        let about = [
            Purpose::Tell {
                session: s(),
                to: ConnId(1),
            },
            Purpose::Announced {
                session: s(),
                to: ConnId(1),
            },
            Purpose::AfterTurn { session: s() },
        ];
        for purpose in about {
            assert_eq!(purpose.lane(), Some(Lane::of("s")), "{purpose:?}");
        }
    }

    fn pending(capped: bool) -> PendingCommands {
        PendingCommands {
            root: "/w/p".into(),
            capped,
            purpose: Purpose::AfterTurn {
                session: "s".into(),
            },
        }
    }

    #[test]
    fn a_set_has_changed_unless_it_is_the_one_its_holders_were_last_told_of() {
        let builtins = or_builtins(Err(RpcError::invalid_params("unread")));
        let read = CommandsRead {
            root: "/w/p".into(),
            files: vec![commands::CommandFile {
                kind: commands::FileKind::Custom,
                name: "fix".into(),
                source: "/w/p/.agent/commands/fix.md".into(),
                text: "Fix the bug".into(),
            }],
            ..CommandsRead::default()
        };
        let custom = commands::build(&read, commands::CommandLimits::default());
        let mut s = Session::new(crate::store::SessionRecord::testing("s"), 10);
        assert!(s.commands_changed(&builtins), "never told: a change");
        s.commands_told = Some(builtins.fingerprint());
        assert!(!s.commands_changed(&builtins), "the same set again");
        assert!(s.commands_changed(&custom), "a command more");
    }

    #[test]
    fn a_read_is_judged_under_the_roots_as_they_are_now() {
        let config = DeviceConfig {
            remote: Remote::open(&["/w"]),
            ..DeviceConfig::default()
        };
        let e = judged(Err("denied".into()), &pending(false), &config).unwrap_err();
        assert_eq!(e.message, "the commands of `/w/p` cannot be read: denied");
        let read = |root: &str| {
            Ok(CommandsRead {
                root: root.into(),
                ..CommandsRead::default()
            })
        };
        let set = judged(read("/w/p"), &pending(true), &config).expect("inside the roots");
        assert_eq!(set, or_builtins(Err(e)), "no files: the built-ins");
        let e = judged(read("/elsewhere"), &pending(true), &config).unwrap_err();
        assert_eq!(
            e.message,
            "`/w/p` leads outside the device's roots (/w) through a symlink"
        );
        assert!(
            judged(read("/elsewhere"), &pending(false), &config).is_ok(),
            "not held to the roots"
        );
    }

    #[test]
    fn a_set_goes_to_the_holders_that_hear_of_sets_or_only_to_the_one_it_is_for() {
        let ready = |kind| {
            let mut c = Connection::new(kind);
            c.initialized(crate::wire::handshake::ClientSaid::default());
            c
        };
        let conns = Connections::from_iter([
            (ConnId(1), ready(ConnKind::Link)),
            (ConnId(2), Connection::new(ConnKind::Stdio)),
            (ConnId(3), ready(ConnKind::Hub)),
        ]);
        let config = DeviceConfig::default();
        // 2 has not answered `initialize`; 9 is gone.
        let holders = BTreeSet::from([ConnId(1), ConnId(2), ConnId(3), ConnId(9)]);
        let to = |to| recipients(&holders, to, &conns, &config);
        assert_eq!(to(None), vec![ConnId(1), ConnId(3)]);
        assert_eq!(to(Some(ConnId(3))), vec![ConnId(3)]);
        for not in [2, 9, 4] {
            assert_eq!(to(Some(ConnId(not))), vec![], "{not}");
        }
        assert!(recipients(&BTreeSet::new(), None, &conns, &config).is_empty());
    }

    #[test]
    fn a_read_is_held_to_the_roots_only_when_capped_and_bounded_by_the_commands_limits() {
        let mut config = DeviceConfig {
            remote: Remote::open(&["/w", "/v"]),
            ..DeviceConfig::default()
        };
        config.commands.max_files = 7;
        config.commands.max_file_bytes = 99;
        let read = |capped| read_effect(4, "/w/p".into(), capped, &config);
        let roots = |e: Effect| match e {
            Effect::ReadCommands {
                request: 4,
                project,
                roots,
                max_files: 7,
                max_file_bytes: 99,
            } if project == "/w/p" => roots,
            other => panic!("{other:?}"),
        };
        assert_eq!(roots(read(true)), vec!["/w".to_string(), "/v".into()]);
        assert!(roots(read(false)).is_empty());
    }

    #[test]
    fn an_update_is_an_event_of_the_session_at_its_seq_listing_the_set() {
        let set = or_builtins(Err(RpcError::invalid_params("none")));
        let (params, frame) = commands_update("s", 12, &set);
        let sent: serde_json::Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(
            sent,
            json!({ "jsonrpc": "2.0", "method": "session/update", "params": {
                "_meta": { "lembas": { "seq": 12 } },
                "sessionId": "s",
                "update": { "sessionUpdate": "available_commands_update",
                            "availableCommands": set.listed() } } })
        );
        assert_eq!(
            sent["params"],
            serde_json::from_str::<serde_json::Value>(&params).unwrap()
        );
    }

    #[test]
    fn the_methods_answer_lists_the_set_and_says_what_was_left_out_only_if_anything() {
        let mut set = or_builtins(Err(RpcError::invalid_params("none")));
        let listed = listing(&set);
        assert_eq!(listed["commands"], json!(set.listed()));
        assert!(listed.get("leftOut").is_none());
        set.left_out.push("`x.md` is over the limit".into());
        assert_eq!(
            listing(&set)["leftOut"],
            json!(["`x.md` is over the limit"])
        );
    }
}
