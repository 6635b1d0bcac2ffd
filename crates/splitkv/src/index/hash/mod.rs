//! The persistent hash index of the SSHKV mode: every key's newest version in a hash table on a
//! memory-mapped file standing in for persistent memory ([`table`]), values in the value log.
//!
//! Writes land first in `recent`, an in-memory map of each key's newest version whose log record
//! may not be durable yet. A checkpoint (when `recent` fills, or on `flush`) makes the log durable,
//! applies `recent` to the table in one crash-safe batch, then records the log head in the
//! catalog, so the table never points at a record a power loss could take away, and recovery
//! replays the log from that head (rewriting any slot a crash tore). This is SSHKV's "value in
//! memory, then in the log" state, kept off the persistent table.
//!
//! Snapshots: each log record written in this mode carries its predecessor's pointer (see
//! [`Index::predecessor`]), so a read at an older sequence number walks back from the newest
//! version through the log. Deletes leave a tombstone slot while an older snapshot may walk the
//! chain, removed at a later checkpoint. GC keeps what such a walk needs: it relocates only
//! current records (a relocated record's predecessor is its old copy) and releases a segment
//! only once no reader older than the relocation remains; a walk that meets a released or
//! punched record stops there, which only a reader that cannot need it can reach.
//!
//! Ordered scans collect every key and sort them (`iter`): O(n log n) per iterator, documented in
//! `docs/design.md`. Thread-safety: one lock over the table and `recent`; readers share it,
//! `apply` takes it briefly, checkpoints hold it while they update the table.

pub mod slot;
pub mod table;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::Level;

use self::slot::{key_hash, SlotPayload, SlotState};
use self::table::{Table, TableOp};
use super::{Index, IndexEntry, IndexParts, IndexRecord, IndexValue, LiveCount, LogLink, ReadAt};
use crate::error::{Error, Result};
use crate::filenames::{hash_table_file, segment_file, temp_file};
use crate::fs::FileSystem;
use crate::info_log::{log_event, InfoLog};
use crate::iter::vec::VecIterator;
use crate::iter::InternalIterator;
use crate::snapshot::SnapshotList;
use crate::stats::{HashTableStats, Stats};
use crate::types::{internal_key, LogPosition, SegmentId, SequenceNumber, ValueKind, ValuePointer};
use crate::version::{Catalog, VersionEdit};
use crate::vlog::{RecordKind, ReplayedRecord};

/// Memory charged to `recent` per key beyond its bytes (the version and the map's overhead).
const RECENT_KEY_OVERHEAD: usize = 64;

/// Segments the log may run ahead of the recorded head before a checkpoint.
const MAX_LAG_SEGMENTS: u64 = 8;

/// The smallest table created.
const MIN_BUCKETS: u64 = 16;

/// A key's newest version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    seq: SequenceNumber,
    pointer: ValuePointer,
    deleted: bool,
}

impl Version {
    fn from_payload(p: &SlotPayload) -> Version {
        Version { seq: p.seq, pointer: p.pointer, deleted: p.state == SlotState::Tombstone }
    }
}

struct State {
    table: Table,
    /// Newest version of each key written since the last checkpoint.
    recent: HashMap<Vec<u8>, Version>,
    /// Record bytes of versions superseded within `recent`, per segment.
    recent_garbage: BTreeMap<SegmentId, u64>,
    /// Approximate memory `recent` holds.
    recent_bytes: usize,
}

/// The persistent hash index.
pub struct HashIndex {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    catalog: Arc<Catalog>,
    log: Arc<dyn LogLink>,
    snapshots: Arc<SnapshotList>,
    last_sequence: Arc<AtomicU64>,
    state: RwLock<State>,
    /// `recent` is applied to the table once it holds this many bytes (`write_buffer_size`), or
    /// a quarter of the table's size if that is more: it bounds the memory of unapplied writes,
    /// the log tail replayed at open, and how long a checkpoint holds readers; and since a
    /// checkpoint's fences write whole pages of the table, applying more keys at once writes
    /// fewer pages per key.
    checkpoint_bytes: usize,
    /// Why the table can no longer be written (a failed fence or growth), if it cannot.
    failed: Mutex<Option<String>>,
    checkpoints: AtomicU64,
    growths: AtomicU64,
    info_log: Arc<InfoLog>,
}

