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

use super::turn_table::CommandUse;
use super::Device;
use crate::commands::{self, BuiltinKind, CommandSet, What};
use crate::config::{Mode, Model};
use crate::engine::StopReason;
use crate::review::ReviewTarget;
use crate::store::{self, Record, Table};
use crate::turn::Answer;
use crate::wire::session::TurnNotes;

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

/// What a waiting turn's `/name` came to once its session's set was read.
#[derive(Debug, PartialEq)]
pub(super) struct LookedUp {
    /// A command file's text (arguments put in) and its use; `None`: the prompt is sent as
    /// the plain text it was typed as.
    found: Option<(String, CommandUse)>,
    /// The mode the command file asks for, lowered to the cap when there is one.
    mode: Option<Mode>,
    /// What the person is told of the lookup: the set unread, a model not spoken to.
    notices: Vec<String>,
}

impl Invoked {
    /// Look the name up in `set` (or the reason it could not be read): a command file gives its
    /// text and its mode (lowered to `cap`, a session under the limits' `remote.max_mode`), and
    /// its model if `models` has it (no models configured: any); anything else is plain text.
    fn looked_up(
        &self,
        set: &Result<CommandSet, String>,
        models: &[Model],
        cap: Option<Mode>,
    ) -> LookedUp {
        let mut notices = Vec::new();
        let found = match set {
            Ok(set) => match set.find(&self.name).map(|c| &c.what) {
                Some(What::File {
                    body, mode, model, ..
                }) => Some((body, *mode, model.clone())),
                _ => None,
            },
            Err(why) => {
                notices.push(format!(
                    "`/{}` was sent as text: the session's commands could not be read ({why})",
                    self.name
                ));
                None
            }
        };
        let known = |m: &str| models.is_empty() || models.iter().any(|k| k.id == m);
        let found = found.map(|(body, mode, model)| {
            let model = model.filter(|m| {
                let ok = known(m);
                if !ok {
                    notices.push(format!(
                        "`/{}` asks for the model `{m}`, which this device does not speak to: \
                         the session's model answers",
                        self.name
                    ));
                }
                ok
            });
            let text = commands::expand(body, &self.args);
            let command = CommandUse {
                name: self.name.clone(),
                shown: self.typed.clone(),
                model,
            };
            (text, command, mode)
        });
        let mode = found
            .as_ref()
            .and_then(|(_, _, m)| *m)
            .map(|m| cap.map_or(m, |max| m.capped(max)));
        LookedUp {
            found: found.map(|(text, command, _)| (text, command)),
            mode,
            notices,
        }
    }
}

impl Device {
    /// `/plan` alone: the session's mode is plan now; the prompt is answered at once with it,
    /// and nothing is sent to the model. The answer is kept like a turn's, so the same turn
    /// id sent again gets it and changes nothing more.
    pub(super) fn plan_action(&mut self, session: &str, turn_id: &str) -> Answer {
        self.change_mode(session, Mode::Plan);
        self.answer_action(session, turn_id, plan_action_meta())
    }

    /// An action's prompt answered at once with `notes` in its `_meta.lembas`, kept like a
    /// turn's answer so the same turn id sent again gets it and does nothing more.
    pub(super) fn answer_action(
        &mut self,
        session: &str,
        turn_id: &str,
        notes: TurnNotes,
    ) -> Answer {
        let answer = Answer::stopped(StopReason::EndTurn, notes);
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(session) else {
            return answer;
        };
        let (order, forgotten) = s.turns.answer_at_once(turn_id, answer.clone());
        let records = kept_at_once(session, turn_id, order, &forgotten, &answer, now);
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
        let Some(s) = self.sessions.get_mut(&invoked.session) else {
            return;
        };
        let looked_up = invoked.looked_up(
            &set,
            &self.config.models,
            s.capped.then_some(self.config.remote.max_mode),
        );
        if !s
            .turns
            .command_looked_up(request, looked_up.found, looked_up.notices)
        {
            return;
        }
        if let Some(mode) = looked_up.mode.filter(|m| *m != s.durable.mode) {
            self.change_mode(&invoked.session, mode);
        }
        self.pump(&invoked.session);
    }
}

/// `/plan` alone's answer's `_meta.lembas`: the command, and the mode the session is in now.
fn plan_action_meta() -> TurnNotes {
    TurnNotes {
        command: Some("plan".into()),
        mode: Some(Mode::Plan),
        ..TurnNotes::default()
    }
}

