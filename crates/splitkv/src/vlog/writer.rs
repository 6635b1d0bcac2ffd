//! The append side of the value log: the active segment, the user-space buffer in front of it,
//! segment rotation and poisoning.
//!
//! Invariants:
//! - The buffer holds only whole batches and always belongs to the active segment; it starts at
//!   file offset `active.flushed`. A record therefore lies either wholly below `flushed` (readable
//!   with `pread`) or wholly inside the buffer.
//! - `active.segment.len == active.flushed`, published after the bytes reached the OS.
//! - Once `poisoned` is set it stays set: after a failed write or fsync the file's contents are
//!   unknown, so no further byte may be appended or acknowledged as durable.
//!
//! Thread-safety: [`Writer`] lives behind the log's mutex; everything here runs with it held.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::record::{encode_segment_header, FORMAT_VERSION, SEGMENT_HEADER_LEN};
use super::segment::Segment;
use crate::error::{Error, Result};
use crate::filenames::segment_file;
use crate::fs::{AccessPattern, FileSystem, WritableFile};
use crate::types::{LogPosition, SegmentId};

/// The segment currently being appended to.
pub(super) struct ActiveSegment {
    pub segment: Arc<Segment>,
    pub file: Box<dyn WritableFile>,
    /// Bytes handed to the OS (header included).
    pub flushed: u64,
    /// Bytes known durable; a sync with nothing new skips the fsync.
    pub synced: u64,
}

/// Writer state, guarded by the log's mutex.
pub(super) struct Writer {
    pub active: Option<ActiveSegment>,
    pub buffer: Vec<u8>,
    pub next_id: SegmentId,
    pub poisoned: Option<String>,
}

impl Writer {
    pub fn new(next_id: SegmentId, buffer_size: usize) -> Self {
        Writer { active: None, buffer: Vec::with_capacity(buffer_size), next_id, poisoned: None }
    }

    pub fn check_usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned(cause.clone())),
            None => Ok(()),
        }
    }

    /// Runs a step that does I/O; a failure poisons the writer before it is returned.
    pub fn poison_on_error<T>(&mut self, step: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let result = step(self);
        if let Err(e) = &result {
            self.poisoned.get_or_insert_with(|| format!("value-log write failed: {e}"));
        }
        result
    }

    /// Where the next record will start.
    pub fn head(&self) -> LogPosition {
        match &self.active {
            Some(active) => {
                LogPosition { segment: active.segment.id, offset: active.flushed + self.buffer.len() as u64 }
            }
            None => LogPosition { segment: self.next_id, offset: 0 },
        }
    }

    /// Hands the buffer to the OS and publishes the new readable length.
    pub fn flush(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        let Some(active) = self.active.as_mut() else { return Ok(()) };
        if self.buffer.is_empty() {
            return Ok(());
        }
        active.file.append(&self.buffer)?;
        active.file.flush()?;
        let n = self.buffer.len() as u64;
        active.flushed += n;
        active.segment.len.store(active.flushed, Ordering::Release);
        bytes_written.fetch_add(n, Ordering::Relaxed);
        self.buffer.clear();
        // A batch larger than the buffer grew it; do not keep that memory around.
        if self.buffer.capacity() > buffer_size.saturating_mul(2).max(1 << 16) {
            self.buffer.shrink_to(buffer_size);
        }
        Ok(())
    }

    /// Flushes a full buffer and starts the device writing it: the segment's seal, which fsyncs
    /// it, then waits only for the last buffers instead of the whole segment (16 MiB by default:
    /// about 9 ms on the writer's path otherwise, once per segment).
    pub fn flush_and_start_writeback(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.flush(buffer_size, bytes_written)?;
        match self.active.as_mut() {
            Some(active) => active.file.start_writeback(),
            None => Ok(()),
        }
    }

    /// Flushes and fsyncs the active segment.
    pub fn sync(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.flush(buffer_size, bytes_written)?;
        if let Some(active) = self.active.as_mut() {
            if active.synced < active.flushed {
                active.file.sync()?;
                active.synced = active.flushed;
            }
        }
        Ok(())
    }

    /// Makes the active segment durable and stops appending to it.
    pub fn seal(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.sync(buffer_size, bytes_written)?;
        if let Some(active) = self.active.take() {
            active.segment.active.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Creates segment `next_id` with a durable header and makes it active. Returns the shared
    /// handle for the caller to publish in the reader map.
    pub fn start_segment(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        bytes_written: &AtomicU64,
    ) -> Result<Arc<Segment>> {
        debug_assert!(self.active.is_none() && self.buffer.is_empty());
        let id = self.next_id;
        let path = segment_file(dir, id);
        let mut file = fs.create(&path)?;
        self.next_id = SegmentId(id.0 + 1);
        // The header is synced now so that a crash can only ever leave a header-less file as the
        // newest segment, never behind records of a later one.
        file.append(&encode_segment_header(id))?;
        file.sync()?;
        fs.sync_dir(dir)?;
        bytes_written.fetch_add(SEGMENT_HEADER_LEN, Ordering::Relaxed);
        let reader = fs.open(&path)?;
        reader.advise(AccessPattern::Random);
        let segment = Arc::new(Segment {
            id,
            path,
            file: reader,
            version: FORMAT_VERSION,
            len: AtomicU64::new(SEGMENT_HEADER_LEN),
            active: AtomicBool::new(true),
        });
        self.active = Some(ActiveSegment {
            segment: Arc::clone(&segment),
            file,
            flushed: SEGMENT_HEADER_LEN,
            synced: SEGMENT_HEADER_LEN,
        });
        Ok(segment)
    }
}
