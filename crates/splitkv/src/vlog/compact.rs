//! Compacting a sealed segment in place: the file GC writes instead of copying live records to
//! the log head (`gc_compact_in_place`), and the swap that puts it under the segment's id.
//!
//! A copy to the log head is a user write again (a re-check, an append, a memtable insert, and
//! its share of flushes and compactions), because every pointer to the record must change. A
//! compacted segment keeps the segment's id and maps each kept record's old offset to its new
//! position ([`Remap`]), so no pointer changes and nothing is written to the index.
//!
//! Crash safety, in order:
//! 1. the new file is written beside the old one under a temporary name as the victim's scan
//!    finds its live records, then synced ([`ValueLog::begin_compacted`]);
//! 2. GC syncs the log (every write that made a dropped record dead must be durable first) and
//!    waits until no reader older than its liveness checks is left;
//! 3. [`ValueLog::install_compacted`] renames the new file over the old one and syncs the
//!    directory.
//!
//! A crash before the rename leaves the old segment and a temporary file that opening removes;
//! after it, the compacted segment. Readers that hold the old file keep reading it (its handle
//! outlives the rename); later ones get the new one.
//!
//! Thread-safety: both steps run on GC's thread, for a segment GC has taken from compactions'
//! moves; readers go through the segment map's lock as for any other segment.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::record::{encode_segment_header_version, COMPACTED_FORMAT_VERSION};
use super::remap::{Remap, MAX_EXTENT};
use super::segment::{read_segment_header, CursorRecord, Segment};
use super::ValueLog;
use crate::error::{Error, Result};
use crate::filenames::segment_file;
use crate::fs::{AccessPattern, WritableFile};
use crate::types::{SegmentId, ValuePointer};

/// Bytes of records buffered before they are handed to the OS and their writeback started, so
/// that the sync at the end finds little left to write.
const WRITE_CHUNK: usize = 1 << 20;

/// Live records of a victim on their way to its compacted file, as its scan read them: their
/// bytes back to back and unchanged (header and checksums included), and where each one is.
///
/// A compacted segment keeps every record's bytes, so the scan hands them over as they are.
/// Decoding each into a record of its own (a key and a value allocated and copied) and encoding
/// it again with fresh checksums cost the run two allocations, two copies and a checksum per
/// kept record.
#[derive(Debug, Default)]
pub struct KeptRecords {
    /// The segment they were read from (`None` while empty).
    segment: Option<SegmentId>,
    bytes: Vec<u8>,
    records: Vec<KeptRecord>,
    value_bytes: u64,
}

/// Where one kept record is in [`KeptRecords::bytes`], and where it was in its segment.
#[derive(Clone, Copy, Debug)]
struct KeptRecord {
    old_offset: u64,
    at: usize,
    len: u32,
    key_at: usize,
    key_len: usize,
}

impl KeptRecords {
    /// No records yet, with room for `bytes` of them.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        KeptRecords { bytes: Vec::with_capacity(bytes), ..KeptRecords::default() }
    }

    /// Appends `record`, read from `segment` and found live (its checksums verified).
    pub(crate) fn push(&mut self, record: &CursorRecord<'_>, segment: SegmentId) {
        self.segment.get_or_insert(segment);
        let at = self.bytes.len();
        let key = record.header.key_range();
        self.records.push(KeptRecord {
            old_offset: record.offset,
            at,
            len: record.bytes.len() as u32,
            key_at: at + key.start,
            key_len: key.len(),
        });
        self.bytes.extend_from_slice(record.bytes);
        self.value_bytes += u64::from(record.header.value_len);
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True if no record is held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Bytes of records held (headers included).
    pub fn record_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes of the held records' values.
    pub fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    fn key(&self, record: &KeptRecord) -> &[u8] {
        &self.bytes[record.key_at..record.key_at + record.key_len]
    }

    fn record(&self, record: &KeptRecord) -> &[u8] {
        &self.bytes[record.at..record.at + record.len as usize]
    }
}

/// The compacted file of one segment while GC writes it: records are appended as the victim's
/// scan finds them live, a MiB at a time sorted by key, then the offset map; see
/// [`ValueLog::begin_compacted`].
pub struct CompactedFile<'a> {
    log: &'a ValueLog,
    id: SegmentId,
    /// The victim's extent: what the map says the segment's old length was.
    extent: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
    /// Records pushed and not yet written, with their bytes.
    pending: Vec<KeptRecords>,
    pending_bytes: usize,
    buffer: Vec<u8>,
    /// `(old offset, length)` of every record written, in file order.
    kept: Vec<(u64, u32)>,
    finished: bool,
}

impl ValueLog {
    /// Where the compacted file of segment `id` is written before it is installed. Its name
    /// ends in `.tmp`, so opening removes one a crash left behind.
    fn compacted_path(&self, id: SegmentId) -> PathBuf {
        let mut name = segment_file(&self.dir, id).into_os_string();
        name.push(".tmp");
        PathBuf::from(name)
    }

