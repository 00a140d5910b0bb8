//! The driver: one task owns the core's `Host` (the `Device` joined to its engine, see
//! [`crate::engine`]). Everything else — socket readers, stdin, the dialer, the disk (on
//! `blocking`'s pool), the engine's HTTP ([`crate::engine_io`]) — feeds it [`Input`]s over one
//! channel. After every input it drains the host's `poll_output()`,
//! performs what the shell must (every `ShellOutput` and `Effect` by name: a new one does not
//! compile until it is performed here), writes the persists of the iteration in one
//! transaction (group commit), and sleeps until `poll_timeout()` or the next input.
//!
//! Backpressure reaches the engine: the host takes no engine event of a session while the
//! queue of a connection that holds it is past `outbound.pause_bytes`. The engine makes its
//! next event only when asked, so the turn waits where it is (as a shell behind a full PTY
//! does), the driver sleeps until that queue drains, and memory stays at the mark plus one
//! event's frames.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures_lite::future;
use lembas_core::device::{ConnId, ConnKind, Device, DialFailure, Effect};
use lembas_core::engine::{Engine, EngineCommand, Report};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::host::{Host, ShellOutput};
use lembas_core::jsonrpc::{self, RpcError};
use lembas_core::store::{Entry, MemStore, Record};
use lembas_core::Time;
use smol::channel::{self, Receiver, Sender};
use smol::{Task, Timer};

pub use crate::channels::{Dialer, Input, Outgoing};
use crate::clock::Clock;
use crate::config::HubLimits;
use crate::engine::{DeviceEngine, EngineChoice};
use crate::engine_io::{Performer, Target};
use crate::handover::Handover;
use crate::hub::HubSocket;
use crate::lines::LineLimit;
use crate::outbox::{Gauge, Outbox};
use crate::stdio::StdinReader;
use crate::store::RedbStore;
use crate::terminal_host::{TerminalHost, TerminalOptions};
use crate::tools::ToolSettings;

pub use lembas_core::backlog::CLOSE_OVERFLOW;

/// How the driver's run ended.
#[derive(Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    pub message: Option<String>,
}

/// Where persisted records go.
pub enum Disk {
    /// `serve --stdio`: sessions live in memory, with the core's reference semantics.
    Mem(MemStore),
    Redb(Arc<RedbStore>),
    /// `serve --stdio`: a store of this process alone (`RedbStore::scratch`), written and read
    /// in the driver's own step as the in-memory one is (an editor's frames are answered in
    /// the order they came, with no write in flight between them), on disk so that what it
    /// keeps is not in memory.
    Scratch(RedbStore),
}

/// How many inputs may wait for the driver. The bytes behind them are bounded where they enter
/// (a reader stops at `inbound.pause_bytes`, a PTY at its link's `outbound.pause_bytes`); this
/// bounds their number too, so a peer's flood of pings or tiny frames waits in its reader
/// instead of growing the queue. Every producer is a task that awaits its send — socket and
/// stdin readers, stdout's writer, the disk, path and dial work on `blocking`, PTY readers,
/// the reload watcher — and the driver awaits none of them while it runs; at the end it closes
/// the channel before awaiting stdout's writer, so no producer can hold it up. Enough inputs
/// for a burst of streamed frames to be taken one after another without a producer waking each
/// time; little memory (an `Input` is a few words plus bytes the gauges already count).
pub const INPUT_CAPACITY: usize = 256;

struct Conn {
    out: Outbox,
    kind: ConnKind,
}

pub struct Driver {
    host: Host<Logged<DeviceEngine>>,
    /// Performs the engine's HTTP and file reads.
    io: Performer,
    clock: Clock,
    tx: Sender<Input>,
    rx: Receiver<Input>,
    conns: BTreeMap<ConnId, Conn>,
    tasks: Vec<Task<()>>,
    /// Connection writers: awaited at the end so what was sent is flushed.
    writers: Vec<Task<()>>,
    /// stdout's writer, awaited to its end: the process never exits with a frame written in
    /// part.
    stdio_writer: Option<Task<()>>,
    /// The queue that holds a session's engine events back, when one does: the driver wakes
    /// when it drains.
    blocked: Option<Arc<Gauge>>,
    disk: Disk,
    batch: Vec<Record>,
    batch_seq: u64,
    writing: bool,
    /// The store's commit under way: it holds the store open until it is done.
    committing: Option<smol::Task<()>>,
    attachments: PathBuf,
    /// What the model's tools may not touch, and the shell commands run through.
    tools: Arc<ToolSettings>,
    /// How long `/review`'s look in git may take (`commands.review_git_timeout_ms`).
    review_git_timeout: std::time::Duration,
    /// The person's configuration directory, whose `commands/` and `skills/` hold their own
    /// commands (`None`: no home to find it in).
    config_dir: Option<PathBuf>,
    /// The `@` picker's indexes of the roots searched lately.
    file_indexes: Arc<crate::file_index::FileIndexes>,
    dialer: Option<Arc<dyn Dialer>>,
    exit: Option<Exit>,
    /// `serve --stdio`: the process ends when this connection has ended and no turn runs.
    stdio: Option<ConnId>,
    stdio_done: bool,
    terminals: TerminalHost,
    terminal_options: TerminalOptions,
    /// The hub's bounds, when this process serves it (`lembas link`).
    hub: Option<HubLimits>,
    /// stdin's reader: how to pause it, and what it needs to go on after a pause.
    stdin: Option<StdinTask>,
    /// `serve --stdio` holding the store: it hands the store and its editor over to a service
    /// that asks, at the first moment at rest.
    yielding: Option<Yielding>,
    /// Set when the driver ends for a hand-over.
    handover: Option<Handover>,
}

/// What stdin's reader task runs with, kept so a paused reader goes on as it was.
struct StdinTask {
    conn: ConnId,
    inbound: Arc<Gauge>,
    queue: (Arc<Gauge>, usize),
    /// Pauses the running reader (`None` once asked, until it runs again).
    stop: Option<Sender<()>>,
}

/// A `serve --stdio`'s readiness to yield its store (see `store_yield`).
struct Yielding {
    store: PathBuf,
    /// A service asked lately.
    asked: bool,
    /// stdin's reader, paused for a hand-over and not yet running again.
    paused: Option<Box<StdinReader>>,
    /// The editor's `initialize` params, sent again to the service's hub.
    initialize: Option<serde_json::Value>,
}

/// How often a `serve --stdio` that holds the store looks for a service asking for it.
const YIELD_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

