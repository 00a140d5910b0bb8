//! The engine's I/O, performed: each `IoCall::Fetch` is one smol task that owns its connection
//! to the instance (hyper's HTTP/1 client over smol's TCP, TLS by futures-rustls), and each
//! `ReadAttachment` one read on `blocking`'s pool, of a file in the session's attachment
//! directory and nowhere else. A `Tool` call is performed by [`crate::tools`], confined: file
//! work on `blocking`'s pool, a command as a task that owns its process group (read like a
//! body, killed with its call). Replies go back to the driver as
//! [`Input::Io`]; the driver hands the ones still wanted to the engine.
//!
//! A body is read only when the engine asks (`IoCall::Read`, one at a time), so a reader who is
//! behind holds the instance back through TCP. `Abort` drops the call's task: its connection is
//! closed at once, and nothing more is reported for it.
//!
//! The device token goes in one header (marked sensitive) and in no reason, log line or URL.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_lite::{future, AsyncRead, AsyncWrite};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, RETRY_AFTER};
use hyper::{Method, Request};
use lembas_core::engine_io::{HttpMethod, IoCall, IoId, IoReply, ToolOp, ToolRequest};
use smol::channel::{self, Receiver, Sender};
use smol::net::TcpStream;
use smol::Task;
use smol_hyper::rt::FuturesIo;

use crate::channels::Input;
use crate::link::Instance;
use crate::tools::{self, CancelOnDrop, ToolSettings};

/// How long a connection (TCP and TLS) may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The path whose answer is a stream of server-sent events.
const CHAT_PATH: &str = "/v1/chat/completions";

/// The instance the engine's requests go to, and the token they carry.
pub struct Target {
    instance: Instance,
    token: String,
    tls: Option<futures_rustls::TlsConnector>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("instance", &self.instance)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl Target {
    /// `ca`: the login's extra certificate authority (PEM), trusted with the web's roots.
    pub fn new(instance: Instance, token: String, ca: Option<&[u8]>) -> Result<Target, String> {
        let tls = if instance.tls {
            Some(crate::link::tls_connector(ca)?)
        } else {
            None
        };
        Ok(Target {
            instance,
            token,
            tls,
        })
    }
}

/// A byte stream to the instance: plain TCP (loopback only), or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// One call under way.
struct Call {
    /// Where a fetch's or a command's reads are asked for (`None` for file work).
    reads: Option<Sender<usize>>,
    /// A read was asked for and not yet answered.
    reading: bool,
    /// Dropping it cancels the call and closes its connection.
    _task: Task<()>,
}

/// Performs the engine's calls for the driver.
pub struct Performer {
    target: Option<Arc<Target>>,
    /// Where each session's attachments are (`<dir>/<session id>/<file name>`).
    attachments: PathBuf,
    /// What the model's tools may not touch, and the shell commands run through.
    tools: Arc<ToolSettings>,
    calls: HashMap<IoId, Call>,
    tx: Sender<Input>,
}

impl Performer {
    /// `target`: `None` when the device is not logged in (every fetch then fails, saying so).
    /// Tools get the defaults for this user ([`ToolSettings::from_env`]) until
    /// [`Performer::set_tools`].
    pub fn new(target: Option<Arc<Target>>, attachments: PathBuf, tx: Sender<Input>) -> Performer {
        Performer {
            target,
            attachments,
            tools: Arc::new(ToolSettings::from_env()),
            calls: HashMap::new(),
            tx,
        }
    }

    /// Tools set as the config says, for the calls that start from now on.
    pub fn set_tools(&mut self, tools: Arc<ToolSettings>) {
        self.tools = tools;
    }

    /// Calls under way.
    pub fn running(&self) -> usize {
        self.calls.len()
    }

