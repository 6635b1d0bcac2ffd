//! The offset map of a compacted segment: where each record a segment kept now lies in its file.
//!
//! GC may clean a segment in place instead of copying its live records to the log head
//! (`gc_compact_in_place`): it writes a new file for the same segment id that holds only the
//! records still live, and a map from each record's old offset (the one every pointer into the
//! segment names) to its position in the new file. Pointers never change, so no index entry is
//! written. The records may lie in any order in the file: GC writes each MiB of them sorted by
//! key, so that a scan in key order reads each compacted segment front to back.
//!
//! The map ends the file (so that the records can be written as the victim's scan finds them),
//! checksummed, and is held in memory while the segment is open: 12 bytes per record on disk,
//! about 17 in memory (the entry, its place in file order, and the 4 KiB buckets). Byte layout:
//! `docs/format/vlog.md`, "Compacted segments".
//!
//! Thread-safety: a [`Remap`] is immutable once built.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use crate::coding::{fixed32_at, fixed64_at, masked_crc};
use crate::vlog::record::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

/// Bytes per record in the map: old offset (u64) and record length (u32).
const ENTRY_LEN: usize = 12;
/// Bytes of the map's fixed end: the old extent (u64), the record count (u32) and the checksum
/// (u32) of everything in the map before it.
pub(crate) const TRAILER_LEN: usize = 16;

/// Old offsets per bucket of [`Remap::buckets`]: 4 KiB, a few records of a separated value.
const BUCKET_SHIFT: u32 = 12;

/// One kept record: where it was, where it is, and its length. 32-bit offsets make the maps
/// 41% smaller than 64-bit ones (7.2 against 12.2 MiB in one 1M x 1 KiB database), at the
/// same read speed; so a compacted segment is at most 4 GiB long ([`MAX_EXTENT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    logical: u32,
    physical: u32,
    len: u32,
}

/// The longest segment that can be compacted: offsets in a map are 32-bit. Only a single batch
/// larger than that makes a longer segment.
pub(crate) const MAX_EXTENT: u64 = u32::MAX as u64;

/// Where the records of a compacted segment lie: old (logical) offsets, which pointers name, to
/// offsets in the file. The file may hold them in any order (GC writes each MiB sorted by key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remap {
    /// The segment's length before it was compacted: every old offset lies below it.
    extent: u64,
    /// Each kept record, by ascending old offset; old and new offsets side by side, so that a
    /// lookup reads one cache line for both.
    entries: Vec<Entry>,
    /// Indices into `entries` in file order, for sequential readers.
    file_order: Vec<u32>,
    /// Where the last record ends in the file, and the map starts.
    records_end: u64,
    /// For each 4 KiB of old offsets, the index of the first kept record at or after its start
    /// (one more entry at the end): a lookup searches only its bucket's few records. A binary
    /// search of the whole map took a cache miss per step, and was a fifth of a 1 KiB
    /// `readrandom`'s samples.
    buckets: Vec<u32>,
}

impl Remap {
    /// The map of a file that holds records `kept`, `(old offset, length)` in file order, of a
    /// segment that was `extent` bytes long. [`Remap::check`] says whether it makes sense.
    pub fn new(extent: u64, kept: &[(u64, u32)]) -> Remap {
        // Offsets past 4 GiB saturate, and `check` refuses the map.
        let narrow = |offset: u64| u32::try_from(offset).unwrap_or(u32::MAX);
        let mut in_file = Vec::with_capacity(kept.len());
        let mut at = SEGMENT_HEADER_LEN;
        for &(logical, len) in kept {
            in_file.push(Entry { logical: narrow(logical), physical: narrow(at), len });
            at += u64::from(len);
        }
        // One sort of (old offset, place in the file) gives both orders: the entries by old
        // offset, and, inverted, where each record in file order is among them. Sorting the
        // entries and then the file order by physical offset through them (a cache miss per
        // comparison) cost each compacted segment about 3M instructions, twice (built when the
        // file is written and again when it is installed): as much as copying its records.
        let mut by_old_offset: Vec<(u32, u32)> = in_file.iter().zip(0u32..).map(|(e, i)| (e.logical, i)).collect();
        by_old_offset.sort_unstable();
        let mut entries = Vec::with_capacity(in_file.len());
        let mut file_order = vec![0u32; in_file.len()];
        for (&(_, i), j) in by_old_offset.iter().zip(0u32..) {
            if let (Some(entry), Some(slot)) = (in_file.get(i as usize), file_order.get_mut(i as usize)) {
                entries.push(*entry);
                *slot = j;
            }
        }
        // Each bucket's first entry, in one pass over the entries.
        let bucket_count = (extent >> BUCKET_SHIFT) + 2;
        let mut buckets = Vec::with_capacity(usize::try_from(bucket_count).unwrap_or(0));
        let mut first = 0;
        for bucket in 0..bucket_count {
            while entries.get(first).is_some_and(|e: &Entry| u64::from(e.logical) >> BUCKET_SHIFT < bucket) {
                first += 1;
            }
            buckets.push(first as u32);
        }
        Remap { extent, entries, file_order, records_end: at, buckets }
    }

