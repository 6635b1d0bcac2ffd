//! The learned index block (TridentKV, Bourbon): a model from a key to its entry's position in the
//! table, with an error bound measured when it was trained, instead of one separator key per data
//! block.
//!
//! A lookup maps the user key to a number (`key_map`: the bytes after its sub-range's common
//! prefix, as the digits of a mixed-radix number), picks the sub-range and the linear segment (`plr`) covering the number, and predicts
//! a position `p` with error `e`. The block handles carry cumulative entry counts, so the
//! position range `[p - e, p + e]` becomes a block range and, inside a block, a range of restart
//! intervals: the last-mile search reads the predicted block and binary-searches only those
//! restart keys. The result is exact, never approximate: the window is only a place to start
//! (see [`Window`]'s contract and the proof sketch in `docs/format/sstable.md`), and the table's
//! search walks on when a run of keys sharing one number outlasts it.
//!
//! The model covers the first position of each distinct key number. Keys absent from the table
//! are still bounded from below because predictions are monotone (see `plr`), and that is the
//! only property iterator seeks need.
//!
//! [`LearnedIndexBuilder`] collects the table's distinct user keys and their positions while the
//! table is written and trains in one pass at the end. It also keeps a binary index and writes
//! that instead when the model is not worth it: more bytes than the binary index, or an error
//! bound above [`MAX_ACCEPTED_ERROR`]. The caller learns which kind was written.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

mod key_map;
mod plr;

use std::ops::Range;

use super::format::{BlockHandle, IndexBlockKind};
use super::index::{BinaryIndexBuilder, BlockSpot, BuiltIndex, IndexBlock, IndexBlockBuilder, IndexSummary};
use super::index::{ModelSummary, Window};
use crate::coding::{get_fixed64, get_length_prefixed, get_u8, get_varint32, get_varint64};
use crate::coding::{put_length_prefixed, put_varint32, put_varint64};
use crate::types::user_key;
use key_map::{split_sub_ranges, Coder};
use plr::{fit, predict, Segment};

/// Version of the learned index block layout (its first byte).
pub const LEARNED_LAYOUT_VERSION: u8 = 1;
/// Error bound the trainer aims for, in entries: about one restart interval each way, so the
/// last-mile search usually binary-searches two or three restart keys of one block.
pub const TARGET_ERROR: u64 = 16;
/// A model whose measured bound is larger is not used (the table gets a binary index).
pub const MAX_ACCEPTED_ERROR: u64 = 64;

/// A sub-range of the table's keys with its own prefix and segments.
#[derive(Debug)]
struct SubRange {
    first_key: Vec<u8>,
    prefix_len: usize,
    coder: Coder,
    segments: Range<usize>,
    /// Position just past the sub-range's entries.
    end: u64,
}

/// A decoded learned index block.
#[derive(Debug)]
pub struct LearnedIndex {
    handles: Vec<BlockHandle>,
    /// Position of each block's first entry, then the number of entries.
    starts: Vec<u64>,
    restart_interval: u64,
    sub_ranges: Vec<SubRange>,
    segments: Vec<Segment>,
    encoded_len: usize,
}

/// Decoding failure: the reason; the caller adds file and offset.
pub type DecodeError = &'static str;

