//! The [`Engine`] seam: the handful of operations db_bench needs, implemented once per storage
//! engine so that every engine runs the same benchmark code with the same keys and values.
//!
//! Engines are shared by all benchmark threads (`Send + Sync`); each method is one engine call
//! (or, for scans, one iterator) so the harness measures the engine and not adapter overhead.
//! Engine tuning comes from [`Flags`]: an engine applies only the flags that were given and keeps
//! its own defaults for the rest.

#[cfg(feature = "fjall")]
pub mod fjall;
#[cfg(feature = "leveldb")]
pub mod leveldb;
pub mod provenance;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod splitkv;

use std::io;
use std::path::Path;

use crate::flags::{EngineKind, Flags};

/// Errors from an engine or its setup, as text: the harness only reports them.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// Result alias for engine calls.
pub type BenchResult<T> = Result<T, BenchError>;

/// One write in a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp<'a> {
    /// Set a key.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Remove a key.
    Delete {
        /// The key.
        key: &'a [u8],
    },
}

/// Scan order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys from the first.
    Forward,
    /// Descending keys from the last.
    Reverse,
}

/// Cumulative write counters an engine keeps about itself (since open); the harness takes the
/// difference across a benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteCounters {
    /// User bytes (keys + values) written, as the engine counts them.
    pub user_bytes: u64,
    /// Bytes the engine wrote to its files (logs, tables, value log).
    pub engine_bytes: u64,
    /// Microseconds writers were stalled or slowed down.
    pub stall_micros: u64,
}

