//! The device (ACP's agent): the long-lived state of one LLeMbas CLI, and the connections that
//! come and go on it. Inputs are the `handle_*` methods, or one [`Input`] value given to
//! [`Device::handle`] (input.rs); outputs are drained with
//! [`Device::poll_output`] until `None`, then [`Device::poll_timeout`] says when to call
//! [`Device::handle_timeout`] (and [`Device::timeout_reason`] why). Every input ends in
//! `after_input` (the step for what must follow any input) and the timers live in one table
//! (timers.rs).

/// The device's connections as a concern reaches them ([`connection::Reach`]), borrowed field
/// by field so the device can lend a session (or any other field) beside it.
macro_rules! reach {
    ($device:expr) => {
        $crate::device::connection::Reach {
            conns: &mut $device.conns,
            ids: &mut $device.request_ids,
            out: &mut $device.out,
        }
    };
}

mod asked;
mod at_rest;
mod broadcast;
mod card_shape;
pub(crate) mod cards;
pub(crate) mod chunk_params;
mod chunks;
mod coalesce;
mod command_prompt;
mod command_set;
mod compaction;
pub(crate) mod connection;
mod deletes;
mod directories;
mod dispatch;
pub(crate) mod event_block;
pub(crate) mod event_log;
mod events_read;
mod files_search;
mod frecency;
mod given_context;
pub(crate) mod handlers;
mod handshake;
mod history;
mod input;
mod input_shape;
mod ledger;
mod limits;
pub(crate) mod link;
mod live;
mod log_seal;
mod mentioning;
mod models;
pub(crate) mod outbox;
mod prompt_blocks;
mod recent_pick;
mod reconfigure;
mod resolving;
mod restore;
mod review_check;
mod rewind;
mod session_acp;
mod session_events;
#[cfg(feature = "testing")]
pub(crate) mod session_fuzz;
mod session_new;
mod session_set;
pub(crate) mod sessions;
mod shared;
mod terminals;
mod timers;
mod turn_end;
mod turn_prompt;
mod turn_start;
pub(crate) mod turn_table;
mod turns;
mod undo;

use serde::Serialize;

pub use crate::liveness::CLOSE_DEAD_LINK;
pub use crate::turn::Answer;
pub use coalesce::{Burst, ChunkRun, MAX_MERGED_BYTES, MERGED_EVENTS, MERGED_UPDATES};
pub use connection::{ConnId, ConnKind};
pub use directories::{ListedDir, Listing};
pub use files_search::{FoundFile, FoundFiles};
pub use input::{Handled, Input, Refused};
pub use limits::CLOSE_HELD_OVERFLOW;
pub use link::CLOSE_PROTOCOL;
pub use recent_pick::RecentPick;
pub use reconfigure::{CLOSE_SETTINGS_CHANGED, SETTINGS_CHANGED};
pub use restore::{Unreadable, RESTARTED};
pub use terminals::ShellInfo;
pub use timers::Timer;
pub use undo::{FileKept, FilesUndone};

use crate::config::{ConfigError, DeviceConfig};
use crate::engine::EngineCommand;
use crate::jsonrpc::{self, Id, RpcError};
use crate::liveness::Beat;
use crate::rng::Rng;
use crate::shape;
use crate::store::Record;
use crate::time::{Clock, Time};
use connection::{Connection, Connections};
use link::Link;
use outbox::Outbox;
use session_set::SessionSet;