impl LearnedIndex {
    /// Decodes and validates a learned index block for a table whose data blocks end at
    /// `data_end` and which holds `num_entries` entries.
    pub fn decode(data: &[u8], data_end: u64, num_entries: u64) -> Result<Self, DecodeError> {
        let src = &mut &data[..];
        let version = get_u8(src).ok_or("truncated learned index")?;
        if version != LEARNED_LAYOUT_VERSION {
            return Err("unknown learned index layout version");
        }
        let restart_interval = u64::from(get_varint32(src).ok_or("truncated learned index")?);
        if restart_interval == 0 {
            return Err("restart interval 0");
        }
        let num_blocks = get_varint32(src).ok_or("truncated learned index")? as usize;
        // Every block takes at least two bytes, which bounds the allocation by the input.
        if num_blocks > src.len() / 2 {
            return Err("block count does not fit the index");
        }
        let mut handles = Vec::with_capacity(num_blocks);
        let mut starts = Vec::with_capacity(num_blocks + 1);
        let (mut offset, mut position) = (0u64, 0u64);
        for _ in 0..num_blocks {
            let size = get_varint64(src).ok_or("truncated block handle")?;
            let entries = get_varint64(src).ok_or("truncated block handle")?;
            let handle = BlockHandle { offset, size };
            if entries == 0 || handle.end() > data_end {
                return Err("block handle does not fit the data area");
            }
            handles.push(handle);
            starts.push(position);
            offset = handle.end();
            position = position.checked_add(entries).ok_or("entry counts overflow")?;
        }
        if offset != data_end {
            return Err("data blocks do not reach the filter block");
        }
        if position != num_entries {
            return Err("block entry counts do not add up to the footer's");
        }
        starts.push(position);
        let num_sub_ranges = get_varint32(src).ok_or("truncated learned index")? as usize;
        if (num_sub_ranges == 0) != (num_entries == 0) || num_sub_ranges > src.len() / 3 {
            return Err("sub-range count does not fit the index");
        }
        let mut sub_ranges: Vec<SubRange> = Vec::with_capacity(num_sub_ranges);
        let mut segments: Vec<Segment> = Vec::new();
        for _ in 0..num_sub_ranges {
            let prefix_len = get_varint32(src).ok_or("truncated sub-range")? as usize;
            let first_key = get_length_prefixed(src).ok_or("truncated sub-range")?.to_vec();
            let digits = get_u8(src).ok_or("truncated sub-range")? as usize;
            let (pairs, rest) = src.split_at_checked(2 * digits).ok_or("bad sub-range alphabet")?;
            let alphabet = pairs.as_chunks::<2>().0.iter().map(|&[lo, hi]| (lo, hi)).collect();
            *src = rest;
            let coder = Coder { alphabet };
            if !coder.fits() {
                return Err("bad sub-range alphabet");
            }
            let count = get_varint32(src).ok_or("truncated sub-range")? as usize;
            if prefix_len > first_key.len() || count == 0 || count > src.len() / 11 {
                return Err("bad sub-range header");
            }
            if sub_ranges.last().is_some_and(|prev| prev.first_key >= first_key) {
                return Err("sub-ranges out of order");
            }
            let first = segments.len();
            for _ in 0..count {
                let x = get_fixed64(src).ok_or("truncated segment")?;
                let y = get_varint64(src).ok_or("truncated segment")?;
                let slope = f64::from_bits(get_fixed64(src).ok_or("truncated segment")?);
                let err = get_varint64(src).ok_or("truncated segment")?;
                let in_order = match segments.last() {
                    None => y == 0,
                    Some(prev) => y > prev.y && (segments.len() == first || x > prev.x),
                };
                if !in_order || y >= num_entries || !(slope.is_finite() && slope >= 0.0) || err > num_entries {
                    return Err("bad segment");
                }
                segments.push(Segment { x, y, slope, err });
            }
            if let Some(prev) = sub_ranges.last_mut() {
                prev.end = segments.get(first).ok_or("sub-range without segments")?.y;
            }
            sub_ranges.push(SubRange {
                first_key,
                prefix_len,
                coder,
                segments: first..segments.len(),
                end: num_entries,
            });
        }
        if !src.is_empty() {
            return Err("bytes after the learned index");
        }
        Ok(LearnedIndex { handles, starts, restart_interval, sub_ranges, segments, encoded_len: data.len() })
    }

    /// The data block holding entry `position` (`< num_entries`). Blocks hold similar numbers
    /// of entries, so interpolation lands on or next to the block; a few steps settle it, and a
    /// binary search covers tables whose blocks vary a lot.
    /// `None` only for a table without blocks: `starts` holds one more entry than there are
    /// blocks, and `decode` checked that they ascend.
    fn block_of(&self, position: u64) -> Option<usize> {
        let blocks = self.handles.len();
        let n = *self.starts.last()?;
        let mut b = ((u128::from(position) * blocks as u128) / u128::from(n.max(1))) as usize;
        b = b.min(blocks.checked_sub(1)?);
        for _ in 0..4 {
            if *self.starts.get(b)? > position {
                b = b.checked_sub(1)?;
            } else if *self.starts.get(b + 1)? <= position {
                b += 1;
            } else {
                return Some(b);
            }
        }
        self.starts.partition_point(|&s| s <= position).checked_sub(1)
    }