/// What a benchmark may ask of a storage engine.
pub trait Engine: Send + Sync {
    /// Writes one key.
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> BenchResult<()>;
    /// Point lookup; returns the value's length if the key exists.
    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>>;
    /// Point lookups of several keys at once (RocksDB's `MultiGet`); returns how many exist.
    /// Engines without a batched read (LevelDB) loop over [`Engine::get`].
    fn multi_get(&self, keys: &[&[u8]]) -> BenchResult<usize> {
        let mut found = 0;
        for key in keys {
            found += usize::from(self.get(key)?.is_some());
        }
        Ok(found)
    }
    /// Removes one key.
    fn delete(&self, key: &[u8], sync: bool) -> BenchResult<()>;
    /// Applies `ops` atomically.
    fn write_batch(&self, ops: &[WriteOp<'_>], sync: bool) -> BenchResult<()>;
    /// Walks the whole key space in `direction` with one iterator, calling `visit(key, value)` for
    /// each entry until it returns false.
    fn scan(&self, direction: Direction, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> BenchResult<()>;
    /// Opens an iterator at the first key `>= start` and visits up to `limit` entries in ascending
    /// order; returns how many it visited.
    fn scan_from(&self, start: &[u8], limit: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> BenchResult<usize>;
    /// Opens an iterator, seeks to `target` and reports whether it landed exactly on it.
    fn seek_lands_on(&self, target: &[u8]) -> BenchResult<bool>;
    /// Removes every key in `[start, end)`: RocksDB's `DeleteRange`, splitkv's `delete_range`.
    /// LevelDB has none.
    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> BenchResult<()> {
        Err("this engine has no range delete".into())
    }
    /// Creates an iterator and drops it unpositioned (what creating one costs).
    fn new_iterator(&self) -> BenchResult<()>;
    /// Compacts the whole key range.
    fn compact(&self) -> BenchResult<()>;
    /// Writes the memtable out, so that reopening replays (and reads) no log. LevelDB's C API
    /// has no flush; its reopen replays at most one write buffer of log.
    fn flush(&self) -> BenchResult<()> {
        Ok(())
    }
    /// Reclaims space held by overwritten and deleted values: splitkv's value-log GC; for
    /// engines without a separate collector, a full compaction.
    fn gc(&self) -> BenchResult<()> {
        self.compact()
    }
    /// Lays values out in key order so scans read them sequentially: splitkv's key-order
    /// value-log rewrite. Engines that keep values in their LSM have them in key order after a
    /// full compaction, which is what they run. Returns the report line's message and the value
    /// bytes rewritten.
    fn rewrite_log(&self) -> BenchResult<(String, u64)> {
        self.compact()?;
        Ok(("(a full compaction: values live in the LSM)".to_string(), 0))
    }
    /// The engine's statistics report, if it has one.
    fn stats_text(&self) -> Option<String>;
    /// The engine's own write counters, if it keeps them.
    fn write_counters(&self) -> Option<WriteCounters> {
        None
    }
    /// The engine's own read counters, if it keeps them.
    fn read_counters(&self) -> Option<crate::resources::ReadCounters> {
        None
    }
    /// Level file counts sampled since the last call (splitkv with `--plot`); engines without a
    /// sampler have none.
    fn take_level_samples(&self) -> Vec<crate::stats_dump::LevelSample> {
        Vec::new()
    }
    /// Closes the engine, surfacing any error a drop would hide.
    fn close(self: Box<Self>) -> BenchResult<()>;
}

/// The version line db_bench prints to stderr before the header; for a peer, also how its
/// library was linked (see [`provenance`]).
pub fn version_line(flags: &Flags) -> String {
    if let Some(peer) = provenance::peer_build(flags) {
        return peer.line();
    }
    match flags.engine {
        EngineKind::Splitkv => format!("splitkv:    version {}", env!("CARGO_PKG_VERSION")),
        EngineKind::LevelDb => "LevelDB:    (not built in)".to_owned(),
        EngineKind::RocksDb => "RocksDB:    (not built in)".to_owned(),
        EngineKind::Fjall => "fjall:      (not built in)".to_owned(),
    }
}

/// Fails early when the selected engine was not compiled in.
pub fn ensure_built_in(flags: &Flags) -> BenchResult<()> {
    match flags.engine {
        EngineKind::Splitkv => Ok(()),
        #[cfg(feature = "leveldb")]
        EngineKind::LevelDb => Ok(()),
        #[cfg(not(feature = "leveldb"))]
        EngineKind::LevelDb => Err(missing_leveldb_feature()),
        #[cfg(feature = "rocksdb")]
        EngineKind::RocksDb => Ok(()),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::RocksDb => Err(missing_rocksdb_feature()),
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => Ok(()),
        #[cfg(not(feature = "fjall"))]
        EngineKind::Fjall => Err(missing_fjall_feature()),
    }
}

/// Opens (creating if missing) the database at `flags.db` with the selected engine.
pub fn open(flags: &Flags) -> BenchResult<Box<dyn Engine>> {
    match flags.engine {
        EngineKind::Splitkv => Ok(Box::new(splitkv::SplitkvEngine::open(flags)?)),
        #[cfg(feature = "leveldb")]
        EngineKind::LevelDb => Ok(Box::new(leveldb::LevelDbEngine::open(flags)?)),
        #[cfg(not(feature = "leveldb"))]
        EngineKind::LevelDb => Err(missing_leveldb_feature()),
        #[cfg(feature = "rocksdb")]
        EngineKind::RocksDb => Ok(Box::new(rocksdb::RocksDbEngine::open(flags)?)),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::RocksDb => Err(missing_rocksdb_feature()),
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => Ok(Box::new(fjall::FjallEngine::open(flags)?)),
        #[cfg(not(feature = "fjall"))]
        EngineKind::Fjall => Err(missing_fjall_feature()),
    }
}

/// Removes the database at `flags.db`; a database that does not exist is not an error.
pub fn destroy(flags: &Flags) -> BenchResult<()> {
    if !flags.db.exists() {
        return Ok(());
    }
    match flags.engine {
        EngineKind::Splitkv => splitkv::SplitkvEngine::destroy(flags),
        #[cfg(feature = "leveldb")]
        EngineKind::LevelDb => leveldb::LevelDbEngine::destroy(flags),
        #[cfg(not(feature = "leveldb"))]
        EngineKind::LevelDb => Err(missing_leveldb_feature()),
        #[cfg(feature = "rocksdb")]
        EngineKind::RocksDb => rocksdb::RocksDbEngine::destroy(flags),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::RocksDb => Err(missing_rocksdb_feature()),
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => fjall::FjallEngine::destroy(flags),
        #[cfg(not(feature = "fjall"))]
        EngineKind::Fjall => Err(missing_fjall_feature()),
    }
}

#[cfg(not(feature = "fjall"))]
fn missing_fjall_feature() -> BenchError {
    "--engine=fjall needs a build with `--features fjall`".into()
}

#[cfg(not(feature = "leveldb"))]
fn missing_leveldb_feature() -> BenchError {
    "--engine=leveldb needs a build with `--features leveldb` (and the system LevelDB library)".into()
}

#[cfg(not(feature = "rocksdb"))]
fn missing_rocksdb_feature() -> BenchError {
    "--engine=rocksdb needs a build with `--features rocksdb` (system RocksDB: librocksdb-dev, libclang-dev; \
     the repository's .cargo/config.toml points ROCKSDB_LIB_DIR at Debian's library directory)"
        .into()
}

/// Evicts every file under `dir` from the OS page cache: written-back first (`fdatasync`), then
/// dropped (`POSIX_FADV_DONTNEED`), so the next reads of the database go to the device. Pages a
/// process still maps stay cached, so the engine must be closed first.
pub fn drop_os_cache(dir: &Path) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    visit_files(dir, &mut |entry| {
        let file = std::fs::File::open(entry.path())?;
        file.sync_data()?;
        #[allow(unsafe_code)]
        // SAFETY: the descriptor is owned by `file`, which outlives the call.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    })
}

/// Bytes of all files under `dir` (the database's footprint on disk).
pub fn disk_usage(dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    visit_files(dir, &mut |entry| {
        total += entry.metadata()?.len();
        Ok(())
    })?;
    Ok(total)
}

/// Calls `visit` on every file under `dir`, descending into subdirectories.
fn visit_files(dir: &Path, visit: &mut dyn FnMut(&std::fs::DirEntry) -> io::Result<()>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            visit_files(&entry.path(), visit)?;
        } else {
            visit(&entry)?;
        }
    }
    Ok(())
}
