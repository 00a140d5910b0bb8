//! A test instance: the LLeMbas side of the link on a loopback listener, for the tests and
//! `lembas demo`. It serves `GET /.well-known/lembas.json`, upgrades `/api/devices/link` to a
//! WebSocket when `Authorization: Bearer <token>` is right (HTTP 401 otherwise), and runs the
//! core's `Client` over whichever link is up. It never binds anything but loopback. With
//! `InstanceOptions::tls` it serves HTTPS and wss:// (the tests give it an rcgen certificate).
//! With `InstanceOptions::relay` it runs no client of its own: it relays a browser page's
//! WebSocket on `/api/devices/relay` to the device's link (see [`crate::relay`]). It also
//! serves `GET /v1/models`, streamed `POST /v1/chat/completions` and `GET`/`PUT
//! /v1/me/personalization` for the model engine and the CLI (see
//! [`crate::instance_api`]).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use async_tungstenite::tungstenite::http::StatusCode;
use async_tungstenite::WebSocketStream;
use futures_lite::{future, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::rustls::ServerConfig;
use lembas_core::client::{CallError, Client, ClientEvent, ClientOutput};
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::{ClientConfig, Liveness};
use serde_json::Value;
use smol::channel::{self, Receiver, Sender};
use smol::net::TcpListener;
use smol::Task;

use crate::channels::Outgoing;
use crate::clock::Clock;
use crate::instance_api::Api;
pub use crate::instance_api::{default_models, ChatReply, ChatStream, ToolCallScript};
pub use crate::instance_upstream::Upstream;
use crate::outbox::Gauge;

/// How the test instance presents itself.
#[derive(Clone, Debug)]
pub struct InstanceOptions {
    pub token: String,
    /// What discovery lists in `protocols` (and the first of it as `protocol`).
    pub protocols: Vec<u64>,
    pub version: String,
    /// Serve TLS (https:// and wss://) with this configuration.
    pub tls: Option<Arc<ServerConfig>>,
    /// Relay a client's WebSocket (`/api/devices/relay`) to the device's link instead of
    /// running the core's client here: how a client in a browser page, which cannot be a
    /// server, reaches a native device in the tests.
    pub relay: bool,
    /// The client role's heartbeat: when it pings a quiet link and gives up a silent one.
    pub liveness: Option<Liveness>,
    /// `GET /v1/models`'s `data` ([`default_models`]: two chat models, one embedding model).
    pub models: Vec<Value>,
    /// Answer `GET /v1/models` only after this long (a slow instance).
    pub models_delay: std::time::Duration,
    /// `POST /v1/chat/completions`'s answers, taken in order; with none left, the last user
    /// message is echoed.
    pub chat: Vec<ChatReply>,
    /// Note when each streamed event's last byte was written ([`TestInstance::sse_writes`]):
    /// the model bench's start line for a frame's latency.
    pub record_sse_writes: bool,
    /// `GET /v1/me/personalization`'s answer at the start (`{enabled, available, personality,
    /// personality_custom, instructions}`), changed by each `PUT`; `None`: not served (404).
    pub personalization: Option<Value>,
    /// Pass `POST /v1/chat/completions` on to this OpenAI-compatible server instead of
    /// answering from `chat` (the optional end-to-end test against a real model).
    pub upstream: Option<Upstream>,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions {
            token: "test-token".into(),
            protocols: vec![3],
            version: "2.0.0".into(),
            tls: None,
            relay: false,
            liveness: Some(Liveness::default()),
            models: default_models(),
            models_delay: std::time::Duration::ZERO,
            chat: Vec::new(),
            record_sse_writes: false,
            personalization: None,
            upstream: None,
        }
    }
}

/// A TLS server configuration (ring) for one certificate chain and its key, both PEM.
pub fn tls_config(cert_pem: &str, key_pem: &str) -> Result<Arc<ServerConfig>, String> {
    use futures_rustls::rustls::pki_types::pem::PemObject;
    use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| format!("key: {e}"))?;
    let config = ServerConfig::builder_with_provider(Arc::new(
        futures_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(config))
}

