//! `config.yaml`: the `remote:` block (what a client on the link may do on this device), the
//! `trusted:` list, the `sessions:` block (every bound of the core's `SessionLimits` under its
//! snake_case name, the core's rules across them checked here, and `undo_max_bytes`,
//! `undo_turns`: what the tools keep for `/undo`; read at start-up), the `frames:`,
//! `terminals:`, `outbound:` and `inbound:` blocks (every plain-number bound of the core's
//! `FrameLimits`, `TerminalLimits`, `OutboundLimits` and `InboundLimits`, the same way; read at
//! start-up), the `mentions:` block
//! (`max_file_bytes`, `max_listing_entries`, `max_per_prompt`: the bounds on a prompt's `@path`
//! mentions; read at start-up), the `files:` block (`max_indexed_files`, `max_recent`: the `@`
//! picker's index and memory; read at start-up), the `commands:` block (`max_files`,
//! `max_file_bytes`, `max_description_chars`: the bounds on a session's command files, and
//! `review_git_timeout_ms`: how long `/review`'s look in git may take; read at start-up), the
//! `link:` block
//! (when a quiet link is pinged and a silent one given up; read at start-up) and `engine:`
//! (`model`, the default, `scripted` for tests, or a block of the model engine's settings; read
//! at start-up), and the device's own personalization: `personality`, `personality_custom` and
//! `instructions` (strings; read at start-up; see [`crate::personalization`]), and `tools:`
//! (`protected` and `shell`; read at start-up; see [`crate::tools`]), and `hub:` (the local
//! socket of `lembas link`: `max_connections`, `max_line_bytes`; read at start-up; see
//! [`crate::hub`]). Other top-level
//! keys belong to the rest of LLeMbas CLI and are ignored here;
//! inside `remote:` an unknown key is refused, since a misspelt limit must not pass silently.
//! A malformed file is refused with the file, the line and the key. Roots and trusted
//! directories are resolved (`~` expanded, symlinks followed) at load.

use std::path::{Path, PathBuf};

use lembas_core::config::{InboundLimits, OutboundLimits, SessionLimits, TerminalLimits};
use lembas_core::jsonrpc::FrameLimits;
use lembas_core::{DeviceConfig, Liveness, Mode, Remote};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::engine::EngineChoice;

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    remote: Option<RemoteBlock>,
    #[serde(default)]
    trusted: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    sessions: Option<Spanned<SessionsBlock>>,
    #[serde(default)]
    frames: Option<Spanned<FramesBlock>>,
    #[serde(default)]
    terminals: Option<Spanned<TerminalsBlock>>,
    #[serde(default)]
    outbound: Option<Spanned<OutboundBlock>>,
    #[serde(default)]
    inbound: Option<Spanned<InboundBlock>>,
    #[serde(default)]
    mentions: Option<MentionsBlock>,
    #[serde(default)]
    files: Option<FilesBlock>,
    #[serde(default)]
    commands: Option<CommandsBlock>,
    #[serde(default)]
    link: Option<Spanned<LinkBlock>>,
    #[serde(default)]
    engine: Option<EngineChoice>,
    #[serde(default)]
    personality: Option<String>,
    #[serde(default)]
    personality_custom: Option<String>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    tools: Option<ToolsBlock>,
    #[serde(default)]
    hub: Option<HubBlock>,
}

/// The `hub:` block: how much the service's local socket takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HubBlock {
    #[serde(default)]
    max_connections: Option<Spanned<usize>>,
    #[serde(default)]
    max_line_bytes: Option<Spanned<usize>>,
}

/// The bounds of the hub (`hub:` in config.yaml), each named in its refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubLimits {
    /// `hub.max_connections`: local processes served at once. Each is an editor or a command
    /// of this user; 64 is far more than a person runs, and bounds the memory a runaway script
    /// that opens connections in a loop can take.
    pub max_connections: usize,
    /// `hub.max_line_bytes`: the longest message taken on the socket. The core's frame limit,
    /// so a hub connection takes exactly what stdio and the link take.
    pub max_line_bytes: usize,
}

impl Default for HubLimits {
    fn default() -> Self {
        HubLimits {
            max_connections: 64,
            max_line_bytes: lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes,
        }
    }
}

/// The `tools:` block: where the model's tools may not act, and the shell commands run in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsBlock {
    #[serde(default)]
    protected: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    shell: Option<Spanned<String>>,
}

/// The `tools:` block as read (see [`crate::tools::ToolSettings`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolsConfig {
    /// `tools.protected`, `~` expanded, each a bare name or an absolute path; `None`: the
    /// defaults ([`crate::tools::DEFAULT_PROTECTED`]).
    pub protected: Option<Vec<String>>,
    /// `tools.shell`: an absolute path; `None`: `$SHELL`, else `/bin/sh`.
    pub shell: Option<PathBuf>,
}

