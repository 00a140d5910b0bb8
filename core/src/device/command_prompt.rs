//! A prompt that starts with `/name`, as the TUI runs it: a built-in prompt command sends its
//! text, `/plan` alone is an action (the mode becomes plan, nothing reaches the model), `/plan
//! <task>` runs the task in plan mode, `/review` with nothing to review answers `message`
//! (review_check.rs), `/compact` folds the earlier turns into a summary
//! (compaction.rs), and any other name is looked up in the session's command
//! files (the turn waits for the read): a custom command or a skill sends its text with the
//! arguments put in, its `mode` lowered to `remote.max_mode` for a session under the limits,
//! its `model` for this prompt only. A name that is no command is plain text, `/` and all. The
//! transcript shows the prompt as typed; a command's own text is never `@`-expanded (mentions
//! are found in what the person typed only).

use serde_json::json;

use super::turn_table::CommandUse;
use super::Device;
use crate::commands::{self, BuiltinKind, CommandSet, What};
use crate::config::Mode;
use crate::engine::StopReason;
use crate::review::ReviewTarget;
use crate::turn::Answer;

/// What a prompt's text is, as a command.
pub(super) enum AsCommand {
    /// Plain text.
    Text,
    /// A command whose text is known now: send `text`; `plan`: in plan mode.
    Send {
        text: String,
        command: CommandUse,
        plan: bool,
    },
    /// `/review`: sent like [`AsCommand::Send`] once git shows something to review, when
    /// `target` says what to look at (`None`: an argument git is not handed; sent as is).
    Review {
        text: String,
        command: CommandUse,
        target: Option<ReviewTarget>,
    },
    /// `/plan` alone: the action.
    PlanAction,
    /// `/compact`: the action, with what to keep in mind (the text after the name).
    Compact { command: CommandUse, focus: String },
    /// `/undo`: the action (undo.rs).
    Undo { command: CommandUse },
    /// A name to look up among the session's files.
    LookUp { name: String, args: String },
}

/// What the text of a prompt is, as far as the built-ins tell.
pub(super) fn classify(text: &str) -> AsCommand {
    let Some((name, args)) = commands::invocation(text) else {
        return AsCommand::Text;
    };
    let used = |name: &str| CommandUse {
        name: name.to_string(),
        shown: text.to_string(),
        model: None,
    };
    match commands::BUILTINS.iter().find(|b| b.name == name) {
        Some(b) => match b.kind {
            BuiltinKind::Plan if args.is_empty() => AsCommand::PlanAction,
            BuiltinKind::Plan => AsCommand::Send {
                text: args.to_string(),
                command: used(name),
                plan: true,
            },
            BuiltinKind::Compact => AsCommand::Compact {
                command: used(name),
                focus: args.to_string(),
            },
            BuiltinKind::Review(template) => AsCommand::Review {
                text: commands::builtin_text(name, template, args),
                command: used(name),
                target: ReviewTarget::of_args(args),
            },
            BuiltinKind::Undo => AsCommand::Undo {
                command: used(name),
            },
            BuiltinKind::Prompt(template) => AsCommand::Send {
                text: commands::builtin_text(name, template, args),
                command: used(name),
                plan: false,
            },
        },
        // No file may take these names: plain text without a read.
        None if commands::NOT_YET.contains(&name) || commands::TERMINAL_ONLY.contains(&name) => {
            AsCommand::Text
        }
        None => AsCommand::LookUp {
            name: name.to_string(),
            args: args.to_string(),
        },
    }
}

/// A turn waiting for its `/name` to be looked up.
#[derive(Debug)]
pub(crate) struct Invoked {
    pub session: String,
    pub name: String,
    pub args: String,
    /// The prompt as typed.
    pub typed: String,
}

impl Device {
    /// `/plan` alone: the session's mode is plan now; the prompt is answered at once with it,
    /// and nothing is sent to the model. The answer is kept like a turn's, so the same turn
    /// id sent again gets it and changes nothing more.
    pub(super) fn plan_action(&mut self, session: &str, turn_id: &str) -> Answer {
        self.change_mode(session, Mode::Plan);
        let mut extra = serde_json::Map::new();
        extra.insert("command".into(), json!("plan"));
        extra.insert("mode".into(), json!(Mode::Plan.as_str()));
        self.answer_action(session, turn_id, extra)
    }

    /// An action's prompt answered at once with `extra` in its `_meta.lembas`, kept like a
    /// turn's answer so the same turn id sent again gets it and does nothing more.
    pub(super) fn answer_action(
        &mut self,
        session: &str,
        turn_id: &str,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> Answer {
        let answer = Answer::stopped(StopReason::EndTurn, extra);
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(session) else {
            return answer;
        };
        let (order, forgotten) = s.turns.answer_at_once(turn_id, answer.clone());
        let mut records = vec![crate::store::done_record(
            session, turn_id, order, &answer, now, None,
        )];
        records.extend(forgotten.iter().map(|t| crate::store::Record::Delete {
            table: crate::store::Table::Turns,
            key: crate::store::turn_key(session, t),
        }));
        self.out
            .persist_in(super::outbox::Lane::of(session), records);
        answer
    }

    /// The set a waiting turn's `/name` is looked up in was read (`request`), or could not be:
    /// the turn sends the command's text, or its own as plain text, and may start.
    pub(super) fn command_found(
        &mut self,
        request: u64,
        invoked: Invoked,
        set: Result<CommandSet, String>,
    ) {
        let mut notices = Vec::new();
        let found = match &set {
            Ok(set) => match set.find(&invoked.name).map(|c| &c.what) {
                Some(What::File {
                    body, mode, model, ..
                }) => Some((body, *mode, model.clone())),
                _ => None,
            },
            Err(why) => {
                notices.push(format!(
                    "`/{}` was sent as text: the session's commands could not be read ({why})",
                    invoked.name
                ));
                None
            }
        };
        let max = self.config.remote.max_mode;
        let known =
            |m: &str| self.config.models.is_empty() || self.config.models.iter().any(|k| k.id == m);
        let found = found.map(|(body, mode, model)| {
            let model = model.filter(|m| {
                let ok = known(m);
                if !ok {
                    notices.push(format!(
                        "`/{}` asks for the model `{m}`, which this device does not speak to: \
                         the session's model answers",
                        invoked.name
                    ));
                }
                ok
            });
            let text = commands::expand(body, &invoked.args);
            let command = CommandUse {
                name: invoked.name.clone(),
                shown: invoked.typed.clone(),
                model,
            };
            (text, command, mode)
        });
        let Some(s) = self.sessions.get_mut(&invoked.session) else {
            return;
        };
        let mode =
            found.as_ref().and_then(|(_, _, m)| *m).map(
                |m| {
                    if s.capped {
                        m.capped(max)
                    } else {
                        m
                    }
                },
            );
        let found = found.map(|(text, command, _)| (text, command));
        if !s.turns.command_looked_up(request, found, notices) {
            return;
        }
        if let Some(mode) = mode.filter(|m| *m != s.durable.mode) {
            self.change_mode(&invoked.session, mode);
        }
        self.pump(&invoked.session);
    }
}
