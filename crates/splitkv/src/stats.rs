//! Engine statistics: counters updated on the hot paths (relaxed atomics) and a point-in-time
//! [`Stats`] report with per-level and per-segment detail.
//!
//! Latency of `get`, `put`, `write` and iterator `next` (sampled: a clock pair costs as much as
//! a step through memory) is kept in [`LatencyHistogram`]s:
//! log-linear buckets of nanoseconds (exact below 16 ns, then 16 buckets per power of two, so a
//! percentile is within 1/32 of the true value), counted with relaxed atomic adds in one of a
//! few cache-aligned stripes chosen per thread, so threads recording at once rarely share a
//! cache line. Recording costs two clock reads and two uncontended atomic adds; reading is a
//! [`HistogramSnapshot`] with percentiles. The clock is the CPU's time-stamp counter through
//! `quanta` where it is invariant (a pair costs 17-23 ns here, against 37 ns for two
//! `std::time::Instant` readings, a vDSO `clock_gettime` each), and a single put records into one
//! histogram: with the OS clock and two histograms, timing took about 60 ns of a 100-byte
//! sequential put's 0.78 µs (`docs/results/observability.md`).
//!
//! Write amplification is `(value-log + SSTable + MANIFEST bytes written) / user bytes written`,
//! counted by the engine itself so that benchmarks can cross-check it against the OS's
//! `/proc/self/io` figure.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use quanta::Instant;

/// Hot-path counters, shared by every thread of one database.
#[derive(Debug, Default)]
pub struct Counters {
    /// Key + value bytes of user writes.
    pub user_bytes_written: StripedCounter,
    /// Bytes written to SSTables by flushes.
    pub flush_bytes_written: AtomicU64,
    /// Bytes written to SSTables by compactions.
    pub compaction_bytes_written: AtomicU64,
    /// Bytes of SSTables read by compactions.
    pub compaction_bytes_read: AtomicU64,
    /// Values compactions moved out of segments being emptied (`Options::gc_in_compaction`).
    pub compaction_values_moved: AtomicU64,
    /// Value-log record bytes of those moves.
    pub compaction_value_bytes_moved: AtomicU64,
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
    /// Microseconds GC runs spent reading victims and deciding which records are live.
    pub gc_scan_micros: AtomicU64,
    /// Microseconds GC runs spent rewriting live records at the log head (and syncing them).
    pub gc_relocate_micros: AtomicU64,
    /// Liveness lookups GC skipped because the last survey found the record unreachable (a
    /// record scanned again, or re-checked by the write leader, counts again).
    pub gc_lookups_skipped: AtomicU64,
    /// Liveness lookups GC skipped because the last survey found the record current and no
    /// write touched its key since (counted like `gc_lookups_skipped`).
    pub gc_lookups_proven_live: AtomicU64,
    /// Point lookups served.
    pub gets: StripedCounter,
    /// Keys written by users (puts and deletes), for the adaptive index's write intensity.
    pub keys_written: StripedCounter,
    /// Value-log reads made to resolve pointers.
    pub vlog_reads: StripedCounter,
    /// SSTables consulted by point lookups (for read amplification).
    pub tables_probed: StripedCounter,
    /// SSTables dropped whole because a range delete covered them.
    pub tables_dropped_by_range_deletes: AtomicU64,
    /// Calls of `DbIterator::next` by cursors dropped so far.
    pub iter_nexts: AtomicU64,
    /// Latency of the synchronous calls.
    pub latency: LatencyHistograms,
}

