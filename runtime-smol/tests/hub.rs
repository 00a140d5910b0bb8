//! The hub end to end: `lembas link` serves its local socket, and a peer on it is a connection
//! of the device with the core's rules: garbage is answered with JSON-RPC errors, an
//! over-long line and one connection too many are refused naming their config keys, and the
//! service and its link carry on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;

use common::editor::chunks;
use common::{linked, new_session, Home, T};

/// A peer on the hub: one JSON-RPC message a line.
pub struct Peer {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Peer {
    pub fn connect(home: &Home) -> Peer {
        let path = hub_path(home);
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(&path) {
                Ok(s) => break s,
                Err(e) if start.elapsed() < T => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("no hub at {}: {e}", path.display()),
            }
        };
        stream.set_read_timeout(Some(T)).unwrap();
        Peer {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, v: &Value) {
        self.send_raw(format!("{v}\n").as_bytes());
    }

    /// The next message, or `None` at the end of the connection.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))),
            Err(e) => panic!("reading the hub: {e}"),
        }
    }

    /// Messages until the answer to `id`; that answer.
    pub fn answer(&mut self, id: i64) -> Value {
        loop {
            let m = self.recv().expect("the hub hung up before answering");
            if m["id"] == json!(id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.answer(id)
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.call(
            0,
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        );
        assert!(r.get("result").is_some(), "{r}");
        r["result"].clone()
    }
}

fn hub_path(home: &Home) -> PathBuf {
    // No XDG_RUNTIME_DIR in the tests' environment: the state directory.
    home.path().join("state/lembas/hub.sock")
}

#[test]
fn the_socket_is_the_users_alone_and_a_garbage_peer_is_answered_and_survived() {
    smol::block_on(async {
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nhub:\n  max_line_bytes: 65536\n",
            w = home.work.display()
        ));
        let (instance, home, mut device, _) = linked(home).await;
        let mut peer = Peer::connect(&home);
        let path = hub_path(&home);
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600, "the socket");
        assert_eq!(mode(path.parent().unwrap()), 0o700, "its directory");
        // Not JSON: a parse error, and the connection stays.
        peer.send_raw(b"\x00\xffnot json {{{\n");
        let e = peer.recv().unwrap();
        assert_eq!(e["error"]["code"], -32700, "{e}");
        // JSON that is no JSON-RPC message.
        peer.send_raw(b"[1,2,3]\n");
        let e = peer.recv().unwrap();
        assert_eq!(e["error"]["code"], -32600, "{e}");
        // A request before `initialize`.
        let e = peer.call(7, "session/new", json!({ "cwd": "/" }));
        assert_eq!(e["error"]["code"], -32600, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("initialize"),
            "{e}"
        );
        // A line over hub.max_line_bytes is skipped and refused by its key; the next line is
        // read as usual.
        let long = vec![b'x'; 70_000];
        peer.send_raw(&long);
        peer.send_raw(b"\n");
        let e = peer.recv().unwrap();
        assert_eq!(e["error"]["code"], -32600, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("hub.max_line_bytes"),
            "{e}"
        );
        let init = peer.initialize();
        assert!(
            init["_meta"]["lembas"]["limits"].is_null(),
            "a local peer: {init}"
        );
        assert!(
            init["_meta"]["lembas"]["capabilities"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "sessions"),
            "the service's store: {init}"
        );
        // A hub connection works where it is, as an editor does: any directory.
        let outside = tempfile::tempdir().unwrap();
        let r = peer.call(
            1,
            "session/new",
            json!({ "cwd": outside.path(), "mcpServers": [] }),
        );
        assert!(r["result"]["sessionId"].is_string(), "{r}");
        // A cut mid-line is the end of that connection, not of the service.
        peer.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"meth");
        drop(peer);
        // The link carries on.
        let s = new_session(&instance, &home.work.join("proj")).await;
        assert!(s.starts_with("ses_"), "{s}");
        assert!(
            device.wait(Duration::from_millis(100)).is_none(),
            "the service lives"
        );
    });
}

