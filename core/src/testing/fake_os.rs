//! `FakeOs`: the operating system the Pair and the fuzzer run a device on, in memory. It
//! performs every [`Effect`] a shell is handed (a store, path resolution, session read-back,
//! attachment writes, echo shells) and restarts a device from its store. The network's effects
//! (`Dial`, `Stop`) are the caller's: each has its own idea of a link. It answers the device
//! the way a shell's code would be written down, as [`Input`]s through [`Device::handle`], so
//! every Pair test and fuzz run also goes through the one place an input is routed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::config::DeviceConfig;
use crate::confine::{self, Confinement, Protected};
use crate::device::{
    Device, Effect, FoundFile, FoundFiles, Handled, Input, ListedDir, Listing, ShellInfo,
};
use crate::mentions::{self, Mention, MentionRead};
use crate::store::{MemStore, Record};
use crate::time::Time;

/// The person's configuration directory on the fake disk (`~/.config/lembas`): their own
/// command files are under `commands/` and `skills/` there.
pub const USER_CONFIG: &str = "/home/me/.config/lembas";

/// The reason a failing disk gives.
const DISK_FULL: &str = "no space left on device";

#[derive(Debug, Default)]
pub struct FakeOs {
    /// The device's disk: every persisted record, surviving a restart.
    pub store: MemStore,
    /// When set, persists are written to `held` and acknowledged only by [`FakeOs::release`].
    pub hold_persists: bool,
    /// Persists written but not yet acknowledged (when holding); lost if the process dies.
    pub held: VecDeque<(u64, Vec<Record>)>,
    /// How `ResolvePath` answers: a path under a key is moved under its value (a symlink), and
    /// a path under a key mapped to `None` fails to resolve.
    pub links: BTreeMap<String, Option<String>>,
    /// The directories on the fake disk, for `ListDirectory`: a directory's subdirectories are
    /// these and the symlinks of `links` directly under it.
    pub dirs: BTreeSet<String>,
    /// The files on the fake disk (path → content), for `ReadMentions`; a file's directories
    /// need not be in `dirs`.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The shell's `tools.protected`: a mention of what they cover is not read.
    pub protected: Vec<Protected>,
    /// Paths `ReadMentions` read (a file's content or a directory's entries), in order: what
    /// the confinement let through.
    pub mention_reads: Vec<String>,
    /// When set, a path containing "missing" fails to resolve (the fuzzer's grammar names such
    /// paths).
    pub missing_paths_fail: bool,
    /// `/undo`: what the shell says it did with each turn's files (by turn id; none said:
    /// nothing was kept), and the turns it was asked to undo, in order.
    pub undo_files: BTreeMap<String, Result<crate::device::FilesUndone, String>>,
    pub undone: Vec<(String, String)>,
    /// When set, an `UndoFiles` is asked (noted in `undone`) but not answered: its request is
    /// kept in `held_undos`, lost if the process dies (a shell still putting files back).
    pub hold_undos: bool,
    pub held_undos: Vec<u64>,
    /// Attachments written: (session, file name, size).
    pub attachments: Vec<(String, String, usize)>,
    /// The bytes of every attachment written (file name → bytes), for a test to read back.
    pub attachment_bytes: BTreeMap<String, Vec<u8>>,
    /// When set, a history read (`ReadHistory`) is made from the store as it is asked, and
    /// its answer held in `held_history_reads` until [`FakeOs::release_history_reads`]: a
    /// shell whose read thread answers late, the device going on meanwhile.
    pub hold_history_reads: bool,
    pub held_history_reads: VecDeque<(u64, Result<Vec<crate::store::Entry>, String>)>,
    /// When set, every attachment write fails with this reason (a full disk).
    pub attachment_write_fails: Option<String>,
    /// When set, one attachment write in five fails (request ids 4, 9, ...): a flaky disk.
    pub every_fifth_write_fails: bool,
    /// When set, reading a session back from the store (`LoadSession`), its history
    /// (`ReadHistory`) or its event log (`ReadEvents`) fails with this reason.
    pub load_fails: Option<String>,
    /// Sessions whose event logs the device asked to read alone (`ReadEvents`), in order.
    pub event_reads: Vec<String>,
    /// Sessions the device asked to read back from the store (`LoadSession`), in order.
    pub loads: Vec<String>,
    /// The fake shells of open terminals and their sizes. A fake shell echoes its input as its
    /// output, and ends with code 129 (128 + SIGHUP) when hung up.
    pub shells: BTreeMap<String, (u16, u16)>,
    /// Terminals hung up (`CloseTerminal`), in order.
    pub hangups: Vec<String>,
    /// When set, starting a shell fails with this reason.
    pub shell_fails: Option<String>,
    /// Git work trees on the fake disk, by their top directory (for `CheckChanges`).
    pub repos: BTreeMap<String, FakeRepo>,
    /// Every `CheckChanges` performed, in order: the project looked in, and the branch.
    pub change_checks: Vec<(String, Option<String>)>,
    /// When set, git cannot be run: `CheckChanges` fails with this reason.
    pub git_fails: Option<String>,
}

