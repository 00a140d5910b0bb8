//! `/undo`: an action (nothing is sent to the model) that undoes the session's last turn the
//! model is still given (not reverted, not folded into a compaction's summary). Its messages
//! are reverted as `_lembas/session/rewind` reverts them (rewind.rs), and the shell puts back
//! the files that turn's tools changed (`Effect::UndoFiles`): it kept each file's content from
//! before the turn as the tool wrote it, within `sessions.undo_max_bytes` a turn, for the last
//! `sessions.undo_turns` turns of a session, and puts a file back only while it is still what
//! the turn left (a file created by the turn is removed). What it could not put back is said
//! in a `notice`. The prompt is answered `_meta.lembas.undone = { prompt, files }`, or
//! `undone: null` with nothing to undo.
//!
//! Like a compaction, an `/undo` runs in the session's turn order: sent while a turn runs, it
//! waits for it, and undoes it.
//!
//! The revert and the undo under way (`SessionRecord::undoing`: its turn, the undone one and
//! its prompt) are stored together, before the shell is asked; the answer and the end of
//! `undoing` are stored together too. A restart in between finds `undoing` with the `/undo`
//! turn still running: instead of cutting it as `cancelled` (messages reverted, files not put
//! back), the restored device asks the shell again. The shell's journal is on disk and putting
//! back is idempotent (a file already put back is said put back), so the `/undo` ends with its
//! real answer, which a resent prompt of the same turn id gets.

use serde::{Deserialize, Serialize};

use super::outbox::Lane;
use super::sessions::Session;
use super::turn_table::Waiter;
use super::{Device, Effect};
use crate::engine::StopReason;
use crate::store::{done_record, Record, Undoing};
use crate::time::Time;
use crate::turn::Answer;
use crate::wire::event::lembas::{LembasEvent, NoticeEvent, TaskState};
use crate::wire::session::{HistoryTurn, TurnNotes, UndoneTurn};

/// What the shell did for an `Effect::UndoFiles`: the files it put back (removed, for one the
/// turn created), relative to the project, and those it left as they are, with why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesUndone {
    pub restored: Vec<String>,
    #[serde(default)]
    pub kept: Vec<FileKept>,
}

/// A file the undo left as it is, and why (changed since the turn, over the bytes kept, outside
/// the project now).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileKept {
    pub path: String,
    pub why: String,
}

/// An `/undo` waiting for the shell to put the files back: its session, and what is stored
/// of it there.
#[derive(Debug)]
pub(super) struct PendingUndo {
    session: String,
    undoing: Undoing,
}

/// The turn an `/undo` undid, that turn's prompt, and what the shell did with its files.
type Undone = (String, String, Result<FilesUndone, String>);

/// How an `/undo` turn ended ([`Session::finish_undo`]).
#[derive(Debug)]
pub(super) struct UndoEnd {
    pub answer: Answer,
    /// Its answer and the session's record without the undo under way, stored as one.
    pub records: Vec<Record>,
    /// What the shell could not put back, and why.
    pub notice: Option<String>,
    pub waiting: Vec<Waiter>,
}

/// How an `/undo` turn starts ([`Session::start_undo`]).
#[derive(Debug)]
pub(super) enum UndoStart {
    /// What it undoes is reverted, and `records` store that with the undo under way: once
    /// they are, the shell is asked to put the files back.
    Revert {
        undoing: Undoing,
        records: Vec<Record>,
    },
    /// Nothing to undo: it ended at once (`undone: null`).
    Ended(UndoEnd),
}

impl Session {
    /// The `/undo` turn `turn_id`, running, starts at `now`: what it undoes reverted
    /// ([`Session::begin_undo`]), or, with nothing to undo, ended ([`Session::finish_undo`]).
    /// `None` if it is not the turn running.
    pub(super) fn start_undo(&mut self, turn_id: &str, now: u64) -> Option<UndoStart> {
        if self.turns.running().is_none_or(|r| r.turn_id != turn_id) {
            return None;
        }
        match self.begin_undo(turn_id, now) {
            Some((undoing, records)) => Some(UndoStart::Revert { undoing, records }),
            None => self.finish_undo(turn_id, None, now).map(UndoStart::Ended),
        }
    }

