//! `Effect::ReadMentions` performed on the disk: each `@path` of a prompt resolved (symlinks
//! followed) and confined with the tools' own rules ([`crate::tools::confine_in`]: inside the
//! session's project, inside its roots when it has any, protected neither as written nor as
//! resolved) before a byte of it is read; then a file's bytes (its lines when a range is asked,
//! at most the bound) or a directory's entries (the first by name, in a bounded heap, entries
//! the rules forbid left out). What is not confined is refused with the tools' sentence and
//! never opened.

use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, Read};

use lembas_core::mentions::{self, Mention, MentionRead};

use crate::tools::{confine_in, text_file, Confined, ToolSettings};

/// Read `mentions` for a session at `project` confined to `roots` (empty: the project alone).
pub fn read_mentions(
    settings: &ToolSettings,
    project: &str,
    roots: &[String],
    mentions: &[Mention],
    max_bytes: u64,
    max_entries: usize,
) -> Vec<MentionRead> {
    mentions
        .iter()
        .map(|m| {
            read_one(settings, project, roots, m, max_bytes, max_entries)
                .unwrap_or_else(|reason| MentionRead::Refused { reason })
        })
        .collect()
}

fn read_one(
    settings: &ToolSettings,
    project: &str,
    roots: &[String],
    m: &Mention,
    max_bytes: u64,
    max_entries: usize,
) -> Result<MentionRead, String> {
    let given = m.path.as_str();
    // The person is told a mention is not attached, never where a symlink leads.
    let place = confine_in(settings, project, roots, given).map_err(|why| {
        if why.contains(" leads to `") {
            format!(
                "`{given}` leads outside the session's project or the device's roots, or to a \
                 protected path"
            )
        } else {
            why
        }
    })?;
    let real = place
        .path
        .to_str()
        .ok_or_else(|| format!("`{given}` leads to a path that is not UTF-8"))?
        .to_string();
    let meta =
        std::fs::metadata(&place.path).map_err(|e| format!("`{given}` cannot be read: {e}"))?;
    if meta.is_dir() {
        return list(&place, real, given, max_entries);
    }
    let (file, meta) = text_file::open(&place.path, given)?;
    let failed = |e: std::io::Error| format!("`{given}` cannot be read: {e}");
    let cap = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let Some((first, last)) = m.lines else {
        let mut bytes = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(failed)?;
        return Ok(MentionRead::File {
            real,
            text: mentions::is_text(&bytes),
            bytes,
            size: meta.len(),
            lines_total: None,
        });
    };
    // Lines `first..=last`, at most `cap` bytes of them kept; every line counted.
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut bytes = Vec::new();
    let mut size = 0u64;
    let mut number = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        // A line is read in pieces of at most 64 KiB, so a huge one costs no more memory.
        let n = (&mut reader)
            .take(64 * 1024)
            .read_until(b'\n', &mut line)
            .map_err(failed)?;
        if n == 0 {
            break;
        }
        let ends = line.last() == Some(&b'\n');
        if (first..=last).contains(&(number + 1)) {
            size += n as u64;
            let room = cap.saturating_sub(bytes.len());
            bytes.extend_from_slice(&line[..n.min(room)]);
        }
        if ends || n < 64 * 1024 {
            number += 1;
        }
    }
    Ok(MentionRead::File {
        real,
        text: mentions::is_text(&bytes),
        bytes,
        size,
        lines_total: Some(number),
    })
}

/// A directory's entries (a directory's name ending in `/`), the first `max` by name.
fn list(place: &Confined, real: String, given: &str, max: usize) -> Result<MentionRead, String> {
    let entries =
        std::fs::read_dir(&place.path).map_err(|e| format!("`{given}` cannot be listed: {e}"))?;
    let mut kept: BinaryHeap<String> = BinaryHeap::new();
    let mut total = 0u64;
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let Ok(mut name) = entry.file_name().into_string() else {
            continue;
        };
        // What the tools may not touch is not named either (`.git`, a protected path).
        if !place.allows(&entry.path()) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            name.push('/');
        }
        total += 1;
        kept.push(name);
        if kept.len() > max {
            kept.pop();
        }
    }
    Ok(MentionRead::Listing {
        real,
        entries: kept.into_sorted_vec(),
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lembas_core::confine::Protected;

    fn mention(path: &str, lines: Option<(u64, u64)>) -> Mention {
        lembas_core::mentions::find(&format!("@{path}"))
            .pop()
            .map(|mut m| {
                m.lines = lines;
                m
            })
            .unwrap()
    }

    #[test]
    fn reads_inside_and_refuses_outside_protected_and_escaping_links() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("p");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::write(project.join("src/a.rs"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(project.join(".git/config"), "secret").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), project.join("out")).unwrap();
        let settings = ToolSettings {
            protected: vec![Protected::Name(".git".into())],
            shell: "/bin/sh".into(),
            undo: None,
        };
        let project = project.to_str().unwrap();
        let asked = [
            mention("src/a.rs", Some((2, 3))),
            mention("src/", None),
            mention("../outside.txt", None),
            mention("out", None),
            mention(".git/config", None),
            mention("./", None),
        ];
        let read = read_mentions(&settings, project, &[], &asked, 100, 10);
        match &read[0] {
            MentionRead::File {
                bytes, lines_total, ..
            } => {
                assert_eq!(bytes, b"two\nthree\n");
                assert_eq!(*lines_total, Some(3));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&read[1], MentionRead::Listing { entries, .. } if entries == &["a.rs"]),
            "{:?}",
            read[1]
        );
        for r in &read[2..5] {
            assert!(matches!(r, MentionRead::Refused { .. }), "{r:?}");
        }
        assert!(
            matches!(&read[5], MentionRead::Listing { entries, .. }
                if entries == &["out", "src/"]),
            "the protected .git is not named: {:?}",
            read[5]
        );
    }
}
