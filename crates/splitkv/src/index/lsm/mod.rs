//! [`LsmIndex`]: the LSM-tree index — an active memtable, at most one frozen memtable being
//! flushed, and leveled SSTables described by the current [`Version`].
//!
//! This module holds the tree's state and the [`Index`] implementation (applying writes, making
//! room for them); the rest lives beside it, one concept per file:
//! - `read`: point lookups and the merged cursor over a [`SuperVersion`];
//! - `flush`: frozen memtable -> level-0 table, and obsolete-file deletion;
//! - `scheduler`: the background workers, compaction picking and publishing, manual compaction;
//! - `partitions`: the partition map, dropping tables a range delete covers, retiring deletes;
//! - `survey`: counting live value-log bytes for garbage surveys;
//! - `recent`: the key filters of recently flushed memtables, for proofs that a key is unchanged;
//! - `sizes`: key-range size estimates from table metadata.
//!
//! Flushes, compactions, stalls and background errors are reported to the database's
//! `InfoLog` (the `LOG` file and `tracing` events).
//!
//! Writers are delayed at the L0 slowdown trigger and blocked at the stop trigger or while the
//! frozen memtable is still being flushed; stall time is counted by cause.
//!
//! The tree's durable state (tables, file numbers, compact pointers) is recorded in the
//! database's [`Catalog`], beside the value log's metadata, which the database owns; the index
//! reaches the value log only through a [`LogLink`].
//!
//! Lock order: `compaction_lock`, then `state`, then the catalog.

mod flush;
mod partitions;
mod read;
mod recent;
mod scheduler;
mod sizes;
mod survey;

use std::collections::HashSet;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};

use self::read::ReadFor;
use self::recent::RecentFlushes;
use super::{Index, IndexEntry, IndexParts, IndexRecord, IndexValue, LiveCount, LogLink, ReadAt};
use crate::compaction::picker::{InFlight, PickSettings};
use crate::compaction::{CompactionListener, CompactionPolicy};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::info_log::{log_event, InfoLog, StallCause, INDEX_STALLS};
use crate::iter::level::LevelFile;
use crate::iter::InternalIterator;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::range_del::RangeTombstone;
use crate::snapshot::SnapshotList;
use crate::sstable::{BlockCache, IndexLearning, TableCache, TableOptions};
use crate::stats::{Counters, IndexBlockStats, LevelStats, RangeSize, Stats};
use crate::types::{FileNumber, SegmentId, SequenceNumber, ValueKind, ValuePointer};
use crate::version::{Catalog, TablesPointingInto, Version};

/// What a reader needs to see one consistent state of the tree.
pub struct SuperVersion {
    /// The active memtable.
    pub mem: Arc<Memtable>,
    /// The frozen memtable being flushed, if any.
    pub imm: Option<Arc<Memtable>>,
    /// The SSTables.
    pub version: Arc<Version>,
    /// Each level's files as cursors walk them (index = level; level 0 empty), built once here
    /// rather than by every cursor.
    level_files: Vec<Arc<[LevelFile]>>,
    /// What recently flushed memtables wrote: with `mem` and `imm`, every write newer than a
    /// bound, by key filter.
    recent: Arc<RecentFlushes>,
}

impl SuperVersion {
    fn new(
        mem: Arc<Memtable>,
        imm: Option<Arc<Memtable>>,
        version: Arc<Version>,
        recent: Arc<RecentFlushes>,
    ) -> SuperVersion {
        let level_files = (0..version.num_levels())
            .map(|level| {
                let files = if level == 0 { &[][..] } else { version.files(level) };
                files
                    .iter()
                    .map(|f| LevelFile {
                        id: f.number.0,
                        size: f.file_size,
                        smallest: f.smallest.0.clone(),
                        largest: f.largest.0.clone(),
                    })
                    .collect()
            })
            .collect();
        SuperVersion { mem, imm, version, level_files, recent }
    }

    /// The memtables, newest first.
    pub fn memtables(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.mem).chain(self.imm.as_ref())
    }
}

struct State {
    mem: Arc<Memtable>,
    imm: Option<Arc<Memtable>>,
    /// See [`SuperVersion::recent`]: a flushed memtable's key filter joins it as it leaves.
    recent: Arc<RecentFlushes>,
    /// Table numbers being written: not yet in any version, must not be deleted as obsolete.
    pending_outputs: HashSet<FileNumber>,
    /// A flush is in progress (only one runs at a time).
    flushing: bool,
    bg_error: Option<String>,
    shutting_down: bool,
    policy: Box<dyn CompactionPolicy>,
    /// Inputs and output ranges of running compactions.
    in_flight: InFlight,
    /// Range deletes whose covered tables a live snapshot still needs.
    pending_reclaims: Vec<RangeTombstone>,
}

