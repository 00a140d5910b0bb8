//! Where the device keeps its files: `$XDG_CONFIG_HOME/lembas/` (default `~/.config/lembas/`)
//! for `config.yaml` and the login, `$XDG_STATE_HOME/lembas/` (default `~/.local/state/lembas/`)
//! for the redb store and the attachments, `$XDG_RUNTIME_DIR/lembas/` (else the state
//! directory) for the hub's socket.

use std::path::PathBuf;

/// The directories of one device, resolved once from the environment.
#[derive(Clone, Debug)]
pub struct Dirs {
    pub config: PathBuf,
    pub state: PathBuf,
    /// Where the hub's socket lives: `$XDG_RUNTIME_DIR/lembas/` (per login, on a tmpfs, made
    /// for exactly this), else the state directory.
    pub runtime: PathBuf,
}

impl Dirs {
    /// From `XDG_CONFIG_HOME`, `XDG_STATE_HOME` and `HOME`, as the XDG spec says (a relative
    /// `XDG_*` value is ignored).
    pub fn from_env() -> Result<Dirs, String> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let xdg = |var: &str, fallback: &[&str]| -> Result<PathBuf, String> {
            if let Some(p) = std::env::var_os(var).map(PathBuf::from) {
                if p.is_absolute() {
                    return Ok(p.join("lembas"));
                }
            }
            let mut p = home
                .clone()
                .ok_or_else(|| format!("neither {var} nor HOME is set"))?;
            for part in fallback {
                p.push(part);
            }
            Ok(p.join("lembas"))
        };
        let state = xdg("XDG_STATE_HOME", &[".local", "state"])?;
        let runtime = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map_or_else(|| state.clone(), |p| p.join("lembas"));
        Ok(Dirs {
            config: xdg("XDG_CONFIG_HOME", &[".config"])?,
            state,
            runtime,
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config.join("config.yaml")
    }

    pub fn login_file(&self) -> PathBuf {
        self.config.join("login.json")
    }

    pub fn token_file(&self) -> PathBuf {
        self.config.join("token")
    }

    pub fn store_file(&self) -> PathBuf {
        self.state.join("lembas.redb")
    }

    /// The socket `lembas link` serves the hub on.
    pub fn hub_socket(&self) -> PathBuf {
        self.runtime.join("hub.sock")
    }

    pub fn attachments(&self) -> PathBuf {
        self.state.join("attachments")
    }
}

/// Create `dir` and its parents, each new one readable by the user alone (0700).
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
