//! Remote terminals, the OS side: a PTY running the device user's login shell, with shell
//! integration (OSC 133 prompt marks and OSC 7 working directory) for bash, zsh and fish.
//! The protocol side (`_lembas/terminal/*`, limits, batching) lives in the core and the driver.
//!
//! How each shell starts with integration on (the wrappers are in `rc/`, written to a private
//! directory per terminal, removed when it ends):
//! - bash: `-bash --posix` with `ENV` naming the wrapper. A login shell in posix mode reads
//!   `$ENV` and nothing else, so bash stays a real login shell (`logout`, `~/.bash_logout`)
//!   while the wrapper turns posix mode off, gives `ENV` and `HISTFILE` back, reads
//!   `/etc/profile` (which reads `/etc/bash.bashrc` once) and the first of `~/.bash_profile`,
//!   `~/.bash_login`, `~/.profile`, then appends its hook to `PROMPT_COMMAND` (an array) and
//!   its C mark to `PS0`.
//! - zsh: `-zsh` with `ZDOTDIR` on the wrapper's `.zshenv`, which gives the user's `ZDOTDIR`
//!   back and reads their `.zshenv`; zsh reads the rest from their `ZDOTDIR`. The hooks go in
//!   at the first prompt (`sched +0`), after every hook of the user's files.
//! - fish: `fish --login --init-command 'source <wrapper>'`, after the user's config; fish 4
//!   writes A, C and D itself, so the wrapper then adds only B and OSC 7.
//!
//! Each shell's hook puts B back after hooks that rebuild the prompt: bash's and zsh's move
//! themselves back to the end of `PROMPT_COMMAND` / `precmd_functions`, fish's re-wraps a
//! redefined `fish_prompt`.

mod pty;
mod rc_dir;
mod shell;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

pub use shell::{percent_encode, Shell};

use pty::{Program, Pty};
use rc_dir::RcDir;

/// Set when the environment has no `TERM` (a device started by a service manager).
const DEFAULT_TERM: &str = "xterm-256color";

/// What to open.
#[derive(Debug, Clone)]
pub struct OpenSpec {
    /// The program to run; the caller gets the default from [`login_shell`].
    pub shell: PathBuf,
    pub cwd: PathBuf,
    pub cols: u16,
    pub rows: u16,
    /// `remote.terminal_integration`: the rc wrapper for bash, zsh and fish.
    pub integration: bool,
    /// For OSC 7's `file://<host><cwd>`.
    pub host: String,
    /// Variables set on top of the device's own environment, a later entry winning. Empty in
    /// production (the shell gets the device's environment unchanged); tests give each
    /// terminal its own `HOME` here without touching the test process's environment.
    pub env: Vec<(OsString, OsString)>,
}

/// `$SHELL`, else the user's `/etc/passwd` entry, else `/bin/sh`.
pub fn login_shell() -> PathBuf {
    if let Some(shell) = std::env::var_os("SHELL").filter(|s| !s.is_empty()) {
        return PathBuf::from(shell);
    }
    let uid = rustix::process::getuid().as_raw();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| passwd_shell(&passwd, uid))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The shell field (the 7th) of the first entry for `uid`, when it names one.
fn passwd_shell(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            [_, _, id, _, _, _, shell, ..] if id.parse() == Ok(uid) && !shell.is_empty() => {
                Some(PathBuf::from(shell))
            }
            _ => None,
        }
    })
}

/// A login shell in a PTY. `Send + Sync`: share it as `Arc<Terminal>` between the task that
/// reads its output and the one that writes, resizes and closes. Dropping it hangs the shell
/// up, reaps it in the background and removes the wrapper files.
pub struct Terminal {
    pty: Pty,
    shell: Shell,
    integration: bool,
    /// Removed once the shell has ended (or with the terminal).
    rc_dir: Mutex<Option<RcDir>>,
}

impl Terminal {
    /// A new PTY of `cols` × `rows` whose child leads a new session with the PTY as its
    /// controlling terminal and runs `spec.shell` as a login shell in `spec.cwd`.
    pub fn open(spec: &OpenSpec) -> io::Result<Terminal> {
        let shell = Shell::of(&spec.shell);
        let inherited = |name: &str| -> Option<OsString> {
            spec.env
                .iter()
                .rev()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
                .or_else(|| std::env::var_os(name))
        };
        let launch = shell::launch(shell, &spec.shell, spec.integration, &spec.host, &inherited)
            .or_else(|e| {
                // Marks are a nicety; a shell without them beats no shell (say /tmp is full).
                log::warn!(
                    "terminal: starting {} without integration: {e}",
                    shell.as_str()
                );
                shell::launch(shell, &spec.shell, false, &spec.host, &inherited)
            })?;
        let mut env = spec.env.clone();
        if inherited("TERM").is_none_or(|term| term.is_empty()) {
            env.push(("TERM".into(), DEFAULT_TERM.into()));
        }
        env.extend(launch.env);
        let integration = launch.rc_dir.is_some();
        let program = Program {
            path: &spec.shell,
            argv0: launch.argv0,
            args: launch.args,
            cwd: &spec.cwd,
            env,
        };
        let pty = Pty::spawn(&program, spec.cols, spec.rows)?;
        Ok(Terminal {
            pty,
            shell,
            integration,
            rc_dir: Mutex::new(launch.rc_dir),
        })
    }

    pub fn shell(&self) -> Shell {
        self.shell
    }

    /// Whether the rc wrapper is in use (false for [`Shell::Other`] or when turned off).
    pub fn integration(&self) -> bool {
        self.integration
    }

    pub fn pid(&self) -> u32 {
        self.pty.pid()
    }

    /// The shell side's output; `Ok(0)` once it is gone.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.pty.read(buf).await
    }

    /// Keystrokes, all of them (waits while the PTY's input buffer is full).
    pub async fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        self.pty.write_all(bytes).await
    }

    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        self.pty.resize(cols, rows)
    }

    /// SIGHUP to the shell's process group.
    pub fn hangup(&self) -> io::Result<()> {
        self.pty.hangup()
    }

    /// The shell's exit code (128 + the signal when one killed it). Callable once.
    pub async fn wait(&self) -> io::Result<i32> {
        let code = self.pty.wait().await?;
        if let Ok(mut dir) = self.rc_dir.lock() {
            dir.take();
        }
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_entries() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nbad line\nme:x:1000:1000::/home/me:\n\
                      you:x:1001:1001::/home/you:/usr/bin/fish\n";
        assert_eq!(passwd_shell(passwd, 0), Some(PathBuf::from("/bin/bash")));
        assert_eq!(passwd_shell(passwd, 1000), None);
        assert_eq!(
            passwd_shell(passwd, 1001),
            Some(PathBuf::from("/usr/bin/fish"))
        );
        assert_eq!(passwd_shell(passwd, 7), None);
    }
}
