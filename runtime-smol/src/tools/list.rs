//! `list`: a directory's entries, sorted by name, directories marked `/` and symlinks `@` (as
//! `ls -F` does; a symlink is not followed), at most `max_entries` of them. Only the first
//! `max_entries` names are kept while the directory is read, so a huge one costs no more.

use std::collections::BinaryHeap;

use lembas_core::engine_io::IoReply;

use super::{output, Confined};

pub fn list(place: &Confined, given: &str, max_entries: usize) -> Result<IoReply, String> {
    let entries = std::fs::read_dir(&place.path).map_err(|e| {
        if place.path.is_file() {
            format!("`{given}` is a file, not a directory: read it")
        } else {
            format!("`{given}` cannot be listed: {e}")
        }
    })?;
    // The smallest `max_entries` names seen so far (the heap's top is the largest of them).
    let mut kept: BinaryHeap<String> = BinaryHeap::new();
    let mut total = 0usize;
    for entry in entries {
        let Ok(entry) = entry else { continue };
        total += 1;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        match entry.file_type() {
            Ok(t) if t.is_dir() => name.push('/'),
            Ok(t) if t.is_symlink() => name.push('@'),
            _ => {}
        }
        if kept.len() < max_entries {
            kept.push(name);
        } else if kept.peek().is_some_and(|largest| name < *largest) {
            kept.pop();
            kept.push(name);
        }
    }
    if total == 0 {
        return Ok(output(format!("(`{given}` is an empty directory)")));
    }
    let shown = kept.len();
    let mut text = kept.into_sorted_vec().join("\n");
    if total > shown {
        text.push_str(&format!(
            "\n(cut: {} more entries not shown, max_entries ({max_entries}))",
            total - shown
        ));
    }
    Ok(output(text))
}