    fn spot(&self, position: u64) -> Option<BlockSpot> {
        let block = self.block_of(position)?;
        let start = *self.starts.get(block)?;
        Some(BlockSpot { block, restart: ((position - start) / self.restart_interval) as usize })
    }

    /// The predicted position of the first entry `>= user_key` and its error bound; `None` only
    /// for a table without entries (`decode` checked that every sub-range has segments and a
    /// prefix no longer than its first key).
    fn predict(&self, user_key: &[u8]) -> Option<(u64, u64)> {
        let r = match self.sub_ranges.len() {
            1 => 0,
            _ => self.sub_ranges.partition_point(|r| r.first_key.as_slice() <= user_key).saturating_sub(1),
        };
        let range = self.sub_ranges.get(r)?;
        let q = range.coder.map(range.first_key.get(..range.prefix_len)?, user_key);
        let segments = self.segments.get(range.segments.clone())?;
        let s = segments.partition_point(|s| s.x <= q).saturating_sub(1);
        let segment = segments.get(s)?;
        let cap = segments.get(s + 1).map_or(range.end, |next| next.y);
        Some((predict(segment, q, cap), segment.err))
    }
}

impl IndexBlock for LearnedIndex {
    fn locate(&self, ikey: &[u8]) -> Option<Window> {
        let n = *self.starts.last()?;
        let (p, err) = self.predict(user_key(ikey))?;
        let lo = p.saturating_sub(err);
        if lo >= n {
            return None;
        }
        let (start, end) = (self.spot(lo)?, self.spot(p.saturating_add(err).min(n - 1))?);
        Some(Window { start, guess: self.block_of(p.min(n - 1))?, end, closed: false })
    }

    fn block_handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    fn len(&self) -> usize {
        self.handles.len()
    }

    fn separator(&self, _i: usize) -> Option<&[u8]> {
        None
    }

    fn kind(&self) -> IndexBlockKind {
        IndexBlockKind::Learned
    }

    fn summary(&self) -> IndexSummary {
        let n = self.starts.last().copied().unwrap_or(0).max(1);
        let mut weighted = 0.0;
        for range in &self.sub_ranges {
            let segments = self.segments.get(range.segments.clone()).unwrap_or_default();
            for (i, s) in segments.iter().enumerate() {
                let next = segments.get(i + 1).map_or(range.end, |next| next.y);
                weighted += s.err as f64 * (next - s.y) as f64;
            }
        }
        IndexSummary {
            encoded_bytes: self.encoded_len as u64,
            model: Some(ModelSummary {
                segments: self.segments.len() as u64,
                sub_ranges: self.sub_ranges.len() as u64,
                max_error: self.segments.iter().map(|s| s.err).max().unwrap_or(0),
                mean_error: weighted / n as f64,
            }),
        }
    }
}

/// Builds a learned index block (or, when the model is not worth it, a binary one).
pub struct LearnedIndexBuilder {
    binary: BinaryIndexBuilder,
    restart_interval: usize,
    blocks: Vec<(BlockHandle, u64)>,
    /// The table's distinct user keys, back to back, with their ends and first positions.
    key_bytes: Vec<u8>,
    key_ends: Vec<usize>,
    key_positions: Vec<u64>,
    entries: u64,
}

impl LearnedIndexBuilder {
    /// A builder for a table whose data blocks restart every `restart_interval` entries.
    pub fn new(restart_interval: usize) -> Self {
        LearnedIndexBuilder {
            binary: BinaryIndexBuilder::default(),
            restart_interval: restart_interval.max(1),
            blocks: Vec::new(),
            key_bytes: Vec::new(),
            key_ends: Vec::new(),
            key_positions: Vec::new(),
            entries: 0,
        }
    }

