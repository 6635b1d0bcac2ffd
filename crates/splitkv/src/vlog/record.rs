//! Byte layout of value-log segment headers and records (specified in `docs/format/vlog.md`).
//!
//! A segment file starts with a 24-byte header naming the format version and the segment id,
//! followed by records laid end to end. Every record carries two checksums: one over its fixed
//! header (which includes the lengths and flags) and one over its body (the optional predecessor
//! pointer, the key and the value). Recovery relies on the split: when the bytes of a header are
//! all present, its checksum tells a damaged header (corruption) from a genuine one whose lengths
//! can then be trusted to decide whether the body was cut short by a crash (a torn tail).
//!
//! Version 2 added the predecessor pointer (`FLAG_HAS_PREV`): the persistent-hash index keeps a
//! chain of a key's versions through the log, so a snapshot read can walk back from the newest
//! record. The LSM mode never sets it, and a record without it is byte-for-byte a version-1
//! record. Which flags are legal depends on the segment's version, so record decoding takes it.
//!
//! Version 3 added the `Moved` record kind: a value a compaction copied out of an older segment
//! (relocation through compaction). Its key and value are those of a put, but it is not a write:
//! replay skips it, and only the table that the compaction wrote points at it.
//!
//! Everything here is pure encoding and validation on byte slices; it is thread-agnostic.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::ops::Range;

use crate::coding::{fixed32_at, fixed64_at, masked_crc};
use crate::types::{SegmentId, SequenceNumber, ValuePointer};

/// Identifies a value-log segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SPLKVLOG";
/// Version of the segment and record layout written by this code.
pub const FORMAT_VERSION: u32 = 3;
/// Version of a compacted segment (written by GC's in-place compaction, `vlog::remap`): the
/// records of version 3 (any version's records are valid version-3 records), after an offset
/// map that says where each record kept from the segment's old file lies in the new one.
pub const COMPACTED_FORMAT_VERSION: u32 = 4;
/// Oldest segment layout this code reads: version 1 is version 2 without `FLAG_HAS_PREV`, and
/// version 2 is version 3 without `RecordKind::Moved`.
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Bytes of the segment header; the first record starts here.
pub const SEGMENT_HEADER_LEN: u64 = 24;
/// Bytes of a record's fixed header, before the body.
pub const RECORD_HEADER_LEN: usize = 26;
/// Record flag: this record closes its batch; a batch is applied only once this is seen.
pub const FLAG_BATCH_END: u8 = 1;
/// Record flag (format version 2): the body starts with the pointer of the key's previous
/// version, [`PREV_POINTER_LEN`] bytes, before the key.
pub const FLAG_HAS_PREV: u8 = 2;
/// Bytes of an encoded predecessor pointer: segment id u64, offset u64, length u32, all LE.
/// Fixed-width rather than varints so the key's position follows from the flags alone.
pub const PREV_POINTER_LEN: usize = 20;

/// Bytes covered by the header checksum: `body_crc` through `value_len`.
const HEADER_CRC_RANGE: Range<usize> = 4..RECORD_HEADER_LEN;

/// The flag bits a record of a segment of format `version` may carry; any other bit is
/// corruption (a version-1 segment predates `FLAG_HAS_PREV`, so there it is damage too).
fn known_flags(version: u32) -> u8 {
    if version >= 2 {
        FLAG_BATCH_END | FLAG_HAS_PREV
    } else {
        FLAG_BATCH_END
    }
}

/// What a log record does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// The key is deleted; the record has an empty value.
    Delete = 0,
    /// The key is set to the record's value.
    Put = 1,
    /// Every key in `[key, value)` is deleted (a range delete: the value holds the end key).
    DeleteRange = 2,
    /// A put's value that a compaction copied here from an older segment (format version 3).
    /// Not a write: the sequence number is the moved version's own, replay skips the record,
    /// and only the table the compaction wrote points at it.
    Moved = 3,
}

