//! `DeviceDriver`: a device and its engine (joined by the core's host loop, see
//! [`DeviceLoop`]) over the instance link a JS `dial()` makes, with one `setTimeout`, and a
//! store in JS (`{ entries(), apply(records) }`, IndexedDB in a browser) or none (the device's
//! own state, acknowledged at once). With a store, a session set aside from memory
//! (`sessions.max_live`) is read back through `entries()` when a client names it again; without
//! one, no session is set aside and `session/new` is refused past the bound.
//!
//! The engine is the scripted one, or with `options.model` the model engine, whose HTTP goes
//! to the instance through `fetch` ([`InstanceHttp`]) and whose attachments are read back
//! through `options.readAttachment`; the instance's model list is fetched before each dial, so
//! the link's hello lists it.
//!
//! Backpressure: while the link's socket buffers `outbound.pause_bytes` or more
//! (`bufferedAmount`, plus frames not yet handed to it), the sessions it holds get no engine
//! event and their turns wait; the driver looks again every [`DRAIN_CHECK_MS`]. A frame that
//! would take the socket's buffer past `outbound.max_bytes` (a client that sends requests and
//! reads no answers) closes the link instead, as the native driver does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use lembas_core::backlog::{Overflow, CLOSE_OVERFLOW};
use lembas_core::device::{ConnId, ConnKind, Device, DialFailure, Effect, TurnPhase, Unreadable};
use lembas_core::engine_io::{IoCall, IoReply};
use lembas_core::store::{Entry, Record};
use lembas_core::{DeviceConfig, Time};

use crate::attachment_read;
use crate::clock::Clock;
use crate::device_loop::{DeviceAction, DeviceLoop};
use crate::engine::EngineChoice;
use crate::instance_http::{self, InstanceHttp, ModelOptions, ModelsLimits, Reply};
use crate::js::{self, err, Func};
use crate::json;
use crate::queue::Queue;
use crate::socket::{Socket, SocketEvent};
use crate::timer::Timer;

const OPTIONS: &[&str] = &[
    "config",
    "dial",
    "store",
    "resolvePath",
    "onStop",
    "onEffect",
    "clock",
    "model",
    "readAttachment",
    "onLog",
    "replies",
];

/// A store in JS: `entries()` once at start-up, `apply(records)` for every persist (it may
/// return a promise; the device hears `persisted` once it settles).
struct JsStore {
    object: JsValue,
    entries: Func,
    apply: Func,
}

struct Hooks {
    dial: Func,
    store: Option<JsStore>,
    resolve_path: Option<Func>,
    on_stop: Option<Func>,
    on_effect: Option<Func>,
    read_attachment: Option<Func>,
    on_log: Option<Func>,
}

struct Options {
    config: DeviceConfig,
    hooks: Hooks,
    clock: Clock,
    model: Option<ModelOptions>,
    /// The scripted engine's scripts for the next turns, one each (`ScriptedEngine::set_replies`).
    replies: Vec<String>,
}

fn options(o: &JsValue) -> Result<Options, JsValue> {
    if !o.is_object() {
        return Err(err("DeviceDriver needs options: { dial, config?, store?, ... }").into());
    }
    js::known_members(o, OPTIONS, "DeviceDriverOptions")?;
    let config = json::device_config(js::from_js(&js::member(o, "config"))?).map_err(err)?;
    let dial = js::function(o, "dial", "options.dial")?
        .ok_or_else(|| err("options.dial is needed: it makes the socket of the instance link"))?;
    let store = js::member(o, "store");
    let store = if store.is_undefined() || store.is_null() {
        None
    } else {
        let method = |name: &str| {
            js::function(&store, name, &format!("options.store.{name}"))?
                .ok_or_else(|| err(format!("options.store needs {name}()")))
        };
        Some(JsStore {
            entries: method("entries")?,
            apply: method("apply")?,
            object: store,
        })
    };
    Ok(Options {
        config,
        hooks: Hooks {
            dial,
            store,
            resolve_path: js::function(o, "resolvePath", "options.resolvePath")?,
            on_stop: js::function(o, "onStop", "options.onStop")?,
            on_effect: js::function(o, "onEffect", "options.onEffect")?,
            read_attachment: js::function(o, "readAttachment", "options.readAttachment")?,
            on_log: js::function(o, "onLog", "options.onLog")?,
        },
        clock: Clock::new(js::function(o, "clock", "options.clock")?),
        model: instance_http::model_options(&js::member(o, "model"))?,
        replies: replies(&js::member(o, "replies"))?,
    })
}

