//! `lembas demo`: everything on this machine, nothing outside it. A test instance (the core's
//! client role behind a real WebSocket listener on loopback) and a device (the driver, the
//! scripted engine, a redb store in a scratch directory) link up, and a readable transcript
//! shows a prompt streaming, a permission card answered by the client, the link cut mid-turn
//! and the client reattaching, a duplicate prompt answered without running again, and a
//! session deleted while the device is down (as `lembas sessions delete` does) delivered on the
//! next link. The device comes back on the model engine: a session opened on one of the
//! instance's models (`lembas_model`) gets its answer streamed from the instance's chat
//! completions (scripted there: reasoning, then text). Then the model acts, in `manual` mode:
//! it reads a file of the project, proposes an edit and asks to run a command, and the client
//! approves each card; the file really changes and the command really runs.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::device::Device;
use lembas_core::engine::ToolStatus;
use lembas_core::jsonrpc::Id;
use lembas_core::wire::card::PermissionAnswer;
use lembas_core::wire::event::card::{CardParams, PermissionParams};
use lembas_core::wire::event::update::{SessionUpdate, ToolCallContent};
use lembas_core::DeviceConfig;
use serde_json::{json, Value};
use smol::channel::Sender;

use crate::driver::{Disk, Driver, Exit, Input};
use crate::engine::{DeviceEngine, EngineChoice};
use crate::engine_io::Target;
use crate::instance::{ChatReply, ChatStream, Event, InstanceOptions, TestInstance};
use crate::link::{Instance, LinkDialer};
use crate::store::RedbStore;

const T: Duration = Duration::from_secs(15);

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run the demo, writing the transcript to `out`.
pub fn run(out: &mut dyn Write) -> Result<(), String> {
    // The driver owns the `Device`, which need not be `Send`: it runs on this thread's executor.
    let local = smol::LocalExecutor::new();
    smol::block_on(local.run(demo(&local, out)))
}

fn say(out: &mut dyn Write, line: impl AsRef<str>) -> Result<(), String> {
    writeln!(out, "{}", line.as_ref()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())
}

