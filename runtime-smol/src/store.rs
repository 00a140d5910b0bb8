//! The device's store: one redb file, one redb table per core [`Table`]. The core's
//! `Record::{Put, Delete, DeletePrefix}` are applied in order; the driver hands every record of
//! one loop iteration to [`RedbStore::commit`] as one write transaction (group commit). At
//! start-up [`RedbStore::restore_entries`] gives back what `Device::restore` needs: every
//! entry, but of each session's history only what its next turns' context takes.
//!
//! Its semantics are those of the core's `MemStore` (the reference), which the tests below hold
//! it to.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use lembas_core::config::SessionLimits;
use lembas_core::device::{Device, RecentPick, Unreadable};
use lembas_core::store::{Entry, HistoryPick, Record, Table};
use lembas_core::{DeviceConfig, Time};
use redb::{Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, TableDefinition};

fn def(table: Table) -> TableDefinition<'static, &'static str, &'static str> {
    TableDefinition::new(table.name())
}

/// Why the store could not be used; `Display` names the file.
#[derive(Debug)]
pub enum StoreError {
    /// Another process owns the store.
    Locked(PathBuf),
    Other(PathBuf, String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Locked(p) => write!(
                f,
                "the store {} is locked by another lembas process (a `lembas link` running?); \
                 stop it first, or use that one",
                p.display()
            ),
            StoreError::Other(p, why) => write!(f, "the store {}: {why}", p.display()),
        }
    }
}

impl std::error::Error for StoreError {}

/// redb's page cache. Its default (1 GiB) lets a store of many sessions fill memory with
/// cached pages (100,000 sessions: +111 MB resident); the device reads a session back rarely,
/// so a small cache costs little.
const CACHE_BYTES: usize = 4 * 1024 * 1024;

/// A scratch store ([`RedbStore::scratch`]) syncs one commit in this many to disk. Nothing in
/// it outlives the process, so no commit needs the sync for itself (`serve --stdio` commits in
/// its own step, and with many sessions streaming, a sync at each turn's start and end held
/// every stream); redb frees the pages a commit replaces only at a synced one, so a sync now
/// and then keeps the file, and the freed pages redb tracks in memory, bounded.
const SCRATCH_SYNC_EVERY: u64 = 64;

pub struct RedbStore {
    db: Database,
    path: PathBuf,
    /// A scratch store's commits so far (`None`: a store that syncs every commit).
    scratch_commits: Option<AtomicU64>,
}

