//! `_lembas/directories`: the folder chooser's view of the device. Without a path, the remote
//! roots and the trusted directories inside them, each resolved by the shell in turn
//! (`Effect::ResolvePath`: a trusted directory may have become a symlink since the settings
//! were read); with one, that directory's subdirectories, listed by the shell
//! (`Effect::ListDirectory`, symlinks followed). Each is judged here. Each `Dir`
//! says what `session/new` would say of it: `accepted` and, when not, its refusal sentence.
//!
//! Confinement: nothing is asked of the shell for a path outside the roots (lexically), and a
//! directory whose real path leads outside them is refused with nothing listed. An entry that
//! is a symlink leading outside is listed as not accepted, its target not named, so no answer
//! names anything outside the roots. Hidden directories are listed like any other: the spec
//! lists a directory's entries with no filter, and `session/new` accepts a hidden folder.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{ConnId, ConnKind, Device, Effect};
use crate::config::Remote;
use crate::jsonrpc::{Id, RpcError};
use crate::paths;

/// `_lembas/directories`' params.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DirectoriesParams {
    path: Option<String>,
}

/// A shell's listing of one directory (the answer to `Effect::ListDirectory`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Listing {
    /// The directory itself, symlinks followed.
    pub path: String,
    /// Its subdirectories (symlinks to directories included), at most the bound asked for:
    /// the first by name.
    pub dirs: Vec<ListedDir>,
    /// How many subdirectories it has in all: more than `dirs` holds when they were cut.
    pub total: u64,
}

/// One subdirectory as the shell found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListedDir {
    /// Its name in the directory (one path segment).
    pub name: String,
    /// Its real path (symlinks followed), or why it could not be resolved.
    #[serde(flatten, with = "real_or_error")]
    pub real: Result<String, String>,
}

/// `{ real }` or `{ error }`.
mod real_or_error {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Shape {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        real: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    }

    pub fn serialize<S: Serializer>(r: &Result<String, String>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Ok(real) => Shape {
                real: Some(real.clone()),
                error: None,
            },
            Err(error) => Shape {
                real: None,
                error: Some(error.clone()),
            },
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Result<String, String>, D::Error> {
        let shape = Shape::deserialize(d)?;
        match (shape.real, shape.error) {
            (Some(real), None) => Ok(Ok(real)),
            (None, Some(error)) => Ok(Err(error)),
            _ => Err(serde::de::Error::custom("real or error (exactly one)")),
        }
    }
}

/// A listing asked of the shell, waiting for its answer.
#[derive(Debug)]
pub(crate) struct PendingListing {
    pub conn: ConnId,
    id: Id,
    /// The path asked for, normalized.
    asked: String,
}

/// The places being resolved one after the other, with what each resolved to so far.
#[derive(Debug)]
pub(crate) struct PendingPlaces {
    pub conn: ConnId,
    id: Id,
    places: Vec<String>,
    resolved: Vec<Result<String, String>>,
}

/// One `Dir` of an answer.
#[derive(Debug, Serialize)]
struct Dir {
    path: String,
    name: String,
    accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl Dir {
    fn new(path: String, refused: Result<(), RpcError>) -> Dir {
        let name = path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("/");
        Dir {
            name: name.to_string(),
            accepted: refused.is_ok(),
            reason: refused.err().map(|e| e.message),
            path,
        }
    }
}

/// What `_lembas/directories` asks for.
#[derive(Debug, PartialEq)]
enum Asked {
    /// No path: the places, each to be resolved by the shell.
    Places(Vec<String>),
    /// A directory's subdirectories: its path, normalized, inside the roots (lexically).
    Listing(String),
}

impl DirectoriesParams {
    /// What is asked, under the limits of this moment: remote work on and some roots, and a
    /// path given absolute and inside the roots; else -32602 naming the rule.
    fn asked(self, remote: &Remote) -> Result<Asked, RpcError> {
        super::limits::remote_work_allowed(remote)?;
        let Some(path) = self.path.filter(|p| !p.is_empty()) else {
            return Ok(Asked::Places(places(remote)));
        };
        let asked = paths::normalize(&path).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "path `{}` is not an absolute path",
                path.escape_debug()
            ))
        })?;
        super::limits::check_roots(remote, &asked)?;
        Ok(Asked::Listing(asked))
    }
}

impl PendingPlaces {
    /// The place to resolve next (there is one until every place is resolved).
    fn next(&self) -> &str {
        &self.places[self.resolved.len()]
    }

