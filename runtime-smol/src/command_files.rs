//! `Effect::ReadCommands` performed on the disk: a session's command files, in the set's order
//! (the project's `.agent/commands/*.md`, the person's `commands/*.md` in the config directory,
//! then the project's `.agent/skills/*/SKILL.md` and the person's `skills/*/SKILL.md`), each
//! place by name. A project's file is a file a cloned repository controls: it is resolved and
//! confined with the tools' own rules ([`crate::tools::confine_in`]: inside the project, inside
//! the roots when there are any, not protected) before a byte of it is read, and one that is
//! not is left out unread. At most `max_files` files are read (the rest counted), none over
//! `max_file_bytes` (named). What a file means is the core's to decide
//! ([`lembas_core::commands`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use lembas_core::commands::{CommandFile, CommandsRead, FileKind};

use crate::tools::{confine_in, text_file, ToolSettings};

/// Directory entries looked at in one place, read or not: a bound on the work a huge
/// directory costs, whatever `max_files` says.
const MAX_ENTRIES_SEEN: usize = 10_000;

/// Read the command files of `project` (confined to `roots`, empty: the project alone) and of
/// the person's `config` directory (`~/.config/lembas`, when known).
pub fn read_commands(
    settings: &ToolSettings,
    config: Option<&Path>,
    project: &str,
    roots: &[String],
    max_files: usize,
    max_file_bytes: u64,
) -> Result<CommandsRead, String> {
    let real = std::fs::canonicalize(project)
        .map_err(|e| format!("`{project}` cannot be resolved: {e}"))?;
    let root = real
        .to_str()
        .ok_or_else(|| format!("`{project}` leads to a path that is not UTF-8"))?
        .to_string();
    let mut read = CommandsRead {
        root: root.clone(),
        ..Default::default()
    };
    let project_dir = |rel: &str| Some((real.join(rel), true));
    let person_dir = |rel: &str| config.map(|c| (c.join(rel), false));
    let places = [
        (FileKind::Custom, project_dir(".agent/commands")),
        (FileKind::Custom, person_dir("commands")),
        (FileKind::Skill, project_dir(".agent/skills")),
        (FileKind::Skill, person_dir("skills")),
    ];
    for (kind, place) in places {
        let Some((dir, confined)) = place else {
            continue;
        };
        for (name, path) in names_in(&dir, kind) {
            if read.files.len() + read.too_large.len() >= max_files {
                read.left_out += 1;
                continue;
            }
            let source = path.to_string_lossy().into_owned();
            let path = if confined {
                let rel = path.strip_prefix(&real).unwrap_or(&path);
                match confine_in(settings, &root, roots, &rel.to_string_lossy()) {
                    Ok(place) => place.path,
                    // Outside, protected, or gone: not a command, and not read.
                    Err(_) => continue,
                }
            } else {
                path
            };
            let Ok((file, meta)) = text_file::open(&path, &source) else {
                continue;
            };
            if meta.len() > max_file_bytes {
                read.too_large.push(source);
                continue;
            }
            let mut bytes = Vec::new();
            if file.take(max_file_bytes).read_to_end(&mut bytes).is_err() {
                continue;
            }
            read.files.push(CommandFile {
                kind,
                name,
                source,
                text: String::from_utf8_lossy(&bytes).into_owned(),
            });
        }
    }
    Ok(read)
}

/// The command files of one place, by name: `<name>.md` for custom commands, `<name>/SKILL.md`
/// for skills. A place that does not exist has none.
fn names_in(dir: &Path, kind: FileKind) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .take(MAX_ENTRIES_SEEN)
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file_name = e.file_name();
            let file_name = file_name.to_str()?;
            match kind {
                FileKind::Custom => {
                    let name = file_name.strip_suffix(".md")?;
                    Some((name.to_string(), e.path()))
                }
                FileKind::Skill => Some((file_name.to_string(), e.path().join("SKILL.md"))),
            }
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_file_leading_outside_is_not_read_and_bounds_are_said() {
        let tmp = std::env::temp_dir().join(format!("lembas-cmds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let project = tmp.join("p");
        let commands = project.join(".agent/commands");
        std::fs::create_dir_all(&commands).unwrap();
        std::fs::create_dir_all(project.join(".agent/skills/ship")).unwrap();
        std::fs::write(tmp.join("secret"), "key").unwrap();
        std::fs::write(commands.join("fix.md"), "Fix it").unwrap();
        std::fs::write(commands.join("big.md"), "x".repeat(100)).unwrap();
        std::os::unix::fs::symlink(tmp.join("secret"), commands.join("leak.md")).unwrap();
        std::fs::write(project.join(".agent/skills/ship/SKILL.md"), "Ship").unwrap();
        let config = tmp.join("config");
        std::fs::create_dir_all(config.join("commands")).unwrap();
        std::fs::write(config.join("commands/mine.md"), "Mine").unwrap();
        let settings = ToolSettings {
            protected: Vec::new(),
            shell: "/bin/sh".into(),
            undo: None,
        };
        let p = project.to_str().unwrap();
        let read = read_commands(&settings, Some(&config), p, &[], 64, 50).unwrap();
        let names: Vec<(&str, FileKind)> = read
            .files
            .iter()
            .map(|f| (f.name.as_str(), f.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("fix", FileKind::Custom),
                ("mine", FileKind::Custom),
                ("ship", FileKind::Skill)
            ]
        );
        assert_eq!(read.too_large.len(), 1, "{read:?}");
        assert!(read.files.iter().all(|f| f.text != "key"));
        // Two files at most (big.md and fix.md, by name): the rest counted, not read.
        let read = read_commands(&settings, Some(&config), p, &[], 2, 50).unwrap();
        assert_eq!(
            (read.files.len() + read.too_large.len(), read.left_out),
            (2, 3)
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