/// A git work tree on the fake disk.
#[derive(Clone, Debug, Default)]
pub struct FakeRepo {
    /// Changes not committed yet (the working tree or the index).
    pub uncommitted: bool,
    /// The branches it knows, each with whether `HEAD` differs from it.
    pub branches: BTreeMap<String, bool>,
}

impl FakeOs {
    /// Perform `effect` for `device`, answering it at once where the OS answers. Hands back
    /// what is not the OS's to perform: the network's `Dial` and `Stop`, and
    /// `RemoveAttachments`, which nothing answers (for the caller to note).
    #[must_use]
    pub fn perform(&mut self, device: &mut Device, effect: Effect, now: Time) -> Option<Effect> {
        match effect {
            e @ (Effect::Dial | Effect::Stop { .. } | Effect::RemoveAttachments { .. }) => {
                return Some(e)
            }
            Effect::Persist { seq, records } => {
                if self.hold_persists {
                    self.held.push_back((seq, records));
                } else {
                    self.store.apply(&records);
                    answer(device, Input::Persisted { seq }, now);
                }
            }
            Effect::ResolvePath { request, path } => {
                let resolved = self.resolve(&path);
                answer(device, Input::PathResolved { request, resolved }, now);
            }
            Effect::ListDirectory {
                request,
                path,
                max_entries,
            } => {
                let listed = self.list(&path, max_entries);
                answer(device, Input::DirectoryListed { request, listed }, now);
            }
            Effect::ReadMentions {
                request,
                project,
                roots,
                mentions,
                max_file_bytes,
                max_entries,
            } => {
                let rules = Confinement {
                    project,
                    roots,
                    protected: self.protected.clone(),
                };
                let read = mentions
                    .iter()
                    .map(|m| self.read_mention(&rules, m, max_file_bytes, max_entries))
                    .collect();
                answer(
                    device,
                    Input::MentionsRead {
                        request,
                        read: Ok(read),
                    },
                    now,
                );
            }
            Effect::SearchFiles {
                request,
                root,
                roots,
                query,
                limit,
                recent,
            } => {
                let found = self.search(&root, &roots, &query, limit, &recent);
                answer(device, Input::FilesFound { request, found }, now);
            }
            Effect::ReadCommands {
                request,
                project,
                roots,
                max_files,
                max_file_bytes,
            } => {
                let read = self.read_commands(&project, &roots, max_files, max_file_bytes);
                answer(device, Input::CommandsRead { request, read }, now);
            }
            Effect::CheckChanges {
                request,
                project,
                roots,
                branch,
            } => {
                let changes = self.check_changes(&project, &roots, branch);
                answer(device, Input::ChangesChecked { request, changes }, now);
            }
            // Asked for only once every persist before it is acknowledged: the store is current.
            Effect::LoadSession {
                request,
                session_id,
            } => {
                self.loads.push(session_id.clone());
                if let Some(error) = self.load_fails.clone() {
                    answer(device, Input::SessionLoadFailed { request, error }, now);
                    return None;
                }
                let entries = self.store.session_entries(&session_id);
                let read = answer(device, Input::SessionLoaded { request, entries }, now);
                assert_eq!(
                    read,
                    Handled::Unreadable(Vec::new()),
                    "a session read back holds records the device could not read"
                );
            }
            // Asked for only once every persist before it is acknowledged, like `LoadSession`.
            Effect::ReadHistory {
                request,
                session_id,
                before,
                limit,
                max_bytes,
            } => {
                let read = match self.load_fails.clone() {
                    Some(error) => Err(error),
                    None => Ok(self.store.history(&session_id, before, limit, max_bytes)),
                };
                if self.hold_history_reads {
                    self.held_history_reads.push_back((request, read));
                } else {
                    answer(device, Input::HistoryRead { request, read }, now);
                }
            }
            // Asked for only once every persist before it is acknowledged, like `LoadSession`.
            Effect::ReadEvents {
                request,
                session_id,
            } => {
                self.event_reads.push(session_id.clone());
                let read = match self.load_fails.clone() {
                    Some(error) => Err(error),
                    None => Ok(self.store.session_events(&session_id)),
                };
                answer(device, Input::EventsRead { request, read }, now);
            }
            Effect::UndoFiles {
                request,
                session_id,
                turn_id,
                ..
            } => {
                let undone = self
                    .undo_files
                    .get(&turn_id)
                    .cloned()
                    .unwrap_or_else(|| Ok(Default::default()));
                self.undone.push((session_id, turn_id));
                if self.hold_undos {
                    self.held_undos.push(request);
                } else {
                    answer(device, Input::FilesUndone { request, undone }, now);
                }
            }
            Effect::WriteAttachment {
                request,
                session_id,
                file_name,
                bytes,
            } => {
                let written = match &self.attachment_write_fails {
                    Some(why) => Err(why.clone()),
                    None if self.every_fifth_write_fails && request % 5 == 4 => {
                        Err(DISK_FULL.to_string())
                    }
                    None => {
                        self.attachments
                            .push((session_id, file_name.clone(), bytes.len()));
                        self.attachment_bytes.insert(file_name, bytes);
                        Ok(())
                    }
                };
                answer(device, Input::AttachmentWritten { request, written }, now);
            }
            Effect::OpenTerminal {
                terminal_id,
                cols,
                rows,
                ..
            } => {
                let started = match &self.shell_fails {
                    Some(why) => Err(why.clone()),
                    None => Ok(ShellInfo {
                        shell: "bash".into(),
                        integration: true,
                    }),
                };
                let ok = started.is_ok();
                let opened = Input::TerminalOpened {
                    terminal_id: terminal_id.clone(),
                    started,
                };
                if answer(device, opened, now) == Handled::Wanted(true) && ok {
                    self.shells.insert(terminal_id, (cols, rows));
                }
            }
            Effect::TerminalInput { terminal_id, bytes } => {
                if self.shells.contains_key(&terminal_id) {
                    answer(device, Input::TerminalOutput { terminal_id, bytes }, now);
                }
            }
            Effect::ResizeTerminal {
                terminal_id,
                cols,
                rows,
            } => {
                if let Some(size) = self.shells.get_mut(&terminal_id) {
                    *size = (cols, rows);
                }
            }
            Effect::CloseTerminal { terminal_id } => {
                if self.shells.remove(&terminal_id).is_some() {
                    let exit = Input::TerminalExit {
                        terminal_id: terminal_id.clone(),
                        code: 129,
                    };
                    answer(device, exit, now);
                }
                self.hangups.push(terminal_id);
            }
        }
        None
    }

