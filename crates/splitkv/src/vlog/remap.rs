//! The offset map of a compacted segment: where each record a segment kept now lies in its file.
//!
//! GC may clean a segment in place instead of copying its live records to the log head
//! (`gc_compact_in_place`): it writes a new file for the same segment id that holds only the
//! records still live, in their old order, and a map from each record's old offset (the one
//! every pointer into the segment names) to its position in the new file. Pointers never
//! change, so no index entry is written: the copy costs a file write, not a user write.
//!
//! The map is stored after the segment header of a format-version-4 segment, checksummed, and
//! held in memory while the segment is open (12 bytes per record on disk, 16 in memory). Byte
//! layout: `docs/format/vlog.md`, "Compacted segments".
//!
//! Thread-safety: a [`Remap`] is immutable once built.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use crate::coding::masked_crc;
use crate::vlog::record::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

/// Bytes of the map's fixed part: the old extent (u64) and the record count (u32).
pub(crate) const FIXED_LEN: usize = 12;
/// Bytes per record in the map: old offset (u64) and record length (u32).
const ENTRY_LEN: usize = 12;
/// Bytes of the map's trailing checksum.
const CRC_LEN: usize = 4;

/// Where the records of a compacted segment lie: old (logical) offsets, which pointers name, to
/// offsets in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remap {
    /// The segment's length before it was compacted: every old offset lies below it.
    extent: u64,
    /// Old offset of each kept record, ascending.
    logical: Vec<u64>,
    /// Offset of each kept record in the compacted file, ascending; one more entry than
    /// `logical`: the end of the last record, which is the end of the file.
    physical: Vec<u64>,
}

impl Remap {
    /// The map of a file that keeps records of `lens` bytes at old offsets `logical` (ascending),
    /// of a segment that was `extent` bytes long.
    pub fn new(extent: u64, kept: &[(u64, u32)]) -> Remap {
        let mut physical = Vec::with_capacity(kept.len() + 1);
        let mut at = SEGMENT_HEADER_LEN + encoded_len(kept.len()) as u64;
        physical.push(at);
        for &(_, len) in kept {
            at += u64::from(len);
            physical.push(at);
        }
        Remap { extent, logical: kept.iter().map(|&(offset, _)| offset).collect(), physical }
    }

    /// The old length of the segment; offsets of pointers into it lie below this.
    pub fn extent(&self) -> u64 {
        self.extent
    }

    /// Where the first kept record starts in the file (just after the map).
    pub fn records_start(&self) -> u64 {
        self.physical.first().copied().unwrap_or(SEGMENT_HEADER_LEN)
    }

    /// The file offset of the record of `len` bytes that was at `offset`, if the segment kept it.
    pub fn locate(&self, offset: u64, len: u32) -> Option<u64> {
        let i = self.logical.binary_search(&offset).ok()?;
        let (start, end) = (*self.physical.get(i)?, *self.physical.get(i + 1)?);
        (end - start == u64::from(len)).then_some(start)
    }

    /// The old offset of the record that starts at file offset `at`, and its length.
    pub fn logical_at(&self, at: u64) -> Option<(u64, u64)> {
        let i = self.physical.binary_search(&at).ok()?;
        let len = self.physical.get(i + 1)? - at;
        Some((*self.logical.get(i)?, len))
    }

