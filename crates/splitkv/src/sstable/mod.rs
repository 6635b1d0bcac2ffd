//! Sorted string tables: immutable files of internal keys and their values, LevelDB's table
//! format with a whole-table bloom filter and a pluggable index block. The byte layout is
//! documented in `docs/format/sstable.md` (format version [`FORMAT_VERSION`]).
//!
//! - [`TableBuilder`] writes a table front to back; [`Table`] reads one and [`TableIterator`]
//!   walks it.
//! - `block`: prefix-compressed blocks with restart points; `filter`: the bloom filter;
//!   `index`: the [`IndexBlock`] seam and its binary-search implementation; `format`: block
//!   trailers, compression and the footer.
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
mod table;
mod table_cache;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockBuilder, BlockError, BlockIter};
pub use block_cache::BlockCache;
pub use builder::TableBuilder;
pub use filter::{BloomFilter, BloomFilterBuilder};
pub use format::{BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN, FORMAT_VERSION, TABLE_MAGIC};
pub use index::{BinaryIndex, IndexBlock};
pub use table::{Table, TableIterator};
pub use table_cache::TableCache;

use crate::options::{CompressionType, IndexBlockKind, Options};

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

impl TableOptions {
    /// The table options of a database's [`Options`].
    pub fn from_options(opts: &Options) -> Self {
        TableOptions {
            block_size: opts.block_size,
            restart_interval: opts.block_restart_interval,
            compression: opts.compression,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            index_block_kind: opts.index_block_kind,
        }
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions::from_options(&Options::default())
    }
}
