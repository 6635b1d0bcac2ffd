//! Options for opening a database, reading and writing.
//!
//! Defaults follow LevelDB where the concept is the same (L0 triggers, level multiplier, block
//! restart interval, bloom bits) and are chosen by measurement where key-value separation
//! changes the trade-off (value threshold, memtable and level sizes); `docs/design.md` records why.

use std::fmt;
use std::sync::Arc;

use crate::compaction::CompactionListener;
use crate::fs::{FileSystem, OsFileSystem};
pub use crate::info_log::InfoLogOptions;
use crate::snapshot::Snapshot;
use crate::sstable::TableOptions;
pub use crate::sstable::{CompressionType, IndexBlockKind};

/// Which index maps keys to values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IndexKind {
    /// Memtable + leveled SSTables.
    #[default]
    Lsm,
    /// The SSHKV mode: a persistent hash table on a memory-mapped file (`HASHINDEX`), values
    /// in the log. Point reads cost one value read; ordered scans sort every key.
    Hash {
        /// Buckets of a new table (it grows when full); about the number of keys expected.
        capacity: u64,
        /// Request shards of the half-sync/half-async front end. 0 or 1: none; every write
        /// takes the group-commit path on the caller's thread (the default, and the faster on
        /// the 2-core machine measured in `docs/results/hashmode.md`). N >= 2: point reads and
        /// single-shard batches are hashed by key to N queues, each drained by a worker thread
        /// that commits its group beside the others (only the log append is serial); batches
        /// spanning shards, flushes and GC take the group-commit path, alone. The shards share
        /// the value log and the table file (`docs/design.md`, "Request shards").
        shards: usize,
    },
}

/// Which compaction picking policy runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompactionPolicyKind {
    /// LevelDB-style scores with L0 slowdown/stop boosts.
    #[default]
    Score,
    /// The Slot time-slice round-robin scheduler (`compaction::TimeSlicePolicy`): one level at a
    /// time holds `slice_ms` of compaction time.
    TimeSlice {
        /// Compaction time per grant (with `dynamic`, the fallback and the clamp's reference).
        slice_ms: u64,
        /// Size each grant from the level's excess over its measured drain rate.
        dynamic: bool,
        /// Release the slice once this percentage of the excess at the grant is drained.
        drain_percent: Option<u8>,
    },
}

impl CompactionPolicyKind {
    /// The time-slice policy with a static slice and no partial drain.
    pub fn time_slice(slice_ms: u64) -> Self {
        CompactionPolicyKind::TimeSlice { slice_ms, dynamic: false, drain_percent: None }
    }
}

/// Which value-log segment GC picks first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GcPolicyKind {
    /// The oldest segment with garbage first (WiscKey's tail-first GC).
    Oldest,
    /// The segment with the most garbage first (SSHKV).
    #[default]
    Greedy,
    /// Garbage ratio weighted by age (LFS cost-benefit).
    CostBenefit,
}

impl GcPolicyKind {
    /// Parses `oldest`, `greedy` or `costbenefit` (bench and CLI flags).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "oldest" => Some(GcPolicyKind::Oldest),
            "greedy" => Some(GcPolicyKind::Greedy),
            "costbenefit" | "cost_benefit" | "cost-benefit" => Some(GcPolicyKind::CostBenefit),
            _ => None,
        }
    }
}

/// In which order GC rewrites the live records of a segment it cleans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GcRewriteOrder {
    /// In the order they sit in the victim (the log order they were written in).
    #[default]
    Segment,
    /// Sorted by key, so that consecutive keys' values land next to each other at the log head
    /// and a later scan reads them sequentially (WiscKey's suggestion for scan-heavy loads). A
    /// background run only sorts one victim's survivors; [`crate::Db::rewrite_value_log`]
    /// rewrites a whole key range in order.
    Key,
}

impl GcRewriteOrder {
    /// Parses `segment` or `key` (bench and CLI flags).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "segment" => Some(GcRewriteOrder::Segment),
            "key" => Some(GcRewriteOrder::Key),
            _ => None,
        }
    }
}