    /// An error unless every record lies within the old segment, after its header, is at least
    /// a record header long, and no two overlap (by old offsets); and the segment and the file
    /// are at most [`MAX_EXTENT`] long.
    pub fn check(&self) -> Result<(), String> {
        if self.extent > MAX_EXTENT || self.records_end > MAX_EXTENT {
            return Err(format!("offset map of a segment of {} bytes, past the 4 GiB limit", self.extent));
        }
        let mut end_of_previous = SEGMENT_HEADER_LEN;
        for e in &self.entries {
            let end = u64::from(e.logical) + u64::from(e.len);
            if u64::from(e.logical) < end_of_previous || (e.len as usize) < RECORD_HEADER_LEN || end > self.extent {
                return Err(format!(
                    "offset map entry (offset {}, len {}) overlaps another or leaves the segment",
                    e.logical, e.len
                ));
            }
            end_of_previous = end;
        }
        Ok(())
    }

    /// The old length of the segment; offsets of pointers into it lie below this.
    pub fn extent(&self) -> u64 {
        self.extent
    }

    /// Bytes the map holds in memory.
    pub fn memory_bytes(&self) -> u64 {
        (self.entries.capacity() * size_of::<Entry>()
            + (self.file_order.capacity() + self.buckets.capacity()) * size_of::<u32>()) as u64
    }

    /// Where the records end in the file (and the map starts).
    pub fn records_end(&self) -> u64 {
        self.records_end
    }

    /// The file offset of the record of `len` bytes that was at `offset`, if the segment kept it.
    pub fn locate(&self, offset: u64, len: u32) -> Option<u64> {
        let (first, end) = self.bucket(offset)?;
        let offset = u32::try_from(offset).ok()?;
        let entry = self.entries.get(first..end)?.iter().find(|e| e.logical == offset)?;
        (entry.len == len).then_some(u64::from(entry.physical))
    }

    /// Asks the CPU for the bucket that [`Remap::locate`] of `offset` reads first.
    pub fn prefetch_bucket(&self, offset: u64) {
        let bucket = usize::try_from(offset >> BUCKET_SHIFT).unwrap_or(usize::MAX);
        if let Some(b) = self.buckets.get(bucket) {
            crate::prefetch::cache_lines_at(std::ptr::from_ref(b).cast::<u8>(), 1);
        }
    }

    /// Asks the CPU for the entries [`Remap::locate`] of `offset` searches (reading the bucket,
    /// which [`Remap::prefetch_bucket`] should have asked for before).
    pub fn prefetch_entries(&self, offset: u64) {
        if let Some(first) = self.bucket(offset).and_then(|(first, _)| self.entries.get(first)) {
            crate::prefetch::cache_lines_at(std::ptr::from_ref(first).cast::<u8>(), 1);
        }
    }

    /// The range of entries whose old offsets lie in `offset`'s bucket.
    fn bucket(&self, offset: u64) -> Option<(usize, usize)> {
        let bucket = usize::try_from(offset >> BUCKET_SHIFT).ok()?;
        Some((*self.buckets.get(bucket)? as usize, *self.buckets.get(bucket.checked_add(1)?)? as usize))
    }

    /// The records in file order.
    fn in_file_order(&self) -> impl Iterator<Item = &Entry> {
        self.file_order.iter().filter_map(|&i| self.entries.get(i as usize))
    }

    /// The old offset of the record that starts at file offset `at`, and its length.
    pub fn logical_at(&self, at: u64) -> Option<(u64, u64)> {
        let i = self
            .file_order
            .partition_point(|&i| self.entries.get(i as usize).is_some_and(|e| u64::from(e.physical) < at));
        let entry = self.entries.get(*self.file_order.get(i)? as usize)?;
        (u64::from(entry.physical) == at).then_some((u64::from(entry.logical), u64::from(entry.len)))
    }

    /// Bytes of the encoding of a map of `count` records.
    pub fn encoded_len(count: usize) -> usize {
        count * ENTRY_LEN + TRAILER_LEN
    }

