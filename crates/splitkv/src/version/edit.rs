//! [`VersionEdit`]: one atomic change to the database's durable state, and its encoding.
//!
//! An edit names SSTables added to and removed from levels, value-log segments added and removed,
//! garbage newly found in segments, and the scalar counters (next file number, last sequence,
//! value-log head). The MANIFEST is a sequence of encoded edits; replaying them in order from an
//! empty state rebuilds the current state. A *snapshot* edit (the first record of every MANIFEST)
//! is simply an edit that adds everything.
//!
//! Encoding: a sequence of `tag varint` + fields, byte layout in `docs/format/manifest.md`.
//! Decoding never trusts its input: a truncated field, an unknown tag, a repeated scalar field or
//! a malformed internal key is an [`EditDecodeError`] carrying the payload offset, which the
//! MANIFEST reader turns into [`crate::Error::Corruption`].
//!
//! Thread-safety: plain data, `Send + Sync`.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::fmt;

use crate::coding::{get_length_prefixed, get_varint32, get_varint64, put_length_prefixed, put_varint32, put_varint64};
use crate::range_del::RangeTombstone;
use crate::types::{parse_internal_key, FileNumber, InternalKey, LogPosition, SegmentId, SequenceNumber, MAX_SEQUENCE};

use super::FileMetaData;

// Tags are part of the on-disk format: never renumber, only append.
const TAG_LOG_HEAD: u32 = 1;
const TAG_NEXT_FILE_NUMBER: u32 = 2;
const TAG_LAST_SEQUENCE: u32 = 3;
const TAG_COMPACT_POINTER: u32 = 4;
const TAG_DELETED_FILE: u32 = 5;
const TAG_NEW_FILE: u32 = 6;
const TAG_ADDED_SEGMENT: u32 = 7;
const TAG_REMOVED_SEGMENT: u32 = 8;
const TAG_SEGMENT_GARBAGE: u32 = 9;
const TAG_SKIPPED_RANGE: u32 = 10;
const TAG_GARBAGE_SURVEY: u32 = 11;
const TAG_NEW_FILE_WITH_LOG_REFS: u32 = 12;
const TAG_NEW_FILE_WITH_SEQUENCES: u32 = 13;
const TAG_RANGE_TOMBSTONE_ADDED: u32 = 14;
const TAG_RANGE_TOMBSTONE_REMOVED: u32 = 15;
const TAG_PARTITION_SPLIT_ADDED: u32 = 16;
const TAG_PARTITION_SPLIT_REMOVED: u32 = 17;

/// One atomic change to the version state. Fields left `None` or empty change nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Where value-log replay starts after a crash (recorded at every memtable flush).
    pub log_head: Option<LogPosition>,
    /// Smallest file number never handed out (filled in by `VersionSet::log_and_apply`).
    pub next_file_number: Option<u64>,
    /// Largest sequence number made durable (filled in by `VersionSet::log_and_apply`).
    pub last_sequence: Option<SequenceNumber>,
    /// Per level, the key where the next round-robin compaction of that level starts.
    pub compact_pointers: Vec<(usize, InternalKey)>,
    /// SSTables removed, as `(level, number)`.
    pub deleted_files: Vec<(usize, FileNumber)>,
    /// SSTables added, as `(level, metadata)`.
    pub new_files: Vec<(usize, FileMetaData)>,
    /// Value-log segments created.
    pub added_segments: Vec<SegmentId>,
    /// Value-log segments whose file is gone (collected or dropped).
    pub removed_segments: Vec<SegmentId>,
    /// Bytes to ADD to a segment's garbage count (records newly unreachable from the index).
    pub segment_garbage: Vec<(SegmentId, u64)>,
    /// Runs of whole dead records, `(segment, start, end)`, that no scan reads again: their
    /// block-aligned interior is (or is about to be) punched out of the file.
    pub skipped_ranges: Vec<(SegmentId, u64, u64)>,
    /// Garbage counts SET by a survey of the index (replacing what was counted before).
    pub garbage_surveys: Vec<GarbageSurvey>,
    /// Range deletes made durable (by the flush of the memtable that held them).
    pub range_tombstones_added: Vec<RangeTombstone>,
    /// Range deletes that no longer cover any table entry.
    pub range_tombstones_removed: Vec<RangeTombstone>,
    /// Partition split keys added.
    pub partition_splits_added: Vec<Vec<u8>>,
    /// Partition split keys removed (two partitions merged).
    pub partition_splits_removed: Vec<Vec<u8>>,
}

