// IndexedDB storage for the wasm shell in a browser, so a page reload loses nothing:
// `idbStore` keeps a device's store records (sessions, turn ledgers, history, pending deletes)
// for DeviceDriver, and `idbKept` keeps a client's undelivered deletes for ClientDriver.
// Both are asynchronous; DeviceDriver.open and ClientDriver.open await them before starting.

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
  });
}

/** The database `name` with its object store `store`, made on first use. */
async function open(name, store, what) {
  const r = indexedDB.open(name, 1);
  r.onupgradeneeded = () => r.result.createObjectStore(store);
  const db = await request(r);
  // Made by the other function: version 1 exists, so no upgrade adds this one's store.
  if (!db.objectStoreNames.contains(store)) {
    db.close();
    throw new Error(
      `${what}(${JSON.stringify(name)}): that IndexedDB database holds the other kind's records ` +
        `(no object store "${store}"); give idbStore and idbKept different names`,
    );
  }
  return db;
}

const OPS = ["put", "delete", "delete_prefix"];

/**
 * A device's store in the IndexedDB database `name`: one object store of entries keyed by
 * [table, key]. `apply(records)` writes a persist effect's records in one transaction and
 * resolves once it is durable; `entries()` lists everything for `Device.restore`.
 */
export async function idbStore(name = "lembas-device") {
  const db = await open(name, "entries", "idbStore");
  return {
    async entries() {
      const tx = db.transaction("entries", "readonly");
      const s = tx.objectStore("entries");
      const [keys, values] = await Promise.all([request(s.getAllKeys()), request(s.getAll())]);
      return keys.map(([table, key], i) => ({ table, key, value: values[i] }));
    },
    apply(records) {
      // Checked before anything is written: a transaction cut short would keep half of them.
      const bad = records.find((r) => !OPS.includes(r?.op));
      if (bad) {
        return Promise.reject(new Error(`unknown store record op ${JSON.stringify(bad?.op)} (known: ${OPS.join(", ")}): nothing was written`));
      }
      const tx = db.transaction("entries", "readwrite");
      const s = tx.objectStore("entries");
      for (const r of records) {
        if (r.op === "put") s.put(r.value, [r.table, r.key]);
        else if (r.op === "delete") s.delete([r.table, r.key]);
        // Every key of the table that starts with the prefix: [table, prefix] up to the
        // prefix followed by the highest code unit.
        else s.delete(IDBKeyRange.bound([r.table, r.prefix], [r.table, r.prefix + "\uffff"]));
      }
      return done(tx);
    },
    close: () => db.close(),
  };
}

/**
 * A client's undelivered deletes (`Client.pendingDeletes()`) in the IndexedDB database
 * `name`. Saves are queued in order; `flushed()` resolves when the last one is durable.
 */
export async function idbKept(name = "lembas-client") {
  const db = await open(name, "kept", "idbKept");
  let last = Promise.resolve();
  return {
    async load() {
      const tx = db.transaction("kept", "readonly");
      return (await request(tx.objectStore("kept").get("pendingDeletes"))) ?? [];
    },
    save(list) {
      const tx = db.transaction("kept", "readwrite");
      tx.objectStore("kept").put(list, "pendingDeletes");
      last = done(tx);
      return last;
    },
    flushed: () => last,
    close: () => db.close(),
  };
}