struct Shared {
    options: Options,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    catalog: Arc<Catalog>,
    log: Arc<dyn LogLink>,
    snapshots: Arc<SnapshotList>,
    last_sequence: Arc<AtomicU64>,
    counters: Arc<Counters>,
    table_options: TableOptions,
    /// Learned-index training decisions and counters.
    learning: Arc<IndexLearning>,
    block_cache: Arc<BlockCache>,
    table_cache: Arc<TableCache>,
    state: Mutex<State>,
    /// Signals the background thread: work may be available, or shutdown.
    work_cv: Condvar,
    /// Signals writers and waiters: a flush or compaction finished.
    done_cv: Condvar,
    /// What readers and writers see, swapped whole (RCU): a writer reads it on every put (which
    /// memtable, whether room is due), and with a lock or a reference count there each put
    /// bounced that cache line between the writers' cores.
    super_version: ArcSwap<SuperVersion>,
    /// Set with `State::bg_error` or `State::shutting_down`, for `room_due` to read without the
    /// state lock.
    writes_halted: AtomicBool,
    /// Shared by running background compactions, exclusive for a manual compaction and for a
    /// garbage survey, so neither overlaps one.
    compaction_lock: RwLock<()>,
    listener: Option<Arc<dyn CompactionListener>>,
    pick_settings: PickSettings,
    /// L0 files point reads consulted without finding their key since L0 was last picked for
    /// compaction (see `compaction::picker::l0_read_allowance`).
    l0_read_misses: AtomicU64,
    started: Instant,
    info_log: Arc<InfoLog>,
}

/// The LSM-tree index.
pub struct LsmIndex {
    shared: Arc<Shared>,
    background: Mutex<Vec<JoinHandle<()>>>,
}

