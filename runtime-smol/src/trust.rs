//! `lembas trust <dir>` and `lembas untrust <dir>`: the `trusted:` list of `config.yaml`.
//!
//! The directory is canonicalized (`~` expanded, symlinks followed). The file is edited as
//! text: the top-level `trusted:` entry is replaced by a block list at the end of the file, and
//! every other line (other keys, comments, the `remote:` block) is kept as it was. The result is
//! checked with the same parser `lembas link` uses before it replaces the file (atomically; see
//! [`crate::config_edit`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{config, config_edit};

#[derive(Default, Deserialize)]
struct Trusted {
    #[serde(default)]
    trusted: Option<Vec<String>>,
}

/// Resolve `dir` as the config would: `~` expanded, relative to the current directory,
/// symlinks followed; it must be a directory.
fn canonical(dir: &str, home: Option<&Path>) -> Result<String, String> {
    let p = expand(dir, home).ok_or_else(|| format!("`{dir}` needs HOME"))?;
    let real = std::fs::canonicalize(&p).map_err(|e| format!("{dir}: {e}"))?;
    if !real.is_dir() {
        return Err(format!("{dir}: not a directory"));
    }
    real.into_os_string()
        .into_string()
        .map_err(|_| format!("{dir}: not UTF-8"))
}

fn expand(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    if p == "~" {
        return home.map(Path::to_path_buf);
    }
    match p.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(p)),
    }
}

/// What an existing entry stands for (itself when it cannot be resolved any more).
fn resolved(entry: &str, home: Option<&Path>) -> String {
    canonical(entry, home).unwrap_or_else(|_| entry.to_string())
}

/// The file's text with `trusted:` set to `list`.
fn with_trusted(text: &str, list: &[String]) -> String {
    let mut out = config_edit::without_key(text, "trusted");
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if list.is_empty() {
        out.push_str("trusted: []\n");
    } else {
        out.push_str("trusted:\n");
        for d in list {
            // A JSON string is a YAML double-quoted scalar.
            out.push_str(&format!(
                "  - {}\n",
                serde_json::to_string(d).expect("a string")
            ));
        }
    }
    out
}

/// Add (`add`) or remove `dir` from the trusted list of the config at `path`. Returns a
/// sentence saying what changed.
pub fn edit(path: &Path, dir: &str, add: bool, home: Option<&Path>) -> Result<String, String> {
    let text = config_edit::read(path)?;
    // The file must be good as it is (the error names file, line and key).
    config::parse(&text, path, home).map_err(|e| e.to_string())?;
    let current: Vec<String> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str::<Trusted>(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .trusted
            .unwrap_or_default()
    };
    let (list, said) = if add {
        let dir = canonical(dir, home)?;
        if current.iter().any(|e| resolved(e, home) == dir) {
            return Ok(format!("{dir} is trusted already"));
        }
        let mut list = current.clone();
        list.push(dir.clone());
        (list, format!("trusted {dir}"))
    } else {
        let target = canonical(dir, home).or_else(|_| {
            let p = expand(dir, home).ok_or_else(|| format!("`{dir}` needs HOME"))?;
            Ok::<_, String>(p.to_string_lossy().into_owned())
        })?;
        let list: Vec<String> = current
            .iter()
            .filter(|e| resolved(e, home) != target && e.as_str() != dir)
            .cloned()
            .collect();
        if list.len() == current.len() {
            return Ok(format!("{target} was not trusted"));
        }
        (list, format!("no longer trusting {target}"))
    };
    config_edit::write_checked(path, &with_trusted(&text, &list), home)?;
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_keys_and_comments_are_kept() {
        let text = "# mine\nmodel: x\ntrusted:\n  - /a\n  - /b\nremote:\n  enabled: true\n";
        let out = with_trusted(text, &["/a".into()]);
        assert_eq!(
            out,
            "# mine\nmodel: x\nremote:\n  enabled: true\ntrusted:\n  - \"/a\"\n"
        );
        let flow = "trusted: [/a]\nremote:\n  enabled: false\n";
        assert_eq!(
            with_trusted(flow, &[]),
            "remote:\n  enabled: false\ntrusted: []\n"
        );
        let col0 = "trusted:\n- /a\n- /b\nmodel: y";
        assert_eq!(
            with_trusted(col0, &["/c".into()]),
            "model: y\ntrusted:\n  - \"/c\"\n"
        );
    }

    #[test]
    fn trust_and_untrust_canonicalize_and_edit_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("p")).unwrap();
        std::os::unix::fs::symlink(&work, dir.path().join("ln")).unwrap();
        let real = std::fs::canonicalize(work.join("p")).unwrap();
        let real = real.to_str().unwrap();
        let cfg = dir.path().join("lembas/config.yaml");
        std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
        std::fs::write(&cfg, "model: keep-me\n").unwrap();
        let said = edit(&cfg, "~/ln/p", true, Some(dir.path())).unwrap();
        assert_eq!(said, format!("trusted {real}"));
        let c = config::load(&cfg, Some(dir.path())).unwrap();
        assert_eq!(c.remote.trusted, vec![real.to_string()]);
        assert!(std::fs::read_to_string(&cfg)
            .unwrap()
            .contains("model: keep-me"));
        let again = edit(&cfg, work.join("p").to_str().unwrap(), true, None).unwrap();
        assert!(again.contains("trusted already"), "{again}");
        let said = edit(&cfg, "~/ln/p", false, Some(dir.path())).unwrap();
        assert_eq!(said, format!("no longer trusting {real}"));
        let c = config::load(&cfg, Some(dir.path())).unwrap();
        assert!(c.remote.trusted.is_empty());
        assert!(edit(&cfg, "/no/such/dir", true, None).is_err());
    }
}