/// A byte stream the instance serves: plain TCP, or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl InstanceOptions {
    /// A LLeMbas 1.x server: protocol 1 and 2.
    pub fn old() -> Self {
        InstanceOptions {
            protocols: vec![1, 2],
            version: "1.9.0".into(),
            ..InstanceOptions::default()
        }
    }

    fn discovery(&self) -> String {
        serde_json::json!({
            "protocol": self.protocols.first().copied().unwrap_or(1),
            "protocols": self.protocols,
            "version": self.version,
        })
        .to_string()
    }
}

/// What the instance saw, in order.
#[derive(Debug)]
pub enum Event {
    /// A device's link was accepted.
    LinkUp,
    /// The link ended (either side).
    LinkDown,
    /// A dial was refused at the handshake with this HTTP status.
    Refused(u16),
    /// A message on the link, either way (`to_device`), as text.
    Frame {
        to_device: bool,
        text: String,
    },
    Client(ClientEvent),
    /// Relay mode: a client's socket was paired with the device's link.
    RelayUp,
    /// Relay mode: the client's socket was closed (either side, or its device link went).
    RelayDown,
}

pub(crate) enum Cmd {
    Call {
        method: String,
        params: Value,
        reply: Sender<Result<Id, CallError>>,
    },
    Prompt {
        session: String,
        blocks: Value,
        turn_id: Option<String>,
        reply: Sender<Result<String, CallError>>,
    },
    Respond(Id, Result<Value, RpcError>),
    Notify {
        method: String,
        params: Value,
        reply: Sender<Result<(), CallError>>,
    },
    /// Read nothing for this long (a client on a slow network).
    Stall(Duration),
    Cut,
    Close(u16, String),
}

pub(crate) type Socket = WebSocketStream<Rewind<Box<dyn Io>>>;

pub(crate) enum Internal {
    Accepted(Box<Socket>),
    /// A relayed client's WebSocket (relay mode only).
    RelayAccepted(Box<Socket>),
    Refused(u16),
    Frame(u64, Vec<u8>),
    /// A ping or pong on link `gen`.
    Heard(u64),
    Closed(u64),
    RelayFrame(u64, Vec<u8>),
    RelayClosed(u64),
    Cmd(Cmd),
}

/// A running test instance; dropping it stops it.
pub struct TestInstance {
    pub addr: SocketAddr,
    tls: bool,
    cmd: Sender<Internal>,
    events: Receiver<Event>,
    api: Arc<Api>,
    _tasks: Vec<Task<()>>,
}

impl TestInstance {
    /// Listen on `127.0.0.1:0`.
    pub async fn start(options: InstanceOptions) -> std::io::Result<TestInstance> {
        TestInstance::bind(([127, 0, 0, 1], 0).into(), options).await
    }

