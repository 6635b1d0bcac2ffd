//! An open, immutable SSTable: point lookups, a two-level iterator, size estimates and a full
//! verification pass.
//!
//! Opening reads the footer, the index block and the filter block and keeps them in memory for
//! the table's lifetime; data blocks are read on demand. Every block is checksum-verified when it
//! is read from the file. A raw block of a mapped file is read where it lies, as a slice of the
//! map used only while a lookup or a cursor is on it, and never cached; compressed blocks and
//! blocks of files without a map go through the shared [`BlockCache`] when one is given (a
//! cached block is a verified copy), except a long scan's past its first
//! [`SCAN_CACHED_BLOCKS`] in sequence and any read with `fill_cache: false`.
//!
//! Thread-safety: a [`Table`] is `Send + Sync` and shared as `Arc<Table>`; lookups take `&self`
//! and never lock. A [`TableIterator`] owns an `Arc<Table>` and has one owner.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;

use super::block::{Block, BlockError, BlockIter};
use super::block_cache::BlockCache;
use super::filter::BloomFilter;
use super::format::IndexBlockKind;
use super::format::{read_block, read_block_decoded, BlockHandle, Footer, FOOTER_LEN};
use super::index::{BinaryIndex, BlockSpot, IndexBlock, IndexBlockBuilder, IndexSummary, Window};
use super::learned::{LearnedIndex, LearnedIndexBuilder};
use super::learning::{lazy_training_due, IndexLearning, LOOKUP_SAMPLE};
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

/// Whether a block just read is a slice of its file's map (read around the cache) rather than
/// memory of its own: a slice must not be kept past the read.
#[derive(Clone, Copy, Debug)]
struct InPlace(bool);

/// An open SSTable.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    number: FileNumber,
    size: u64,
    footer: Footer,
    /// The index stored in the file.
    index: Box<dyn IndexBlock>,
    /// A model trained lazily from the table's keys; used instead of `index` once set.
    trained: OnceLock<LearnedIndex>,
    filter: Option<BloomFilter>,
    cache: Option<Arc<BlockCache>>,
    /// Set once a data block read in place turned out compressed: the table's blocks then go
    /// through the block cache (see [`Table::data_block`]).
    compressed_blocks: AtomicBool,
    /// Learned-index policy state and counters, when the database tracks them.
    learning: Option<Arc<IndexLearning>>,
    /// Train a model lazily when the table proves hot (the adaptive index-block kind).
    lazy_training: bool,
    lazy_state: AtomicU8,
    lookups: AtomicU64,
    opened: Instant,
}

/// `Table::lazy_state`: not tried yet, training, done (trained or rejected).
const LAZY_UNTRIED: u8 = 0;
const LAZY_RUNNING: u8 = 1;
const LAZY_DONE: u8 = 2;

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

/// Handle of data block `i` of `index`. Block numbers come from the index itself (`locate`,
/// `len`), so a missing block is an inconsistent index.
fn block_handle(index: &dyn IndexBlock, path: &Path, index_offset: u64, i: usize) -> Result<BlockHandle> {
    index.block_handle(i).ok_or_else(|| {
        Error::corruption(path, index_offset, format!("index has no data block {i} (it has {})", index.len()))
    })
}

