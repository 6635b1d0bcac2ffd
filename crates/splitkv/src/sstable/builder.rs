//! Writes one SSTable front to back: data blocks, the filter block, the index block, the footer.
//!
//! Invariants: keys arrive in strictly increasing internal-key order; an index entry for a data
//! block is written only when the next block's first key (or the end of the table) is known, so
//! its separator can be shortened. After an error the file is incomplete and the caller discards
//! it. A builder has one owner and is not shared between threads.

use std::cmp::Ordering;

use super::block::BlockBuilder;
use super::filter::BloomFilterBuilder;
use super::format::{block_trailer, compress_block, BlockHandle, Footer};
use super::format::{CompressionType, IndexBlockKind};
use super::index::{short_successor, shortest_separator, BinaryIndexBuilder, IndexBlockBuilder};
use super::learned::LearnedIndexBuilder;
use super::TableOptions;
use crate::error::Result;
use crate::fs::WritableFile;
use crate::types::{compare_internal_keys, user_key};

/// Builds an SSTable into a [`WritableFile`].
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    data_block: BlockBuilder,
    index: Box<dyn IndexBlockBuilder>,
    filter: Option<BloomFilterBuilder>,
    /// Offset where the next block will be written.
    offset: u64,
    num_entries: u64,
    last_key: Vec<u8>,
    /// Entries in the data block being built.
    block_entries: u64,
    /// The block just flushed and its entry count, waiting for the next key to choose its
    /// separator.
    pending_handle: Option<(BlockHandle, u64)>,
    compression_scratch: Vec<u8>,
}

impl TableBuilder {
    /// Starts a table in `file`, which must be empty (block handles are file offsets).
    pub fn new(file: Box<dyn WritableFile>, opts: TableOptions) -> Self {
        debug_assert!(file.is_empty(), "a table must start at offset 0");
        let offset = 0;
        let filter = (opts.bloom_bits_per_key > 0).then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key));
        TableBuilder {
            file,
            data_block: BlockBuilder::new(opts.restart_interval),
            index: match opts.index_block_kind {
                IndexBlockKind::Binary => Box::new(BinaryIndexBuilder::default()),
                // `Adaptive` reaching a builder means "train now": the caller already decided.
                IndexBlockKind::Learned | IndexBlockKind::Adaptive => {
                    Box::new(LearnedIndexBuilder::new(opts.restart_interval))
                }
            },
            filter,
            offset,
            num_entries: 0,
            last_key: Vec::new(),
            block_entries: 0,
            pending_handle: None,
            compression_scratch: Vec::new(),
            opts,
        }
    }

    /// Appends an entry; `ikey` must sort after every key added before.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        debug_assert!(
            self.num_entries == 0 || compare_internal_keys(&self.last_key, ikey) == Ordering::Less,
            "keys added out of order"
        );
        if let Some((handle, entries)) = self.pending_handle.take() {
            self.index.add_block(&shortest_separator(&self.last_key, ikey), handle, entries);
        }
        self.index.add_entry(ikey);
        if let Some(filter) = &mut self.filter {
            // Versions of one user key are adjacent; the filter needs the key once.
            let uk = user_key(ikey);
            if self.num_entries == 0 || user_key(&self.last_key) != uk {
                filter.add_key(uk);
            }
        }
        self.data_block.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.num_entries += 1;
        self.block_entries += 1;
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes written so far plus the unfinished data block.
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.data_block.size_estimate() as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let handle =
            write_block(&mut *self.file, &mut self.offset, raw, self.opts.compression, &mut self.compression_scratch)?;
        self.data_block.reset();
        self.pending_handle = Some((handle, self.block_entries));
        self.block_entries = 0;
        Ok(())
    }

    /// Writes the last data block, the filter and index blocks and the footer, syncs the file,
    /// and says what was written.
    pub fn finish(mut self) -> Result<BuiltTable> {
        self.flush_data_block()?;
        if let Some((handle, entries)) = self.pending_handle.take() {
            self.index.add_block(&short_successor(&self.last_key), handle, entries);
        }
        let filter = match &mut self.filter {
            Some(f) => {
                let bits = f.finish();
                // Filter bits are random by design: compressing them would only cost CPU.
                write_block(
                    &mut *self.file,
                    &mut self.offset,
                    &bits,
                    CompressionType::None,
                    &mut self.compression_scratch,
                )?
            }
            None => BlockHandle { offset: self.offset, size: 0 },
        };
        let built = self.index.finish();
        let index = write_block(
            &mut *self.file,
            &mut self.offset,
            &built.bytes,
            self.opts.compression,
            &mut self.compression_scratch,
        )?;
        let footer = Footer { filter, index, num_entries: self.num_entries, index_kind: built.kind };
        let encoded = footer.encode();
        self.file.append(&encoded)?;
        self.offset += encoded.len() as u64;
        self.file.sync()?;
        Ok(BuiltTable { size: self.offset, index_kind: built.kind, model_rejected: built.model_rejected })
    }
}

/// What [`TableBuilder::finish`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltTable {
    /// The table's size in bytes.
    pub size: u64,
    /// The index kind written.
    pub index_kind: IndexBlockKind,
    /// A learned index was asked for, trained, and rejected (the table has a binary index).
    pub model_rejected: bool,
}

fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    raw: &[u8],
    compression: CompressionType,
    scratch: &mut Vec<u8>,
) -> Result<BlockHandle> {
    let (body, type_byte) = compress_block(raw, compression, scratch);
    file.append(body)?;
    file.append(&block_trailer(body, type_byte))?;
    let handle = BlockHandle { offset: *offset, size: body.len() as u64 };
    *offset = handle.end();
    Ok(handle)
}