/// One [`LatencyHistogram`] per timed call, and whether calls are timed at all
/// (`Options::latency_histograms`).
#[derive(Debug)]
pub struct LatencyHistograms {
    /// Time the calls (a clock pair each); when false nothing is recorded and the histograms
    /// stay empty.
    pub enabled: bool,
    /// `Db::get` and `Db::get_opt`.
    pub get: LatencyHistogram,
    /// `Db::put` and `Db::put_opt`.
    pub put: LatencyHistogram,
    /// Every other write: `Db::write`, deletes and range deletes. [`LatencyStats::write`]
    /// reports these and the puts together, so that a put is recorded once.
    pub other_writes: LatencyHistogram,
    /// `DbIterator::next` (and so every step of a `RangeIter`), sampled: a cursor's first
    /// step and every 32nd after it.
    pub iter_next: LatencyHistogram,
}

impl Default for LatencyHistograms {
    fn default() -> Self {
        LatencyHistograms::new(true)
    }
}

impl LatencyHistograms {
    /// Empty histograms; `enabled` says whether calls are timed.
    pub fn new(enabled: bool) -> Self {
        if enabled {
            // The clock calibrates itself on its first reading (about half a millisecond here):
            // at open, not inside the first timed call.
            let _ = Instant::now();
        }
        LatencyHistograms {
            enabled,
            get: LatencyHistogram::default(),
            put: LatencyHistogram::default(),
            other_writes: LatencyHistogram::default(),
            iter_next: LatencyHistogram::default(),
        }
    }

    /// Starts timing a call into `histogram` (one of these), or nothing when timing is off.
    pub(crate) fn start<'a>(&self, histogram: &'a LatencyHistogram) -> Option<LatencyTimer<'a>> {
        self.enabled.then(|| LatencyTimer { histogram, start: Instant::now() })
    }
}

/// Exact buckets below this many nanoseconds, then this many buckets per power of two.
const SUB_BUCKETS: u64 = 16;
/// Powers of two covered above the exact range: up to 2^40 ns (18 minutes); longer latencies
/// land in the last bucket (the maximum is still exact).
const POWERS: u64 = 36;
const BUCKETS: usize = ((POWERS + 1) * SUB_BUCKETS) as usize;
const STRIPES: usize = 4;

/// The bucket holding `nanos`: `nanos` itself below 16; otherwise the power of two and the
/// next four bits below its leading one.
fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB_BUCKETS {
        return nanos as usize;
    }
    let msb = 63 - u64::from(nanos.leading_zeros());
    let shift = msb - 4;
    let index = shift * SUB_BUCKETS + (nanos >> shift);
    (index as usize).min(BUCKETS - 1)
}

/// The values bucket `index` holds: `[low, high)`.
fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return (index, index + 1);
    }
    let shift = index / SUB_BUCKETS - 1;
    let mantissa = index % SUB_BUCKETS + SUB_BUCKETS;
    (mantissa << shift, (mantissa + 1) << shift)
}

#[repr(align(128))]
struct Stripe {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    max: AtomicU64,
}

/// A latency histogram of nanoseconds that threads record into concurrently: log-linear buckets
/// (exact below 16 ns, then 16 per power of two, so a percentile is within 1/32 of the true
/// value) in a few cache-aligned stripes chosen per thread. Recording is two relaxed atomic
/// adds; [`LatencyHistogram::snapshot`] reads it.
pub struct LatencyHistogram {
    stripes: Box<[Stripe]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let stripes = (0..STRIPES)
            .map(|_| Stripe {
                buckets: std::array::from_fn(|_| AtomicU64::new(0)),
                sum: AtomicU64::new(0),
                max: AtomicU64::new(0),
            })
            .collect();
        LatencyHistogram { stripes }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

/// A counter that threads on several cores add to on every operation: one cache line per
/// stripe (chosen per thread, as the histograms' are), so that two writers adding the bytes they
/// wrote do not take turns owning one line. A read sums the stripes.
#[derive(Default)]
pub struct StripedCounter {
    stripes: [PaddedCounter; STRIPES],
}

#[derive(Default)]
#[repr(align(128))]
struct PaddedCounter(AtomicU64);

impl StripedCounter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.stripes[my_stripe()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every add so far (adds racing with the read may be half-seen).
    pub fn get(&self) -> u64 {
        self.stripes.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

impl fmt::Debug for StripedCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// The stripe this thread records into: threads take stripes round-robin on first use.
fn my_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        s.get()
    })
}

