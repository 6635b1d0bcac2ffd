//! The index block: maps an internal key to the data block that may hold it.
//!
//! [`IndexBlock`] is the seam between index encodings; the footer's index-kind byte says which one
//! a table uses, so tables with different kinds coexist in one database. [`BinaryIndex`] is
//! LevelDB's: one entry per data block, `separator key -> BlockHandle`, where the separator is a
//! short internal key `>=` every key of its block and `<` every key of the next, searched by
//! binary search. Shorter separators keep the index small enough to stay resident.
//!
//! Invariants checked when decoding: separators strictly increase, and the handles tile the data
//! area exactly (first at offset 0, each starting where the previous block's trailer ends, the
//! last ending where the filter block starts). Decoded indexes are immutable and `Send + Sync`.

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use super::block::{Block, BlockBuilder, BlockError};
use super::format::BlockHandle;
use crate::types::{compare_internal_keys, pack_trailer, user_key, ValueKind, MAX_SEQUENCE};

/// Locates data blocks by key.
pub trait IndexBlock: Send + Sync {
    /// The first block whose last key is `>= ikey`, or `None` if `ikey` is past every block.
    fn find(&self, ikey: &[u8]) -> Option<usize>;
    /// Handle of block `i` (`i < len()`).
    fn block_handle(&self, i: usize) -> BlockHandle;
    /// Number of data blocks.
    fn len(&self) -> usize;
    /// True if the table has no data blocks.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The separator key of block `i`, for verification: `>=` the block's keys, `<` the next's.
    fn separator(&self, i: usize) -> &[u8];
}

/// Trailer that sorts first among all entries of a user key.
fn max_trailer() -> [u8; 8] {
    pack_trailer(crate::types::SequenceNumber(MAX_SEQUENCE), ValueKind::FOR_SEEK).to_le_bytes()
}

/// A short internal key `k` with `last <= k < next` (LevelDB's `FindShortestSeparator`).
pub fn shortest_separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let (a, b) = (user_key(last), user_key(next));
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if common < a.len().min(b.len()) {
        let d = a[common];
        if d < 0xff && d + 1 < b[common] {
            let mut k = Vec::with_capacity(common + 1 + 8);
            k.extend_from_slice(&a[..common]);
            k.push(d + 1);
            k.extend_from_slice(&max_trailer());
            debug_assert_eq!(compare_internal_keys(last, &k), Ordering::Less);
            debug_assert_eq!(compare_internal_keys(&k, next), Ordering::Less);
            return k;
        }
    }
    last.to_vec()
}

/// A short internal key `>= last` (LevelDB's `FindShortSuccessor`), for the final block.
pub fn short_successor(last: &[u8]) -> Vec<u8> {
    let u = user_key(last);
    match u.iter().position(|&b| b != 0xff) {
        Some(i) => {
            let mut k = Vec::with_capacity(i + 1 + 8);
            k.extend_from_slice(&u[..i]);
            k.push(u[i] + 1);
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

impl BinaryIndexBuilder {
    /// Adds the entry for the next data block.
    pub fn add(&mut self, separator: &[u8], handle: BlockHandle) {
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        self.block.add(separator, &self.handle_buf);
    }

    /// The encoded index block.
    pub fn finish(&mut self) -> &[u8] {
        self.block.finish()
    }
}

/// LevelDB's index: separator keys searched by binary search, borrowed from the decoded block.
#[derive(Debug)]
pub struct BinaryIndex {
    data: Bytes,
    keys: Vec<Range<usize>>,
    handles: Vec<BlockHandle>,
}

impl BinaryIndex {
    /// Decodes and validates an index block for a table whose data blocks end at `data_end`.
    pub fn decode(data: Bytes, data_end: u64) -> Result<Self, BlockError> {
        let block = Block::new(data)?;
        let entries = block.whole_key_entries()?;
        let data = block.data().clone();
        let mut keys = Vec::with_capacity(entries.len());
        let mut handles = Vec::with_capacity(entries.len());
        let mut expected_offset = 0u64;
        for (key, value) in entries {
            let err = |reason| BlockError { offset: key.start, reason };
            let handle = BlockHandle::decode(&data[value]).ok_or(err("bad block handle"))?;
            if handle.offset != expected_offset || handle.end() > data_end {
                return Err(err("block handle does not follow the previous block"));
            }
            if keys.last().is_some_and(|prev: &Range<usize>| {
                compare_internal_keys(&data[prev.clone()], &data[key.clone()]) != Ordering::Less
            }) {
                return Err(err("index keys out of order"));
            }
            expected_offset = handle.end();
            keys.push(key);
            handles.push(handle);
        }
        if expected_offset != data_end {
            return Err(BlockError { offset: 0, reason: "data blocks do not reach the filter block" });
        }
        Ok(BinaryIndex { data, keys, handles })
    }
}

impl IndexBlock for BinaryIndex {
    fn find(&self, ikey: &[u8]) -> Option<usize> {
        let i = self.keys.partition_point(|k| compare_internal_keys(&self.data[k.clone()], ikey) == Ordering::Less);
        (i < self.keys.len()).then_some(i)
    }

    fn block_handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    fn len(&self) -> usize {
        self.handles.len()
    }

    fn separator(&self, i: usize) -> &[u8] {
        &self.data[self.keys[i].clone()]
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
        b.add(&ik(b"c", 1), handles[0]);
        b.add(&ik(b"f", 1), handles[1]);
        let raw = Bytes::copy_from_slice(b.finish());
        let idx = BinaryIndex::decode(raw.clone(), 40).unwrap();
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.find(&ik(b"a", 9)), Some(0));
        assert_eq!(idx.find(&ik(b"c", 1)), Some(0));
        assert_eq!(idx.find(&ik(b"c", 0)), Some(1));
        assert_eq!(idx.find(&ik(b"g", 1)), None);
        assert_eq!(idx.block_handle(1), handles[1]);
        // Handles must tile the data area exactly.
        assert!(BinaryIndex::decode(raw, 41).is_err());
    }
}
