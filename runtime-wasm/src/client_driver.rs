//! `ClientDriver`: the client (a web UI's role) over the links it is handed with `attach`, one
//! `setTimeout`, events to `onEvent` and to promises from `next`, and its undelivered deletes
//! kept where a reload cannot lose them: a localStorage-like `storage`, or an asynchronous
//! `kept` (IndexedDB).

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use lembas_core::client::{Client, ClientEvent};
use lembas_core::{ClientConfig, Time};

use crate::client_loop::{ClientAction, ClientLoop};
use crate::clock::Clock;
use crate::js::{self, err, Func};
use crate::json;
use crate::queue::Queue;
use crate::socket::{Socket, SocketEvent};
use crate::timer::{self, Timer};

const OPTIONS: &[&str] = &[
    "config",
    "onEvent",
    "storage",
    "storageKey",
    "kept",
    "clock",
];

const STORAGE_KEY: &str = "lembas.pendingDeletes";

const NEXT_TIMEOUT_MS: f64 = 10_000.0;

/// Where the undelivered deletes are kept.
enum Keeper {
    Nowhere,
    /// `getItem(key)` / `setItem(key, json)`, as `localStorage`.
    Storage {
        storage: JsValue,
        get: Func,
        set: Func,
        key: String,
    },
    /// `load()` (a promise) and `save(list)`.
    Kept {
        kept: JsValue,
        load: Func,
        save: Func,
    },
}

struct Options {
    config: ClientConfig,
    on_event: Option<Func>,
    keeper: Keeper,
    clock: Clock,
}

fn options(o: &JsValue) -> Result<Options, JsValue> {
    js::known_members(o, OPTIONS, "ClientDriverOptions")?;
    let raw = js::from_js(&js::member(o, "config"))?;
    let seeded = raw.get("seed").is_some();
    let mut config = json::client_config(raw).map_err(err)?;
    if !seeded {
        config.seed = js::random_seed();
    }
    let method = |of: &JsValue, what: &str, name: &str| {
        js::function(of, name, &format!("options.{what}.{name}"))?
            .ok_or_else(|| JsValue::from(err(format!("options.{what} needs {name}()"))))
    };
    let storage = js::member(o, "storage");
    let kept = js::member(o, "kept");
    let given = |v: &JsValue| !v.is_undefined() && !v.is_null();
    let keeper = match (given(&storage), given(&kept)) {
        (true, true) => {
            return Err(err("give options.storage or options.kept, not both").into());
        }
        (true, false) => Keeper::Storage {
            get: method(&storage, "storage", "getItem")?,
            set: method(&storage, "storage", "setItem")?,
            key: match js::member(o, "storageKey") {
                k if k.is_undefined() => STORAGE_KEY.to_string(),
                k => k
                    .as_string()
                    .ok_or_else(|| err("options.storageKey must be a string"))?,
            },
            storage,
        },
        (false, true) => Keeper::Kept {
            load: method(&kept, "kept", "load")?,
            save: method(&kept, "kept", "save")?,
            kept,
        },
        (false, false) => Keeper::Nowhere,
    };
    Ok(Options {
        config,
        on_event: js::function(o, "onEvent", "options.onEvent")?,
        keeper,
        clock: Clock::new(js::function(o, "clock", "options.clock")?),
    })
}

/// Deletes kept from before (`null` or `undefined`: none).
fn kept_deletes(v: &JsValue) -> Result<Vec<(String, u32)>, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new());
    }
    Ok(json::kept_deletes(js::from_js(v)?).map_err(err)?)
}

/// A promise from `next`, waiting for an event its predicate accepts.
struct Waiter {
    id: u64,
    accepts: Func,
    resolve: Func,
    reject: Func,
    timeout: JsValue,
}

struct State {
    run: ClientLoop,
    stopped: bool,
    /// Sockets attached so far: each one's listeners know theirs.
    attempts: u64,
    /// Attached and not open yet.
    opening: Vec<(u64, Rc<Socket>)>,
    link: Option<(u64, Rc<Socket>)>,
    waiters: Vec<Waiter>,
    waiter_ids: u64,
}

struct Shared {
    clock: Clock,
    on_event: Option<Func>,
    keeper: Keeper,
    state: RefCell<State>,
    queue: Queue<ClientAction>,
    timer: Timer,
}

pub struct ClientDriver {
    shared: Rc<Shared>,
}

