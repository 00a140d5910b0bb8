//! Remote terminals on real PTYs: bash, zsh and fish as login shells with the user's own rc
//! files, OSC 133 / OSC 7 marks, resize, hangup and exit codes. Every wait is bounded, so a
//! shell that never answers fails the test instead of hanging it. A test whose shell is not
//! installed says so and passes, unless `LEMBAS_TEST_PROGRAMS_REQUIRED` is set (`.ci/run` sets
//! it and installs bash, zsh and fish).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lembas::terminal::{percent_encode, OpenSpec, Shell, Terminal};
use tempfile::TempDir;

mod common;

use common::programs;

const TIMEOUT: Duration = Duration::from_secs(10);
const HOST: &str = "testhost";

const A: &[u8] = b"\x1b]133;A\x07";
const B: &[u8] = b"\x1b]133;B\x07";
const C: &[u8] = b"\x1b]133;C\x07";
const D0: &[u8] = b"\x1b]133;D;0\x07";
const D1: &[u8] = b"\x1b]133;D;1\x07";

/// The shells a test runs, found on `PATH`; `None` (the test skips, saying which are missing and
/// how to install them) unless every one is there.
fn shells<const N: usize>(names: [&str; N]) -> Option<[PathBuf; N]> {
    let found = names.map(programs::on_path);
    let missing: Vec<&str> = names
        .iter()
        .zip(&found)
        .filter(|(_, path)| path.is_none())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        // Debian's `sh` is dash; the others are packages of their own name.
        let packages: Vec<&str> = missing
            .iter()
            .map(|&name| if name == "sh" { "dash" } else { name })
            .collect();
        programs::missing(
            &format!(
                "{} {} not installed",
                missing.join(" and "),
                if missing.len() == 1 { "is" } else { "are" }
            ),
            &format!("apt-get install {}", packages.join(" ")),
        );
        return None;
    }
    Some(found.map(|path| path.expect("checked above")))
}

/// A terminal, everything it has written so far, and how far the test has looked.
struct Tty {
    term: Terminal,
    out: Vec<u8>,
    seen: usize,
    home: TempDir,
}

impl Tty {
    /// `shell` in a fresh HOME that `setup` fills with the user's rc files first.
    fn open(shell: &Path, integration: bool, setup: impl FnOnce(&Path)) -> Tty {
        Tty::open_with(shell, integration, &[], setup)
    }

    /// With `extra` variables (`~/` in a value is the test's HOME).
    fn open_with(
        shell: &Path,
        integration: bool,
        extra: &[(&str, &str)],
        setup: impl FnOnce(&Path),
    ) -> Tty {
        let home = TempDir::new().expect("temp HOME");
        let home_path = home.path().canonicalize().expect("canonical HOME");
        setup(&home_path);
        let var = |k: &str, v: &Path| (OsString::from(k), v.as_os_str().to_owned());
        let spec = OpenSpec {
            shell: shell.to_path_buf(),
            cwd: home_path.clone(),
            cols: 80,
            rows: 24,
            integration,
            host: HOST.into(),
            env: vec![
                var("HOME", &home_path),
                var("XDG_CONFIG_HOME", &home_path.join(".config")),
                var("XDG_DATA_HOME", &home_path.join(".local/share")),
                var("XDG_CACHE_HOME", &home_path.join(".cache")),
                (OsString::from("TERM"), OsString::from("xterm-256color")),
            ]
            .into_iter()
            .chain(extra.iter().map(|(k, v)| {
                let v = match v.strip_prefix("~/") {
                    Some(rest) => home_path.join(rest).into_os_string(),
                    None => OsString::from(v),
                };
                (OsString::from(k), v)
            }))
            .collect(),
        };
        let term = Terminal::open(&spec).expect("open the terminal");
        let name = shell.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if ["bash", "zsh", "fish"].contains(&name) {
            assert_eq!(term.shell().as_str(), name);
            assert_eq!(term.integration(), integration);
        }
        Tty {
            term,
            out: Vec::new(),
            seen: 0,
            home,
        }
    }

    fn home(&self) -> PathBuf {
        self.home.path().canonicalize().expect("canonical HOME")
    }

    fn send(&self, input: &str) {
        smol::block_on(self.term.write_all(input.as_bytes())).expect("write to the terminal");
    }

