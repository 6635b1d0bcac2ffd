//! [`Db`]: the public handle — open and recovery, the write path, reads and iterators.
//!
//! Write path: each [`WriteBatch`] joins a queue; the writer at the front becomes the leader,
//! takes a group of queued batches, assigns consecutive sequence numbers, appends them to the
//! value log (one atomic run of records per batch), syncs once if any writer asked for it,
//! applies them to the index, publishes the last sequence number and wakes the group. This is
//! LevelDB's group commit, with the value log in the role of the write-ahead log.
//!
//! Read path: the index maps a key to an inline value or a [`ValuePointer`]; pointers are
//! resolved by one validated read from the value log. Iterators that move sequentially read
//! ahead: they walk the index in windows and fetch the windows' values in parallel on a pool
//! shared by all iterators (`vlog::prefetch`), coalescing values adjacent in the log.
//!
//! Recovery: replay the MANIFEST (the SSTables and the value-log head of the last flush), then
//! replay the value log from that head into a fresh memtable. A failed value-log or MANIFEST
//! write poisons the write path; reads keep working.
//!
//! Thread-safety: `Db` is `Send + Sync`; share it with `Arc<Db>`. Iterators own what they read.

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, Range, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::filenames::{current_file, lock_file, parse_file_name, segment_file, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::index::lsm::{LsmIndex, LsmParts};
use crate::index::{Index, IndexRecord, IndexValue};
use crate::iter::db_iter::DbIter;
use crate::iter::InternalIterator;
use crate::memtable::Memtable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::stats::{Counters, Stats};
use crate::types::EscapedBytes;
use crate::types::{SegmentId, SequenceNumber, ValueKind, ValuePointer};
use crate::version::VersionSet;
use crate::vlog::gc::{policy_for, GarbageCollector, GcHost, GcOutcome, GcSettings, SegmentStats};
use crate::vlog::prefetch::{plan_reads, PrefetchPool, Task, ValueRequest};
use crate::vlog::{RecordKind, RecordRef, ReplayedRecord, ValueLog, VlogOptions};

/// Most bytes a write leader gathers into one group; keeps a small write's latency bounded when
/// a large one is queued behind it.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A queued write.
struct PendingWrite {
    batch: WriteBatch,
    sync: bool,
    /// Freeze the memtable even if it is not full (used by `flush`).
    force_flush: bool,
    /// For GC relocations: the pointer each put replaces; a put is skipped if its key no
    /// longer maps to that pointer when the leader writes it.
    relocate_from: Option<Vec<ValuePointer>>,
    /// Set once the write is done (by the leader that wrote it).
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

struct DbInner {
    options: Options,
    dir: PathBuf,
    vlog: Arc<ValueLog>,
    index: Arc<dyn Index>,
    snapshots: Arc<SnapshotList>,
    last_sequence: Arc<AtomicU64>,
    counters: Arc<Counters>,
    /// Value reads issued ahead of sequential iterators.
    prefetch: Arc<PrefetchPool>,
    writers: Mutex<VecDeque<Arc<PendingWrite>>>,
    poisoned: Mutex<Option<String>>,
    gc: GarbageCollector,
    /// Point reads hold it shared between reading a pointer and reading its value; GC takes it
    /// exclusively before deleting a segment, so no in-flight read loses its segment.
    gc_barrier: RwLock<()>,
    gc_stop: AtomicBool,
    gc_wake: (Mutex<()>, Condvar),
    _lock: Box<dyn FileLock>,
}

impl PendingWrite {
    fn new(batch: WriteBatch, sync: bool, force_flush: bool, relocate_from: Option<Vec<ValuePointer>>) -> Self {
        PendingWrite { batch, sync, force_flush, relocate_from, result: Mutex::new(None), cv: Condvar::new() }
    }
}

/// An open database.
pub struct Db {
    inner: Arc<DbInner>,
    gc_thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.fs);
        if options.create_if_missing {
            fs.create_dir_all(&dir)?;
        }
        if !fs.exists(&dir) {
            return Err(Error::InvalidArgument(format!("{} does not exist", dir.display())));
        }
        let lock = fs.lock(&lock_file(&dir))?;
        let versions = if fs.exists(&current_file(&dir)) {
            if options.error_if_exists {
                return Err(Error::InvalidArgument(format!("{} already exists", dir.display())));
            }
            VersionSet::recover(Arc::clone(&fs), &dir, options.num_levels)?
        } else if options.create_if_missing {
            VersionSet::create(Arc::clone(&fs), &dir, options.num_levels)?
        } else {
            return Err(Error::InvalidArgument(format!("{} has no database", dir.display())));
        };

        let vlog = Arc::new(ValueLog::open(
            Arc::clone(&fs),
            &dir,
            VlogOptions { segment_size: options.segment_size, buffer_size: options.vlog_buffer_size },
        )?);
        let log_head = versions.log_head();
        // A segment before the log head that the MANIFEST no longer lists was released by GC
        // just before a crash: its removal was recorded, only the file deletion was lost.
        for seg in vlog.segments() {
            if seg.id < log_head.segment && !versions.segments().contains_key(&seg.id) {
                vlog.remove_segment(seg.id)?;
            }
        }
        let newest_known = versions.segments().keys().next_back().copied().unwrap_or_default();
        vlog.reserve_ids_below(SegmentId(newest_known.0.max(log_head.segment.0) + 1));
        let mem = Arc::new(Memtable::new(log_head));
        let mut max_sequence = versions.last_sequence();
        let mut replayed_any = false;
        vlog.replay(log_head, &mut |batch: &[ReplayedRecord]| {
            for rec in batch {
                let kind = match rec.kind {
                    RecordKind::Delete => ValueKind::Deletion,
                    RecordKind::Put if rec.value.len() >= options.value_threshold => ValueKind::Pointer,
                    RecordKind::Put => ValueKind::Inline,
                };
                let value = match kind {
                    ValueKind::Deletion => Bytes::new(),
                    ValueKind::Inline => Bytes::copy_from_slice(&rec.value),
                    ValueKind::Pointer => Bytes::from(rec.pointer.encode()),
                };
                if kind != ValueKind::Pointer {
                    mem.note_log_garbage(rec.pointer.segment, u64::from(rec.pointer.len));
                }
                mem.insert(&rec.key, rec.seq, kind, value);
                max_sequence = max_sequence.max(rec.seq);
                replayed_any = true;
            }
            Ok(())
        })?;
        if replayed_any {
            // The replayed records may exist only in the page cache (a process crash); make them
            // durable before tables that point at them can be written.
            for seg in vlog.segments() {
                if seg.id >= log_head.segment {
                    fs.open_append(&segment_file(&dir, seg.id))?.sync()?;
                }
            }
        }
        remove_temp_files(fs.as_ref(), &dir);

        let last_sequence = Arc::new(AtomicU64::new(max_sequence.0));
        let snapshots = Arc::new(SnapshotList::default());
        let counters = Arc::new(Counters::default());
        let index = LsmIndex::open(LsmParts {
            options: options.clone(),
            dir: dir.clone(),
            versions,
            mem,
            vlog: Arc::clone(&vlog),
            snapshots: Arc::clone(&snapshots),
            last_sequence: Arc::clone(&last_sequence),
            counters: Arc::clone(&counters),
        })?;
        // A memtable rebuilt from a long log tail can exceed the write buffer; freeze it now so
        // reads do not search one oversized skiplist until the next write arrives.
        index.make_room(false)?;
        let gc = GarbageCollector::new(
            policy_for(options.gc_policy),
            GcSettings {
                garbage_ratio: options.gc_garbage_ratio,
                space_budget: options.gc_space_budget,
                space_trigger: options.gc_space_trigger,
                punch_holes: options.gc_punch_holes,
                logical_space_factor: options.gc_logical_space_factor,
            },
        );
        let background_gc = options.background_gc;
        let prefetch_threads = options.prefetch_threads;
        let inner = Arc::new(DbInner {
            options,
            dir,
            vlog,
            index: Arc::new(index),
            snapshots,
            last_sequence,
            counters,
            prefetch: Arc::new(PrefetchPool::new(prefetch_threads)),
            writers: Mutex::new(VecDeque::new()),
            poisoned: Mutex::new(None),
            gc,
            gc_barrier: RwLock::new(()),
            gc_stop: AtomicBool::new(false),
            gc_wake: (Mutex::new(()), Condvar::new()),
            _lock: lock,
        });
        let gc_thread = if background_gc {
            let worker = Arc::clone(&inner);
            let handle = std::thread::Builder::new()
                .name("splitkv-gc".into())
                .spawn(move || worker.background_gc())
                .map_err(Error::Io)?;
            Some(handle)
        } else {
            None
        };
        Ok(Db { inner, gc_thread: Mutex::new(gc_thread) })
    }

    /// Deletes the database at `path` and everything splitkv owns in it.
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
        let dir = path.as_ref();
        let fs = &options.fs;
        if !fs.exists(dir) {
            return Ok(());
        }
        let lock_path = lock_file(dir);
        let lock = fs.lock(&lock_path)?;
        for name in fs.list(dir)? {
            if matches!(parse_file_name(&name), Some(kind) if kind != FileKind::Lock) {
                fs.remove(&dir.join(&name))?;
            }
        }
        drop(lock);
        let _ = fs.remove(&lock_path);
        // Leave the directory if it holds files that are not ours.
        let _ = fs.remove_dir(dir);
        Ok(())
    }

    /// Stops background work and writes buffered log records to the OS. Unsynced writes stay
    /// unsynced, as in LevelDB; use [`WriteOptions::sync`] for durability.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        self.inner.vlog.flush_buffer()
    }

    fn stop_background(&self) {
        self.inner.gc_stop.store(true, Ordering::Release);
        self.inner.gc_wake.1.notify_all();
        if let Some(handle) = self.gc_thread.lock().take() {
            let _ = handle.join();
        }
        self.inner.index.shutdown();
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(opts, batch)
    }

    /// Removes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Removes `key` with write options.
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(opts, batch)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() && !opts.sync {
            return Ok(());
        }
        self.inner.wait_for_log_space();
        self.inner.submit(PendingWrite::new(batch, opts.sync, false, None))
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` with read options (snapshot, cache filling).
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        let seq = self.inner.read_sequence(opts);
        Counters::add(&self.inner.counters.gets, 1);
        let _no_segment_release = self.inner.gc_barrier.read();
        match self.inner.index.get(key, seq, opts.fill_cache)? {
            None => Ok(None),
            Some(IndexValue::Inline(v)) => Ok(Some(v)),
            Some(IndexValue::Pointer(ptr)) => self.inner.read_pointer(&ptr, key).map(Some),
        }
    }

    /// The values of several keys, read at one sequence number.
    pub fn multi_get<K: AsRef<[u8]>>(&self, opts: &ReadOptions, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let pinned;
        let opts = if opts.snapshot.is_none() {
            pinned = ReadOptions { snapshot: Some(self.snapshot()), ..opts.clone() };
            &pinned
        } else {
            opts
        };
        keys.iter().map(|k| self.get_opt(opts, k)).collect()
    }

    /// A consistent read view as of now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire(SequenceNumber(self.inner.last_sequence.load(Ordering::Acquire)))
    }

    /// A cursor over the database, unpositioned: call a seek first.
    pub fn iter(&self, opts: ReadOptions) -> Result<DbIterator> {
        self.inner.cursor(opts)
    }

    /// The entries in `range`, in key order, as an owning iterator.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeIter> {
        self.range_opt(ReadOptions::default(), range)
    }

    /// Like [`Db::range`] with read options.
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, mut opts: ReadOptions, range: R) -> Result<RangeIter> {
        let start = match range.start_bound() {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match range.end_bound() {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        // Exclusive upper bounds go to the cursor, which then never reads past them.
        if let Bound::Excluded(k) = &end {
            opts.upper_bound = Some(k.clone());
        }
        if let Bound::Included(k) | Bound::Excluded(k) = &start {
            opts.lower_bound = Some(k.clone());
        }
        let cursor = self.inner.cursor(opts)?;
        Ok(RangeIter { cursor, start: Some(start), end, done: false })
    }

    /// Freezes the memtable and waits until it is written to an SSTable.
    pub fn flush(&self) -> Result<()> {
        self.inner.submit(PendingWrite::new(WriteBatch::new(), false, true, None))?;
        self.inner.index.wait_for_flush()
    }

    /// Compacts the keys in `[begin, end]` (`None` = unbounded) down through every level.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        self.inner.index.compact_range(begin, end)
    }

    /// Collects value-log garbage now: flushes the memtable, compacts every level so that the
    /// garbage statistics are exact, then cleans every segment holding garbage. Segments still
    /// readable by an open snapshot or iterator are released once it is dropped (by a later GC
    /// run).
    pub fn run_gc(&self) -> Result<GcOutcome> {
        self.compact_range(None, None)?;
        self.inner.gc.run_to_completion(self.inner.as_ref())
    }

    /// A point-in-time report: levels, value-log segments, write amplification, stalls.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        stats.fill_counters(&self.inner.counters);
        stats.vlog_bytes_written = self.inner.vlog.bytes_written();
        stats.last_sequence = self.inner.last_sequence.load(Ordering::Acquire);
        self.inner.index.fill_stats(&mut stats);
        let gc = self.inner.gc.totals();
        stats.gc_runs = gc.runs;
        stats.gc_bytes_read = gc.bytes_read;
        stats.gc_bytes_relocated = gc.bytes_relocated;
        stats.gc_bytes_punched = gc.bytes_punched;
        stats.gc_segments_released = gc.segments_released;
        stats.disk_bytes = self.inner.disk_bytes();
        stats
    }

    /// A named property: `splitkv.stats`, `splitkv.num-files-at-level<N>`, `splitkv.sstables`,
    /// `splitkv.total-sst-bytes`, `splitkv.memtable-bytes`, `splitkv.last-sequence`,
    /// `splitkv.vlog-bytes`, `splitkv.write-amplification`.
    pub fn property(&self, name: &str) -> Option<String> {
        match name {
            "splitkv.stats" => Some(self.stats().to_string()),
            "splitkv.last-sequence" => Some(self.inner.last_sequence.load(Ordering::Acquire).to_string()),
            "splitkv.vlog-bytes" => Some(self.stats().vlog_bytes().to_string()),
            "splitkv.write-amplification" => Some(format!("{:.3}", self.stats().write_amplification())),
            _ => self.inner.index.property(name),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop_background();
        let _ = self.inner.vlog.flush_buffer();
    }
}

fn remove_temp_files(fs: &dyn FileSystem, dir: &Path) {
    if let Ok(names) = fs.list(dir) {
        for name in names {
            if parse_file_name(&name) == Some(FileKind::Temp) {
                let _ = fs.remove(&dir.join(name));
            }
        }
    }
}

/// Copies an error for the other members of a failed write group.
fn share_error(e: &Error) -> Error {
    match e {
        Error::Poisoned(m) => Error::Poisoned(m.clone()),
        Error::Closed => Error::Closed,
        other => Error::Poisoned(other.to_string()),
    }
}

impl DbInner {
    fn read_sequence(&self, opts: &ReadOptions) -> SequenceNumber {
        match &opts.snapshot {
            Some(s) => s.sequence(),
            None => SequenceNumber(self.last_sequence.load(Ordering::Acquire)),
        }
    }

    fn read_pointer(&self, ptr: &ValuePointer, key: &[u8]) -> Result<Bytes> {
        Counters::add(&self.counters.vlog_reads, 1);
        self.vlog.read(ptr, key)
    }

    fn cursor(self: &Arc<Self>, opts: ReadOptions) -> Result<DbIterator> {
        // Every cursor holds a snapshot, so GC keeps the segments it may still read.
        let snapshot = match opts.snapshot {
            Some(s) => s,
            None => self.snapshots.acquire(SequenceNumber(self.last_sequence.load(Ordering::Acquire))),
        };
        let seq = snapshot.sequence();
        let inner = self.index.iter(opts.fill_cache)?;
        let cursor = DbIter::new(inner, seq, opts.lower_bound.clone(), opts.upper_bound.clone());
        Ok(DbIterator::new(Arc::clone(self), cursor, ReadOptions { snapshot: Some(snapshot), ..opts }))
    }

    fn check_poisoned(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Queues a write and either waits for a leader to do it or leads a group itself.
    fn submit(&self, write: PendingWrite) -> Result<()> {
        let me = Arc::new(write);
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        loop {
            if let Some(result) = me.result.lock().take() {
                return result;
            }
            if queue.front().is_some_and(|front| Arc::ptr_eq(front, &me)) {
                break;
            }
            me.cv.wait(&mut queue);
        }

        // Leader. Other writers keep queueing behind us while we work without the queue lock.
        let room = self.check_poisoned().and_then(|()| self.index.make_room(me.force_flush));
        let group: Vec<Arc<PendingWrite>> = if room.is_err() {
            vec![Arc::clone(&me)]
        } else {
            let mut bytes = 0;
            let mut group = Vec::new();
            for w in queue.iter() {
                // A group never waits for a sync it was not asked for; flush requests and GC
                // relocations lead their own groups.
                let alone = w.force_flush || w.relocate_from.is_some() || me.relocate_from.is_some();
                if !group.is_empty() && ((w.sync && !me.sync) || alone || bytes > MAX_GROUP_BYTES) {
                    break;
                }
                bytes += w.batch.payload_bytes();
                group.push(Arc::clone(w));
            }
            group
        };
        drop(queue);

        let result = room.and_then(|()| self.write_group(&group));
        let mut queue = self.writers.lock();
        for w in &group {
            let popped = queue.pop_front();
            debug_assert!(popped.is_some_and(|p| Arc::ptr_eq(&p, w)));
            if !Arc::ptr_eq(w, &me) {
                *w.result.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(share_error(e)),
                });
                w.cv.notify_one();
            }
        }
        if let Some(next) = queue.front() {
            next.cv.notify_one();
        }
        result
    }

    /// Appends a group to the value log, syncs if asked, applies it to the index and publishes it.
    fn write_group(&self, group: &[Arc<PendingWrite>]) -> Result<()> {
        let threshold = self.options.value_threshold;
        let mut seq = self.last_sequence.load(Ordering::Acquire);
        let mut index_records = Vec::new();
        let mut records = Vec::new();
        let mut sync = false;
        let mut user_bytes = 0u64;
        let outcome = (|| -> Result<()> {
            for w in group {
                sync |= w.sync;
                if w.batch.is_empty() {
                    continue;
                }
                records.clear();
                for (i, op) in w.batch.ops().iter().enumerate() {
                    if let Some(old) = &w.relocate_from {
                        // Relocation must never overwrite a newer user write.
                        if !self.is_current(op.key(), &old[i])? {
                            continue;
                        }
                    }
                    seq += 1;
                    let (kind, value) = match op {
                        BatchOp::Put { value, .. } => (RecordKind::Put, value.as_slice()),
                        BatchOp::Delete { .. } => (RecordKind::Delete, &[][..]),
                    };
                    records.push(RecordRef { seq: SequenceNumber(seq), kind, key: op.key(), value });
                }
                if records.is_empty() {
                    continue;
                }
                let pointers = self.vlog.append_batch(&records)?;
                if w.relocate_from.is_none() {
                    // GC's rewrites are the engine's writes, not the user's.
                    user_bytes += w.batch.payload_bytes() as u64;
                }
                for (rec, ptr) in records.iter().zip(pointers) {
                    let (kind, value) = match rec.kind {
                        RecordKind::Delete => (ValueKind::Deletion, Bytes::new()),
                        RecordKind::Put if rec.value.len() >= threshold => {
                            (ValueKind::Pointer, Bytes::from(ptr.encode()))
                        }
                        RecordKind::Put => (ValueKind::Inline, Bytes::copy_from_slice(rec.value)),
                    };
                    index_records.push(IndexRecord { user_key: rec.key, seq: rec.seq, kind, value, log_pointer: ptr });
                }
            }
            if sync {
                self.vlog.sync()?;
            }
            Ok(())
        })();
        if let Err(e) = outcome {
            // The log may hold part of the group; the on-disk state is unknown from here on.
            let reason = e.to_string();
            self.poisoned.lock().get_or_insert(reason);
            return Err(e);
        }
        self.index.apply(&index_records);
        Counters::add(&self.counters.user_bytes_written, user_bytes);
        self.last_sequence.store(seq, Ordering::Release);
        Ok(())
    }
}

/// Most value bytes one GC relocation batch carries: a victim's live records are rewritten in
/// batches of this size so that foreground writes interleave with them.
const RELOCATION_BATCH_BYTES: usize = 1 << 20;

impl DbInner {
    /// With a value-log space budget, holds a writer (before it joins the write queue, so GC's
    /// own relocations can pass) while the log is over budget and GC can still shrink it.
    fn wait_for_log_space(&self) {
        if self.options.gc_space_budget.is_none() || !self.options.background_gc {
            return;
        }
        let start = std::time::Instant::now();
        let mut waited = false;
        while !self.gc_stop.load(Ordering::Acquire) && self.gc.can_relieve_space(self) {
            waited = true;
            self.gc_wake.1.notify_all();
            std::thread::sleep(Duration::from_millis(1));
        }
        if waited {
            Counters::add(&self.counters.stall_gc_micros, start.elapsed().as_micros() as u64);
        }
    }

    /// Bytes the database's files occupy on the medium (holes excluded).
    fn disk_bytes(&self) -> u64 {
        let fs = self.options.fs.as_ref();
        let Ok(names) = fs.list(&self.dir) else { return 0 };
        names
            .iter()
            .filter(|n| parse_file_name(n).is_some())
            .filter_map(|n| fs.allocated_size(&self.dir.join(n)).ok())
            .sum()
    }

    /// The background GC loop: checks every 100 ms whether a run is due, and paces itself to
    /// `gc_rate_limit` bytes per second.
    fn background_gc(self: Arc<Self>) {
        while !self.gc_stop.load(Ordering::Acquire) {
            {
                let mut guard = self.gc_wake.0.lock();
                if self.gc_stop.load(Ordering::Acquire) {
                    break;
                }
                self.gc_wake.1.wait_for(&mut guard, Duration::from_millis(100));
            }
            if self.gc_stop.load(Ordering::Acquire) || self.poisoned.lock().is_some() {
                continue;
            }
            let run = self.gc.is_due(self.as_ref()).and_then(|due| {
                if due {
                    self.gc.run_once(self.as_ref(), false).map(Some)
                } else {
                    Ok(None)
                }
            });
            let over_budget = self.gc.over_space_trigger_hard(self.as_ref());
            match run {
                // Writers are waiting for space: no pacing.
                Ok(Some(_)) if over_budget => {}
                Ok(Some(outcome)) if self.options.gc_rate_limit > 0 => {
                    let secs = outcome.bytes_read as f64 / self.options.gc_rate_limit as f64;
                    let mut guard = self.gc_wake.0.lock();
                    if !self.gc_stop.load(Ordering::Acquire) {
                        self.gc_wake.1.wait_for(&mut guard, Duration::from_secs_f64(secs.min(10.0)));
                    }
                }
                Ok(_) => {}
                // A failed run leaves everything as it was; stop retrying a broken log.
                Err(_) => break,
            }
        }
    }
}

impl GcHost for DbInner {
    fn is_current(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool> {
        let seq = SequenceNumber(self.last_sequence.load(Ordering::Acquire));
        Ok(matches!(self.index.get(key, seq, false)?, Some(IndexValue::Pointer(p)) if p == *ptr))
    }

    fn eligible_segments(&self) -> Result<Vec<SegmentStats>> {
        let (head, garbage) = self.index.log_garbage();
        let active = self.vlog.head().segment;
        Ok(self
            .vlog
            .segments()
            .into_iter()
            .filter(|s| s.id < head.segment && s.id < active)
            .map(|s| SegmentStats {
                id: s.id,
                size: s.len,
                garbage_bytes: garbage.get(&s.id).copied().unwrap_or(0),
                age: active.0.saturating_sub(s.id.0),
            })
            .collect())
    }

    fn log_bytes(&self) -> u64 {
        self.vlog.segments().iter().map(|s| s.len).sum()
    }

    fn relocate(&self, records: Vec<ReplayedRecord>) -> Result<SequenceNumber> {
        let mut batch = WriteBatch::new();
        let mut old = Vec::new();
        for r in records {
            batch.put(&r.key, &r.value);
            old.push(r.pointer);
            if batch.payload_bytes() >= RELOCATION_BATCH_BYTES {
                self.submit(PendingWrite::new(
                    std::mem::take(&mut batch),
                    true,
                    false,
                    Some(std::mem::take(&mut old)),
                ))?;
            }
        }
        if !batch.is_empty() {
            self.submit(PendingWrite::new(batch, true, false, Some(old)))?;
        }
        Ok(SequenceNumber(self.last_sequence.load(Ordering::Acquire)))
    }

    fn no_reader_older_than(&self, seq: SequenceNumber) -> bool {
        self.snapshots.oldest().is_none_or(|oldest| oldest >= seq)
    }

    fn release_segment(&self, id: SegmentId) -> Result<()> {
        self.index.remove_segments(&[id])?;
        let _exclusive = self.gc_barrier.write();
        self.vlog.remove_segment(id)
    }

    fn files(&self) -> (&dyn FileSystem, &Path) {
        (self.options.fs.as_ref(), &self.dir)
    }
}

/// Consecutive moves in one direction after which a cursor starts reading ahead; a seek
/// followed by one step does not pay for a read-ahead it will not use.
const PREFETCH_AFTER_MOVES: u32 = 2;
/// Entries in the first read-ahead window; each following window doubles, so a short scan
/// wastes little and a long one quickly reaches full parallelism.
const FIRST_WINDOW_ENTRIES: usize = 16;
/// While a scan's values are in memory, one in this many has its residency checked.
const RESIDENCY_SAMPLE: usize = 16;
/// Read-around for long scans, and how many of the scan's values such a chunk must be expected
/// to hold (see [`readaround`]).
const MAX_READAROUND: u64 = 64 << 10;
const READAROUND_MIN_HITS: u64 = 2;
/// Most entries in one read-ahead window.
const MAX_WINDOW_ENTRIES: usize = 1024;
/// A window ends once its separated values add up to this many bytes: large values get short
/// windows, and an iterator holds at most two windows of values.
const MAX_WINDOW_VALUE_BYTES: u64 = 4 << 20;

type Cursor = DbIter<Box<dyn InternalIterator>>;

/// Direction of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Movement {
    Forward,
    Backward,
}

/// Where a read-ahead entry's value comes from.
enum BufferedValue {
    /// A range of the window's inline-value arena.
    Inline(Range<usize>),
    /// A value in the log: index into the window's read requests.
    Separated(usize),
    /// A pointer that does not decode; reported when the cursor lands on it.
    Malformed,
}

struct BufferedEntry {
    key: Range<usize>,
    value: BufferedValue,
}

/// Entries read ahead of the cursor, in the order it will visit them, with the value reads
/// issued for them.
struct Window {
    movement: Movement,
    keys: Bytes,
    inline_values: Bytes,
    entries: Vec<BufferedEntry>,
    requests: Arc<[ValueRequest]>,
    /// Per request: the read task holding it and its position in that task's result; `None` for
    /// values in memory, which the cursor copies itself when it lands on them.
    request_slots: Vec<Option<(usize, usize)>>,
    reads: Vec<Arc<Task<Vec<Option<Bytes>>>>>,
    read_results: Vec<Option<Vec<Option<Bytes>>>>,
    /// The error that stopped the walk, reported when the cursor moves past the last entry.
    error: Option<Error>,
    /// The walk ran out of entries: nothing lies beyond the last one.
    exhausted: bool,
    /// The entry the user is on.
    pos: usize,
}

impl Window {
    fn is_last(&self) -> bool {
        self.exhausted || self.error.is_some()
    }

    fn key(&self, entry: usize) -> &[u8] {
        &self.keys[self.entries[entry].key.clone()]
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        for read in &self.reads {
            read.cancel();
        }
    }
}

/// A read-ahead walk's output: the window and the cursor, left on its last entry.
struct Walked {
    cursor: Cursor,
    window: Window,
}

/// What a read-ahead walk needs besides the cursor.
#[derive(Clone)]
struct WalkPlan {
    movement: Movement,
    max_entries: usize,
    keys_only: bool,
    /// Check only a sample of the values' residency (see [`uncached_requests`]).
    sample_residency: bool,
    /// Entries the scan visited before this window.
    scanned: usize,
    vlog: Arc<ValueLog>,
    pool: Arc<PrefetchPool>,
}

/// Of a window's value reads, those that may wait on the device (their loads are started by
/// [`ValueLog::will_need`]); only these go to the pool, since copying a value that is in memory
/// costs less than handing it to another thread. With `sample`, set while the scan's previous
/// window was all in memory, only every [`RESIDENCY_SAMPLE`]th value is checked, and the rest
/// only if a sampled one is not in memory: a cached scan pays one check in that many.
fn uncached_requests(vlog: &ValueLog, requests: &[ValueRequest], sample: bool, readaround: u64) -> Vec<usize> {
    let misses = |i: &usize| !vlog.will_need(&requests[*i].pointer, readaround);
    if !sample {
        return (0..requests.len()).filter(misses).collect();
    }
    let sampled: Vec<usize> = (0..requests.len()).step_by(RESIDENCY_SAMPLE).filter(misses).collect();
    if sampled.is_empty() {
        return sampled;
    }
    let sampled_miss = |i: &usize| sampled.binary_search(i).is_ok();
    (0..requests.len()).filter(|i| if i % RESIDENCY_SAMPLE == 0 { sampled_miss(i) } else { misses(i) }).collect()
}

/// Bytes loaded around each value that is not in memory, for a scan that has visited `scanned`
/// entries whose window's values lie within `span` bytes of the log. Loading a large aligned
/// chunk costs one device read instead of several, but is waste unless the scan will come back
/// for its neighbours: it pays once, by the scan's own history, the chunk should hold several
/// of its values ([`READAROUND_MIN_HITS`]). A random load spreads a scan's values over the
/// whole log, so short scans read only their values and a long scan switches to large reads.
fn readaround(scanned: usize, span: u64) -> u64 {
    let expected_hits = scanned as u64 * MAX_READAROUND / span.max(1);
    if expected_hits >= READAROUND_MIN_HITS { MAX_READAROUND } else { 0 }
}

/// Bytes of the log between the first and last of the values of `requests` in each segment,
/// summed over segments.
fn log_span(requests: &[ValueRequest]) -> u64 {
    let mut ranges: BTreeMap<SegmentId, (u64, u64)> = BTreeMap::new();
    for r in requests {
        let end = r.pointer.offset + u64::from(r.pointer.len);
        let range = ranges.entry(r.pointer.segment).or_insert((r.pointer.offset, end));
        *range = (range.0.min(r.pointer.offset), range.1.max(end));
    }
    ranges.values().map(|(start, end)| end - start).sum()
}

/// Collects up to `plan.max_entries` entries from `cursor` (its current one first if
/// `include_current`, then stepping in `plan.movement`) and issues the reads of their separated
/// values on the pool. Errors end the window and are kept for the cursor to report in turn.
fn walk(mut cursor: Cursor, include_current: bool, plan: &WalkPlan) -> Walked {
    let mut keys = Vec::new();
    let mut inline_values = Vec::new();
    let mut entries = Vec::new();
    let mut requests = Vec::new();
    let mut value_bytes = 0u64;
    let mut error = None;
    let mut exhausted = false;
    let mut step = !include_current;
    while entries.len() < plan.max_entries && value_bytes < MAX_WINDOW_VALUE_BYTES {
        if step {
            let moved = match plan.movement {
                Movement::Forward => cursor.next(),
                Movement::Backward => cursor.prev(),
            };
            if let Err(e) = moved {
                error = Some(e);
                break;
            }
        }
        step = true;
        if !cursor.valid() {
            exhausted = true;
            break;
        }
        let key_start = keys.len();
        keys.extend_from_slice(cursor.key());
        let key = key_start..keys.len();
        let raw = cursor.raw_value();
        let value = match cursor.value_kind() {
            ValueKind::Pointer => match ValuePointer::decode(raw) {
                Some(pointer) => {
                    value_bytes += u64::from(pointer.len);
                    requests.push(ValueRequest { pointer, key: key.clone() });
                    BufferedValue::Separated(requests.len() - 1)
                }
                None => BufferedValue::Malformed,
            },
            _ => {
                let start = inline_values.len();
                inline_values.extend_from_slice(raw);
                BufferedValue::Inline(start..inline_values.len())
            }
        };
        entries.push(BufferedEntry { key, value });
    }
    let keys = Bytes::from(keys);
    let requests: Arc<[ValueRequest]> = requests.into();
    let mut request_slots = vec![None; requests.len()];
    let mut reads = Vec::new();
    if !plan.keys_only && !requests.is_empty() {
        let readaround = readaround(plan.scanned + entries.len(), log_span(&requests));
        let uncached = uncached_requests(&plan.vlog, &requests, plan.sample_residency, readaround);
        for (task, group) in plan_reads(&requests, uncached, plan.pool.threads()).into_iter().enumerate() {
            for (slot, &request) in group.iter().enumerate() {
                request_slots[request] = Some((task, slot));
            }
            let (vlog, keys, requests) = (Arc::clone(&plan.vlog), keys.clone(), Arc::clone(&requests));
            reads.push(plan.pool.submit(move || vlog.read_values(&keys, &requests, &group)));
        }
    }
    let window = Window {
        movement: plan.movement,
        keys,
        inline_values: Bytes::from(inline_values),
        entries,
        requests,
        request_slots,
        read_results: (0..reads.len()).map(|_| None).collect(),
        reads,
        error,
        exhausted,
        pos: 0,
    };
    Walked { cursor, window }
}

/// A cursor over the database in key order, both directions.
///
/// Unpositioned when created; movement returns errors (I/O, corruption) instead of hiding them,
/// and after an error the cursor must be re-seeked.
///
/// Values: by default the value is loaded when the cursor lands on its key, so [`value`] is
/// infallible. With [`ReadOptions::keys_only`] nothing is read from the value log: [`value`] is
/// empty and [`read_value`] reads the current value on demand (the lazy path).
///
/// Read-ahead ([`ReadOptions::prefetch`], on by default): after [`PREFETCH_AFTER_MOVES`] steps in
/// one direction the cursor walks the index ahead in windows of growing size and issues the reads
/// of the windows' separated values on the database's prefetch threads, coalescing values that
/// are near each other in the log. Halfway through a window the next one is walked on a
/// prefetch thread while the rest of the current one is consumed. Results are exactly those of a cursor without read-ahead; a seek or
/// a change of direction drops the read-ahead.
///
/// [`value`]: DbIterator::value
/// [`read_value`]: DbIterator::read_value
pub struct DbIterator {
    db: Arc<DbInner>,
    /// The index cursor; `None` only while a read-ahead walk holds it (`next_walk` is set).
    cursor: Option<Cursor>,
    /// The current value (empty for separated values under `keys_only`).
    value: Bytes,
    /// Read-ahead mode: the entries being visited. `None`: the cursor is on the current entry.
    window: Option<Window>,
    /// The walk producing the window after the current one, started halfway through it.
    next_walk: Option<Arc<Task<Walked>>>,
    keys_only: bool,
    prefetch: bool,
    last_move: Option<Movement>,
    moves_in_a_row: u32,
    next_window_entries: usize,
    /// Entries in the windows walked since read-ahead last started.
    scanned: usize,
    _snapshot: Option<Snapshot>,
}

impl DbIterator {
    fn new(db: Arc<DbInner>, cursor: Cursor, opts: ReadOptions) -> Self {
        DbIterator {
            db,
            cursor: Some(cursor),
            value: Bytes::new(),
            window: None,
            next_walk: None,
            keys_only: opts.keys_only,
            prefetch: opts.prefetch,
            last_move: None,
            moves_in_a_row: 0,
            next_window_entries: FIRST_WINDOW_ENTRIES,
            scanned: 0,
            _snapshot: opts.snapshot,
        }
    }

    /// True if positioned on an entry.
    pub fn valid(&self) -> bool {
        self.window.is_some() || self.cursor.as_ref().is_some_and(|c| c.valid())
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.reposition(|c| c.seek_to_first())
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.reposition(|c| c.seek_to_last())
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.reposition(|c| c.seek(key))
    }

    /// Moves to the next key.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.step(Movement::Forward)
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        self.step(Movement::Backward)
    }

    /// The current key. Only meaningful while `valid()`.
    pub fn key(&self) -> &[u8] {
        match &self.window {
            Some(w) => w.key(w.pos),
            None => self.home_cursor().key(),
        }
    }

    /// The current value; empty for every entry under [`ReadOptions::keys_only`].
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The current value, read from the value log now if the cursor did not load it
    /// ([`ReadOptions::keys_only`]); otherwise a cheap handle to the loaded value.
    pub fn read_value(&mut self) -> Result<Bytes> {
        if !self.valid() {
            return Err(Error::InvalidArgument("the iterator is not positioned on an entry".into()));
        }
        if !self.keys_only {
            return Ok(self.value.clone());
        }
        let pointer = match &self.window {
            Some(w) => match &w.entries[w.pos].value {
                BufferedValue::Inline(range) => return Ok(w.inline_values.slice(range.clone())),
                BufferedValue::Separated(request) => Some(w.requests[*request].pointer),
                BufferedValue::Malformed => None,
            },
            None => {
                let cursor = self.home_cursor();
                if cursor.value_kind() != ValueKind::Pointer {
                    return Ok(Bytes::copy_from_slice(cursor.raw_value()));
                }
                ValuePointer::decode(cursor.raw_value())
            }
        };
        let pointer = pointer.ok_or_else(|| self.malformed_pointer())?;
        self.db.read_pointer(&pointer, self.key())
    }

    fn home_cursor(&self) -> &Cursor {
        self.cursor.as_ref().expect("the cursor is home whenever no read-ahead window is active")
    }

    fn home_cursor_mut(&mut self) -> &mut Cursor {
        self.cursor.as_mut().expect("the cursor is home whenever no read-ahead window is active")
    }

    fn malformed_pointer(&self) -> Error {
        Error::corruption(&self.db.dir, 0, format!("malformed value pointer for key {}", EscapedBytes(self.key())))
    }

    /// Ends read-ahead: takes the cursor back from a walk in progress and drops the windows.
    fn stop_read_ahead(&mut self) {
        self.window = None;
        if let Some(walk) = self.next_walk.take() {
            // A walk nobody started is dropped with its window; otherwise wait for the cursor.
            let walked = walk.wait();
            self.cursor = Some(walked.cursor);
        }
    }

    fn reposition(&mut self, seek: impl FnOnce(&mut Cursor) -> Result<()>) -> Result<()> {
        self.stop_read_ahead();
        self.last_move = None;
        self.moves_in_a_row = 0;
        self.next_window_entries = FIRST_WINDOW_ENTRIES;
        self.scanned = 0;
        self.value = Bytes::new();
        seek(self.home_cursor_mut())?;
        self.load_value()
    }

    fn step(&mut self, movement: Movement) -> Result<()> {
        if let Some(window) = &self.window {
            if window.movement == movement {
                return self.advance_window();
            }
            // Changing direction: put the cursor back on the current key and step from there.
            let key = self.key().to_vec();
            self.stop_read_ahead();
            self.value = Bytes::new();
            self.home_cursor_mut().seek(&key)?;
        }
        if self.last_move == Some(movement) {
            self.moves_in_a_row = self.moves_in_a_row.saturating_add(1);
        } else {
            self.last_move = Some(movement);
            self.moves_in_a_row = 1;
        }
        self.value = Bytes::new();
        let cursor = self.home_cursor_mut();
        match movement {
            Movement::Forward => cursor.next()?,
            Movement::Backward => cursor.prev()?,
        }
        if self.prefetch && self.moves_in_a_row >= PREFETCH_AFTER_MOVES && self.home_cursor().valid() {
            return self.start_read_ahead(movement);
        }
        self.load_value()
    }

    fn walk_plan(&mut self, movement: Movement) -> WalkPlan {
        let max_entries = self.next_window_entries;
        self.next_window_entries = (max_entries * 2).min(MAX_WINDOW_ENTRIES);
        let scanned = self.scanned;
        self.scanned += max_entries;
        WalkPlan {
            movement,
            max_entries,
            keys_only: self.keys_only,
            sample_residency: self.window.as_ref().is_some_and(|w| w.reads.is_empty() && !w.requests.is_empty()),
            scanned,
            vlog: Arc::clone(&self.db.vlog),
            pool: Arc::clone(&self.db.prefetch),
        }
    }

    /// Switches to read-ahead with the cursor's current entry as the first of the window.
    fn start_read_ahead(&mut self, movement: Movement) -> Result<()> {
        let plan = self.walk_plan(movement);
        let Some(cursor) = self.cursor.take() else {
            return Err(Error::InvalidArgument("the iterator lost its cursor".into()));
        };
        let walked = walk(cursor, true, &plan);
        self.install(walked)
    }

    /// Makes a walk's window current, starts the walk after it, and lands on its first entry.
    fn install(&mut self, walked: Walked) -> Result<()> {
        let Walked { cursor, mut window } = walked;
        if window.entries.is_empty() {
            self.cursor = Some(cursor);
            return window.error.take().map_or(Ok(()), Err);
        }
        self.cursor = Some(cursor);
        self.window = Some(window);
        self.land()
    }

    /// Starts walking the next window once half of the current one is consumed: early enough to
    /// overlap with the rest of it, late enough that a short scan does not pay for a window it
    /// never reaches.
    fn start_next_walk_if_due(&mut self) {
        let Some(window) = &self.window else { return };
        if self.next_walk.is_some() || window.is_last() || window.pos * 2 + 1 < window.entries.len() {
            return;
        }
        let plan = self.walk_plan(window.movement);
        if let Some(cursor) = self.cursor.take() {
            self.next_walk = Some(self.db.prefetch.submit(move || walk(cursor, false, &plan)));
        }
    }

    fn advance_window(&mut self) -> Result<()> {
        let Some(window) = self.window.as_mut() else { return Ok(()) };
        self.value = Bytes::new();
        if window.pos + 1 < window.entries.len() {
            window.pos += 1;
            return self.land();
        }
        let error = window.error.take();
        self.window = None;
        match self.next_walk.take() {
            Some(walk) => self.install(walk.wait()),
            // The last window: the cursor is home and invalid (exhausted or failed).
            None => error.map_or(Ok(()), Err),
        }
    }

    /// Loads the value of the window entry the cursor is on.
    fn land(&mut self) -> Result<()> {
        self.start_next_walk_if_due();
        let Some(window) = self.window.as_mut().filter(|_| !self.keys_only) else { return Ok(()) };
        let entry = &window.entries[window.pos];
        let request = match &entry.value {
            BufferedValue::Inline(range) => {
                self.value = window.inline_values.slice(range.clone());
                return Ok(());
            }
            BufferedValue::Separated(request) => *request,
            BufferedValue::Malformed => return Err(self.malformed_pointer()),
        };
        let prefetched = window.request_slots[request].and_then(|(task, slot)| {
            let results = window.read_results[task].get_or_insert_with(|| window.reads[task].wait());
            results.get_mut(slot).and_then(Option::take)
        });
        Counters::add(&self.db.counters.vlog_reads, 1);
        self.value = match prefetched {
            Some(value) => value,
            // In memory, or the prefetch failed: a plain read gives the value or the real error.
            None => {
                let pointer = window.requests[request].pointer;
                self.db.vlog.read(&pointer, window.key(window.pos))?
            }
        };
        Ok(())
    }

    /// Loads the value of the entry the (home) cursor is on.
    fn load_value(&mut self) -> Result<()> {
        let cursor = self.home_cursor();
        if !cursor.valid() || self.keys_only {
            self.value = Bytes::new();
            return Ok(());
        }
        self.value = match cursor.value_kind() {
            ValueKind::Pointer => {
                let ptr = ValuePointer::decode(cursor.raw_value()).ok_or_else(|| self.malformed_pointer())?;
                self.db.read_pointer(&ptr, cursor.key())?
            }
            _ => Bytes::copy_from_slice(cursor.raw_value()),
        };
        Ok(())
    }
}

impl Drop for DbIterator {
    fn drop(&mut self) {
        if let Some(walk) = self.next_walk.take() {
            walk.cancel();
        }
    }
}

/// An owning iterator over a key range, yielding `Result<(key, value)>` in key order.
///
/// After an error it yields that error once and then ends.
pub struct RangeIter {
    cursor: DbIterator,
    start: Option<Bound<Vec<u8>>>,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl RangeIter {
    fn advance(&mut self) -> Result<()> {
        match self.start.take() {
            None => self.cursor.next(),
            Some(Bound::Unbounded) => self.cursor.seek_to_first(),
            Some(Bound::Included(k)) => self.cursor.seek(&k),
            Some(Bound::Excluded(k)) => {
                self.cursor.seek(&k)?;
                if self.cursor.valid() && self.cursor.key() == k.as_slice() {
                    self.cursor.next()?;
                }
                Ok(())
            }
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Err(e) = self.advance() {
            self.done = true;
            return Some(Err(e));
        }
        if !self.cursor.valid() {
            self.done = true;
            return None;
        }
        let key = self.cursor.key();
        let past_end = match &self.end {
            Bound::Included(end) => key > end.as_slice(),
            Bound::Excluded(end) => key >= end.as_slice(),
            Bound::Unbounded => false,
        };
        if past_end {
            self.done = true;
            return None;
        }
        Some(Ok((Bytes::copy_from_slice(key), self.cursor.value.clone())))
    }
}
