//! Engine statistics: counters updated on the hot paths (relaxed atomics) and a point-in-time
//! [`Stats`] report with per-level and per-segment detail.
//!
//! Write amplification is `(value-log + SSTable + MANIFEST bytes written) / user bytes written`,
//! counted by the engine itself so that benchmarks can cross-check it against the OS's
//! `/proc/self/io` figure.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Hot-path counters, shared by every thread of one database.
#[derive(Debug, Default)]
pub struct Counters {
    /// Key + value bytes of user writes.
    pub user_bytes_written: AtomicU64,
    /// Bytes written to SSTables by flushes.
    pub flush_bytes_written: AtomicU64,
    /// Bytes written to SSTables by compactions.
    pub compaction_bytes_written: AtomicU64,
    /// Bytes of SSTables read by compactions.
    pub compaction_bytes_read: AtomicU64,
    /// Memtable flushes completed.
    pub flushes: AtomicU64,
    /// Compactions completed.
    pub compactions: AtomicU64,
    /// Microseconds writers spent delayed because L0 reached the slowdown trigger.
    pub stall_slowdown_micros: AtomicU64,
    /// Microseconds writers spent stopped (L0 stop trigger or memtable full while flushing).
    pub stall_stop_micros: AtomicU64,
    /// Microseconds writers waited for value-log GC to bring the log under its space limits.
    pub stall_gc_micros: AtomicU64,
    /// Garbage surveys (walks of the whole index counting each segment's garbage).
    pub gc_surveys: AtomicU64,
    /// Microseconds spent in garbage surveys.
    pub gc_survey_micros: AtomicU64,
    /// Point lookups served.
    pub gets: AtomicU64,
    /// Keys written by users (puts and deletes), for the adaptive index's write intensity.
    pub keys_written: AtomicU64,
    /// Value-log reads made to resolve pointers.
    pub vlog_reads: AtomicU64,
    /// SSTables consulted by point lookups (for read amplification).
    pub tables_probed: AtomicU64,
    /// SSTables dropped whole because a range delete covered them.
    pub tables_dropped_by_range_deletes: AtomicU64,
}

impl Counters {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// One LSM level in a [`Stats`] report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// SSTables in the level.
    pub files: usize,
    /// Bytes of those SSTables.
    pub bytes: u64,
}

/// One value-log segment in a [`Stats`] report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentStatsReport {
    /// Segment id.
    pub id: u64,
    /// File length.
    pub bytes: u64,
    /// Bytes known to be garbage (recorded by flushes and compactions).
    pub garbage_bytes: u64,
}

/// A point-in-time report of a database.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Key + value bytes of user writes since open.
    pub user_bytes_written: u64,
    /// Bytes appended to the value log since open.
    pub vlog_bytes_written: u64,
    /// SSTable bytes written by flushes since open.
    pub flush_bytes_written: u64,
    /// SSTable bytes written by compactions since open.
    pub compaction_bytes_written: u64,
    /// SSTable bytes read by compactions since open.
    pub compaction_bytes_read: u64,
    /// MANIFEST bytes written since open.
    pub manifest_bytes_written: u64,
    /// Flushes since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Microseconds of slowdown stalls.
    pub stall_slowdown_micros: u64,
    /// Microseconds of stop stalls.
    pub stall_stop_micros: u64,
    /// Microseconds writers waited for GC to free value-log space.
    pub stall_gc_micros: u64,
    /// Garbage surveys run.
    pub gc_surveys: u64,
    /// Microseconds spent in garbage surveys.
    pub gc_survey_micros: u64,
    /// Point lookups.
    pub gets: u64,
    /// Value-log reads.
    pub vlog_reads: u64,
    /// SSTables probed by point lookups.
    pub tables_probed: u64,
    /// SSTables dropped whole by range deletes.
    pub tables_dropped_by_range_deletes: u64,
    /// Range deletes that still cover data (in memtables and the version).
    pub range_deletes: u64,
    /// Partitions of the key space (1 without split keys).
    pub partitions: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Last sequence number.
    pub last_sequence: u64,
    /// Value-log position recovery would replay from.
    pub log_head: (u64, u64),
    /// Per-level files and bytes.
    pub levels: Vec<LevelStats>,
    /// Per-segment sizes and garbage.
    pub segments: Vec<SegmentStatsReport>,
    /// Bytes in the memtables.
    pub memtable_bytes: u64,
    /// Value-log GC runs that cleaned or punched a segment.
    pub gc_runs: u64,
    /// Bytes GC read from victim segments.
    pub gc_bytes_read: u64,
    /// Value bytes GC rewrote at the log head.
    pub gc_bytes_relocated: u64,
    /// Bytes GC freed by punching holes.
    pub gc_bytes_punched: u64,
    /// Segments GC deleted.
    pub gc_segments_released: u64,
    /// Bytes the database's files occupy on the medium.
    pub disk_bytes: u64,
    /// The hash table, in the hash index mode.
    pub hash_table: Option<HashTableStats>,
    /// SSTable index blocks: learned models and binary indexes, in the LSM mode.
    pub index_blocks: IndexBlockStats,
}

