//! `Pair`: a device and a client joined in memory, with virtual time and a seeded fault model
//! (drop, delay, duplicate and reorder frames; cut the link). As quinn-proto's test `Pair`, it
//! drives both machines until nothing is left to do, and fails on a step bound (a livelock).

use std::collections::{BTreeMap, BTreeSet};

use crate::client::{Client, ClientEvent, ClientOutput};
use crate::config::{ClientConfig, DeviceConfig};
use crate::device::{Burst, ConnId, ConnKind, Device, DialFailure, Effect};
use crate::engine::{Decision, Engine, EngineCommand, Report, TurnStart};
use crate::engine_io::{IoCall, IoId, IoReply};
use crate::host::{self, ShellOutput};
use crate::model::engine::{ModelEngine, ModelEngineConfig};
use crate::rng::Rng;
use crate::scripted::ScriptedEngine;
use crate::testing::connections::Connections;
use crate::testing::fake_instance::FakeInstance;
use crate::testing::fake_os::FakeOs;
use crate::testing::oracle::Conversations;
use crate::testing::persist_order::PersistOrder;
use crate::time::Time;

/// What can go wrong with frames on the link, per frame, in thousandths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub drop_permille: u32,
    pub duplicate_permille: u32,
    /// Each frame is delayed uniformly in `0..=max_delay_ms`; unequal delays reorder frames.
    pub max_delay_ms: u64,
    /// The chance that sending a frame cuts the link instead.
    pub cut_permille: u32,
    /// Drops hit only what the client sends. A link is a stream: it loses nothing it carries
    /// to the client while it lives (the client relies on that to follow a session by seq),
    /// and a frame lost with the link is a cut (`cut_permille`).
    pub drop_only_to_device: bool,
}

impl Faults {
    pub fn none() -> Self {
        Faults::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ToDevice,
    ToClient,
}

/// One frame as it was delivered, for transcripts and assertions.
#[derive(Clone, Debug)]
pub struct Trace {
    pub at: Time,
    pub dir: Dir,
    pub frame: String,
}

#[derive(Debug)]
struct InFlight {
    at: Time,
    seq: u64,
    dir: Dir,
    frame: Vec<u8>,
}

/// The step bound was hit: something keeps producing work without end.
#[derive(Debug, PartialEq, Eq)]
pub struct Livelock(pub usize);

impl std::fmt::Display for Livelock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no quiet after {} steps: livelock", self.0)
    }
}

pub struct Pair {
    pub device: Device,
    /// The fake OS the device runs on: its store (surviving `restart_device`), paths,
    /// attachments and shells.
    pub os: FakeOs,
    pub engine: ScriptedEngine,
    /// The model engine, when the Pair runs it in place of the scripted one
    /// ([`Pair::with_model_engine`]), and the instance and machine it works against.
    pub model: Option<Box<ModelEngine>>,
    pub instance: FakeInstance,
    /// Every turn the engine was asked to start, across restarts, in order.
    pub started: Vec<TurnStart>,
    pub restarts: usize,
    /// Every card decision the engine was told, in order: (toolCallId, decision).
    pub decisions: Vec<(String, Decision)>,
    /// Connections whose reader is behind (their queue past `outbound.pause_bytes`, as a shell
    /// would see it): the sessions they hold get no engine event until they are taken out.
    pub slow_readers: BTreeSet<ConnId>,
    device_config: DeviceConfig,
    pub client: Client,
    pub now: Time,
    pub faults: Faults,
    /// Whether a dial reaches the instance; when false, dials fail as transient.
    pub reachable: bool,
    pub max_steps: usize,
    /// Every frame delivered on the link, in order.
    pub transcript: Vec<Trace>,
    pub client_events: Vec<ClientEvent>,
    pub device_effects: Vec<Effect>,
    /// Closes the client sent, with their code and reason.
    pub client_closes: Vec<(u16, String)>,
    /// Closes the device sent on the link, with their code and reason.
    pub device_closes: Vec<(u16, String)>,
    /// Frames the device wrote on each stdio connection.
    pub stdio_out: BTreeMap<ConnId, Vec<Vec<u8>>>,
    /// The link's writer as a shell's behind its pause mark (device/coalesce.rs): with
    /// `Some(mark)`, what the device writes to the link at one instant goes out as one burst,
    /// each chunk merged into its session's latest frame of its stream once `mark` bytes of the
    /// burst are queued. `None`: every frame as it comes.
    pub link_merge_at: Option<usize>,
    link_burst: Burst,
    pub dials: usize,
    /// Pings sent on the link: by the device, by the client.
    pub pings: (usize, usize),
    /// The link's network drops everything, pings and pongs too, while neither end hears it
    /// close (a NAT that forgot the connection). A new link is not affected.
    black_hole: bool,
    link: Option<ConnId>,
    /// The device's connections (the link and local ones) and dials, checked as they come
    /// and go, as the fuzzer checks them.
    conns: Connections,
    /// The fuzzer's oracle of what is said on each connection, run in every Pair test.
    talk: Conversations,
    /// The fuzzer's check that persist numbers go up, run in every Pair test.
    persists: PersistOrder,
    in_flight: Vec<InFlight>,
    seq: u64,
    rng: Rng,
}