/// Declares a block of config.yaml for one of the core's limit structs from one list: every
/// field under its own (snake_case) name with the least value it may take, so a bound added to
/// the core is one line here, and the reading of it checks each the same way (file, line, key,
/// what is allowed). Keys after `also` are the block's own, read by hand.
macro_rules! limits_block {
    (
        $(#[$doc:meta])*
        $block:ident($name:literal) => $limits:ty {
            $($field:ident: $ty:ty = $min:expr,)*
        }
        $(also { $($extra:ident: $extra_ty:ty,)* })?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $block {
            $(
                #[serde(default)]
                $field: Option<Spanned<$ty>>,
            )*
            $($(
                #[serde(default)]
                $extra: Option<Spanned<$extra_ty>>,
            )*)?
        }

        impl $block {
            /// Each key set, checked against its least value, into `limits`.
            fn read_into(&self, limits: &mut $limits, path: &Path) -> Result<(), ConfigError> {
                $(
                    if let Some(v) = &self.$field {
                        limits.$field =
                            at_least(v, $min, concat!($name, ".", stringify!($field)), path)?;
                    }
                )*
                Ok(())
            }
        }
    };
}

// Zero is allowed only where it means something: no earlier turns given as a turn's context.
limits_block! {
    /// The `sessions:` block: the core's session bounds, and what the tools keep for `/undo`.
    SessionsBlock("sessions") => SessionLimits {
        max_block_bytes: u64 = 1,
        max_prompt_bytes: u64 = 1,
        ledger_turns: usize = 2,
        max_queued: usize = 1,
        ledger_ttl_ms: u64 = 1,
        max_title_chars: usize = 1,
        max_steer: usize = 1,
        delete_confirm_ms: u64 = 1,
        max_held_bytes: usize = 1,
        max_live: usize = 1,
        max_answer_bytes: usize = 1,
        max_context_turns: usize = 0,
        max_context_bytes: usize = 0,
        max_summary_bytes: usize = 1,
        event_log_bytes: usize = 1,
        event_log_events: usize = 1,
        events_page: usize = 1,
        max_events_page: usize = 1,
        max_event_reads: usize = 1,
        history_bytes: usize = lembas_core::config::MIN_HISTORY_BYTES,
        max_history_turns: usize = 1,
        max_meta_bytes: usize = 1,
    }
    also {
        undo_max_bytes: u64,
        undo_turns: usize,
    }
}

// The core's own floors: a frame holds at least an error's envelope; the depth's ceiling
// (under serde_json's own) is the core's rule, checked with the others below.
limits_block! {
    /// The `frames:` block: the bounds every frame (a link message, a stdio line) is checked
    /// against first.
    FramesBlock("frames") => FrameLimits {
        max_frame_bytes: usize = 1024,
        max_depth: usize = 1,
    }
}

// `cols`, `rows` and `default_size` are pairs, not numbers: not settable here. A batch of 0 ms
// sends output at once, which means something.
limits_block! {
    /// The `terminals:` block: the bounds on remote terminals.
    TerminalsBlock("terminals") => TerminalLimits {
        max_per_link: usize = 1,
        max_output_frame_bytes: usize = 1024,
        batch_ms: u64 = 0,
    }
}

// A pause mark of 0 would count an empty queue as behind: nothing would ever be sent or read.
limits_block! {
    /// The `outbound:` block: what waits to be sent on one connection.
    OutboundBlock("outbound") => OutboundLimits {
        pause_bytes: usize = 1,
        max_bytes: usize = 1,
    }
}

limits_block! {
    /// The `inbound:` block: what a connection's reader holds that the device has not handled.
    InboundBlock("inbound") => InboundLimits {
        pause_bytes: usize = 1,
    }
}

/// `v`, refused naming `key` at its line when under `min` (never silently raised).
fn at_least<T>(v: &Spanned<T>, min: T, key: &str, path: &Path) -> Result<T, ConfigError>
where
    T: Copy + PartialOrd + std::fmt::Display,
{
    if v.value < min {
        return Err(ConfigError(format!(
            "{}:{}: key `{key}`: must be at least {min} (got {})",
            path.display(),
            v.referenced.line(),
            v.value
        )));
    }
    Ok(v.value)
}

/// The `mentions:` block: the bounds on a prompt's `@path` mentions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MentionsBlock {
    #[serde(default)]
    max_file_bytes: Option<Spanned<usize>>,
    #[serde(default)]
    max_listing_entries: Option<Spanned<usize>>,
    #[serde(default)]
    max_per_prompt: Option<Spanned<usize>>,
}

/// The `files:` block: the `@` picker's index and memory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesBlock {
    #[serde(default)]
    max_indexed_files: Option<Spanned<usize>>,
    #[serde(default)]
    max_recent: Option<Spanned<usize>>,
}

/// The `commands:` block: the bounds on a session's command files.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandsBlock {
    #[serde(default)]
    max_files: Option<Spanned<usize>>,
    #[serde(default)]
    max_file_bytes: Option<Spanned<usize>>,
    #[serde(default)]
    max_description_chars: Option<Spanned<usize>>,
    #[serde(default)]
    review_git_timeout_ms: Option<Spanned<usize>>,
}

/// The `link:` block: the link's heartbeat.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBlock {
    #[serde(default)]
    ping_after_ms: Option<u64>,
    #[serde(default)]
    dead_after_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteBlock {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    roots: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    max_mode: Option<Mode>,
    #[serde(default)]
    require_trust: Option<bool>,
    /// Seconds.
    #[serde(default)]
    approval_timeout: Option<u64>,
    #[serde(default)]
    terminal: Option<bool>,
    #[serde(default)]
    terminal_integration: Option<bool>,
    #[serde(default)]
    max_directory_entries: Option<Spanned<usize>>,
}