/// What the device asks of its shell.
///
/// Its serde shape is the JS API's `DeviceOutput` (`{"type": "send", "conn": 1, "frame": "..."}`).
#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Output {
    /// Send one message (a WebSocket text message, or a stdio line) on a connection.
    Send {
        conn: ConnId,
        #[serde(serialize_with = "shape::text")]
        frame: Vec<u8>,
    },
    /// Close a connection (a WebSocket close code and reason; stdio just ends).
    Close {
        conn: ConnId,
        code: u16,
        reason: String,
    },
    /// Send a WebSocket ping on the link: nothing has arrived on it for
    /// `liveness.ping_after_ms`. Report the pong (and any ping) with
    /// [`Device::handle_activity`]. Only asked for with `DeviceConfig::liveness` set; a shell
    /// that cannot ping (a browser's socket) sets it to `None` and never sees this.
    Ping { conn: ConnId },
    #[serde(serialize_with = "effect_member")]
    Effect(Effect),
    /// For the engine, not the shell: the host loop (`crate::host`) hands it over and feeds
    /// the engine's reports back with `handle_engine`. In the JS API's shape it is an effect
    /// like the others (`{"type": "effect", "effect": {"kind": "start_turn", ...}}`).
    #[serde(rename = "effect", serialize_with = "engine_member")]
    Engine(EngineCommand),
}

shape::member_fn!(effect_member, "effect", Effect);
shape::member_fn!(engine_member, "effect", EngineCommand);

