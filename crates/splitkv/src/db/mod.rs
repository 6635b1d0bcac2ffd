//! [`Db`]: the public handle — open and recovery, the write path, reads and iterators.
//!
//! Write path (`write`): group commit, with the value log as the write-ahead log. In the hash
//! mode with request shards (`shards`), point reads and single-shard batches are queued to
//! per-shard workers and answered through [`Completion`] handles (`publish` orders their
//! groups' visibility); the synchronous API waits on the handles.
//!
//! Read path: the index maps a key to an inline value or a [`ValuePointer`]; pointers are
//! resolved by one validated read from the value log. Batches of point reads (`multi_get`)
//! resolve all their keys first and then read the values not in memory concurrently. Iterators (`iterator`) that move
//! sequentially read ahead (`read_ahead`): they walk the index in windows, start loading the
//! windows' values that are not in memory, and fetch those in parallel on a pool shared by all
//! iterators (`vlog::prefetch`), coalescing values adjacent in the log.
//!
//! GC: the database hosts the value-log collector (`gc_host`): it answers "is this pointer
//! current?", relocates through the write path, counts garbage with surveys of the index, holds
//! writers at the space limits, and runs the background GC thread.
//!
//! Recovery (`open`): the catalog (MANIFEST), the value log, the index of the kind the options
//! name, and replay of the log tail through it; read-only, the same without writing anything,
//! beside a writer in another process. Checkpoints (`checkpoint`): an openable copy of the
//! database as of one sequence number, sharing its immutable files through hard links. A failed value-log or MANIFEST write poisons
//! the write path; reads keep working.
//!
//! The database owns the value log's metadata (the log head, live segments, their garbage and
//! skipped ranges) in the [`Catalog`] it shares with the index.
//!
//! Thread-safety: `Db` is `Send + Sync`; share it with `Arc<Db>`. Iterators own what they read.

use std::collections::VecDeque;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

mod checkpoint;
mod commit_gate;
mod completion;
mod gc_host;
mod iterator;
pub(crate) mod keyspace;
mod multi_get;
mod open;
mod properties;
mod publish;
mod read_ahead;
mod read_only;
mod rewrite;
mod shards;
mod spin_wait;
mod write;

use self::commit_gate::CommitGate;
pub use checkpoint::CheckpointInfo;
pub use completion::Completion;

pub use iterator::{DbIterator, RangeIter};
pub use keyspace::Keyspace;
pub use multi_get::{MultiGet, MultiGetResult};
pub use rewrite::RewriteOutcome;

use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::filenames::{parse_file_name, FileKind};
use crate::fs::FileLock;
use crate::index::{Index, IndexValue, ReadAt};
use crate::info_log::{log_event, InfoLog};
use crate::iter::db_iter::DbIter;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::stats::{Counters, SegmentStatsReport, Stats, StripedCounter};
use crate::types::{SequenceNumber, ValuePointer};
use crate::version::Catalog;
use crate::vlog::gc::{GarbageCollector, GcOutcome};
use crate::vlog::prefetch::PrefetchPool;
use crate::vlog::ValueLog;
use gc_host::{SurveyMaps, SurveyMark};
use keyspace::{is_reserved, reserved_key_error, Keyspaces, KEYSPACE_MARK};
use publish::PublishOrder;
use shards::{Request, ShardFront};
use write::{PendingWrite, Relocation};