    /// The `/undo` turn `turn_id` starts at `now`: the last turn the model is still given (not
    /// folded into a compaction's summary) is reverted, and the undo under way is kept with
    /// it. What to ask the shell, and the records that store both (the session's record last);
    /// `None` with nothing to undo.
    pub(super) fn begin_undo(&mut self, turn_id: &str, now: u64) -> Option<(Undoing, Vec<Record>)> {
        let folded = self.durable.compaction.as_ref().map_or(0, |c| c.folded);
        let (undone, index) = self
            .turns
            .ledger()
            .last_given()
            .filter(|(_, index)| *index >= folded)?;
        // The prompt as the model's context keeps it; a turn whose prompt the window let go
        // (one answer past `sessions.max_context_bytes`) is named by its id instead.
        let prompt = match self.recent.since(index).and_then(|t| t.first()) {
            Some(HistoryTurn::User { text, .. }) => text.clone(),
            _ => format!("(turn {undone})"),
        };
        let undoing = Undoing {
            turn_id: turn_id.to_owned(),
            undone,
            prompt,
            confined: self.capped,
        };
        // Stored with the revert (`revert_from` stores the session's record last).
        self.durable.undoing = Some(undoing.clone());
        let (_, records) = self.revert_from(index, now);
        Some((undoing, records))
    }

    /// The undo under way whose turn still runs (read from the store, the shell is asked
    /// again), if any.
    pub(super) fn undo_under_way(&self) -> Option<Undoing> {
        let undoing = self.durable.undoing.clone()?;
        self.turns
            .running()
            .is_some_and(|r| r.turn_id == undoing.turn_id)
            .then_some(undoing)
    }

    /// The `/undo` turn `turn_id` ends at `now`, if it is the one running: `undone` is what it
    /// undid (`None`: nothing to undo). Its answer, `_meta.lembas.undone = { prompt, files }`
    /// or `undone: null`, is settled, and the undo under way ends with it.
    pub(super) fn finish_undo(
        &mut self,
        turn_id: &str,
        undone: Option<Undone>,
        now: u64,
    ) -> Option<UndoEnd> {
        if self.turns.running().is_none_or(|r| r.turn_id != turn_id) {
            return None;
        }
        let finished = self.turns.finish(Ok(StopReason::EndTurn))?;
        let mut notice = None;
        let said = match undone {
            None => None,
            Some((turn, prompt, files)) => {
                let restored = match files {
                    Ok(files) => {
                        notice = not_put_back(&turn, &files.kept);
                        files.restored
                    }
                    Err(why) => {
                        notice = Some(format!(
                            "the files turn `{turn}` changed could not be put back: {why}"
                        ));
                        Vec::new()
                    }
                };
                Some(UndoneTurn {
                    prompt,
                    files: restored,
                })
            }
        };
        let notes = TurnNotes {
            command: Some("undo".into()),
            undone: Some(said),
            ..TurnNotes::default()
        };
        let answer = Answer::stopped(StopReason::EndTurn, notes);
        self.turns.settle(turn_id, answer.clone());
        // The answer and the end of the undo under way are stored as one.
        if self
            .durable
            .undoing
            .as_ref()
            .is_some_and(|u| u.turn_id == turn_id)
        {
            self.durable.undoing = None;
        }
        let session = self.durable.id.as_str();
        let records = vec![
            done_record(session, turn_id, finished.order, &answer, now, None),
            self.record(),
        ];
        Some(UndoEnd {
            answer,
            records,
            notice,
            waiting: finished.waiting,
        })
    }
}

impl Device {
    /// An `/undo` turn starts (`pump`): the last turn the model is given is reverted and the
    /// shell asked to put its files back; with none, it ends at once with `undone: null`.
    pub(super) fn start_undo(&mut self, session: &str, turn_id: String) {
        let now = self.clock.now().0;
        let roots = self.config.remote.roots.clone();
        let started = LembasEvent::task(TaskState::Start, turn_id.clone());
        self.broadcast_event(session, started);
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        match s.start_undo(&turn_id, now) {
            Some(UndoStart::Revert { undoing, records }) => {
                // The shell is asked only once the revert and the undo under way are stored
                // (the effect waits for every persist before it).
                self.out.persist_in(Lane::of(session), records);
                self.ask_undo(session, undoing, &roots);
            }
            Some(UndoStart::Ended(end)) => {
                self.undo_ended(session, &turn_id, end);
                self.pump(session);
            }
            None => self.pump(session),
        }
    }

    /// A session read from the store (at start-up or back from aside) whose `/undo` was under
    /// way when the device stopped: the shell is asked again to put the files back, and the
    /// `/undo` ends when it has (restore.rs kept its turn running).
    pub(super) fn resume_undo(&mut self, session: &str) {
        let roots = self.config.remote.roots.clone();
        let Some(undoing) = self.sessions.get(session).and_then(Session::undo_under_way) else {
            return;
        };
        self.ask_undo(session, undoing, &roots);
    }

