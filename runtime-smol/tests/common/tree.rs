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

    /// `count` entries, each under a path already made (picked), named from `names`: a
    /// directory, or with `files` (a file's text), a directory or a file at even odds (the
    /// `i`-th named `<name>.<i>.md`). Each made is a name too; a directory made twice, once.
    pub fn grow(&mut self, rng: &mut Rng, count: u64, names: &[&str], files: Option<&str>) {
        for i in 0..count {
            let parent = pick(rng, &self.names).clone();
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

    /// `count` symlinks `link0`, `link1`, …, each at the top, or `nested` under a path already
    /// made (picked): a third to a path already made (absolute), the others to one of
    /// `targets` ([`LOOP_SELF`]: to the link's own name). Each made is a name too.
    pub fn link(&mut self, rng: &mut Rng, count: u64, targets: &[String], nested: bool) {
        for i in 0..count {
            let link = format!("link{i}");
            let rel = if nested {
                join(pick(rng, &self.names).as_str(), &link)
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
}
