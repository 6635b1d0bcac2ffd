//! An open, immutable SSTable: point lookups, a two-level iterator, size estimates and a full
//! verification pass.
//!
//! Opening reads the footer, the index block and the filter block and keeps them in memory for
//! the table's lifetime; data blocks are read on demand, through the shared [`BlockCache`] when
//! one is given. Every block is checksum-verified when it is read from the file, so a cached block
//! has been verified once.
//!
//! Thread-safety: a [`Table`] is `Send + Sync` and shared as `Arc<Table>`; lookups take `&self`
//! and never lock. A [`TableIterator`] owns an `Arc<Table>` and has one owner.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::block::{Block, BlockError, BlockIter};
use super::block_cache::BlockCache;
use super::filter::BloomFilter;
use super::format::IndexBlockKind;
use super::format::{read_block, BlockHandle, Footer, FOOTER_LEN};
use super::index::{BinaryIndex, IndexBlock};
use super::TableOptions;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::{compare_internal_keys, parse_internal_key, user_key, FileNumber};

// Readers on many threads share tables, and iterators move between threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    fn sendable<T: Send>() {}
    shareable::<Table>();
    sendable::<TableIterator>();
};

/// An open SSTable.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    number: FileNumber,
    size: u64,
    footer: Footer,
    index: Box<dyn IndexBlock>,
    filter: Option<BloomFilter>,
    cache: Option<Arc<BlockCache>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("number", &self.number)
            .field("size", &self.size)
            .field("footer", &self.footer)
            .finish_non_exhaustive()
    }
}

fn block_corruption(path: &Path, block_offset: u64, e: BlockError) -> Error {
    Error::corruption(path, block_offset, format!("{} (byte {} of the decoded block)", e.reason, e.offset))
}