    /// Listen on `addr`, which must be a loopback address.
    pub async fn bind(addr: SocketAddr, options: InstanceOptions) -> std::io::Result<TestInstance> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("the test instance binds loopback only, not {addr}"),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (itx, irx) = channel::unbounded();
        let (etx, erx) = channel::unbounded();
        let tls = options.tls.is_some();
        let linked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let relay = options.relay;
        let liveness = options.liveness;
        let api = Arc::new(Api::new(&options));
        let accept = smol::spawn(accept_loop(
            listener,
            Arc::new(options),
            itx.clone(),
            linked.clone(),
            api.clone(),
        ));
        let main = if relay {
            smol::spawn(crate::relay::run(irx, etx, linked))
        } else {
            smol::spawn(run_client(irx, etx, liveness))
        };
        Ok(TestInstance {
            addr,
            tls,
            cmd: itx,
            events: erx,
            api,
            _tasks: vec![accept, main],
        })
    }

    /// `http://127.0.0.1:<port>` (`https://` with TLS), what `lembas login` is given.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every `POST /v1/chat/completions` body received, in order.
    pub fn chat_requests(&self) -> Vec<Value> {
        self.api.chat_requests()
    }

    /// From now on answer `GET /v1/models` with `status` (an outage), or with the list again
    /// (`None`).
    pub fn fail_models(&self, status: Option<u16>) {
        self.api.fail_models(status)
    }

    /// From now on answer the device's dials with 503 (`true`: it stays down, redialling after
    /// its backoff), or take its link again (`false`).
    pub fn refuse_links(&self, refused: bool) {
        self.api.refuse_links(refused)
    }

    /// `GET /v1/models` requests answered so far (a dial fetches the list once).
    pub fn models_served(&self) -> usize {
        self.api.models_served()
    }

    /// With `record_sse_writes`: every streamed event's data and when its last byte was
    /// written (its write returned), in order; taken, so the next call has only newer ones.
    pub fn sse_writes(&self) -> Vec<(String, std::time::Instant)> {
        self.api.sse_writes()
    }

    /// `/v1/me/personalization`'s state now (each `PUT` merged in).
    pub fn personalization(&self) -> Option<Value> {
        self.api.personalization()
    }

    /// Every `PUT /v1/me/personalization` body, in order.
    pub fn personalization_puts(&self) -> Vec<Value> {
        self.api.personalization_puts()
    }

    /// From now on refuse a `PUT /v1/me/personalization` with 403 and this `detail` (`None`:
    /// take them again).
    pub fn refuse_personalization_puts(&self, detail: Option<&str>) {
        self.api
            .refuse_personalization_puts(detail.map(String::from))
    }

    /// Chat streams the client closed before their end (a cancel that really aborted).
    pub fn aborted_streams(&self) -> usize {
        self.api.aborted_streams()
    }

    /// The next event, or `None` after `timeout`.
    pub async fn next_event(&self, timeout: Duration) -> Option<Event> {
        future::or(async { self.events.recv().await.ok() }, async {
            smol::Timer::after(timeout).await;
            None
        })
        .await
    }

    /// Events until one matches `pred` (returned with every event seen before it), or `None`
    /// (with what was seen) after `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&Event) -> bool,
    ) -> (Option<Event>, Vec<Event>) {
        let deadline = std::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next_event(left).await {
                Some(e) if pred(&e) => return (Some(e), seen),
                Some(e) => seen.push(e),
                None => return (None, seen),
            }
        }
    }

    /// A request to the device, gated as the core's client gates it.
    pub async fn call(&self, method: &str, params: Value) -> Result<Id, CallError> {
        let (reply, r) = channel::bounded(1);
        let _ = self
            .cmd
            .send(Internal::Cmd(Cmd::Call {
                method: method.into(),
                params,
                reply,
            }))
            .await;
        r.recv().await.unwrap_or(Err(CallError::NotReady))
    }

    /// A prompt kept until answered and reattached across links; returns its turn id.
    pub async fn prompt(
        &self,
        session: &str,
        blocks: Value,
        turn_id: Option<&str>,
    ) -> Result<String, CallError> {
        let (reply, r) = channel::bounded(1);
        let _ = self
            .cmd
            .send(Internal::Cmd(Cmd::Prompt {
                session: session.into(),
                blocks,
                turn_id: turn_id.map(str::to_string),
                reply,
            }))
            .await;
        r.recv().await.unwrap_or(Err(CallError::NotReady))
    }

    /// Answer a request the device sent (a card): what the client's UI does on a click.
    pub async fn respond(&self, id: Id, outcome: Result<Value, RpcError>) {
        let _ = self
            .cmd
            .send(Internal::Cmd(Cmd::Respond(id, outcome)))
            .await;
    }

    /// Answer a card with one of `wire::card`'s answers (an approval's, a question's, a
    /// plan's).
    pub async fn answer<A: lembas_core::wire::card::Answer>(&self, id: Id, answer: &A) {
        self.respond(id, Ok(answer.to_value())).await
    }

    /// A notification to the device (terminal keystrokes, a cancel), gated as a call is.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        let (reply, r) = channel::bounded(1);
        let _ = self
            .cmd
            .send(Internal::Cmd(Cmd::Notify {
                method: method.into(),
                params,
                reply,
            }))
            .await;
        r.recv().await.unwrap_or(Err(CallError::NotReady))
    }

    /// Stop reading the link for `how_long`: frames pile up in the socket and the device's
    /// writer waits, as behind a slow client.
    pub async fn stall(&self, how_long: Duration) {
        let _ = self.cmd.send(Internal::Cmd(Cmd::Stall(how_long))).await;
    }

    /// Drop the server's side of the link, with no close frame (a dead network).
    pub async fn cut(&self) {
        let _ = self.cmd.send(Internal::Cmd(Cmd::Cut)).await;
    }

    /// Close the link with `code` (4400: "this server refuses your protocol").
    pub async fn close(&self, code: u16, reason: &str) {
        let _ = self
            .cmd
            .send(Internal::Cmd(Cmd::Close(code, reason.into())))
            .await;
    }
}

