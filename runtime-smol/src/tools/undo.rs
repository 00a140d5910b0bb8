//! What `/undo` needs of the files a turn's tools change (core/src/device/undo.rs), kept on
//! disk so it outlives a restart: before `write` or `edit` first changes a file in a turn, its
//! content then (or that it did not exist) is kept; after each change, a SHA-256 of what the
//! tool left. `Effect::UndoFiles` then puts a file back only while it still hashes to what the
//! turn left, so later work of the person's is never overwritten, and removes a file the turn
//! created.
//!
//! Bounded: at most `sessions.undo_max_bytes` of content a turn (a file past what is left of
//! it is not kept, and the undo names it), and only the last `sessions.undo_turns` turns of a
//! session that changed files keep anything: the journal of an older one is removed as a new
//! one starts, its turn named in the session's `dropped.json` (the last `sessions.ledger_turns`, [`UndoLimits::dropped_named`]), so
//! an undo of it says why it puts nothing back. `<state>/undo/<session>/<stamp>/` holds a
//! turn's `journal.json` and the kept contents beside it; the session's directory goes with
//! the session. The state directory is protected from the tools, so the model cannot reach the
//! journal. Changes made by `run` (a command) are not kept.
//!
//! An undo may be asked twice: a device restarted before it heard the answer asks again. So
//! putting a file back is idempotent (a file already as it was before the turn counts as put
//! back), and the answer is kept in the journal once the undo is done (the kept contents then
//! go): asked again, the same answer, nothing touched. That journal goes as the next turn
//! that changes files starts, the `/undo` it served being over by then.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lembas_core::device::{FileKept, FilesUndone};
use serde::{Deserialize, Serialize};

use super::{confine_in, ToolSettings};

/// The bounds of what is kept to undo turns (`sessions.undo_max_bytes`, `sessions.undo_turns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UndoLimits {
    pub max_bytes: u64,
    pub turns: usize,
    /// Dropped turns an undo still names as such (`dropped.json`): as many as the session's
    /// ledger keeps turn ids (`sessions.ledger_turns`), since an older id is unknown anyway.
    pub dropped_named: usize,
}

impl Default for UndoLimits {
    fn default() -> Self {
        UndoLimits {
            // A turn rewrites a handful of source files, each well under a megabyte; a file
            // past this is data or generated, which an undo should not silently hold copies of.
            max_bytes: 8 * 1024 * 1024,
            // `/undo` goes back one turn at a time: five is several undos in a row, and keeps
            // a session's journals to at most five times the budget on disk.
            turns: 5,
            dropped_named: lembas_core::config::SessionLimits::default().ledger_turns,
        }
    }
}

/// Where the journals are, their bounds, and the lock that keeps two tool calls (or a call and
/// an undo) from changing one journal at once.
#[derive(Clone, Debug)]
pub struct UndoJournal {
    /// `<state>/undo`.
    pub dir: PathBuf,
    pub limits: UndoLimits,
    lock: Arc<Mutex<()>>,
}

/// One turn's journal (`journal.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Journal {
    turn: String,
    /// Bytes of content kept so far.
    bytes: u64,
    files: Vec<Entry>,
    /// What the undo of the turn did, once it is done: the answer to the same undo asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    undone: Option<FilesUndone>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// Resolved and absolute, as the tool wrote it.
    path: String,
    before: Before,
    /// SHA-256 (hex) of what the turn left, once a change of it succeeded.
    #[serde(default)]
    after: Option<String>,
}

/// The file before the turn changed it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Before {
    /// It did not exist: the turn created it.
    Absent,
    /// Its content is in this file of the turn's directory.
    Kept { file: String },
    /// It was `size` bytes, past what the turn's budget had left: not kept.
    Over { size: u64 },
}

const JOURNAL: &str = "journal.json";

/// The session's turns whose journals went past `sessions.undo_turns`, oldest first.
const DROPPED: &str = "dropped.json";

impl UndoJournal {
    pub fn new(dir: PathBuf, limits: UndoLimits) -> UndoJournal {
        UndoJournal {
            dir,
            limits,
            lock: Arc::default(),
        }
    }