/// Options for [`crate::Db::open`].
#[derive(Clone)]
pub struct Options {
    /// File system used for every file; the OS by default.
    pub fs: Arc<dyn FileSystem>,
    /// Create the database if it does not exist.
    pub create_if_missing: bool,
    /// Fail if the database already exists.
    pub error_if_exists: bool,
    /// Values of at least this many bytes go to the value log; smaller ones stay inline in the
    /// LSM-tree. `0` separates every value (pure WiscKey); `usize::MAX` never separates.
    pub value_threshold: usize,
    /// Memtable size at which it is frozen and flushed to L0.
    pub write_buffer_size: usize,
    /// Size of a value-log segment file (a zone).
    pub segment_size: u64,
    /// User-space buffer in front of the value log; appends reach the OS when it fills.
    pub vlog_buffer_size: usize,
    /// Target uncompressed size of an SSTable data block.
    pub block_size: usize,
    /// Keys between restart points in a data block.
    pub block_restart_interval: usize,
    /// SSTable block compression.
    pub compression: CompressionType,
    /// Bloom filter bits per key (0 disables filters).
    pub bloom_bits_per_key: usize,
    /// Bytes of decoded blocks kept in the block cache. It holds the blocks that cost more to
    /// read than to look up: compressed blocks (decoded) and blocks of files read without a
    /// memory map. A raw block of a mapped table is read where it lies, verified, every time,
    /// and never cached, so with the default (no compression) the cache stays empty.
    pub block_cache_capacity: usize,
    /// Open SSTables kept in the table cache.
    pub max_open_files: usize,
    /// Number of LSM levels.
    pub num_levels: usize,
    /// L0 file count that triggers a compaction.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 file count at which each write is delayed.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 file count at which writes stop until compaction catches up.
    pub level0_stop_writes_trigger: usize,
    /// Target size of level 1.
    pub max_bytes_for_level_base: u64,
    /// Each level below L1 targets this many times the size of the level above.
    pub max_bytes_for_level_multiplier: f64,
    /// Size at which a compaction output file is cut.
    pub target_file_size: u64,
    /// Background compaction threads (at least one). Each also flushes when a frozen memtable
    /// waits; concurrent compactions never share input files or output ranges.
    pub max_background_compactions: usize,
    /// Compaction picking policy.
    pub compaction_policy: CompactionPolicyKind,
    /// Partition split keys (LSM index): tables written after a split never straddle it, so a
    /// range delete drops the tables of every partition it covers whole, without reading them.
    /// Keys are added to the database's partition map at open (existing splits stay).
    pub partition_split_points: Vec<Vec<u8>>,
    /// Split a partition in two once its tables exceed this many bytes (`None`: only the
    /// static split points).
    pub partition_target_bytes: Option<u64>,
    /// Receives a report of every finished compaction (instrumentation); none by default.
    pub compaction_listener: Option<Arc<dyn CompactionListener>>,
    /// Value-log GC picking policy.
    pub gc_policy: GcPolicyKind,
    /// Run value-log GC in a background thread.
    pub background_gc: bool,
    /// Background GC cleans a segment once this fraction of it is known garbage.
    pub gc_garbage_ratio: f64,
    /// Physical space budget for the value log; background GC also runs once the log uses
    /// `gc_space_trigger` of it (SSHKV's 80%).
    pub gc_space_budget: Option<u64>,
    /// Keeps the value log within this multiple of its live bytes (estimated as segment bytes
    /// minus known garbage, which only overestimates live data): background GC starts cleaning
    /// once garbage reaches `gc_space_trigger` of what the limit allows (at 1.3 and 0.8, a log
    /// of 1.24x its live bytes), and writers wait above the limit while GC can still free
    /// space. Unlike `gc_space_budget` this limit never fails a write. `None` disables it.
    pub gc_space_amplification: Option<f64>,
    /// Fraction of `gc_space_budget`, or of the garbage `gc_space_amplification` allows (the
    /// limit minus one), that triggers GC.
    pub gc_space_trigger: f64,
    /// Free dead ranges in place (`fallocate(PUNCH_HOLE)`) instead of copying while the logical
    /// space allows (SSHKV's logical space amplification).
    pub gc_punch_holes: bool,
    /// Logical value-log space allowed as a multiple of `gc_space_budget` when punching holes.
    pub gc_logical_space_factor: f64,
    /// Most bytes per second background GC reads (0 = unlimited) while the log is under its
    /// space trigger, so foreground writes keep going; over the trigger GC is unpaced, since
    /// writers soon wait at the limit unless it keeps up.
    pub gc_rate_limit: u64,
    /// Order in which GC rewrites a victim's live records at the log head.
    pub gc_rewrite_order: GcRewriteOrder,
    /// Compactions move the values they keep out of segments that are past `gc_garbage_ratio`
    /// (relocation through compaction, LSM index only): a move is a value read and an append,
    /// where a GC copy is a user write again. GC still cleans what compactions leave.
    pub gc_in_compaction: bool,
    /// GC cleans a segment by rewriting it in place, its live records packed and followed by a
    /// map from their old offsets, instead of copying them to the log head (LSM index only;
    /// ignored while `gc_punch_holes` is on, and by runs that sort survivors by key). No index
    /// entry changes, so a copy costs a file write instead of a user write; the map costs about
    /// 17 bytes of memory per record kept.
    pub gc_compact_in_place: bool,
    /// Index kind.
    pub index: IndexKind,
    /// SSTable index block kind.
    pub index_block_kind: IndexBlockKind,
    /// Verify block checksums on every read (blocks are always verified when first loaded).
    pub paranoid_checks: bool,
    /// Threads, shared by all iterators of the database, that read values ahead of sequential
    /// scans when those values are not in memory (started on first use). `0` disables parallel
    /// prefetch: iterators still read ahead, start background loads and coalesce adjacent
    /// values, but copy them on their own thread.
    pub prefetch_threads: usize,
    /// The `LOG` file of what the engine did (`docs/format/log.md`): on by default, rotated at
    /// 1 MiB, four old files kept. The same events go to the application's `tracing`
    /// subscriber (target `splitkv`) whatever this says.
    pub info_log: InfoLogOptions,
    /// Time `get`, `put`, `write` and (one step in 32) iterator `next` into the latency
    /// histograms of `Db::stats()`. A timed call costs a clock pair (the CPU's time-stamp
    /// counter where it is invariant) and two atomic adds, about 35 ns: 1-5% of a point read or
    /// write served from memory (`docs/results/observability.md`).
    pub latency_histograms: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            fs: OsFileSystem::shared(),
            create_if_missing: true,
            error_if_exists: false,
            value_threshold: 512,
            write_buffer_size: 8 << 20,
            segment_size: 16 << 20,
            vlog_buffer_size: 1 << 20,
            block_size: 4096,
            block_restart_interval: 8,
            compression: CompressionType::None,
            bloom_bits_per_key: 10,
            block_cache_capacity: 64 << 20,
            max_open_files: 1000,
            num_levels: 7,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 8,
            level0_stop_writes_trigger: 12,
            max_bytes_for_level_base: 64 << 20,
            max_bytes_for_level_multiplier: 10.0,
            target_file_size: 8 << 20,
            max_background_compactions: 1,
            compaction_policy: CompactionPolicyKind::default(),
            partition_split_points: Vec::new(),
            partition_target_bytes: None,
            compaction_listener: None,
            gc_policy: GcPolicyKind::default(),
            background_gc: true,
            gc_garbage_ratio: 0.3,
            gc_space_budget: None,
            gc_space_amplification: Some(1.3),
            gc_space_trigger: 0.8,
            gc_punch_holes: false,
            gc_logical_space_factor: 4.0,
            gc_rate_limit: 256 << 20,
            gc_rewrite_order: GcRewriteOrder::Segment,
            gc_in_compaction: true,
            gc_compact_in_place: true,
            index: IndexKind::default(),
            index_block_kind: IndexBlockKind::default(),
            paranoid_checks: false,
            prefetch_threads: 8,
            info_log: InfoLogOptions::default(),
            latency_histograms: true,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("value_threshold", &self.value_threshold)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("segment_size", &self.segment_size)
            .field("vlog_buffer_size", &self.vlog_buffer_size)
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("compression", &self.compression)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("block_cache_capacity", &self.block_cache_capacity)
            .field("max_open_files", &self.max_open_files)
            .field("num_levels", &self.num_levels)
            .field("level0_file_num_compaction_trigger", &self.level0_file_num_compaction_trigger)
            .field("level0_slowdown_writes_trigger", &self.level0_slowdown_writes_trigger)
            .field("level0_stop_writes_trigger", &self.level0_stop_writes_trigger)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("max_bytes_for_level_multiplier", &self.max_bytes_for_level_multiplier)
            .field("target_file_size", &self.target_file_size)
            .field("max_background_compactions", &self.max_background_compactions)
            .field("compaction_policy", &self.compaction_policy)
            .field("partition_split_points", &self.partition_split_points.len())
            .field("partition_target_bytes", &self.partition_target_bytes)
            .field("compaction_listener", &self.compaction_listener.is_some())
            .field("gc_policy", &self.gc_policy)
            .field("background_gc", &self.background_gc)
            .field("gc_garbage_ratio", &self.gc_garbage_ratio)
            .field("gc_space_budget", &self.gc_space_budget)
            .field("gc_space_amplification", &self.gc_space_amplification)
            .field("gc_space_trigger", &self.gc_space_trigger)
            .field("gc_punch_holes", &self.gc_punch_holes)
            .field("gc_logical_space_factor", &self.gc_logical_space_factor)
            .field("gc_rate_limit", &self.gc_rate_limit)
            .field("gc_rewrite_order", &self.gc_rewrite_order)
            .field("gc_in_compaction", &self.gc_in_compaction)
            .field("gc_compact_in_place", &self.gc_compact_in_place)
            .field("index", &self.index)
            .field("index_block_kind", &self.index_block_kind)
            .field("paranoid_checks", &self.paranoid_checks)
            .field("prefetch_threads", &self.prefetch_threads)
            .field("info_log", &self.info_log)
            .field("latency_histograms", &self.latency_histograms)
            .finish_non_exhaustive()
    }
}