impl Driver {
    pub fn new(device: Device, disk: Disk, attachments: PathBuf) -> Driver {
        let (tx, rx) = channel::bounded(INPUT_CAPACITY);
        let host = device.config().host.clone();
        // The defaults for this user until the config's are set (`set_tools`).
        let tools = Arc::new(ToolSettings::from_env());
        Driver {
            host: Host::new(
                device,
                Logged(DeviceEngine::new(EngineChoice::Scripted, Vec::new())),
            ),
            io: Performer::new(None, attachments.clone(), tx.clone()),
            clock: Clock::new(),
            tx,
            rx,
            conns: BTreeMap::new(),
            tasks: Vec::new(),
            writers: Vec::new(),
            stdio_writer: None,
            blocked: None,
            disk,
            batch: Vec::new(),
            batch_seq: 0,
            writing: false,
            committing: None,
            attachments,
            tools,
            review_git_timeout: std::time::Duration::from_millis(
                crate::git_changes::DEFAULT_TIMEOUT_MS as u64,
            ),
            config_dir: crate::dirs::Dirs::from_env().ok().map(|d| d.config),
            file_indexes: Arc::new(crate::file_index::FileIndexes::new(
                crate::file_index::DEFAULT_MAX_FILES,
            )),
            dialer: None,
            exit: None,
            stdio: None,
            stdio_done: false,
            terminals: TerminalHost::default(),
            terminal_options: TerminalOptions::new(true, host),
            hub: None,
            stdin: None,
            yielding: None,
            handover: None,
        }
    }

    /// Answer prompts with `engine` (before [`Driver::run`]; a new driver has the scripted
    /// one).
    pub fn set_engine(&mut self, engine: DeviceEngine) {
        *self.host.engine_mut() = Logged(engine);
    }

    /// Send the engine's requests to this instance (none set: every request fails, saying the
    /// device is not logged in).
    pub fn set_io_target(&mut self, target: Arc<Target>) {
        self.io = Performer::new(Some(target), self.attachments.clone(), self.tx.clone());
        self.io.set_tools(self.tools.clone());
    }

    /// Index at most `max` entries of a root for `_lembas/files/search` (`files:` in the
    /// config; before [`Driver::run`]).
    pub fn set_max_indexed_files(&mut self, max: usize) {
        self.file_indexes = Arc::new(crate::file_index::FileIndexes::new(max));
    }

    /// Stop `/review`'s look in git after `ms` (`commands.review_git_timeout_ms`; before
    /// [`Driver::run`]).
    pub fn set_review_git_timeout(&mut self, ms: usize) {
        self.review_git_timeout = std::time::Duration::from_millis(ms as u64);
    }

    /// Perform the model's tools as `tools` says (config's `tools:` block; before
    /// [`Driver::run`]).
    pub fn set_tools(&mut self, tools: ToolSettings) {
        self.tools = Arc::new(tools);
        self.io.set_tools(self.tools.clone());
    }

    /// How terminals start (the login shell, `remote.terminal_integration`, the host name).
    pub fn set_terminal_options(&mut self, options: TerminalOptions) {
        self.terminal_options = options;
    }

    /// A queue for a new connection, bounded as the device's config says. A link past
    /// `max_bytes` is closed (its client sends requests and reads no answers); stdio and a hub
    /// connection are never closed for it (their reader stops reading instead, as a pipe
    /// would: a slow editor behind `serve --stdio` is waited for wherever it is attached).
    fn outbox(&self, tx: Sender<Outgoing>, rx: &Receiver<Outgoing>, kind: ConnKind) -> Outbox {
        let limits = self.host.device().config().outbound;
        let max = (kind == ConnKind::Link).then_some(limits.max_bytes);
        Outbox::new(tx, rx.clone(), limits.pause_bytes, max)
    }

    /// A gauge for what a new connection's reader has read and the device not yet handled.
    fn inbound(&self) -> Arc<Gauge> {
        Gauge::new(self.host.device().config().inbound.pause_bytes)
    }

    /// A sender for inputs (to stop the driver from outside, say).
    pub fn sender(&self) -> Sender<Input> {
        self.tx.clone()
    }

    pub fn device(&self) -> &Device {
        self.host.device()
    }

    /// Keep a link to the instance up through `dialer`.
    pub fn start_link(&mut self, dialer: Arc<dyn Dialer>) {
        self.dialer = Some(dialer);
        let now = self.clock.now();
        self.host.device_mut().start_link(now);
    }

    /// Serve an editor on stdin/stdout until stdin ends.
    pub fn open_stdio(&mut self) {
        let now = self.clock.now();
        let conn = self
            .host
            .device_mut()
            .handle_open(ConnKind::Stdio, now)
            .expect("a stdio connection opens at any time");
        let limit = self.host.device().config().frames.max_frame_bytes;
        let max_queued = self.host.device().config().outbound.max_bytes;
        let (out_tx, out_rx) = channel::unbounded();
        let out = self.outbox(out_tx, &out_rx, ConnKind::Stdio);
        let gauge = out.gauge.clone();
        let gauge_out = gauge.clone();
        let returns = out.returns();
        self.conns.insert(
            conn,
            Conn {
                out,
                kind: ConnKind::Stdio,
            },
        );
        self.stdio = Some(conn);
        self.stdin = Some(StdinTask {
            conn,
            inbound: self.inbound(),
            queue: (gauge, max_queued),
            stop: None,
        });
        self.read_stdin(StdinReader::new(limit));
        self.stdio_writer = Some(crate::stdio::write_stdout(
            conn,
            out_rx,
            gauge_out,
            returns,
            self.tx.clone(),
        ));
    }

    /// Run stdin's reader (anew, or on from where it paused).
    fn read_stdin(&mut self, reader: StdinReader) {
        let Some(task) = self.stdin.as_mut() else {
            return;
        };
        let (stop, stopped) = channel::bounded(1);
        task.stop = Some(stop);
        let read = crate::stdio::read_stdin(
            reader,
            task.conn,
            task.inbound.clone(),
            task.queue.clone(),
            self.tx.clone(),
            stopped,
        );
        self.reap();
        self.tasks.push(smol::spawn(read));
    }