/// Work for the shell beyond sending frames; each one's outcome comes back as an input.
///
/// Its serde shape is the JS API's `Effect` (`{"kind": "resolve_path", "request": 3, ...}`),
/// bytes as base64. Not `#[non_exhaustive]`, on purpose: every shell matches it in full
/// (through `host::ShellOutput`), so a new effect is a compile error where it must be performed.
#[derive(Debug, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Effect {
    /// Dial the instance link now; report `handle_open(ConnKind::Link)` or
    /// `handle_dial_failed`.
    Dial,
    /// Stop linking for good and tell the person why (never dial again in this process).
    Stop { message: String },
    /// Write these records in order, durably (one transaction, or grouped with the ones after
    /// it), then call `handle_persisted(seq)`. Frames queued after it wait until then.
    Persist { seq: u64, records: Vec<Record> },
    /// Resolve `path` on disk (symlinks followed); answer with `handle_path_resolved`.
    ResolvePath { request: u64, path: String },
    /// List `path`'s subdirectories (symlinks followed; hidden ones too): the first
    /// `max_entries` by name, each with its real path, and how many there are in all; answer
    /// with `handle_directory_listed`. `path` is inside the roots (lexically); the core judges
    /// what the shell found.
    ListDirectory {
        request: u64,
        path: String,
        max_entries: usize,
    },
    /// Read what a prompt's `@path` mentions name, confined: each path (relative to `project`,
    /// or absolute) resolved with its symlinks followed, and read only when it is inside
    /// `project`, inside `roots` when there are any, and not protected (the shell's
    /// `tools.protected`); a file's bytes (its `lines` when asked, at most `max_file_bytes`),
    /// a directory's entries (the first `max_entries` by name). Answer with
    /// `handle_mentions_read`, one read a mention, in order.
    ReadMentions {
        request: u64,
        project: String,
        roots: Vec<String>,
        mentions: Vec<crate::mentions::Mention>,
        max_file_bytes: u64,
        max_entries: usize,
    },
    /// Search the files under `root` for `query` (fuzzy; an empty query: the recent ones),
    /// from the shell's index of it (ignore-aware: gitignored and hidden entries left out,
    /// protected ones too), nudged toward `recent` (paths relative to `root`, best first): at
    /// most `limit`, best first, each relative to `root` and `/`-separated. `roots` non-empty:
    /// `root`, resolved, must be inside one of them. Answer with `handle_files_found`.
    SearchFiles {
        request: u64,
        root: String,
        roots: Vec<String>,
        query: String,
        limit: usize,
        recent: Vec<String>,
    },
    /// Read a session's command files: `<project>/.agent/commands/*.md`, then the person's
    /// (`~/.config/lembas/commands/*.md`), then skills (`<project>/.agent/skills/*/SKILL.md`,
    /// then `~/.config/lembas/skills/*/SKILL.md`), each place by name. A project's file is read
    /// only when, symlinks followed, it is inside `project`, inside `roots` when there are any,
    /// and not protected. At most `max_files` files (the rest counted, not read), none over
    /// `max_file_bytes` (named, not read). Answer with `handle_commands_read`, `project`
    /// resolved.
    ReadCommands {
        request: u64,
        project: String,
        roots: Vec<String>,
        max_files: usize,
        max_file_bytes: u64,
    },
    /// Look in git for what a `/review` would read, in `project` (the session's directory,
    /// resolved; inside `roots` when there are any, else answered with the reason) and only
    /// there (the pathspec `.`): with no `branch`, anything `git status --porcelain` lists
    /// (untracked files too); with one, anything `git diff --quiet <branch>...HEAD` finds.
    /// `branch` is one name the core let through ([`crate::review::branch_name`]: never an
    /// option or a range). Answer with `handle_changes_checked`: found, none, no repository,
    /// no such branch, or the reason git could not tell.
    CheckChanges {
        request: u64,
        project: String,
        roots: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
    },
    /// Read back a session set aside from memory: its entries in every table (its record, its
    /// `<id>/` turns and history), or none; answer with `handle_session_loaded`. It is asked
    /// for only once every persist before it is acknowledged, so the store is up to date.
    /// A read that fails is answered with `handle_session_load_failed`.
    LoadSession { request: u64, session_id: String },
    /// Read part of a session's history from the store (`Table::History`, keys
    /// `<session>/<index>`): its entries before index `before` (all when absent), newest first,
    /// as `store::HistoryPick` takes them (at most `limit`, their values within `max_bytes`
    /// but always the newest); answer with `handle_history_read`. Asked for once every persist
    /// before it is acknowledged. A read that fails is answered with the reason.
    ReadHistory {
        request: u64,
        session_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        before: Option<u64>,
        limit: usize,
        max_bytes: usize,
    },
    /// Read a set-aside session's event log alone (`Table::Events`, keys `<session>/<first
    /// seq>`): every block of it, as `store::is_event_block_of` says (`MemStore::session_events`
    /// reads it so; at most about the log's bounds, `sessions.event_log_bytes`); answer with
    /// `handle_events_read`. The session stays set aside. Asked for once every persist before
    /// it is acknowledged. A read that fails is answered with the reason.
    ReadEvents { request: u64, session_id: String },
    /// Write a prompt's attachment under the session's attachment directory; answer with
    /// `handle_attachment_written`. The turn that names it starts only once every one of its
    /// attachments is written; a failed write refuses its prompt with the reason.
    WriteAttachment {
        request: u64,
        session_id: String,
        file_name: String,
        #[serde(rename = "base64", serialize_with = "shape::base64")]
        bytes: Vec<u8>,
    },
    /// Remove the session's attachment directory (the session was deleted). Nothing comes
    /// back: the session is gone, so the core has nothing left to decide; a shell that cannot
    /// remove it says so with the reason (a leftover directory is the person's to clear).
    RemoveAttachments { session_id: String },
    /// Start the device user's login shell in a new PTY of this size, in `cwd` (resolved and
    /// inside the roots); report with `handle_terminal_opened`, then its output with
    /// `handle_terminal_output` and its end with `handle_terminal_exit`.
    OpenTerminal {
        terminal_id: String,
        cwd: String,
        cols: u16,
        rows: u16,
    },
    /// Keystrokes for the terminal's PTY.
    TerminalInput {
        terminal_id: String,
        #[serde(rename = "base64", serialize_with = "shape::base64")]
        bytes: Vec<u8>,
    },
    ResizeTerminal {
        terminal_id: String,
        cols: u16,
        rows: u16,
    },
    /// Hang the terminal up (SIGHUP to its shell's process group). Its exit is still reported
    /// (ignored when its link is gone).
    CloseTerminal { terminal_id: String },
    /// `/undo`: put back the files turn `turn_id` of the session changed, as the shell kept
    /// them when its tools wrote (undo.rs): each only while it is still what the turn left,
    /// and, its symlinks followed, inside `project` and inside `roots` when there are any; a
    /// file the turn created is removed. The shell then forgets what it kept of that turn.
    /// Answer with `handle_files_undone`.
    UndoFiles {
        request: u64,
        session_id: String,
        turn_id: String,
        project: String,
        roots: Vec<String>,
    },
}

/// Where a turn stands in its session's ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnPhase {
    Queued,
    Running,
    Done,
}

