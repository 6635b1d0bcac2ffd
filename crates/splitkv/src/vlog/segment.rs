//! One segment file as seen by readers, and a sequential record cursor over it.
//!
//! A [`Segment`] is shared (`Arc`) between the log's reader map, the writer (while the segment is
//! active) and in-flight reads. Its `len` is the number of bytes known to be in the file: for the
//! active segment, the writer raises it with `Release` ordering only after the bytes reached the
//! operating system, so a reader that loads it with `Acquire` may `pread` anything below it
//! without taking the writer's lock. `len` only grows, except when recovery truncates a torn tail
//! before any append. `active` is cleared once, when the writer moves on; it never comes back.
//!
//! A compacted segment (format version 4, written by GC's in-place compaction) holds only the
//! records it kept, packed, then an offset map ([`Remap`]); pointers keep naming the records'
//! old offsets, and [`Segment::position_of`] translates them.
//!
//! [`RecordCursor`] walks records front to back with large positioned reads; it tells a torn
//! record (the file ends inside it) from a damaged one, and leaves the policy (truncate or
//! report) to its caller: replay or [`scan_segment`]. Over a compacted segment it reports each
//! record at its old offset.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::record::{
    check_record, check_segment_header, decode_record_header, header_bytes, RecordHeader, SegmentHeader,
    COMPACTED_FORMAT_VERSION, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use super::remap::{Remap, TRAILER_LEN};
use super::{RecordKind, ReplayedRecord};
use crate::error::{Error, Result};
use crate::filenames::{parse_file_name, FileKind};
use crate::fs::{AccessPattern, FileSystem, RandomAccessFile};
use crate::types::{SegmentId, ValuePointer};

/// Sequential scans read this much at a time, so recovery issues few large reads.
const READ_CHUNK: usize = 1 << 20;

/// A segment file open for positioned reads.
pub(crate) struct Segment {
    pub id: SegmentId,
    pub path: PathBuf,
    pub file: Arc<dyn RandomAccessFile>,
    /// Format version from the segment header: it decides which record flags are legal.
    pub version: u32,
    /// Bytes readable with `pread` (see the module header for the ordering contract).
    pub len: AtomicU64,
    /// True while the writer appends to this segment; unflushed bytes then live in its buffer.
    pub active: AtomicBool,
    /// A compacted segment's offset map; `None` for a log segment, whose records lie at the
    /// offsets pointers name.
    pub remap: Option<Arc<Remap>>,
}

impl Segment {
    pub fn readable_len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The id and format version its records are validated against.
    pub fn header(&self) -> SegmentHeader {
        SegmentHeader { id: self.id, version: self.version }
    }

    /// Where the record `ptr` names starts in the file, if all of it is there: the pointer's own
    /// offset in a log segment (within the bytes readable with `pread`), the position the offset
    /// map gives in a compacted one (`None` for a record it did not keep).
    pub fn position_of(&self, ptr: &ValuePointer) -> Option<u64> {
        match &self.remap {
            Some(remap) => remap.locate(ptr.offset, ptr.len),
            None => (ptr.offset >= SEGMENT_HEADER_LEN && ptr.end() <= self.readable_len()).then_some(ptr.offset),
        }
    }

    /// Bytes of records in the file: all but the segment header, and a compacted segment's
    /// offset map.
    pub fn record_bytes(&self) -> u64 {
        let end = self.remap.as_ref().map_or_else(|| self.readable_len(), |remap| remap.records_end());
        end.saturating_sub(SEGMENT_HEADER_LEN)
    }

    /// The offsets pointers into the segment lie below: its length, or for a compacted segment
    /// the length it had before.
    pub fn extent(&self) -> u64 {
        self.remap.as_ref().map_or_else(|| self.readable_len(), |remap| remap.extent())
    }
}

