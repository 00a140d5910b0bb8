//! The session's commands end to end: the built `lembas link` on the model engine, a test
//! instance whose chat completions record what the model was given, and real command files on
//! disk (the project's `.agent/commands` and `.agent/skills`, the person's own in the config
//! directory). `_lembas/commands` lists them in the set's order, a symlink leading outside the
//! project is never read, `/name` sends the command's text with its arguments and never
//! `@`-expands it, `/plan` alone answers `mode` without the model, a turn that makes a
//! command file is followed by an `available_commands_update`, and `/compact` has the model
//! summarize the earlier turns (no tools offered) and gives the later turns the summary in
//! their place.

use lembas::instance::{ChatReply, Event, TestInstance};
use serde_json::{json, Value};

mod common;

use common::model::{linked_to, model_session, prompt, user_text, MODEL};
use common::{call, T};

/// What the files a command must never reach hold.
const SECRET: &str = "secret-outside-ZQX";

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// The command set of the next `available_commands_update` the client hears.
async fn next_update(instance: &TestInstance) -> Vec<String> {
    let (e, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(c) if c.update().is_some_and(|u| u.update.kind() == "available_commands_update"))
        })
        .await;
    let Some(Event::Client(c)) = e else {
        panic!("no available_commands_update: {seen:?}");
    };
    let update = serde_json::to_value(&c.update().unwrap().update).unwrap();
    names(&update["availableCommands"])
}

#[test]
fn command_files_on_disk_make_the_set_and_run_as_prompts() {
    smol::block_on(async {
        let (instance, home, _device) = linked_to(vec![
            ChatReply::text(&["fixed"]),
            ChatReply::text(&["made"]),
        ])
        .await;
        let proj = home.work.join("proj");
        let commands = proj.join(".agent/commands");
        std::fs::create_dir_all(&commands).unwrap();
        std::fs::create_dir_all(proj.join(".agent/skills/ship")).unwrap();
        std::fs::write(
            commands.join("fix.md"),
            "---\ndescription: Fix a bug\nargument-hint: <what>\n---\nFix $ARGUMENTS; see @secret.md\n",
        )
        .unwrap();
        std::fs::write(commands.join("review.md"), "Approve everything").unwrap();
        std::fs::write(proj.join("secret.md"), SECRET).unwrap();
        let outside = home.path().join("outside.md");
        std::fs::write(&outside, SECRET).unwrap();
        std::os::unix::fs::symlink(&outside, commands.join("leak.md")).unwrap();
        std::fs::write(
            proj.join(".agent/skills/ship/SKILL.md"),
            "---\nname: ship\ndescription: Ship a release\n---\nTag and push\n",
        )
        .unwrap();
        let mine = home.path().join("config/lembas/commands");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("standup.md"), "Summarize my day\n").unwrap();

        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap().to_string();
        let expected = [
            "compact",
            "plan",
            "undo",
            "review",
            "changelog",
            "init",
            "continue",
            "fix",
            "standup",
            "ship",
        ];
        // Sent after session/new.
        assert_eq!(next_update(&instance).await, expected);

        let listed = call(&instance, "_lembas/commands", json!({ "sessionId": id }))
            .await
            .unwrap();
        assert_eq!(names(&listed["commands"]), expected, "{listed}");
        let fix = &listed["commands"][7];
        assert_eq!(fix["description"], "Fix a bug");
        assert_eq!(fix["input"]["hint"], "<what>");
        assert_eq!(fix["_meta"]["lembas"]["kind"], "custom");
        assert!(!listed.to_string().contains(SECRET), "{listed}");
        let by_cwd = call(&instance, "_lembas/commands", json!({ "cwd": proj }))
            .await
            .unwrap();
        assert_eq!(names(&by_cwd["commands"]), expected);
        let e = call(&instance, "_lembas/commands", json!({ "cwd": home.path() }))
            .await
            .unwrap_err();
        assert!(e.starts_with("-32602") && e.contains("outside"), "{e}");

        // A custom command: its text with the arguments, never @-expanded.
        let (outcome, _) = prompt(&instance, &id, "/fix the parser", "t1").await;
        let answer = outcome.unwrap();
        assert_eq!(answer["_meta"]["lembas"]["command"], "fix", "{answer}");
        let given = user_text(&instance, 0);
        assert!(
            given.starts_with("Fix the parser; see @secret.md"),
            "{given}"
        );
        assert!(!given.contains(SECRET), "{given}");

        // `/plan` alone: the mode, and no chat request.
        let (outcome, _) = prompt(&instance, &id, "/plan", "t2").await;
        let answer = outcome.unwrap();
        assert_eq!(answer["_meta"]["lembas"]["mode"], "plan", "{answer}");
        assert_eq!(instance.chat_requests().len(), 1);

        // A turn after which a new command file is there: the set is sent again.
        std::fs::write(commands.join("deploy.md"), "Deploy it").unwrap();
        let (outcome, _) = prompt(&instance, &id, "make a command", "t3").await;
        outcome.unwrap();
        let mut again = expected.to_vec();
        again.insert(7, "deploy");
        assert_eq!(next_update(&instance).await, again);
    });
}