async fn demo(local: &smol::LocalExecutor<'_>, out: &mut dyn Write) -> Result<(), String> {
    let scratch = Scratch(std::env::temp_dir().join(format!("lembas-demo-{}", std::process::id())));
    let work = scratch.0.join("work/project");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    let work = std::fs::canonicalize(&work)
        .map_err(|e| e.to_string())?
        .to_string_lossy()
        .into_owned();

    let token = format!("demo-{}", crate::device::fresh_seed());
    let instance = TestInstance::start(InstanceOptions {
        token: token.clone(),
        chat: vec![
            ChatReply::Stream(ChatStream {
                reasoning: vec!["The person ".into(), "says hello.".into()],
                text: vec!["Hello ".into(), "from ".into(), "the model.".into()],
                delay: Duration::from_millis(60),
                ..ChatStream::default()
            }),
            // The model acting: each reply is one step of turn msg_t.
            ChatReply::tools(&[("read", json!({ "path": "notes.md" }))]),
            ChatReply::tools(&[(
                "edit",
                json!({ "path": "notes.md", "old_string": "- greet the world",
                    "new_string": "- greet the world\n- greet the model" }),
            )]),
            ChatReply::tools(&[(
                "run",
                json!({ "command": "grep -c greet notes.md",
                                           "description": "count the greetings" }),
            )]),
            ChatReply::text(&["Two ", "greetings ", "now."]),
        ],
        ..InstanceOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    say(
        out,
        format!(
            "== a test instance listens on {} (loopback only)",
            instance.url()
        ),
    )?;

    let mut config = DeviceConfig::default();
    config.seed = crate::device::fresh_seed();
    config.host = crate::device::hostname();
    config.platform = std::env::consts::OS.into();
    config.connection = Some("127.0.0.1".into());
    config.remote.enabled = true;
    config.remote.roots = vec![work.clone()];
    config.remote.trusted = vec![work.clone()];
    let store_file = scratch.0.join("state/lembas.redb");
    let attachments = scratch.0.join("attachments");
    // `engine`: the scripted engine answers from the prompt's text; the model engine's
    // requests go to the instance, whose models each dial fetches.
    let start = |config: DeviceConfig, engine: EngineChoice| -> Result<_, String> {
        let store = RedbStore::open(&store_file).map_err(|e| e.to_string())?;
        let entries = store
            .restore_entries(&config.sessions)
            .map_err(|e| e.to_string())?;
        let now = crate::clock::Clock::new().now();
        let (device, _) = Device::restore(config, entries, now).map_err(|e| e.to_string())?;
        let mut driver = Driver::new(device, Disk::Redb(Arc::new(store)), attachments.clone());
        let stop = driver.sender();
        let target = Instance::parse(&instance.url())?;
        let mut dialer = LinkDialer::new(target.clone(), token.clone(), None);
        if engine != EngineChoice::Scripted {
            let max_models = engine.max_models();
            driver.set_engine(DeviceEngine::new(engine, Vec::new()));
            driver.set_io_target(Arc::new(Target::new(target, token.clone(), None)?));
            dialer = dialer.with_models(driver.sender(), max_models);
        }
        driver.start_link(Arc::new(dialer));
        Ok((stop, local.spawn(driver.run())))
    };
    let (stop, device_task) = start(config.clone(), EngineChoice::Scripted)?;
    say(
        out,
        "== the device checks discovery and dials ws://…/api/devices/link",
    )?;

    let (hello, _) = instance
        .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Hello(_))))
        .await;
    if let Some(Event::Client(ClientEvent::Hello(h))) = hello {
        say(
            out,
            format!(
                "device -> client  _lembas/hello: protocol {}, version {}, host {}, roots {:?}",
                h.protocol, h.version, h.device.host, h.limits.roots
            ),
        )?;
    } else {
        return Err("the device never said hello".into());
    }
    let (ready, _) = instance
        .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
        .await;
    let Some(Event::Client(ClientEvent::Ready { capabilities })) = ready else {
        return Err("the link never became ready".into());
    };
    say(
        out,
        format!(
            "client -> device  initialize; capabilities: {}",
            capabilities.join(", ")
        ),
    )?;

    let session = new_session(&instance, json!({ "cwd": work, "mcpServers": [] })).await?;
    say(
        out,
        format!("client -> device  session/new in {work}: {session}"),
    )?;

    say(out, "\n== a prompt streams (turn msg_1)")?;
    let script = "say Streaming,\nsleep 150\nsay  one chunk\nsleep 150\nsay  at a time.";
    instance
        .prompt(&session, text(script), Some("msg_1"))
        .await
        .map_err(|e| e.to_string())?;
    follow(out, &instance, "msg_1").await?;

    say(
        out,
        "\n== a permission card (turn msg_p: `permit run the test suite`)",
    )?;
    instance
        .prompt(
            &session,
            text("permit run the test suite\nsay  -- tests ran."),
            Some("msg_p"),
        )
        .await
        .map_err(|e| e.to_string())?;
    let (card, _) = instance.wait_for(T, |e| approval(e).is_some()).await;
    let Some((id, card)) = card.as_ref().and_then(approval) else {
        return Err("no permission card came".into());
    };
    let options: Vec<&str> = card.options.iter().map(|o| o.name.as_str()).collect();
    say(
        out,
        format!(
            "device -> client  session/request_permission {:?}: {}",
            card.tool_call.title,
            options.join(" / ")
        ),
    )?;
    instance
        .answer(id.clone(), &PermissionAnswer::select("once"))
        .await;
    say(out, "client -> device  Allow once")?;
    follow(out, &instance, "msg_p").await?;

    say(out, "\n== the link is cut mid-turn (turn msg_2)")?;
    let script = "say Working on it...\nsleep 2500\nsay  done, after the cut.";
    instance
        .prompt(&session, text(script), Some("msg_2"))
        .await
        .map_err(|e| e.to_string())?;
    let (first, _) = instance.wait_for(T, |e| chunk(e).is_some()).await;
    if let Some(c) = first.as_ref().and_then(chunk) {
        say(out, format!("device -> client  chunk {c:?}"))?;
    }
    instance.cut().await;
    say(
        out,
        "-- the server drops its side of the socket (no close frame)",
    )?;
    let (up, _) = instance.wait_for(T, |e| matches!(e, Event::LinkUp)).await;
    if up.is_none() {
        return Err("the device did not redial".into());
    }
    say(
        out,
        "-- the device redials (backoff with jitter) and says hello again",
    )?;
    let (re, _) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::Reattached { .. }))
        })
        .await;
    if let Some(Event::Client(ClientEvent::Reattached { turn_id, how, .. })) = re {
        let how = match how {
            Reattach::Following => "it is still running: following it",
            Reattach::Waiting => "it is queued: waiting for it",
            Reattach::Imported(_) => "it had finished: imported from history",
            Reattach::Resent => "the device did not know it: sent again",
            Reattach::Gone => "the session is gone",
            _ => "reattached",
        };
        say(
            out,
            format!("client            _lembas/session/status for {turn_id}: {how}"),
        )?;
    } else {
        return Err("the client did not reattach".into());
    }
    follow(out, &instance, "msg_2").await?;

    say(
        out,
        "\n== the client sends msg_1 again (a retry after a doubt)",
    )?;
    instance
        .prompt(&session, text("say this must not run"), Some("msg_1"))
        .await
        .map_err(|e| e.to_string())?;
    let said = follow(out, &instance, "msg_1").await?;
    if said == 0 {
        say(
            out,
            "                  (no update: the device knew msg_1 and did not run it again)",
        )?;
    }

    say(
        out,
        "\n== a session deleted while the device is down, delivered on the next link",
    )?;
    shut_down(&stop, device_task).await?;
    let (down, _) = instance.wait_for(T, |e| matches!(e, Event::LinkDown)).await;
    if down.is_none() {
        return Err("the link did not go down".into());
    }
    say(out, "-- the device stops; the link is down")?;
    let now = crate::clock::Clock::new().now();
    let deleted = crate::sessions::delete(&store_file, &attachments, config.clone(), now, |_| {
        Ok(vec![session.clone()])
    })?;
    if deleted != [session.clone()] {
        return Err(format!("the delete found no session {session}"));
    }
    say(
        out,
        format!("-- `lembas sessions delete {session}`: kept in the store for the next link"),
    )?;
    let (stop, device_task) = start(config, EngineChoice::model())?;
    let (up, _) = instance.wait_for(T, |e| matches!(e, Event::LinkUp)).await;
    if up.is_none() {
        return Err("the device did not link again".into());
    }
    say(
        out,
        "-- the device starts again, on the model engine (it fetched GET /v1/models), and links",
    )?;
    let (gone, _) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::Notification { method, .. })
                if method == "_lembas/session/deleted")
        })
        .await;
    match gone {
        Some(Event::Client(ClientEvent::Notification { params, .. })) => say(
            out,
            format!(
                "device -> client  _lembas/session/deleted {}",
                params["sessionId"].as_str().unwrap_or("?")
            ),
        )?,
        _ => return Err("the client never heard of the delete".into()),
    }

    say(
        out,
        "\n== a session on one of the instance's models (turn msg_m), answered by the model",
    )?;
    let model = "test/chat-small";
    // The link is ready: the delete came after the client's `initialize`.
    let session = new_session(
        &instance,
        json!({ "cwd": work, "mcpServers": [], "_meta": { "lembas_model": model } }),
    )
    .await?;
    say(
        out,
        format!("client -> device  session/new, _meta.lembas_model {model}: {session}"),
    )?;
    instance
        .prompt(&session, text("Say hello."), Some("msg_m"))
        .await
        .map_err(|e| e.to_string())?;
    say(
        out,
        "-- the device streams POST /v1/chat/completions from the instance",
    )?;
    follow(out, &instance, "msg_m").await?;

    say(
        out,
        "\n== the model acts (turn msg_t, manual mode): it reads, proposes an edit, asks to run",
    )?;
    let notes = std::path::Path::new(&work).join("notes.md");
    std::fs::write(&notes, "# Notes\n\n- greet the world\n").map_err(|e| e.to_string())?;
    let id = instance
        .call(
            "session/set_mode",
            json!({ "sessionId": session, "modeId": "manual" }),
        )
        .await
        .map_err(|e| e.to_string())?;
    let (set, _) = instance
        .wait_for(
            T,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
        )
        .await;
    if set.is_none() {
        return Err("session/set_mode was not answered".into());
    }
    say(out, "client -> device  session/set_mode manual")?;
    instance
        .prompt(&session, text("Add a greeting to my notes."), Some("msg_t"))
        .await
        .map_err(|e| e.to_string())?;
    follow(out, &instance, "msg_t").await?;
    let edited = std::fs::read_to_string(&notes).map_err(|e| e.to_string())?;
    say(out, format!("-- notes.md on the disk now: {edited:?}"))?;

    shut_down(&stop, device_task).await?;
    say(out, "\n== done")?;
    Ok(())
}

fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

fn chunk(e: &Event) -> Option<String> {
    update(e, "agent_message_chunk")
}

/// An approval the device put to the client, and the request to answer.
fn approval(e: &Event) -> Option<(&Id, &PermissionParams)> {
    let Event::Client(e) = e else { return None };
    match e.card()? {
        (id, CardParams::Permission(card)) => Some((id, card)),
        _ => None,
    }
}

/// The text of a `session/update` of this kind.
fn update(e: &Event, kind: &str) -> Option<String> {
    let Event::Client(e) = e else { return None };
    let u = &e.update()?.update;
    (u.kind() == kind).then(|| u.chunk_text().unwrap_or("").to_string())
}

/// A tool call's line: its start (title and kind), or its end (status, a diff, the output's
/// first line).
fn tool_line(e: &Event) -> Option<String> {
    let Event::Client(e) = e else { return None };
    match &e.update()?.update {
        SessionUpdate::ToolCall(call) => Some(format!(
            "device -> client  tool_call {:?} ({})",
            call.title, call.kind
        )),
        SessionUpdate::ToolCallUpdate(u) if u.status != ToolStatus::InProgress => {
            let status = serde_json::to_value(u.status).unwrap_or_default();
            let mut line = format!(
                "device -> client  tool_call_update {}",
                status.as_str().unwrap_or("?")
            );
            for c in &u.content {
                match c {
                    ToolCallContent::Diff {
                        path,
                        old_text,
                        new_text,
                    } => line.push_str(&format!(
                        "; diff of {path}: {:?} -> {new_text:?}",
                        old_text.as_deref().unwrap_or("")
                    )),
                    ToolCallContent::Content { content } => {
                        // The first lines, enough to show a command's exit and output.
                        let head: Vec<&str> = content.text.lines().take(3).collect();
                        line.push_str(&format!("; {:?}", head.join(" | ")));
                    }
                }
            }
            Some(line)
        }
        _ => None,
    }
}