struct DbInner {
    options: Options,
    dir: PathBuf,
    vlog: Arc<ValueLog>,
    /// The durable catalog: the value log's metadata, and the index's own state beside it.
    catalog: Arc<Catalog>,
    index: Arc<dyn Index>,
    snapshots: Arc<SnapshotList>,
    last_sequence: Arc<AtomicU64>,
    /// Segment of the last record applied to the index (raised after the records are applied,
    /// by the one writer that applies): every record before that segment is in the index.
    applied_segment: AtomicU64,
    counters: Arc<Counters>,
    /// Value reads issued ahead of sequential iterators.
    prefetch: Arc<PrefetchPool>,
    /// Whether the values scans checked last were all in memory (see `read_ahead`).
    scan_values_cached: Arc<AtomicBool>,
    /// Whether scans' read-around chunks stay in memory until they are used (see `read_ahead`).
    scan_readaround: Arc<read_ahead::ReadaroundFeedback>,
    /// Bytes of the live read-ahead windows of every cursor.
    read_ahead_bytes: Arc<AtomicU64>,
    /// The same for the last batch of point reads (`multi_get`), whose values lie elsewhere.
    point_values_cached: AtomicBool,
    writers: Mutex<VecDeque<Arc<PendingWrite>>>,
    /// Shard workers commit holding it shared; the group-commit leader, and a worker that
    /// checkpoints, hold it exclusively, so that they run while nothing is appended or applying.
    /// Every plain write takes it shared: sharded, so that writers on different cores each take
    /// a lock word of their own rather than all adding to one.
    commit_gate: CommitGate,
    /// The last sequence number given to an appended record; held while appending, which orders
    /// the log. Equals `last_sequence` whenever no shard worker's group awaits publication.
    log_order: Mutex<u64>,
    /// Publishes shard workers' groups in sequence order.
    publish: PublishOrder,
    poisoned: Mutex<Option<String>>,
    gc: GarbageCollector,
    /// Point reads hold it shared from reading the sequence number they read at until they have
    /// read the value; GC takes it exclusively (after publishing its relocations) before it
    /// deletes a segment or punches records, so no point read reaches records freed under it.
    gc_barrier: RwLock<()>,
    gc_stop: AtomicBool,
    gc_wake: (Mutex<()>, Condvar),
    /// Why the background collector stopped, if it failed.
    gc_failure: Mutex<Option<String>>,
    /// What the last garbage survey found, for scheduling the next and estimating live data.
    last_survey: Mutex<SurveyMark>,
    /// Where the reachable and the current records of each segment the last survey counted
    /// are: GC decides some records' liveness from them without a lookup.
    survey_maps: Mutex<SurveyMaps>,
    /// Log bytes of records whose value is separated (user writes and GC relocations): only
    /// those can become garbage that a survey finds, so they schedule surveys.
    separated_bytes_written: StripedCounter,
    /// Log bytes written when writers last measured the log against its space limits, and
    /// whether it was over one.
    space_checked_at: AtomicU64,
    space_pressed: AtomicBool,
    /// Where the database reports what it did (the `LOG` file and `tracing`; no file when
    /// read-only).
    info_log: Arc<InfoLog>,
    /// Opened with [`Db::open_read_only`]: every write is refused with [`Error::ReadOnly`].
    read_only: bool,
    /// The directory lock; none when read-only.
    _lock: Option<Box<dyn FileLock>>,
}

/// An open database.
pub struct Db {
    inner: Arc<DbInner>,
    gc_thread: Mutex<Option<JoinHandle<()>>>,
    /// The hash mode's request shards, when `IndexKind::Hash { shards }` asks for two or more.
    front: Option<ShardFront>,
    keyspaces: Keyspaces,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

impl Db {
    /// Stops background work and writes buffered log records to the OS. Unsynced writes stay
    /// unsynced, as in LevelDB; use [`WriteOptions::sync`] for durability.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        self.inner.vlog.flush_buffer()
    }

    fn stop_background(&self) {
        if let Some(front) = &self.front {
            front.shutdown();
        }
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
        let (key, value) = (key.as_ref(), value.as_ref());
        if !opts.sync && self.front.is_none() && self.inner.commits_unqueued() {
            // What `write` would do with a batch of this one put, without building the batch:
            // its copies of the key and value were a tenth of a small put's time.
            let latency = &self.inner.counters.latency;
            let _timer = latency.start(&latency.put);
            if is_reserved(key) {
                return Err(reserved_key_error());
            }
            self.inner.wait_for_log_space()?;
            return self.inner.put_unqueued(key, value).map(|_| ());
        }
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_put(opts, batch)
    }

    /// Writes `batch`, one put, timed as a put (which `Stats` also counts as a write).
    fn write_put(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        let latency = &self.inner.counters.latency;
        let _timer = latency.start(&latency.put);
        self.write_untimed(opts, batch)
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

    /// Removes every key in `[start, end)` (nothing if `start >= end`).
    ///
    /// With the LSM index this writes one range tombstone, whatever the number of keys; tables
    /// wholly inside the range (a partition, see `Options::partition_split_points`) are then
    /// dropped without being read once no snapshot older than the delete remains. The hash index
    /// keeps no order, so there it deletes each key it finds in the range, in one batch.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write(&WriteOptions::default(), batch)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        let latency = &self.inner.counters.latency;
        let _timer = latency.start(&latency.other_writes);
        self.write_untimed(opts, batch)
    }

