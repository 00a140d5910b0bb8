//! A session's next turn as it starts. It runs with the session as it is now, under the
//! device's settings as they are now: its mode lowered to `remote.max_mode` and the roots given
//! when the session is capped, a model adopted by a session that had none, the earlier turns
//! the model is given. A prompt's turn goes into the session's history here; the device only
//! announces what [`Session::start_next`] hands back and passes the turn on, in the order
//! [`Started::tells`] gives (turns.rs).

use super::ledger::TurnState;
use super::sessions::Session;
use super::turn_table::Compacting;
use super::turns::prior_turns;
use crate::config::{DeviceConfig, Mode, SessionLimits};
use crate::engine::{Attachment, TurnStart};
use crate::store::{history_record, turn_record_at, Record, StoredTurnState};
use crate::turn::Answer;
use crate::wire::event::lembas::{LembasEvent, NoticeEvent, PromptEvent, TaskState};
use crate::wire::session::{AttachmentMeta, HistoryTurn};

/// The device's settings a turn starts under, as they are at its start.
pub(super) struct StartRules<'a> {
    pub max_mode: Mode,
    /// `remote.roots`, given to a capped session's turn.
    pub roots: &'a [String],
    /// The first model (its id, and whether the instance serves it): a session with none
    /// adopts it.
    pub default_model: Option<(String, bool)>,
    pub limits: SessionLimits,
    pub now: u64,
}

impl<'a> StartRules<'a> {
    /// The rules of the device's settings (`config`) as they are at `now`.
    pub(super) fn of(config: &'a DeviceConfig, now: u64) -> StartRules<'a> {
        StartRules {
            max_mode: config.remote.max_mode,
            roots: &config.remote.roots,
            default_model: config.models.first().map(|m| (m.id.clone(), m.instance)),
            limits: config.sessions,
            now,
        }
    }
}

/// What a prompt's turn that starts (`start`) tells the session's clients, in order: the
/// prompt as shown (`event`), the task's start, then what the reading of its mentions had to
/// say (`notices`).
pub(super) fn prompt_started(
    start: &TurnStart,
    event: PromptEvent,
    notices: Vec<String>,
) -> Vec<LembasEvent> {
    let task = LembasEvent::task(TaskState::Start, start.turn_id.clone());
    let notices = notices
        .into_iter()
        .map(|text| LembasEvent::Notice(NoticeEvent { text }));
    [LembasEvent::Prompt(event), task]
        .into_iter()
        .chain(notices)
        .collect()
}

/// A turn that starts, for the device to announce and pass on.
pub(super) struct Started {
    pub start: TurnStart,
    /// The session's record once its mode was lowered to `max_mode`, if it was.
    pub lowered: Option<Record>,
    /// The session's record once it adopted the default model, if it did.
    pub adopted: Option<Record>,
    /// The turn's own records: it runs (and a prompt's history entry).
    pub records: Vec<Record>,
    pub kind: Starting,
}

/// What starts, and so who runs it.
pub(super) enum Starting {
    /// An `/undo`: the shell puts the files back (undo.rs).
    Undo,
    /// A compaction (compaction.rs).
    Compaction(Compacting),
    /// A prompt for the engine: the event that shows it, and what the reading of its
    /// mentions had to say.
    Prompt {
        event: PromptEvent,
        notices: Vec<String>,
    },
}

/// One thing a turn's start tells, for the device to do in order.
pub(super) enum StartTell {
    /// The session's mode lowered to this: its record (persisted), then announced.
    Mode(Mode, Record),
    /// Records of the session or the turn, persisted in the session's lane.
    Persist(Vec<Record>),
    /// The session's model as it is now, told to its clients.
    ModelEvent,
    /// An event to the session's clients.
    Event(LembasEvent),
    /// The turn, to the engine.
    Engine(TurnStart),
    /// An `/undo`'s turn (its id) to undo.rs.
    Undo(String),
    /// A compaction's turn to compaction.rs.
    Compaction(TurnStart, Compacting),
}

impl Started {
    /// What the start tells, in order: what it changed of the session (its mode lowered, its
    /// model adopted, each durable before it is told), the turn's own records (only the
    /// session's frames and commands wait for them), then who runs it and, for a prompt's
    /// turn, what its start shows ([`prompt_started`]) once the engine has it.
    pub(super) fn tells(self) -> Vec<StartTell> {
        let Started {
            start,
            lowered,
            adopted,
            records,
            kind,
        } = self;
        let mut tells = Vec::new();
        // Lowered, the session's mode is the one the turn runs at.
        tells.extend(lowered.map(|record| StartTell::Mode(start.mode, record)));
        if let Some(record) = adopted {
            tells.extend([StartTell::Persist(vec![record]), StartTell::ModelEvent]);
        }
        tells.push(StartTell::Persist(records));
        match kind {
            Starting::Undo => tells.push(StartTell::Undo(start.turn_id)),
            Starting::Compaction(via) => tells.push(StartTell::Compaction(start, via)),
            Starting::Prompt { event, notices } => {
                let events = prompt_started(&start, event, notices);
                tells.push(StartTell::Engine(start));
                tells.extend(events.into_iter().map(StartTell::Event));
            }
        }
        tells
    }
}

impl Session {
    /// A turn of the session as it is now, given `text` and `attachments` (what its start
    /// completes is left empty).
    pub(super) fn turn_start(
        &self,
        turn_id: String,
        text: String,
        attachments: Vec<Attachment>,
    ) -> TurnStart {
        let d = &self.durable;
        TurnStart {
            session_id: d.id.clone(),
            turn_id,
            text,
            attachments,
            context: d.context.clone(),
            mode: d.mode,
            model: d.model.clone(),
            effort: d.effort.clone(),
            cwd: d.cwd.clone(),
            roots: Vec::new(),
            history: Vec::new(),
            summary: None,
            compact: false,
        }
    }