impl ClientDriver {
    /// A driver whose kept deletes (if any, in `storage`) are read at once.
    pub fn new(options_object: &JsValue) -> Result<ClientDriver, JsValue> {
        let o = options(options_object)?;
        let kept = match &o.keeper {
            Keeper::Nowhere => Vec::new(),
            Keeper::Kept { .. } => {
                return Err(err(
                    "options.kept loads asynchronously: open the driver with ClientDriver.open",
                )
                .into());
            }
            Keeper::Storage {
                storage, get, key, ..
            } => {
                let text = get.call1(storage, &JsValue::from_str(key))?;
                match text.as_string() {
                    None => Vec::new(),
                    Some(text) => serde_json::from_str(&text)
                        .map_err(|e| e.to_string())
                        .and_then(|v| json::kept_deletes(v).map_err(|e| e.to_string()))
                        .map_err(|e| err(format!("storage item `{key}`: {e}")))?,
                }
            }
        };
        ClientDriver::build(o, kept)
    }

    /// A promise of a driver whose kept deletes may load asynchronously (`kept`, IndexedDB);
    /// `wrap` makes the JS object it resolves to. Any refusal rejects it.
    pub fn open<T: Into<JsValue>>(
        options_object: &JsValue,
        wrap: impl FnOnce(ClientDriver) -> T + 'static,
    ) -> js_sys::Promise {
        Self::opening(options_object, wrap).unwrap_or_else(|e| js::rejected(&e))
    }

    fn opening<T: Into<JsValue>>(
        options_object: &JsValue,
        wrap: impl FnOnce(ClientDriver) -> T + 'static,
    ) -> Result<js_sys::Promise, JsValue> {
        let o = options(options_object)?;
        let Keeper::Kept { kept, load, .. } = &o.keeper else {
            let driver = wrap(ClientDriver::new(options_object)?).into();
            return Ok(js::resolved(&driver));
        };
        let loading = load.call0(kept)?;
        let build = js::once_returning(move |loaded| {
            let kept = kept_deletes(&loaded)?;
            Ok(wrap(ClientDriver::build(o, kept)?).into())
        });
        Ok(js::when_settled(&loading, build, &JsValue::UNDEFINED))
    }

    fn build(o: Options, kept: Vec<(String, u32)>) -> Result<ClientDriver, JsValue> {
        let mut client = Client::new(o.config, o.clock.now()).map_err(err)?;
        client.restore_pending_deletes(&kept);
        Ok(ClientDriver {
            shared: Rc::new(Shared {
                clock: o.clock,
                on_event: o.on_event,
                keeper: o.keeper,
                state: RefCell::new(State {
                    run: ClientLoop::new(client, kept),
                    stopped: false,
                    attempts: 0,
                    opening: Vec::new(),
                    link: None,
                    waiters: Vec::new(),
                    waiter_ids: 0,
                }),
                queue: Queue::default(),
                timer: Timer::default(),
            }),
        })
    }

    /// Take a device's link: a socket open already (`readyState` 1, as a server's accepted
    /// one) or opening.
    pub fn attach(&self, socket: JsValue) -> Result<(), JsValue> {
        let attempt = {
            let mut s = self.shared.state.borrow_mut();
            if s.stopped {
                return Err(err("this ClientDriver is stopped").into());
            }
            s.attempts += 1;
            s.attempts
        };
        let me = self.shared.clone();
        let socket = Socket::listen(socket, move |ev| me.socket_event(attempt, ev))?;
        if socket.is_open() {
            self.shared.up(attempt, socket);
        } else {
            self.shared
                .state
                .borrow_mut()
                .opening
                .push((attempt, socket));
        }
        Ok(())
    }

    /// Send a request; returns its id. Refused when the link is not ready or the device did
    /// not list the method's capability.
    pub fn call(&self, method: &str, params: &JsValue) -> Result<JsValue, JsValue> {
        let params = js::from_js(params)?;
        let id = self
            .shared
            .input(|s, now| s.run.client.call(method, &params, now))
            .map_err(err)?;
        Ok(js::to_js(&json::id_value(&id)))
    }

    /// Send a notification, gated like `call`.
    pub fn notify(&self, method: &str, params: &JsValue) -> Result<(), JsValue> {
        let params = js::from_js(params)?;
        self.shared
            .input(|s, now| s.run.client.notify(method, &params, now))
            .map_err(|e| err(e).into())
    }

    /// Send a prompt (ACP content blocks) with this turn id or one the client makes; kept and
    /// reattached across dropped links until answered. Returns the turn id.
    pub fn prompt(
        &self,
        session_id: &str,
        blocks: &JsValue,
        turn_id: Option<String>,
    ) -> Result<String, JsValue> {
        let blocks = js::from_js(blocks)?;
        self.shared
            .input(|s, now| {
                s.run
                    .client
                    .prompt(session_id, blocks, turn_id.as_deref(), now)
            })
            .map_err(|e| err(e).into())
    }

