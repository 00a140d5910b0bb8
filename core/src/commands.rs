//! A session's command set, as the web composer's `/` menu and a prompt's `/name` see it: the
//! built-ins, then custom commands (`<project>/.agent/commands/<name>.md`, then
//! `~/.config/lembas/commands/<name>.md`), then skills (`<project>/.agent/skills/<name>/SKILL.md`,
//! then `~/.config/lembas/skills/<name>/SKILL.md`). The shell reads the files
//! (`Effect::ReadCommands`, bounded); everything about them is decided here, on text alone:
//! their names, their front matter, which are commands at all, and how a prompt expands one.
//!
//! A file a cloned repository controls is not trusted: a name that is not `[A-Za-z0-9_-]` is
//! no command, one named like a built-in or like a command of the terminal's own screens is
//! not either (the built-in wins, as in the terminal), the first of two alike wins (the
//! project's over the person's), and its description reaches a client as one line, control
//! characters removed, its length capped. A command's own text is never `@`-expanded, and the
//! arguments put into it are not scanned again.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::Mode;

/// The longest command name: a word a person types after `/`.
pub const MAX_NAME_CHARS: usize = 64;

/// A built-in command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    pub hint: Option<&'static str>,
    pub kind: BuiltinKind,
}

/// What a built-in does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinKind {
    /// Sends its text to the model; `{args}` in it is what followed the name.
    Prompt(&'static str),
    /// `/review`: a prompt command, sent only when git shows something to review
    /// ([`crate::review`]); otherwise answered `message`.
    Review(&'static str),
    /// `/plan`: without a task, the session's mode becomes plan; with one, the task runs in it.
    Plan,
    /// `/compact`: the session's earlier turns are folded into a summary (an action).
    Compact,
    /// `/undo`: the session's last turn is undone, its files put back (an action).
    Undo,
}

/// The built-ins this device serves, in the spec's order.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "compact",
        description: "Fold the conversation so far into a summary, to free the model's context",
        hint: None,
        kind: BuiltinKind::Compact,
    },
    Builtin {
        name: "plan",
        description: "Plan before changing anything: switch to plan mode, or plan the task given",
        hint: Some("[task]"),
        kind: BuiltinKind::Plan,
    },
    Builtin {
        name: "undo",
        description: "Undo the last turn: its messages leave the conversation, and the files it \
                      changed are put back",
        hint: None,
        kind: BuiltinKind::Undo,
    },
    Builtin {
        name: "review",
        description: "Review the changes: those not committed yet, or this branch against another",
        hint: Some("head | <branch>"),
        kind: BuiltinKind::Review(
            "Review the code changes {target}. Read the diff with git and the code around it. \
             Report bugs, risks and unclear code, the most important first, each with where it \
             is and a suggested fix. Change no files.",
        ),
    },
    Builtin {
        name: "changelog",
        description: "Write a changelog entry for the recent changes",
        hint: Some("[since]"),
        kind: BuiltinKind::Prompt(
            "Write a changelog entry for the changes {since}, read from git's log and diff. \
             Group them as added, changed and fixed, in words a user of the project \
             understands. Add it to the project's changelog file if it has one (CHANGELOG.md \
             or the like), at the top, in the style already there; otherwise show it.",
        ),
    },
    Builtin {
        name: "init",
        description: "Write AGENTS.md: what a model should know about this project",
        hint: None,
        kind: BuiltinKind::Prompt(
            "Study this project and write AGENTS.md at its root (update it if it exists): \
             what the project is, how it is laid out, how to build, test and lint it, and the \
             conventions its code follows. Be brief and concrete; a model reads it at the start \
             of every session.{args}",
        ),
    },
    Builtin {
        name: "continue",
        description: "Carry on where the last turn stopped",
        hint: None,
        kind: BuiltinKind::Prompt(
            "Continue where you stopped: finish the task you were working on.{args}",
        ),
    },
];

/// Commands of the terminal's own screens: never listed, and a custom command or skill named
/// like one is not a command (the terminal would run its own).
pub const TERMINAL_ONLY: &[&str] = &[
    "sessions", "settings", "theme", "login", "logout", "quit", "exit", "help", "clear", "new",
    "resume", "model", "effort", "mode", "usage", "delete", "rename", "title", "copy", "export",
    "keys", "config", "status", "cost", "rewind", "memory", "agents", "tools",
];