/// The offset map that ends a compacted segment (`None` for any other version) of `file_len`
/// bytes.
fn read_remap(
    file: &dyn RandomAccessFile,
    path: &Path,
    header: SegmentHeader,
    file_len: u64,
) -> Result<Option<Arc<Remap>>> {
    if header.version != COMPACTED_FORMAT_VERSION {
        return Ok(None);
    }
    let corrupt = |at: u64, reason: String| Error::corruption(path, at, reason);
    let mut trailer = [0u8; TRAILER_LEN];
    let Some(trailer_at) = file_len.checked_sub(TRAILER_LEN as u64).filter(|&at| at >= SEGMENT_HEADER_LEN) else {
        return Err(corrupt(SEGMENT_HEADER_LEN, "compacted segment too short for its offset map".into()));
    };
    file.read_exact_at(trailer_at, &mut trailer)?;
    let len = Remap::encoded_len_from_trailer(&trailer) as u64;
    let Some(map_at) = file_len.checked_sub(len).filter(|&at| at >= SEGMENT_HEADER_LEN) else {
        return Err(corrupt(trailer_at, "compacted segment too short for its offset map".into()));
    };
    let bytes = file.read_vec(map_at, len as usize)?;
    Remap::decode(&bytes, file_len).map(|remap| Some(Arc::new(remap))).map_err(|reason| corrupt(map_at, reason))
}

/// Reads and validates the segment header of `file` (`file_len` bytes long), and for a compacted
/// segment its offset map; `expected` is the id from the file name.
pub(crate) fn read_segment_header(
    file: &dyn RandomAccessFile,
    path: &Path,
    expected: Option<SegmentId>,
    file_len: u64,
) -> Result<(SegmentHeader, Option<Arc<Remap>>)> {
    let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
    file.read_exact_at(0, &mut header)?;
    let header = check_segment_header(&header, expected).map_err(|reason| Error::corruption(path, 0, reason))?;
    Ok((header, read_remap(file, path, header, file_len)?))
}

/// True if every byte of `file` in `[start, end)` is zero: the tail ext4 can leave of an
/// unsynced append after a power loss, which recovery treats as torn.
pub fn zeros_between(file: &dyn RandomAccessFile, start: u64, end: u64) -> Result<bool> {
    let mut buf = vec![0u8; 1 << 16];
    let mut at = start;
    while at < end {
        if let Ok(left) = usize::try_from(end - at) {
            buf.truncate(left);
        }
        file.read_exact_at(at, &mut buf)?;
        if buf.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += buf.len() as u64;
    }
    Ok(true)
}

/// The segment id a path's file name claims, if it is a segment file name.
pub(crate) fn segment_id_from_path(path: &Path) -> Option<SegmentId> {
    match parse_file_name(path.file_name()?.to_str()?) {
        Some(FileKind::Segment(id)) => Some(id),
        _ => None,
    }
}

/// Why a cursor stopped before the end of the file.
pub(crate) enum CursorFault {
    /// The file ends inside the record at `offset`: a crash cut the tail short.
    Torn { offset: u64, reason: &'static str },
    /// Damage or an I/O failure; never repaired by truncation.
    Fatal(Error),
}

impl From<Error> for CursorFault {
    fn from(e: Error) -> Self {
        CursorFault::Fatal(e)
    }
}

/// A record decoded by [`RecordCursor`], borrowing the cursor's buffer.
pub(crate) struct CursorRecord<'a> {
    pub offset: u64,
    pub header: RecordHeader,
    /// The predecessor pointer, validated with the body.
    pub prev: Option<ValuePointer>,
    pub bytes: &'a [u8],
}

impl CursorRecord<'_> {
    pub fn to_replayed(&self, segment: SegmentId) -> ReplayedRecord {
        let (key, value) = self.header.key_and_value(self.bytes).unwrap_or_default();
        ReplayedRecord {
            seq: self.header.seq,
            kind: self.header.kind,
            key: key.to_vec(),
            value: value.to_vec(),
            pointer: ValuePointer { segment, offset: self.offset, len: self.bytes.len() as u32 },
            prev: self.prev,
        }
    }
}

/// Walks the records of one segment file from a starting offset to `file_len`, stepping over
/// skipped ranges (runs of dead records whose bytes may have been punched out).
pub(crate) struct RecordCursor {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    /// The segment's id and format version, which record validation needs: the version decides
    /// the legal flags, the id where a predecessor may point.
    header: SegmentHeader,
    file_len: u64,
    next: u64,
    buf: Vec<u8>,
    buf_start: u64,
    /// Sorted, disjoint `[start, end)` ranges that begin and end at record boundaries.
    skipped: Vec<(u64, u64)>,
    /// A compacted segment's offset map: records are reported at their old offsets.
    remap: Option<Arc<Remap>>,
}