/// Figures about SSTable index blocks (TridentKV's learned index). Sizes and errors cover the
/// tables of the current version that are open in the table cache; counters cover since open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IndexBlockStats {
    /// Open tables indexed by a model (written with one, or trained lazily).
    pub learned_tables: u64,
    /// Open tables indexed by binary search.
    pub binary_tables: u64,
    /// Encoded bytes of the models of the learned tables.
    pub model_bytes: u64,
    /// Encoded bytes of the binary index blocks.
    pub binary_index_bytes: u64,
    /// Largest error bound of any model, in entries.
    pub max_error: u64,
    /// Mean error bound over the models' entries.
    pub mean_error: f64,
    /// Tables written with a model since open.
    pub built_learned: u64,
    /// Tables whose trained model was rejected at write time (too large or too wrong), which got
    /// a binary index instead.
    pub build_rejections: u64,
    /// Tables trained lazily since open.
    pub lazy_trained: u64,
    /// Lazy trainings whose model was rejected.
    pub lazy_rejections: u64,
    /// Mean nanoseconds of an index lookup through a model (sampled; 0 if none).
    pub learned_lookup_nanos: f64,
    /// Mean nanoseconds of an index lookup by binary search (sampled; 0 if none).
    pub binary_lookup_nanos: f64,
}

/// Figures about the persistent hash table of the hash index mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashTableStats {
    /// Buckets (normal-region slots; the collision region has as many).
    pub buckets: u64,
    /// Keys in the table (values and tombstones).
    pub entries: u64,
    /// Of those, tombstones kept for older snapshots.
    pub tombstones: u64,
    /// Collision-region slots in use.
    pub collision_used: u64,
    /// Bytes of the table file.
    pub file_bytes: u64,
    /// Keys written since the last checkpoint (in memory, not yet in the table).
    pub recent_keys: u64,
    /// Checkpoints since open.
    pub checkpoints: u64,
    /// Times the table grew since open.
    pub growths: u64,
}

impl Stats {
    pub(crate) fn fill_counters(&mut self, c: &Counters) {
        self.user_bytes_written = Counters::get(&c.user_bytes_written);
        self.flush_bytes_written = Counters::get(&c.flush_bytes_written);
        self.compaction_bytes_written = Counters::get(&c.compaction_bytes_written);
        self.compaction_bytes_read = Counters::get(&c.compaction_bytes_read);
        self.flushes = Counters::get(&c.flushes);
        self.compactions = Counters::get(&c.compactions);
        self.stall_slowdown_micros = Counters::get(&c.stall_slowdown_micros);
        self.stall_stop_micros = Counters::get(&c.stall_stop_micros);
        self.stall_gc_micros = Counters::get(&c.stall_gc_micros);
        self.gc_surveys = Counters::get(&c.gc_surveys);
        self.gc_survey_micros = Counters::get(&c.gc_survey_micros);
        self.gets = Counters::get(&c.gets);
        self.vlog_reads = Counters::get(&c.vlog_reads);
        self.tables_probed = Counters::get(&c.tables_probed);
        self.tables_dropped_by_range_deletes = Counters::get(&c.tables_dropped_by_range_deletes);
    }