/// `options` is shared, not copied, for each connection: it holds every scripted chat reply (a
/// bench's 120,000 tokens), and copying it for each of 100 connections opened at once kept
/// this executor, and every stream it serves, busy for half a second.
async fn accept_loop(
    listener: TcpListener,
    options: Arc<InstanceOptions>,
    tx: Sender<Internal>,
    linked: Arc<std::sync::atomic::AtomicBool>,
    api: Arc<Api>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let options = options.clone();
        let tx = tx.clone();
        let linked = linked.clone();
        let api = api.clone();
        smol::spawn(async move {
            let _ = stream.set_nodelay(true);
            let stream: Box<dyn Io> = match &options.tls {
                None => Box::new(stream),
                Some(config) => {
                    match futures_rustls::TlsAcceptor::from(config.clone())
                        .accept(stream)
                        .await
                    {
                        Ok(s) => Box::new(s),
                        Err(e) => {
                            log::debug!("test instance: TLS handshake: {e}");
                            return;
                        }
                    }
                }
            };
            if let Err(e) = serve_http(stream, &options, &tx, &linked, &api).await {
                log::debug!("test instance: {e}");
            }
        })
        .detach();
    }
}

/// Read one request's head; answer discovery, or upgrade the link.
// tungstenite's handshake callback returns its `ErrorResponse` unboxed.
#[allow(clippy::result_large_err)]
async fn serve_http(
    mut stream: Box<dyn Io>,
    options: &InstanceOptions,
    tx: &Sender<Internal>,
    linked: &std::sync::atomic::AtomicBool,
    api: &Api,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 64 * 1024 {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    match (method, path) {
        ("GET", "/.well-known/lembas.json") => {
            let body = options.discovery();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(resp.as_bytes()).await?;
            stream.flush().await?;
            stream.close().await
        }
        ("GET", "/v1/models") => api.models(&mut stream, &head).await,
        ("POST", "/v1/chat/completions") => api.chat(&mut stream, head).await,
        ("GET", "/v1/me/personalization") => api.get_personalization(&mut stream, &head).await,
        ("PUT", "/v1/me/personalization") => api.put_personalization(&mut stream, head).await,
        ("GET", "/api/devices/link") => {
            if let Some(answered) = api.refused_link(&mut stream).await {
                return answered;
            }
            let expected = format!("Bearer {}", options.token);
            let refused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let r = refused.clone();
            let check = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                let ok = req
                    .headers()
                    .get("authorization")
                    .is_some_and(|v| v.as_bytes() == expected.as_bytes());
                if ok {
                    Ok(resp)
                } else {
                    r.store(true, std::sync::atomic::Ordering::SeqCst);
                    let mut e = ErrorResponse::new(Some("unauthorized".into()));
                    *e.status_mut() = StatusCode::UNAUTHORIZED;
                    Err(e)
                }
            };
            let rewound = Rewind {
                prefix: head,
                pos: 0,
                inner: stream,
            };
            match async_tungstenite::accept_hdr_async_with_config(
                rewound,
                check,
                Some(crate::link::ws_config(
                    lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes,
                )),
            )
            .await
            {
                Ok(ws) => {
                    let _ = tx.send(Internal::Accepted(Box::new(ws))).await;
                }
                Err(e) => {
                    if refused.load(std::sync::atomic::Ordering::SeqCst) {
                        let _ = tx.send(Internal::Refused(401)).await;
                    }
                    log::debug!("test instance: handshake refused: {e}");
                }
            }
            Ok(())
        }
        // No token here: the relay is a loopback test fixture, and the device's own link on it
        // is what the token guards. Refused (503) while no device is linked, so a client's
        // socket opens only onto a device.
        ("GET", "/api/devices/relay") if options.relay => {
            if !linked.load(std::sync::atomic::Ordering::SeqCst) {
                stream
                    .write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\
                          connection: close\r\n\r\n",
                    )
                    .await?;
                return stream.flush().await;
            }
            let rewound = Rewind {
                prefix: head,
                pos: 0,
                inner: stream,
            };
            match async_tungstenite::accept_async_with_config(
                rewound,
                Some(crate::link::ws_config(
                    lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes,
                )),
            )
            .await
            {
                Ok(ws) => {
                    let _ = tx.send(Internal::RelayAccepted(Box::new(ws))).await;
                }
                Err(e) => log::debug!("test instance: relay handshake: {e}"),
            }
            Ok(())
        }
        _ => {
            stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await?;
            stream.flush().await
        }
    }
}

