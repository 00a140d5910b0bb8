//! `lembas`: the LLeMbas device. See `lembas --help`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lembas::config;
use lembas::device::device_config;
use lembas::dirs::Dirs;
use lembas::driver::{Disk, Driver};
use lembas::engine::DeviceEngine;
use lembas::engine_io::Target;
use lembas::link::{Instance, LinkDialer};
use lembas::store::RedbStore;
use lembas::tools::ToolSettings;
use lembas_core::device::Device;
use lembas_core::Time;

/// How long `serve --stdio` waits for the instance's model list before reading the editor.
const MODELS_WAIT: Duration = Duration::from_secs(5);

#[derive(Parser)]
#[command(
    name = "lembas",
    version,
    about = "The LLeMbas device: links this machine to a LLeMbas instance"
)]
struct Cli {
    /// More log lines on stderr (-v debug, -vv trace). Dependencies stay at warn.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Seed the ids and jitter the device makes (tests; default: fresh each run).
    #[arg(long, global = true, hide = true)]
    seed: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check that an instance speaks link protocol 3 and save the login.
    Login {
        /// The instance's address, e.g. https://lembas.example
        url: String,
        /// A file holding the device token (else the LEMBAS_TOKEN environment variable).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Trust this extra certificate authority (PEM) for the instance.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// The device service, in the foreground: link to the instance and keep the link up.
    Link,
    /// Speak plain ACP to an editor.
    Serve {
        /// On stdin/stdout, one message a line.
        #[arg(long, required = true)]
        stdio: bool,
        /// The longest line taken, in bytes (default: the core's frame limit).
        #[arg(long, hide = true)]
        max_frame_bytes: Option<usize>,
    },
    /// Link a device to an in-process test instance on loopback and print what happens.
    #[cfg(feature = "dev")]
    Demo,
    /// A test instance on loopback, driven over stdin/stdout (JSON lines), for the tests of the
    /// wasm bindings. The device token comes from LEMBAS_TOKEN.
    #[cfg(feature = "dev")]
    #[command(hide = true)]
    TestInstance {
        /// Relay a client's WebSocket (/api/devices/relay) to the device's link instead of
        /// running a client in the instance.
        #[arg(long)]
        relay: bool,
    },
    /// The device's sessions (through the running `lembas link`, else in its store).
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Trust a directory: sessions in it may run without asking (`trusted:` in config.yaml).
    Trust {
        /// The directory (resolved: `~` expanded, symlinks followed).
        dir: String,
    },
    /// Stop trusting a directory.
    Untrust { dir: String },
    /// config.yaml's settings.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Set `personality`, `personality_custom` or `instructions` in config.yaml and, logged in to
    /// an instance that keeps the account's personalization, there too.
    Set {
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(lembas::config_set::KEYS))]
        key: String,
        value: String,
    },
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// Id, title, working directory and when each session was last touched.
    List,
    /// Delete a session; the client hears it at once through a running `lembas link`, else
    /// after the next one.
    Delete { id: String },
    /// Delete every session untouched for more than this many days.
    Prune {
        #[arg(long, value_name = "DAYS")]
        older_than: u64,
    },
}

/// glibc gives every thread that allocates an arena of its own (up to 8 a core), and each keeps
/// what was freed in it. The store's commits and path checks run on `blocking`'s pool, so a
/// burst of them (100,000 `session/new`) left ~65 MB resident in arenas; two are plenty for a
/// process whose work is one driver task.
fn bound_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

