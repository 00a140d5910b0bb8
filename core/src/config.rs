//! Limits and settings, with their defaults and the reasons for them. The runtime fills these
//! from `config.yaml`'s `remote:` block and its own knowledge of the machine.

use serde::{Deserialize, Serialize};

use crate::jsonrpc::FrameLimits;

/// The mode ladder, lowest first: a mode above `remote.max_mode` is lowered to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Plan,
    Manual,
    Edit,
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Plan, Mode::Manual, Mode::Edit, Mode::Auto];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Manual => "manual",
            Mode::Edit => "edit",
            Mode::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// This mode, lowered to `max` when above it.
    pub fn capped(self, max: Mode) -> Mode {
        self.min(max)
    }
}

/// The `remote:` block: what a client on the link may do on this device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct Remote {
    /// Remote work on at all. Off, the device still links but says `roots: []` and refuses
    /// every `session/new`.
    pub enabled: bool,
    /// Absolute directories (already resolved by the runtime) a session may be opened in.
    pub roots: Vec<String>,
    pub max_mode: Mode,
    pub require_trust: bool,
    /// How long a card waits for an answer before it is denied or dismissed.
    pub approval_timeout_ms: u64,
    pub terminal: bool,
    /// Trusted project directories (resolved), for `require_trust`.
    pub trusted: Vec<String>,
    /// The most subdirectories one `_lembas/directories` answer lists (the first by name; the
    /// answer's `error` says when more were cut).
    pub max_directory_entries: usize,
}

#[cfg(test)]
impl Remote {
    /// Remote work on in `roots`, with no trust asked: what most unit tests of a device on a
    /// link start from.
    pub(crate) fn open(roots: &[&str]) -> Remote {
        Remote {
            enabled: true,
            roots: roots.iter().map(|r| r.to_string()).collect(),
            require_trust: false,
            ..Remote::default()
        }
    }
}

impl Default for Remote {
    fn default() -> Self {
        Remote {
            enabled: false,
            roots: Vec::new(),
            // The spec's default: a client may edit, not run on its own.
            max_mode: Mode::Edit,
            require_trust: true,
            approval_timeout_ms: 300_000,
            terminal: false,
            trusted: Vec::new(),
            // A folder chooser's page; a directory with more is said to be cut.
            max_directory_entries: 1000,
        }
    }
}

impl Remote {
    /// The roots the device tells the client about: none while remote work is off.
    pub fn advertised_roots(&self) -> &[String] {
        if self.enabled {
            &self.roots
        } else {
            &[]
        }
    }
}

/// How the device redials a dropped link: exponential backoff with "equal jitter" (half the
/// delay fixed, half random), so a fleet of devices does not redial in step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct Backoff {
    pub initial_ms: u64,
    pub max_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial_ms: 1_000,
            max_ms: 60_000,
        }
    }
}

impl Backoff {
    /// The un-jittered delay before attempt `attempt` (0-based).
    pub fn ceiling(&self, attempt: u32) -> u64 {
        let factor = 1u64.checked_shl(attempt.min(32)).unwrap_or(u64::MAX);
        self.initial_ms.saturating_mul(factor).min(self.max_ms)
    }
}

/// A model the device can speak to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Model {
    /// The device's ref, which for an instance's model is its served id.
    pub id: String,
    /// Served by the instance this device is linked to (`instance` in results and events).
    #[serde(default)]
    pub instance: bool,
    /// Takes images as image parts (others get a line saying the file is there).
    #[serde(default)]
    pub vision: bool,
    /// Its context window in tokens, where `/v1/models` says it; else the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
}

impl Model {
    /// A model the linked instance serves under `id`, nothing else known of it.
    pub fn served(id: impl Into<String>) -> Model {
        Model {
            id: id.into(),
            instance: true,
            vision: false,
            context_length: None,
        }
    }
}