/// The device's settings, as loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub remote: Remote,
    pub terminal_integration: bool,
    /// `sessions.*`: every bound of the core's sessions (`sessions.max_live`,
    /// `sessions.ledger_turns`, ...), under its snake_case name. Read at start-up.
    pub sessions: SessionLimits,
    /// `frames.*`, `terminals.*`, `outbound.*`, `inbound.*`: the core's bounds on frames,
    /// remote terminals and what waits on a connection either way, under their snake_case
    /// names. Read at start-up; `serve --max-frame-bytes` wins over `frames.max_frame_bytes`.
    pub frames: FrameLimits,
    pub terminals: TerminalLimits,
    pub outbound: OutboundLimits,
    pub inbound: InboundLimits,
    /// `mentions.max_file_bytes`, `max_listing_entries` and `max_per_prompt`. Read at start-up.
    pub mentions: lembas_core::config::MentionLimits,
    /// `files.max_indexed_files`: entries of one root the `@` picker's index holds (past it the
    /// answer says it was cut). Read at start-up.
    pub max_indexed_files: usize,
    /// `files.max_recent`: the recent files kept to nudge the picker. Read at start-up.
    pub files: lembas_core::config::FileLimits,
    /// `commands.max_files`, `max_file_bytes` and `max_description_chars`. Read at start-up.
    pub commands: lembas_core::commands::CommandLimits,
    /// `commands.review_git_timeout_ms`: how long `/review`'s look in git may take before git
    /// is stopped and the review goes with a notice. Read at start-up.
    pub review_git_timeout_ms: usize,
    /// `link.ping_after_ms` and `link.dead_after_ms`.
    pub liveness: Liveness,
    /// `engine`: what answers prompts.
    pub engine: EngineChoice,
    /// `personality`, `personality_custom` and `instructions`, those set, as one object (`None`:
    /// none is set): the device's own personalization.
    pub personalization: Option<serde_json::Value>,
    /// `tools`: what the model's tools may not touch, and the shell commands run through.
    /// Read at start-up.
    pub tools: ToolsConfig,
    /// `sessions.undo_max_bytes` and `sessions.undo_turns`: what `write` and `edit` keep for
    /// `/undo`. Read at start-up.
    pub undo: crate::tools::UndoLimits,
    /// `hub`: the bounds of the service's local socket. Read at start-up.
    pub hub: HubLimits,
    /// Where it came from (`None`: no file, the defaults).
    pub file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            remote: Remote::default(),
            terminal_integration: true,
            sessions: SessionLimits::default(),
            frames: FrameLimits::default(),
            terminals: TerminalLimits::default(),
            outbound: OutboundLimits::default(),
            inbound: InboundLimits::default(),
            mentions: lembas_core::config::MentionLimits::default(),
            max_indexed_files: crate::file_index::DEFAULT_MAX_FILES,
            files: lembas_core::config::FileLimits::default(),
            commands: lembas_core::commands::CommandLimits::default(),
            review_git_timeout_ms: crate::git_changes::DEFAULT_TIMEOUT_MS,
            liveness: Liveness::default(),
            engine: EngineChoice::model(),
            personalization: None,
            tools: ToolsConfig::default(),
            undo: crate::tools::UndoLimits::default(),
            hub: HubLimits::default(),
            file: None,
        }
    }
}

/// A config refused: `Display` names the file, the line and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Load `path`; a missing file is the defaults (remote work off).
pub fn load(path: &Path, home: Option<&Path>) -> Result<Config, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => return Err(ConfigError(format!("{}: cannot read: {e}", path.display()))),
    };
    parse(&text, path, home)
}

