//! Command-line flags, parsed the way `db_bench` (gflags) reads them: `--name=value` or
//! `--name value` (one dash works too), booleans take `true|false|1|0` after `=`, a bare `--name`
//! sets a boolean and `--noname` clears it, and anything unrecognised is an error naming the
//! offending argument.
//!
//! Engine tuning flags are `Option`s: `None` means "not given", so each engine keeps its own
//! defaults (`splitkv::Options::default()`, LevelDB's `Options()`) unless the user overrides them,
//! as `db_bench` does. [`Flags`] is plain data, parsed once and then shared read-only by every
//! benchmark thread.

use std::fmt;
use std::path::PathBuf;

/// The benchmarks `db_bench` runs when `--benchmarks` is not given (LevelDB 1.23's list, minus the
/// codec micro-benchmarks that do not touch a database).
pub const DEFAULT_BENCHMARKS: &str = "fillseq,fillsync,fillrandom,overwrite,readrandom,readrandom,readseq,\
readreverse,compact,readrandom,readseq,readreverse,fill100K";

/// Which storage engine the benchmarks drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum EngineKind {
    /// This project's engine.
    Splitkv,
    /// LevelDB through its C API (needs the `leveldb` cargo feature).
    LevelDb,
    /// RocksDB through the `rocksdb` crate (needs the `rocksdb` cargo feature).
    RocksDb,
    /// fjall, a pure-Rust LSM with key-value separation (needs the `fjall` cargo feature).
    Fjall,
}

/// Block compression requested with `--compression_type`; engines reject kinds they lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Compression {
    /// No compression.
    None,
    /// Snappy (LevelDB's only codec).
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

