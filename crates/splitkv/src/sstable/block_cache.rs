//! The block cache: decoded, checksum-verified data blocks shared by every table, for the
//! blocks that cost more to read than to look up: blocks of files read with a system call
//! (no map) and compressed blocks. A raw block of a mapped file is read where it lies instead
//! (see `Table::data_block`).
//!
//! Blocks are keyed by `(file number, block offset)` and bounded by bytes; file numbers are never
//! reused, so entries of deleted tables are never wrong, only dead weight: the table cache drops
//! a deleted table's blocks when it forgets the table, and the rest age out. It is a
//! module of its own, below [`super::Table`] and apart from the table cache, because tables read
//! through it while the table cache opens tables: keeping the two apart keeps the imports one-way.
//!
//! Thread-safety: `Send + Sync`, shared through `Arc`; sharded (`quick_cache`) so concurrent
//! readers rarely contend.

use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::block::Block;
use crate::types::FileNumber;

// Every table on every reader thread shares one block cache.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<BlockCache>();
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

    /// Drops a cached block (of a deleted table).
    pub fn remove(&self, file: FileNumber, offset: u64) {
        self.blocks.remove(&(file, offset));
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