    /// Ask the shell to put back the files of the turn `undoing` undoes.
    fn ask_undo(&mut self, session: &str, undoing: Undoing, roots: &[String]) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let project = s.durable.cwd.clone();
        let roots = if undoing.confined {
            roots.to_vec()
        } else {
            Vec::new()
        };
        let turn_id = undoing.undone.clone();
        let request = self.undos.ask(PendingUndo {
            session: session.to_string(),
            undoing,
        });
        self.out.effect(Effect::UndoFiles {
            request,
            session_id: session.to_string(),
            turn_id,
            project,
            roots,
        });
    }

    /// The shell put back what it could of a turn's files (`Effect::UndoFiles`), or could
    /// not (`Err`: the reason, said in a `notice`; the messages stay reverted).
    pub fn handle_files_undone(
        &mut self,
        request: u64,
        undone: Result<FilesUndone, String>,
        now: Time,
    ) {
        self.clock.advance(now);
        if let Some(PendingUndo { session, undoing }) = self.undos.answered(request) {
            let said = Some((undoing.undone, undoing.prompt, undone));
            self.undo_finished(&session, &undoing.turn_id, said);
            self.pump(&session);
        }
        self.after_input();
    }

    /// The `/undo` turn `turn_id` ends: `undone` is the turn it undid, that turn's prompt and
    /// what the shell did with its files (`None`: nothing to undo).
    fn undo_finished(&mut self, session: &str, turn_id: &str, undone: Option<Undone>) {
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        if let Some(end) = s.finish_undo(turn_id, undone, now) {
            self.undo_ended(session, turn_id, end);
        }
    }

    /// Tell how `/undo` turn `turn_id` ended: stored, the notice, the answer, the task's end.
    fn undo_ended(&mut self, session: &str, turn_id: &str, end: UndoEnd) {
        self.out.persist_in(Lane::of(session), end.records);
        if let Some(text) = end.notice {
            self.broadcast_event(session, LembasEvent::Notice(NoticeEvent { text }));
        }
        self.answer_waiting(session, turn_id, &end.answer, end.waiting);
        self.broadcast_event(
            session,
            LembasEvent::task(TaskState::End, turn_id.to_string()),
        );
    }
}

