//! Recovery: replaying the log from a recorded head, and the torn-tail rule.
//!
//! Only the newest segment with a header can have been cut short by a crash: every older one was
//! fsynced before the next one's header was written (a rotation's order, see `writer`), and the
//! medium keeps an unsynced appended tail at most as a prefix of what was written. A newer file
//! without a complete header (a crash while a rotation created it) holds no record and is
//! removed. So in the last segment, and only there, a file that ends inside a record or after
//! records lacking their batch-end flag is a torn tail and is truncated to the end of the last
//! complete batch (a last segment too short for its header is removed). Damage
//! that cannot come from a cut — a checksum mismatch on bytes that are all present, an unknown
//! kind or flag — is [`Error::Corruption`] wherever it is, and so is a short record in an older
//! segment.
//!
//! Read-only ([`ValueLog::open_read_only`]), the same rule decides where the view ends, but
//! nothing is truncated or removed: the torn tail may be a batch a live writer is appending.
//!
//! Thread-safety: replay must run before the first append; it takes the writer mutex only to
//! check that, and updates segment lengths with the same publication order appends use.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::record::SEGMENT_HEADER_LEN;
use super::segment::{zeros_between, CursorFault, RecordCursor, Segment};
use super::{ReplayedRecord, ValueLog};
use crate::error::{Error, Result};
use crate::fs::AccessPattern;
use crate::types::LogPosition;

impl ValueLog {
    /// Replays every complete batch from `from` to the end of the log, in segment-id order.
    ///
    /// `from.offset == 0` means the start of `from.segment`; segments with smaller ids are not
    /// read. `apply` is called once per complete batch with its records and their pointers; an
    /// error from it stops the replay and is returned. Returns the position after the last
    /// complete batch (`from` if nothing at or after it exists).
    pub fn replay(
        &self,
        from: LogPosition,
        apply: &mut dyn FnMut(&[ReplayedRecord]) -> Result<()>,
    ) -> Result<LogPosition> {
        if self.writer.lock().active.is_some() {
            return Err(Error::InvalidArgument("value-log replay must run before the first append".into()));
        }
        let mut segments: Vec<Arc<Segment>> = self.segments.read().values().cloned().collect();
        segments.sort_unstable_by_key(|s| s.id);
        // The newest file may lack its header (a crash while a rotation created it, see
        // `writer`); the torn-tail rule is then the newest complete segment's.
        let Some(last_id) = segments.iter().rev().find(|s| s.readable_len() >= SEGMENT_HEADER_LEN).map(|s| s.id) else {
            return self.remove_headerless(&segments).map(|()| from);
        };
        let mut end = from;
        let mut batch = Vec::new();
        for segment in segments.iter().filter(|s| s.id >= from.segment) {
            let len = segment.readable_len();
            if len < SEGMENT_HEADER_LEN {
                self.remove_headerless(std::slice::from_ref(segment))?;
                continue;
            }
            let start =
                if segment.id == from.segment { from.offset.max(SEGMENT_HEADER_LEN) } else { SEGMENT_HEADER_LEN };
            if start > len {
                return Err(Error::corruption(
                    &segment.path,
                    start,
                    format!("replay starts past the segment end {len}"),
                ));
            }
            // The reader is shared with pointer reads, so the hint is reset however the walk ends.
            segment.file.advise(AccessPattern::Sequential);
            let walked = self.replay_segment(segment, start, segment.id == last_id, &mut batch, apply);
            segment.file.advise(AccessPattern::Random);
            end = LogPosition { segment: segment.id, offset: walked? };
        }
        Ok(end)
    }

    /// Removes segments too short for their header: `open` lets one through only as the newest
    /// file, left by a crash during its creation or, read-only, being created by a writer right
    /// now (which removes nothing).
    fn remove_headerless(&self, segments: &[Arc<Segment>]) -> Result<()> {
        for segment in segments.iter().filter(|s| s.readable_len() < SEGMENT_HEADER_LEN) {
            if !self.read_only {
                self.fs.remove(&segment.path)?;
                self.fs.sync_dir(&self.dir)?;
            }
            self.segments.write().remove(&segment.id);
        }
        Ok(())
    }

    /// Applies the complete batches of one segment from `start`; returns the offset after the
    /// last one, having truncated a torn tail if `is_last`.
    fn replay_segment(
        &self,
        segment: &Segment,
        start: u64,
        is_last: bool,
        batch: &mut Vec<ReplayedRecord>,
        apply: &mut dyn FnMut(&[ReplayedRecord]) -> Result<()>,
    ) -> Result<u64> {
        if segment.remap.is_some() {
            // GC compacts only segments wholly before the log head.
            return Err(Error::corruption(&segment.path, 0, "compacted segment at or after the log head"));
        }
        let mut cursor = RecordCursor::new(
            Arc::clone(&segment.file),
            segment.path.clone(),
            segment.header(),
            segment.readable_len(),
            start,
        );
        let mut batch_start = start;
        let mut torn = None;
        batch.clear();
        loop {
            match cursor.next_record() {
                Ok(Some(rec)) => {
                    let batch_end = rec.header.batch_end;
                    batch.push(rec.to_replayed(segment.id));
                    if batch_end {
                        apply(batch)?;
                        batch.clear();
                        batch_start = cursor.offset();
                    }
                }
                Ok(None) => break,
                Err(CursorFault::Torn { offset, reason }) => {
                    torn = Some((offset, reason));
                    break;
                }
                Err(CursorFault::Fatal(e)) => {
                    // ext4 can leave the newest file's unsynced tail as zeros after a power
                    // loss: a run of zeros to the end of the last segment is a torn tail too.
                    let at = cursor.offset();
                    if is_last && e.is_corruption() && zeros_to_end(segment, at)? {
                        torn = Some((at, "zero-filled tail"));
                        break;
                    }
                    return Err(e);
                }
            }
        }
        if torn.is_none() && !batch.is_empty() {
            torn = Some((batch_start, "segment ends inside a batch"));
        }
        if let Some((offset, reason)) = torn {
            if !is_last {
                return Err(Error::corruption(&segment.path, offset, format!("{reason} in a sealed segment")));
            }
            // Readers are bounded by `len`; lower it before the file shrinks under a mapped reader.
            segment.len.store(batch_start, Ordering::Release);
            if self.read_only {
                // A writer may be appending that batch right now: only this view ends here.
                return Ok(batch_start);
            }
            self.fs.truncate(&segment.path, batch_start)?;
            // The next append opens a newer segment; if the cut were lost in a later crash,
            // the torn record would sit in a sealed segment and read as corruption.
            self.fs.open_append(&segment.path)?.sync()?;
        }
        Ok(batch_start)
    }
}

/// True if every byte of `segment` from `offset` to its end is zero.
fn zeros_to_end(segment: &Segment, offset: u64) -> Result<bool> {
    zeros_between(segment.file.as_ref(), offset, segment.readable_len())
}
