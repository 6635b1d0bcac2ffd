//! [`SplitkvEngine`]: the benchmark's [`Engine`] over splitkv's public API.
//!
//! Options start from `splitkv::Options::default()` (with `--use_existing_db`, from the options the
//! database stores in its `OPTIONS` file) and only flags the user gave override them, so a run
//! without tuning flags measures the engine as shipped, or as the database was made. `Db` is shared by reference
//! across benchmark threads; it does its own synchronisation.

use std::sync::Arc;

use splitkv::{CompactionPolicyKind, CompressionType, Db, IndexKind, Options, ReadOptions, WriteBatch, WriteOptions};

use super::{BenchResult, Direction, Engine, WriteCounters, WriteOp};
use crate::flags::{Compression, Flags, PolicyFlag};
use crate::stats_dump::{LevelSample, StatsDump};

/// splitkv behind the benchmark seam.
pub struct SplitkvEngine {
    /// Shared with the `--stats_dump`/`--plot` sampler, which is stopped before closing.
    db: Arc<Db>,
    dump: Option<StatsDump>,
    read_options: ReadOptions,
}

impl SplitkvEngine {
    /// Opens the database at `flags.db`.
    pub fn open(flags: &Flags) -> BenchResult<Self> {
        let mut options = options_from_flags(flags)?;
        // One sampler serves both the dump file and the levels chart of `--plot`.
        let keep_level_samples = flags.plot.is_some();
        let mut dump = if flags.stats_dump.is_some() || keep_level_samples {
            let path = flags.stats_dump.as_deref();
            Some(StatsDump::create(path, keep_level_samples, flags.stats_interval_ms, &mut options)?)
        } else {
            None
        };
        let db = Arc::new(Db::open(&flags.db, options.clone())?);
        if let Some(dump) = dump.as_mut() {
            dump.start(Arc::clone(&db), &options);
        }
        let mut read_options = ReadOptions::default();
        if let Some(prefetch) = flags.prefetch {
            read_options.prefetch = prefetch;
        }
        Ok(SplitkvEngine { db, dump, read_options })
    }

    /// Removes the database at `flags.db`.
    pub fn destroy(flags: &Flags) -> BenchResult<()> {
        Db::destroy(&flags.db, &options_from_flags(flags)?)?;
        Ok(())
    }
}

