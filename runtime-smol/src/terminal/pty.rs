//! A pseudo-terminal and the process that leads a session on its slave side: opening, reading,
//! writing, resizing, hanging up and reaping. Knows nothing about shells.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};
use rustix::pty::OpenptFlags;
use rustix::termios::{self, InputModes, OptionalActions, Winsize};
use smol::Async;

/// What runs on the slave side.
pub struct Program<'a> {
    pub path: &'a Path,
    /// `argv[0]`; a leading `-` makes most shells login shells.
    pub argv0: OsString,
    pub args: Vec<OsString>,
    pub cwd: &'a Path,
    /// Set on top of the inherited environment, in order (a later entry wins).
    pub env: Vec<(OsString, OsString)>,
}

/// The master side and the child. `Send + Sync`: reads, writes and signals take `&self`.
pub struct Pty {
    master: Async<OwnedFd>,
    /// Readable once the child has ended (a pidfd); `None` on kernels before 5.3.
    ended: Option<Async<OwnedFd>>,
    pid: Pid,
    /// Taken by [`Pty::wait`]; still here at drop means nobody reaps it yet.
    child: Mutex<Option<Child>>,
    /// Set once the child is reaped, so its pid (which may be reused) is never signalled after.
    reaped: Arc<AtomicBool>,
    /// Whether a [`follow_up`] thread runs.
    following_up: AtomicBool,
}

