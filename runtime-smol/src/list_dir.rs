//! `Effect::ListDirectory` performed on the disk: a directory's subdirectories (symlinks to
//! directories included, hidden ones too), the first `max` by name kept in a bounded heap so a
//! huge directory costs a scan and no more memory than the bound, each resolved to its real
//! path. The core judges what is found (roots, trust); nothing here decides confinement.

use std::collections::BinaryHeap;
use std::path::Path;

use lembas_core::device::{ListedDir, Listing};

/// List `path`'s subdirectories: the first `max` by name, and how many there are.
pub fn list_directory(path: &str, max: usize) -> Result<Listing, String> {
    let real = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
    if !real.is_dir() {
        return Err("not a directory".into());
    }
    let real_text = real
        .to_str()
        .ok_or_else(|| "not UTF-8".to_string())?
        .to_string();
    // A max-heap of the smallest names seen: past `max`, the largest is dropped.
    let mut kept: BinaryHeap<String> = BinaryHeap::new();
    let mut total = 0u64;
    for entry in std::fs::read_dir(&real).map_err(|e| e.to_string())? {
        let Ok(entry) = entry else { continue };
        // A name that is not UTF-8 cannot be said in JSON, nor given to `session/new`.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !is_directory(&entry) {
            continue;
        }
        total += 1;
        kept.push(name);
        if kept.len() > max {
            kept.pop();
        }
    }
    let dirs = kept
        .into_sorted_vec()
        .into_iter()
        .map(|name| {
            let real = resolve(&real.join(&name));
            ListedDir { name, real }
        })
        .collect();
    Ok(Listing {
        path: real_text,
        dirs,
        total,
    })
}

/// A directory, or a symlink that leads to one.
fn is_directory(entry: &std::fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(t) if t.is_dir() => true,
        Ok(t) if t.is_symlink() => std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()),
        _ => false,
    }
}

/// `path` with symlinks followed, as text.
fn resolve(path: &Path) -> Result<String, String> {
    std::fs::canonicalize(path)
        .map_err(|e| e.to_string())?
        .into_os_string()
        .into_string()
        .map_err(|_| "its real path is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_by_name_and_counts_the_rest() {
        let dir = std::env::temp_dir().join(format!("lembas-list-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for name in ["c", "a", ".hidden", "b"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        std::fs::write(dir.join("file"), "x").unwrap();
        let listing = list_directory(dir.to_str().unwrap(), 2).unwrap();
        let names: Vec<&str> = listing.dirs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, [".hidden", "a"]);
        assert_eq!(listing.total, 4, "the file is not a directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