    /// [`Db::write`] without the latency record, for callers that time themselves.
    fn write_untimed(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        batch.check_keys()?;
        // No keyspace the batch writes to may be dropped until it is applied.
        let held = self.keyspaces.hold(batch.keyspaces())?;
        let _held = held.lock()?;
        if !batch.has_range_deletes() {
            return self.submit_checked(opts, batch).wait();
        }
        if !self.inner.index.supports_range_deletes() {
            let batch = self.range_deletes_as_point_deletes(batch)?;
            return self.submit_checked(opts, batch).wait();
        }
        let ranges: Vec<(usize, Vec<u8>, Vec<u8>)> = (batch.ops().iter().enumerate())
            .filter_map(|(i, op)| match op {
                BatchOp::DeleteRange { start, end } => Some((i, start.clone(), end.clone())),
                _ => None,
            })
            .collect();
        self.inner.wait_for_log_space()?;
        let first_seq = self.inner.submit(PendingWrite::new(batch, opts.sync))?;
        for (i, start, end) in ranges {
            self.inner.index.reclaim_range(&start, &end, SequenceNumber(first_seq.0 + i as u64))?;
        }
        Ok(())
    }

    /// `batch` with each range delete replaced by deletes of the keys in its range: those the
    /// database holds now and those the batch puts before it.
    fn range_deletes_as_point_deletes(&self, batch: WriteBatch) -> Result<WriteBatch> {
        let mut out = WriteBatch::new();
        for (i, op) in batch.ops().iter().enumerate() {
            let BatchOp::DeleteRange { start, end } = op else {
                out.push(op.clone());
                continue;
            };
            let mut keys = std::collections::BTreeSet::new();
            let mut cursor = self.inner.cursor(ReadOptions {
                lower_bound: Some(start.clone()),
                upper_bound: Some(end.clone()),
                ..ReadOptions::default()
            })?;
            cursor.seek_to_first()?;
            while cursor.valid() {
                keys.insert(cursor.key().to_vec());
                cursor.next()?;
            }
            for earlier in &batch.ops()[..i] {
                if let BatchOp::Put { key, .. } = earlier {
                    if start <= key && key < end {
                        keys.insert(key.clone());
                    }
                }
            }
            for key in keys {
                out.push(BatchOp::Delete { key });
            }
        }
        Ok(out)
    }

    /// Submits `batch` to be applied atomically, and returns at once with the handle its result
    /// arrives through. With the hash mode's request shards (`IndexKind::Hash { shards: 2.. }`)
    /// a batch whose keys all belong to one shard is queued to that shard's worker; any other
    /// batch (a range delete among them), and every batch without shards, is written on the
    /// calling thread through group commit before this returns. A write is visible to reads once
    /// its handle holds `Ok`.
    pub fn submit_write(&self, opts: &WriteOptions, batch: WriteBatch) -> Completion<()> {
        if batch.has_range_deletes() || !batch.keyspaces().is_empty() {
            return Completion::ready(self.write(opts, batch));
        }
        if let Err(e) = batch.check_keys() {
            return Completion::ready(Err(e));
        }
        self.submit_checked(opts, batch)
    }

