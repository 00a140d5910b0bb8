//! The model acting on this machine, end to end: the built `lembas link` on the model engine,
//! a test instance whose model calls tools, real files in a temp project, and the cards the
//! instance's client answers as the web would.

use lembas::instance::{ChatReply, Event, TestInstance};
use lembas_core::config::Mode;
use lembas_core::jsonrpc::Id;
use lembas_core::wire::card::{PermissionAnswer, PlanAnswer};
use lembas_core::wire::event::card::{CardParams, PERMISSION, PLAN};
use lembas_core::wire::event::update::SessionUpdate;
use serde_json::{json, Value};

mod common;

use common::model::{answered, eventually, linked_to_home, model_home_with, text, MODEL};
use common::{call, Home, T};

/// A device (max_mode as given) on the model engine whose model makes `chat`'s calls, a
/// session on `MODEL` in `proj` at `mode`, and its id.
async fn session_in(
    max_mode: &str,
    mode: &str,
    chat: Vec<ChatReply>,
) -> (TestInstance, Home, common::Device, String) {
    let home = model_home_with(&format!("  max_mode: {max_mode}\n"));
    let (instance, home, device) = linked_to_home(home, chat).await;
    let session = call(
        &instance,
        "session/new",
        json!({ "cwd": home.work.join("proj"), "mcpServers": [],
                "_meta": { "lembas_model": MODEL } }),
    )
    .await
    .unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    call(
        &instance,
        "session/set_mode",
        json!({ "sessionId": id, "modeId": mode }),
    )
    .await
    .unwrap();
    (instance, home, device, id)
}

fn proj(home: &Home) -> std::path::PathBuf {
    home.work.join("proj")
}

/// The next card the device puts to the client (`method`), with what was seen before it.
async fn card(instance: &TestInstance, method: &str) -> (Id, CardParams, Vec<Event>) {
    let (e, seen) = instance.wait_for(T, |e| asked(e, method).is_some()).await;
    match e.as_ref().and_then(|e| asked(e, method)) {
        Some((id, card)) => (id.clone(), card.clone(), seen),
        None => panic!("no {method}: {e:?} after {seen:?}"),
    }
}

/// The card `method` carries that `e` is, and the request to answer.
fn asked<'e>(e: &'e Event, method: &str) -> Option<(&'e Id, &'e CardParams)> {
    match e {
        Event::Client(e) => e.card().filter(|(_, card)| card.method() == method),
        _ => None,
    }
}

/// Every `tool_call_update` the client heard, as sent.
fn tool_updates(seen: &[Event]) -> Vec<Value> {
    seen.iter()
        .filter_map(|e| match e {
            Event::Client(e) => e.update(),
            _ => None,
        })
        .filter(|u| matches!(u.update, SessionUpdate::ToolCallUpdate(_)))
        .map(|u| serde_json::to_value(&u.update).unwrap())
        .collect()
}

/// The tool results the model was given in the instance's `nth` chat request.
fn tool_results(instance: &TestInstance, nth: usize) -> String {
    let requests = instance.chat_requests();
    let request = requests
        .get(nth)
        .unwrap_or_else(|| panic!("no chat request {nth}: {requests:?}"));
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn prompt(instance: &TestInstance, session: &str, words: &str, turn: &str) {
    instance
        .prompt(session, text(words), Some(turn))
        .await
        .unwrap();
}

#[test]
fn a_read_gives_the_model_the_files_lines() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "plan",
            vec![
                ChatReply::tools(&[("read", json!({ "path": "notes.txt" }))]),
                ChatReply::text(&["read it"]),
            ],
        )
        .await;
        std::fs::write(proj(&home).join("notes.txt"), "alpha\nbeta\n").unwrap();
        prompt(&instance, &id, "read my notes", "t1").await;
        let (outcome, seen) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        let results = tool_results(&instance, 1);
        assert!(
            results.contains("alpha") && results.contains("beta"),
            "{results}"
        );
        let updates = tool_updates(&seen);
        assert_eq!(
            updates.last().unwrap()["status"],
            "completed",
            "{updates:?}"
        );
    });
}

#[test]
fn an_edit_changes_the_file_and_the_client_sees_its_diff() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "edit",
            vec![
                ChatReply::tools(&[(
                    "edit",
                    json!({ "path": "a.txt", "old_string": "world", "new_string": "there" }),
                )]),
                ChatReply::text(&["edited"]),
            ],
        )
        .await;
        let file = proj(&home).join("a.txt");
        std::fs::write(&file, "hello world\n").unwrap();
        prompt(&instance, &id, "edit it", "t1").await;
        let (outcome, seen) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello there\n");
        let diff = tool_updates(&seen)
            .iter()
            .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
            .find(|c| c["type"] == "diff")
            .expect("a diff reached the client");
        assert_eq!(diff["path"], file.to_str().unwrap());
        assert_eq!(diff["oldText"], "hello world\n");
        assert_eq!(diff["newText"], "hello there\n");
    });
}