impl RedbStore {
    /// Open (or create) the store at `path`, creating its directory (0700) and every table.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let other =
            |e: &dyn std::fmt::Display| StoreError::Other(path.to_path_buf(), e.to_string());
        if let Some(dir) = path.parent() {
            crate::dirs::create_private_dir(dir).map_err(|e| other(&e))?;
        }
        let db = match Database::builder().set_cache_size(CACHE_BYTES).create(path) {
            Ok(db) => db,
            Err(DatabaseError::DatabaseAlreadyOpen) | Err(DatabaseError::LockProtocolMismatch) => {
                return Err(StoreError::Locked(path.to_path_buf()))
            }
            Err(e) => return Err(other(&e)),
        };
        let txn = db.begin_write().map_err(|e| other(&e))?;
        for t in Table::ALL {
            txn.open_table(def(t)).map_err(|e| other(&e))?;
        }
        txn.commit().map_err(|e| other(&e))?;
        Ok(RedbStore {
            db,
            path: path.to_path_buf(),
            scratch_commits: None,
        })
    }

    /// [`RedbStore::open`], waiting while another process holds the store: `locked` is called
    /// before each wait (every 250 ms), and its error ends the wait.
    pub fn open_waiting(
        path: &Path,
        mut locked: impl FnMut() -> Result<(), String>,
    ) -> Result<RedbStore, String> {
        loop {
            match RedbStore::open(path) {
                Err(StoreError::Locked(_)) => {
                    locked()?;
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
                r => return r.map_err(|e| e.to_string()),
            }
        }
    }

    /// A store for this process alone (`serve --stdio`): a new file in `dir`, removed from
    /// the directory at once, so nothing is left behind however the process ends, while the
    /// open file keeps the sessions' history on disk rather than in memory.
    pub fn scratch(dir: &Path) -> Result<RedbStore, StoreError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = dir.join(format!("stdio-{}-{nanos}.redb", std::process::id()));
        let mut store = RedbStore::open(&path)?;
        std::fs::remove_file(&path).map_err(|e| StoreError::Other(path.clone(), e.to_string()))?;
        store.scratch_commits = Some(AtomicU64::new(0));
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every stored entry, table by table, in key order.
    pub fn entries(&self) -> Result<Vec<Entry>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.other(&e))?;
        self.tables(&txn, Table::ALL)
    }

    /// Every entry of `table`, in key order (`lembas sessions list` needs the sessions' only).
    pub fn table_entries(&self, table: Table) -> Result<Vec<Entry>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.other(&e))?;
        self.tables(&txn, [table])
    }

    fn other(&self, e: &dyn std::fmt::Display) -> StoreError {
        StoreError::Other(self.path.clone(), e.to_string())
    }

    /// Every entry of `tables` in `txn`, table by table, in key order.
    fn tables(
        &self,
        txn: &redb::ReadTransaction,
        tables: impl IntoIterator<Item = Table>,
    ) -> Result<Vec<Entry>, StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let mut out = Vec::new();
        for table in tables {
            let t = txn.open_table(def(table)).map_err(|e| other(&e))?;
            for item in t.iter().map_err(|e| other(&e))? {
                let (k, v) = item.map_err(|e| other(&e))?;
                out.push(Entry {
                    table,
                    key: k.value().to_string(),
                    value: v.value().to_string(),
                });
            }
        }
        Ok(out)
    }

    /// What `Device::restore` reads: every entry of every table but `History`, of which only
    /// each session's newest entries its `Recent` keeps ([`RecentPick`]): a restart's memory
    /// does not grow with the sessions' history.
    pub fn restore_entries(&self, limits: &SessionLimits) -> Result<Vec<Entry>, StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let txn = self.db.begin_read().map_err(|e| other(&e))?;
        // One transaction for all of it: the history picked belongs to the ledger read.
        let mut out = self.tables(
            &txn,
            Table::ALL.into_iter().filter(|t| *t != Table::History),
        )?;
        // Each session's ledger, for which of its answers failed (counted as empty).
        let mut turns: std::collections::BTreeMap<&str, Vec<&Entry>> = Default::default();
        for e in &out {
            match e.table {
                Table::Sessions => turns.entry(e.key.as_str()).or_default(),
                Table::Turns => match e.key.split_once('/') {
                    Some((session, _)) => turns.entry(session).or_default(),
                    None => continue,
                },
                _ => continue,
            }
            .extend((e.table == Table::Turns).then_some(e));
        }
        let picks: Vec<(String, RecentPick)> = turns
            .into_iter()
            .map(|(s, t)| (s.to_string(), RecentPick::new(limits, t)))
            .collect();
        let t = txn.open_table(def(Table::History)).map_err(|e| other(&e))?;
        for (session, pick) in picks {
            self.recent_history(&t, &session, pick, &mut out)?;
        }
        Ok(out)
    }

    /// A session's newest history entries as `pick` takes them, into `out`.
    fn recent_history(
        &self,
        t: &impl ReadableTable<&'static str, &'static str>,
        session: &str,
        mut pick: RecentPick,
        out: &mut Vec<Entry>,
    ) -> Result<(), StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let (start, end) = lembas_core::store::history_range(session, None);
        for item in t
            .range(start.as_str()..end.as_str())
            .map_err(|e| other(&e))?
            .rev()
        {
            let (k, v) = item.map_err(|e| other(&e))?;
            if !pick.take(v.value()) {
                break;
            }
            out.push(Entry {
                table: Table::History,
                key: k.value().to_string(),
                value: v.value().to_string(),
            });
        }
        Ok(())
    }

    /// The entries of one session (its record, turns and event log, and the newest history
    /// entries its `Recent` keeps), for `Effect::LoadSession`: a point read and prefix ranges,
    /// not a scan of the store.
    pub fn session_entries(
        &self,
        session: &str,
        limits: &SessionLimits,
    ) -> Result<Vec<Entry>, StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let txn = self.db.begin_read().map_err(|e| other(&e))?;
        let mut out = Vec::new();
        let t = txn
            .open_table(def(Table::Sessions))
            .map_err(|e| other(&e))?;
        if let Some(v) = t.get(session).map_err(|e| other(&e))? {
            out.push(Entry {
                table: Table::Sessions,
                key: session.to_string(),
                value: v.value().to_string(),
            });
        }
        let prefix = lembas_core::store::session_prefix(session);
        for table in [Table::Turns, Table::Events] {
            let t = txn.open_table(def(table)).map_err(|e| other(&e))?;
            for item in t.range(prefix.as_str()..).map_err(|e| other(&e))? {
                let (k, v) = item.map_err(|e| other(&e))?;
                if !k.value().starts_with(prefix.as_str()) {
                    break;
                }
                out.push(Entry {
                    table,
                    key: k.value().to_string(),
                    value: v.value().to_string(),
                });
            }
        }
        let pick = RecentPick::new(limits, &out);
        let t = txn.open_table(def(Table::History)).map_err(|e| other(&e))?;
        self.recent_history(&t, session, pick, &mut out)?;
        Ok(out)
    }

    /// A set-aside session's event log as `Effect::ReadEvents` asks for it: every block of
    /// it, oldest first (`store::is_event_block_of`), by one prefix range.
    pub fn session_events(&self, session: &str) -> Result<Vec<Entry>, StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let txn = self.db.begin_read().map_err(|e| other(&e))?;
        let t = txn.open_table(def(Table::Events)).map_err(|e| other(&e))?;
        let prefix = lembas_core::store::session_prefix(session);
        let mut out = Vec::new();
        for item in t.range(prefix.as_str()..).map_err(|e| other(&e))? {
            let (k, v) = item.map_err(|e| other(&e))?;
            if !k.value().starts_with(prefix.as_str()) {
                break;
            }
            out.push(Entry {
                table: Table::Events,
                key: k.value().to_string(),
                value: v.value().to_string(),
            });
        }
        Ok(out)
    }

    /// A session's history as `Effect::ReadHistory` asks for it: its entries before `before`,
    /// newest first, as `HistoryPick` takes them (a backward range read, stopped at the
    /// first not taken: a read costs what it answers, not the history's length).
    pub fn history(
        &self,
        session: &str,
        before: Option<u64>,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let txn = self.db.begin_read().map_err(|e| other(&e))?;
        let t = txn.open_table(def(Table::History)).map_err(|e| other(&e))?;
        let (start, end) = lembas_core::store::history_range(session, before);
        let mut pick = HistoryPick::new(limit, max_bytes);
        let mut out = Vec::new();
        for item in t
            .range(start.as_str()..end.as_str())
            .map_err(|e| other(&e))?
            .rev()
        {
            let (k, v) = item.map_err(|e| other(&e))?;
            if !pick.take(v.value().len()) {
                break;
            }
            out.push(Entry {
                table: Table::History,
                key: k.value().to_string(),
                value: v.value().to_string(),
            });
        }
        Ok(out)
    }

    /// Apply `records` in order, in one durable write transaction (for a scratch store, one
    /// synced to disk only now and then: see [`SCRATCH_SYNC_EVERY`]).
    pub fn commit(&self, records: &[Record]) -> Result<(), StoreError> {
        let other = |e: &dyn std::fmt::Display| self.other(e);
        let mut txn = self.db.begin_write().map_err(|e| other(&e))?;
        let unsynced = self.scratch_commits.as_ref().is_some_and(|n| {
            !(n.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(SCRATCH_SYNC_EVERY)
        });
        if unsynced {
            txn.set_durability(Durability::None)
                .map_err(|e| other(&e))?;
        }
        for r in records {
            match r {
                Record::Put { table, key, value } => {
                    let mut t = txn.open_table(def(*table)).map_err(|e| other(&e))?;
                    t.insert(key.as_str(), value.as_str())
                        .map_err(|e| other(&e))?;
                }
                Record::Delete { table, key } => {
                    let mut t = txn.open_table(def(*table)).map_err(|e| other(&e))?;
                    t.remove(key.as_str()).map_err(|e| other(&e))?;
                }
                Record::DeletePrefix { table, prefix } => {
                    let mut t = txn.open_table(def(*table)).map_err(|e| other(&e))?;
                    let keys: Vec<String> = t
                        .range(prefix.as_str()..)
                        .map_err(|e| other(&e))?
                        .map(|item| item.map(|(k, _)| k.value().to_string()))
                        .take_while(|k| k.as_ref().map_or(true, |k| k.starts_with(prefix.as_str())))
                        .collect::<Result<_, _>>()
                        .map_err(|e| other(&e))?;
                    for k in keys {
                        t.remove(k.as_str()).map_err(|e| other(&e))?;
                    }
                }
                _ => return Err(other(&"a record kind this build does not know")),
            }
        }
        txn.commit().map_err(|e| other(&e))
    }
}