impl LatencyHistogram {
    /// Records one latency.
    pub fn record(&self, nanos: u64) {
        let stripe = &self.stripes[my_stripe()];
        stripe.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        stripe.sum.fetch_add(nanos, Ordering::Relaxed);
        if nanos > stripe.max.load(Ordering::Relaxed) {
            stripe.max.fetch_max(nanos, Ordering::Relaxed);
        }
    }

    /// Records the time since `start`.
    pub fn record_since(&self, start: Instant) {
        self.record(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }

    /// The counts so far. Concurrent records may be half-seen (a bucket counted, its sum not
    /// yet): the snapshot is exact once recording stops.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut counts = vec![0u64; BUCKETS];
        let (mut sum, mut max) = (0u64, 0u64);
        for stripe in self.stripes.iter() {
            for (total, bucket) in counts.iter_mut().zip(&stripe.buckets) {
                *total += bucket.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(stripe.sum.load(Ordering::Relaxed));
            max = max.max(stripe.max.load(Ordering::Relaxed));
        }
        let buckets: Vec<(u32, u64)> =
            counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i as u32, *c)).collect();
        HistogramSnapshot { count: buckets.iter().map(|(_, c)| c).sum(), sum_nanos: sum, max_nanos: max, buckets }
    }
}

/// A latency distribution at one moment: counts per bucket (non-empty ones only), in
/// nanoseconds.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    buckets: Vec<(u32, u64)>,
    count: u64,
    sum_nanos: u64,
    max_nanos: u64,
}

impl HistogramSnapshot {
    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The distribution of this snapshot's latencies and `other`'s together.
    pub fn merged(&self, other: &HistogramSnapshot) -> HistogramSnapshot {
        let mut buckets = self.buckets.clone();
        buckets.extend_from_slice(&other.buckets);
        buckets.sort_unstable_by_key(|&(index, _)| index);
        buckets.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        HistogramSnapshot {
            buckets,
            count: self.count + other.count,
            sum_nanos: self.sum_nanos.wrapping_add(other.sum_nanos),
            max_nanos: self.max_nanos.max(other.max_nanos),
        }
    }

    /// Mean latency in nanoseconds (0 when empty).
    pub fn mean_nanos(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_nanos as f64 / self.count as f64
        }
    }

    /// The largest latency recorded, exactly.
    pub fn max_nanos(&self) -> u64 {
        self.max_nanos
    }

    /// The latency at or below which `percent` of the records lie, in nanoseconds (0 when
    /// empty): exact below 16 ns, otherwise the middle of its bucket (within 1/32 of any value
    /// in it), and never above the maximum.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((percent.clamp(0.0, 100.0) / 100.0 * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(index, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let (low, high) = bucket_range(index as usize);
                let value = if high - low == 1 { low } else { low + (high - low) / 2 };
                return value.min(self.max_nanos);
            }
        }
        self.max_nanos
    }

    /// Median, in nanoseconds.
    pub fn p50(&self) -> u64 {
        self.percentile(50.0)
    }

    /// 99th percentile, in nanoseconds.
    pub fn p99(&self) -> u64 {
        self.percentile(99.0)
    }

    /// 99.9th percentile, in nanoseconds.
    pub fn p999(&self) -> u64 {
        self.percentile(99.9)
    }

    /// What was recorded after `earlier` (a snapshot of the same histogram): the counts of an
    /// interval. Its maximum is the top of its highest bucket (the exact maximum of an interval
    /// is not kept), capped at this snapshot's maximum.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let before: std::collections::HashMap<u32, u64> = earlier.buckets.iter().copied().collect();
        let buckets: Vec<(u32, u64)> = self
            .buckets
            .iter()
            .map(|&(i, c)| (i, c.saturating_sub(before.get(&i).copied().unwrap_or(0))))
            .filter(|(_, c)| *c > 0)
            .collect();
        let max = buckets.last().map_or(0, |&(i, _)| (bucket_range(i as usize).1 - 1).min(self.max_nanos));
        HistogramSnapshot {
            count: buckets.iter().map(|(_, c)| c).sum(),
            sum_nanos: self.sum_nanos.wrapping_sub(earlier.sum_nanos),
            max_nanos: max,
            buckets,
        }
    }
}