    /// Before a tool of turn `turn` changes `path` (resolved): keep what it is now, the
    /// first time the turn changes it. A journal that cannot be written is logged, and the
    /// tool goes on: the undo will say it could not put the file back.
    pub fn before_change(&self, session: &str, turn: &str, path: &Path) {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = self.keep(session, turn, path) {
            log::warn!(
                "could not keep {} to undo turn {turn} of {session}: {e}",
                path.display()
            );
        }
    }

    /// After a tool of turn `turn` changed `path`: what it left, to compare at the undo.
    pub fn after_change(&self, session: &str, turn: &str, path: &Path) {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let noted = (|| -> io::Result<()> {
            let Some(dir) = self.turn_dir(session, turn, false)? else {
                return Ok(());
            };
            let mut journal = read_journal(&dir)?;
            let Some(entry) = journal
                .files
                .iter_mut()
                .find(|e| Path::new(&e.path) == path)
            else {
                return Ok(());
            };
            entry.after = hash_of(path)?;
            write_journal(&dir, &journal)
        })();
        if let Err(e) = noted {
            log::warn!(
                "could not note {} to undo turn {turn} of {session}: {e}",
                path.display()
            );
        }
    }

    fn keep(&self, session: &str, turn: &str, path: &Path) -> io::Result<()> {
        let Some(dir) = self.turn_dir(session, turn, true)? else {
            return Ok(());
        };
        let mut journal = read_journal(&dir)?;
        let written = path.to_string_lossy().into_owned();
        if journal.files.iter().any(|e| e.path == written) {
            return Ok(());
        }
        let before = match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Before::Absent,
            Err(e) => return Err(e),
            // The tool refuses anything but a regular file; nothing to keep.
            Ok(meta) if !meta.is_file() => return Ok(()),
            Ok(meta) if journal.bytes.saturating_add(meta.len()) > self.limits.max_bytes => {
                Before::Over { size: meta.len() }
            }
            Ok(_) => {
                let mut bytes = Vec::new();
                open_nofollow(path)?.read_to_end(&mut bytes)?;
                if journal.bytes.saturating_add(bytes.len() as u64) > self.limits.max_bytes {
                    Before::Over {
                        size: bytes.len() as u64,
                    }
                } else {
                    let file = format!("{}.before", journal.files.len());
                    fs::write(dir.join(&file), &bytes)?;
                    journal.bytes += bytes.len() as u64;
                    Before::Kept { file }
                }
            }
        };
        journal.files.push(Entry {
            path: written,
            before,
            after: None,
        });
        write_journal(&dir, &journal)
    }

    /// `Effect::UndoFiles`: put back what turn `turn` of `session` changed, each file only
    /// while it is what the turn left and, resolved again, inside `project` and `roots`; then
    /// forget the turn's journal. Paths are answered relative to the project.
    pub fn undo(
        &self,
        settings: &ToolSettings,
        session: &str,
        turn: &str,
        project: &str,
        roots: &[String],
    ) -> Result<FilesUndone, String> {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let dir = match self.turn_dir(session, turn, false) {
            Ok(Some(dir)) => dir,
            // Nothing kept: the turn is older than the last `sessions.undo_turns` that changed
            // files, or it changed no file with `write` or `edit`.
            Ok(None) if self.was_dropped(session, turn) => {
                return Err(format!(
                    "only the last {} turns that changed files keep what /undo needs \
                     (sessions.undo_turns)",
                    self.limits.turns
                ))
            }
            Ok(None) => return Ok(FilesUndone::default()),
            Err(e) => return Err(format!("its journal cannot be read: {e}")),
        };
        let mut journal =
            read_journal(&dir).map_err(|e| format!("its journal cannot be read: {e}"))?;
        if let Some(undone) = &journal.undone {
            return Ok(undone.clone());
        }
        let mut undone = FilesUndone::default();
        for entry in &journal.files {
            // A change that never happened (the tool failed): nothing to put back.
            let Some(after) = &entry.after else {
                continue;
            };
            let shown = shown(project, &entry.path);
            match self.put_back(settings, &dir, entry, after, project, roots) {
                Ok(()) => undone.restored.push(shown),
                Err(why) => undone.kept.push(FileKept { path: shown, why }),
            }
        }
        // The answer first, then the contents it no longer needs: a crash in between leaves
        // an answer to give again, never a journal whose contents are gone.
        journal.undone = Some(undone.clone());
        match write_journal(&dir, &journal) {
            Ok(()) => {
                for entry in &journal.files {
                    if let Before::Kept { file } = &entry.before {
                        let _ = fs::remove_file(dir.join(file));
                    }
                }
            }
            Err(e) => log::warn!("could not note the undo in {}: {e}", dir.display()),
        }
        Ok(undone)
    }

    /// Whether turn `turn`'s journal went past `sessions.undo_turns`.
    fn was_dropped(&self, session: &str, turn: &str) -> bool {
        self.session_dir(session)
            .is_some_and(|base| read_dropped(&base).iter().any(|t| t == turn))
    }

    /// Put one file back, or say why not.
    fn put_back(
        &self,
        settings: &ToolSettings,
        dir: &Path,
        entry: &Entry,
        after: &str,
        project: &str,
        roots: &[String],
    ) -> Result<(), String> {
        let confined = confine_in(settings, project, roots, &entry.path)
            .map_err(|why| format!("not put back: {why}"))?;
        let path = Path::new(&entry.path);
        if confined.path != path {
            return Err("not put back: a symlink now leads it elsewhere".into());
        }
        let now = hash_of(path).map_err(|e| format!("it cannot be read: {e}"))?;
        if now.as_deref() != Some(after) && as_before(dir, entry, now.as_deref()) {
            // Put back already, by an undo the device did not hear the end of.
            return Ok(());
        }
        if now.as_deref() != Some(after) {
            return Err(match now {
                None => "removed since the turn; left as it is".into(),
                Some(_) => "changed since the turn; left as it is".into(),
            });
        }
        match &entry.before {
            Before::Absent => fs::remove_file(path).map_err(|e| format!("cannot be removed: {e}")),
            Before::Kept { file } => {
                let bytes = fs::read(dir.join(file))
                    .map_err(|e| format!("what it held before is lost: {e}"))?;
                let mut out = OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                    .map_err(|e| format!("cannot be written: {e}"))?;
                out.write_all(&bytes)
                    .map_err(|e| format!("cannot be written: {e}"))
            }
            Before::Over { size } => Err(format!(
                "its {size} bytes before the turn were past the {} kept to undo a turn \
                 (sessions.undo_max_bytes)",
                self.limits.max_bytes
            )),
        }
    }

    /// The session was deleted: what was kept for its turns goes too.
    pub fn forget_session(&self, session: &str) {
        let Some(dir) = self.session_dir(session) else {
            return;
        };
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        match fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                log::error!("could not remove the undo journals of {session}: {e}")
            }
            _ => {}
        }
    }

    /// A session id is the device's own `ses_…`: one that could be a path is kept nowhere.
    fn session_dir(&self, session: &str) -> Option<PathBuf> {
        let plain = !session.is_empty()
            && session != "."
            && session != ".."
            && !session.contains(['/', '\\', '\0']);
        plain.then(|| self.dir.join(session))
    }

    /// Turn `turn`'s directory, made when `create`. Then the journals of undos done go, and
    /// those past the last `undo_turns`, their turns noted as dropped.
    fn turn_dir(&self, session: &str, turn: &str, create: bool) -> io::Result<Option<PathBuf>> {
        let Some(base) = self.session_dir(session) else {
            return Ok(None);
        };
        let mut stamps: Vec<u64> = match fs::read_dir(&base) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        stamps.sort_unstable();
        for stamp in stamps.iter().rev() {
            let dir = base.join(stamp_name(*stamp));
            if read_journal(&dir).is_ok_and(|j| j.turn == turn) {
                return Ok(Some(dir));
            }
        }
        if !create {
            return Ok(None);
        }
        let stamp = stamps.last().map_or(0, |s| s + 1);
        let dir = base.join(stamp_name(stamp));
        fs::create_dir_all(&dir)?;
        let journal = Journal {
            turn: turn.to_string(),
            ..Journal::default()
        };
        write_journal(&dir, &journal)?;
        // The others, oldest first: (directory, its turn if it can be read). An undo done is
        // over (this turn runs after the `/undo`'s answer was stored); it takes no place.
        let mut kept: Vec<(PathBuf, Option<String>)> = Vec::new();
        for old in &stamps {
            let old = base.join(stamp_name(*old));
            match read_journal(&old) {
                Ok(j) if j.undone.is_some() => {
                    let _ = fs::remove_dir_all(&old);
                }
                read => kept.push((old, read.ok().map(|j| j.turn))),
            }
        }
        let keep = self.limits.turns.saturating_sub(1);
        let gone = kept.len().saturating_sub(keep);
        if gone > 0 {
            let mut dropped = read_dropped(&base);
            for (old, turn) in kept.drain(..gone) {
                let _ = fs::remove_dir_all(&old);
                dropped.extend(turn);
            }
            let over = dropped.len().saturating_sub(self.limits.dropped_named);
            dropped.drain(..over);
            if let Err(e) = write_dropped(&base, &dropped) {
                log::warn!("could not note the dropped undo journals of {session}: {e}");
            }
        }
        Ok(Some(dir))
    }
}

