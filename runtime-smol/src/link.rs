//! The instance link on the device side: the discovery check at every dial, the WebSocket dial
//! with the device token in `Authorization`, and the two tasks that carry one socket's messages
//! to and from the driver.
//!
//! The token is a credential: it goes in one header (marked sensitive), and into no log line,
//! URL or error message. Dependencies' logs are capped (see [`crate::logger`]).

use std::sync::Arc;
use std::time::Duration;

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::http::{header::AUTHORIZATION, HeaderValue, Uri};
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::WebSocketStream;
use futures_lite::{future, AsyncRead, AsyncWrite, StreamExt};
use futures_util::SinkExt;
use lembas_core::device::{Burst, ConnId, DialFailure};
use lembas_core::discovery::{self, DiscoveryError};
use lembas_core::model::models::{self, ModelList};
use smol::channel::{Receiver, Sender};
use smol::net::TcpStream;
use smol::Task;

use crate::channels::{Dialer, Input, Outgoing};
use crate::outbox::{Gauge, Sent};

/// The device's end of a link.
pub type LinkSocket = WebSocketStream<async_tungstenite::smol::ClientStream<TcpStream>>;

/// How big one message may be on the socket: the core's frame limit (`frames.max_frame_bytes`)
/// and [`SOCKET_HEADROOM`] above it, so the core is the one that refuses (and names) an
/// over-long frame, answering a request's id.
pub fn ws_config(max_frame_bytes: usize) -> WebSocketConfig {
    let max = max_frame_bytes.saturating_add(SOCKET_HEADROOM);
    WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// What the socket reads past the frame limit before it gives up on a message (the link then
/// drops): 16 MiB, 64 MiB in all with the default limit of 48.
pub const SOCKET_HEADROOM: usize = 16 << 20;

/// An instance's address, as `lembas login` was given it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Instance {
    /// `https://host[:port]` or `http://host[:port]` (plain HTTP only for a loopback host).
    pub fn parse(url: &str) -> Result<Instance, String> {
        let uri: Uri = url
            .trim_end_matches('/')
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") | Some("wss") => true,
            Some("http") | Some("ws") => false,
            _ => return Err(format!("`{url}` is not an http:// or https:// URL")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("`{url}` names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if uri.path() != "/" && !uri.path().is_empty() {
            return Err(format!(
                "`{url}` has a path; give the instance's address alone"
            ));
        }
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let i = Instance { tls, host, port };
        if !tls && !i.is_loopback() {
            return Err(format!(
                "`{url}` is plain http to a host that is not this machine; use https://"
            ));
        }
        Ok(i)
    }

    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    pub fn base_url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.host_port()
        )
    }

    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/lembas.json", self.base_url())
    }

    pub fn link_url(&self) -> String {
        format!(
            "{}://{}/api/devices/link",
            if self.tls { "wss" } else { "ws" },
            self.host_port()
        )
    }
}

/// The agent of the one-shot GETs to the instance (discovery, the model list): a bound on the
/// whole request, statuses answered rather than errors, the login's extra CA trusted.
pub(crate) fn agent(ca: Option<&[u8]>) -> Result<ureq::Agent, String> {
    let mut config = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(15)))
        .http_status_as_error(false);
    if let Some(pem) = ca {
        let cert = ureq::tls::Certificate::from_pem(pem)
            .map_err(|e| format!("the CA file is not a PEM certificate: {e}"))?;
        config = config.tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]))
                .build(),
        );
    }
    Ok(config.build().into())
}

/// Fetch the discovery document (blocking; call through `blocking::unblock`).
pub fn fetch_discovery(instance: &Instance, ca: Option<&[u8]>) -> Result<Vec<u8>, String> {
    let agent = agent(ca)?;
    let url = instance.discovery_url();
    let mut resp = agent.get(&url).call().map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let body = resp
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_vec()
        .map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url} answered HTTP {}", status.as_u16()));
    }
    Ok(body)
}

/// The largest `/v1/models` body read.
const MAX_MODELS_BODY: u64 = 4 << 20;

/// Why the model list could not be had.
#[derive(Debug, PartialEq, Eq)]
pub enum ModelsError {
    /// The instance refused the device token (401 or 403).
    Refused(String),
    /// Anything else: unreachable, another status, a body that is not a model list.
    Failed(String),
}