impl fmt::Debug for HistogramSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistogramSnapshot")
            .field("count", &self.count)
            .field("p50_nanos", &self.p50())
            .field("p99_nanos", &self.p99())
            .field("p999_nanos", &self.p999())
            .field("max_nanos", &self.max_nanos)
            .finish()
    }
}

/// Records into a histogram when dropped: time a whole call with one line at its top.
pub(crate) struct LatencyTimer<'a> {
    histogram: &'a LatencyHistogram,
    start: Instant,
}

impl Drop for LatencyTimer<'_> {
    fn drop(&mut self) {
        self.histogram.record_since(self.start);
    }
}

/// Latency distributions of the timed calls since open (recorded when
/// [`Options::latency_histograms`](crate::Options::latency_histograms) is set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyStats {
    /// Point reads.
    pub get: HistogramSnapshot,
    /// Single puts.
    pub put: HistogramSnapshot,
    /// Every write call.
    pub write: HistogramSnapshot,
    /// Iterator steps forward, sampled (a cursor's first step and every 32nd after it; the
    /// count of all steps is `Stats::iter_nexts`).
    pub iter_next: HistogramSnapshot,
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
    /// Values compactions moved to the log head since open (`Options::gc_in_compaction`).
    pub compaction_values_moved: u64,
    /// Value-log record bytes of those moves.
    pub compaction_value_bytes_moved: u64,
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
    /// Microseconds GC runs spent reading victims and deciding which records are live.
    pub gc_scan_micros: u64,
    /// Microseconds GC runs spent rewriting live records at the log head (and syncing them).
    /// Scans and relocations may overlap on two threads, so the two can add up to more than
    /// the runs' wall time.
    pub gc_relocate_micros: u64,
    /// Liveness lookups GC skipped because the last survey found the record unreachable.
    pub gc_lookups_skipped: u64,
    /// Liveness lookups GC skipped because the last survey found the record current and no
    /// write touched its key since.
    pub gc_lookups_proven_live: u64,
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
    /// Segments GC replaced by their compacted file (`gc_compact_in_place`).
    pub gc_segments_compacted: u64,
    /// Bytes the database's files occupy on the medium.
    pub disk_bytes: u64,
    /// The hash table, in the hash index mode.
    pub hash_table: Option<HashTableStats>,
    /// SSTable index blocks: learned models and binary indexes, in the LSM mode.
    pub index_blocks: IndexBlockStats,
    /// Latency distributions of `get`, `put`, `write` and iterator `next` since open.
    pub latency: LatencyStats,
    /// Iterator `next` calls since open, by cursors already dropped.
    pub iter_nexts: u64,
    /// Memory held, by component, with the limit each is kept under.
    pub memory: MemoryStats,
}

