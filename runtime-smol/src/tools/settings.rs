//! What the tools are set to: the protected paths (`tools.protected`, and always the device's
//! own config and state directories) and the shell commands run through (`tools.shell`, else
//! `$SHELL`, else `/bin/sh`).

use std::path::{Path, PathBuf};

use lembas_core::confine::Protected;

use crate::config::ToolsConfig;
use crate::dirs::Dirs;

/// `tools.protected` when the config does not set it: git's internals and the user's keys and
/// cloud credentials.
pub const DEFAULT_PROTECTED: &[&str] = &[
    ".git",
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.netrc",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
];

#[derive(Clone, Debug)]
pub struct ToolSettings {
    /// Each path entry twice when a symlink leads elsewhere: as written and resolved.
    pub protected: Vec<Protected>,
    /// The shell a command runs through (`shell -c command`).
    pub shell: PathBuf,
    /// What `write` and `edit` keep for `/undo` (`None`: nothing, with no state directory).
    pub undo: Option<super::UndoJournal>,
}

impl ToolSettings {
    /// From the config's `tools:` block; `home` expands `~` in the defaults (a `~/` entry is
    /// skipped without one), and the device's own directories are protected whatever the
    /// block says, so the model cannot widen its own limits.
    pub fn new(config: &ToolsConfig, dirs: &Dirs, home: Option<&Path>) -> ToolSettings {
        let written: Vec<String> = match &config.protected {
            Some(entries) => entries.clone(),
            None => DEFAULT_PROTECTED
                .iter()
                .filter_map(|e| crate::config::expand_home(e, home))
                .filter_map(|p| p.to_str().map(str::to_string))
                .collect(),
        };
        let own = [&dirs.config, &dirs.state]
            .into_iter()
            .filter_map(|p| p.to_str().map(str::to_string));
        let mut protected = Vec::new();
        for entry in written.into_iter().chain(own) {
            // Entries were checked when the config was read; the device's directories are
            // absolute.
            let Ok(parsed) = Protected::parse(&entry) else {
                continue;
            };
            if let Protected::Path(lexical) = &parsed {
                if let Some(real) = super::real_path(Path::new(lexical))
                    .ok()
                    .and_then(|p| p.to_str().map(str::to_string))
                    .filter(|real| real != lexical)
                {
                    protected.push(Protected::Path(real));
                }
            }
            protected.push(parsed);
        }
        let shell = config
            .shell
            .clone()
            .or_else(|| {
                std::env::var_os("SHELL")
                    .map(PathBuf::from)
                    .filter(|s| s.is_absolute())
            })
            .unwrap_or_else(|| PathBuf::from("/bin/sh"));
        let undo = super::UndoJournal::new(dirs.state.join("undo"), Default::default());
        ToolSettings {
            protected,
            shell,
            undo: Some(undo),
        }
    }

    /// The same, keeping for `/undo` within `limits` (`sessions.undo_max_bytes`,
    /// `sessions.undo_turns`).
    pub fn with_undo_limits(mut self, limits: super::UndoLimits) -> ToolSettings {
        if let Some(undo) = &mut self.undo {
            undo.limits = limits;
        }
        self
    }

    /// The defaults, for this user and device as the environment says (`HOME`, `XDG_*`):
    /// what a shell has before its config's `tools:` block is applied.
    pub fn from_env() -> ToolSettings {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        match Dirs::from_env() {
            Ok(dirs) => ToolSettings::new(&ToolsConfig::default(), &dirs, home.as_deref()),
            // No home: nothing under it to protect, and no device directories either.
            Err(_) => ToolSettings {
                protected: vec![Protected::Name(".git".into())],
                shell: PathBuf::from("/bin/sh"),
                undo: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_protect_the_users_keys_as_written_and_resolved_and_the_devices_own_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(home.join("keys")).unwrap();
        std::os::unix::fs::symlink(home.join("keys"), home.join(".ssh")).unwrap();
        let dirs = Dirs {
            config: home.join(".config/lembas"),
            state: home.join(".local/state/lembas"),
            runtime: home.join(".local/state/lembas"),
        };
        let path = |p: &Path| Protected::Path(p.to_str().unwrap().into());
        let s = ToolSettings::new(&ToolsConfig::default(), &dirs, Some(&home));
        for expected in [
            Protected::Name(".git".into()),
            path(&home.join(".ssh")),
            path(&home.join("keys")),
            path(&home.join(".config/gcloud")),
            path(&dirs.config),
            path(&dirs.state),
        ] {
            assert!(
                s.protected.contains(&expected),
                "{expected:?} in {:?}",
                s.protected
            );
        }
        // A list of its own replaces the defaults, not the device's directories.
        let own = ToolsConfig {
            protected: Some(vec!["node_modules".into()]),
            shell: Some(PathBuf::from("/bin/zsh")),
        };
        let s = ToolSettings::new(&own, &dirs, Some(&home));
        assert_eq!(
            s.protected,
            vec![
                Protected::Name("node_modules".into()),
                path(&dirs.config),
                path(&dirs.state)
            ]
        );
        assert_eq!(s.shell, PathBuf::from("/bin/zsh"));
    }
}