    /// The next place resolved to `resolved`: whether that was the last.
    fn resolved(&mut self, resolved: Result<String, String>) -> bool {
        self.resolved.push(resolved);
        self.resolved.len() == self.places.len()
    }

    /// The answer once every place is resolved, each judged under the limits of this moment.
    fn answer(self, remote: &Remote) -> Result<Value, RpcError> {
        super::limits::remote_work_allowed(remote)?;
        let places: Vec<Dir> = self
            .places
            .into_iter()
            .zip(self.resolved)
            .map(|(path, real)| {
                let refused = would_accept(remote, &path, real);
                Dir::new(path, refused)
            })
            .collect();
        Ok(json!({ "path": "", "places": places }))
    }
}

impl Device {
    /// `_lembas/directories`: the places at once, or a listing asked of the shell (answered
    /// in [`Device::directory_listed`]).
    pub(super) fn directories(
        &mut self,
        conn: ConnId,
        id: &Id,
        params: DirectoriesParams,
    ) -> Result<Option<Value>, RpcError> {
        if self.conns[&conn].kind != ConnKind::Link {
            return Err(RpcError::invalid_params(
                "directories are listed only over the instance link",
            ));
        }
        let remote = &self.config.remote;
        match params.asked(remote)? {
            Asked::Places(places) => self.resolve_next_place(PendingPlaces {
                conn,
                id: id.clone(),
                places,
                resolved: Vec::new(),
            }),
            Asked::Listing(asked) => {
                let max_entries = remote.max_directory_entries;
                let request = self
                    .resolving
                    .ask(super::resolving::Resolving::Directory(Box::new(
                        PendingListing {
                            conn,
                            id: id.clone(),
                            asked: asked.clone(),
                        },
                    )));
                self.out.effect(Effect::ListDirectory {
                    request,
                    path: asked,
                    max_entries,
                });
            }
        }
        Ok(None)
    }

    /// Ask the shell to resolve the next place.
    fn resolve_next_place(&mut self, pending: PendingPlaces) {
        let path = pending.next().to_string();
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Places(Box::new(pending)));
        self.out.resolve_path(request, path);
    }

    /// A place resolved: the next is asked for, or, the last, the places are answered.
    pub(super) fn place_resolved(
        &mut self,
        mut pending: PendingPlaces,
        resolved: Result<String, String>,
    ) {
        if !self.conns.contains_key(&pending.conn) {
            return;
        }
        if !pending.resolved(resolved) {
            return self.resolve_next_place(pending);
        }
        let (conn, id) = (pending.conn, pending.id.clone());
        let answer = pending.answer(&self.config.remote);
        self.reply(conn, &id, answer);
    }

    /// The shell listed a directory it was asked to: the answer, judged under the limits of
    /// this moment.
    pub(super) fn directory_listed(
        &mut self,
        pending: PendingListing,
        listed: Result<Listing, String>,
    ) {
        if !self.conns.contains_key(&pending.conn) {
            return;
        }
        let answer = answer_listing(&self.config.remote, &pending.asked, listed);
        self.reply(pending.conn, &pending.id, answer);
    }
}

/// The roots, then the trusted directories inside them, each once.
fn places(remote: &Remote) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let inside_roots = |t: &&String| paths::within(t, &remote.roots).is_some();
    for path in remote
        .roots
        .iter()
        .chain(remote.trusted.iter().filter(inside_roots))
    {
        if !seen.contains(&path.as_str()) {
            seen.push(path);
        }
    }
    seen.into_iter().map(str::to_string).collect()
}