impl std::fmt::Display for ModelsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelsError::Refused(s) | ModelsError::Failed(s) => f.write_str(s),
        }
    }
}

/// `GET <instance>/v1/models` with the device token, read as the device's models (blocking;
/// call through `blocking::unblock`).
pub fn fetch_models(
    instance: &Instance,
    token: &str,
    ca: Option<&[u8]>,
    max_models: usize,
) -> Result<ModelList, ModelsError> {
    let agent = agent(ca).map_err(ModelsError::Failed)?;
    let url = format!("{}/v1/models", instance.base_url());
    let mut resp = agent
        .get(&url)
        .header(AUTHORIZATION.as_str(), &format!("Bearer {token}"))
        .call()
        .map_err(|e| ModelsError::Failed(format!("{url}: {e}")))?;
    let status = resp.status().as_u16();
    if status == 401 || status == 403 {
        return Err(ModelsError::Refused(format!(
            "{url}: the instance refused the device token (HTTP {status}); run `lembas login` \
             again"
        )));
    }
    if !(200..300).contains(&status) {
        return Err(ModelsError::Failed(format!("{url} answered HTTP {status}")));
    }
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_MODELS_BODY)
        .read_to_vec()
        .map_err(|e| ModelsError::Failed(format!("{url}: {e}")))?;
    models::chat_models(&body, max_models).map_err(ModelsError::Failed)
}

/// Fetch the model list and the account's personalization (on `blocking`'s pool) and send them
/// to the driver; a failed list is logged and the last one kept (a personalization that cannot
/// be had is "not available": the device's own applies).
pub async fn send_models(
    instance: Instance,
    token: String,
    ca: Option<Arc<Vec<u8>>>,
    max_models: usize,
    tx: &Sender<Input>,
) {
    let fetched = blocking::unblock(move || {
        let ca = ca.as_deref().map(|v| &v[..]);
        let personal = crate::personalization::fetch(&instance, &token, ca);
        (fetch_models(&instance, &token, ca, max_models), personal)
    })
    .await;
    let (fetched, personal) = fetched;
    let _ = tx.send(Input::Personalization(personal)).await;
    match fetched {
        Ok(list) => {
            if let Some(note) = list.cut_note() {
                log::warn!("{note}");
            }
            let _ = tx.send(Input::Models(list.chat)).await;
        }
        Err(e) => log::warn!("the model list: {e}; the last one is kept"),
    }
}

/// Dials the instance of the saved login.
pub struct LinkDialer {
    pub instance: Instance,
    token: String,
    /// An extra certificate authority to trust (PEM).
    pub ca: Option<Arc<Vec<u8>>>,
    /// Where the model list and personalization fetched at each dial go (the driver), and
    /// how many chat models are kept (`engine.max_models`).
    models: Option<(Sender<Input>, usize)>,
    /// The device's `frames.max_frame_bytes`, which the socket's own bound stays above.
    max_frame_bytes: usize,
}