impl RecordKind {
    /// The kind's name as tools print it.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Delete => "delete",
            RecordKind::Put => "put",
            RecordKind::DeleteRange => "delete_range",
            RecordKind::Moved => "moved",
        }
    }

    /// Decodes a kind byte.
    pub fn from_u8(byte: u8) -> Option<RecordKind> {
        match byte {
            0 => Some(RecordKind::Delete),
            1 => Some(RecordKind::Put),
            2 => Some(RecordKind::DeleteRange),
            3 => Some(RecordKind::Moved),
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
    /// Where the previous version of `key` lives, for the persistent-hash index's version chain;
    /// `None` (the LSM mode, or a key's first version) encodes no extra byte. It must address a
    /// record wholly before the batch being appended (see [`crate::vlog::ValueLog::append_batch`]).
    pub prev: Option<ValuePointer>,
}

impl<'a> RecordRef<'a> {
    /// A put of `value` under `key`, with no predecessor.
    pub fn put(seq: SequenceNumber, key: &'a [u8], value: &'a [u8]) -> Self {
        RecordRef { seq, kind: RecordKind::Put, key, value, prev: None }
    }

    /// A value a compaction moves to the log head; `seq` is the moved version's.
    pub fn moved(seq: SequenceNumber, key: &'a [u8], value: &'a [u8]) -> Self {
        RecordRef { seq, kind: RecordKind::Moved, key, value, prev: None }
    }

    /// A deletion of `key`, with no predecessor.
    pub fn delete(seq: SequenceNumber, key: &'a [u8]) -> Self {
        RecordRef { seq, kind: RecordKind::Delete, key, value: &[], prev: None }
    }

    /// The same record with `prev` as its predecessor pointer.
    pub fn with_prev(self, prev: Option<ValuePointer>) -> Self {
        RecordRef { prev, ..self }
    }

    /// Encoded length, or `None` if it would not fit the pointer's `u32` length.
    pub fn encoded_len(&self) -> Option<u32> {
        record_len(self.key.len(), self.value.len(), self.prev.is_some())
    }
}

/// Encoded length of a record, or `None` if it would not fit the pointer's `u32` length.
pub fn record_len(key_len: usize, value_len: usize, has_prev: bool) -> Option<u32> {
    let prev_len = if has_prev { PREV_POINTER_LEN } else { 0 };
    let total = RECORD_HEADER_LEN.checked_add(prev_len)?.checked_add(key_len)?.checked_add(value_len)?;
    u32::try_from(total).ok()
}

/// True if `prev` could address a record that ends at or before `offset` of `segment`. The
/// chain of predecessors then strictly descends through the log, so walking it always ends,
/// even over a damaged file whose checksums happen to match.
pub(crate) fn prev_precedes(prev: &ValuePointer, segment: SegmentId, offset: u64) -> bool {
    let addresses_a_record = prev.offset >= SEGMENT_HEADER_LEN && prev.len as usize >= RECORD_HEADER_LEN;
    let before = prev.segment < segment
        || (prev.segment == segment && prev.offset.saturating_add(u64::from(prev.len)) <= offset);
    addresses_a_record && before
}

fn encode_prev(dst: &mut Vec<u8>, prev: &ValuePointer) {
    dst.extend_from_slice(&prev.segment.0.to_le_bytes());
    dst.extend_from_slice(&prev.offset.to_le_bytes());
    dst.extend_from_slice(&prev.len.to_le_bytes());
}

fn decode_prev(bytes: &[u8; PREV_POINTER_LEN]) -> ValuePointer {
    ValuePointer { segment: SegmentId(le_u64(bytes, 0)), offset: le_u64(bytes, 8), len: le_u32(bytes, 16) }
}

/// Appends the encoding of `rec` to `dst` and returns its length.
///
/// The caller must have checked [`RecordRef::encoded_len`]; the record is encoded in place so
/// that appending costs no allocation beyond the buffer's own growth, and each checksum runs
/// over one contiguous slice (the predecessor sits inside the body, so the body checksum covers
/// it without a second pass).
pub(crate) fn encode_record(dst: &mut Vec<u8>, rec: &RecordRef<'_>, batch_end: bool) -> u32 {
    debug_assert!(rec.encoded_len().is_some());
    let start = dst.len();
    let mut flags = if batch_end { FLAG_BATCH_END } else { 0 };
    if rec.prev.is_some() {
        flags |= FLAG_HAS_PREV;
    }
    dst.extend_from_slice(&[0u8; 8]); // both checksums, filled in once the bytes they cover exist
    dst.extend_from_slice(&rec.seq.0.to_le_bytes());
    dst.push(rec.kind as u8);
    dst.push(flags);
    dst.extend_from_slice(&(rec.key.len() as u32).to_le_bytes());
    dst.extend_from_slice(&(rec.value.len() as u32).to_le_bytes());
    if let Some(prev) = &rec.prev {
        encode_prev(dst, prev);
    }
    dst.extend_from_slice(rec.key);
    dst.extend_from_slice(rec.value);
    // The header was appended above, so the split always succeeds.
    if let Some((header, body)) = dst.get_mut(start..).and_then(<[u8]>::split_first_chunk_mut::<RECORD_HEADER_LEN>) {
        header[4..8].copy_from_slice(&masked_crc(body).to_le_bytes());
        let header_crc = masked_crc(&header[HEADER_CRC_RANGE]);
        header[..4].copy_from_slice(&header_crc.to_le_bytes());
    }
    (dst.len() - start) as u32
}

/// A record's fixed header after its checksum and fields were validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub body_crc: u32,
    pub seq: SequenceNumber,
    pub kind: RecordKind,
    pub batch_end: bool,
    /// The body starts with a predecessor pointer ([`FLAG_HAS_PREV`]).
    pub has_prev: bool,
    pub key_len: u32,
    pub value_len: u32,
}

