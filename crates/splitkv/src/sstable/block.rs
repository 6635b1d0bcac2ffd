//! Prefix-compressed blocks of sorted entries (LevelDB's block format): the unit of I/O, caching
//! and checksumming for data blocks, and the encoding of the binary index block.
//!
//! ```text
//! entry*  restart: u32 LE * num_restarts  num_restarts: u32 LE
//! entry = shared: varint32  non_shared: varint32  value_len: varint32  key[shared..]  value
//! ```
//! Every `restart_interval`-th entry is a restart point (stored with `shared == 0`) so a lookup
//! binary-searches restart keys and then scans at most one interval.
//!
//! Invariants: a [`Block`] is only built from bytes whose restart array was validated (count fits,
//! offsets ascending and inside the entry area), so walking it can only fail on a bad entry,
//! reported as a [`BlockError`] with the in-block offset; the caller adds file and block offset.
//! Blocks are immutable and cheap to clone (`Bytes`); a [`BlockIter`] has one owner.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use crate::coding::{get_varint32, put_varint32};
use crate::types::compare_internal_keys;

/// A decoding failure inside one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockError {
    /// Offset inside the (decompressed) block.
    pub offset: usize,
    /// What check failed.
    pub reason: &'static str,
}

type BlockResult<T> = std::result::Result<T, BlockError>;

const RUNS_PAST_END: &str = "entry runs past the end of the block";

/// Length of the longest common prefix of `a` and `b`.
pub fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Accumulates sorted entries into one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    entries_since_restart: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// An empty builder placing a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            entries_since_restart: 0,
            last_key: Vec::new(),
        }
    }

    /// Appends an entry; `key` must sort after every key added since the last reset.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.entries_since_restart < self.restart_interval {
            shared_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.entries_since_restart = 0;
            0
        };
        // `shared` never exceeds the key's length; storing the whole key would be correct anyway.
        let (shared, non_shared) = key.split_at_checked(shared).map_or((0, key), |(head, tail)| (head.len(), tail));
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        self.entries_since_restart += 1;
    }

    /// Size of the block if it were finished now.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// True if no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the finished block; call [`BlockBuilder::reset`]
    /// before adding again.
    pub fn finish(&mut self) -> &[u8] {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &self.buf
    }

    /// Empties the builder, keeping its allocations.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.entries_since_restart = 0;
        self.last_key.clear();
    }
}

/// A decoded (decompressed, checksum-verified) block with a validated restart array.
#[derive(Clone, Debug)]
pub struct Block {
    data: Bytes,
    /// Where the restart array starts, which is also where the entries end.
    restarts_start: usize,
    num_restarts: usize,
}

impl Block {
    /// Validates the restart array of `data`.
    pub fn new(data: Bytes) -> BlockResult<Block> {
        let len = data.len();
        let err = |offset, reason| Err(BlockError { offset, reason });
        let Some(&count) = data.last_chunk::<4>() else {
            return err(0, "block shorter than its restart count");
        };
        let num_restarts = u32::from_le_bytes(count) as usize;
        if num_restarts == 0 || num_restarts > (len - 4) / 4 {
            return err(len - 4, "restart count does not fit the block");
        }
        let restarts_start = len - 4 - 4 * num_restarts;
        let block = Block { data, restarts_start, num_restarts };
        let mut prev = None;
        for i in 0..num_restarts {
            let r = block.restart_point(i)?;
            let in_order = prev.is_none_or(|p| r > p);
            if !in_order || (r >= restarts_start && !(r == 0 && restarts_start == 0)) {
                return err(restarts_start + 4 * i, "restart offset out of order or outside the entries");
            }
            prev = Some(r);
        }
        Ok(block)
    }