    /// Start, feed or stop what `call` asks. A reply known at once (a read of a call that is
    /// not open, say) is returned for the driver to hand over now.
    pub fn perform(&mut self, call: IoCall) -> Option<IoReply> {
        match call {
            IoCall::Fetch {
                id,
                method,
                path,
                body,
            } => {
                let Some(target) = self.target.clone() else {
                    return Some(failed(
                        "this device is not logged in to an instance; run `lembas login`",
                    ));
                };
                let (reads_tx, reads_rx) = channel::bounded(1);
                let task = smol::spawn(fetch(
                    target,
                    id,
                    method,
                    path,
                    body,
                    reads_rx,
                    self.tx.clone(),
                ));
                self.start(id, Some(reads_tx), task)
            }
            IoCall::Read { id, max } => {
                let Some(call) = self.calls.get_mut(&id).filter(|c| c.reads.is_some()) else {
                    return Some(failed(format!("no request {} is open to read", id.0)));
                };
                if call.reading {
                    return Some(failed(format!(
                        "request {} already has a read outstanding",
                        id.0
                    )));
                }
                call.reading = true;
                // Room is certain (one read at a time); a task that ended has its last reply
                // on its way.
                let _ = call.reads.as_ref().map(|r| r.try_send(max.max(1)));
                None
            }
            IoCall::Abort { id } => {
                if self.calls.remove(&id).is_some() {
                    log::debug!("engine call {} aborted", id.0);
                }
                None
            }
            IoCall::ReadAttachment {
                id,
                session_id,
                file_name,
                max,
            } => {
                // The engine names a session's file, never a path: nothing else can be read.
                if !plain_name(&session_id) || !plain_name(&file_name) {
                    return Some(failed(format!(
                        "`{session_id}/{file_name}` is not a session's attachment (a plain file \
                         name in a session's directory)"
                    )));
                }
                let path = self.attachments.join(&session_id).join(&file_name);
                let tx = self.tx.clone();
                let task = smol::spawn(async move {
                    let reply = blocking::unblock(move || read_file(&path, max)).await;
                    let _ = tx.send(Input::Io { id, reply }).await;
                });
                self.start(id, None, task)
            }
            IoCall::Tool { id, request } => {
                let task = self.tool(id, *request);
                let reads = task.1;
                self.start(id, reads, task.0)
            }
        }
    }

    /// The task that performs a tool call, and for a command, where its reads go.
    fn tool(&self, id: IoId, request: ToolRequest) -> (Task<()>, Option<Sender<usize>>) {
        let settings = self.tools.clone();
        let tx = self.tx.clone();
        if let ToolOp::Run { .. } = request.op {
            let (reads_tx, reads_rx) = channel::bounded(1);
            let send = move |reply: IoReply| {
                let tx = tx.clone();
                async move { tx.send(Input::Io { id, reply }).await.is_ok() }
            };
            let task = smol::spawn(tools::run::run(settings, request, reads_rx, send));
            return (task, Some(reads_tx));
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let task = smol::spawn(async move {
            // Dropped with the task when the call is aborted: a walk under way stops.
            let _stop = CancelOnDrop(cancel.clone());
            let reply =
                blocking::unblock(move || tools::perform(&settings, &request, &cancel)).await;
            let _ = tx.send(Input::Io { id, reply }).await;
        });
        (task, None)
    }

    fn start(&mut self, id: IoId, reads: Option<Sender<usize>>, task: Task<()>) -> Option<IoReply> {
        if self.calls.contains_key(&id) {
            // The engine names each call uniquely; a second one under the same id would get
            // the first one's replies.
            drop(task);
            return Some(failed(format!("call {} is already under way", id.0)));
        }
        self.calls.insert(
            id,
            Call {
                reads,
                reading: false,
                _task: task,
            },
        );
        None
    }

    /// A reply came back from a call's task: whether the engine still wants it (its call was
    /// not aborted). A call's last reply (`End`, `Failed`, `File`) forgets it.
    pub fn accept(&mut self, id: IoId, reply: &IoReply) -> bool {
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        call.reading = false;
        if matches!(
            reply,
            IoReply::End
                | IoReply::Failed { .. }
                | IoReply::File { .. }
                | IoReply::Tool { .. }
                | IoReply::Exit { .. }
        ) {
            self.calls.remove(&id);
        }
        true
    }
}

fn failed(reason: impl Into<String>) -> IoReply {
    IoReply::Failed {
        reason: reason.into(),
    }
}

/// A name that stays in its directory: not empty, `.` or `..`, and no separator.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The first `max` bytes of the file at `path`, and its size.
fn read_file(path: &Path, max: u64) -> IoReply {
    let read = || -> std::io::Result<IoReply> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(std::io::Error::other("is a directory"));
        }
        let mut bytes = Vec::new();
        file.take(max).read_to_end(&mut bytes)?;
        Ok(IoReply::File {
            bytes,
            size: meta.len(),
        })
    };
    read().unwrap_or_else(|e| failed(format!("{}: {e}", path.display())))
}