    /// Answer the history reads held (see `hold_history_reads`), oldest first, with what
    /// the store held when each was asked.
    pub fn release_history_reads(&mut self, device: &mut Device, now: Time) {
        while let Some((request, read)) = self.held_history_reads.pop_front() {
            answer(device, Input::HistoryRead { request, read }, now);
        }
    }

    /// Acknowledge up to `n` held persists, oldest first: they reach the store.
    pub fn release(&mut self, device: &mut Device, n: usize, now: Time) {
        for _ in 0..n {
            let Some((seq, records)) = self.held.pop_front() else {
                break;
            };
            self.store.apply(&records);
            answer(device, Input::Persisted { seq }, now);
        }
    }

    /// The process died and starts again from the store: held persists are lost, the shells
    /// (and the undos held) died with it. The device restored from the store's entries.
    pub fn restart(&mut self, config: DeviceConfig, now: Time) -> Device {
        self.held.clear();
        self.held_undos.clear();
        self.shells.clear();
        let (device, unreadable) = Device::restore(config, self.store.entries(), now)
            .expect("test device config is valid");
        assert!(
            unreadable.is_empty(),
            "a restart cannot read records the device wrote itself: {unreadable:?}"
        );
        device
    }

    /// `path`'s subdirectories as a shell lists them: resolved, the first `max` by name.
    fn list(&self, path: &str, max: usize) -> Result<Listing, String> {
        let real = self.resolve(path)?;
        let prefix = format!("{}/", real.trim_end_matches('/'));
        let links = self.links.keys();
        let names: BTreeSet<&str> = self
            .dirs
            .iter()
            .chain(links)
            .filter_map(|d| d.strip_prefix(&prefix))
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .collect();
        let dirs = names
            .iter()
            .take(max)
            .map(|name| ListedDir {
                name: name.to_string(),
                real: self.resolve(&format!("{prefix}{name}")),
            })
            .collect();
        Ok(Listing {
            path: real,
            dirs,
            total: names.len() as u64,
        })
    }

