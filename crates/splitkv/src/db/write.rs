//! The write path: group commit with the value log as the write-ahead log.
//!
//! Each [`WriteBatch`] joins a queue; the writer at the front becomes the leader, takes a group
//! of queued batches, assigns consecutive sequence numbers, appends them to the value log (one
//! atomic run of records per batch), syncs once if any writer asked for it, applies them to the
//! index, publishes the last sequence number and wakes the group. This is LevelDB's group commit.
//!
//! Where the index allows it (the LSM: `Index::applies_groups_concurrently`), a group of plain
//! writes hands the lead on as soon as it is appended and applies itself beside the next group's
//! append, as RocksDB's pipelined writes do: the memtable insert, a put's largest single cost,
//! leaves the serial part. Groups then finish applying out of order and publish in sequence order
//! (`publish`). A plain write that needs no sync does not even queue there: its own thread
//! numbers and appends it under the log-order lock and applies it beside the others
//! (`commit_unqueued`); the queue remains for what a group shares (one sync) or what must run
//! alone. Whatever must see every appended write applied leads alone: freezing a memtable
//! (`Index::make_room`), GC relocations, which skip any put whose key no longer maps to the
//! pointer it replaces, flush requests and range deletes. It holds the commit gate exclusively,
//! which waits until no group is appended but unpublished.
//!
//! With the hash mode's request shards (`shards`), shard workers commit their groups through
//! `commit_shard_group` beside one another in the same way: only numbering and appending is
//! serial (the log-order lock).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};
use smallvec::SmallVec;

use super::shards::ShardWrite;
use super::spin_wait;
use super::DbInner;
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::index::{IndexEntry, IndexRecord};
use crate::types::{SequenceNumber, ValuePointer};
use crate::vlog::gc::GcHost;
use crate::vlog::{RecordKind, RecordRef};

/// A write group, the records of one batch and the index records of a group: small for single
/// puts, so they live on the stack (each heap allocation was about 2% of a 100-byte put).
type Group = SmallVec<[Arc<PendingWrite>; 8]>;
type BatchRecords<'a> = SmallVec<[RecordRef<'a>; 4]>;
type IndexRecords<'a> = SmallVec<[IndexRecord<'a>; 8]>;

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
    relocate_from: Option<Relocation>,
    /// Sequence number of the batch's first operation, set by the leader that writes it.
    first_seq: AtomicU64,
    /// Set once the write is done (by the leader that wrote it).
    result: Mutex<Option<Result<()>>>,
    /// Set (before `cv` is signalled) when the writer becomes the leader or its result is in:
    /// what a waiter spins on before it sleeps on `cv` (see `spin_wait`).
    signalled: AtomicBool,
    cv: Condvar,
}

/// What a GC relocation replaces: the pointer each put of its batch replaces, which the index
/// mapped its key to as of `current_at`.
pub(super) struct Relocation {
    pub(super) from: Vec<ValuePointer>,
    pub(super) current_at: SequenceNumber,
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

    /// A GC relocation of the records `old.from`, one per put of `batch`; made durable before
    /// it is applied if `sync`.
    pub(super) fn relocation(batch: WriteBatch, old: Relocation, sync: bool) -> Self {
        Self::with(batch, sync, false, Some(old))
    }

    /// True for a user write of puts and point deletes: it may be appended and applied beside
    /// other groups. Flush requests, GC relocations (whose re-check must see every appended
    /// write applied) and range deletes are not.
    fn runs_beside_others(&self) -> bool {
        !self.force_flush && self.relocate_from.is_none() && !self.batch.has_range_deletes()
    }

    fn with(batch: WriteBatch, sync: bool, force_flush: bool, relocate_from: Option<Relocation>) -> Self {
        PendingWrite {
            batch,
            sync,
            force_flush,
            relocate_from,
            first_seq: AtomicU64::new(0),
            result: Mutex::new(None),
            signalled: AtomicBool::new(false),
            cv: Condvar::new(),
        }
    }
}

/// Copies an error for the other members of a failed write group.
pub(super) fn share_error(e: &Error) -> Error {
    match e {
        Error::Poisoned(m) => Error::Poisoned(m.clone()),
        Error::Closed => Error::Closed,
        other => Error::Poisoned(other.to_string()),
    }
}