/// `options.replies`: an array of scripts (absent: none).
fn replies(v: &JsValue) -> Result<Vec<String>, JsValue> {
    if v.is_undefined() {
        return Ok(Vec::new());
    }
    let what = "options.replies (the scripted engine's script for each prompt in turn)";
    Ok(json::read::<Vec<String>>(what, js::from_js(v)?).map_err(err)?)
}

fn entries(v: &JsValue) -> Result<Vec<Entry>, JsValue> {
    Ok(json::read::<Vec<Entry>>("store entries", js::from_js(v)?).map_err(err)?)
}

struct Link {
    attempt: u64,
    conn: ConnId,
    socket: Rc<Socket>,
}

struct State {
    run: DeviceLoop,
    unreadable: Vec<Unreadable>,
    stopped: bool,
    /// Dials made so far: each socket's listeners know theirs, so a late event of an old
    /// socket finds nothing.
    attempts: u64,
    dialing: Option<(u64, Rc<Socket>)>,
    link: Option<Link>,
    /// The last pump held a session back (its link was behind): look again in
    /// [`DRAIN_CHECK_MS`].
    held_back: bool,
}

/// How soon to look again at a link that was behind. A JS socket has no event for when its
/// `bufferedAmount` drains, so the driver polls it while (and only while) a session waits on
/// it; a page's socket drains at network speed, and this is a few frames' time on a fast one.
const DRAIN_CHECK_MS: u64 = 20;

/// The model engine's way to the instance.
struct Instance {
    http: Rc<InstanceHttp>,
    models: ModelsLimits,
    /// A model list is being fetched; the dial waits for it.
    fetching_models: Cell<bool>,
}

struct Shared {
    clock: Clock,
    hooks: Hooks,
    instance: Option<Instance>,
    state: RefCell<State>,
    queue: Queue<DeviceAction>,
    /// Bytes of the frames in `queue` not yet handed to the socket: behind the link as much as
    /// its `bufferedAmount`.
    unsent: Cell<usize>,
    timer: Timer,
}

pub struct DeviceDriver {
    shared: Rc<Shared>,
}

impl DeviceDriver {
    /// A driver whose store (if any) reads its entries at once.
    pub fn new(options_object: &JsValue) -> Result<DeviceDriver, JsValue> {
        let o = options(options_object)?;
        let entries = match &o.hooks.store {
            None => Vec::new(),
            Some(store) => {
                let v = store.entries.call0(&store.object)?;
                if js::is_thenable(&v) {
                    return Err(err(
                        "options.store.entries() gave a promise: open a driver over an \
                         asynchronous store with DeviceDriver.open",
                    )
                    .into());
                }
                entries(&v)?
            }
        };
        DeviceDriver::build(o, entries)
    }

    /// A promise of a driver whose store's `entries()` may be asynchronous (IndexedDB); `wrap`
    /// makes the JS object it resolves to. Any refusal rejects it.
    pub fn open<T: Into<JsValue>>(
        options_object: &JsValue,
        wrap: impl FnOnce(DeviceDriver) -> T + 'static,
    ) -> js_sys::Promise {
        Self::opening(options_object, wrap).unwrap_or_else(|e| js::rejected(&e))
    }

    fn opening<T: Into<JsValue>>(
        options_object: &JsValue,
        wrap: impl FnOnce(DeviceDriver) -> T + 'static,
    ) -> Result<js_sys::Promise, JsValue> {
        let o = options(options_object)?;
        let read = match &o.hooks.store {
            None => JsValue::NULL,
            Some(store) => store.entries.call0(&store.object)?,
        };
        let in_js = o.hooks.store.is_some();
        let build = js::once_returning(move |read| {
            let entries = if in_js { entries(&read)? } else { Vec::new() };
            Ok(wrap(DeviceDriver::build(o, entries)?).into())
        });
        Ok(js::when_settled(&read, build, &JsValue::UNDEFINED))
    }

