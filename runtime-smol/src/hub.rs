//! The hub: `lembas link`'s local socket, through which every other `lembas` process of this
//! user reaches the running service (`serve --stdio` relays its editor here, `lembas sessions`
//! lists and deletes here), so they all share the service's sessions and store.
//!
//! A Unix socket, never a TCP port: `$XDG_RUNTIME_DIR/lembas/hub.sock`, else `hub.sock` in the
//! state directory. Its directory is made 0700 and must be the user's own (not a symlink, no
//! access for group or others), the socket is made 0600, and a peer whose credentials
//! (`SO_PEERCRED`) are another user's is hung up on. A client checks the same before it
//! connects, and refuses a path that is a symlink, not a socket, another user's, or open to
//! others, saying which. A socket left by a service that died (nothing accepts on it) is
//! replaced; one a live service answers on is not.
//!
//! The protocol is the link's: JSON-RPC, one message a line ([`crate::lines`]), and each
//! connection is the core's `ConnKind::Hub`, so every rule of the core holds there. Bounds:
//! `hub.max_connections` and `hub.max_line_bytes` (config.yaml), each named in its refusal.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use smol::channel::Sender;
use smol::net::unix::{UnixListener, UnixStream};

use crate::channels::Input;

/// The listening socket; its file is removed when it is dropped (if it is still ours).
pub struct HubSocket {
    listener: UnixListener,
    path: PathBuf,
    inode: u64,
}

impl HubSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for HubSocket {
    fn drop(&mut self) {
        // A later service may have replaced it (this one was thought dead): leave that one.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The socket's directory is fit to hold it: a real directory of this user's, closed to others.
fn check_dir(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if m.file_type().is_symlink() {
        return Err(format!(
            "{} is a symlink; the hub's directory must be a real directory",
            dir.display()
        ));
    }
    if !m.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if m.uid() != uid() {
        return Err(format!(
            "{} belongs to another user (uid {}); the hub's directory must be yours",
            dir.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is open to others (mode {:o}); the hub's directory must be 0700",
            dir.display(),
            m.mode() & 0o777
        ));
    }
    Ok(())
}

/// The socket at `path` is the user's own hub: a socket (not a symlink), this user's, 0600.
fn check_socket(path: &Path, m: &std::fs::Metadata) -> Result<(), String> {
    if m.file_type().is_symlink() {
        return Err(format!(
            "the hub socket {} is a symlink; refused",
            path.display()
        ));
    }
    if !m.file_type().is_socket() {
        return Err(format!(
            "{} is not a socket; remove it so the hub can be served there",
            path.display()
        ));
    }
    if m.uid() != uid() {
        return Err(format!(
            "the hub socket {} belongs to another user (uid {}); refused",
            path.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "the hub socket {} is open to others (mode {:o}); refused",
            path.display(),
            m.mode() & 0o777
        ));
    }
    Ok(())
}

/// Serve the hub at `path`: its directory made (0700) and checked, a stale socket replaced, a
/// live one refused (another service runs), the new one made 0600.
pub fn listen(path: &Path) -> Result<HubSocket, String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    crate::dirs::create_private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    check_dir(dir)?;
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            check_socket(path, &m)?;
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => {
                    return Err(format!(
                        "another lembas service already serves the hub at {}",
                        path.display()
                    ))
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    log::info!("replacing the stale hub socket {}", path.display());
                    std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
                }
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", path.display())),
    }
    // Made under a name of its own and closed to others (the directory is 0700 already) before
    // it is linked at `path`: bound at `path`, it showed for a moment with the umask's mode, and
    // an editor looking then refused it as open to others. The link fails if `path` exists, so
    // of two services starting at once one is refused, as a bind at `path` refused it.
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let staging = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    let listener = std::os::unix::net::UnixListener::bind(&staging)
        .map_err(|e| format!("cannot serve the hub at {}: {e}", path.display()))?;
    let linked = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::hard_link(&staging, path));
    let _ = std::fs::remove_file(&staging);
    linked.map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => format!(
            "another lembas service already serves the hub at {}",
            path.display()
        ),
        _ => format!("cannot serve the hub at {}: {e}", path.display()),
    })?;
    let inode = std::fs::symlink_metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .ino();
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let listener = UnixListener::try_from(listener).map_err(|e| e.to_string())?;
    Ok(HubSocket {
        listener,
        path: path.to_path_buf(),
        inode,
    })
}