    /// Hand the store at `store` and the editor over to a `lembas link` that asks for it (see
    /// [`crate::store_yield`]), once the device is at rest: the driver then ends, and
    /// [`Driver::run_to_end`] returns the [`Handover`] to relay the editor with.
    pub fn yield_store_when_asked(&mut self, store: PathBuf) {
        let tx = self.tx.clone();
        let watched = store.clone();
        self.tasks.push(smol::spawn(async move {
            loop {
                Timer::after(YIELD_CHECK).await;
                if crate::store_yield::asked(&watched) && tx.send(Input::YieldAsked).await.is_err()
                {
                    return;
                }
            }
        }));
        self.yielding = Some(Yielding {
            store,
            asked: false,
            paused: None,
            initialize: None,
        });
    }

    /// Nothing in flight that ending the driver now would cut: the device at rest, no turn in
    /// the engine, every persist written.
    fn at_rest(&self) -> bool {
        self.host.device().at_rest()
            && self.host.engine().running() == 0
            && !self.writing
            && self.batch.is_empty()
    }

    /// A service asked for the store: at rest, pause stdin's reader; once it has paused (every
    /// line read before handled) and the device is still at rest, end for the hand-over; else
    /// read on, and try again when next asked.
    fn yield_if_at_rest(&mut self) {
        let at_rest = self.at_rest() && !self.stdio_done;
        let Some(y) = self.yielding.as_mut() else {
            return;
        };
        if let Some(reader) = y.paused.take() {
            if at_rest && crate::store_yield::asked(&y.store) {
                let sessions = self
                    .stdio
                    .map(|conn| self.host.device().held_sessions(conn))
                    .unwrap_or_default();
                let (rest, pieces) = reader.into_rest();
                log::info!(
                    "a lembas service asks for the store: handing it over with the editor's {} \
                     sessions",
                    sessions.len()
                );
                self.handover = Some(Handover {
                    initialize: y.initialize.take(),
                    sessions,
                    rest,
                    pieces,
                });
                self.exit = Some(Exit {
                    code: 0,
                    message: None,
                });
            } else {
                y.asked = false;
                self.read_stdin(*reader);
            }
            return;
        }
        if y.asked && at_rest {
            if let Some(stop) = self.stdin.as_mut().and_then(|t| t.stop.take()) {
                log::debug!("a lembas service asks for the store: pausing stdin at rest");
                let _ = stop.try_send(());
            }
        }
    }

    /// Serve the hub on `hub` (see [`crate::hub`]): each process of this user that connects is
    /// a `ConnKind::Hub` connection of the device, within `limits`. The socket's file goes with
    /// the driver.
    pub fn serve_hub(&mut self, hub: HubSocket, limits: HubLimits) {
        log::info!("serving the hub at {}", hub.path().display());
        self.hub = Some(limits);
        let tx = self.tx.clone();
        self.tasks.push(smol::spawn(
            async move { crate::hub::accept(&hub, tx).await },
        ));
    }

    /// A process connected to the hub: a connection of the device, or, past
    /// `hub.max_connections`, an error naming the bound and a hang-up.
    fn hub_accepted(&mut self, stream: smol::net::unix::UnixStream, now: Time) {
        let Some(limits) = self.hub else { return };
        let open = self
            .conns
            .values()
            .filter(|c| c.kind == ConnKind::Hub)
            .count();
        if open >= limits.max_connections {
            let max = limits.max_connections;
            log::warn!("a hub connection refused: {max} are open (hub.max_connections)");
            let error = RpcError::invalid_request(format!(
                "the hub serves at most {max} connections at once (hub.max_connections); \
                 this one is closed"
            ))
            .with_data(serde_json::json!({ "limit": max }));
            let mut frame = jsonrpc::encode_error(None, &error);
            frame.push(b'\n');
            self.reap();
            self.tasks.push(smol::spawn(async move {
                use futures_lite::AsyncWriteExt;
                let mut stream = stream;
                // A peer that reads nothing is not waited for.
                let write = async {
                    let _ = stream.write_all(&frame).await;
                };
                let bound = async {
                    Timer::after(std::time::Duration::from_secs(1)).await;
                };
                future::or(write, bound).await;
            }));
            return;
        }
        let conn = match self.host.device_mut().handle_open(ConnKind::Hub, now) {
            Ok(conn) => conn,
            Err(e) => {
                log::warn!("a hub connection was not opened: {e}");
                return;
            }
        };
        log::debug!("a process connected to the hub");
        let (out_tx, out_rx) = channel::unbounded();
        let out = self.outbox(out_tx, &out_rx, ConnKind::Hub);
        let gauge = out.gauge.clone();
        let gauge_out = gauge.clone();
        let returns = out.returns();
        self.conns.insert(
            conn,
            Conn {
                out,
                kind: ConnKind::Hub,
            },
        );
        let limit = LineLimit {
            bytes: limits.max_line_bytes,
            key: "hub.max_line_bytes",
        };
        let max_queued = self.host.device().config().outbound.max_bytes;
        self.reap();
        self.tasks.push(smol::spawn(crate::lines::read_lines(
            stream.clone(),
            "a hub connection",
            conn,
            limit,
            self.inbound(),
            (gauge, max_queued),
            self.tx.clone(),
        )));
        self.writers.retain(|t| !t.is_finished());
        self.writers.push(smol::spawn(async move {
            let mut stream = stream;
            if let Err(e) =
                crate::lines::write_lines(&mut stream, out_rx, &gauge_out, &returns).await
            {
                log::debug!("a hub connection could not be written: {e}");
            }
            // Its reader sees the end too, and stops.
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }));
    }

    /// Run until the device stops linking, stdin ends, or [`Input::Shutdown`].
    pub async fn run(self) -> Exit {
        self.run_to_end().await.0
    }

    /// [`Driver::run`], and the hand-over it ended for, if it did (see
    /// [`Driver::yield_store_when_asked`]).
    pub async fn run_to_end(mut self) -> (Exit, Option<Handover>) {
        loop {
            self.pump().await;
            self.yield_if_at_rest();
            if self.stdio_done && self.host.engine().running() > 0 {
                // EOF cancelled the turns running then; one that started since (queued behind
                // a persist or a read when stdin ended) is cancelled too, or it would hold the
                // process for as long as it runs.
                self.host.engine_mut().cancel_all();
                self.pump().await;
            }
            if self.exit.is_none()
                && self.stdio_done
                && self.host.engine().running() == 0
                && !self.writing
                && self.batch.is_empty()
            {
                self.exit = Some(Exit {
                    code: 0,
                    message: None,
                });
            }
            if let Some(exit) = self.exit.take() {
                let handover = self.handover.take();
                return (self.finish(exit).await, handover);
            }
            let deadline = self.host.poll_timeout();
            let drained = {
                let blocked = self.blocked.clone();
                async move {
                    match blocked {
                        Some(gauge) => gauge.below_pause().await,
                        None => future::pending().await,
                    }
                    None
                }
            };
            let input = match deadline {
                Some(at) => {
                    let when = self.clock.instant_of(at);
                    let timer = async {
                        Timer::at(when).await;
                        None
                    };
                    future::or(
                        async { self.rx.recv().await.ok() },
                        future::or(timer, drained),
                    )
                    .await
                }
                None => future::or(async { self.rx.recv().await.ok() }, drained).await,
            };
            let now = self.clock.now();
            if let Some(input) = input {
                self.handle(input, now);
            }
            self.host.handle_timeout(now);
        }
    }