impl Table {
    /// Opens the table in `file` of `size` bytes, reading and verifying its footer, index and
    /// filter. `path` is only used in error messages. Tables describe their own encoding, so
    /// `_opts` does not affect reading today; it is where reader-side knobs will go.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: FileNumber,
        size: u64,
        _opts: &TableOptions,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Table>> {
        let Some(footer_offset) = size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(path, 0, format!("file of {size} bytes is too short for a table footer")));
        };
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(footer_offset, &mut footer_bytes).map_err(|e| match e {
            Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                Error::corruption(&path, footer_offset, format!("file is shorter than its recorded size {size}"))
            }
            other => other,
        })?;
        let footer =
            Footer::decode(&footer_bytes, size).map_err(|reason| Error::corruption(&path, footer_offset, reason))?;
        let index_data = read_block(&*file, &path, footer.index)?;
        let index: Box<dyn IndexBlock> = match footer.index_kind {
            IndexBlockKind::Binary => Box::new(
                BinaryIndex::decode(index_data, footer.filter.offset)
                    .map_err(|e| block_corruption(&path, footer.index.offset, e))?,
            ),
        };
        let filter = if footer.filter.size == 0 {
            None
        } else {
            let data = read_block(&*file, &path, footer.filter)?;
            Some(BloomFilter::new(data).map_err(|reason| Error::corruption(&path, footer.filter.offset, reason))?)
        };
        Ok(Arc::new(Table { file, path, number, size, footer, index, filter, cache }))
    }

    /// The path the table was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where an entry found by [`Table::get`] for `lookup_ikey` is stored: this file and the
    /// offset of the data block `get` reads. For reporting such an entry as corrupt.
    pub fn entry_origin(&self, lookup_ikey: &[u8]) -> EntryOrigin {
        EntryOrigin::Table { file: self.path.clone(), block_offset: self.approximate_offset_of(lookup_ikey) }
    }

    /// The table's file number.
    pub fn number(&self) -> FileNumber {
        self.number
    }

    /// The table's size in bytes.
    pub fn file_size(&self) -> u64 {
        self.size
    }

    /// Entries in the table, as recorded in the footer.
    pub fn num_entries(&self) -> u64 {
        self.footer.num_entries
    }

    /// Number of data blocks.
    pub fn num_data_blocks(&self) -> usize {
        self.index.len()
    }

    /// Bytes of the bloom filter held in memory (0 without a filter).
    pub fn filter_size(&self) -> usize {
        self.filter.as_ref().map_or(0, BloomFilter::size)
    }

    /// True if the filter rules out `user_key` (always false without a filter).
    pub fn filter_excludes(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_some_and(|f| !f.may_contain(user_key))
    }

    /// Reads data block `handle`, through the block cache when there is one.
    fn data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Block> {
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.number, handle.offset) {
                return Ok(block);
            }
        }
        let data = read_block(&*self.file, &self.path, handle)?;
        let block = Block::new(data).map_err(|e| block_corruption(&self.path, handle.offset, e))?;
        if fill_cache {
            if let Some(cache) = &self.cache {
                cache.insert(self.number, handle.offset, block.clone());
            }
        }
        Ok(block)
    }

    /// The first entry whose internal key is `>= lookup_ikey`, if it has the same user key.
    ///
    /// With `lookup_ikey = seek_key(user_key, snapshot_seq)` this is the newest version visible at
    /// the snapshot (a deletion included: the caller interprets the kind).
    pub fn get(&self, lookup_ikey: &[u8], fill_cache: bool) -> Result<Option<(Vec<u8>, Bytes)>> {
        let lookup_user_key = user_key(lookup_ikey);
        if self.filter_excludes(lookup_user_key) {
            return Ok(None);
        }
        let Some(i) = self.index.find(lookup_ikey) else {
            return Ok(None);
        };
        // Separators lie strictly before the next block's first user key unless they equal the
        // block's last key, so the answer for this user key is in block `i` or nowhere.
        let handle = self.index.block_handle(i);
        let mut it = BlockIter::new(self.data_block(handle, fill_cache)?);
        it.seek(lookup_ikey).map_err(|e| block_corruption(&self.path, handle.offset, e))?;
        if it.valid() && user_key(it.key()) == lookup_user_key {
            Ok(Some(it.into_entry()))
        } else {
            Ok(None)
        }
    }

    /// A cursor over the whole table; `fill_cache: false` keeps scans from evicting hot blocks.
    pub fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIterator {
        TableIterator {
            table: Arc::clone(self),
            fill_cache,
            block_index: 0,
            data: None,
            readahead: Readahead::default(),
        }
    }

    /// Approximate file offset where `ikey` would be stored (for size estimates and splits).
    pub fn approximate_offset_of(&self, ikey: &[u8]) -> u64 {
        match self.index.find(ikey) {
            Some(i) => self.index.block_handle(i).offset,
            None => self.footer.filter.offset,
        }
    }

    /// Reads every data block bypassing the cache and checks checksums, entry decoding, key
    /// order (within and across blocks, against the index separators), that the filter holds
    /// every key, and the entry count.
    pub fn verify(&self) -> Result<()> {
        let mut prev_key: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        for i in 0..self.index.len() {
            let handle = self.index.block_handle(i);
            let corrupt =
                |reason: &str| Error::corruption(&self.path, handle.offset, format!("data block {i}: {reason}"));
            let data = read_block(&*self.file, &self.path, handle)?;
            let block = Block::new(data).map_err(|e| block_corruption(&self.path, handle.offset, e))?;
            let mut it = BlockIter::new(block);
            it.seek_to_first().map_err(|e| block_corruption(&self.path, handle.offset, e))?;
            if !it.valid() {
                return Err(corrupt("empty data block"));
            }
            if i > 0 && compare_internal_keys(self.index.separator(i - 1), it.key()) != Ordering::Less {
                return Err(corrupt("first key is not after the previous block's separator"));
            }
            while it.valid() {
                let key = it.key();
                let parsed = parse_internal_key(key).ok_or_else(|| corrupt("malformed internal key"))?;
                if entries > 0 && compare_internal_keys(&prev_key, key) != Ordering::Less {
                    return Err(corrupt("keys out of order"));
                }
                if compare_internal_keys(key, self.index.separator(i)) == Ordering::Greater {
                    return Err(corrupt("key sorts after the block's index separator"));
                }
                if self.filter_excludes(parsed.user_key) {
                    return Err(corrupt("bloom filter does not contain a stored key"));
                }
                prev_key.clear();
                prev_key.extend_from_slice(key);
                entries += 1;
                it.next_entry().map_err(|e| block_corruption(&self.path, handle.offset, e))?;
            }
        }
        if entries != self.footer.num_entries {
            return Err(Error::corruption(
                &self.path,
                self.size - FOOTER_LEN as u64,
                format!("footer records {} entries, data blocks hold {entries}", self.footer.num_entries),
            ));
        }
        Ok(())
    }
}

