//! `_lembas/files/search`: the composer's `@` picker. The root is the directory `@path`
//! mentions of the session are read from: its working directory, or a `cwd` judged as
//! `session/new` judges one. The shell answers from its own index of that root
//! (`Effect::SearchFiles`: ignore-aware, fuzzy, nudged by the recent files the core keeps in
//! the store, [`super::frecency`]); the core checks the real root it searched is still inside
//! the roots (and trusted) before answering, and never passes on a path that is not relative
//! and below it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::sessions::unknown_session;
use super::{ConnId, ConnKind, Device, Effect};
use crate::jsonrpc::{self, Id, RpcError};
use crate::paths;

/// `limit` when none is given, and the most one answer holds (the spec's 20 and 50).
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 50;
/// A query longer than this many characters is refused: a picker's query is a few words.
pub const MAX_QUERY_CHARS: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SearchParams {
    session_id: Option<String>,
    cwd: Option<String>,
    query: String,
    limit: Option<u64>,
}

/// What the shell found (the answer to `Effect::SearchFiles`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FoundFiles {
    /// The root searched, symlinks followed.
    pub root: String,
    /// The best matches first, at most the limit asked for.
    pub files: Vec<FoundFile>,
    /// How many entries the root's index holds.
    pub indexed: u64,
    /// The index stopped at its bound (`files.max_indexed_files`): entries past it are not
    /// searched.
    pub truncated: bool,
}

/// One entry found: its path relative to the root, `/`-separated, and its kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoundFile {
    pub path: String,
    /// `file` or `dir`.
    pub kind: String,
}

/// A search asked of the shell, until its answer.
#[derive(Debug)]
pub(crate) struct PendingSearch {
    pub conn: ConnId,
    id: Id,
    /// The root as judged (a session's directory, or the `cwd` given, normalized).
    root: String,
    /// Held to the roots (a link's request, or a session under the limits).
    capped: bool,
    limit: usize,
}

impl SearchParams {
    /// The `limit` given (or the default), and the query checked: at most
    /// [`MAX_QUERY_CHARS`] characters and no NUL; else -32602 naming the bound.
    fn checked_limit(&self) -> Result<usize, RpcError> {
        let limit = match self.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(RpcError::over_limit(
                    format!("`limit` is {n}: it must be 1 to {MAX_LIMIT}"),
                    MAX_LIMIT,
                ))
            }
        };
        let chars = self.query.chars().count();
        if chars > MAX_QUERY_CHARS || self.query.contains('\0') {
            return Err(RpcError::invalid_params(format!(
                "`query` is {chars} characters: at most {MAX_QUERY_CHARS}, and no NUL"
            )));
        }
        Ok(limit)
    }
}

/// Where a `{ sessionId | cwd }` request works, as given: a session's directory, or a `cwd`
/// (normalized).
#[derive(Debug, PartialEq)]
enum Where {
    Session(String),
    Cwd(String),
}

impl Where {
    /// Exactly one of the two, and a `cwd` absolute; else -32602 saying which rule.
    fn of(session_id: Option<String>, cwd: Option<String>) -> Result<Where, RpcError> {
        match (session_id, cwd) {
            (Some(session), None) => Ok(Where::Session(session)),
            (None, Some(cwd)) => paths::normalize(&cwd).map(Where::Cwd).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "cwd `{}` is not an absolute path",
                    cwd.escape_debug()
                ))
            }),
            _ => Err(RpcError::invalid_params(
                "give exactly one of `sessionId` and `cwd`",
            )),
        }
    }
}

impl Device {
    /// `_lembas/files/search`: checked, then asked of the shell (answered in
    /// [`Device::files_found`]).
    pub(super) fn files_search(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: SearchParams,
    ) -> Result<(), RpcError> {
        let limit = p.checked_limit()?;
        let (root, capped) = self.root_of(conn, p.session_id, p.cwd)?;
        let roots = if capped {
            self.config.remote.roots.clone()
        } else {
            Vec::new()
        };
        let recent = self.frecency.under(&root, self.clock.now().0, limit);
        let request = self.searches.ask(PendingSearch {
            conn,
            id: id.clone(),
            root: root.clone(),
            capped,
            limit,
        });
        self.out.effect(Effect::SearchFiles {
            request,
            root,
            roots,
            query: p.query,
            limit,
            recent,
        });
        Ok(())
    }

    /// The directory a `{ sessionId | cwd }` request works in, and whether it is held to the
    /// roots (a link's request, or a session under the limits): a session's directory, or a
    /// `cwd` judged as `session/new` judges one (lexically here; the shell's answer is judged
    /// again once symlinks are followed).
    pub(super) fn root_of(
        &mut self,
        conn: ConnId,
        session_id: Option<String>,
        cwd: Option<String>,
    ) -> Result<(String, bool), RpcError> {
        let on_link = self.conns[&conn].kind == ConnKind::Link;
        let (root, capped) = match Where::of(session_id, cwd)? {
            Where::Session(session) => {
                let s = self
                    .sessions
                    .touch(&session)
                    .ok_or_else(|| unknown_session(&session))?;
                (s.durable.cwd.clone(), s.capped || on_link)
            }
            Where::Cwd(root) => (root, on_link),
        };
        if capped {
            super::limits::check_directory(&self.config.remote, &root)?;
        }
        Ok((root, capped))
    }