    /// The decoded bytes (entries and restart array).
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Restart offset `i`. Restart indexes come from `0..num_restarts`, so the error is for a
    /// bug, not for damaged input (`new` validated the array).
    fn restart_point(&self, i: usize) -> BlockResult<usize> {
        let p = self.restarts_start + 4 * i;
        match self.data.get(p..).and_then(<[u8]>::first_chunk::<4>) {
            Some(&bytes) => Ok(u32::from_le_bytes(bytes) as usize),
            None => Err(BlockError { offset: p, reason: "restart index past the restart array" }),
        }
    }

    /// Decodes the entry header at `offset`: `(shared, non_shared, value_len, key_start)`.
    fn entry_header(&self, offset: usize) -> BlockResult<(usize, usize, usize, usize)> {
        let area = self
            .data
            .get(offset..self.restarts_start)
            .ok_or(BlockError { offset, reason: "entry offset outside the entry area" })?;
        let (shared, non_shared, value_len, header_len) = match *area {
            // Most entries have three one-byte varints.
            [a, b, c, ..] if (a | b | c) < 0x80 => (a as usize, b as usize, c as usize, 3),
            _ => {
                let mut src = area;
                let bad = BlockError { offset, reason: "truncated entry header" };
                let shared = get_varint32(&mut src).ok_or(bad)? as usize;
                let non_shared = get_varint32(&mut src).ok_or(bad)? as usize;
                let value_len = get_varint32(&mut src).ok_or(bad)? as usize;
                (shared, non_shared, value_len, area.len() - src.len())
            }
        };
        if area.len() - header_len < non_shared + value_len {
            return Err(BlockError { offset, reason: RUNS_PAST_END });
        }
        Ok((shared, non_shared, value_len, offset + header_len))
    }

    /// The block's first key (an error for an empty block).
    pub fn first_key(&self) -> BlockResult<&[u8]> {
        self.restart_key(0)
    }

    /// The full key stored at restart point `i` (restart entries share nothing).
    fn restart_key(&self, i: usize) -> BlockResult<&[u8]> {
        let offset = self.restart_point(i)?;
        let (shared, non_shared, _, key_start) = self.entry_header(offset)?;
        if shared != 0 {
            return Err(BlockError { offset, reason: "restart entry shares a key prefix" });
        }
        self.data.get(key_start..key_start + non_shared).ok_or(BlockError { offset, reason: RUNS_PAST_END })
    }
}

impl Block {
    /// Key and value ranges (into [`Block::data`]) of every entry, for blocks written with a
    /// restart interval of 1 (index blocks), whose keys are stored whole and can be borrowed.
    pub fn whole_key_entries(&self) -> BlockResult<Vec<(Range<usize>, Range<usize>)>> {
        let mut out = Vec::with_capacity(self.num_restarts);
        if self.restarts_start == 0 {
            return Ok(out);
        }
        for i in 0..self.num_restarts {
            let offset = self.restart_point(i)?;
            let (shared, non_shared, value_len, key_start) = self.entry_header(offset)?;
            let end = key_start + non_shared + value_len;
            let next = if i + 1 < self.num_restarts { self.restart_point(i + 1)? } else { self.restarts_start };
            if shared != 0 || end != next {
                return Err(BlockError { offset, reason: "index entry is not a whole-key restart entry" });
            }
            out.push((key_start..key_start + non_shared, key_start + non_shared..end));
        }
        Ok(out)
    }
}

/// A cursor over one block's entries, reusing one key buffer.
#[derive(Debug)]
pub struct BlockIter {
    block: Block,
    /// Offset of the current entry; `restarts_start` when not positioned.
    current: usize,
    next_offset: usize,
    /// Restart interval containing `current`.
    restart_index: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
}

impl BlockIter {
    /// An unpositioned cursor over `block`.
    pub fn new(block: Block) -> Self {
        let end = block.restarts_start;
        BlockIter {
            block,
            current: end,
            next_offset: end,
            restart_index: 0,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
        }
    }