    async fn finish(mut self, exit: Exit) -> Exit {
        // No input is taken from here on: a producer waiting for room (stdout's writer telling
        // of a failed write, say) is refused at once rather than waited for while waiting on it.
        self.rx.close();
        for (_, c) in std::mem::take(&mut self.conns) {
            c.out.close();
        }
        // Readers and helpers are dropped (cancelled); link writers flush what they were given
        // and end, within a bound so a stuck peer does not hold the process (a reattaching
        // client finds its turns in the ledger). stdout is written to its end, however slowly
        // it is read: a frame cut by the exit would be lost output that nothing recovers.
        self.tasks.clear();
        // A commit under way is seen to its end (redb's commit is whole or nothing either way):
        // dropped, it went on in the blocking pool holding the store open, and a device started
        // right after this one (a restart in the same process, the demo's) found it locked.
        if let Some(commit) = self.committing.take() {
            commit.await;
        }
        if let Some(stdout) = self.stdio_writer.take() {
            stdout.await;
        }
        let writers = std::mem::take(&mut self.writers);
        future::or(
            async {
                for w in writers {
                    w.await;
                }
            },
            async {
                Timer::after(std::time::Duration::from_secs(2)).await;
            },
        )
        .await;
        exit
    }

    fn handle(&mut self, input: Input, now: Time) {
        match input {
            Input::Dialed(Ok(socket)) => {
                match self.host.device_mut().handle_open(ConnKind::Link, now) {
                    Ok(conn) => {
                        log::info!("linked to the instance");
                        let (out_tx, out_rx) = channel::unbounded();
                        let out = self.outbox(out_tx, &out_rx, ConnKind::Link);
                        let outbound = out.gauge.clone();
                        self.conns.insert(
                            conn,
                            Conn {
                                out,
                                kind: ConnKind::Link,
                            },
                        );
                        let (reader, writer) = crate::link::spawn_socket(
                            *socket,
                            conn,
                            self.tx.clone(),
                            self.inbound(),
                            out_rx,
                            outbound,
                        );
                        self.tasks.push(reader);
                        self.writers.retain(|t| !t.is_finished());
                        self.writers.push(writer);
                    }
                    Err(e) => log::warn!("a link opened that the device did not ask for: {e}"),
                }
            }
            Input::Dialed(Err(failure)) => {
                if failure == DialFailure::Transient {
                    log::info!("dial failed; the device will try again");
                }
                self.host.device_mut().handle_dial_failed(failure, now);
            }
            Input::Frame { conn, bytes, held } => {
                if let Some(y) = self.yielding.as_mut().filter(|y| y.initialize.is_none()) {
                    if Some(conn) == self.stdio {
                        y.initialize = crate::handover::initialize_params(&bytes);
                    }
                }
                if self.conns.contains_key(&conn) {
                    log::trace!("<- {}", String::from_utf8_lossy(&bytes));
                    if let Err(e) = self.host.device_mut().handle_frame(conn, &bytes, now) {
                        log::warn!("frame on an unknown connection: {e}");
                    }
                    // Handled: its reader may read on.
                    drop(held);
                }
            }
            Input::Heard { conn } => {
                if self.conns.contains_key(&conn) {
                    let _ = self.host.device_mut().handle_activity(conn, now);
                }
            }
            Input::HubAccepted(stream) => self.hub_accepted(stream, now),
            Input::TooLong {
                conn,
                size,
                limit,
                key,
            } => {
                log::warn!("a line of {size} bytes is over the limit of {limit} bytes; skipped");
                let error = RpcError::invalid_request(format!(
                    "line of {size} bytes is over the limit of {limit} bytes ({key})"
                ))
                .with_data(serde_json::json!({ "limit": limit, "size": size }));
                self.write(conn, jsonrpc::encode_error(None, &error));
            }
            Input::Closed { conn, code } => {
                if let Some(c) = self.conns.remove(&conn) {
                    c.out.close();
                    log::info!(
                        "{} closed{}",
                        match c.kind {
                            ConnKind::Link => "the link",
                            ConnKind::Hub => "a hub connection",
                            _ => "stdin",
                        },
                        code.map_or(String::new(), |c| format!(" (code {c})"))
                    );
                    self.ended(conn, code, now);
                }
            }
            Input::OutputLost { conn, error } => {
                log::error!("could not write stdout: {error}");
                if let Some(c) = self.conns.remove(&conn) {
                    c.out.close();
                    self.ended(conn, None, now);
                }
                self.exit = Some(Exit {
                    code: 1,
                    message: Some(format!(
                        "could not write stdout ({error}): output from then on was lost"
                    )),
                });
            }
            Input::Persisted { seq, result } => {
                self.writing = false;
                match result {
                    Ok(()) => self.host.device_mut().handle_persisted(seq, now),
                    Err(why) => {
                        log::error!("{why}");
                        self.exit = Some(Exit {
                            code: 1,
                            message: Some(format!("could not write the store: {why}")),
                        });
                    }
                }
            }
            Input::PathResolved { request, result } => self
                .host
                .device_mut()
                .handle_path_resolved(request, result, now),
            Input::DirectoryListed { request, result } => self
                .host
                .device_mut()
                .handle_directory_listed(request, result, now),
            Input::FilesFound { request, found } => self
                .host
                .device_mut()
                .handle_files_found(request, found, now),
            Input::CommandsRead { request, read } => self
                .host
                .device_mut()
                .handle_commands_read(request, read, now),
            Input::ChangesChecked { request, changes } => self
                .host
                .device_mut()
                .handle_changes_checked(request, changes, now),
            Input::FilesUndone { request, undone } => self
                .host
                .device_mut()
                .handle_files_undone(request, undone, now),
            Input::MentionsRead { request, read } => {
                self.host
                    .device_mut()
                    .handle_mentions_read(request, Ok(read), now)
            }
            Input::SessionLoaded { request, result } => match result {
                Ok(entries) => self.session_loaded(request, entries, now),
                Err(why) => {
                    // Answering "none" would lose the session: stop, as a failed write does.
                    log::error!("{why}");
                    self.exit = Some(Exit {
                        code: 1,
                        message: Some(format!("could not read the store: {why}")),
                    });
                }
            },
            // A failed read refuses the request that asked, naming why; nothing is lost.
            Input::HistoryRead { request, result } => self
                .host
                .device_mut()
                .handle_history_read(request, result, now),
            // Likewise: the request is refused naming why; the session stays set aside.
            Input::EventsRead { request, result } => self
                .host
                .device_mut()
                .handle_events_read(request, result, now),
            Input::TerminalOutput { id, bytes, _held } => {
                self.host
                    .device_mut()
                    .handle_terminal_output(&id, &bytes, now);
            }
            Input::TerminalExit { id, code } => {
                log::debug!("a terminal's shell ended with {code}");
                self.terminals.ended(&id);
                self.host.device_mut().handle_terminal_exit(&id, code, now);
            }
            Input::Reconfigure {
                remote,
                terminal_integration,
            } => self.reconfigure(remote, terminal_integration, now),
            Input::Io { id, reply } => {
                if self.io.accept(id, &reply) {
                    self.host.handle_io(id, reply, now);
                }
            }
            Input::Models(models) => self.models(models, now),
            Input::Personalization(from) => {
                log::debug!(
                    "personalization: {}",
                    match &from {
                        crate::personalization::FromInstance::NotAvailable =>
                            "config.yaml's (the instance has none available)",
                        crate::personalization::FromInstance::Available(Some(_)) =>
                            "the instance's",
                        crate::personalization::FromInstance::Available(None) =>
                            "none (turned off on the instance)",
                    }
                );
                self.host
                    .engine_mut()
                    .0
                    .set_personalization(|own| from.effective(own));
            }
            Input::StdinPaused(reader) => match self.yielding.as_mut() {
                Some(y) => y.paused = Some(reader),
                None => self.read_stdin(*reader),
            },
            Input::YieldAsked => {
                if let Some(y) = self.yielding.as_mut() {
                    y.asked = true;
                }
            }
            Input::Shutdown => {
                self.exit = Some(Exit {
                    code: 0,
                    message: None,
                })
            }
        }
    }