    /// The shell searched a root (`Effect::SearchFiles`), or could not.
    pub fn handle_files_found(
        &mut self,
        request: u64,
        found: Result<FoundFiles, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        if let Some(pending) = self.searches.answered(request) {
            self.files_found(pending, found);
        }
        self.after_input();
    }

    fn files_found(&mut self, p: PendingSearch, found: Result<FoundFiles, String>) {
        if !self.conns.contains_key(&p.conn) {
            return;
        }
        match answer(&self.config.remote, &p, found) {
            Ok(result) => self
                .out
                .send(p.conn, jsonrpc::encode_result(&p.id, &result)),
            Err(e) => self.reply_error(p.conn, &p.id, &e),
        }
    }
}

/// The shell's finding made the method's answer, judged under the limits of this moment.
fn answer(
    remote: &crate::config::Remote,
    p: &PendingSearch,
    found: Result<FoundFiles, String>,
) -> Result<Value, RpcError> {
    let found = found.map_err(|why| {
        RpcError::invalid_params(format!("`{}` cannot be searched: {why}", p.root))
    })?;
    judge_real_root(remote, &p.root, &found.root, p.capped)?;
    // Only paths below the root, relative and `/`-separated, as many as asked.
    let files: Vec<&FoundFile> = found
        .files
        .iter()
        .filter(|f| is_relative_below(&f.path) && matches!(f.kind.as_str(), "file" | "dir"))
        .take(p.limit)
        .collect();
    let mut result = json!({ "root": p.root, "files": files });
    if found.truncated {
        result["truncated"] = json!({
            "indexed": found.indexed,
            "reason": format!(
                "the index of `{}` holds its first {} entries (files.max_indexed_files); \
                 the rest are not searched",
                p.root, found.indexed
            ),
        });
    }
    Ok(result)
}

/// The directory `root` resolved by the shell to `real`: still inside the roots and trusted,
/// when held to them.
pub(super) fn judge_real_root(
    remote: &crate::config::Remote,
    root: &str,
    real: &str,
    capped: bool,
) -> Result<(), RpcError> {
    let real = paths::normalize(real)
        .ok_or_else(|| RpcError::invalid_params(format!("`{root}` did not resolve")))?;
    if capped {
        if paths::within(&real, &remote.roots).is_none() {
            // Where it leads is not named: it is outside.
            return Err(RpcError::invalid_params(format!(
                "`{root}` leads outside the device's roots ({}) through a symlink",
                remote.roots.join(", ")
            )));
        }
        super::limits::check_directory(remote, &real)?;
    }
    Ok(())
}

/// A path relative to a root that stays below it: no `..`, `.`, empty or absolute part.
fn is_relative_below(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_paths_below_the_root_pass() {
        for ok in ["a", "a/b.rs", "é/日本.md", ".hidden"] {
            assert!(is_relative_below(ok), "{ok}");
        }
        for bad in ["", "/etc", "../x", "a/../../x", "a//b", "./a", "a/"] {
            assert!(!is_relative_below(bad), "{bad}");
        }
    }

    fn params(query: &str, limit: Option<u64>) -> SearchParams {
        SearchParams {
            session_id: None,
            cwd: None,
            query: query.into(),
            limit,
        }
    }

    #[test]
    fn the_limit_and_the_query_are_checked_naming_their_bounds() {
        assert_eq!(params("a", None).checked_limit(), Ok(DEFAULT_LIMIT));
        assert_eq!(params("a", Some(1)).checked_limit(), Ok(1));
        assert_eq!(params("a", Some(50)).checked_limit(), Ok(MAX_LIMIT));
        for n in [0, 51] {
            let e = params("a", Some(n)).checked_limit().unwrap_err();
            assert_eq!(e.message, format!("`limit` is {n}: it must be 1 to 50"));
            assert_eq!(
                e.data,
                Some(json!({ "limit": 50 })),
                "the bound, as every refusal"
            );
        }
        // Characters, not bytes.
        assert!(params(&"é".repeat(256), None).checked_limit().is_ok());
        let long = params(&"é".repeat(257), None).checked_limit().unwrap_err();
        assert_eq!(
            long.message,
            "`query` is 257 characters: at most 256, and no NUL"
        );
        let nul = params("a\0b", None).checked_limit().unwrap_err();
        assert_eq!(
            nul.message,
            "`query` is 3 characters: at most 256, and no NUL"
        );
    }

    #[test]
    fn a_request_works_in_exactly_one_of_a_session_and_an_absolute_cwd() {
        assert_eq!(
            Where::of(Some("ses_a".into()), None),
            Ok(Where::Session("ses_a".into()))
        );
        assert_eq!(
            Where::of(None, Some("/w/./p/".into())),
            Ok(Where::Cwd("/w/p".into()))
        );
        let relative = Where::of(None, Some("w\n".into())).unwrap_err();
        assert_eq!(relative.message, "cwd `w\\n` is not an absolute path");
        for (s, c) in [
            (None, None),
            (Some("ses_a".to_string()), Some("/w".to_string())),
        ] {
            let e = Where::of(s, c).unwrap_err();
            assert_eq!(e.message, "give exactly one of `sessionId` and `cwd`");
        }
    }
}