    /// Reads until `needle` appears after what was already seen; returns the output from there
    /// up to and including it.
    fn expect(&mut self, needle: &[u8]) -> Vec<u8> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(at) = find(&self.out[self.seen..], needle) {
                let end = self.seen + at + needle.len();
                let chunk = self.out[self.seen..end].to_vec();
                self.seen = end;
                return chunk;
            }
            match self.read_until(deadline) {
                Some(0) => panic!(
                    "the shell ended before {:?} appeared; output:\n{}",
                    String::from_utf8_lossy(needle),
                    show(&self.out[self.seen..])
                ),
                Some(_) => {}
                None => panic!(
                    "no {:?} within {TIMEOUT:?}; output since the last match:\n{}",
                    String::from_utf8_lossy(needle),
                    show(&self.out[self.seen..])
                ),
            }
        }
    }

    /// Some output (`Some(0)` at the end), or `None` at the deadline.
    fn read_until(&mut self, deadline: Instant) -> Option<usize> {
        let mut buf = [0u8; 4096];
        let read = smol::block_on(smol::future::or(
            async { Some(self.term.read(&mut buf).await) },
            async {
                smol::Timer::at(deadline).await;
                None
            },
        ))?;
        let n = read.expect("read from the terminal");
        self.out.extend_from_slice(&buf[..n]);
        Some(n)
    }

    /// Reads everything until the shell side is gone.
    fn drain(&mut self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.read_until(deadline) {
                Some(0) => return,
                Some(_) => {}
                None => panic!("the terminal never ended; output:\n{}", show(&self.out)),
            }
        }
    }

    fn wait(&self) -> i32 {
        smol::block_on(smol::future::or(
            async { self.term.wait().await.expect("wait for the shell") },
            async {
                smol::Timer::after(TIMEOUT).await;
                panic!("the shell did not end within {TIMEOUT:?}")
            },
        ))
    }
}

fn write(path: &Path, contents: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("rc directory");
    }
    std::fs::write(path, contents).expect("rc file");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

/// Output with escapes made visible, for failure messages.
fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace('\x1b', "<ESC>")
        .replace('\x07', "<BEL>")
}

// ----- the PTY itself -------------------------------------------------------------------------

#[test]
fn a_terminal_can_be_shared_between_tasks() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Terminal>();
}

#[test]
fn a_command_runs_and_its_output_comes_back() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, false, |_| {});
    assert_eq!(tty.term.shell(), Shell::Bash);
    assert!(!tty.term.integration());
    tty.send("printf '%s-%s\\n' lembas out\r");
    tty.expect(b"lembas-out");
    tty.send("exit\r");
    assert_eq!(tty.wait(), 0);
}

#[test]
fn stty_size_follows_a_resize() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, false, |_| {});
    tty.send("stty size\r");
    tty.expect(b"24 80");
    tty.term.resize(100, 30).expect("resize");
    tty.send("stty size\r");
    tty.expect(b"30 100");
}

#[test]
fn exit_reports_its_code_and_reads_end() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, false, |_| {});
    tty.send("exit 3\r");
    tty.drain();
    assert_eq!(tty.wait(), 3);
}

/// Several rounds: bash misses a SIGHUP that lands just before readline waits for a key, which
/// the follow-up signals must cover.
#[test]
fn hangup_ends_the_shell() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    for _ in 0..8 {
        let mut tty = Tty::open(&bash, false, |_| {});
        tty.send("printf '%s\\n' ready-$((1+1))\r");
        tty.expect(b"ready-2");
        tty.term.hangup().expect("hangup");
        assert_eq!(tty.wait(), 128 + 1, "bash ends by SIGHUP");
        tty.drain();
    }
}

#[test]
fn a_missing_shell_is_an_error_not_a_panic() {
    let spec = OpenSpec {
        shell: "/nonexistent/lembas-shell".into(),
        cwd: "/".into(),
        cols: 80,
        rows: 24,
        integration: true,
        host: HOST.into(),
        env: Vec::new(),
    };
    assert!(Terminal::open(&spec).is_err());
}

#[test]
fn other_shells_run_without_a_wrapper() {
    let Some([sh]) = shells(["sh"]) else {
        return;
    };
    let mut tty = Tty::open(&sh, true, |_| {});
    assert_eq!(tty.term.shell(), Shell::Other);
    assert_eq!(Shell::Other.as_str(), "other");
    assert!(!tty.term.integration());
    tty.send("printf '%s-%s\\n' plain sh\r");
    tty.expect(b"plain-sh");
    tty.send("exit 5\r");
    assert_eq!(tty.wait(), 5);
    assert!(!contains(&tty.out, b"\x1b]133;"));
}