/// The spec's built-ins this device does not serve yet (none now): not listed (their `/name`
/// is plain text here), and still no file may take their names.
pub const NOT_YET: &[&str] = &[];

/// Bounds on the command files read (`commands:` in config.yaml), each named where it cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct CommandLimits {
    /// Command and skill files read for one set, over the four places; past it the rest are
    /// left out and the answer says how many.
    pub max_files: usize,
    /// Bytes of one file: a larger one is not a command, and the answer names it.
    pub max_file_bytes: u64,
    /// Characters of a description shown to a client.
    pub max_description_chars: usize,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            // More than a menu shows at once; few enough that reading a set stays cheap.
            max_files: 64,
            // A command is a prompt: a page or two of text. 64 × 32 KiB bounds one read.
            max_file_bytes: 32 * 1024,
            // One line of a menu.
            max_description_chars: 160,
        }
    }
}

/// Where a command file was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Custom,
    Skill,
}

/// One command file the shell read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandFile {
    pub kind: FileKind,
    /// The name its place gives it: a custom command's file name less `.md`, a skill's
    /// directory name.
    pub name: String,
    /// The file's path, for the person.
    pub source: String,
    /// Its text (as UTF-8, invalid bytes replaced).
    pub text: String,
}

/// What the shell read for a set (the answer to `Effect::ReadCommands`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandsRead {
    /// The project directory, symlinks followed.
    pub root: String,
    /// In the set's order: the project's custom commands, the person's, then the skills alike.
    pub files: Vec<CommandFile>,
    /// Files over `commands.max_file_bytes`, not read (their paths).
    #[serde(default)]
    pub too_large: Vec<String>,
    /// Files past `commands.max_files`, not read.
    #[serde(default)]
    pub left_out: u64,
}

/// A command of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub description: String,
    pub hint: Option<String>,
    pub what: What,
}

/// A command's kind and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    Builtin(BuiltinKind),
    /// A custom command or a skill: its text (front matter removed), and the mode and model it
    /// asks for.
    File {
        kind: FileKind,
        body: String,
        mode: Option<Mode>,
        model: Option<String>,
    },
}

impl Command {
    /// `builtin`, `custom` or `skill`.
    pub fn kind(&self) -> &'static str {
        match &self.what {
            What::Builtin(_) => "builtin",
            What::File {
                kind: FileKind::Custom,
                ..
            } => "custom",
            What::File {
                kind: FileKind::Skill,
                ..
            } => "skill",
        }
    }

    /// As `availableCommands` lists it.
    pub fn listed(&self) -> Value {
        let mut v = json!({
            "name": self.name,
            "description": self.description,
            "_meta": { "lembas": { "kind": self.kind() } },
        });
        if let Some(hint) = &self.hint {
            v["input"] = json!({ "hint": hint });
        }
        v
    }
}

/// A session's commands, in the set's order, and what was left out of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandSet {
    pub commands: Vec<Command>,
    /// Sentences saying what was not made a command and why (bounds, names), at most one a
    /// file read or named.
    pub left_out: Vec<String>,
}

/// Whether `name` may name a command: `[A-Za-z0-9_-]`, 1 to [`MAX_NAME_CHARS`].
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `name` is taken by the device or the terminal (case aside: `Review.md` is no command).
fn reserved(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    BUILTINS.iter().any(|b| b.name == lower)
        || NOT_YET.contains(&lower.as_str())
        || TERMINAL_ONLY.contains(&lower.as_str())
}

/// A description from a file a repository controls: its first line, control characters
/// removed, at most `max` characters (an ellipsis saying it was cut).
pub fn sanitize_description(text: &str, max: usize) -> String {
    let first = text.trim_start().lines().next().unwrap_or("");
    let clean: String = first
        .chars()
        .filter(|c| !c.is_control() && !is_invisible(*c))
        .collect();
    let clean = clean.trim();
    if clean.chars().count() <= max {
        return clean.to_string();
    }
    let mut cut: String = clean.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Characters that change how text reads without showing: bidi controls and zero widths.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// A file's front matter (`---` lines around `key: value` lines) and its body.
fn front_matter(text: &str) -> (Vec<(String, String)>, &str) {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (Vec::new(), text);
    };
    let mut fields = Vec::new();
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            return (fields, &rest[at..]);
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            fields.push((key.trim().to_ascii_lowercase(), value.to_string()));
        }
    }
    // No closing line: all of it is the body.
    (Vec::new(), text)
}