#[test]
fn a_command_approved_on_the_web_runs_and_its_output_reaches_the_model() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "edit",
            vec![
                ChatReply::tools(&[(
                    "run",
                    json!({ "command": "echo made > made.txt; echo out-of-band" }),
                )]),
                ChatReply::text(&["ran"]),
            ],
        )
        .await;
        prompt(&instance, &id, "run it", "t1").await;
        let (card_id, card, _) = card(&instance, PERMISSION).await;
        let CardParams::Permission(params) = card else {
            panic!("{card:?}")
        };
        assert_eq!(params.tool_call.kind, "execute", "{params:?}");
        assert!(
            !proj(&home).join("made.txt").exists(),
            "it ran before it was approved"
        );
        instance
            .answer(card_id, &PermissionAnswer::select("once"))
            .await;
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert!(proj(&home).join("made.txt").exists());
        assert!(tool_results(&instance, 1).contains("out-of-band"));
    });
}

#[test]
fn a_denial_with_feedback_reaches_the_model_and_nothing_is_written() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "manual",
            vec![
                ChatReply::tools(&[("write", json!({ "path": "a.txt", "content": "x" }))]),
                ChatReply::text(&["ok"]),
            ],
        )
        .await;
        prompt(&instance, &id, "write it", "t1").await;
        let (card_id, _, _) = card(&instance, PERMISSION).await;
        let deny = PermissionAnswer::select("deny").with_feedback("use b.txt instead");
        instance.answer(card_id, &deny).await;
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert!(!proj(&home).join("a.txt").exists());
        assert!(tool_results(&instance, 1).contains("use b.txt instead"));
    });
}

#[test]
fn escapes_through_a_symlink_or_dotdot_and_protected_paths_are_refused_unread() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "auto",
            vec![
                ChatReply::tools(&[
                    ("read", json!({ "path": "link.txt" })),
                    ("read", json!({ "path": "../../secret.txt" })),
                    ("read", json!({ "path": ".git/config" })),
                    (
                        "write",
                        json!({ "path": "linkdir/planted.txt", "content": "x" }),
                    ),
                ]),
                ChatReply::text(&["no"]),
            ],
        )
        .await;
        let secret = home.path().join("secret.txt");
        std::fs::write(&secret, "TOP-SECRET-BYTES").unwrap();
        std::os::unix::fs::symlink(&secret, proj(&home).join("link.txt")).unwrap();
        std::os::unix::fs::symlink(home.path(), proj(&home).join("linkdir")).unwrap();
        std::fs::create_dir_all(proj(&home).join(".git")).unwrap();
        std::fs::write(proj(&home).join(".git/config"), "GIT-CONFIG-BYTES").unwrap();
        prompt(&instance, &id, "try", "t1").await;
        let (outcome, seen) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        let results = tool_results(&instance, 1);
        let everything = format!("{results}\n{seen:?}");
        assert!(!everything.contains("TOP-SECRET-BYTES"), "{everything}");
        assert!(!everything.contains("GIT-CONFIG-BYTES"), "{everything}");
        assert!(!home.path().join("planted.txt").exists());
        let updates = tool_updates(&seen);
        let failed = updates.iter().filter(|u| u["status"] == "failed").count();
        assert_eq!(failed, 4, "{updates:?}");
        assert!(results.contains("outside"), "{results}");
        assert!(results.contains("protected"), "{results}");
    });
}

/// Whether a process is alive (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn cancel_kills_a_running_commands_whole_process_group() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "auto",
            "auto",
            vec![ChatReply::tools(&[(
                "run",
                json!({ "command": "sleep 300 & echo $! > pid.txt; wait" }),
            )])],
        )
        .await;
        prompt(&instance, &id, "run forever", "t1").await;
        let pid_file = proj(&home).join("pid.txt");
        eventually(T, "the command started", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
        })
        .await;
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(alive(pid));
        instance
            .notify("session/cancel", json!({ "sessionId": id }))
            .await
            .unwrap();
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "cancelled");
        eventually(T, "the command's child was killed", || !alive(pid)).await;
    });
}

