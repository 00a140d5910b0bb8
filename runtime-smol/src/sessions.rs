//! `lembas sessions list|delete|prune`: the device's sessions as its redb store holds them.
//!
//! A delete goes through the core's `Device::delete_session`, exactly as a running device would
//! make it: the store is opened, the device restored from it, the session deleted, and what the
//! device asks to persist written, so the pending delete is in the store and the next
//! `lembas link` tells the client (`_lembas/session/deleted`) right after `initialize`. Every
//! subcommand here needs the store to itself; while a `lembas link` runs, `main` goes through
//! its hub instead ([`crate::hub_client`]), and another holder (an editor's `serve --stdio`)
//! is told the store is locked, and where.

use std::path::Path;

use lembas_core::device::{Device, Effect, Output};
use lembas_core::store::{Entry, SessionRecord, Table};
use lembas_core::time::Civil;
use lembas_core::{DeviceConfig, Time};

use crate::store::{RedbStore, StoreError};

/// One session as listed.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: String,
    pub title: Option<String>,
    pub cwd: String,
    /// Milliseconds since the Unix epoch.
    pub touched: u64,
}

fn rows_of(entries: &[Entry]) -> Vec<Row> {
    let mut rows: Vec<Row> = entries
        .iter()
        .filter(|e| e.table == Table::Sessions)
        .filter_map(|e| serde_json::from_str::<SessionRecord>(&e.value).ok())
        .map(|r| Row {
            id: r.id,
            title: r.title,
            cwd: r.cwd,
            touched: r.touched,
        })
        .collect();
    rows.sort_by(|a, b| b.touched.cmp(&a.touched).then(a.id.cmp(&b.id)));
    rows
}

/// The sessions of the store at `path`, most recently touched first; a store that does not
/// exist yet has no sessions. The store must not be owned by another process: redb (4.6) takes
/// the file's lock even for a read-only open, so while `lembas link` runs this says the store
/// is locked, and where.
pub fn list(path: &Path) -> Result<Vec<Row>, String> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let store = RedbStore::open(path).map_err(|e| match e {
        StoreError::Locked(_) => format!("{e}; sessions can be listed once it has stopped"),
        e => e.to_string(),
    })?;
    // The sessions' records only: a listing costs what it shows, not the store's history.
    let records = store.table_entries(Table::Sessions);
    Ok(rows_of(&records.map_err(|e| e.to_string())?))
}

/// Which sessions to delete, chosen from the listing.
pub type Pick<'a> = &'a dyn Fn(&[Row]) -> Result<Vec<String>, String>;

/// Sessions untouched for more than `days` days at `now`.
pub fn stale(rows: &[Row], days: u64, now: Time) -> Vec<String> {
    let age = days.saturating_mul(24 * 60 * 60 * 1000);
    rows.iter()
        .filter(|r| r.touched.saturating_add(age) < now.0)
        .map(|r| r.id.clone())
        .collect()
}

/// Delete the sessions `pick` chooses from the store at `path`, through the core's device: the
/// store must not be owned by another process. Returns the ids deleted.
pub fn delete(
    path: &Path,
    attachments: &Path,
    config: DeviceConfig,
    now: Time,
    pick: impl FnOnce(&[Row]) -> Result<Vec<String>, String>,
) -> Result<Vec<String>, String> {
    let store = RedbStore::open(path).map_err(|e| e.to_string())?;
    // What a restart reads (each session's recent history only): a delete removes a
    // session's history by prefix, so it never needs the rest in memory.
    let entries = store
        .restore_entries(&config.sessions)
        .map_err(|e| e.to_string())?;
    let ids = pick(&rows_of(&entries))?;
    let mut device = crate::store::restore_device(config, entries, now)?;
    let mut deleted = Vec::new();
    for id in ids {
        if device.delete_session(&id, now) {
            deleted.push(id);
        }
    }
    settle(&mut device, &store, attachments, now)?;
    Ok(deleted)
}

