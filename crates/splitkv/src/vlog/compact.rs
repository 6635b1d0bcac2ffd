//! Compacting a sealed segment in place: the file GC writes instead of copying live records to
//! the log head (`gc_compact_in_place`), and the swap that puts it under the segment's id.
//!
//! A copy to the log head is a user write again (a re-check, an append, a memtable insert, and
//! its share of flushes and compactions), because every pointer to the record must change. A
//! compacted segment keeps the segment's id and maps each kept record's old offset to its new
//! position ([`Remap`]), so no pointer changes and nothing is written to the index.
//!
//! Crash safety, in order: the new file is written beside the old one under a temporary name
//! and synced ([`ValueLog::write_compacted`]); GC then syncs the log (every write that made a
//! dropped record dead must be durable first) and waits until no reader older than its
//! liveness checks is left; [`ValueLog::install_compacted`] renames the new file over the old
//! one and syncs the directory. A crash before the rename leaves the old segment and a
//! temporary file that opening removes; after it, the compacted segment. Readers that hold the
//! old file keep reading it (its handle outlives the rename); later ones get the new one.
//!
//! Thread-safety: both steps run on GC's thread, for a segment GC has taken from compactions'
//! moves; readers go through the segment map's lock as for any other segment.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use super::record::{encode_record, encode_segment_header_version, RecordRef, COMPACTED_FORMAT_VERSION};
use super::remap::Remap;
use super::segment::{read_remap, read_segment_header, Segment};
use super::{ReplayedRecord, ValueLog};
use crate::error::{Error, Result};
use crate::filenames::segment_file;
use crate::fs::AccessPattern;
use crate::types::{SegmentId, ValuePointer};

impl ValueLog {
    /// Where the compacted file of segment `id` is written before it is installed. Its name
    /// ends in `.tmp`, so opening removes one a crash left behind.
    fn compacted_path(&self, id: SegmentId) -> PathBuf {
        let mut name = segment_file(&self.dir, id).into_os_string();
        name.push(".tmp");
        PathBuf::from(name)
    }

    /// Writes and syncs the compacted file of sealed segment `id`, keeping `kept` (records read
    /// from it, in file order); returns the file's length. Readers see nothing of it until
    /// [`ValueLog::install_compacted`].
    pub fn write_compacted(&self, id: SegmentId, kept: &[ReplayedRecord]) -> Result<u64> {
        self.check_writable()?;
        let segment = self.live_segment(id)?;
        if segment.is_active() {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is being appended to")));
        }
        let entries: Vec<(u64, u32)> = kept.iter().map(|r| (r.pointer.offset, r.pointer.len)).collect();
        if kept.iter().any(|r| r.pointer.segment != id) || entries.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::InvalidArgument(format!("records kept from segment {id} are not its own, in order")));
        }
        let remap = Remap::new(segment.extent(), &entries);
        let mut file_bytes =
            Vec::with_capacity(remap.records_start() as usize + entries.iter().map(|e| e.1 as usize).sum::<usize>());
        file_bytes.extend_from_slice(&encode_segment_header_version(id, COMPACTED_FORMAT_VERSION));
        remap.encode(&mut file_bytes);
        for record in kept {
            // Batches mean nothing here: a compacted segment is never replayed.
            let rec = RecordRef {
                seq: record.seq,
                kind: record.kind,
                key: &record.key,
                value: &record.value,
                prev: record.prev,
            };
            let len = encode_record(&mut file_bytes, &rec, true);
            if len != record.pointer.len {
                return Err(Error::InvalidArgument(format!(
                    "record at offset {} of segment {id} re-encodes to {len} bytes, not {}",
                    record.pointer.offset, record.pointer.len
                )));
            }
        }
        let path = self.compacted_path(id);
        let mut file = self.fs.create(&path)?;
        file.append(&file_bytes)?;
        file.sync()?;
        self.bytes_written.fetch_add(file_bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(file_bytes.len() as u64)
    }

    /// Puts the file [`ValueLog::write_compacted`] wrote for segment `id` in place of the
    /// segment's file, durably, and has later reads use it. The caller must have synced the log
    /// and waited out every reader that may still read a record the compaction dropped.
    pub fn install_compacted(&self, id: SegmentId) -> Result<()> {
        self.check_writable()?;
        let old = self.live_segment(id)?;
        let (from, path) = (self.compacted_path(id), old.path.clone());
        // Checked before the rename, so that a damaged file never replaces a good one.
        let file = self.fs.open(&from)?;
        let len = file.len()?;
        let header = read_segment_header(file.as_ref(), &from, Some(id))?;
        let remap = read_remap(file.as_ref(), &from, header, len)?;
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

    /// Removes what [`ValueLog::write_compacted`] wrote for segment `id` and was not installed
    /// (the run failed, or the segment went another way). Best effort: opening removes it too.
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

    /// True if segment `id` is compacted (format version 4).
    pub fn is_compacted(&self, id: SegmentId) -> bool {
        self.segments.read().get(&id).is_some_and(|s| s.remap.is_some())
    }

    fn live_segment(&self, id: SegmentId) -> Result<Arc<Segment>> {
        let segment = self.segments.read().get(&id).cloned();
        segment.ok_or_else(|| Error::InvalidArgument(format!("value-log segment {id} is not live")))
    }
}