    fn build(mut o: Options, entries: Vec<Entry>) -> Result<DeviceDriver, JsValue> {
        let now = o.clock.now();
        o.config.has_store = o.hooks.store.is_some();
        let (device, unreadable) = Device::restore(o.config, entries, now).map_err(err)?;
        let engine = match &o.model {
            Some(m) => EngineChoice::Model(m.engine.clone()),
            None => EngineChoice::Scripted,
        };
        let mut run = DeviceLoop::new(
            device,
            o.hooks.store.is_some(),
            o.hooks.resolve_path.is_some(),
            engine,
        );
        if !o.replies.is_empty() && !run.set_replies(o.replies) {
            return Err(err(
                "options.replies scripts the scripted engine, and options.model answers with the \
                 instance's models instead: give one or the other",
            )
            .into());
        }
        let instance = o.model.map(|m| Instance {
            http: Rc::new(InstanceHttp::new(m.instance)),
            models: m.models,
            fetching_models: Cell::new(false),
        });
        Ok(DeviceDriver {
            shared: Rc::new(Shared {
                clock: o.clock,
                hooks: o.hooks,
                instance,
                state: RefCell::new(State {
                    run,
                    unreadable,
                    stopped: false,
                    attempts: 0,
                    dialing: None,
                    link: None,
                    held_back: false,
                }),
                queue: Queue::default(),
                unsent: Cell::new(0),
                timer: Timer::default(),
            }),
        })
    }

    /// Start keeping the instance link up (it dials at once).
    pub fn start(&self) {
        self.shared
            .input(|s, now| s.run.device_mut().start_link(now));
    }

    /// Stop for good: close the link, abort the engine's requests (and a model list being
    /// fetched), clear the timer, take no more input.
    pub fn stop(&self) {
        let link = {
            let mut s = self.shared.state.borrow_mut();
            s.stopped = true;
            s.link.take()
        };
        self.shared.timer.clear();
        if let Some(i) = &self.shared.instance {
            i.http.abort_all();
        }
        if let Some(link) = link {
            link.socket.close(1000, "stopped");
        }
    }

    /// Delete a session on the device's own account; the client hears of it now or on the
    /// next link. Returns whether there was such a session.
    pub fn delete_session(&self, session_id: &str) -> bool {
        self.shared
            .input(|s, now| s.run.device_mut().delete_session(session_id, now))
            .unwrap_or(false)
    }

    /// The store entries the device could not read at start-up, as `{ table, key, why }`.
    pub fn unreadable(&self) -> JsValue {
        let v = json::out(&self.shared.state.borrow().unreadable);
        js::to_js(&v)
    }

    pub fn session_count(&self) -> usize {
        self.shared.state.borrow().run.device().session_count()
    }

    pub fn turn_state(&self, session_id: &str, turn_id: &str) -> Option<TurnPhase> {
        self.shared
            .state
            .borrow()
            .run
            .device()
            .turn_state(session_id, turn_id)
    }

    /// Whether the device gave up linking (4400, a refused token, an unsupported server).
    pub fn link_stopped(&self) -> bool {
        self.shared.state.borrow().run.device().link_stopped()
    }

    /// The answer to an `open_terminal` effect: `{ shell, integration }` or `{ error }`.
    /// Returns whether the device still wants the terminal (`false`: hang it up).
    pub fn terminal_opened(&self, terminal_id: &str, started: &JsValue) -> Result<bool, JsValue> {
        let started = json::terminal_start(js::from_js(started)?).map_err(err)?;
        Ok(self
            .shared
            .input(|s, now| {
                s.run
                    .device_mut()
                    .handle_terminal_opened(terminal_id, started, now)
            })
            .unwrap_or(false))
    }

