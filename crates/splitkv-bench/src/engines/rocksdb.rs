//! [`RocksDbEngine`]: RocksDB (the system library, 7.x) behind the benchmark seam, through the
//! `rocksdb` crate.
//!
//! Options follow RocksDB's own defaults, overridden only by flags that were given (write
//! buffer, block size, LRU block cache, bloom filter, open files, compression, level-1 target,
//! SSTable size), plus integrated BlobDB (`--enable_blob_files`, `--min_blob_size`,
//! `--blob_file_size`) for the key-value separated comparison. Statistics are always enabled
//! because write amplification and stall time are read from its tickers; that costs a few
//! percent of throughput, the same for every run. The crate's `DB` is `Send + Sync`; the engine
//! adds no locking.

use std::cell::Cell;

use rocksdb::perf::{set_perf_stats, PerfStatsLevel};
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, ReadOptions, WriteBatch, WriteOptions, DB,
    DEFAULT_COLUMN_FAMILY_NAME,
};

use super::{BenchResult, Direction, Engine, WriteCounters, WriteOp};
use crate::flags::{Compression, Flags};

/// RocksDB behind the benchmark seam.
pub struct RocksDbEngine {
    db: DB,
    options: Options,
    // Made once, as db_bench does, rather than allocated and freed per call.
    write_options: WriteOptions,
    sync_write_options: WriteOptions,
    read_options: ReadOptions,
    // Kept alive for as long as the table factory refers to it.
    _cache: Option<Cache>,
}

/// RocksDB's defaults with the given flags applied, and the block cache the options point to.
pub fn options_from_flags(flags: &Flags) -> BenchResult<(Options, Option<Cache>)> {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.enable_statistics();
    if let Some(n) = flags.write_buffer_size {
        options.set_write_buffer_size(n);
    }
    if let Some(n) = flags.open_files {
        options.set_max_open_files(i32::try_from(n)?);
    }
    if let Some(kind) = flags.compression_type {
        options.set_compression_type(match kind {
            Compression::None => DBCompressionType::None,
            Compression::Snappy => DBCompressionType::Snappy,
            Compression::Lz4 => DBCompressionType::Lz4,
            Compression::Zstd => DBCompressionType::Zstd,
        });
    }
    if let Some(n) = flags.max_bytes_for_level_base {
        options.set_max_bytes_for_level_base(n);
    }
    if let Some(n) = flags.target_file_size {
        options.set_target_file_size_base(n);
    }
    if flags.enable_blob_files {
        options.set_enable_blob_files(true);
        options.set_min_blob_size(flags.min_blob_size);
        if let Some(n) = flags.blob_file_size {
            options.set_blob_file_size(n);
        }
        // Without GC, overwritten blobs are never reclaimed and space amplification only grows.
        options.set_enable_blob_gc(true);
    }
    let mut table = BlockBasedOptions::default();
    let mut cache = None;
    if let Some(n) = flags.block_size {
        table.set_block_size(n);
    }
    if let Some(n) = flags.block_restart_interval {
        table.set_block_restart_interval(i32::try_from(n)?);
    }
    if let Some(capacity) = flags.cache_size {
        let lru = Cache::new_lru_cache(capacity)?;
        table.set_block_cache(&lru);
        cache = Some(lru);
    }
    if let Some(bits) = flags.bloom_bits {
        table.set_bloom_filter(bits as f64, false);
    }
    options.set_block_based_table_factory(&table);
    Ok((options, cache))
}

impl RocksDbEngine {
    /// Opens the database at `flags.db`.
    pub fn open(flags: &Flags) -> BenchResult<Self> {
        let (options, cache) = options_from_flags(flags)?;
        // Opened with the default column family named, so that its handle exists for the batched
        // `MultiGet` (`DB::open` keeps no handles). The family gets the same options: `open_cf`
        // would give it `Options::default()`, silently dropping every column-family flag
        // (compression, write buffer, block cache and size, bloom bits, blob files, level sizes).
        let db = DB::open_cf_with_opts(&options, &flags.db, [(DEFAULT_COLUMN_FAMILY_NAME, options.clone())])?;
        Ok(RocksDbEngine {
            db,
            options,
            write_options: write_options(false),
            sync_write_options: write_options(true),
            read_options: ReadOptions::default(),
            _cache: cache,
        })
    }