/// Every flag the benchmark understands.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Flags {
    /// Benchmarks to run, in order.
    pub benchmarks: Vec<String>,
    /// Number of key-value pairs to place in the database.
    pub num: u32,
    /// Number of read operations; negative means `num`.
    pub reads: i64,
    /// Writes per thread of the fill and overwrite benchmarks (RocksDB's db_bench
    /// `--writes`); negative means `num`. Keys are still drawn from `num`, so two threads with
    /// `--writes` at half of `--num` do the work of one thread over the same key space.
    pub writes: i64,
    /// Size of each value in bytes.
    pub value_size: usize,
    /// Fraction of each value that survives compression (the generator repeats random bytes).
    pub compression_ratio: f64,
    /// Concurrent threads per benchmark; each does the full operation count.
    pub threads: usize,
    /// Keys per `multireadrandom` call, and puts or deletes per write batch of the fill and
    /// delete benchmarks (RocksDB db_bench's `--batch_size`; `fillbatch` always uses 1000).
    pub batch_size: usize,
    /// Bytes per key, `--key_prefix` included (`None`: 16 digits after the prefix).
    pub key_size: Option<usize>,
    /// Seconds the timed benchmarks run for instead of their operation count (0: by count).
    pub duration: u64,
    /// Percentage of `readrandomwriterandom` operations that are reads.
    pub readwritepercent: u8,
    /// Entries `seekrandom` steps through after each seek.
    pub seek_nexts: u64,
    /// Seconds per line of the `--report_file` time series (0: no report).
    pub report_interval_seconds: f64,
    /// Where the time series goes: one JSON object per interval and benchmark.
    pub report_file: PathBuf,
    /// Database directory.
    pub db: PathBuf,
    /// Keep the existing database: fill benchmarks are skipped, nothing is destroyed, and
    /// splitkv opens it with the options it stores (`OPTIONS`), over which given flags apply.
    pub use_existing_db: bool,
    /// Before each benchmark that does not start a fresh database, close the database, evict
    /// its files from the OS page cache and reopen it, so its reads come from the device.
    pub drop_os_cache: bool,
    /// Print a per-operation latency histogram after each benchmark.
    pub histogram: bool,
    /// Print the engine's statistics after each benchmark.
    pub stats: bool,
    /// Make every write durable before acknowledging it.
    pub sync: bool,
    /// Bytes of `a` prepended to every key (db_bench's `--key_prefix`).
    pub key_prefix: usize,
    /// Base of the per-thread random seeds; thread `n` (counted across benchmarks) uses base + n.
    pub seed: u32,
    /// Engine to drive.
    pub engine: EngineKind,
    /// Run a peer engine even when it is handicapped: RocksDB compiled from the crate's bundled
    /// source instead of the system library, or a bench that is not an optimised build.
    pub allow_handicapped_peer: bool,
    /// Memtable size.
    pub write_buffer_size: Option<usize>,
    /// SSTable block size.
    pub block_size: Option<usize>,
    /// Entries between restart points in a data block (splitkv, LevelDB, RocksDB).
    pub block_restart_interval: Option<usize>,
    /// Block cache capacity in bytes.
    pub cache_size: Option<usize>,
    /// Bloom filter bits per key.
    pub bloom_bits: Option<usize>,
    /// Table cache size (open files).
    pub open_files: Option<usize>,
    /// Block compression.
    pub compression_type: Option<Compression>,
    /// splitkv: values at least this long go to the value log (`max` never separates).
    pub value_threshold: Option<usize>,
    /// splitkv: value-log segment size.
    pub segment_size: Option<u64>,
    /// splitkv: the index kind (`--index=lsm|hash`: `Some(true)` for hash; `None` when not given,
    /// so that `--use_existing_db` keeps the stored one).
    pub hash_index: Option<bool>,
    /// splitkv: buckets of a new hash table (default: `--num`).
    pub hash_capacity: Option<u64>,
    /// splitkv: request shards of the hash mode (1: group commit, the default; N >= 2: the
    /// half-sync/half-async front end with N queues and workers).
    pub hash_shards: Option<usize>,
    /// splitkv: SSTable index blocks (`--index_kind=binary|learned|adaptive`).
    pub index_block_kind: Option<String>,
    /// Share of keys `deletefraction` and `deleterange` delete, in percent.
    pub delete_percent: u8,
    /// Ranges `deleterange` deletes (100).
    pub delete_ranges: u32,
    /// splitkv: partitions of the key space, equal shares of `--num` (1: none).
    pub partitions: usize,
    /// splitkv: value-log GC policy (`oldest`, `greedy` or `costbenefit`; checked when parsed).
    pub gc_policy: Option<String>,
    /// `--gc_in_compaction`: compactions move values out of segments past the garbage ratio.
    pub gc_in_compaction: Option<bool>,
    /// `--gc_compact_in_place`: GC rewrites a victim in place behind an offset map instead of
    /// copying its live values to the log head.
    pub gc_compact_in_place: Option<bool>,
    /// splitkv: garbage fraction at which background GC cleans a segment.
    pub gc_threshold: Option<f64>,
    /// splitkv: share of the space budget, or of the garbage the amplification limit allows,
    /// at which background GC starts cleaning.
    pub gc_space_trigger: Option<f64>,
    /// splitkv: value-log space budget (GC also runs at 80% of it).
    pub space_budget: Option<u64>,
    /// splitkv: value-log space amplification limit (`Some(None)` turns the default off).
    pub space_amplification: Option<Option<f64>>,
    /// splitkv: run GC in the background.
    pub background_gc: Option<bool>,
    /// splitkv: free dead ranges by punching holes.
    pub gc_punch_holes: Option<bool>,
    /// splitkv: logical value-log space as a multiple of the space budget when punching holes.
    pub gc_logical_space_factor: Option<f64>,
    /// splitkv: background GC read rate limit, bytes per second (0 = unlimited).
    pub gc_rate_limit: Option<u64>,
    /// Target size of level 1.
    pub max_bytes_for_level_base: Option<u64>,
    /// Size at which an SSTable is cut (LevelDB's `max_file_size`).
    pub target_file_size: Option<u64>,
    /// RocksDB: store large values in blob files (integrated BlobDB).
    pub enable_blob_files: bool,
    /// RocksDB: values at least this long go to blob files.
    pub min_blob_size: u64,
    /// RocksDB: size at which a blob file is cut.
    pub blob_file_size: Option<u64>,
    /// YCSB: records loaded by `ycsb_load` (`recordcount`).
    pub ycsb_records: u64,
    /// YCSB: operations per workload run, over all threads (`operationcount`).
    pub ycsb_ops: u64,
    /// YCSB: client threads.
    pub ycsb_threads: usize,
    /// YCSB: fields per record (`fieldcount`); all fields are stored as one value.
    pub ycsb_field_count: usize,
    /// YCSB: bytes per field (`fieldlength`).
    pub ycsb_field_length: usize,
    /// Write every benchmark's metrics to this file as JSON.
    pub json: Option<PathBuf>,
    /// splitkv: iterators read values ahead (`ReadOptions::prefetch`).
    pub prefetch: Option<bool>,
    /// splitkv: threads reading values ahead of iterators (`Options::prefetch_threads`).
    pub prefetch_threads: Option<usize>,
    /// splitkv: time calls into `Db::stats()`'s latency histograms (`Options::latency_histograms`).
    pub latency_histograms: Option<bool>,
    /// Compaction picking policy (`--compaction_policy=score|timeslice`).
    pub compaction_policy: Option<PolicyFlag>,
    /// Time slice in milliseconds for the time-slice policy (`--time_slice_ms`).
    pub time_slice_ms: u64,
    /// Size each slice from the level's excess and drain rate (`--dynamic_slice`).
    pub dynamic_slice: bool,
    /// Release the slice once this percentage of the excess is drained (`--slice_drain_percent`).
    pub slice_drain_percent: Option<u8>,
    /// Background compaction workers (`--max_background_compactions`).
    pub max_background_compactions: Option<usize>,
    /// Write a JSON-lines time series and compaction log here (`--stats_dump=FILE`).
    pub stats_dump: Option<PathBuf>,
    /// Sampling period of `--stats_dump` and of `--plot`'s level chart (`--stats_interval_ms`).
    pub stats_interval_ms: u64,
    /// Render SVG charts of each benchmark into this directory (`--plot=DIR`, `plot` feature).
    pub plot: Option<PathBuf>,
    /// Run inside a memory cgroup of this many bytes, page cache included (`--memory_limit`).
    pub memory_limit: Option<u64>,
}