    /// New `remote:` settings: the core takes them (and restarts the link once idle). Shell
    /// integration is the runtime's: terminals opened from now on follow it, open ones keep
    /// theirs.
    fn reconfigure(&mut self, remote: lembas_core::Remote, terminal_integration: bool, now: Time) {
        if self.terminal_options.integration != terminal_integration {
            self.terminal_options.integration = terminal_integration;
            log::info!(
                "config.yaml changed: terminals opened from now on have shell integration {}",
                if terminal_integration { "on" } else { "off" }
            );
        }
        match self.host.device_mut().reconfigure(remote, now) {
            Ok(false) => log::debug!("config.yaml read again: the remote settings are the same"),
            Ok(true) if self.host.device().relink_pending() => log::info!(
                "config.yaml changed: the link restarts with the new settings once no turn runs"
            ),
            Ok(true) => log::info!("config.yaml changed: the new settings are in force"),
            Err(e) => log::error!("config.yaml not taken, the settings in force stay: {e}"),
        }
    }

    /// The instance's chat models, fetched again: the engine and the device both take them (a
    /// change the hello shows restarts the link once idle, as new settings do).
    fn models(&mut self, models: Vec<lembas_core::config::Model>, now: Time) {
        log::debug!("the instance serves {} chat models", models.len());
        self.host.engine_mut().0.set_models(models.clone());
        if self.host.device_mut().set_models(models, now) {
            log::info!("the instance's model list changed");
        }
    }

    fn session_loaded(&mut self, request: u64, entries: Vec<Entry>, now: Time) {
        let unreadable = self
            .host
            .device_mut()
            .handle_session_loaded(request, entries, now);
        crate::store::log_unreadable(&unreadable);
    }

    /// Drain the host until the device and the engine are quiet, or until an input waits, then
    /// hand the batch of persists to the disk.
    async fn pump(&mut self) {
        loop {
            let now = self.clock.now();
            // A session whose holder has a full queue gets no engine event: its turn waits,
            // and the driver wakes when that queue drains.
            let conns = &self.conns;
            let mut blocked = None;
            let out = self.host.poll_output(now, |conn| {
                let full = conns.get(&conn).filter(|c| c.out.gauge.paused());
                if let Some(c) = full {
                    blocked = Some(c.out.gauge.clone());
                }
                full.is_some()
            });
            let input_waits = match out {
                Some(out) => {
                    self.route(out, now).await;
                    // An input waits (a prompt, a cancel): it is taken now, and the pump goes
                    // on after it. Drained to the end first, an engine whose events are all
                    // ready (the scripted one) ran a turn whole, or to its reader's pause,
                    // before the driver read on: with the store written in the step (in
                    // memory, scratch), 100 turns prompted at once ran one after another.
                    if self.rx.is_empty() {
                        continue;
                    }
                    true
                }
                None => false,
            };
            // Stopped for an input, the driver does not sleep: that input is ready.
            self.blocked = if input_waits { None } else { blocked };
            // The step's frames go to their writers together (see `Outbox`).
            for c in self.conns.values_mut() {
                c.out.hand_over();
            }
            if !self.flush() || input_waits {
                return;
            }
        }
    }

