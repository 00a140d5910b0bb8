//! `write`: create or replace a file (its missing parents created, inside the project, as the
//! check of the resolved path allowed), with the diff against its old text (none when new).

use lembas_core::engine_io::{FileDiff, IoReply};

use super::{text_file, Confined};

pub fn write(place: &Confined, given: &str, text: &str, max_bytes: u64) -> Result<IoReply, String> {
    let path = &place.path;
    let old_text = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("`{given}` is a directory; nothing was written"))
        }
        Ok(meta) if !meta.is_file() => {
            return Err(format!(
                "`{given}` is not a regular file (a FIFO, socket or device); nothing was written"
            ))
        }
        Ok(_) => Some(text_file::read_text(path, given, max_bytes)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("`{given}` cannot be written: {e}")),
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("`{given}`: its directory cannot be made: {e}"))?;
    }
    text_file::write_text(path, given, text)?;
    let said = match &old_text {
        None => format!("wrote `{given}`: a new file of {} bytes", text.len()),
        Some(old) => format!(
            "wrote `{given}`: {} bytes (it held {})",
            text.len(),
            old.len()
        ),
    };
    Ok(changed(place, said, old_text, text.to_string()))
}

/// A tool's answer for a file it changed, with the diff the client shows.
pub fn changed(
    place: &Confined,
    said: String,
    old_text: Option<String>,
    new_text: String,
) -> IoReply {
    IoReply::Tool {
        output: said,
        diff: Some(FileDiff {
            path: place.path.to_string_lossy().into_owned(),
            old_text,
            new_text,
        }),
    }
}