impl LsmIndex {
    /// Starts the index over the recovered catalog, with an empty memtable starting at the
    /// recorded log head, and spawns its background workers (none when read-only).
    pub fn open(parts: IndexParts) -> Result<LsmIndex> {
        let options = parts.options;
        let table_options = TableOptions::from(&options);
        let block_cache = Arc::new(BlockCache::new(options.block_cache_capacity));
        let learning = Arc::new(IndexLearning::default());
        let table_cache = Arc::new(
            TableCache::new(
                Arc::clone(&options.fs),
                parts.dir.clone(),
                options.max_open_files,
                Some(Arc::clone(&block_cache)),
                Some(Arc::clone(&learning)),
                table_options,
            )
            .with_pinned(parts.pinned_tables),
        );
        let mem = Arc::new(Memtable::new(parts.catalog.log_head(), options.write_buffer_size));
        let version = parts.catalog.lock().current();
        // Every record in a table is at most the recorded last sequence number (the log replay
        // that follows puts newer ones in the memtable).
        let recent = Arc::new(RecentFlushes::new(SequenceNumber(parts.last_sequence.load(Ordering::Acquire))));
        let super_version = Arc::new(SuperVersion::new(Arc::clone(&mem), None, version, Arc::clone(&recent)));
        let shared = Arc::new(Shared {
            fs: Arc::clone(&options.fs),
            dir: parts.dir,
            catalog: parts.catalog,
            log: parts.log,
            snapshots: parts.snapshots,
            last_sequence: parts.last_sequence,
            counters: parts.counters,
            table_options,
            learning,
            block_cache,
            table_cache,
            state: Mutex::new(State {
                mem,
                imm: None,
                recent,
                pending_outputs: HashSet::new(),
                flushing: false,
                bg_error: None,
                shutting_down: false,
                policy: scheduler::policy_for(&options),
                in_flight: InFlight::default(),
                pending_reclaims: Vec::new(),
            }),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            super_version: ArcSwap::new(super_version),
            writes_halted: AtomicBool::new(false),
            compaction_lock: RwLock::new(()),
            listener: options.compaction_listener.clone(),
            pick_settings: scheduler::pick_settings(&options),
            l0_read_misses: AtomicU64::new(0),
            started: Instant::now(),
            info_log: parts.info_log,
            options,
        });
        let index = LsmIndex { shared, background: Mutex::new(Vec::new()) };
        if parts.read_only {
            // No deletions, no MANIFEST edit, no workers: another process may own the files.
            return Ok(index);
        }
        index.shared.delete_unlisted_files(true);
        index.shared.record_static_partitions()?;
        for n in 0..index.shared.options.max_background_compactions.max(1) {
            let worker = Arc::clone(&index.shared);
            let spawned =
                std::thread::Builder::new().name(format!("splitkv-bg{n}")).spawn(move || worker.background_loop());
            match spawned {
                Ok(handle) => index.background.lock().push(handle),
                // Dropping `index` stops and joins the workers already started.
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(index)
    }

    /// The current super version (for tools and tests).
    pub fn super_version(&self) -> Arc<SuperVersion> {
        self.shared.super_version()
    }
}

impl Drop for LsmIndex {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn super_version(&self) -> Arc<SuperVersion> {
        self.super_version.load_full()
    }

    /// The current `SuperVersion` for a short look (a put, a point read): no reference count
    /// taken, so no cache line shared with other threads is written.
    fn current(&self) -> arc_swap::Guard<Arc<SuperVersion>> {
        self.super_version.load()
    }

    /// Publishes the memtables of `state` with the catalog's current version to readers.
    fn install_super_version(&self, state: &State) {
        let version = self.catalog.lock().current();
        let sv = SuperVersion::new(Arc::clone(&state.mem), state.imm.clone(), version, Arc::clone(&state.recent));
        self.super_version.store(Arc::new(sv));
    }

    /// The options for a table about to be written: an adaptive index-block kind is resolved by
    /// the workload since the last table (writes against point lookups).
    fn table_options_for_build(&self) -> TableOptions {
        let writes = self.counters.keys_written.get();
        let reads = self.counters.gets.get();
        let kind = self.learning.kind_for_build(self.table_options.index_block_kind, writes, reads);
        TableOptions { index_block_kind: kind, ..self.table_options }
    }

    /// Index-block figures over the current version's tables that are open, and the counters.
    fn index_block_stats(&self, sv: &SuperVersion) -> IndexBlockStats {
        let c = self.learning.counters();
        let mean = |n: u64, total: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
        let mut out = IndexBlockStats {
            built_learned: c.tables_learned,
            build_rejections: c.build_rejections,
            lazy_trained: c.lazy_trained,
            lazy_rejections: c.lazy_rejections,
            learned_lookup_nanos: mean(c.sampled_learned_lookups, c.sampled_learned_nanos),
            binary_lookup_nanos: mean(c.sampled_binary_lookups, c.sampled_binary_nanos),
            ..IndexBlockStats::default()
        };
        let (mut weighted_error, mut modelled_entries) = (0.0, 0u64);
        for level in 0..sv.version.num_levels() {
            for f in sv.version.files(level) {
                let Some(table) = self.table_cache.open_table(f.number) else { continue };
                let (_, summary) = table.index_summary();
                match summary.model {
                    Some(model) => {
                        out.learned_tables += 1;
                        out.model_bytes += summary.encoded_bytes;
                        out.max_error = out.max_error.max(model.max_error);
                        weighted_error += model.mean_error * table.num_entries() as f64;
                        modelled_entries += table.num_entries();
                    }
                    None => {
                        out.binary_tables += 1;
                        out.binary_index_bytes += summary.encoded_bytes;
                    }
                }
            }
        }
        if modelled_entries > 0 {
            out.mean_error = weighted_error / modelled_entries as f64;
        }
        out
    }

    fn set_bg_error(&self, state: &mut State, err: &Error) {
        if state.bg_error.is_none() {
            state.bg_error = Some(err.to_string());
            self.writes_halted.store(true, Ordering::Release);
            log_event!(self.info_log, tracing::Level::ERROR, error = %err, "background error: writes stop until reopen");
        }
        self.done_cv.notify_all();
    }
}

impl Index for LsmIndex {
    /// Only separated values' pointers: inline values and deletes live in the tables, and their
    /// log records are garbage once flushed (see `apply`).
    fn keeps_log_pointer(&self, record: &IndexRecord<'_>) -> bool {
        !record.log_bytes_die_with_index()
    }

    fn apply(&self, records: &[IndexRecord<'_>]) {
        // The super version's memtable is the active one: the only switch (`make_room`) runs
        // with no group being applied (the database's commit gate) and installs a new one.
        let sv = self.shared.current();
        let mem = &sv.mem;
        for (i, r) in records.iter().enumerate() {
            if r.log_bytes_die_with_index() {
                mem.note_log_garbage(r.log_pointer.segment, u64::from(r.log_pointer.len));
            }
            // A group in key order (a GC relocation batch, a sorted load) inserts each key from
            // where the one before went.
            let next_follows = records.get(i + 1).is_some_and(|next| next.user_key > r.user_key);
            let mut buf = [0; ValuePointer::MAX_ENCODED_LEN];
            let (kind, value) = match r.entry {
                IndexEntry::RangeDeletion { end } => {
                    mem.delete_range(r.user_key, end, r.seq);
                    continue;
                }
                IndexEntry::Deletion => (ValueKind::Deletion, &[][..]),
                IndexEntry::Inline(v) => (ValueKind::Inline, v),
                IndexEntry::Pointer(p) => (ValueKind::Pointer, p.encode_into(&mut buf)),
            };
            mem.insert_in_order(r.user_key, r.seq, kind, value, next_follows);
        }
    }

    /// Memtable inserts are lock-free and each version is its own entry: applying groups out of
    /// order leaves the same memtable.
    fn applies_groups_concurrently(&self) -> bool {
        true
    }

    /// True when `make_room` would fail, freeze the memtable or hold the writer back.
    /// Reads no lock: every writer asks, once per group.
    fn room_due(&self) -> bool {
        let s = &self.shared;
        let o = &s.options;
        let sv = s.current();
        s.writes_halted.load(Ordering::Acquire)
            || sv.mem.approximate_bytes() >= o.write_buffer_size
            || sv.version.l0_depth() >= o.level0_slowdown_writes_trigger.min(o.level0_stop_writes_trigger)
    }

    fn make_room(&self, force: bool) -> Result<()> {
        let s = &self.shared;
        let o = &s.options;
        let mut allow_delay = !force;
        let mut force = force;
        let mut stalled_for = [false; 3];
        let mut state = s.state.lock();
        loop {
            if let Some(e) = &state.bg_error {
                return Err(Error::Poisoned(e.clone()));
            }
            if state.shutting_down {
                return Err(Error::Closed);
            }
            let l0 = s.super_version().version.l0_depth();
            if allow_delay && l0 >= o.level0_slowdown_writes_trigger {
                // Spread the slowdown over many writes instead of stopping one for long.
                drop(state);
                stalled_for[0] = true;
                s.info_log.stall_began(StallCause::L0Slowdown, &format_args!("{l0} level-0 files"));
                let start = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                Counters::add(&s.counters.stall_slowdown_micros, start.elapsed().as_micros() as u64);
                allow_delay = false;
                state = s.state.lock();
                continue;
            }
            let mem_full = state.mem.approximate_bytes() >= o.write_buffer_size;
            if !force && !mem_full {
                s.info_log
                    .stalls_ended(INDEX_STALLS.into_iter().zip(stalled_for).filter(|(_, now)| !now).map(|(c, _)| c));
                return Ok(());
            }
            // An empty memtable is frozen only to move the recorded log head past a sealed
            // segment (so GC may clean it); otherwise there is nothing to flush.
            if force && state.mem.is_empty() && state.mem.log_start() == s.log.head() {
                return Ok(());
            }
            if state.imm.is_some() || l0 >= o.level0_stop_writes_trigger {
                let (cause, detail) = if l0 >= o.level0_stop_writes_trigger {
                    stalled_for[1] = true;
                    (StallCause::L0Stop, format!("{l0} level-0 files"))
                } else {
                    stalled_for[2] = true;
                    (StallCause::MemtableFull, "the previous memtable is still being flushed".to_string())
                };
                s.info_log.stall_began(cause, &detail);
                let start = Instant::now();
                s.work_cv.notify_all();
                s.done_cv.wait(&mut state);
                Counters::add(&s.counters.stall_stop_micros, start.elapsed().as_micros() as u64);
                continue;
            }
            let fresh = Arc::new(Memtable::new(s.log.head(), o.write_buffer_size));
            let frozen = std::mem::replace(&mut state.mem, fresh);
            state.imm = Some(frozen);
            s.install_super_version(&state);
            s.work_cv.notify_all();
            force = false;
        }
    }

    fn wait_for_flush(&self) -> Result<()> {
        let s = &self.shared;
        let mut state = s.state.lock();
        // Not only the frozen memtable's table: the flush's upkeep too, which runs after the
        // memtable leaves (and with the state lock released), so another wake-up could fall
        // inside it.
        while state.imm.is_some() || state.flushing {
            if let Some(e) = &state.bg_error {
                return Err(Error::Poisoned(e.clone()));
            }
            s.work_cv.notify_all();
            s.done_cv.wait(&mut state);
        }
        match &state.bg_error {
            Some(e) => Err(Error::Poisoned(e.clone())),
            None => Ok(()),
        }
    }

    fn applies_durably(&self) -> bool {
        // Memtables are rebuilt from the log; a flush syncs the log before its table exists.
        false
    }

    fn tables_pointing_into(&self, id: SegmentId) -> TablesPointingInto {
        self.shared.catalog.lock().tables_pointing_into(id)
    }

    fn unchanged_since(&self, user_key: &[u8], seq: SequenceNumber) -> bool {
        let sv = self.shared.current();
        // Every write newer than `seq` is in a memtable or a recently flushed one, whose filters
        // know its keys (unless it is too old to be remembered).
        sv.memtables().all(|m| !m.may_have_touched(user_key)) && !sv.recent.may_have_touched_since(user_key, seq)
    }

    fn get(&self, user_key: &[u8], at: ReadAt<'_>, fill_cache: bool) -> Result<Option<IndexValue>> {
        self.shared.get(user_key, at, fill_cache, ReadFor::User)
    }

    fn get_in_background(&self, user_key: &[u8], at: ReadAt<'_>) -> Result<Option<IndexValue>> {
        self.shared.get(user_key, at, true, ReadFor::Background)
    }

    fn iter(&self, seq: SequenceNumber, fill_cache: bool) -> Result<Box<dyn InternalIterator>> {
        self.shared.iter(Some(seq), fill_cache)
    }

    fn supports_range_deletes(&self) -> bool {
        true
    }

    fn reclaim_range(&self, start: &[u8], end: &[u8], seq: SequenceNumber) -> Result<()> {
        self.shared.reclaim_range(start, end, seq)
    }

    fn update_partition_splits(&self, add: &[Vec<u8>], remove: &[Vec<u8>]) -> Result<()> {
        self.shared.update_partition_splits(add, remove)
    }

    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        // The caller flushed through the write leader. Freezing the memtable here instead would
        // race the leader: records appended before the freeze but applied after it would land in
        // the new memtable, behind its log start, and a crash would skip them in replay.
        self.wait_for_flush()?;
        self.shared.compact_range(begin, end)
    }

    fn fill_stats(&self, stats: &mut Stats) {
        let s = &self.shared;
        let sv = s.super_version();
        stats.levels = (0..sv.version.num_levels())
            .map(|level| LevelStats {
                level,
                files: sv.version.files(level).len(),
                bytes: sv.version.level_bytes(level),
            })
            .collect();
        stats.memtable_bytes =
            (sv.mem.approximate_bytes() + sv.imm.as_ref().map_or(0, |m| m.approximate_bytes())) as u64;
        stats.block_cache_hits = s.block_cache.hits();
        stats.block_cache_misses = s.block_cache.misses();
        stats.index_blocks = s.index_block_stats(&sv);
        let memory = &mut stats.memory;
        memory.memtable_bytes = stats.memtable_bytes;
        memory.memtable_limit = 2 * s.options.write_buffer_size as u64;
        memory.flushed_key_filter_bytes = sv.recent.memory_bytes() as u64;
        memory.block_cache_bytes = s.block_cache.usage();
        memory.block_cache_capacity = s.block_cache.capacity();
        memory.open_tables = s.table_cache.len() as u64;
        memory.table_cache_capacity = s.table_cache.capacity();
        memory.table_index_filter_bytes = (0..sv.version.num_levels())
            .flat_map(|level| sv.version.files(level))
            .filter_map(|f| s.table_cache.open_table(f.number))
            .map(|table| table.pinned_bytes())
            .sum();
        stats.partitions = sv.version.partition_splits().len() as u64 + 1;
        stats.range_deletes = sv.version.range_tombstones().len() as u64
            + sv.memtables().map(|m| m.range_tombstones().len() as u64).sum::<u64>();
    }

    fn property(&self, name: &str) -> Option<String> {
        let sv = self.shared.super_version();
        if let Some(level) = name.strip_prefix("splitkv.num-files-at-level") {
            let level: usize = level.parse().ok()?;
            return (level < sv.version.num_levels()).then(|| sv.version.files(level).len().to_string());
        }
        match name {
            "splitkv.sstables" => {
                let mut out = String::new();
                for level in 0..sv.version.num_levels() {
                    for f in sv.version.files(level) {
                        out.push_str(&format!(
                            "L{level} #{} {} bytes [{:?} .. {:?}] seq {}..={} range-clean<={}\n",
                            f.number,
                            f.file_size,
                            f.smallest,
                            f.largest,
                            f.smallest_seq.0,
                            f.largest_seq.0,
                            f.range_clean_below.0
                        ));
                    }
                }
                Some(out)
            }
            // Users' point reads that consulted an L0 table in vain since L0 was last compacted,
            // and how many make L0 due for compaction.
            "splitkv.l0-read-misses" => Some(format!(
                "{} of {}",
                self.shared.l0_read_misses.load(Ordering::Relaxed),
                crate::compaction::picker::l0_read_allowance(&sv.version)
            )),
            "splitkv.total-sst-bytes" => {
                Some((0..sv.version.num_levels()).map(|l| sv.version.level_bytes(l)).sum::<u64>().to_string())
            }
            "splitkv.compaction-slice-holder" => Some(
                self.shared.state.lock().policy.slice_holder().map_or_else(|| "none".to_string(), |l| l.to_string()),
            ),
            // One line per partition: its bounds, tables and bytes.
            "splitkv.partitions" => {
                let mut out = String::new();
                for p in sv.version.partitions() {
                    let (start, end, tables, bytes) = (p.start, p.end, p.files.len(), p.bytes());
                    out.push_str(&format!("[{start:?} .. {end:?}) {tables} tables {bytes} bytes\n"));
                }
                Some(out)
            }
            "splitkv.range-deletes" => {
                let mut out = String::new();
                for t in sv.version.range_tombstones() {
                    out.push_str(&format!("[{:?} .. {:?}) @{} durable\n", t.start, t.end, t.seq.0));
                }
                for mem in sv.memtables() {
                    for t in mem.range_tombstones() {
                        out.push_str(&format!("[{:?} .. {:?}) @{} in memtable\n", t.start, t.end, t.seq.0));
                    }
                }
                Some(out)
            }
            "splitkv.index-blocks" => Some(format!("{:#?}", self.shared.index_block_stats(&sv))),
            // RocksDB's table: files and megabytes per level.
            "splitkv.levelstats" => {
                let mut out = crate::stats::level_stats_header();
                for level in 0..sv.version.num_levels() {
                    let (files, bytes) = (sv.version.files(level).len(), sv.version.level_bytes(level));
                    out.push_str(&format!("{level:>5} {files:>5} {:>8.1}\n", bytes as f64 / (1024.0 * 1024.0)));
                }
                Some(out)
            }
            "splitkv.memtable-bytes" => {
                Some((sv.mem.approximate_bytes() + sv.imm.as_ref().map_or(0, |m| m.approximate_bytes())).to_string())
            }
            // Entries in the memtables and tables, as LevelDB-style engines estimate it: free to
            // compute, exact for a database of distinct keys, high by every overwrite and delete
            // that no compaction has merged yet.
            "splitkv.estimate-num-keys" => {
                let mem = sv.mem.len() + sv.imm.as_ref().map_or(0, |m| m.len());
                let tables: u64 = (0..sv.version.num_levels())
                    .flat_map(|level| sv.version.files(level).iter().map(|f| f.num_entries))
                    .sum();
                Some((mem as u64 + tables).to_string())
            }
            _ => None,
        }
    }

    fn approximate_size(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, seq: SequenceNumber) -> Result<RangeSize> {
        self.shared.approximate_size(start, end, seq)
    }

    fn survey_live(
        &self,
        horizon: SequenceNumber,
        applied_before: SegmentId,
        record: &mut dyn FnMut(LiveCount) -> Result<()>,
    ) -> Result<()> {
        self.shared.survey_live(horizon, applied_before, record)
    }

    fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.shutting_down = true;
            self.shared.writes_halted.store(true, Ordering::Release);
            self.shared.work_cv.notify_all();
            self.shared.done_cv.notify_all();
        }
        let workers = std::mem::take(&mut *self.background.lock());
        for handle in workers {
            let _ = handle.join();
        }
    }
}