impl TurnPhase {
    fn of(state: &ledger::TurnState) -> TurnPhase {
        match state {
            ledger::TurnState::Queued => TurnPhase::Queued,
            ledger::TurnState::Running => TurnPhase::Running,
            ledger::TurnState::Done(_) => TurnPhase::Done,
        }
    }
}

/// Why a dial did not give a link. Serde: `{"type": "transient"}`, `{"type": "token_refused"}`,
/// `{"type": "unsupported", "message": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DialFailure {
    /// Unreachable, timed out, TLS failed, the server errored: try again later.
    Transient,
    /// 401 or 403 at the handshake: the token is no good.
    TokenRefused,
    /// Discovery says the server does not speak protocol 3 (the sentence to show).
    #[serde(serialize_with = "message_member")]
    Unsupported(String),
}

shape::member_fn!(message_member, "message", String);

/// A dial failure as it arrives, read in one pass (see [`crate::shape`]).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DialFailureFields {
    #[serde(rename = "type")]
    tag: DialFailureTag,
    message: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum DialFailureTag {
    Transient,
    TokenRefused,
    Unsupported,
}

impl<'de> serde::Deserialize<'de> for DialFailure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::wire::one_pass(d, "a dial failure", |f: DialFailureFields| {
            if !matches!(f.tag, DialFailureTag::Unsupported) {
                crate::wire::only(&[("message", f.message.is_some())], &[])?;
            }
            Ok(match f.tag {
                DialFailureTag::Transient => DialFailure::Transient,
                DialFailureTag::TokenRefused => DialFailure::TokenRefused,
                DialFailureTag::Unsupported => {
                    DialFailure::Unsupported(crate::wire::need(f.message, "message")?)
                }
            })
        })
    }
}

/// A call the shell should not have made (never caused by a peer's bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    UnknownConnection(ConnId),
    /// `handle_open(ConnKind::Link)` when no dial was asked for.
    NotDialing,
}

impl std::fmt::Display for Misuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misuse::UnknownConnection(c) => write!(f, "no open connection {}", c.0),
            Misuse::NotDialing => f.write_str("a link opened but no dial was asked for"),
        }
    }
}

impl std::error::Error for Misuse {}

/// One device. Single-threaded by design (it is not `Send`): one driver task owns it and
/// everything else talks to that task, so the core needs no locks.
pub struct Device {
    config: DeviceConfig,
    clock: Clock,
    rng: Rng,
    conns: Connections,
    link: Link,
    /// What the shell is asked, each change durable before the frame announcing it; in order,
    /// except that one session's frames may pass another's (outbox.rs).
    out: Outbox,
    /// The sessions: in memory (at most `sessions.max_live`), set aside in the store, being
    /// read back, and their order of last use (session_set.rs; live.rs says when).
    sessions: SessionSet,
    /// Paths the shell was asked to resolve, with what each is for.
    resolving: resolving::PathRequests,
    terminals: terminals::Terminals,
    cards: cards::Cards,
    /// Deletes made on the device not yet known to reach a client (deletes.rs).
    deletes: deletes::KeptDeletes,
    /// Attachment writes not yet answered: the session, the turn waiting for each and the
    /// attachment's name, for a refusal (turn_prompt.rs).
    writes: asked::Asked<(String, String, String)>,
    /// Mention reads not yet answered: what each was asked for (mentioning.rs).
    mention_reads: asked::Asked<mentioning::Pending>,
    /// `history` requests waiting for the shell to read the store (history.rs).
    history_reads: asked::Asked<history::PendingHistory>,
    /// `_lembas/session/events` requests on set-aside sessions waiting for the shell to read
    /// their logs (events_read.rs).
    event_reads: asked::Asked<events_read::PendingEvents>,
    /// Command sets asked of the shell, until their answers (command_set.rs).
    command_reads: asked::Asked<command_set::PendingCommands>,
    /// `/review`s' looks for changes asked of the shell, until their answers
    /// (review_check.rs).
    change_checks: asked::Asked<review_check::PendingCheck>,
    /// File searches asked of the shell, until their answers (files_search.rs).
    searches: asked::Asked<files_search::PendingSearch>,
    /// `/undo`s waiting for the shell to put files back (undo.rs).
    undos: asked::Asked<undo::PendingUndo>,
    /// The files used lately, for the `@` picker (frecency.rs).
    frecency: frecency::Frecency,
    next_steer: u64,
    /// When to look for stale ledgers next.
    next_prune: Time,
    /// The ids of the requests the device sends: never repeated, across restarts too.
    request_ids: connection::RequestIds,
    /// Every deadline, refreshed as each input ends (timers.rs).
    timers: timers::Timers,
    /// Sessions whose event log has entries the store lacks (event_log.rs).
    unflushed_logs: Vec<String>,
    /// The last persist of idle sessions' logs (event_log.rs): no more are sealed until the
    /// shell has written it.
    sealing: u64,
    /// A chunk's update and event params as they are written (chunks.rs), reused so a chunk
    /// allocates only its frames.
    chunk_params: String,
    chunk_event_params: String,
}

