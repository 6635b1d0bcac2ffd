//! Sorted string tables: immutable files of internal keys and their values, LevelDB's table
//! format with a whole-table bloom filter and a pluggable index block. The byte layout is
//! documented in `docs/format/sstable.md` (format version [`FORMAT_VERSION`]).
//!
//! - [`TableBuilder`] writes a table front to back; [`Table`] reads one and [`TableIterator`]
//!   walks it.
//! - `block`: prefix-compressed blocks with restart points; `filter`: the bloom filter;
//!   `index`: the [`IndexBlock`] / [`IndexBlockBuilder`] seam and its binary-search
//!   implementation; `learned`: the learned index block (TridentKV); `learning`: when models are
//!   trained (write time or lazily) and their counters; `format`: block trailers, compression and
//!   the footer.
//! - [`BlockCache`] (`block_cache`) holds decoded data blocks for every [`Table`];
//!   [`TableCache`] (`table_cache`) keeps [`Table`]s open. They are separate modules because
//!   they sit at different heights: `block → block_cache → table → table_cache`, imports
//!   pointing one way only.
//!
//! Invariants: tables are written once and never modified; every byte read back is verified
//! (block checksums, footer checksum, structural checks), and anything that fails is reported as
//! [`crate::Error::Corruption`] with the file and offset, never as a panic.

mod block;
mod block_cache;
mod builder;
mod filter;
mod format;
mod index;
mod learned;
mod learning;
mod table;
mod table_cache;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockBuilder, BlockError, BlockIter};
pub use block_cache::BlockCache;
pub use builder::{BuiltTable, TableBuilder};
pub use filter::{BloomFilter, BloomFilterBuilder};
pub use format::{
    BlockHandle, CompressionType, Footer, IndexBlockKind, BLOCK_TRAILER_LEN, FOOTER_LEN, FORMAT_VERSION, TABLE_MAGIC,
};
pub use index::{
    BinaryIndex, BinaryIndexBuilder, BlockSpot, IndexBlock, IndexBlockBuilder, IndexSummary, ModelSummary, Window,
};
pub use learned::{LearnedIndex, LearnedIndexBuilder, MAX_ACCEPTED_ERROR, TARGET_ERROR};
pub use learning::{IndexLearning, LearningCounters};
pub use table::{Table, TableIterator};
pub use table_cache::TableCache;

/// The options that shape a table's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Uncompressed size at which a data block is cut.
    pub block_size: usize,
    /// Keys between restart points in data blocks.
    pub restart_interval: usize,
    /// Compression for data and index blocks.
    pub compression: CompressionType,
    /// Bloom filter bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: usize,
    /// Encoding of the index block.
    pub index_block_kind: IndexBlockKind,
}

impl Default for TableOptions {
    /// LevelDB's table shape but for a restart every 8 keys instead of 16 (a point lookup then
    /// decodes half as many entries past its binary search: `docs/design.md`, "Defaults and
    /// why"): 4 KiB blocks, no compression, 10 bloom bits per key, binary-search index blocks
    /// (also `Options`' defaults, checked by a test).
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 8,
            compression: CompressionType::None,
            bloom_bits_per_key: 10,
            index_block_kind: IndexBlockKind::Binary,
        }
    }
}
