//! [`FjallEngine`]: fjall (a pure-Rust LSM tree with key-value separation) behind the benchmark
//! seam: the engine a Rust user would compare splitkv with.
//!
//! One database with one keyspace. Options are fjall's defaults, overridden only by flags that
//! were given (memtable size, block size, block cache, bloom bits per key, open files,
//! compression none|lz4), plus key-value separation always on: values of at least
//! `--value_threshold` bytes (splitkv's default, 512, when not given; `max` turns separation off)
//! go to blob files, as splitkv's go to its value log; `--blob_file_size` sets the blob file size.
//!
//! Durability matches the LevelDB and RocksDB engines: without `--sync` every write reaches the
//! OS (fjall's default: the journal is flushed to OS buffers per write, as LevelDB and RocksDB
//! write their log), and with `--sync` the journal is `fdatasync`ed before the write returns
//! (RocksDB's default `use_fsync=false`; LevelDB syncs its log with `fdatasync` too). fjall has
//! no range delete, so `deleterange` is refused as for LevelDB. `Database` and `Keyspace` are
//! internally synchronised; the engine adds no locking.

use fjall::config::{BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};

use super::{BenchResult, Direction, Engine, WriteOp};
use crate::flags::{Compression, Flags};

/// The keyspace every benchmark writes to.
const KEYSPACE: &str = "bench";

/// splitkv's default value threshold, used when `--value_threshold` is not given so that both
/// engines separate the same values.
const DEFAULT_SEPARATION_THRESHOLD: usize = 512;

/// fjall behind the benchmark seam.
pub struct FjallEngine {
    // Declared first so it is dropped before the database it belongs to.
    keyspace: Keyspace,
    db: Database,
}

/// The keyspace options the flags ask for.
fn keyspace_options(flags: &Flags) -> BenchResult<KeyspaceCreateOptions> {
    let compression = match flags.compression_type {
        None => None,
        Some(Compression::None) => Some(CompressionType::None),
        Some(Compression::Lz4) => Some(CompressionType::Lz4),
        Some(other) => return Err(format!("fjall has no {other:?} compression; use none or lz4").into()),
    };
    let mut options = KeyspaceCreateOptions::default();
    if let Some(n) = flags.write_buffer_size {
        options = options.max_memtable_size(u64::try_from(n)?);
    }
    if let Some(n) = flags.block_size {
        // fjall panics outside 1 KiB..=1 MiB; refuse instead.
        if !(1024..=1 << 20).contains(&n) {
            return Err("fjall needs --block_size between 1 KiB and 1 MiB".into());
        }
        options = options.data_block_size_policy(BlockSizePolicy::all(u32::try_from(n)?));
    }
    if let Some(bits) = flags.bloom_bits {
        let entry = FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(bits as f32));
        options = options.filter_policy(FilterPolicy::all(entry));
    }
    if let Some(kind) = compression {
        options = options.data_block_compression_policy(CompressionPolicy::all(kind));
    }
    let threshold = flags.value_threshold.unwrap_or(DEFAULT_SEPARATION_THRESHOLD);
    if threshold != usize::MAX {
        let mut separation = KvSeparationOptions::default().separation_threshold(u32::try_from(threshold)?);
        if let Some(kind) = compression {
            separation = separation.compression(kind);
        }
        if let Some(n) = flags.blob_file_size {
            separation = separation.file_target_size(n);
        }
        options = options.with_kv_separation(Some(separation));
    }
    Ok(options)
}

impl FjallEngine {
    /// Opens (creating if missing) the database at `flags.db`.
    pub fn open(flags: &Flags) -> BenchResult<Self> {
        let options = keyspace_options(flags)?;
        let mut builder = Database::builder(&flags.db);
        if let Some(capacity) = flags.cache_size {
            builder = builder.cache_size(u64::try_from(capacity)?);
        }
        if let Some(n) = flags.open_files {
            // fjall panics below 10 cached files; refuse instead.
            if n < 10 {
                return Err("fjall needs --open_files of at least 10".into());
            }
            builder = builder.max_cached_files(Some(n));
        }
        let db = builder.open()?;
        let keyspace = db.keyspace(KEYSPACE, || options)?;
        Ok(FjallEngine { keyspace, db })
    }

    /// Removes the database at `flags.db`: fjall keeps everything under that directory.
    pub fn destroy(flags: &Flags) -> BenchResult<()> {
        match std::fs::remove_dir_all(&flags.db) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// With `--sync`, makes the journal durable before the write returns.
    fn persist_if(&self, sync: bool) -> BenchResult<()> {
        if sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }
}

impl Engine for FjallEngine {
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> BenchResult<()> {
        self.keyspace.insert(key, value)?;
        self.persist_if(sync)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.keyspace.get(key)?.map(|value| value.len()))
    }

