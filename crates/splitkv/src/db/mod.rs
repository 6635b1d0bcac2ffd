//! [`Db`]: the public handle — open and recovery, the write path, reads and iterators.
//!
//! Write path: each [`WriteBatch`] joins a queue; the writer at the front becomes the leader,
//! takes a group of queued batches, assigns consecutive sequence numbers, appends them to the
//! value log (one atomic run of records per batch), syncs once if any writer asked for it,
//! applies them to the index, publishes the last sequence number and wakes the group. This is
//! LevelDB's group commit, with the value log in the role of the write-ahead log.
//!
//! Read path: the index maps a key to an inline value or a [`ValuePointer`]; pointers are
//! resolved by one validated read from the value log. Iterators (`iterator`) that move
//! sequentially read ahead (`read_ahead`): they walk the index in windows, start loading the
//! windows' values that are not in memory, and fetch those in parallel on a pool shared by all
//! iterators (`vlog::prefetch`), coalescing values adjacent in the log.
//!
//! GC: the database hosts the value-log collector (`gc_host`): it answers "is this pointer
//! current?", relocates through the write path, counts garbage with surveys of the index, holds
//! writers at the space limits, and runs the background GC thread.
//!
//! Recovery: replay the MANIFEST (the SSTables and the value-log head of the last flush), then
//! replay the value log from that head into a fresh memtable. A failed value-log or MANIFEST
//! write poisons the write path; reads keep working.
//!
//! Thread-safety: `Db` is `Send + Sync`; share it with `Arc<Db>`. Iterators own what they read.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

mod gc_host;
mod iterator;
mod read_ahead;

pub use iterator::{DbIterator, RangeIter};

use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::filenames::{current_file, lock_file, parse_file_name, segment_file, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::index::lsm::{LsmIndex, LsmParts};
use crate::index::{Index, IndexRecord, IndexValue};
use crate::iter::db_iter::DbIter;
use crate::memtable::Memtable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::stats::{Counters, Stats};
use crate::types::{SegmentId, SequenceNumber, ValueKind, ValuePointer};
use crate::version::VersionSet;
use crate::vlog::gc::{policy_for, punch_ranges, GarbageCollector, GcHost, GcOutcome, GcSettings};
use crate::vlog::prefetch::PrefetchPool;
use crate::vlog::{RecordKind, RecordRef, ReplayedRecord, ValueLog, VlogOptions};
use gc_host::SurveyMark;

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
    /// Whether the values scans checked last were all in memory (see `read_ahead`).
    scan_values_cached: Arc<AtomicBool>,
    writers: Mutex<VecDeque<Arc<PendingWrite>>>,
    poisoned: Mutex<Option<String>>,
    gc: GarbageCollector,
    /// Point reads hold it shared between reading a pointer and reading its value; GC takes it
    /// exclusively before deleting a segment, so no in-flight read loses its segment.
    gc_barrier: RwLock<()>,
    gc_stop: AtomicBool,
    gc_wake: (Mutex<()>, Condvar),
    /// Why the background collector stopped, if it failed.
    gc_failure: Mutex<Option<String>>,
    /// What the last garbage survey found, for scheduling the next and estimating live data.
    last_survey: Mutex<SurveyMark>,
    /// Log bytes of records whose value is separated (user writes and GC relocations): only
    /// those can become garbage that a survey finds, so they schedule surveys.
    separated_bytes_written: AtomicU64,
    /// Log bytes written when writers last measured the log against its space limits, and
    /// whether it was over one.
    space_checked_at: AtomicU64,
    space_pressed: AtomicBool,
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
        let recorded_skips: Vec<(SegmentId, Vec<(u64, u64)>)> = versions
            .segments()
            .iter()
            .filter(|(_, meta)| !meta.skipped.is_empty())
            .map(|(id, meta)| (*id, meta.skipped.clone()))
            .collect();
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
                space_amplification: options.gc_space_amplification,
                space_trigger: options.gc_space_trigger,
                punch_holes: options.gc_punch_holes,
                logical_space_factor: options.gc_logical_space_factor,
            },
            options.segment_size,
        );
        // Ranges recorded as skipped may not have been punched before a crash (the punch waits
        // for readers); punching is idempotent, so punch them all again.
        let live_segments: Vec<SegmentId> = vlog.segments().iter().map(|s| s.id).collect();
        for (id, ranges) in recorded_skips.iter().filter(|(id, _)| live_segments.contains(id)) {
            if let Some(bytes) = punch_ranges(fs.as_ref(), &segment_file(&dir, *id), ranges)? {
                gc.note_punched(*id, bytes);
            }
        }
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
            scan_values_cached: Arc::new(AtomicBool::new(false)),
            writers: Mutex::new(VecDeque::new()),
            poisoned: Mutex::new(None),
            gc,
            gc_barrier: RwLock::new(()),
            gc_stop: AtomicBool::new(false),
            gc_wake: (Mutex::new(()), Condvar::new()),
            gc_failure: Mutex::new(None),
            last_survey: Mutex::new(SurveyMark::default()),
            separated_bytes_written: AtomicU64::new(0),
            space_checked_at: AtomicU64::new(0),
            space_pressed: AtomicBool::new(false),
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
        self.inner.wait_for_log_space()?;
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
        Ok(RangeIter::new(cursor, start, end))
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

    /// Collects value-log garbage now: seals the active segment and flushes the memtable (so
    /// every segment can be cleaned), counts every segment's garbage exactly with one walk over
    /// the index, then cleans every segment holding garbage. Segments and records still readable
    /// by an open snapshot or iterator are freed once it is dropped (by a later GC run).
    ///
    /// The walk counts a version as garbage only when it was shadowed before the oldest open
    /// reader; while readers are open, a full compaction first drops the versions that fall
    /// between them (what no reader sees), which counts those too.
    pub fn run_gc(&self) -> Result<GcOutcome> {
        self.inner.check_poisoned()?;
        self.inner.seal_log()?;
        if self.inner.snapshots.oldest().is_some() {
            self.compact_range(None, None)?;
        } else {
            self.flush()?;
        }
        self.inner.survey_garbage()?;
        self.inner.gc.run_to_completion(self.inner.as_ref())
    }

    /// One garbage-collection step as the background collector takes it: no flush and no
    /// survey; deferred work whose readers are gone is done, then the segment the policy picks
    /// (over the garbage ratio, or the log's tail over the space trigger) is cleaned, if any.
    pub fn gc_step(&self) -> Result<GcOutcome> {
        self.inner.check_poisoned()?;
        self.inner.gc.run_once(self.inner.as_ref(), false)
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
        let mut separated_bytes = 0u64;
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
                            separated_bytes += u64::from(ptr.len);
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
        self.separated_bytes_written.fetch_add(separated_bytes, Ordering::Relaxed);
        self.last_sequence.store(seq, Ordering::Release);
        Ok(())
    }
}

impl DbInner {
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
}