    /// Bytes a terminal's shell wrote.
    pub fn terminal_output(&self, terminal_id: &str, data: &JsValue) -> Result<(), JsValue> {
        let data = js::bytes(data)?;
        self.shared.input(|s, now| {
            s.run
                .device_mut()
                .handle_terminal_output(terminal_id, &data, now)
        });
        Ok(())
    }

    /// A terminal's shell ended with `code`.
    pub fn terminal_exit(&self, terminal_id: &str, code: i32) {
        self.shared.input(|s, now| {
            s.run
                .device_mut()
                .handle_terminal_exit(terminal_id, code, now)
        });
    }
}

impl Shared {
    /// Feed the device one input (none once stopped), then perform what it and the engine
    /// asked for. `None` when stopped.
    fn input<R>(self: &Rc<Self>, f: impl FnOnce(&mut State, Time) -> R) -> Option<R> {
        let now = self.clock.now();
        let r = {
            let mut s = self.state.borrow_mut();
            if s.stopped {
                return None;
            }
            let r = f(&mut s, now);
            let mut out = Vec::new();
            let State {
                run,
                link,
                held_back,
                ..
            } = &mut *s;
            let (link, unsent) = (&*link, self.unsent.get());
            let backlog = |conn| match link {
                Some(l) if l.conn == conn => l.socket.buffered_amount() + unsent,
                _ => 0,
            };
            *held_back = run.pump(now, backlog, &mut out);
            let made: usize = out
                .iter()
                .map(|a| match a {
                    DeviceAction::Send { frame, .. } => frame.len(),
                    _ => 0,
                })
                .sum();
            self.unsent.set(unsent + made);
            self.queue.push(out);
            r
        };
        if self.queue.perform(|a| self.act(a)) {
            self.arm();
        }
        Some(r)
    }

    fn arm(self: &Rc<Self>) {
        let now = self.clock.now();
        let deadline = {
            let s = self.state.borrow();
            let look_again = s.held_back.then(|| now.plus_ms(DRAIN_CHECK_MS));
            [s.run.deadline(), look_again]
                .into_iter()
                .flatten()
                .min()
                .filter(|_| !s.stopped)
        };
        let Some(at) = deadline else {
            return self.timer.clear();
        };
        let me = self.clone();
        self.timer.arm(at, now, move || {
            js::once(move |_| {
                me.timer.fired();
                me.input(|s, now| s.run.tick(now));
            })
        });
    }

    /// Perform one action, with no borrow held: JS may call back in.
    fn act(self: &Rc<Self>, a: DeviceAction) {
        match a {
            DeviceAction::Send { conn, frame } => {
                self.unsent
                    .set(self.unsent.get().saturating_sub(frame.len()));
                let Some(socket) = self.link_socket(conn) else {
                    return;
                };
                let max = self.state.borrow().run.device().config().outbound.max_bytes;
                match Overflow::check(socket.buffered_amount(), frame.len(), max) {
                    Ok(()) => socket.send(&frame),
                    Err(overflow) => self.overflowed(conn, &socket, overflow),
                }
            }
            DeviceAction::Close { conn, code, reason } => {
                let link = {
                    let mut s = self.state.borrow_mut();
                    match s.link.take() {
                        Some(l) if l.conn == conn => Some(l),
                        other => {
                            s.link = other;
                            None
                        }
                    }
                };
                if let Some(link) = link {
                    link.socket.close(code, &reason);
                }
            }
            DeviceAction::Dial => {
                let stopped = self.state.borrow().stopped;
                if !stopped {
                    self.refresh_models_then_dial();
                }
            }
            DeviceAction::Io(call) => self.io(call),
            DeviceAction::Persist { seq, records } => self.persist(seq, &records),
            DeviceAction::ResolvePath { request, path } => self.resolve_path(request, &path),
            DeviceAction::LoadSession {
                request,
                session_id,
            } => self.load_session(request, session_id),
            DeviceAction::ReadHistory {
                request,
                session_id,
                before,
                limit,
                max_bytes,
            } => self.read_history(request, session_id, (before, limit, max_bytes)),
            DeviceAction::ReadEvents {
                request,
                session_id,
            } => self.read_events(request, session_id),
            DeviceAction::Stop(message) => {
                if let Some(f) = &self.hooks.on_stop {
                    if let Err(e) = f.call1(&JsValue::UNDEFINED, &message.into()) {
                        js::report(e);
                    }
                }
            }
            DeviceAction::Effect(effect @ Effect::WriteAttachment { .. }) => {
                self.write_attachment(&effect)
            }
            DeviceAction::Effect(effect) => {
                if let Some(f) = &self.hooks.on_effect {
                    let effect = js::to_js(&json::out(&effect));
                    if let Err(e) = f.call1(&JsValue::UNDEFINED, &effect) {
                        js::report(e);
                    }
                }
            }
        }
    }

