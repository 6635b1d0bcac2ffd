//! Snapshots: a sequence number pinned so that reads see the database as of that point.
//!
//! A [`Snapshot`] is a cheap handle; while any clone is alive its sequence number is registered
//! in the database's [`SnapshotList`], and compaction keeps every version a registered snapshot
//! can see. Dropping the last clone unregisters it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::types::SequenceNumber;

/// Registered snapshot sequence numbers with their reference counts.
#[derive(Default)]
pub struct SnapshotList {
    seqs: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at `seq`.
    pub fn acquire(self: &Arc<Self>, seq: SequenceNumber) -> Snapshot {
        *self.seqs.lock().entry(seq).or_insert(0) += 1;
        Snapshot { inner: Arc::new(SnapshotInner { seq, list: Arc::clone(self) }) }
    }

    /// The oldest registered snapshot, if any.
    pub fn oldest(&self) -> Option<SequenceNumber> {
        self.seqs.lock().keys().next().copied()
    }

    /// All registered snapshot sequence numbers, ascending.
    pub fn all(&self) -> Vec<SequenceNumber> {
        self.seqs.lock().keys().copied().collect()
    }

    fn release(&self, seq: SequenceNumber) {
        let mut seqs = self.seqs.lock();
        if let Some(count) = seqs.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                seqs.remove(&seq);
            }
        }
    }
}

struct SnapshotInner {
    seq: SequenceNumber,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

/// A consistent read view of the database; see [`crate::Db::snapshot`].
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.seq
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot").field("sequence", &self.inner.seq).finish()
    }
}