struct Link {
    gen: u64,
    out: Sender<Outgoing>,
    _tasks: (Task<()>, Task<()>),
}

async fn run_client(rx: Receiver<Internal>, events: Sender<Event>, liveness: Option<Liveness>) {
    let mut clock = Clock::new();
    let mut config = ClientConfig::default();
    config.liveness = liveness;
    let Ok(mut client) = Client::new(config, clock.now()) else {
        log::error!("test instance: the client config is refused");
        return;
    };
    let mut link: Option<Link> = None;
    let mut gen = 0u64;
    // Bounded, so a stalled client stops reading its socket and the device feels it.
    let (frames_tx, frames_rx) = channel::bounded::<Internal>(64);
    loop {
        let deadline = client.poll_timeout();
        let when = deadline.map(|at| clock.instant_of(at));
        let input = future::or(
            future::or(async { rx.recv().await.ok().map(Some) }, async {
                frames_rx.recv().await.ok().map(Some)
            }),
            async {
                match when {
                    Some(when) => smol::Timer::at(when).await,
                    None => future::pending().await,
                };
                // A deadline passed: no input, only the clock.
                Some(None)
            },
        )
        .await;
        let Some(input) = input else { return };
        let now = clock.now();
        client.handle_timeout(now);
        let Some(input) = input else {
            drain(&mut client, &mut link, &mut clock, &events).await;
            continue;
        };
        match input {
            Internal::Accepted(ws) => {
                if link.take().is_some() {
                    client.handle_link_down(now);
                    let _ = events.send(Event::LinkDown).await;
                }
                gen += 1;
                let g = gen;
                let (out_tx, out_rx) = channel::unbounded();
                let tasks = crate::link::carry(
                    *ws,
                    frames_tx.clone(),
                    // The test instance keeps no inbound bound: each token is dropped at once.
                    Gauge::new(usize::MAX),
                    move |b, _| Internal::Frame(g, b),
                    move || Some(Internal::Heard(g)),
                    move |_| Internal::Closed(g),
                    out_rx.into(),
                );
                link = Some(Link {
                    gen: g,
                    out: out_tx,
                    _tasks: tasks,
                });
                client.handle_link_up(now);
                let _ = events.send(Event::LinkUp).await;
            }
            Internal::Refused(status) => {
                let _ = events.send(Event::Refused(status)).await;
            }
            // Not served without `relay`.
            Internal::RelayAccepted(_) | Internal::RelayFrame(..) | Internal::RelayClosed(_) => {}
            Internal::Frame(g, bytes) => {
                if link.as_ref().is_some_and(|l| l.gen == g) {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let _ = events
                        .send(Event::Frame {
                            to_device: false,
                            text,
                        })
                        .await;
                    client.handle_frame(&bytes, now);
                }
            }
            Internal::Heard(g) => {
                if link.as_ref().is_some_and(|l| l.gen == g) {
                    client.handle_activity(now);
                }
            }
            Internal::Closed(g) => {
                if link.as_ref().is_some_and(|l| l.gen == g) {
                    link = None;
                    client.handle_link_down(now);
                    let _ = events.send(Event::LinkDown).await;
                }
            }
            Internal::Cmd(Cmd::Call {
                method,
                params,
                reply,
            }) => {
                let _ = reply.try_send(client.call(&method, &params, now));
            }
            Internal::Cmd(Cmd::Prompt {
                session,
                blocks,
                turn_id,
                reply,
            }) => {
                let _ = reply.try_send(client.prompt(&session, blocks, turn_id.as_deref(), now));
            }
            Internal::Cmd(Cmd::Respond(id, outcome)) => {
                client.respond(&id, outcome, now);
            }
            Internal::Cmd(Cmd::Notify {
                method,
                params,
                reply,
            }) => {
                let _ = reply.try_send(client.notify(&method, &params, now));
            }
            Internal::Cmd(Cmd::Stall(how_long)) => {
                smol::Timer::after(how_long).await;
            }
            Internal::Cmd(Cmd::Cut) => {
                if link.take().is_some() {
                    client.handle_link_down(now);
                    let _ = events.send(Event::LinkDown).await;
                }
            }
            Internal::Cmd(Cmd::Close(code, reason)) => {
                if let Some(l) = link.take() {
                    let _ = l.out.try_send(Outgoing::Close { code, reason });
                    // Let the writer send the close frame before the link is dropped.
                    smol::Timer::after(Duration::from_millis(50)).await;
                    client.handle_link_down(now);
                    let _ = events.send(Event::LinkDown).await;
                }
            }
        }
        drain(&mut client, &mut link, &mut clock, &events).await;
    }
}

