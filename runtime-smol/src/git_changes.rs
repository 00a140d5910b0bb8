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
    let mut child = Command::new("git")
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
    let mut first = [0u8; 1];
    let printed = child.stdout.take().is_some_and(|mut out| {
        let printed = matches!(out.read(&mut first), Ok(1));
        // The rest is not needed: drain it so git is not stopped by a full pipe.
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        printed
    });
    let mut said = String::new();
    if let Some(err) = child.stderr.take() {
        let _ = err.take(4096).read_to_string(&mut said);
    }
    let status = child
        .wait()
        .map_err(|e| format!("git could not be waited for: {e}"))?;
    let said = said.lines().next().unwrap_or("").trim().to_string();
    Ok(Ran {
        success: status.success(),
        code: status.code(),
        printed,
        said: if said.is_empty() {
            format!("git {} failed ({status})", args.first().unwrap_or(&""))
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