/// The set from what the shell read: the built-ins, then each file that makes a command.
pub fn build(read: &CommandsRead, limits: CommandLimits) -> CommandSet {
    let mut set = CommandSet {
        commands: BUILTINS
            .iter()
            .map(|b| Command {
                name: b.name.to_string(),
                description: b.description.to_string(),
                hint: b.hint.map(str::to_string),
                what: What::Builtin(b.kind),
            })
            .collect(),
        left_out: Vec::new(),
    };
    for file in &read.files {
        let (fields, body) = front_matter(&file.text);
        let field = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        // A skill may name itself; a custom command is named by its file.
        let name = match file.kind {
            FileKind::Skill => field("name").unwrap_or(&file.name),
            FileKind::Custom => &file.name,
        };
        let why = if !valid_name(name) {
            Some("its name is not 1 to 64 of A-Z, a-z, 0-9, `-` and `_`")
        } else if reserved(name) {
            Some("it is named like a built-in or a terminal command, which wins")
        } else if set
            .commands
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(name))
        {
            Some("a command of that name comes before it")
        } else {
            None
        };
        if let Some(why) = why {
            set.left_out.push(format!(
                "`{}` is not a command: {why}",
                file.source.escape_debug()
            ));
            continue;
        }
        let described = field("description").unwrap_or(body);
        set.commands.push(Command {
            name: name.to_string(),
            description: sanitize_description(described, limits.max_description_chars),
            hint: field("argument-hint")
                .or_else(|| field("hint"))
                .map(|h| sanitize_description(h, limits.max_description_chars))
                .filter(|h| !h.is_empty()),
            what: What::File {
                kind: file.kind,
                body: body.to_string(),
                mode: field("mode").and_then(Mode::parse),
                model: field("model")
                    .filter(|m| !m.is_empty() && m.chars().all(|c| !c.is_control()))
                    .map(str::to_string),
            },
        });
    }
    for path in &read.too_large {
        set.left_out.push(format!(
            "`{}` is not a command: it is over commands.max_file_bytes ({} bytes)",
            path.escape_debug(),
            limits.max_file_bytes
        ));
    }
    if read.left_out > 0 {
        set.left_out.push(format!(
            "{} command file{} past the first {} (commands.max_files) were not read",
            read.left_out,
            if read.left_out == 1 { "" } else { "s" },
            limits.max_files
        ));
    }
    set
}