/// Parse the text of `path` (named in errors).
pub fn parse(text: &str, path: &Path, home: Option<&Path>) -> Result<Config, ConfigError> {
    let file: File = if text.trim().is_empty() {
        File::default()
    } else {
        serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                // A `Spanned` value is a `value` field to serde: not a key the person wrote.
                let key = e.path().to_string();
                let key = key
                    .split('.')
                    .filter(|k| *k != "value")
                    .collect::<Vec<_>>()
                    .join(".");
                <serde_saphyr::Error as serde::de::Error>::custom(format!(
                    "key `{key}`: {}",
                    e.inner()
                ))
            })
        })
        .map_err(|e| {
            let msg = e.to_string();
            let mut first = msg.lines().next().unwrap_or("").to_string();
            // A message made through serde's `custom` carries its place as text.
            let mut line = e.location().map_or(0, |l| l.line());
            if let Some(i) = first.rfind(" at line ") {
                let place = first[i + " at line ".len()..].to_string();
                first.truncate(i);
                if let Some(n) = place.split(',').next().and_then(|n| n.trim().parse().ok()) {
                    line = n;
                }
            }
            let key = if first.contains("key `") {
                String::new()
            } else {
                " (key `remote` or `trusted`)".to_string()
            };
            ConfigError(format!("{}:{line}: {first}{key}", path.display()))
        })?
    };
    let mut config = Config {
        file: Some(path.to_path_buf()),
        ..Config::default()
    };
    let resolve = |s: &Spanned<String>, key: &str| -> Result<String, ConfigError> {
        let at = format!("{}:{}: key `{key}`", path.display(), s.referenced.line());
        let expanded = expand_home(&s.value, home)
            .ok_or_else(|| ConfigError(format!("{at}: `{}` needs HOME", s.value)))?;
        if !expanded.is_absolute() {
            return Err(ConfigError(format!(
                "{at}: `{}` is not an absolute path",
                s.value
            )));
        }
        let real = std::fs::canonicalize(&expanded)
            .map_err(|e| ConfigError(format!("{at}: `{}` cannot be resolved: {e}", s.value)))?;
        if !real.is_dir() {
            return Err(ConfigError(format!(
                "{at}: `{}` is not a directory",
                s.value
            )));
        }
        real.to_str()
            .map(str::to_string)
            .ok_or_else(|| ConfigError(format!("{at}: `{}` is not UTF-8", s.value)))
    };
    // A count that must be at least 1 (never silently clamped): `block.key` at its line.
    let at_least_one = |key: &str, v: Option<Spanned<usize>>, into: &mut usize| {
        let Some(v) = v else { return Ok(()) };
        if v.value == 0 {
            return Err(ConfigError(format!(
                "{}:{}: key `{key}`: must be at least 1 (got 0)",
                path.display(),
                v.referenced.line()
            )));
        }
        *into = v.value;
        Ok(())
    };
    if let Some(r) = file.remote {
        let rem = &mut config.remote;
        at_least_one(
            "remote.max_directory_entries",
            r.max_directory_entries,
            &mut rem.max_directory_entries,
        )?;
        if let Some(v) = r.enabled {
            rem.enabled = v;
        }
        if let Some(roots) = r.roots {
            rem.roots = roots
                .iter()
                .map(|s| resolve(s, "remote.roots"))
                .collect::<Result<_, _>>()?;
        }
        if let Some(v) = r.max_mode {
            rem.max_mode = v;
        }
        if let Some(v) = r.require_trust {
            rem.require_trust = v;
        }
        if let Some(v) = r.approval_timeout {
            rem.approval_timeout_ms = v.saturating_mul(1000);
        }
        if let Some(v) = r.terminal {
            rem.terminal = v;
        }
        if let Some(v) = r.terminal_integration {
            config.terminal_integration = v;
        }
    }
    // The core's limit blocks: each key against its least value, then the core's rules across
    // keys and blocks for the file, said at the line of the block a rule names.
    let mut lines: Vec<(&str, u64)> = Vec::new();
    if let Some(block) = &file.sessions {
        lines.push(("sessions", block.referenced.line()));
        let block = &block.value;
        block.read_into(&mut config.sessions, path)?;
        if let Some(v) = &block.undo_max_bytes {
            config.undo.max_bytes = at_least(v, 1, "sessions.undo_max_bytes", path)?;
        }
        if let Some(v) = &block.undo_turns {
            config.undo.turns = at_least(v, 1, "sessions.undo_turns", path)?;
        }
    }
    if let Some(block) = &file.frames {
        lines.push(("frames", block.referenced.line()));
        block.value.read_into(&mut config.frames, path)?;
        // The hub takes what stdio and the link take, unless `hub.max_line_bytes` says.
        config.hub.max_line_bytes = config.frames.max_frame_bytes;
    }
    if let Some(block) = &file.terminals {
        lines.push(("terminals", block.referenced.line()));
        block.value.read_into(&mut config.terminals, path)?;
    }
    if let Some(block) = &file.outbound {
        lines.push(("outbound", block.referenced.line()));
        block.value.read_into(&mut config.outbound, path)?;
    }
    if let Some(block) = &file.inbound {
        lines.push(("inbound", block.referenced.line()));
        block.value.read_into(&mut config.inbound, path)?;
    }
    if !lines.is_empty() {
        let mut device = DeviceConfig::default();
        device.sessions = config.sessions;
        device.frames = config.frames;
        device.terminals = config.terminals;
        device.outbound = config.outbound;
        device.inbound = config.inbound;
        device.validate().map_err(|e| {
            // The core names the block (`sessions: ...`), except for a frame's own bounds; a
            // rule across blocks (held bytes against the frame) whose named block is not in
            // the file is said whole at the frames block.
            let named = e.0.split_once(": ").and_then(|(block, why)| {
                let at = lines.iter().find(|(b, _)| *b == block)?;
                Some((at, why))
            });
            let ((key, line), why) = named.unwrap_or_else(|| {
                let at = lines
                    .iter()
                    .find(|(b, _)| *b == "frames")
                    .unwrap_or(&lines[0]);
                (at, e.0.as_str())
            });
            ConfigError(format!("{}:{line}: key `{key}`: {why}", path.display()))
        })?;
    }
    // The turns an undo names as dropped are as many as the ledger keeps turn ids.
    config.undo.dropped_named = config.sessions.ledger_turns;
    if let Some(block) = file.mentions {
        let m = &mut config.mentions;
        let mut file_bytes = usize::try_from(m.max_file_bytes).unwrap_or(usize::MAX);
        at_least_one(
            "mentions.max_file_bytes",
            block.max_file_bytes,
            &mut file_bytes,
        )?;
        m.max_file_bytes = file_bytes as u64;
        at_least_one(
            "mentions.max_listing_entries",
            block.max_listing_entries,
            &mut m.max_listing_entries,
        )?;
        at_least_one(
            "mentions.max_per_prompt",
            block.max_per_prompt,
            &mut m.max_per_prompt,
        )?;
    }
    if let Some(block) = file.files {
        at_least_one(
            "files.max_indexed_files",
            block.max_indexed_files,
            &mut config.max_indexed_files,
        )?;
        at_least_one(
            "files.max_recent",
            block.max_recent,
            &mut config.files.max_recent,
        )?;
    }
    if let Some(block) = file.commands {
        let c = &mut config.commands;
        at_least_one("commands.max_files", block.max_files, &mut c.max_files)?;
        let mut file_bytes = usize::try_from(c.max_file_bytes).unwrap_or(usize::MAX);
        at_least_one(
            "commands.max_file_bytes",
            block.max_file_bytes,
            &mut file_bytes,
        )?;
        c.max_file_bytes = file_bytes as u64;
        at_least_one(
            "commands.max_description_chars",
            block.max_description_chars,
            &mut c.max_description_chars,
        )?;
        at_least_one(
            "commands.review_git_timeout_ms",
            block.review_git_timeout_ms,
            &mut config.review_git_timeout_ms,
        )?;
    }
    if let Some(block) = file.link {
        let l = &mut config.liveness;
        if let Some(v) = block.value.ping_after_ms {
            l.ping_after_ms = v;
        }
        if let Some(v) = block.value.dead_after_ms {
            l.dead_after_ms = v;
        }
        l.validate().map_err(|e| {
            ConfigError(format!(
                "{}:{}: key `link`: {}",
                path.display(),
                block.referenced.line(),
                e.0.trim_start_matches("link: ")
            ))
        })?;
    }
    if let Some(engine) = file.engine {
        if let EngineChoice::Model(settings) = &engine {
            settings
                .validate()
                .map_err(|e| ConfigError(format!("{}: key `engine`: {}", path.display(), e.0)))?;
        }
        config.engine = engine;
    }
    config.personalization = crate::personalization::fields_of(&serde_json::json!({
        "personality": file.personality,
        "personality_custom": file.personality_custom,
        "instructions": file.instructions,
    }));
    if let Some(block) = file.hub {
        at_least_one(
            "hub.max_connections",
            block.max_connections,
            &mut config.hub.max_connections,
        )?;
        at_least_one(
            "hub.max_line_bytes",
            block.max_line_bytes,
            &mut config.hub.max_line_bytes,
        )?;
    }
    if let Some(block) = file.tools {
        config.tools = tools_config(block, path, home)?;
    }
    if let Some(trusted) = file.trusted {
        config.remote.trusted = trusted
            .iter()
            .map(|s| resolve(s, "trusted"))
            .collect::<Result<_, _>>()?;
    }
    Ok(config)
}