    /// Appends the map's encoding (fixed part, entries, checksum) to `dst`.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        let start = dst.len();
        dst.extend_from_slice(&self.extent.to_le_bytes());
        dst.extend_from_slice(&(self.logical.len() as u32).to_le_bytes());
        for (offset, ends) in self.logical.iter().zip(self.physical.windows(2)) {
            let len = ends.last().unwrap_or(&0) - ends.first().unwrap_or(&0);
            dst.extend_from_slice(&offset.to_le_bytes());
            dst.extend_from_slice(&(len as u32).to_le_bytes());
        }
        let crc = masked_crc(&dst[start..]);
        dst.extend_from_slice(&crc.to_le_bytes());
    }

    /// The number of entries the map at the start of `fixed` (its first [`FIXED_LEN`] bytes,
    /// read just after the segment header) holds, and the bytes of the whole encoding.
    pub fn encoded_len_from_fixed(fixed: &[u8; FIXED_LEN]) -> usize {
        let count = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]) as usize;
        encoded_len(count)
    }

    /// Decodes and validates a map encoded by [`Remap::encode`] in a file of `file_len` bytes;
    /// the error is the reason for a corruption report.
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Remap, String> {
        let body_len = bytes.len().checked_sub(CRC_LEN).ok_or("offset map shorter than its checksum")?;
        let (body, crc) = bytes.split_at(body_len);
        let crc = u32::from_le_bytes(crc.try_into().map_err(|_| "offset map checksum cut short")?);
        if masked_crc(body) != crc {
            return Err("offset map checksum mismatch".into());
        }
        let fixed: &[u8; FIXED_LEN] = body.first_chunk().ok_or("offset map shorter than its fixed part")?;
        let extent = u64::from_le_bytes(fixed[..8].try_into().unwrap_or_default());
        let count = u32::from_le_bytes(fixed[8..].try_into().unwrap_or_default()) as usize;
        if encoded_len(count) != bytes.len() {
            return Err(format!("offset map of {count} records is not {} bytes long", bytes.len()));
        }
        let mut kept = Vec::with_capacity(count);
        let mut end_of_previous = SEGMENT_HEADER_LEN;
        for entry in body.get(FIXED_LEN..).unwrap_or_default().chunks_exact(ENTRY_LEN) {
            let offset = u64::from_le_bytes(entry[..8].try_into().unwrap_or_default());
            let len = u32::from_le_bytes(entry[8..].try_into().unwrap_or_default());
            if offset < end_of_previous || (len as usize) < RECORD_HEADER_LEN || offset + u64::from(len) > extent {
                return Err(format!("offset map entry (offset {offset}, len {len}) overlaps or leaves the segment"));
            }
            end_of_previous = offset + u64::from(len);
            kept.push((offset, len));
        }
        let remap = Remap::new(extent, &kept);
        if remap.physical.last() != Some(&file_len) {
            return Err(format!("offset map's records end at {:?}, the file at {file_len}", remap.physical.last()));
        }
        Ok(remap)
    }
}

/// Bytes of the encoding of a map of `count` records.
fn encoded_len(count: usize) -> usize {
    FIXED_LEN + count * ENTRY_LEN + CRC_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Remap, u64) {
        let remap = Remap::new(1000, &[(24, 30), (100, 40), (500, 26)]);
        let file_len = remap.records_start() + 96;
        (remap, file_len)
    }

    #[test]
    fn old_offsets_map_to_packed_positions_and_back() {
        let (remap, file_len) = sample();
        let start = remap.records_start();
        assert_eq!(start, SEGMENT_HEADER_LEN + encoded_len(3) as u64);
        assert_eq!(remap.locate(24, 30), Some(start));
        assert_eq!(remap.locate(100, 40), Some(start + 30));
        assert_eq!(remap.locate(500, 26), Some(start + 70));
        // A record the segment did not keep, or a length that is not the record's.
        assert_eq!(remap.locate(54, 30), None);
        assert_eq!(remap.locate(100, 41), None);
        assert_eq!(remap.logical_at(start + 30), Some((100, 40)));
        assert_eq!(remap.logical_at(start + 31), None);
        assert_eq!(remap.logical_at(file_len), None);
        assert_eq!(remap.extent(), 1000);
    }

    #[test]
    fn the_encoding_round_trips_and_any_damage_is_an_error() {
        let (remap, file_len) = sample();
        let mut bytes = Vec::new();
        remap.encode(&mut bytes);
        assert_eq!(bytes.len(), encoded_len(3));
        assert_eq!(Remap::encoded_len_from_fixed(bytes.first_chunk().unwrap()), bytes.len());
        assert_eq!(Remap::decode(&bytes, file_len), Ok(remap));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Remap::decode(&bad, file_len).is_err(), "flipped byte {i} went unnoticed");
        }
        for cut in 0..bytes.len() {
            assert!(Remap::decode(&bytes[..cut], file_len).is_err());
        }
        // The records must end exactly at the end of the file.
        assert!(Remap::decode(&bytes, file_len + 1).is_err());
    }

    #[test]
    fn overlapping_or_out_of_segment_entries_are_refused_even_with_a_good_checksum() {
        for kept in [vec![(24, 30), (40, 30)], vec![(10, 30)], vec![(990, 30)], vec![(24, 10)]] {
            let remap = Remap::new(1000, &kept);
            let mut bytes = Vec::new();
            remap.encode(&mut bytes);
            let file_len = *remap.physical.last().unwrap();
            assert!(Remap::decode(&bytes, file_len).is_err(), "{kept:?} accepted");
        }
    }
}