/// A listing made into the method's answer, or the refusal.
fn answer_listing(
    remote: &Remote,
    asked: &str,
    listed: Result<Listing, String>,
) -> Result<Value, RpcError> {
    super::limits::remote_work_allowed(remote)?;
    let listing = listed
        .map_err(|why| RpcError::invalid_params(format!("`{asked}` cannot be listed: {why}")))?;
    let real = paths::normalize(&listing.path)
        .ok_or_else(|| RpcError::invalid_params(format!("`{asked}` did not resolve")))?;
    if paths::within(&real, &remote.roots).is_none() {
        // Its target is not named: it is outside.
        return Err(leads_outside(remote, asked));
    }
    let max = remote.max_directory_entries;
    let mut entries: Vec<Dir> = listing
        .dirs
        .into_iter()
        .filter(|d| is_one_segment(&d.name))
        .map(|d| {
            let path = format!("{}/{}", real.trim_end_matches('/'), d.name);
            let refused = would_accept(remote, &path, d.real);
            Dir::new(path, refused)
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.dedup_by(|a, b| a.name == b.name);
    let total = listing.total.max(entries.len() as u64);
    entries.truncate(max);
    let error = (total > entries.len() as u64).then(|| {
        format!(
            "showing the first {} of {total} directories (remote.max_directory_entries is {max})",
            entries.len()
        )
    });
    let parent = real
        .rsplit_once('/')
        .map(|(p, _)| if p.is_empty() { "/" } else { p })
        .filter(|p| *p != real && paths::within(p, &remote.roots).is_some());
    let this = Dir::new(
        real.clone(),
        super::limits::check_directory(remote, &real).map(drop),
    );
    let mut result = json!({
        "path": this.path,
        "name": this.name,
        "accepted": this.accepted,
        "parent": parent,
        "entries": entries,
    });
    if let Some(reason) = this.reason {
        result["reason"] = reason.into();
    }
    if let Some(error) = error {
        result["error"] = error.into();
    }
    Ok(result)
}

/// Whether `session/new` would accept `path`, whose real path the shell found to be `real`:
/// `Ok`, or its refusal. Its rules in its order: inside the roots as written, resolved, and
/// the real path inside the roots and trusted.
fn would_accept(remote: &Remote, path: &str, real: Result<String, String>) -> Result<(), RpcError> {
    super::limits::check_roots(remote, path)?;
    let real =
        real.map_err(|why| RpcError::invalid_params(format!("`{path}` cannot be used: {why}")))?;
    let real = paths::normalize(&real)
        .ok_or_else(|| RpcError::invalid_params(format!("`{path}` did not resolve")))?;
    if paths::within(&real, &remote.roots).is_none() {
        return Err(leads_outside(remote, path));
    }
    super::limits::check_directory(remote, &real).map(drop)
}

/// The refusal of a path whose real path is outside the roots, not naming where it leads.
fn leads_outside(remote: &Remote, path: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "`{path}` leads outside the device's roots ({}) through a symlink",
        remote.roots.join(", ")
    ))
}

/// A name a directory entry can have: one segment, not `.` or `..`.
fn is_one_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(remote: &Remote, path: Option<&str>) -> Result<Asked, RpcError> {
        DirectoriesParams {
            path: path.map(str::to_string),
        }
        .asked(remote)
    }

    #[test]
    fn a_request_asks_for_the_places_or_one_directory_inside_the_roots() {
        let mut remote = Remote::open(&["/w", "/v"]);
        remote.trusted = vec!["/w/t".into(), "/elsewhere".into(), "/v".into()];
        let places = Asked::Places(vec!["/w".into(), "/v".into(), "/w/t".into()]);
        assert_eq!(asked(&remote, None), Ok(places));
        assert!(matches!(asked(&remote, Some("")), Ok(Asked::Places(_))));
        assert_eq!(
            asked(&remote, Some("/w/./p/")),
            Ok(Asked::Listing("/w/p".into()))
        );
        let relative = asked(&remote, Some("p\t")).unwrap_err();
        assert_eq!(relative.message, "path `p\\t` is not an absolute path");
        let outside = asked(&remote, Some("/etc")).unwrap_err();
        assert_eq!(
            outside.message,
            "`/etc` is outside the device's roots (/w, /v)"
        );
        remote.enabled = false;
        let off = asked(&remote, None).unwrap_err();
        assert_eq!(
            off.message,
            "remote work is off on this device (remote.enabled is false)"
        );
    }

    #[test]
    fn places_are_resolved_one_after_the_other_then_judged_under_the_limits_of_that_moment() {
        let mut pending = PendingPlaces {
            conn: ConnId(1),
            id: Id::number(1),
            places: vec!["/w".into(), "/w/t".into()],
            resolved: Vec::new(),
        };
        assert_eq!(pending.next(), "/w");
        assert!(!pending.resolved(Ok("/w".into())));
        assert_eq!(pending.next(), "/w/t");
        assert!(pending.resolved(Err("gone".into())));
        let remote = Remote::open(&["/w"]);
        let answer = PendingPlaces {
            places: pending.places.clone(),
            resolved: pending.resolved.clone(),
            conn: pending.conn,
            id: pending.id.clone(),
        }
        .answer(&remote);
        assert_eq!(
            answer,
            Ok(json!({ "path": "", "places": [
                { "path": "/w", "name": "w", "accepted": true },
                { "path": "/w/t", "name": "t", "accepted": false,
                  "reason": "`/w/t` cannot be used: gone" },
            ] }))
        );
        let off = pending.answer(&Remote::default()).unwrap_err();
        assert_eq!(
            off.message,
            "remote work is off on this device (remote.enabled is false)"
        );
    }
}