impl std::fmt::Debug for LinkDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkDialer")
            .field("instance", &self.instance)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl LinkDialer {
    pub fn new(instance: Instance, token: String, ca: Option<Vec<u8>>) -> LinkDialer {
        LinkDialer {
            instance,
            token,
            ca: ca.map(Arc::new),
            models: None,
            max_frame_bytes: lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes,
        }
    }

    /// The device's frame limit, when config.yaml sets one: a larger frame than the default
    /// still reaches the core whole.
    pub fn with_frame_limit(mut self, max_frame_bytes: usize) -> LinkDialer {
        self.max_frame_bytes = max_frame_bytes;
        self
    }

    /// Fetch the instance's models and the account's personalization at each dial (before the
    /// link opens, so its hello lists the models) and send them to `tx`.
    pub fn with_models(mut self, tx: Sender<Input>, max_models: usize) -> LinkDialer {
        self.models = Some((tx, max_models));
        self
    }

    /// Check discovery, then open the WebSocket.
    pub async fn connect(&self) -> Result<LinkSocket, DialFailure> {
        let instance = self.instance.clone();
        let ca = self.ca.clone();
        let doc =
            blocking::unblock(move || fetch_discovery(&instance, ca.as_deref().map(|v| &v[..])))
                .await
                .map_err(|e| {
                    log::warn!("discovery: {e}");
                    DialFailure::Transient
                })?;
        match discovery::check(&doc, &self.instance.host) {
            Ok(_) => {}
            Err(e @ DiscoveryError::Unsupported { .. }) => {
                return Err(DialFailure::Unsupported(e.to_string()))
            }
            Err(e) => {
                log::warn!("{e}");
                return Err(DialFailure::Transient);
            }
        }
        if let Some((tx, max_models)) = &self.models {
            let (instance, token) = (self.instance.clone(), self.token.clone());
            send_models(instance, token, self.ca.clone(), *max_models, tx).await;
        }
        let url = self.instance.link_url();
        let mut request = url.as_str().into_client_request().map_err(|e| {
            log::error!("{url}: {e}");
            DialFailure::Transient
        })?;
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.token)).map_err(|_| {
            DialFailure::Unsupported(
                "the saved device token holds characters a header cannot carry; run `lembas \
                 login` again"
                    .into(),
            )
        })?;
        auth.set_sensitive(true);
        request.headers_mut().insert(AUTHORIZATION, auth);
        let tcp = future::or(
            async {
                TcpStream::connect((self.instance.host.as_str(), self.instance.port))
                    .await
                    .map_err(|e| e.to_string())
            },
            async {
                smol::Timer::after(Duration::from_secs(15)).await;
                Err("timed out".to_string())
            },
        )
        .await
        .map_err(|e| {
            log::warn!("{url}: {e}");
            DialFailure::Transient
        })?;
        let _ = tcp.set_nodelay(true);
        let connector = self
            .ca
            .as_ref()
            .map(|pem| tls_connector(Some(pem)))
            .transpose()
            .map_err(|e| {
                log::error!("{e}");
                DialFailure::Transient
            })?;
        match async_tungstenite::smol::client_async_tls_with_connector_and_config(
            request,
            tcp,
            connector,
            Some(ws_config(self.max_frame_bytes)),
        )
        .await
        {
            Ok((ws, _)) => Ok(ws),
            Err(WsError::Http(resp))
                if resp.status().as_u16() == 401 || resp.status().as_u16() == 403 =>
            {
                log::warn!(
                    "{url}: the instance refused the device token (HTTP {})",
                    resp.status().as_u16()
                );
                Err(DialFailure::TokenRefused)
            }
            Err(WsError::Http(resp)) => {
                log::warn!("{url}: HTTP {}", resp.status().as_u16());
                Err(DialFailure::Transient)
            }
            Err(e) => {
                log::warn!("{url}: {e}");
                Err(DialFailure::Transient)
            }
        }
    }
}

impl Dialer for LinkDialer {
    fn dial(&self) -> future::Boxed<Result<Box<LinkSocket>, DialFailure>> {
        let me = LinkDialer {
            instance: self.instance.clone(),
            token: self.token.clone(),
            ca: self.ca.clone(),
            models: self.models.clone(),
            max_frame_bytes: self.max_frame_bytes,
        };
        Box::pin(async move { me.connect().await.map(Box::new) })
    }
}