impl Table {
    /// Opens the table in `file` of `size` bytes, reading and verifying its footer, index and
    /// filter. `path` is only used in error messages. Tables describe their own encoding; of
    /// `opts` only the index-block kind matters to a reader (`Adaptive` trains hot tables lazily,
    /// on a background thread, when `learning` is given).
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: FileNumber,
        size: u64,
        opts: &TableOptions,
        cache: Option<Arc<BlockCache>>,
        learning: Option<Arc<IndexLearning>>,
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
        let index_data = read_block(&*file, &path, footer.index, true)?;
        let index: Box<dyn IndexBlock> = match footer.index_kind {
            IndexBlockKind::Binary => Box::new(
                BinaryIndex::decode(index_data, footer.filter.offset)
                    .map_err(|e| block_corruption(&path, footer.index.offset, e))?,
            ),
            IndexBlockKind::Learned | IndexBlockKind::Adaptive => Box::new(
                LearnedIndex::decode(&index_data, footer.filter.offset, footer.num_entries)
                    .map_err(|reason| Error::corruption(&path, footer.index.offset, reason))?,
            ),
        };
        let filter = if footer.filter.size == 0 {
            None
        } else {
            let data = read_block(&*file, &path, footer.filter, true)?;
            Some(BloomFilter::new(data).map_err(|reason| Error::corruption(&path, footer.filter.offset, reason))?)
        };
        let lazy_training = opts.index_block_kind == IndexBlockKind::Adaptive
            && footer.index_kind == IndexBlockKind::Binary
            && learning.is_some();
        Ok(Arc::new(Table {
            file,
            path,
            number,
            size,
            footer,
            index,
            trained: OnceLock::new(),
            filter,
            cache,
            compressed_blocks: AtomicBool::new(false),
            learning,
            lazy_training,
            lazy_state: AtomicU8::new(LAZY_UNTRIED),
            lookups: AtomicU64::new(0),
            opened: Instant::now(),
        }))
    }

    /// The index lookups use: the lazily trained model once there is one, else the file's.
    fn index(&self) -> &dyn IndexBlock {
        match self.trained.get() {
            Some(model) => model,
            None => &*self.index,
        }
    }

    /// The index in use: its kind, size and model quality.
    pub fn index_summary(&self) -> (IndexBlockKind, IndexSummary) {
        let index = self.index();
        (index.kind(), index.summary())
    }

    /// Bytes held in memory for as long as the table is open: its index block, its filter and
    /// a lazily trained model.
    pub fn pinned_bytes(&self) -> u64 {
        let trained = self.trained.get().map_or(0, |model| model.summary().encoded_bytes);
        self.index.summary().encoded_bytes + trained + self.filter_size() as u64
    }

    /// True if the table uses a model trained lazily (after it was opened).
    pub fn trained_lazily(&self) -> bool {
        self.trained.get().is_some()
    }

    /// Asks the index where `ikey` can be. Counts the lookup; times a sample of them; and starts
    /// a lazy training when an adaptive table has become hot.
    fn locate(self: &Arc<Self>, ikey: &[u8]) -> Option<Window> {
        let Some(learning) = &self.learning else {
            return self.index().locate(ikey);
        };
        let n = self.lookups.fetch_add(1, AtomicOrdering::Relaxed) + 1;
        if !n.is_multiple_of(LOOKUP_SAMPLE) {
            return self.index().locate(ikey);
        }
        let index = self.index();
        let started = Instant::now();
        let window = index.locate(ikey);
        let nanos = started.elapsed().as_nanos() as u64;
        learning.note_lookup(index.kind() == IndexBlockKind::Learned, nanos);
        if self.lazy_training
            && self.lazy_state.load(AtomicOrdering::Relaxed) == LAZY_UNTRIED
            && lazy_training_due(n, self.opened.elapsed(), self.index.len())
        {
            self.start_lazy_training(learning);
        }
        window
    }

    /// Trains a model on a background thread if the database's training slot is free.
    fn start_lazy_training(self: &Arc<Self>, learning: &Arc<IndexLearning>) {
        if !learning.claim_trainer() {
            return;
        }
        if self.lazy_state.swap(LAZY_RUNNING, AtomicOrdering::AcqRel) != LAZY_UNTRIED {
            learning.release_trainer(false);
            return;
        }
        let table = Arc::clone(self);
        let slot = Arc::clone(learning);
        let spawned = std::thread::Builder::new().name("splitkv-train".into()).spawn(move || {
            let trained = table.train_index().unwrap_or(false);
            table.lazy_state.store(LAZY_DONE, AtomicOrdering::Release);
            slot.release_trainer(trained);
        });
        if spawned.is_err() {
            self.lazy_state.store(LAZY_DONE, AtomicOrdering::Release);
            learning.release_trainer(false);
        }
    }

    /// Trains a learned index from the table's keys (reading every data block once, around the
    /// block cache) and uses it from now on. `Ok(false)` if the table already has a model or the
    /// trained one is rejected; the file is never modified.
    pub fn train_index(&self) -> Result<bool> {
        if self.index().kind() == IndexBlockKind::Learned {
            return Ok(false);
        }
        let mut builder = LearnedIndexBuilder::new(1);
        // The model needs the blocks' restart interval, which only the blocks show: the shortest
        // complete interval seen (an overestimate would only widen searches; none is made).
        let (mut interval, mut largest_block) = (usize::MAX, 1);
        for i in 0..self.index.len() {
            let handle = block_handle(&*self.index, &self.path, self.footer.index.offset, i)?;
            let mut it = self.scan_block(handle)?;
            let (mut entries, mut in_interval, mut restart) = (0, 0, 0);
            while it.valid() {
                if it.restart_index() != restart {
                    interval = interval.min(in_interval);
                    (restart, in_interval) = (it.restart_index(), 0);
                }
                builder.add_entry(it.key());
                entries += 1;
                in_interval += 1;
                it.next_entry().map_err(|e| block_corruption(&self.path, handle.offset, e))?;
            }
            largest_block = largest_block.max(entries as usize);
            builder.add_block(self.index.separator(i).unwrap_or_default(), handle, entries);
        }
        builder.set_restart_interval(if interval == usize::MAX { largest_block } else { interval });
        let built = builder.finish();
        if built.kind != IndexBlockKind::Learned {
            return Ok(false);
        }
        let model = LearnedIndex::decode(&built.bytes, self.footer.filter.offset, self.footer.num_entries)
            .map_err(|reason| Error::corruption(&self.path, self.footer.index.offset, reason))?;
        Ok(self.trained.set(model).is_ok())
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
        self.index().len()
    }

    /// Bytes of the bloom filter held in memory (0 without a filter).
    pub fn filter_size(&self) -> usize {
        self.filter.as_ref().map_or(0, BloomFilter::size)
    }

    /// True if the filter rules out `user_key` (always false without a filter).
    pub fn filter_excludes(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_some_and(|f| !f.may_contain(user_key))
    }

    /// Reads data block `handle`. A raw block of a mapped file is read where it lies and
    /// verified, every time, without the block cache: with the file's pages in memory that
    /// costs less than a cache lookup did, even a hit ("Table blocks and the block cache" in
    /// the design); LevelDB never caches a mapped table's blocks either. Other
    /// blocks (a file without a map, or a table whose blocks are compressed) go through the
    /// cache, filled if `fill_cache`. The flag says whether the block is a slice of the map,
    /// which nothing may keep beyond the read.
    fn data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<(Block, InPlace)> {
        let cache = self.cache.as_ref();
        if !self.reads_through_cache() {
            let (block, decoded) = self.read_data_block_decoded(handle, false)?;
            if !decoded {
                return Ok((block, InPlace(true)));
            }
            // A compressed block: decoding it again would cost more than a lookup, so from
            // now on this table's blocks go through the cache, this one first.
            self.compressed_blocks.store(true, AtomicOrdering::Relaxed);
            if let Some(cache) = cache.filter(|_| fill_cache) {
                cache.insert(self.number, handle.offset, block.clone());
            }
            return Ok((block, InPlace(false)));
        }
        if let Some(block) = cache.and_then(|c| c.get(self.number, handle.offset)) {
            // A cached copy is cold memory that a search would walk one cache miss at a time
            // (the restart array, then a restart key, then the entries): asking for all of it
            // at once overlaps those misses, as verifying a block read in place does.
            let data = block.data();
            crate::prefetch::cache_lines_at(data.as_ptr(), data.len().div_ceil(crate::prefetch::LINE));
            return Ok((block, InPlace(false)));
        }
        let keep = fill_cache && cache.is_some();
        let block = self.read_data_block(handle, keep)?;
        if let Some(cache) = cache.filter(|_| keep) {
            cache.insert(self.number, handle.offset, block.clone());
        }
        Ok((block, InPlace(!keep && self.file.reads_in_place())))
    }

    /// Reads data block `handle` for a long pass, which never fills the cache. Over a file read
    /// in place it does not look in the cache either: verifying a block where it lies streams it
    /// through the CPU's caches at full speed, where a cached copy costs a lookup and then a
    /// cache miss at a time as the pass walks its entries. A 100 B `readseq` after `readrandom`
    /// went from 0.12 to 0.077 µs per entry (`docs/results/baseline.md`).
    fn long_pass_block(&self, handle: BlockHandle) -> Result<Block> {
        if self.file.reads_in_place() {
            self.read_data_block(handle, false)
        } else {
            Ok(self.data_block(handle, false)?.0)
        }
    }

    /// Reads and decodes data block `handle` from the file; `keep` as in [`read_block`].
    fn read_data_block(&self, handle: BlockHandle, keep: bool) -> Result<Block> {
        Ok(self.read_data_block_decoded(handle, keep)?.0)
    }

    /// [`Table::read_data_block`], also saying whether the block was stored compressed.
    fn read_data_block_decoded(&self, handle: BlockHandle, keep: bool) -> Result<(Block, bool)> {
        let (data, decoded) = read_block_decoded(&*self.file, &self.path, handle, keep)?;
        let block = Block::new(data).map_err(|e| block_corruption(&self.path, handle.offset, e))?;
        Ok((block, decoded))
    }

    /// A cursor on the first entry of data block `handle`, read around the block cache: for
    /// passes over the whole table (verification, training), which must not evict hot blocks.
    fn scan_block(&self, handle: BlockHandle) -> Result<BlockIter> {
        let mut it = BlockIter::new(self.read_data_block(handle, false)?);
        it.seek_to_first().map_err(|e| block_corruption(&self.path, handle.offset, e))?;
        Ok(it)
    }

    /// The first entry whose internal key is `>= lookup_ikey`, if it has the same user key.
    ///
    /// With `lookup_ikey = seek_key(user_key, snapshot_seq)` this is the newest version visible at
    /// the snapshot (a deletion included: the caller interprets the kind).
    pub fn get(self: &Arc<Self>, lookup_ikey: &[u8], fill_cache: bool) -> Result<Option<(Vec<u8>, Bytes)>> {
        let lookup_user_key = user_key(lookup_ikey);
        if self.filter_excludes(lookup_user_key) {
            return Ok(None);
        }
        let Some(window) = self.locate(lookup_ikey) else {
            return Ok(None);
        };
        let (_, it, in_place) = self.search(&window, lookup_ikey, fill_cache)?;
        if it.valid() && user_key(it.key()) == lookup_user_key {
            let (key, value) = it.into_entry();
            // The caller must not keep a slice of the file's map alive through the value.
            let value = if in_place.0 { Bytes::copy_from_slice(&value) } else { value };
            Ok(Some((key, value)))
        } else {
            Ok(None)
        }
    }

    /// The last-mile search: positions a cursor on the first entry `>= ikey`. It reads the
    /// block the window guesses, steps back while that block starts after `ikey` (never before
    /// the window's start), and binary-searches only the window's restart intervals. If every
    /// entry of the block is before `ikey`, an open window (a model's) goes on to the next
    /// blocks: the key's entries can run past the window. For a closed window (separators) the
    /// answer is then the first entry of the next block, and the cursor is returned
    /// unpositioned, as it is past the table's last entry.
    fn search(&self, window: &Window, ikey: &[u8], fill_cache: bool) -> Result<(usize, BlockIter, InPlace)> {
        let index = self.index();
        let mut b = window.guess;
        let (mut block, mut in_place) = self.data_block(self.block_handle(b)?, fill_cache)?;
        while b > window.start.block
            && compare_internal_keys(block.first_key().map_err(|e| self.block_error(b, e))?, ikey) == Ordering::Greater
        {
            b -= 1;
            (block, in_place) = self.data_block(self.block_handle(b)?, fill_cache)?;
        }
        loop {
            let first = if b == window.start.block { window.start.restart } else { 0 };
            let last = if b == window.end.block { window.end.restart } else { usize::MAX };
            let mut it = BlockIter::new(block);
            it.seek_from(ikey, first, last).map_err(|e| self.block_error(b, e))?;
            if it.valid() || window.closed || b + 1 >= index.len() {
                return Ok((b, it, in_place));
            }
            b += 1;
            (block, in_place) = self.data_block(self.block_handle(b)?, fill_cache)?;
        }
    }

    fn block_error(&self, block: usize, e: BlockError) -> Error {
        block_corruption(&self.path, self.block_offset(block), e)
    }

    /// Handle of data block `i` of the index in use.
    fn block_handle(&self, i: usize) -> Result<BlockHandle> {
        block_handle(self.index(), &self.path, self.footer.index.offset, i)
    }

    /// True if this table's data blocks go through the block cache ([`Table::data_block`]):
    /// its file has no map, or its blocks turned out compressed.
    fn reads_through_cache(&self) -> bool {
        !self.file.reads_in_place() || self.compressed_blocks.load(AtomicOrdering::Relaxed)
    }

    /// Drops this table's blocks from the block cache (it was deleted).
    pub fn forget_cached_blocks(&self) {
        if let Some(cache) = self.cache.as_ref().filter(|_| self.reads_through_cache()) {
            let index = self.index();
            for handle in (0..index.len()).filter_map(|i| index.block_handle(i)) {
                cache.remove(self.number, handle.offset);
            }
        }
    }

    /// File offset of data block `i`, for error reports (the index block's if there is none).
    fn block_offset(&self, i: usize) -> u64 {
        self.index().block_handle(i).map_or(self.footer.index.offset, |h| h.offset)
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
        match self.index().locate(ikey) {
            Some(w) => self.index().block_handle(w.guess).map_or(self.footer.filter.offset, |h| h.offset),
            None => self.footer.filter.offset,
        }
    }

    /// Reads every data block bypassing the cache and checks checksums, entry decoding, key
    /// order (within and across blocks, against the index separators where the index has them),
    /// that the index can find every key, that the filter holds every key, and the entry count.
    pub fn verify(&self) -> Result<()> {
        let index = self.index();
        let mut prev_key: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        for i in 0..index.len() {
            let handle = self.block_handle(i)?;
            let corrupt =
                |reason: &str| Error::corruption(&self.path, handle.offset, format!("data block {i}: {reason}"));
            let mut it = self.scan_block(handle)?;
            if !it.valid() {
                return Err(corrupt("empty data block"));
            }
            if i > 0 && index.separator(i - 1).is_some_and(|sep| compare_internal_keys(sep, it.key()) != Ordering::Less)
            {
                return Err(corrupt("first key is not after the previous block's separator"));
            }
            while it.valid() {
                let key = it.key();
                let parsed = parse_internal_key(key).ok_or_else(|| corrupt("malformed internal key"))?;
                if entries > 0 && compare_internal_keys(&prev_key, key) != Ordering::Less {
                    return Err(corrupt("keys out of order"));
                }
                if index.separator(i).is_some_and(|sep| compare_internal_keys(key, sep) == Ordering::Greater) {
                    return Err(corrupt("key sorts after the block's index separator"));
                }
                if self.filter_excludes(parsed.user_key) {
                    return Err(corrupt("bloom filter does not contain a stored key"));
                }
                // A lookup of this key must start its search at or before it.
                let here = BlockSpot { block: i, restart: it.restart_index() };
                match index.locate(key) {
                    Some(w) if w.start <= here && (!w.closed || w.guess == i) => {}
                    _ => return Err(corrupt("the index does not lead to a stored key")),
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

/// Blocks a table iterator loads in sequence through the block cache; it reads those after them
/// around it (see [`Table::data_block`]).
pub(super) const SCAN_CACHED_BLOCKS: u32 = 64;

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
        let handle = self.table.block_handle(i)?;
        self.readahead.on_load(&*self.table.file, i, handle, self.table.size);
        // A long pass reads around the cache: it would evict blocks that point reads reuse for
        // blocks it will not come back to, and pay to insert and evict each one.
        let block = if self.readahead.sequential < SCAN_CACHED_BLOCKS {
            self.table.data_block(handle, self.fill_cache)?.0
        } else {
            self.table.long_pass_block(handle)?
        };
        self.data = Some(BlockIter::new(block));
        self.block_index = i;
        Ok(())
    }

    /// Runs a movement on the current block, turning a decode failure into a corruption error.
    fn in_block(&mut self, op: impl FnOnce(&mut BlockIter) -> std::result::Result<(), BlockError>) -> Result<()> {
        let Some(data) = &mut self.data else { return Ok(()) };
        if let Err(e) = op(data) {
            self.data = None;
            return Err(block_corruption(&self.table.path, self.table.block_offset(self.block_index), e));
        }
        Ok(())
    }

    /// Moves forward over exhausted (or empty) blocks to the next entry.
    fn skip_forward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            if self.block_index + 1 >= self.table.index().len() {
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
        if self.table.index().is_empty() {
            self.data = None;
            return Ok(());
        }
        self.load_block(0)?;
        self.in_block(BlockIter::seek_to_first)?;
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.table.index().len();
        if n == 0 {
            self.data = None;
            return Ok(());
        }
        self.load_block(n - 1)?;
        self.in_block(BlockIter::seek_to_last)?;
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let Some(window) = self.table.locate(target) else {
            self.data = None;
            return Ok(());
        };
        self.data = None;
        let (block, it, _) = self.table.search(&window, target, self.fill_cache)?;
        let handle = self.table.block_handle(block)?;
        self.readahead.on_load(&*self.table.file, block, handle, self.table.size);
        self.block_index = block;
        self.data = Some(it);
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
        let block_offset = self.table.block_offset(self.block_index);
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
