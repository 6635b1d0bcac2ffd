//! The index block: maps an internal key to the data block that may hold it.
//!
//! [`IndexBlock`] (reading) and [`IndexBlockBuilder`] (writing) are the seam between index
//! encodings; the footer's index-kind byte says which one a table uses, so tables with different
//! kinds coexist in one database. An index answers a lookup with a [`Window`]: where the search
//! must start, the block to read first, and whether that block is the only candidate. The learned
//! index (`learned`) predicts a window from a model; this one is exact to the block. [`BinaryIndex`] is
//! LevelDB's: one entry per data block, `separator key -> BlockHandle`, where the separator is a
//! short internal key `>=` every key of its block and `<` every key of the next, searched by
//! binary search. Shorter separators keep the index small enough to stay resident.
//!
//! Invariants checked when decoding: separators strictly increase, and the handles tile the data
//! area exactly (first at offset 0, each starting where the previous block's trailer ends, the
//! last ending where the filter block starts). Decoded indexes are immutable and `Send + Sync`.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use super::block::{shared_prefix_len, Block, BlockBuilder, BlockError};
use super::format::{BlockHandle, IndexBlockKind};
use crate::types::{compare_internal_keys, pack_trailer, user_key, ValueKind, MAX_SEQUENCE};

/// A position inside a table: a data block and a restart interval of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockSpot {
    /// Data block index.
    pub block: usize,
    /// Restart interval inside the block (`usize::MAX`: its end).
    pub restart: usize,
}

/// Where a lookup for an internal key must search, as told by an index.
///
/// Contract, for a lookup key `k` whose answer (the first entry `>= k`) is at spot `P`:
/// `start <= P` always, so a search that starts at `start` and walks forward is exact; `guess` is
/// the block to read first (`start.block <= guess <= end.block`); when `k`'s user key is in the
/// table its entries begin at or before `end`; and when `closed`, an answer with `k`'s user key
/// lies in block `guess` or nowhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Earliest spot that can hold the answer.
    pub start: BlockSpot,
    /// The block most likely to hold it.
    pub guess: usize,
    /// Latest spot where the lookup's user key can begin.
    pub end: BlockSpot,
    /// The answer with the lookup's user key is in block `guess` or nowhere.
    pub closed: bool,
}

/// What an index costs and how good its model is, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IndexSummary {
    /// Encoded size of the index (the index block, or the trained model's encoding).
    pub encoded_bytes: u64,
    /// The model, for learned indexes.
    pub model: Option<ModelSummary>,
}

/// Shape and measured error of a learned model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelSummary {
    /// Linear segments.
    pub segments: u64,
    /// Key sub-ranges (each with its own prefix).
    pub sub_ranges: u64,
    /// Largest error bound of a segment, in entries.
    pub max_error: u64,
    /// Mean error bound over segments, weighted by the entries each covers.
    pub mean_error: f64,
}

/// Locates data blocks by key.
pub trait IndexBlock: Send + Sync {
    /// Where the first entry `>= ikey` can be, or `None` if `ikey` is past every entry.
    fn locate(&self, ikey: &[u8]) -> Option<Window>;
    /// Handle of block `i`; `None` only if `i >= len()`.
    fn block_handle(&self, i: usize) -> Option<BlockHandle>;
    /// Number of data blocks.
    fn len(&self) -> usize;
    /// True if the table has no data blocks.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The separator key of block `i`, for indexes that store one: `>=` the block's keys, `<`
    /// the next's.
    fn separator(&self, i: usize) -> Option<&[u8]>;
    /// The index's kind.
    fn kind(&self) -> IndexBlockKind;
    /// Size and model quality.
    fn summary(&self) -> IndexSummary;
}

/// An encoded index block and what the builder chose.
#[derive(Debug)]
pub struct BuiltIndex {
    /// The kind written (a learned builder writes a binary index when its model is rejected).
    pub kind: IndexBlockKind,
    /// The index block's contents.
    pub bytes: Vec<u8>,
    /// A model was trained and rejected (its error or size too large).
    pub model_rejected: bool,
}