/// Reach the running service's hub at `path`: `None` when no service runs (no socket, or a
/// stale one nothing accepts on); an error when the path is not fit to trust, saying why.
pub fn connect(path: &Path) -> Result<Option<std::os::unix::net::UnixStream>, String> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if let Some(dir) = path.parent() {
        check_dir(dir)?;
    }
    check_socket(path, &m)?;
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::NotFound) => {
            Ok(None)
        }
        Err(e) => Err(format!("the hub socket {}: {e}", path.display())),
    }
}

/// Whether the peer of `stream` runs as this user (`SO_PEERCRED`).
fn peer_is_own(stream: &UnixStream) -> bool {
    rustix::net::sockopt::socket_peercred(stream).is_ok_and(|c| c.uid.as_raw() == uid())
}

/// Accept connections for ever, handing the driver each of this user's.
pub async fn accept(hub: &HubSocket, tx: Sender<Input>) {
    loop {
        match hub.listener.accept().await {
            Ok((stream, _)) => {
                if !peer_is_own(&stream) {
                    log::warn!("a process of another user connected to the hub; hung up");
                    continue;
                }
                if tx.send(Input::HubAccepted(stream)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin.
                log::warn!("the hub could not accept a connection: {e}");
                smol::Timer::after(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run/lembas");
        (dir, run)
    }

    #[test]
    fn the_socket_is_0600_in_a_0700_directory_and_goes_with_the_service() {
        let (_t, run) = private_dir();
        let path = run.join("hub.sock");
        let hub = listen(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&run), 0o700);
        assert!(connect(&path).unwrap().is_some(), "a live hub is reached");
        let again = listen(&path).err().expect("a second service is refused");
        assert!(again.contains("already serves the hub"), "{again}");
        drop(hub);
        assert!(!path.exists(), "the socket's file goes with the service");
        assert!(connect(&path).unwrap().is_none(), "no service, no hub");
    }

    #[test]
    fn an_editor_never_finds_the_socket_open_to_others_while_it_is_made() {
        let (_t, run) = private_dir();
        let path = run.join("hub.sock");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // What an editor's `connect` looks at, as often as it can, while services come and go.
        let watcher = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut open = None;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(m) = std::fs::symlink_metadata(&path) {
                        if m.mode() & 0o077 != 0 {
                            open = Some(m.mode() & 0o777);
                        }
                    }
                }
                open
            })
        };
        for _ in 0..300 {
            drop(listen(&path).unwrap());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let open = watcher.join().unwrap();
        assert!(
            open.is_none(),
            "the socket was seen with mode {:o}",
            open.unwrap_or(0)
        );
    }

    #[test]
    fn a_stale_socket_is_replaced_and_not_taken_for_a_service() {
        let (_t, run) = private_dir();
        crate::dirs::create_private_dir(&run).unwrap();
        let path = run.join("hub.sock");
        // A service that died: its socket file stays, and nothing accepts on it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(path.exists());
        assert!(
            connect(&path).unwrap().is_none(),
            "a dead hub is no service"
        );
        let hub = listen(&path).unwrap();
        assert!(connect(&path).unwrap().is_some());
        drop(hub);
    }

    #[test]
    fn a_symlink_a_file_or_loose_permissions_are_refused_with_the_reason() {
        let (_t, run) = private_dir();
        let path = run.join("hub.sock");
        let hub = listen(&path).unwrap();
        // A symlink to the real socket, in a directory of its own.
        let other = run.parent().unwrap().join("other");
        crate::dirs::create_private_dir(&other).unwrap();
        let link = other.join("hub.sock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = connect(&link).unwrap_err();
        assert!(e.contains("is a symlink"), "{e}");
        let e = listen(&link).err().unwrap();
        assert!(e.contains("is a symlink"), "{e}");
        // Loose permissions on the socket.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = connect(&path).unwrap_err();
        assert!(e.contains("open to others") && e.contains("666"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Loose permissions on its directory.
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = connect(&path).unwrap_err();
        assert!(e.contains("open to others") && e.contains("755"), "{e}");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(connect(&path).unwrap().is_some());
        drop(hub);
        // A plain file where the socket goes.
        std::fs::write(&path, "x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = listen(&path).err().unwrap();
        assert!(e.contains("is not a socket"), "{e}");
    }
}
