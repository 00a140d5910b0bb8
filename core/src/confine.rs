//! Where a tool the model called may act, decided on path text alone: the path the model gave,
//! made absolute against the session's project and normalized lexically ([`lexical`]), and the
//! rules a path (once the shell has followed its symlinks) must pass ([`Confinement::check`]):
//! inside the project, inside one of the device's roots when there are any, and covered by no
//! protected entry. Containment is component-wise (`/w/a` does not hold `/w/ab`). Each refusal
//! is a sentence for the model naming the path and the rule.

use std::fmt;

use crate::paths::{self, fold, join_root};

/// An entry of `tools.protected`: tools neither read nor change what it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protected {
    /// A bare name (`.git`): any path with that component, anywhere.
    Name(String),
    /// An absolute path (normalized): that file or directory and everything below it.
    Path(String),
}

impl Protected {
    /// An entry as written in the config, `~` already expanded by the shell: a bare name, or
    /// an absolute path.
    pub fn parse(entry: &str) -> Result<Protected, String> {
        let shown = entry.escape_debug();
        if entry.contains('\0') || entry.is_empty() {
            return Err(format!("`{shown}` is neither a name nor an absolute path"));
        }
        if entry.starts_with('/') {
            let (parts, _) = fold(entry);
            return Ok(Protected::Path(join_root(&parts)));
        }
        if entry.contains('/') || entry == "." || entry == ".." {
            return Err(format!(
                "`{shown}` is neither a bare name (like `.git`) nor an absolute path (like `~/.ssh`)"
            ));
        }
        Ok(Protected::Name(entry.to_string()))
    }

    /// Whether `path` (absolute, normalized) is this entry or below it.
    pub fn covers(&self, path: &str) -> bool {
        match self {
            Protected::Name(name) => path.split('/').any(|part| part == name),
            Protected::Path(prefix) => paths::inside(path, prefix),
        }
    }
}

impl fmt::Display for Protected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protected::Name(s) | Protected::Path(s) => f.write_str(s),
        }
    }
}

/// `given`, a path as the model wrote it (relative to `project`, or absolute), made absolute
/// and normalized: `.`, `//` dropped, `..` taken back. An empty path, a NUL byte, a `..` above
/// `/` and a project that is not absolute are refused.
pub fn lexical(given: &str, project: &str) -> Result<String, String> {
    if given.is_empty() {
        return Err("an empty path names no file".into());
    }
    if given.contains('\0') {
        return Err(format!(
            "`{}` holds a NUL byte, which no path can",
            given.escape_debug()
        ));
    }
    if !project.starts_with('/') || project.contains('\0') {
        return Err(format!(
            "the session's project `{}` is not an absolute path",
            project.escape_debug()
        ));
    }
    let joined;
    let absolute = if given.starts_with('/') {
        given
    } else {
        joined = format!("{project}/{given}");
        &joined
    };
    let (parts, above) = fold(absolute);
    if above {
        return Err(format!("`{given}` goes above `/`"));
    }
    Ok(join_root(&parts))
}

/// The places one session's tools may act.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    /// The session's directory (absolute, normalized; the shell's is symlink-free).
    pub project: String,
    /// The device's `remote.roots` for a session under the limits; empty: no such bound.
    pub roots: Vec<String>,
    pub protected: Vec<Protected>,
}

impl Confinement {
    /// Whether a tool may act on `path` (absolute, normalized, symlinks followed), which the
    /// model named `given`.
    pub fn check(&self, given: &str, path: &str) -> Result<(), String> {
        if !paths::inside(path, &self.project) {
            return Err(format!(
                "{} outside the session's project `{}`",
                self.subject(given, path),
                self.project
            ));
        }
        if !self.roots.is_empty() && paths::within(path, &self.roots).is_none() {
            return Err(format!(
                "{} outside the device's roots (remote.roots: {})",
                self.subject(given, path),
                quoted_list(&self.roots)
            ));
        }
        self.unprotected(given, path)
    }

    /// Whether no protected entry covers `path` (absolute, normalized), which the model named
    /// `given`. [`Confinement::check`] asks it too; a shell also asks it of a path before its
    /// symlinks are followed, so a protected name is refused whatever it points to.
    pub fn unprotected(&self, given: &str, path: &str) -> Result<(), String> {
        match self.protected.iter().find(|p| p.covers(path)) {
            Some(entry) => Err(format!(
                "{} protected (tools.protected: `{entry}`): tools do not touch it",
                self.subject(given, path)
            )),
            None => Ok(()),
        }
    }

    /// "`x` is", or, when symlinks took `given` elsewhere, "`x` leads to `/p`, which is".
    fn subject(&self, given: &str, path: &str) -> String {
        match lexical(given, &self.project) {
            Ok(plain) if plain == path => format!("`{given}` is"),
            _ => format!("`{given}` leads to `{path}`, which is"),
        }
    }
}