/// Compaction policy requested with `--compaction_policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PolicyFlag {
    /// Size/threshold scores with L0 boosts.
    Score,
    /// The time-slice round-robin scheduler.
    TimeSlice,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            benchmarks: split_benchmarks(DEFAULT_BENCHMARKS),
            num: 1_000_000,
            reads: -1,
            writes: -1,
            value_size: 100,
            compression_ratio: 0.5,
            threads: 1,
            batch_size: 1,
            key_size: None,
            duration: 0,
            readwritepercent: 90,
            seek_nexts: 0,
            report_interval_seconds: 0.0,
            report_file: PathBuf::from("report.jsonl"),
            db: std::env::temp_dir().join("splitkvbench"),
            use_existing_db: false,
            drop_os_cache: false,
            histogram: false,
            stats: false,
            sync: false,
            key_prefix: 0,
            seed: 1000,
            engine: EngineKind::Splitkv,
            allow_handicapped_peer: false,
            write_buffer_size: None,
            block_size: None,
            block_restart_interval: None,
            cache_size: None,
            bloom_bits: None,
            open_files: None,
            compression_type: None,
            value_threshold: None,
            segment_size: None,
            hash_index: None,
            hash_capacity: None,
            index_block_kind: None,
            hash_shards: None,
            delete_percent: 50,
            delete_ranges: 100,
            partitions: 1,
            gc_policy: None,
            gc_in_compaction: None,
            gc_compact_in_place: None,
            gc_threshold: None,
            gc_space_trigger: None,
            space_budget: None,
            space_amplification: None,
            background_gc: None,
            gc_punch_holes: None,
            gc_logical_space_factor: None,
            gc_rate_limit: None,
            max_bytes_for_level_base: None,
            target_file_size: None,
            enable_blob_files: false,
            min_blob_size: 0,
            blob_file_size: None,
            ycsb_records: 100_000,
            ycsb_ops: 100_000,
            ycsb_threads: 1,
            ycsb_field_count: 10,
            ycsb_field_length: 100,
            json: None,
            prefetch: None,
            prefetch_threads: None,
            latency_histograms: None,
            compaction_policy: None,
            time_slice_ms: 1000,
            dynamic_slice: false,
            slice_drain_percent: None,
            max_background_compactions: None,
            stats_dump: None,
            stats_interval_ms: 100,
            plot: None,
            memory_limit: None,
        }
    }
}

impl Flags {
    /// Read operations per thread: `--reads`, or `--num` when it is negative.
    pub fn reads_per_thread(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(u64::from(self.num))
    }

    /// Writes per thread of the fill and overwrite benchmarks: `--writes`, or `None` (the
    /// benchmark's own count, `--num` or a share of it) when it is negative.
    pub fn writes_per_thread(&self) -> Option<u64> {
        u64::try_from(self.writes).ok()
    }

    /// Bytes of one YCSB record (all its fields).
    pub fn ycsb_record_size(&self) -> usize {
        self.ycsb_field_count * self.ycsb_field_length
    }

    /// Bytes of every db_bench key: `--key_size`, or the prefix and 16 digits.
    pub fn key_size(&self) -> usize {
        self.key_size.unwrap_or(self.key_prefix + crate::keys::KEY_DIGITS)
    }

    /// Decimal digits of the key number after the prefix.
    pub fn key_digits(&self) -> usize {
        self.key_size() - self.key_prefix
    }

    /// Checks what single flags cannot: the key size against the prefix and the key count.
    fn validate(&self) -> Result<(), FlagError> {
        let Some(size) = self.key_size else { return Ok(()) };
        // Keys up to `num` itself (range ends) must fit in the digits.
        let needed = self.num.to_string().len();
        if size < self.key_prefix + needed {
            return Err(FlagError::BadValue {
                arg: format!("--key_size={size}"),
                expected: "room for --key_prefix and the digits of --num",
            });
        }
        Ok(())
    }
}

/// Why the command line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlagError {
    /// The argument is not a known `--name=value` (db_bench's wording: `Invalid flag '...'`).
    Invalid(String),
    /// A known flag that takes a value was given none (and no argument follows it).
    MissingValue(String),
    /// A known flag with a value that does not parse.
    BadValue {
        /// The whole argument.
        arg: String,
        /// What was expected.
        expected: &'static str,
    },
    /// `--help` was given.
    HelpRequested,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::Invalid(arg) => write!(f, "Invalid flag '{arg}'"),
            FlagError::MissingValue(arg) => write!(f, "Invalid flag '{arg}': expected a value"),
            FlagError::BadValue { arg, expected } => write!(f, "Invalid flag '{arg}': expected {expected}"),
            FlagError::HelpRequested => f.write_str(USAGE),
        }
    }
}

impl std::error::Error for FlagError {}