impl RecordHeader {
    /// Bytes of the predecessor pointer in the body: 0 or [`PREV_POINTER_LEN`].
    fn prev_len(&self) -> usize {
        if self.has_prev {
            PREV_POINTER_LEN
        } else {
            0
        }
    }

    /// Full encoded length: header, predecessor pointer if any, key and value.
    pub fn record_len(&self) -> u64 {
        (RECORD_HEADER_LEN + self.prev_len()) as u64 + u64::from(self.key_len) + u64::from(self.value_len)
    }

    /// Byte range of the predecessor pointer within the encoded record, if it has one.
    pub fn prev_range(&self) -> Option<Range<usize>> {
        self.has_prev.then_some(RECORD_HEADER_LEN..RECORD_HEADER_LEN + PREV_POINTER_LEN)
    }

    /// Byte range of the key within the encoded record.
    pub fn key_range(&self) -> Range<usize> {
        let start = RECORD_HEADER_LEN + self.prev_len();
        start..start + self.key_len as usize
    }

    /// Byte range of the value within the encoded record.
    pub fn value_range(&self) -> Range<usize> {
        let start = self.key_range().end;
        start..start + self.value_len as usize
    }

    /// The key and value of `record`, the encoded record this header was decoded from. Always
    /// `Some` once [`check_record`] accepted the record (it checks the length).
    pub fn key_and_value<'a>(&self, record: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        Some((record.get(self.key_range())?, record.get(self.value_range())?))
    }
}

// Callers read fixed-size headers at constant offsets inside them, so the 0 for a read past the
// end is never produced.
fn le_u32(bytes: &[u8], at: usize) -> u32 {
    fixed32_at(bytes, at).unwrap_or(0)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    fixed64_at(bytes, at).unwrap_or(0)
}

