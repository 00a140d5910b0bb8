//! `lembas sessions list|prune` and `lembas trust|untrust`, run as the binary on a scratch home.

use std::path::Path;
use std::process::Command;

use lembas::store::RedbStore;
use lembas_core::store::{Record, Table};

fn lembas(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lembas"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn session(id: &str, title: Option<&str>, touched: u64) -> Record {
    Record::Put {
        table: Table::Sessions,
        key: id.into(),
        value: serde_json::json!({
            "id": id, "cwd": "/w/p", "root": "/w", "title": title, "mode": "edit",
            "model": null, "effort": null, "instance": true, "touched": touched,
        })
        .to_string(),
    }
}

#[test]
fn prune_deletes_sessions_untouched_that_long_and_keeps_the_deletes_for_the_next_link() {
    let home = tempfile::tempdir().unwrap();
    let (ok, out, _) = lembas(home.path(), &["sessions", "list"]);
    assert!(ok && out == "no sessions\n", "{out}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let day = 86_400_000;
    let store_file = home.path().join("state/lembas/lembas.redb");
    {
        let store = RedbStore::open(&store_file).unwrap();
        store
            .commit(&[
                session("ses_old", Some("Fix the build"), now - 40 * day),
                session("ses_mid", None, now - 10 * day),
                session("ses_new", Some("Today"), now),
                Record::Put {
                    table: Table::Turns,
                    key: "ses_old/msg_1".into(),
                    value: r#"{"order":0,"state":{"state":"queued"},"touched":0}"#.into(),
                },
            ])
            .unwrap();
    }
    std::fs::create_dir_all(home.path().join("state/lembas/attachments/ses_old")).unwrap();
    let (ok, out, err) = lembas(home.path(), &["sessions", "list"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].ends_with("LAST TOUCHED"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("ses_new") && lines[1].contains("Today"),
        "{out}"
    );
    assert!(
        lines[2].contains("(untitled)") && lines[2].contains("10 days ago"),
        "{out}"
    );
    assert!(
        lines[3].contains("Fix the build") && lines[3].contains("/w/p"),
        "{out}"
    );

    let (ok, out, err) = lembas(home.path(), &["sessions", "prune", "--older-than", "30"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "deleted 1 session untouched for more than 30 days\n  ses_old\n"
    );
    assert!(!home
        .path()
        .join("state/lembas/attachments/ses_old")
        .exists());
    let (_, out, _) = lembas(home.path(), &["sessions", "list"]);
    assert!(!out.contains("ses_old") && out.contains("ses_mid"), "{out}");
    let store = RedbStore::open(&store_file).unwrap();
    let entries = store.entries().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e.table == Table::Deletes && e.key == "ses_old"),
        "the delete is kept for the next link: {entries:?}"
    );
    assert!(!entries.iter().any(|e| e.key.starts_with("ses_old/")));
}

#[test]
fn trust_and_untrust_edit_the_config_and_keep_the_rest() {
    let home = tempfile::tempdir().unwrap();
    let proj = home.path().join("work/proj");
    std::fs::create_dir_all(&proj).unwrap();
    let real = std::fs::canonicalize(&proj).unwrap();
    let real = real.to_str().unwrap();
    let cfg = home.path().join("config/lembas/config.yaml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "# my settings\nmodel: x\nremote:\n  enabled: true\n").unwrap();
    let (ok, out, err) = lembas(home.path(), &["trust", "~/work/proj"]);
    assert!(ok, "{err}");
    assert_eq!(out, format!("trusted {real}\n"));
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.starts_with("# my settings\nmodel: x\nremote:\n  enabled: true\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("trusted:\n  - \"{real}\"\n")),
        "{text}"
    );
    let (ok, out, _) = lembas(home.path(), &["untrust", &format!("{real}/../proj")]);
    assert!(ok);
    assert_eq!(out, format!("no longer trusting {real}\n"));
    assert!(std::fs::read_to_string(&cfg)
        .unwrap()
        .contains("trusted: []"));
    let (ok, _, err) = lembas(home.path(), &["trust", "/no/such/dir"]);
    assert!(!ok && err.contains("/no/such/dir"), "{err}");
    std::fs::write(&cfg, "remote:\n  enabld: true\n").unwrap();
    let (ok, _, err) = lembas(home.path(), &["trust", "~/work/proj"]);
    assert!(!ok && err.contains("config.yaml:2"), "{err}");
}