/// Bounds on the `@path` mentions of a prompt (`mentions:` in config.yaml), each named in the
/// notice that says what it cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct MentionLimits {
    /// Bytes read of one mentioned file (or of its lines): a text past it is cut, an image
    /// past it is not attached.
    pub max_file_bytes: u64,
    /// Entries one `@dir/` listing shows (the first by name).
    pub max_listing_entries: usize,
    /// Mentions attached from one prompt (the first in the text); the rest stay text.
    pub max_per_prompt: usize,
}

impl Default for MentionLimits {
    fn default() -> Self {
        MentionLimits {
            // The engine's own attachment bound: an image under it is seen whole.
            max_file_bytes: 1024 * 1024,
            // A directory's first screenful or so; more is said to be cut.
            max_listing_entries: 200,
            // More files than a person names in a sentence, few enough to bound a prompt's
            // reads at max_per_prompt × max_file_bytes.
            max_per_prompt: 20,
        }
    }
}

/// The `@` picker's memory (`files:` in config.yaml; the index itself is the shell's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct FileLimits {
    /// Recent files kept (over every project) to nudge `_lembas/files/search`; past it the
    /// least used lately is forgotten.
    pub max_recent: usize,
}

impl Default for FileLimits {
    fn default() -> Self {
        // A few weeks of a person's files across their projects, in one small store record.
        FileLimits { max_recent: 256 }
    }
}