    /// Answer a request the device sent (a card). Returns whether it was sent (it is not when
    /// the request came on an earlier link, or was answered already).
    pub fn respond(&self, id: &JsValue, outcome: &JsValue) -> Result<bool, JsValue> {
        let id = json::id(&js::from_js(id)?).map_err(err)?;
        let outcome = json::outcome_from(js::from_js(outcome)?).map_err(err)?;
        Ok(self
            .shared
            .input(|s, now| s.run.client.respond(&id, outcome, now)))
    }

    /// Delete a session: sent now if the link is ready, else kept for the next link.
    pub fn delete_session(&self, session_id: &str) {
        self.shared
            .input(|s, now| s.run.client.delete_session(session_id, now));
    }

    /// A promise of the first event `accepts` takes from now on; rejected with an `Error` when
    /// none came within `timeout_ms` (default 10 s), or with what `accepts` threw.
    pub fn next(
        &self,
        accepts: JsValue,
        timeout_ms: Option<f64>,
    ) -> Result<js_sys::Promise, JsValue> {
        if !accepts.is_function() {
            return Err(err("next(accepts): accepts must be a function").into());
        }
        let ms = js::whole("timeoutMs", timeout_ms.unwrap_or(NEXT_TIMEOUT_MS))?;
        let mut ends = None;
        let promise = js_sys::Promise::new(&mut |resolve, reject| ends = Some((resolve, reject)));
        let Some((resolve, reject)) = ends else {
            return Err(err("the Promise executor did not run").into());
        };
        let id = {
            let mut s = self.shared.state.borrow_mut();
            s.waiter_ids += 1;
            s.waiter_ids
        };
        let me = self.shared.clone();
        let timeout = timer::after(ms, &js::once(move |_| me.expire(id, ms)));
        self.shared.state.borrow_mut().waiters.push(Waiter {
            id,
            accepts: accepts.unchecked_into(),
            resolve: resolve.unchecked_into(),
            reject: reject.unchecked_into(),
            timeout,
        });
        Ok(promise)
    }

    pub fn is_ready(&self) -> bool {
        self.shared.state.borrow().run.client.is_ready()
    }

    /// Deletes not yet answered, as `{ sessionId, refusals }`.
    pub fn pending_deletes(&self) -> JsValue {
        let v = json::pending_deletes(&self.shared.state.borrow().run.client.pending_deletes());
        js::to_js(&v)
    }

    /// Prompts sent and not yet answered, as `{ sessionId, turnId }`.
    pub fn incomplete(&self) -> JsValue {
        let v = json::incomplete(&self.shared.state.borrow().run.client.incomplete());
        js::to_js(&v)
    }

    /// Cards open now, as `{ toolCallId, id }` (the id to `respond` to).
    pub fn open_cards(&self) -> JsValue {
        let v = json::open_cards(self.shared.state.borrow().run.client.open_cards());
        js::to_js(&v)
    }

    /// The capabilities the device listed on the current link.
    pub fn capabilities(&self) -> Vec<String> {
        self.shared
            .state
            .borrow()
            .run
            .client
            .capabilities()
            .to_vec()
    }

    /// Stop: close the link, clear the timer, take no more links. Pending `next` promises
    /// still time out.
    pub fn stop(&self) {
        let (link, opening) = {
            let mut s = self.shared.state.borrow_mut();
            s.stopped = true;
            (s.link.take(), std::mem::take(&mut s.opening))
        };
        self.shared.timer.clear();
        if let Some((_, socket)) = link {
            self.shared
                .input(|s, now| s.run.client.handle_link_down(now));
            socket.close(1000, "stopped");
        }
        for (_, socket) in opening {
            socket.close(1000, "stopped");
        }
    }
}

impl Shared {
    /// Feed the client one input, then perform what it asked for.
    fn input<R>(self: &Rc<Self>, f: impl FnOnce(&mut State, Time) -> R) -> R {
        let now = self.clock.now();
        let r = {
            let mut s = self.state.borrow_mut();
            let r = f(&mut s, now);
            let mut out = Vec::new();
            s.run.pump(now, &mut out);
            self.queue.push(out);
            r
        };
        if self.queue.perform(|a| self.act(a)) {
            self.arm();
        }
        r
    }

    fn arm(self: &Rc<Self>) {
        let deadline = {
            let s = self.state.borrow();
            s.run.client.poll_timeout().filter(|_| !s.stopped)
        };
        let Some(at) = deadline else {
            return self.timer.clear();
        };
        let me = self.clone();
        self.timer.arm(at, self.clock.now(), move || {
            js::once(move |_| {
                me.timer.fired();
                me.input(|s, now| s.run.client.handle_timeout(now));
            })
        });
    }

