//! Keyspaces: named key spaces inside one database (RocksDB's column families), each with the
//! database's whole API, all sharing one value log, one memtable, one sequence of writes and one
//! set of snapshots, so a batch can write to several atomically.
//!
//! A keyspace's keys are stored as `KEYSPACE_MARK ++ id (u32, big-endian) ++ user key`. The
//! mark is four 0xFF bytes, so every keyspace key sorts after every key of the default keyspace;
//! the default keyspace refuses keys that begin with the mark and its cursors stop before it.
//!
//! Each keyspace's prefix range is a partition of the LSM index: the partition map splits at
//! the mark, at each live keyspace's prefix and at the prefix of the next id to give. Flushes
//! and compactions therefore never put two keyspaces in one table, and dropping a keyspace is
//! one range delete over its prefix whose tables are dropped whole, without being read
//! (`index::lsm::partitions`). A dropped keyspace's split is removed, merging its (empty) range
//! into the partition before it. The hash index keeps no order and has no partitions: there a
//! drop deletes the keyspace's keys one by one.
//!
//! The list of keyspaces is itself data, in keyspace 0 (never handed out): `mark ++ 0 ++ 'n' ++
//! name` maps a name to its id, and `mark ++ 0 ++ 'c'` holds the next id to give (ids are never
//! reused). It is written through the ordinary write path, so creating and dropping a keyspace
//! are atomic, ordered with every other write, and recovered by log replay. Byte layout:
//! `docs/format/keyspaces.md`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::{Db, DbIterator, RangeIter};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::options::{ReadOptions, WriteOptions};
use crate::types::EscapedBytes;

/// The first bytes of every key stored for a keyspace.
pub const KEYSPACE_MARK: [u8; 4] = [0xFF; 4];

/// Version byte of the catalog's values.
const CATALOG_VALUE_VERSION: u8 = 1;
/// Catalog key kinds, after keyspace 0's prefix.
const NAME_KIND: u8 = b'n';
const COUNTER_KIND: u8 = b'c';
/// Longest keyspace name, in bytes.
const MAX_NAME_BYTES: usize = 256;

/// True if `key` is reserved for keyspaces (begins with [`KEYSPACE_MARK`]).
pub fn is_reserved(key: &[u8]) -> bool {
    key.starts_with(&KEYSPACE_MARK)
}

/// The error for a key of the default keyspace that begins with [`KEYSPACE_MARK`].
pub(crate) fn reserved_key_error() -> Error {
    Error::InvalidArgument(format!("keys beginning with {} are reserved for keyspaces", EscapedBytes(&KEYSPACE_MARK)))
}

/// The prefix of keyspace `id`'s stored keys.
fn prefix(id: u32) -> Vec<u8> {
    let mut out = KEYSPACE_MARK.to_vec();
    out.extend_from_slice(&id.to_be_bytes());
    out
}

fn catalog_key(kind: u8, name: &str) -> Vec<u8> {
    let mut key = prefix(0);
    key.push(kind);
    key.extend_from_slice(name.as_bytes());
    key
}

fn encode_id(id: u32) -> Vec<u8> {
    let mut out = vec![CATALOG_VALUE_VERSION];
    out.extend_from_slice(&id.to_be_bytes());
    out
}

fn decode_id(key: &[u8], value: &[u8]) -> Result<u32> {
    match value {
        [CATALOG_VALUE_VERSION, id @ ..] if id.len() == 4 => Ok(u32::from_be_bytes([id[0], id[1], id[2], id[3]])),
        _ => Err(Error::corruption(
            "keyspace catalog",
            0,
            format!("malformed value of length {} for catalog key of length {}", value.len(), key.len()),
        )),
    }
}

/// A live keyspace, shared by its handles and the batches that write to it.
#[derive(Debug)]
pub struct KeyspaceEntry {
    id: u32,
    name: String,
    /// Writes hold it shared while they are applied; a drop holds it exclusively and sets it,
    /// so that no write lands in a keyspace after its drop.
    dropped: RwLock<bool>,
}

/// A batch's reference to a keyspace; ordered by id.
#[derive(Clone, Debug)]
pub struct KeyspaceRef(Arc<KeyspaceEntry>);

impl PartialEq for KeyspaceRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for KeyspaceRef {}

impl PartialOrd for KeyspaceRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeyspaceRef {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.0.id, Arc::as_ptr(&self.0)).cmp(&(other.0.id, Arc::as_ptr(&other.0)))
    }
}

/// The database's live keyspaces.
#[derive(Default)]
pub(super) struct Keyspaces {
    registry: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    by_name: BTreeMap<String, Arc<KeyspaceEntry>>,
    /// The id the next keyspace gets (1 for the first; 0 is the catalog).
    next_id: u32,
}

/// What a write holds while it is applied: each keyspace it writes to, not dropped.
pub(super) struct HeldKeyspaces {
    entries: Vec<Arc<KeyspaceEntry>>,
}

