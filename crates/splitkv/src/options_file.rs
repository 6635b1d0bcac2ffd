//! The `OPTIONS` file: the options of the last read-write open, kept in the database directory
//! so that tools reopen a database with the options it was made with (RocksDB's
//! `LoadLatestOptions`), and so that an open with options that contradict the files on disk is
//! refused before it reads or writes anything.
//!
//! The file is JSON (`docs/format/options.md` lists every field): JSON rather than TOML because
//! TOML integers are signed 64-bit and `value_threshold = usize::MAX` (a plain LSM) is a
//! supported setting; `serde_json` writes and reads every `u64` exactly and every `f64` so that
//! it reads back bit for bit. A `format_version` field comes first; a reader refuses a version
//! newer than it knows, reads missing fields as their defaults (files older than a field) and
//! ignores fields it does not know (files newer than a field, same version).
//!
//! Every read-write open replaces the file atomically: `OPTIONS.tmp` is written and synced,
//! renamed over `OPTIONS`, and the directory synced. A crash leaves the old file or the new one,
//! and at worst an `OPTIONS.tmp` that the next open removes with the other leftovers.
//!
//! Shape options are the ones the files on disk depend on; [`check_shape`] compares them with
//! the stored ones at every open (read-only too). Everything else is tuning and may change
//! from one open to the next. See `docs/format/options.md` for why each one is or is not shape.
//!
//! Thread-safety: plain functions over a [`FileSystem`]; the database calls them while it holds
//! the directory lock (or, read-only, only reads).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filenames::{options_file, temp_file};
use crate::fs::{FileSystem, OsFileSystem};
use crate::info_log::InfoLogOptions;
use crate::options::{
    CompactionPolicyKind, CompressionType, GcPolicyKind, GcRewriteOrder, IndexBlockKind, IndexKind, Options,
};

/// Version of the `OPTIONS` format written by this code; readers refuse newer ones.
pub const OPTIONS_FORMAT_VERSION: u32 = 1;

/// The whole file.
#[derive(Serialize, Deserialize)]
struct OptionsFile {
    format_version: u32,
    #[serde(default)]
    written_by: String,
    options: StoredOptions,
}