    /// Total bytes the engine wrote to files since open.
    pub fn engine_bytes_written(&self) -> u64 {
        self.vlog_bytes_written + self.flush_bytes_written + self.compaction_bytes_written + self.manifest_bytes_written
    }

    /// Engine bytes written per user byte (0 before any write).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.engine_bytes_written() as f64 / self.user_bytes_written as f64
        }
    }

    /// Bytes of all SSTables.
    pub fn sstable_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// Bytes of all value-log segments.
    pub fn vlog_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Bytes of value-log segments known to be garbage.
    pub fn vlog_garbage_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.garbage_bytes).sum()
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = 1024.0 * 1024.0;
        writeln!(f, "Level  Files  Size(MiB)")?;
        for l in self.levels.iter().filter(|l| l.files > 0) {
            writeln!(f, "{:>5} {:>6} {:>10.1}", l.level, l.files, l.bytes as f64 / MIB)?;
        }
        if let Some(h) = &self.hash_table {
            writeln!(
                f,
                "Hash table: {} keys ({} tombstones) + {} in memory, {} buckets, {} collision slots used, {:.1} MiB; {} checkpoints, {} growths",
                h.entries,
                h.tombstones,
                h.recent_keys,
                h.buckets,
                h.collision_used,
                h.file_bytes as f64 / MIB,
                h.checkpoints,
                h.growths
            )?;
        }
        writeln!(
            f,
            "Value log: {} segments, {:.1} MiB, {:.1} MiB known garbage; head {}:{}",
            self.segments.len(),
            self.vlog_bytes() as f64 / MIB,
            self.vlog_garbage_bytes() as f64 / MIB,
            self.log_head.0,
            self.log_head.1
        )?;
        writeln!(
            f,
            "Writes: user {:.1} MiB, vlog {:.1} MiB, flush {:.1} MiB, compaction {:.1} MiB, manifest {:.2} MiB; write amplification {:.2}",
            self.user_bytes_written as f64 / MIB,
            self.vlog_bytes_written as f64 / MIB,
            self.flush_bytes_written as f64 / MIB,
            self.compaction_bytes_written as f64 / MIB,
            self.manifest_bytes_written as f64 / MIB,
            self.write_amplification()
        )?;
        writeln!(
            f,
            "Flushes {}, compactions {} (read {:.1} MiB); stalls: slowdown {:.3} s, stop {:.3} s, gc {:.3} s",
            self.flushes,
            self.compactions,
            self.compaction_bytes_read as f64 / MIB,
            self.stall_slowdown_micros as f64 / 1e6,
            self.stall_stop_micros as f64 / 1e6,
            self.stall_gc_micros as f64 / 1e6
        )?;
        writeln!(
            f,
            "GC: {} runs, read {:.1} MiB, relocated {:.1} MiB, punched {:.1} MiB, {} segments released, {} surveys ({:.3} s); on disk {:.1} MiB",
            self.gc_runs,
            self.gc_bytes_read as f64 / MIB,
            self.gc_bytes_relocated as f64 / MIB,
            self.gc_bytes_punched as f64 / MIB,
            self.gc_segments_released,
            self.gc_surveys,
            self.gc_survey_micros as f64 / 1e6,
            self.disk_bytes as f64 / MIB
        )?;
        write!(
            f,
            "Reads: {} gets, {} vlog reads, {} tables probed; block cache {} hits / {} misses",
            self.gets, self.vlog_reads, self.tables_probed, self.block_cache_hits, self.block_cache_misses
        )?;
        if self.partitions > 0 {
            write!(
                f,
                "\nPartitions: {}; {} range deletes live, {} tables dropped by range deletes",
                self.partitions, self.range_deletes, self.tables_dropped_by_range_deletes
            )?;
        }
        Ok(())
    }
}