impl Pair {
    pub fn new(device: DeviceConfig, client: ClientConfig, faults: Faults, seed: u64) -> Pair {
        Pair {
            device: Device::new(device.clone(), Time::ZERO).expect("test device config is valid"),
            os: FakeOs::default(),
            engine: ScriptedEngine::new(),
            model: None,
            instance: FakeInstance::default(),
            started: Vec::new(),
            restarts: 0,
            decisions: Vec::new(),
            slow_readers: BTreeSet::new(),
            device_config: device,
            client: Client::new(client, Time::ZERO).expect("test client config is valid"),
            now: Time::ZERO,
            faults,
            reachable: true,
            max_steps: 1_000_000,
            transcript: Vec::new(),
            client_events: Vec::new(),
            device_effects: Vec::new(),
            client_closes: Vec::new(),
            device_closes: Vec::new(),
            stdio_out: BTreeMap::new(),
            link_merge_at: None,
            link_burst: Burst::default(),
            dials: 0,
            pings: (0, 0),
            black_hole: false,
            link: None,
            conns: Connections::default(),
            talk: Conversations::default(),
            persists: PersistOrder::default(),
            in_flight: Vec::new(),
            seq: 0,
            rng: Rng::new(seed ^ 0x5eed),
        }
    }

    /// A device whose remote work is on over `roots`, and a default client, with no faults.
    pub fn default_with_roots(roots: &[&str]) -> Pair {
        Pair::default_with(roots, |_| {})
    }

    /// [`Pair::default_with_roots`], with the device's config changed by `tweak` first.
    pub fn default_with(roots: &[&str], tweak: impl FnOnce(&mut DeviceConfig)) -> Pair {
        let mut d = DeviceConfig::default();
        d.remote.enabled = true;
        d.remote.roots = roots.iter().map(|r| r.to_string()).collect();
        d.remote.trusted = d.remote.roots.clone();
        d.models = vec![crate::config::Model::served("lembas/default")];
        d.host = "devbox".into();
        d.platform = "linux".into();
        tweak(&mut d);
        Pair::new(d, ClientConfig::default(), Faults::none(), 1)
    }

    /// The client prompts `text` (one text block) as turn `turn` of `session`; nothing is
    /// driven yet (the caller drives or settles).
    pub fn prompt_text(&mut self, session: &str, turn: &str, text: &str) {
        self.client
            .prompt(
                session,
                serde_json::json!([{ "type": "text", "text": text }]),
                Some(turn),
                self.now,
            )
            .expect("the client is ready to prompt");
    }