    /// Sets the restart interval (for a builder fed from an existing table's blocks).
    pub fn set_restart_interval(&mut self, restart_interval: usize) {
        self.restart_interval = restart_interval.max(1);
    }

    /// Distinct key `i` (empty for `i` past the last).
    fn key(&self, i: usize) -> &[u8] {
        let start = i.checked_sub(1).and_then(|prev| self.key_ends.get(prev)).map_or(0, |&end| end);
        self.key_ends.get(i).and_then(|&end| self.key_bytes.get(start..end)).unwrap_or_default()
    }

    /// Trains the model and encodes the learned index block, or `None` if it must not be used.
    fn train(&self) -> Option<Vec<u8>> {
        let n = self.key_ends.len();
        let ranges = split_sub_ranges((0..n).map(|i| self.key(i)));
        // Each sub-range stores a key: with many, the model is a binary index in disguise.
        if ranges.len() > 1 && ranges.len() > n / 16 {
            return None;
        }
        let mut out = vec![LEARNED_LAYOUT_VERSION];
        put_varint32(&mut out, self.restart_interval as u32);
        put_varint32(&mut out, u32::try_from(self.blocks.len()).ok()?);
        for (handle, entries) in &self.blocks {
            put_varint64(&mut out, handle.size);
            put_varint64(&mut out, *entries);
        }
        put_varint32(&mut out, ranges.len() as u32);
        let mut points = Vec::new();
        for (r, range) in ranges.iter().enumerate() {
            let end_key = ranges.get(r + 1).map_or(n, |next| next.start);
            let end = match ranges.get(r + 1) {
                Some(next) => *self.key_positions.get(next.start)?,
                None => self.entries,
            };
            let first_key = self.key(range.start);
            let prefix = first_key.get(..range.prefix_len)?;
            // Every key of the sub-range has the prefix (`split_sub_ranges` made it so).
            let coder = Coder::covering(
                (range.start..end_key).map(|i| self.key(i).get(range.prefix_len..).unwrap_or_default()),
            );
            points.clear();
            for (i, &position) in (range.start..).zip(self.key_positions.get(range.start..end_key)?) {
                let x = coder.map(prefix, self.key(i));
                // Keys sharing a number form a run; the model covers the run's first position.
                if points.last().is_none_or(|&(last, _)| x > last) {
                    points.push((x, position));
                }
            }
            let segments = fit(&points, end, TARGET_ERROR);
            if segments.iter().any(|s| s.err > MAX_ACCEPTED_ERROR) {
                return None;
            }
            put_varint32(&mut out, range.prefix_len as u32);
            put_length_prefixed(&mut out, first_key);
            out.push(coder.alphabet.len() as u8);
            for &(lo, hi) in &coder.alphabet {
                out.extend_from_slice(&[lo, hi]);
            }
            put_varint32(&mut out, segments.len() as u32);
            for s in segments {
                out.extend_from_slice(&s.x.to_le_bytes());
                put_varint64(&mut out, s.y);
                out.extend_from_slice(&s.slope.to_bits().to_le_bytes());
                put_varint64(&mut out, s.err);
            }
        }
        Some(out)
    }
}

impl IndexBlockBuilder for LearnedIndexBuilder {
    fn add_entry(&mut self, ikey: &[u8]) {
        let uk = user_key(ikey);
        if self.key_ends.is_empty() || self.key(self.key_ends.len() - 1) != uk {
            self.key_bytes.extend_from_slice(uk);
            self.key_ends.push(self.key_bytes.len());
            self.key_positions.push(self.entries);
        }
        self.entries += 1;
    }

    fn add_block(&mut self, separator: &[u8], handle: BlockHandle, entries: u64) {
        self.binary.add_block(separator, handle, entries);
        self.blocks.push((handle, entries));
    }

    fn finish(&mut self) -> BuiltIndex {
        let binary = self.binary.finish();
        if self.key_ends.is_empty() {
            return binary;
        }
        match self.train() {
            Some(bytes) if bytes.len() < binary.bytes.len() => {
                BuiltIndex { kind: IndexBlockKind::Learned, bytes, model_rejected: false }
            }
            _ => BuiltIndex { model_rejected: true, ..binary },
        }
    }
}