/// Memory the engine holds, by component, each next to the limit it is kept under (the options
/// that set it in brackets). What is not here is small and fixed (per-thread buffers) or belongs
/// to the operating system (the page cache behind the files).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in the mutable and the frozen memtable (LSM mode).
    pub memtable_bytes: u64,
    /// Most memtable bytes at once: one mutable and one frozen memtable of `write_buffer_size`
    /// each (a writer waits while both are full); the hash mode's recent keys are counted there.
    pub memtable_limit: u64,
    /// Key filters of recently flushed memtables (at most 16), which let GC prove a record
    /// current without a lookup (LSM mode).
    pub flushed_key_filter_bytes: u64,
    /// Bytes of decoded data blocks in the block cache.
    pub block_cache_bytes: u64,
    /// The block cache's capacity (`block_cache_capacity`).
    pub block_cache_capacity: u64,
    /// SSTables open in the table cache.
    pub open_tables: u64,
    /// Most tables open at once (`max_open_files`).
    pub table_cache_capacity: u64,
    /// Index and filter blocks (and trained models) of the open tables: read when a table is
    /// opened and pinned for as long as it stays open, so a lookup reads neither from the file
    /// (RocksDB's `pin_l0_filter_and_index_blocks_in_cache` for every level); bounded through
    /// the table cache's capacity.
    pub table_index_filter_bytes: u64,
    /// Bytes of live cursors' read-ahead windows: their keys and inline values, and the values
    /// requested from the log, which the prefetch pool reads into the window's buffers.
    pub read_ahead_bytes: u64,
    /// Most separated-value bytes one cursor holds in read-ahead: two windows, each cut once its
    /// values reach 4 MiB (passing it by at most one value; the windows' keys come on top).
    pub read_ahead_limit_per_cursor: u64,
    /// Prefetch pool threads (`prefetch_threads`); each holds at most one window's reads.
    pub prefetch_threads: u64,
    /// Offset maps of compacted value-log segments (`gc_compact_in_place`): about 17 bytes per
    /// record they keep. No limit of their own: they shrink as GC drops records, and bounded by the
    /// log's live records.
    pub offset_map_bytes: u64,
}

/// The `splitkv.levelstats` table's heading (RocksDB's layout); indexes with levels add a row
/// per level.
pub(crate) fn level_stats_header() -> String {
    "Level Files Size(MB)\n--------------------\n".to_string()
}

/// How many bytes a key range takes, estimated ([`crate::Db::approximate_size`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeSize {
    /// Bytes of the index structures holding the range's keys: SSTables (the share of each
    /// table the range covers, estimated from its index), or the hash index's entries.
    pub index_bytes: u64,
    /// Bytes of the value-log records the range's keys point to.
    pub value_log_bytes: u64,
    /// Bytes of the range's entries in the memtables (not yet in any file).
    pub memtable_bytes: u64,
}