#[test]
fn a_plan_approved_in_auto_on_a_device_whose_max_mode_is_edit_goes_on_in_edit() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "plan",
            vec![
                ChatReply::tools(&[("plan_submit", json!({ "text": "1. write p.txt" }))]),
                ChatReply::tools(&[("write", json!({ "path": "p.txt", "content": "x" }))]),
                ChatReply::tools(&[("run", json!({ "command": "touch ran.txt" }))]),
                ChatReply::text(&["done"]),
            ],
        )
        .await;
        prompt(&instance, &id, "plan it", "t1").await;
        let (plan_id, plan, _) = card(&instance, PLAN).await;
        let CardParams::Plan(plan) = plan else {
            panic!("{plan:?}")
        };
        assert!(plan.text.contains("write p.txt"), "{plan:?}");
        instance
            .answer(plan_id, &PlanAnswer::approve(Mode::Auto))
            .await;
        // Edit mode (auto lowered): the write goes ahead, the command asks.
        let (run_id, _, seen) = card(&instance, PERMISSION).await;
        let modes: Vec<Mode> = seen
            .iter()
            .filter_map(|e| match e {
                Event::Client(e) => match &e.update()?.update {
                    SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(modes, [Mode::Edit], "the approved mode, lowered");
        assert!(
            proj(&home).join("p.txt").exists(),
            "the write did not go ahead"
        );
        instance
            .answer(run_id, &PermissionAnswer::select("deny"))
            .await;
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert!(!proj(&home).join("ran.txt").exists());
        let record = proj(&home).join(".lembas/plans");
        assert!(
            std::fs::read_dir(&record).is_ok_and(|mut d| d.next().is_some()),
            "the plan's record was written"
        );
    });
}

#[test]
fn undo_puts_back_the_file_a_turn_edited_and_removes_the_one_it_wrote() {
    smol::block_on(async {
        let (instance, home, _device, id) = session_in(
            "edit",
            "edit",
            vec![
                ChatReply::tools(&[(
                    "edit",
                    json!({ "path": "a.txt", "old_string": "world", "new_string": "there" }),
                )]),
                ChatReply::tools(&[("write", json!({ "path": "new.txt", "content": "made" }))]),
                ChatReply::text(&["changed them"]),
            ],
        )
        .await;
        let (edited, made) = (proj(&home).join("a.txt"), proj(&home).join("new.txt"));
        std::fs::write(&edited, "hello world\n").unwrap();
        prompt(&instance, &id, "change them", "t1").await;
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "hello there\n");
        assert_eq!(std::fs::read_to_string(&made).unwrap(), "made");

        prompt(&instance, &id, "/undo", "t2").await;
        let (outcome, _) = answered(&instance, "t2").await;
        let answer = outcome.unwrap();
        assert_eq!(
            answer["_meta"]["lembas"]["undone"],
            json!({ "prompt": "change them", "files": ["a.txt", "new.txt"] }),
            "{answer}"
        );
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "hello world\n");
        assert!(!made.exists(), "the file the turn wrote is removed");
        // Nothing reached the model for the undo: it asked the instance three times, all
        // for turn t1.
        assert_eq!(instance.chat_requests().len(), 3);
    });
}

/// The kept content of the first file turn `t1`'s tools changed, in the journal `/undo` reads
/// (`<state>/lembas/undo/<session>/<n>/0.before`).
fn kept_before(home: &Home, session: &str) -> std::path::PathBuf {
    let dir = home.path().join("state/lembas/undo").join(session);
    let turn = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a turn's journal");
    turn.join("0.before")
}

#[test]
fn a_device_killed_while_undoing_puts_the_files_back_once_it_is_up_again() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    smol::block_on(async {
        let (instance, home, mut device, id) = session_in(
            "edit",
            "edit",
            vec![
                ChatReply::tools(&[(
                    "edit",
                    json!({ "path": "a.txt", "old_string": "world", "new_string": "there" }),
                )]),
                ChatReply::text(&["changed it"]),
            ],
        )
        .await;
        let edited = proj(&home).join("a.txt");
        std::fs::write(&edited, "hello world\n").unwrap();
        prompt(&instance, &id, "change it", "t1").await;
        let (outcome, _) = answered(&instance, "t1").await;
        assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "hello there\n");

        // The kept content becomes a pipe: the shell's undo blocks reading it, as a slow disk
        // would, after the device stored the revert and asked it.
        let kept = kept_before(&home, &id);
        let before = std::fs::read(&kept).unwrap();
        assert_eq!(before, b"hello world\n");
        std::fs::remove_file(&kept).unwrap();
        let c = std::ffi::CString::new(kept.as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        prompt(&instance, &id, "/undo", "t2").await;
        // A writer can open the pipe once the shell has it open for reading.
        let mut writer = None;
        eventually(T, "the shell reads the kept content", || {
            writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&kept)
                .ok();
            writer.is_some()
        })
        .await;
        device.sigkill();
        drop(device);
        drop(writer);
        std::fs::remove_file(&kept).unwrap();
        std::fs::write(&kept, &before).unwrap();
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "hello there\n");

        // Up again: the client picks t2 up, and the undo is carried out, not cut.
        let _device = home.link();
        let (outcome, seen) = answered(&instance, "t2").await;
        let answer = outcome.unwrap();
        assert_eq!(answer["stopReason"], "end_turn", "{answer} after {seen:?}");
        assert_eq!(
            answer["_meta"]["lembas"]["undone"],
            json!({ "prompt": "change it", "files": ["a.txt"] }),
            "{answer}"
        );
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "hello world\n");
    });
}