    /// Perform one action, with no borrow held: JS may call back in.
    fn act(self: &Rc<Self>, a: ClientAction) {
        match a {
            ClientAction::Send(frame) => {
                let socket = self.state.borrow().link.as_ref().map(|(_, s)| s.clone());
                if let Some(socket) = socket {
                    socket.send(&frame);
                }
            }
            ClientAction::Close { code, reason } => {
                let link = self.state.borrow_mut().link.take();
                if let Some((_, socket)) = link {
                    socket.close(code, &reason);
                }
            }
            ClientAction::Event(e) => self.event(&e),
            ClientAction::Keep(list) => self.keep(&list),
        }
    }

    fn event(&self, e: &ClientEvent) {
        let event = js::to_js(&json::out(e));
        if let Some(f) = &self.on_event {
            if let Err(e) = f.call1(&JsValue::UNDEFINED, &event) {
                js::report(e);
            }
        }
        let waiting = std::mem::take(&mut self.state.borrow_mut().waiters);
        let mut left = Vec::with_capacity(waiting.len());
        for w in waiting {
            let settle = match w.accepts.call1(&JsValue::UNDEFINED, &event) {
                Ok(yes) if yes.is_truthy() => Some((&w.resolve, event.clone())),
                Ok(_) => None,
                Err(thrown) => Some((&w.reject, thrown)),
            };
            match settle {
                Some((end, value)) => {
                    timer::cancel(&w.timeout);
                    let _ = end.call1(&JsValue::UNDEFINED, &value);
                }
                None => left.push(w),
            }
        }
        // Waiters a callback added meanwhile go after those that were there.
        let mut s = self.state.borrow_mut();
        left.append(&mut s.waiters);
        s.waiters = left;
    }

    fn expire(&self, id: u64, ms: u64) {
        let waiter = {
            let mut s = self.state.borrow_mut();
            let at = s.waiters.iter().position(|w| w.id == id);
            at.map(|i| s.waiters.remove(i))
        };
        if let Some(w) = waiter {
            let why = js_sys::Error::new(&format!(
                "no event the predicate accepts came within {ms} ms"
            ));
            let _ = w.reject.call1(&JsValue::UNDEFINED, &why.into());
        }
    }

    fn keep(&self, list: &[(String, u32)]) {
        let kept = json::pending_deletes(list);
        match &self.keeper {
            Keeper::Nowhere => {}
            Keeper::Storage {
                storage, set, key, ..
            } => {
                let text = JsValue::from_str(&kept.to_string());
                if let Err(e) = set.call2(storage, &JsValue::from_str(key), &text) {
                    js::report(e);
                }
            }
            Keeper::Kept { kept: to, save, .. } => match save.call1(to, &js::to_js(&kept)) {
                Ok(saving) => {
                    if js::is_thenable(&saving) {
                        js::on_settled(&saving, JsValue::UNDEFINED, &js::once(js::report));
                    }
                }
                Err(e) => js::report(e),
            },
        }
    }

    fn socket_event(self: &Rc<Self>, attempt: u64, ev: SocketEvent) {
        match ev {
            SocketEvent::Open => {
                let socket = {
                    let mut s = self.state.borrow_mut();
                    let at = s.opening.iter().position(|(a, _)| *a == attempt);
                    at.map(|i| s.opening.remove(i).1)
                };
                if let Some(socket) = socket {
                    self.up(attempt, socket);
                }
            }
            SocketEvent::Message(data) => {
                let frame = match js::bytes(&data) {
                    Ok(frame) => frame,
                    Err(e) => return js::report(e.into()),
                };
                let current = self.current(attempt);
                if current {
                    self.input(|s, now| s.run.client.handle_frame(&frame, now));
                }
            }
            SocketEvent::Down(_) => {
                let was_link = {
                    let mut s = self.state.borrow_mut();
                    s.opening.retain(|(a, _)| *a != attempt);
                    match s.link.take() {
                        Some((a, _)) if a == attempt => true,
                        other => {
                            s.link = other;
                            false
                        }
                    }
                };
                if was_link {
                    self.input(|s, now| s.run.client.handle_link_down(now));
                }
            }
        }
    }

    fn current(&self, attempt: u64) -> bool {
        let s = self.state.borrow();
        !s.stopped && s.link.as_ref().is_some_and(|(a, _)| *a == attempt)
    }

    /// A socket is open: it is the link now (one before it is let go).
    fn up(self: &Rc<Self>, attempt: u64, socket: Rc<Socket>) {
        let stopped = self.state.borrow().stopped;
        if stopped {
            return socket.close(1000, "stopped");
        }
        let before = self.input(|s, now| {
            let before = s.link.replace((attempt, socket));
            if before.is_some() {
                s.run.client.handle_link_down(now);
            }
            s.run.client.handle_link_up(now);
            before
        });
        if let Some((_, socket)) = before {
            socket.close(1000, "a newer link replaced it");
        }
    }
}