impl RangeSize {
    /// All three together.
    pub fn total(&self) -> u64 {
        self.index_bytes + self.value_log_bytes + self.memtable_bytes
    }
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
        self.user_bytes_written = c.user_bytes_written.get();
        self.flush_bytes_written = Counters::get(&c.flush_bytes_written);
        self.compaction_bytes_written = Counters::get(&c.compaction_bytes_written);
        self.compaction_bytes_read = Counters::get(&c.compaction_bytes_read);
        self.compaction_values_moved = Counters::get(&c.compaction_values_moved);
        self.compaction_value_bytes_moved = Counters::get(&c.compaction_value_bytes_moved);
        self.flushes = Counters::get(&c.flushes);
        self.compactions = Counters::get(&c.compactions);
        self.stall_slowdown_micros = Counters::get(&c.stall_slowdown_micros);
        self.stall_stop_micros = Counters::get(&c.stall_stop_micros);
        self.stall_gc_micros = Counters::get(&c.stall_gc_micros);
        self.gc_surveys = Counters::get(&c.gc_surveys);
        self.gc_survey_micros = Counters::get(&c.gc_survey_micros);
        self.gc_scan_micros = Counters::get(&c.gc_scan_micros);
        self.gc_relocate_micros = Counters::get(&c.gc_relocate_micros);
        self.gc_lookups_skipped = Counters::get(&c.gc_lookups_skipped);
        self.gc_lookups_proven_live = Counters::get(&c.gc_lookups_proven_live);
        self.gets = c.gets.get();
        self.vlog_reads = c.vlog_reads.get();
        self.tables_probed = c.tables_probed.get();
        self.tables_dropped_by_range_deletes = Counters::get(&c.tables_dropped_by_range_deletes);
        self.iter_nexts = Counters::get(&c.iter_nexts);
        let put = c.latency.put.snapshot();
        self.latency = LatencyStats {
            get: c.latency.get.snapshot(),
            write: put.merged(&c.latency.other_writes.snapshot()),
            put,
            iter_next: c.latency.iter_next.snapshot(),
        };
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
        if self.compaction_values_moved > 0 {
            writeln!(
                f,
                "Compactions moved {} values ({:.1} MiB) out of segments past the garbage ratio",
                self.compaction_values_moved,
                self.compaction_value_bytes_moved as f64 / MIB
            )?;
        }
        writeln!(
            f,
            "GC: {} runs, read {:.1} MiB, relocated {:.1} MiB, punched {:.1} MiB, {} segments released, {} compacted in place, runs spent {:.3} s scanning and {:.3} s relocating, {} surveys ({:.3} s), lookups skipped by survey maps: {} of dead records, {} of live ones; on disk {:.1} MiB",
            self.gc_runs,
            self.gc_bytes_read as f64 / MIB,
            self.gc_bytes_relocated as f64 / MIB,
            self.gc_bytes_punched as f64 / MIB,
            self.gc_segments_released,
            self.gc_segments_compacted,
            self.gc_scan_micros as f64 / 1e6,
            self.gc_relocate_micros as f64 / 1e6,
            self.gc_surveys,
            self.gc_survey_micros as f64 / 1e6,
            self.gc_lookups_skipped,
            self.gc_lookups_proven_live,
            self.disk_bytes as f64 / MIB
        )?;
        write!(
            f,
            "Reads: {} gets, {} vlog reads, {} tables probed; block cache {} hits / {} misses",
            self.gets, self.vlog_reads, self.tables_probed, self.block_cache_hits, self.block_cache_misses
        )?;
        let latencies = [
            ("get", &self.latency.get),
            ("put", &self.latency.put),
            ("write", &self.latency.write),
            ("next/32", &self.latency.iter_next),
        ];
        if latencies.iter().any(|(_, h)| h.count() > 0) {
            write!(f, "\nLatency (us)        count       p50       p99     p99.9       max")?;
            for (name, h) in latencies.iter().filter(|(_, h)| h.count() > 0) {
                let us = |nanos: u64| nanos as f64 / 1000.0;
                write!(
                    f,
                    "\n  {name:<10} {:>12} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                    h.count(),
                    us(h.p50()),
                    us(h.p99()),
                    us(h.p999()),
                    us(h.max_nanos())
                )?;
            }
        }
        let m = &self.memory;
        let of = |used: u64, limit: u64| format!("{:.1} of {:.1} MiB", used as f64 / MIB, limit as f64 / MIB);
        write!(
            f,
            "\nMemory: memtables {} (and {:.1} MiB of flushed ones' key filters); block cache {}; {} of {} tables open, {:.1} MiB of index and filter blocks pinned; read-ahead {:.1} MiB ({:.1} MiB per cursor at most, {} prefetch threads); compacted segments' offset maps {:.1} MiB",
            of(m.memtable_bytes, m.memtable_limit),
            m.flushed_key_filter_bytes as f64 / MIB,
            of(m.block_cache_bytes, m.block_cache_capacity),
            m.open_tables,
            m.table_cache_capacity,
            m.table_index_filter_bytes as f64 / MIB,
            m.read_ahead_bytes as f64 / MIB,
            m.read_ahead_limit_per_cursor as f64 / MIB,
            m.prefetch_threads,
            m.offset_map_bytes as f64 / MIB
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_sixteen_and_log_linear_above() {
        for v in 0..16 {
            assert_eq!(bucket_range(bucket_of(v)), (v, v + 1));
        }
        for v in [16u64, 17, 31, 32, 33, 1000, 1023, 1024, 123_456, 1 << 39, (1 << 40) - 1] {
            let (low, high) = bucket_range(bucket_of(v));
            assert!(low <= v && v < high, "{v} in [{low}, {high})");
            assert!((high - low) * 16 <= low.max(16), "{v}: bucket [{low}, {high}) wider than 1/16");
        }
        // Neighbouring buckets tile the line.
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket_range(i).1, bucket_range(i + 1).0, "bucket {i}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_of_known_inputs() {
        let h = LatencyHistogram::default();
        assert_eq!(h.snapshot().p50(), 0);
        // 1..=1000 ns once each.
        for v in 1..=1000 {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 1000);
        assert_eq!(s.max_nanos(), 1000);
        assert_eq!(s.mean_nanos(), 500.5);
        let within = |got: u64, want: u64| got.abs_diff(want) * 32 <= want;
        assert!(within(s.p50(), 500), "p50 {}", s.p50());
        assert!(within(s.p99(), 990), "p99 {}", s.p99());
        assert!(within(s.p999(), 999), "p99.9 {}", s.p999());
        assert_eq!(s.percentile(100.0), 1000);
        assert_eq!(s.percentile(0.1), 1);
        // Small values are exact.
        let h = LatencyHistogram::default();
        for v in [3, 3, 3, 7] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!((s.p50(), s.percentile(75.0), s.p99(), s.max_nanos()), (3, 3, 7, 7));
        // A constant latency reads back exactly at every percentile (capped by the maximum).
        let h = LatencyHistogram::default();
        for _ in 0..100 {
            h.record(1000);
        }
        let s = h.snapshot();
        assert_eq!((s.p50(), s.p99(), s.p999(), s.max_nanos()), (1000, 1000, 1000, 1000));
    }

    #[test]
    fn a_tail_shows_in_the_high_percentiles_only() {
        let h = LatencyHistogram::default();
        for _ in 0..990 {
            h.record(2_000);
        }
        for _ in 0..10 {
            h.record(5_000_000);
        }
        let s = h.snapshot();
        assert!(s.p50().abs_diff(2_000) * 32 <= 2_000, "{s:?}");
        assert!(s.p99().abs_diff(2_000) * 32 <= 2_000, "{s:?}");
        assert!(s.p999().abs_diff(5_000_000) * 32 <= 5_000_000, "{s:?}");
        assert_eq!(s.max_nanos(), 5_000_000);
    }

    #[test]
    fn threads_record_into_one_distribution() {
        let h = std::sync::Arc::new(LatencyHistogram::default());
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let h = std::sync::Arc::clone(&h);
                std::thread::spawn(move || (0..1000).for_each(|i| h.record(100 * t + i % 7)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("recording thread"));
        let s = h.snapshot();
        assert_eq!(s.count(), 6000);
        assert_eq!(s.max_nanos(), 506);
    }

    #[test]
    fn an_interval_is_the_difference_of_two_snapshots() {
        let h = LatencyHistogram::default();
        for _ in 0..100 {
            h.record(10);
        }
        let first = h.snapshot();
        for _ in 0..50 {
            h.record(1_000_000);
        }
        let interval = h.snapshot().since(&first);
        assert_eq!(interval.count(), 50);
        assert!(interval.p50().abs_diff(1_000_000) * 32 <= 1_000_000, "{interval:?}");
        assert_eq!(interval.max_nanos(), 1_000_000);
        assert_eq!(h.snapshot().since(&h.snapshot()).count(), 0);
    }

    #[test]
    fn display_shows_latency_percentiles_of_the_calls_made() {
        let mut stats = Stats::default();
        assert!(!stats.to_string().contains("Latency"));
        let h = LatencyHistogram::default();
        h.record(1_500);
        stats.latency.get = h.snapshot();
        let text = stats.to_string();
        assert!(text.contains("Latency (us)"), "{text}");
        assert!(text.lines().any(|l| l.trim_start().starts_with("get") && l.contains("1.50")), "{text}");
        assert!(!text.lines().any(|l| l.trim_start().starts_with("write")), "{text}");
    }
}