impl HeldKeyspaces {
    /// Shared locks on every held keyspace; an error if one was dropped meanwhile.
    pub(super) fn lock(&self) -> Result<Vec<RwLockReadGuard<'_, bool>>> {
        let guards: Vec<_> = self.entries.iter().map(|e| e.dropped.read()).collect();
        for (entry, dropped) in self.entries.iter().zip(&guards) {
            if **dropped {
                return Err(dropped_error(&entry.name));
            }
        }
        Ok(guards)
    }
}

fn dropped_error(name: &str) -> Error {
    Error::InvalidArgument(format!("keyspace {name:?} was dropped"))
}

impl Keyspaces {
    /// The keyspaces `refs` name, checked to be this database's live ones.
    pub(super) fn hold(&self, refs: &[KeyspaceRef]) -> Result<HeldKeyspaces> {
        if refs.is_empty() {
            // The registry's own writes (creating and dropping keyspaces) come here holding it.
            return Ok(HeldKeyspaces { entries: Vec::new() });
        }
        let registry = self.registry.lock();
        let mut entries = Vec::with_capacity(refs.len());
        for KeyspaceRef(entry) in refs {
            match registry.by_name.get(&entry.name) {
                Some(live) if Arc::ptr_eq(live, entry) => entries.push(Arc::clone(entry)),
                _ => return Err(dropped_error(&entry.name)),
            }
        }
        Ok(HeldKeyspaces { entries })
    }

    /// Reads the catalog at open and makes sure the partition map separates every keyspace.
    pub(super) fn load(&self, db: &Db) -> Result<()> {
        let mut registry = self.registry.lock();
        let catalog = prefix(0);
        let opts =
            ReadOptions { lower_bound: Some(catalog.clone()), upper_bound: Some(prefix(1)), ..ReadOptions::default() };
        let mut cursor = db.inner.cursor(opts)?;
        cursor.seek_to_first()?;
        while cursor.valid() {
            let key = cursor.key();
            let id = decode_id(key, cursor.value())?;
            match key.get(catalog.len()) {
                Some(&NAME_KIND) => {
                    let name = std::str::from_utf8(&key[catalog.len() + 1..])
                        .map_err(|_| Error::corruption("keyspace catalog", 0, "a keyspace name is not UTF-8"))?;
                    let entry = KeyspaceEntry { id, name: name.to_owned(), dropped: RwLock::new(false) };
                    registry.by_name.insert(name.to_owned(), Arc::new(entry));
                }
                Some(&COUNTER_KIND) => registry.next_id = id,
                _ => return Err(Error::corruption("keyspace catalog", 0, "unknown catalog key")),
            }
            cursor.next()?;
        }
        if registry.by_name.values().any(|e| e.id == 0 || e.id >= registry.next_id) {
            return Err(Error::corruption("keyspace catalog", 0, "a keyspace id is not below the next id"));
        }
        // A read-only view leaves the partition map as the writer keeps it.
        if registry.next_id == 0 || db.inner.read_only {
            return Ok(());
        }
        let mut splits = vec![KEYSPACE_MARK.to_vec(), prefix(registry.next_id)];
        splits.extend(registry.by_name.values().map(|e| prefix(e.id)));
        db.inner.index.update_partition_splits(&splits, &[])
    }

    fn names(&self) -> Vec<String> {
        self.registry.lock().by_name.keys().cloned().collect()
    }
}

impl Db {
    /// The keyspace called `name`, created if there is none (durably before this returns).
    /// Names are non-empty UTF-8 of at most 256 bytes.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace<'_>> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(Error::InvalidArgument(format!(
                "a keyspace name must be 1 to {MAX_NAME_BYTES} bytes long, not {}",
                name.len()
            )));
        }
        let mut registry = self.keyspaces.registry.lock();
        if let Some(entry) = registry.by_name.get(name) {
            return Ok(Keyspace { db: self, entry: Arc::clone(entry) });
        }
        let id = registry.next_id.max(1);
        let next = id.checked_add(1).ok_or_else(|| Error::InvalidArgument("no keyspace ids left".into()))?;
        let mut batch = WriteBatch::new();
        batch.push(BatchOp::Put { key: catalog_key(NAME_KIND, name), value: encode_id(id) });
        batch.push(BatchOp::Put { key: catalog_key(COUNTER_KIND, ""), value: encode_id(next) });
        self.write(&WriteOptions { sync: true }, batch)?;
        let entry = Arc::new(KeyspaceEntry { id, name: name.to_owned(), dropped: RwLock::new(false) });
        registry.by_name.insert(name.to_owned(), Arc::clone(&entry));
        registry.next_id = next;
        drop(registry);
        self.inner.index.update_partition_splits(&[KEYSPACE_MARK.to_vec(), prefix(id), prefix(next)], &[])?;
        Ok(Keyspace { db: self, entry })
    }

    /// The keyspace called `name` if there is one (no write; for readers that must not create).
    pub fn existing_keyspace(&self, name: &str) -> Option<Keyspace<'_>> {
        let entry = self.keyspaces.registry.lock().by_name.get(name).cloned()?;
        Some(Keyspace { db: self, entry })
    }

    /// The names of the live keyspaces, in order.
    pub fn keyspace_names(&self) -> Vec<String> {
        self.keyspaces.names()
    }

    /// Drops the keyspace called `name` and everything in it, as one atomic write, durable
    /// before this returns (as a keyspace's creation is): a catalog
    /// delete and one range delete over the keyspace's prefix, whatever its size. Its tables are
    /// then dropped whole once no older snapshot remains, and its values become garbage for GC.
    /// Its handles return `InvalidArgument` from then on (even with a snapshot from before), and
    /// a keyspace created later under the same name starts empty. Returns whether it existed.
    pub fn drop_keyspace(&self, name: &str) -> Result<bool> {
        let mut registry = self.keyspaces.registry.lock();
        let Some(entry) = registry.by_name.get(name).cloned() else { return Ok(false) };
        // Waits for writes to the keyspace in flight; later ones find it gone.
        let mut dropped = entry.dropped.write();
        let mut batch = WriteBatch::new();
        batch.push(BatchOp::Delete { key: catalog_key(NAME_KIND, name) });
        batch.push(BatchOp::DeleteRange { start: prefix(entry.id), end: prefix(entry.id + 1) });
        self.write(&WriteOptions { sync: true }, batch)?;
        *dropped = true;
        registry.by_name.remove(name);
        drop(dropped);
        drop(registry);
        self.inner.index.update_partition_splits(&[], &[prefix(entry.id)])?;
        Ok(true)
    }
}