/// Help text for `--help`.
pub const USAGE: &str = "\
usage: splitkv-bench [--name=value | --name value | --name | --noname ...]
  --benchmarks=LIST         comma-separated, run in order: fillseq fillbatch fillrandom overwrite
                            fillsync fill100K readrandom readmissing readhot readrandomsmall readseq
                            readreverse seekrandom scanrandom multireadrandom readwhilewriting
                            readrandomwriterandom updaterandom deleterandom deleteseq
                            deletefraction compact gc rewritelog stats
                            ycsb_load ycsb_a ycsb_b ycsb_c ycsb_d ycsb_e ycsb_f
  --key_size=N (16 + key_prefix)  --duration=SECONDS (0: by count; random writes and reads)
  --readwritepercent=N (90, readrandomwriterandom)  --seek_nexts=N (0, seekrandom)
  --report_interval_seconds=S (0: off)  --report_file=FILE (report.jsonl; JSON lines)
  --num=N (1000000)  --reads=N (-1: num)  --value_size=N (100)  --compression_ratio=F (0.5)
  --writes=N (-1: num; per thread, fill and overwrite benchmarks, keys still drawn from num)
  --threads=N (1)  --db=PATH  --use_existing_db=BOOL  --histogram=BOOL  --stats=BOOL  --sync=BOOL
  --seed=N (1000)  --key_prefix=N (0)  --engine=splitkv|leveldb|rocksdb|fjall  --json=FILE
  --allow_handicapped_peer=BOOL (run a peer built from bundled source or without optimisation)
  --write_buffer_size=N  --block_size=N  --cache_size=N  --bloom_bits=N  --open_files=N
  --compression_type=none|snappy|lz4|zstd  --max_bytes_for_level_base=N  --block_restart_interval=N
  --target_file_size=N (alias --max_file_size)  --value_threshold=N|max (splitkv, fjall)
  --segment_size=N
  --delete_percent=N (50, for deletefraction and deleterange)  --delete_ranges=N (100)
  --batch_size=N (1: keys per multireadrandom call, writes per fill/delete batch)
  --partitions=N (1, equal key ranges; splitkv)
  --index=lsm|hash  --hash_capacity=N (--num)  --hash_shards=N (1)                 (splitkv)
  --index_kind=binary|learned|adaptive (SSTable index blocks; binary)             (splitkv)
  --gc_policy=oldest|greedy|costbenefit  --gc_threshold=F  --space_budget=N  --background_gc=BOOL
  --gc_space_trigger=F (share of the budget or allowed garbage where GC starts; 0.8) (splitkv)
  --space_amplification=F|none (value-log space limit over live bytes; default 1.3)
  --gc_punch_holes=BOOL  --gc_logical_space_factor=F  --gc_rate_limit=N          (splitkv)
  --gc_in_compaction=BOOL (compactions move values out of segments past the garbage ratio) (splitkv)
  --gc_compact_in_place=BOOL (GC rewrites a victim in place behind an offset map; no index writes) (splitkv)
  --enable_blob_files=BOOL  --min_blob_size=N (0)  --blob_file_size=N            (rocksdb)
  --ycsb_records=N (100000)  --ycsb_ops=N (100000)  --ycsb_threads=N (1)
  --ycsb_field_count=N (10)  --ycsb_field_length=N (100)
  --prefetch=BOOL  --prefetch_threads=N (splitkv iterator read-ahead)
  --latency_histograms=BOOL (splitkv: time calls for Db::stats(); default true)
  --drop_os_cache=BOOL      evict the database from the OS page cache before each benchmark
                            that reuses it (close, fdatasync + POSIX_FADV_DONTNEED, reopen)

  --compaction_policy=score|timeslice  --time_slice_ms=N (1000)  --dynamic_slice=BOOL
  --slice_drain_percent=N  --max_background_compactions=N
  --stats_dump=FILE (JSON lines: level samples + compaction log)  --stats_interval_ms=N (100)
  --plot=DIR (SVG charts per benchmark: throughput, latency CDF, levels; needs --features plot)
  --memory_limit=SIZE       run in a cgroup-v1 memory group of SIZE (e.g. 512MiB), page cache included";

fn split_benchmarks(list: &str) -> Vec<String> {
    list.split(',').map(str::to_owned).collect()
}

/// Parses the arguments after the program name.
pub fn parse<I, S>(args: I) -> Result<Flags, FlagError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let mut flags = Flags::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let invalid = || FlagError::Invalid(arg.clone());
        let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')).ok_or_else(invalid)?;
        if body == "help" {
            return Err(FlagError::HelpRequested);
        }
        if let Some((name, value)) = body.split_once('=') {
            apply(&mut flags, arg, name, Some(value))?;
            continue;
        }
        match apply(&mut flags, arg, body, None) {
            // gflags: a flag that needs a value takes the next argument.
            Err(FlagError::MissingValue(_)) => {
                let value = rest.next().ok_or_else(invalid)?;
                apply(&mut flags, &format!("{arg} {value}"), body, Some(value))?;
            }
            // gflags: `--noname` clears boolean `name`.
            Err(FlagError::Invalid(_)) if body.strip_prefix("no").is_some_and(is_boolean) => {
                apply(&mut flags, arg, &body[2..], Some("false"))?;
            }
            other => other?,
        }
    }
    flags.validate()?;
    Ok(flags)
}

/// True if flag `name` is a boolean (it takes no value).
fn is_boolean(name: &str) -> bool {
    apply(&mut Flags::default(), name, name, None).is_ok()
}