/// The exact garbage of one segment as a survey of the whole index found it.
///
/// `horizon` says which drops the count already includes: every version whose next newer
/// version has a sequence number at or below it. Later drops of such versions (by compaction)
/// must not be counted again; drops of versions shadowed after the horizon must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GarbageSurvey {
    /// The segment surveyed.
    pub segment: SegmentId,
    /// Bytes of its records that the index no longer reaches.
    pub garbage_bytes: u64,
    /// Versions shadowed at or below this sequence number are counted in `garbage_bytes`.
    pub horizon: SequenceNumber,
}

/// Why an encoded edit could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditDecodeError {
    /// Byte offset within the edit payload where decoding failed.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for EditDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at edit byte {})", self.reason, self.offset)
    }
}

impl std::error::Error for EditDecodeError {}

impl VersionEdit {
    /// An empty edit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `meta` joins `level`.
    pub fn add_file(&mut self, level: usize, meta: FileMetaData) {
        self.new_files.push((level, meta));
    }

    /// Records that file `number` leaves `level`.
    pub fn delete_file(&mut self, level: usize, number: FileNumber) {
        self.deleted_files.push((level, number));
    }

    /// Records a new value-log segment.
    pub fn add_segment(&mut self, id: SegmentId) {
        self.added_segments.push(id);
    }

    /// Records that a value-log segment is gone.
    pub fn remove_segment(&mut self, id: SegmentId) {
        self.removed_segments.push(id);
    }

    /// Adds `bytes` to the garbage count of segment `id`.
    pub fn add_garbage(&mut self, id: SegmentId, bytes: u64) {
        self.segment_garbage.push((id, bytes));
    }

    /// Sets the compaction restart key of `level`.
    pub fn set_compact_pointer(&mut self, level: usize, key: InternalKey) {
        self.compact_pointers.push((level, key));
    }

