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
use serde_json::{json, Map, Value};

use super::outbox::Lane;
use super::{Device, Effect};
use crate::engine::StopReason;
use crate::store::{done_record, Undoing};
use crate::time::Time;
use crate::turn::Answer;
use crate::wire::event::lembas::{LembasEvent, NoticeEvent, TaskEvent, TaskState};
use crate::wire::session::HistoryTurn;

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

impl Device {
    /// An `/undo` turn starts (`pump`): the last turn the model is given is reverted and the
    /// shell asked to put its files back; with none, it ends at once with `undone: null`.
    pub(super) fn start_undo(&mut self, session: &str, turn_id: String) {
        let now = self.clock.now().0;
        let roots = self.config.remote.roots.clone();
        self.broadcast_event(
            session,
            LembasEvent::Task(TaskEvent {
                state: TaskState::Start,
                turn_id: turn_id.clone(),
            }),
        );
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let folded = s.durable.compaction.as_ref().map_or(0, |c| c.folded);
        let last = s
            .turns
            .ledger()
            .last_given()
            .filter(|(_, index)| *index >= folded);
        let Some((undone, index)) = last else {
            self.undo_finished(session, &turn_id, None);
            self.pump(session);
            return;
        };
        // The prompt as the model's context keeps it; a turn whose prompt the window let go
        // (one answer past `sessions.max_context_bytes`) is named by its id instead.
        let prompt = match s.recent.since(index).and_then(|t| t.first()) {
            Some(HistoryTurn::User { text, .. }) => text.clone(),
            _ => format!("(turn {undone})"),
        };
        let undoing = Undoing {
            turn_id,
            undone,
            prompt,
            confined: s.capped,
        };
        // Stored with the revert (`revert_from` stores the session's record last): the shell is
        // asked only once both are (the effect waits for every persist before it).
        s.durable.undoing = Some(undoing.clone());
        let (_, records) = s.revert_from(index, now);
        self.out.persist_in(Lane::of(session), records);
        self.ask_undo(session, undoing, &roots);
    }

    /// A session read from the store (at start-up or back from aside) whose `/undo` was under
    /// way when the device stopped: the shell is asked again to put the files back, and the
    /// `/undo` ends when it has (restore.rs kept its turn running).
    pub(super) fn resume_undo(&mut self, session: &str) {
        let roots = self.config.remote.roots.clone();
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let Some(undoing) = s.durable.undoing.clone() else {
            return;
        };
        if s.turns
            .running()
            .is_none_or(|r| r.turn_id != undoing.turn_id)
        {
            return;
        }
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
    fn undo_finished(
        &mut self,
        session: &str,
        turn_id: &str,
        undone: Option<(String, String, Result<FilesUndone, String>)>,
    ) {
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        if s.turns.running().is_none_or(|r| r.turn_id != turn_id) {
            return;
        }
        let Some(finished) = s.turns.finish(Ok(StopReason::EndTurn)) else {
            return;
        };
        let mut notice = None;
        let said = match undone {
            None => Value::Null,
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
                json!({ "prompt": prompt, "files": restored })
            }
        };
        let mut extra = Map::new();
        extra.insert("command".into(), json!("undo"));
        extra.insert("undone".into(), said);
        let answer = Answer::stopped(StopReason::EndTurn, extra);
        s.turns.settle(turn_id, answer.clone());
        // The answer and the end of the undo under way are stored as one.
        if s.durable
            .undoing
            .as_ref()
            .is_some_and(|u| u.turn_id == turn_id)
        {
            s.durable.undoing = None;
        }
        let records = vec![
            done_record(session, turn_id, finished.order, &answer, now, None),
            s.record(),
        ];
        self.out.persist_in(Lane::of(session), records);
        if let Some(text) = notice {
            self.broadcast_event(session, LembasEvent::Notice(NoticeEvent { text }));
        }
        self.answer_waiting(session, turn_id, &answer, finished.waiting);
        self.broadcast_event(
            session,
            LembasEvent::Task(TaskEvent {
                state: TaskState::End,
                turn_id: turn_id.to_string(),
            }),
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