/// Sets flag `name` from `value` (`None`: the flag was given bare); `arg` is the argument as
/// written, for error messages.
fn apply(flags: &mut Flags, arg: &str, name: &str, value: Option<&str>) -> Result<(), FlagError> {
    let invalid = || FlagError::Invalid(arg.to_owned());
    let bad = |expected| FlagError::BadValue { arg: arg.to_owned(), expected };
    // Only booleans may go without a value.
    let text = || value.ok_or_else(|| FlagError::MissingValue(arg.to_owned()));
    let number = |expected| -> Result<u64, FlagError> { text()?.parse::<u64>().map_err(|_| bad(expected)) };
    let size = || -> Result<usize, FlagError> {
        usize::try_from(number("a non-negative integer")?).map_err(|_| bad("a size"))
    };
    let boolean = || -> Result<bool, FlagError> {
        match value {
            None | Some("true") | Some("1") => Ok(true),
            Some("false") | Some("0") => Ok(false),
            Some(_) => Err(bad("true, false, 1 or 0")),
        }
    };

    match name {
        "benchmarks" => flags.benchmarks = split_benchmarks(text()?),
        "num" => {
            // Keys are drawn by a 31-bit generator, as in db_bench.
            let n = number("an integer below 2^31")?;
            flags.num =
                u32::try_from(n).ok().filter(|n| *n < i32::MAX as u32).ok_or_else(|| bad("an integer below 2^31"))?;
        }
        "reads" => flags.reads = text()?.parse().map_err(|_| bad("an integer"))?,
        "writes" => flags.writes = text()?.parse().map_err(|_| bad("an integer"))?,
        "value_size" => flags.value_size = size()?,
        "compression_ratio" => {
            flags.compression_ratio =
                text()?.parse::<f64>().ok().filter(|r| *r > 0.0 && *r <= 1.0).ok_or_else(|| bad("a ratio in (0, 1]"))?
        }
        "threads" => flags.threads = Some(size()?).filter(|t| *t >= 1).ok_or_else(|| bad("at least 1"))?,
        "batch_size" => flags.batch_size = Some(size()?).filter(|n| *n >= 1).ok_or_else(|| bad("at least 1"))?,
        "key_size" => flags.key_size = Some(Some(size()?).filter(|n| *n >= 1).ok_or_else(|| bad("at least 1"))?),
        "duration" => flags.duration = number("seconds")?,
        "readwritepercent" => {
            flags.readwritepercent =
                u8::try_from(number("a percentage")?).ok().filter(|p| *p <= 100).ok_or_else(|| bad("a percentage"))?
        }
        "seek_nexts" => flags.seek_nexts = number("a count")?,
        "report_interval_seconds" => {
            flags.report_interval_seconds =
                text()?.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).ok_or_else(|| bad("seconds"))?
        }
        "report_file" => flags.report_file = PathBuf::from(text()?),
        "db" => flags.db = PathBuf::from(text()?),
        "use_existing_db" => flags.use_existing_db = boolean()?,
        "drop_os_cache" => flags.drop_os_cache = boolean()?,
        "histogram" => flags.histogram = boolean()?,
        "stats" => flags.stats = boolean()?,
        "sync" => flags.sync = boolean()?,
        "allow_handicapped_peer" => flags.allow_handicapped_peer = boolean()?,
        "key_prefix" => flags.key_prefix = size()?,
        "seed" => flags.seed = u32::try_from(number("a 32-bit integer")?).map_err(|_| bad("a 32-bit integer"))?,
        "engine" => {
            flags.engine = match text()? {
                "splitkv" => EngineKind::Splitkv,
                "leveldb" => EngineKind::LevelDb,
                "rocksdb" => EngineKind::RocksDb,
                "fjall" => EngineKind::Fjall,
                _ => return Err(bad("splitkv, leveldb, rocksdb or fjall")),
            }
        }
        "write_buffer_size" => flags.write_buffer_size = Some(size()?),
        "block_size" => flags.block_size = Some(size()?),
        "block_restart_interval" => {
            let n = number("an entry count")?;
            flags.block_restart_interval = Some(usize::try_from(n).map_err(|_| bad("an entry count"))?);
        }
        // db_bench spells "engine default" as a negative number for these two.
        "cache_size" => flags.cache_size = negative_means_default(text()?).map_err(|_| bad("an integer"))?,
        "bloom_bits" => flags.bloom_bits = negative_means_default(text()?).map_err(|_| bad("an integer"))?,
        "open_files" => flags.open_files = Some(size()?),
        "compression_type" => {
            flags.compression_type = Some(match text()? {
                "none" => Compression::None,
                "snappy" => Compression::Snappy,
                "lz4" => Compression::Lz4,
                "zstd" => Compression::Zstd,
                _ => return Err(bad("none, snappy, lz4 or zstd")),
            })
        }
        "value_threshold" => {
            flags.value_threshold = Some(match text()? {
                "max" => usize::MAX,
                _ => size()?,
            })
        }
        "segment_size" => flags.segment_size = Some(number("a size")?),
        "index" => {
            flags.hash_index = Some(match text()? {
                "lsm" => false,
                "hash" => true,
                _ => return Err(bad("lsm or hash")),
            })
        }
        "hash_capacity" => flags.hash_capacity = Some(number("a bucket count")?),
        "index_kind" => {
            let kind = text()?;
            splitkv::IndexBlockKind::parse(kind).ok_or_else(|| bad("binary, learned or adaptive"))?;
            flags.index_block_kind = Some(kind.to_string());
        }
        "hash_shards" => flags.hash_shards = Some(size()?),
        "prefetch" => flags.prefetch = Some(boolean()?),
        "prefetch_threads" => flags.prefetch_threads = Some(size()?),
        "latency_histograms" => flags.latency_histograms = Some(boolean()?),
        "delete_ranges" => {
            flags.delete_ranges =
                u32::try_from(number("a count")?).ok().filter(|n| *n > 0).ok_or_else(|| bad("a positive count"))?
        }
        "partitions" => flags.partitions = size()?.max(1),
        "delete_percent" => {
            flags.delete_percent =
                u8::try_from(number("a percentage")?).ok().filter(|p| *p <= 100).ok_or_else(|| bad("a percentage"))?
        }
        "gc_policy" => {
            let name = text()?;
            splitkv::GcPolicyKind::parse(name).ok_or_else(|| bad("oldest, greedy or costbenefit"))?;
            flags.gc_policy = Some(name.to_owned());
        }
        "gc_threshold" => {
            flags.gc_threshold =
                Some(text()?.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).ok_or_else(|| bad("a fraction"))?)
        }
        "gc_space_trigger" => {
            flags.gc_space_trigger =
                Some(text()?.parse::<f64>().ok().filter(|f| *f > 0.0 && *f <= 1.0).ok_or_else(|| bad("a fraction"))?)
        }
        "space_budget" => flags.space_budget = Some(number("a size")?),
        "space_amplification" => {
            flags.space_amplification = Some(match text()? {
                "none" => None,
                t => Some(
                    t.parse::<f64>().ok().filter(|f| *f >= 1.0).ok_or_else(|| bad("a ratio of at least 1, or none"))?,
                ),
            })
        }
        "background_gc" => flags.background_gc = Some(boolean()?),
        "gc_punch_holes" => flags.gc_punch_holes = Some(boolean()?),
        "gc_in_compaction" => flags.gc_in_compaction = Some(boolean()?),
        "gc_compact_in_place" => flags.gc_compact_in_place = Some(boolean()?),
        "gc_logical_space_factor" => {
            flags.gc_logical_space_factor =
                Some(text()?.parse::<f64>().ok().filter(|f| *f >= 1.0).ok_or_else(|| bad("a factor of at least 1"))?)
        }
        "gc_rate_limit" => flags.gc_rate_limit = Some(number("bytes per second")?),
        "max_bytes_for_level_base" => flags.max_bytes_for_level_base = Some(number("a size")?),
        "target_file_size" | "max_file_size" => flags.target_file_size = Some(number("a size")?),
        "enable_blob_files" => flags.enable_blob_files = boolean()?,
        "min_blob_size" => flags.min_blob_size = number("a size")?,
        "blob_file_size" => flags.blob_file_size = Some(number("a size")?),
        "ycsb_records" => {
            flags.ycsb_records = Some(number("at least 1")?).filter(|n| *n >= 1).ok_or_else(|| bad("at least 1"))?
        }
        "ycsb_ops" => flags.ycsb_ops = number("a count")?,
        "ycsb_threads" => flags.ycsb_threads = Some(size()?).filter(|t| *t >= 1).ok_or_else(|| bad("at least 1"))?,
        "ycsb_field_count" => flags.ycsb_field_count = size()?,
        "ycsb_field_length" => flags.ycsb_field_length = size()?,
        "json" => flags.json = Some(PathBuf::from(text()?)),
        "compaction_policy" => {
            flags.compaction_policy = Some(match text()? {
                "score" => PolicyFlag::Score,
                "timeslice" => PolicyFlag::TimeSlice,
                _ => return Err(bad("score or timeslice")),
            })
        }
        "time_slice_ms" => {
            flags.time_slice_ms =
                Some(number("a positive integer")?).filter(|n| *n > 0).ok_or_else(|| bad("a positive integer"))?
        }
        "dynamic_slice" => flags.dynamic_slice = boolean()?,
        "slice_drain_percent" => {
            flags.slice_drain_percent = Some(number("a percentage")?)
                .filter(|p| *p <= 100)
                .map(|p| p as u8)
                .ok_or_else(|| bad("a percentage"))?
                .into()
        }
        "max_background_compactions" => {
            flags.max_background_compactions = Some(Some(size()?).filter(|n| *n >= 1).ok_or_else(|| bad("at least 1"))?)
        }
        "stats_dump" => flags.stats_dump = Some(PathBuf::from(text()?)),
        "stats_interval_ms" => {
            flags.stats_interval_ms =
                Some(number("a positive integer")?).filter(|n| *n > 0).ok_or_else(|| bad("a positive integer"))?
        }
        "plot" => flags.plot = Some(PathBuf::from(text()?)),
        "memory_limit" => {
            flags.memory_limit =
                Some(crate::memory_limit::parse_size(text()?).ok_or_else(|| bad("a size such as 512MiB or 2G"))?)
        }
        _ => return Err(invalid()),
    }
    Ok(())
}

