//! `Effect::SearchFiles` performed on the disk: the `@` picker's index of a root, kept in
//! memory so a keystroke does not walk the tree again. Each root's index is its entries (files
//! and directories, paths relative to it), walked once with the `ignore` crate (gitignored and
//! hidden entries left out, protected ones too, symlinks not followed: one is listed only when
//! it leads inside the root to what is allowed) and at most `files.max_indexed_files` of them
//! (past it the answer says it was cut). It is kept fresh by mtime: at most once every
//! [`RECHECK`] a search stats the index's directories, and a changed one (an entry added,
//! removed or renamed in it) has the root walked again. At most [`MAX_ROOTS`] roots are kept,
//! the least recently searched dropped. Matching is `nucleo-matcher`'s, with path bonuses; a
//! recent file (the core's frecency list) is nudged up; an empty query gives the recent files,
//! then the shallowest entries.

use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use lembas_core::device::{FoundFile, FoundFiles};
use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

use crate::tools::{confine_in, ToolSettings};

/// How long an index is trusted without looking at its directories' mtimes.
pub const RECHECK: Duration = Duration::from_secs(2);
/// Roots indexed at once (a person has a few projects open).
pub const MAX_ROOTS: usize = 4;
/// `files.max_indexed_files` when the config does not say: a large monorepo's checkout.
pub const DEFAULT_MAX_FILES: usize = 200_000;

/// One root's index.
struct Index {
    root: PathBuf,
    entries: Vec<Entry>,
    /// Every directory walked, with its mtime then.
    dirs: Vec<(PathBuf, Option<SystemTime>)>,
    truncated: bool,
    checked: Instant,
}

struct Entry {
    path: String,
    dir: bool,
}

/// The indexes of the roots searched lately.
pub struct FileIndexes {
    max_files: usize,
    /// Most recently searched last.
    roots: Mutex<Vec<Index>>,
}

impl FileIndexes {
    pub fn new(max_files: usize) -> FileIndexes {
        FileIndexes {
            max_files,
            roots: Mutex::new(Vec::new()),
        }
    }

    /// Search `root` (confined to `roots` when there are any, and to the protected paths) for
    /// `query`: at most `limit` entries, best first, `recent` nudged up.
    pub fn search(
        &self,
        settings: &ToolSettings,
        root: &str,
        roots: &[String],
        query: &str,
        limit: usize,
        recent: &[String],
    ) -> Result<FoundFiles, String> {
        let place = confine_in(settings, root, roots, root).map_err(|why| {
            if why.contains(" leads to `") {
                format!("`{root}` leads outside the device's roots, or to a protected path")
            } else {
                why
            }
        })?;
        let real = place.path.clone();
        if !real.is_dir() {
            return Err(format!("`{root}` is not a directory"));
        }
        let mut all = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        let at = all.iter().position(|i| i.root == real);
        let mut index = match at {
            Some(i) => all.remove(i),
            None => walk(&real, settings, self.max_files),
        };
        if index.checked.elapsed() >= RECHECK {
            if changed(&index) {
                index = walk(&real, settings, self.max_files);
            } else {
                index.checked = Instant::now();
            }
        }
        let files = pick(&index, query, limit, recent);
        let found = FoundFiles {
            root: real.to_string_lossy().into_owned(),
            files,
            indexed: index.entries.len() as u64,
            truncated: index.truncated,
        };
        all.push(index);
        if all.len() > MAX_ROOTS {
            all.remove(0);
        }
        Ok(found)
    }
}

/// Walk `root` into a new index.
fn walk(root: &Path, settings: &ToolSettings, max: usize) -> Index {
    let protected = settings.protected.clone();
    let allowed = move |p: &Path| {
        p.to_str()
            .is_some_and(|p| !protected.iter().any(|entry| entry.covers(p)))
    };
    let filter = allowed.clone();
    let mut entries = Vec::new();
    let mut dirs = vec![(root.to_path_buf(), mtime(root))];
    let mut truncated = false;
    let walker = ignore::WalkBuilder::new(root)
        .follow_links(false)
        .require_git(false)
        .filter_entry(move |e| filter(e.path()))
        .build();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let dir = if kind.is_symlink() {
            // Listed only when it leads inside the root, to what the rules allow.
            match std::fs::canonicalize(entry.path()) {
                Ok(to) if to.starts_with(root) && allowed(&to) => to.is_dir(),
                _ => continue,
            }
        } else {
            kind.is_dir()
        };
        if entries.len() == max {
            truncated = true;
            break;
        }
        if kind.is_dir() {
            dirs.push((entry.path().to_path_buf(), mtime(entry.path())));
        }
        entries.push(Entry {
            path: rel.replace(std::path::MAIN_SEPARATOR, "/"),
            dir,
        });
    }
    Index {
        root: root.to_path_buf(),
        entries,
        dirs,
        truncated,
        checked: Instant::now(),
    }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
}