/// The group `leader` (at the queue's front) writes: the writes queued from it on, while they
/// fit in [`MAX_GROUP_BYTES`] and need no sync the leader was not asked for. Flush requests,
/// GC relocations and range deletes lead groups of their own.
fn gather_group(leader: &Arc<PendingWrite>, queue: &VecDeque<Arc<PendingWrite>>) -> Group {
    let mut bytes = 0;
    let mut group = Group::new();
    for w in queue {
        let alone = !w.runs_beside_others() || !leader.runs_beside_others();
        if !group.is_empty() && ((w.sync && !leader.sync) || alone || bytes > MAX_GROUP_BYTES) {
            break;
        }
        bytes += w.batch.payload_bytes();
        group.push(Arc::clone(w));
    }
    group
}

/// Takes `group` off the front of the queue and wakes the writer that leads next.
fn hand_over(queue: &mut VecDeque<Arc<PendingWrite>>, group: &[Arc<PendingWrite>]) {
    for w in group {
        let popped = queue.pop_front();
        debug_assert!(popped.is_some_and(|p| Arc::ptr_eq(&p, w)));
    }
    if let Some(next) = queue.front() {
        next.signalled.store(true, Ordering::Release);
        next.cv.notify_one();
    }
}

/// Hands `result` to every member of `group` but its leader `me`, and wakes them. The caller
/// holds the queue lock, which the members check their result under before they sleep.
fn finish(me: &Arc<PendingWrite>, group: &[Arc<PendingWrite>], result: &Result<()>) {
    for w in group.iter().filter(|w| !Arc::ptr_eq(w, me)) {
        *w.result.lock() = Some(match result {
            Ok(()) => Ok(()),
            Err(e) => Err(share_error(e)),
        });
        w.signalled.store(true, Ordering::Release);
        w.cv.notify_one();
    }
}

impl DbInner {
    /// Queues a write and either waits for a leader to do it or leads a group itself. Returns
    /// the sequence number of the batch's first operation (the others follow it in order).
    pub(super) fn submit(&self, write: PendingWrite) -> Result<SequenceNumber> {
        if !write.sync && write.runs_beside_others() && self.commits_unqueued() {
            return self.commit_unqueued(&write);
        }
        let me = Arc::new(write);
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        let mut spun = false;
        loop {
            if let Some(result) = me.result.lock().take() {
                return result.map(|()| SequenceNumber(me.first_seq.load(Ordering::Acquire)));
            }
            if queue.front().is_some_and(|front| Arc::ptr_eq(front, &me)) {
                break;
            }
            if !spun {
                // Usually the lead or the result comes within microseconds: watch for it
                // before sleeping (the conditions are checked again under the lock).
                spun = true;
                MutexGuard::unlocked(&mut queue, || spin_wait::spin_until(|| me.signalled.load(Ordering::Acquire)));
                continue;
            }
            me.cv.wait(&mut queue);
        }

        // Leader: the front of the queue until it hands over. Other writers keep queueing behind
        // it while it works without the queue lock, which it never holds while it waits for the
        // commit gate (a leader before it, still applying, needs the queue to finish its group).
        drop(queue);
        if me.runs_beside_others() && self.index.applies_groups_concurrently() && !self.index.room_due() {
            return self.lead_beside_others(&me);
        }
        // No shard worker and no other leader commits meanwhile: the group sees every write
        // published.
        let alone = self.commit_gate.alone();
        let room = self.check_poisoned().and_then(|()| self.index.make_room(me.force_flush));
        let group = match room {
            Ok(()) => gather_group(&me, &self.writers.lock()),
            Err(_) => smallvec::smallvec![Arc::clone(&me)],
        };
        let result = room.and_then(|()| self.write_group(&group));
        drop(alone);
        let mut queue = self.writers.lock();
        hand_over(&mut queue, &group);
        finish(&me, &group, &result);
        result.map(|()| SequenceNumber(me.first_seq.load(Ordering::Acquire)))
    }

