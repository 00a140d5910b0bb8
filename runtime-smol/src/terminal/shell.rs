//! Which shell a program is, and how to start it as a login shell — with the rc wrapper that
//! marks its prompts (OSC 133, OSC 7) when integration is on.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::rc_dir::RcDir;

const BASH_RC: &str = include_str!("rc/bash.sh");
const ZSH_ENV: &str = include_str!("rc/zsh/.zshenv");
const FISH_RC: &str = include_str!("rc/fish.fish");

/// Replaced in the rc files by the percent-encoded host of OSC 7.
const HOST_PLACEHOLDER: &str = "@LEMBAS_HOST@";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Other,
}

impl Shell {
    /// By the program's file name, the way the shells themselves look at `argv[0]`.
    pub fn of(program: &Path) -> Shell {
        match program.file_name().map(OsStr::as_bytes) {
            Some(b"bash") => Shell::Bash,
            Some(b"zsh") => Shell::Zsh,
            Some(b"fish") => Shell::Fish,
            _ => Shell::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
            Shell::Fish => "fish",
            Shell::Other => "other",
        }
    }
}

/// How to start the shell: its `argv[0]`, arguments and the variables to add.
pub struct Launch {
    pub argv0: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Holds the wrapper files; `None` without integration.
    pub rc_dir: Option<RcDir>,
}

/// A login shell (`argv[0]` with a leading `-`, which bash, zsh, fish, dash, ksh and tcsh all
/// honour). With `integration`, bash, zsh and fish also get the wrapper; `inherited` answers what
/// the shell's environment holds for a name before we add to it.
pub fn launch(
    shell: Shell,
    program: &Path,
    integration: bool,
    host: &str,
    inherited: &dyn Fn(&str) -> Option<OsString>,
) -> io::Result<Launch> {
    let mut argv0 = OsString::from("-");
    argv0.push(program.file_name().unwrap_or(program.as_os_str()));
    let mut launch = Launch {
        argv0,
        args: Vec::new(),
        env: Vec::new(),
        rc_dir: None,
    };
    if !integration || shell == Shell::Other {
        return Ok(launch);
    }
    let dir = RcDir::create()?;
    let host = percent_encode(host.as_bytes());
    let fill = |text: &str| text.replace(HOST_PLACEHOLDER, &host);
    match shell {
        Shell::Bash => {
            // `--posix` makes a login shell read `$ENV` and nothing else; the wrapper turns posix
            // mode off first and reads the login files itself. The shell stays a real login
            // shell, so `logout` and ~/.bash_logout are bash's own.
            let rc = dir.write("bash.sh", &fill(BASH_RC))?;
            launch.args.push("--posix".into());
            launch.env.push(("ENV".into(), rc.into_os_string()));
            if let Some(env) = inherited("ENV") {
                launch.env.push(("__LEMBAS_ENV".into(), env));
            }
            // Posix mode defaults HISTFILE to ~/.sh_history; the wrapper sets bash's own default.
            if inherited("HISTFILE").is_none() {
                launch.env.push(("__LEMBAS_HISTFILE".into(), "1".into()));
            }
        }
        Shell::Zsh => {
            // zsh reads .zshenv from ZDOTDIR first; ours gives the user's ZDOTDIR back.
            dir.write("zsh/.zshenv", &fill(ZSH_ENV))?;
            launch
                .env
                .push(("ZDOTDIR".into(), dir.path().join("zsh").into_os_string()));
            if let Some(zdotdir) = inherited("ZDOTDIR") {
                launch.env.push(("__LEMBAS_ZDOTDIR".into(), zdotdir));
            }
        }
        Shell::Fish => {
            // --init-command runs after the user's config, before the first prompt.
            let rc = dir.write("fish.fish", &fill(FISH_RC))?;
            let mut command = OsString::from("source ");
            command.push(fish_quote(rc.as_os_str()));
            launch
                .args
                .extend(["--login".into(), "--init-command".into(), command]);
        }
        Shell::Other => {}
    }
    launch.rc_dir = Some(dir);
    Ok(launch)
}

/// Byte by byte: unreserved ASCII and `/` stay, every other byte (space, each byte of a UTF-8
/// sequence) becomes `%XX`.
pub fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A fish single-quoted word: only `\` and `'` need escaping inside.
fn fish_quote(s: &OsStr) -> OsString {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'\'');
    for &b in s.as_bytes() {
        if b == b'\\' || b == b'\'' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'\'');
    std::os::unix::ffi::OsStringExt::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_is_byte_by_byte() {
        assert_eq!(
            percent_encode("/a b/é~x-_.".as_bytes()),
            "/a%20b/%C3%A9~x-_."
        );
        assert_eq!(percent_encode(b"100%'!"), "100%25%27%21");
    }

    #[test]
    fn shells_by_file_name() {
        assert_eq!(Shell::of(Path::new("/usr/bin/bash")), Shell::Bash);
        assert_eq!(Shell::of(Path::new("zsh")), Shell::Zsh);
        assert_eq!(Shell::of(Path::new("/usr/local/bin/fish")), Shell::Fish);
        assert_eq!(Shell::of(Path::new("/bin/sh")), Shell::Other);
        assert_eq!(Shell::of(Path::new("/")), Shell::Other);
    }

    #[test]
    fn fish_quoting() {
        assert_eq!(
            fish_quote(OsStr::new(r"/t/a'b\c")),
            OsString::from(r"'/t/a\'b\\c'")
        );
    }
}