fn quoted_list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement(roots: &[&str], protected: &[&str]) -> Confinement {
        Confinement {
            project: "/w/p".into(),
            roots: roots.iter().map(|s| s.to_string()).collect(),
            protected: protected
                .iter()
                .map(|s| Protected::parse(s).unwrap())
                .collect(),
        }
    }

    #[test]
    fn a_path_is_made_absolute_and_normalized() {
        assert_eq!(lexical("a/./b//c", "/w/p").as_deref(), Ok("/w/p/a/b/c"));
        assert_eq!(lexical("./a/../b", "/w/p").as_deref(), Ok("/w/p/b"));
        assert_eq!(lexical(".", "/w/p").as_deref(), Ok("/w/p"));
        assert_eq!(lexical("../q/x", "/w/p").as_deref(), Ok("/w/q/x"));
        assert_eq!(
            lexical("//etc///passwd", "/w/p").as_deref(),
            Ok("/etc/passwd")
        );
        assert_eq!(lexical("/w/p/", "/w/p").as_deref(), Ok("/w/p"));
        assert_eq!(lexical("é/ü", "/w/p").as_deref(), Ok("/w/p/é/ü"));
        assert_eq!(lexical("/..", "/w/p"), Err("`/..` goes above `/`".into()));
        assert_eq!(
            lexical("../../../x", "/w/p"),
            Err("`../../../x` goes above `/`".into())
        );
        assert_eq!(
            lexical("", "/w/p"),
            Err("an empty path names no file".into())
        );
        assert_eq!(
            lexical("a\0b", "/w/p"),
            Err("`a\\0b` holds a NUL byte, which no path can".into())
        );
        assert!(lexical("a", "w/p")
            .unwrap_err()
            .contains("not an absolute path"));
    }

    #[test]
    fn containment_is_by_component_never_by_prefix() {
        let c = Confinement {
            project: "/w/a".into(),
            ..confinement(&[], &[])
        };
        assert_eq!(c.check("x", "/w/a/x"), Ok(()));
        assert_eq!(c.check(".", "/w/a"), Ok(()));
        assert_eq!(
            c.check("../ab/x", "/w/ab/x"),
            Err("`../ab/x` is outside the session's project `/w/a`".into())
        );
        assert_eq!(
            c.check("/w/ab", "/w/ab"),
            Err("`/w/ab` is outside the session's project `/w/a`".into())
        );
    }

    #[test]
    fn a_symlink_that_leads_out_is_named_with_where_it_leads() {
        let c = confinement(&[], &[]);
        assert_eq!(
            c.check("link/x", "/elsewhere/x"),
            Err(
                "`link/x` leads to `/elsewhere/x`, which is outside the session's project `/w/p`"
                    .into()
            )
        );
    }

    #[test]
    fn roots_bound_a_session_under_the_limits() {
        let c = Confinement {
            project: "/".into(),
            ..confinement(&["/w/p", "/srv/data"], &[])
        };
        assert_eq!(c.check("/srv/data/x", "/srv/data/x"), Ok(()));
        assert_eq!(
            c.check("/srv/database", "/srv/database"),
            Err(
                "`/srv/database` is outside the device's roots (remote.roots: `/w/p`, \
                 `/srv/data`)"
                    .into()
            )
        );
        // No roots: only the project bounds it.
        assert_eq!(confinement(&[], &[]).check("/w/p/x", "/w/p/x"), Ok(()));
    }

    #[test]
    fn protected_names_match_anywhere_and_paths_below_themselves() {
        let c = confinement(&[], &[".git", "/home/u/.ssh", "/w/p/secret.txt"]);
        assert_eq!(
            c.check(".git/config", "/w/p/.git/config"),
            Err(
                "`.git/config` is protected (tools.protected: `.git`): tools do not touch it"
                    .into()
            )
        );
        assert!(c.check("sub/.git", "/w/p/sub/.git").is_err());
        assert_eq!(c.check(".github/x", "/w/p/.github/x"), Ok(()));
        assert_eq!(c.check("x.git", "/w/p/x.git"), Ok(()));
        assert!(c.check("secret.txt", "/w/p/secret.txt").is_err());
        assert_eq!(c.check("secret.txt2", "/w/p/secret.txt2"), Ok(()));
        let home = Confinement {
            project: "/home/u".into(),
            ..c.clone()
        };
        assert!(home.check(".ssh/id", "/home/u/.ssh/id").is_err());
        assert!(home.check(".ssh", "/home/u/.ssh").is_err());
        assert_eq!(home.check(".sshx", "/home/u/.sshx"), Ok(()));
        // Before its symlinks are followed: a protected name is refused whatever it points to.
        assert!(c.unprotected("a/.git", "/w/p/a/.git").is_err());
    }

    #[test]
    fn protected_entries_are_names_or_absolute_paths() {
        assert_eq!(Protected::parse(".git"), Ok(Protected::Name(".git".into())));
        assert_eq!(
            Protected::parse("/home/u//.ssh/"),
            Ok(Protected::Path("/home/u/.ssh".into()))
        );
        for bad in ["", "a/b", "..", ".", "~/.ssh", "a\0"] {
            assert!(Protected::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Protected::parse("/a/../b").unwrap().to_string(), "/b");
    }
}