/// Bounds on sessions and turns, each stated in the refusal that enforces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct SessionLimits {
    /// A prompt's content block, decoded (the spec's 10 MB), and a `_lembas/steer` message.
    pub max_block_bytes: u64,
    /// A whole prompt, decoded (the spec's 25 MB), and the steered messages waiting for a turn.
    pub max_prompt_bytes: u64,
    /// Turn ids kept per session (the spec's 200).
    pub ledger_turns: usize,
    /// Prompts waiting behind the running one, per session.
    pub max_queued: usize,
    /// A session's ledger untouched this long is pruned (the spec's 30 days).
    pub ledger_ttl_ms: u64,
    /// `_lembas/session/title`, in characters (the spec's 200).
    pub max_title_chars: usize,
    /// Steered messages waiting for the running turn.
    pub max_steer: usize,
    /// A delete made on the device is forgotten once the link it was sent on stayed up this
    /// long afterwards (a link that drops sooner may have lost it: it is sent again).
    pub delete_confirm_ms: u64,
    /// Bytes a link may send while one of its session requests waits for its directory check
    /// (symlinks resolved by the shell); they wait behind it, in order. Past it the link is
    /// closed with 1008. At least one whole frame (`frames.max_frame_bytes`).
    pub max_held_bytes: usize,
    /// Sessions kept in memory at once. Past it the least recently used idle one is set aside
    /// (it stays in the store and is read back when named again); when none can be, a
    /// `session/new` is refused.
    pub max_live: usize,
    /// Of a turn's answer (and, apart, of its reasoning), the bytes the device keeps for the
    /// session's history; the stream itself is never cut. Past it the rest is streamed and
    /// not kept, and the history's text ends saying how much was left out and naming this
    /// bound: a device's memory does not grow with an answer's length, and a history stays
    /// under the frame limit.
    pub max_answer_bytes: usize,
    /// A turn is given at most this many of the session's last finished turns as its context
    /// (`TurnStart.history`); the engine keeps what fits the model's token budget of those.
    pub max_context_turns: usize,
    /// And at most this many bytes of them (prompts and answers), newest first: a turn's
    /// start copies no more than this, however long the session's answers were.
    pub max_context_bytes: usize,
    /// The bytes of the summary `/compact` keeps (and gives the model in place of the turns
    /// it folds): past it the summary is cut at a character boundary, and the cut is said.
    pub max_summary_bytes: usize,
    /// A session's event log (`_lembas/session/events`, our extension): the bytes of its
    /// recent events the device keeps, in memory and in the store. Past it the oldest give way.
    pub event_log_bytes: usize,
    /// And at most this many events.
    pub event_log_events: usize,
    /// The events one `_lembas/session/events` answers when it names no `limit`.
    pub events_page: usize,
    /// The most it answers at once: a larger `limit` is refused naming this.
    pub max_events_page: usize,
    /// Reads of set-aside sessions' logs waiting for the store at once (a client that missed
    /// some of such a session's events is answered from its log alone, read without making the
    /// session live): one more is refused naming this. Each holds at most about one log
    /// (`event_log_bytes`) while it is answered.
    pub max_event_reads: usize,
    /// The bytes of turns one `_lembas/session/history` answers: the newest that fit, cut at a
    /// turn boundary (a single turn over it is cut, saying so), the answer saying how many
    /// older turns it left out. Well under `outbound.pause_bytes`: an answer is traffic the
    /// client asked for, so it must not be what holds a connection's queue past its mark.
    pub history_bytes: usize,
    /// The most turns one `history` answers, and what it answers with no `limit`: a larger
    /// `limit` is refused naming this.
    pub max_history_turns: usize,
    /// The `_meta.lembas` context a `session/new` or `session/prompt` gives (`system_prompt`,
    /// `personalization`, `library`, `prototypes`), in bytes of JSON. The session's record
    /// keeps it and is written at every turn, so a larger one is refused, naming this.
    pub max_meta_bytes: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_block_bytes: 10_000_000,
            max_prompt_bytes: 25_000_000,
            ledger_turns: 200,
            // Well under the ledger's size, so a waiting turn is never forgotten.
            max_queued: 32,
            ledger_ttl_ms: 30 * 24 * 60 * 60 * 1000,
            max_title_chars: 200,
            max_steer: 64,
            delete_confirm_ms: 10_000,
            // Two whole frames of the default 48 MiB: the request waits, one more may.
            max_held_bytes: 96 * 1024 * 1024,
            // A few MiB of sessions; the link's idle ones are set aside, so only busy or
            // terminal-held sessions count against it in practice.
            max_live: 1_000,
            max_answer_bytes: 4 * 1024 * 1024,
            max_context_turns: 50,
            // Two whole answers as history keeps them, and more than most models' context.
            max_context_bytes: 8 * 1024 * 1024,
            // A few pages of prose: a summary stands for many turns, and is given to the model
            // at every turn after it, so it must stay a small part of any model's context.
            max_summary_bytes: 64 * 1024,
            // A few seconds of a fast stream (a chunk is two frames of ~150 B), and little
            // memory per session in memory.
            event_log_bytes: 256 * 1024,
            event_log_events: 2048,
            // A whole log of the default size in one answer: catching up is one round trip.
            events_page: 2048,
            max_events_page: 2048,
            // A reconnecting link catches up on every session it follows at once; 64 logs of
            // the default size is 16 MiB at most in flight.
            max_event_reads: 64,
            // Half the default pause mark, and a few hundred ordinary turns.
            history_bytes: 512 * 1024,
            max_history_turns: 1000,
            // An authored prompt, a personality and a list of knowledge bases are a few KB;
            // a hundredfold that still writes little at each turn.
            max_meta_bytes: 1_000_000,
        }
    }
}

/// Bounds on remote terminals (`_lembas/terminal/*`), each stated in the refusal that
/// enforces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct TerminalLimits {
    /// Terminals open at once on one link (the spec's four).
    pub max_per_link: usize,
    /// The spec's 20–500 columns and 5–300 rows.
    pub cols: (u16, u16),
    pub rows: (u16, u16),
    /// The size a terminal opens at when the client names none.
    pub default_size: (u16, u16),
    /// One `_lembas/terminal/output` frame, whole (the 64 KiB).
    pub max_output_frame_bytes: usize,
    /// How long output waits for more before it is sent: few frames for a flood, little delay
    /// for a keystroke's echo.
    pub batch_ms: u64,
}

impl Default for TerminalLimits {
    fn default() -> Self {
        TerminalLimits {
            max_per_link: 4,
            cols: (20, 500),
            rows: (5, 300),
            default_size: (80, 24),
            max_output_frame_bytes: 64 * 1024,
            batch_ms: 4,
        }
    }
}