    /// [`Db::submit_write`] for a batch with no range delete whose keys were checked.
    fn submit_checked(&self, opts: &WriteOptions, batch: WriteBatch) -> Completion<()> {
        if batch.is_empty() && !opts.sync {
            return Completion::ready(Ok(()));
        }
        if let Err(e) = self.inner.wait_for_log_space() {
            return Completion::ready(Err(e));
        }
        if let Some(front) = &self.front {
            if let Some(shard) = shards::single_shard(&batch, front.shards()) {
                let (handle, done) = Completion::pair();
                // A failed send drops the request, whose completer then answers `Closed`.
                let _ = front.send(shard, Request::Write { batch, sync: opts.sync, done });
                return handle;
            }
        }
        Completion::ready(self.inner.submit(PendingWrite::new(batch, opts.sync)).map(|_| ()))
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` with read options (snapshot, cache filling).
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let latency = &self.inner.counters.latency;
        let _timer = latency.start(&latency.get);
        self.submit_get(opts, key).wait()
    }

    /// Submits a point read and returns the handle its value arrives through. With the hash
    /// mode's request shards the key's shard worker serves it; otherwise it is read on the
    /// calling thread before this returns. The read sees the database as of this call (or as of
    /// `opts.snapshot`).
    pub fn submit_get(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Completion<Option<Bytes>> {
        let key = key.as_ref();
        if is_reserved(key) {
            return Completion::ready(Err(reserved_key_error()));
        }
        self.submit_stored_get(opts, key)
    }

    /// [`Db::submit_get`] of a key as stored (a keyspace's keys carry its prefix).
    fn submit_stored_get(&self, opts: &ReadOptions, key: &[u8]) -> Completion<Option<Bytes>> {
        if let Some(front) = &self.front {
            // The worker reads later, on its own thread: a registered snapshot pins this moment
            // for it and keeps GC from freeing what it will read.
            let snapshot = self.pinned_snapshot(opts);
            let (handle, done) = Completion::pair();
            let shard = shards::shard_of(key, front.shards());
            let _ = front.send(shard, Request::Get { key: key.to_vec(), snapshot, fill_cache: opts.fill_cache, done });
            return handle;
        }
        let snapshot = opts.snapshot.as_ref().map(Snapshot::sequence);
        Completion::ready(self.inner.get_at(key, snapshot, opts.fill_cache))
    }

    /// A consistent read view as of now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire_latest(&self.inner.last_sequence)
    }

    /// The snapshot a read that runs later or in parts holds: the caller's, or one taken now. A
    /// registered snapshot (rather than only a sequence number) keeps compaction and GC from
    /// dropping any version the read may still look up (a `multi_get` batch, a sharded get).
    fn pinned_snapshot(&self, opts: &ReadOptions) -> Snapshot {
        opts.snapshot.clone().unwrap_or_else(|| self.snapshot())
    }

    /// A cursor over the database (the default keyspace), unpositioned: call a seek first.
    pub fn iter(&self, mut opts: ReadOptions) -> Result<DbIterator> {
        // The default keyspace ends where the keys reserved for keyspaces begin.
        if opts.upper_bound.as_deref().is_none_or(|upper| upper > &KEYSPACE_MARK[..]) {
            opts.upper_bound = Some(KEYSPACE_MARK.to_vec());
        }
        self.inner.cursor(opts)
    }

    /// The entries in `range`, in key order, as an owning iterator.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeIter> {
        self.range_opt(ReadOptions::default(), range)
    }

    /// Like [`Db::range`] with read options.
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, opts: ReadOptions, range: R) -> Result<RangeIter> {
        RangeIter::over(opts, range, |opts| self.iter(opts))
    }

    /// Freezes the memtable and waits until it is written to an SSTable.
    pub fn flush(&self) -> Result<()> {
        self.inner.submit(PendingWrite::flush())?;
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
        stats.memory.read_ahead_bytes = self.inner.read_ahead_bytes.load(Ordering::Relaxed);
        stats.memory.read_ahead_limit_per_cursor = read_ahead::READ_AHEAD_LIMIT_PER_CURSOR;
        stats.memory.prefetch_threads = self.inner.prefetch.threads() as u64;
        stats.memory.offset_map_bytes = self.inner.vlog.offset_map_bytes();
        let gc = self.inner.gc.totals();
        stats.gc_runs = gc.runs;
        stats.gc_bytes_read = gc.bytes_read;
        stats.gc_bytes_relocated = gc.bytes_relocated;
        stats.gc_bytes_punched = gc.bytes_punched;
        stats.gc_segments_released = gc.segments_released;
        stats.gc_segments_compacted = gc.segments_compacted;
        stats.disk_bytes = self.inner.disk_bytes();
        stats.manifest_bytes_written = self.inner.catalog.manifest_bytes_written();
        let (head, recorded) = self.inner.catalog.log_segments();
        stats.log_head = (head.segment.0, head.offset);
        stats.segments = self
            .inner
            .vlog
            .segments()
            .into_iter()
            .map(|seg| SegmentStatsReport {
                id: seg.id.0,
                bytes: seg.len,
                garbage_bytes: recorded.get(&seg.id).map_or(0, |m| m.garbage_bytes),
            })
            .collect();
        stats
    }

    /// A named property: `splitkv.stats`, `splitkv.num-files-at-level<N>`, `splitkv.sstables`,
    /// `splitkv.total-sst-bytes`, `splitkv.memtable-bytes`, `splitkv.last-sequence`,
    /// `splitkv.vlog-bytes`, `splitkv.write-amplification`, `splitkv.keyspaces` (one name a line),
    /// `splitkv.estimate-num-keys`, `splitkv.levelstats`, `splitkv.num-snapshots`,
    /// `splitkv.oldest-snapshot-time`, `splitkv.is-write-stopped` (1 while a stall that stops
    /// writes is in progress: from the first write that waits for a flush, compaction or
    /// value-log GC until a later write passes without waiting, as the LOG's stall events
    /// report it), `splitkv.write-stalls` (the causes of the stalls in progress, one a line:
    /// `level0-slowdown`, `level0-stop`, `memtable-full`, `value-log-space`,
    /// `value-log-readers`), `splitkv.approximate-sizes[:START:END]` (hex keys; see
    /// [`Db::approximate_size`]).
    pub fn property(&self, name: &str) -> Option<String> {
        match name {
            "splitkv.stats" => Some(self.stats().to_string()),
            "splitkv.last-sequence" => Some(self.inner.last_sequence.load(Ordering::Acquire).to_string()),
            "splitkv.vlog-bytes" => Some(self.stats().vlog_bytes().to_string()),
            "splitkv.write-amplification" => Some(format!("{:.3}", self.stats().write_amplification())),
            "splitkv.keyspaces" => Some(self.keyspace_names().join("\n")),
            _ => self.more_property(name),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop_background();
        let _ = self.inner.vlog.flush_buffer();
        log_event!(self.inner.info_log, tracing::Level::INFO, "closed database");
    }
}

impl DbInner {
    /// The value of `key` visible at `snapshot` (a registered snapshot's sequence number), or
    /// now if `None`.
    fn get_at(&self, key: &[u8], snapshot: Option<SequenceNumber>, fill_cache: bool) -> Result<Option<Bytes>> {
        self.counters.gets.add(1);
        let _no_segment_release = self.gc_barrier.read();
        // "Now" is read under the barrier: GC publishes its relocations before it takes the
        // barrier to free what they replaced, so a read that began earlier is waited out and one
        // that begins later reads at a sequence number that sees the relocations. The index
        // reads it once it has pinned its view (`ReadAt::Latest`).
        let at = snapshot.map_or(ReadAt::Latest(&self.last_sequence), ReadAt::Snapshot);
        match self.index.get(key, at, fill_cache)? {
            None => Ok(None),
            Some(IndexValue::Inline(v)) => Ok(Some(v)),
            Some(IndexValue::Pointer(ptr)) => self.read_pointer(&ptr, key).map(Some),
        }
    }

    fn read_pointer(&self, ptr: &ValuePointer, key: &[u8]) -> Result<Bytes> {
        self.counters.vlog_reads.add(1);
        self.vlog.read(ptr, key)
    }

    fn cursor(self: &Arc<Self>, opts: ReadOptions) -> Result<DbIterator> {
        // Every cursor holds a snapshot, so GC keeps the segments it may still read.
        let snapshot = match opts.snapshot {
            Some(s) => s,
            None => self.snapshots.acquire_latest(&self.last_sequence),
        };
        let seq = snapshot.sequence();
        let inner = self.index.iter(seq, opts.fill_cache)?;
        let cursor = DbIter::new(inner, seq, opts.lower_bound.clone(), opts.upper_bound.clone());
        Ok(DbIterator::new(Arc::clone(self), cursor, ReadOptions { snapshot: Some(snapshot), ..opts }))
    }

    /// Refuses writes when the database is read-only or its write path is poisoned (every
    /// write, flush, compaction and GC run passes here).
    fn check_poisoned(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        match &*self.poisoned.lock() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }
}

impl DbInner {
    /// Bytes the database's files occupy on the medium (holes excluded).
    fn disk_bytes(&self) -> u64 {
        let fs = self.options.fs.as_ref();
        let Ok(names) = fs.list(&self.dir) else { return 0 };
        names
            .iter()
            // The LOG is diagnostics, capped in size, not data.
            .filter(|n| !matches!(parse_file_name(n), None | Some(FileKind::InfoLog)))
            .filter_map(|n| fs.allocated_size(&self.dir.join(n)).ok())
            .sum()
    }
}