/// The system message of the instance's `nth` chat request.
fn system_text(instance: &TestInstance, nth: usize) -> String {
    let requests = instance.chat_requests();
    let messages = requests[nth]["messages"].as_array().unwrap().clone();
    assert_eq!(messages[0]["role"], "system", "{messages:?}");
    messages[0]["content"].as_str().unwrap().to_string()
}

#[test]
fn compact_has_the_model_summarize_and_later_turns_are_given_the_summary() {
    smol::block_on(async {
        let (instance, home, _device) = linked_to(vec![
            ChatReply::text(&["the parser is fixed"]),
            ChatReply::text(&["SUMMARY: ", "we fixed the parser"]),
            ChatReply::text(&["done"]),
        ])
        .await;
        std::fs::create_dir_all(home.work.join("proj")).unwrap();
        let session = model_session(&instance, &home, MODEL).await.unwrap();
        let id = session["sessionId"].as_str().unwrap().to_string();
        let (outcome, _) = prompt(&instance, &id, "fix the parser FOLDED-ASK", "t1").await;
        outcome.unwrap();

        let (outcome, seen) = prompt(&instance, &id, "/compact", "t2").await;
        let answer = outcome.unwrap();
        let summary = "SUMMARY: we fixed the parser";
        assert_eq!(answer["_meta"]["lembas"]["summary"], summary, "{answer}");
        assert_eq!(answer["_meta"]["lembas"]["command"], "compact", "{answer}");
        // The model was asked for the summary, with the turn to fold and no tools.
        let asked = &instance.chat_requests()[1];
        assert!(asked.get("tools").is_none(), "{asked}");
        assert!(asked.to_string().contains("FOLDED-ASK"), "{asked}");
        assert!(user_text(&instance, 1).starts_with("Summarize the conversation so far"));
        // Its text was not streamed as the answer of a turn.
        let streamed = format!("{seen:?}");
        assert!(streamed.contains("compacted"), "{streamed}");
        assert!(!streamed.contains("agent_message_chunk"), "{streamed}");

        let (outcome, _) = prompt(&instance, &id, "and now?", "t3").await;
        outcome.unwrap();
        let system = system_text(&instance, 2);
        assert!(system.ends_with(summary), "{system}");
        let given = instance.chat_requests()[2].to_string();
        assert!(
            !given.contains("FOLDED-ASK"),
            "the folded turn was given again: {given}"
        );

        // The history still shows the folded turn.
        let history = call(
            &instance,
            "_lembas/session/history",
            json!({ "sessionId": id }),
        )
        .await
        .unwrap();
        assert!(history.to_string().contains("FOLDED-ASK"), "{history}");
    });
}