/// Print the chunks of a turn (its reasoning as `thought`) until its answer; returns how many
/// chunks came.
async fn follow(out: &mut dyn Write, instance: &TestInstance, turn: &str) -> Result<usize, String> {
    let mut chunks = 0;
    loop {
        match instance.next_event(T).await {
            None => return Err(format!("no answer to {turn}")),
            Some(e) => {
                if let Some(c) = chunk(&e) {
                    chunks += 1;
                    say(out, format!("device -> client  chunk {c:?}"))?;
                    continue;
                }
                if let Some(c) = update(&e, "agent_thought_chunk") {
                    chunks += 1;
                    say(out, format!("device -> client  thought {c:?}"))?;
                    continue;
                }
                if let Some(line) = tool_line(&e) {
                    say(out, line)?;
                    continue;
                }
                if let Some((id, card)) = approval(&e) {
                    say(
                        out,
                        format!(
                            "device -> client  session/request_permission {:?}: {}",
                            card.tool_call.title, card.meta.lembas.reason
                        ),
                    )?;
                    instance
                        .answer(id.clone(), &PermissionAnswer::select("once"))
                        .await;
                    say(out, "client -> device  Allow once")?;
                    continue;
                }
                if let Event::Client(ClientEvent::PromptAnswered {
                    turn_id, outcome, ..
                }) = e
                {
                    if turn_id == turn {
                        let stop = match outcome {
                            Ok(v) => v["stopReason"].as_str().unwrap_or("?").to_string(),
                            Err(e) => format!("error {}", e.message),
                        };
                        say(out, format!("device -> client  {turn_id} answered: {stop}"))?;
                        return Ok(chunks);
                    }
                }
            }
        }
    }
}

/// `session/new` with `params`: the new session's id, or why it was refused.
async fn new_session(instance: &TestInstance, params: serde_json::Value) -> Result<String, String> {
    let id = instance
        .call("session/new", params)
        .await
        .map_err(|e| e.to_string())?;
    let (answer, _) = instance
        .wait_for(
            T,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
        )
        .await;
    match answer {
        Some(Event::Client(ClientEvent::Answer { outcome: Ok(v), .. })) => {
            Ok(v["sessionId"].as_str().unwrap_or_default().to_string())
        }
        other => Err(format!("session/new failed: {other:?}")),
    }
}

/// Stop the device and wait until it has (its store closed): the next step opens the store.
async fn shut_down(stop: &Sender<Input>, device: impl Future<Output = Exit>) -> Result<(), String> {
    let _ = stop.send(Input::Shutdown).await;
    let stopped = smol::future::or(
        async {
            device.await;
            true
        },
        async {
            smol::Timer::after(Duration::from_secs(30)).await;
            false
        },
    )
    .await;
    if stopped {
        Ok(())
    } else {
        Err("the device did not stop within 30 s".into())
    }
}
