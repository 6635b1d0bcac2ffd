//! Publication order for write groups applied concurrently: the LSM's pipelined group commit
//! (`write`) and the sharded front end's workers append their groups to the value log one at a
//! time (in sequence order) but apply them to the index in parallel, so a group can finish
//! applying before an older one has.
//!
//! Readers take their sequence number from `last_sequence`, and GC trusts `applied_segment`
//! ("every record before this segment is in the index"), so both may only move past a group
//! once it and every older group are applied. [`PublishOrder`] hands out a [`Ticket`] per
//! appended group (in log order, under the log-order lock), and publishes the longest run of
//! finished tickets from the oldest. A worker waits for its own ticket to be published before it
//! acknowledges its callers, so an acknowledged write is visible to the next read.
//!
//! Thread-safety: one mutex over the pending tickets; waiters sleep on a condition variable.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::spin_wait;

/// A group appended to the log and not yet published.
#[derive(Debug)]
struct Pending {
    /// Its last sequence number.
    last_seq: u64,
    /// The segment of its last record.
    segment: u64,
    applied: bool,
}

/// One appended group's place in the publication order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket {
    last_seq: u64,
}

/// Publishes concurrently applied groups in sequence order.
#[derive(Debug, Default)]
pub(super) struct PublishOrder {
    /// Appended groups, oldest first.
    pending: Mutex<VecDeque<Pending>>,
    published: Condvar,
}

impl PublishOrder {
    /// Registers a group just appended with sequence numbers up to `last_seq`, its last record in
    /// `segment`. Must be called in append order (under the lock that orders appends).
    pub(super) fn register(&self, last_seq: u64, segment: u64) -> Ticket {
        let mut pending = self.pending.lock();
        debug_assert!(pending.back().is_none_or(|p| p.last_seq < last_seq));
        pending.push_back(Pending { last_seq, segment, applied: false });
        Ticket { last_seq }
    }

    /// Marks `ticket`'s group applied to the index, publishes every applied group that no
    /// unapplied one precedes into `last_sequence` and `applied_segment`, and returns once
    /// `ticket` itself is published.
    pub(super) fn applied_and_wait(&self, ticket: Ticket, last_sequence: &AtomicU64, applied_segment: &AtomicU64) {
        // One lock for both: a lone writer's group is the oldest and publishes at once.
        let mut pending = self.pending.lock();
        self.publish_applied(&mut pending, ticket, last_sequence, applied_segment);
        let published = || last_sequence.load(Ordering::Acquire) >= ticket.last_seq;
        if published() || MutexGuard::unlocked(&mut pending, || spin_wait::spin_until(published)) {
            return;
        }
        while pending.front().is_some_and(|p| p.last_seq <= ticket.last_seq) {
            self.published.wait(&mut pending);
        }
    }

    /// [`PublishOrder::publish_applied`] under its own lock.
    #[cfg(test)]
    fn applied(&self, ticket: Ticket, last_sequence: &AtomicU64, applied_segment: &AtomicU64) {
        self.publish_applied(&mut self.pending.lock(), ticket, last_sequence, applied_segment);
    }

    /// Marks `ticket`'s group applied and publishes the applied groups from the oldest on.
    fn publish_applied(
        &self,
        pending: &mut VecDeque<Pending>,
        ticket: Ticket,
        last_sequence: &AtomicU64,
        applied_segment: &AtomicU64,
    ) {
        if let Some(p) = pending.iter_mut().find(|p| p.last_seq == ticket.last_seq) {
            p.applied = true;
        }
        let mut advanced = false;
        while pending.front().is_some_and(|p| p.applied) {
            let Some(p) = pending.pop_front() else { break };
            // Segment first: a reader that sees the sequence number may rely on the segment.
            applied_segment.fetch_max(p.segment, Ordering::Release);
            last_sequence.fetch_max(p.last_seq, Ordering::Release);
            advanced = true;
        }
        if advanced {
            self.published.notify_all();
        }
    }

    /// True if no registered group awaits publication.
    pub(super) fn is_idle(&self) -> bool {
        self.pending.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_group_applied_early_is_published_only_with_the_older_one() {
        let order = PublishOrder::default();
        let (seq, seg) = (AtomicU64::new(0), AtomicU64::new(0));
        let older = order.register(5, 1);
        let newer = order.register(9, 2);
        order.applied(newer, &seq, &seg);
        assert_eq!((seq.load(Ordering::Acquire), seg.load(Ordering::Acquire)), (0, 0));
        assert!(!order.is_idle());
        order.applied(older, &seq, &seg);
        assert_eq!((seq.load(Ordering::Acquire), seg.load(Ordering::Acquire)), (9, 2));
        assert!(order.is_idle());
    }

    #[test]
    fn a_waiter_returns_once_the_older_group_is_applied() {
        let order = Arc::new(PublishOrder::default());
        let (seq, seg) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let older = order.register(5, 1);
        let newer = order.register(9, 2);
        let waiter = {
            let (order, seq, seg) = (Arc::clone(&order), Arc::clone(&seq), Arc::clone(&seg));
            std::thread::spawn(move || {
                order.applied_and_wait(newer, &seq, &seg);
                seq.load(Ordering::Acquire)
            })
        };
        order.applied_and_wait(older, &seq, &seg);
        assert_eq!(waiter.join().ok(), Some(9));
    }

    #[test]
    fn groups_applied_in_order_publish_at_once() {
        let order = PublishOrder::default();
        let (seq, seg) = (AtomicU64::new(0), AtomicU64::new(0));
        let t = order.register(3, 0);
        order.applied_and_wait(t, &seq, &seg);
        assert_eq!(seq.load(Ordering::Acquire), 3);
        let t = order.register(4, 1);
        order.applied_and_wait(t, &seq, &seg);
        assert_eq!((seq.load(Ordering::Acquire), seg.load(Ordering::Acquire)), (4, 1));
    }
}