    /// Leads a group of plain writes beside the groups before it (the index allows it and needs
    /// no room): appends the group under the log-order lock, hands the lead to the next writer,
    /// and only then applies the group to the index, so that the next group's append overlaps
    /// this one's apply; publishes in sequence order (as shard workers do) before acknowledging.
    /// Anything that must see every appended write applied (freezing a memtable, relocation's
    /// re-check, checkpoints) takes the commit gate exclusively and so waits for this group.
    fn lead_beside_others(&self, me: &Arc<PendingWrite>) -> Result<SequenceNumber> {
        let _shared = self.commit_gate.shared();
        let group = gather_group(me, &self.writers.lock());
        let mut index_records = IndexRecords::new();
        let mut tally = Tally::default();
        let appended = self.check_poisoned().and_then(|()| {
            let assigned = self.append_group(&group, &mut tally, &mut index_records)?;
            Ok(index_records.last().map(|last| self.publish.register(*assigned, last.log_pointer.segment.0)))
        });
        hand_over(&mut self.writers.lock(), &group);
        if let Ok(Some(ticket)) = appended {
            self.index.apply(&index_records);
            tally.count(self);
            self.publish.applied_and_wait(ticket, &self.last_sequence, &self.applied_segment);
        }
        let result = appended.map(|_| ());
        if group.len() > 1 {
            // Members check their result under the queue lock before they sleep.
            let _queue = self.writers.lock();
            finish(me, &group, &result);
        }
        result.map(|()| SequenceNumber(me.first_seq.load(Ordering::Acquire)))
    }

    /// Appends a group to the value log, syncs if asked, applies it to the index and publishes it.
    /// Runs alone: the caller holds the commit gate exclusively, so no shard worker is inside a
    /// commit and every appended record is published.
    fn write_group(&self, group: &[Arc<PendingWrite>]) -> Result<()> {
        let mut index_records = IndexRecords::new();
        let mut tally = Tally::default();
        debug_assert!(self.publish.is_idle(), "a shard group is unpublished while the write leader runs");
        let assigned = self.append_group(group, &mut tally, &mut index_records)?;
        self.index.apply(&index_records);
        if let Some(last) = index_records.last() {
            // Every record of the segments before this one is in the index now.
            self.applied_segment.fetch_max(last.log_pointer.segment.0, Ordering::Release);
        }
        tally.count(self);
        self.last_sequence.store(*assigned, Ordering::Release);
        Ok(())
    }

