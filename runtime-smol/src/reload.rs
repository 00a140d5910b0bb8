//! Reading config.yaml again while `lembas link` runs: when the file changes (its length,
//! mtime or bytes, looked at every [`POLL`]) or on SIGHUP. A config that loads is handed to the
//! driver as [`Input::Reconfigure`] (the core decides whether anything changed); one that does
//! not is logged with its file, line and key, and the settings in force stay.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures_lite::{future, StreamExt};
use smol::channel::Sender;

use crate::channels::Input;
use crate::config;

/// How often the file is looked at: cheap (one stat), and quick enough for a person editing.
pub const POLL: Duration = Duration::from_secs(1);

/// What was last seen of the file: its length and mtime, and its bytes (an edit within one
/// mtime tick that keeps the length is still seen).
#[derive(Debug, PartialEq, Default)]
struct Seen {
    stat: Option<(u64, Option<SystemTime>)>,
    text: Option<Vec<u8>>,
}

fn stat(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

/// Watch `path` until the driver is gone. `home` expands `~` in it, as at start-up.
pub async fn watch(path: PathBuf, home: Option<PathBuf>, tx: Sender<Input>) {
    let hup = match async_signal::Signals::new([async_signal::Signal::Hup]) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("SIGHUP will not reload config.yaml: {e}");
            None
        }
    };
    let mut seen = Seen {
        stat: stat(&path),
        text: std::fs::read(&path).ok(),
    };
    loop {
        let hup_now = async {
            match &hup {
                Some(s) => {
                    let mut s = s;
                    s.next().await.is_some()
                }
                None => future::pending().await,
            }
        };
        let forced = future::or(hup_now, async {
            smol::Timer::after(POLL).await;
            false
        })
        .await;
        let st = stat(&path);
        if !forced && st == seen.stat {
            continue;
        }
        let text = std::fs::read(&path).ok();
        let changed = text != seen.text;
        seen = Seen { stat: st, text };
        if !forced && !changed {
            continue;
        }
        if forced {
            log::info!("SIGHUP: reading {} again", path.display());
        }
        let (p, h) = (path.clone(), home.clone());
        let loaded = blocking::unblock(move || config::load(&p, h.as_deref())).await;
        match loaded {
            Ok(c) => {
                let input = Input::Reconfigure {
                    remote: c.remote,
                    terminal_integration: c.terminal_integration,
                };
                if tx.send(input).await.is_err() {
                    return;
                }
            }
            Err(e) => log::error!("config.yaml not taken, the settings in force stay: {e}"),
        }
    }
}
