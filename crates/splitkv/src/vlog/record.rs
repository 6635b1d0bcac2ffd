//! Byte layout of value-log segment headers and records (specified in `docs/format/vlog.md`).
//!
//! A segment file starts with a 24-byte header naming the format version and the segment id,
//! followed by records laid end to end. Every record carries two checksums: one over its fixed
//! header (which includes the lengths) and one over its key and value. Recovery relies on the
//! split: when the bytes of a header are all present, its checksum tells a damaged header
//! (corruption) from a genuine one whose lengths can then be trusted to decide whether the body
//! was cut short by a crash (a torn tail).
//!
//! Everything here is pure encoding and validation on byte slices; it is thread-agnostic.

use crate::coding::masked_crc;
use crate::types::{SegmentId, SequenceNumber};

/// Identifies a value-log segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SPLKVLOG";
/// Version of the segment and record layout written by this code.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the segment header; the first record starts here.
pub const SEGMENT_HEADER_LEN: u64 = 24;
/// Bytes of a record's fixed header, before the key.
pub const RECORD_HEADER_LEN: usize = 26;
/// Record flag: this record closes its batch; a batch is applied only once this is seen.
pub const FLAG_BATCH_END: u8 = 1;

const KNOWN_FLAGS: u8 = FLAG_BATCH_END;
/// Bytes covered by the header checksum: `body_crc` through `value_len`.
const HEADER_CRC_RANGE: std::ops::Range<usize> = 4..RECORD_HEADER_LEN;

/// What a log record does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// The key is deleted; the record has an empty value.
    Delete = 0,
    /// The key is set to the record's value.
    Put = 1,
}

impl RecordKind {
    /// Decodes a kind byte.
    pub fn from_u8(byte: u8) -> Option<RecordKind> {
        match byte {
            0 => Some(RecordKind::Delete),
            1 => Some(RecordKind::Put),
            _ => None,
        }
    }
}

/// One record to append, borrowing the caller's key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Sequence number of the write.
    pub seq: SequenceNumber,
    /// Put or delete.
    pub kind: RecordKind,
    /// User key.
    pub key: &'a [u8],
    /// Value (empty for deletes).
    pub value: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// A put of `value` under `key`.
    pub fn put(seq: SequenceNumber, key: &'a [u8], value: &'a [u8]) -> Self {
        RecordRef { seq, kind: RecordKind::Put, key, value }
    }

    /// A deletion of `key`.
    pub fn delete(seq: SequenceNumber, key: &'a [u8]) -> Self {
        RecordRef { seq, kind: RecordKind::Delete, key, value: &[] }
    }
}

/// Encoded length of a record, or `None` if it would not fit the pointer's `u32` length.
pub fn record_len(key_len: usize, value_len: usize) -> Option<u32> {
    let total = RECORD_HEADER_LEN.checked_add(key_len)?.checked_add(value_len)?;
    u32::try_from(total).ok()
}

/// Appends the encoding of `rec` to `dst` and returns its length.
///
/// The caller must have checked [`record_len`]; the record is encoded in place so that appending
/// costs no allocation beyond the buffer's own growth, and each checksum runs over one
/// contiguous slice.
pub(crate) fn encode_record(dst: &mut Vec<u8>, rec: &RecordRef<'_>, batch_end: bool) -> u32 {
    debug_assert!(record_len(rec.key.len(), rec.value.len()).is_some());
    let start = dst.len();
    let flags = if batch_end { FLAG_BATCH_END } else { 0 };
    dst.extend_from_slice(&[0u8; 8]); // both checksums, filled in once the bytes they cover exist
    dst.extend_from_slice(&rec.seq.0.to_le_bytes());
    dst.push(rec.kind as u8);
    dst.push(flags);
    dst.extend_from_slice(&(rec.key.len() as u32).to_le_bytes());
    dst.extend_from_slice(&(rec.value.len() as u32).to_le_bytes());
    dst.extend_from_slice(rec.key);
    dst.extend_from_slice(rec.value);
    let body_crc = masked_crc(&dst[start + RECORD_HEADER_LEN..]);
    dst[start + 4..start + 8].copy_from_slice(&body_crc.to_le_bytes());
    let header_crc = masked_crc(&dst[start + HEADER_CRC_RANGE.start..start + HEADER_CRC_RANGE.end]);
    dst[start..start + 4].copy_from_slice(&header_crc.to_le_bytes());
    (dst.len() - start) as u32
}

/// A record's fixed header after its checksum and fields were validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub body_crc: u32,
    pub seq: SequenceNumber,
    pub kind: RecordKind,
    pub batch_end: bool,
    pub key_len: u32,
    pub value_len: u32,
}

