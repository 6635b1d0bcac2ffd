//! [`Catalog`]: the database's one durable catalog, a [`VersionSet`] behind a lock, owned by
//! the database and shared with its index.
//!
//! Two parties record into the one MANIFEST. The database records the value log's metadata
//! (segments removed, skipped ranges, garbage surveys); the index records its own state (for
//! the LSM index: tables, file numbers, compact pointers) and, with a flush, the new log head
//! and the garbage the flush makes, in the same edit, so that the head never moves without the
//! table that holds what it skips. Keeping both in one file keeps every such edit atomic.
//!
//! A failed MANIFEST write leaves the durable state unknown (the record may or may not be
//! there), so the catalog refuses every later edit: the database is poisoned, reads go on.
//!
//! Thread-safety: `Send + Sync`. One lock serialises edits; lock order is index state, then
//! catalog (the catalog lock is never held while taking another engine lock).

use std::collections::BTreeMap;

use parking_lot::{Mutex, MutexGuard};

use super::{SegmentMeta, VersionEdit, VersionSet};
use crate::error::{Error, Result};
use crate::types::{LogPosition, SegmentId};

/// The durable catalog: the MANIFEST's state and the lock that serialises edits to it.
pub struct Catalog {
    set: Mutex<VersionSet>,
    /// Why the catalog refuses edits, after a failed MANIFEST write.
    failure: Mutex<Option<String>>,
    /// Refuses every edit with [`Error::ReadOnly`] (a database opened read-only).
    read_only: bool,
}

impl Catalog {
    /// A catalog over a recovered or newly created version set.
    pub fn new(set: VersionSet) -> Catalog {
        Catalog { set: Mutex::new(set), failure: Mutex::new(None), read_only: false }
    }

    /// A catalog over a recovered version set that never writes: every edit that would change
    /// something is refused with [`Error::ReadOnly`] (an empty one is a no-op, as always), so the
    /// MANIFEST of a database opened read-only stays untouched.
    pub fn read_only(set: VersionSet) -> Catalog {
        Catalog { set: Mutex::new(set), failure: Mutex::new(None), read_only: true }
    }

    /// Builds an edit from the current state and makes it durable, all under the lock (so the
    /// state the edit was computed from is the state it applies to). An empty edit writes
    /// nothing. A failure poisons the catalog.
    pub fn record_with(&self, build: impl FnOnce(&VersionSet) -> VersionEdit) -> Result<()> {
        let mut set = self.set.lock();
        if let Some(reason) = &*self.failure.lock() {
            return Err(Error::Poisoned(reason.clone()));
        }
        let edit = build(&set);
        if edit.is_empty() {
            return Ok(());
        }
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        set.log_and_apply(edit).inspect_err(|e| {
            self.failure.lock().get_or_insert_with(|| e.to_string());
        })
    }

    /// Makes `edit`, a change to segment `id`, durable unless the segment is no longer live
    /// (collected meanwhile): then there is nothing left to change.
    pub fn record_for_segment(&self, id: SegmentId, edit: VersionEdit) -> Result<()> {
        self.record_with(|set| if set.segments().contains_key(&id) { edit } else { VersionEdit::default() })
    }

    /// Makes `edit` durable (see [`Catalog::record_with`]).
    pub fn record(&self, edit: VersionEdit) -> Result<()> {
        self.record_with(|_| edit)
    }

    /// The version set, locked, for reads and for the in-memory counters an index hands out
    /// (file numbers). Durable changes go through [`Catalog::record_with`].
    pub fn lock(&self) -> MutexGuard<'_, VersionSet> {
        self.set.lock()
    }

    /// Where value-log replay starts after a crash.
    pub fn log_head(&self) -> LogPosition {
        self.set.lock().log_head()
    }

    /// The recorded log head and every recorded segment's metadata.
    pub fn log_segments(&self) -> (LogPosition, BTreeMap<SegmentId, SegmentMeta>) {
        let set = self.set.lock();
        (set.log_head(), set.segments().clone())
    }

    /// What is recorded about segment `id`, if it is live.
    pub fn segment(&self, id: SegmentId) -> Option<SegmentMeta> {
        self.set.lock().segments().get(&id).cloned()
    }

    /// Known garbage bytes over every live segment.
    pub fn garbage_bytes(&self) -> u64 {
        self.set.lock().segments().values().map(|m| m.garbage_bytes).sum()
    }

    /// Bytes appended to MANIFEST files, for write-amplification statistics.
    pub fn manifest_bytes_written(&self) -> u64 {
        self.set.lock().manifest_bytes_written()
    }
}