/// Turn directories sort by name as they were made.
fn stamp_name(stamp: u64) -> String {
    format!("{stamp:020}")
}

fn read_journal(dir: &Path) -> io::Result<Journal> {
    let text = fs::read_to_string(dir.join(JOURNAL))?;
    serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Whether `entry`'s file is as it was before the turn (`now` its hash): removed, for one the
/// turn created; its kept content, for one it changed.
fn as_before(dir: &Path, entry: &Entry, now: Option<&str>) -> bool {
    match &entry.before {
        Before::Absent => now.is_none(),
        Before::Kept { file } => {
            now.is_some() && hash_of(&dir.join(file)).is_ok_and(|kept| kept.as_deref() == now)
        }
        Before::Over { .. } => false,
    }
}

/// The turns noted as dropped (none when the note is missing or unreadable).
fn read_dropped(base: &Path) -> Vec<String> {
    fs::read_to_string(base.join(DROPPED))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn write_dropped(base: &Path, dropped: &[String]) -> io::Result<()> {
    let tmp = base.join("dropped.json.tmp");
    fs::write(&tmp, serde_json::to_vec(dropped).map_err(io::Error::other)?)?;
    fs::rename(tmp, base.join(DROPPED))
}

/// Written whole to a temporary name and renamed over the old: a crash leaves one or the
/// other.
fn write_journal(dir: &Path, journal: &Journal) -> io::Result<()> {
    let tmp = dir.join("journal.json.tmp");
    let text = serde_json::to_vec(journal).map_err(io::Error::other)?;
    fs::write(&tmp, text)?;
    fs::rename(tmp, dir.join(JOURNAL))
}

fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// SHA-256 of a regular file's bytes, hex; `None` when there is no file there.
fn hash_of(path: &Path) -> io::Result<Option<String>> {
    let mut file = match open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Ok(Some("not a regular file".into()));
    }
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        context.update(&buf[..n]);
    }
    let digest = context.finish();
    Ok(Some(
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

/// `path` relative to `project` when inside it, `/`-separated; else as it is.
fn shown(project: &str, path: &str) -> String {
    let resolved = super::real_path(Path::new(project)).unwrap_or_else(|_| project.into());
    match Path::new(path).strip_prefix(&resolved) {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.to_string_lossy().into_owned(),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(dir: &Path, limits: UndoLimits) -> UndoJournal {
        UndoJournal::new(dir.join("state/undo"), limits)
    }

    fn settings(journal: &UndoJournal) -> ToolSettings {
        ToolSettings {
            protected: Vec::new(),
            shell: "/bin/sh".into(),
            undo: Some(journal.clone()),
        }
    }

    /// A change as `write` makes it: kept before, noted after.
    fn change(j: &UndoJournal, turn: &str, path: &Path, text: Option<&str>) {
        j.before_change("ses_a", turn, path);
        match text {
            Some(t) => fs::write(path, t).unwrap(),
            None => fs::remove_file(path).unwrap(),
        }
        j.after_change("ses_a", turn, path);
    }

    #[test]
    fn a_turns_files_are_put_back_and_one_created_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path()).join("app");
        fs::create_dir_all(&project).unwrap();
        let j = journal(tmp.path(), UndoLimits::default());
        let (a, b) = (project.join("a.txt"), project.join("b.txt"));
        fs::write(&a, "old").unwrap();
        change(&j, "t1", &a, Some("new"));
        change(&j, "t1", &a, Some("newer"));
        change(&j, "t1", &b, Some("made"));
        let p = project.to_str().unwrap();
        let undone = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert_eq!(undone.restored, ["a.txt", "b.txt"]);
        assert!(undone.kept.is_empty(), "{undone:?}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "old");
        assert!(!b.exists());
    }

    #[test]
    fn asked_again_an_undo_gives_the_same_answer_and_touches_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let j = journal(tmp.path(), UndoLimits::default());
        let (a, b) = (project.join("a.txt"), project.join("b.txt"));
        fs::write(&a, "old").unwrap();
        fs::write(&b, "mine").unwrap();
        change(&j, "t1", &a, Some("new"));
        change(&j, "t1", &b, Some("theirs"));
        fs::write(&b, "mine again").unwrap();
        let p = project.to_str().unwrap();
        let first = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert_eq!(first.restored, ["a.txt"]);
        assert_eq!(first.kept.len(), 1, "{first:?}");
        // The person goes on; the device, restarted before it heard the answer, asks again.
        fs::write(&a, "later").unwrap();
        let j = journal(tmp.path(), UndoLimits::default());
        let again = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert_eq!(again, first);
        assert_eq!(fs::read_to_string(&a).unwrap(), "later");
        // What was kept to put back is gone with the undo done; the answer is all that stays.
        let dir = j.turn_dir("ses_a", "t1", false).unwrap().unwrap();
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [JOURNAL]);
    }

    #[test]
    fn an_undo_cut_halfway_is_finished_when_asked_again() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let j = journal(tmp.path(), UndoLimits::default());
        let (a, b) = (project.join("a.txt"), project.join("b.txt"));
        fs::write(&a, "old").unwrap();
        change(&j, "t1", &a, Some("new"));
        change(&j, "t1", &b, Some("made"));
        // The process died after putting both back and before noting it was done.
        fs::write(&a, "old").unwrap();
        fs::remove_file(&b).unwrap();
        let p = project.to_str().unwrap();
        let undone = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert_eq!(undone.restored, ["a.txt", "b.txt"]);
        assert!(undone.kept.is_empty(), "{undone:?}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "old");
        assert!(!b.exists());
    }

    #[test]
    fn an_undo_done_takes_no_place_among_the_turns_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let limits = UndoLimits {
            max_bytes: 1024,
            turns: 2,
            ..UndoLimits::default()
        };
        let j = journal(tmp.path(), limits);
        let a = project.join("a.txt");
        fs::write(&a, "0").unwrap();
        let p = project.to_str().unwrap();
        change(&j, "t1", &a, Some("1"));
        change(&j, "t2", &a, Some("2"));
        assert_eq!(
            j.undo(&settings(&j), "ses_a", "t2", p, &[])
                .unwrap()
                .restored,
            ["a.txt"]
        );
        change(&j, "t3", &a, Some("3"));
        // t1 is still one of the last two that changed files: it can be undone.
        assert_eq!(
            j.undo(&settings(&j), "ses_a", "t3", p, &[])
                .unwrap()
                .restored,
            ["a.txt"]
        );
        assert_eq!(
            j.undo(&settings(&j), "ses_a", "t1", p, &[])
                .unwrap()
                .restored,
            ["a.txt"]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "0");
    }

    #[test]
    fn a_file_changed_since_the_turn_is_left_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let j = journal(tmp.path(), UndoLimits::default());
        let a = project.join("a.txt");
        fs::write(&a, "old").unwrap();
        change(&j, "t1", &a, Some("new"));
        fs::write(&a, "the person's").unwrap();
        let p = project.to_str().unwrap();
        let undone = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert!(undone.restored.is_empty());
        assert_eq!(undone.kept[0].path, "a.txt");
        assert!(
            undone.kept[0].why.contains("changed since the turn"),
            "{undone:?}"
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "the person's");
    }

    #[test]
    fn past_the_budget_a_file_is_not_kept_and_the_undo_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let limits = UndoLimits {
            max_bytes: 5,
            turns: 5,
            ..UndoLimits::default()
        };
        let j = journal(tmp.path(), limits);
        let (a, b) = (project.join("a.txt"), project.join("b.txt"));
        fs::write(&a, "1234").unwrap();
        fs::write(&b, "5678").unwrap();
        change(&j, "t1", &a, Some("x"));
        change(&j, "t1", &b, Some("y"));
        let p = project.to_str().unwrap();
        let undone = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert_eq!(undone.restored, ["a.txt"]);
        assert_eq!(undone.kept[0].path, "b.txt");
        assert!(
            undone.kept[0]
                .why
                .contains("past the 5 kept to undo a turn (sessions.undo_max_bytes)"),
            "{undone:?}"
        );
        assert_eq!(fs::read_to_string(&b).unwrap(), "y");
    }

    #[test]
    fn only_the_last_turns_keep_anything_and_a_restart_finds_them() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let limits = UndoLimits {
            max_bytes: 1024,
            turns: 2,
            ..UndoLimits::default()
        };
        let a = project.join("a.txt");
        fs::write(&a, "0").unwrap();
        {
            let j = journal(tmp.path(), limits);
            for t in 1..=3 {
                change(&j, &format!("t{t}"), &a, Some(&t.to_string()));
            }
        }
        // A new journal over the same directory: what a restarted device has.
        let j = journal(tmp.path(), limits);
        let dirs = fs::read_dir(j.dir.join("ses_a"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .count();
        assert_eq!(dirs, 2);
        let p = project.to_str().unwrap();
        let s = settings(&j);
        assert_eq!(
            j.undo(&s, "ses_a", "t3", p, &[]).unwrap().restored,
            ["a.txt"]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "2");
        assert_eq!(
            j.undo(&s, "ses_a", "t2", p, &[]).unwrap().restored,
            ["a.txt"]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "1");
        // t1's journal went as t3's came: the undo says so, naming the key and its value.
        assert_eq!(
            j.undo(&s, "ses_a", "t1", p, &[]),
            Err(
                "only the last 2 turns that changed files keep what /undo needs \
                 (sessions.undo_turns)"
                    .into()
            )
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "1");
        // A turn that changed no files has nothing to put back, and nothing to say.
        assert_eq!(
            j.undo(&s, "ses_a", "t0", p, &[]).unwrap(),
            FilesUndone::default()
        );
        j.forget_session("ses_a");
        assert!(!j.dir.join("ses_a").exists());
    }

    #[test]
    fn the_dropped_turns_named_are_as_many_as_configured() {
        let tmp = tempfile::tempdir().unwrap();
        let project = real(tmp.path());
        let limits = UndoLimits {
            turns: 1,
            dropped_named: 2,
            ..UndoLimits::default()
        };
        let j = journal(tmp.path(), limits);
        let a = project.join("a.txt");
        fs::write(&a, "0").unwrap();
        for t in 1..=4 {
            change(&j, &format!("t{t}"), &a, Some(&t.to_string()));
        }
        let p = project.to_str().unwrap();
        let s = settings(&j);
        // t2 and t3 are the last two dropped: still named; t1 is past them, so unknown.
        for t in ["t2", "t3"] {
            let why = j.undo(&s, "ses_a", t, p, &[]).unwrap_err();
            assert!(why.contains("sessions.undo_turns"), "{t}: {why}");
        }
        assert_eq!(
            j.undo(&s, "ses_a", "t1", p, &[]).unwrap(),
            FilesUndone::default()
        );
    }

    #[test]
    fn a_file_outside_the_project_now_is_not_touched() {
        let tmp = tempfile::tempdir().unwrap();
        let root = real(tmp.path());
        let (app, other) = (root.join("app"), root.join("other"));
        fs::create_dir_all(&app).unwrap();
        fs::create_dir_all(&other).unwrap();
        let j = journal(tmp.path(), UndoLimits::default());
        let a = app.join("a.txt");
        fs::write(&a, "old").unwrap();
        change(&j, "t1", &a, Some("new"));
        // The undo is asked for another project: the file is not its to change.
        let p = other.to_str().unwrap();
        let undone = j.undo(&settings(&j), "ses_a", "t1", p, &[]).unwrap();
        assert!(undone.restored.is_empty());
        assert!(undone.kept[0].why.starts_with("not put back"), "{undone:?}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "new");
    }

    fn real(p: &Path) -> PathBuf {
        fs::canonicalize(p).unwrap()
    }
}