/// Perform what the device asks until it is quiet: its persists (one transaction each round),
/// and the removal of deleted sessions' attachments. No connection is open, so nothing else
/// comes out but frames for nobody.
fn settle(
    device: &mut Device,
    store: &RedbStore,
    attachments: &Path,
    now: Time,
) -> Result<(), String> {
    loop {
        let mut records = Vec::new();
        let mut seq = None;
        while let Some(out) = device.poll_output() {
            match out {
                Output::Effect(Effect::Persist { seq: s, records: r }) => {
                    records.extend(r);
                    seq = Some(s);
                }
                Output::Effect(Effect::RemoveAttachments { session_id }) => {
                    if !session_id.is_empty()
                        && !session_id.contains(['/', '\\'])
                        && session_id != ".."
                    {
                        match std::fs::remove_dir_all(attachments.join(&session_id)) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                log::error!("could not remove the attachments of {session_id}: {e}")
                            }
                            _ => {}
                        }
                    }
                }
                other => log::debug!("offline: {other:?} not performed"),
            }
        }
        let Some(seq) = seq else { return Ok(()) };
        store.commit(&records).map_err(|e| e.to_string())?;
        device.handle_persisted(seq, now);
    }
}

/// `2026-11-30 11:32 UTC` for milliseconds since the Unix epoch.
pub fn utc(ms: u64) -> String {
    let c = Civil::of(ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        c.year, c.month, c.day, c.hour, c.minute
    )
}

/// How long ago, roughly: `just now`, `5 min ago`, `3 h ago`, `12 days ago`.
pub fn ago(ms: u64, now: Time) -> String {
    let s = now.0.saturating_sub(ms) / 1000;
    match s {
        0..=59 => "just now".into(),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// What `lembas sessions prune` prints: how many sessions untouched for more than `days` days
/// were `deleted` (and `how`, when said: "through the running service"), then each one.
pub fn render_pruned(deleted: &[String], days: u64, how: Option<&str>) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let mut out = format!(
        "deleted {} session{} untouched for more than {days} day{}",
        deleted.len(),
        plural(deleted.len() as u64),
        plural(days)
    );
    if let Some(how) = how {
        out.push(' ');
        out.push_str(how);
    }
    out.push('\n');
    for id in deleted {
        out.push_str(&format!("  {id}\n"));
    }
    out
}

/// The listing as a table for a person.
pub fn render(rows: &[Row], now: Time) -> String {
    if rows.is_empty() {
        return "no sessions\n".into();
    }
    let title = |r: &Row| r.title.clone().unwrap_or_else(|| "(untitled)".into());
    let w_id = rows.iter().map(|r| r.id.len()).max().unwrap_or(0).max(2);
    let w_title = rows
        .iter()
        .map(|r| title(r).chars().count().min(40))
        .max()
        .unwrap_or(0)
        .max(5);
    let w_cwd = rows.iter().map(|r| r.cwd.len()).max().unwrap_or(0).max(3);
    let mut out = format!(
        "{:w_id$}  {:w_title$}  {:w_cwd$}  LAST TOUCHED\n",
        "ID", "TITLE", "CWD"
    );
    for r in rows {
        let mut t: String = title(r).chars().take(40).collect();
        if title(r).chars().count() > 40 {
            t.pop();
            t.push('…');
        }
        out.push_str(&format!(
            "{:w_id$}  {:w_title$}  {:w_cwd$}  {} ({})\n",
            r.id,
            t,
            r.cwd,
            utc(r.touched),
            ago(r.touched, now)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prune_says_how_many_how_and_which() {
        let two = ["ses_a".to_string(), "ses_b".to_string()];
        assert_eq!(
            render_pruned(&two, 1, Some("through the running service")),
            "deleted 2 sessions untouched for more than 1 day through the running service\n  \
             ses_a\n  ses_b\n"
        );
        assert_eq!(
            render_pruned(&[], 30, None),
            "deleted 0 sessions untouched for more than 30 days\n"
        );
    }

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_796_038_380_000), "2026-11-30 11:33 UTC");
    }

    #[test]
    fn stale_is_strictly_older_than_the_days_given() {
        let day = 86_400_000;
        let rows = vec![
            Row {
                id: "ses_old".into(),
                title: None,
                cwd: "/w".into(),
                touched: 0,
            },
            Row {
                id: "ses_new".into(),
                title: None,
                cwd: "/w".into(),
                touched: 9 * day,
            },
        ];
        assert_eq!(stale(&rows, 5, Time(10 * day)), vec!["ses_old".to_string()]);
        assert!(stale(&rows, 10, Time(10 * day)).is_empty());
    }
}

#[cfg(test)]
mod locked {
    use super::*;
    use lembas_core::store::Record;

    #[test]
    fn a_store_owned_by_another_is_said_locked_then_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas.redb");
        let owner = RedbStore::open(&path).unwrap();
        let rec = r#"{"id":"ses_x","cwd":"/w","root":"/w","title":"T","mode":"edit","model":null,"effort":null,"instance":true,"touched":5}"#;
        owner
            .commit(&[Record::Put {
                table: Table::Sessions,
                key: "ses_x".into(),
                value: rec.into(),
            }])
            .unwrap();
        let e = list(&path).unwrap_err();
        assert!(
            e.contains("locked") && e.contains(path.to_str().unwrap()),
            "{e}"
        );
        drop(owner);
        let rows = list(&path).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].id.as_str(), rows[0].title.as_deref()),
            ("ses_x", Some("T"))
        );
    }
}