/// The `tools:` block checked: each protected entry a bare name or an absolute path once `~`
/// is expanded, the shell an absolute path.
fn tools_config(
    block: ToolsBlock,
    path: &Path,
    home: Option<&Path>,
) -> Result<ToolsConfig, ConfigError> {
    let refuse = |s: &Spanned<String>, key: &str, why: String| {
        ConfigError(format!(
            "{}:{}: key `{key}`: {why}",
            path.display(),
            s.referenced.line()
        ))
    };
    let expand = |s: &Spanned<String>, key: &str| -> Result<String, ConfigError> {
        expand_home(&s.value, home)
            .and_then(|p| p.to_str().map(str::to_string))
            .ok_or_else(|| refuse(s, key, format!("`{}` needs HOME", s.value)))
    };
    let mut tools = ToolsConfig::default();
    if let Some(entries) = block.protected {
        let mut protected = Vec::new();
        for entry in &entries {
            let expanded = expand(entry, "tools.protected")?;
            lembas_core::confine::Protected::parse(&expanded)
                .map_err(|why| refuse(entry, "tools.protected", why))?;
            protected.push(expanded);
        }
        tools.protected = Some(protected);
    }
    if let Some(shell) = block.shell {
        let expanded = PathBuf::from(expand(&shell, "tools.shell")?);
        if !expanded.is_absolute() {
            return Err(refuse(
                &shell,
                "tools.shell",
                format!("`{}` is not an absolute path", shell.value),
            ));
        }
        tools.shell = Some(expanded);
    }
    Ok(tools)
}