    /// The link's client reads nothing and its socket holds `outbound.max_bytes`: close the
    /// link rather than buffer without bound, as the native driver does (the device dials
    /// again; a reattaching client finds its turns in the ledger).
    fn overflowed(self: &Rc<Self>, conn: ConnId, socket: &Socket, overflow: Overflow) {
        self.log(&format!("closing the link: {overflow}"));
        let ours = {
            let mut s = self.state.borrow_mut();
            let ours = s.link.as_ref().is_some_and(|l| l.conn == conn);
            if ours {
                s.link = None;
            }
            ours
        };
        if ours {
            socket.close(CLOSE_OVERFLOW, &overflow.to_string());
            self.input(|s, now| {
                let _ = s.run.device_mut().handle_closed(conn, None, now);
            });
        }
    }

    /// A line for the harness (`onLog`, else the console).
    fn log(&self, line: &str) {
        match &self.hooks.on_log {
            Some(f) => {
                if let Err(e) = f.call1(&JsValue::UNDEFINED, &line.into()) {
                    js::report(e);
                }
            }
            None => js::warn(line),
        }
    }

    /// With an instance, fetch its model list first (the engine and the device take it, so
    /// the link's hello lists it; a failure is logged and the last list kept), then dial.
    fn refresh_models_then_dial(self: &Rc<Self>) {
        let Some(instance) = &self.instance else {
            return self.dial();
        };
        // One at a time; the dial waiting on the fetch under way is this one.
        if instance.fetching_models.replace(true) {
            return;
        }
        let me = self.clone();
        instance.http.get_models(instance.models, move |fetched| {
            if let Some(i) = &me.instance {
                i.fetching_models.set(false);
            }
            match fetched {
                Ok(list) => {
                    if let Some(note) = list.cut_note() {
                        me.log(&note);
                    }
                    me.input(|s, now| s.run.set_models(list.chat, now));
                }
                Err(why) => me.log(&format!("{why}; the last model list is kept")),
            }
            let stopped = me.state.borrow().stopped;
            if !stopped {
                me.dial();
            }
        });
    }

    /// Perform one of the engine's calls; its replies go back to the engine.
    fn io(self: &Rc<Self>, call: IoCall) {
        let me = self.clone();
        let id = call.id();
        let reply: Reply = Rc::new(move |reply| {
            me.input(|s, now| s.run.handle_io(id, reply, now));
        });
        let http = self.instance.as_ref().map(|i| &i.http);
        match (call, http) {
            (
                IoCall::ReadAttachment {
                    session_id,
                    file_name,
                    max,
                    ..
                },
                _,
            ) => self.read_attachment(&session_id, &file_name, max, reply),
            (IoCall::Abort { id }, Some(http)) => http.abort(id),
            (IoCall::Abort { .. }, None) => {}
            (
                IoCall::Fetch {
                    id,
                    method,
                    path,
                    body,
                },
                Some(http),
            ) => http.fetch(id, method, &path, &body, reply),
            (IoCall::Read { id, max }, Some(http)) => http.read(id, max, reply),
            // Only the model engine asks, and it runs only with an instance.
            (IoCall::Fetch { .. } | IoCall::Read { .. }, None) => reply(IoReply::Failed {
                reason: "this device was given no instance to fetch from (options.model)".into(),
            }),
            // A page has no project on a disk to act on: the model is told, and goes on.
            (IoCall::Tool { .. }, _) => reply(IoReply::Failed {
                reason: "this device runs no tools: it is a web page, with no project on a disk"
                    .into(),
            }),
        }
    }

