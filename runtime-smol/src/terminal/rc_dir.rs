//! The private directory a terminal's rc wrapper files live in while the terminal does.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::{SystemTime, UNIX_EPOCH};

/// Followed by the creating process's pid.
const PREFIX: &str = "lembas-term-";

/// A directory only the device's user can enter (0700), removed with everything in it on drop.
pub struct RcDir {
    path: PathBuf,
}

impl RcDir {
    pub fn create() -> io::Result<RcDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static SWEEP: Once = Once::new();
        let base = base_dir();
        SWEEP.call_once(|| sweep(&base));
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        // `create_new` semantics come from mkdir itself: an existing name (another process's,
        // or a planted one) is an error, and the next name is tried.
        for _ in 0..16 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{PREFIX}{}-{n}-{nanos:08x}", std::process::id()));
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

/// Removes the directories of device processes that are gone without dropping their terminals
/// (killed, or exited without unwinding), once per process.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // A live pid (maybe reused) keeps its directory; only the owner can remove it anyway.
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_process_directory_is_swept_and_a_live_one_kept() {
        let base = tempfile::TempDir::new().expect("temp dir");
        // pid 0 is never a process with a /proc entry.
        let dead = base.path().join(format!("{PREFIX}0-0-0"));
        let live = base
            .path()
            .join(format!("{PREFIX}{}-0-0", std::process::id()));
        let other = base.path().join("unrelated");
        for dir in [&dead, &live, &other] {
            std::fs::create_dir(dir).expect("dir");
        }
        sweep(base.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn the_directory_is_private_and_goes_with_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = RcDir::create().expect("rc dir");
        let path = dir.path().to_owned();
        let file = dir.write("zsh/.zshenv", "x").expect("write");
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode(&path).ok(), Some(0o700));
        assert_eq!(mode(&file).ok(), Some(0o600));
        drop(dir);
        assert!(!path.exists());
    }
}