    /// Starts the compacted file of sealed segment `id`, under a temporary name: readers see
    /// nothing of it until [`ValueLog::install_compacted`].
    pub fn begin_compacted(&self, id: SegmentId) -> Result<CompactedFile<'_>> {
        self.check_writable()?;
        let segment = self.live_segment(id)?;
        if segment.is_active() {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is being appended to")));
        }
        if segment.extent() > MAX_EXTENT {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is too long to compact in place")));
        }
        let path = self.compacted_path(id);
        let file = self.fs.create(&path)?;
        let mut buffer = Vec::with_capacity(WRITE_CHUNK + (64 << 10));
        buffer.extend_from_slice(&encode_segment_header_version(id, COMPACTED_FORMAT_VERSION));
        Ok(CompactedFile {
            log: self,
            id,
            extent: segment.extent(),
            path,
            file,
            pending: Vec::new(),
            pending_bytes: 0,
            buffer,
            kept: Vec::new(),
            finished: false,
        })
    }

    /// Puts the file [`ValueLog::begin_compacted`] started for segment `id` in place of the
    /// segment's file, durably, and has later reads use it. The caller must have synced the log
    /// and waited out every reader that may still read a record the compaction dropped.
    pub fn install_compacted(&self, id: SegmentId) -> Result<()> {
        self.check_writable()?;
        let old = self.live_segment(id)?;
        let (from, path) = (self.compacted_path(id), old.path.clone());
        // Checked before the rename, so that a damaged file never replaces a good one.
        let file = self.fs.open(&from)?;
        let len = file.len()?;
        let (header, remap) = read_segment_header(file.as_ref(), &from, Some(id), len)?;
        if remap.is_none() {
            return Err(Error::corruption(&from, 0, "compacted segment file is not a compacted segment"));
        }
        self.fs.rename(&from, &path)?;
        self.fs.sync_dir(&self.dir)?;
        file.advise(AccessPattern::Random);
        let compacted = Segment {
            id,
            path,
            file,
            version: header.version,
            len: AtomicU64::new(len),
            active: AtomicBool::new(false),
            remap,
        };
        self.segments.write().insert(id, Arc::new(compacted));
        Ok(())
    }

    /// Removes the finished compacted file of segment `id`, which will not be installed (it
    /// kept nothing, or the run failed after it). Best effort: opening removes it too.
    pub fn discard_compacted(&self, id: SegmentId) {
        let _ = self.fs.remove(&self.compacted_path(id));
    }

    /// False if `ptr` names a record its segment no longer holds: the segment is gone, or its
    /// compaction dropped the record (which no current version points to). A compaction moving
    /// values out of a segment steps over such records, as over punched ones.
    pub fn holds(&self, ptr: &ValuePointer) -> bool {
        let segment = self.segments.read().get(&ptr.segment).cloned();
        segment.is_some_and(|s| s.remap.as_ref().is_none_or(|remap| remap.locate(ptr.offset, ptr.len).is_some()))
    }

    /// Bytes the offset maps of the compacted segments hold in memory.
    pub fn offset_map_bytes(&self) -> u64 {
        self.segments.read().values().filter_map(|s| s.remap.as_ref()).map(|remap| remap.memory_bytes()).sum()
    }

    /// True if segment `id` is compacted (format version 4).
    pub fn is_compacted(&self, id: SegmentId) -> bool {
        self.segments.read().get(&id).is_some_and(|s| s.remap.is_some())
    }

    fn live_segment(&self, id: SegmentId) -> Result<Arc<Segment>> {
        let segment = self.segments.read().get(&id).cloned();
        segment.ok_or_else(|| Error::InvalidArgument(format!("value-log segment {id} is not live")))
    }
}

impl CompactedFile<'_> {
    /// Adds `records`, read from the segment and found live (each record once).
    pub fn push(&mut self, records: KeptRecords) -> Result<()> {
        if let Some(other) = records.segment.filter(|&segment| segment != self.id) {
            return Err(Error::InvalidArgument(format!("records of segment {other} kept in {}", self.id)));
        }
        self.pending_bytes += records.record_bytes();
        self.pending.push(records);
        if self.pending_bytes >= WRITE_CHUNK {
            self.write_pending();
            self.write_buffer()?;
            self.file.start_writeback()?;
        }
        Ok(())
    }

    /// The number of records pushed so far.
    pub fn records(&self) -> usize {
        self.kept.len() + self.pending.iter().map(KeptRecords::len).sum::<usize>()
    }

    /// Appends the offset map and makes the file durable.
    pub fn finish(mut self) -> Result<()> {
        self.write_pending();
        let remap = Remap::new(self.extent, &self.kept);
        // What readers would refuse is never written: two pushes of one record, say.
        remap.check().map_err(Error::InvalidArgument)?;
        remap.encode(&mut self.buffer);
        self.write_buffer()?;
        self.file.sync()?;
        self.finished = true;
        Ok(())
    }

    /// Copies the pending records into the buffer, sorted by key: a scan in key order then
    /// reads each MiB of the file front to back, as it reads a copying run's batches. In the
    /// victim's order (that of the writes that made them, random for random keys) a scan took a
    /// page-table walk and a cache miss per value: `readseq` at 1 KiB took 1.3-1.7x as long.
    /// Their bytes stay as they were: a compacted segment is never replayed, so the batch-end
    /// flags mean nothing there, and the checksums still hold.
    fn write_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let mut order: Vec<(&KeptRecords, &KeptRecord)> =
            pending.iter().flat_map(|chunk| chunk.records.iter().map(move |r| (chunk, r))).collect();
        order.sort_unstable_by(|(a, ra), (b, rb)| a.key(ra).cmp(b.key(rb)));
        for (chunk, record) in order {
            self.buffer.extend_from_slice(chunk.record(record));
            self.kept.push((record.old_offset, record.len));
        }
        self.pending_bytes = 0;
    }

    fn write_buffer(&mut self) -> Result<()> {
        self.file.append(&self.buffer)?;
        self.file.flush()?;
        self.log.bytes_written.fetch_add(self.buffer.len() as u64, Ordering::Relaxed);
        self.buffer.clear();
        Ok(())
    }
}

impl Drop for CompactedFile<'_> {
    /// An unfinished file (the run failed) is removed; best effort, as opening removes it too.
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.log.fs.remove(&self.path);
        }
    }
}