/// The notice naming the files an undo left as they are, and why; none when it left none.
fn not_put_back(turn: &str, kept: &[FileKept]) -> Option<String> {
    if kept.is_empty() {
        return None;
    }
    let files: Vec<String> = kept
        .iter()
        .map(|k| format!("`{}` ({})", k.path, k.why))
        .collect();
    Some(format!(
        "undoing turn `{turn}` left {} file{} as {} now: {}",
        kept.len(),
        if kept.len() == 1 { "" } else { "s" },
        if kept.len() == 1 { "it is" } else { "they are" },
        files.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use crate::device::turn_start::StartRules;
    use crate::device::turn_table::Admission;
    use crate::device::ConnId;
    use crate::engine::TurnStart;
    use crate::jsonrpc::Id;
    use crate::store::{Compaction, SessionRecord};

    /// Queue turn `turn` (an `/undo` when `undo`) and start it.
    fn run(s: &mut Session, turn: &str, undo: bool) {
        let admission = Admission {
            undo,
            ..Admission::default()
        };
        let start = TurnStart::testing(turn, &format!("text of {turn}"));
        s.turns.admit(start, admission, (ConnId(1), Id::number(1)));
        let config = DeviceConfig::default();
        s.start_next(&StartRules::of(&config, 1))
            .expect("it starts");
    }

    /// A session whose turn `a` answered, and whose `/undo` turn `u` runs.
    fn undoing_a() -> Session {
        let mut s = Session::new(SessionRecord::testing("s"), 10);
        run(&mut s, "a", false);
        s.turns.finish(Ok(StopReason::EndTurn));
        run(&mut s, "u", true);
        s
    }

    #[test]
    fn an_undo_reverts_the_last_turn_given_and_keeps_the_undo_under_way() {
        let mut s = undoing_a();
        s.capped = true;
        let (undoing, records) = s.begin_undo("u", 5).expect("a is undone");
        let expected = Undoing {
            turn_id: "u".into(),
            undone: "a".into(),
            prompt: "text of a".into(),
            confined: true,
        };
        assert_eq!(undoing, expected);
        assert_eq!(s.durable.undoing.as_ref(), Some(&expected));
        assert!(!records.is_empty());
        assert_eq!(s.undo_under_way(), Some(expected), "u runs");
        assert!(s.turns.ledger().last_given().is_none(), "a is reverted");
        assert!(s.begin_undo("u", 6).is_none(), "nothing left to undo");
    }

    #[test]
    fn an_undo_starts_reverting_what_it_undoes_or_ends_with_nothing_to_undo() {
        let mut s = undoing_a();
        assert!(s.start_undo("other", 5).is_none(), "not the running turn");
        assert!(s.turns.ledger().last_given().is_some(), "nothing reverted");
        match s.start_undo("u", 5) {
            Some(UndoStart::Revert { undoing, records }) => {
                assert_eq!(undoing.undone, "a");
                assert!(!records.is_empty());
            }
            other => panic!("a is undone: {other:?}"),
        }
        assert!(
            s.turns.running().is_some(),
            "u runs while the files are put back"
        );

        let mut s = Session::new(SessionRecord::testing("s"), 10);
        run(&mut s, "u", true);
        match s.start_undo("u", 5) {
            Some(UndoStart::Ended(end)) => assert_eq!(end.answer, undo_answer(None)),
            other => panic!("nothing to undo: {other:?}"),
        }
        assert!(s.turns.running().is_none(), "u ended at once");
        assert_eq!(s.durable.undoing, None);
    }

    #[test]
    fn a_turn_folded_into_a_summary_is_not_undone() {
        let mut s = undoing_a();
        s.durable.compaction = Some(Compaction {
            summary: "so far".into(),
            folded: 1,
        });
        assert!(s.begin_undo("u", 5).is_none());
        assert_eq!(s.durable.undoing, None);
    }

    #[test]
    fn an_undo_under_way_is_resumed_only_while_its_turn_runs() {
        let mut s = undoing_a();
        assert_eq!(s.undo_under_way(), None, "none under way");
        s.durable.undoing = Some(Undoing {
            turn_id: "other".into(),
            undone: "a".into(),
            prompt: "text of a".into(),
            confined: false,
        });
        assert_eq!(s.undo_under_way(), None, "u runs, not other");
    }

    /// `/undo`'s answer: it undid `(prompt, files)`, or nothing.
    fn undo_answer(undone: Option<(&str, &[&str])>) -> Answer {
        let notes = TurnNotes {
            command: Some("undo".into()),
            undone: Some(undone.map(|(prompt, files)| UndoneTurn {
                prompt: prompt.into(),
                files: files.iter().map(|f| f.to_string()).collect(),
            })),
            ..TurnNotes::default()
        };
        Answer::stopped(StopReason::EndTurn, notes)
    }

    #[test]
    fn an_undo_ends_with_what_it_undid_and_the_files_it_could_not_put_back() {
        let mut s = undoing_a();
        s.begin_undo("u", 5).expect("a is undone");
        let files = FilesUndone {
            restored: vec!["x.rs".into()],
            kept: vec![FileKept {
                path: "y.rs".into(),
                why: "changed since".into(),
            }],
        };
        let undone = Some(("a".into(), "text of a".into(), Ok(files)));
        assert!(
            s.finish_undo("other", undone.clone(), 6).is_none(),
            "not the running turn"
        );
        let end = s.finish_undo("u", undone, 6).expect("u ends");
        assert_eq!(end.answer, undo_answer(Some(("text of a", &["x.rs"]))));
        assert_eq!(
            end.notice.as_deref(),
            Some("undoing turn `a` left 1 file as it is now: `y.rs` (changed since)")
        );
        assert_eq!(end.records.len(), 2, "its answer and the session's record");
        assert_eq!(end.waiting, [(ConnId(1), Id::number(1))]);
        assert_eq!(s.durable.undoing, None, "no longer under way");
        assert!(s.turns.running().is_none());
        assert!(s.finish_undo("u", None, 7).is_none(), "it ended once");
    }

    #[test]
    fn an_undo_with_nothing_to_undo_or_files_not_put_back_says_so() {
        let mut s = undoing_a();
        let end = s.finish_undo("u", None, 6).expect("u ends");
        assert_eq!(end.answer, undo_answer(None));
        assert_eq!(end.notice, None);

        let mut s = undoing_a();
        let failed = Some(("a".into(), "text of a".into(), Err("no journal".into())));
        let end = s.finish_undo("u", failed, 6).expect("u ends");
        assert_eq!(end.answer, undo_answer(Some(("text of a", &[]))));
        assert_eq!(
            end.notice.as_deref(),
            Some("the files turn `a` changed could not be put back: no journal")
        );
    }
}
