//! The block cache: decoded, checksum-verified data blocks shared by every table.
//!
//! Blocks are keyed by `(file number, block offset)` and bounded by bytes; file numbers are never
//! reused, so entries of deleted tables are never wrong, only dead weight that ages out. It is a
//! module of its own, below [`super::Table`] and apart from the table cache, because tables read
//! through it while the table cache opens tables: keeping the two apart keeps the imports one-way.
//!
//! Once full, the cache admits a block only on its second miss within a short window
//! ([`BlockCache::admits`]): a miss that would only swap one cold block for another is then
//! read where it lies instead of copied, inserted and later evicted. Under uniformly random
//! reads over more blocks than fit, every admission policy gets the same hit rate, so each
//! admission was pure cost; under skew, a hot block still comes in on its second miss.
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

/// The block size the admission window is sized by (the default; blocks of other sizes only
/// make the window longer or shorter in blocks).
const TYPICAL_BLOCK: u64 = 4096;

/// Cached blocks per slot of the admission window: a block is admitted if it is missed again
/// before about `capacity / (TYPICAL_BLOCK * BLOCKS_PER_WINDOW_SLOT)` other misses overwrote
/// its slot, i.e. if it comes back much sooner than a block the cache holds would age out.
const BLOCKS_PER_WINDOW_SLOT: u64 = 4;

#[derive(Clone, Copy, Debug)]
struct BlockWeighter;

impl Weighter<(FileNumber, u64), Block> for BlockWeighter {
    fn weight(&self, _key: &(FileNumber, u64), block: &Block) -> u64 {
        block.data().len() as u64 + BLOCK_OVERHEAD
    }
}

/// A well-mixed, non-zero 64-bit tag of a block's key (splitmix64's finaliser over the file
/// number and offset), for the admission window: 0 marks an empty slot.
fn block_tag(file: FileNumber, offset: u64) -> u64 {
    let mut z = file.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ offset;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// Decoded data blocks shared by every table, bounded by bytes.
pub struct BlockCache {
    blocks: Cache<(FileNumber, u64), Block, BlockWeighter>,
    capacity: u64,
    /// Bytes inserted, counted up to `capacity`, less those removed: blocks only leave
    /// otherwise by eviction, so while this is at the capacity every insert evicts.
    filled: AtomicU64,
    /// Tags of blocks missed and not admitted, one per slot, overwritten by later misses that
    /// hash to the same slot (see [`BlockCache::admits`]).
    recent_misses: Box<[AtomicU64]>,
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
        let slots = (capacity / (TYPICAL_BLOCK * BLOCKS_PER_WINDOW_SLOT)).clamp(16, 1 << 20).next_power_of_two();
        BlockCache {
            blocks: Cache::with_weighter(estimated_blocks, capacity, BlockWeighter),
            capacity,
            filled: AtomicU64::new(0),
            recent_misses: (0..slots).map(|_| AtomicU64::new(0)).collect(),
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

    /// Whether a block just missed should be cached: always while the cache has room (an
    /// insert then evicts nothing), and once it is full only if the same block was missed
    /// recently, within the last few thousand misses. A block not admitted is remembered for
    /// its next miss. The window is a table of hashed tags, one per slot, without locks: a
    /// race between two misses only admits a block one miss early or late.
    pub fn admits(&self, file: FileNumber, offset: u64) -> bool {
        if self.filled.load(Ordering::Relaxed) < self.capacity {
            return true;
        }
        let tag = block_tag(file, offset);
        let slot = &self.recent_misses[(tag >> 32) as usize & (self.recent_misses.len() - 1)];
        if slot.load(Ordering::Relaxed) == tag {
            slot.store(0, Ordering::Relaxed);
            true
        } else {
            slot.store(tag, Ordering::Relaxed);
            false
        }
    }

    /// Caches a block.
    pub fn insert(&self, file: FileNumber, offset: u64, block: Block) {
        if self.filled.load(Ordering::Relaxed) < self.capacity {
            self.filled.fetch_add(BlockWeighter.weight(&(file, offset), &block), Ordering::Relaxed);
        }
        self.blocks.insert((file, offset), block);
    }

    /// Drops a cached block (of a deleted table): dead blocks would otherwise stay until they
    /// age out, and a full cache admits new blocks only slowly.
    pub fn remove(&self, file: FileNumber, offset: u64) {
        if let Some((key, block)) = self.blocks.remove(&(file, offset)) {
            let weight = BlockWeighter.weight(&key, &block);
            let _ = self.filled.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| Some(f.saturating_sub(weight)));
        }
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