    /// Run the model engine (default settings) on the device's models in place of the scripted
    /// one, against [`Pair::instance`], whose script says what the model answers.
    pub fn with_model_engine(mut self) -> Pair {
        let models = self.device_config.models.clone();
        self.model = Some(Box::new(ModelEngine::new(
            ModelEngineConfig::default(),
            models,
        )));
        self
    }

    /// The device starts linking; drives until quiet.
    pub fn start(&mut self) -> Result<(), Livelock> {
        self.device.start_link(self.now);
        self.drive()
    }

    /// The device process dies and starts again from its store: the link drops, the engine's
    /// runs die with it, and the new device links again.
    pub fn restart_device(&mut self) -> Result<(), Livelock> {
        self.restart_device_with(|_| {})
    }

    /// [`Pair::restart_device`] with the device's config changed by `tweak` first (config.yaml
    /// edited while the device was down).
    pub fn restart_device_with(
        &mut self,
        tweak: impl FnOnce(&mut DeviceConfig),
    ) -> Result<(), Livelock> {
        tweak(&mut self.device_config);
        if self.link.take().is_some() {
            self.in_flight.clear();
            self.link_burst.drain().for_each(drop);
            self.client.handle_link_down(self.now);
        }
        self.stdio_out.clear();
        self.conns.forget();
        self.talk = Conversations::default();
        self.persists = PersistOrder::default();
        // The engine's runs and the PTYs died with the process.
        self.engine.forget_all();
        if let Some(m) = &mut self.model {
            m.forget_all();
        }
        self.instance.forget_all();
        let device = self.os.restart(self.device_config.clone(), self.now);
        self.device = device;
        self.restarts += 1;
        self.device.start_link(self.now);
        self.drive()
    }

    /// The link's connection on the device, while one is up.
    pub fn link(&self) -> Option<ConnId> {
        self.link
    }

    /// Cut the link (a dropped network): both sides hear it, frames in flight are lost.
    pub fn cut(&mut self) -> Result<(), Livelock> {
        if let Some(conn) = self.link.take() {
            self.conns.peer_closed(conn);
            self.in_flight.clear();
            self.link_burst.drain().for_each(drop);
            self.device
                .handle_closed(conn, None, self.now)
                .expect("the pair tracks the link");
            self.client.handle_link_down(self.now);
        }
        self.drive()
    }

    /// The server closes the link with `code` (a 1.x server refusing protocol 3 says 4400).
    pub fn close_from_server(&mut self, code: u16) -> Result<(), Livelock> {
        if let Some(conn) = self.link.take() {
            self.conns.peer_closed(conn);
            self.in_flight.clear();
            self.link_burst.drain().for_each(drop);
            self.device
                .handle_closed(conn, Some(code), self.now)
                .expect("the pair tracks the link");
            self.client.handle_link_down(self.now);
        }
        self.drive()
    }

    /// From now on the link's network drops everything it carries (frames in flight too),
    /// while neither end hears it close. The next link is carried again.
    pub fn black_hole(&mut self) {
        self.black_hole = true;
        self.in_flight.clear();
        self.link_burst.drain().for_each(drop);
    }

    /// Hand the client raw bytes as if the device had sent them (a fake device of another
    /// protocol, say).
    pub fn inject_to_client(&mut self, frame: &[u8]) -> Result<(), Livelock> {
        self.transcript.push(Trace {
            at: self.now,
            dir: Dir::ToClient,
            frame: String::from_utf8_lossy(frame).into_owned(),
        });
        self.client.handle_frame(frame, self.now);
        self.drive()
    }

    /// Send raw bytes to the device on the link as if the client had (no faults applied).
    pub fn inject(&mut self, frame: &[u8]) -> Result<(), Livelock> {
        let conn = self.link.expect("inject needs a link");
        self.transcript.push(Trace {
            at: self.now,
            dir: Dir::ToDevice,
            frame: String::from_utf8_lossy(frame).into_owned(),
        });
        self.heard(conn, frame);
        self.device
            .handle_frame(conn, frame, self.now)
            .expect("the pair tracks the link");
        self.drive()
    }

