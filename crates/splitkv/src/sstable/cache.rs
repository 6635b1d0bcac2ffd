//! The two caches in front of SSTable files.
//!
//! [`BlockCache`] holds decoded, checksum-verified data blocks keyed by `(file number, block
//! offset)`, bounded by bytes; file numbers are never reused, so entries of deleted tables are
//! never wrong, only dead weight that ages out. [`TableCache`] holds open [`Table`]s (file handle,
//! index and filter) keyed by file number, bounded by count; concurrent misses for one table open
//! it once.
//!
//! Thread-safety: both are `Send + Sync` and meant to be shared through `Arc`; they are sharded
//! (`quick_cache`) so concurrent readers rarely contend.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::block::Block;
use super::table::Table;
use super::TableOptions;
use crate::error::Result;
use crate::filenames::table_file;
use crate::fs::{AccessPattern, FileSystem};
use crate::types::FileNumber;

// Readers on many threads share tables and caches, and iterators move between threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    fn sendable<T: Send>() {}
    shareable::<Table>();
    shareable::<BlockCache>();
    shareable::<TableCache>();
    sendable::<super::TableIterator>();
};

/// Bookkeeping bytes charged per cached block on top of its contents.
const BLOCK_OVERHEAD: u64 = 64;

#[derive(Clone, Copy, Debug)]
struct BlockWeighter;

impl Weighter<(FileNumber, u64), Block> for BlockWeighter {
    fn weight(&self, _key: &(FileNumber, u64), block: &Block) -> u64 {
        block.data().len() as u64 + BLOCK_OVERHEAD
    }
}

/// Decoded data blocks shared by every table, bounded by bytes.
pub struct BlockCache {
    blocks: Cache<(FileNumber, u64), Block, BlockWeighter>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> Self {
        let capacity = (capacity_bytes as u64).max(1);
        let estimated_blocks = (capacity_bytes / 4096).max(16);
        BlockCache {
            blocks: Cache::with_weighter(estimated_blocks, capacity, BlockWeighter),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block at `offset` of table `file`, counting a hit or a miss.
    pub fn get(&self, file: FileNumber, offset: u64) -> Option<Block> {
        let found = self.blocks.get(&(file, offset));
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches a block.
    pub fn insert(&self, file: FileNumber, offset: u64, block: Block) {
        self.blocks.insert((file, offset), block);
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes currently charged to cached blocks.
    pub fn usage(&self) -> u64 {
        self.blocks.weight()
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of cached blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True if no block is cached.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// Open tables of one database directory, bounded by count (`max_open_files`).
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    block_cache: Option<Arc<BlockCache>>,
    opts: TableOptions,
    tables: Cache<FileNumber, Arc<Table>>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache").field("dir", &self.dir).field("open", &self.tables.len()).finish_non_exhaustive()
    }
}

impl TableCache {
    /// A cache of up to `capacity` open tables of `dir`, sharing `block_cache`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Option<Arc<BlockCache>>,
        opts: TableOptions,
    ) -> Self {
        TableCache { fs, dir, block_cache, opts, tables: Cache::new(capacity.max(1)) }
    }

    /// The open table `number` of `size` bytes, opening it on a miss.
    pub fn get_table(&self, number: FileNumber, size: u64) -> Result<Arc<Table>> {
        self.tables.get_or_insert_with(&number, || {
            let path = table_file(&self.dir, number);
            let file = self.fs.open(&path)?;
            file.advise(AccessPattern::Random);
            Table::open(file, path, number, size, &self.opts, self.block_cache.clone())
        })
    }

    /// Forgets table `number` (after it was deleted); iterators holding it keep it alive.
    pub fn evict(&self, number: FileNumber) {
        self.tables.remove(&number);
    }

    /// The block cache shared by the tables.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }

    /// Number of open tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True if no table is open.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}