impl Pty {
    /// Opens a new PTY of `cols` × `rows` and starts `program` on it as a session leader with the
    /// PTY as its controlling terminal and stdin, stdout and stderr.
    pub fn spawn(program: &Program<'_>, cols: u16, rows: u16) -> io::Result<Pty> {
        let (master, slave) = open_pair(cols, rows)?;
        // Registered before the child exists, so no failure after the spawn can leak it.
        let master = Async::new(master)?;

        let mut cmd = Command::new(program.path);
        cmd.arg0(&program.argv0)
            .args(&program.args)
            .current_dir(program.cwd)
            .stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        for (key, value) in &program.env {
            cmd.env(key, value);
        }
        // SAFETY: the closure runs between fork and exec and only makes system calls that are
        // async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(|| {
                default_signals();
                // A new session without a controlling terminal, then the PTY (already dup'ed onto
                // fd 0 by std) becomes its controlling terminal, so job control and SIGHUP work.
                rustix::process::setsid()?;
                rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        // The parent's copies of the slave must close, or reads never see the shell go away.
        drop(cmd);

        let pid = Pid::from_child(&child);
        let ended = rustix::process::pidfd_open(pid, PidfdFlags::empty())
            .ok()
            .and_then(|fd| Async::new_nonblocking(fd).ok());
        Ok(Pty {
            master,
            ended,
            pid,
            child: Mutex::new(Some(child)),
            reaped: Arc::new(AtomicBool::new(false)),
            following_up: AtomicBool::new(false),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// Output of the slave side; `Ok(0)` once the child has ended and its output is read.
    ///
    /// Not only once nothing has the slave open (the EIO): a job the shell left running in the
    /// background (`server &` then `exit`) keeps it open, and the terminal would never end.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(ended) = &self.ended else {
            return self.read_master(buf).await;
        };
        // Output first: `or` polls the read before the end.
        let read = smol::future::or(async { Some(self.read_master(buf).await) }, async {
            let _ = ended.readable().await;
            None
        })
        .await;
        if let Some(read) = read {
            return read;
        }
        // The child has ended. What it wrote last may still be in the kernel's flip buffers on
        // its way to the master: give it a moment, then take what is there.
        smol::Timer::after(Duration::from_millis(50)).await;
        match rustix::io::read(self.master.get_ref(), buf) {
            Ok(n) => Ok(n),
            Err(Errno::AGAIN | Errno::IO) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    async fn read_master(&self, buf: &mut [u8]) -> io::Result<usize> {
        let result = self
            .master
            .read_with(|fd| rustix::io::read(fd, &mut *buf).map_err(io::Error::from))
            .await;
        match result {
            // Linux answers EIO on the master once every slave descriptor is closed.
            Err(e) if e.raw_os_error() == Some(Errno::IO.raw_os_error()) => Ok(0),
            other => other,
        }
    }

    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = self
                .master
                .write_with(|fd| rustix::io::write(fd, bytes).map_err(io::Error::from))
                .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The kernel sends SIGWINCH to the foreground process group.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        termios::tcsetwinsize(self.master.get_ref(), winsize(cols, rows))?;
        Ok(())
    }

    /// SIGHUP to the child's process group (it leads its own session, so its pgid is its pid),
    /// followed up in the background until the child has ended: see [`follow_up`].
    pub fn hangup(&self) -> io::Result<()> {
        if self.reaped.load(Ordering::Acquire) {
            return Ok(());
        }
        match rustix::process::kill_process_group(self.pid, Signal::HUP) {
            // Already gone: nothing to hang up.
            Err(Errno::SRCH) => return Ok(()),
            other => other?,
        }
        if !self.following_up.swap(true, Ordering::AcqRel) {
            let (pid, reaped) = (self.pid, self.reaped.clone());
            std::thread::Builder::new()
                .name("lembas-pty-hangup".into())
                .spawn(move || follow_up(pid, &reaped))?;
        }
        Ok(())
    }

    /// The child's exit code, 128 + the signal when a signal ended it. Callable once.
    pub async fn wait(&self) -> io::Result<i32> {
        let child = self.child.lock().map_err(|_| poisoned())?.take();
        let Some(mut child) = child else {
            return Err(io::Error::other(
                "the terminal's process is already waited for",
            ));
        };
        let reaped = self.reaped.clone();
        let task = blocking::unblock(move || {
            let status = child.wait();
            reaped.store(true, Ordering::Release);
            status
        });
        // A dropped task that has not started yet would drop the child unreaped: detach it
        // instead, so the child is reaped even if this future is dropped.
        let mut task = DetachOnDrop(Some(task));
        let status = match task.0.as_mut() {
            Some(task) => task.await?,
            None => return Err(io::Error::other("the wait task is gone")),
        };
        Ok(exit_code(status))
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.hangup();
        // Nobody waits for the child: reap it in the background once the hangup has ended it.
        if let Some(mut child) = self.child.get_mut().ok().and_then(Option::take) {
            let reaped = self.reaped.clone();
            let _ = std::thread::Builder::new()
                .name("lembas-pty-reaper".into())
                .spawn(move || {
                    let _ = child.wait();
                    reaped.store(true, Ordering::Release);
                });
        }
    }
}

/// After the first SIGHUP: a shell can miss it (bash, when it arrives just before readline
/// starts waiting, sleeps on until the next key), so it is sent again a few times, and a child
/// that ignores it is killed, so a closed terminal always ends.
fn follow_up(pid: Pid, reaped: &AtomicBool) {
    let ended = || {
        reaped.load(Ordering::Acquire)
            || !matches!(
                rustix::process::waitid(
                    WaitId::Pid(pid),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
                ),
                Ok(None)
            )
    };
    for pause in [100, 300, 600, 1000, 2000] {
        std::thread::sleep(Duration::from_millis(pause));
        if ended() {
            return;
        }
        let _ = rustix::process::kill_process_group(pid, Signal::HUP);
    }
    std::thread::sleep(Duration::from_millis(1000));
    if !ended() {
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
}

/// Signal dispositions back to the defaults a login shell expects: ignored ones survive exec,
/// and a device started in the background (`lembas link &` from a script, nohup) ignores SIGINT,
/// SIGQUIT or SIGHUP, which would leave Ctrl-C and hangups dead in the terminal. rustix has no
/// stable sigaction, hence libc. Called between fork and exec: sigaction is async-signal-safe.
fn default_signals() {
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid SIG_DFL action with an empty mask; the call
        // only changes this (single-threaded, about to exec) child's dispositions. Numbers the
        // kernel or libc refuse just fail.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// A new master (non-blocking use, close-on-exec) and its slave, sized and with UTF-8 line
/// editing on (the kernel's default termios lacks IUTF8, so erase in `cat` would split
/// characters).
fn open_pair(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    termios::tcsetwinsize(&master, winsize(cols, rows))?;
    let mut modes = termios::tcgetattr(&slave)?;
    modes.input_modes |= InputModes::IUTF8;
    termios::tcsetattr(&slave, OptionalActions::Now, &modes)?;
    Ok((master, slave))
}

fn winsize(cols: u16, rows: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => -1,
    }
}

struct DetachOnDrop<T>(Option<blocking::Task<T>>);

impl<T> Drop for DetachOnDrop<T> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.detach();
        }
    }
}

fn poisoned() -> io::Error {
    io::Error::other("the terminal's process lock is poisoned")
}