    /// `ReadAttachment`, asked of `options.readAttachment`: what it gives (or its promise
    /// settles to) is the file; a throw, a rejection or another shape fails the read with why.
    fn read_attachment(&self, session_id: &str, file_name: &str, max: u64, reply: Reply) {
        let failed = |reason: String| IoReply::Failed { reason };
        if !attachment_read::plain_file_name(file_name) {
            return reply(failed(format!(
                "attachment `{file_name}` is not a plain file name"
            )));
        }
        let Some(f) = &self.hooks.read_attachment else {
            return reply(failed(format!(
                "attachment `{file_name}` cannot be read: this device was given no \
                 options.readAttachment"
            )));
        };
        let called = f.call3(
            &JsValue::UNDEFINED,
            &session_id.into(),
            &file_name.into(),
            &(max as f64).into(),
        );
        match called {
            Ok(given) => {
                let rejected = reply.clone();
                let read = js::once(move |v| {
                    reply(match attachment_read::read(&v, max) {
                        Ok((bytes, size)) => IoReply::File { bytes, size },
                        Err(why) => failed(why),
                    })
                });
                let thrown = js::once(move |e| rejected(failed(js::message_of(&e))));
                js::on_settled(&given, read, &thrown);
            }
            Err(e) => reply(failed(js::message_of(&e))),
        }
    }

    fn link_socket(&self, conn: ConnId) -> Option<Rc<Socket>> {
        let s = self.state.borrow();
        s.link
            .as_ref()
            .filter(|l| l.conn == conn)
            .map(|l| l.socket.clone())
    }

    fn dial(self: &Rc<Self>) {
        let attempt = {
            let mut s = self.state.borrow_mut();
            s.attempts += 1;
            s.attempts
        };
        let made = match self.hooks.dial.call0(&JsValue::UNDEFINED) {
            Ok(value) => {
                let me = self.clone();
                Socket::listen(value, move |ev| me.socket_event(attempt, ev)).map_err(|e| {
                    // Not a socket: a bug of the caller's, said as such, and a failed dial.
                    js::report(e);
                })
            }
            // A dial that throws (offline) fails like a socket that never opens.
            Err(_) => Err(()),
        };
        match made {
            Ok(socket) => {
                let old = self.state.borrow_mut().dialing.replace((attempt, socket));
                if let Some((_, old)) = old {
                    old.close(1000, "a newer dial replaced it");
                }
            }
            Err(()) => {
                self.input(|s, now| {
                    s.run
                        .device_mut()
                        .handle_dial_failed(DialFailure::Transient, now)
                });
            }
        }
    }

    fn socket_event(self: &Rc<Self>, attempt: u64, ev: SocketEvent) {
        match ev {
            SocketEvent::Open => self.opened(attempt),
            SocketEvent::Message(data) => self.message(attempt, &data),
            SocketEvent::Down(code) => self.down(attempt, code),
        }
    }

    fn opened(self: &Rc<Self>, attempt: u64) {
        let (socket, stopped) = {
            let mut s = self.state.borrow_mut();
            match s.dialing.take() {
                Some((a, socket)) if a == attempt => (socket, s.stopped),
                other => {
                    s.dialing = other;
                    return;
                }
            }
        };
        if stopped {
            return socket.close(1000, "stopped");
        }
        let unwanted = self.input(|s, now| {
            match s.run.device_mut().handle_open(ConnKind::Link, now) {
                Ok(conn) => {
                    s.link = Some(Link {
                        attempt,
                        conn,
                        socket,
                    });
                    None
                }
                // The device asked for no dial (never, with one dial at a time).
                Err(_) => Some(socket),
            }
        });
        if let Some(Some(socket)) = unwanted {
            socket.close(1000, "no dial was asked for");
        }
    }

    fn message(self: &Rc<Self>, attempt: u64, data: &JsValue) {
        let frame = match js::bytes(data) {
            Ok(frame) => frame,
            Err(e) => return js::report(e.into()),
        };
        self.input(|s, now| {
            let conn = s.link.as_ref().filter(|l| l.attempt == attempt)?.conn;
            s.run.device_mut().handle_frame(conn, &frame, now).ok()
        });
    }