#[cfg(test)]
mod reads {
    use super::*;
    use lembas_core::store::{history_key, Record};
    use lembas_core::wire::session::HistoryTurn;

    fn session(id: &str, touched: u64) -> Record {
        Record::Put {
            table: Table::Sessions,
            key: id.into(),
            value: format!(
                r#"{{"id":"{id}","cwd":"/w","root":"/w","title":null,"mode":"edit","model":null,"effort":null,"instance":true,"touched":{touched}}}"#
            ),
        }
    }

    /// A delete reads only what a restart does (each session's recent history), and still
    /// removes the whole of the session's history: the entries it never read too.
    #[test]
    fn a_delete_removes_history_it_never_read_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas.redb");
        let store = RedbStore::open(&path).unwrap();
        let mut records = vec![session("ses_gone", 1), session("ses_kept", 2)];
        for s in ["ses_gone", "ses_kept"] {
            for i in 0..500 {
                let text = "x".repeat(100);
                let turn = if i % 2 == 0 {
                    HistoryTurn::User {
                        text,
                        turn_id: Some(format!("t{i}")),
                        attachments: Vec::new(),
                    }
                } else {
                    HistoryTurn::Assistant {
                        text,
                        reasoning: String::new(),
                        tools: Vec::new(),
                    }
                };
                records.push(Record::Put {
                    table: Table::History,
                    key: history_key(s, i),
                    value: serde_json::to_string(&turn).unwrap(),
                });
            }
        }
        store.commit(&records).unwrap();
        let config = DeviceConfig::default();
        let read = store.restore_entries(&config.sessions).unwrap();
        let read_gone = |e: &&Entry| e.table == Table::History && e.key.starts_with("ses_gone/");
        assert!(
            read.iter().filter(read_gone).count() < 500,
            "the delete's read is meant to leave some of the history unread"
        );
        drop(store);

        let pick = |rows: &[Row]| {
            assert_eq!(rows.len(), 2, "both sessions listed for the pick");
            Ok(vec!["ses_gone".to_string()])
        };
        let deleted = delete(&path, &dir.path().join("att"), config, Time(10), pick).unwrap();
        assert_eq!(deleted, vec!["ses_gone".to_string()]);

        let store = RedbStore::open(&path).unwrap();
        let history = store.table_entries(Table::History).unwrap();
        let of = |s: &str| history.iter().filter(|e| e.key.starts_with(s)).count();
        assert_eq!((of("ses_gone/"), of("ses_kept/")), (0, 500));
        drop(store);
        let rows = list(&path).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["ses_kept"]
        );
    }
}
