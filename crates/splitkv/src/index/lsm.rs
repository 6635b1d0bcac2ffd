//! [`LsmIndex`]: the LSM-tree index — an active memtable, at most one frozen memtable being
//! flushed, and leveled SSTables described by the current [`Version`].
//!
//! Readers take a [`SuperVersion`] (memtable, frozen memtable, version) under a read lock and
//! then read without locks; everything they reach stays alive through the `Arc`s, and files of
//! a version someone still holds are never deleted.
//!
//! `max_background_compactions` worker threads flush frozen memtables and run compactions
//! picked by the configured [`CompactionPolicy`]. Flushes pre-empt compactions: a worker always
//! flushes before picking, and a running compaction checks every few entries whether a frozen
//! memtable waits and flushes it first. Workers pick under the state lock and mark their inputs
//! busy in [`InFlight`] before releasing it, so concurrent compactions never share files or write
//! overlapping ranges into one level; a manual compaction excludes them all
//! (`compaction_lock`). Each finished compaction is reported to the policy (its level and
//! duration) and to the optional listener. Writers are delayed
//! at the L0 slowdown trigger and blocked at the stop trigger or while the frozen memtable is
//! still being flushed; stall time is counted by cause.
//!
//! Durability order of a flush: write and sync the table, sync the value log (the table's
//! pointers must not outlive their records), sync the directory, then publish the table and the
//! new log head in one MANIFEST edit.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::{decode_index_value, Index, IndexRecord, IndexValue};
use crate::compaction::exec::{self, CompactionContext, TableSink};
use crate::compaction::picker::{self, Compaction, InFlight};
use crate::compaction::{
    CompactionEvent, CompactionListener, CompactionPolicy, FinishedCompaction, LevelsSnapshot, PickReason,
    SchedulerState, ScorePolicy, TimeSliceConfig, TimeSlicePolicy,
};
use crate::error::{Error, Result};
use crate::filenames::{parse_file_name, FileKind};
use crate::fs::FileSystem;
use crate::iter::level::{LevelFile, LevelIterator};
use crate::iter::merge::MergingIterator;
use crate::iter::{InternalIterator, KeepAlive};
use crate::memtable::{Lookup, Memtable};
use crate::options::{CompactionPolicyKind, Options};
use crate::snapshot::SnapshotList;
use crate::sstable::{BlockCache, TableCache, TableOptions};
use crate::stats::{Counters, LevelStats, Stats};
use crate::types::{
    parse_internal_key, seek_key, FileNumber, LogPosition, SegmentId, SequenceNumber, ValueKind, ValuePointer,
};
use crate::version::{FileMetaData, GarbageSurvey, SegmentMeta, Version, VersionEdit, VersionSet};
use crate::vlog::{ValueLog, SEGMENT_HEADER_LEN};

/// What a reader needs to see one consistent state of the tree.
pub struct SuperVersion {
    /// The active memtable.
    pub mem: Arc<Memtable>,
    /// The frozen memtable being flushed, if any.
    pub imm: Option<Arc<Memtable>>,
    /// The SSTables.
    pub version: Arc<Version>,
}

/// Everything [`LsmIndex::open`] needs from the database.
pub struct LsmParts {
    /// Database options.
    pub options: Options,
    /// Database directory.
    pub dir: PathBuf,
    /// Recovered version set.
    pub versions: VersionSet,
    /// Memtable rebuilt from the value log.
    pub mem: Arc<Memtable>,
    /// The value log.
    pub vlog: Arc<ValueLog>,
    /// Live snapshots (compaction keeps what they can see).
    pub snapshots: Arc<SnapshotList>,
    /// Last published sequence number.
    pub last_sequence: Arc<AtomicU64>,
    /// Shared counters.
    pub counters: Arc<Counters>,
}

struct State {
    mem: Arc<Memtable>,
    imm: Option<Arc<Memtable>>,
    versions: VersionSet,
    /// Table numbers being written: not yet in any version, must not be deleted as obsolete.
    pending_outputs: HashSet<FileNumber>,
    /// A flush is in progress (only one runs at a time).
    flushing: bool,
    bg_error: Option<String>,
    shutting_down: bool,
    policy: Box<dyn CompactionPolicy>,
    /// Inputs and output ranges of running compactions.
    in_flight: InFlight,
}