/// Bounds on what waits to be sent on one connection, enforced by the shell (the core hands
/// frames over at once; [`crate::device::Device::holders`] says whose queue holds a session).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct OutboundLimits {
    /// Past this many bytes waiting, the sources wait until the writer catches up: terminals
    /// stop reading their PTYs (their shells block) and the engine events of the sessions the
    /// connection holds are not taken (their turns wait). Nothing is dropped.
    pub pause_bytes: usize,
    /// A safety bound: with the sources waiting, only answers to the client's own requests
    /// can queue past `pause_bytes`. Past this many, a link's client is not reading at all and
    /// the link is closed (1008); stdio is never closed for it, its stdin is not read instead.
    pub max_bytes: usize,
}

impl OutboundLimits {
    /// Whether a connection with `queued` bytes waiting to be written is behind: its sources
    /// wait (the one rule of every shell's backpressure).
    pub fn is_behind(&self, queued: usize) -> bool {
        crate::backlog::is_behind(queued, self.pause_bytes)
    }
}

impl Default for OutboundLimits {
    fn default() -> Self {
        OutboundLimits {
            pause_bytes: 1024 * 1024,
            // Room for a whole history or a big answer behind a stream of updates.
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Bounds on what a connection's reader has read that the device has not handled yet, enforced
/// by the shell: past `pause_bytes` the reader reads no more (the peer's writes block, as a
/// pipe's would) until the device catches up. Without it a peer faster than the device would
/// grow the shell's input queue without bound. At most `pause_bytes` plus one whole frame
/// (`frames.max_frame_bytes`) waits a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct InboundLimits {
    pub pause_bytes: usize,
}

impl Default for InboundLimits {
    fn default() -> Self {
        InboundLimits {
            pause_bytes: 1024 * 1024,
        }
    }
}

/// How a link's liveness is decided, with time as the core's input like every other timer. TCP
/// alone never notices a network that drops a link's packets while the socket stays open (a
/// NAT that forgot the connection, a laptop waking from sleep): a link quiet for
/// `ping_after_ms` (nothing received) is pinged, and one from which nothing at all arrives for
/// `dead_after_ms` (no message, no pong) is dead: it is closed, and the device dials again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Liveness {
    pub ping_after_ms: u64,
    pub dead_after_ms: u64,
}

impl Default for Liveness {
    fn default() -> Self {
        // Three pings' worth of silence: one lost or late pong is not a dead link.
        Liveness {
            ping_after_ms: 15_000,
            dead_after_ms: 45_000,
        }
    }
}

impl Liveness {
    pub fn new(ping_after_ms: u64, dead_after_ms: u64) -> Liveness {
        Liveness {
            ping_after_ms,
            dead_after_ms,
        }
    }

    /// The ping must go out before the bound, or a healthy quiet link would be declared dead.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ping_after_ms == 0 || self.ping_after_ms >= self.dead_after_ms {
            return Err(ConfigError(format!(
                "link: ping_after_ms must be at least 1 and under dead_after_ms (got {} and {})",
                self.ping_after_ms, self.dead_after_ms
            )));
        }
        Ok(())
    }
}