impl RecordHeader {
    /// Full encoded length: header, key and value.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.key_len) + u64::from(self.value_len)
    }

    /// Byte range of the key within the encoded record.
    pub fn key_range(&self) -> std::ops::Range<usize> {
        RECORD_HEADER_LEN..RECORD_HEADER_LEN + self.key_len as usize
    }

    /// Byte range of the value within the encoded record.
    pub fn value_range(&self) -> std::ops::Range<usize> {
        let start = RECORD_HEADER_LEN + self.key_len as usize;
        start..start + self.value_len as usize
    }
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Validates and decodes a record header; the error is the reason for a corruption report.
pub(crate) fn decode_record_header(bytes: &[u8; RECORD_HEADER_LEN]) -> Result<RecordHeader, &'static str> {
    if le_u32(bytes, 0) != masked_crc(&bytes[HEADER_CRC_RANGE]) {
        return Err("record header checksum mismatch");
    }
    let kind = RecordKind::from_u8(bytes[16]).ok_or("unknown record kind")?;
    let flags = bytes[17];
    if flags & !KNOWN_FLAGS != 0 {
        return Err("unknown record flags");
    }
    Ok(RecordHeader {
        body_crc: le_u32(bytes, 4),
        seq: SequenceNumber(le_u64(bytes, 8)),
        kind,
        batch_end: flags & FLAG_BATCH_END != 0,
        key_len: le_u32(bytes, 18),
        value_len: le_u32(bytes, 22),
    })
}

/// Splits off the fixed header of an encoded record; `None` if `record` is shorter than it.
pub(crate) fn header_bytes(record: &[u8]) -> Option<&[u8; RECORD_HEADER_LEN]> {
    record.first_chunk::<RECORD_HEADER_LEN>()
}

/// Checks the key-and-value checksum of a record whose header was decoded.
pub(crate) fn check_body(header: &RecordHeader, body: &[u8]) -> Result<(), &'static str> {
    if masked_crc(body) != header.body_crc {
        return Err("record body checksum mismatch");
    }
    Ok(())
}

/// The 24-byte header written at the start of segment `id`.
pub(crate) fn encode_segment_header(id: SegmentId) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
    header[0..8].copy_from_slice(&SEGMENT_MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[12..20].copy_from_slice(&id.0.to_le_bytes());
    let crc = masked_crc(&header[0..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Validates a segment header and returns the segment id it names; `expected` is the id the
/// file name claims, if known.
pub(crate) fn check_segment_header(
    header: &[u8; SEGMENT_HEADER_LEN as usize],
    expected: Option<SegmentId>,
) -> Result<SegmentId, String> {
    if le_u32(header, 20) != masked_crc(&header[0..20]) {
        return Err("segment header checksum mismatch".into());
    }
    if header[0..8] != SEGMENT_MAGIC {
        return Err("not a value-log segment (bad magic)".into());
    }
    let version = le_u32(header, 8);
    if version != FORMAT_VERSION {
        return Err(format!("unsupported segment format version {version}"));
    }
    let id = SegmentId(le_u64(header, 12));
    match expected {
        Some(want) if want != id => Err(format!("segment header names segment {id}, file name says {want}")),
        _ => Ok(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(rec: &RecordRef<'_>, batch_end: bool) -> Vec<u8> {
        let mut buf = vec![0xAA]; // a prefix shows encoding does not assume an empty buffer
        let len = encode_record(&mut buf, rec, batch_end);
        assert_eq!(len as usize, buf.len() - 1);
        buf.remove(0);
        buf
    }

    #[test]
    fn record_round_trips_through_header_and_body() {
        let rec = RecordRef::put(SequenceNumber(77), b"key", b"value");
        let bytes = encode(&rec, true);
        assert_eq!(bytes.len(), RECORD_HEADER_LEN + 3 + 5);
        let header = decode_record_header(header_bytes(&bytes).unwrap()).unwrap();
        assert_eq!(header.seq, SequenceNumber(77));
        assert_eq!(header.kind, RecordKind::Put);
        assert!(header.batch_end);
        assert_eq!(&bytes[header.key_range()], b"key");
        assert_eq!(&bytes[header.value_range()], b"value");
        assert_eq!(header.record_len(), bytes.len() as u64);
        check_body(&header, &bytes[RECORD_HEADER_LEN..]).unwrap();
    }

    #[test]
    fn every_header_byte_is_covered_by_a_checksum() {
        let bytes = encode(&RecordRef::delete(SequenceNumber(1), b"k"), false);
        for i in 0..RECORD_HEADER_LEN {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_record_header(header_bytes(&bad).unwrap()).is_err(), "byte {i}");
        }
        let mut bad_body = bytes.clone();
        bad_body[RECORD_HEADER_LEN] ^= 1;
        let header = decode_record_header(header_bytes(&bad_body).unwrap()).unwrap();
        assert!(check_body(&header, &bad_body[RECORD_HEADER_LEN..]).is_err());
    }

    #[test]
    fn segment_header_checks_magic_version_and_id() {
        let header = encode_segment_header(SegmentId(9));
        assert_eq!(check_segment_header(&header, Some(SegmentId(9))), Ok(SegmentId(9)));
        assert!(check_segment_header(&header, Some(SegmentId(8))).is_err());
        let mut bad = header;
        bad[3] ^= 1;
        assert!(check_segment_header(&bad, None).is_err());
    }

    #[test]
    fn oversized_records_are_rejected_before_encoding() {
        assert_eq!(record_len(1, 2), Some(RECORD_HEADER_LEN as u32 + 3));
        assert_eq!(record_len(u32::MAX as usize, 1), None);
    }
}