/// The device as the store has it. An entry it cannot read is kept out and logged, not fatal.
pub fn restore_device(
    config: DeviceConfig,
    entries: Vec<Entry>,
    now: Time,
) -> Result<Device, String> {
    let (device, unreadable) = Device::restore(config, entries, now).map_err(|e| e.to_string())?;
    log_unreadable(&unreadable);
    Ok(device)
}

pub fn log_unreadable(unreadable: &[Unreadable]) {
    for u in unreadable {
        log::warn!(
            "store entry {}/{} unreadable: {}",
            u.table.name(),
            u.key,
            u.why
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lembas_core::store::MemStore;

    fn put(table: Table, key: &str, value: &str) -> Record {
        Record::Put {
            table,
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn redb_applies_records_as_the_mem_store_does_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/lembas/lembas.redb");
        let batches = vec![
            vec![
                put(Table::Sessions, "ses_a", "{}"),
                put(Table::Turns, "ses_a/t1", "1"),
                put(Table::Turns, "ses_a/t2", "2"),
                put(Table::Turns, "ses_ab/t1", "x"),
                put(Table::History, "ses_a/0000000000", "h"),
            ],
            vec![
                put(Table::Turns, "ses_a/t1", "1b"),
                Record::Delete {
                    table: Table::Turns,
                    key: "ses_a/t2".into(),
                },
                Record::Delete {
                    table: Table::Turns,
                    key: "absent".into(),
                },
            ],
            vec![
                Record::DeletePrefix {
                    table: Table::Turns,
                    prefix: "ses_a/".into(),
                },
                put(Table::Turns, "ses_a/t3", "3"),
            ],
        ];
        let mut mem = MemStore::default();
        {
            let store = RedbStore::open(&path).unwrap();
            for b in &batches {
                store.commit(b).unwrap();
                mem.apply(b);
                assert_eq!(store.entries().unwrap(), mem.entries());
            }
        }
        let store = RedbStore::open(&path).unwrap();
        assert_eq!(store.entries().unwrap(), mem.entries());
        assert_eq!(mem.len(), 4);
        let limits = SessionLimits::default();
        let sorted = |mut entries: Vec<Entry>| {
            entries.sort_by(|a, b| (a.table.name(), &a.key).cmp(&(b.table.name(), &b.key)));
            entries
        };
        for session in ["ses_a", "ses_ab", "ses_none"] {
            assert_eq!(
                sorted(store.session_entries(session, &limits).unwrap()),
                sorted(mem.session_entries(session))
            );
        }
        assert_eq!(store.session_entries("ses_a", &limits).unwrap().len(), 3);
    }

    #[test]
    fn redb_reads_a_history_as_the_mem_store_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(&dir.path().join("lembas.redb")).unwrap();
        let mut records = Vec::new();
        for (session, n) in [("ses_a", 12), ("ses_ab", 3), ("ses_b", 2)] {
            for i in 0..n {
                let value = format!("{{\"v\":\"{}\"}}", "x".repeat(i * 10));
                records.push(put(
                    Table::History,
                    &lembas_core::store::history_key(session, i),
                    &value,
                ));
            }
        }
        store.commit(&records).unwrap();
        let mut mem = MemStore::default();
        mem.apply(&records);
        for session in ["ses_a", "ses_ab", "ses_b", "ses_none"] {
            for before in [None, Some(0), Some(1), Some(5), Some(99)] {
                for (limit, max_bytes) in [(100, 1 << 20), (3, 1 << 20), (100, 150), (100, 1)] {
                    let got = store.history(session, before, limit, max_bytes).unwrap();
                    assert_eq!(got, mem.history(session, before, limit, max_bytes));
                }
            }
        }
        let newest = store.history("ses_a", Some(5), 2, 1 << 20).unwrap();
        let keys: Vec<&str> = newest.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["ses_a/0000000004", "ses_a/0000000003"]);
        // The newest is given even alone over the budget; the next would pass it.
        assert_eq!(store.history("ses_a", None, 100, 1).unwrap().len(), 1);
    }

    #[test]
    fn a_scratch_store_leaves_no_file_and_still_works() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::scratch(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        store
            .commit(&[put(Table::History, "ses_a/0000000000", "h")])
            .unwrap();
        assert_eq!(store.history("ses_a", None, 10, 100).unwrap().len(), 1);
    }

    /// Commits not synced to disk are read back as any, across the synced ones.
    #[test]
    fn a_scratch_store_reads_back_every_commit_synced_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::scratch(dir.path()).unwrap();
        for i in 0..3 * SCRATCH_SYNC_EVERY {
            let mut records = vec![put(Table::History, &format!("ses_a/{i:010}"), "h")];
            if i > 0 {
                records.push(Record::Delete {
                    table: Table::History,
                    key: format!("ses_a/{:010}", i - 1),
                });
            }
            store.commit(&records).unwrap();
            let read = store.history("ses_a", None, 10, 1000).unwrap();
            let keys: Vec<&str> = read.iter().map(|e| e.key.as_str()).collect();
            assert_eq!(keys, [format!("ses_a/{i:010}")], "after commit {i}");
        }
    }

    #[test]
    fn a_second_owner_is_told_the_store_is_locked_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas.redb");
        let _first = RedbStore::open(&path).unwrap();
        let e = match RedbStore::open(&path) {
            Err(e) => e,
            Ok(_) => panic!("a second open succeeded"),
        };
        assert!(matches!(e, StoreError::Locked(_)), "{e}");
        assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
    }
}
