//! A link whose network drops everything while both sockets stay open (a NAT that forgot the
//! connection, a laptop waking from sleep) is noticed: `lembas link` pings a quiet link, gives
//! up a silent one within `link.dead_after_ms`, dials again, and the prompt in flight is
//! recovered. Between the binary and the test instance sits a TCP proxy on loopback that can
//! be told to black-hole the connections it carries.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use lembas::instance::{Event, InstanceOptions, TestInstance};
use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::Liveness;
use serde_json::{json, Value};
use smol::net::{TcpListener, TcpStream};
use smol::Task;

mod common;

use common::{new_session, ready, Home, T, TOKEN};

/// A loopback TCP proxy. [`Proxy::black_hole`] makes every connection it carries now drop
/// what it reads, both ways, with both sockets left open; connections made later are carried.
struct Proxy {
    addr: SocketAddr,
    holes: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    _accept: Task<()>,
}

impl Proxy {
    async fn start(to: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let holes: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Arc::default();
        let h = holes.clone();
        let accept = smol::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(to).await else {
                    continue;
                };
                let hole = Arc::new(AtomicBool::new(false));
                h.lock().unwrap().push(hole.clone());
                smol::spawn(pump(client.clone(), server.clone(), hole.clone())).detach();
                smol::spawn(pump(server, client, hole)).detach();
            }
        });
        Proxy {
            addr,
            holes,
            _accept: accept,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn black_hole(&self) {
        for hole in self.holes.lock().unwrap().iter() {
            hole.store(true, Ordering::SeqCst);
        }
    }
}

/// Copy `from` to `to` until either ends; once `hole` is set, read and drop (both sockets stay
/// open: no FIN, no RST, as behind a NAT that forgot the connection).
async fn pump(mut from: TcpStream, mut to: TcpStream, hole: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if hole.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if !hole.load(Ordering::SeqCst) {
        let _ = to.shutdown(std::net::Shutdown::Write);
    } else {
        // The far end must never hear this side go: hold the sockets open.
        smol::Timer::after(Duration::from_secs(3600)).await;
    }
}

fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

fn chunk(e: &Event) -> Option<&str> {
    let Event::Client(e) = e else { return None };
    e.update()?.update.message_text()
}

/// The answer to prompt `turn`, which must be `end_turn`.
async fn answered(instance: &TestInstance, turn: &str) {
    let (e, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if turn_id == turn)
        })
        .await;
    match e {
        Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) => {
            assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        }
        other => panic!("no answer to {turn}: {other:?} after {seen:?}"),
    }
}

#[test]
fn a_black_holed_link_is_noticed_redialled_and_the_prompt_in_flight_recovered() {
    smol::block_on(async {
        let bounds = Liveness::new(300, 1_000);
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            liveness: Some(bounds),
            ..Default::default()
        })
        .await
        .unwrap();
        let proxy = Proxy::start(instance.addr).await;
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\n\
             link:\n  ping_after_ms: {p}\n  dead_after_ms: {d}\n",
            w = home.work.display(),
            p = bounds.ping_after_ms,
            d = bounds.dead_after_ms,
        ));
        assert!(home.login(&proxy.url()).status.success());
        let device = home.link();
        ready(&instance).await;
        let session = new_session(&instance, &home.work.join("proj")).await;

        // Healthy and quiet for well past the bound: pings keep it up on both sides.
        let (down, _) = instance
            .wait_for(Duration::from_millis(2_500), |e| {
                matches!(e, Event::LinkDown | Event::LinkUp)
            })
            .await;
        assert!(down.is_none(), "a quiet healthy link went down: {down:?}");

        instance
            .prompt(
                &session,
                text("say before\nsleep 3000\nsay after"),
                Some("msg_hole"),
            )
            .await
            .unwrap();
        let (first, _) = instance.wait_for(T, |e| chunk(e) == Some("before")).await;
        assert!(first.is_some(), "the turn streams");

        let went = Instant::now();
        proxy.black_hole();
        // The instance's side notices on its own (its close is lost in the hole too)...
        let (down, _) = instance.wait_for(T, |e| matches!(e, Event::LinkDown)).await;
        assert!(down.is_some(), "the instance never noticed");
        let instance_noticed = went.elapsed();
        // ...and the device's: only a new link through the proxy shows it.
        let (up, seen) = instance.wait_for(T, |e| matches!(e, Event::LinkUp)).await;
        assert!(
            up.is_some(),
            "the device never linked again: {seen:?}\n{}",
            device.stderr()
        );
        let relinked = went.elapsed();
        let (re, seen) = instance
            .wait_for(T, |e| {
                matches!(
                    e,
                    Event::Client(ClientEvent::Reattached { turn_id, .. }) if turn_id == "msg_hole"
                )
            })
            .await;
        let reattached = went.elapsed();
        // Following: the answer comes to the re-sent prompt. Imported: it was in the history.
        match re {
            Some(Event::Client(ClientEvent::Reattached { how, .. })) => match how {
                Reattach::Following => answered(&instance, "msg_hole").await,
                Reattach::Imported(_) => {}
                other => panic!("reattached as {other:?}"),
            },
            other => panic!("no reattach: {other:?} after {seen:?}"),
        }
        let answered_at = went.elapsed();
        let log = device.stderr();
        assert!(
            log.contains("closing a connection: 1001 nothing arrived for"),
            "the device closed the dead link itself: {log}"
        );
        let silence: String = log
            .split("closing a connection: 1001 nothing arrived for ")
            .nth(1)
            .unwrap_or("")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        println!("the device gave up the link after {silence} ms of silence");
        println!(
            "black hole at t=0: instance noticed at {} ms, device linked again at {} ms, \
             prompt reattached at {} ms and answered at {} ms (ping_after_ms {}, dead_after_ms {})",
            instance_noticed.as_millis(),
            relinked.as_millis(),
            reattached.as_millis(),
            answered_at.as_millis(),
            bounds.ping_after_ms,
            bounds.dead_after_ms
        );
        // Generous: the bound, the backoff's first step (at most 1 s), discovery and the dial.
        assert!(relinked < Duration::from_secs(8), "{relinked:?}");
        let id = instance
            .prompt(&session, text("say again"), Some("msg_after"))
            .await
            .unwrap();
        answered(&instance, &id).await;
    });
}