/// Why a configuration was refused (never silently clamped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Everything a `Device` is built from. Its serde shape (camelCase, every member optional,
/// unknown ones refused) is what JS hands the wasm bindings (`DeviceConfig` in
/// bindings/lembas.d.ts); `config.yaml` is read by the runtime, not through it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// Seeds every id and jitter the device makes.
    pub seed: u64,
    /// This build's version, as `_lembas/hello` and `agentInfo` say it.
    pub version: String,
    pub host: String,
    pub platform: String,
    /// The device's name for the instance it is logged in to (the login's connection).
    pub connection: Option<String>,
    pub remote: Remote,
    pub frames: FrameLimits,
    pub backoff: Backoff,
    pub sessions: SessionLimits,
    pub terminals: TerminalLimits,
    pub outbound: OutboundLimits,
    pub inbound: InboundLimits,
    pub mentions: MentionLimits,
    pub commands: crate::commands::CommandLimits,
    pub files: FileLimits,
    /// When the instance link is pinged and when it is given up as dead. `None`: never (a shell
    /// whose sockets can neither ping nor report pongs, as a browser's). Not in the serde shape:
    /// a JS socket can do neither, so the wasm shell always sets `None`.
    #[serde(skip)]
    pub liveness: Option<Liveness>,
    /// The models this device can speak to; the first is the default for a session that
    /// names none.
    pub models: Vec<Model>,
    /// The shell keeps a store it reads a session back from (`Effect::LoadSession`). Without
    /// one (`serve --stdio`, a wasm driver given no store) no session is set aside: past
    /// `sessions.max_live`, `session/new` is refused; and no connection lists the capability
    /// `sessions` ("a session id lasts"), since none outlives the process.
    pub has_store: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            seed: 0,
            version: crate::VERSION.to_string(),
            host: "localhost".into(),
            platform: "unknown".into(),
            connection: None,
            remote: Remote::default(),
            frames: FrameLimits::default(),
            backoff: Backoff::default(),
            sessions: SessionLimits::default(),
            terminals: TerminalLimits::default(),
            outbound: OutboundLimits::default(),
            inbound: InboundLimits::default(),
            mentions: MentionLimits::default(),
            commands: crate::commands::CommandLimits::default(),
            files: FileLimits::default(),
            liveness: Some(Liveness::default()),
            models: Vec::new(),
            has_store: true,
        }
    }
}

impl DeviceConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_frames(&self.frames)?;
        if self.remote.max_directory_entries == 0 {
            return Err(ConfigError(
                "remote: max_directory_entries must be at least 1 (got 0)".into(),
            ));
        }
        let m = &self.mentions;
        if m.max_file_bytes == 0 || m.max_listing_entries == 0 || m.max_per_prompt == 0 {
            return Err(ConfigError(format!(
                "mentions: max_file_bytes, max_listing_entries and max_per_prompt must each be \
                 at least 1 (got {}, {} and {})",
                m.max_file_bytes, m.max_listing_entries, m.max_per_prompt
            )));
        }
        let c = self.commands;
        if c.max_files == 0 || c.max_file_bytes == 0 || c.max_description_chars == 0 {
            return Err(ConfigError(format!(
                "commands: max_files, max_file_bytes and max_description_chars must each be at \
                 least 1 (got {}, {} and {})",
                c.max_files, c.max_file_bytes, c.max_description_chars
            )));
        }
        if self.files.max_recent == 0 {
            return Err(ConfigError(
                "files: max_recent must be at least 1 (got 0)".into(),
            ));
        }
        if self.backoff.initial_ms == 0 || self.backoff.max_ms < self.backoff.initial_ms {
            return Err(ConfigError(format!(
                "backoff: initial_ms must be at least 1 and at most max_ms (got {} and {})",
                self.backoff.initial_ms, self.backoff.max_ms
            )));
        }
        let s = &self.sessions;
        if s.max_queued == 0 || s.max_queued >= s.ledger_turns {
            return Err(ConfigError(format!(
                "sessions: max_queued must be between 1 and ledger_turns - 1 (got {} and {}), \
                 so a waiting turn is never forgotten",
                s.max_queued, s.ledger_turns
            )));
        }
        if s.max_summary_bytes == 0 {
            return Err(ConfigError(
                "sessions: max_summary_bytes must be at least 1 (got 0)".into(),
            ));
        }
        if s.max_live == 0 {
            return Err(ConfigError(
                "sessions: max_live must be at least 1 (got 0)".into(),
            ));
        }
        if s.max_block_bytes > s.max_prompt_bytes {
            return Err(ConfigError(format!(
                "sessions: max_block_bytes ({}) is over max_prompt_bytes ({})",
                s.max_block_bytes, s.max_prompt_bytes
            )));
        }
        if s.max_held_bytes < self.frames.max_frame_bytes {
            return Err(ConfigError(format!(
                "sessions: max_held_bytes ({}) is under frames.max_frame_bytes ({}): a whole \
                 frame must fit behind a waiting request",
                s.max_held_bytes, self.frames.max_frame_bytes
            )));
        }
        validate_event_log(s)?;
        validate_history(s)?;
        let t = &self.terminals;
        let (cols, rows) = t.default_size;
        if t.cols.0 > t.cols.1
            || t.rows.0 > t.rows.1
            || !(t.cols.0..=t.cols.1).contains(&cols)
            || !(t.rows.0..=t.rows.1).contains(&rows)
        {
            return Err(ConfigError(format!(
                "terminals: default_size {cols}x{rows} must lie within cols {}-{} and rows {}-{}",
                t.cols.0, t.cols.1, t.rows.0, t.rows.1
            )));
        }
        if t.max_output_frame_bytes < 1024 {
            return Err(ConfigError(format!(
                "terminals: max_output_frame_bytes must be at least 1024 (got {})",
                t.max_output_frame_bytes
            )));
        }
        let o = &self.outbound;
        if o.pause_bytes == 0 || o.pause_bytes > o.max_bytes {
            return Err(ConfigError(format!(
                "outbound: pause_bytes must be between 1 and max_bytes (got {} and {})",
                o.pause_bytes, o.max_bytes
            )));
        }
        if let Some(l) = &self.liveness {
            l.validate()?;
        }
        if let Some(root) = self.remote.roots.iter().find(|r| !r.starts_with('/')) {
            return Err(ConfigError(format!(
                "remote.roots: `{root}` is not an absolute path"
            )));
        }
        Ok(())
    }
}