#[test]
fn dropping_a_running_terminal_reaps_the_shell_and_removes_the_wrapper() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, true, |_| {});
    tty.expect(B);
    let pid = tty.term.pid();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("the shell's environment");
    let rc = environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"ENV="))
        .map(|path| PathBuf::from(String::from_utf8_lossy(path).into_owned()))
        .expect("bash started with ENV naming the wrapper");
    assert!(rc.exists());
    drop(tty);
    assert!(
        !rc.exists(),
        "the wrapper's directory is removed with the terminal"
    );
    let deadline = Instant::now() + TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "shell {pid} was not reaped");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ----- shell integration ----------------------------------------------------------------------

/// What every shell must show with integration on, given rc files that set
/// `LEMBAS_TEST_RC=from-rc`, an alias `lt` printing `alias-works`, and a prompt hook that rebuilds
/// the prompt as `rebuilt> ` before each prompt (bash's and zsh's also turn on nounset, and
/// zsh's ksh_arrays, which the hooks must survive).
fn integration_marks(tty: &mut Tty) {
    tty.expect(B);
    // The user's own rc files took effect.
    tty.send("printf '%s-%s\\n' \"$LEMBAS_TEST_RC\" x\r");
    tty.expect(b"from-rc-x");
    tty.expect(B);
    tty.send("lt\r");
    tty.expect(b"alias-works");
    tty.expect(B);

    // A command: C before its output, D;0 after, then a new prompt A ... B, whose B is still there
    // after the hook rebuilt the prompt.
    tty.send("true\r");
    let ran = tty.expect(D0);
    assert!(contains(&ran, C), "C before D: {}", show(&ran));
    let prompt = tty.expect(B);
    assert!(
        contains(&prompt, A),
        "A starts the prompt: {}",
        show(&prompt)
    );
    let rebuilt = find(&prompt, b"rebuilt> \x1b]133;B\x07");
    assert!(
        rebuilt.is_some_and(|at| find(&prompt, A).is_some_and(|a| a < at)),
        "A before the rebuilt prompt and B right after it: {}",
        show(&prompt)
    );

    tty.send("false\r");
    let ran = tty.expect(D1);
    assert!(contains(&ran, C), "C before D: {}", show(&ran));
    tty.expect(B);

    // An empty line ends no command.
    tty.send("\r");
    let empty = tty.expect(B);
    assert!(
        !contains(&empty, b"\x1b]133;C") && !contains(&empty, b"\x1b]133;D"),
        "no C or D for an empty line: {}",
        show(&empty)
    );
    assert!(contains(&empty, A), "a new prompt: {}", show(&empty));

    // OSC 7 follows cd, percent-encoded byte by byte.
    let dir = tty.home().join("a b").join("é");
    std::fs::create_dir_all(&dir).expect("directory");
    tty.send("cd 'a b/é'\r");
    let url = format!(
        "\x1b]7;file://{HOST}{}\x07",
        percent_encode(dir.as_os_str().as_encoded_bytes())
    );
    assert!(url.contains("/a%20b/%C3%A9\x07"), "{url:?}");
    tty.expect(url.as_bytes());
    tty.expect(B);

    tty.send("exit 3\r");
    tty.drain();
    assert_eq!(tty.wait(), 3);
}

#[test]
fn bash_reads_the_login_files_and_marks_prompts() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, true, |home| {
        // Debian's layout: ~/.profile reads ~/.bashrc.
        write(
            &home.join(".profile"),
            "export LEMBAS_TEST_RC=from-rc\n. \"$HOME/.bashrc\"\n",
        );
        write(
            &home.join(".bashrc"),
            "alias lt='printf \"%s\\n\" alias-works'\n\
             PROMPT_COMMAND='PS1=\"rebuilt> \"'\n\
             set -u\n",
        );
    });
    integration_marks(&mut tty);
}

#[test]
fn bash_stays_a_login_shell_without_traces_of_the_wrapper() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, true, |home| {
        write(&home.join(".bash_profile"), "LEMBAS_PROFILE=bash_profile\n");
        // Not read: ~/.bash_profile comes first.
        write(&home.join(".profile"), "LEMBAS_PROFILE=profile\n");
        write(
            &home.join(".bash_logout"),
            "echo bye > \"$HOME/logged-out\"\n",
        );
    });
    tty.expect(B);
    tty.send(
        "printf '<%s>\\n' \"$LEMBAS_PROFILE:${ENV-unset}:${__LEMBAS_HISTFILE-none}:$HISTFILE:$(shopt login_shell):$(set -o | grep -c '^posix *on')\"\r",
    );
    let home = tty.home();
    let expected = format!(
        "<bash_profile:unset:none:{}/.bash_history:login_shell    \ton:0>",
        home.display()
    );
    tty.expect(expected.as_bytes());
    tty.expect(B);
    // No variable of ours is exported.
    tty.send("printf '<%s>\\n' \"$(env | grep -c __LEMBAS_)\"\r");
    tty.expect(b"<0>");
    tty.expect(B);
    // `logout` works, as in a login shell, and reads ~/.bash_logout.
    tty.send("logout\r");
    tty.drain();
    assert_eq!(tty.wait(), 0);
    assert!(home.join("logged-out").exists(), "~/.bash_logout was read");
}

