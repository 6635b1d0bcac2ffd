//! Opening a database: recovery of the catalog and the value log, the index of the kind the
//! options name, and replay of the log tail through that index.
//!
//! Recovery order:
//! 1. the catalog (MANIFEST): tables, value-log segments and their garbage, the log head; then
//!    the leftovers of an earlier run are removed: temporary files (`*.tmp`) and MANIFESTs that
//!    `CURRENT` does not name. This comes before the index starts its background workers: a
//!    worker's first edit starts a new MANIFEST through `CURRENT.tmp`, which is no leftover;
//! 2. the value log: segment files; a segment before the head that the catalog no longer lists
//!    was released by GC just before a crash, and only its file deletion was lost;
//! 3. the index (`Options::index`), over the catalog;
//! 4. replay of every complete batch from the log head through `Index::apply`, the same call
//!    the write path makes, then an fsync of the replayed segments (they may exist only in the
//!    page cache after a process crash, and tables pointing at them may follow);
//! 5. ranges recorded as skipped are punched again (a crash may have come before the punch);
//! 6. the `OPTIONS` file is replaced by the options of this open, then the background GC thread
//!    starts.
//!
//! Once the lock is held, a new `LOG` is started; each step above reports what it found and
//! how long it took there (`info_log`). Before step 1 the shape options are checked against the
//! stored `OPTIONS` file (see `options_file`): a database is never read with an index kind or
//! level count it was not made with. `read_only` opens without any of the writes above (no `LOG`
//! file either), beside a live writer.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};
use tracing::Level;