fn main() -> ExitCode {
    bound_malloc_arenas();
    let cli = Cli::parse();
    if is_demo(&cli.command) && cli.verbose == 0 {
        lembas::logger::init_level(log::LevelFilter::Warn);
    } else {
        lembas::logger::init(cli.verbose);
    }
    match run(cli.command, cli.seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("lembas: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The demo prints a transcript: the device's own log lines stay quiet unless asked for.
fn is_demo(command: &Command) -> bool {
    #[cfg(feature = "dev")]
    if let Command::Demo = command {
        return true;
    }
    let _ = command;
    false
}

fn run(command: Command, seed: Option<u64>) -> Result<(), String> {
    #[cfg(feature = "dev")]
    match command {
        Command::Demo => return lembas::demo::run(&mut std::io::stdout()),
        Command::TestInstance { relay } => return lembas::instance_cli::run(relay),
        _ => {}
    }
    let device_config = |config: &config::Config, connection: Option<String>| {
        let mut d = device_config(config, connection);
        if let Some(seed) = seed {
            d.seed = seed;
        }
        d
    };
    let dirs = Dirs::from_env()?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match command {
        Command::Sessions { command } => {
            let now = lembas::clock::Clock::new().now();
            // A service runs: it owns the store, and its client hears a delete at once.
            if let Some(stream) = lembas::hub::connect(&dirs.hub_socket())? {
                let mut hub = lembas::hub_client::HubClient::new(stream)?;
                return sessions_through_hub(&mut hub, command, now);
            }
            let store = dirs.store_file();
            let delete = |pick: lembas::sessions::Pick| {
                let config = config::load(&dirs.config_file(), home.as_deref())
                    .map_err(|e| e.to_string())?;
                lembas::sessions::delete(
                    &store,
                    &dirs.attachments(),
                    device_config(&config, None),
                    now,
                    pick,
                )
            };
            match command {
                SessionsCommand::List => {
                    let rows = lembas::sessions::list(&store)?;
                    print!("{}", lembas::sessions::render(&rows, now));
                }
                SessionsCommand::Delete { id } => {
                    let deleted = delete(&|rows| {
                        if rows.iter().any(|r| r.id == id) {
                            Ok(vec![id.clone()])
                        } else {
                            Err(format!("no session `{id}` (see `lembas sessions list`)"))
                        }
                    })?;
                    for id in deleted {
                        println!("deleted {id}; the client hears of it on the next link");
                    }
                }
                SessionsCommand::Prune { older_than } => {
                    let deleted =
                        delete(&|rows| Ok(lembas::sessions::stale(rows, older_than, now)))?;
                    print!(
                        "{}",
                        lembas::sessions::render_pruned(&deleted, older_than, None)
                    );
                }
            }
            Ok(())
        }
        Command::Trust { dir } => {
            println!(
                "{}",
                lembas::trust::edit(&dirs.config_file(), &dir, true, home.as_deref())?
            );
            Ok(())
        }
        Command::Config {
            command: ConfigCommand::Set { key, value },
        } => {
            println!(
                "{}",
                lembas::config_set::set(&dirs, &key, &value, home.as_deref())?
            );
            Ok(())
        }
        Command::Untrust { dir } => {
            println!(
                "{}",
                lembas::trust::edit(&dirs.config_file(), &dir, false, home.as_deref())?
            );
            Ok(())
        }
        Command::Login {
            url,
            token_file,
            ca_file,
        } => {
            let token = match token_file {
                Some(p) => {
                    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?
                }
                None => std::env::var("LEMBAS_TOKEN").map_err(|_| {
                    "give the device token with --token-file PATH or LEMBAS_TOKEN".to_string()
                })?,
            };
            let said =
                lembas::login::login(&dirs, &url, &token, ca_file.as_deref(), home.as_deref())?;
            println!("{said}");
            Ok(())
        }
        Command::Link => {
            let config =
                config::load(&dirs.config_file(), home.as_deref()).map_err(|e| e.to_string())?;
            let (login, token) = lembas::login::load(&dirs)?;
            let instance = Instance::parse(&login.url)?;
            let ca = login
                .ca_file
                .as_ref()
                .map(|p| std::fs::read(p).map_err(|e| format!("{p}: {e}")))
                .transpose()?;
            // An editor's `serve --stdio` that found no service holds the store while it runs:
            // the service asks for it (`store_yield`) and waits; the editor's process lets it go
            // at its first moment at rest and relays its editor to this service's hub, with
            // every session the editor made (nothing is lost, nothing is shared by two owners).
            // The request stands until the hub is served: the editor's process waits for it.
            let mut told = false;
            let mut request = None;
            let store = RedbStore::open_waiting(&dirs.store_file(), || {
                if lembas::hub::connect(&dirs.hub_socket())?.is_some() {
                    return Err(format!(
                        "another `lembas link` runs: its hub answers at {}",
                        dirs.hub_socket().display()
                    ));
                }
                if request.is_none() {
                    request = lembas::store_yield::YieldRequest::ask(&dirs.store_file())?;
                }
                if !told {
                    told = true;
                    log::warn!(
                        "the store {} is held by another lembas process (an editor's \
                         `lembas serve --stdio`, or `lembas sessions`); asked for it, and \
                         waiting: an editor hands it over once no turn of its runs",
                        dirs.store_file().display()
                    );
                }
                Ok(())
            })?;
            let dc = device_config(&config, Some(instance.host.clone()));
            let entries = store
                .restore_entries(&dc.sessions)
                .map_err(|e| e.to_string())?;
            let now = lembas::clock::Clock::new().now();
            let device = lembas::store::restore_device(dc, entries, now)?;
            log::info!(
                "store {} ({} sessions)",
                store.path().display(),
                device.session_count()
            );
            let mut driver = Driver::new(device, Disk::Redb(Arc::new(store)), dirs.attachments());
            // Served once the store is this process's: a process that finds the hub finds
            // the service that owns the store.
            driver.serve_hub(lembas::hub::listen(&dirs.hub_socket())?, config.hub);
            // Served: an editor's process that handed the store over finds it now.
            drop(request);
            driver.set_tools(
                ToolSettings::new(&config.tools, &dirs, home.as_deref())
                    .with_undo_limits(config.undo),
            );
            driver.set_review_git_timeout(config.review_git_timeout_ms);
            driver.set_max_indexed_files(config.max_indexed_files);
            let engine = config
                .engine
                .with_device(config.personalization, Some(instance.host.clone()));
            let max_models = engine.max_models();
            driver.set_engine(DeviceEngine::new(engine, Vec::new()));
            driver.set_io_target(Arc::new(Target::new(
                instance.clone(),
                token.clone(),
                ca.as_deref(),
            )?));
            let host = driver.device().config().host.clone();
            driver.set_terminal_options(lembas::terminal_host::TerminalOptions::new(
                config.terminal_integration,
                host,
            ));
            let _reload = smol::spawn(lembas::reload::watch(
                dirs.config_file(),
                home.clone(),
                driver.sender(),
            ));
            let max_frame_bytes = driver.device().config().frames.max_frame_bytes;
            let dialer = LinkDialer::new(instance, token, ca)
                .with_models(driver.sender(), max_models)
                .with_frame_limit(max_frame_bytes);
            driver.start_link(Arc::new(dialer));
            let exit = smol::block_on(driver.run());
            exit_of(exit)
        }
        #[cfg(feature = "dev")]
        Command::Demo | Command::TestInstance { .. } => unreachable!("handled above"),
        Command::Serve {
            stdio: _,
            max_frame_bytes,
        } => {
            let config =
                config::load(&dirs.config_file(), home.as_deref()).map_err(|e| e.to_string())?;
            let mut dc = device_config(&config, None);
            if let Some(m) = max_frame_bytes {
                dc.frames.max_frame_bytes = m;
                // Refused, not made to fit: raising another bound behind the person's back
                // (a whole frame must fit behind a request waiting for its check) would be a
                // limit nobody set.
                dc.validate()
                    .map_err(|e| format!("--max-frame-bytes {m}: {e}"))?;
            }
            // A service runs: the editor is relayed to its hub, and its sessions are the
            // service's (see `hub_relay`).
            let hub = dirs.hub_socket();
            if let Some(stream) = lembas::hub::connect(&hub)? {
                log::info!(
                    "relaying the editor to the lembas service at {}",
                    hub.display()
                );
                return lembas::hub_relay::run(stream, dc.frames.max_frame_bytes);
            }
            let max_line = dc.frames.max_frame_bytes;
            let (device, disk) = match serve_store(&dirs)? {
                Served::Hub(stream) => {
                    log::info!(
                        "relaying the editor to the lembas service at {}",
                        hub.display()
                    );
                    return lembas::hub_relay::run(stream, dc.frames.max_frame_bytes);
                }
                Served::Store(store) => {
                    let entries = store
                        .restore_entries(&dc.sessions)
                        .map_err(|e| e.to_string())?;
                    let now = lembas::clock::Clock::new().now();
                    let device = lembas::store::restore_device(dc, entries, now)?;
                    (device, Disk::Redb(Arc::new(store)))
                }
                Served::Memory => {
                    // Sessions live in memory only: none is set aside (it would be lost), so
                    // past `sessions.max_live` a `session/new` is refused; and no id outlives
                    // the process, so `sessions` is not listed.
                    dc.has_store = false;
                    let device = Device::new(dc, Time(0)).map_err(|e| e.to_string())?;
                    // Their records go to a file of the process's own, gone when it ends: a
                    // session's history is on disk, so the process does not grow with it.
                    let scratch = dirs
                        .store_file()
                        .parent()
                        .ok_or_else(|| "the state directory is not known".to_string())
                        .and_then(|d| RedbStore::scratch(d).map_err(|e| e.to_string()))?;
                    (device, Disk::Scratch(scratch))
                }
            };
            let holds_store = matches!(disk, Disk::Redb(_));
            let mut driver = Driver::new(device, disk, dirs.attachments());
            if holds_store {
                // A `lembas link` started later asks for the store: it gets it, and the editor.
                driver.yield_store_when_asked(dirs.store_file());
            }
            driver.set_tools(
                ToolSettings::new(&config.tools, &dirs, home.as_deref())
                    .with_undo_limits(config.undo),
            );
            driver.set_review_git_timeout(config.review_git_timeout_ms);
            driver.set_max_indexed_files(config.max_indexed_files);
            // Logged in: the engine's requests go to that instance, whose models (and the
            // account's personalization) are fetched while the editor starts; else each request
            // says to log in.
            let login = lembas::login::load(&dirs).ok();
            let instance = login
                .as_ref()
                .map(|(login, _)| Instance::parse(&login.url))
                .transpose()?;
            let engine = config.engine.with_device(
                config.personalization,
                instance.as_ref().map(|i| i.host.clone()),
            );
            let max_models = engine.max_models();
            driver.set_engine(DeviceEngine::new(engine, Vec::new()));
            let mut _models = None;
            if let (Some((login, token)), Some(instance)) = (login, instance) {
                let ca = login
                    .ca_file
                    .as_ref()
                    .map(|p| std::fs::read(p).map_err(|e| format!("{p}: {e}")))
                    .transpose()?;
                driver.set_io_target(Arc::new(Target::new(
                    instance.clone(),
                    token.clone(),
                    ca.as_deref(),
                )?));
                let tx = driver.sender();
                let mut fetch = smol::spawn(async move {
                    let ca = ca.map(Arc::new);
                    lembas::link::send_models(instance, token, ca, max_models, &tx).await
                });
                // The editor's first prompt (and `initialize`'s capabilities) should find the
                // models: stdin is read only once the list is in the driver's queue, ahead of
                // any line, or after MODELS_WAIT, when it goes on arriving in the background.
                let waited = smol::block_on(smol::future::or(
                    async {
                        (&mut fetch).await;
                        false
                    },
                    async {
                        smol::Timer::after(MODELS_WAIT).await;
                        true
                    },
                ));
                if waited {
                    log::warn!(
                        "the instance's model list took more than {} s; the editor is served \
                         meanwhile, and a prompt before it comes finds no model",
                        MODELS_WAIT.as_secs()
                    );
                    _models = Some(fetch);
                }
            }
            driver.open_stdio();
            let (exit, handover) = smol::block_on(driver.run_to_end());
            match handover {
                Some(h) => lembas::handover::relay(h, &hub, &dirs.store_file(), max_line),
                None => exit_of(exit),
            }
        }
    }
}

/// `lembas sessions …` through the running service's hub.
fn sessions_through_hub(
    hub: &mut lembas::hub_client::HubClient,
    command: SessionsCommand,
    now: Time,
) -> Result<(), String> {
    match command {
        SessionsCommand::List => {
            print!("{}", lembas::sessions::render(&hub.list()?, now));
        }
        SessionsCommand::Delete { id } => {
            hub.delete(&id)
                .map_err(|e| format!("{e} (see `lembas sessions list`)"))?;
            println!("deleted {id} through the running service; its client hears of it at once");
        }
        SessionsCommand::Prune { older_than } => {
            let stale = lembas::sessions::stale(&hub.list()?, older_than, now);
            for id in &stale {
                hub.delete(id)?;
            }
            let how = Some("through the running service");
            print!(
                "{}",
                lembas::sessions::render_pruned(&stale, older_than, how)
            );
        }
    }
    Ok(())
}

/// Where `serve --stdio` keeps the editor's sessions when no service answered on the hub.
enum Served {
    /// A service came up meanwhile (it had taken the store, and now answers).
    Hub(std::os::unix::net::UnixStream),
    /// The store, this process's while the editor is attached (a `lembas link` started
    /// meanwhile waits for it).
    Store(RedbStore),
    /// Another editor's `serve --stdio` holds the store: memory only, as before the hub.
    Memory,
}

fn serve_store(dirs: &Dirs) -> Result<Served, String> {
    match RedbStore::open(&dirs.store_file()) {
        Ok(store) => return Ok(Served::Store(store)),
        Err(lembas::store::StoreError::Locked(_)) => {}
        Err(e) => return Err(e.to_string()),
    }
    // A service takes the store first and serves its hub right after: give it a moment.
    for _ in 0..40 {
        if let Some(stream) = lembas::hub::connect(&dirs.hub_socket())? {
            return Ok(Served::Hub(stream));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    log::warn!(
        "the store {} is held by another `lembas serve --stdio`; this editor's sessions live in \
         memory only and end with it",
        dirs.store_file().display()
    );
    Ok(Served::Memory)
}

fn exit_of(exit: lembas::driver::Exit) -> Result<(), String> {
    match (exit.code, exit.message) {
        (0, _) => Ok(()),
        (_, Some(m)) => Err(m),
        (c, None) => Err(format!("stopped (code {c})")),
    }
}