/// splitkv's defaults (with `--use_existing_db`, the database's stored options) with the given
/// flags applied.
pub fn options_from_flags(flags: &Flags) -> BenchResult<Options> {
    let stored = if flags.use_existing_db { Options::load(&flags.db)? } else { None };
    let mut options = stored.unwrap_or_default();
    if let Some(n) = flags.write_buffer_size {
        options.write_buffer_size = n;
    }
    if flags.partitions > 1 {
        // Equal shares of the key numbers `--num` spans.
        let mut key = crate::keys::KeyBuffer::for_flags(flags);
        let n = u64::from(flags.num);
        options.partition_split_points =
            (1..flags.partitions).map(|i| key.set(n * i as u64 / flags.partitions as u64).to_vec()).collect();
    }
    if let Some(n) = flags.block_size {
        options.block_size = n;
    }
    if let Some(n) = flags.block_restart_interval {
        options.block_restart_interval = n;
    }
    if let Some(n) = flags.cache_size {
        options.block_cache_capacity = n;
    }
    if let Some(n) = flags.bloom_bits {
        options.bloom_bits_per_key = n;
    }
    if let Some(n) = flags.open_files {
        options.max_open_files = n;
    }
    if let Some(kind) = flags.compression_type {
        options.compression = match kind {
            Compression::None => CompressionType::None,
            Compression::Lz4 => CompressionType::Lz4,
            Compression::Zstd => CompressionType::Zstd,
            Compression::Snappy => return Err("splitkv has no snappy compression; use none, lz4 or zstd".into()),
        };
    }
    if let Some(n) = flags.value_threshold {
        options.value_threshold = n;
    }
    let (stored_capacity, stored_shards) = match options.index {
        IndexKind::Hash { capacity, shards } => (Some(capacity), Some(shards)),
        IndexKind::Lsm => (None, None),
    };
    match flags.hash_index.unwrap_or(stored_capacity.is_some()) {
        true => {
            options.index = IndexKind::Hash {
                capacity: flags.hash_capacity.or(stored_capacity).unwrap_or(u64::from(flags.num)),
                shards: flags.hash_shards.or(stored_shards).unwrap_or(1),
            }
        }
        false => options.index = IndexKind::Lsm,
    }
    if let Some(kind) = flags.index_block_kind.as_deref().and_then(splitkv::IndexBlockKind::parse) {
        options.index_block_kind = kind;
    }
    if let Some(n) = flags.segment_size {
        options.segment_size = n;
    }
    if let Some(p) = flags.gc_policy.as_deref().and_then(splitkv::GcPolicyKind::parse) {
        options.gc_policy = p;
    }
    if let Some(t) = flags.gc_threshold {
        options.gc_garbage_ratio = t;
    }
    if let Some(t) = flags.gc_space_trigger {
        options.gc_space_trigger = t;
    }
    if let Some(b) = flags.space_budget {
        options.gc_space_budget = Some(b);
    }
    if let Some(a) = flags.space_amplification {
        options.gc_space_amplification = a;
    }
    if let Some(b) = flags.background_gc {
        options.background_gc = b;
    }
    if let Some(f) = flags.gc_logical_space_factor {
        options.gc_logical_space_factor = f;
    }
    if let Some(b) = flags.gc_punch_holes {
        options.gc_punch_holes = b;
    }
    if let Some(b) = flags.gc_compact_in_place {
        options.gc_compact_in_place = b;
    }
    if let Some(b) = flags.gc_in_compaction {
        options.gc_in_compaction = b;
    }
    if let Some(r) = flags.gc_rate_limit {
        options.gc_rate_limit = r;
    }
    if let Some(n) = flags.max_bytes_for_level_base {
        options.max_bytes_for_level_base = n;
    }
    if let Some(n) = flags.target_file_size {
        options.target_file_size = n;
    }
    if let Some(n) = flags.prefetch_threads {
        options.prefetch_threads = n;
    }
    if let Some(on) = flags.latency_histograms {
        options.latency_histograms = on;
    }
    if let Some(policy) = flags.compaction_policy {
        options.compaction_policy = match policy {
            PolicyFlag::Score => CompactionPolicyKind::Score,
            PolicyFlag::TimeSlice => CompactionPolicyKind::TimeSlice {
                slice_ms: flags.time_slice_ms,
                dynamic: flags.dynamic_slice,
                drain_percent: flags.slice_drain_percent,
            },
        };
    }
    if let Some(n) = flags.max_background_compactions {
        options.max_background_compactions = n;
    }
    Ok(options)
}

fn write_options(sync: bool) -> WriteOptions {
    WriteOptions { sync }
}

