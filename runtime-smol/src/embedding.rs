//! config.yaml's `embedding:` at login: the library's embedding model, set to the instance's
//! first one as `<connection>/<served id>` when the file sets none, never replacing one that is
//! set (spec, "The HTTP API the CLI uses"). The file is edited as text: one line is added and
//! every other line kept as it was; the result is checked with the parser `lembas link` uses
//! before it replaces the file (atomically).

use std::path::Path;

use crate::config_edit;

/// Whether the text sets a top-level `embedding:` (even to nothing: it is the person's).
fn has_embedding(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("embedding:") || l.starts_with("\"embedding\":"))
}

/// Set `embedding: <value>` in the config at `path` unless it sets one. Returns whether the file
/// was written.
pub fn set_if_unset(path: &Path, value: &str, home: Option<&Path>) -> Result<bool, String> {
    let text = config_edit::read(path)?;
    if has_embedding(&text) {
        return Ok(false);
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    // A JSON string is a YAML double-quoted scalar.
    new.push_str(&format!(
        "embedding: {}\n",
        serde_json::to_string(value).map_err(|e| e.to_string())?
    ));
    config_edit::write_checked(path, &new, home)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_when_unset_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas/config.yaml");
        // No file: one is made holding the key alone.
        assert!(set_if_unset(&path, "host/test/embed", None).unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "embedding: \"host/test/embed\"\n"
        );
        // Set already: left as it is.
        assert!(!set_if_unset(&path, "host/other", None).unwrap());
        // Other keys and comments kept, the line added at the end.
        let before = "# mine\nmodel: x/y\nremote:\n  enabled: false";
        std::fs::write(&path, before).unwrap();
        assert!(set_if_unset(&path, "h/e", None).unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{before}\nembedding: \"h/e\"\n")
        );
        // Set to nothing is still the person's.
        std::fs::write(&path, "embedding:\n").unwrap();
        assert!(!set_if_unset(&path, "h/e", None).unwrap());
        // A file that does not load is not touched.
        std::fs::write(&path, "remote:\n  enabld: true\n").unwrap();
        assert!(set_if_unset(&path, "h/e", None).is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "remote:\n  enabld: true\n"
        );
    }
}