    /// Start the next turn when nothing runs and it waits for nothing (the turn table says),
    /// made ready to run as `rules` say.
    pub(super) fn start_next(&mut self, rules: &StartRules<'_>) -> Option<Started> {
        let (mut start, order) = self.turns.start_next()?;
        let running = self.turns.running_mut(&start.turn_id)?;
        let notices = std::mem::take(&mut running.notices);
        let (command, undo, compact) = (running.command.clone(), running.undo, running.compact);
        // The turn runs at the session's mode as it is now, lowered to `remote.max_mode` as it
        // is now: a lowered max_mode reaches every open session's next turn.
        let lowered = (self.capped && self.durable.mode > rules.max_mode).then(|| {
            self.durable.mode = rules.max_mode;
            self.record()
        });
        start.mode = self.durable.mode;
        // A session made while the device had no models yet (an editor's, opened while the
        // list was on its way) runs on the default, the first, once there is one, and keeps
        // it: what `session/new` would have chosen. One that named a model never gets another.
        let adopted = match (&self.durable.model, &rules.default_model) {
            (None, Some((id, instance))) => {
                self.durable.model = Some(id.clone());
                self.durable.instance = *instance;
                Some(self.record())
            }
            _ => None,
        };
        start.model.clone_from(&self.durable.model);
        // A command's prompt: shown as typed; its model answers this prompt only.
        if let Some(model) = command.as_ref().and_then(|c| c.model.clone()) {
            start.model = Some(model);
        }
        let shown = command.map_or_else(|| start.text.clone(), |c| c.shown);
        // Roots as they are now, like the mode: the limits apply as they are at the start.
        start.roots = if self.capped {
            rules.roots.to_vec()
        } else {
            Vec::new()
        };
        let ledger = self.turns.ledger();
        let limits = &rules.limits;
        start.history = prior_turns(
            self.recent.turns(),
            limits.max_context_turns,
            limits.max_context_bytes,
            |turn| {
                matches!(
                    ledger.get(turn),
                    Some(TurnState::Done(Answer::Failed { .. }))
                )
            },
        );
        start.summary = self.durable.compaction.as_ref().map(|c| c.summary.clone());
        let session = self.durable.id.as_str();
        let turn_id = start.turn_id.clone();
        let running = StoredTurnState::Running;
        let mut started = Started {
            records: Vec::new(),
            start,
            lowered,
            adopted,
            kind: Starting::Undo,
        };
        if undo || compact.is_some() {
            let record = turn_record_at(session, &turn_id, order, running, rules.now, None);
            started.records.push(record);
            if let Some(via) = compact.filter(|_| !undo) {
                started.kind = Starting::Compaction(via);
            }
            return Some(started);
        }
        let attachments: Vec<AttachmentMeta> = started
            .start
            .attachments
            .iter()
            .map(|a| AttachmentMeta {
                name: a.name.clone(),
                mime_type: a.mime_type.clone(),
                size: a.size,
            })
            .collect();
        let user = HistoryTurn::User {
            text: shown.clone(),
            turn_id: Some(turn_id.clone()),
            attachments: attachments.clone(),
        };
        let index = self.recent.push(&user, false, limits);
        self.turns.ledger_mut().set_history(&turn_id, index);
        started.records = vec![
            turn_record_at(session, &turn_id, order, running, rules.now, Some(index)),
            history_record(session, index as usize, &user),
        ];
        started.kind = Starting::Prompt {
            event: PromptEvent {
                attachments,
                text: shown,
                turn_id,
            },
            notices,
        };
        Some(started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::turn_table::{Admission, CommandUse};
    use crate::device::ConnId;
    use crate::jsonrpc::Id;
    use crate::store::SessionRecord;

    fn session(mode: Mode, model: Option<&str>) -> Session {
        let record = SessionRecord {
            mode,
            model: model.map(str::to_string),
            ..SessionRecord::testing("s")
        };
        Session::new(record, 10)
    }

    fn undo() -> Admission {
        Admission {
            undo: true,
            ..Admission::default()
        }
    }

    fn compaction() -> Admission {
        Admission {
            compact: Some(Compacting::Method),
            ..Admission::default()
        }
    }

    fn queue(s: &mut Session, turn: &str, admission: Admission) {
        let start = TurnStart {
            mode: s.durable.mode,
            model: s.durable.model.clone(),
            ..TurnStart::testing(turn, &format!("text of {turn}"))
        };
        s.turns.admit(start, admission, (ConnId(1), Id::number(1)));
    }

    fn rules(roots: &[String]) -> StartRules<'_> {
        StartRules {
            max_mode: Mode::Edit,
            roots,
            default_model: Some(("first".into(), true)),
            limits: SessionLimits::default(),
            now: 5,
        }
    }

    #[test]
    fn a_capped_session_starts_at_most_at_max_mode_with_the_roots() {
        let roots = vec!["/w".to_string()];
        let mut s = session(Mode::Auto, Some("m"));
        queue(&mut s, "a", Admission::default());
        let started = s.start_next(&rules(&roots)).expect("a starts");
        assert_eq!(started.start.mode, Mode::Edit);
        assert_eq!(
            s.durable.mode,
            Mode::Edit,
            "the session keeps the lowered mode"
        );
        assert!(started.lowered.is_some());
        assert_eq!(started.start.roots, roots);
        assert!(s.start_next(&rules(&roots)).is_none(), "a runs");

        let mut s = session(Mode::Auto, Some("m"));
        s.capped = false;
        queue(&mut s, "a", Admission::default());
        let started = s.start_next(&rules(&roots)).expect("a starts");
        assert_eq!(started.start.mode, Mode::Auto, "stdio is not capped");
        assert!(started.lowered.is_none());
        assert!(started.start.roots.is_empty());
    }

    #[test]
    fn a_session_with_no_model_adopts_the_first_and_a_commands_model_is_for_its_turn_only() {
        let mut s = session(Mode::Edit, None);
        let command = CommandUse {
            name: "fix".into(),
            shown: "/fix it".into(),
            model: Some("fast".into()),
        };
        let admission = Admission {
            command: Some(command),
            ..Admission::default()
        };
        queue(&mut s, "a", admission);
        let started = s.start_next(&rules(&[])).expect("a starts");
        assert!(started.adopted.is_some());
        assert!(started.lowered.is_none(), "edit is within max_mode");
        assert_eq!(s.durable.model.as_deref(), Some("first"));
        assert!(s.durable.instance);
        assert_eq!(started.start.model.as_deref(), Some("fast"));
        let Starting::Prompt { event, .. } = started.kind else {
            panic!("a prompt starts");
        };
        assert_eq!(event.text, "/fix it", "shown as typed");
        assert_eq!(
            started.start.text, "text of a",
            "the model is given the command's text"
        );

        let mut s = session(Mode::Edit, Some("mine"));
        queue(&mut s, "a", Admission::default());
        let started = s.start_next(&rules(&[])).expect("a starts");
        assert!(started.adopted.is_none());
        assert_eq!(started.start.model.as_deref(), Some("mine"));
    }

    /// Each tell as what it is, with the mode, record count, turn or event kind it carries.
    fn told(started: Started) -> Vec<String> {
        let turn = |start: &TurnStart| start.turn_id.clone();
        started
            .tells()
            .into_iter()
            .map(|tell| match tell {
                StartTell::Mode(mode, _) => format!("mode {mode:?}"),
                StartTell::Persist(records) => format!("persist {}", records.len()),
                StartTell::ModelEvent => "model".into(),
                StartTell::Event(event) => format!("event {}", event.kind()),
                StartTell::Engine(start) => format!("engine {}", turn(&start)),
                StartTell::Undo(turn_id) => format!("undo {turn_id}"),
                StartTell::Compaction(start, via) => format!("compact {} {via:?}", turn(&start)),
            })
            .collect()
    }

    #[test]
    fn a_start_tells_the_sessions_changes_then_the_turns_records_then_who_runs_it() {
        let roots = vec!["/w".to_string()];
        let mut s = session(Mode::Auto, None);
        queue(&mut s, "a", Admission::default());
        let started = s.start_next(&rules(&roots)).expect("a starts");
        assert_eq!(
            told(started),
            [
                "mode Edit",
                "persist 1",
                "model",
                "persist 2",
                "engine a",
                "event prompt",
                "event task"
            ]
        );
        s.turns.finish(Ok(crate::engine::StopReason::EndTurn));

        queue(&mut s, "u", undo());
        queue(&mut s, "c", compaction());
        let started = s.start_next(&rules(&roots)).expect("u starts");
        assert_eq!(told(started), ["persist 1", "undo u"], "nothing changed");
        s.turns.finish(Ok(crate::engine::StopReason::EndTurn));
        let started = s.start_next(&rules(&roots)).expect("c starts");
        assert_eq!(told(started), ["persist 1", "compact c Method"]);
    }

    #[test]
    fn only_a_prompt_goes_into_the_history() {
        let mut s = session(Mode::Edit, Some("m"));
        queue(&mut s, "u", undo());
        queue(&mut s, "c", compaction());
        queue(&mut s, "p", Admission::default());

        let started = s.start_next(&rules(&[])).expect("u starts");
        assert!(matches!(started.kind, Starting::Undo));
        assert_eq!(started.records.len(), 1, "the turn runs; no history entry");
        s.turns.finish(Ok(crate::engine::StopReason::EndTurn));

        let started = s.start_next(&rules(&[])).expect("c starts");
        assert!(matches!(
            started.kind,
            Starting::Compaction(Compacting::Method)
        ));
        assert_eq!(started.records.len(), 1);
        s.turns.finish(Ok(crate::engine::StopReason::EndTurn));
        assert_eq!(s.recent.next_index(), 0, "neither is in the history");

        let next = s.recent.next_index();
        let started = s.start_next(&rules(&[])).expect("p starts");
        assert!(matches!(started.kind, Starting::Prompt { .. }));
        assert_eq!(
            started.records.len(),
            2,
            "the turn runs, and its history entry"
        );
        assert_eq!(s.recent.next_index(), next + 1);
        assert_eq!(s.turns.ledger().history_of("p"), Some(next));
    }

    #[test]
    fn a_turn_starts_under_the_settings_as_they_are_and_the_first_model() {
        let config = DeviceConfig {
            remote: crate::config::Remote {
                max_mode: Mode::Plan,
                roots: vec!["/w".into(), "/v".into()],
                ..crate::config::Remote::default()
            },
            models: vec![
                crate::config::Model {
                    instance: false,
                    ..crate::config::Model::served("first")
                },
                crate::config::Model::served("second"),
            ],
            sessions: SessionLimits {
                max_context_turns: 3,
                ..SessionLimits::default()
            },
            ..DeviceConfig::default()
        };
        let rules = StartRules::of(&config, 7);
        assert_eq!(rules.max_mode, Mode::Plan);
        assert_eq!(rules.roots, ["/w", "/v"]);
        assert_eq!(rules.default_model, Some(("first".into(), false)));
        assert_eq!(rules.limits.max_context_turns, 3);
        assert_eq!(rules.now, 7);
        let none = DeviceConfig::default();
        assert_eq!(StartRules::of(&none, 0).default_model, None);
    }

    #[test]
    fn a_prompts_start_shows_the_prompt_then_the_task_then_its_notices() {
        let start = TurnStart::testing("t", "hi");
        let event = PromptEvent {
            attachments: Vec::new(),
            text: "/fix hi".into(),
            turn_id: "t".into(),
        };
        let notice = |text: &str| LembasEvent::Notice(NoticeEvent { text: text.into() });
        let task = LembasEvent::task(TaskState::Start, "t".into());
        assert_eq!(
            prompt_started(&start, event.clone(), vec!["one".into(), "two".into()]),
            [
                LembasEvent::Prompt(event.clone()),
                task.clone(),
                notice("one"),
                notice("two"),
            ]
        );
        assert_eq!(
            prompt_started(&start, event.clone(), Vec::new()),
            [LembasEvent::Prompt(event), task]
        );
    }
}
