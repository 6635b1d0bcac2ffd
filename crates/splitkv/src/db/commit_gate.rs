//! The commit gate: plain writes commit holding it shared, and what must run while nothing is
//! being appended or applied (freezing a memtable, the write queue's leader, a checkpoint) holds
//! it exclusively.
//!
//! Every plain write takes it, so its shared side must not make writers on different cores
//! write one cache line: a reader-writer lock keeps its readers in one word, which then moved
//! between the cores on every put. `crossbeam-utils`'s `ShardedLock` gives each thread a lock of
//! its own to take shared (the exclusive side takes them all), which is the trade wanted here:
//! the exclusive side is taken once per memtable or queued group, the shared side per write.

use std::sync::PoisonError;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};

/// See the module documentation.
#[derive(Default)]
pub(super) struct CommitGate(ShardedLock<()>);

impl CommitGate {
    /// Held by a commit that runs beside others.
    pub(super) fn shared(&self) -> ShardedLockReadGuard<'_, ()> {
        // The gate guards no data, so a panic while it was held leaves nothing to distrust.
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Held while nothing else may append or apply.
    pub(super) fn alone(&self) -> ShardedLockWriteGuard<'_, ()> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}