/// Writes an index block while a table is built.
pub trait IndexBlockBuilder: Send {
    /// Sees every entry's key, in order (learned indexes model their positions).
    fn add_entry(&mut self, _ikey: &[u8]) {}
    /// Adds the next data block: its separator, handle and number of entries.
    fn add_block(&mut self, separator: &[u8], handle: BlockHandle, entries: u64);
    /// The encoded index block.
    fn finish(&mut self) -> BuiltIndex;
}

/// Trailer that sorts first among all entries of a user key.
fn max_trailer() -> [u8; 8] {
    pack_trailer(crate::types::SequenceNumber(MAX_SEQUENCE), ValueKind::FOR_SEEK).to_le_bytes()
}

/// A short internal key `k` with `last <= k < next` (LevelDB's `FindShortestSeparator`).
pub fn shortest_separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let (a, b) = (user_key(last), user_key(next));
    let common = shared_prefix_len(a, b);
    match (a.split_at_checked(common), b.get(common)) {
        (Some((prefix, &[d, ..])), Some(&n)) if d < 0xff && d + 1 < n => {
            let mut k = Vec::with_capacity(common + 1 + 8);
            k.extend_from_slice(prefix);
            k.push(d + 1);
            k.extend_from_slice(&max_trailer());
            debug_assert_eq!(compare_internal_keys(last, &k), Ordering::Less);
            debug_assert_eq!(compare_internal_keys(&k, next), Ordering::Less);
            k
        }
        _ => last.to_vec(),
    }
}

/// A short internal key `>= last` (LevelDB's `FindShortSuccessor`), for the final block.
pub fn short_successor(last: &[u8]) -> Vec<u8> {
    let u = user_key(last);
    match u.iter().position(|&b| b != 0xff).and_then(|i| u.split_at_checked(i)) {
        Some((prefix, &[b, ..])) => {
            let mut k = Vec::with_capacity(prefix.len() + 1 + 8);
            k.extend_from_slice(prefix);
            k.push(b + 1);
            k.extend_from_slice(&max_trailer());
            k
        }
        _ => last.to_vec(),
    }
}

/// Encodes a [`BinaryIndex`]: a block with restart interval 1, values are varint handles.
#[derive(Debug)]
pub struct BinaryIndexBuilder {
    block: BlockBuilder,
    handle_buf: Vec<u8>,
}

impl Default for BinaryIndexBuilder {
    fn default() -> Self {
        BinaryIndexBuilder { block: BlockBuilder::new(1), handle_buf: Vec::with_capacity(BlockHandle::MAX_ENCODED_LEN) }
    }
}

impl IndexBlockBuilder for BinaryIndexBuilder {
    fn add_block(&mut self, separator: &[u8], handle: BlockHandle, _entries: u64) {
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        self.block.add(separator, &self.handle_buf);
    }

    fn finish(&mut self) -> BuiltIndex {
        BuiltIndex { kind: IndexBlockKind::Binary, bytes: self.block.finish().to_vec(), model_rejected: false }
    }
}

/// LevelDB's index: separator keys searched by binary search, borrowed from the decoded block.
#[derive(Debug)]
pub struct BinaryIndex {
    data: Bytes,
    /// Each block's separator (a range of `data`) beside its handle, so that the handle of the
    /// block a search ends on is in the cache line the search last read, not in an array of
    /// its own (a cache miss per table probed: 6% of a 100 B `readrandom`).
    separators: Vec<(Range<u32>, BlockHandle)>,
}

impl BinaryIndex {
    /// Decodes and validates an index block for a table whose data blocks end at `data_end`.
    pub fn decode(data: Bytes, data_end: u64) -> Result<Self, BlockError> {
        let block = Block::new(data)?;
        let entries = block.whole_key_entries()?;
        let data = block.data().clone();
        let mut separators = Vec::with_capacity(entries.len());
        let mut expected_offset = 0u64;
        let mut prev_key: Option<&[u8]> = None;
        for (key, value) in entries {
            let err = |reason| BlockError { offset: key.start, reason };
            let handle = data.get(value).and_then(BlockHandle::decode).ok_or(err("bad block handle"))?;
            if handle.offset != expected_offset || handle.end() > data_end {
                return Err(err("block handle does not follow the previous block"));
            }
            let key_bytes = data.get(key.clone()).ok_or(err("index key outside the block"))?;
            if prev_key.is_some_and(|prev| compare_internal_keys(prev, key_bytes) != Ordering::Less) {
                return Err(err("index keys out of order"));
            }
            prev_key = Some(key_bytes);
            expected_offset = handle.end();
            let (Ok(start), Ok(end)) = (u32::try_from(key.start), u32::try_from(key.end)) else {
                return Err(err("index block over 4 GiB"));
            };
            separators.push((start..end, handle));
        }
        if expected_offset != data_end {
            return Err(BlockError { offset: 0, reason: "data blocks do not reach the filter block" });
        }
        Ok(BinaryIndex { data, separators })
    }
}