/// Validates and decodes a record header of a segment of format `version`; the error is the
/// reason for a corruption report.
pub(crate) fn decode_record_header(
    bytes: &[u8; RECORD_HEADER_LEN],
    version: u32,
) -> Result<RecordHeader, &'static str> {
    if le_u32(bytes, 0) != masked_crc(&bytes[HEADER_CRC_RANGE]) {
        return Err("record header checksum mismatch");
    }
    let kind = RecordKind::from_u8(bytes[16]).ok_or("unknown record kind")?;
    if kind == RecordKind::Moved && version < 3 {
        return Err("moved record in a segment older than format version 3");
    }
    let flags = bytes[17];
    if flags & !known_flags(version) != 0 {
        return Err(if flags & !known_flags(FORMAT_VERSION) == 0 {
            "predecessor flag in a version-1 segment"
        } else {
            "unknown record flags"
        });
    }
    Ok(RecordHeader {
        body_crc: le_u32(bytes, 4),
        seq: SequenceNumber(le_u64(bytes, 8)),
        kind,
        batch_end: flags & FLAG_BATCH_END != 0,
        has_prev: flags & FLAG_HAS_PREV != 0,
        key_len: le_u32(bytes, 18),
        value_len: le_u32(bytes, 22),
    })
}

/// Splits off the fixed header of an encoded record; `None` if `record` is shorter than it.
pub(crate) fn header_bytes(record: &[u8]) -> Option<&[u8; RECORD_HEADER_LEN]> {
    record.first_chunk::<RECORD_HEADER_LEN>()
}

/// Validates the body of `record`, the whole encoded record at `offset` of `segment` whose
/// header was decoded, and returns its predecessor pointer.
///
/// Checks that `record` has the header's length, the body checksum (predecessor, key and value),
/// and that a predecessor addresses a record wholly before this one ([`prev_precedes`]).
pub(crate) fn check_record(
    header: &RecordHeader,
    record: &[u8],
    segment: SegmentId,
    offset: u64,
) -> Result<Option<ValuePointer>, &'static str> {
    if record.len() as u64 != header.record_len() {
        return Err("record length differs from its header");
    }
    let body = record.get(RECORD_HEADER_LEN..).ok_or("short record")?;
    if masked_crc(body) != header.body_crc {
        return Err("record body checksum mismatch");
    }
    let Some(range) = header.prev_range() else { return Ok(None) };
    let prev =
        record.get(range).and_then(|b| b.first_chunk::<PREV_POINTER_LEN>()).map(decode_prev).ok_or("short record")?;
    if !prev_precedes(&prev, segment, offset) {
        return Err("predecessor pointer does not address an earlier record");
    }
    Ok(Some(prev))
}

/// The 24-byte header written at the start of segment `id`.
pub(crate) fn encode_segment_header(id: SegmentId) -> [u8; SEGMENT_HEADER_LEN as usize] {
    encode_segment_header_version(id, FORMAT_VERSION)
}

/// A segment header claiming format `version`; only tests write anything but the current one.
pub(crate) fn encode_segment_header_version(id: SegmentId, version: u32) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
    header[0..8].copy_from_slice(&SEGMENT_MAGIC);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    header[12..20].copy_from_slice(&id.0.to_le_bytes());
    let crc = masked_crc(&header[0..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header
}

/// What a valid segment header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub id: SegmentId,
    /// Format version, within `MIN_FORMAT_VERSION..=COMPACTED_FORMAT_VERSION`; decides the legal
    /// flags, and whether an offset map follows the header.
    pub version: u32,
}