struct Shared {
    options: Options,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    vlog: Arc<ValueLog>,
    snapshots: Arc<SnapshotList>,
    last_sequence: Arc<AtomicU64>,
    counters: Arc<Counters>,
    table_options: TableOptions,
    block_cache: Arc<BlockCache>,
    table_cache: Arc<TableCache>,
    state: Mutex<State>,
    /// Signals the background thread: work may be available, or shutdown.
    work_cv: Condvar,
    /// Signals writers and waiters: a flush or compaction finished.
    done_cv: Condvar,
    super_version: RwLock<Arc<SuperVersion>>,
    /// Shared by running background compactions, exclusive for a manual compaction, so the two
    /// never overlap.
    compaction_lock: RwLock<()>,
    listener: Option<Arc<dyn CompactionListener>>,
    started: Instant,
    /// Segment of the last record applied (raised after the records are in the memtable, by the
    /// one writer that applies): every record before that segment is in the index. Written on
    /// every write group, so an atomic rather than another turn of the state lock.
    applied_segment: AtomicU64,
}

/// The LSM-tree index.
pub struct LsmIndex {
    shared: Arc<Shared>,
    background: Mutex<Vec<JoinHandle<()>>>,
}

impl LsmIndex {
    /// Starts the index over recovered state and spawns its background thread.
    pub fn open(parts: LsmParts) -> Result<LsmIndex> {
        let options = parts.options;
        let table_options = TableOptions::from_options(&options);
        let block_cache = Arc::new(BlockCache::new(options.block_cache_capacity));
        let table_cache = Arc::new(TableCache::new(
            Arc::clone(&options.fs),
            parts.dir.clone(),
            options.max_open_files,
            Some(Arc::clone(&block_cache)),
            table_options,
        ));
        let policy: Box<dyn CompactionPolicy> = match options.compaction_policy {
            CompactionPolicyKind::Score => Box::new(ScorePolicy::default()),
            CompactionPolicyKind::TimeSlice { slice_ms, dynamic, drain_percent } => {
                Box::new(TimeSlicePolicy::new(TimeSliceConfig {
                    slice_ms,
                    dynamic,
                    drain_fraction: drain_percent.map(|p| f64::from(p.min(100)) / 100.0),
                    ..TimeSliceConfig::default()
                }))
            }
        };
        let version = parts.versions.current();
        // Nothing is in flight at open: every record in the log is applied.
        let applied_segment = AtomicU64::new(parts.vlog.head().segment.0);
        let super_version = Arc::new(SuperVersion { mem: Arc::clone(&parts.mem), imm: None, version });
        let shared = Arc::new(Shared {
            fs: Arc::clone(&options.fs),
            dir: parts.dir,
            vlog: parts.vlog,
            snapshots: parts.snapshots,
            last_sequence: parts.last_sequence,
            counters: parts.counters,
            table_options,
            block_cache,
            table_cache,
            state: Mutex::new(State {
                mem: parts.mem,
                imm: None,
                versions: parts.versions,
                pending_outputs: HashSet::new(),
                flushing: false,
                bg_error: None,
                shutting_down: false,
                policy,
                in_flight: InFlight::default(),
            }),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            super_version: RwLock::new(super_version),
            compaction_lock: RwLock::new(()),
            listener: options.compaction_listener.clone(),
            started: Instant::now(),
            applied_segment,
            options,
        });
        shared.delete_unlisted_files(true);
        let index = LsmIndex { shared, background: Mutex::new(Vec::new()) };
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

    /// The segments a garbage survey can count exactly: every live one before the segment of
    /// the last record applied (records are applied in log order, so all of theirs are in the
    /// index), except those holding records of inline values or deletes in a memtable, whose
    /// flush will charge them itself.
    fn surveyable_segments(&self) -> HashSet<SegmentId> {
        let state = self.shared.state.lock();
        let before = SegmentId(self.shared.applied_segment.load(Ordering::Acquire));
        let mut pending = state.mem.log_garbage();
        if let Some(imm) = &state.imm {
            pending.extend(imm.log_garbage());
        }
        self.shared
            .vlog
            .segments()
            .into_iter()
            .map(|seg| seg.id)
            .filter(|id| *id < before && !pending.contains_key(id))
            .collect()
    }
}

impl Drop for LsmIndex {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.super_version.read())
    }

    fn install_super_version(&self, state: &State) {
        let sv =
            SuperVersion { mem: Arc::clone(&state.mem), imm: state.imm.clone(), version: state.versions.current() };
        *self.super_version.write() = Arc::new(sv);
    }

    fn levels_snapshot(&self, version: &Version, in_flight: &InFlight) -> LevelsSnapshot {
        let o = &self.options;
        let levels = 0..version.num_levels();
        LevelsSnapshot {
            files: levels.clone().map(|l| version.files(l).len()).collect(),
            bytes: levels.clone().map(|l| version.level_bytes(l)).collect(),
            l0_trigger: o.level0_file_num_compaction_trigger,
            l0_slowdown: o.level0_slowdown_writes_trigger,
            l0_stop: o.level0_stop_writes_trigger,
            max_bytes: LevelsSnapshot::level_targets(
                o.num_levels,
                o.max_bytes_for_level_base,
                o.max_bytes_for_level_multiplier,
            ),
            compacting_bytes: levels.map(|l| in_flight.busy_bytes(version, l)).collect(),
            blocked: Vec::new(),
        }
    }

    fn scheduler_state(&self) -> SchedulerState {
        SchedulerState { now_ms: self.started.elapsed().as_millis() as u64 }
    }

    /// Publishes an edit of value-log bookkeeping (nothing to publish is fine); a failure
    /// poisons the index like any failed MANIFEST write.
    fn log_segment_edit(&self, state: &mut State, edit: VersionEdit) -> Result<()> {
        if edit.is_empty() {
            return Ok(());
        }
        let result = state.versions.log_and_apply(edit);
        if let Err(e) = &result {
            self.set_bg_error(state, e);
        }
        result
    }

    fn set_bg_error(&self, state: &mut State, err: &Error) {
        if state.bg_error.is_none() {
            state.bg_error = Some(err.to_string());
        }
        self.done_cv.notify_all();
    }

    fn background_loop(self: Arc<Self>) {
        let mut state = self.state.lock();
        loop {
            if state.shutting_down {
                break;
            }
            if state.bg_error.is_some() {
                self.work_cv.wait(&mut state);
                continue;
            }
            if state.imm.is_some() && !state.flushing {
                drop(state);
                self.flush_frozen_memtable();
                state = self.state.lock();
                continue;
            }
            // A manual compaction holds the lock exclusively; look again shortly.
            let Some(shared_guard) = self.compaction_lock.try_read() else {
                drop(state);
                std::thread::sleep(Duration::from_millis(10));
                state = self.state.lock();
                continue;
            };
            let Some((compaction, reason)) = self.pick_compaction(&mut state) else {
                drop(shared_guard);
                self.work_cv.wait(&mut state);
                continue;
            };
            let id = state.in_flight.register(&compaction);
            drop(state);
            let started_ms = self.scheduler_state().now_ms;
            let timer = Instant::now();
            let level_bytes = compaction.input_bytes().0;
            let result = self.run_compaction(compaction);
            let duration = timer.elapsed();
            drop(shared_guard);
            state = self.state.lock();
            state.in_flight.release(id);
            // At least 1 ms per compaction, so that a run of sub-millisecond moves still ends a slice.
            let done =
                FinishedCompaction { level: reason.0, duration_ms: (duration.as_millis() as u64).max(1), level_bytes };
            let now = self.scheduler_state();
            state.policy.on_compaction_done(&done, &now);
            let holder = state.policy.slice_holder();
            // Other workers may have found every candidate busy.
            self.work_cv.notify_all();
            match result {
                Ok(summary) => {
                    if let Some(listener) = self.listener.clone() {
                        drop(state);
                        listener.on_compaction_completed(&summary.event(reason.1, started_ms, duration, holder));
                        state = self.state.lock();
                    }
                }
                Err(e) => self.set_bg_error(&mut state, &e),
            }
        }
    }

    /// Asks the policy for a level and the picker for free inputs there. Levels whose every
    /// candidate conflicts with a running compaction are reported to the policy as blocked.
    fn pick_compaction(&self, state: &mut State) -> Option<(Compaction, (usize, PickReason))> {
        let version = state.versions.current();
        let mut levels = self.levels_snapshot(&version, &state.in_flight);
        let mut candidates: Vec<Option<Compaction>> = (0..version.num_levels().saturating_sub(1))
            .map(|level| {
                let pointer = state.versions.compact_pointer(level);
                picker::pick_free_inputs(&version, level, pointer, self.options.target_file_size, &state.in_flight)
            })
            .collect();
        levels.blocked = candidates.iter().map(Option::is_none).collect();
        levels.blocked.push(true);
        let sched = self.scheduler_state();
        let pick = state.policy.pick(&levels, &sched)?;
        let compaction = candidates.get_mut(pick.level)?.take()?;
        Some((compaction, (pick.level, pick.reason)))
    }

    /// Flushes the frozen memtable if there is one and no other flush is running.
    fn flush_frozen_memtable(&self) {
        let (imm, log_head, number) = {
            let mut state = self.state.lock();
            let Some(imm) = state.imm.clone() else { return };
            if state.flushing || state.bg_error.is_some() {
                return;
            }
            state.flushing = true;
            let number = state.versions.new_file_number();
            state.pending_outputs.insert(number);
            (imm, state.mem.log_start(), number)
        };
        let result = self.write_flush(&imm, log_head, number);
        let mut state = self.state.lock();
        state.flushing = false;
        state.pending_outputs.remove(&number);
        match result {
            Ok(()) => {
                state.imm = None;
                self.install_super_version(&state);
                Counters::add(&self.counters.flushes, 1);
            }
            Err(e) => self.set_bg_error(&mut state, &e),
        }
        self.done_cv.notify_all();
        self.work_cv.notify_all();
        drop(state);
        self.delete_obsolete_files();
    }

    fn write_flush(&self, imm: &Arc<Memtable>, log_head: crate::types::LogPosition, number: FileNumber) -> Result<()> {
        let mut edit = VersionEdit::default();
        if !imm.is_empty() {
            let mut numbers = Some(number);
            let mut next_number = || numbers.take().expect("a flush writes exactly one table");
            let mut sink = TableSink::new(&self.fs, &self.dir, self.table_options, u64::MAX, &mut next_number);
            let mut it = imm.iter();
            it.seek_to_first()?;
            while it.valid() {
                sink.add(it.key(), it.value())?;
                it.next()?;
            }
            let (outputs, bytes) = sink.finish()?;
            Counters::add(&self.counters.flush_bytes_written, bytes);
            for meta in outputs {
                edit.new_files.push((0, meta));
            }
        }
        // The table's pointers must not reach disk before the records they point to.
        self.vlog.sync()?;
        self.fs.sync_dir(&self.dir)?;
        edit.log_head = Some(log_head);
        edit.last_sequence = Some(SequenceNumber(self.last_sequence.load(Ordering::Acquire)));
        edit.segment_garbage = imm.log_garbage().into_iter().collect();
        let mut state = self.state.lock();
        edit.added_segments = self
            .vlog
            .segments()
            .into_iter()
            .map(|s| s.id)
            .filter(|id| state.versions.is_unrecorded_segment(*id))
            .collect();
        state.versions.log_and_apply(edit)
    }

    /// Runs one compaction (or trivial move) and publishes its result.
    fn run_compaction(&self, compaction: Compaction) -> Result<CompactionSummary> {
        let level = compaction.level;
        let mut summary = CompactionSummary {
            level,
            input_files: [compaction.inputs[0].len(), compaction.inputs[1].len()],
            input_bytes: {
                let (a, b) = compaction.input_bytes();
                [a, b]
            },
            ..CompactionSummary::default()
        };
        let mut edit = VersionEdit::default();
        if let Some(largest) = compaction.largest_input_key() {
            edit.compact_pointers.push((level, largest));
        }
        for (which, files) in compaction.inputs.iter().enumerate() {
            for f in files {
                edit.deleted_files.push((level + which, f.number));
            }
        }
        if compaction.is_trivial_move() {
            let file = &compaction.inputs[0][0];
            edit.new_files.push((level + 1, FileMetaData::clone(file)));
            let mut state = self.state.lock();
            state.versions.log_and_apply(edit)?;
            self.install_super_version(&state);
            self.done_cv.notify_all();
            drop(state);
            drop(compaction);
            self.delete_obsolete_files();
            summary.trivial_move = true;
            return Ok(summary);
        }

        let snapshots = self.snapshots.all();
        let mut allocated = Vec::new();
        let result = {
            let mut new_file_number = || {
                let mut state = self.state.lock();
                let n = state.versions.new_file_number();
                state.pending_outputs.insert(n);
                allocated.push(n);
                n
            };
            let mut preempt = || {
                self.flush_frozen_memtable();
                match self.state.lock().bg_error.clone() {
                    Some(e) => Err(Error::Poisoned(e)),
                    None => Ok(()),
                }
            };
            exec::run(
                &compaction,
                CompactionContext {
                    fs: &self.fs,
                    dir: &self.dir,
                    table_cache: &self.table_cache,
                    table_options: self.table_options,
                    snapshots,
                    new_file_number: &mut new_file_number,
                    preempt: &mut preempt,
                },
            )
        };
        let outcome = result.and_then(|res| {
            self.fs.sync_dir(&self.dir)?;
            Ok(res)
        });
        // Release the input version so its files can be judged obsolete below.
        drop(compaction);
        let mut state = self.state.lock();
        for n in &allocated {
            state.pending_outputs.remove(n);
        }
        let res = match outcome {
            Ok(res) => res,
            Err(e) => {
                drop(state);
                self.delete_obsolete_files();
                return Err(e);
            }
        };
        summary.output_files = res.outputs.len();
        summary.output_bytes = res.bytes_written;
        for meta in res.outputs {
            edit.new_files.push((level + 1, meta));
        }
        edit.segment_garbage =
            state.versions.new_garbage(res.garbage.iter().map(|d| (d.segment, d.bytes, d.shadowed_by)));
        state.versions.log_and_apply(edit)?;
        self.install_super_version(&state);
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_bytes_read, res.bytes_read);
        Counters::add(&self.counters.compaction_bytes_written, res.bytes_written);
        self.done_cv.notify_all();
        drop(state);
        self.delete_obsolete_files();
        Ok(summary)
    }

    /// Deletes files no live version needs, leaving alone outputs that may be in progress.
    fn delete_obsolete_files(&self) {
        self.delete_unlisted_files(false);
    }

    /// Deletes tables no live version references and superseded MANIFESTs. While the index
    /// runs, tables numbered at or above the next file number may be outputs being created after
    /// this snapshot of the live set, so they are left alone; at open (`at_open`) nothing is in
    /// progress, and such a table is what a crash left of an unfinished flush or compaction.
    fn delete_unlisted_files(&self, at_open: bool) {
        let (live, manifest, first_unknown) = {
            let mut state = self.state.lock();
            let mut live = state.versions.live_files();
            live.extend(state.pending_outputs.iter().copied());
            let first_unknown = if at_open { u64::MAX } else { state.versions.next_file_number() };
            (live, state.versions.manifest_number(), first_unknown)
        };
        let Ok(names) = self.fs.list(&self.dir) else { return };
        for name in names {
            let obsolete = match parse_file_name(&name) {
                Some(FileKind::Table(n)) => {
                    let dead = n.0 < first_unknown && !live.contains(&n);
                    if dead {
                        self.table_cache.evict(n);
                    }
                    dead
                }
                Some(FileKind::Manifest(n)) => n < manifest,
                _ => false,
            };
            if obsolete {
                // Best effort: a file left behind is found again next time.
                let _ = self.fs.remove(&self.dir.join(&name));
            }
        }
    }

    fn get_from_tables(
        &self,
        version: &Version,
        user_key: &[u8],
        seq: SequenceNumber,
        fill_cache: bool,
    ) -> Result<Option<IndexValue>> {
        let lookup = seek_key(user_key, seq);
        let mut found = None;
        let mut error = None;
        version.for_each_candidate(&lookup, |_level, file| {
            Counters::add(&self.counters.tables_probed, 1);
            let hit = self
                .table_cache
                .get_table(file.number, file.file_size)
                .and_then(|table| table.get(&lookup, fill_cache));
            match hit {
                Ok(Some((ikey, value))) => {
                    found = Some((ikey, value));
                    false
                }
                Ok(None) => true,
                Err(e) => {
                    error = Some(e);
                    false
                }
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        let Some((ikey, value)) = found else { return Ok(None) };
        let parsed = parse_internal_key(&ikey)
            .ok_or_else(|| Error::corruption(&self.dir, 0, "malformed internal key in table"))?;
        decode_index_value(parsed.kind, value).transpose()
    }
}

/// What one compaction did, before timing is attached.
#[derive(Debug, Default)]
struct CompactionSummary {
    level: usize,
    input_files: [usize; 2],
    input_bytes: [u64; 2],
    output_files: usize,
    output_bytes: u64,
    trivial_move: bool,
}

impl CompactionSummary {
    fn event(
        &self,
        reason: PickReason,
        start_ms: u64,
        duration: Duration,
        slice_holder: Option<usize>,
    ) -> CompactionEvent {
        CompactionEvent {
            level: self.level,
            reason,
            input_files: self.input_files,
            input_bytes: self.input_bytes,
            output_files: self.output_files,
            output_bytes: self.output_bytes,
            trivial_move: self.trivial_move,
            start_ms,
            duration_micros: duration.as_micros() as u64,
            slice_holder,
        }
    }
}

impl Index for LsmIndex {
    fn apply(&self, records: &[IndexRecord<'_>]) {
        let mem = Arc::clone(&self.shared.state.lock().mem);
        for r in records {
            if r.kind != ValueKind::Pointer {
                mem.note_log_garbage(r.log_pointer.segment, u64::from(r.log_pointer.len));
            }
            mem.insert(r.user_key, r.seq, r.kind, r.value.clone());
        }
        if let Some(last) = records.last() {
            self.shared.applied_segment.fetch_max(last.log_pointer.segment.0, Ordering::Release);
        }
    }

    fn make_room(&self, force: bool) -> Result<()> {
        let s = &self.shared;
        let o = &s.options;
        let mut allow_delay = !force;
        let mut force = force;
        let mut state = s.state.lock();
        loop {
            if let Some(e) = &state.bg_error {
                return Err(Error::Poisoned(e.clone()));
            }
            if state.shutting_down {
                return Err(Error::Closed);
            }
            let l0 = state.versions.current().files(0).len();
            if allow_delay && l0 >= o.level0_slowdown_writes_trigger {
                // Spread the slowdown over many writes instead of stopping one for long.
                drop(state);
                let start = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                Counters::add(&s.counters.stall_slowdown_micros, start.elapsed().as_micros() as u64);
                allow_delay = false;
                state = s.state.lock();
                continue;
            }
            let mem_full = state.mem.approximate_bytes() >= o.write_buffer_size;
            if !force && !mem_full {
                return Ok(());
            }
            // An empty memtable is frozen only to move the recorded log head past a sealed
            // segment (so GC may clean it); otherwise there is nothing to flush.
            if force && state.mem.is_empty() && state.mem.log_start() == s.vlog.head() {
                return Ok(());
            }
            if state.imm.is_some() || l0 >= o.level0_stop_writes_trigger {
                let start = Instant::now();
                s.work_cv.notify_all();
                s.done_cv.wait(&mut state);
                Counters::add(&s.counters.stall_stop_micros, start.elapsed().as_micros() as u64);
                continue;
            }
            let fresh = Arc::new(Memtable::new(s.vlog.head()));
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
        while state.imm.is_some() {
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

    fn get(&self, user_key: &[u8], seq: SequenceNumber, fill_cache: bool) -> Result<Option<IndexValue>> {
        let sv = self.shared.super_version();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.as_ref()) {
            match mem.get(user_key, seq) {
                Lookup::Found(kind, value) => return decode_index_value(kind, value).transpose(),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        self.shared.get_from_tables(&sv.version, user_key, seq, fill_cache)
    }

    fn iter(&self, fill_cache: bool) -> Result<Box<dyn InternalIterator>> {
        let s = &self.shared;
        let sv = s.super_version();
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(sv.mem.iter())];
        if let Some(imm) = &sv.imm {
            children.push(Box::new(imm.iter()));
        }
        for file in sv.version.files(0) {
            let table = s.table_cache.get_table(file.number, file.file_size)?;
            children.push(Box::new(table.iter(fill_cache)));
        }
        for level in 1..sv.version.num_levels() {
            let files = sv.version.files(level);
            if files.is_empty() {
                continue;
            }
            let level_files = files
                .iter()
                .map(|f| LevelFile {
                    id: f.number.0,
                    size: f.file_size,
                    smallest: f.smallest.0.clone(),
                    largest: f.largest.0.clone(),
                })
                .collect();
            let cache = Arc::clone(&s.table_cache);
            let open = Arc::new(move |f: &LevelFile| -> Result<Box<dyn InternalIterator>> {
                let table = cache.get_table(FileNumber(f.id), f.size)?;
                Ok(Box::new(table.iter(fill_cache)))
            });
            children.push(Box::new(LevelIterator::new(level_files, open)));
        }
        // The iterator keeps its super version, and so every file it may still open, alive.
        Ok(Box::new(KeepAlive { inner: MergingIterator::new(children), keep: sv }))
    }

    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        // The caller flushed through the write leader. Freezing the memtable here instead would
        // race the leader: records appended before the freeze but applied after it would land in
        // the new memtable, behind its log start, and a crash would skip them in replay.
        self.wait_for_flush()?;
        let s = &self.shared;
        let _guard = s.compaction_lock.write();
        // Like LevelDB: push the range down to the deepest level that already holds part of it,
        // so data ends where a full compaction would leave it without rewriting empty levels.
        let deepest = {
            let version = s.state.lock().versions.current();
            (1..version.num_levels()).rev().find(|&l| !version.overlapping_files(l, begin, end).is_empty()).unwrap_or(1)
        };
        for level in 0..deepest {
            let version = s.state.lock().versions.current();
            let picked = picker::range_inputs(&version, level, begin, end, s.options.target_file_size);
            drop(version);
            if let Some(c) = picked {
                let started_ms = s.scheduler_state().now_ms;
                let timer = Instant::now();
                let summary = s.run_compaction(c)?;
                if let Some(listener) = &s.listener {
                    let holder = s.state.lock().policy.slice_holder();
                    listener.on_compaction_completed(&summary.event(
                        PickReason::Manual,
                        started_ms,
                        timer.elapsed(),
                        holder,
                    ));
                }
            }
        }
        // Workers that found nothing to do before may find work in the new shape of the tree.
        s.work_cv.notify_all();
        Ok(())
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
        stats.manifest_bytes_written = s.state.lock().versions.manifest_bytes_written();
        let (head, segments) = self.log_segments();
        stats.log_head = (head.segment.0, head.offset);
        stats.segments = s
            .vlog
            .segments()
            .into_iter()
            .map(|seg| crate::stats::SegmentStatsReport {
                id: seg.id.0,
                bytes: seg.len,
                garbage_bytes: segments.get(&seg.id).map_or(0, |m| m.garbage_bytes),
            })
            .collect();
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
                            "L{level} #{} {} bytes [{:?} .. {:?}]\n",
                            f.number, f.file_size, f.smallest, f.largest
                        ));
                    }
                }
                Some(out)
            }
            "splitkv.total-sst-bytes" => {
                Some((0..sv.version.num_levels()).map(|l| sv.version.level_bytes(l)).sum::<u64>().to_string())
            }
            "splitkv.compaction-slice-holder" => Some(
                self.shared.state.lock().policy.slice_holder().map_or_else(|| "none".to_string(), |l| l.to_string()),
            ),
            "splitkv.memtable-bytes" => {
                Some((sv.mem.approximate_bytes() + sv.imm.as_ref().map_or(0, |m| m.approximate_bytes())).to_string())
            }
            _ => None,
        }
    }

    fn log_segments(&self) -> (LogPosition, BTreeMap<SegmentId, SegmentMeta>) {
        let state = self.shared.state.lock();
        (state.versions.log_head(), state.versions.segments().clone())
    }

    fn remove_segments(&self, ids: &[SegmentId]) -> Result<()> {
        let mut state = self.shared.state.lock();
        let removed_segments: Vec<SegmentId> =
            ids.iter().copied().filter(|id| state.versions.segments().contains_key(id)).collect();
        self.shared.log_segment_edit(&mut state, VersionEdit { removed_segments, ..VersionEdit::default() })
    }

    fn record_skipped(&self, id: SegmentId, ranges: &[(u64, u64)]) -> Result<()> {
        let mut state = self.shared.state.lock();
        let skipped_ranges = if state.versions.segments().contains_key(&id) {
            ranges.iter().map(|&(start, end)| (id, start, end)).collect()
        } else {
            Vec::new()
        };
        self.shared.log_segment_edit(&mut state, VersionEdit { skipped_ranges, ..VersionEdit::default() })
    }

    fn survey_garbage(&self, horizon: SequenceNumber) -> Result<()> {
        let s = &self.shared;
        // No compaction may publish drops while the survey counts: a drop it counted as live
        // (shadowed after the horizon) and published before the survey's edit would be erased
        // by it. Flushes go on; they only touch segments from the log head on.
        let _no_compactions = s.compaction_lock.write();
        let surveyed = self.surveyable_segments();
        let mut live: BTreeMap<SegmentId, u64> = BTreeMap::new();
        let mut it = self.iter(false)?;
        it.seek_to_first()?;
        let mut key: Option<Vec<u8>> = None;
        let mut newer: Option<SequenceNumber> = None;
        while it.valid() {
            let parsed = parse_internal_key(it.key())
                .ok_or_else(|| Error::corruption(&s.dir, 0, "malformed internal key in the index"))?;
            if key.as_deref() != Some(parsed.user_key) {
                key = Some(parsed.user_key.to_vec());
                newer = None;
            }
            let shadowed = newer.is_some_and(|n| n <= horizon);
            if !shadowed && parsed.kind == ValueKind::Pointer {
                let ptr = ValuePointer::decode(it.value())
                    .ok_or_else(|| Error::corruption(&s.dir, 0, "malformed value pointer in the index"))?;
                if surveyed.contains(&ptr.segment) {
                    *live.entry(ptr.segment).or_default() += u64::from(ptr.len);
                }
            }
            newer = Some(parsed.sequence);
            it.next()?;
        }
        drop(it);
        let lengths: BTreeMap<SegmentId, u64> = s.vlog.segments().into_iter().map(|seg| (seg.id, seg.len)).collect();
        let mut state = s.state.lock();
        // Segments the next flush would record are recorded now, so their counts stick.
        let added_segments = surveyed.iter().copied().filter(|id| state.versions.is_unrecorded_segment(*id)).collect();
        let garbage_surveys = surveyed
            .iter()
            .filter_map(|id| {
                let records = lengths.get(id)?.saturating_sub(SEGMENT_HEADER_LEN);
                let live = live.get(id).copied().unwrap_or(0);
                Some(GarbageSurvey { segment: *id, garbage_bytes: records.saturating_sub(live), horizon })
            })
            .collect();
        s.log_segment_edit(&mut state, VersionEdit { added_segments, garbage_surveys, ..VersionEdit::default() })
    }

    fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.shutting_down = true;
            self.shared.work_cv.notify_all();
            self.shared.done_cv.notify_all();
        }
        let workers = std::mem::take(&mut *self.background.lock());
        for handle in workers {
            let _ = handle.join();
        }
    }
}