impl HashIndex {
    /// Opens the table of the database in `parts.dir`, creating it for a new database.
    pub fn open(parts: IndexParts, capacity: u64) -> Result<HashIndex> {
        let fs = Arc::clone(&parts.options.fs);
        let path = hash_table_file(&parts.dir);
        let table = if parts.read_only {
            // A private copy: this process must not write the file, and a mapping of it would
            // show another process's stores as they happen.
            if !fs.exists(&path) {
                return Err(Error::InvalidArgument(format!(
                    "{} holds no hash table ({} is missing)",
                    parts.dir.display(),
                    path.display()
                )));
            }
            Table::open_copy(&path, &fs.read_all(&path)?)?
        } else if fs.exists(&path) {
            Table::open(fs.as_ref(), &path)?
        } else if parts.catalog.log_head() == LogPosition::default() && parts.catalog.lock().live_files().is_empty() {
            let table = Table::create(fs.as_ref(), &path, capacity.max(MIN_BUCKETS))?;
            fs.sync_dir(&parts.dir)?;
            table
        } else {
            return Err(Error::InvalidArgument(format!(
                "{} holds a database without a hash table (created with the LSM index, or its {} is lost)",
                parts.dir.display(),
                path.display()
            )));
        };
        Ok(HashIndex {
            fs,
            dir: parts.dir,
            catalog: parts.catalog,
            log: parts.log,
            snapshots: parts.snapshots,
            last_sequence: parts.last_sequence,
            state: RwLock::new(State {
                table,
                recent: HashMap::new(),
                recent_garbage: BTreeMap::new(),
                recent_bytes: 0,
            }),
            checkpoint_bytes: parts.options.write_buffer_size,
            failed: Mutex::new(None),
            checkpoints: AtomicU64::new(0),
            growths: AtomicU64::new(0),
            info_log: parts.info_log,
        })
    }