/// Carry out what the client asks, until it asks nothing more.
async fn drain(
    client: &mut Client,
    link: &mut Option<Link>,
    clock: &mut Clock,
    events: &Sender<Event>,
) {
    {
        while let Some(out) = client.poll_output() {
            match out {
                ClientOutput::Send(frame) => {
                    if let Some(l) = &link {
                        let text = String::from_utf8_lossy(&frame).into_owned();
                        let _ = events
                            .send(Event::Frame {
                                to_device: true,
                                text,
                            })
                            .await;
                        let _ = l.out.try_send(Outgoing::Frame(frame, None));
                    }
                }
                ClientOutput::Close { code, reason } => {
                    if let Some(l) = link.take() {
                        let _ = l.out.try_send(Outgoing::Close { code, reason });
                        smol::Timer::after(Duration::from_millis(50)).await;
                        client.handle_link_down(clock.now());
                        let _ = events.send(Event::LinkDown).await;
                    }
                }
                ClientOutput::Ping => {
                    if let Some(l) = &link {
                        let _ = l.out.try_send(Outgoing::Ping);
                    }
                }
                ClientOutput::Event(e) => {
                    let _ = events.send(Event::Client(e)).await;
                }
                _ => {}
            }
        }
    }
}

/// A stream that first replays bytes already read from it (the request head read to route
/// it), then reads on.
pub struct Rewind<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.pos < self.prefix.len() {
            let n = buf.len().min(self.prefix.len() - self.pos);
            buf[..n].copy_from_slice(&self.prefix[self.pos..self.pos + n]);
            self.pos += n;
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}