pub(crate) fn expand_home(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    if p == "~" {
        return home.map(Path::to_path_buf);
    }
    match p.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_block_and_trusted_list_are_read_and_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("proj")).unwrap();
        std::os::unix::fs::symlink(&work, dir.path().join("link")).unwrap();
        let text = "model: something/else\nremote:\n  enabled: true\n  roots: [~/link]\n  \
                    max_mode: manual\n  approval_timeout: 12\n  terminal: true\n  \
                    terminal_integration: false\n  max_directory_entries: 7\ntrusted:\n  - ~/work/proj\nsessions:\n  \
                    max_live: 50\n  event_log_bytes: 4096\n  event_log_events: 9\n  \
                    history_bytes: 8192\n  max_history_turns: 10\n  undo_max_bytes: 1000\n  \
                    undo_turns: 2\n";
        let c = parse(text, Path::new("/x/config.yaml"), Some(dir.path())).unwrap();
        let real = std::fs::canonicalize(&work).unwrap();
        assert!(c.remote.enabled);
        assert_eq!(c.remote.roots, vec![real.to_str().unwrap().to_string()]);
        assert_eq!(c.remote.max_mode, Mode::Manual);
        assert!(c.remote.require_trust);
        assert_eq!(c.remote.approval_timeout_ms, 12_000);
        assert!(c.remote.terminal);
        assert!(!c.terminal_integration);
        assert_eq!(c.remote.max_directory_entries, 7);
        let s = c.sessions;
        assert_eq!(s.max_live, 50);
        assert_eq!((s.event_log_bytes, s.event_log_events), (4096, 9));
        assert_eq!((s.history_bytes, s.max_history_turns), (8192, 10));
        let undo = crate::tools::UndoLimits {
            max_bytes: 1000,
            turns: 2,
            dropped_named: 200,
        };
        assert_eq!(c.undo, undo);
        let e = parse(
            "sessions:\n  history_bytes: 100\n",
            Path::new("/x/c.yaml"),
            None,
        )
        .unwrap_err();
        assert!(
            e.0.contains("/x/c.yaml:2: key `sessions.history_bytes`: must be at least 4096"),
            "{}",
            e.0
        );
        assert_eq!(c.personalization, None);
        let own = parse(
            "personality: warm\ninstructions: \"Use British spelling\"\n",
            Path::new("/x/config.yaml"),
            None,
        )
        .unwrap();
        assert_eq!(
            own.personalization,
            Some(
                serde_json::json!({ "personality": "warm", "instructions": "Use British spelling" })
            )
        );
        assert_eq!(
            c.remote.trusted,
            vec![real.join("proj").to_str().unwrap().to_string()]
        );
    }

    #[test]
    fn every_session_limit_is_read_and_reaches_the_device() {
        let p = Path::new("/x/config.yaml");
        let text = "sessions:\n  max_block_bytes: 11\n  max_prompt_bytes: 12\n  \
                    ledger_turns: 13\n  max_queued: 4\n  ledger_ttl_ms: 15\n  \
                    max_title_chars: 16\n  max_steer: 17\n  delete_confirm_ms: 18\n  \
                    max_held_bytes: 99999999999\n  max_live: 20\n  max_answer_bytes: 21\n  \
                    max_context_turns: 0\n  max_context_bytes: 23\n  max_summary_bytes: 24\n  \
                    event_log_bytes: 25\n  event_log_events: 26\n  events_page: 27\n  \
                    max_events_page: 28\n  history_bytes: 5000\n  max_history_turns: 30\n  \
                    max_event_reads: 31\n  max_meta_bytes: 32\n";
        let c = parse(text, p, None).unwrap();
        let d = crate::device::device_config(&c, None).sessions;
        let got = [
            d.max_block_bytes as usize,
            d.max_prompt_bytes as usize,
            d.ledger_turns,
            d.max_queued,
            d.ledger_ttl_ms as usize,
            d.max_title_chars,
            d.max_steer,
            d.delete_confirm_ms as usize,
            d.max_held_bytes,
            d.max_live,
            d.max_answer_bytes,
            d.max_context_turns,
            d.max_context_bytes,
            d.max_summary_bytes,
            d.event_log_bytes,
            d.event_log_events,
            d.events_page,
            d.max_events_page,
            d.history_bytes,
            d.max_history_turns,
            d.max_event_reads,
            d.max_meta_bytes,
        ];
        let want = [
            11,
            12,
            13,
            4,
            15,
            16,
            17,
            18,
            99_999_999_999,
            20,
            21,
            0,
            23,
            24,
            25,
            26,
            27,
            28,
            5000,
            30,
            31,
            32,
        ];
        assert_eq!(got, want);
        // The undo journal names as many dropped turns as the ledger keeps.
        assert_eq!(c.undo.dropped_named, 13);
        assert_eq!(parse("", p, None).unwrap().undo.dropped_named, 200);
    }

    #[test]
    fn a_bad_session_limit_is_refused_naming_the_line_and_key() {
        let p = Path::new("/x/config.yaml");
        let e = parse("sessions:\n  max_live: 3\n  ledger_turns: 1\n", p, None).unwrap_err();
        assert_eq!(
            e.0,
            "/x/config.yaml:3: key `sessions.ledger_turns`: must be at least 2 (got 1)"
        );
        let e = parse("sessions:\n  ledger_ttl_ms: 0\n", p, None).unwrap_err();
        assert_eq!(
            e.0,
            "/x/config.yaml:2: key `sessions.ledger_ttl_ms`: must be at least 1 (got 0)"
        );
        let e = parse("sessions:\n  max_queued: -1\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/x/config.yaml:2: key `sessions.max_queued`:"),
            "{e}"
        );
        // The core's rules across keys are said for the file, at the block's line.
        let e = parse(
            "remote:\n  enabled: false\nsessions:\n  ledger_turns: 10\n  max_queued: 10\n",
            p,
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.0,
            "/x/config.yaml:4: key `sessions`: max_queued must be between 1 and ledger_turns - 1 \
             (got 10 and 10), so a waiting turn is never forgotten"
        );
        let e = parse("sessions:\n  max_block_bytes: 30000000\n", p, None).unwrap_err();
        assert!(
            e.0.contains("key `sessions`: max_block_bytes (30000000) is over max_prompt_bytes"),
            "{e}"
        );
        let e = parse("sessions:\n  ledger_turn: 10\n", p, None).unwrap_err();
        assert!(e.0.contains(":2:") && e.0.contains("ledger_turn"), "{e}");
    }

    #[test]
    fn every_frame_terminal_outbound_and_inbound_limit_reaches_the_device() {
        let p = Path::new("/x/config.yaml");
        let text = "frames:\n  max_frame_bytes: 2048\n  max_depth: 9\nterminals:\n  \
                    max_per_link: 2\n  max_output_frame_bytes: 4096\n  batch_ms: 0\n\
                    outbound:\n  pause_bytes: 300\n  max_bytes: 5000\ninbound:\n  \
                    pause_bytes: 700\n";
        let c = parse(text, p, None).unwrap();
        let d = crate::device::device_config(&c, None);
        assert_eq!((d.frames.max_frame_bytes, d.frames.max_depth), (2048, 9));
        let t = d.terminals;
        assert_eq!(
            (t.max_per_link, t.max_output_frame_bytes, t.batch_ms),
            (2, 4096, 0)
        );
        assert_eq!((d.outbound.pause_bytes, d.outbound.max_bytes), (300, 5000));
        assert_eq!(d.inbound.pause_bytes, 700);
        // The hub takes what a frame may be, unless `hub.max_line_bytes` says otherwise.
        assert_eq!(c.hub.max_line_bytes, 2048);
        let c = parse(
            "hub:\n  max_line_bytes: 3000\nframes:\n  max_frame_bytes: 2048\n",
            p,
            None,
        )
        .unwrap();
        assert_eq!(c.hub.max_line_bytes, 3000);
        let defaults = parse("", p, None).unwrap();
        assert_eq!(
            defaults.hub.max_line_bytes,
            FrameLimits::default().max_frame_bytes
        );
    }

    #[test]
    fn a_bad_frame_terminal_outbound_or_inbound_limit_is_refused_naming_the_line_and_key() {
        let p = Path::new("/x/config.yaml");
        let refused = |text: &str| parse(text, p, None).unwrap_err().0;
        let under = [
            (
                "frames:\n  max_frame_bytes: 1023\n",
                "frames.max_frame_bytes",
                1024,
                1023,
            ),
            ("frames:\n  max_depth: 0\n", "frames.max_depth", 1, 0),
            (
                "terminals:\n  max_per_link: 0\n",
                "terminals.max_per_link",
                1,
                0,
            ),
            (
                "terminals:\n  max_output_frame_bytes: 1000\n",
                "terminals.max_output_frame_bytes",
                1024,
                1000,
            ),
            (
                "outbound:\n  pause_bytes: 0\n",
                "outbound.pause_bytes",
                1,
                0,
            ),
            ("outbound:\n  max_bytes: 0\n", "outbound.max_bytes", 1, 0),
            ("inbound:\n  pause_bytes: 0\n", "inbound.pause_bytes", 1, 0),
        ];
        for (text, key, min, got) in under {
            assert_eq!(
                refused(text),
                format!("/x/config.yaml:2: key `{key}`: must be at least {min} (got {got})")
            );
        }
        // The core's rules across keys, at the block's line.
        assert_eq!(
            refused("remote:\n  enabled: false\nframes:\n  max_depth: 121\n"),
            "/x/config.yaml:4: key `frames`: max_depth must be between 1 and 120 (got 121)"
        );
        assert_eq!(
            refused("outbound:\n  pause_bytes: 10\n  max_bytes: 9\n"),
            "/x/config.yaml:2: key `outbound`: pause_bytes must be between 1 and max_bytes \
             (got 10 and 9)"
        );
        // A frame bigger than the sessions' held bytes: said at the frames block when the
        // sessions block is not in the file, at the sessions block when it is.
        let e = refused("frames:\n  max_frame_bytes: 200000000\n");
        assert!(
            e.starts_with("/x/config.yaml:2: key `frames`: sessions: max_held_bytes (100663296)"),
            "{e}"
        );
        let e = refused(
            "frames:\n  max_frame_bytes: 200000000\nsessions:\n  max_held_bytes: 100000000\n",
        );
        assert!(
            e.starts_with("/x/config.yaml:4: key `sessions`: max_held_bytes (100000000) is under"),
            "{e}"
        );
        assert!(parse(
            "frames:\n  max_frame_bytes: 200000000\nsessions:\n  max_held_bytes: 200000000\n",
            p,
            None
        )
        .is_ok());
        // An unknown key in each block is refused at its line.
        for block in ["frames", "terminals", "outbound", "inbound"] {
            let e = refused(&format!("{block}:\n  pause_byte: 10\n"));
            assert!(
                e.starts_with("/x/config.yaml:2: ") && e.contains("pause_byte"),
                "{block}: {e}"
            );
        }
        // The pairs are not numbers this file sets.
        let e = refused("terminals:\n  cols: 80\n");
        assert!(e.contains(":2:") && e.contains("cols"), "{e}");
    }

    #[test]
    fn the_link_block_sets_the_heartbeat_and_a_bad_one_is_refused() {
        let p = Path::new("/x/config.yaml");
        let c = parse(
            "link:\n  ping_after_ms: 300\n  dead_after_ms: 1000\n",
            p,
            None,
        )
        .unwrap();
        assert_eq!(c.liveness, Liveness::new(300, 1000));
        let c = parse("link:\n  dead_after_ms: 60000\n", p, None).unwrap();
        assert_eq!(c.liveness, Liveness::new(15_000, 60_000));
        let e = parse(
            "remote:\n  enabled: true\nlink:\n  ping_after_ms: 50000\n",
            p,
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.0,
            "/x/config.yaml:4: key `link`: ping_after_ms must be at least 1 and under \
             dead_after_ms (got 50000 and 45000)"
        );
        let e = parse("link:\n  ping_every: 5\n", p, None).unwrap_err();
        assert!(e.0.contains("ping_every"), "{e}");
    }

    #[test]
    fn the_tools_block_is_read_and_a_bad_entry_refused_by_name() {
        let p = Path::new("/x/config.yaml");
        let home = Path::new("/home/u");
        let c = parse(
            "tools:\n  protected: [.git, ~/.ssh, /etc/secrets]\n  shell: /bin/bash\n",
            p,
            Some(home),
        )
        .unwrap();
        assert_eq!(
            c.tools,
            ToolsConfig {
                protected: Some(vec![
                    ".git".into(),
                    "/home/u/.ssh".into(),
                    "/etc/secrets".into()
                ]),
                shell: Some(PathBuf::from("/bin/bash")),
            }
        );
        assert_eq!(parse("", p, None).unwrap().tools, ToolsConfig::default());
        let e = parse("tools:\n  protected:\n    - .git\n    - a/b\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/x/config.yaml:4: key `tools.protected`: `a/b` is neither"),
            "{e}"
        );
        let e = parse("tools:\n  protected: [~/.ssh]\n", p, None).unwrap_err();
        assert!(e.0.contains("`~/.ssh` needs HOME"), "{e}");
        let e = parse("tools:\n  shell: zsh\n", p, None).unwrap_err();
        assert_eq!(
            e.0,
            "/x/config.yaml:2: key `tools.shell`: `zsh` is not an absolute path"
        );
        let e = parse("tools:\n  protect: [.git]\n", p, None).unwrap_err();
        assert!(e.0.contains(":2:") && e.0.contains("protect"), "{e}");
    }

    #[test]
    fn defaults_without_a_file() {
        let c = load(Path::new("/nonexistent/lembas/config.yaml"), None).unwrap();
        assert!(!c.remote.enabled);
        assert_eq!(c.remote.approval_timeout_ms, 300_000);
        assert_eq!(c.remote.max_mode, Mode::Edit);
        assert_eq!(c.liveness, Liveness::default());
        assert_eq!(c.engine, EngineChoice::model());
        let p = Path::new("/x/config.yaml");
        let c = parse("engine: scripted\n", p, None).unwrap();
        assert_eq!(c.engine, EngineChoice::Scripted);
        assert_eq!(
            parse("engine: model\n", p, None).unwrap().engine,
            EngineChoice::model()
        );
        // A block is the model engine's settings (`engine.<field>`).
        let c = parse("engine:\n  max_retries: 7\n", p, None).unwrap();
        let EngineChoice::Model(settings) = c.engine else {
            panic!("not the model engine");
        };
        assert_eq!(settings.max_retries, 7);
        assert_eq!(settings.context_tokens, 32_768, "the rest default");
        let e = parse("engine:\n  read_bytes: 0\n", p, None).unwrap_err();
        assert!(e.0.contains("engine.read_bytes must be at least 1"), "{e}");
        let e = parse("engine:\n  max_retrys: 7\n", p, None).unwrap_err();
        assert!(e.0.contains(":2:") && e.0.contains("max_retrys"), "{e}");
    }

    #[test]
    fn the_hub_block_is_read_and_a_zero_refused_by_its_key() {
        let p = Path::new("/x/config.yaml");
        let c = parse(
            "hub:\n  max_connections: 3\n  max_line_bytes: 2048\n",
            p,
            None,
        )
        .unwrap();
        assert_eq!(
            c.hub,
            HubLimits {
                max_connections: 3,
                max_line_bytes: 2048
            }
        );
        assert_eq!(parse("", p, None).unwrap().hub, HubLimits::default());
        let e = parse("hub:\n  max_connections: 0\n", p, None).unwrap_err();
        assert!(e.0.contains(":2: key `hub.max_connections`"), "{e}");
        let e = parse("hub:\n  max_conections: 2\n", p, None).unwrap_err();
        assert!(e.0.contains("max_conections"), "{e}");
    }

    #[test]
    fn a_malformed_config_names_the_file_the_line_and_the_key() {
        let p = Path::new("/etc/lembas/config.yaml");
        let e = parse("remote:\n  enabled: true\n  max_mode: yolo\n", p, None).unwrap_err();
        assert!(e.0.starts_with("/etc/lembas/config.yaml:3:"), "{e}");
        assert!(e.0.contains("remote.max_mode"), "{e}");
        let e = parse("remote:\n  enabled: true\n  rootz: [/tmp]\n", p, None).unwrap_err();
        assert!(e.0.starts_with("/etc/lembas/config.yaml:3:"), "{e}");
        assert!(e.0.contains("rootz"), "{e}");
        let e = parse("remote:\n  approval_timeout: soon\n", p, None).unwrap_err();
        assert!(
            e.0.contains(":2:") && e.0.contains("approval_timeout"),
            "{e}"
        );
        let e = parse("remote:\n  roots:\n    - /no/such/dir/here\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/etc/lembas/config.yaml:3: key `remote.roots`"),
            "{e}"
        );
        let e = parse("remote:\n  max_directory_entries: 0\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/etc/lembas/config.yaml:2: key `remote.max_directory_entries`"),
            "{e}"
        );
        let c = parse("files:\n  max_indexed_files: 9\n  max_recent: 3\n", p, None).unwrap();
        assert_eq!((c.max_indexed_files, c.files.max_recent), (9, 3));
        let c = parse(
            "commands:\n  max_files: 3\n  max_file_bytes: 10\n  max_description_chars: 20\n  \
             review_git_timeout_ms: 500\n",
            p,
            None,
        )
        .unwrap();
        let k = c.commands;
        assert_eq!(
            (k.max_files, k.max_file_bytes, k.max_description_chars),
            (3, 10, 20)
        );
        assert_eq!(c.review_git_timeout_ms, 500);
        let e = parse("commands:\n  review_git_timeout_ms: 0\n", p, None).unwrap_err();
        assert!(e.0.contains("key `commands.review_git_timeout_ms`"), "{e}");
        let e = parse("commands:\n  max_files: 0\n", p, None).unwrap_err();
        assert!(e.0.contains("key `commands.max_files`"), "{e}");
        let e = parse("files:\n  max_recent: 0\n", p, None).unwrap_err();
        assert!(e.0.contains("key `files.max_recent`"), "{e}");
        let e = parse("mentions:\n  max_per_prompt: 0\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/etc/lembas/config.yaml:2: key `mentions.max_per_prompt`"),
            "{e}"
        );
        let c = parse(
            "mentions:\n  max_file_bytes: 9\n  max_listing_entries: 8\n  max_per_prompt: 7\n",
            p,
            None,
        )
        .unwrap();
        let m = c.mentions;
        assert_eq!(
            (m.max_file_bytes, m.max_listing_entries, m.max_per_prompt),
            (9, 8, 7)
        );
        let e = parse("sessions:\n  max_live: 0\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/etc/lembas/config.yaml:2: key `sessions.max_live`"),
            "{e}"
        );
        let e = parse("sessions:\n  max_live: 2\n  event_log_events: 0\n", p, None).unwrap_err();
        assert!(
            e.0.starts_with("/etc/lembas/config.yaml:3: key `sessions.event_log_events`"),
            "{e}"
        );
        let e = parse("sessions:\n  max_lives: 3\n", p, None).unwrap_err();
        assert!(e.0.contains(":2:") && e.0.contains("max_lives"), "{e}");
        let e = parse("remote:\n  enabled: true\nengine: scriptd\n", p, None).unwrap_err();
        assert!(e.0.contains(":3:") && e.0.contains("engine"), "{e}");
        let e = parse("remote:\n  enabled: true\npersonality: [warm]\n", p, None).unwrap_err();
        assert!(e.0.contains(":3:") && e.0.contains("personality"), "{e}");
        let e = parse("remote: [\n", p, None).unwrap_err();
        assert!(e.0.starts_with("/etc/lembas/config.yaml:"), "{e}");
    }
}