use super::commit_gate::CommitGate;
use super::gc_host::{SurveyMaps, SurveyMark};
use super::keyspace::Keyspaces;
use super::publish::PublishOrder;
use super::shards::ShardFront;
use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::filenames::{current_file, lock_file, parse_file_name, segment_file, FileKind};
use crate::fs::{FileLock, FileSystem, RandomAccessFile};
use crate::index::{self, Index, IndexParts, IndexRecord, LogLink};
use crate::info_log::{log_event, InfoLog};
use crate::options::{GcPolicyKind, IndexKind, Options};
use crate::options_file::{check_shape, write_options_file};
use crate::snapshot::SnapshotList;
use crate::stats::{Counters, LatencyHistograms, StripedCounter};
use crate::types::{FileNumber, LogPosition, SegmentId};
use crate::version::{Catalog, VersionSet};
use crate::vlog::gc::{
    punch_ranges, CostBenefitPolicy, GarbageCollector, GcPolicy, GcSettings, GreedyPolicy, OldestPolicy,
};
use crate::vlog::prefetch::PrefetchPool;
use crate::vlog::{RecordKind, ReplayedRecord, ValueLog, VlogOptions};

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
        // Refused before anything is written, the LOG included: a mistaken open rotates nothing.
        if fs.exists(&current_file(&dir)) {
            check_shape(&dir, &options)?;
        }
        // Only the holder of the lock may start a new LOG (rotating the live one away).
        let opened_at = Instant::now();
        let info_log = Arc::new(InfoLog::open(Arc::clone(&fs), &dir, &options.info_log));
        log_event!(
            info_log,
            Level::INFO,
            version = env!("CARGO_PKG_VERSION"),
            index = ?options.index,
            value_threshold = options.value_threshold,
            write_buffer_size = options.write_buffer_size,
            segment_size = options.segment_size,
            compaction = ?options.compaction_policy,
            gc = ?options.gc_policy,
            "opening database"
        );
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
        // Nothing else touches the directory yet, so whatever these name is a leftover.
        remove_leftovers(fs.as_ref(), &dir, versions.manifest_number());
        let recorded_sequence = versions.last_sequence();
        let manifest_number = versions.manifest_number();
        let catalog = Arc::new(Catalog::new(versions));
        let (log_head, recorded) = catalog.log_segments();
        let tables: usize = {
            let current = catalog.lock().current();
            (0..current.num_levels()).map(|l| current.files(l).len()).sum()
        };
        log_event!(
            info_log,
            Level::INFO,
            manifest = manifest_number.0,
            tables,
            segments = recorded.len(),
            last_sequence = recorded_sequence.0,
            log_head = %format_args!("{}:{}", log_head.segment.0, log_head.offset),
            micros = opened_at.elapsed().as_micros() as u64,
            "recovered MANIFEST"
        );

        let vlog = Arc::new(ValueLog::open(
            Arc::clone(&fs),
            &dir,
            VlogOptions { segment_size: options.segment_size, buffer_size: options.vlog_buffer_size },
        )?);
        for seg in vlog.segments() {
            if seg.id < log_head.segment && !recorded.contains_key(&seg.id) {
                vlog.remove_segment(seg.id)?;
            }
        }
        let newest_known = recorded.keys().next_back().copied().unwrap_or_default();
        vlog.reserve_ids_below(SegmentId(newest_known.0.max(log_head.segment.0) + 1));

        let recovered =
            Recovered::open_index(&options, &dir, catalog, vlog, false, HashMap::new(), Arc::clone(&info_log))?;
        let Recovered { ref vlog, ref index, ref last_sequence, .. } = recovered;
        let replay_started = Instant::now();
        let replayed = recovered.replay_tail(&options, &dir, log_head)?;
        if replayed.batches > 0 {
            // The replayed records may exist only in the page cache (a process crash); make them
            // durable before tables that point at them can be written.
            for seg in vlog.segments() {
                if seg.id >= log_head.segment {
                    fs.open_append(&segment_file(&dir, seg.id))?.sync()?;
                }
            }
        }
        log_event!(
            info_log,
            Level::INFO,
            from = %format_args!("{}:{}", log_head.segment.0, log_head.offset),
            batches = replayed.batches,
            records = replayed.records,
            bytes = replayed.bytes,
            last_sequence = last_sequence.load(Ordering::Acquire),
            micros = replay_started.elapsed().as_micros() as u64,
            "replayed value log"
        );
        // A memtable rebuilt from a long log tail can exceed the write buffer; freeze it now so
        // reads do not search one oversized skiplist until the next write arrives.
        index.make_room(false)?;

        let gc = new_collector(&options);
        // Ranges recorded as skipped may not have been punched before a crash (the punch waits
        // for readers); punching is idempotent, so punch them all again.
        let live_segments: Vec<SegmentId> = vlog.segments().iter().map(|s| s.id).collect();
        for (id, meta) in recorded.iter().filter(|(id, meta)| !meta.skipped.is_empty() && live_segments.contains(id)) {
            if let Some(bytes) = punch_ranges(fs.as_ref(), &segment_file(&dir, *id), &meta.skipped)? {
                gc.note_punched(*id, bytes);
            }
        }
        // Last, so that only an open that succeeded replaces what tools reopen with.
        write_options_file(fs.as_ref(), &dir, &options)?;
        let background_gc = options.background_gc;
        let inner = recovered.into_inner(options, dir, gc, Some(lock));
        if inner.gc.moves_in_compaction() {
            // Compactions ask GC which segments to empty (relocation through compaction).
            let db = Arc::downgrade(&inner);
            inner.vlog.moves().set_planner(Arc::new(move |among| {
                let Some(db) = db.upgrade() else { return Vec::new() };
                db.gc.plan_moves(db.as_ref(), among).unwrap_or_default()
            }));
        }
        // `shards` 0 and 1 both mean no shards: every write takes the group-commit path.
        let front = match inner.options.index {
            IndexKind::Hash { shards, .. } if shards >= 2 => Some(ShardFront::start(&inner, shards)?),
            _ => None,
        };
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
        let db = Db { inner, gc_thread: Mutex::new(gc_thread), front, keyspaces: Keyspaces::default() };
        db.keyspaces.load(&db)?;
        log_event!(db.inner.info_log, Level::INFO, micros = opened_at.elapsed().as_micros() as u64, "opened database");
        Ok(db)
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
}