    fn check_failed(&self) -> Result<()> {
        match &*self.failed.lock() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Reads the log record of an older version, or `None` if GC has released it: its segment
    /// is gone, or it lies in a range GC recorded as dead and has punched (a range recorded but
    /// not yet punched still reads). Only a reader that cannot need such a record reaches it.
    fn read_older(&self, ptr: &ValuePointer) -> Result<Option<ReplayedRecord>> {
        if !self.log.segments().iter().any(|s| s.id == ptr.segment) {
            return Ok(None);
        }
        match self.log.read_record(ptr) {
            Ok(record) => Ok(Some(record)),
            Err(e) => {
                let dead = self
                    .catalog
                    .segment(ptr.segment)
                    .is_some_and(|meta| meta.skipped.iter().any(|&(start, end)| ptr.offset < end && ptr.end() > start));
                if dead {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Confirms that the record at `payload` holds `key` (for long keys).
    fn record_holds(&self, payload: &SlotPayload, key: &[u8]) -> Result<bool> {
        Ok(self.log.read_record(&payload.pointer)?.key == key)
    }

    /// [`HashIndex::record_holds`] for a slot about to be replaced by a checkpoint. A slot whose
    /// record GC has released is stale: GC relocates a key's current record (into `recent`)
    /// before it releases the old one, and the table learns of the move only at the next
    /// checkpoint, this one. Its key matched `key` by prefix and hash, so it is `key`'s old slot.
    fn stale_or_holds(&self, payload: &SlotPayload, key: &[u8]) -> Result<bool> {
        Ok(self.read_older(&payload.pointer)?.is_none_or(|record| record.key == key))
    }

    /// The newest version of `key`, from `recent` or the table.
    fn newest(&self, state: &State, key: &[u8]) -> Result<Option<Version>> {
        if let Some(v) = state.recent.get(key) {
            return Ok(Some(*v));
        }
        let found = state.table.find(key, key_hash(key), &mut |key, p| self.record_holds(p, key))?;
        match found {
            None => Ok(None),
            Some(f) if !f.slot.payload_intact => {
                Err(state.table.slot_error(f.index, "torn slot payload that no replayed write repaired"))
            }
            Some(f) => Ok(Some(Version::from_payload(&f.slot.payload))),
        }
    }

    /// The version of a key visible at `seq`, walking back from its newest version `newest`
    /// through the predecessor pointers of its log records.
    fn visible_at(&self, key: &[u8], newest: Version, seq: SequenceNumber) -> Result<Option<Version>> {
        let mut version = newest;
        // The record of `version`, once read.
        let mut record = None;
        loop {
            if version.seq <= seq {
                return Ok(Some(version));
            }
            let current = match record.take() {
                Some(current) => current,
                None => match self.read_older(&version.pointer)? {
                    Some(current) => current,
                    None => return Ok(None),
                },
            };
            if current.key != key {
                return Err(Error::corruption(
                    segment_file(&self.dir, version.pointer.segment),
                    version.pointer.offset,
                    "version chain leads to a record of another key",
                ));
            }
            // The log refuses a predecessor that is not older than its record: walks end.
            let Some(prev) = current.prev else { return Ok(None) };
            let Some(older) = self.read_older(&prev)? else { return Ok(None) };
            version = Version { seq: older.seq, pointer: prev, deleted: older.kind == RecordKind::Delete };
            record = Some(older);
        }
    }

    /// Whether `make_room(force)` checkpoints now.
    fn checkpoint_due(&self, force: bool) -> bool {
        let (keys, bytes, torn, table_bytes) = {
            let state = self.state.read();
            (state.recent.len(), state.recent_bytes, state.table.torn_slots(), state.table.stats().file_bytes as usize)
        };
        bytes >= self.checkpoint_bytes.max(table_bytes / 4) || torn > 0 || {
            let (head, recorded) = (self.log.head(), self.catalog.log_head());
            // A long log tail slows reopening and keeps GC off every segment after the recorded
            // head: checkpoint at least once per few segments written.
            let lagging = keys > 0 && head.segment.0 >= recorded.segment.0 + MAX_LAG_SEGMENTS;
            // Forced with nothing to apply, a checkpoint still moves the recorded head past a
            // sealed segment, so that GC may clean it.
            let forced = force && (keys > 0 || recorded != head);
            lagging || forced
        }
    }

    /// Makes the log durable, applies `recent` to the table, and records the new log head.
    fn checkpoint(&self) -> Result<()> {
        self.check_failed()?;
        let started = std::time::Instant::now();
        let keys;
        // No record is appended concurrently (the write leader calls `make_room`): everything
        // in `recent` lies before this head.
        let head = self.log.head();
        self.log.sync()?;
        let oldest_reader = self.snapshots.oldest();
        let needs_older = |seq: SequenceNumber| oldest_reader.is_some_and(|s| s < seq);
        let mut garbage: BTreeMap<SegmentId, u64> = BTreeMap::new();
        let mut charge = |ptr: &ValuePointer| *garbage.entry(ptr.segment).or_default() += u64::from(ptr.len);
        let last_applied;
        {
            let mut state = self.state.write();
            let state = &mut *state;
            let inserts = state.recent.values().filter(|v| !v.deleted || needs_older(v.seq)).count() as u64;
            if state.table.needs_growth(inserts) {
                self.grow(state, inserts)?;
            }
            let mut ops = Vec::with_capacity(state.recent.len());
            for (key, v) in &state.recent {
                let set = match (v.deleted, needs_older(v.seq)) {
                    (false, _) => Some(SlotState::Value),
                    (true, true) => Some(SlotState::Tombstone),
                    (true, false) => None,
                };
                let set = set.map(|state| SlotPayload { state, seq: v.seq, pointer: v.pointer });
                ops.push(TableOp { key, hash: key_hash(key), set });
            }
            let applied = state.table.apply(&ops, &mut |key, p| self.stale_or_holds(p, key));
            let replaced = match applied {
                Ok(replaced) => replaced,
                Err(e) => return Err(self.fail(e)),
            };
            for (op, old) in ops.iter().zip(&replaced) {
                if let Some(old) = old {
                    charge(&old.pointer);
                }
                if op.set.is_none_or(|p| p.state == SlotState::Tombstone) {
                    // GC never keeps a delete's record: it is garbage once the table has the delete.
                    charge(&state.recent[op.key].pointer);
                }
            }
            let horizon = oldest_reader.unwrap_or(SequenceNumber(self.last_sequence.load(Ordering::Acquire)));
            if let Err(e) = state.table.remove_tombstones(horizon) {
                return Err(self.fail(e));
            }
            for (segment, bytes) in std::mem::take(&mut state.recent_garbage) {
                *garbage.entry(segment).or_default() += bytes;
            }
            last_applied = state.recent.values().map(|v| v.seq).max();
            keys = state.recent.len();
            state.recent.clear();
            state.recent_bytes = 0;
        }
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        let segments = self.log.segments();
        let garbage_bytes: u64 = garbage.values().sum();
        self.catalog.record_with(|set| VersionEdit {
            log_head: Some(head),
            last_sequence: last_applied,
            segment_garbage: garbage.into_iter().collect(),
            added_segments: segments.iter().map(|s| s.id).filter(|id| set.is_unrecorded_segment(*id)).collect(),
            ..VersionEdit::default()
        })?;
        log_event!(
            self.info_log,
            Level::INFO,
            keys = keys as u64,
            garbage_bytes,
            log_head = %format_args!("{}:{}", head.segment.0, head.offset),
            micros = started.elapsed().as_micros() as u64,
            "checkpoint finished"
        );
        Ok(())
    }

    /// Remembers that the table could not be written; every later write fails with `e`'s reason.
    fn fail(&self, e: Error) -> Error {
        let mut failed = self.failed.lock();
        if failed.is_none() {
            log_event!(self.info_log, Level::ERROR, error = %e, "hash table failed: writes stop until reopen");
            *failed = Some(e.to_string());
        }
        e
    }

    /// Rehashes the table into one with room for `inserts` more keys, crash-safely: the new
    /// table is written and made durable under a temporary name, then renamed over the old.
    fn grow(&self, state: &mut State, inserts: u64) -> Result<()> {
        let entries = state.table.stats().entries;
        // Room for half as many keys again before the next growth: a load of two thirds leaves
        // about a quarter of the keys in collision chains.
        let wanted = entries.saturating_add(inserts).saturating_mul(3) / 2;
        let mut buckets = state.table.buckets().saturating_mul(2);
        while buckets < wanted {
            buckets = buckets.saturating_mul(2);
        }
        let path = hash_table_file(&self.dir);
        let tmp = temp_file(&self.dir, "HASHINDEX");
        let grown = (|| {
            let mut grown = state.table.rehash_into(self.fs.as_ref(), &tmp, buckets)?;
            self.fs.rename(&tmp, &path)?;
            self.fs.sync_dir(&self.dir)?;
            grown.renamed(&path);
            Ok(grown)
        })();
        match grown {
            Ok(grown) => {
                state.table = grown;
                self.growths.fetch_add(1, Ordering::Relaxed);
                log_event!(self.info_log, Level::INFO, entries, buckets, "hash table grew");
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Every key with its newest version, unsorted.
    fn all_newest(&self) -> Result<Vec<(Vec<u8>, Version)>> {
        let state = self.state.read();
        let mut out = Vec::new();
        self.for_each_newest(&state, &mut |key, v| {
            out.push((key.to_vec(), *v));
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `visit` with every key's newest version: those in `recent`, then the table's that
    /// `recent` does not shadow (a long key is read from its log record to tell).
    fn for_each_newest(&self, state: &State, visit: &mut dyn FnMut(&[u8], &Version) -> Result<()>) -> Result<()> {
        for (key, v) in &state.recent {
            visit(key, v)?;
        }
        state.table.for_each(&mut |index, slot| {
            if !slot.payload_intact {
                return Err(state.table.slot_error(index, "torn slot payload"));
            }
            let long_key;
            let key = match slot.key.inline() {
                Some(key) => key,
                None => match self.read_older(&slot.payload.pointer)? {
                    Some(record) => {
                        long_key = record.key;
                        &long_key
                    }
                    // Released by GC: a stale slot that `recent` supersedes (see `stale_or_holds`).
                    None => return Ok(()),
                },
            };
            if state.recent.contains_key(key) {
                return Ok(());
            }
            visit(key, &Version::from_payload(&slot.payload))
        })
    }

    /// Figures about the table.
    pub fn table_stats(&self) -> HashTableStats {
        let state = self.state.read();
        let t = state.table.stats();
        HashTableStats {
            buckets: t.buckets,
            entries: t.entries,
            tombstones: t.tombstones,
            collision_used: t.collision_used,
            file_bytes: t.file_bytes,
            recent_keys: state.recent.len() as u64,
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            growths: self.growths.load(Ordering::Relaxed),
        }
    }

    /// Checks the table's chains and soft state (see [`Table::check`]).
    pub fn check(&self) -> Result<()> {
        self.state.read().table.check()
    }
}

impl Index for HashIndex {
    fn apply(&self, records: &[IndexRecord<'_>]) {
        let mut state = self.state.write();
        let state = &mut *state;
        for r in records {
            // The database never hands this index a range delete (see `supports_range_deletes`).
            debug_assert!(!matches!(r.entry, IndexEntry::RangeDeletion { .. }));
            let version =
                Version { seq: r.seq, pointer: r.log_pointer, deleted: matches!(r.entry, IndexEntry::Deletion) };
            match state.recent.insert(r.user_key.to_vec(), version) {
                Some(old) => {
                    *state.recent_garbage.entry(old.pointer.segment).or_default() += u64::from(old.pointer.len)
                }
                None => state.recent_bytes += r.user_key.len() + RECENT_KEY_OVERHEAD,
            }
        }
    }

    fn predecessor(&self, user_key: &[u8]) -> Result<Option<ValuePointer>> {
        let state = self.state.read();
        Ok(self.newest(&state, user_key)?.map(|v| v.pointer))
    }

    fn room_due(&self) -> bool {
        self.checkpoint_due(false) || self.failed.lock().is_some()
    }

    fn make_room(&self, force: bool) -> Result<()> {
        self.check_failed()?;
        if self.checkpoint_due(force) {
            self.checkpoint()?;
            let state = self.state.read();
            if state.table.torn_slots() > 0 {
                // Every slot a crash can tear belongs to a replayed write, which rewrote it.
                return Err(Error::corruption(
                    state.table.path(),
                    0,
                    format!(
                        "{} hash slots have damaged payloads that log replay did not rewrite",
                        state.table.torn_slots()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn wait_for_flush(&self) -> Result<()> {
        self.check_failed()
    }

    fn get(&self, user_key: &[u8], at: ReadAt<'_>, _fill_cache: bool) -> Result<Option<IndexValue>> {
        // Versions are chained through the log, which GC's barrier keeps for the read: any
        // sequence number finds its version by walking back from the newest.
        let seq = at.resolve();
        let newest = {
            let state = self.state.read();
            self.newest(&state, user_key)?
        };
        let Some(newest) = newest else { return Ok(None) };
        Ok(match self.visible_at(user_key, newest, seq)? {
            Some(v) if !v.deleted => Some(IndexValue::Pointer(v.pointer)),
            _ => None,
        })
    }

    fn iter(&self, seq: SequenceNumber, _fill_cache: bool) -> Result<Box<dyn InternalIterator>> {
        let mut entries = Vec::new();
        for (key, newest) in self.all_newest()? {
            if let Some(v) = self.visible_at(&key, newest, seq)? {
                let (kind, value) = if v.deleted {
                    (ValueKind::Deletion, Vec::new())
                } else {
                    (ValueKind::Pointer, v.pointer.encode())
                };
                entries.push((internal_key(&key, v.seq, kind), value));
            }
        }
        Ok(Box::new(VecIterator::new(entries)))
    }

    fn compact_range(&self, _begin: Option<&[u8]>, _end: Option<&[u8]>) -> Result<()> {
        // A hash table has no levels to merge; `Db::compact_range` has already checkpointed.
        self.check_failed()
    }

    fn fill_stats(&self, stats: &mut Stats) {
        stats.hash_table = Some(self.table_stats());
    }

    fn property(&self, name: &str) -> Option<String> {
        let t = self.table_stats();
        match name {
            "splitkv.hash-entries" => Some(t.entries.to_string()),
            "splitkv.hash-buckets" => Some(t.buckets.to_string()),
            "splitkv.hash-collision-slots-used" => Some(t.collision_used.to_string()),
            "splitkv.hash-table-bytes" => Some(t.file_bytes.to_string()),
            "splitkv.estimate-num-keys" => Some((t.entries - t.tombstones + t.recent_keys).to_string()),
            _ => None,
        }
    }

    fn survey_live(
        &self,
        _horizon: SequenceNumber,
        applied_before: SegmentId,
        record: &mut dyn FnMut(LiveCount) -> Result<()>,
    ) -> Result<()> {
        // Only newest versions count as live: a version an old snapshot still reads is counted
        // as garbage, and GC, which relocates only current records, keeps its segment until
        // that snapshot is gone. The read lock keeps checkpoints from charging garbage meanwhile.
        let state = self.state.read();
        let mut count = LiveCount {
            surveyed: self.log.segments().iter().map(|s| s.id).filter(|id| *id < applied_before).collect(),
            ..LiveCount::default()
        };
        self.for_each_newest(&state, &mut |_, v| {
            if v.deleted {
                return Ok(());
            }
            count.indexed_live += u64::from(v.pointer.len);
            if v.pointer.segment < applied_before {
                *count.live.entry(v.pointer.segment).or_default() += u64::from(v.pointer.len);
            }
            Ok(())
        })?;
        record(count)
    }

    fn charges_garbage_exactly(&self) -> bool {
        true
    }

    fn shutdown(&self) {}

    fn write_checkpoint_state(&self, fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
        let state = self.state.read();
        // The mapping's current bytes: the state the recorded log head was written after (the
        // caller holds the write path, so no index checkpoint is half done).
        let bytes = state.table.bytes();
        let mut file = fs.create(&hash_table_file(dir))?;
        file.append(bytes)?;
        file.sync()?;
        Ok(bytes.len() as u64)
    }
}