    fn down(self: &Rc<Self>, attempt: u64, code: Option<u16>) {
        enum Gone {
            Dial,
            Link(ConnId),
        }
        let gone = {
            let mut s = self.state.borrow_mut();
            if s.dialing.as_ref().is_some_and(|(a, _)| *a == attempt) {
                s.dialing = None;
                Some(Gone::Dial)
            } else if s.link.as_ref().is_some_and(|l| l.attempt == attempt) {
                s.link.take().map(|l| Gone::Link(l.conn))
            } else {
                // Its other event (error, then close) came first, or the device closed it.
                None
            }
        };
        match gone {
            Some(Gone::Dial) => self.input(|s, now| {
                s.run
                    .device_mut()
                    .handle_dial_failed(DialFailure::Transient, now)
            }),
            Some(Gone::Link(conn)) => self.input(|s, now| {
                let _ = s.run.device_mut().handle_closed(conn, code, now);
            }),
            None => None,
        };
    }

    fn persist(self: &Rc<Self>, seq: u64, records: &[Record]) {
        let Some(store) = &self.hooks.store else {
            return;
        };
        let records = js::to_js(&json::out(records));
        match store.apply.call1(&store.object, &records) {
            Ok(done) => {
                let me = self.clone();
                let durable = js::once(move |_| {
                    me.input(|s, now| s.run.device_mut().handle_persisted(seq, now));
                });
                // A write that failed is not acknowledged: what waits on it is not sent.
                js::on_settled(&done, durable, &js::once(js::report));
            }
            Err(e) => js::report(e),
        }
    }

    /// Read a session set aside back from the JS store: its `entries()` (sync or a promise),
    /// of which the device keeps the session's own. A read that fails (a throw, a rejection,
    /// entries of the wrong shape) is told to the device: the requests that waited for the
    /// session are refused with the reason, and the session stays set aside (the store is the
    /// only copy).
    fn load_session(self: &Rc<Self>, request: u64, session_id: String) {
        let Some(store) = &self.hooks.store else {
            return;
        };
        let failed = move |me: Rc<Shared>, e: JsValue| {
            let why = js::message_of(&e);
            me.input(|s, now| {
                s.run
                    .device_mut()
                    .handle_session_load_failed(request, &why, now)
            });
        };
        match store.entries.call0(&store.object) {
            Ok(read) => {
                let (me, me_too) = (self.clone(), self.clone());
                let loaded = js::once(move |v| match entries(&v) {
                    Ok(all) => {
                        let mine = all
                            .into_iter()
                            .filter(|e| lembas_core::store::belongs_to(e, &session_id))
                            .collect();
                        let bad = me.input(|s, now| {
                            s.run.device_mut().handle_session_loaded(request, mine, now)
                        });
                        if let Some(bad) = bad.filter(|b| !b.is_empty()) {
                            me.state.borrow_mut().unreadable.extend(bad);
                        }
                    }
                    Err(e) => failed(me, e),
                });
                let rejected = js::once(move |e| failed(me_too, e));
                js::on_settled(&read, loaded, &rejected);
            }
            Err(e) => failed(self.clone(), e),
        }
    }

    /// Read a set-aside session's event log from the JS store: its `entries()` (sync or a
    /// promise), of which the device is given the session's blocks (`store::events_of`). A
    /// read that fails refuses the `_lembas/session/events` request with the reason; the
    /// session stays set aside.
    fn read_events(self: &Rc<Self>, request: u64, session_id: String) {
        let answer = move |me: Rc<Shared>, read: Result<Vec<Entry>, String>| {
            me.input(|s, now| s.run.device_mut().handle_events_read(request, read, now));
        };
        let Some(store) = &self.hooks.store else {
            // Never asked without one (the loop answers then); said rather than left waiting.
            return answer(self.clone(), Err("this device was given no store".into()));
        };
        match store.entries.call0(&store.object) {
            Ok(read) => {
                let (me, me_too) = (self.clone(), self.clone());
                let loaded = js::once(move |v| match entries(&v) {
                    Ok(all) => answer(me, Ok(lembas_core::store::events_of(all, &session_id))),
                    Err(e) => answer(me, Err(js::message_of(&e))),
                });
                let rejected = js::once(move |e| answer(me_too, Err(js::message_of(&e))));
                js::on_settled(&read, loaded, &rejected);
            }
            Err(e) => answer(self.clone(), Err(js::message_of(&e))),
        }
    }

