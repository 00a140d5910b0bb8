//! The private directory a terminal's rc wrapper files live in while the terminal does.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A directory only the device's user can enter (0700), removed with everything in it on drop.
pub struct RcDir {
    path: PathBuf,
}

impl RcDir {
    pub fn create() -> io::Result<RcDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base_dir();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        // `create_new` semantics come from mkdir itself: an existing name (another process's,
        // or a planted one) is an error, and the next name is tried.
        for _ in 0..16 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!(
                "lembas-term-{}-{n}-{nanos:08x}",
                std::process::id()
            ));
            match DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(RcDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free name for the terminal's rc directory",
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to `relative` (creating parent directories, 0700), readable by the
    /// user only.
    pub fn write(&self, relative: &str, contents: &str) -> io::Result<PathBuf> {
        let path = self.path.join(relative);
        if let Some(parent) = path.parent() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(contents.as_bytes())?;
        Ok(path)
    }
}

impl Drop for RcDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `$TMPDIR`, unless its path has characters that would need quoting: bash expands `$ENV` and
/// the path goes into shell commands, so it is kept to plain ones (`/tmp` otherwise).
fn base_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    let plain = tmp.to_str().is_some_and(|s| {
        s.starts_with('/')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
    });
    if plain {
        tmp
    } else {
        PathBuf::from("/tmp")
    }
}
