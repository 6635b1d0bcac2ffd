//! The write path: group commit with the value log as the write-ahead log.
//!
//! Each [`WriteBatch`] joins a queue; the writer at the front becomes the leader, lets the index
//! make room, takes a group of queued batches, assigns consecutive sequence numbers, appends
//! them to the value log (one atomic run of records per batch), syncs once if any writer asked
//! for it, applies them to the index, publishes the last sequence number and wakes the group.
//! This is LevelDB's group commit. GC relocations go through the same path, each batch alone,
//! and skip any put whose key no longer maps to the pointer it replaces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::DbInner;
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::index::{IndexEntry, IndexRecord};
use crate::stats::Counters;
use crate::types::{SequenceNumber, ValuePointer};
use crate::vlog::gc::GcHost;
use crate::vlog::{RecordKind, RecordRef};

/// Most bytes a write leader gathers into one group; keeps a small write's latency bounded when
/// a large one is queued behind it.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A queued write.
pub(super) struct PendingWrite {
    batch: WriteBatch,
    sync: bool,
    /// Freeze the memtable even if it is not full (used by `flush`).
    force_flush: bool,
    /// For GC relocations: the pointer each put replaces; a put is skipped if its key no
    /// longer maps to that pointer when the leader writes it.
    relocate_from: Option<Vec<ValuePointer>>,
    /// Sequence number of the batch's first operation, set by the leader that writes it.
    first_seq: AtomicU64,
    /// Set once the write is done (by the leader that wrote it).
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl PendingWrite {
    /// A user write.
    pub(super) fn new(batch: WriteBatch, sync: bool) -> Self {
        Self::with(batch, sync, false, None)
    }

    /// An empty write that freezes the memtable.
    pub(super) fn flush() -> Self {
        Self::with(WriteBatch::new(), false, true, None)
    }

    /// A GC relocation of the records at `old`, one per put of `batch`, made durable.
    pub(super) fn relocation(batch: WriteBatch, old: Vec<ValuePointer>) -> Self {
        Self::with(batch, true, false, Some(old))
    }

    fn with(batch: WriteBatch, sync: bool, force_flush: bool, relocate_from: Option<Vec<ValuePointer>>) -> Self {
        PendingWrite {
            batch,
            sync,
            force_flush,
            relocate_from,
            first_seq: AtomicU64::new(0),
            result: Mutex::new(None),
            cv: Condvar::new(),
        }
    }
}

/// Copies an error for the other members of a failed write group.
fn share_error(e: &Error) -> Error {
    match e {
        Error::Poisoned(m) => Error::Poisoned(m.clone()),
        Error::Closed => Error::Closed,
        other => Error::Poisoned(other.to_string()),
    }
}

impl DbInner {
    /// Queues a write and either waits for a leader to do it or leads a group itself. Returns
    /// the sequence number of the batch's first operation (the others follow it in order).
    pub(super) fn submit(&self, write: PendingWrite) -> Result<SequenceNumber> {
        let me = Arc::new(write);
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        loop {
            if let Some(result) = me.result.lock().take() {
                return result.map(|()| SequenceNumber(me.first_seq.load(Ordering::Acquire)));
            }
            if queue.front().is_some_and(|front| Arc::ptr_eq(front, &me)) {
                break;
            }
            me.cv.wait(&mut queue);
        }

        // Leader. Other writers keep queueing behind us while we work without the queue lock.
        let room = self.check_poisoned().and_then(|()| self.index.make_room(me.force_flush));
        let group: Vec<Arc<PendingWrite>> = if room.is_err() {
            vec![Arc::clone(&me)]
        } else {
            let mut bytes = 0;
            let mut group = Vec::new();
            for w in queue.iter() {
                // A group never waits for a sync it was not asked for; flush requests and GC
                // relocations lead their own groups.
                let alone = w.force_flush || w.relocate_from.is_some() || me.relocate_from.is_some();
                if !group.is_empty() && ((w.sync && !me.sync) || alone || bytes > MAX_GROUP_BYTES) {
                    break;
                }
                bytes += w.batch.payload_bytes();
                group.push(Arc::clone(w));
            }
            group
        };
        drop(queue);

        let result = room.and_then(|()| self.write_group(&group));
        let mut queue = self.writers.lock();
        for w in &group {
            let popped = queue.pop_front();
            debug_assert!(popped.is_some_and(|p| Arc::ptr_eq(&p, w)));
            if !Arc::ptr_eq(w, &me) {
                *w.result.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(share_error(e)),
                });
                w.cv.notify_one();
            }
        }
        if let Some(next) = queue.front() {
            next.cv.notify_one();
        }
        result.map(|()| SequenceNumber(me.first_seq.load(Ordering::Acquire)))
    }

    /// Appends a group to the value log, syncs if asked, applies it to the index and publishes it.
    fn write_group(&self, group: &[Arc<PendingWrite>]) -> Result<()> {
        let threshold = self.options.value_threshold;
        let mut seq = self.last_sequence.load(Ordering::Acquire);
        let mut index_records = Vec::new();
        let mut records = Vec::new();
        let mut sync = false;
        let mut user_bytes = 0u64;
        let mut user_keys = 0u64;
        let mut separated_bytes = 0u64;
        let outcome = (|| -> Result<()> {
            for w in group {
                sync |= w.sync;
                if w.batch.is_empty() {
                    continue;
                }
                records.clear();
                w.first_seq.store(seq + 1, Ordering::Release);
                for (i, op) in w.batch.ops().iter().enumerate() {
                    if let Some(old) = &w.relocate_from {
                        // Relocation must never overwrite a newer user write.
                        if !self.is_current(op.key(), &old[i])? {
                            continue;
                        }
                    }
                    seq += 1;
                    let (kind, value) = match op {
                        BatchOp::Put { value, .. } => (RecordKind::Put, value.as_slice()),
                        BatchOp::Delete { .. } => (RecordKind::Delete, &[][..]),
                        BatchOp::DeleteRange { end, .. } => (RecordKind::DeleteRange, end.as_slice()),
                    };
                    // The LSM index keeps versions in its tables and names no predecessor (the
                    // record is encoded as in format 1); the hash index chains them through the
                    // log. Versions superseded within this group are seen by no reader (the
                    // group publishes at once): the predecessor is the version before the group.
                    let prev = self.index.predecessor(op.key())?;
                    records.push(RecordRef { seq: SequenceNumber(seq), kind, key: op.key(), value, prev });
                }
                if records.is_empty() {
                    continue;
                }
                let pointers = self.vlog.append_batch(&records)?;
                if w.relocate_from.is_none() {
                    // GC's rewrites are the engine's writes, not the user's.
                    user_bytes += w.batch.payload_bytes() as u64;
                    user_keys += w.batch.len() as u64;
                }
                for (rec, ptr) in records.iter().zip(pointers) {
                    let record = IndexRecord::from_log(rec.key, rec.seq, rec.kind, rec.value, ptr, threshold);
                    if let IndexEntry::Pointer(p) = record.entry {
                        separated_bytes += u64::from(p.len);
                    }
                    index_records.push(record);
                }
            }
            if sync {
                self.vlog.sync()?;
            }
            Ok(())
        })();
        if let Err(e) = outcome {
            // The log may hold part of the group; the on-disk state is unknown from here on.
            let reason = e.to_string();
            self.poisoned.lock().get_or_insert(reason);
            return Err(e);
        }
        self.index.apply(&index_records);
        if let Some(last) = index_records.last() {
            // Every record of the segments before this one is in the index now.
            self.applied_segment.fetch_max(last.log_pointer.segment.0, Ordering::Release);
        }
        Counters::add(&self.counters.user_bytes_written, user_bytes);
        Counters::add(&self.counters.keys_written, user_keys);
        self.separated_bytes_written.fetch_add(separated_bytes, Ordering::Relaxed);
        self.last_sequence.store(seq, Ordering::Release);
        Ok(())
    }
}
