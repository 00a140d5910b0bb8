//! `Effect::CheckChanges` performed with git: whether a `/review` has anything to read in the
//! session's project. The project is resolved and confined first (inside the roots when there
//! are any, with the tools' own rules), and git looks only there (the pathspec `.`), even when
//! the repository reaches above it. The branch is one the core let through
//! ([`lembas_core::review::branch_name`]: never an option, never a range).
//!
//! A cloned repository's `.git/config` is not trusted: git runs with its filesystem monitor off
//! (`core.fsmonitor` runs a command of the repository's choosing), with no external diff or
//! text conversion, no optional locks and no prompt; it reads and changes nothing else.
//! `git status` hashes a file whose stat data changed through the clean filter its
//! `.gitattributes` names, a command the config defines: every filter driver the config names
//! is turned off for the run (git has no switch for all of them), and submodules are looked at
//! only for their recorded commit, so no git runs inside one with a config of its own.
//!
//! A git that takes longer than `commands.review_git_timeout_ms` (a huge tree on a cold disk, a
//! network file system that hangs) is stopped with all it started, and the review goes with a
//! notice saying so: a `/review` never waits for good.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use lembas_core::review::Changes;

use crate::tools::{confine_in, ToolSettings};

/// `commands.review_git_timeout_ms`'s default: `git status` of a 100,000-file tree takes
/// about a second here with a warm cache; ten leave room for a cold one.
pub const DEFAULT_TIMEOUT_MS: usize = 10_000;

/// Look in `project` (confined to `roots`, empty: the project alone) for what a review of
/// `branch...HEAD` (none: the changes not committed yet) would read, each git run stopped
/// after `timeout`.
pub fn check_changes(
    settings: &ToolSettings,
    project: &str,
    roots: &[String],
    branch: Option<&str>,
    timeout: Duration,
) -> Result<Changes, String> {
    let place = confine_in(settings, project, roots, ".")?;
    let dir = &place.path;
    let off = filters_off(dir)?;
    let run = |args: &[&str]| run(dir, &off, args, timeout);
    let inside = run(&["rev-parse", "--is-inside-work-tree"])?;
    if !inside.success {
        return Ok(Changes::NoRepository);
    }
    let Some(branch) = branch else {
        let status = run(&[
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
            "--",
            ".",
        ])?;
        return match status.success {
            true if status.printed => Ok(Changes::Found),
            true => Ok(Changes::None),
            false => Err(status.said),
        };
    };
    let known = run(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{branch}^{{commit}}"),
    ])?;
    if !known.success {
        return Ok(Changes::UnknownBranch);
    }
    let diff = run(&[
        "diff",
        "--quiet",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=dirty",
        &format!("{branch}...HEAD"),
        "--",
        ".",
    ])?;
    match diff.code {
        Some(0) => Ok(Changes::None),
        Some(1) => Ok(Changes::Found),
        _ => Err(diff.said),
    }
}

/// How a git command ended.
#[derive(Debug)]
struct Ran {
    success: bool,
    code: Option<i32>,
    /// It printed something on its standard output.
    printed: bool,
    /// What it said on its standard error, for a refusal (its first line).
    said: String,
}

/// The most filter drivers a config may name for a review to look: past it, git is not run
/// (each is three arguments, and no real repository comes near).
const MAX_FILTER_DRIVERS: usize = 64;
/// The most bytes of filter settings' names read from git's config: 64 drivers' few settings
/// with long names fit many times over.
const MAX_FILTER_NAMES_BYTES: u64 = 64 * 1024;

/// The `-c` arguments that turn off every filter driver git's config names as seen from `dir`
/// (the repository's own config, the files it includes, the person's): no clean command, no
/// long-running process, not required (a required filter with no command stops git).
/// Reading the config runs nothing.
fn filters_off(dir: &Path) -> Result<Vec<String>, String> {
    let mut child = hardened(dir)
        .args(["config", "-z", "--name-only", "--get-regexp", r"^filter\."])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("git could not be run: {e}"))?;
    let mut names = Vec::new();
    if let Some(out) = child.stdout.take() {
        let _ = out.take(MAX_FILTER_NAMES_BYTES + 1).read_to_end(&mut names);
    }
    if names.len() as u64 > MAX_FILTER_NAMES_BYTES {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "the repository's config names filter drivers in more than {MAX_FILTER_NAMES_BYTES} \
             bytes, more than a review turns off before running git"
        ));
    }
    let status = child
        .wait()
        .map_err(|e| format!("git could not be waited for: {e}"))?;
    // 1: no filter is named.
    if !status.success() && status.code() != Some(1) {
        return Err(format!("git config could not be read ({status})"));
    }
    let mut drivers: Vec<&[u8]> = names
        .split(|&b| b == 0)
        .filter_map(|key| key.strip_prefix(b"filter."))
        .filter_map(|rest| {
            rest.iter()
                .rposition(|&b| b == b'.')
                .map(|dot| &rest[..dot])
        })
        .collect();
    drivers.sort_unstable();
    drivers.dedup();
    if drivers.len() > MAX_FILTER_DRIVERS {
        return Err(format!(
            "the repository's config names {} filter drivers, more than the {MAX_FILTER_DRIVERS} \
             a review turns off before running git",
            drivers.len()
        ));
    }
    let mut off = Vec::with_capacity(drivers.len() * 6);
    for name in drivers {
        // `-c` takes `key=value` split at the first `=`: such a name cannot be turned off.
        let name = std::str::from_utf8(name)
            .ok()
            .filter(|n| !n.contains(['=', '\n']))
            .ok_or("the repository's config names a filter driver git cannot be told to skip")?;
        for setting in ["clean=", "process=", "required=false"] {
            off.push("-c".into());
            off.push(format!("filter.{name}.{setting}"));
        }
    }
    Ok(off)
}

