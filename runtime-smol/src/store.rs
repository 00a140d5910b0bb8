//! The device's store: one redb file, one redb table per core [`Table`], and History's big
//! values in one of their own ([`HISTORY_BIG`]). The core's
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

/// The redb table of each core [`Table`] (History's is [`HISTORY`]).
fn def(table: Table) -> TableDefinition<'static, &'static str, &'static str> {
    match table {
        Table::History => HISTORY,
        t => TableDefinition::new(t.name()),
    }
}

/// A History value over this many bytes is kept in [`HISTORY_BIG`] under its key, with
/// [`BIG_MARKER`] in its place. A redb leaf holds whole values, so a small entry put beside a
/// 64 KB (or 4 MiB) answer made redb rewrite that answer: a turn-start commit of 52 KB of
/// records wrote 13.2 MB. Apart, History's leaves hold small values only, and a neighbour costs
/// at most about a page (4 KiB).
const BIG_HISTORY_BYTES: usize = 4096;

/// What History holds for a value kept in [`HISTORY_BIG`]. It is no value History keeps
/// inline, whatever the core stores: a value that begins with it goes to [`HISTORY_BIG`] at any
/// size (the core's are JSON, which never begins with NUL, so in practice only big ones do).
const BIG_MARKER: &str = "\0";

/// The session history's small values and the markers of its big ones.
const HISTORY: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("history.2");

/// The session history's big values, under the keys of their markers in [`HISTORY`].
const HISTORY_BIG: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("history.2.big");

/// Where a store written before [`HISTORY_BIG`] keeps its history, all of it inline. Such a
/// store's history is moved to [`HISTORY`] at open ([`RedbStore::open`]).
const HISTORY_BEFORE: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("history");

/// What takes the place of [`HISTORY_BEFORE`]: a table of another type under its name, so a
/// lembas from before, which opens `history` as text, refuses the store (redb: "history is of
/// type ...") rather than read markers as turns or miss the history.
const HISTORY_GUARD: TableDefinition<'static, &'static str, u64> = TableDefinition::new("history");

