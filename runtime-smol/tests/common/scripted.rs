//! The end-to-end tests read the scripted engine's replies (`lembas_core::scripted`), so each
//! home's config.yaml chooses it. One file, included by path where a test or bench builds its
//! own home (`#[path = "common/scripted.rs"] mod scripted;`).
#![allow(dead_code)]

use std::path::Path;

/// `text` with `engine: scripted` added, unless it names an engine already.
pub fn with_scripted_engine(text: &str) -> String {
    if text.lines().any(|l| l.starts_with("engine:")) {
        return text.to_string();
    }
    let sep = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{text}{sep}engine: scripted\n")
}

/// Make `home`'s config.yaml (`$XDG_CONFIG_HOME` = `home/config`) choose the scripted engine,
/// keeping what is in it.
pub fn use_scripted_engine(home: &Path) {
    let dir = home.join("config/lembas");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let scripted = with_scripted_engine(&text);
    if scripted != text {
        std::fs::write(&path, scripted).unwrap();
    }
}