    /// Read part of a session's history from the JS store: its `entries()` (sync or a
    /// promise), of which the device is given what `store::HistoryPick` takes. A read that
    /// fails refuses the `history` request with the reason.
    fn read_history(
        self: &Rc<Self>,
        request: u64,
        session_id: String,
        (before, limit, max_bytes): (Option<u64>, usize, usize),
    ) {
        let Some(store) = &self.hooks.store else {
            return;
        };
        let answer = move |me: Rc<Shared>, read: Result<Vec<Entry>, String>| {
            me.input(|s, now| s.run.device_mut().handle_history_read(request, read, now));
        };
        match store.entries.call0(&store.object) {
            Ok(read) => {
                let (me, me_too) = (self.clone(), self.clone());
                let loaded = js::once(move |v| match entries(&v) {
                    Ok(all) => {
                        let mine = lembas_core::store::history_of(
                            all,
                            &session_id,
                            before,
                            limit,
                            max_bytes,
                        );
                        answer(me, Ok(mine));
                    }
                    Err(e) => answer(me, Err(js::message_of(&e))),
                });
                let rejected = js::once(move |e| answer(me_too, Err(js::message_of(&e))));
                js::on_settled(&read, loaded, &rejected);
            }
            Err(e) => answer(self.clone(), Err(js::message_of(&e))),
        }
    }

    /// A `write_attachment` goes to `onEffect`, whose outcome the device hears: a throw or a
    /// rejected promise refuses the prompt with its message, and the turn starts once every
    /// write returned or settled. Without `onEffect` there is nowhere to write one: it counts
    /// as written, and the turn gets only its name and size.
    fn write_attachment(self: &Rc<Self>, effect: &Effect) {
        let Effect::WriteAttachment { request, .. } = *effect else {
            return;
        };
        let answer = move |me: Rc<Shared>, written: Result<(), String>| {
            me.input(|s, now| {
                s.run
                    .device_mut()
                    .handle_attachment_written(request, written, now)
            });
        };
        let Some(f) = &self.hooks.on_effect else {
            return answer(self.clone(), Ok(()));
        };
        match f.call1(&JsValue::UNDEFINED, &js::to_js(&json::out(effect))) {
            Ok(done) => {
                let (me, me_too) = (self.clone(), self.clone());
                let written = js::once(move |_| answer(me, Ok(())));
                let failed = js::once(move |e| answer(me_too, Err(js::message_of(&e))));
                js::on_settled(&done, written, &failed);
            }
            Err(e) => answer(self.clone(), Err(js::message_of(&e))),
        }
    }

    fn resolve_path(self: &Rc<Self>, request: u64, path: &str) {
        let Some(resolve) = &self.hooks.resolve_path else {
            return;
        };
        let answer = move |me: Rc<Shared>, resolved: Result<String, String>| {
            me.input(|s, now| {
                s.run
                    .device_mut()
                    .handle_path_resolved(request, resolved, now)
            });
        };
        match resolve.call1(&JsValue::UNDEFINED, &path.into()) {
            Ok(given) => {
                let (me, me_too) = (self.clone(), self.clone());
                let resolved = js::once(move |v| {
                    let resolved = js::json_value(&v)
                        .and_then(|v| json::path_resolution(v).map_err(|e| e.to_string()))
                        .unwrap_or_else(Err);
                    answer(me, resolved);
                });
                let failed = js::once(move |e| answer(me_too, Err(js::message_of(&e))));
                js::on_settled(&given, resolved, &failed);
            }
            Err(e) => answer(self.clone(), Err(js::message_of(&e))),
        }
    }
}