    /// True if positioned on an entry.
    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_start
    }

    /// The current key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value.
    pub fn value(&self) -> &[u8] {
        // `parse_next` checked the range against the block; unpositioned, it is empty.
        self.block.data.get(self.value_start..self.value_end).unwrap_or_default()
    }

    /// The current value as a zero-copy slice of the block.
    pub fn value_bytes(&self) -> Bytes {
        self.block.data.slice(self.value_start..self.value_end)
    }

    /// Consumes the cursor, returning the current key (without copying) and value.
    pub fn into_entry(self) -> (Vec<u8>, Bytes) {
        let value = self.value_bytes();
        (self.key, value)
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_start;
        self.next_offset = self.block.restarts_start;
        self.restart_index = self.block.num_restarts;
    }

    fn seek_to_restart(&mut self, i: usize) -> BlockResult<()> {
        self.key.clear();
        self.restart_index = i;
        self.next_offset = self.block.restart_point(i)?;
        Ok(())
    }

    /// Decodes the entry at `next_offset`, or invalidates at the end of the entries.
    fn parse_next(&mut self) -> BlockResult<()> {
        self.current = self.next_offset;
        if self.current >= self.block.restarts_start {
            self.invalidate();
            return Ok(());
        }
        let (shared, non_shared, value_len, key_start) = match self.block.entry_header(self.current) {
            Ok(h) => h,
            Err(e) => {
                self.invalidate();
                return Err(e);
            }
        };
        if shared > self.key.len() {
            let offset = self.current;
            self.invalidate();
            return Err(BlockError { offset, reason: "entry shares more bytes than the previous key has" });
        }
        let Some(key_delta) = self.block.data.get(key_start..key_start + non_shared) else {
            let offset = self.current;
            self.invalidate();
            return Err(BlockError { offset, reason: RUNS_PAST_END });
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(key_delta);
        self.value_start = key_start + non_shared;
        self.value_end = self.value_start + value_len;
        self.next_offset = self.value_end;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1)? <= self.current
        {
            self.restart_index += 1;
        }
        Ok(())
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> BlockResult<()> {
        self.seek_to_restart(0)?;
        self.parse_next()
    }

    /// Positions on the last entry.
    pub fn seek_to_last(&mut self) -> BlockResult<()> {
        self.seek_to_restart(self.block.num_restarts - 1)?;
        self.parse_next()?;
        while self.valid() && self.next_offset < self.block.restarts_start {
            self.parse_next()?;
        }
        Ok(())
    }

    /// Moves to the next entry.
    pub fn next_entry(&mut self) -> BlockResult<()> {
        debug_assert!(self.valid());
        self.parse_next()
    }

    /// Moves to the previous entry (unpositioned if this was the first).
    pub fn prev_entry(&mut self) -> BlockResult<()> {
        debug_assert!(self.valid());
        let original = self.current;
        // Entries only chain forward, so back up to the restart before `original` and rescan.
        let mut r = self.restart_index;
        while self.block.restart_point(r)? >= original {
            if r == 0 {
                self.invalidate();
                return Ok(());
            }
            r -= 1;
        }
        self.seek_to_restart(r)?;
        loop {
            self.parse_next()?;
            if !self.valid() || self.next_offset >= original {
                return Ok(());
            }
        }
    }

    /// Positions on the first entry whose internal key is `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> BlockResult<()> {
        self.seek_from(target, 0, usize::MAX)
    }

    /// Like [`BlockIter::seek`] for a caller that knows the answer is at or after restart
    /// interval `first` and probably not after interval `last`: only restart keys in
    /// `first..=last` are binary-searched. Exact whenever the answer is at or after `first` (it
    /// scans on past `last` if it must).
    pub fn seek_from(&mut self, target: &[u8], first: usize, last: usize) -> BlockResult<()> {
        // Find the last restart (in range) whose key is < target; the answer is in its interval
        // or after it, which the scan reaches too.
        let mut left = first.min(self.block.num_restarts - 1);
        let mut right = last.min(self.block.num_restarts - 1).max(left);
        while left < right {
            let mid = (left + right).div_ceil(2);
            let key = match self.block.restart_key(mid) {
                Ok(k) => k,
                Err(e) => {
                    self.invalidate();
                    return Err(e);
                }
            };
            if compare_internal_keys(key, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left)?;
        loop {
            self.parse_next()?;
            if !self.valid() || compare_internal_keys(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
    }

    /// Index of the restart interval holding the current entry.
    pub fn restart_index(&self) -> usize {
        self.restart_index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{internal_key, SequenceNumber, ValueKind};

    fn ikey(i: u32) -> Vec<u8> {
        internal_key(format!("key{i:05}").as_bytes(), SequenceNumber(u64::from(i)), ValueKind::Inline)
    }

    fn build(n: u32, interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&ikey(i * 2), format!("v{i}").as_bytes());
        }
        Block::new(Bytes::copy_from_slice(b.finish())).unwrap()
    }

    #[test]
    fn forward_backward_and_seek() {
        for interval in [1, 3, 16] {
            let mut it = BlockIter::new(build(100, interval));
            it.seek_to_first().unwrap();
            let mut n = 0;
            while it.valid() {
                assert_eq!(it.key(), ikey(n * 2).as_slice());
                assert_eq!(it.value(), format!("v{n}").as_bytes());
                it.next_entry().unwrap();
                n += 1;
            }
            assert_eq!(n, 100);
            it.seek_to_last().unwrap();
            for i in (0..100).rev() {
                assert_eq!(it.key(), ikey(i * 2).as_slice());
                it.prev_entry().unwrap();
            }
            assert!(!it.valid());
            for t in 0..201 {
                it.seek(&ikey(t)).unwrap();
                if t >= 199 {
                    assert!(!it.valid());
                } else {
                    assert_eq!(it.key(), ikey(t.div_ceil(2) * 2).as_slice(), "seek {t}");
                }
            }
        }
    }

    #[test]
    fn empty_block_is_valid_and_empty() {
        let mut b = BlockBuilder::new(16);
        let mut it = BlockIter::new(Block::new(Bytes::copy_from_slice(b.finish())).unwrap());
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(b"x").unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        let block = build(10, 4);
        let mut raw = block.data().to_vec();
        let len = raw.len();
        raw[len - 4..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(Block::new(Bytes::from(raw.clone())).is_err());
        raw[len - 4..].copy_from_slice(&0u32.to_le_bytes());
        assert!(Block::new(Bytes::from(raw)).is_err());
        assert!(Block::new(Bytes::from_static(&[1, 0])).is_err());
    }

    #[test]
    fn corrupt_entries_give_errors_not_panics() {
        let good = build(40, 4).data().clone();
        // Every single-byte change in the entry area must either decode or give an error.
        let entries_end = good.len() - 4 - 4 * 10;
        for pos in 0..entries_end {
            for x in [0x01u8, 0x80, 0xff] {
                let mut raw = good.to_vec();
                raw[pos] ^= x;
                let Ok(block) = Block::new(Bytes::from(raw)) else { continue };
                let mut it = BlockIter::new(block);
                let mut steps = 0;
                if it.seek_to_first().is_ok() {
                    while it.valid() && steps < 1000 && it.next_entry().is_ok() {
                        steps += 1;
                    }
                }
                let _ = it.seek_to_last().and_then(|_| {
                    while it.valid() {
                        it.prev_entry()?;
                    }
                    Ok(())
                });
                let _ = it.seek(&ikey(37));
            }
        }
        // A shared length longer than the previous key is reported.
        let mut b = BlockBuilder::new(16);
        b.add(b"abc", b"");
        let mut raw = b.finish().to_vec();
        raw[0] = 5;
        let mut it = BlockIter::new(Block::new(Bytes::from(raw)).unwrap());
        assert!(it.seek_to_first().is_err());
    }
}