    /// Removes the database at `flags.db`.
    pub fn destroy(flags: &Flags) -> BenchResult<()> {
        let (options, _cache) = options_from_flags(flags)?;
        DB::destroy(&options, &flags.db)?;
        Ok(())
    }
}

fn write_options(sync: bool) -> WriteOptions {
    let mut options = WriteOptions::default();
    options.set_sync(sync);
    options
}

thread_local! {
    static PERF_COUNTERS_OFF: Cell<bool> = const { Cell::new(false) };
}

/// Turns RocksDB's per-thread perf context counters off in the calling thread, once: RocksDB
/// counts by default (`kEnableCount`), and its db_bench turns them off in every benchmark thread
/// (`--perf_level=1`), so the harness does the same to measure what db_bench measures.
fn perf_counters_off() {
    PERF_COUNTERS_OFF.with(|off| {
        if !off.get() {
            set_perf_stats(PerfStatsLevel::Disable);
            off.set(true);
        }
    });
}

impl RocksDbEngine {
    fn write_options(&self, sync: bool) -> &WriteOptions {
        perf_counters_off();
        if sync {
            &self.sync_write_options
        } else {
            &self.write_options
        }
    }
}

/// A ticker's count from the text RocksDB's statistics dump (`name COUNT : n` lines).
fn ticker(statistics: &str, name: &str) -> u64 {
    statistics
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(" COUNT : ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

impl Engine for RocksDbEngine {
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> BenchResult<()> {
        Ok(self.db.put_opt(key, value, self.write_options(sync))?)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        perf_counters_off();
        Ok(self.db.get_pinned_opt(key, &self.read_options)?.map(|value| value.len()))
    }

    fn multi_get(&self, keys: &[&[u8]]) -> BenchResult<usize> {
        // The batched API (`MultiGet` over one column family), not the older vector form, which
        // is a loop of gets inside RocksDB.
        perf_counters_off();
        let default = self.db.cf_handle(DEFAULT_COLUMN_FAMILY_NAME).ok_or("no default column family")?;
        let mut found = 0;
        for value in self.db.batched_multi_get_cf(default, keys, false) {
            found += usize::from(value?.is_some());
        }
        Ok(found)
    }

    fn delete(&self, key: &[u8], sync: bool) -> BenchResult<()> {
        Ok(self.db.delete_opt(key, self.write_options(sync))?)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], sync: bool) -> BenchResult<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match *op {
                WriteOp::Put { key, value } => batch.put(key, value),
                WriteOp::Delete { key } => batch.delete(key),
            }
        }
        Ok(self.db.write_opt(batch, self.write_options(sync))?)
    }

    fn scan(&self, direction: Direction, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> BenchResult<()> {
        perf_counters_off();
        let mut iter = self.db.raw_iterator();
        match direction {
            Direction::Forward => iter.seek_to_first(),
            Direction::Reverse => iter.seek_to_last(),
        }
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            if !visit(key, value) {
                break;
            }
            match direction {
                Direction::Forward => iter.next(),
                Direction::Reverse => iter.prev(),
            }
        }
        Ok(iter.status()?)
    }

    fn scan_from(&self, start: &[u8], limit: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> BenchResult<usize> {
        perf_counters_off();
        let mut iter = self.db.raw_iterator();
        iter.seek(start);
        let mut visited = 0;
        while visited < limit {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
            visit(key, value);
            visited += 1;
            iter.next();
        }
        iter.status()?;
        Ok(visited)
    }

    fn seek_lands_on(&self, target: &[u8]) -> BenchResult<bool> {
        perf_counters_off();
        let mut iter = self.db.raw_iterator();
        iter.seek(target);
        let landed = iter.key() == Some(target);
        iter.status()?;
        Ok(landed)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> BenchResult<()> {
        let mut batch = WriteBatch::default();
        batch.delete_range(start, end);
        Ok(self.db.write_opt(batch, self.write_options(false))?)
    }

    fn new_iterator(&self) -> BenchResult<()> {
        let iter = self.db.raw_iterator();
        iter.status()?;
        Ok(())
    }

    fn compact(&self) -> BenchResult<()> {
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    fn flush(&self) -> BenchResult<()> {
        Ok(self.db.flush()?)
    }

    fn stats_text(&self) -> Option<String> {
        self.db.property_value("rocksdb.stats").ok().flatten()
    }

    fn write_counters(&self) -> Option<WriteCounters> {
        let statistics = self.options.get_statistics()?;
        // Flush and compaction tickers count every byte those jobs write, blob files included.
        let engine = ticker(&statistics, "rocksdb.wal.bytes")
            + ticker(&statistics, "rocksdb.flush.write.bytes")
            + ticker(&statistics, "rocksdb.compact.write.bytes");
        Some(WriteCounters {
            user_bytes: ticker(&statistics, "rocksdb.bytes.written"),
            engine_bytes: engine,
            stall_micros: ticker(&statistics, "rocksdb.stall.micros"),
        })
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        self.db.flush()?;
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse_from_the_statistics_dump() {
        let dump = "rocksdb.block.cache.miss COUNT : 12\nrocksdb.wal.bytes COUNT : 4096\n\
                    rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 COUNT : 3 SUM : 4\n";
        assert_eq!(ticker(dump, "rocksdb.wal.bytes"), 4096);
        assert_eq!(ticker(dump, "rocksdb.block.cache.miss"), 12);
        assert_eq!(ticker(dump, "rocksdb.flush.write.bytes"), 0);
        // A histogram line with the same prefix is not a ticker.
        assert_eq!(ticker(dump, "rocksdb.db.get.micros"), 0);
    }

    /// The text of one `[SECTION]` of the newest OPTIONS file RocksDB wrote into `dir`.
    fn options_section(dir: &std::path::Path, section: &str) -> String {
        let newest = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("OPTIONS-"))
            .max()
            .expect("RocksDB writes an OPTIONS file on open");
        let text = std::fs::read_to_string(newest).unwrap();
        let start = text.find(section).expect("section present");
        let body = &text[start + section.len()..];
        body[..body.find("\n[").unwrap_or(body.len())].to_owned()
    }

    /// Column-family options (compression, write buffer, table and blob settings) must reach the
    /// default family the engine opens, not only the database-wide options.
    #[test]
    fn column_family_flags_reach_the_default_family() {
        let dir = tempfile::tempdir().unwrap();
        let flags = crate::flags::parse([
            format!("--db={}", dir.path().display()),
            "--compression_type=none".to_owned(),
            "--write_buffer_size=1048576".to_owned(),
            "--block_size=8192".to_owned(),
            "--enable_blob_files=true".to_owned(),
            "--min_blob_size=64".to_owned(),
        ])
        .unwrap();
        let engine = Box::new(RocksDbEngine::open(&flags).unwrap());
        let family = options_section(dir.path(), "[CFOptions \"default\"]");
        for setting in
            ["compression=kNoCompression", "write_buffer_size=1048576", "enable_blob_files=true", "min_blob_size=64"]
        {
            assert!(family.lines().any(|line| line.trim() == setting), "{setting} missing from:\n{family}");
        }
        let table = options_section(dir.path(), "[TableOptions/BlockBasedTable \"default\"]");
        assert!(table.lines().any(|line| line.trim() == "block_size=8192"), "{table}");
        engine.close().unwrap();
    }

    #[test]
    fn blob_flags_reach_a_working_database() {
        let dir = std::env::temp_dir().join(format!("splitkv-bench-rocksdb-test-{}", std::process::id()));
        let flags = crate::flags::parse([
            format!("--db={}", dir.display()),
            "--enable_blob_files=true".to_owned(),
            "--min_blob_size=16".to_owned(),
        ])
        .unwrap();
        let engine = Box::new(RocksDbEngine::open(&flags).unwrap());
        engine.put(b"k1", &[7u8; 100], false).unwrap();
        engine.put(b"k2", b"small", false).unwrap();
        assert_eq!(engine.get(b"k1").unwrap(), Some(100));
        let mut seen = Vec::new();
        assert_eq!(engine.scan_from(b"k", 10, &mut |key, _| seen.push(key.to_vec())).unwrap(), 2);
        assert_eq!(seen, vec![b"k1".to_vec(), b"k2".to_vec()]);
        let counters = engine.write_counters().unwrap();
        assert!(counters.user_bytes > 0 && counters.engine_bytes > 0);
        engine.close().unwrap();
        RocksDbEngine::destroy(&flags).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
