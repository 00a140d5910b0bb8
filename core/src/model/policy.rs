//! The mode table: what a tool call may do on its own, what asks a person first, and what is
//! refused, in the mode that rules the turn. Pure: the engine asks, this answers.
//!
//! | class (`tools.rs`) | `plan` | `manual` | `edit` | `auto` |
//! |---|---|---|---|---|
//! | reading: `read`, `list`, `find`, `search` | goes ahead | goes ahead | goes ahead | goes ahead |
//! | writing: `write`, `edit` | refused | asks | goes ahead | goes ahead |
//! | running: `run` | refused | asks | asks | goes ahead |
//! | own: `ask_user`, `plan_*` | goes ahead | goes ahead | goes ahead | goes ahead |
//!
//! Where a call goes ahead, the shell still confines it (project, `remote.roots`, protected
//! paths): the mode says whether, the shell says where.
//!
//! "Allow always" is remembered in memory for that session only, never written anywhere: for
//! `write` and `edit` by the tool's name, for `run` by the command's first two words. A
//! command with a shell control character (`; & | $( \` > <` or a line break) is never
//! covered by a remembered prefix (`cargo test; rm -rf ~` must not ride on `cargo test`): it
//! always asks. At most `engine.tools.max_remembered` rules are kept, across sessions; the
//! oldest is forgotten first.

use std::collections::VecDeque;

use crate::config::Mode;
use crate::model::tools::Class;

/// What the mode says of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Put a permission card first; the reason says what and why.
    Ask(String),
    /// Refused to the model, with the reason.
    Refuse(String),
}

/// What "allow always" covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A writing tool, by name.
    Tool(String),
    /// Commands beginning with these words.
    Prefix(String),
}

/// The rule "allow always" would make for a call: `None` for a command no prefix may cover.
pub fn rule_for(name: &str, command: Option<&str>) -> Option<Rule> {
    match command {
        Some(command) => command_prefix(command).map(Rule::Prefix),
        None => Some(Rule::Tool(name.to_string())),
    }
}

/// Characters that make a command line more than one command, or send its output elsewhere.
const CONTROL: [&str; 9] = [";", "&", "|", "$(", "`", ">", "<", "\n", "\r"];

/// A command's first two words, or `None` when it holds a shell control character.
pub fn command_prefix(command: &str) -> Option<String> {
    if CONTROL.iter().any(|c| command.contains(c)) {
        return None;
    }
    let words: Vec<&str> = command.split_whitespace().take(2).collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The "allow always" rules of every session, oldest first.
#[derive(Debug, Default)]
pub struct Remembered {
    rules: VecDeque<(String, Rule)>,
}

impl Remembered {
    /// Whether a rule of `session` covers a call (`command` for `run`).
    pub fn covers(&self, session: &str, name: &str, command: Option<&str>) -> bool {
        let Some(wanted) = rule_for(name, command) else {
            return false;
        };
        self.rules.iter().any(|(s, rule)| {
            s == session
                && match (rule, &wanted) {
                    (Rule::Tool(a), Rule::Tool(b)) => a == b,
                    (Rule::Prefix(a), Rule::Prefix(b)) => a == b,
                    _ => false,
                }
        })
    }

    /// Remember a rule for `session`, keeping at most `max` in all (oldest forgotten first).
    pub fn remember(&mut self, session: &str, rule: Rule, max: usize) {
        if self.rules.iter().any(|(s, r)| s == session && *r == rule) {
            return;
        }
        self.rules.push_back((session.to_string(), rule));
        while self.rules.len() > max {
            self.rules.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Rule on a call of `class` in `mode`. `what` says the call for the reason (`run \`cargo
/// test\``); `remembered`: an "allow always" rule covers it.
pub fn decide(mode: Mode, class: Class, what: &str, remembered: bool) -> Verdict {
    match (class, mode) {
        (Class::Reading | Class::Own, _) => Verdict::Allow,
        (Class::Writing | Class::Running, Mode::Plan) => Verdict::Refuse(format!(
            "{what} was refused: the session is in plan mode, where only reading and planning \
             tools may be used; submit a plan with plan_submit to go on"
        )),
        (Class::Writing, Mode::Edit | Mode::Auto) | (Class::Running, Mode::Auto) => Verdict::Allow,
        _ if remembered => Verdict::Allow,
        (Class::Writing, _) => Verdict::Ask(format!(
            "{what}: {} mode asks before every change to a file",
            mode.as_str()
        )),
        (Class::Running, _) => Verdict::Ask(format!(
            "{what}: {} mode asks before every command",
            mode.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_table() {
        use Class::*;
        let table = [
            (Reading, ["allow", "allow", "allow", "allow"]),
            (Own, ["allow", "allow", "allow", "allow"]),
            (Writing, ["refuse", "ask", "allow", "allow"]),
            (Running, ["refuse", "ask", "ask", "allow"]),
        ];
        for (class, row) in table {
            for (mode, want) in Mode::ALL.into_iter().zip(row) {
                let got = match decide(mode, class, "x", false) {
                    Verdict::Allow => "allow",
                    Verdict::Ask(_) => "ask",
                    Verdict::Refuse(_) => "refuse",
                };
                assert_eq!(got, want, "{class:?} in {mode:?}");
            }
        }
        // A remembered rule lifts an ask, never a refusal.
        assert_eq!(decide(Mode::Manual, Running, "x", true), Verdict::Allow);
        assert!(matches!(
            decide(Mode::Plan, Running, "x", true),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            decide(Mode::Edit, Running, "run `cargo test`", false),
            Verdict::Ask("run `cargo test`: edit mode asks before every command".into())
        );
    }

    #[test]
    fn a_prefix_is_two_words_and_never_covers_control_characters() {
        assert_eq!(
            command_prefix("cargo  test --all").as_deref(),
            Some("cargo test")
        );
        assert_eq!(command_prefix("ls").as_deref(), Some("ls"));
        assert_eq!(command_prefix("   "), None);
        for bad in [
            "cargo test; rm -rf ~",
            "cargo test && x",
            "cargo test | tee",
            "cargo test $(x)",
            "cargo test `x`",
            "cargo test > f",
            "cargo test < f",
            "cargo test\nrm x",
        ] {
            assert_eq!(command_prefix(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rules_are_per_session_per_prefix_and_bounded() {
        let mut r = Remembered::default();
        r.remember("s1", rule_for("run", Some("cargo test")).unwrap(), 2);
        assert!(r.covers("s1", "run", Some("cargo test --release")));
        assert!(!r.covers("s1", "run", Some("cargo build")));
        assert!(!r.covers("s2", "run", Some("cargo test")));
        assert!(!r.covers("s1", "run", Some("cargo test; rm x")));
        assert!(!r.covers("s1", "write", None));
        r.remember("s1", Rule::Tool("write".into()), 2);
        assert!(r.covers("s1", "write", None));
        assert!(!r.covers("s1", "edit", None));
        r.remember("s1", Rule::Tool("edit".into()), 2);
        assert_eq!(r.len(), 2);
        assert!(
            !r.covers("s1", "run", Some("cargo test")),
            "the oldest is forgotten"
        );
    }
}