    /// Start writing the batch when no write is under way. Returns whether the device was
    /// told something (an in-memory write is done at once).
    fn flush(&mut self) -> bool {
        if self.writing || self.batch.is_empty() {
            return false;
        }
        let records = std::mem::take(&mut self.batch);
        let seq = self.batch_seq;
        match &mut self.disk {
            Disk::Mem(mem) => {
                mem.apply(&records);
                let now = self.clock.now();
                self.host.device_mut().handle_persisted(seq, now);
                true
            }
            Disk::Redb(store) => {
                self.writing = true;
                let store = store.clone();
                let tx = self.tx.clone();
                log::trace!("committing {} records up to persist {seq}", records.len());
                self.committing = Some(smol::spawn(async move {
                    let result = blocking::unblock(move || store.commit(&records))
                        .await
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Input::Persisted { seq, result }).await;
                }));
                false
            }
            Disk::Scratch(store) => {
                if let Err(why) = store.commit(&records) {
                    log::error!("{why}");
                    self.exit = Some(Exit {
                        code: 1,
                        message: Some(format!("could not write the store: {why}")),
                    });
                    return false;
                }
                let now = self.clock.now();
                self.host.device_mut().handle_persisted(seq, now);
                true
            }
        }
    }

    /// Do `work` on the blocking pool (it reads the disk), then hand the device what `answer`
    /// makes of its result, as an input.
    fn off_thread<T: Send + 'static>(
        &mut self,
        work: impl FnOnce() -> T + Send + 'static,
        answer: impl FnOnce(T) -> Input + Send + 'static,
    ) {
        let tx = self.tx.clone();
        self.reap();
        self.tasks.push(smol::spawn(async move {
            let done = blocking::unblock(work).await;
            let _ = tx.send(answer(done)).await;
        }));
    }

    /// Forget tasks that have ended.
    fn reap(&mut self) {
        self.tasks.retain(|t| !t.is_finished());
    }

    fn write(&mut self, conn: ConnId, frame: Vec<u8>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        log::trace!("-> {}", String::from_utf8_lossy(&frame));
        if let Err(overflow) = c.out.send(frame) {
            // A link client sends requests and reads no answers (the engine's output waits at
            // the pause mark, so only these grow the queue): close rather than grow without
            // bound.
            log::warn!("closing a connection: {overflow}");
            let c = self.conns.remove(&conn).expect("looked up above");
            c.out.abandon(CLOSE_OVERFLOW, overflow.to_string());
            let now = self.clock.now();
            self.ended(conn, None, now);
        }
    }

    /// A connection is gone (its peer closed it, or we gave up on it): the core forgets it,
    /// and when it was stdio the process winds down.
    fn ended(&mut self, conn: ConnId, code: Option<u16>, now: Time) {
        let _ = self.host.device_mut().handle_closed(conn, code, now);
        if Some(conn) == self.stdio {
            self.stdio_done = true;
            // EOF: cancel the running turns, then end once they have reported.
            self.host.engine_mut().cancel_all();
        }
    }

    async fn route(&mut self, out: ShellOutput, now: Time) {
        match out {
            ShellOutput::Send { conn, frame } => self.write(conn, frame),
            ShellOutput::Close { conn, code, reason } => {
                if let Some(c) = self.conns.remove(&conn) {
                    log::info!("closing a connection: {code} {reason}");
                    c.out.close_with(code, reason);
                }
            }
            ShellOutput::Ping { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    log::debug!("the link is quiet: ping");
                    c.out.ping();
                }
            }
            ShellOutput::Effect(effect) => self.effect(effect, now).await,
            ShellOutput::Io(call) => {
                let id = call.id();
                if let Some(reply) = self.io.perform(call) {
                    self.host.handle_io(id, reply, now);
                }
            }
        }
    }

    async fn effect(&mut self, effect: Effect, now: Time) {
        match effect {
            Effect::Dial => match self.dialer.clone() {
                Some(d) => {
                    log::info!("dialing the instance");
                    let tx = self.tx.clone();
                    self.reap();
                    self.tasks.push(smol::spawn(async move {
                        let r = d.dial().await;
                        let _ = tx.send(Input::Dialed(r)).await;
                    }));
                }
                None => self.host.device_mut().handle_dial_failed(
                    DialFailure::Unsupported("this process has no instance to link to".into()),
                    now,
                ),
            },
            Effect::Stop { message } => {
                log::error!("{message}");
                self.exit = Some(Exit {
                    code: 1,
                    message: Some(message),
                });
            }
            Effect::Persist { seq, records } => {
                self.batch.extend(records);
                self.batch_seq = self.batch_seq.max(seq);
            }
            Effect::ResolvePath { request, path } => self.off_thread(
                move || {
                    std::fs::canonicalize(&path)
                        .map_err(|e| e.to_string())
                        .and_then(|p| {
                            if !p.is_dir() {
                                return Err("not a directory".to_string());
                            }
                            p.into_os_string()
                                .into_string()
                                .map_err(|_| "not UTF-8".to_string())
                        })
                },
                move |result| Input::PathResolved { request, result },
            ),
            Effect::ListDirectory {
                request,
                path,
                max_entries,
            } => self.off_thread(
                move || crate::list_dir::list_directory(&path, max_entries),
                move |result| Input::DirectoryListed { request, result },
            ),
            Effect::ReadMentions {
                request,
                project,
                roots,
                mentions,
                max_file_bytes,
                max_entries,
            } => {
                let tools = self.tools.clone();
                self.off_thread(
                    move || {
                        crate::mentions::read_mentions(
                            &tools,
                            &project,
                            &roots,
                            &mentions,
                            max_file_bytes,
                            max_entries,
                        )
                    },
                    move |read| Input::MentionsRead { request, read },
                );
            }
            Effect::SearchFiles {
                request,
                root,
                roots,
                query,
                limit,
                recent,
            } => {
                let tools = self.tools.clone();
                let indexes = self.file_indexes.clone();
                self.off_thread(
                    move || indexes.search(&tools, &root, &roots, &query, limit, &recent),
                    move |found| Input::FilesFound { request, found },
                );
            }
            Effect::ReadCommands {
                request,
                project,
                roots,
                max_files,
                max_file_bytes,
            } => {
                let tools = self.tools.clone();
                let config = self.config_dir.clone();
                self.off_thread(
                    move || {
                        crate::command_files::read_commands(
                            &tools,
                            config.as_deref(),
                            &project,
                            &roots,
                            max_files,
                            max_file_bytes,
                        )
                    },
                    move |read| Input::CommandsRead { request, read },
                );
            }
            Effect::CheckChanges {
                request,
                project,
                roots,
                branch,
            } => {
                let tools = self.tools.clone();
                let timeout = self.review_git_timeout;
                self.off_thread(
                    move || {
                        crate::git_changes::check_changes(
                            &tools,
                            &project,
                            &roots,
                            branch.as_deref(),
                            timeout,
                        )
                    },
                    move |changes| Input::ChangesChecked { request, changes },
                );
            }
            Effect::UndoFiles {
                request,
                session_id,
                turn_id,
                project,
                roots,
            } => {
                let tools = self.tools.clone();
                self.off_thread(
                    move || match &tools.undo {
                        Some(journal) => {
                            journal.undo(&tools, &session_id, &turn_id, &project, &roots)
                        }
                        None => Err("this device has no state directory to keep them in".into()),
                    },
                    move |undone| Input::FilesUndone { request, undone },
                );
            }
            Effect::LoadSession {
                request,
                session_id,
            } => match &self.disk {
                Disk::Mem(mem) => {
                    let entries = mem.session_entries(&session_id);
                    self.session_loaded(request, entries, now);
                }
                // Nothing is set aside without a lasting store: there is nothing to read.
                Disk::Scratch(_) => self.session_loaded(request, Vec::new(), now),
                Disk::Redb(store) => {
                    let store = store.clone();
                    let limits = self.host.device().config().sessions;
                    self.off_thread(
                        move || store.session_entries(&session_id, &limits),
                        move |read| Input::SessionLoaded {
                            request,
                            result: read.map_err(|e| e.to_string()),
                        },
                    );
                }
            },
            Effect::ReadHistory {
                request,
                session_id,
                before,
                limit,
                max_bytes,
            } => match &self.disk {
                Disk::Mem(mem) => {
                    let entries = mem.history(&session_id, before, limit, max_bytes);
                    self.host
                        .device_mut()
                        .handle_history_read(request, Ok(entries), now);
                }
                Disk::Scratch(store) => {
                    let read = store
                        .history(&session_id, before, limit, max_bytes)
                        .map_err(|e| e.to_string());
                    self.host
                        .device_mut()
                        .handle_history_read(request, read, now);
                }
                Disk::Redb(store) => {
                    let store = store.clone();
                    self.off_thread(
                        move || store.history(&session_id, before, limit, max_bytes),
                        move |read| Input::HistoryRead {
                            request,
                            result: read.map_err(|e| e.to_string()),
                        },
                    );
                }
            },
            Effect::ReadEvents {
                request,
                session_id,
            } => match &self.disk {
                Disk::Mem(mem) => {
                    let entries = mem.session_events(&session_id);
                    self.host
                        .device_mut()
                        .handle_events_read(request, Ok(entries), now);
                }
                Disk::Scratch(store) => {
                    let read = store.session_events(&session_id).map_err(|e| e.to_string());
                    self.host
                        .device_mut()
                        .handle_events_read(request, read, now);
                }
                Disk::Redb(store) => {
                    let store = store.clone();
                    self.off_thread(
                        move || store.session_events(&session_id),
                        move |read| Input::EventsRead {
                            request,
                            result: read.map_err(|e| e.to_string()),
                        },
                    );
                }
            },
            Effect::WriteAttachment {
                request,
                session_id,
                file_name,
                bytes,
            } => {
                // Awaited here: the device hears the outcome before the effects after it.
                let dir = self.attachments.join(&session_id);
                let r = blocking::unblock(move || write_attachment(&dir, &file_name, &bytes)).await;
                if let Err(e) = &r {
                    log::warn!("could not write an attachment of {session_id}: {e}");
                }
                let now = self.clock.now();
                self.host.device_mut().handle_attachment_written(
                    request,
                    r.map_err(|e| e.to_string()),
                    now,
                );
            }
            Effect::RemoveAttachments { session_id } => {
                let dir = self.attachments.join(&session_id);
                // A session id is the device's own `ses_…`: never a path of the peer's.
                if !session_id.is_empty() && !session_id.contains(['/', '\\']) && session_id != ".."
                {
                    let r = blocking::unblock(move || match std::fs::remove_dir_all(&dir) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                        r => r,
                    })
                    .await;
                    if let Err(e) = r {
                        log::error!("could not remove the attachments of {session_id}: {e}");
                    }
                    let tools = self.tools.clone();
                    blocking::unblock(move || {
                        if let Some(journal) = &tools.undo {
                            journal.forget_session(&session_id);
                        }
                    })
                    .await;
                }
            }
            Effect::OpenTerminal {
                terminal_id,
                cwd,
                cols,
                rows,
            } => {
                // Awaited here: fork and exec are quick, and the effects after it (its
                // keystrokes, its close) must find it.
                let started = TerminalHost::open(&self.terminal_options, cwd, cols, rows).await;
                let info = started
                    .as_ref()
                    .map(TerminalHost::info)
                    .map_err(Clone::clone);
                if let Err(why) = &info {
                    log::warn!("a terminal did not start: {why}");
                }
                let now = self.clock.now();
                let wanted = self
                    .host
                    .device_mut()
                    .handle_terminal_opened(&terminal_id, info, now);
                let link = self
                    .host
                    .device()
                    .terminals()
                    .find(|(id, _)| *id == terminal_id)
                    .and_then(|(_, conn)| self.conns.get(&conn));
                match (started, link) {
                    (Ok(terminal), Some(link)) if wanted => {
                        let gauge = link.out.gauge.clone();
                        self.terminals
                            .adopt(terminal_id, terminal, gauge, self.tx.clone());
                    }
                    // Its link went while it started: dropping it hangs it up.
                    _ => {}
                }
            }
            Effect::TerminalInput { terminal_id, bytes } => {
                self.terminals.input(&terminal_id, bytes)
            }
            Effect::ResizeTerminal {
                terminal_id,
                cols,
                rows,
            } => self.terminals.resize(&terminal_id, cols, rows),
            Effect::CloseTerminal { terminal_id } => self.terminals.hang_up(&terminal_id),
        }
    }
}