/// Validates a segment header and returns the segment id and version it names; `expected` is
/// the id the file name claims, if known.
pub(crate) fn check_segment_header(
    header: &[u8; SEGMENT_HEADER_LEN as usize],
    expected: Option<SegmentId>,
) -> Result<SegmentHeader, String> {
    if le_u32(header, 20) != masked_crc(&header[0..20]) {
        return Err("segment header checksum mismatch".into());
    }
    if header[0..8] != SEGMENT_MAGIC {
        return Err("not a value-log segment (bad magic)".into());
    }
    let version = le_u32(header, 8);
    if !(MIN_FORMAT_VERSION..=COMPACTED_FORMAT_VERSION).contains(&version) {
        return Err(format!(
            "unsupported segment format version {version} (this build reads {MIN_FORMAT_VERSION} to \
             {COMPACTED_FORMAT_VERSION})"
        ));
    }
    let id = SegmentId(le_u64(header, 12));
    match expected {
        Some(want) if want != id => Err(format!("segment header names segment {id}, file name says {want}")),
        _ => Ok(SegmentHeader { id, version }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(rec: &RecordRef<'_>, batch_end: bool) -> Vec<u8> {
        let mut buf = vec![0xAA]; // a prefix shows encoding does not assume an empty buffer
        let len = encode_record(&mut buf, rec, batch_end);
        assert_eq!(len as usize, buf.len() - 1);
        assert_eq!(Some(len), rec.encoded_len());
        buf.remove(0);
        buf
    }

    /// Where the records under test claim to live: after their predecessors below.
    const SEGMENT: SegmentId = SegmentId(5);
    const OFFSET: u64 = 4096;

    fn prev() -> ValuePointer {
        ValuePointer { segment: SegmentId(3), offset: 0x0102_0304_0506, len: 77 }
    }

    fn decode(bytes: &[u8]) -> (RecordHeader, Option<ValuePointer>) {
        let header = decode_record_header(header_bytes(bytes).unwrap(), FORMAT_VERSION).unwrap();
        let prev = check_record(&header, bytes, SEGMENT, OFFSET).unwrap();
        (header, prev)
    }

    #[test]
    fn record_round_trips_through_header_and_body() {
        let rec = RecordRef::put(SequenceNumber(77), b"key", b"value");
        let bytes = encode(&rec, true);
        assert_eq!(bytes.len(), RECORD_HEADER_LEN + 3 + 5);
        let (header, prev) = decode(&bytes);
        assert_eq!(header.seq, SequenceNumber(77));
        assert_eq!(header.kind, RecordKind::Put);
        assert!(header.batch_end);
        assert!(!header.has_prev);
        assert_eq!(prev, None);
        assert_eq!(header.prev_range(), None);
        assert_eq!(&bytes[header.key_range()], b"key");
        assert_eq!(&bytes[header.value_range()], b"value");
        assert_eq!(header.record_len(), bytes.len() as u64);
    }

    #[test]
    fn a_record_without_prev_is_byte_for_byte_a_version_1_record() {
        // The LSM mode must keep writing exactly what it wrote before the flag existed: flags
        // hold only BATCH_END and the key follows the fixed header directly.
        let bytes = encode(&RecordRef::put(SequenceNumber(9), b"k", b"v"), false);
        assert_eq!(bytes[17], 0);
        assert_eq!(&bytes[RECORD_HEADER_LEN..], b"kv");
        let header = decode_record_header(header_bytes(&bytes).unwrap(), 1).unwrap();
        assert_eq!(check_record(&header, &bytes, SEGMENT, OFFSET), Ok(None));
    }

    #[test]
    fn records_with_prev_round_trip_for_puts_and_deletes() {
        let put = RecordRef::put(SequenceNumber(8), b"key", b"value").with_prev(Some(prev()));
        let del = RecordRef::delete(SequenceNumber(9), b"key").with_prev(Some(prev()));
        for (rec, batch_end) in [(put, false), (del, true)] {
            let bytes = encode(&rec, batch_end);
            assert_eq!(bytes.len(), RECORD_HEADER_LEN + PREV_POINTER_LEN + 3 + rec.value.len());
            assert_eq!(bytes[17], FLAG_HAS_PREV | if batch_end { FLAG_BATCH_END } else { 0 });
            // The fixed little-endian layout, straight after the header.
            let p = &bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + PREV_POINTER_LEN];
            assert_eq!(p[..8], 3u64.to_le_bytes());
            assert_eq!(p[8..16], 0x0102_0304_0506u64.to_le_bytes());
            assert_eq!(p[16..], 77u32.to_le_bytes());
            // Lengths in the header stay the key's and the value's.
            assert_eq!(bytes[18..22], 3u32.to_le_bytes());
            assert_eq!(bytes[22..26], (rec.value.len() as u32).to_le_bytes());

            let (header, decoded) = decode(&bytes);
            assert_eq!(decoded, Some(prev()));
            assert_eq!((header.kind, header.batch_end, header.has_prev), (rec.kind, batch_end, true));
            assert_eq!(header.record_len(), bytes.len() as u64);
            assert_eq!(&bytes[header.key_range()], b"key");
            assert_eq!(&bytes[header.value_range()], rec.value);
        }
        // `with_prev(None)` takes a predecessor away again.
        let cleared = put.with_prev(None);
        assert_eq!(cleared, RecordRef::put(SequenceNumber(8), b"key", b"value"));
        assert_eq!(encode(&cleared, false).len(), RECORD_HEADER_LEN + 8);
    }

    #[test]
    fn every_header_byte_is_covered_by_a_checksum() {
        let bytes = encode(&RecordRef::delete(SequenceNumber(1), b"k"), false);
        for i in 0..RECORD_HEADER_LEN {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_record_header(header_bytes(&bad).unwrap(), FORMAT_VERSION).is_err(), "byte {i}");
        }
        let mut bad_body = bytes.clone();
        bad_body[RECORD_HEADER_LEN] ^= 1;
        let header = decode_record_header(header_bytes(&bad_body).unwrap(), FORMAT_VERSION).unwrap();
        assert_eq!(check_record(&header, &bad_body, SEGMENT, OFFSET), Err("record body checksum mismatch"));
    }

    #[test]
    fn every_prev_byte_is_covered_by_the_body_checksum() {
        let bytes = encode(&RecordRef::put(SequenceNumber(1), b"k", b"v").with_prev(Some(prev())), true);
        for i in RECORD_HEADER_LEN..RECORD_HEADER_LEN + PREV_POINTER_LEN {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            // The header is untouched and still decodes; the body does not.
            let header = decode_record_header(header_bytes(&bad).unwrap(), FORMAT_VERSION).unwrap();
            assert_eq!(check_record(&header, &bad, SEGMENT, OFFSET), Err("record body checksum mismatch"), "byte {i}");
        }
    }

    #[test]
    fn the_prev_flag_is_corruption_in_a_version_1_segment_and_unknown_flags_in_any() {
        let bytes = encode(&RecordRef::put(SequenceNumber(1), b"k", b"v").with_prev(Some(prev())), true);
        assert_eq!(
            decode_record_header(header_bytes(&bytes).unwrap(), 1),
            Err("predecessor flag in a version-1 segment")
        );
        for version in [1, FORMAT_VERSION] {
            let mut bad = encode(&RecordRef::put(SequenceNumber(1), b"k", b"v"), true);
            bad[17] |= 0x04;
            let crc = masked_crc(&bad[HEADER_CRC_RANGE]);
            bad[0..4].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(decode_record_header(header_bytes(&bad).unwrap(), version), Err("unknown record flags"));
        }
    }

    #[test]
    fn a_prev_that_does_not_point_backwards_is_corruption() {
        let at = |segment: u64, offset: u64, len: u32| ValuePointer { segment: SegmentId(segment), offset, len };
        let legal = [at(4, 1 << 40, 100), at(5, 24, 26), at(5, OFFSET - 30, 30)];
        let illegal = [
            at(5, OFFSET - 29, 30),  // overlaps the record itself
            at(5, OFFSET, 30),       // the record itself
            at(6, 24, 26),           // a newer segment
            at(4, 23, 40),           // inside a segment header
            at(4, 24, 25),           // shorter than any record
            at(5, u64::MAX - 1, 26), // its end overflows
        ];
        for (p, ok) in legal.iter().map(|p| (p, true)).chain(illegal.iter().map(|p| (p, false))) {
            let bytes = encode(&RecordRef::put(SequenceNumber(1), b"k", b"v").with_prev(Some(*p)), true);
            let header = decode_record_header(header_bytes(&bytes).unwrap(), FORMAT_VERSION).unwrap();
            let checked = check_record(&header, &bytes, SEGMENT, OFFSET);
            assert_eq!(checked.is_ok(), ok, "{p:?}: {checked:?}");
            assert_eq!(prev_precedes(p, SEGMENT, OFFSET), ok, "{p:?}");
        }
    }

    #[test]
    fn a_record_shorter_or_longer_than_its_header_says_is_rejected_without_panicking() {
        let bytes = encode(&RecordRef::put(SequenceNumber(1), b"key", b"v").with_prev(Some(prev())), true);
        let header = decode_record_header(header_bytes(&bytes).unwrap(), FORMAT_VERSION).unwrap();
        for len in [0, RECORD_HEADER_LEN, RECORD_HEADER_LEN + 10, bytes.len() - 1] {
            assert!(check_record(&header, &bytes[..len], SEGMENT, OFFSET).is_err(), "len {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(check_record(&header, &longer, SEGMENT, OFFSET).is_err());
    }

    #[test]
    fn segment_header_checks_magic_version_and_id() {
        let header = encode_segment_header(SegmentId(9));
        let v3 = SegmentHeader { id: SegmentId(9), version: FORMAT_VERSION };
        assert_eq!(FORMAT_VERSION, 3);
        assert_eq!(check_segment_header(&header, Some(SegmentId(9))), Ok(v3));
        assert!(check_segment_header(&header, Some(SegmentId(8))).is_err());
        let mut bad = header;
        bad[3] ^= 1;
        assert!(check_segment_header(&bad, None).is_err());
        // Versions 1 and 2 are still read, and 4 (a compacted segment); versions this build does
        // not know are refused.
        for version in [1, 2, COMPACTED_FORMAT_VERSION] {
            let old = encode_segment_header_version(SegmentId(9), version);
            assert_eq!(check_segment_header(&old, None), Ok(SegmentHeader { id: SegmentId(9), version }));
        }
        for version in [0, 5, u32::MAX] {
            let other = encode_segment_header_version(SegmentId(9), version);
            assert!(check_segment_header(&other, None).is_err(), "version {version}");
        }
    }

    #[test]
    fn a_moved_record_is_legal_only_in_a_version_3_segment() {
        let bytes = encode(&RecordRef::moved(SequenceNumber(7), b"key", b"value"), true);
        let header = decode_record_header(header_bytes(&bytes).unwrap(), FORMAT_VERSION).unwrap();
        assert_eq!((header.kind, header.seq), (RecordKind::Moved, SequenceNumber(7)));
        for version in [1, 2] {
            let refused = decode_record_header(header_bytes(&bytes).unwrap(), version);
            assert!(refused.is_err_and(|reason| reason.contains("version 3")), "version {version}");
        }
    }

    #[test]
    fn oversized_records_are_rejected_before_encoding() {
        assert_eq!(record_len(1, 2, false), Some(RECORD_HEADER_LEN as u32 + 3));
        assert_eq!(record_len(1, 2, true), Some((RECORD_HEADER_LEN + PREV_POINTER_LEN) as u32 + 3));
        assert_eq!(record_len(u32::MAX as usize, 1, false), None);
        let limit = u32::MAX as usize - RECORD_HEADER_LEN;
        assert!(record_len(limit, 0, false).is_some());
        assert_eq!(record_len(limit, 0, true), None, "the predecessor counts towards the limit");
    }
}
