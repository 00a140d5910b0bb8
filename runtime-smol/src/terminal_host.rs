//! The driver's side of remote terminals: the PTYs the core asked for, a task per terminal
//! that reads its output (only while its link's queue is under the pause mark, so a flood
//! blocks the shell instead of growing the device) and one that writes its keystrokes in
//! order. The core keeps the rules; this only performs its terminal effects.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use lembas_core::device::ShellInfo;
use smol::channel::{self, Sender};
use smol::Task;

use crate::channels::Input;
use crate::outbox::Gauge;
use crate::terminal::{OpenSpec, Terminal};

/// One read from a PTY: under a frame's worth, so the core's batching makes full frames.
const READ_BYTES: usize = 16 * 1024;

/// How terminals are started on this device.
#[derive(Clone, Debug)]
pub struct TerminalOptions {
    /// The login shell (default: [`crate::terminal::login_shell`]).
    pub shell: PathBuf,
    /// `remote.terminal_integration`.
    pub integration: bool,
    /// For OSC 7.
    pub host: String,
    /// Set on top of the device's environment (tests give a terminal its own `HOME`).
    pub env: Vec<(OsString, OsString)>,
}

impl TerminalOptions {
    pub fn new(integration: bool, host: String) -> TerminalOptions {
        TerminalOptions {
            shell: crate::terminal::login_shell(),
            integration,
            host,
            env: Vec::new(),
        }
    }
}

struct Open {
    terminal: Arc<Terminal>,
    keystrokes: Sender<Vec<u8>>,
    _tasks: [Task<()>; 2],
}

#[derive(Default)]
pub struct TerminalHost {
    open: BTreeMap<String, Open>,
}

impl TerminalHost {
    /// Start a shell (blocking work: fork, exec, the rc files).
    pub async fn open(
        options: &TerminalOptions,
        cwd: String,
        cols: u16,
        rows: u16,
    ) -> Result<Terminal, String> {
        let spec = OpenSpec {
            shell: options.shell.clone(),
            cwd: PathBuf::from(cwd),
            cols,
            rows,
            integration: options.integration,
            host: options.host.clone(),
            env: options.env.clone(),
        };
        blocking::unblock(move || Terminal::open(&spec))
            .await
            .map_err(|e| format!("cannot start {}: {e}", options.shell.display()))
    }

    pub fn info(terminal: &Terminal) -> ShellInfo {
        ShellInfo {
            shell: terminal.shell().as_str().to_string(),
            integration: terminal.integration(),
        }
    }

    /// Keep `terminal` as `id`: its output and exit go to `tx`, read only while `gauge` (its
    /// link's queue) is under the pause mark.
    pub fn adopt(&mut self, id: String, terminal: Terminal, gauge: Arc<Gauge>, tx: Sender<Input>) {
        let terminal = Arc::new(terminal);
        let reader = smol::spawn(read_output(id.clone(), terminal.clone(), gauge, tx));
        let (keystrokes, rx) = channel::unbounded::<Vec<u8>>();
        let writer = smol::spawn({
            let terminal = terminal.clone();
            async move {
                while let Ok(bytes) = rx.recv().await {
                    if let Err(e) = terminal.write_all(&bytes).await {
                        log::debug!("terminal input: {e}");
                        return;
                    }
                }
            }
        });
        self.open.insert(
            id,
            Open {
                terminal,
                keystrokes,
                _tasks: [reader, writer],
            },
        );
    }

    pub fn input(&self, id: &str, bytes: Vec<u8>) {
        if let Some(t) = self.open.get(id) {
            let _ = t.keystrokes.try_send(bytes);
        }
    }

    pub fn resize(&self, id: &str, cols: u16, rows: u16) {
        if let Some(Err(e)) = self.open.get(id).map(|t| t.terminal.resize(cols, rows)) {
            log::warn!("resizing a terminal: {e}");
        }
    }

    /// SIGHUP; the shell's exit is reported as for any other end.
    pub fn hang_up(&self, id: &str) {
        if let Some(Err(e)) = self.open.get(id).map(|t| t.terminal.hangup()) {
            log::warn!("hanging up a terminal: {e}");
        }
    }

    /// The terminal ended: forget it (its tasks have finished).
    pub fn ended(&mut self, id: &str) {
        self.open.remove(id);
    }
}

/// Read the PTY until the shell side is gone, then report the exit code.
async fn read_output(id: String, terminal: Arc<Terminal>, gauge: Arc<Gauge>, tx: Sender<Input>) {
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        // Backpressure: a client that reads slowly stops the PTY being read; the shell's
        // writes then block in the kernel.
        gauge.below_pause().await;
        let n = match terminal.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::debug!("terminal output: {e}");
                break;
            }
        };
        // Counted until the driver has handed it to the core.
        let held = gauge.hold(n);
        let input = Input::TerminalOutput {
            id: id.clone(),
            bytes: buf[..n].to_vec(),
            _held: held,
        };
        if tx.send(input).await.is_err() {
            return;
        }
    }
    let code = match terminal.wait().await {
        Ok(code) => code,
        Err(e) => {
            log::warn!("waiting for a terminal's shell: {e}");
            -1
        }
    };
    let _ = tx.send(Input::TerminalExit { id, code }).await;
}
