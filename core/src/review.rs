//! `/review` with nothing to review: before a review is sent to the model, the shell looks at
//! the session's project in git (`Effect::CheckChanges`) for what the review would read, the
//! changes not committed yet (`/review`, `/review head`) or the branch against another
//! (`/review <branch>`). When there is none the prompt is answered `message` (the spec's "a
//! command that had nothing to do") and nothing reaches the model. This file holds what is
//! decided on text alone: what a review's argument asks to compare, which branch names are
//! handed to git at all, and the sentences said.

use serde::{Deserialize, Serialize};

/// What a `/review` compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewTarget {
    /// The working tree and the index against `HEAD` (`/review`, `/review head`).
    Head,
    /// `HEAD` against this branch (or any commit name git knows), from where they part.
    Branch(String),
}

impl ReviewTarget {
    /// What a review's arguments ask to compare: `None` when they are no one name git could
    /// be handed safely (several words, an option, a range), so nothing is checked and the
    /// review goes to the model as typed.
    pub fn of_args(args: &str) -> Option<ReviewTarget> {
        match args {
            "" | "head" | "HEAD" => Some(ReviewTarget::Head),
            name if branch_name(name) => Some(ReviewTarget::Branch(name.to_string())),
            _ => None,
        }
    }

    /// The branch, as the effect names it (`None`: against `HEAD`).
    pub fn branch(&self) -> Option<&str> {
        match self {
            ReviewTarget::Head => None,
            ReviewTarget::Branch(b) => Some(b),
        }
    }
}

/// The longest branch name handed to git.
pub const MAX_BRANCH_CHARS: usize = 200;

/// Whether `name` is handed to git as a branch: `[A-Za-z0-9._/-]`, starting with a letter or a
/// digit (never an option), no `..` (never a range), no `//`, not ending in `/`, `.` or
/// `.lock` (names git refuses), at most [`MAX_BRANCH_CHARS`].
pub fn branch_name(name: &str) -> bool {
    name.len() <= MAX_BRANCH_CHARS
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
        && !name.contains("..")
        && !name.contains("//")
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
}

/// What the shell found (the answer to `Effect::CheckChanges`). Serde: its snake_case name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Changes {
    /// Something to review: the review goes to the model.
    Found,
    /// No change where the review looks.
    None,
    /// The project is in no git repository.
    NoRepository,
    /// The branch names nothing git knows in the repository.
    UnknownBranch,
    /// The device has no disk to look at (a web page).
    NoDisk,
}

/// What a review with nothing to review answers in `_meta.lembas.message`, or `None` when
/// there is something to review.
pub fn nothing_to_review(changes: Changes, target: &ReviewTarget, project: &str) -> Option<String> {
    let project = project.escape_debug();
    Some(match (changes, target) {
        (Changes::Found, _) => return None,
        (Changes::None, ReviewTarget::Head) => {
            format!("nothing to review: `{project}` has no changes since the last commit")
        }
        (Changes::None, ReviewTarget::Branch(b)) => {
            format!("nothing to review: `{project}` has no changes on this branch against `{b}`")
        }
        (Changes::NoRepository, _) => {
            format!("nothing to review: `{project}` is not in a git repository")
        }
        (Changes::UnknownBranch, ReviewTarget::Branch(b)) => {
            format!("nothing to review: `{b}` names no branch or commit in this repository")
        }
        (Changes::UnknownBranch, ReviewTarget::Head) => {
            format!("nothing to review: the repository of `{project}` has no commit yet")
        }
        (Changes::NoDisk, _) => {
            "nothing to review: this device runs in a web page, which has no disk and no \
             changes on it"
                .to_string()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_compares_head_or_one_safe_branch_name_and_nothing_else_is_checked() {
        assert_eq!(ReviewTarget::of_args(""), Some(ReviewTarget::Head));
        assert_eq!(ReviewTarget::of_args("HEAD"), Some(ReviewTarget::Head));
        assert_eq!(
            ReviewTarget::of_args("feature/x-1.2"),
            Some(ReviewTarget::Branch("feature/x-1.2".into()))
        );
        for args in [
            "--output=/tmp/x",
            "-p",
            "main..dev",
            "main dev",
            "a//b",
            "x/",
            "x.lock",
            "/abs",
            "é",
            "main;rm",
            "$(id)",
            "a\nb",
        ] {
            assert_eq!(ReviewTarget::of_args(args), None, "{args:?}");
        }
        assert!(!branch_name(&"a".repeat(MAX_BRANCH_CHARS + 1)));
        assert!(branch_name(&"a".repeat(MAX_BRANCH_CHARS)));
    }

    #[test]
    fn only_found_changes_send_the_review_and_each_other_answer_says_why() {
        let head = ReviewTarget::Head;
        let main = ReviewTarget::Branch("main".into());
        assert_eq!(nothing_to_review(Changes::Found, &head, "/w/p"), None);
        let said = |c, t| nothing_to_review(c, t, "/w/p").expect("nothing to do");
        assert!(said(Changes::None, &head).contains("since the last commit"));
        assert!(said(Changes::None, &main).contains("against `main`"));
        assert!(said(Changes::NoRepository, &head).contains("not in a git repository"));
        assert!(said(Changes::UnknownBranch, &main).contains("`main` names no branch"));
        assert!(said(Changes::NoDisk, &head).contains("web page"));
    }
}
