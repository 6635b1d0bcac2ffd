//! The key index seam: what maps a user key to its newest value or value address.
//!
//! [`Index`] is implemented by [`lsm::LsmIndex`] (memtable + leveled SSTables). The persistent
//! hash index of the SSHKV mode implements the same trait, so the write path, the value log and
//! GC's "is this pointer still current?" question do not depend on which index is in use.

pub mod lsm;

use bytes::Bytes;

use crate::error::Result;
use crate::iter::InternalIterator;
use std::collections::BTreeMap;

use crate::stats::Stats;
use crate::types::{LogPosition, SegmentId, SequenceNumber, ValueKind, ValuePointer};
use crate::version::SegmentMeta;

/// One committed write, as the index receives it.
#[derive(Clone, Debug)]
pub struct IndexRecord<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Its sequence number.
    pub seq: SequenceNumber,
    /// Deletion, inline value, or pointer.
    pub kind: ValueKind,
    /// The inline value or the encoded pointer (empty for deletions).
    pub value: Bytes,
    /// Where the write's record sits in the value log.
    pub log_pointer: ValuePointer,
}

/// What the index holds for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexValue {
    /// The value itself.
    Inline(Bytes),
    /// The value's address in the value log.
    Pointer(ValuePointer),
}

/// A key index.
pub trait Index: Send + Sync {
    /// Applies committed records, in sequence order. Called by one writer at a time.
    fn apply(&self, records: &[IndexRecord<'_>]);
    /// Makes room for the next write group: delays or blocks the writer while background work
    /// catches up, and freezes a full memtable (or any non-empty one if `force`). Called by the
    /// write leader, so no record is appended concurrently.
    fn make_room(&self, force: bool) -> Result<()>;
    /// Blocks until no frozen memtable awaits flushing.
    fn wait_for_flush(&self) -> Result<()>;
    /// The newest value of `user_key` visible at `seq`; `None` if absent or deleted.
    fn get(&self, user_key: &[u8], seq: SequenceNumber, fill_cache: bool) -> Result<Option<IndexValue>>;
    /// A merged cursor over every entry (all versions), pinning what it reads.
    fn iter(&self, fill_cache: bool) -> Result<Box<dyn InternalIterator>>;
    /// Compacts the key range `[begin, end]` down through every level.
    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()>;
    /// Adds index-specific figures to a report.
    fn fill_stats(&self, stats: &mut Stats);
    /// An index-specific property (`splitkv.…`).
    fn property(&self, name: &str) -> Option<String>;
    /// The recovery log head and what is recorded about every segment (garbage, skipped ranges).
    fn log_segments(&self) -> (LogPosition, BTreeMap<SegmentId, SegmentMeta>);
    /// Durably records that value-log segments were removed.
    fn remove_segments(&self, ids: &[SegmentId]) -> Result<()>;
    /// Durably records runs of dead records `[start, end)` of a segment that scans skip from
    /// now on (so their bytes may be punched out).
    fn record_skipped(&self, id: SegmentId, ranges: &[(u64, u64)]) -> Result<()>;
    /// Counts the garbage of every segment before the recovery log head exactly, by walking
    /// every version in the index, and records the counts. A version is garbage when its next
    /// newer version has a sequence number at or below `horizon` (no reader can see it: the
    /// caller passes the oldest open snapshot or, with none, the last sequence number).
    fn survey_garbage(&self, horizon: SequenceNumber) -> Result<()>;
    /// Stops background work; later calls may fail.
    fn shutdown(&self);
}

/// Turns a stored (kind, bytes) pair into an [`IndexValue`].
pub fn decode_index_value(kind: ValueKind, value: Bytes) -> Option<Result<IndexValue>> {
    match kind {
        ValueKind::Deletion => None,
        ValueKind::Inline => Some(Ok(IndexValue::Inline(value))),
        ValueKind::Pointer => Some(
            ValuePointer::decode(&value)
                .map(IndexValue::Pointer)
                .ok_or_else(|| crate::Error::corruption("<index>", 0, "malformed value pointer")),
        ),
    }
}
