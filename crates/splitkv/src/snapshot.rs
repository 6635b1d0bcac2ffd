//! Snapshots: a sequence number pinned so that reads see the database as of that point.
//!
//! A [`Snapshot`] is a cheap handle; while any clone is alive its sequence number is registered
//! in the database's [`SnapshotList`], and compaction keeps every version a registered snapshot
//! can see. Dropping the last clone unregisters it. Iterators register one too (unless they read
//! at an explicit snapshot), since they pin what they may still read the same way.
//!
//! The list also keeps when each sequence number was first registered, for the
//! `splitkv.oldest-snapshot-time` property.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::types::SequenceNumber;

/// How many handles hold one sequence number, and since when (seconds since the Unix epoch).
struct Registered {
    count: usize,
    since: u64,
}

/// Registered snapshot sequence numbers with their reference counts.
#[derive(Default)]
pub struct SnapshotList {
    seqs: Mutex<BTreeMap<SequenceNumber, Registered>>,
}

impl SnapshotList {
    /// Registers a snapshot at the sequence number `last_sequence` holds, read under the list's
    /// lock. GC publishes its relocations before it asks whether a reader older than them is
    /// registered (under the same lock), so a snapshot taken here is either seen by that
    /// question or reads at a sequence number that already sees the relocations. Reading the
    /// sequence number first and registering it after would leave a gap in which GC frees
    /// segments the new snapshot still points into.
    pub fn acquire_latest(self: &Arc<Self>, last_sequence: &AtomicU64) -> Snapshot {
        let mut seqs = self.seqs.lock();
        let seq = SequenceNumber(last_sequence.load(Ordering::Acquire));
        seqs.entry(seq)
            .or_insert_with(|| {
                let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                Registered { count: 0, since }
            })
            .count += 1;
        Snapshot { inner: Arc::new(SnapshotInner { seq, list: Arc::clone(self) }) }
    }

    /// Snapshots registered now (each live handle, iterators' included).
    pub fn count(&self) -> usize {
        self.seqs.lock().values().map(|r| r.count).sum()
    }

    /// When the oldest registered snapshot was taken, in seconds since the Unix epoch.
    pub fn oldest_time(&self) -> Option<u64> {
        self.seqs.lock().values().map(|r| r.since).min()
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
        if let Some(registered) = seqs.get_mut(&seq) {
            registered.count -= 1;
            if registered.count == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_counts_live_handles_and_knows_the_oldest_time() {
        let list = Arc::new(SnapshotList::default());
        assert_eq!((list.count(), list.oldest_time()), (0, None));
        let last_sequence = AtomicU64::new(5);
        let a = list.acquire_latest(&last_sequence);
        let b = list.acquire_latest(&last_sequence);
        let c = a.clone();
        last_sequence.store(9, Ordering::Release);
        let d = list.acquire_latest(&last_sequence);
        assert_eq!((a.sequence(), d.sequence()), (SequenceNumber(5), SequenceNumber(9)));
        assert_eq!(list.count(), 3, "a clone shares its handle's registration");
        assert_eq!(list.oldest(), Some(SequenceNumber(5)));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        assert!(list.oldest_time().is_some_and(|t| t <= now && t + 60 > now));
        drop((a, b, c, d));
        assert_eq!((list.count(), list.oldest_time(), list.oldest()), (0, None, None));
    }
}