impl From<&Options> for TableOptions {
    /// The table options of a database's [`Options`].
    fn from(opts: &Options) -> Self {
        TableOptions {
            block_size: opts.block_size,
            restart_interval: opts.block_restart_interval,
            compression: opts.compression,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            index_block_kind: opts.index_block_kind,
        }
    }
}

/// Options for one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Make the write durable (value log flushed and fsynced) before acknowledging it.
    pub sync: bool,
}

/// Options for reads and iterators.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Read as of this snapshot; the latest state if `None`.
    pub snapshot: Option<Snapshot>,
    /// Keep blocks read for this operation in the block cache, and let an iterator's read-ahead
    /// load values into the OS page cache. With `false` (for bulk scans, as in LevelDB) a scan
    /// reads values it finds packed in the log and not in memory past the page cache from its
    /// first window; with `true` it does so only once it is long (see `docs/design.md`, "Scans
    /// past the page cache"), so short scans leave their values cached for the next.
    pub fill_cache: bool,
    /// Verify block checksums even for cached blocks.
    pub verify_checksums: bool,
    /// Iterators start at or after this key.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators stop before this key.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators read no values: `value()` is empty for every entry, and
    /// `DbIterator::read_value` reads the current one on demand.
    pub keys_only: bool,
    /// Iterators that move repeatedly in one direction read ahead: the next values that are not
    /// in memory start loading in the background and are read in parallel on the database's
    /// prefetch threads, coalescing values adjacent in the value log; values in memory are
    /// copied when the cursor reaches them.
    pub prefetch: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            verify_checksums: false,
            lower_bound: None,
            upper_bound: None,
            keys_only: false,
            prefetch: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_table_options_are_those_of_default_database_options() {
        assert_eq!(TableOptions::from(&Options::default()), TableOptions::default());
    }
}