    /// Appends the map's encoding (entries, then the trailer) to `dst`.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        let start = dst.len();
        for entry in self.in_file_order() {
            dst.extend_from_slice(&u64::from(entry.logical).to_le_bytes());
            dst.extend_from_slice(&entry.len.to_le_bytes());
        }
        dst.extend_from_slice(&self.extent.to_le_bytes());
        dst.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        let crc = masked_crc(dst.get(start..).unwrap_or_default());
        dst.extend_from_slice(&crc.to_le_bytes());
    }

    /// The bytes of the whole map that ends a file with this `trailer` (its last
    /// [`TRAILER_LEN`] bytes).
    pub fn encoded_len_from_trailer(trailer: &[u8; TRAILER_LEN]) -> usize {
        Self::encoded_len(fixed32_at(trailer, 8).unwrap_or_default() as usize)
    }

    /// Decodes and validates a map encoded by [`Remap::encode`] that ends a file of `file_len`
    /// bytes; the error is the reason for a corruption report.
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Remap, String> {
        let body_len = bytes.len().checked_sub(4).ok_or("offset map shorter than its trailer")?;
        let (body, crc) = bytes.split_at(body_len);
        if Some(masked_crc(body)) != fixed32_at(crc, 0) {
            return Err("offset map checksum mismatch".into());
        }
        let entries_len = body.len().checked_sub(TRAILER_LEN - 4).ok_or("offset map shorter than its trailer")?;
        let (entries, fixed) = body.split_at(entries_len);
        let extent = fixed64_at(fixed, 0).unwrap_or_default();
        let count = fixed32_at(fixed, 8).unwrap_or_default() as usize;
        if Self::encoded_len(count) != bytes.len() {
            return Err(format!("offset map of {count} records is not {} bytes long", bytes.len()));
        }
        let kept: Vec<(u64, u32)> = entries
            .chunks_exact(ENTRY_LEN)
            .map(|entry| (fixed64_at(entry, 0).unwrap_or_default(), fixed32_at(entry, 8).unwrap_or_default()))
            .collect();
        let remap = Remap::new(extent, &kept);
        remap.check()?;
        let map_start = file_len.checked_sub(bytes.len() as u64).ok_or("offset map longer than its file")?;
        if remap.records_end() != map_start {
            return Err(format!("the records end at {}, the offset map starts at {map_start}", remap.records_end()));
        }
        Ok(remap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Remap, u64) {
        let remap = Remap::new(1000, &[(24, 30), (100, 40), (500, 26)]);
        let file_len = remap.records_end() + Remap::encoded_len(3) as u64;
        (remap, file_len)
    }

    #[test]
    fn old_offsets_map_to_packed_positions_and_back() {
        let (remap, _) = sample();
        let start = SEGMENT_HEADER_LEN;
        assert_eq!(remap.locate(24, 30), Some(start));
        assert_eq!(remap.locate(100, 40), Some(start + 30));
        assert_eq!(remap.locate(500, 26), Some(start + 70));
        // A record the segment did not keep, or a length that is not the record's.
        assert_eq!(remap.locate(54, 30), None);
        assert_eq!(remap.locate(100, 41), None);
        assert_eq!(remap.logical_at(start + 30), Some((100, 40)));
        assert_eq!(remap.logical_at(start + 31), None);
        assert_eq!(remap.logical_at(remap.records_end()), None);
        assert_eq!((remap.extent(), remap.records_end()), (1000, start + 96));
    }

    #[test]
    fn records_may_lie_in_any_order_in_the_file() {
        // File order: the record that was at 500, then 24, then 100.
        let remap = Remap::new(1000, &[(500, 26), (24, 30), (100, 40)]);
        let start = SEGMENT_HEADER_LEN;
        assert_eq!(remap.locate(500, 26), Some(start));
        assert_eq!(remap.locate(24, 30), Some(start + 26));
        assert_eq!(remap.locate(100, 40), Some(start + 56));
        assert_eq!(remap.logical_at(start + 26), Some((24, 30)));
        assert_eq!(remap.records_end(), start + 96);
        let mut bytes = Vec::new();
        remap.encode(&mut bytes);
        assert_eq!(&bytes[..8], &500u64.to_le_bytes(), "entries are stored in file order");
        assert_eq!(Remap::decode(&bytes, start + 96 + bytes.len() as u64), Ok(remap));
    }

    /// `(offset, length)` of `count` records laid out back to back after the segment header,
    /// record `i` `len(i)` bytes long, and where the last one ends.
    fn laid_out(count: u64, len: impl Fn(u64) -> u32) -> (Vec<(u64, u32)>, u64) {
        let mut records = Vec::new();
        let mut at = SEGMENT_HEADER_LEN;
        for i in 0..count {
            records.push((at, len(i)));
            at += u64::from(len(i));
        }
        (records, at)
    }

    #[test]
    fn every_kept_record_is_found_through_its_bucket_and_nothing_else_is() {
        // Records of 1,000 to 1,500 bytes, every third one dropped: buckets of 0 to 4 records,
        // records that start in one bucket and end in the next, and an empty tail.
        let (all, end) = laid_out(400, |i| 1000 + (i * 37 % 500) as u32);
        let extent = end + 50_000;
        let kept: Vec<(u64, u32)> =
            all.iter().copied().enumerate().filter(|(i, _)| i % 3 != 1).map(|(_, r)| r).collect();
        let remap = Remap::new(extent, &kept);
        let mut position = SEGMENT_HEADER_LEN;
        for (i, &(offset, len)) in all.iter().enumerate() {
            if i % 3 == 1 {
                assert_eq!(remap.locate(offset, len), None, "dropped record {i}");
            } else {
                assert_eq!(remap.locate(offset, len), Some(position), "kept record {i}");
                position += u64::from(len);
            }
            assert_eq!(remap.locate(offset + 1, len), None, "inside record {i}");
        }
        assert_eq!(remap.locate(extent + 4096, 30), None);
        assert_eq!(remap.locate(u64::MAX, 30), None);
    }

    #[test]
    fn records_in_a_shuffled_file_order_are_found_both_ways() {
        // 500 records of 100 to 2,000 bytes, every fourth dropped, the rest written in an order
        // unrelated to their old offsets (as a compaction sorted by key writes them).
        let (all, end) = laid_out(500, |i| 100 + (i * 7919 % 1900) as u32);
        let mut kept: Vec<(u64, u32)> =
            all.iter().copied().enumerate().filter(|(i, _)| i % 4 != 3).map(|(_, r)| r).collect();
        for i in 0..kept.len() {
            let j = (i * 104_729 + 17) % kept.len();
            kept.swap(i, j);
        }
        let remap = Remap::new(end, &kept);
        assert_eq!(remap.check(), Ok(()));
        let mut position = SEGMENT_HEADER_LEN;
        for &(offset, len) in &kept {
            assert_eq!(remap.locate(offset, len), Some(position), "record at {offset}");
            assert_eq!(remap.logical_at(position), Some((offset, u64::from(len))), "file offset {position}");
            position += u64::from(len);
        }
        assert_eq!(remap.records_end(), position);
        let mut bytes = Vec::new();
        remap.encode(&mut bytes);
        assert_eq!(Remap::decode(&bytes, position + bytes.len() as u64), Ok(remap));
    }

    #[test]
    fn the_encoding_round_trips_and_any_damage_is_an_error() {
        let (remap, file_len) = sample();
        let mut bytes = Vec::new();
        remap.encode(&mut bytes);
        assert_eq!(bytes.len(), Remap::encoded_len(3));
        assert_eq!(Remap::encoded_len_from_trailer(bytes.last_chunk().unwrap()), bytes.len());
        assert_eq!(Remap::decode(&bytes, file_len), Ok(remap));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Remap::decode(&bad, file_len).is_err(), "flipped byte {i} went unnoticed");
        }
        for cut in 1..=bytes.len() {
            assert!(Remap::decode(&bytes[cut..], file_len).is_err(), "a map missing its first {cut} bytes");
        }
        // The records must end exactly where the map starts.
        assert!(Remap::decode(&bytes, file_len + 1).is_err());
    }

    #[test]
    fn a_segment_past_4_gib_has_no_map() {
        let past = MAX_EXTENT + 1;
        assert!(Remap::new(past, &[(24, 30)]).check().is_err());
        assert!(Remap::new(past, &[(past - 100, 30)]).check().is_err());
        assert!(Remap::new(MAX_EXTENT, &[(24, 30)]).check().is_ok());
        let remap = Remap::new(past, &[(24, 30)]);
        let mut bytes = Vec::new();
        remap.encode(&mut bytes);
        assert!(Remap::decode(&bytes, remap.records_end() + bytes.len() as u64).is_err());
        // A lookup past 4 GiB finds nothing rather than a truncated offset's record.
        assert_eq!(Remap::new(MAX_EXTENT, &[(24, 30)]).locate(24 + (1 << 32), 30), None);
    }

    #[test]
    fn overlapping_or_out_of_segment_entries_are_refused_even_with_a_good_checksum() {
        for kept in [vec![(24, 30), (40, 30)], vec![(10, 30)], vec![(990, 30)], vec![(24, 10)]] {
            let remap = Remap::new(1000, &kept);
            let mut bytes = Vec::new();
            remap.encode(&mut bytes);
            let file_len = remap.records_end() + bytes.len() as u64;
            assert!(Remap::decode(&bytes, file_len).is_err(), "{kept:?} accepted");
        }
    }
}