impl Device {
    pub fn new(config: DeviceConfig, now: Time) -> Result<Device, ConfigError> {
        config.validate()?;
        let mut device = Device {
            rng: Rng::new(config.seed),
            link: Link::new(config.backoff, config.liveness),
            config,
            clock: Clock::new(now),
            conns: Connections::default(),
            out: Outbox::default(),
            sessions: SessionSet::default(),
            resolving: Default::default(),
            terminals: Default::default(),
            cards: Default::default(),
            deletes: Default::default(),
            writes: Default::default(),
            mention_reads: Default::default(),
            history_reads: Default::default(),
            event_reads: Default::default(),
            searches: Default::default(),
            undos: Default::default(),
            command_reads: Default::default(),
            change_checks: Default::default(),
            frecency: Default::default(),
            next_steer: 0,
            next_prune: now,
            request_ids: Default::default(),
            timers: Default::default(),
            unflushed_logs: Vec::new(),
            sealing: 0,
            chunk_params: String::new(),
            chunk_event_params: String::new(),
        };
        device.after_input();
        Ok(device)
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// The capabilities `initialize` lists now on a connection of `kind`: those this build has
    /// ([`crate::methods::CAPABILITIES`]) that work there under the settings. A method whose
    /// feature a connection lacks is refused by its handler with -32602 naming the rule.
    pub fn capabilities_for(&self, kind: ConnKind) -> impl Iterator<Item = &'static str> + '_ {
        handshake::capabilities(&self.config, kind)
    }

    /// Start keeping a link to the instance up: asks for a dial now.
    pub fn start_link(&mut self, now: Time) {
        self.clock.advance(now);
        self.link.start(&mut self.out);
        self.after_input();
    }

    /// A connection opened: the dialled link, or an editor on stdio. The link is greeted with
    /// `_lembas/hello` at once.
    pub fn handle_open(&mut self, kind: ConnKind, now: Time) -> Result<ConnId, Misuse> {
        let opened = self.open(kind, now);
        self.after_input();
        opened
    }

    fn open(&mut self, kind: ConnKind, now: Time) -> Result<ConnId, Misuse> {
        self.clock.advance(now);
        if kind == ConnKind::Link {
            self.link.opened(self.conns.next_id(), now)?;
        }
        let conn = self.conns.open(kind);
        if kind == ConnKind::Link {
            self.send_hello(conn);
        }
        Ok(conn)
    }

    /// The dial asked for by `Effect::Dial` failed.
    pub fn handle_dial_failed(&mut self, failure: DialFailure, now: Time) {
        self.dial_failed(failure, now);
        self.after_input();
    }

    fn dial_failed(&mut self, failure: DialFailure, now: Time) {
        let now = self.clock.advance(now);
        self.link
            .dial_failed(failure, now, &mut self.rng, &mut self.out);
    }

    /// A connection closed: by the peer (with its close code, when it sent one) or because the
    /// transport failed.
    pub fn handle_closed(
        &mut self,
        conn: ConnId,
        close_code: Option<u16>,
        now: Time,
    ) -> Result<(), Misuse> {
        let closed = self.closed(conn, close_code, now);
        self.after_input();
        closed
    }

    fn closed(&mut self, conn: ConnId, close_code: Option<u16>, now: Time) -> Result<(), Misuse> {
        let now = self.clock.advance(now);
        let c = self.let_go(conn).ok_or(Misuse::UnknownConnection(conn))?;
        // What was queued for it (behind a persist, say) has nowhere to go now.
        self.out.unqueue(conn);
        if c.kind == ConnKind::Link {
            self.link
                .closed(close_code, now, &mut self.rng, &mut self.out);
        }
        Ok(())
    }

    /// Forget a connection and everything tied to it: who hears which session, the requests
    /// sent on it, its terminals (hung up), and its unconfirmed deletes (sent again on the next
    /// link). Frames already queued for it are left to the caller.
    fn let_go(&mut self, conn: ConnId) -> Option<Connection> {
        let kind = self.conns.get(&conn)?.kind;
        let shared = self.held_by_local(conn, kind);
        let c = self.conns.remove(&conn)?;
        self.link.let_go(conn);
        // It hears nothing more, and waits for nothing.
        self.resolving.forget_connection(conn);
        self.sessions.forget_connection(conn);
        self.forget_history_reads(conn);
        self.forget_event_reads(conn);
        for session in shared {
            self.shared_lost(&session);
        }
        self.cards.forget_connection(conn);
        self.terminals.close_of(conn, &mut self.out);
        self.deletes.unconfirm(conn);
        Some(c)
    }

    /// One message arrived on a connection.
    pub fn handle_frame(&mut self, conn: ConnId, frame: &[u8], now: Time) -> Result<(), Misuse> {
        let now = self.clock.advance(now);
        if !self.conns.contains_key(&conn) {
            return Err(Misuse::UnknownConnection(conn));
        }
        self.link.heard(conn, now);
        self.on_frame(conn, frame);
        self.after_input();
        Ok(())
    }

    /// Something that is not a message arrived on a connection (a WebSocket pong or ping): the
    /// link is alive.
    pub fn handle_activity(&mut self, conn: ConnId, now: Time) -> Result<(), Misuse> {
        let now = self.clock.advance(now);
        if !self.conns.contains_key(&conn) {
            return Err(Misuse::UnknownConnection(conn));
        }
        self.link.heard(conn, now);
        self.after_input();
        Ok(())
    }

    pub fn handle_timeout(&mut self, now: Time) {
        let now = self.clock.advance(now);
        self.check_link_alive(now);
        self.expire_cards(now);
        self.prune_stale_ledgers(now);
        let confirm_ms = self.config.sessions.delete_confirm_ms;
        self.deletes.confirm(now, confirm_ms, &mut self.out);
        let batch_ms = self.config.terminals.batch_ms;
        self.terminals.flush(now, batch_ms, &mut self.out);
        self.link.redial_if_due(now, &mut self.out);
        self.after_input();
    }

    /// The shell wrote every record up to `Effect::Persist { seq }` durably.
    pub fn handle_persisted(&mut self, seq: u64, now: Time) {
        self.clock.advance(now);
        self.out.acked(seq);
        self.after_input();
    }

    /// The step that ends every input (each `handle_*`, `start_link`, `reconfigure`,
    /// `delete_session`), so that work which must follow any input is never left to a call
    /// site that remembered it: kept deletes go to a link that may hear them (after its
    /// `initialize`), a restart for new settings goes once nothing holds it (behind them), and
    /// the timer table is refreshed from the state the input left; event logs gathered enough are
    /// written.
    fn after_input(&mut self) {
        self.flush_event_logs();
        self.after_chunk();
    }

    /// [`Self::after_input`] for an input that ends no turn and goes idle nowhere (an engine's
    /// text chunk): no session's event log is due to be written.
    fn after_chunk(&mut self) {
        let now = self.clock.now();
        self.deletes.send_to_links(&self.conns, now, &mut self.out);
        self.announce_to_new_links();
        self.relink_if_idle();
        self.timers = self.current_timers();
    }

    /// The next output. Persist effects leave at once; everything else leaves in order, once
    /// the persists issued before it are acknowledged.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.poll()
    }