/// A handle to a keyspace of a [`Db`] (see [`Db::keyspace`]): the database's API over the
/// keyspace's keys alone. Cheap to clone; batches spanning keyspaces use
/// [`WriteBatch::put_in`] and its siblings.
#[derive(Clone)]
pub struct Keyspace<'db> {
    db: &'db Db,
    entry: Arc<KeyspaceEntry>,
}

impl std::fmt::Debug for Keyspace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace").field("name", &self.entry.name).field("id", &self.entry.id).finish()
    }
}

impl<'db> Keyspace<'db> {
    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// The keyspace's id. Ids are never reused, so it tells this keyspace from one created
    /// later under the same name (for bindings that hold a keyspace by name).
    pub fn id(&self) -> u32 {
        self.entry.id
    }

    /// The database the keyspace belongs to.
    pub fn db(&self) -> &'db Db {
        self.db
    }

    pub(crate) fn stored_key(&self, key: &[u8]) -> Vec<u8> {
        let mut out = prefix(self.entry.id);
        out.extend_from_slice(key);
        out
    }

    pub(crate) fn reference(&self) -> KeyspaceRef {
        KeyspaceRef(Arc::clone(&self.entry))
    }

    fn check_live(&self) -> Result<()> {
        match *self.entry.dropped.read() {
            true => Err(dropped_error(&self.entry.name)),
            false => Ok(()),
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value);
        self.db.write_put(opts, batch)
    }

    /// Removes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Removes `key` with write options.
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.db.write(opts, batch)
    }

    /// Removes every key of the keyspace in `[start, end)`, as [`Db::delete_range`] does.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start, end);
        self.db.write(&WriteOptions::default(), batch)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` with read options (a snapshot of the database, cache filling).
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let latency = &self.db.inner.counters.latency;
        let _timer = latency.start(&latency.get);
        self.check_live()?;
        self.db.submit_stored_get(opts, &self.stored_key(key.as_ref())).wait()
    }

    /// The values of several keys of the keyspace, as [`Db::multi_get`] reads them (one
    /// snapshot, the values not in memory read concurrently).
    pub fn multi_get<K: AsRef<[u8]>>(&self, opts: &ReadOptions, keys: &[K]) -> super::MultiGetResult {
        self.check_live()?;
        let stored: Vec<Vec<u8>> = keys.iter().map(|k| self.stored_key(k.as_ref())).collect();
        let stored: Vec<&[u8]> = stored.iter().map(Vec::as_slice).collect();
        self.db.multi_get_stored(opts, &stored)
    }

    /// A cursor over the keyspace, unpositioned: call a seek first. Keys are shown (and sought)
    /// without the keyspace's prefix; `opts`' bounds are keys of the keyspace.
    pub fn iter(&self, mut opts: ReadOptions) -> Result<DbIterator> {
        self.check_live()?;
        let id = self.entry.id;
        opts.lower_bound = Some(self.stored_key(opts.lower_bound.as_deref().unwrap_or_default()));
        opts.upper_bound = Some(match &opts.upper_bound {
            Some(upper) => self.stored_key(upper),
            None => prefix(id + 1),
        });
        Ok(self.db.inner.cursor(opts)?.with_key_prefix(prefix(id)))
    }

    /// The keyspace's entries in `range`, in key order, as an owning iterator.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeIter> {
        self.range_opt(ReadOptions::default(), range)
    }

    /// Like [`Keyspace::range`] with read options.
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, opts: ReadOptions, range: R) -> Result<RangeIter> {
        RangeIter::over(opts, range, |opts| self.iter(opts))
    }
}