impl RecordCursor {
    pub fn new(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        header: SegmentHeader,
        file_len: u64,
        start: u64,
    ) -> Self {
        RecordCursor {
            file,
            path,
            header,
            file_len,
            next: start,
            buf: Vec::new(),
            buf_start: 0,
            skipped: Vec::new(),
            remap: None,
        }
    }

    /// Makes the cursor report records at the old offsets `remap` gives for them.
    pub fn with_remap(mut self, remap: Option<Arc<Remap>>) -> Self {
        self.remap = remap;
        self
    }

    /// Makes the cursor step over `skipped` (sorted, disjoint, at record boundaries).
    pub fn with_skipped(mut self, skipped: &[(u64, u64)]) -> Self {
        self.skipped = skipped.to_vec();
        self
    }

    /// Moves `next` past a skipped range that starts there; a position inside one means the
    /// range does not start at a record boundary, which the MANIFEST never records.
    fn step_over_skipped(&mut self) -> Result<()> {
        let at = self.next;
        let i = self.skipped.partition_point(|&(_, end)| end <= at);
        match self.skipped.get(i) {
            Some(&(start, end)) if start == at => self.next = end,
            Some(&(start, _)) if start < at => {
                return Err(Error::corruption(
                    &self.path,
                    at,
                    format!("record starts inside the skipped range at {start}"),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// Offset of the next record (the end of the last one returned).
    pub fn offset(&self) -> u64 {
        self.next
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes `[at, at + n)` resident in the buffer; `false` if the file ends first. A cursor
    /// reads its file once, front to back (a GC victim, a segment replayed at open), so it
    /// reads with a system call rather than through the map: pages faulted through a map stay
    /// mapped into the process, where the kernel reclaims them last, and under a memory limit
    /// they would push out pages still to be used (see `RandomAccessFile::read_exact_at_cold`).
    fn fill(&mut self, at: u64, n: usize) -> Result<bool> {
        let Some(end) = at.checked_add(n as u64) else { return Ok(false) };
        if end > self.file_len {
            return Ok(false);
        }
        if at >= self.buf_start && end <= self.buf_start + self.buf.len() as u64 {
            return Ok(true);
        }
        let want = (n.max(READ_CHUNK) as u64).min(self.file_len - at) as usize;
        // Every byte is read over: zero only what the buffer grows by.
        self.buf.resize(want, 0);
        self.file.read_exact_at_cold(at, &mut self.buf)?;
        self.buf_start = at;
        Ok(true)
    }

    /// The next record, `Ok(None)` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<CursorRecord<'_>>, CursorFault> {
        self.step_over_skipped()?;
        let at = self.next;
        if at >= self.file_len {
            return Ok(None);
        }
        if !self.fill(at, RECORD_HEADER_LEN)? {
            return Err(CursorFault::Torn { offset: at, reason: "file ends inside a record header" });
        }
        let header = resident(&self.buf, self.buf_start, at, RECORD_HEADER_LEN)
            .and_then(header_bytes)
            .ok_or("short record header")
            .and_then(|bytes| decode_record_header(bytes, self.header.version))
            .map_err(|reason| Error::corruption(&self.path, at, reason))?;
        // With a valid header checksum the length is genuine, so a file ending before it is a
        // cut, whether or not the record carries a predecessor.
        let len = header.record_len();
        let fits = match usize::try_from(len) {
            Ok(n) => self.fill(at, n)?,
            Err(_) => false,
        };
        if !fits {
            return Err(CursorFault::Torn { offset: at, reason: "file ends inside a record body" });
        }
        // Pointers, and a predecessor's position, name a compacted segment's records by their
        // old offsets.
        let offset = match &self.remap {
            None => at,
            Some(remap) => match remap.logical_at(at) {
                Some((offset, mapped_len)) if mapped_len == len => offset,
                _ => return Err(Error::corruption(&self.path, at, "record disagrees with the offset map").into()),
            },
        };
        let (bytes, prev) = resident(&self.buf, self.buf_start, at, len as usize)
            .ok_or("record outside the read buffer")
            .and_then(|bytes| Ok((bytes, check_record(&header, bytes, self.header.id, offset)?)))
            .map_err(|reason| Error::corruption(&self.path, at, reason))?;
        self.next = at + len;
        Ok(Some(CursorRecord { offset, header, prev, bytes }))
    }
}

/// File bytes `[at, at + n)` from a buffer holding the file from `buf_start` on (`fill` made
/// them resident, so `None` is not expected).
fn resident(buf: &[u8], buf_start: u64, at: u64, n: usize) -> Option<&[u8]> {
    let start = usize::try_from(at.checked_sub(buf_start)?).ok()?;
    buf.get(start..start.checked_add(n)?)
}

/// Iterator over every record of one segment file, from [`scan_segment`].
///
/// Yields `(offset, record)`; the first damaged or truncated record is yielded as an
/// [`Error::Corruption`] naming its offset, and iteration ends there.
pub struct SegmentScan {
    header: SegmentHeader,
    cursor: RecordCursor,
    done: bool,
}

impl SegmentScan {
    /// The segment id recorded in the segment header.
    pub fn segment_id(&self) -> SegmentId {
        self.header.id
    }

    /// The format version recorded in the segment header.
    pub fn format_version(&self) -> u32 {
        self.header.version
    }
}

impl SegmentScan {
    /// The next record's offset and length; if `keep` (given its kind, key and pointer) wants
    /// the record, also what `take` makes of it. GC keeps only the live records: copying out the
    /// dead ones' values was most of its memory traffic.
    pub(crate) fn next_kept<T>(
        &mut self,
        keep: impl FnOnce(RecordKind, &[u8], &ValuePointer) -> Result<bool>,
        take: impl FnOnce(&CursorRecord<'_>, SegmentId) -> T,
    ) -> Option<Result<(u64, u32, Option<T>)>> {
        self.step(|rec, id| {
            let pointer = ValuePointer { segment: id, offset: rec.offset, len: rec.bytes.len() as u32 };
            let (key, _) = rec.header.key_and_value(rec.bytes).unwrap_or_default();
            let kept = keep(rec.header.kind, key, &pointer)?.then(|| take(rec, id));
            Ok((rec.offset, pointer.len, kept))
        })
    }

    /// Moves to the next record and maps it; ends the scan at the end or at the first fault.
    fn step<T>(&mut self, map: impl FnOnce(&CursorRecord<'_>, SegmentId) -> Result<T>) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        let id = self.header.id;
        let item = match self.cursor.next_record() {
            Ok(Some(rec)) => match map(&rec, id) {
                Ok(mapped) => return Some(Ok(mapped)),
                Err(e) => Some(Err(e)),
            },
            Ok(None) => None,
            Err(CursorFault::Torn { offset, reason }) => {
                Some(Err(Error::corruption(self.cursor.path(), offset, reason)))
            }
            Err(CursorFault::Fatal(e)) => Some(Err(e)),
        };
        self.done = true;
        item
    }
}

impl Iterator for SegmentScan {
    type Item = Result<(u64, ReplayedRecord)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(|rec, id| Ok((rec.offset, rec.to_replayed(id))))
    }
}

/// Opens one segment file for a front-to-back walk (GC, and the admin tool's `dump` and `verify`).
///
/// `skipped` lists the runs of dead records the MANIFEST records for the segment (sorted,
/// disjoint, at record boundaries): they are stepped over unread, as their bytes may have been
/// punched out. The segment header is validated here (its id against the file name when the
/// name is a segment name); records are validated as they are yielded. A file ending inside a
/// record, which recovery would treat as a torn tail of the last segment, is reported as
/// corruption: a scan repairs nothing.
pub fn scan_segment(fs: &dyn FileSystem, path: &Path, skipped: &[(u64, u64)]) -> Result<SegmentScan> {
    let file = fs.open(path)?;
    let len = file.len()?;
    if len < SEGMENT_HEADER_LEN {
        return Err(Error::corruption(path, 0, "file is shorter than a segment header"));
    }
    let (header, remap) = read_segment_header(file.as_ref(), path, segment_id_from_path(path), len)?;
    // A compacted segment's records end where its offset map starts.
    let records_end = remap.as_ref().map_or(len, |remap| remap.records_end());
    file.advise(AccessPattern::Sequential);
    let cursor = RecordCursor::new(file, path.to_path_buf(), header, records_end, SEGMENT_HEADER_LEN)
        .with_skipped(skipped)
        .with_remap(remap);
    Ok(SegmentScan { header, cursor, done: false })
}
