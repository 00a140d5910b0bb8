//! Editing config.yaml as text, for the commands that change one key (`lembas trust`, `lembas
//! config set`, the login's `embedding:`): every other line (other keys, comments) is kept as it
//! was, and the result is checked with the parser `lembas link` uses before it replaces the file
//! (atomically), so a command never leaves a file that would not load.

use std::path::Path;

use crate::config;

/// The text without its top-level `key:` entry (the key line and the lines under it: a block
/// list, a block scalar).
pub fn without_key(text: &str, key: &str) -> String {
    let (plain, quoted) = (format!("{key}:"), format!("\"{key}\":"));
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if skipping {
            if line.starts_with([' ', '\t', '-']) {
                continue;
            }
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                out.push_str(line);
                continue;
            }
            skipping = false;
        }
        if line.starts_with(&plain) || line.starts_with(&quoted) {
            skipping = true;
            continue;
        }
        out.push_str(line);
    }
    out
}

/// The text with `key: <value>` in place of its entry (at the end; `value` as a double-quoted
/// scalar).
pub fn with_string(text: &str, key: &str, value: &str) -> String {
    let mut out = without_key(text, key);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    // A JSON string is a YAML double-quoted scalar.
    let quoted = serde_json::to_string(value).unwrap_or_else(|_| "\"\"".into());
    out.push_str(&format!("{key}: {quoted}\n"));
    out
}

/// The config at `path` as text (a missing file is empty).
pub fn read(path: &Path) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Replace the config at `path` with `new` (atomically), if it loads.
pub fn write_checked(path: &Path, new: &str, home: Option<&Path>) -> Result<(), String> {
    config::parse(new, path, home)
        .map_err(|e| format!("the edited config would not load ({e}); left as it was"))?;
    if let Some(parent) = path.parent() {
        crate::dirs::create_private_dir(parent)
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, new).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_is_replaced_and_the_rest_kept() {
        let text = "# mine\npersonality: warm\ninstructions: |\n  one\n  two\n# after\nmodel: x";
        assert_eq!(
            with_string(text, "instructions", "say \"hi\"\nthen go"),
            "# mine\npersonality: warm\n# after\nmodel: x\ninstructions: \"say \\\"hi\\\"\\nthen go\"\n"
        );
        assert_eq!(
            with_string("", "personality", "warm"),
            "personality: \"warm\"\n"
        );
        // A key that only begins the same is another key.
        assert_eq!(
            with_string("personality_custom: a\n", "personality", "b"),
            "personality_custom: a\npersonality: \"b\"\n"
        );
    }
}
