//! The Gherkin scenarios in `features/features/*.feature`, run by cucumber without tokio:
//! `cargo test --test features` (libtest flags such as `--test-threads` are accepted and
//! ignored). Exits non-zero when a step fails, is skipped (no step definition matches it) or a
//! feature file does not parse, and ends with a plain `N passed, M failed` line (scenarios).

mod steps;

use std::fmt;

use cucumber::cli::Parser as _;
use cucumber::writer::Stats as _;
use cucumber::World as _;
use lembas_core::client::{CallError, Client, ClientOutput};
use lembas_core::device::ConnId;
use lembas_core::jsonrpc::Id;
use lembas_core::testing::{Dir, Faults, Pair};
use lembas_core::{ClientConfig, DeviceConfig};

/// One scenario's state: the device and client joined in memory, and what the steps remember.
#[derive(cucumber::World)]
#[world(init = Self::new)]
pub struct LinkWorld {
    /// The device's configuration, set by `Given` steps until the pair is built from it.
    pub device_config: DeviceConfig,
    pub pair: Option<Pair>,
    /// The pair runs the model engine against a fake instance, not the scripted engine.
    pub model_engine: bool,
    /// An editor's stdio connection on the device, once opened.
    pub editor: Option<ConnId>,
    /// The frames the device answered the last thing a step sent (on the link or on stdio).
    pub answers: Vec<String>,
    /// What the last `Client::call` returned, and how many frames were sent before it (the
    /// transcript's length, or the lone client's output count).
    pub call: Option<Result<Id, CallError>>,
    pub sent_before_call: usize,
    /// How many dials the device had made when a step started counting.
    pub dials_before: usize,
    /// A client on its own, fed frames by hand, and everything it asked for (sends, closes,
    /// events): for the client's side of a handshake with a device the pair cannot be.
    pub lone_client: Option<Client>,
    pub lone_outputs: Vec<ClientOutput>,
    /// The session the link's client opened (`a client with a session on the device`).
    pub session: Option<String>,
    /// A terminal's connection on the device, once opened.
    pub terminal: Option<ConnId>,
    /// A session an editor or a terminal opened on its own connection.
    pub local_session: Option<String>,
    /// Remote terminals the client opened (`_lembas/terminal/open`), in order.
    pub terminals: Vec<String>,
    /// The answer to the last `_lembas/terminal/open`.
    pub opened: Option<Result<serde_json::Value, lembas_core::jsonrpc::RpcError>>,
    /// The last seq of the session the client heard, noted before a cut.
    pub noted_seq: Option<u64>,
}

impl LinkWorld {
    fn new() -> Self {
        let mut device_config = DeviceConfig::default();
        device_config.host = "devbox".into();
        device_config.platform = "linux".into();
        LinkWorld {
            device_config,
            pair: None,
            model_engine: false,
            editor: None,
            answers: Vec::new(),
            call: None,
            sent_before_call: 0,
            dials_before: 0,
            lone_client: None,
            lone_outputs: Vec::new(),
            session: None,
            terminal: None,
            local_session: None,
            terminals: Vec::new(),
            opened: None,
            noted_seq: None,
        }
    }

    /// The pair, built from the configuration on first use (the device has not linked yet).
    pub fn pair(&mut self) -> &mut Pair {
        let config = &self.device_config;
        let model_engine = self.model_engine;
        self.pair.get_or_insert_with(|| {
            let pair = Pair::new(config.clone(), ClientConfig::default(), Faults::none(), 1);
            if model_engine {
                pair.with_model_engine()
            } else {
                pair
            }
        })
    }

    /// The pair, which an earlier step must have built.
    pub fn built(&self) -> &Pair {
        self.pair
            .as_ref()
            .expect("no device yet: a step before this one must set up the pair")
    }

    /// The device's configuration, which may change only before the pair is built.
    pub fn config_mut(&mut self) -> &mut DeviceConfig {
        assert!(
            self.pair.is_none(),
            "the device is already running: configure it before it links or opens stdio"
        );
        &mut self.device_config
    }

    /// Frames delivered on the link in one direction, raw, with their index in the transcript.
    pub fn link_frames(&self, dir: Dir) -> Vec<(usize, String)> {
        self.built()
            .transcript
            .iter()
            .enumerate()
            .filter(|(_, t)| t.dir == dir)
            .map(|(i, t)| (i, t.frame.clone()))
            .collect()
    }
}

impl fmt::Debug for LinkWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("LinkWorld");
        if let Some(pair) = &self.pair {
            d.field("now", &pair.now)
                .field("link", &pair.link())
                .field("client_ready", &pair.client.is_ready())
                .field("dials", &pair.dials)
                .field("device_effects", &pair.device_effects)
                .field("client_closes", &pair.client_closes)
                .field("transcript", &pair.transcript);
        }
        d.field("editor", &self.editor)
            .field("terminal", &self.terminal)
            .field("session", &self.session)
            .field("local_session", &self.local_session)
            .field("answers", &self.answers)
            .field("call", &self.call)
            .field("lone_outputs", &self.lone_outputs)
            .finish()
    }
}

fn main() {
    let opts =
        cucumber::cli::Opts::<_, _, _, cucumber::cli::Empty>::try_parse().unwrap_or_default();
    let features = concat!(env!("CARGO_MANIFEST_DIR"), "/features");
    let writer = futures_lite::future::block_on(
        LinkWorld::cucumber()
            .fail_on_skipped()
            .with_cli(opts)
            .run(features),
    );
    let scenarios = writer.inner_writer().scenarios_stats();
    let failed = scenarios.failed + scenarios.skipped;
    let broken = writer.execution_has_failed()
        || writer.skipped_steps() > 0
        || failed > 0
        || scenarios.total() == 0;
    println!("{} passed, {} failed", scenarios.passed, failed);
    if broken {
        std::process::exit(1);
    }
}