/// One request, from its connection to its body's end. Its replies go to `tx`.
async fn fetch(
    target: Arc<Target>,
    id: IoId,
    method: HttpMethod,
    path: String,
    body: Vec<u8>,
    reads: Receiver<usize>,
    tx: Sender<Input>,
) {
    let send = |reply: IoReply| {
        let tx = tx.clone();
        async move { tx.send(Input::Io { id, reply }).await.is_ok() }
    };
    let url = format!("{}{path}", target.instance.base_url());
    let (response, _connection) = match request(&target, method, &path, body).await {
        Ok(r) => r,
        Err(reason) => {
            send(failed(format!("{url}: {reason}"))).await;
            return;
        }
    };
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let head = IoReply::Head {
        status: response.status().as_u16(),
        retry_after,
    };
    if !send(head).await {
        return;
    }
    let mut body = response.into_body();
    let mut left = Bytes::new();
    while let Ok(max) = reads.recv().await {
        while left.is_empty() {
            match body.frame().await {
                None => {
                    send(IoReply::End).await;
                    return;
                }
                Some(Err(e)) => {
                    send(failed(format!("{url}: reading the answer: {e}"))).await;
                    return;
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        left = data;
                    }
                }
            }
        }
        let piece = left.split_to(max.min(left.len()));
        if !send(IoReply::Body(piece.to_vec())).await {
            return;
        }
    }
}