fn negative_means_default(text: &str) -> Result<Option<usize>, std::num::ParseIntError> {
    let n: i64 = text.parse()?;
    Ok(usize::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_db_bench() {
        let f = parse::<_, &str>([]).unwrap();
        assert_eq!(f.num, 1_000_000);
        assert_eq!(f.reads_per_thread(), 1_000_000);
        assert_eq!(f.value_size, 100);
        assert_eq!(f.compression_ratio, 0.5);
        assert_eq!(f.threads, 1);
        assert!(!f.use_existing_db && !f.histogram && !f.sync);
        assert_eq!(f.engine, EngineKind::Splitkv);
        assert_eq!(f.benchmarks[0], "fillseq");
        assert!(f.db.ends_with("splitkvbench"));
        assert_eq!(f.value_threshold, None);
    }

    #[test]
    fn parses_values_and_lists() {
        let f = parse([
            "--benchmarks=fillrandom,readrandom",
            "--num=5000",
            "--reads=100",
            "--value_size=1024",
            "--compression_ratio=1",
            "--threads=2",
            "--db=/x/y",
            "--engine=leveldb",
            "--compression_type=zstd",
            "--bloom_bits=-1",
            "--cache_size=1048576",
            "--max_file_size=4096",
            "--seed=7",
        ])
        .unwrap();
        assert_eq!(f.benchmarks, vec!["fillrandom", "readrandom"]);
        assert_eq!((f.num, f.reads_per_thread(), f.value_size, f.threads), (5000, 100, 1024, 2));
        assert_eq!(f.compression_ratio, 1.0);
        assert_eq!(f.db, PathBuf::from("/x/y"));
        assert_eq!(f.engine, EngineKind::LevelDb);
        assert_eq!(f.compression_type, Some(Compression::Zstd));
        assert_eq!(f.bloom_bits, None);
        assert_eq!(f.cache_size, Some(1 << 20));
        assert_eq!(f.target_file_size, Some(4096));
        assert_eq!(f.seed, 7);
    }

    #[test]
    fn booleans_accept_words_digits_and_bare_names() {
        let f = parse(["--histogram=true", "--use_existing_db=1", "--sync"]).unwrap();
        assert!(f.histogram && f.use_existing_db && f.sync);
        let f = parse(["--histogram=false", "--use_existing_db=0", "--sync=0"]).unwrap();
        assert!(!f.histogram && !f.use_existing_db && !f.sync);
        assert!(matches!(parse(["--histogram=yes"]), Err(FlagError::BadValue { .. })));
    }

    #[test]
    fn batch_size_parses_and_must_be_positive() {
        assert_eq!(Flags::default().batch_size, 1);
        assert_eq!(parse(["--batch_size=32"]).unwrap().batch_size, 32);
        assert!(matches!(parse(["--batch_size=0"]), Err(FlagError::BadValue { .. })));
    }

    #[test]
    fn prefetch_flags_parse() {
        let f = parse(["--prefetch=false", "--prefetch_threads=3"]).unwrap();
        assert_eq!((f.prefetch, f.prefetch_threads), (Some(false), Some(3)));
        assert_eq!(parse(["--prefetch=1"]).unwrap().prefetch, Some(true));
        assert!(parse(["--drop_os_cache=true"]).unwrap().drop_os_cache);
        assert!(!parse(["--drop_os_cache=0"]).unwrap().drop_os_cache);
        assert!(parse(["--prefetch=maybe"]).is_err());
        assert_eq!(parse(["--nolatency_histograms"]).unwrap().latency_histograms, Some(false));
    }

    #[test]
    fn gc_flags_parse_and_reject_nonsense() {
        let f =
            parse(["--gc_policy=costbenefit", "--gc_threshold=0.25", "--space_budget=1000", "--background_gc=false"])
                .unwrap();
        assert_eq!(f.gc_policy.as_deref(), Some("costbenefit"));
        assert_eq!(f.gc_threshold, Some(0.25));
        assert_eq!(parse(["--gc_space_trigger=0.9"]).unwrap().gc_space_trigger, Some(0.9));
        assert!(parse(["--gc_space_trigger=0"]).is_err() && parse(["--gc_space_trigger=1.5"]).is_err());
        assert_eq!(f.space_budget, Some(1000));
        assert_eq!(parse(["--space_amplification=1.5"]).unwrap().space_amplification, Some(Some(1.5)));
        assert_eq!(parse(["--space_amplification=none"]).unwrap().space_amplification, Some(None));
        assert!(parse(["--space_amplification=0.5"]).is_err());
        assert_eq!(f.background_gc, Some(false));
        assert!(parse(["--gc_policy=random"]).is_err());
        assert!(parse(["--gc_threshold=1.5"]).is_err());
    }

    #[test]
    fn value_threshold_accepts_max() {
        assert_eq!(parse(["--value_threshold=max"]).unwrap().value_threshold, Some(usize::MAX));
        assert_eq!(parse(["--value_threshold=0"]).unwrap().value_threshold, Some(0));
        assert!(parse(["--value_threshold=huge"]).is_err());
    }

    #[test]
    fn unknown_or_malformed_flags_are_invalid() {
        let err = parse(["--num=10", "--no_such_flag=3"]).unwrap_err();
        assert_eq!(err, FlagError::Invalid("--no_such_flag=3".into()));
        assert_eq!(err.to_string(), "Invalid flag '--no_such_flag=3'");
        assert_eq!(parse(["num=10"]).unwrap_err(), FlagError::Invalid("num=10".into()));
        // A non-boolean flag without a value is as invalid as an unknown one.
        assert_eq!(parse(["--num"]).unwrap_err(), FlagError::Invalid("--num".into()));
        assert!(matches!(parse(["--num=ten"]), Err(FlagError::BadValue { .. })));
        assert!(matches!(parse(["--num=4294967296"]), Err(FlagError::BadValue { .. })));
        assert!(matches!(parse(["--threads=0"]), Err(FlagError::BadValue { .. })));
        assert!(matches!(parse(["--engine=rocks"]), Err(FlagError::BadValue { .. })));
        let f = parse(["--engine=fjall", "--allow_handicapped_peer"]).unwrap();
        assert_eq!(f.engine, EngineKind::Fjall);
        assert!(f.allow_handicapped_peer);
        assert_eq!(parse(["--help"]).unwrap_err(), FlagError::HelpRequested);
    }

    #[test]
    fn rocksdb_blob_and_ycsb_flags() {
        let f = parse([
            "--engine=rocksdb",
            "--enable_blob_files",
            "--min_blob_size=512",
            "--ycsb_records=5000",
            "--ycsb_ops=2000",
            "--ycsb_threads=2",
            "--ycsb_field_length=1638",
            "--json=/tmp/out.json",
        ])
        .unwrap();
        assert_eq!(f.engine, EngineKind::RocksDb);
        assert!(f.enable_blob_files);
        assert_eq!(f.min_blob_size, 512);
        assert_eq!((f.ycsb_records, f.ycsb_ops, f.ycsb_threads), (5000, 2000, 2));
        assert_eq!(f.ycsb_record_size(), 16_380);
        assert_eq!(f.json, Some(PathBuf::from("/tmp/out.json")));
        assert_eq!(Flags::default().ycsb_record_size(), 1000);
        assert!(matches!(parse(["--ycsb_threads=0"]), Err(FlagError::BadValue { .. })));
        assert!(matches!(parse(["--ycsb_records=0"]), Err(FlagError::BadValue { .. })));
    }

    #[test]
    fn compaction_scheduling_flags() {
        let f = parse([
            "--compaction_policy=timeslice",
            "--time_slice_ms=250",
            "--dynamic_slice",
            "--slice_drain_percent=70",
            "--max_background_compactions=2",
            "--stats_dump=/tmp/x.jsonl",
            "--stats_interval_ms=50",
        ])
        .unwrap();
        assert_eq!(f.compaction_policy, Some(PolicyFlag::TimeSlice));
        assert_eq!((f.time_slice_ms, f.dynamic_slice, f.slice_drain_percent), (250, true, Some(70)));
        assert_eq!(f.max_background_compactions, Some(2));
        assert_eq!(f.stats_dump.as_deref(), Some(std::path::Path::new("/tmp/x.jsonl")));
        assert_eq!(f.stats_interval_ms, 50);
        assert!(parse(["--compaction_policy=fifo"]).is_err());
        assert!(parse(["--slice_drain_percent=101"]).is_err());
        assert!(parse(["--max_background_compactions=0"]).is_err());
    }

    #[test]
    fn gflags_forms_space_separated_values_and_noname() {
        let f =
            parse(["--num", "5000", "--benchmarks", "fillrandom,readrandom", "--reads", "-1", "-threads=3"]).unwrap();
        assert_eq!((f.num, f.reads, f.threads), (5000, -1, 3));
        assert_eq!(f.benchmarks, ["fillrandom", "readrandom"]);
        // `--noname` clears a boolean, `--name` sets it; the last one given wins.
        let f = parse(["--sync", "--nosync", "--histogram", "--nouse_existing_db"]).unwrap();
        assert!(!f.sync && f.histogram && !f.use_existing_db);
        assert!(parse(["--nosync", "--sync"]).unwrap().sync);
        // A boolean takes no separate value: a following word is an argument of its own.
        assert_eq!(parse(["--sync", "true"]).unwrap_err(), FlagError::Invalid("true".into()));
        // `no` before a flag that is not a boolean is not a flag.
        assert_eq!(parse(["--nonum"]).unwrap_err(), FlagError::Invalid("--nonum".into()));
        assert_eq!(parse(["--nosuchflag"]).unwrap_err(), FlagError::Invalid("--nosuchflag".into()));
        // A value taken from the next argument is checked like any other.
        assert!(matches!(parse(["--num", "ten"]), Err(FlagError::BadValue { .. })));
        assert_eq!(parse(["--num", "5", "--db", "/x"]).unwrap().db, PathBuf::from("/x"));
    }

    #[test]
    fn workload_flags_of_the_parity_benchmarks() {
        let f = parse([
            "--key_size=20",
            "--duration=5",
            "--readwritepercent=70",
            "--seek_nexts=10",
            "--report_interval_seconds=0.5",
            "--report_file=/tmp/r.jsonl",
            "--batch_size=8",
        ])
        .unwrap();
        assert_eq!((f.key_size(), f.key_digits(), f.duration, f.readwritepercent, f.seek_nexts), (20, 20, 5, 70, 10));
        assert_eq!(
            (f.report_interval_seconds, f.report_file.clone(), f.batch_size),
            (0.5, PathBuf::from("/tmp/r.jsonl"), 8)
        );
        let defaults = Flags::default();
        assert_eq!(
            (defaults.key_size(), defaults.duration, defaults.readwritepercent, defaults.seek_nexts),
            (16, 0, 90, 0)
        );
        assert_eq!(parse(["--key_prefix=4"]).unwrap().key_size(), 20, "the prefix comes on top of 16 digits");
        assert_eq!(parse(["--key_prefix=4", "--key_size=12"]).unwrap().key_digits(), 8);
        // Keys must have room for every key number.
        assert!(matches!(parse(["--key_size=6"]), Err(FlagError::BadValue { .. })), "1000000 needs 7 digits");
        assert!(parse(["--key_size=6", "--num=999999"]).is_ok());
        assert!(matches!(parse(["--readwritepercent=101"]), Err(FlagError::BadValue { .. })));
        assert!(matches!(parse(["--report_interval_seconds=-1"]), Err(FlagError::BadValue { .. })));
    }

    #[test]
    fn plot_takes_a_directory() {
        assert_eq!(Flags::default().plot, None);
        let f = parse(["--plot=charts/run1"]).unwrap();
        assert_eq!(f.plot, Some(PathBuf::from("charts/run1")));
        // A directory is required: a bare `--plot` is not a boolean.
        assert_eq!(parse(["--plot"]).unwrap_err(), FlagError::Invalid("--plot".into()));
    }
}