    /// The device is given `frame` on `conn`: the oracle notes its request id.
    fn heard(&mut self, conn: ConnId, frame: &[u8]) {
        let limits = self.device.config().frames;
        self.talk.heard(conn, frame, &limits);
    }

    /// Open an editor's stdio connection on the device.
    pub fn open_stdio(&mut self) -> ConnId {
        self.open_local(ConnKind::Stdio)
    }

    /// Open a local connection (an editor on stdio, a terminal); its frames collect in
    /// `stdio_out` and are written with [`Pair::stdio`].
    pub fn open_local(&mut self, kind: ConnKind) -> ConnId {
        let conn = self
            .device
            .handle_open(kind, self.now)
            .expect("local connections open at any time");
        self.stdio_out.insert(conn, Vec::new());
        self.conns.opened(conn, kind);
        conn
    }

    /// Write one line on a stdio connection; returns what the device wrote back meanwhile.
    pub fn stdio(&mut self, conn: ConnId, frame: &[u8]) -> Result<Vec<Vec<u8>>, Livelock> {
        let before = self.stdio_out.get(&conn).map_or(0, Vec::len);
        self.heard(conn, frame);
        self.device
            .handle_frame(conn, frame, self.now)
            .expect("the stdio connection is open");
        self.drive()?;
        Ok(self
            .stdio_out
            .get(&conn)
            .map_or(Vec::new(), |v| v[before..].to_vec()))
    }

    /// [`Pair::stdio`], and the answer among what came back: the last frame that is a
    /// response (notifications such as a session's `available_commands_update` may follow it).
    pub fn stdio_answer(&mut self, conn: ConnId, frame: &[u8]) -> Option<serde_json::Value> {
        let out = self.stdio(conn, frame).ok()?;
        out.iter()
            .rev()
            .filter_map(|f| serde_json::from_slice::<serde_json::Value>(f).ok())
            .find(|v| v.get("id").is_some() && v.get("method").is_none())
    }

    /// Move virtual time forward by `ms`, firing every timer and delivering every frame due
    /// on the way.
    pub fn advance(&mut self, ms: u64) -> Result<(), Livelock> {
        let target = self.now.plus_ms(ms);
        let mut rounds = 0usize;
        loop {
            rounds += 1;
            if rounds > self.max_steps {
                // A timer that stays due however often it fires.
                return Err(Livelock(rounds));
            }
            self.drive()?;
            let engine_timeout = match &self.model {
                Some(m) => host::poll_timeout(&self.device, &**m),
                None => host::poll_timeout(&self.device, &self.engine),
            };
            let next = [
                engine_timeout,
                self.client.poll_timeout(),
                self.in_flight.iter().map(|f| f.at).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(at) if at <= target => {
                    self.now = self.now.max(at);
                    let engine = active(&mut self.model, &mut self.engine);
                    host::handle_timeout(&mut self.device, engine, self.now);
                    self.client.handle_timeout(self.now);
                }
                _ => {
                    self.now = target;
                    let engine = active(&mut self.model, &mut self.engine);
                    host::handle_timeout(&mut self.device, engine, self.now);
                    self.client.handle_timeout(self.now);
                    return self.drive();
                }
            }
        }
    }