    /// True if the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        if let Some(head) = self.log_head {
            put_varint32(dst, TAG_LOG_HEAD);
            put_varint64(dst, head.segment.0);
            put_varint64(dst, head.offset);
        }
        if let Some(n) = self.next_file_number {
            put_varint32(dst, TAG_NEXT_FILE_NUMBER);
            put_varint64(dst, n);
        }
        if let Some(seq) = self.last_sequence {
            put_varint32(dst, TAG_LAST_SEQUENCE);
            put_varint64(dst, seq.0);
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(dst, TAG_COMPACT_POINTER);
            put_varint64(dst, *level as u64);
            put_length_prefixed(dst, key.as_bytes());
        }
        for (level, number) in &self.deleted_files {
            put_varint32(dst, TAG_DELETED_FILE);
            put_varint64(dst, *level as u64);
            put_varint64(dst, number.0);
        }
        for (level, meta) in &self.new_files {
            // Tags 6 and 12 are only read: every table written now lists its references and
            // its sequence-number range.
            put_varint32(dst, TAG_NEW_FILE_WITH_SEQUENCES);
            put_varint64(dst, *level as u64);
            put_varint64(dst, meta.number.0);
            put_varint64(dst, meta.file_size);
            put_length_prefixed(dst, meta.smallest.as_bytes());
            put_length_prefixed(dst, meta.largest.as_bytes());
            put_varint64(dst, meta.num_entries);
            put_varint64(dst, meta.log_refs.len() as u64);
            for (segment, bytes) in &meta.log_refs {
                put_varint64(dst, segment.0);
                put_varint64(dst, *bytes);
            }
            put_varint64(dst, meta.smallest_seq.0);
            put_varint64(dst, meta.largest_seq.0);
            put_varint64(dst, meta.range_clean_below.0);
        }
        for id in &self.added_segments {
            put_varint32(dst, TAG_ADDED_SEGMENT);
            put_varint64(dst, id.0);
        }
        for id in &self.removed_segments {
            put_varint32(dst, TAG_REMOVED_SEGMENT);
            put_varint64(dst, id.0);
        }
        for (id, bytes) in &self.segment_garbage {
            put_varint32(dst, TAG_SEGMENT_GARBAGE);
            put_varint64(dst, id.0);
            put_varint64(dst, *bytes);
        }
        for (id, start, end) in &self.skipped_ranges {
            put_varint32(dst, TAG_SKIPPED_RANGE);
            put_varint64(dst, id.0);
            put_varint64(dst, *start);
            put_varint64(dst, *end);
        }
        for survey in &self.garbage_surveys {
            put_varint32(dst, TAG_GARBAGE_SURVEY);
            put_varint64(dst, survey.segment.0);
            put_varint64(dst, survey.garbage_bytes);
            put_varint64(dst, survey.horizon.0);
        }
        for (tag, list) in [
            (TAG_RANGE_TOMBSTONE_ADDED, &self.range_tombstones_added),
            (TAG_RANGE_TOMBSTONE_REMOVED, &self.range_tombstones_removed),
        ] {
            for t in list {
                put_varint32(dst, tag);
                put_length_prefixed(dst, &t.start);
                put_length_prefixed(dst, &t.end);
                put_varint64(dst, t.seq.0);
            }
        }
        for (tag, list) in [
            (TAG_PARTITION_SPLIT_ADDED, &self.partition_splits_added),
            (TAG_PARTITION_SPLIT_REMOVED, &self.partition_splits_removed),
        ] {
            for key in list {
                put_varint32(dst, tag);
                put_length_prefixed(dst, key);
            }
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut dst = Vec::new();
        self.encode_to(&mut dst);
        dst
    }

    /// Decodes an edit that must fill `src` exactly.
    pub fn decode(src: &[u8]) -> Result<VersionEdit, EditDecodeError> {
        let mut cur = Cursor { src, pos: src };
        let mut edit = VersionEdit::default();
        while !cur.pos.is_empty() {
            let tag_offset = cur.offset();
            let tag = cur.varint32("tag")?;
            match tag {
                TAG_LOG_HEAD => {
                    let segment = SegmentId(cur.varint64("log head segment")?);
                    let offset = cur.varint64("log head offset")?;
                    set_once(&mut edit.log_head, LogPosition { segment, offset }, "log head", tag_offset)?;
                }
                TAG_NEXT_FILE_NUMBER => {
                    let n = cur.varint64("next file number")?;
                    set_once(&mut edit.next_file_number, n, "next file number", tag_offset)?;
                }
                TAG_LAST_SEQUENCE => {
                    let seq = SequenceNumber(cur.varint64("last sequence")?);
                    set_once(&mut edit.last_sequence, seq, "last sequence", tag_offset)?;
                }
                TAG_COMPACT_POINTER => {
                    let level = cur.level()?;
                    let key = cur.internal_key("compact pointer")?;
                    edit.compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = cur.level()?;
                    let number = FileNumber(cur.varint64("deleted file number")?);
                    edit.deleted_files.push((level, number));
                }
                TAG_NEW_FILE | TAG_NEW_FILE_WITH_LOG_REFS | TAG_NEW_FILE_WITH_SEQUENCES => {
                    let level = cur.level()?;
                    let mut meta = FileMetaData {
                        number: FileNumber(cur.varint64("new file number")?),
                        file_size: cur.varint64("new file size")?,
                        smallest: cur.internal_key("new file smallest key")?,
                        largest: cur.internal_key("new file largest key")?,
                        num_entries: cur.varint64("new file entry count")?,
                        log_refs: Vec::new(),
                        smallest_seq: SequenceNumber(0),
                        largest_seq: SequenceNumber(MAX_SEQUENCE),
                        range_clean_below: SequenceNumber(0),
                    };
                    if tag != TAG_NEW_FILE {
                        meta.log_refs = cur.log_refs()?;
                    }
                    if tag == TAG_NEW_FILE_WITH_SEQUENCES {
                        meta.smallest_seq = SequenceNumber(cur.varint64("new file smallest sequence")?);
                        meta.largest_seq = SequenceNumber(cur.varint64("new file largest sequence")?);
                        meta.range_clean_below = SequenceNumber(cur.varint64("new file range-clean sequence")?);
                        if meta.smallest_seq > meta.largest_seq {
                            return Err(cur.error_at(tag_offset, "table sequence range is reversed".to_string()));
                        }
                    }
                    edit.new_files.push((level, meta));
                }
                TAG_ADDED_SEGMENT => edit.added_segments.push(SegmentId(cur.varint64("added segment")?)),
                TAG_REMOVED_SEGMENT => edit.removed_segments.push(SegmentId(cur.varint64("removed segment")?)),
                TAG_SEGMENT_GARBAGE => {
                    let id = SegmentId(cur.varint64("garbage segment")?);
                    let bytes = cur.varint64("garbage bytes")?;
                    edit.segment_garbage.push((id, bytes));
                }
                TAG_SKIPPED_RANGE => {
                    let id = SegmentId(cur.varint64("skipped range segment")?);
                    let start = cur.varint64("skipped range start")?;
                    let end = cur.varint64("skipped range end")?;
                    if start >= end {
                        return Err(cur.error_at(tag_offset, format!("empty skipped range {start}..{end}")));
                    }
                    edit.skipped_ranges.push((id, start, end));
                }
                TAG_GARBAGE_SURVEY => {
                    let segment = SegmentId(cur.varint64("survey segment")?);
                    let garbage_bytes = cur.varint64("survey garbage bytes")?;
                    let horizon = SequenceNumber(cur.varint64("survey horizon")?);
                    edit.garbage_surveys.push(GarbageSurvey { segment, garbage_bytes, horizon });
                }
                TAG_RANGE_TOMBSTONE_ADDED | TAG_RANGE_TOMBSTONE_REMOVED => {
                    let start = cur.bytes("range delete start")?;
                    let end = cur.bytes("range delete end")?;
                    let seq = SequenceNumber(cur.varint64("range delete sequence")?);
                    if start >= end {
                        return Err(cur.error_at(tag_offset, "empty range delete".to_string()));
                    }
                    let t = RangeTombstone { start, end, seq };
                    match tag {
                        TAG_RANGE_TOMBSTONE_ADDED => edit.range_tombstones_added.push(t),
                        _ => edit.range_tombstones_removed.push(t),
                    }
                }
                TAG_PARTITION_SPLIT_ADDED => edit.partition_splits_added.push(cur.bytes("partition split")?),
                TAG_PARTITION_SPLIT_REMOVED => edit.partition_splits_removed.push(cur.bytes("partition split")?),
                unknown => return Err(cur.error_at(tag_offset, format!("unknown tag {unknown}"))),
            }
        }
        Ok(edit)
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, what: &str, offset: usize) -> Result<(), EditDecodeError> {
    if slot.is_some() {
        return Err(EditDecodeError { offset, reason: format!("{what} appears twice") });
    }
    *slot = Some(value);
    Ok(())
}