/// The engine, with each turn's start in the log (what ran is then readable after a crash).
struct Logged<E>(E);

impl<E: Engine> Engine for Logged<E> {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        if let EngineCommand::Start(turn) = &command {
            log::debug!("turn {} of {} starts", turn.turn_id, turn.session_id);
        }
        self.0.handle_command(command, now)
    }
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        self.0.poll_event_unless(paused)
    }
    fn poll_timeout(&self) -> Option<Time> {
        self.0.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Time) {
        self.0.handle_timeout(now)
    }
    fn poll_io(&mut self) -> Option<IoCall> {
        self.0.poll_io()
    }
    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.0.handle_io(id, reply, now)
    }
    fn cancel_all(&mut self) {
        self.0.cancel_all()
    }
    fn forget_all(&mut self) {
        self.0.forget_all()
    }
    fn running(&self) -> usize {
        self.0.running()
    }
}

/// Write `bytes` as `dir/file_name` (the directory made 0700); a name that is not a plain file
/// name is refused.
fn write_attachment(dir: &std::path::Path, file_name: &str, bytes: &[u8]) -> std::io::Result<()> {
    if file_name.is_empty() || file_name.contains('/') || file_name == "." || file_name == ".." {
        return Err(std::io::Error::other(format!(
            "`{file_name}` is not a plain file name"
        )));
    }
    crate::dirs::create_private_dir(dir)?;
    std::fs::write(dir.join(file_name), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lembas_core::DeviceConfig;

    fn driver() -> Driver {
        let device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        Driver::new(
            device,
            Disk::Mem(MemStore::default()),
            PathBuf::from("/nonexistent"),
        )
    }

    /// A producer that outruns the driver waits for room: the queue of inputs stops at
    /// `INPUT_CAPACITY`. When the driver ends, the waiting producer is released, not stuck.
    #[test]
    fn a_producer_waits_while_the_driver_is_busy() {
        let driver = driver();
        let tx = driver.sender();
        for _ in 0..INPUT_CAPACITY {
            tx.try_send(Input::Shutdown).unwrap();
        }
        assert!(
            tx.try_send(Input::Shutdown).unwrap_err().is_full(),
            "the queue takes no more than {INPUT_CAPACITY} inputs"
        );
        smol::block_on(async {
            let waiting = smol::spawn({
                let tx = tx.clone();
                async move { tx.send(Input::Shutdown).await }
            });
            future::yield_now().await;
            assert!(!waiting.is_finished(), "the producer waits for room");
            assert_eq!(driver.run().await.code, 0);
            // It ends either way (room freed by the driver, or refused by the closed queue):
            // a hang here is a producer stuck on a driver that will never take its input.
            let _ = waiting.await;
        });
    }

    /// One turn of `run`'s loop: the next input, handled, and the host drained.
    async fn step(driver: &mut Driver) {
        let input = driver.rx.recv().await.expect("an input");
        let now = driver.clock.now();
        driver.handle(input, now);
        driver.pump().await;
    }

    /// An input that waits is taken while a turn streams, not after it: a prompt sent beside
    /// another is answered first when its turn is the shorter, though the other turn's events
    /// are all ready at once (the scripted engine's) and its reader is never behind. Before,
    /// the pump ran the first turn to its end before it read the second prompt.
    #[test]
    fn a_waiting_input_is_taken_while_a_ready_turn_streams() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::fs::canonicalize(dir.path()).unwrap();
        let mut driver = driver();
        let now = driver.clock.now();
        let conn = driver
            .host
            .device_mut()
            .handle_open(ConnKind::Stdio, now)
            .unwrap();
        let (out_tx, out_rx) = channel::unbounded();
        let out = driver.outbox(out_tx, &out_rx, ConnKind::Stdio);
        driver.conns.insert(
            conn,
            Conn {
                out,
                kind: ConnKind::Stdio,
            },
        );
        let inbound = driver.inbound();
        let frame = |v: serde_json::Value| Input::Frame {
            conn,
            bytes: v.to_string().into_bytes(),
            held: inbound.hold(0),
        };
        let tx = driver.sender();
        smol::block_on(async {
            tx.try_send(frame(serde_json::json!({"jsonrpc":"2.0","id":0,
                "method":"initialize","params":{"protocolVersion":1}})))
                .unwrap();
            for id in [1, 2] {
                tx.try_send(frame(serde_json::json!({"jsonrpc":"2.0","id":id,
                    "method":"session/new","params":{"cwd":cwd,"mcpServers":[]}})))
                    .unwrap();
            }
            // Each session's command set is read off the driver's thread (`Effect::ReadCommands`),
            // and a prompt's turn waits behind its session's read: both are told before the
            // prompts, so neither turn starts late by the blocking pool's timing.
            let mut sets_told = 0;
            while sets_told < 2 {
                step(&mut driver).await;
                sets_told += written(&out_rx)
                    .iter()
                    .filter(|v| is_command_set(v))
                    .count();
            }
            let sessions: Vec<String> = driver
                .device()
                .held_sessions(conn)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let prompt = |id: u64, session: &str, text: &str| {
                frame(
                    serde_json::json!({"jsonrpc":"2.0","id":id,"method":"session/prompt",
                    "params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}}),
                )
            };
            // Well below the pause mark: its reader is never behind.
            tx.try_send(prompt(10, &sessions[0], "chunks 200 8"))
                .unwrap();
            tx.try_send(prompt(11, &sessions[1], "say short")).unwrap();
            while !tx.is_empty() || driver.host.engine().running() > 0 {
                step(&mut driver).await;
            }
        });
        let answered: Vec<u64> = written(&out_rx)
            .into_iter()
            .filter_map(|v| {
                v["result"]["stopReason"]
                    .is_string()
                    .then(|| v["id"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(answered, [11, 10], "the short turn ends first");
    }

    /// The frames handed to a connection's writer so far, parsed.
    fn written(out_rx: &channel::Receiver<Outgoing>) -> Vec<serde_json::Value> {
        std::iter::from_fn(|| out_rx.try_recv().ok())
            .flat_map(|o| match o {
                Outgoing::Frames(frames, _) => frames,
                _ => Vec::new(),
            })
            .map(|f| serde_json::from_slice(&f).unwrap())
            .collect()
    }

    fn is_command_set(frame: &serde_json::Value) -> bool {
        frame["params"]["update"]["sessionUpdate"] == "available_commands_update"
    }

    /// A stop while the store commits waits for that commit: the store is free once the
    /// driver has ended, for a device started next in the same process (a restart, the demo's
    /// offline delete). Dropped, the commit went on in the blocking pool, holding the store.
    #[test]
    fn a_stop_waits_for_the_commit_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(&dir.path().join("store.redb")).unwrap());
        let device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        let mut driver = Driver::new(
            device,
            Disk::Redb(store.clone()),
            PathBuf::from("/nonexistent"),
        );
        // Large enough to be under way when the stop is handled, at once after.
        driver.batch = (0..128)
            .map(|i| Record::Put {
                table: lembas_core::store::Table::History,
                key: format!("s/{i:04}"),
                value: "x".repeat(256 * 1024),
            })
            .collect();
        driver.batch_seq = 1;
        assert!(!driver.flush(), "a store's commit is under way, not done");
        // Time for the executor to start the commit in the blocking pool, where a dropped
        // task no longer stops it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        driver.sender().try_send(Input::Shutdown).unwrap();
        assert_eq!(smol::block_on(driver.run()).code, 0);
        assert_eq!(
            Arc::strong_count(&store),
            1,
            "no commit holds the store once the driver has ended"
        );
    }
}