    /// Numbers `group`'s batches on from the last sequence number assigned and appends them to the
    /// value log (leaving out a relocation's puts whose key moved on), syncing once if any member
    /// asked. Returns the log-order lock, holding the group's last sequence number: a caller that
    /// publishes out of order registers the group before it lets the next one append.
    fn append_group<'a>(
        &self,
        group: &'a [Arc<PendingWrite>],
        tally: &mut Tally,
        index_records: &mut IndexRecords<'a>,
    ) -> Result<MutexGuard<'_, u64>> {
        let mut assigned = self.log_order.lock();
        let mut seq = *assigned;
        let outcome = (|| -> Result<()> {
            for w in group {
                if w.batch.is_empty() {
                    continue;
                }
                w.first_seq.store(seq + 1, Ordering::Release);
                let mut records = self.batch_records(&w.batch, w.relocate_from.as_ref())?;
                if records.is_empty() {
                    continue;
                }
                // GC's rewrites are the engine's writes, not the user's.
                let user = w.relocate_from.is_none();
                self.log_batch(&mut records, &mut seq, user.then(|| Payload::of(&w.batch)), tally, index_records)?;
            }
            if group.iter().any(|w| w.sync) {
                self.vlog.sync()?;
            }
            Ok(())
        })();
        if let Err(e) = outcome {
            return Err(self.poison(e));
        }
        *assigned = seq;
        Ok(assigned)
    }

    /// Commits a shard worker's group of single-shard writes (see `shards`) beside the other
    /// shards' workers ([`DbInner::commit_beside_others`]): only this worker writes these keys,
    /// so their predecessors, looked up before the log-order lock, stay the newest versions.
    pub(super) fn commit_shard_group(&self, writes: &[ShardWrite]) -> Result<()> {
        let sync = writes.iter().any(|w| w.sync);
        self.commit_beside_others(sync, || {
            writes.iter().map(|w| Ok((self.batch_records(&w.batch, None)?, Payload::of(&w.batch)))).collect()
        })
        .map(|_| ())
    }

    /// Commits one plain write that needs no sync on its own thread, beside other writers, with
    /// no write queue: for an index that applies groups concurrently, the queue's group commit
    /// only orders appends, which the log-order lock does as well. With two writer threads the
    /// queue cost each write five lock round trips between the cores (join, gather, hand over,
    /// result, wake) and a spin while the other thread led; here it takes the log-order lock
    /// once and the publication lock twice (register, publish). A sync write still queues: a
    /// group shares one sync.
    fn commit_unqueued(&self, write: &PendingWrite) -> Result<SequenceNumber> {
        self.commit_beside_others(false, || {
            Ok(smallvec::smallvec![(self.batch_records(&write.batch, None)?, Payload::of(&write.batch))])
        })
    }

    /// [`DbInner::commit_unqueued`] for one put, from the caller's key and value: no batch is
    /// built, so nothing is copied or allocated before the log append. The caller checked what
    /// `Db::write` checks of a batch (the key is not reserved) and waited for log space. Returns
    /// the put's sequence number.
    pub(super) fn put_unqueued(&self, key: &[u8], value: &[u8]) -> Result<SequenceNumber> {
        self.commit_beside_others(false, || {
            let prev = self.index.predecessor(key)?;
            let record = RecordRef { seq: SequenceNumber(0), kind: RecordKind::Put, key, value, prev };
            let payload = Payload { bytes: (key.len() + value.len()) as u64, keys: 1 };
            Ok(smallvec::smallvec![(smallvec::smallvec![record], payload)])
        })
    }

    /// True if a plain write that needs no sync commits on its own thread
    /// ([`DbInner::commit_unqueued`]): the index applies groups concurrently, and so names no
    /// predecessors.
    pub(super) fn commits_unqueued(&self) -> bool {
        self.index.applies_groups_concurrently()
    }

    /// Makes room first if the index asks (alone: the commit gate held exclusively), then,
    /// beside other such commits and the write queue's plain groups, makes the records of some
    /// batches (`batches`, each with its user payload), appends them in order under the
    /// log-order lock (syncing once if `sync`), applies them to the index and waits until they
    /// are published in sequence order. Returns the first sequence number of the first batch.
    ///
    /// `batches` runs before the log-order lock is taken, so it may look up predecessors only
    /// where nobody else writes the keys meanwhile (a shard's worker: the queue's groups, which
    /// may write its keys too, lead alone behind the commit gate), or where the index names none
    /// ([`Index::applies_groups_concurrently`]).
    fn commit_beside_others<'a>(
        &self,
        sync: bool,
        batches: impl FnOnce() -> Result<SmallVec<[(BatchRecords<'a>, Payload); 1]>>,
    ) -> Result<SequenceNumber> {
        if self.index.room_due() {
            let _alone = self.commit_gate.alone();
            self.check_poisoned()?;
            self.index.make_room(false)?;
        }
        let _shared = self.commit_gate.shared();
        self.check_poisoned()?;
        let mut batches = batches()?;
        let mut index_records = IndexRecords::new();
        let mut tally = Tally::default();
        let (first, ticket) = {
            let mut assigned = self.log_order.lock();
            let mut seq = *assigned;
            let first = SequenceNumber(seq + 1);
            let outcome = (|| -> Result<()> {
                for (records, payload) in &mut batches {
                    if !records.is_empty() {
                        self.log_batch(records, &mut seq, Some(*payload), &mut tally, &mut index_records)?;
                    }
                }
                if sync {
                    self.vlog.sync()?;
                }
                Ok(())
            })();
            if let Err(e) = outcome {
                return Err(self.poison(e));
            }
            let Some(last) = index_records.last() else { return Ok(first) };
            *assigned = seq;
            (first, self.publish.register(seq, last.log_pointer.segment.0))
        };
        // The index takes its own lock where it needs one; groups applied out of order leave it
        // the same.
        self.index.apply(&index_records);
        tally.count(self);
        self.publish.applied_and_wait(ticket, &self.last_sequence, &self.applied_segment);
        Ok(first)
    }

    /// The records of `batch`, each naming its key's predecessor, sequence numbers unassigned.
    /// For a GC relocation (`relocate_from`), puts whose key no longer maps to the pointer they
    /// replace are left out.
    fn batch_records<'a>(&self, batch: &'a WriteBatch, relocate_from: Option<&Relocation>) -> Result<BatchRecords<'a>> {
        let mut records = BatchRecords::with_capacity(batch.len());
        for (i, op) in batch.ops().iter().enumerate() {
            if let Some(Relocation { from, current_at }) = relocate_from {
                // Relocation must never overwrite a newer user write. GC found the pointer
                // current as of `current_at`; unless the index can tell from memory that the
                // key saw no write since (the common case, and a lookup's cost saved), look again.
                if let Some(old) = from.get(i) {
                    let still_current =
                        self.index.unchanged_since(op.key(), *current_at) || self.is_current(op.key(), old)?;
                    if !still_current {
                        continue;
                    }
                }
            }
            let (kind, value) = match op {
                BatchOp::Put { value, .. } => (RecordKind::Put, value.as_slice()),
                BatchOp::Delete { .. } => (RecordKind::Delete, &[][..]),
                BatchOp::DeleteRange { end, .. } => (RecordKind::DeleteRange, end.as_slice()),
            };
            // The LSM index keeps versions in its tables and names no predecessor (the record is
            // encoded as in format 1); the hash index chains them through the log. Versions
            // superseded within this group are seen by no reader (the group publishes at once):
            // the predecessor is the version before the group.
            let prev = self.index.predecessor(op.key())?;
            records.push(RecordRef { seq: SequenceNumber(0), kind, key: op.key(), value, prev });
        }
        Ok(records)
    }

    /// Numbers `records` from `seq + 1` and appends them as one atomic run; their index records
    /// go to `index_records`. `user` is the batch's payload when the write is the user's
    /// (counted).
    fn log_batch<'a>(
        &self,
        records: &mut [RecordRef<'a>],
        seq: &mut u64,
        user: Option<Payload>,
        tally: &mut Tally,
        index_records: &mut IndexRecords<'a>,
    ) -> Result<()> {
        for rec in records.iter_mut() {
            *seq += 1;
            rec.seq = SequenceNumber(*seq);
        }
        let pointers = self.vlog.append_batch(records)?;
        if let Some(payload) = user {
            tally.user_bytes += payload.bytes;
            tally.user_keys += payload.keys;
        }
        let threshold = self.options.value_threshold;
        let mut referenced = None;
        for (rec, ptr) in records.iter().zip(pointers) {
            let record = IndexRecord::from_log(rec.key, rec.seq, rec.kind, rec.value, ptr, threshold);
            if let IndexEntry::Pointer(p) = record.entry {
                tally.separated_bytes += u64::from(p.len);
            }
            if self.index.keeps_log_pointer(&record) {
                referenced = Some(ptr.segment);
            }
            index_records.push(record);
        }
        // A batch sits in one segment. Marked before the index holds the pointers, so GC, which
        // asks only once the segment's records are applied, never sees the mark missing.
        if let Some(segment) = referenced {
            self.vlog.note_referenced(segment);
        }
        Ok(())
    }

    /// Poisons the write path: the log may hold part of a group, so its on-disk state is unknown.
    fn poison(&self, e: Error) -> Error {
        self.poison_with(e.to_string());
        e
    }
}

/// What a user's batch counts for: its key and value bytes, and its operations.
#[derive(Clone, Copy)]
struct Payload {
    bytes: u64,
    keys: u64,
}

impl Payload {
    fn of(batch: &WriteBatch) -> Self {
        Payload { bytes: batch.payload_bytes() as u64, keys: batch.len() as u64 }
    }
}

/// What a committed group adds to the counters.
#[derive(Default)]
struct Tally {
    user_bytes: u64,
    user_keys: u64,
    separated_bytes: u64,
}

impl Tally {
    fn count(&self, db: &DbInner) {
        db.counters.user_bytes_written.add(self.user_bytes);
        db.counters.keys_written.add(self.user_keys);
        db.separated_bytes_written.add(self.separated_bytes);
    }
}