/// Everything a `Client` is built from; serde as for [`DeviceConfig`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct ClientConfig {
    pub seed: u64,
    pub frames: FrameLimits,
    /// Whether this client offers the `show` viewer (`clientCapabilities._meta.lembas.show`).
    pub show: bool,
    /// How long a request that must be delivered (a delete) waits for its answer before it
    /// counts as undelivered and waits for the next link.
    pub request_timeout_ms: u64,
    /// When the link is pinged and when it is given up as dead (closed; the device dials
    /// again). `None`: never (a browser's socket can neither ping nor report pongs). Not in the
    /// serde shape, as for the device's.
    #[serde(skip)]
    pub liveness: Option<Liveness>,
    /// The three bounds of following by seq (client/resume.rs), not in the serde shape: the
    /// web client's module has no room for their decoders (its bound is 400 KB), and the
    /// defaults serve a UI.
    ///
    /// How many sessions the client follows by seq (capability `events`): on a new link it
    /// asks each for what it missed. Past this many, the one heard of longest ago is forgotten.
    #[serde(skip)]
    pub followed_sessions: usize,
    /// Pages of `_lembas/session/events` a session's catch-up may take on a new link before
    /// the rest is reported as a gap.
    #[serde(skip)]
    pub catch_up_pages: u32,
    /// What the client says about sessions catching up (a prompt's answer, a reattach), held
    /// over all of them until their missed events are handed out; one past this is said at
    /// once. (Live events heard meanwhile are not held: the pages fetch them.)
    #[serde(skip)]
    pub held_events: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            seed: 1,
            frames: FrameLimits::default(),
            show: false,
            request_timeout_ms: 30_000,
            liveness: Some(Liveness::default()),
            followed_sessions: 64,
            catch_up_pages: 16,
            held_events: 4096,
        }
    }
}

impl ClientConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_frames(&self.frames)?;
        if self.followed_sessions == 0 || self.catch_up_pages == 0 || self.held_events == 0 {
            return Err(ConfigError(format!(
                "followed_sessions, catch_up_pages and held_events must be at least 1 (got {}, {} and {})",
                self.followed_sessions, self.catch_up_pages, self.held_events
            )));
        }
        match &self.liveness {
            Some(l) => l.validate(),
            None => Ok(()),
        }
    }
}

/// A history answer's bounds: room for a cut turn's note, and at least one turn.
fn validate_history(s: &SessionLimits) -> Result<(), ConfigError> {
    if s.history_bytes < MIN_HISTORY_BYTES || s.max_history_turns == 0 {
        return Err(ConfigError(format!(
            "sessions: history_bytes must be at least {MIN_HISTORY_BYTES} and \
             max_history_turns at least 1 (got {} and {})",
            s.history_bytes, s.max_history_turns
        )));
    }
    Ok(())
}