    /// The connections open now, and their kinds.
    pub fn connections(&self) -> impl Iterator<Item = (ConnId, ConnKind)> + '_ {
        self.conns.iter().map(|(id, c)| (*id, c.kind))
    }

    /// The connections that hear `session`'s updates: while one of them is not reading, the
    /// host loop takes none of the session's engine events, so its turn waits (backpressure).
    pub fn holders(&self, session: &str) -> impl Iterator<Item = ConnId> + '_ {
        self.sessions
            .get(session)
            .into_iter()
            .flat_map(|s| s.holders.iter().copied())
    }

    /// What the ledger of `session` knows of `turn`: the dedup check a prompt makes (for a
    /// session in memory; one set aside answers `None` until it is named again).
    pub fn turn_state(&self, session: &str, turn: &str) -> Option<TurnPhase> {
        let state = self.sessions.get(session)?.turns.ledger().get(turn)?;
        Some(TurnPhase::of(state))
    }

    /// Sessions the device has (open or only in its store).
    pub fn session_count(&self) -> usize {
        self.sessions.count()
    }

    /// Sessions in memory now (at most `sessions.max_live`).
    pub fn live_session_count(&self) -> usize {
        self.sessions.live_len()
    }

    /// Whether the device has given up linking (4400, a refused token, an unsupported server).
    pub fn link_stopped(&self) -> bool {
        self.link.stopped()
    }

    /// Send a request of `method` to a connection if its client may receive it (test hook for
    /// the gating rules until the features that send them exist). Returns whether it was sent.
    #[cfg(any(test, feature = "testing"))]
    pub fn test_request(
        &mut self,
        conn: ConnId,
        method: &'static str,
        params: serde_json::Value,
    ) -> bool {
        let Some(c) = self.conns.get_mut(&conn).filter(|c| c.may_receive(method)) else {
            return false;
        };
        let id = self.request_ids.next();
        c.expect_answer(id.clone(), method);
        self.out
            .send(conn, jsonrpc::encode_request(&id, method, &params));
        true
    }

    /// Ping a quiet link; close a silent one and dial again with the usual backoff (a
    /// reattaching client then recovers what was in flight).
    fn check_link_alive(&mut self, now: Time) {
        let Some((conn, beat, silent_ms)) = self.link.beat(now) else {
            return;
        };
        match beat {
            Beat::Nothing => {}
            Beat::Ping => self.out.ping(conn),
            Beat::Dead => {
                // Nothing queued for it can arrive now, and the close goes first.
                self.out.close_now(
                    conn,
                    CLOSE_DEAD_LINK,
                    format!("nothing arrived for {silent_ms} ms (link.dead_after_ms)"),
                );
                // The device lets go of a connection it closes (the shell reports no close).
                self.let_go(conn);
                self.link.dropped(now, &mut self.rng);
            }
        }
    }

    /// Close a connection on the device's own account, behind what is already queued for it,
    /// and let go of it at once (the shell reports no close for it). A link is dialled again
    /// after its backoff, as after any drop.
    fn close_connection(&mut self, conn: ConnId, code: u16, reason: String) {
        self.out.close(conn, code, reason);
        let Some(c) = self.let_go(conn) else { return };
        if c.kind == ConnKind::Link {
            self.link.dropped(self.clock.now(), &mut self.rng);
        }
    }

    fn reply_error(&mut self, conn: ConnId, id: &Id, error: &RpcError) {
        self.out.send(conn, jsonrpc::encode_error(Some(id), error));
    }

    /// A request's answer: its result, or its error.
    fn reply(&mut self, conn: ConnId, id: &Id, answer: Result<serde_json::Value, RpcError>) {
        match answer {
            Ok(result) => self.out.send(conn, jsonrpc::encode_result(id, &result)),
            Err(e) => self.reply_error(conn, id, &e),
        }
    }
}