/// What recovery has opened, before the database starts: the parts of a [`DbInner`] that
/// both read-write and read-only opens build the same way.
pub(super) struct Recovered {
    pub(super) catalog: Arc<Catalog>,
    pub(super) vlog: Arc<ValueLog>,
    pub(super) index: Arc<dyn Index>,
    snapshots: Arc<SnapshotList>,
    pub(super) last_sequence: Arc<AtomicU64>,
    counters: Arc<Counters>,
    info_log: Arc<InfoLog>,
}

/// What the replay of the log tail applied.
pub(super) struct Replayed {
    pub(super) batches: u64,
    pub(super) records: u64,
    pub(super) bytes: u64,
}

impl Recovered {
    /// Opens the index `options` name over the catalog and the value log, with the last
    /// sequence number the catalog records (the replay raises it).
    pub(super) fn open_index(
        options: &Options,
        dir: &Path,
        catalog: Arc<Catalog>,
        vlog: Arc<ValueLog>,
        read_only: bool,
        pinned_tables: HashMap<FileNumber, Arc<dyn RandomAccessFile>>,
        info_log: Arc<InfoLog>,
    ) -> Result<Recovered> {
        let last_sequence = Arc::new(AtomicU64::new(catalog.lock().last_sequence().0));
        let snapshots = Arc::new(SnapshotList::default());
        let counters =
            Arc::new(Counters { latency: LatencyHistograms::new(options.latency_histograms), ..Counters::default() });
        let index = index::open(IndexParts {
            options: options.clone(),
            dir: dir.to_path_buf(),
            catalog: Arc::clone(&catalog),
            log: Arc::clone(&vlog) as Arc<dyn LogLink>,
            snapshots: Arc::clone(&snapshots),
            last_sequence: Arc::clone(&last_sequence),
            counters: Arc::clone(&counters),
            info_log: Arc::clone(&info_log),
            read_only,
            pinned_tables,
        })?;
        Ok(Recovered { catalog, vlog, index, snapshots, last_sequence, counters, info_log })
    }

    /// Replays every complete batch of the log from `head` through `Index::apply`.
    pub(super) fn replay_tail(&self, options: &Options, dir: &Path, head: LogPosition) -> Result<Replayed> {
        let (index, last_sequence) = (&self.index, &self.last_sequence);
        let threshold = options.value_threshold;
        let mut replayed = Replayed { batches: 0, records: 0, bytes: 0 };
        self.vlog.replay(head, &mut |batch: &[ReplayedRecord]| {
            if let Some(r) = batch.iter().find(|r| r.kind == RecordKind::DeleteRange) {
                if !index.supports_range_deletes() {
                    return Err(Error::corruption(
                        segment_file(dir, r.pointer.segment),
                        r.pointer.offset,
                        "a range-delete record in the log of an index that never writes one",
                    ));
                }
            }
            // Values a compaction moved are not writes: only the tables it wrote point at them,
            // and their sequence numbers are the moved versions' own, older than the log around
            // them.
            let writes = batch.iter().filter(|r| r.kind != RecordKind::Moved);
            let records: Vec<IndexRecord<'_>> =
                writes.map(|r| IndexRecord::from_log(&r.key, r.seq, r.kind, &r.value, r.pointer, threshold)).collect();
            index.apply(&records);
            if let Some(last) = records.last() {
                last_sequence.fetch_max(last.seq.0, Ordering::Release);
            }
            replayed.batches += 1;
            replayed.records += batch.len() as u64;
            replayed.bytes += batch.iter().map(|r| u64::from(r.pointer.len)).sum::<u64>();
            Ok(())
        })?;
        Ok(replayed)
    }