#[test]
fn one_connection_past_hub_max_connections_is_refused_by_its_key() {
    smol::block_on(async {
        let home = Home::new();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\ntrusted: [{w}]\nhub:\n  max_connections: 2\n",
            w = home.work.display()
        ));
        let (_instance, home, _device, _) = linked(home).await;
        let mut a = Peer::connect(&home);
        let mut b = Peer::connect(&home);
        a.initialize();
        b.initialize();
        let mut c = Peer::connect(&home);
        let e = c.recv().expect("a refusal before the hang-up");
        assert_eq!(e["error"]["code"], -32600, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("hub.max_connections"),
            "{e}"
        );
        assert_eq!(e["error"]["data"]["limit"], 2, "{e}");
        assert!(c.recv().is_none(), "then it is hung up");
        // One ends: there is room again.
        drop(a);
        let start = Instant::now();
        loop {
            let mut d = Peer::connect(&home);
            d.send(&json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": { "protocolVersion": 1, "clientCapabilities": {} } }));
            let m = d.recv().unwrap();
            if m.get("result").is_some() {
                break;
            }
            assert!(start.elapsed() < T, "no room after a connection ended: {m}");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

/// Text chunks of `session/update`s among `frames`.
/// The editor prompts `text` as request `id` in `session`: the turn ends (`end_turn`) and its
/// chunks say `says`.
#[test]
fn an_editor_through_serve_stdio_works_in_the_services_sessions_and_the_web_sees_its_prompt() {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let mut editor = home.editor();
        let init = editor.initialize();
        assert!(init["_meta"]["lembas"]["limits"].is_null(), "{init}");
        let session = editor.new_session(&home.work.join("proj"));
        // The web knows it: the same device, the same store.
        let status = common::call(
            &instance,
            "_lembas/session/status",
            json!({ "sessionId": session }),
        )
        .await
        .unwrap();
        assert_eq!(status["exists"], true, "{status}");
        // A prompt from the editor streams to the editor and to the web, which holds it now.
        editor.prompt_says(
            2,
            &session,
            "say hello from the editor",
            "hello from the editor",
        );
        let (web, events) = instance
            .wait_for(T, |e| match e {
                Event::Client(ClientEvent::Update(u)) => {
                    u.session_id == session
                        && u.update
                            .message_text()
                            .is_some_and(|t| t.contains("hello from the editor"))
                }
                _ => false,
            })
            .await;
        assert!(
            web.is_some(),
            "the web saw no chunk of the editor's prompt: {events:?}"
        );
        assert_eq!(editor.close(), Some(0));
    });
}

/// The texts of a session's history, as the web reads it.
async fn history_texts(
    instance: &lembas::instance::TestInstance,
    session: &str,
) -> Vec<(String, String)> {
    let history = common::call(
        instance,
        "_lembas/session/history",
        json!({ "sessionId": session }),
    )
    .await
    .unwrap();
    history["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().to_string(),
                t["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The web hears that `session` is in use in an editor. `logs`: what the processes said, for
/// a failure (the hand-over runs across two processes; their stderr tells where it stopped).
async fn announced(
    instance: &lembas::instance::TestInstance,
    session: &str,
    logs: impl FnOnce() -> String,
) {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    let (announce, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::Notification { method, params })
                if method == "_lembas/session/announce" && params["sessionId"] == json!(session))
        })
        .await;
    assert!(
        announce.is_some(),
        "no announce of {session}: {seen:?}\n{}",
        logs()
    );
}

/// The service's and the editor's stderr: where a hand-over stopped.
fn hand_over_logs(device: &common::Device, editor: &common::editor::Editor) -> String {
    format!(
        "service:\n{}\neditor:\n{}",
        device.stderr(),
        editor.stderr()
    )
}

/// An editor's `serve --stdio` holds the store (no service ran when it started); a service
/// started meanwhile takes it over while the editor stays attached: the link comes up, the web
/// sees the editor's session, and the editor goes on in the same session through the hub.
#[test]
fn a_service_started_under_a_live_editor_takes_the_store_over_and_the_editor_goes_on() {
    smol::block_on(async {
        let instance = common::instance().await;
        let home = Home::new();
        assert!(home.login(&instance.url()).status.success());
        // No service yet: `serve --stdio` keeps the editor's session in the store itself.
        let mut editor = home.editor();
        editor.initialize();
        let proj = home.work.join("proj");
        let session = editor.new_session(&proj);
        editor.prompt_says(2, &session, "say first answer", "first answer");
        // The service starts while the editor stays: it asks for the store, and gets it.
        let device = home.link();
        common::ready(&instance).await;
        announced(&instance, &session, || hand_over_logs(&device, &editor)).await;
        // The same editor, the same session, now through the service's hub.
        editor.prompt_says(3, &session, "say second answer", "second answer");
        let listed = editor.result(4, "session/list", json!({ "cwd": proj }));
        assert!(
            listed["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["sessionId"] == json!(session)),
            "{listed}"
        );
        // Both turns are the service's, the one made before the hand-over too.
        let texts = history_texts(&instance, &session).await;
        let texts: Vec<(&str, &str)> = texts
            .iter()
            .map(|(r, t)| (r.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                ("user", "say first answer"),
                ("assistant", "first answer"),
                ("user", "say second answer"),
                ("assistant", "second answer"),
            ],
        );
        let log = std::fs::read_dir(home.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("serve-"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .collect::<String>();
        assert!(log.contains("handing it over"), "{log}");
        assert_eq!(editor.close(), Some(0));
    });
}

/// While the editor's turn runs, the hand-over waits for it: the turn streams to its end on
/// the editor's own store, and only then does the service get the store (with the turn).
#[test]
fn a_service_asking_for_the_store_waits_for_the_editors_running_turn() {
    smol::block_on(async {
        let instance = common::instance().await;
        let home = Home::new();
        assert!(home.login(&instance.url()).status.success());
        let mut editor = home.editor();
        editor.initialize();
        let session = editor.new_session(&home.work.join("proj"));
        editor.send_prompt(2, &session, "say started\nsleep 1500\nsay ended");
        // Its first chunk: the turn runs.
        loop {
            if editor.recv()["method"] == "session/update" {
                break;
            }
        }
        let device = home.link();
        let start = Instant::now();
        while !device.stderr().contains("asked for it") {
            assert!(
                start.elapsed() < T,
                "no word of asking: {}",
                device.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The turn is not cut: it ends on the editor's side, whole.
        let seen = editor.until_answer(2);
        assert_eq!(
            seen.last().unwrap()["result"]["stopReason"],
            "end_turn",
            "{seen:?}"
        );
        assert!(
            chunks(&seen).iter().any(|c| c.contains("ended")),
            "{seen:?}"
        );
        // Then the service takes over, with the whole turn, and the editor is on it now, in
        // its session.
        common::ready(&instance).await;
        announced(&instance, &session, || hand_over_logs(&device, &editor)).await;
        let texts = history_texts(&instance, &session).await;
        let (role, text) = texts.last().unwrap();
        assert!(
            role == "assistant" && text.contains("started") && text.contains("ended"),
            "{texts:?}"
        );
        assert_eq!(editor.close(), Some(0));
        drop(device);
    });
}

/// Killing the service under an editor relayed to it: the editor's side gets whole lines only,
/// then the relay's end; and no turn the device acknowledged is lost. A finished turn is whole
/// in the history the next service serves, and the turn cut short is there as the prompt it
/// took (its turn id kept), so the client can tell it from one never sent.
#[test]
fn the_service_killed_under_a_relayed_editor_loses_no_acknowledged_turn() {
    smol::block_on(async {
        let (instance, home, mut device, _) = linked(Home::new()).await;
        let mut editor = home.editor();
        editor.initialize();
        let proj = home.work.join("proj");
        let session = editor.new_session(&proj);
        let done = editor.prompt(2, &session, "say finished before");
        assert_eq!(done.last().unwrap()["result"]["stopReason"], "end_turn");
        editor.send_prompt(3, &session, "say started\nsleep 600000\nsay never");
        // Its first chunk: the device has taken the turn.
        loop {
            if editor.recv()["method"] == "session/update" {
                break;
            }
        }
        device.sigkill();
        // Whatever is left on the editor's side is whole lines, then the end.
        let mut rest = String::new();
        std::io::Read::read_to_string(editor.stdout.as_mut().unwrap(), &mut rest).unwrap();
        for line in rest.lines() {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        }
        assert!(rest.is_empty() || rest.ends_with('\n'), "{rest:?}");
        let code = editor.child.wait().unwrap().code();
        assert_eq!(code, Some(1), "the relay says the service went away");
        // The next service has both turns.
        let _device = home.link();
        common::ready(&instance).await;
        let history = common::call(
            &instance,
            "_lembas/session/history",
            json!({ "sessionId": session }),
        )
        .await
        .unwrap();
        let turns = history["turns"].as_array().unwrap();
        let texts: Vec<(&str, &str)> = turns
            .iter()
            .map(|t| (t["role"].as_str().unwrap(), t["text"].as_str().unwrap()))
            .collect();
        assert_eq!(
            texts[..2],
            [
                ("user", "say finished before"),
                ("assistant", "finished before")
            ],
            "{history}"
        );
        assert_eq!(
            texts.get(2).copied(),
            Some(("user", "say started\nsleep 600000\nsay never")),
            "the turn cut short is kept: {history}"
        );
        assert!(turns[2]["turnId"].is_string(), "{history}");
    });
}

#[test]
fn sessions_list_and_delete_go_through_the_running_service_and_the_web_hears_at_once() {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let kept = new_session(&instance, &home.work.join("proj")).await;
        let gone = new_session(&instance, &home.work.join("proj")).await;
        common::call(
            &instance,
            "_lembas/session/title",
            json!({ "sessionId": kept, "title": "Keep me" }),
        )
        .await
        .unwrap();
        // Listed from the service while it runs (no "store locked").
        let (ok, out, err) = home.run(&["sessions", "list"]);
        assert!(ok, "{err}");
        assert!(
            out.contains(&kept) && out.contains(&gone) && out.contains("Keep me"),
            "{out}"
        );
        let (ok, out, err) = home.run(&["sessions", "delete", &gone]);
        assert!(ok, "{err}");
        assert!(out.contains("through the running service"), "{out}");
        // The web hears it now, not after the next link.
        let (told, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Notification { method, params })
                    if method == "_lembas/session/deleted" && params["sessionId"] == json!(gone))
            })
            .await;
        assert!(told.is_some(), "the web was not told: {seen:?}");
        let (ok, out, _) = home.run(&["sessions", "list"]);
        assert!(ok && out.contains(&kept) && !out.contains(&gone), "{out}");
        // An unknown id is refused with the service's reason.
        let (ok, _, err) = home.run(&["sessions", "delete", "ses_nope"]);
        assert!(!ok && err.contains("no session `ses_nope`"), "{err}");
        // A prune of what is a day old deletes nothing here.
        let (ok, out, err) = home.run(&["sessions", "prune", "--older-than", "1"]);
        assert!(ok && out.contains("deleted 0 sessions"), "{out}{err}");
    });
}

#[test]
fn a_session_made_on_the_web_is_listed_and_loaded_in_the_editor_with_its_history() {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let proj = home.work.join("proj");
        let session = new_session(&instance, &proj).await;
        let turn = instance
            .prompt(
                &session,
                json!([{ "type": "text", "text": "say made on the web" }]),
                None,
            )
            .await
            .unwrap();
        let (answered, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if *turn_id == turn)
            })
            .await;
        assert!(answered.is_some(), "no answer: {seen:?}");
        let mut editor = home.editor();
        let init = editor.initialize();
        assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
        let listed = editor.result(1, "session/list", json!({ "cwd": proj }));
        let ids: Vec<&str> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec![session.as_str()], "{listed}");
        let seen = editor.call(
            2,
            "session/load",
            json!({ "sessionId": session, "cwd": proj, "mcpServers": [] }),
        );
        let kinds: Vec<&str> = seen
            .iter()
            .filter(|f| f["method"] == "session/update")
            .map(|f| f["params"]["update"]["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            vec!["user_message_chunk", "agent_message_chunk"],
            "{seen:?}"
        );
        assert!(
            chunks(&seen).iter().any(|c| c.contains("made on the web")),
            "{seen:?}"
        );
        assert!(
            seen.last().unwrap()["result"]["modes"].is_object(),
            "{seen:?}"
        );
        assert_eq!(editor.close(), Some(0));
    });
}

