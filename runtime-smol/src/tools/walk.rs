//! The files under a confined directory, as `find` and `search` see them: ignore-aware
//! (`.gitignore`, `.ignore`, git's excludes, also outside a git repository), hidden files
//! included, `.git` and protected paths skipped (never descended), symlinks not followed and
//! not yielded (what one points at was not checked), in name order. An aborted call stops it.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;

use super::Confined;

/// A glob the model gave, compiled (`*` crosses `/`, so `*.rs` finds them at any depth).
pub fn glob(text: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(text)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`{text}` is not a glob: {e}"))
}

/// Calls `each` with every regular file under `place` (its resolved path, and its path
/// relative to `place`) whose relative path `filter` matches, until it breaks. `false`: the
/// call was aborted.
pub fn files(
    place: &Confined,
    filter: Option<&GlobMatcher>,
    cancel: &AtomicBool,
    mut each: impl FnMut(&Path, &Path) -> ControlFlow<()>,
) -> bool {
    let allowed = Arc::new(place.clone());
    let mut walk = WalkBuilder::new(&place.path);
    walk.hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| entry.file_name() != ".git" && allowed.allows(entry.path()));
    for entry in walk.build() {
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        // An entry that cannot be read (permissions, a race) is left out.
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let relative = entry
            .path()
            .strip_prefix(&place.path)
            .unwrap_or(entry.path());
        if filter.is_some_and(|g| !g.is_match(relative)) {
            continue;
        }
        if each(entry.path(), relative).is_break() {
            break;
        }
    }
    true
}