/// The records of an action's answer kept as turn `turn_id`'s (`order`th of `session`), then
/// the deletes of the turns the ledger let go to make room (`forgotten`).
fn kept_at_once(
    session: &str,
    turn_id: &str,
    order: u64,
    forgotten: &[String],
    answer: &Answer,
    now: u64,
) -> Vec<Record> {
    let mut records = vec![store::done_record(
        session, turn_id, order, answer, now, None,
    )];
    records.extend(forgotten.iter().map(|t| Record::Delete {
        table: Table::Turns,
        key: store::turn_key(session, t),
    }));
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::{Command, CommandLimits, CommandsRead, FileKind};

    fn invoked(name: &str, args: &str) -> Invoked {
        Invoked {
            session: "s".into(),
            name: name.into(),
            args: args.into(),
            typed: format!("/{name} {args}"),
        }
    }

    /// The built-ins and one command file, `fix`, asking for `auto` and the model `m1`.
    fn set() -> CommandSet {
        let mut set = commands::build(&CommandsRead::default(), CommandLimits::default());
        set.commands.push(Command {
            name: "fix".into(),
            description: String::new(),
            hint: None,
            what: What::File {
                kind: FileKind::Custom,
                body: "Fix $ARGUMENTS.".into(),
                mode: Some(Mode::Auto),
                model: Some("m1".into()),
            },
        });
        set
    }

    fn used(model: Option<&str>) -> CommandUse {
        CommandUse {
            name: "fix".into(),
            shown: "/fix the bug".into(),
            model: model.map(str::to_string),
        }
    }

    #[test]
    fn a_command_file_sends_its_text_in_its_mode_under_the_cap_and_its_model_if_spoken_to() {
        let fix = invoked("fix", "the bug");
        let set = Ok(set());
        let free = fix.looked_up(&set, &[], None);
        assert_eq!(
            free,
            LookedUp {
                found: Some(("Fix the bug.".into(), used(Some("m1")))),
                mode: Some(Mode::Auto),
                notices: vec![],
            }
        );
        let capped = fix.looked_up(&set, &[Model::served("m1")], Some(Mode::Edit));
        assert_eq!(capped.mode, Some(Mode::Edit), "lowered to the cap");
        assert_eq!(capped.found, free.found, "a model the device speaks to");
        let under = fix.looked_up(&set, &[], Some(Mode::Auto));
        assert_eq!(under.mode, Some(Mode::Auto), "the cap only lowers");
        let unknown = fix.looked_up(&set, &[Model::served("m2")], None);
        assert_eq!(
            unknown.found,
            Some(("Fix the bug.".into(), used(None))),
            "the session's model answers"
        );
        assert_eq!(
            unknown.notices,
            vec![
                "`/fix` asks for the model `m1`, which this device does not speak to: the \
                 session's model answers"
                    .to_string()
            ]
        );
    }

    #[test]
    fn a_name_that_is_no_command_file_is_plain_text_and_an_unread_set_is_told() {
        let set = Ok(set());
        for name in ["nope", "plan"] {
            assert_eq!(
                invoked(name, "x").looked_up(&set, &[], None),
                LookedUp {
                    found: None,
                    mode: None,
                    notices: vec![],
                },
                "{name}"
            );
        }
        let unread = invoked("fix", "x").looked_up(&Err("denied".into()), &[], Some(Mode::Plan));
        assert_eq!(
            unread,
            LookedUp {
                found: None,
                mode: None,
                notices: vec![
                    "`/fix` was sent as text: the session's commands could not be read (denied)"
                        .into()
                ],
            }
        );
    }

    #[test]
    fn an_action_kept_at_once_is_its_done_turn_then_the_deletes_of_the_turns_let_go() {
        let answer = Answer::stopped(StopReason::EndTurn, plan_action_meta());
        let records = kept_at_once("s", "t9", 9, &["t1".into(), "t2".into()], &answer, 5);
        assert_eq!(
            records,
            vec![
                store::done_record("s", "t9", 9, &answer, 5, None),
                Record::Delete {
                    table: Table::Turns,
                    key: "s/t1".into(),
                },
                Record::Delete {
                    table: Table::Turns,
                    key: "s/t2".into(),
                },
            ]
        );
        assert_eq!(
            serde_json::to_value(plan_action_meta()).unwrap(),
            serde_json::json!({ "command": "plan", "mode": "plan" })
        );
    }
}