/// [`Options`] as stored: every field that describes the database, none that describes one
/// open call (`create_if_missing`, `error_if_exists`) or lives only in memory (`fs`,
/// `compaction_listener`).
#[derive(Serialize, Deserialize)]
#[serde(default)]
struct StoredOptions {
    index: StoredIndex,
    num_levels: usize,
    value_threshold: usize,
    write_buffer_size: usize,
    segment_size: u64,
    vlog_buffer_size: usize,
    block_size: usize,
    block_restart_interval: usize,
    compression: StoredCompression,
    bloom_bits_per_key: usize,
    block_cache_capacity: usize,
    max_open_files: usize,
    level0_file_num_compaction_trigger: usize,
    level0_slowdown_writes_trigger: usize,
    level0_stop_writes_trigger: usize,
    max_bytes_for_level_base: u64,
    max_bytes_for_level_multiplier: f64,
    target_file_size: u64,
    max_background_compactions: usize,
    compaction_policy: StoredCompactionPolicy,
    /// Hex digits, one string per split key.
    partition_split_points: Vec<String>,
    partition_target_bytes: Option<u64>,
    gc_policy: StoredGcPolicy,
    background_gc: bool,
    gc_garbage_ratio: f64,
    gc_space_budget: Option<u64>,
    gc_space_amplification: Option<f64>,
    gc_space_trigger: f64,
    gc_punch_holes: bool,
    gc_logical_space_factor: f64,
    gc_rate_limit: u64,
    gc_rewrite_order: StoredGcRewriteOrder,
    /// Absent from files written before it existed.
    #[serde(default)]
    gc_in_compaction: bool,
    /// Absent from files written before it existed.
    #[serde(default)]
    gc_compact_in_place: bool,
    index_block_kind: StoredIndexBlockKind,
    paranoid_checks: bool,
    prefetch_threads: usize,
    info_log: StoredInfoLog,
    latency_histograms: bool,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
struct StoredInfoLog {
    enabled: bool,
    max_file_size: u64,
    keep_old_files: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredIndex {
    Lsm,
    Hash { capacity: u64, shards: usize },
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredCompression {
    None,
    Lz4,
    Zstd,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredCompactionPolicy {
    Score,
    TimeSlice { slice_ms: u64, dynamic: bool, drain_percent: Option<u8> },
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredGcPolicy {
    Oldest,
    Greedy,
    CostBenefit,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredGcRewriteOrder {
    Segment,
    Key,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredIndexBlockKind {
    Binary,
    Learned,
    Adaptive,
}

impl Default for StoredOptions {
    fn default() -> Self {
        StoredOptions::from(&Options::default())
    }
}

impl From<&Options> for StoredOptions {
    fn from(o: &Options) -> Self {
        // Exhaustive on purpose: a new option does not compile until it is stored here (and in
        // `into_options`) or named as not stored, and documented in docs/format/options.md.
        let Options {
            fs: _,
            create_if_missing: _,
            error_if_exists: _,
            compaction_listener: _,
            value_threshold,
            write_buffer_size,
            segment_size,
            vlog_buffer_size,
            block_size,
            block_restart_interval,
            compression,
            bloom_bits_per_key,
            block_cache_capacity,
            max_open_files,
            num_levels,
            level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger,
            level0_stop_writes_trigger,
            max_bytes_for_level_base,
            max_bytes_for_level_multiplier,
            target_file_size,
            max_background_compactions,
            compaction_policy,
            partition_split_points,
            partition_target_bytes,
            gc_policy,
            background_gc,
            gc_garbage_ratio,
            gc_space_budget,
            gc_space_amplification,
            gc_space_trigger,
            gc_punch_holes,
            gc_logical_space_factor,
            gc_rate_limit,
            gc_rewrite_order,
            gc_in_compaction,
            gc_compact_in_place,
            index,
            index_block_kind,
            paranoid_checks,
            prefetch_threads,
            info_log,
            latency_histograms,
        } = o;
        StoredOptions {
            index: match *index {
                IndexKind::Lsm => StoredIndex::Lsm,
                IndexKind::Hash { capacity, shards } => StoredIndex::Hash { capacity, shards },
            },
            num_levels: *num_levels,
            value_threshold: *value_threshold,
            write_buffer_size: *write_buffer_size,
            segment_size: *segment_size,
            vlog_buffer_size: *vlog_buffer_size,
            block_size: *block_size,
            block_restart_interval: *block_restart_interval,
            compression: match compression {
                CompressionType::None => StoredCompression::None,
                CompressionType::Lz4 => StoredCompression::Lz4,
                CompressionType::Zstd => StoredCompression::Zstd,
            },
            bloom_bits_per_key: *bloom_bits_per_key,
            block_cache_capacity: *block_cache_capacity,
            max_open_files: *max_open_files,
            level0_file_num_compaction_trigger: *level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: *level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: *level0_stop_writes_trigger,
            max_bytes_for_level_base: *max_bytes_for_level_base,
            max_bytes_for_level_multiplier: *max_bytes_for_level_multiplier,
            target_file_size: *target_file_size,
            max_background_compactions: *max_background_compactions,
            compaction_policy: match *compaction_policy {
                CompactionPolicyKind::Score => StoredCompactionPolicy::Score,
                CompactionPolicyKind::TimeSlice { slice_ms, dynamic, drain_percent } => {
                    StoredCompactionPolicy::TimeSlice { slice_ms, dynamic, drain_percent }
                }
            },
            partition_split_points: partition_split_points.iter().map(|k| hex_encode(k)).collect(),
            partition_target_bytes: *partition_target_bytes,
            gc_policy: match gc_policy {
                GcPolicyKind::Oldest => StoredGcPolicy::Oldest,
                GcPolicyKind::Greedy => StoredGcPolicy::Greedy,
                GcPolicyKind::CostBenefit => StoredGcPolicy::CostBenefit,
            },
            background_gc: *background_gc,
            gc_garbage_ratio: *gc_garbage_ratio,
            gc_space_budget: *gc_space_budget,
            gc_space_amplification: *gc_space_amplification,
            gc_space_trigger: *gc_space_trigger,
            gc_punch_holes: *gc_punch_holes,
            gc_logical_space_factor: *gc_logical_space_factor,
            gc_rate_limit: *gc_rate_limit,
            gc_rewrite_order: match gc_rewrite_order {
                GcRewriteOrder::Segment => StoredGcRewriteOrder::Segment,
                GcRewriteOrder::Key => StoredGcRewriteOrder::Key,
            },
            gc_in_compaction: *gc_in_compaction,
            gc_compact_in_place: *gc_compact_in_place,
            index_block_kind: match index_block_kind {
                IndexBlockKind::Binary => StoredIndexBlockKind::Binary,
                IndexBlockKind::Learned => StoredIndexBlockKind::Learned,
                IndexBlockKind::Adaptive => StoredIndexBlockKind::Adaptive,
            },
            paranoid_checks: *paranoid_checks,
            prefetch_threads: *prefetch_threads,
            info_log: StoredInfoLog {
                enabled: info_log.enabled,
                max_file_size: info_log.max_file_size,
                keep_old_files: info_log.keep_old_files,
            },
            latency_histograms: *latency_histograms,
        }
    }
}

impl StoredOptions {
    /// The options these stand for, on `fs`, for reopening an existing database: neither
    /// created nor required to be new.
    fn into_options(self, fs: Arc<dyn FileSystem>) -> std::result::Result<Options, String> {
        let partition_split_points = self
            .partition_split_points
            .iter()
            .map(|k| hex_decode(k).ok_or_else(|| format!("partition split point {k:?} is not hex")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Options {
            fs,
            create_if_missing: false,
            error_if_exists: false,
            compaction_listener: None,
            value_threshold: self.value_threshold,
            write_buffer_size: self.write_buffer_size,
            segment_size: self.segment_size,
            vlog_buffer_size: self.vlog_buffer_size,
            block_size: self.block_size,
            block_restart_interval: self.block_restart_interval,
            compression: match self.compression {
                StoredCompression::None => CompressionType::None,
                StoredCompression::Lz4 => CompressionType::Lz4,
                StoredCompression::Zstd => CompressionType::Zstd,
            },
            bloom_bits_per_key: self.bloom_bits_per_key,
            block_cache_capacity: self.block_cache_capacity,
            max_open_files: self.max_open_files,
            num_levels: self.num_levels,
            level0_file_num_compaction_trigger: self.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: self.level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: self.level0_stop_writes_trigger,
            max_bytes_for_level_base: self.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: self.max_bytes_for_level_multiplier,
            target_file_size: self.target_file_size,
            max_background_compactions: self.max_background_compactions,
            compaction_policy: match self.compaction_policy {
                StoredCompactionPolicy::Score => CompactionPolicyKind::Score,
                StoredCompactionPolicy::TimeSlice { slice_ms, dynamic, drain_percent } => {
                    CompactionPolicyKind::TimeSlice { slice_ms, dynamic, drain_percent }
                }
            },
            partition_split_points,
            partition_target_bytes: self.partition_target_bytes,
            gc_policy: match self.gc_policy {
                StoredGcPolicy::Oldest => GcPolicyKind::Oldest,
                StoredGcPolicy::Greedy => GcPolicyKind::Greedy,
                StoredGcPolicy::CostBenefit => GcPolicyKind::CostBenefit,
            },
            background_gc: self.background_gc,
            gc_garbage_ratio: self.gc_garbage_ratio,
            gc_space_budget: self.gc_space_budget,
            gc_space_amplification: self.gc_space_amplification,
            gc_space_trigger: self.gc_space_trigger,
            gc_punch_holes: self.gc_punch_holes,
            gc_logical_space_factor: self.gc_logical_space_factor,
            gc_rate_limit: self.gc_rate_limit,
            gc_rewrite_order: match self.gc_rewrite_order {
                StoredGcRewriteOrder::Segment => GcRewriteOrder::Segment,
                StoredGcRewriteOrder::Key => GcRewriteOrder::Key,
            },
            gc_in_compaction: self.gc_in_compaction,
            gc_compact_in_place: self.gc_compact_in_place,
            index: match self.index {
                StoredIndex::Lsm => IndexKind::Lsm,
                StoredIndex::Hash { capacity, shards } => IndexKind::Hash { capacity, shards },
            },
            index_block_kind: match self.index_block_kind {
                StoredIndexBlockKind::Binary => IndexBlockKind::Binary,
                StoredIndexBlockKind::Learned => IndexBlockKind::Learned,
                StoredIndexBlockKind::Adaptive => IndexBlockKind::Adaptive,
            },
            paranoid_checks: self.paranoid_checks,
            prefetch_threads: self.prefetch_threads,
            info_log: InfoLogOptions {
                enabled: self.info_log.enabled,
                max_file_size: self.info_log.max_file_size,
                keep_old_files: self.info_log.keep_old_files,
            },
            latency_histograms: self.latency_histograms,
        })
    }

    /// The first option whose value JSON cannot hold (a float that is not finite).
    fn unrepresentable(&self) -> Option<(&'static str, f64)> {
        [
            ("max_bytes_for_level_multiplier", Some(self.max_bytes_for_level_multiplier)),
            ("gc_garbage_ratio", Some(self.gc_garbage_ratio)),
            ("gc_space_amplification", self.gc_space_amplification),
            ("gc_space_trigger", Some(self.gc_space_trigger)),
            ("gc_logical_space_factor", Some(self.gc_logical_space_factor)),
        ]
        .into_iter()
        .find_map(|(name, value)| value.filter(|v| !v.is_finite()).map(|v| (name, v)))
    }
}

impl Options {
    /// The options stored in the `OPTIONS` file of the database at `path` on the OS file
    /// system: those of its last read-write open (RocksDB's `LoadLatestOptions`). `None` if the
    /// database has no such file (made before splitkv stored options). See [`Options::load_from`].
    pub fn load(path: impl AsRef<Path>) -> Result<Option<Options>> {
        Options::load_from(OsFileSystem::shared(), path)
    }

    /// Like [`Options::load`] on `fs`, which the returned options use. They reopen an existing
    /// database: `create_if_missing` and `error_if_exists` are false, and there is no
    /// compaction listener. A damaged file is [`Error::Corruption`]; one written by a newer
    /// splitkv in a format this build does not read is [`Error::InvalidArgument`].
    pub fn load_from(fs: Arc<dyn FileSystem>, path: impl AsRef<Path>) -> Result<Option<Options>> {
        let file = options_file(path.as_ref());
        if !fs.exists(&file) {
            return Ok(None);
        }
        let bytes = fs.read_all(&file)?;
        let stored = decode(&bytes, &file)?;
        stored.into_options(fs).map(Some).map_err(|reason| Error::corruption(&file, 0, reason))
    }
}

/// The `OPTIONS` text for `options`; an option JSON cannot hold is [`Error::InvalidArgument`].
fn encode(options: &Options) -> Result<Vec<u8>> {
    let stored = StoredOptions::from(options);
    if let Some((name, value)) = stored.unrepresentable() {
        return Err(Error::InvalidArgument(format!("option {name} must be a finite number, not {value}")));
    }
    let file = OptionsFile { format_version: OPTIONS_FORMAT_VERSION, written_by: writer_name(), options: stored };
    let mut text = serde_json::to_vec_pretty(&file)
        .map_err(|e| Error::InvalidArgument(format!("options cannot be written as JSON: {e}")))?;
    text.push(b'\n');
    Ok(text)
}

/// Parses and validates the bytes of the `OPTIONS` file at `path`.
fn decode(bytes: &[u8], path: &Path) -> Result<StoredOptions> {
    let corrupt = |e: serde_json::Error| {
        Error::corruption(path, byte_offset(bytes, e.line(), e.column()), format!("OPTIONS does not parse: {e}"))
    };
    // The version first: a newer format may have changed what the other fields mean.
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(corrupt)?;
    let version = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| Error::corruption(path, 0, "OPTIONS has no numeric format_version"))?;
    if version > u64::from(OPTIONS_FORMAT_VERSION) {
        return Err(Error::InvalidArgument(format!(
            "{} is in OPTIONS format version {version}, newer than the version {OPTIONS_FORMAT_VERSION} this \
             build reads",
            path.display()
        )));
    }
    if version == 0 {
        return Err(Error::corruption(path, 0, "OPTIONS format version 0 does not exist"));
    }
    let file: OptionsFile = serde_json::from_value(value)
        .map_err(|e| Error::corruption(path, 0, format!("OPTIONS does not hold valid options: {e}")))?;
    Ok(file.options)
}

/// `splitkv <version>`, recorded in the file for people reading it.
fn writer_name() -> String {
    concat!("splitkv ", env!("CARGO_PKG_VERSION")).to_string()
}

/// The byte offset of a 1-based line and column (as `serde_json` reports them) in `text`.
fn byte_offset(text: &[u8], line: usize, column: usize) -> u64 {
    let line_start: usize = text.split(|&b| b == b'\n').take(line.saturating_sub(1)).map(|l| l.len() + 1).sum();
    (line_start + column.saturating_sub(1)).min(text.len()) as u64
}

/// Replaces the `OPTIONS` file of `dir` with `options`, atomically and durably (temporary
/// file, sync, rename, directory sync).
pub(crate) fn write_options_file(fs: &dyn FileSystem, dir: &Path, options: &Options) -> Result<()> {
    let text = encode(options)?;
    let tmp = temp_file(dir, "OPTIONS");
    let mut file = fs.create(&tmp)?;
    file.append(&text)?;
    file.sync()?;
    drop(file);
    fs.rename(&tmp, &options_file(dir))?;
    fs.sync_dir(dir)
}

/// Refuses `given` if a shape option differs from the one stored in `dir`'s `OPTIONS` file (no
/// file: nothing to check). Runs before the database reads or writes anything else.
pub(crate) fn check_shape(dir: &Path, given: &Options) -> Result<()> {
    let Some(stored) = Options::load_from(Arc::clone(&given.fs), dir)? else { return Ok(()) };
    let mismatch = |name: &str, stored: String, given: String| {
        Error::InvalidArgument(format!(
            "option {name} of the database at {} is {stored} (stored in its OPTIONS file), but {given} was \
             given; it shapes the files on disk and cannot change: open with the stored options \
             (Options::load)",
            dir.display()
        ))
    };
    if index_kind_name(stored.index) != index_kind_name(given.index) {
        return Err(mismatch("index", index_kind_name(stored.index).into(), index_kind_name(given.index).into()));
    }
    if stored.num_levels != given.num_levels {
        return Err(mismatch("num_levels", stored.num_levels.to_string(), given.num_levels.to_string()));
    }
    Ok(())
}

/// `lsm` or `hash`: the part of [`IndexKind`] that is shape (a hash table's capacity only
/// sizes a new table, and its shards are threads).
fn index_kind_name(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Lsm => "lsm",
        IndexKind::Hash { .. } => "hash",
    }
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;

    fn unusual_options(fs: Arc<dyn FileSystem>) -> Options {
        Options {
            fs,
            create_if_missing: false,
            value_threshold: usize::MAX,
            segment_size: u64::MAX,
            compression: CompressionType::Zstd,
            num_levels: 5,
            max_bytes_for_level_multiplier: 0.1 + 0.2,
            compaction_policy: CompactionPolicyKind::TimeSlice { slice_ms: 7, dynamic: true, drain_percent: Some(40) },
            partition_split_points: vec![b"m".to_vec(), vec![0, 255, 7]],
            partition_target_bytes: Some(1 << 40),
            gc_policy: GcPolicyKind::CostBenefit,
            gc_rewrite_order: GcRewriteOrder::Key,
            gc_in_compaction: true,
            gc_compact_in_place: true,
            gc_space_budget: Some(u64::MAX - 1),
            gc_space_amplification: None,
            index: IndexKind::Hash { capacity: 1 << 33, shards: 3 },
            index_block_kind: IndexBlockKind::Adaptive,
            paranoid_checks: true,
            info_log: InfoLogOptions { enabled: false, max_file_size: 12345, keep_old_files: 2 },
            latency_histograms: false,
            ..Options::default()
        }
    }

    #[test]
    fn every_stored_option_reads_back_exactly() -> Result<()> {
        let mem = MemFileSystem::new();
        let fs = mem.shared();
        let dir = Path::new("/db");
        fs.create_dir_all(dir)?;
        assert!(Options::load_from(Arc::clone(&fs), dir)?.is_none(), "no file yet");
        let written = unusual_options(Arc::clone(&fs));
        write_options_file(fs.as_ref(), dir, &written)?;
        let read = Options::load_from(Arc::clone(&fs), dir)?.expect("written");
        assert_eq!(format!("{read:?}"), format!("{written:?}"));
        assert_eq!(read.partition_split_points, written.partition_split_points);
        assert_eq!(read.max_bytes_for_level_multiplier.to_bits(), written.max_bytes_for_level_multiplier.to_bits());
        assert_eq!(mem.file_names(dir), ["OPTIONS"], "the temporary file is renamed away");
        // Durable: a crash keeps it.
        mem.crash();
        assert!(Options::load_from(fs, dir)?.is_some());
        Ok(())
    }

    #[test]
    fn missing_fields_read_as_defaults_and_unknown_ones_are_ignored() -> Result<()> {
        let text = br#"{"format_version": 1, "options": {"num_levels": 4, "from_the_future": true}}"#;
        let stored = decode(text, Path::new("/db/OPTIONS"))?;
        let options = stored.into_options(OsFileSystem::shared()).map_err(Error::InvalidArgument)?;
        assert_eq!(options.num_levels, 4);
        assert_eq!(options.value_threshold, Options::default().value_threshold);
        Ok(())
    }

    #[test]
    fn damaged_files_are_errors_that_name_the_spot() {
        let path = Path::new("/db/OPTIONS");
        let good = encode(&Options::default()).unwrap();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("cut short", good[..good.len() / 2].to_vec()),
            ("not utf-8", vec![0xff, 0xfe, b'{']),
            ("no version", br#"{"options": {}}"#.to_vec()),
            ("version 0", br#"{"format_version": 0, "options": {}}"#.to_vec()),
            ("wrong type", br#"{"format_version": 1, "options": {"num_levels": "seven"}}"#.to_vec()),
            ("unknown kind", br#"{"format_version": 1, "options": {"index": {"kind": "btree"}}}"#.to_vec()),
            ("negative", br#"{"format_version": 1, "options": {"block_size": -1}}"#.to_vec()),
            ("not an object", b"[1, 2]".to_vec()),
        ];
        for (what, bytes) in cases {
            match decode(&bytes, path) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(file, path, "{what}");
                    assert!(offset <= bytes.len() as u64, "{what}: offset {offset}");
                }
                Err(other) => panic!("{what}: expected corruption, got {other}"),
                Ok(_) => panic!("{what}: accepted"),
            }
        }
        let second_line = b"{\n  \"format_version\": 1,\n  \"options\": {\"num_levels\": x}\n}";
        match decode(second_line, path) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(second_line[offset as usize], b'x'),
            Err(other) => panic!("expected corruption at the x, got {other}"),
            Ok(_) => panic!("accepted"),
        }
        let newer = br#"{"format_version": 2, "options": {}}"#;
        assert!(matches!(decode(newer, path), Err(Error::InvalidArgument(m)) if m.contains("version 2")));
        let bad_hex = br#"{"format_version": 1, "options": {"partition_split_points": ["zz"]}}"#;
        let stored = decode(bad_hex, path).unwrap();
        assert!(stored.into_options(OsFileSystem::shared()).is_err());
    }

    #[test]
    fn options_json_cannot_hold_are_refused_by_name() {
        let options = Options { gc_space_trigger: f64::NAN, ..Options::default() };
        assert!(matches!(encode(&options), Err(Error::InvalidArgument(m)) if m.contains("gc_space_trigger")));
    }

    #[test]
    fn hex_round_trips() {
        for bytes in [&b""[..], b"a", &[0, 255, 16]] {
            assert_eq!(hex_decode(&hex_encode(bytes)).as_deref(), Some(bytes));
        }
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("g0"), None);
    }
}