    /// The database's shared state over what was recovered; `lock` is `None` when read-only.
    pub(super) fn into_inner(
        self,
        options: Options,
        dir: PathBuf,
        gc: GarbageCollector,
        lock: Option<Box<dyn FileLock>>,
    ) -> Arc<DbInner> {
        let prefetch_threads = options.prefetch_threads;
        // Nothing is in flight at open: every record in the log is applied.
        let applied_segment = AtomicU64::new(self.vlog.head().segment.0);
        let last_assigned = self.last_sequence.load(Ordering::Acquire);
        Arc::new(DbInner {
            options,
            dir,
            vlog: self.vlog,
            catalog: self.catalog,
            index: self.index,
            snapshots: self.snapshots,
            last_sequence: self.last_sequence,
            applied_segment,
            counters: self.counters,
            prefetch: Arc::new(PrefetchPool::new(prefetch_threads)),
            scan_values_cached: Arc::new(AtomicBool::new(false)),
            scan_readaround: Arc::default(),
            read_ahead_bytes: Arc::default(),
            point_values_cached: AtomicBool::new(false),
            writers: Mutex::new(VecDeque::new()),
            commit_gate: CommitGate::default(),
            log_order: Mutex::new(last_assigned),
            publish: PublishOrder::default(),
            poisoned: Mutex::new(None),
            gc,
            gc_barrier: RwLock::new(()),
            gc_stop: AtomicBool::new(false),
            gc_wake: (Mutex::new(()), Condvar::new()),
            gc_failure: Mutex::new(None),
            last_survey: Mutex::new(SurveyMark::default()),
            survey_maps: Mutex::new(SurveyMaps::default()),
            separated_bytes_written: StripedCounter::default(),
            space_checked_at: AtomicU64::new(0),
            space_pressed: AtomicBool::new(false),
            info_log: self.info_log,
            read_only: lock.is_none(),
            _lock: lock,
        })
    }
}

/// The value-log collector `options` describe.
pub(super) fn new_collector(options: &Options) -> GarbageCollector {
    GarbageCollector::new(
        gc_policy(options.gc_policy),
        GcSettings {
            garbage_ratio: options.gc_garbage_ratio,
            space_budget: options.gc_space_budget,
            space_amplification: options.gc_space_amplification,
            space_trigger: options.gc_space_trigger,
            punch_holes: options.gc_punch_holes,
            logical_space_factor: options.gc_logical_space_factor,
            rewrite_order: options.gc_rewrite_order,
            moves_in_compaction: options.gc_in_compaction && options.index == IndexKind::Lsm,
            // The hash index's snapshot reads walk version chains through the log, which a
            // compaction's dropped records would cut; punching would hit the wrong bytes.
            compact_in_place: options.gc_compact_in_place && options.index == IndexKind::Lsm && !options.gc_punch_holes,
        },
        options.segment_size,
    )
}

/// The value-log GC policy `kind` names.
fn gc_policy(kind: GcPolicyKind) -> Box<dyn GcPolicy> {
    match kind {
        GcPolicyKind::Oldest => Box::new(OldestPolicy),
        GcPolicyKind::Greedy => Box::new(GreedyPolicy),
        GcPolicyKind::CostBenefit => Box::new(CostBenefitPolicy),
    }
}

/// Removes what an earlier run left in `dir`: temporary files (a crash during a rename-over)
/// and MANIFESTs other than `live`, the one `CURRENT` names (superseded ones whose removal was
/// lost, and new ones whose switch failed or was cut by a crash). Best effort: a file left
/// behind is found again at the next open. Must run before the index starts background work,
/// which writes temporary files and new MANIFESTs of its own.
fn remove_leftovers(fs: &dyn FileSystem, dir: &Path, live: FileNumber) {
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        let leftover = match parse_file_name(&name) {
            Some(FileKind::Temp) => true,
            Some(FileKind::Manifest(n)) => n != live,
            _ => false,
        };
        if leftover {
            let _ = fs.remove(&dir.join(name));
        }
    }
}