/// Two-level cursor over a table: the index picks a data block, a [`BlockIter`] walks it.
///
/// Invariant: when `data` is `Some`, it iterates data block `block_index`; the iterator is valid
/// iff `data` is positioned on an entry. Errors leave it unpositioned.
pub struct TableIterator {
    table: Arc<Table>,
    fill_cache: bool,
    block_index: usize,
    data: Option<BlockIter>,
    readahead: Readahead,
}

/// First and largest read-ahead of a table iterator that loads blocks in sequence.
const FIRST_TABLE_READAHEAD: u64 = 16 << 10;
const MAX_TABLE_READAHEAD: u64 = 256 << 10;

/// Read-ahead for a table iterator (like RocksDB's automatic iterator read-ahead). Tables are
/// opened with random-access advice, which serves point lookups but leaves a scan of data that
/// is not in memory one small synchronous read per block. Once a cursor has loaded blocks in
/// sequence, this asks the file system to load the next bytes in that direction in the
/// background, doubling the distance each time it runs out.
#[derive(Default)]
struct Readahead {
    /// Blocks loaded in sequence (one after another, in either direction) so far.
    sequential: u32,
    /// The block index of the last load.
    last: Option<usize>,
    /// The file range the last hint covered.
    hinted: Option<(u64, u64)>,
    size: u64,
}

impl Readahead {
    /// Notes a load of block `i` at `handle`; hints the bytes ahead once the loads are sequential.
    fn on_load(&mut self, file: &dyn RandomAccessFile, i: usize, handle: BlockHandle, file_len: u64) {
        let forward = self.last.is_some_and(|last| i == last + 1);
        let backward = self.last.is_some_and(|last| i + 1 == last);
        self.last = Some(i);
        if !forward && !backward {
            self.sequential = 0;
            self.size = FIRST_TABLE_READAHEAD;
            self.hinted = None;
            return;
        }
        self.sequential += 1;
        if self.sequential < 2 {
            return;
        }
        // Hint the next stretch once the cursor is past the middle of the last one, so that it
        // is loaded before the cursor gets there.
        let end = handle.offset + handle.size;
        let range = if forward {
            if self.hinted.is_some_and(|(lo, hi)| end <= lo + (hi - lo) / 2) {
                return;
            }
            let start = match self.hinted {
                Some((_, hi)) if handle.offset < hi => hi,
                _ => handle.offset,
            };
            (start, (start + self.size).min(file_len))
        } else {
            if self.hinted.is_some_and(|(lo, hi)| handle.offset >= lo + (hi - lo) / 2) {
                return;
            }
            let stop = match self.hinted {
                Some((lo, _)) if end > lo => lo,
                _ => end,
            };
            (stop.saturating_sub(self.size), stop)
        };
        if range.1 <= range.0 {
            return;
        }
        file.will_need(range.0, range.1 - range.0);
        self.hinted = Some(range);
        self.size = (self.size * 2).min(MAX_TABLE_READAHEAD);
    }
}