/// A TLS connector trusting the web's roots and the extra CA in `ca` (the login's `ca_file`).
pub fn tls_connector(ca: Option<&[u8]>) -> Result<futures_rustls::TlsConnector, String> {
    use futures_rustls::rustls::{self, pki_types::pem::PemObject, pki_types::CertificateDer};
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in CertificateDer::pem_slice_iter(ca.unwrap_or_default()) {
        let cert = cert.map_err(|e| format!("the CA file is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("the CA file's certificate is not usable: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(futures_rustls::TlsConnector::from(Arc::new(config)))
}

/// Carry one socket for the driver: a reader task feeding it, a writer task draining `out`.
/// The reader stops reading while `inbound`'s mark of what it read waits for the driver; the
/// writer merges chunks while `outbound` (the connection's queue) is past its pause mark.
pub fn spawn_socket<S>(
    ws: WebSocketStream<S>,
    conn: ConnId,
    tx: Sender<Input>,
    inbound: Arc<Gauge>,
    out: Receiver<Outgoing>,
    outbound: Arc<Gauge>,
) -> (Task<()>, Task<()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    carry(
        ws,
        tx,
        inbound,
        move |bytes, held| Input::Frame { conn, bytes, held },
        move || Some(Input::Heard { conn }),
        move |code| Input::Closed { conn, code },
        Outbound {
            rx: out,
            behind: Some(outbound),
        },
    )
}

/// What a socket's writer writes: the frames queued on `rx`, and with `behind` (the queue's
/// gauge) a text chunk merged into its session's latest chunk frame of its stream in a burst
/// while the queue is past its pause mark ([`Burst`]; the reader is behind, and the frames'
/// envelopes are most of what it has to read).
pub struct Outbound {
    pub rx: Receiver<Outgoing>,
    pub behind: Option<Arc<Gauge>>,
}

impl From<Receiver<Outgoing>> for Outbound {
    /// Every frame as it came.
    fn from(rx: Receiver<Outgoing>) -> Outbound {
        Outbound { rx, behind: None }
    }
}

/// Feed a burst's frames to `sink` (a frame that is not UTF-8 is no text message: dropped, as
/// the core never writes one). Returns whether the socket took them.
async fn feed<Si>(sink: &mut Si, burst: &mut Burst) -> bool
where
    Si: futures_util::Sink<Message> + Unpin,
    Si::Error: std::fmt::Display,
{
    for frame in burst.drain() {
        let Ok(text) = String::from_utf8(frame) else {
            continue;
        };
        if let Err(e) = sink.feed(Message::text(text)).await {
            log::debug!("socket write: {e}");
            return false;
        }
    }
    true
}

/// How long a socket's reader outlives its writer: time for the peer's answer to our close
/// frame. A peer that never answers (a black-holed link) must not hold the socket open.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How long the writer may take to flush what is left and send the close frame: long enough
/// for the last burst on a slow link, bounded so a peer that reads nothing (a black hole with
/// full buffers) cannot hold the writer, and the socket, for ever.
const CLOSE_WRITE_BOUND: Duration = Duration::from_secs(10);

/// Carry one socket: each message becomes `frame(bytes, held)` on `tx`, a ping or pong `heard()`
/// (when it gives something: proof the link is alive), its end `closed(code)`; what arrives
/// on `out` is written (merged while it is behind: [`Outbound`]). Pings are answered by
/// tungstenite as it reads. `held` counts the
/// message in `inbound` until it is dropped (handled): past `inbound`'s mark the reader reads
/// no more, so a peer faster than its consumer blocks instead of growing `tx`'s queue. A
/// consumer that keeps no bound drops `held` at once.
pub fn carry<S, T>(
    ws: WebSocketStream<S>,
    tx: Sender<T>,
    inbound: Arc<Gauge>,
    frame: impl Fn(Vec<u8>, Sent) -> T + Send + 'static,
    heard: impl Fn() -> Option<T> + Send + 'static,
    closed: impl FnOnce(Option<u16>) -> T + Send + 'static,
    out: Outbound,
) -> (Task<()>, Task<()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    // Closed (dropped) when the writer ends: sent our close, or gave up on the socket.
    let (writer_alive, writer_ended) = smol::channel::bounded::<()>(1);
    let reader = smol::spawn(async move {
        let mut code = None;
        let mut grace = std::pin::pin!(async move {
            let _ = writer_ended.recv().await;
            smol::Timer::after(CLOSE_GRACE).await;
        });
        loop {
            let next = future::or(
                async {
                    inbound.below_pause().await;
                    Some(stream.next().await)
                },
                async {
                    (&mut grace).await;
                    None
                },
            )
            .await;
            let Some(Some(msg)) = next else {
                if next.is_none() {
                    log::debug!("socket: no close answer within {CLOSE_GRACE:?}; dropped");
                }
                break;
            };
            let bytes = match msg {
                Ok(Message::Text(t)) => t.as_bytes().to_vec(),
                Ok(Message::Binary(b)) => b.to_vec(),
                Ok(Message::Close(f)) => {
                    code = f.map(|f| u16::from(f.code));
                    break;
                }
                Ok(Message::Ping(_) | Message::Pong(_)) => {
                    if let Some(input) = heard() {
                        if tx.send(input).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(WsError::Capacity(e)) => {
                    // Past the socket's bound the message cannot be read, nor answered: the
                    // link drops, and the log says which bound.
                    log::warn!(
                        "socket read: {e}: a message over frames.max_frame_bytes and {} MiB \
                         more; the link is dropped",
                        SOCKET_HEADROOM >> 20
                    );
                    break;
                }
                Err(e) => {
                    log::debug!("socket read: {e}");
                    break;
                }
            };
            let held = inbound.hold(bytes.len());
            if tx.send(frame(bytes, held)).await.is_err() {
                return;
            }
        }
        let _ = tx.send(closed(code)).await;
    });
    let writer = smol::spawn(async move {
        let _alive = writer_alive;
        let Outbound { rx: out, behind } = out;
        // What is queued goes out as one burst: each frame fed, one flush (socket write) when
        // the queue runs dry or every 64 KiB. The frames' gauge tokens are held until then.
        let mut held = Vec::new();
        let mut burst = Burst::default();
        // Whether the queue was past its mark when the last burst was written, that burst still
        // counted (as `lines::write_lines` keeps it).
        let mut late = false;
        while let Ok(first) = out.recv().await {
            late |= behind.as_ref().is_some_and(|g| g.paused());
            let mut next = Some(first);
            while let Some(o) = next.take() {
                match o {
                    Outgoing::Frame(frame, sent) => {
                        held.extend(sent);
                        burst.push(frame, late);
                    }
                    Outgoing::Frames(frames, sent) => {
                        held.push(sent);
                        for frame in frames {
                            burst.push(frame, late);
                        }
                    }
                    Outgoing::Ping => {
                        if !feed(&mut sink, &mut burst).await {
                            return;
                        }
                        if let Err(e) = sink.feed(Message::Ping(Default::default())).await {
                            log::debug!("socket write: {e}");
                            return;
                        }
                    }
                    Outgoing::Close { code, reason } => {
                        future::or(
                            async {
                                if feed(&mut sink, &mut burst).await {
                                    let _ = SinkExt::flush(&mut sink).await;
                                    let _ = sink
                                        .close(Some(CloseFrame {
                                            code: CloseCode::from(code),
                                            reason: reason.into(),
                                        }))
                                        .await;
                                }
                            },
                            async {
                                smol::Timer::after(CLOSE_WRITE_BOUND).await;
                            },
                        )
                        .await;
                        return;
                    }
                }
                if burst.bytes() >= 64 * 1024 {
                    break;
                }
                next = out.try_recv().ok();
            }
            if !feed(&mut sink, &mut burst).await {
                return;
            }
            if let Err(e) = SinkExt::flush(&mut sink).await {
                log::debug!("socket write: {e}");
                return;
            }
            late = behind.as_ref().is_some_and(|g| g.paused());
            held.clear();
        }
        let _ = sink.close(None).await;
    });
    (reader, writer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_reads_past_the_frame_limit_it_is_given() {
        let default = lembas_core::jsonrpc::FrameLimits::default().max_frame_bytes;
        let c = ws_config(default);
        assert_eq!(c.max_message_size, Some(64 << 20), "48 MiB and 16 more");
        // A limit set above the default moves the socket's bound with it (it stayed at 64 MiB,
        // and a frame the core would take dropped the link instead).
        let c = ws_config(100 << 20);
        assert_eq!(c.max_message_size, Some((100 << 20) + SOCKET_HEADROOM));
        assert_eq!(c.max_frame_size, c.max_message_size);
        let dialer = LinkDialer::new(
            Instance::parse("ws://127.0.0.1:1").unwrap(),
            "t".into(),
            None,
        );
        assert_eq!(dialer.max_frame_bytes, default);
        assert_eq!(
            dialer.with_frame_limit(100 << 20).max_frame_bytes,
            100 << 20
        );
    }

    /// A socket whose peer went silent (reads nothing, answers nothing, never closes): after
    /// our close, the reader lets go within its grace and reports the end, so the socket is
    /// not held open for ever.
    #[test]
    fn a_socket_whose_peer_never_answers_our_close_is_let_go() {
        smol::block_on(async {
            let listener = smol::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = smol::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let ws = async_tungstenite::accept_async(tcp).await.unwrap();
                // Black hole: hold the socket, read nothing.
                smol::Timer::after(Duration::from_secs(60)).await;
                drop(ws);
            });
            let tcp = TcpStream::connect(addr).await.unwrap();
            let (ws, _) = async_tungstenite::client_async(format!("ws://{addr}/"), tcp)
                .await
                .unwrap();
            let (tx, rx) = smol::channel::unbounded::<Option<Option<u16>>>();
            let (out_tx, out_rx) = smol::channel::unbounded();
            let (_reader, _writer) = carry(
                ws,
                tx,
                Gauge::new(usize::MAX),
                |_, _| None,
                || None,
                Some,
                out_rx.into(),
            );
            let start = std::time::Instant::now();
            out_tx
                .try_send(Outgoing::Close {
                    code: 1001,
                    reason: "gone".into(),
                })
                .unwrap();
            let ended = future::or(async { rx.recv().await.ok() }, async {
                smol::Timer::after(Duration::from_secs(20)).await;
                None
            })
            .await;
            assert_eq!(ended, Some(Some(None)), "the reader never let go");
            assert!(start.elapsed() >= CLOSE_GRACE, "{:?}", start.elapsed());
            drop(peer);
        });
    }

    /// A peer that writes faster than the device handles: the reader stops at its inbound mark
    /// (plus the one message it was reading), so what waits for the driver stays bounded; once
    /// the driver takes them, every message arrives, in order.
    #[test]
    fn a_reader_waits_at_its_inbound_mark_and_loses_nothing() {
        const FRAME: usize = 256 * 1024;
        const FRAMES: usize = 40;
        const MARK: usize = 1024 * 1024;
        smol::block_on(async {
            let listener = smol::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = smol::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = async_tungstenite::accept_async(tcp).await.unwrap();
                for i in 0..FRAMES {
                    let mut text = format!("{i:08}");
                    text.push_str(&"x".repeat(FRAME - text.len()));
                    ws.send(Message::text(text)).await.unwrap();
                }
                smol::Timer::after(Duration::from_secs(60)).await;
            });
            let tcp = TcpStream::connect(addr).await.unwrap();
            let (ws, _) = async_tungstenite::client_async(format!("ws://{addr}/"), tcp)
                .await
                .unwrap();
            let (tx, rx) = smol::channel::unbounded::<Result<(Vec<u8>, Sent), Option<u16>>>();
            let (_out_tx, out_rx) = smol::channel::unbounded();
            let inbound = Gauge::new(MARK);
            let (_reader, _writer) = carry(
                ws,
                tx,
                inbound.clone(),
                |bytes, held| Ok((bytes, held)),
                || None,
                Err,
                out_rx.into(),
            );
            // The driver is busy: nothing is taken while the peer writes all it has.
            smol::Timer::after(Duration::from_millis(500)).await;
            let waiting = inbound.queued();
            assert!(
                (MARK..=MARK + FRAME).contains(&waiting),
                "{waiting} bytes read ahead of the driver, past the mark of {MARK} and one frame"
            );
            assert_eq!(rx.len(), MARK / FRAME, "messages waiting");
            for i in 0..FRAMES {
                let Ok((bytes, held)) = rx.recv().await.unwrap() else {
                    panic!("the socket ended at message {i}");
                };
                assert_eq!(bytes.len(), FRAME);
                assert_eq!(&bytes[..8], format!("{i:08}").as_bytes(), "order");
                drop(held);
            }
            assert_eq!(inbound.queued(), 0);
            drop(peer);
        });
    }

    #[test]
    fn instance_urls() {
        let i = Instance::parse("https://lembas.example").unwrap();
        assert_eq!(i.link_url(), "wss://lembas.example:443/api/devices/link");
        assert_eq!(
            i.discovery_url(),
            "https://lembas.example:443/.well-known/lembas.json"
        );
        let i = Instance::parse("http://127.0.0.1:8080/").unwrap();
        assert_eq!(i.link_url(), "ws://127.0.0.1:8080/api/devices/link");
        assert!(Instance::parse("http://lembas.example")
            .unwrap_err()
            .contains("https://"));
        assert!(Instance::parse("ftp://x").is_err());
        assert!(Instance::parse("https://x/some/path").is_err());
    }
}