    /// Drain both machines and deliver frames due now, until nothing is left to do at this
    /// instant. Frames delayed into the future wait for [`Pair::advance`] or [`Pair::settle`].
    pub fn drive(&mut self) -> Result<(), Livelock> {
        let mut steps = 0usize;
        loop {
            steps += 1;
            if steps > self.max_steps {
                return Err(Livelock(steps));
            }
            if let Some((id, reply)) = self.instance.poll_reply() {
                active(&mut self.model, &mut self.engine).handle_io(id, reply, self.now);
                continue;
            }
            let mut engine = Recording {
                engine: active(&mut self.model, &mut self.engine),
                started: &mut self.started,
                decisions: &mut self.decisions,
            };
            let slow = &self.slow_readers;
            let out = host::poll_output(&mut self.device, &mut engine, self.now, |conn| {
                slow.contains(&conn)
            });
            if let Some(out) = out {
                self.route_device(out);
                continue;
            }
            if !self.link_burst.is_empty() {
                self.write_link_burst();
                continue;
            }
            if let Some(out) = self.client.poll_output() {
                self.route_client(out);
                continue;
            }
            if let Some(i) = self.next_due() {
                let f = self.in_flight.remove(i);
                self.deliver(f);
                continue;
            }
            return Ok(());
        }
    }

    /// Drive and advance time until no frame is in flight and no machine has work: quiet.
    pub fn settle(&mut self) -> Result<(), Livelock> {
        self.drive()?;
        while let Some(at) = self.in_flight.iter().map(|f| f.at).min() {
            let ms = at.since(self.now);
            self.advance(ms)?;
        }
        Ok(())
    }

    fn next_due(&self) -> Option<usize> {
        self.in_flight
            .iter()
            .enumerate()
            .filter(|(_, f)| f.at <= self.now)
            .min_by_key(|(_, f)| (f.at, f.seq))
            .map(|(i, _)| i)
    }

    fn deliver(&mut self, f: InFlight) {
        let Some(conn) = self.link else { return };
        self.transcript.push(Trace {
            at: self.now,
            dir: f.dir,
            frame: String::from_utf8_lossy(&f.frame).into_owned(),
        });
        match f.dir {
            Dir::ToDevice => {
                self.heard(conn, &f.frame);
                self.device
                    .handle_frame(conn, &f.frame, self.now)
                    .expect("the pair tracks the link")
            }
            Dir::ToClient => self.client.handle_frame(&f.frame, self.now),
        }
    }

