//! `read`: a file's lines, numbered like `cat -n`, from `first_line`, bounded by `max_lines`
//! and `max_bytes` (saying where it was cut); a binary file is named, not shown; an image
//! comes back whole for a vision model.

use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};

use lembas_core::engine_io::IoReply;

use super::lines::{looks_binary, next_line, shown, BINARY_PROBE};
use super::{output, text_file, Confined};

/// The extensions read as images.
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

pub fn read(
    place: &Confined,
    given: &str,
    first_line: u64,
    max_lines: u64,
    max_bytes: u64,
    cancel: &AtomicBool,
) -> Result<IoReply, String> {
    let (file, meta) = text_file::open(&place.path, given)?;
    let size = meta.len();
    if is_image(&place.path) {
        if size > max_bytes {
            return Err(format!(
                "`{given}` is an image of {size} bytes, over max_bytes ({max_bytes})"
            ));
        }
        let mut bytes = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("`{given}` cannot be read: {e}"))?;
        return Ok(IoReply::File { bytes, size });
    }
    let mut reader = BufReader::with_capacity(BINARY_PROBE.max(64 * 1024), file);
    let failed = |e: std::io::Error| format!("`{given}` cannot be read: {e}");
    if looks_binary(&mut reader).map_err(failed)? {
        return Ok(output(format!("(binary file, {size} bytes)")));
    }
    let first_line = first_line.max(1);
    let budget = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut text = String::new();
    let mut line = Vec::new();
    let mut number: u64 = 0;
    let mut shown_lines: u64 = 0;
    let cap = budget.saturating_add(1);
    while let Some(len) = next_line(&mut reader, cap, &mut line).map_err(failed)? {
        // Lines before `first_line` are read too: a long file is skipped through, unless the
        // call is aborted.
        if cancel.load(Ordering::Relaxed) {
            return Err("the read was stopped".into());
        }
        number += 1;
        if number < first_line {
            continue;
        }
        if shown_lines == max_lines {
            text.push_str(&format!(
                "(cut: max_lines ({max_lines}) reached; the file goes on: read on from \
                 first_line {number})\n"
            ));
            return Ok(output(text));
        }
        let prefix = format!("{number:>6}\t");
        let room = budget.saturating_sub(text.len() + prefix.len() + 1);
        if len > room {
            if shown_lines == 0 {
                // The first line alone is past the bound: its start, so the model sees it.
                text.push_str(&prefix);
                text.push_str(&shown(&line, room));
                text.push_str(&format!(
                    "\n(cut: line {number} is {len} bytes, over max_bytes ({max_bytes}))\n"
                ));
            } else {
                text.push_str(&format!(
                    "(cut: max_bytes ({max_bytes}) reached; the file goes on: read on from \
                     first_line {number})\n"
                ));
            }
            return Ok(output(text));
        }
        text.push_str(&prefix);
        text.push_str(&shown(&line, len));
        text.push('\n');
        shown_lines += 1;
    }
    if number == 0 {
        return Ok(output("(empty file)".into()));
    }
    if shown_lines == 0 {
        return Ok(output(format!(
            "(the file has {number} lines; first_line {first_line} is past its end)"
        )));
    }
    Ok(output(text))
}

fn is_image(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}
