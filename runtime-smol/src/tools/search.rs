//! `search`: the lines matching a regex in the files under a path (or in one file), as
//! `path:line: text`, at most `max_matches`. Ignore-aware like `find`, only files whose
//! relative path matches the glob when one is given, binary files skipped, long lines cut.

use std::fs::File;
use std::io::BufReader;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

use lembas_core::engine_io::IoReply;
use regex::bytes::{Regex, RegexBuilder};

use super::lines::{looks_binary, next_line, shown, BINARY_PROBE};
use super::{output, text_file, walk, Confined};

/// How much of a line is searched: a longer one is searched in its start only, so a
/// minified file costs this much per line, not its length.
const SEARCHED_LINE_BYTES: usize = 64 * 1024;
/// How much of a matching line is shown.
const SHOWN_LINE_BYTES: usize = 300;
/// How big a compiled regex may grow (the regex crate's bound, named in its refusal).
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;

pub fn search(
    place: &Confined,
    given: &str,
    pattern: &str,
    glob: Option<&str>,
    max_matches: usize,
    cancel: &AtomicBool,
) -> Result<IoReply, String> {
    let regex = RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("`{pattern}` is not a regex this search takes: {e}"))?;
    let filter = glob.map(walk::glob).transpose()?;
    let mut found = Found {
        lines: Vec::new(),
        max: max_matches,
        more: false,
    };
    if !place.path.is_dir() {
        let (file, _) = text_file::open(&place.path, given)?;
        let _ = search_file(&regex, file, &place.shown(&place.path), &mut found);
    } else {
        let finished = walk::files(place, filter.as_ref(), cancel, |path, _| {
            // A file that cannot be read (gone, not regular, no permission) adds nothing.
            match text_file::open(path, &place.shown(path)) {
                Ok((file, _)) => search_file(&regex, file, &place.shown(path), &mut found),
                Err(_) => ControlFlow::Continue(()),
            }
        });
        if !finished {
            return Err("the search was stopped".into());
        }
    }
    if found.lines.is_empty() {
        return Ok(output(format!(
            "(no line under `{given}` matches `{pattern}`)"
        )));
    }
    let mut text = found.lines.join("\n");
    if found.more {
        text.push_str(&format!(
            "\n(cut: more lines match; max_matches ({max_matches}) reached)"
        ));
    }
    Ok(output(text))
}

struct Found {
    lines: Vec<String>,
    max: usize,
    more: bool,
}

/// Adds the file's matching lines; breaks once there are more than `found.max`. A binary
/// file adds none.
fn search_file(regex: &Regex, file: File, shown_path: &str, found: &mut Found) -> ControlFlow<()> {
    let mut reader = BufReader::with_capacity(BINARY_PROBE.max(64 * 1024), file);
    if looks_binary(&mut reader).unwrap_or(true) {
        return ControlFlow::Continue(());
    }
    let mut line = Vec::new();
    let mut number = 0u64;
    while let Ok(Some(_)) = next_line(&mut reader, SEARCHED_LINE_BYTES, &mut line) {
        number += 1;
        if !regex.is_match(&line) {
            continue;
        }
        if found.lines.len() == found.max {
            found.more = true;
            return ControlFlow::Break(());
        }
        let mut text = shown(&line, SHOWN_LINE_BYTES);
        if line.len() > SHOWN_LINE_BYTES {
            text.push('…');
        }
        found.lines.push(format!("{shown_path}:{number}: {text}"));
    }
    ControlFlow::Continue(())
}