impl BinaryIndex {
    /// A separator key; `decode` checked every range against the block, so the empty
    /// fallback is never taken.
    fn key(&self, range: &Range<u32>) -> &[u8] {
        self.data.get(range.start as usize..range.end as usize).unwrap_or_default()
    }
}

impl IndexBlock for BinaryIndex {
    fn locate(&self, ikey: &[u8]) -> Option<Window> {
        let i = self.separators.partition_point(|(k, _)| compare_internal_keys(self.key(k), ikey) == Ordering::Less);
        (i < self.separators.len()).then_some(Window {
            start: BlockSpot { block: i, restart: 0 },
            guess: i,
            end: BlockSpot { block: i, restart: usize::MAX },
            closed: true,
        })
    }

    fn block_handle(&self, i: usize) -> Option<BlockHandle> {
        self.separators.get(i).map(|(_, handle)| *handle)
    }

    fn len(&self) -> usize {
        self.separators.len()
    }

    fn separator(&self, i: usize) -> Option<&[u8]> {
        self.separators.get(i).map(|(k, _)| self.key(k))
    }

    fn kind(&self) -> IndexBlockKind {
        IndexBlockKind::Binary
    }

    fn summary(&self) -> IndexSummary {
        IndexSummary { encoded_bytes: self.data.len() as u64, model: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{internal_key, SequenceNumber};

    fn ik(u: &[u8], seq: u64) -> Vec<u8> {
        internal_key(u, SequenceNumber(seq), ValueKind::Inline)
    }

    #[test]
    fn separators_are_short_and_between() {
        let cases: &[(&[u8], &[u8])] =
            &[(b"abcdef", b"abzz"), (b"abc", b"abd"), (b"abc", b"abcd"), (b"a\xff\xff", b"b"), (b"same", b"same")];
        for &(a, b) in cases {
            let last = ik(a, 5);
            let next = ik(b, 3);
            let s = shortest_separator(&last, &next);
            assert_ne!(compare_internal_keys(&last, &s), Ordering::Greater);
            assert_eq!(compare_internal_keys(&s, &next), Ordering::Less);
        }
        assert_eq!(user_key(&shortest_separator(&ik(b"abcdef", 1), &ik(b"abzz", 1))), b"abd");
        let succ = short_successor(&ik(b"abc", 1));
        assert_eq!(user_key(&succ), b"b");
        assert_eq!(short_successor(&ik(b"\xff\xff", 1)), ik(b"\xff\xff", 1));
    }

    #[test]
    fn decode_find_and_validation() {
        let mut b = BinaryIndexBuilder::default();
        let handles = [BlockHandle { offset: 0, size: 10 }, BlockHandle { offset: 15, size: 20 }];
        b.add_block(&ik(b"c", 1), handles[0], 1);
        b.add_block(&ik(b"f", 1), handles[1], 1);
        let raw = Bytes::from(b.finish().bytes);
        let idx = BinaryIndex::decode(raw.clone(), 40).unwrap();
        assert_eq!(idx.len(), 2);
        let block = |k: &[u8]| idx.locate(k).map(|w| w.guess);
        assert_eq!(block(&ik(b"a", 9)), Some(0));
        assert_eq!(block(&ik(b"c", 1)), Some(0));
        assert_eq!(block(&ik(b"c", 0)), Some(1));
        assert_eq!(block(&ik(b"g", 1)), None);
        assert_eq!(idx.block_handle(1), Some(handles[1]));
        // Handles must tile the data area exactly.
        assert!(BinaryIndex::decode(raw, 41).is_err());
    }
}
