//! Opening a resolved file, and a text file whole for a change (`write`, `edit`): bounded by
//! the call's `max_bytes`, since its old text goes to the client in the diff.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading. Its last component is not followed if it is a symlink (it was
/// resolved: one there now appeared after the check). Opened without blocking, so a FIFO does
/// not hold a pool thread until a writer comes; anything but a regular file is refused.
pub fn open(path: &Path, given: &str) -> Result<(File, Metadata), String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("`{given}` cannot be read: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("`{given}` cannot be read: {e}"))?;
    if meta.is_dir() {
        return Err(format!("`{given}` is a directory, not a file"));
    }
    if !meta.is_file() {
        return Err(format!(
            "`{given}` is not a regular file (a FIFO, socket or device); tools read files only"
        ));
    }
    Ok((file, meta))
}

/// The text of the file at `path`, if it is at most `max_bytes` and UTF-8.
pub fn read_text(path: &Path, given: &str, max_bytes: u64) -> Result<String, String> {
    let (file, meta) = open(path, given)?;
    if meta.len() > max_bytes {
        return Err(format!(
            "`{given}` is {} bytes, over max_bytes ({max_bytes}): its change could not be \
             shown; nothing was changed",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("`{given}` cannot be read: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "`{given}` grew past max_bytes ({max_bytes}) while it was read; nothing was changed"
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        format!("`{given}` is not UTF-8 text: its change could not be shown; nothing was changed")
    })
}

/// Replace the content of the file at `path` with `text`, creating it (not its parents) when
/// it does not exist. An existing file keeps its inode and its permissions.
pub fn write_text(path: &Path, given: &str, text: &str) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("`{given}` cannot be written: {e}"))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("`{given}` cannot be written: {e}"))
}
