//! Remote terminals on real PTYs: bash, zsh and fish as login shells with the user's own rc
//! files, OSC 133 / OSC 7 marks, resize, hangup and exit codes. Every wait is bounded, so a
//! shell that never answers fails the test instead of hanging it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lembas::terminal::{OpenSpec, Shell, Terminal};
use tempfile::TempDir;

const TIMEOUT: Duration = Duration::from_secs(10);
const HOST: &str = "testhost";

const B: &[u8] = b"\x1b]133;B\x07";

fn program(name: &str) -> PathBuf {
    ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("{name} is not installed (.ci/run installs bash, zsh and fish)"))
}

/// A terminal, everything it has written so far, and how far the test has looked.
struct Tty {
    term: Terminal,
    out: Vec<u8>,
    seen: usize,
    /// Removed with the terminal's test.
    _home: TempDir,
}

impl Tty {
    /// `shell` in a fresh HOME that `setup` fills with the user's rc files first.
    fn open(shell: &str, integration: bool, setup: impl FnOnce(&Path)) -> Tty {
        let home = TempDir::new().expect("temp HOME");
        let home_path = home.path().canonicalize().expect("canonical HOME");
        setup(&home_path);
        let var = |k: &str, v: &Path| (OsString::from(k), v.as_os_str().to_owned());
        let spec = OpenSpec {
            shell: program(shell),
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
            ],
        };
        let term = Terminal::open(&spec).expect("open the terminal");
        Tty {
            term,
            out: Vec::new(),
            seen: 0,
            _home: home,
        }
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
fn a_command_runs_and_its_output_comes_back() {
    let mut tty = Tty::open("bash", false, |_| {});
    assert_eq!(tty.term.shell(), Shell::Bash);
    assert!(!tty.term.integration());
    tty.send("printf '%s-%s\\n' lembas out\r");
    tty.expect(b"lembas-out");
    tty.send("exit\r");
    assert_eq!(tty.wait(), 0);
}

#[test]
fn stty_size_follows_a_resize() {
    let mut tty = Tty::open("bash", false, |_| {});
    tty.send("stty size\r");
    tty.expect(b"24 80");
    tty.term.resize(100, 30).expect("resize");
    tty.send("stty size\r");
    tty.expect(b"30 100");
}

#[test]
fn exit_reports_its_code_and_reads_end() {
    let mut tty = Tty::open("bash", false, |_| {});
    tty.send("exit 3\r");
    tty.drain();
    assert_eq!(tty.wait(), 3);
}

/// Several rounds: bash misses a SIGHUP that lands just before readline waits for a key, which
/// the follow-up signals must cover.
#[test]
fn hangup_ends_the_shell() {
    for _ in 0..8 {
        let mut tty = Tty::open("bash", false, |_| {});
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
    let mut tty = Tty::open("sh", true, |_| {});
    assert_eq!(tty.term.shell(), Shell::Other);
    assert!(!tty.term.integration());
    tty.send("printf '%s-%s\\n' plain sh\r");
    tty.expect(b"plain-sh");
    tty.send("exit 5\r");
    assert_eq!(tty.wait(), 5);
    assert!(!contains(&tty.out, b"\x1b]133;"));
}

#[test]
fn dropping_a_running_terminal_reaps_the_shell_and_removes_the_wrapper() {
    let mut tty = Tty::open("bash", true, |_| {});
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