/// git in `dir`, hardened as the module says, with nothing to read on its standard input.
fn hardened(dir: &Path) -> Command {
    let mut git = Command::new("git");
    git.arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
            "--no-optional-locks",
            "--no-pager",
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null());
    git
}

/// Run git in `dir` with the settings `off` and `args`. Its output is not kept: only whether
/// there was any (a huge status is not held in memory).
fn run(dir: &Path, off: &[String], args: &[&str], timeout: Duration) -> Result<Ran, String> {
    let child = hardened(dir)
        .args(off)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: stopped, what it started stops with it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("git could not be run: {e}"))?;
    finish(child, args.first().copied().unwrap_or(""), timeout)
}

/// Wait for a git run, reading its standard error on a thread of its own while its standard
/// output is drained: read one after the other, a git that fills the stderr pipe (a warning a
/// directory, in a large tree) would wait for it to be read while this waits for stdout's end.
/// Past `timeout`, the child's process group (it leads one) is killed.
fn finish(mut child: std::process::Child, command: &str, timeout: Duration) -> Result<Ran, String> {
    let pid = Pid::from_raw(child.id() as i32);
    let (exited, watch) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let late = matches!(watch.recv_timeout(timeout), Err(RecvTimeoutError::Timeout));
        if let Some(pid) = pid.filter(|_| late) {
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
        late
    });
    let err = child.stderr.take();
    let stderr = std::thread::spawn(move || {
        let mut said = Vec::new();
        if let Some(mut err) = err {
            let _ = (&mut err).take(4096).read_to_end(&mut said);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        }
        String::from_utf8_lossy(&said).into_owned()
    });
    let mut first = [0u8; 1];
    let printed = child.stdout.take().is_some_and(|mut out| {
        let printed = matches!(out.read(&mut first), Ok(1));
        // The rest is not needed: drain it so git is not stopped by a full pipe.
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        printed
    });
    let said = stderr.join().unwrap_or_default();
    // Waited for without reaping: until it is reaped its group's id is no other group's, so
    // the watchdog's kill cannot reach anyone else.
    if let Some(pid) = pid {
        let _ = rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        );
    }
    let _ = exited.send(());
    let late = watchdog.join().unwrap_or(false);
    let status = child
        .wait()
        .map_err(|e| format!("git could not be waited for: {e}"))?;
    if late {
        return Err(format!(
            "git {command} took longer than commands.review_git_timeout_ms ({} ms) and was \
             stopped",
            timeout.as_millis()
        ));
    }
    let said = said.lines().next().unwrap_or("").trim().to_string();
    Ok(Ran {
        success: status.success(),
        code: status.code(),
        printed,
        said: if said.is_empty() {
            format!("git {command} failed ({status})")
        } else {
            said
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("git runs")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A git that writes more to stderr than a pipe holds before it ends its stdout is waited
    /// for, not deadlocked: both are read at once.
    #[test]
    fn a_run_that_floods_stderr_before_stdout_ends_is_read_whole() {
        let child = Command::new("sh")
            .args([
                "-c",
                "head -c 300000 /dev/zero | tr '\\0' w >&2; echo ' M changed'",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(finish(child, "status", Duration::from_secs(60))));
        let ran = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("finish did not return: stdout and stderr were read one after the other")
            .expect("it ran");
        assert!(ran.success && ran.printed);
        assert!(
            ran.said.starts_with("www") && ran.said.len() == 4096,
            "{}",
            ran.said.len()
        );
    }

    const WAIT: Duration = Duration::from_secs(60);

    /// A git that hangs, with a child of its own holding its output open, is stopped with that
    /// child after the timeout, and the check says which bound stopped it.
    #[test]
    fn a_run_past_its_timeout_is_stopped_with_what_it_started() {
        let child = Command::new("sh")
            .args(["-c", "sleep 600 & sleep 600"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("sh runs");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(finish(child, "status", Duration::from_millis(200))));
        let ran = rx
            .recv_timeout(WAIT)
            .expect("finish did not return: the timeout stopped nothing, or not the whole group");
        let said = ran.expect_err("a run past its timeout is refused");
        assert!(
            said.contains("commands.review_git_timeout_ms (200 ms)"),
            "{said}"
        );
    }

    fn settings() -> ToolSettings {
        ToolSettings::from_env()
    }

    #[test]
    fn a_clean_tree_has_nothing_to_review_and_any_change_has_something() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join("app")).unwrap();
        let project = repo.join("app");
        let p = project.to_str().unwrap();
        let check = |branch| check_changes(&settings(), p, &[], branch, WAIT);
        assert_eq!(check(None), Ok(Changes::NoRepository));
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(project.join("a.txt"), "a\n").unwrap();
        assert_eq!(check(None), Ok(Changes::Found), "an untracked file");
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "a"]);
        assert_eq!(check(None), Ok(Changes::None));
        assert_eq!(check(Some("main")), Ok(Changes::None));
        assert_eq!(check(Some("nope")), Ok(Changes::UnknownBranch));
        // A change above the project is not the project's.
        std::fs::write(repo.join("outside.txt"), "x\n").unwrap();
        assert_eq!(check(None), Ok(Changes::None));
        std::fs::write(project.join("a.txt"), "b\n").unwrap();
        assert_eq!(check(None), Ok(Changes::Found), "a modified file");
        git(&repo, &["checkout", "-q", "-b", "topic"]);
        git(&repo, &["commit", "-q", "-am", "b"]);
        assert_eq!(check(Some("main")), Ok(Changes::Found));
        assert_eq!(check(Some("topic")), Ok(Changes::None));
        // Outside the roots, nothing is looked at.
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let refused = check_changes(
            &settings(),
            p,
            &[elsewhere.to_str().unwrap().to_string()],
            None,
            WAIT,
        );
        assert!(refused.is_err(), "{refused:?}");
    }

    /// A repository whose config defines the filters its `.gitattributes` names (a required
    /// clean command, a long-running process) runs neither when a review looks at
    /// a file whose stat data changed, where plain `git status` runs them; and a submodule's
    /// own filter is not run either.
    #[test]
    fn a_repositorys_filters_and_its_submodules_run_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let ran = |name: &str| root.join(name).exists();
        let sub = root.join("sub-origin");
        std::fs::create_dir_all(&sub).unwrap();
        git(&sub, &["init", "-q", "-b", "main"]);
        std::fs::write(sub.join("f"), "x\n").unwrap();
        std::fs::write(sub.join(".gitattributes"), "* filter=in.sub\n").unwrap();
        git(&sub, &["add", "."]);
        git(&sub, &["commit", "-q", "-m", "s"]);

        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a"), "a\n").unwrap();
        std::fs::write(repo.join("b"), "b\n").unwrap();
        std::fs::write(
            repo.join(".gitattributes"),
            "a filter=e.vil\nb filter=pro\n",
        )
        .unwrap();
        let origin = sub.to_str().unwrap();
        git(
            &repo,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "-q",
                "add",
                origin,
                "sub",
            ],
        );
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "a"]);
        // Defined after the commit, as a cloned repository's config would be.
        let touch = |name: &str| format!("touch '{}'; cat", root.join(name).display());
        let process = format!("sh -c \"touch '{}'\"", root.join("process").display());
        git(&repo, &["config", "filter.e.vil.clean", &touch("clean")]);
        git(&repo, &["config", "filter.e.vil.required", "true"]);
        git(&repo, &["config", "filter.pro.process", &process]);
        git(
            &repo.join("sub"),
            &["config", "filter.in.sub.clean", &touch("submodule")],
        );
        let stale = |when: &str| {
            for file in ["a", "b", "sub/f"] {
                let ok = Command::new("touch")
                    .args(["-d", when])
                    .arg(repo.join(file))
                    .status()
                    .unwrap()
                    .success();
                assert!(ok);
            }
        };

        stale("2020-01-01");
        let check = check_changes(&settings(), repo.to_str().unwrap(), &[], None, WAIT);
        assert_eq!(check, Ok(Changes::None));
        for name in ["clean", "process", "submodule"] {
            assert!(!ran(name), "the {name} filter ran");
        }

        // The same repository runs them under plain `git status`: the test sees what it
        // claims to. The process, which does not speak git's protocol, stops that git; without
        // it, git goes on to the submodule.
        let plain = |when: &str| {
            stale(when);
            let _ = Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(["--no-optional-locks", "status", "--porcelain"])
                .output()
                .unwrap();
        };
        plain("2020-01-02");
        assert!(
            ran("clean") && ran("process"),
            "plain git status ran no filter"
        );
        git(&repo, &["config", "--unset", "filter.pro.process"]);
        plain("2020-01-03");
        assert!(ran("submodule"), "plain git status ran no submodule filter");
    }
}