    /// A search as a shell's index answers it: the root resolved and confined to `roots`;
    /// its files and directories (hidden and protected ones left out) whose path holds the
    /// query's characters in order, case aside; the recent ones first, then by path.
    fn search(
        &self,
        root: &str,
        roots: &[String],
        query: &str,
        limit: usize,
        recent: &[String],
    ) -> Result<FoundFiles, String> {
        let real = self.resolve(root)?;
        if !roots.is_empty() && crate::paths::within(&real, roots).is_none() {
            return Err("outside the roots".into());
        }
        let prefix = format!("{}/", real.trim_end_matches('/'));
        let mut entries: BTreeMap<String, &str> = BTreeMap::new();
        for (path, kind) in self
            .files
            .keys()
            .map(|p| (p, "file"))
            .chain(self.dirs.iter().map(|d| (d, "dir")))
        {
            let Some(rel) = path.strip_prefix(&prefix) else {
                continue;
            };
            let parts: Vec<&str> = rel.split('/').collect();
            let hidden = parts.iter().any(|p| p.starts_with('.'));
            let protected = self.protected.iter().any(|e| e.covers(path));
            if hidden || protected || rel.is_empty() {
                continue;
            }
            for i in 1..parts.len() {
                entries.insert(parts[..i].join("/"), "dir");
            }
            entries.insert(rel.to_string(), kind);
        }
        let wanted: Vec<char> = query
            .to_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let matches = |path: &str| {
            let mut want = wanted.iter().peekable();
            for c in path.to_lowercase().chars() {
                if want.peek() == Some(&&c) {
                    want.next();
                }
            }
            want.peek().is_none()
        };
        let rank = |p: &str| recent.iter().position(|r| r == p).unwrap_or(usize::MAX);
        let mut hits: Vec<(&String, &&str)> = entries
            .iter()
            .filter(|(p, _)| {
                if wanted.is_empty() {
                    rank(p) != usize::MAX
                } else {
                    matches(p)
                }
            })
            .collect();
        hits.sort_by_key(|(p, _)| (rank(p), p.len(), (*p).clone()));
        Ok(FoundFiles {
            root: real,
            indexed: entries.len() as u64,
            files: hits
                .into_iter()
                .take(limit)
                .map(|(path, kind)| FoundFile {
                    path: path.clone(),
                    kind: kind.to_string(),
                })
                .collect(),
            truncated: false,
        })
    }

    /// What a `/review` would find in `project`'s git work tree, as a shell looks: the project
    /// resolved and confined to `roots`, then the repository holding it asked.
    fn check_changes(
        &mut self,
        project: &str,
        roots: &[String],
        branch: Option<String>,
    ) -> Result<crate::review::Changes, String> {
        use crate::review::Changes;
        if let Some(why) = &self.git_fails {
            return Err(why.clone());
        }
        let real = self.resolve(project)?;
        if !roots.is_empty() && crate::paths::within(&real, roots).is_none() {
            return Err(format!("`{real}` is outside remote.roots"));
        }
        self.change_checks.push((real.clone(), branch.clone()));
        let Some(repo) = self
            .repos
            .iter()
            .find(|(top, _)| crate::paths::inside(&real, top))
            .map(|(_, repo)| repo)
        else {
            return Ok(Changes::NoRepository);
        };
        let differs = match &branch {
            None => Some(repo.uncommitted),
            Some(b) => repo.branches.get(b).copied(),
        };
        Ok(match differs {
            None => Changes::UnknownBranch,
            Some(true) => Changes::Found,
            Some(false) => Changes::None,
        })
    }