/// Whether a directory of the index changed since it was walked.
fn changed(index: &Index) -> bool {
    index.dirs.iter().any(|(dir, when)| mtime(dir) != *when)
}

/// The best `limit` entries for `query`.
fn pick(index: &Index, query: &str, limit: usize, recent: &[String]) -> Vec<FoundFile> {
    let found = |e: &Entry| FoundFile {
        path: e.path.clone(),
        kind: if e.dir { "dir" } else { "file" }.to_string(),
    };
    let rank = |path: &str| recent.iter().position(|r| r == path);
    if query.trim().is_empty() {
        // The recent files, best first, then the shallowest entries.
        let mut out: Vec<(usize, usize, &Entry)> = index
            .entries
            .iter()
            .map(|e| {
                let depth = e.path.matches('/').count();
                (rank(&e.path).unwrap_or(usize::MAX), depth, e)
            })
            .collect();
        out.sort_by(|a, b| (a.0, a.1, &a.2.path).cmp(&(b.0, b.1, &b.2.path)));
        return out
            .into_iter()
            .take(limit)
            .map(|(_, _, e)| found(e))
            .collect();
    }
    let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
    let pattern = Pattern::parse(query, CaseMatching::Smart, Normalization::Smart);
    let mut buf = Vec::new();
    // A min-heap of the best `limit` (score, then the shorter path wins a tie).
    let mut best: BinaryHeap<std::cmp::Reverse<(u32, std::cmp::Reverse<usize>, usize)>> =
        BinaryHeap::new();
    for (i, e) in index.entries.iter().enumerate() {
        let Some(score) = pattern.score(Utf32Str::new(&e.path, &mut buf), &mut matcher) else {
            continue;
        };
        // A recent file is nudged up: the most recent by about a good match's worth.
        let nudge = rank(&e.path).map_or(0, |r| 64u32.saturating_sub(r as u32) * 2);
        let key = (score + nudge, std::cmp::Reverse(e.path.len()), i);
        best.push(std::cmp::Reverse(key));
        if best.len() > limit {
            best.pop();
        }
    }
    let mut ranked: Vec<_> = best.into_iter().map(|r| r.0).collect();
    ranked.sort_by(|a, b| b.cmp(a));
    ranked
        .into_iter()
        .map(|(_, _, i)| found(&index.entries[i]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lembas_core::confine::Protected;

    fn settings() -> ToolSettings {
        ToolSettings {
            protected: vec![
                Protected::Name(".git".into()),
                Protected::Name("secret".into()),
            ],
            shell: "/bin/sh".into(),
            undo: None,
        }
    }

    fn paths(found: &FoundFiles) -> Vec<&str> {
        found.files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn finds_fuzzily_leaves_out_ignored_hidden_and_protected_and_sees_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["src/util", "target", ".hidden", "secret"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "src/main.rs",
            "src/util/mod.rs",
            "target/main.o",
            ".hidden/main.rs",
            "secret/main.rs",
            "README.md",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("escape")).unwrap();
        std::os::unix::fs::symlink(root.join("src/main.rs"), root.join("alias.rs")).unwrap();
        let index = FileIndexes::new(100);
        let r = root.to_str().unwrap();
        let found = index.search(&settings(), r, &[], "main", 10, &[]).unwrap();
        assert_eq!(
            paths(&found),
            ["src/main.rs"],
            "target, .hidden and secret are not"
        );
        let all = index
            .search(&settings(), r, &[], "", 50, &["src/util/mod.rs".into()])
            .unwrap();
        let all = paths(&all);
        assert_eq!(all[0], "src/util/mod.rs", "the recent one first: {all:?}");
        for left_out in ["target", ".hidden", "secret", "escape", ".gitignore"] {
            assert!(
                !all.iter().any(|p| p.starts_with(left_out)),
                "{left_out}: {all:?}"
            );
        }
        assert!(all.contains(&"alias.rs") && all.contains(&"src"), "{all:?}");
        // A new file is found once the index is checked again.
        std::fs::write(root.join("src/newmain.rs"), "x").unwrap();
        index.roots.lock().unwrap()[0].checked -= RECHECK;
        let found = index
            .search(&settings(), r, &[], "newmain", 10, &[])
            .unwrap();
        assert_eq!(paths(&found), ["src/newmain.rs"]);
        // Past the bound the answer says it was cut; outside the roots nothing is searched.
        let small = FileIndexes::new(2)
            .search(&settings(), r, &[], "", 50, &[])
            .unwrap();
        assert!(small.truncated && small.indexed == 2, "{small:?}");
        let e = index
            .search(
                &settings(),
                r,
                &[outside.path().to_str().unwrap().to_string()],
                "",
                5,
                &[],
            )
            .unwrap_err();
        assert!(e.contains("outside"), "{e}");
    }
}
