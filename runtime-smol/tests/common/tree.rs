//! Random trees on disk for the confinement properties (`confine_property`,
//! `directories_property`, `mentions_property`): directories, or files, made under paths already
//! made, and symlinks to targets each test chooses. Everything is drawn from the seed's `Rng`,
//! in a fixed order, so a seed names one tree.
#![allow(dead_code)]

use std::path::PathBuf;

use lembas_core::rng::Rng;

/// One of `items`, drawn from `rng`.
pub fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

/// `name` under `parent` (`""`: the top), `/`-separated.
pub fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// A symlink whose target is this is made to its own name (a loop).
pub const LOOP_SELF: &str = "loop-self";

/// A tree being made under `base`: the paths made in it, relative to it (`""` is `base`).
pub struct Tree {
    pub base: PathBuf,
    pub names: Vec<String>,
}

impl Tree {
    /// `base`, with `names` already made in it.
    pub fn new(base: PathBuf, names: Vec<String>) -> Tree {
        Tree { base, names }
    }

    /// `count` entries, each under a directory already made ([`Tree::pick_dir`]), named from
    /// `names`: a directory, or with `files` (a file's text), a directory or a file at even odds
    /// (the `i`-th named `<name>.<i>.md`). Each made is a name too; a directory made twice, once.
    pub fn grow(&mut self, rng: &mut Rng, count: u64, names: &[&str], files: Option<&str>) {
        for i in 0..count {
            let parent = self.pick_dir(rng);
            let rel = join(&parent, pick::<&str>(rng, names));
            if files.is_none() || rng.below(2) == 0 {
                let made = std::fs::create_dir_all(self.base.join(&rel)).is_ok();
                if made && !self.names.contains(&rel) {
                    self.names.push(rel);
                }
            } else if let Some(text) = files {
                let file = format!("{rel}.{i}.md");
                if std::fs::write(self.base.join(&file), text).is_ok() {
                    self.names.push(file);
                }
            }
        }
    }

    /// `count` symlinks `link0`, `link1`, …, each at the top, or `nested` under a directory
    /// already made ([`Tree::pick_dir`]): a third to a path already made (absolute), the others
    /// to one of `targets` ([`LOOP_SELF`]: to the link's own name). Each made is a name too.
    pub fn link(&mut self, rng: &mut Rng, count: u64, targets: &[String], nested: bool) {
        for i in 0..count {
            let link = format!("link{i}");
            let rel = if nested {
                join(&self.pick_dir(rng), &link)
            } else {
                link.clone()
            };
            let target = if rng.below(3) == 0 {
                let inside = self.base.join(pick(rng, &self.names));
                inside.to_str().unwrap().to_string()
            } else {
                match pick(rng, targets).as_str() {
                    LOOP_SELF => link,
                    t => t.to_string(),
                }
            };
            if std::os::unix::fs::symlink(&target, self.base.join(&rel)).is_ok() {
                self.names.push(rel);
            }
        }
    }

    /// One of the names that is a directory reached from `base` with no symlink on the way:
    /// what is made under it stays in the tree. Under a link it might not (`..`, `/`): CI runs
    /// as root, and links made under links were found in `/` and `/tmp`.
    fn pick_dir(&self, rng: &mut Rng) -> String {
        let dirs: Vec<&String> = self.names.iter().filter(|n| self.is_real_dir(n)).collect();
        pick(rng, &dirs).to_string()
    }

    /// Whether `name` is a directory under `base` with no symlink on the way to it.
    fn is_real_dir(&self, name: &str) -> bool {
        let mut path = self.base.clone();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            path.push(part);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => {}
                _ => return false,
            }
        }
        true
    }
}
