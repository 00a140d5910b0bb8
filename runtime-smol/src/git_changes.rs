//! `Effect::CheckChanges` performed with git: whether a `/review` has anything to read in the
//! session's project. The project is resolved and confined first (inside the roots when there
//! are any, with the tools' own rules), and git looks only there (the pathspec `.`), even when
//! the repository reaches above it. The branch is one the core let through
//! ([`lembas_core::review::branch_name`]: never an option, never a range).
//!
//! A cloned repository's `.git/config` is not trusted: git runs with its filesystem monitor off
//! (`core.fsmonitor` runs a command of the repository's choosing), with no external diff or
//! text conversion, no optional locks and no prompt; it reads and changes nothing else.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use lembas_core::review::Changes;

use crate::tools::{confine_in, ToolSettings};

/// Look in `project` (confined to `roots`, empty: the project alone) for what a review of
/// `branch...HEAD` (none: the changes not committed yet) would read.
pub fn check_changes(
    settings: &ToolSettings,
    project: &str,
    roots: &[String],
    branch: Option<&str>,
) -> Result<Changes, String> {
    let place = confine_in(settings, project, roots, ".")?;
    let dir = &place.path;
    let inside = run(dir, &["rev-parse", "--is-inside-work-tree"])?;
    if !inside.success {
        return Ok(Changes::NoRepository);
    }
    let Some(branch) = branch else {
        let status = run(
            dir,
            &[
                "status",
                "--porcelain",
                "--untracked-files=normal",
                "--",
                ".",
            ],
        )?;
        return match status.success {
            true if status.printed => Ok(Changes::Found),
            true => Ok(Changes::None),
            false => Err(status.said),
        };
    };
    let known = run(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{branch}^{{commit}}"),
        ],
    )?;
    if !known.success {
        return Ok(Changes::UnknownBranch);
    }
    let diff = run(
        dir,
        &[
            "diff",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
            &format!("{branch}...HEAD"),
            "--",
            ".",
        ],
    )?;
    match diff.code {
        Some(0) => Ok(Changes::None),
        Some(1) => Ok(Changes::Found),
        _ => Err(diff.said),
    }
}

/// How a git command ended.
struct Ran {
    success: bool,
    code: Option<i32>,
    /// It printed something on its standard output.
    printed: bool,
    /// What it said on its standard error, for a refusal (its first line).
    said: String,
}

/// Run git in `dir` with `args`, hardened as the module says. Its output is not kept: only
/// whether there was any (a huge status is not held in memory).
fn run(dir: &Path, args: &[&str]) -> Result<Ran, String> {
    let child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
            "--no-optional-locks",
            "--no-pager",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git could not be run: {e}"))?;
    finish(child, args.first().copied().unwrap_or(""))
}

/// Wait for a git run, reading its standard error on a thread of its own while its standard
/// output is drained: read one after the other, a git that fills the stderr pipe (a warning a
/// directory, in a large tree) would wait for it to be read while this waits for stdout's end.
fn finish(mut child: std::process::Child, command: &str) -> Result<Ran, String> {
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
    let status = child
        .wait()
        .map_err(|e| format!("git could not be waited for: {e}"))?;
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
        std::thread::spawn(move || tx.send(finish(child, "status")));
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
        let check = |branch| check_changes(&settings(), p, &[], branch);
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
        );
        assert!(refused.is_err(), "{refused:?}");
    }
}