/// Open a connection and send the request; the response's head, and the task that drives the
/// connection (dropped with the request, which closes it).
async fn request(
    target: &Target,
    method: HttpMethod,
    path: &str,
    body: Vec<u8>,
) -> Result<(hyper::Response<hyper::body::Incoming>, Task<()>), String> {
    if !path.starts_with('/') {
        return Err("not a path on the instance".into());
    }
    let instance = &target.instance;
    let mut auth = HeaderValue::from_str(&format!("Bearer {}", target.token)).map_err(|_| {
        "the saved device token holds characters a header cannot carry; run `lembas login` again"
            .to_string()
    })?;
    auth.set_sensitive(true);
    let mut builder = Request::builder()
        .method(match method {
            HttpMethod::Get => Method::GET,
            HttpMethod::Post => Method::POST,
        })
        .uri(path)
        .header(HOST, instance.host_port())
        .header(AUTHORIZATION, auth);
    if method == HttpMethod::Post {
        builder = builder.header(CONTENT_TYPE, "application/json");
    }
    if path == CHAT_PATH {
        builder = builder.header(ACCEPT, "text/event-stream");
    }
    let request = builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("the request cannot be made: {e}"))?;
    let stream = connect(target).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(FuturesIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake with {}: {e}", instance.host))?;
    let connection = smol::spawn(async move {
        if let Err(e) = connection.await {
            log::debug!("engine connection: {e}");
        }
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("{}: {e}", instance.host))?;
    Ok((response, connection))
}

/// TCP to the instance, and TLS over it for https, within [`CONNECT_TIMEOUT`].
async fn connect(target: &Target) -> Result<Box<dyn Stream>, String> {
    let instance = &target.instance;
    let open = async {
        let tcp = TcpStream::connect((instance.host.as_str(), instance.port))
            .await
            .map_err(|e| format!("connecting to {}: {e}", instance.host_port()))?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &target.tls else {
            return Ok(Box::new(tcp) as Box<dyn Stream>);
        };
        let name = futures_rustls::rustls::pki_types::ServerName::try_from(instance.host.clone())
            .map_err(|e| format!("`{}` is not a TLS server name: {e}", instance.host))?;
        let stream = tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {}: {e}", instance.host))?;
        Ok(Box::new(stream) as Box<dyn Stream>)
    };
    future::or(open, async {
        smol::Timer::after(CONNECT_TIMEOUT).await;
        Err(format!(
            "connecting to {} timed out after {}s",
            instance.host_port(),
            CONNECT_TIMEOUT.as_secs()
        ))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use smol::net::TcpListener;
    use std::time::Instant;

    const TOKEN: &str = "tok-S3CRET-unit";

    fn performer(port: u16) -> (Performer, Receiver<Input>) {
        let instance = Instance::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let target = Target::new(instance, TOKEN.into(), None).unwrap();
        let (tx, rx) = channel::bounded(16);
        (
            Performer::new(Some(Arc::new(target)), PathBuf::from("/nonexistent"), tx),
            rx,
        )
    }

    /// The next reply from a call's task (within 5 s), passed through `accept` as the driver
    /// does.
    async fn reply(p: &mut Performer, rx: &Receiver<Input>) -> (IoId, IoReply) {
        let input = future::or(async { rx.recv().await.ok() }, async {
            smol::Timer::after(Duration::from_secs(5)).await;
            None
        })
        .await
        .expect("no reply within 5 s");
        let Input::Io { id, reply } = input else {
            panic!("not an engine reply");
        };
        assert!(p.accept(id, &reply), "a reply for a call not open");
        (id, reply)
    }

    /// Read a request's head off `stream`.
    async fn read_head(stream: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request ended early");
            head.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(head).unwrap()
    }

    fn chat(id: u64) -> IoCall {
        IoCall::Fetch {
            id: IoId(id),
            method: HttpMethod::Post,
            path: CHAT_PATH.into(),
            body: br#"{"stream":true}"#.to_vec(),
        }
    }

    /// A chunked body sent slowly arrives as a head, then pieces no bigger than each read
    /// asked for, then its end; the request carried the token, the content type and the
    /// event-stream accept.
    #[test]
    fn a_streamed_body_arrives_in_the_pieces_asked_for() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = smol::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let head = read_head(&mut s).await;
                s.write_all(
                    b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\n\
                      transfer-encoding: chunked\r\n\r\n",
                )
                .await
                .unwrap();
                for word in ["hello", "there", "world"] {
                    s.write_all(format!("5\r\n{word}\r\n").as_bytes())
                        .await
                        .unwrap();
                    s.flush().await.unwrap();
                    smol::Timer::after(Duration::from_millis(50)).await;
                }
                s.write_all(b"0\r\n\r\n").await.unwrap();
                head
            });
            let (mut p, rx) = performer(port);
            assert_eq!(p.perform(chat(1)), None);
            assert_eq!(
                reply(&mut p, &rx).await,
                (
                    IoId(1),
                    IoReply::Head {
                        status: 429,
                        retry_after: Some("3".into())
                    }
                )
            );
            let mut body = Vec::new();
            let mut pieces = 0;
            loop {
                assert_eq!(
                    p.perform(IoCall::Read {
                        id: IoId(1),
                        max: 3
                    }),
                    None
                );
                match reply(&mut p, &rx).await.1 {
                    IoReply::Body(b) => {
                        assert!(!b.is_empty() && b.len() <= 3, "{b:?}");
                        body.extend(b);
                        pieces += 1;
                    }
                    IoReply::End => break,
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(body, b"hellothereworld");
            assert!(pieces >= 6, "{pieces} pieces");
            assert_eq!(p.running(), 0, "the call is forgotten at its end");
            let head = server.await.to_ascii_lowercase();
            assert!(
                head.starts_with("post /v1/chat/completions http/1.1"),
                "{head}"
            );
            assert!(
                head.contains(&format!(
                    "authorization: bearer {}",
                    TOKEN.to_ascii_lowercase()
                )),
                "{head}"
            );
            assert!(head.contains("content-type: application/json"), "{head}");
            assert!(head.contains("accept: text/event-stream"), "{head}");
            assert!(head.contains(&format!("host: 127.0.0.1:{port}")), "{head}");
        });
    }

    /// Abort while the server is between chunks: the server's socket ends within a second,
    /// and nothing more is reported for the call.
    #[test]
    fn abort_closes_the_connection_at_once() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (aborted_tx, aborted_rx) = channel::bounded::<Instant>(1);
            let server = smol::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                read_head(&mut s).await;
                s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
                    .await
                    .unwrap();
                s.flush().await.unwrap();
                let aborted_at = aborted_rx.recv().await.unwrap();
                // Waiting to send more: the client's end closing shows as EOF (or a reset).
                let mut buf = [0u8; 64];
                let ended = future::or(
                    async {
                        loop {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return Some(aborted_at.elapsed()),
                                Ok(_) => continue,
                            }
                        }
                    },
                    async {
                        smol::Timer::after(Duration::from_secs(5)).await;
                        None
                    },
                )
                .await;
                ended
            });
            let (mut p, rx) = performer(port);
            p.perform(chat(7));
            assert!(matches!(
                reply(&mut p, &rx).await.1,
                IoReply::Head { status: 200, .. }
            ));
            p.perform(IoCall::Read {
                id: IoId(7),
                max: 100,
            });
            assert_eq!(reply(&mut p, &rx).await.1, IoReply::Body(b"first".to_vec()));
            // A read asked for and not yet answered when the abort comes.
            p.perform(IoCall::Read {
                id: IoId(7),
                max: 100,
            });
            assert_eq!(p.perform(IoCall::Abort { id: IoId(7) }), None);
            aborted_tx.send(Instant::now()).await.unwrap();
            let took = server
                .await
                .expect("the server's socket stayed open 5 s after abort");
            assert!(took < Duration::from_secs(1), "closed after {took:?}");
            assert_eq!(p.running(), 0);
            // A reply already in the channel is not the engine's any more.
            while let Ok(Input::Io { id, reply }) = rx.try_recv() {
                assert!(!p.accept(id, &reply), "{reply:?} reported after the abort");
            }
        });
    }

    /// A refused connection fails the call, naming the host and never the token.
    #[test]
    fn a_refused_port_fails_without_the_token() {
        smol::block_on(async {
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            };
            let (mut p, rx) = performer(port);
            p.perform(chat(2));
            let IoReply::Failed { reason } = reply(&mut p, &rx).await.1 else {
                panic!("not a failure");
            };
            assert!(reason.contains(&format!("127.0.0.1:{port}")), "{reason}");
            assert!(!reason.contains("S3CRET"), "{reason}");
            assert_eq!(p.running(), 0);
        });
    }

    /// A read of a call that is not open, and a second read while one is outstanding, are
    /// refused at once.
    #[test]
    fn reads_out_of_turn_are_refused() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let _server = smol::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                read_head(&mut s).await;
                s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await
                    .unwrap();
                smol::Timer::after(Duration::from_secs(10)).await;
                drop(s);
            });
            let (mut p, rx) = performer(port);
            assert!(matches!(
                p.perform(IoCall::Read {
                    id: IoId(9),
                    max: 10
                }),
                Some(IoReply::Failed { .. })
            ));
            p.perform(chat(3));
            reply(&mut p, &rx).await;
            assert_eq!(
                p.perform(IoCall::Read {
                    id: IoId(3),
                    max: 10
                }),
                None
            );
            // The first read waits for bytes the server does not send; a second is refused.
            let second = p.perform(IoCall::Read {
                id: IoId(3),
                max: 10,
            });
            assert!(
                matches!(&second, Some(IoReply::Failed { reason }) if reason.contains("outstanding")),
                "{second:?}"
            );
        });
    }

    /// An attachment's first bytes and its size; a missing one fails; a name that would
    /// leave the session's directory is refused without a read.
    #[test]
    fn an_attachment_read_gives_its_first_bytes_and_its_size() {
        smol::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("ses_1")).unwrap();
            std::fs::write(dir.path().join("ses_1/a.txt"), b"0123456789").unwrap();
            std::fs::write(dir.path().join("secret"), b"no").unwrap();
            let (tx, rx) = channel::bounded(16);
            let mut p = Performer::new(None, dir.path().to_path_buf(), tx);
            let read = |id: u64, session: &str, name: &str| IoCall::ReadAttachment {
                id: IoId(id),
                session_id: session.into(),
                file_name: name.into(),
                max: 4,
            };
            p.perform(read(4, "ses_1", "a.txt"));
            assert_eq!(
                reply(&mut p, &rx).await.1,
                IoReply::File {
                    bytes: b"0123".to_vec(),
                    size: 10
                }
            );
            p.perform(read(5, "ses_1", "none"));
            assert!(matches!(reply(&mut p, &rx).await.1, IoReply::Failed { .. }));
            for (session, name) in [("ses_1", "../secret"), ("..", "secret"), ("ses_1", "")] {
                assert!(
                    matches!(
                        p.perform(read(6, session, name)),
                        Some(IoReply::Failed { .. })
                    ),
                    "{session}/{name}"
                );
            }
            assert_eq!(p.running(), 0);
        });
    }
}