    fn put_in_flight(&mut self, dir: Dir, frame: Vec<u8>) {
        if self.link.is_none() || self.black_hole {
            return;
        }
        let f = self.faults;
        if self.roll(f.cut_permille) {
            let conn = self.link.take().expect("checked above");
            self.conns.peer_closed(conn);
            self.in_flight.clear();
            self.link_burst.drain().for_each(drop);
            self.device
                .handle_closed(conn, None, self.now)
                .expect("the pair tracks the link");
            self.client.handle_link_down(self.now);
            return;
        }
        if (dir == Dir::ToDevice || !f.drop_only_to_device) && self.roll(f.drop_permille) {
            return;
        }
        let copies = if self.roll(f.duplicate_permille) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if f.max_delay_ms == 0 {
                0
            } else {
                self.rng.below(f.max_delay_ms + 1)
            };
            self.seq += 1;
            self.in_flight.push(InFlight {
                at: self.now.plus_ms(delay),
                seq: self.seq,
                dir,
                frame: frame.clone(),
            });
        }
    }

    /// The device is quiet for now: the burst gathered for the link goes out, frame by frame,
    /// each one due now reaching the client before the next is sent: a cut among them loses
    /// the rest, and the client has heard those before it.
    fn write_link_burst(&mut self) {
        let frames: Vec<Vec<u8>> = self.link_burst.drain().collect();
        for frame in frames {
            self.put_in_flight(Dir::ToClient, frame);
            while let Some(i) = self
                .next_due()
                .filter(|&i| self.in_flight[i].dir == Dir::ToClient)
            {
                let f = self.in_flight.remove(i);
                self.deliver(f);
            }
        }
    }

    fn roll(&mut self, permille: u32) -> bool {
        permille > 0 && self.rng.below(1000) < u64::from(permille)
    }

    fn route_device(&mut self, out: ShellOutput) {
        match out {
            ShellOutput::Send { conn, frame } => {
                // The fuzzer's checks of every frame the device writes hold here too.
                let kind = self.conns.written(conn, &"a frame");
                self.talk.said(conn, kind, &frame);
                if Some(conn) == self.link {
                    match self.link_merge_at {
                        Some(mark) => {
                            let behind = self.link_burst.bytes() >= mark;
                            self.link_burst.push(frame, behind);
                        }
                        None => self.put_in_flight(Dir::ToClient, frame),
                    }
                } else if let Some(lines) = self.stdio_out.get_mut(&conn) {
                    lines.push(frame);
                }
            }
            // The device has already let go of a connection it closes.
            ShellOutput::Close { conn, code, reason } => {
                self.conns.device_closed(conn);
                if Some(conn) == self.link && self.black_hole {
                    // The close frame is lost too: only the client's own heartbeat (or the
                    // next link) tells it.
                    self.device_closes.push((code, reason));
                    self.link = None;
                } else if Some(conn) == self.link {
                    self.device_closes.push((code, reason));
                    // The close frame follows what the device sent before it on the same
                    // stream: those frames still reach the client, in order.
                    for frame in self.link_burst.drain() {
                        self.seq += 1;
                        self.in_flight.push(InFlight {
                            at: self.now,
                            seq: self.seq,
                            dir: Dir::ToClient,
                            frame,
                        });
                    }
                    let mut sent: Vec<InFlight> = std::mem::take(&mut self.in_flight)
                        .into_iter()
                        .filter(|f| f.dir == Dir::ToClient)
                        .collect();
                    sent.sort_by_key(|f| (f.at, f.seq));
                    for f in sent {
                        self.deliver(f);
                    }
                    self.link = None;
                    self.client.handle_link_down(self.now);
                }
            }
            // A ping and its pong cross at once (control frames are small and go first), unless
            // the network is a black hole; each end hears the other.
            ShellOutput::Ping { conn } => {
                self.conns.written(conn, &"a ping");
                if Some(conn) == self.link {
                    self.pings.0 += 1;
                    if !self.black_hole {
                        self.client.handle_activity(self.now);
                        self.device
                            .handle_activity(conn, self.now)
                            .expect("the pair tracks the link");
                    }
                }
            }
            ShellOutput::Effect(effect) => self.effect(effect),
            ShellOutput::Io(call) => {
                assert!(
                    self.model.is_some(),
                    "the scripted engine asked for I/O: {call:?}"
                );
                self.instance.perform(call);
            }
        }
    }

    /// Perform an effect: the network's (`Dial`) here, the rest on the fake OS.
    fn effect(&mut self, effect: Effect) {
        if let Effect::Persist { seq, .. } = &effect {
            self.persists.asked(*seq);
        }
        let Some(effect) = self.os.perform(&mut self.device, effect, self.now) else {
            return;
        };
        match effect {
            Effect::Dial => {
                self.dials += 1;
                self.conns.dial_asked();
                self.device_effects.push(Effect::Dial);
                if self.reachable {
                    let conn = self
                        .device
                        .handle_open(ConnKind::Link, self.now)
                        .expect("the device asked to dial");
                    self.conns.opened(conn, ConnKind::Link);
                    if self.black_hole {
                        // The old link's client side never heard it go: the new one replaces
                        // it, as an instance does.
                        self.black_hole = false;
                        self.client.handle_link_down(self.now);
                    }
                    self.link = Some(conn);
                    self.client.handle_link_up(self.now);
                } else {
                    self.conns.dial_failed();
                    self.device
                        .handle_dial_failed(DialFailure::Transient, self.now);
                }
            }
            // Nothing comes back for the rest the OS hands back: noted for the tests.
            e => {
                if matches!(e, Effect::Stop { .. }) {
                    self.conns.stopped();
                }
                self.device_effects.push(e)
            }
        }
    }

    fn route_client(&mut self, out: ClientOutput) {
        match out {
            ClientOutput::Send(frame) => self.put_in_flight(Dir::ToDevice, frame),
            ClientOutput::Ping => {
                if let Some(conn) = self.link {
                    self.pings.1 += 1;
                    if !self.black_hole {
                        self.device
                            .handle_activity(conn, self.now)
                            .expect("the pair tracks the link");
                        self.client.handle_activity(self.now);
                    }
                }
            }
            ClientOutput::Close { code, reason } if self.black_hole => {
                // Lost on the way: the device does not hear it; the client side is down.
                self.client_closes.push((code, reason));
                self.client.handle_link_down(self.now);
            }
            ClientOutput::Close { code, reason } => {
                self.client_closes.push((code, reason));
                if let Some(conn) = self.link.take() {
                    self.conns.peer_closed(conn);
                    self.in_flight.clear();
                    self.link_burst.drain().for_each(drop);
                    self.device
                        .handle_closed(conn, Some(code), self.now)
                        .expect("the pair tracks the link");
                    self.client.handle_link_down(self.now);
                }
            }
            ClientOutput::Event(e) => self.client_events.push(e),
        }
    }

    /// Give the device one input now, in the vocabulary the transcripts and the JS class
    /// speak, then drive until quiet; returns what the input gave. The Pair's fake OS still
    /// answers the device's effects itself (dials among them), so an input is for what comes
    /// from outside: a `reconfigure`, a `delete_session`, a frame on a local connection. A
    /// local connection opened here collects its frames in `stdio_out`; the link closed here
    /// is the server closing it (the client hears it go, as with
    /// [`Pair::close_from_server`]).
    pub fn device_input(
        &mut self,
        input: crate::device::Input,
    ) -> Result<Result<crate::device::Handled, crate::device::Refused>, Livelock> {
        if let crate::device::Input::Closed { conn, .. } = input {
            if self.link == Some(conn) {
                self.link = None;
                self.in_flight.clear();
                self.link_burst.drain().for_each(drop);
                self.client.handle_link_down(self.now);
            }
            self.conns.peer_closed(conn);
        }
        let opening = match &input {
            crate::device::Input::Open { kind } => Some(*kind),
            crate::device::Input::Frame { conn, frame } => {
                self.heard(*conn, frame);
                None
            }
            _ => None,
        };
        let handled = self.device.handle(input, self.now);
        if let (Ok(crate::device::Handled::Opened(conn)), Some(kind)) = (&handled, opening) {
            self.stdio_out.entry(*conn).or_default();
            self.conns.opened(*conn, kind);
        }
        self.drive()?;
        Ok(handled)
    }

    /// Give the client one input now (a call, a prompt, a delete, ...), then drive until quiet;
    /// returns what it gave. The link's own comings and goings are the Pair's to report.
    pub fn client_input(
        &mut self,
        input: crate::client::Input,
    ) -> Result<Result<crate::client::Handled, crate::client::CallError>, Livelock> {
        let handled = self.client.handle(input, self.now);
        self.drive()?;
        Ok(handled)
    }

    /// Call `method` through the client, settle, and return its answer (the tests' staple).
    /// Panics when the client refuses the call or no answer comes.
    pub fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, crate::jsonrpc::RpcError> {
        let id = self
            .client
            .call(method, &params, self.now)
            .expect("the call is allowed");
        self.settle().expect("the pair settles");
        self.client_events
            .iter()
            .rev()
            .find_map(|e| match e {
                ClientEvent::Answer { id: i, outcome, .. } if *i == id => Some(outcome.clone()),
                _ => None,
            })
            .expect("the call was answered")
    }

    /// Every answer the client heard to its prompt `turn` (a retried prompt may be answered
    /// more than once), in order.
    pub fn answers(&self, turn: &str) -> Vec<Result<serde_json::Value, crate::jsonrpc::RpcError>> {
        self.client_events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::PromptAnswered {
                    turn_id, outcome, ..
                } if turn_id == turn => Some(outcome.clone()),
                _ => None,
            })
            .collect()
    }

    /// The cards the client was put that `method` carries (`wire::event::card::PERMISSION`,
    /// ...), in order: the request to answer and the card.
    #[cfg(feature = "typed-events")]
    pub fn cards(
        &self,
        method: &str,
    ) -> Vec<(crate::jsonrpc::Id, crate::wire::event::card::CardParams)> {
        self.client_events
            .iter()
            .filter_map(ClientEvent::card)
            .filter(|(_, card)| card.method() == method)
            .map(|(id, card)| (id.clone(), card.clone()))
            .collect()
    }

    /// How many times the engine was told to start turn `turn`.
    pub fn starts(&self, turn: &str) -> usize {
        self.started.iter().filter(|t| t.turn_id == turn).count()
    }

    /// Open a session in `cwd` through the client; its id.
    pub fn new_session(&mut self, cwd: &str) -> String {
        let r = self
            .call("session/new", serde_json::json!({ "cwd": cwd }))
            .expect("session/new succeeds");
        r["sessionId"].as_str().expect("a session id").to_string()
    }

    /// The frames the device sent on the link, parsed, in the order delivered.
    pub fn frames_to_client(&self) -> Vec<serde_json::Value> {
        self.frames(Dir::ToClient)
    }

    pub fn frames_to_device(&self) -> Vec<serde_json::Value> {
        self.frames(Dir::ToDevice)
    }

    fn frames(&self, dir: Dir) -> Vec<serde_json::Value> {
        self.transcript
            .iter()
            .filter(|t| t.dir == dir)
            .filter_map(|t| serde_json::from_str(&t.frame).ok())
            .collect()
    }
}

