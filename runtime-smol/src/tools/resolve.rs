//! Where a path the model gave really leads: made absolute and normalized by the core, then
//! followed symlink by symlink (like `realpath`, but a missing tail is kept as written, so a
//! file to be created resolves through its existing parents), then checked with the core's
//! rules against the resolved project and roots.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use lembas_core::confine::{self, Confinement};
use lembas_core::engine_io::ToolRequest;

use super::ToolSettings;

/// How many symlinks one path may pass through (Linux's own bound).
const MAX_SYMLINKS: usize = 40;

/// A path a tool may act on, and the rules it passed.
#[derive(Clone, Debug)]
pub struct Confined {
    /// Resolved: the op acts on this path and no other.
    pub path: PathBuf,
    /// The session's project, resolved.
    pub project: PathBuf,
    pub rules: Confinement,
}

impl Confined {
    /// `path` as the model is shown it: relative to the project (`.` for the project itself),
    /// else absolute.
    pub fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.project) {
            Ok(rest) if rest.as_os_str().is_empty() => ".".into(),
            Ok(rest) => rest.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// Whether a path met inside [`Confined::path`] (a walk's entry, resolved by construction
    /// when the walk follows no symlink) passes the rules too: a protected entry does not.
    pub fn allows(&self, path: &Path) -> bool {
        path.to_str()
            .is_some_and(|p| self.rules.check(p, p).is_ok())
    }
}

/// Resolve `given` for `request` and check it: inside the session's project, inside its roots
/// when it has any, and protected neither as written nor as resolved. The refusal is a
/// sentence for the model.
pub fn confine(
    settings: &ToolSettings,
    request: &ToolRequest,
    given: &str,
) -> Result<Confined, String> {
    confine_in(settings, &request.project, &request.roots, given)
}

/// [`confine`] for a session's `project` and `roots` (empty: no bound besides the project).
pub fn confine_in(
    settings: &ToolSettings,
    project: &str,
    request_roots: &[String],
    given: &str,
) -> Result<Confined, String> {
    let project_given = project;
    let project = std::fs::canonicalize(project_given)
        .map_err(|e| format!("the session's project `{project_given}` cannot be resolved: {e}"))?;
    let project_text = utf8(&project, project_given)?;
    // A root that no longer resolves holds nothing.
    let roots = request_roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .filter_map(|r| r.to_str().map(str::to_string))
        .collect::<Vec<_>>();
    if !request_roots.is_empty() && roots.is_empty() {
        return Err(format!(
            "none of the device's roots (remote.roots) resolves, so `{given}` is outside them"
        ));
    }
    let rules = Confinement {
        project: project_text.to_string(),
        roots,
        protected: settings.protected.clone(),
    };
    let lexical = confine::lexical(given, project_text)?;
    rules.unprotected(given, &lexical)?;
    let path = real_path(Path::new(&lexical)).map_err(|e| format!("`{given}`: {e}"))?;
    rules.check(given, utf8(&path, given)?)?;
    Ok(Confined {
        path,
        project,
        rules,
    })
}

fn utf8<'a>(path: &'a Path, given: &str) -> Result<&'a str, String> {
    path.to_str()
        .ok_or_else(|| format!("`{given}` leads to a path that is not UTF-8"))
}

/// `path` (absolute) with every symlink followed, component by component; components past
/// the first missing one are kept as written (`..` among them taken back lexically, as nothing
/// there can be a symlink). A loop or more than [`MAX_SYMLINKS`] hops fails.
pub fn real_path(path: &Path) -> io::Result<PathBuf> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an absolute path",
        ));
    }
    let mut pending: VecDeque<OsString> = components(path);
    let mut real = PathBuf::from("/");
    let mut hops = 0;
    let mut missing = false;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            real.pop();
            continue;
        }
        let next = real.join(&part);
        if !missing {
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    hops += 1;
                    if hops > MAX_SYMLINKS {
                        return Err(io::Error::other(format!(
                            "more than {MAX_SYMLINKS} symlinks (a loop?)"
                        )));
                    }
                    let target = std::fs::read_link(&next)?;
                    if target.is_absolute() {
                        real = PathBuf::from("/");
                    }
                    for (i, c) in components(&target).into_iter().enumerate() {
                        pending.insert(i, c);
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing = true,
                Err(e) => return Err(e),
            }
        }
        real = next;
    }
    Ok(real)
}

/// The named parts of `path` and its `..`s, in order (`/` and `.` dropped).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}
