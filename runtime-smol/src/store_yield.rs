//! A `lembas link` that finds the store held (by an editor's `lembas serve --stdio`) asks for
//! it: a file beside the store, `<store>.yield`, that the waiting service keeps locked
//! (`flock`, exclusive) for as long as it waits and until its hub is served. The holder looks
//! now and then ([`asked`]) and, at its first moment at rest, lets the store go and relays its
//! editor to the service's hub (`hub_relay::run_handed_over`).
//!
//! A lock, not the file alone, says a service waits: the kernel drops it with the process, so a
//! service killed while it waits leaves a file nobody holds, and the editor keeps the store. The
//! holder only tests the lock (a shared try, let go at once); a service whose exclusive try
//! meets that test tries again on its next wait.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

/// The request file of the store at `store`.
pub fn path_of(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".yield");
    PathBuf::from(name)
}

fn open(path: &Path, create: bool) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o600)
        // The state directory is the user's (0700); a symlink there is refused all the same.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// A service's standing request for the store: held while it waits, and until its hub is
/// served; dropping it withdraws the request.
pub struct YieldRequest {
    file: File,
    path: PathBuf,
}

impl YieldRequest {
    /// Ask for the store at `store`: `None` while another service asks already (or a holder is
    /// looking at this moment; ask again on the next wait).
    pub fn ask(store: &Path) -> Result<Option<YieldRequest>, String> {
        let path = path_of(store);
        let file = open(&path, true).map_err(|e| format!("{}: {e}", path.display()))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(YieldRequest { file, path })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }
}

impl Drop for YieldRequest {
    fn drop(&mut self) {
        // Removed while still locked, so no holder takes a file about to go for a request.
        let _ = std::fs::remove_file(&self.path);
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

/// Whether a live service asks for the store at `store` (one system call or three).
pub fn asked(store: &Path) -> bool {
    let Ok(file) = open(&path_of(store), false) else {
        return false;
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(&file, FlockOperation::Unlock);
            false
        }
        Err(e) => e == rustix::io::Errno::WOULDBLOCK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_seen_while_held_and_not_once_dropped_or_left_by_a_dead_service() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("lembas.redb");
        assert!(!asked(&store), "no file, no request");
        let request = YieldRequest::ask(&store).unwrap().expect("the first asks");
        assert!(asked(&store));
        assert!(
            YieldRequest::ask(&store).unwrap().is_none(),
            "one service asks at a time"
        );
        drop(request);
        assert!(!asked(&store));
        assert!(!path_of(&store).exists(), "the request goes with it");
        // A service killed while it waited leaves its file, locked by nobody.
        std::fs::write(path_of(&store), "").unwrap();
        assert!(!asked(&store), "a file nobody holds is no request");
        let again = YieldRequest::ask(&store).unwrap();
        assert!(again.is_some() && asked(&store));
    }
}