/// A decoding position that remembers where it started, so errors can name their offset.
struct Cursor<'a> {
    src: &'a [u8],
    pos: &'a [u8],
}

impl Cursor<'_> {
    fn offset(&self) -> usize {
        self.src.len() - self.pos.len()
    }

    fn error_at(&self, offset: usize, reason: String) -> EditDecodeError {
        EditDecodeError { offset, reason }
    }

    fn truncated(&self, what: &str) -> EditDecodeError {
        self.error_at(self.offset(), format!("truncated or malformed {what}"))
    }

    fn varint64(&mut self, what: &str) -> Result<u64, EditDecodeError> {
        get_varint64(&mut self.pos).ok_or_else(|| self.truncated(what))
    }

    fn varint32(&mut self, what: &str) -> Result<u32, EditDecodeError> {
        get_varint32(&mut self.pos).ok_or_else(|| self.truncated(what))
    }

    fn level(&mut self) -> Result<usize, EditDecodeError> {
        let offset = self.offset();
        let level = self.varint32("level")?;
        usize::try_from(level).map_err(|_| self.error_at(offset, format!("level {level} out of range")))
    }

    /// A table's value-log references: a count, then strictly ascending `(segment, bytes)`.
    fn log_refs(&mut self) -> Result<Vec<(SegmentId, u64)>, EditDecodeError> {
        let offset = self.offset();
        let count = self.varint64("log reference count")?;
        // Each reference takes at least two bytes: a count beyond that is damage, not a size.
        if count > self.pos.len() as u64 / 2 {
            return Err(self.error_at(offset, format!("{count} log references cannot fit the edit")));
        }
        let mut refs: Vec<(SegmentId, u64)> = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let segment = SegmentId(self.varint64("log reference segment")?);
            let bytes = self.varint64("log reference bytes")?;
            if refs.last().is_some_and(|(last, _)| *last >= segment) {
                return Err(self.error_at(offset, "log references out of order".to_string()));
            }
            refs.push((segment, bytes));
        }
        Ok(refs)
    }

    fn bytes(&mut self, what: &str) -> Result<Vec<u8>, EditDecodeError> {
        get_length_prefixed(&mut self.pos).map(<[u8]>::to_vec).ok_or_else(|| self.truncated(what))
    }

    fn internal_key(&mut self, what: &str) -> Result<InternalKey, EditDecodeError> {
        let offset = self.offset();
        let bytes = get_length_prefixed(&mut self.pos).ok_or_else(|| self.truncated(what))?;
        if parse_internal_key(bytes).is_none() {
            return Err(self.error_at(offset, format!("{what} is not a valid internal key")));
        }
        Ok(InternalKey(bytes.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ValueKind;

    fn ikey(user_key: &[u8], seq: u64) -> InternalKey {
        InternalKey::new(user_key, SequenceNumber(seq), ValueKind::Inline)
    }

    fn full_edit() -> VersionEdit {
        let mut edit = VersionEdit {
            log_head: Some(LogPosition { segment: SegmentId(9), offset: 1 << 40 }),
            next_file_number: Some(77),
            last_sequence: Some(SequenceNumber(123_456)),
            ..VersionEdit::default()
        };
        edit.set_compact_pointer(2, ikey(b"mid", 5));
        edit.delete_file(1, FileNumber(4));
        edit.add_file(
            3,
            FileMetaData {
                number: FileNumber(70),
                file_size: 4 << 20,
                smallest: ikey(b"a", 1),
                largest: InternalKey::new(b"z\xff", SequenceNumber(99), ValueKind::Deletion),
                num_entries: 1000,
                log_refs: vec![(SegmentId(3), 1000), (SegmentId(9), 24)],
                smallest_seq: SequenceNumber(4),
                largest_seq: SequenceNumber(99),
                range_clean_below: SequenceNumber(50),
            },
        );
        edit.range_tombstones_added.push(RangeTombstone {
            start: b"k".to_vec(),
            end: b"m".to_vec(),
            seq: SequenceNumber(120),
        });
        edit.range_tombstones_removed.push(RangeTombstone {
            start: b"a".to_vec(),
            end: b"b".to_vec(),
            seq: SequenceNumber(3),
        });
        edit.partition_splits_added.push(b"p".to_vec());
        edit.partition_splits_removed.push(b"q".to_vec());
        edit.add_segment(SegmentId(10));
        edit.remove_segment(SegmentId(2));
        edit.add_garbage(SegmentId(3), 4096);
        edit
    }

    /// A new-file field with tag `tag` for table 7 at level 1, up to its entry count.
    fn new_file_field(tag: u32) -> Vec<u8> {
        let mut field = Vec::new();
        put_varint32(&mut field, tag);
        put_varint64(&mut field, 1);
        put_varint64(&mut field, 7);
        put_varint64(&mut field, 4096);
        put_length_prefixed(&mut field, ikey(b"a", 1).as_bytes());
        put_length_prefixed(&mut field, ikey(b"b", 1).as_bytes());
        put_varint64(&mut field, 3);
        field
    }

    #[test]
    fn tables_without_log_references_from_older_manifests_still_decode() {
        let old = new_file_field(TAG_NEW_FILE);
        let edit = VersionEdit::decode(&old).unwrap();
        assert_eq!(edit.new_files.len(), 1);
        assert_eq!(edit.new_files[0].1.number, FileNumber(7));
        assert!(edit.new_files[0].1.log_refs.is_empty());
    }

    #[test]
    fn log_references_out_of_order_or_too_many_are_rejected() {
        let mut edit = full_edit();
        edit.new_files[0].1.log_refs = vec![(SegmentId(9), 1), (SegmentId(3), 1)];
        let err = VersionEdit::decode(&edit.encode()).unwrap_err();
        assert!(err.reason.contains("out of order"), "{err:?}");
        let mut huge = new_file_field(TAG_NEW_FILE_WITH_LOG_REFS);
        put_varint64(&mut huge, u64::MAX);
        let err = VersionEdit::decode(&huge).unwrap_err();
        assert!(err.reason.contains("cannot fit"), "{err:?}");
    }

    #[test]
    fn round_trip_with_every_field() {
        let edit = full_edit();
        let encoded = edit.encode();
        assert_eq!(VersionEdit::decode(&encoded), Ok(edit));
        assert_eq!(VersionEdit::decode(&[]), Ok(VersionEdit::default()));
    }

    #[test]
    fn rejects_every_truncation() {
        let encoded = full_edit().encode();
        // Every strict prefix either ends between two complete fields (and decodes to a smaller
        // edit) or is rejected; none may panic or decode to the full edit.
        let mut rejected = 0;
        for len in 0..encoded.len() {
            match VersionEdit::decode(&encoded[..len]) {
                Ok(edit) => assert_ne!(edit, full_edit()),
                Err(err) => {
                    assert!(err.offset <= len, "offset {} beyond input {len}", err.offset);
                    rejected += 1;
                }
            }
        }
        assert!(rejected > encoded.len() / 2);
    }

    #[test]
    fn rejects_unknown_tag_and_repeated_scalars() {
        let mut encoded = full_edit().encode();
        let at = encoded.len();
        put_varint32(&mut encoded, 200);
        let err = VersionEdit::decode(&encoded).unwrap_err();
        assert_eq!(err.offset, at);
        assert!(err.reason.contains("unknown tag 200"), "{err}");

        let mut twice = Vec::new();
        put_varint32(&mut twice, TAG_NEXT_FILE_NUMBER);
        put_varint64(&mut twice, 5);
        put_varint32(&mut twice, TAG_NEXT_FILE_NUMBER);
        put_varint64(&mut twice, 6);
        assert!(VersionEdit::decode(&twice).unwrap_err().reason.contains("twice"));
    }

    #[test]
    fn rejects_malformed_internal_key() {
        let mut encoded = Vec::new();
        put_varint32(&mut encoded, TAG_COMPACT_POINTER);
        put_varint64(&mut encoded, 1);
        put_length_prefixed(&mut encoded, b"short");
        assert!(VersionEdit::decode(&encoded).unwrap_err().reason.contains("internal key"));
    }
}