impl Engine for SplitkvEngine {
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> BenchResult<()> {
        Ok(self.db.put_opt(&write_options(sync), key, value)?)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.db.get(key)?.map(|value| value.len()))
    }

    fn multi_get(&self, keys: &[&[u8]]) -> BenchResult<usize> {
        Ok(self.db.multi_get(&ReadOptions::default(), keys)?.iter().filter(|v| v.is_some()).count())
    }

    fn delete(&self, key: &[u8], sync: bool) -> BenchResult<()> {
        Ok(self.db.delete_opt(&write_options(sync), key)?)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], sync: bool) -> BenchResult<()> {
        let mut batch = WriteBatch::new();
        for op in ops {
            match *op {
                WriteOp::Put { key, value } => batch.put(key, value),
                WriteOp::Delete { key } => batch.delete(key),
            };
        }
        Ok(self.db.write(&write_options(sync), batch)?)
    }

    fn scan(&self, direction: Direction, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> BenchResult<()> {
        let mut iter = self.db.iter(self.read_options.clone())?;
        match direction {
            Direction::Forward => iter.seek_to_first()?,
            Direction::Reverse => iter.seek_to_last()?,
        }
        while iter.valid() && visit(iter.key(), iter.value()) {
            match direction {
                Direction::Forward => iter.next()?,
                Direction::Reverse => iter.prev()?,
            }
        }
        Ok(())
    }

    fn scan_from(&self, start: &[u8], limit: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> BenchResult<usize> {
        let mut iter = self.db.iter(self.read_options.clone())?;
        iter.seek(start)?;
        let mut visited = 0;
        while visited < limit && iter.valid() {
            visit(iter.key(), iter.value());
            visited += 1;
            iter.next()?;
        }
        Ok(visited)
    }

    fn seek_lands_on(&self, target: &[u8]) -> BenchResult<bool> {
        let mut iter = self.db.iter(self.read_options.clone())?;
        iter.seek(target)?;
        Ok(iter.valid() && iter.key() == target)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> BenchResult<()> {
        Ok(self.db.delete_range(start, end)?)
    }

    fn new_iterator(&self) -> BenchResult<()> {
        drop(self.db.iter(self.read_options.clone())?);
        Ok(())
    }

    fn compact(&self) -> BenchResult<()> {
        Ok(self.db.compact_range(None, None)?)
    }

    fn flush(&self) -> BenchResult<()> {
        Ok(self.db.flush()?)
    }

    fn gc(&self) -> BenchResult<()> {
        self.db.run_gc()?;
        Ok(())
    }

    fn rewrite_log(&self) -> BenchResult<(String, u64)> {
        let outcome = self.db.rewrite_value_log(None, None)?;
        let message = format!(
            "(rewrote {} values, {:.1} MB; released {} segments)",
            outcome.records_rewritten,
            outcome.bytes_rewritten as f64 / 1048576.0,
            outcome.gc.segments_released.len()
        );
        Ok((message, outcome.bytes_rewritten))
    }

    fn stats_text(&self) -> Option<String> {
        Some(self.db.stats().to_string())
    }

    fn write_counters(&self) -> Option<WriteCounters> {
        let stats = self.db.stats();
        Some(WriteCounters {
            user_bytes: stats.user_bytes_written,
            engine_bytes: stats.engine_bytes_written(),
            stall_micros: stats.stall_slowdown_micros + stats.stall_stop_micros + stats.stall_gc_micros,
        })
    }

    fn read_counters(&self) -> Option<crate::resources::ReadCounters> {
        let stats = self.db.stats();
        Some(crate::resources::ReadCounters {
            gets: stats.gets,
            vlog_reads: stats.vlog_reads,
            block_cache_misses: stats.block_cache_misses,
        })
    }

    fn take_level_samples(&self) -> Vec<LevelSample> {
        self.dump.as_ref().map(StatsDump::take_samples).unwrap_or_default()
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        let SplitkvEngine { db, mut dump, .. } = *self;
        if let Some(dump) = dump.as_mut() {
            dump.finish();
        }
        let db = Arc::try_unwrap(db).map_err(|_| "the stats sampler still holds the database")?;
        Ok(db.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_keep_defaults_unless_flags_are_given() {
        let defaults = Options::default();
        let options = options_from_flags(&Flags::default()).unwrap();
        assert_eq!(format!("{options:?}"), format!("{defaults:?}"));

        let flags = crate::flags::parse([
            "--value_threshold=max",
            "--write_buffer_size=1048576",
            "--compression_type=lz4",
            "--max_file_size=2097152",
        ])
        .unwrap();
        let options = options_from_flags(&flags).unwrap();
        assert_eq!(options.value_threshold, usize::MAX);
        assert_eq!(options.write_buffer_size, 1 << 20);
        assert_eq!(options.compression, CompressionType::Lz4);
        assert_eq!(options.target_file_size, 2 << 20);
        assert_eq!(options.block_size, defaults.block_size);
        assert!(options_from_flags(&crate::flags::parse(["--compression_type=snappy"]).unwrap()).is_err());
    }

    #[test]
    fn an_existing_database_opens_with_its_stored_options_under_the_given_flags() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db");
        let made = Options {
            value_threshold: 100,
            block_size: 8192,
            index: IndexKind::Hash { capacity: 64, shards: 2 },
            ..Options::default()
        };
        Db::open(&db, made).unwrap().close().unwrap();
        let path = format!("--db={}", db.display());

        let options = options_from_flags(&crate::flags::parse([path.as_str(), "--use_existing_db"]).unwrap()).unwrap();
        assert_eq!((options.value_threshold, options.block_size), (100, 8192));
        assert_eq!(options.index, IndexKind::Hash { capacity: 64, shards: 2 });

        let flags =
            crate::flags::parse([path.as_str(), "--use_existing_db", "--value_threshold=300", "--hash_shards=1"]);
        let options = options_from_flags(&flags.unwrap()).unwrap();
        assert_eq!((options.value_threshold, options.block_size), (300, 8192));
        assert_eq!(options.index, IndexKind::Hash { capacity: 64, shards: 1 });

        // Without --use_existing_db the stored options play no part.
        let options = options_from_flags(&crate::flags::parse([path.as_str()]).unwrap()).unwrap();
        assert_eq!(options.value_threshold, Options::default().value_threshold);
        assert_eq!(options.index, IndexKind::Lsm);
    }
}