    /// A session's command files as a shell reads them: the project's (each resolved, and read
    /// only inside the project and `roots`, not protected), then the person's; custom
    /// commands, then skills; by name in each place; bounded.
    fn read_commands(
        &mut self,
        project: &str,
        roots: &[String],
        max_files: usize,
        max_file_bytes: u64,
    ) -> Result<crate::commands::CommandsRead, String> {
        use crate::commands::{CommandFile, CommandsRead, FileKind};
        // As a real shell: the project resolved and answered, each file confined on its own
        // (the core judges the project against the roots).
        let real = self.resolve(project)?;
        let mut read = CommandsRead {
            root: real.clone(),
            ..Default::default()
        };
        let places = [
            (FileKind::Custom, format!("{real}/.agent/commands/"), true),
            (FileKind::Custom, format!("{USER_CONFIG}/commands/"), false),
            (FileKind::Skill, format!("{real}/.agent/skills/"), true),
            (FileKind::Skill, format!("{USER_CONFIG}/skills/"), false),
        ];
        for (kind, dir, confined) in places {
            let names: Vec<(String, String)> = self
                .files
                .keys()
                .filter_map(|path| {
                    let rest = path.strip_prefix(&dir)?;
                    let name = match kind {
                        FileKind::Custom => rest.strip_suffix(".md").filter(|n| !n.contains('/')),
                        FileKind::Skill => {
                            rest.strip_suffix("/SKILL.md").filter(|n| !n.contains('/'))
                        }
                    }?;
                    Some((name.to_string(), path.clone()))
                })
                .collect();
            for (name, path) in names {
                if read.files.len() + read.too_large.len() >= max_files {
                    read.left_out += 1;
                    continue;
                }
                let target = self.resolve(&path)?;
                let allowed = !confined
                    || (crate::paths::inside(&target, &real)
                        && (roots.is_empty() || crate::paths::within(&target, roots).is_some())
                        && !self.protected.iter().any(|e| e.covers(&target)));
                let Some(bytes) = self.files.get(&target).filter(|_| allowed) else {
                    continue;
                };
                if bytes.len() as u64 > max_file_bytes {
                    read.too_large.push(path);
                    continue;
                }
                if confined {
                    // What the confinement let through, as for a mention.
                    self.mention_reads.push(target.clone());
                }
                read.files.push(CommandFile {
                    kind,
                    name,
                    source: path,
                    text: String::from_utf8_lossy(bytes).into_owned(),
                });
            }
        }
        Ok(read)
    }

    /// One mention read as a shell reads it: resolved, confined, then read.
    fn read_mention(
        &mut self,
        rules: &Confinement,
        m: &Mention,
        max_bytes: u64,
        max_entries: usize,
    ) -> MentionRead {
        let refused = |reason: String| MentionRead::Refused { reason };
        let given = m.path.as_str();
        let lexical = match confine::lexical(given, &rules.project) {
            Ok(p) => p,
            Err(why) => return refused(why),
        };
        if let Err(why) = rules.unprotected(given, &lexical) {
            return refused(why);
        }
        let real = match self.resolve(&lexical) {
            Ok(real) => real,
            Err(why) => return refused(why),
        };
        if let Err(why) = rules.check(given, &real) {
            return refused(why);
        }
        if let Some(content) = self.files.get(&real) {
            self.mention_reads.push(real.clone());
            return mentions::read_content(real.clone(), content, m.lines, max_bytes);
        }
        let prefix = format!("{}/", real.trim_end_matches('/'));
        let is_dir = self.dirs.contains(&real)
            || self
                .files
                .keys()
                .chain(&self.dirs)
                .any(|p| p.starts_with(&prefix));
        if !is_dir {
            return refused(format!("`{given}`: no such file or directory"));
        }
        self.mention_reads.push(real.clone());
        let mut names = BTreeSet::new();
        for (path, dir) in self
            .files
            .keys()
            .map(|p| (p, false))
            .chain(self.dirs.iter().map(|d| (d, true)))
        {
            // What the rules forbid (a protected entry) is not named.
            if rules.check(path, path).is_err() {
                continue;
            }
            if let Some(rest) = path.strip_prefix(&prefix) {
                match rest.split_once('/') {
                    Some((first, _)) => names.insert(format!("{first}/")),
                    None if !rest.is_empty() => names.insert(if dir {
                        format!("{rest}/")
                    } else {
                        rest.to_string()
                    }),
                    None => false,
                };
            }
        }
        MentionRead::Listing {
            real,
            total: names.len() as u64,
            entries: names.into_iter().take(max_entries).collect(),
        }
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        for (from, to) in &self.links {
            if crate::paths::inside(path, from) {
                let Some(to) = to else {
                    return Err("no such directory".into());
                };
                return Ok(format!("{to}{}", &path[from.trim_end_matches('/').len()..]));
            }
        }
        if self.missing_paths_fail && path.contains("missing") {
            return Err("no such directory".into());
        }
        Ok(path.to_string())
    }
}

/// Answer the device; the OS only answers what the device asked of it, so a refusal is a bug.
fn answer(device: &mut Device, input: Input, now: Time) -> Handled {
    device
        .handle(input, now)
        .unwrap_or_else(|e| panic!("the device refused an answer of the fake OS: {e}"))
}