/// The least `sessions.history_bytes`: a turn cut to fit still says why, within it.
pub const MIN_HISTORY_BYTES: usize = 4096;

/// The event log's bounds: something kept, and a page within its max.
fn validate_event_log(s: &SessionLimits) -> Result<(), ConfigError> {
    if s.event_log_events == 0 || s.event_log_bytes == 0 {
        return Err(ConfigError(format!(
            "sessions: event_log_events and event_log_bytes must be at least 1 (got {} and {})",
            s.event_log_events, s.event_log_bytes
        )));
    }
    if s.max_event_reads == 0 {
        return Err(ConfigError(
            "sessions: max_event_reads must be at least 1 (got 0)".into(),
        ));
    }
    if s.events_page == 0 || s.events_page > s.max_events_page {
        return Err(ConfigError(format!(
            "sessions: events_page must be between 1 and max_events_page (got {} and {})",
            s.events_page, s.max_events_page
        )));
    }
    Ok(())
}

fn validate_frames(f: &FrameLimits) -> Result<(), ConfigError> {
    if f.max_depth == 0 || f.max_depth > FrameLimits::DEPTH_CEILING {
        return Err(ConfigError(format!(
            "max_depth must be between 1 and {} (got {})",
            FrameLimits::DEPTH_CEILING,
            f.max_depth
        )));
    }
    if f.max_frame_bytes < 1024 {
        return Err(ConfigError(format!(
            "max_frame_bytes must be at least 1024 (got {})",
            f.max_frame_bytes
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_lowered_to_the_maximum() {
        assert_eq!(Mode::Auto.capped(Mode::Edit), Mode::Edit);
        assert_eq!(Mode::Plan.capped(Mode::Edit), Mode::Plan);
        assert_eq!(Mode::parse("manual"), Some(Mode::Manual));
        assert_eq!(Mode::parse("yolo"), None);
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff::default();
        assert_eq!(b.ceiling(0), 1_000);
        assert_eq!(b.ceiling(3), 8_000);
        assert_eq!(b.ceiling(40), 60_000);
    }

    #[test]
    fn bad_limits_are_refused_not_clamped() {
        let mut c = DeviceConfig::default();
        c.frames.max_depth = 500;
        assert!(c.validate().unwrap_err().0.contains("max_depth"));
        let mut c = DeviceConfig::default();
        c.remote.roots = vec!["work".into()];
        assert!(c.validate().unwrap_err().0.contains("`work`"));
        let mut c = DeviceConfig::default();
        c.sessions.max_held_bytes = c.frames.max_frame_bytes - 1;
        assert!(c.validate().unwrap_err().0.contains("max_held_bytes"));
        let c = DeviceConfig {
            liveness: Some(Liveness::new(5_000, 5_000)),
            ..DeviceConfig::default()
        };
        let e = c.validate().unwrap_err().0;
        assert!(
            e.contains("ping_after_ms") && e.contains("5000 and 5000"),
            "{e}"
        );
        let c = ClientConfig {
            liveness: Some(Liveness::new(0, 1_000)),
            ..ClientConfig::default()
        };
        assert!(c.validate().unwrap_err().0.contains("got 0 and 1000"));
    }

    #[test]
    fn event_log_bounds_are_refused_by_name() {
        let refusal = |f: &dyn Fn(&mut SessionLimits)| {
            let mut c = DeviceConfig::default();
            f(&mut c.sessions);
            c.validate().unwrap_err().0
        };
        assert!(refusal(&|s| s.event_log_events = 0).contains("event_log_events"));
        assert!(refusal(&|s| s.event_log_bytes = 0).contains("event_log_bytes"));
        let e = refusal(&|s| s.events_page = s.max_events_page + 1);
        assert!(
            e.contains("events_page") && e.contains("max_events_page"),
            "{e}"
        );
        assert!(DeviceConfig::default().validate().is_ok());
    }
}