/// The engine the device runs: the model engine when the Pair has one. (A function of the two
/// fields, not a method, so the rest of the Pair can be borrowed beside it.)
fn active<'a>(
    model: &'a mut Option<Box<ModelEngine>>,
    scripted: &'a mut ScriptedEngine,
) -> &'a mut dyn Engine {
    match model {
        Some(m) => &mut **m,
        None => scripted,
    }
}

/// The Pair's engine as the host loop sees it, with every turn started and every card
/// decision it was told noted for the tests.
struct Recording<'a> {
    engine: &'a mut dyn Engine,
    started: &'a mut Vec<TurnStart>,
    decisions: &'a mut Vec<(String, Decision)>,
}

impl Engine for Recording<'_> {
    fn handle_command(&mut self, command: EngineCommand, now: Time) {
        match &command {
            EngineCommand::Start(turn) => self.started.push((**turn).clone()),
            EngineCommand::Decide {
                tool_call_id,
                decision,
                ..
            } => self
                .decisions
                .push((tool_call_id.clone(), decision.clone())),
            EngineCommand::Cancel { .. } | EngineCommand::Steer { .. } => {}
        }
        self.engine.handle_command(command, now)
    }
    fn poll_event_unless(&mut self, paused: &mut dyn FnMut(&str) -> bool) -> Option<Report> {
        self.engine.poll_event_unless(paused)
    }
    fn poll_timeout(&self) -> Option<Time> {
        self.engine.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Time) {
        self.engine.handle_timeout(now)
    }
    fn poll_io(&mut self) -> Option<IoCall> {
        self.engine.poll_io()
    }
    fn handle_io(&mut self, id: IoId, reply: IoReply, now: Time) {
        self.engine.handle_io(id, reply, now)
    }
    fn cancel_all(&mut self) {
        self.engine.cancel_all()
    }
    fn forget_all(&mut self) {
        self.engine.forget_all()
    }
    fn running(&self) -> usize {
        self.engine.running()
    }
}