    fn delete(&self, key: &[u8], sync: bool) -> BenchResult<()> {
        self.keyspace.remove(key)?;
        self.persist_if(sync)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], sync: bool) -> BenchResult<()> {
        let mut batch = self.db.batch();
        if sync {
            batch = batch.durability(Some(PersistMode::SyncData));
        }
        for op in ops {
            match *op {
                WriteOp::Put { key, value } => batch.insert(&self.keyspace, key, value),
                WriteOp::Delete { key } => batch.remove(&self.keyspace, key),
            }
        }
        Ok(batch.commit()?)
    }

    fn scan(&self, direction: Direction, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> BenchResult<()> {
        let iter = self.keyspace.iter();
        let mut visit_entry = |guard: fjall::Guard| -> BenchResult<bool> {
            let (key, value) = guard.into_inner()?;
            Ok(visit(&key, &value))
        };
        match direction {
            Direction::Forward => {
                for guard in iter {
                    if !visit_entry(guard)? {
                        break;
                    }
                }
            }
            Direction::Reverse => {
                for guard in iter.rev() {
                    if !visit_entry(guard)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn scan_from(&self, start: &[u8], limit: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> BenchResult<usize> {
        let mut visited = 0;
        for guard in self.keyspace.range(start..).take(limit) {
            let (key, value) = guard.into_inner()?;
            visit(&key, &value);
            visited += 1;
        }
        Ok(visited)
    }

    fn seek_lands_on(&self, target: &[u8]) -> BenchResult<bool> {
        match self.keyspace.range(target..).next() {
            Some(guard) => Ok(&*guard.key()? == target),
            None => Ok(false),
        }
    }

    fn new_iterator(&self) -> BenchResult<()> {
        drop(self.keyspace.iter());
        Ok(())
    }

    fn compact(&self) -> BenchResult<()> {
        Ok(self.keyspace.major_compact()?)
    }

    fn flush(&self) -> BenchResult<()> {
        Ok(self.keyspace.rotate_memtable_and_wait()?)
    }

    fn stats_text(&self) -> Option<String> {
        Some(format!(
            "fjall: {} tables ({} in L0), {} blob files, {} bytes on disk, {} bytes of fragmented blobs",
            self.keyspace.table_count(),
            self.keyspace.l0_table_count(),
            self.keyspace.blob_file_count(),
            self.keyspace.disk_space(),
            self.keyspace.fragmented_blob_bytes(),
        ))
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        // Dropping the last handle flushes the journal and stops fjall's background workers;
        // persist first so an I/O error surfaces here rather than in a drop.
        self.db.persist(PersistMode::SyncAll)?;
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags_for(dir: &std::path::Path, extra: &[&str]) -> Flags {
        let mut args = vec![format!("--db={}", dir.display()), "--compression_type=none".to_owned()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        crate::flags::parse(args).unwrap()
    }

    #[test]
    fn small_and_separated_values_read_back_and_scan_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags_for(dir.path(), &["--value_threshold=64", "--cache_size=1048576", "--bloom_bits=10"]);
        let engine = Box::new(FjallEngine::open(&flags).unwrap());
        assert!(engine.keyspace.is_kv_separated());
        engine.put(b"k1", &[7u8; 100], false).unwrap();
        engine.put(b"k2", b"small", true).unwrap();
        engine
            .write_batch(&[WriteOp::Put { key: b"k3", value: &[1u8; 300] }, WriteOp::Delete { key: b"k2" }], false)
            .unwrap();
        engine.flush().unwrap();
        assert_eq!(engine.get(b"k1").unwrap(), Some(100));
        assert_eq!(engine.get(b"k2").unwrap(), None);
        assert!(engine.keyspace.blob_file_count() >= 1);

        let mut seen = Vec::new();
        assert_eq!(engine.scan_from(b"k", 10, &mut |key, value| seen.push((key.to_vec(), value.len()))).unwrap(), 2);
        assert_eq!(seen, vec![(b"k1".to_vec(), 100), (b"k3".to_vec(), 300)]);
        let mut reverse = Vec::new();
        engine
            .scan(Direction::Reverse, &mut |key, _| {
                reverse.push(key.to_vec());
                true
            })
            .unwrap();
        assert_eq!(reverse, vec![b"k3".to_vec(), b"k1".to_vec()]);
        assert!(engine.seek_lands_on(b"k3").unwrap());
        assert!(!engine.seek_lands_on(b"k2").unwrap());
        engine.delete(b"k1", false).unwrap();
        engine.compact().unwrap();
        assert_eq!(engine.get(b"k1").unwrap(), None);
        engine.close().unwrap();

        // Reopening recovers what was written.
        let engine = Box::new(FjallEngine::open(&flags).unwrap());
        assert_eq!(engine.get(b"k3").unwrap(), Some(300));
        engine.close().unwrap();
        FjallEngine::destroy(&flags).unwrap();
        assert!(!dir.path().exists());
    }

    #[test]
    fn threshold_max_turns_separation_off_and_bad_options_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = flags_for(&dir.path().join("plain"), &["--value_threshold=max"]);
        let engine = Box::new(FjallEngine::open(&plain).unwrap());
        assert!(!engine.keyspace.is_kv_separated());
        engine.close().unwrap();
        assert!(keyspace_options(&flags_for(dir.path(), &["--compression_type=zstd"])).is_err());
        assert!(keyspace_options(&flags_for(dir.path(), &["--block_size=100"])).is_err());
        assert!(FjallEngine::open(&flags_for(&dir.path().join("few"), &["--open_files=5"])).is_err());
    }
}