/// The key of the store's layout in [`HISTORY_GUARD`], and its value.
const LAYOUT_KEY: &str = "layout";
const LAYOUT: u64 = 2;

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
        RedbStore::with_tables(db, path)
    }

    /// The store over `db`, once every table is there (and a store from before
    /// [`HISTORY_BIG`] has its history moved).
    fn with_tables(db: Database, path: &Path) -> Result<RedbStore, StoreError> {
        let other =
            |e: &dyn std::fmt::Display| StoreError::Other(path.to_path_buf(), e.to_string());
        let txn = db.begin_write().map_err(|e| other(&e))?;
        for t in Table::ALL {
            txn.open_table(def(t)).map_err(|e| other(&e))?;
        }
        txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
        let guarded = match txn.open_table(HISTORY_GUARD) {
            Ok(_) => true,
            Err(redb::TableError::TableTypeMismatch { .. }) => false,
            Err(e) => return Err(other(&e)),
        };
        if !guarded {
            move_history_from_before(&txn).map_err(|e| other(&e))?;
        }
        txn.open_table(HISTORY_GUARD)
            .map_err(|e| other(&e))?
            .insert(LAYOUT_KEY, LAYOUT)
            .map_err(|e| other(&e))?;
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
        let big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
        for table in tables {
            let t = txn.open_table(def(table)).map_err(|e| other(&e))?;
            for item in t.iter().map_err(|e| other(&e))? {
                let (k, v) = item.map_err(|e| other(&e))?;
                let value = match table {
                    Table::History => self.history_value(&big, k.value(), v.value())?,
                    _ => v.value().to_string(),
                };
                out.push(Entry {
                    table,
                    key: k.value().to_string(),
                    value,
                });
            }
        }
        Ok(out)
    }

    /// A History value as read: itself, or for [`BIG_MARKER`], the value it stands for.
    fn history_value(
        &self,
        big: &impl ReadableTable<&'static str, &'static str>,
        key: &str,
        stored: &str,
    ) -> Result<String, StoreError> {
        if stored != BIG_MARKER {
            return Ok(stored.to_string());
        }
        match big.get(key).map_err(|e| self.other(&e))? {
            Some(v) => Ok(v.value().to_string()),
            None => Err(self.other(&format!(
                "the history entry {key} stands for a big value the store does not have"
            ))),
        }
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
        let big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
        for (session, pick) in picks {
            self.recent_history((&t, &big), &session, pick, &mut out)?;
        }
        Ok(out)
    }

    /// A session's newest history entries as `pick` takes them, into `out` (`t`: [`HISTORY`]
    /// and [`HISTORY_BIG`]).
    fn recent_history<T: ReadableTable<&'static str, &'static str>>(
        &self,
        (t, big): (&T, &T),
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
            let value = self.history_value(big, k.value(), v.value())?;
            if !pick.take(&value) {
                break;
            }
            out.push(Entry {
                table: Table::History,
                key: k.value().to_string(),
                value,
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
        let big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
        self.recent_history((&t, &big), session, pick, &mut out)?;
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
        let big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
        let (start, end) = lembas_core::store::history_range(session, before);
        let mut pick = HistoryPick::new(limit, max_bytes);
        let mut out = Vec::new();
        for item in t
            .range(start.as_str()..end.as_str())
            .map_err(|e| other(&e))?
            .rev()
        {
            let (k, v) = item.map_err(|e| other(&e))?;
            let value = self.history_value(&big, k.value(), v.value())?;
            if !pick.take(value.len()) {
                break;
            }
            out.push(Entry {
                table: Table::History,
                key: k.value().to_string(),
                value,
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
                Record::Put {
                    table: Table::History,
                    key,
                    value,
                } => {
                    let mut t = txn.open_table(HISTORY).map_err(|e| other(&e))?;
                    let mut big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
                    put_history(&mut t, &mut big, key, value).map_err(|e| other(&e))?;
                }
                Record::Delete {
                    table: Table::History,
                    key,
                } => {
                    let mut t = txn.open_table(HISTORY).map_err(|e| other(&e))?;
                    let was_big = t
                        .remove(key.as_str())
                        .map_err(|e| other(&e))?
                        .is_some_and(|old| old.value() == BIG_MARKER);
                    if was_big {
                        let mut big = txn.open_table(HISTORY_BIG).map_err(|e| other(&e))?;
                        big.remove(key.as_str()).map_err(|e| other(&e))?;
                    }
                }
                Record::DeletePrefix {
                    table: Table::History,
                    prefix,
                } => {
                    for d in [HISTORY, HISTORY_BIG] {
                        let mut t = txn.open_table(d).map_err(|e| other(&e))?;
                        remove_prefix(&mut t, prefix).map_err(|e| other(&e))?;
                    }
                }
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
                    remove_prefix(&mut t, prefix).map_err(|e| other(&e))?;
                }
                _ => return Err(other(&"a record kind this build does not know")),
            }
        }
        txn.commit().map_err(|e| other(&e))
    }
}

/// Put `value` under `key` in the history: inline, or in [`HISTORY_BIG`] with [`BIG_MARKER`]
/// in [`HISTORY`]; a big value it replaces leaves [`HISTORY_BIG`], so none is left behind.
fn put_history(
    history: &mut redb::Table<&'static str, &'static str>,
    big: &mut redb::Table<&'static str, &'static str>,
    key: &str,
    value: &str,
) -> Result<(), redb::StorageError> {
    let out_of_line = value.len() > BIG_HISTORY_BYTES || value.starts_with(BIG_MARKER);
    let kept = if out_of_line { BIG_MARKER } else { value };
    let was_big = history
        .insert(key, kept)?
        .is_some_and(|old| old.value() == BIG_MARKER);
    if out_of_line {
        big.insert(key, value)?;
    } else if was_big {
        big.remove(key)?;
    }
    Ok(())
}

/// Remove every entry of `t` whose key begins with `prefix`.
fn remove_prefix(
    t: &mut redb::Table<&'static str, &'static str>,
    prefix: &str,
) -> Result<(), redb::StorageError> {
    let keys: Vec<String> = t
        .range(prefix..)?
        .map(|item| item.map(|(k, _)| k.value().to_string()))
        .take_while(|k| k.as_ref().map_or(true, |k| k.starts_with(prefix)))
        .collect::<Result<_, _>>()?;
    for k in keys {
        t.remove(k.as_str())?;
    }
    Ok(())
}

/// Move a store's history from before [`HISTORY_BIG`] ([`HISTORY_BEFORE`]) into [`HISTORY`],
/// its big values out, and drop the old table, in the open's transaction `txn`.
fn move_history_from_before(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    {
        let before = txn.open_table(HISTORY_BEFORE)?;
        let mut history = txn.open_table(HISTORY)?;
        let mut big = txn.open_table(HISTORY_BIG)?;
        for item in before.iter()? {
            let (k, v) = item?;
            put_history(&mut history, &mut big, k.value(), v.value())?;
        }
    }
    txn.delete_table(HISTORY_BEFORE)?;
    Ok(())
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

    /// A History value over [`BIG_HISTORY_BYTES`]: JSON, as the core's are.
    fn big(tag: &str) -> String {
        format!("{{\"v\":\"{tag}{}\"}}", "x".repeat(BIG_HISTORY_BYTES))
    }

    /// Markers in History and values in [`HISTORY_BIG`], as counts: equal when none is orphaned.
    fn markers_and_big_values(store: &RedbStore) -> (usize, usize) {
        let txn = store.db.begin_read().unwrap();
        let markers = txn
            .open_table(HISTORY)
            .unwrap()
            .iter()
            .unwrap()
            .filter(|i| i.as_ref().unwrap().1.value() == BIG_MARKER)
            .count();
        let big = txn.open_table(HISTORY_BIG).unwrap().iter().unwrap().count();
        (markers, big)
    }

    fn assert_reads_as(store: &RedbStore, mem: &MemStore, when: &str) {
        assert_eq!(store.entries().unwrap(), mem.entries(), "{when}");
        let limits = SessionLimits::default();
        for session in ["ses_a", "ses_ab", "ses_b"] {
            for before in [None, Some(1), Some(3)] {
                for (limit, max_bytes) in [(100, 1 << 20), (2, 1 << 20), (100, 100), (100, 1)] {
                    assert_eq!(
                        store.history(session, before, limit, max_bytes).unwrap(),
                        mem.history(session, before, limit, max_bytes),
                        "{when}: {session} {before:?} {limit} {max_bytes}"
                    );
                }
            }
            let mut got = store.session_entries(session, &limits).unwrap();
            let mut want = mem.session_entries(session);
            for e in [&mut got, &mut want] {
                e.sort_by(|a, b| (a.table.name(), &a.key).cmp(&(b.table.name(), &b.key)));
            }
            assert_eq!(got, want, "{when}: {session}");
        }
        // What restore reads of the history is some of it, as the mem store has it.
        let all = mem.entries();
        for e in store.restore_entries(&limits).unwrap() {
            assert!(
                all.contains(&e),
                "{when}: restore read {}/{}",
                e.table.name(),
                e.key
            );
        }
        let (markers, big) = markers_and_big_values(store);
        assert_eq!(markers, big, "{when}: a big value orphaned or missing");
    }

    /// Big values are kept apart and read back as the mem store has them, through overwrites
    /// big to small and back, deletes and reopening, leaving no big value behind.
    #[test]
    fn big_history_values_read_as_the_mem_store_has_them_and_none_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas.redb");
        let key = |s: &str, i: usize| lembas_core::store::history_key(s, i);
        let del = |key: String| Record::Delete {
            table: Table::History,
            key,
        };
        let batches = [
            vec![
                put(Table::Sessions, "ses_a", "{}"),
                put(Table::History, &key("ses_a", 0), "{\"v\":\"small\"}"),
                put(Table::History, &key("ses_a", 1), &big("a1")),
                put(Table::History, &key("ses_a", 2), &big("a2")),
                put(Table::History, &key("ses_a", 3), "{}"),
                put(Table::History, &key("ses_ab", 0), &big("ab0")),
                put(Table::History, &key("ses_b", 0), &big("b0")),
                // Not JSON, but the marker itself and a value beginning as it does are read
                // back as they were put.
                put(Table::History, &key("ses_b", 1), BIG_MARKER),
                put(Table::History, &key("ses_b", 2), "\0{}"),
            ],
            vec![
                // Big to small, small to big, big to big.
                put(Table::History, &key("ses_a", 1), "{\"v\":\"now small\"}"),
                put(Table::History, &key("ses_a", 3), &big("a3")),
                put(Table::History, &key("ses_a", 2), &big("a2 again")),
                put(Table::History, &key("ses_b", 1), "{}"),
            ],
            vec![
                del(key("ses_a", 2)),
                del(key("ses_a", 0)),
                del(key("ses_a", 9)),
                put(Table::History, &key("ses_a", 4), &big("a4")),
                del(key("ses_a", 4)),
            ],
            vec![
                Record::DeletePrefix {
                    table: Table::History,
                    prefix: "ses_ab/".into(),
                },
                put(Table::History, &key("ses_a", 5), &big("a5")),
            ],
        ];
        let mut mem = MemStore::default();
        {
            let store = RedbStore::open(&path).unwrap();
            for (i, b) in batches.iter().enumerate() {
                store.commit(b).unwrap();
                mem.apply(b);
                assert_reads_as(&store, &mem, &format!("after batch {i}"));
            }
            assert_eq!(markers_and_big_values(&store), (4, 4));
        }
        let store = RedbStore::open(&path).unwrap();
        assert_reads_as(&store, &mem, "reopened");
    }

    /// A store written before big values were kept apart (every table under its core name,
    /// values inline) opens and reads as it did; after, a lembas from before, which opens
    /// `history` as text, is refused it rather than read markers as turns.
    #[test]
    fn a_store_from_before_reads_as_it_did_and_one_from_before_refuses_it_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lembas.redb");
        let records = vec![
            put(Table::Sessions, "ses_a", "{}"),
            put(Table::Turns, "ses_a/t1", "1"),
            put(Table::History, "ses_a/0000000000", "{\"v\":\"small\"}"),
            put(Table::History, "ses_a/0000000001", &big("a1")),
            put(Table::History, "ses_b/0000000000", &big("b0")),
            put(Table::Device, "epoch", "3"),
        ];
        let as_before = |t: Table| TableDefinition::<&str, &str>::new(t.name());
        {
            // What `open` and `commit` wrote before.
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            for t in Table::ALL {
                txn.open_table(as_before(t)).unwrap();
            }
            for r in &records {
                if let Record::Put { table, key, value } = r {
                    let mut t = txn.open_table(as_before(*table)).unwrap();
                    t.insert(key.as_str(), value.as_str()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let mut mem = MemStore::default();
        mem.apply(&records);
        for _ in 0..2 {
            let store = RedbStore::open(&path).unwrap();
            assert_reads_as(&store, &mem, "a store from before");
            assert_eq!(markers_and_big_values(&store), (2, 2));
        }
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let refused = txn.open_table(as_before(Table::History)).err();
        let refused = refused.map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("history"), "opened as before: {refused:?}");
    }

    /// Bytes written to the store's storage, counted.
    #[derive(Debug)]
    struct Counted {
        inner: redb::backends::InMemoryBackend,
        written: std::sync::Arc<AtomicU64>,
    }

    impl redb::StorageBackend for Counted {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.written.fetch_add(data.len() as u64, Ordering::Relaxed);
            self.inner.write(offset, data)
        }
    }

    /// Each prompt's small entry put beside the last turn's big answer does not make the
    /// commit write that answer again: 100 sessions' 64 KB answers, then one small entry each
    /// in one commit (a round's turn-start commit) writes a small part of the answers' bytes
    /// (with the answers inline, redb rewrote their leaves: more than their 6.4 MB).
    #[test]
    fn a_small_history_entry_beside_a_big_answer_does_not_rewrite_it() {
        let written = std::sync::Arc::new(AtomicU64::new(0));
        let backend = Counted {
            inner: redb::backends::InMemoryBackend::new(),
            written: written.clone(),
        };
        let db = Database::builder().create_with_backend(backend).unwrap();
        let store = RedbStore::with_tables(db, Path::new("counted")).unwrap();
        let sessions = 100;
        let answer = format!("{{\"v\":\"{}\"}}", "x".repeat(64_000));
        let entry = |n: u64, i: usize, value: &str| {
            put(
                Table::History,
                &lembas_core::store::history_key(&format!("ses_{n:03}"), i),
                value,
            )
        };
        let prompts = |i: usize| -> Vec<Record> {
            (0..sessions)
                .map(|n| entry(n, i, "{\"role\":\"user\",\"text\":\"a prompt\"}"))
                .collect()
        };
        store.commit(&prompts(0)).unwrap();
        let answers: Vec<Record> = (0..sessions).map(|n| entry(n, 1, &answer)).collect();
        store.commit(&answers).unwrap();
        let before = written.load(Ordering::Relaxed);
        store.commit(&prompts(2)).unwrap();
        let start_commit = written.load(Ordering::Relaxed) - before;
        let answers_bytes = sessions * answer.len() as u64;
        assert!(
            start_commit < answers_bytes / 10,
            "the start commit wrote {start_commit} bytes; the answers beside are {answers_bytes}"
        );
    }
}