#[test]
fn an_editors_session_is_announced_to_the_web_held_terminal_and_left_when_the_editor_goes() {
    use lembas::instance::Event;
    use lembas_core::client::ClientEvent;
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let mut editor = home.editor();
        editor.initialize();
        let proj = home.work.join("proj");
        let session = editor.new_session(&proj);
        let heard = |method: &'static str, session: String| {
            move |e: &Event| {
                matches!(e, Event::Client(ClientEvent::Notification { method: m, params })
                    if m == method && params["sessionId"] == json!(session))
            }
        };
        let (announce, seen) = instance
            .wait_for(T, heard("_lembas/session/announce", session.clone()))
            .await;
        let Some(Event::Client(ClientEvent::Notification { params, .. })) = announce else {
            panic!("no announce: {seen:?}");
        };
        assert_eq!(params["origin"], "terminal", "{params}");
        assert_eq!(params["cwd"], json!(proj), "{params}");
        let status = common::call(
            &instance,
            "_lembas/session/status",
            json!({ "sessionId": session }),
        )
        .await
        .unwrap();
        assert_eq!(status["held"], "terminal", "{status}");
        // The editor goes: the web hears the session left, and may open it.
        assert_eq!(editor.close(), Some(0));
        let (left, seen) = instance
            .wait_for(T, heard("_lembas/session/left", session.clone()))
            .await;
        let Some(Event::Client(ClientEvent::Notification { params, .. })) = left else {
            panic!("no left: {seen:?}");
        };
        assert_eq!(params["available"], true, "{params}");
    });
}