impl CommandSet {
    pub fn find(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// `availableCommands`: every command, as listed.
    pub fn listed(&self) -> Vec<Value> {
        self.commands.iter().map(Command::listed).collect()
    }

    /// A fingerprint of what the set lists, to tell a changed set from the same one.
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a over the listing: deterministic everywhere, wasm included.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for v in self.listed() {
            for b in v.to_string().bytes().chain([0]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

/// A prompt naming a command: its text starts with `/name`, ended by whitespace or the end.
/// The name and what follows it (trimmed); `None` for any other text (`/etc/hosts …` too).
pub fn invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    valid_name(name).then(|| (name, rest[end..].trim()))
}

/// A command file's text with the arguments put in: `$ARGUMENTS` all of them, `$1` to `$9` each
/// word; with neither in the text, arguments given follow it after a blank line. One pass: an
/// argument holding `$1` stays as written.
pub fn expand(body: &str, args: &str) -> String {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + args.len());
    let mut placed = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            placed = true;
            rest = tail;
        } else if let Some(d) = after
            .as_bytes()
            .first()
            .filter(|b| (b'1'..=b'9').contains(b))
        {
            out.push_str(words.get(usize::from(d - b'1')).copied().unwrap_or(""));
            placed = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    let out = out.trim().to_string();
    if placed || args.is_empty() {
        out
    } else {
        format!("{out}\n\n{args}")
    }
}

/// A built-in prompt command's text, `args` put in.
pub fn builtin_text(name: &str, template: &str, args: &str) -> String {
    let target = match (name, args) {
        ("review", "" | "head" | "HEAD") => {
            "not committed yet (the working tree and the index, against HEAD)".to_string()
        }
        ("review", branch) => {
            format!("on this branch against `{branch}` (git diff {branch}...HEAD)")
        }
        _ => String::new(),
    };
    let since = if args.is_empty() {
        "since the last release tag (or the last entry of the changelog)".to_string()
    } else {
        format!("since `{args}`")
    };
    let extra = if args.is_empty() {
        String::new()
    } else {
        format!("\n\n{args}")
    };
    template
        .replace("{target}", &target)
        .replace("{since}", &since)
        .replace("{args}", &extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(kind: FileKind, name: &str, text: &str) -> CommandFile {
        CommandFile {
            kind,
            name: name.into(),
            source: format!("/w/p/.agent/commands/{name}.md"),
            text: text.into(),
        }
    }

    fn set(files: Vec<CommandFile>) -> CommandSet {
        build(
            &CommandsRead {
                root: "/w/p".into(),
                files,
                ..Default::default()
            },
            CommandLimits::default(),
        )
    }

    #[test]
    fn builtins_come_first_then_custom_then_skills_and_the_first_name_wins() {
        let s = set(vec![
            file(FileKind::Custom, "fix", "Fix the bug\nthen test"),
            file(FileKind::Custom, "fix", "the person's fix"),
            file(
                FileKind::Skill,
                "deploy",
                "---\nname: ship\ndescription: Ship it\n---\nbody",
            ),
        ]);
        let names: Vec<&str> = s.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "compact",
                "plan",
                "undo",
                "review",
                "changelog",
                "init",
                "continue",
                "fix",
                "ship"
            ]
        );
        assert_eq!(s.find("fix").unwrap().description, "Fix the bug");
        assert_eq!(s.find("ship").unwrap().kind(), "skill");
        assert_eq!(s.left_out.len(), 1, "{:?}", s.left_out);
    }

    #[test]
    fn a_file_named_like_a_builtin_or_a_terminal_command_or_badly_is_no_command() {
        for name in [
            "review", "Review", "compact", "undo", "sessions", "QUIT", "a b", "../x", "", "é",
        ] {
            let s = set(vec![file(FileKind::Custom, name, "evil")]);
            assert_eq!(s.commands.len(), BUILTINS.len(), "{name}");
            assert!(s.left_out[0].contains("not a command"), "{name}");
        }
    }

    #[test]
    fn descriptions_are_one_clean_capped_line() {
        assert_eq!(
            sanitize_description("\n  a\u{1b}[31mb\u{202e}c \nnext", 160),
            "a[31mbc"
        );
        let long = "x".repeat(500);
        let d = sanitize_description(&long, 160);
        assert_eq!(d.chars().count(), 160);
        assert!(d.ends_with('…'));
    }

    #[test]
    fn front_matter_gives_mode_model_hint_and_leaves_the_body() {
        let s = set(vec![file(
            FileKind::Custom,
            "go",
            "---\ndescription: \"Go\"\nmode: auto\nmodel: m/x\nargument-hint: <what>\n---\nDo $ARGUMENTS\n",
        )]);
        let c = s.find("go").unwrap();
        assert_eq!(c.hint.as_deref(), Some("<what>"));
        let What::File {
            body, mode, model, ..
        } = &c.what
        else {
            panic!()
        };
        assert_eq!(
            (body.as_str(), *mode, model.as_deref()),
            ("Do $ARGUMENTS\n", Some(Mode::Auto), Some("m/x"))
        );
    }

    #[test]
    fn a_prompt_names_a_command_only_with_a_leading_slash_and_a_clean_name() {
        assert_eq!(invocation("/review main"), Some(("review", "main")));
        assert_eq!(invocation("/plan"), Some(("plan", "")));
        assert_eq!(invocation("/etc/hosts is wrong"), None);
        assert_eq!(invocation("see /review"), None);
        assert_eq!(invocation("/"), None);
    }

    #[test]
    fn arguments_go_in_once_and_are_not_scanned_again() {
        assert_eq!(
            expand("Fix $ARGUMENTS now", "the $1 bug"),
            "Fix the $1 bug now"
        );
        assert_eq!(expand("From $1 to $2, $3.", "a b"), "From a to b, .");
        assert_eq!(expand("Just this", "and more"), "Just this\n\nand more");
        assert_eq!(expand("Cost: $5 $x", ""), "Cost:  $x");
    }
}