#[test]
fn zsh_follows_the_users_zdotdir_and_marks_prompts() {
    let Some([zsh]) = shells(["zsh"]) else {
        return;
    };
    let mut tty = Tty::open(&zsh, true, |home| {
        write(&home.join(".zshenv"), "export ZDOTDIR=\"$HOME/zdot\"\n");
        write(
            &home.join("zdot/.zshrc"),
            "LEMBAS_TEST_RC=from-rc\n\
             alias lt='printf \"%s\\n\" alias-works'\n\
             ZSHRC_SAW=\"${__LEMBAS_ZDOTDIR-gone}:$ZDOTDIR\"\n\
             rebuild() { PS1='rebuilt> ' }\n\
             precmd_functions+=(rebuild)\n\
             setopt nounset ksh_arrays\n",
        );
        write(&home.join("zdot/.zprofile"), "LEMBAS_PROFILE=zprofile\n");
    });
    tty.expect(B);
    tty.send("printf '<%s>\\n' \"$ZSHRC_SAW:$LEMBAS_PROFILE:$(env | grep -c __LEMBAS_)\"\r");
    let expected = format!("<gone:{}/zdot:zprofile:0>", tty.home().display());
    tty.expect(expected.as_bytes());
    integration_marks(&mut tty);
}

#[test]
fn fish_reads_its_config_and_marks_prompts() {
    let Some([fish]) = shells(["fish"]) else {
        return;
    };
    let mut tty = Tty::open(&fish, true, |home| {
        write(
            &home.join(".config/fish/config.fish"),
            "set -gx LEMBAS_TEST_RC from-rc\n\
             alias lt 'printf \"%s\\n\" alias-works'\n\
             set -g fish_greeting\n\
             function fish_prompt\n    printf 'rebuilt> '\nend\n",
        );
    });
    integration_marks(&mut tty);
}

#[test]
fn fish_keeps_b_after_the_prompt_is_redefined() {
    let Some([fish]) = shells(["fish"]) else {
        return;
    };
    let mut tty = Tty::open(&fish, true, |home| {
        write(
            &home.join(".config/fish/config.fish"),
            "set -g fish_greeting\n",
        );
    });
    tty.expect(B);
    tty.send("function fish_prompt; printf '%s> ' again; end\r");
    let prompt = tty.expect(b"again> ");
    assert!(contains(&prompt, A), "{}", show(&prompt));
    tty.expect(B);
    tty.send("printf '%s\\n' (status is-login; and echo login-yes)\r");
    tty.expect(b"login-yes\r\n");
}

#[test]
fn integration_off_gives_no_marks() {
    let names = ["bash", "zsh", "fish"];
    let Some(paths) = shells(names) else {
        return;
    };
    for (shell, path) in names.into_iter().zip(paths) {
        let mut tty = Tty::open(&path, false, |home| {
            write(&home.join(".zshrc"), "PS1='plain> '\n");
            write(
                &home.join(".config/fish/config.fish"),
                "set -g fish_greeting\n",
            );
        });
        tty.send("true\r");
        tty.send("printf '%s-%s\\n' no marks\r");
        tty.expect(b"no-marks");
        tty.send("exit\r");
        tty.drain();
        assert_eq!(tty.wait(), 0, "{shell}");
        assert!(
            !contains(&tty.out, b"\x1b]133;"),
            "{shell}: {}",
            show(&tty.out)
        );
    }
}