impl TableIterator {
    /// The table being iterated.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    fn load_block(&mut self, i: usize) -> Result<()> {
        if self.data.is_some() && self.block_index == i {
            return Ok(());
        }
        self.data = None;
        let handle = self.table.index.block_handle(i);
        self.readahead.on_load(&*self.table.file, i, handle, self.table.size);
        let block = self.table.data_block(handle, self.fill_cache)?;
        self.data = Some(BlockIter::new(block));
        self.block_index = i;
        Ok(())
    }

    /// Runs a movement on the current block, turning a decode failure into a corruption error.
    fn in_block(&mut self, op: impl FnOnce(&mut BlockIter) -> std::result::Result<(), BlockError>) -> Result<()> {
        let Some(data) = &mut self.data else { return Ok(()) };
        if let Err(e) = op(data) {
            self.data = None;
            let offset = self.table.index.block_handle(self.block_index).offset;
            return Err(block_corruption(&self.table.path, offset, e));
        }
        Ok(())
    }

    /// Moves forward over exhausted (or empty) blocks to the next entry.
    fn skip_forward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            if self.block_index + 1 >= self.table.index.len() {
                self.data = None;
                return Ok(());
            }
            self.load_block(self.block_index + 1)?;
            self.in_block(BlockIter::seek_to_first)?;
        }
        Ok(())
    }

    /// Moves backward over exhausted (or empty) blocks to the previous entry.
    fn skip_backward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            if self.block_index == 0 {
                self.data = None;
                return Ok(());
            }
            self.load_block(self.block_index - 1)?;
            self.in_block(BlockIter::seek_to_last)?;
        }
        Ok(())
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.table.index.is_empty() {
            self.data = None;
            return Ok(());
        }
        self.load_block(0)?;
        self.in_block(BlockIter::seek_to_first)?;
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.table.index.len();
        if n == 0 {
            self.data = None;
            return Ok(());
        }
        self.load_block(n - 1)?;
        self.in_block(BlockIter::seek_to_last)?;
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let Some(i) = self.table.index.find(target) else {
            self.data = None;
            return Ok(());
        };
        self.load_block(i)?;
        self.in_block(|d| d.seek(target))?;
        self.skip_forward()
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.in_block(BlockIter::next_entry)?;
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.in_block(BlockIter::prev_entry)?;
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.value(),
            None => &[],
        }
    }

    fn entry_origin(&self) -> EntryOrigin {
        if !self.valid() {
            return EntryOrigin::Unpositioned;
        }
        let block_offset = self.table.index.block_handle(self.block_index).offset;
        EntryOrigin::Table { file: self.table.path.clone(), block_offset }
    }
}

#[cfg(test)]
mod readahead_tests {
    use std::sync::Mutex;

    use super::*;

    /// Records the hints it is given.
    #[derive(Default)]
    struct Hints(Mutex<Vec<(u64, u64)>>);

    impl RandomAccessFile for Hints {
        fn read_exact_at(&self, _offset: u64, _buf: &mut [u8]) -> Result<()> {
            Ok(())
        }
        fn len(&self) -> Result<u64> {
            Ok(1 << 30)
        }
        fn will_need(&self, offset: u64, len: u64) {
            self.0.lock().unwrap().push((offset, len));
        }
    }

    fn block(i: usize) -> BlockHandle {
        BlockHandle { offset: i as u64 * 4096, size: 4000 }
    }

    #[test]
    fn sequential_loads_hint_ahead_in_growing_stretches_and_jumps_reset() {
        let file = Hints::default();
        let mut ra = Readahead::default();
        for i in 0..40 {
            ra.on_load(&file, i, block(i), 1 << 30);
        }
        let hints = file.0.lock().unwrap().clone();
        // Nothing before two sequential loads, then 16 KiB from block 2, then stretches that
        // start where the last ended and double up to 256 KiB.
        assert_eq!(hints[0], (2 * 4096, 16 << 10));
        for pair in hints.windows(2) {
            assert_eq!(pair[1].0, pair[0].0 + pair[0].1, "stretches are contiguous: {hints:?}");
            assert!(pair[1].1 >= pair[0].1 && pair[1].1 <= MAX_TABLE_READAHEAD);
        }
        // Every block loaded after the first hint was hinted before it was loaded.
        let hinted_to = hints.last().map(|(o, l)| o + l).unwrap();
        assert!(hinted_to >= block(39).offset + 4000);

        // A jump (a seek elsewhere) hints nothing; backward steps hint the bytes before.
        file.0.lock().unwrap().clear();
        ra.on_load(&file, 100, block(100), 1 << 30);
        ra.on_load(&file, 99, block(99), 1 << 30);
        assert!(file.0.lock().unwrap().is_empty());
        ra.on_load(&file, 98, block(98), 1 << 30);
        let back = file.0.lock().unwrap().clone();
        assert_eq!(back, vec![(block(98).offset + 4000 - (16 << 10), 16 << 10)]);
    }
}