/// The wrapper leaves nothing behind: the shell's options and its exported environment are
/// those of a login shell started without it (each with its own HOME, written as ~).
#[test]
fn options_and_environment_match_a_plain_login_shell() {
    let env = "env | grep -v '^_=' | sort | sed \"s#$HOME#~#g\"";
    let Some(paths) = shells(["bash", "zsh", "fish"]) else {
        return;
    };
    for ((shell, probe), path) in [
        (
            "bash",
            format!("printf '%s=%s\\n' sum \"$({{ shopt -p; set +o; {env}; }} | cksum)\"\r"),
        ),
        (
            "zsh",
            format!("printf '%s=%s\\n' sum \"$({{ setopt; {env}; }} | cksum)\"\r"),
        ),
        ("fish", format!("printf '%s=%s\\n' sum ({env} | cksum)\r")),
    ]
    .into_iter()
    .zip(paths)
    {
        let sums: Vec<String> = [false, true]
            .into_iter()
            .map(|integration| {
                let mut tty = Tty::open(&path, integration, |home| {
                    write(&home.join(".profile"), "export LEMBAS_TEST_RC=from-rc\n");
                    write(&home.join(".zshrc"), "LEMBAS_TEST_RC=from-rc\n");
                    write(
                        &home.join(".config/fish/config.fish"),
                        "set -g fish_greeting\n",
                    );
                });
                tty.send(&probe);
                tty.expect(b"sum=");
                let sum = show(&tty.expect(b"\r\n"));
                tty.send("exit\r");
                tty.drain();
                sum
            })
            .collect();
        assert_eq!(sums[0], sums[1], "{shell}");
    }
}

/// Variables the wrappers replace while starting (bash's ENV, zsh's ZDOTDIR) come back as the
/// user had them.
#[test]
fn the_users_env_and_zdotdir_are_given_back() {
    let Some([bash, zsh]) = shells(["bash", "zsh"]) else {
        return;
    };
    let mut tty = Tty::open_with(&bash, true, &[("ENV", "~/env.sh")], |home| {
        write(&home.join(".profile"), "LEMBAS_TEST_RC=from-rc\n");
    });
    tty.send("printf '<%s>\\n' \"${ENV#$HOME}:$LEMBAS_TEST_RC:$(env | grep -c __LEMBAS_)\"\r");
    tty.expect(b"</env.sh:from-rc:0>");

    let mut tty = Tty::open_with(&zsh, true, &[("ZDOTDIR", "~/zd")], |home| {
        write(
            &home.join("zd/.zshrc"),
            "ZSHRC_SAW=\"${__LEMBAS_ZDOTDIR-gone}:${ZDOTDIR#$HOME}\"\n",
        );
    });
    tty.send("printf '<%s>\\n' \"$ZSHRC_SAW:${ZDOTDIR#$HOME}:$(env | grep -c __LEMBAS_)\"\r");
    tty.expect(b"<gone:/zd:/zd:0>");
}

/// A caller that gives up on `wait` (a dropped future) still leaves no zombie behind.
#[test]
fn the_shell_is_reaped_even_when_waiting_is_abandoned() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, false, |_| {});
    let pid = tty.term.pid();
    assert!(smol::block_on(smol::future::poll_once(tty.term.wait())).is_none());
    tty.send("exit\r");
    tty.drain();
    let deadline = Instant::now() + TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "shell {pid} was not reaped");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A prompt hook added at the prompt, after ours (say `eval "$(starship init bash)"` typed in),
/// gets B put back after it from the next prompt on.
#[test]
fn b_follows_a_prompt_hook_added_later() {
    let Some(paths) = shells(["bash", "zsh"]) else {
        return;
    };
    for ((shell, add_hook), path) in [
        ("bash", "PROMPT_COMMAND+=('PS1=\"$((6*7))> \"')\r"),
        (
            "zsh",
            "late() { PS1=\"$((6*7))> \" }; precmd_functions+=(late)\r",
        ),
    ]
    .into_iter()
    .zip(paths)
    {
        let mut tty = Tty::open(&path, true, |home| {
            write(&home.join(".zshrc"), "PS1='plain> '\n");
        });
        tty.expect(B);
        tty.send(add_hook);
        tty.expect(b"42> ");
        tty.send("\r");
        let prompt = tty.expect(B);
        assert!(
            contains(&prompt, b"42> \x1b]133;B\x07"),
            "{shell}: {}",
            show(&prompt)
        );
    }
}

/// The terminal ends with its shell even when a background job still holds the PTY open, and
/// the shell's last output still comes through first.
#[test]
fn the_terminal_ends_with_the_shell_despite_a_background_job() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open(&bash, false, |_| {});
    tty.send("sleep 12 & printf '%s-%s' last words; exit 4\r");
    tty.drain();
    assert!(contains(&tty.out, b"last-words"), "{}", show(&tty.out));
    assert_eq!(tty.wait(), 4);
}

/// A device started without TERM (a service) gives its shells xterm-256color.
#[test]
fn term_defaults_to_xterm_256color() {
    let Some([bash]) = shells(["bash"]) else {
        return;
    };
    let mut tty = Tty::open_with(&bash, false, &[("TERM", "")], |_| {});
    tty.send("printf '<%s>\\n' \"$TERM\"\r");
    tty.expect(b"<xterm-256color>");
}
