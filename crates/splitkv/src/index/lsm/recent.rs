//! What the LSM index remembers of recent writes after their memtables were flushed: the key
//! filters of the last few flushed memtables ([`TouchedKeys`]), so that it can tell from memory
//! that a key was not written since a given sequence number ([`crate::index::Index::unchanged_since`]).
//!
//! GC asks that question twice per record it keeps: the scan, to prove that a record the last
//! garbage survey found current is still current (no lookup), and the write leader, to re-check
//! a copy. With only the memtables' own filters the answer was "cannot tell" as soon as one
//! flush fell after the sequence number asked about, which for a survey is almost always: a
//! survey is due once a quarter of the log is written, several memtables' worth.
//!
//! Invariant: every write with a sequence number above `forgotten_through` is in a memtable of
//! the same [`super::SuperVersion`] or in `flushed`. Memtables hold disjoint, increasing ranges
//! of sequence numbers (the memtable is frozen only by a write leader that runs alone), so
//! forgetting the oldest filter raises `forgotten_through` to its memtable's largest number.
//! An empty memtable is flushed too (a forced flush after the log head moved) and reports 0 as
//! its largest number, so the kept filters are not in order of that number: a question compares
//! every filter's bound, never stops at the first old one.

use crate::memtable::{Memtable, TouchedKeys};
use crate::types::SequenceNumber;

/// Flushed memtables whose key filters are kept. A probe of a kept filter costs about one cache
/// miss, and a question about sequence number `s` probes each filter newer than `s`; at 16 the
/// worst case stays below the cost of the point lookup it replaces. A filter is about 10 bits
/// per key the memtable was sized for (128 KiB per 8 MiB memtable, 2 MiB for all 16).
const KEPT_FLUSHES: usize = 16;

/// The key filters of recently flushed memtables, oldest first (see the module documentation).
pub(super) struct RecentFlushes {
    forgotten_through: SequenceNumber,
    flushed: Vec<TouchedKeys>,
}

impl RecentFlushes {
    /// Nothing remembered: every write up to `forgotten_through` is in a table.
    pub(super) fn new(forgotten_through: SequenceNumber) -> Self {
        RecentFlushes { forgotten_through, flushed: Vec::new() }
    }

    /// These, plus what the frozen memtable `flushed` wrote (its entries just moved to tables),
    /// forgetting the oldest past [`KEPT_FLUSHES`].
    pub(super) fn with_flushed(&self, flushed: &Memtable) -> Self {
        let mut kept: Vec<TouchedKeys> = self.flushed.clone();
        kept.push(flushed.touched_keys());
        let mut forgotten_through = self.forgotten_through;
        let forget = kept.len().saturating_sub(KEPT_FLUSHES);
        for old in kept.drain(..forget) {
            forgotten_through = forgotten_through.max(old.max_sequence());
        }
        RecentFlushes { forgotten_through, flushed: kept }
    }

    /// False only if no write newer than `seq` that has left the memtables touched `user_key`
    /// (the caller asks the memtables themselves).
    pub(super) fn may_have_touched_since(&self, user_key: &[u8], seq: SequenceNumber) -> bool {
        // Every bound is compared (see the module documentation): a comparison is nothing next
        // to a probe.
        self.forgotten_through > seq
            || self.flushed.iter().any(|f| f.max_sequence() > seq && f.may_have_touched(user_key))
    }

    /// Bytes of memory the kept filters hold.
    pub(super) fn memory_bytes(&self) -> usize {
        self.flushed.iter().map(TouchedKeys::memory_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LogPosition, SegmentId, ValueKind};

    fn memtable(keys: &[&[u8]], first_seq: u64) -> Memtable {
        let mem = Memtable::new(LogPosition { segment: SegmentId(1), offset: 0 }, 1 << 20);
        for (i, key) in keys.iter().enumerate() {
            mem.insert(key, SequenceNumber(first_seq + i as u64), ValueKind::Inline, b"v");
        }
        mem
    }

    #[test]
    fn a_flushed_write_is_remembered_until_its_filter_is_forgotten() {
        let mut recent = RecentFlushes::new(SequenceNumber(10));
        assert!(recent.may_have_touched_since(b"a", SequenceNumber(9)), "writes up to 10 are forgotten");
        assert!(!recent.may_have_touched_since(b"a", SequenceNumber(10)));
        recent = recent.with_flushed(&memtable(&[b"a", b"b"], 11)); // sequence numbers 11 and 12
        assert!(recent.may_have_touched_since(b"a", SequenceNumber(10)));
        assert!(recent.may_have_touched_since(b"b", SequenceNumber(11)));
        assert!(!recent.may_have_touched_since(b"a", SequenceNumber(12)), "nothing after 12 was flushed");
        assert!(!recent.may_have_touched_since(b"zz", SequenceNumber(10)), "zz was never written");
        // More flushes than are kept: the oldest filter goes, and with it the proof for numbers
        // it covered.
        for n in 0..KEPT_FLUSHES as u64 {
            recent = recent.with_flushed(&memtable(&[b"c"], 100 + n));
        }
        assert!(recent.may_have_touched_since(b"zz", SequenceNumber(10)), "can no longer tell");
        assert!(!recent.may_have_touched_since(b"zz", SequenceNumber(12)));
        assert!(recent.may_have_touched_since(b"c", SequenceNumber(12)));
        assert!(recent.memory_bytes() > 0);
    }

    #[test]
    fn an_empty_flushed_memtable_hides_no_older_write() {
        let recent =
            RecentFlushes::new(SequenceNumber(10)).with_flushed(&memtable(&[b"a"], 11)).with_flushed(&memtable(&[], 0));
        assert!(recent.may_have_touched_since(b"a", SequenceNumber(10)));
    }

    #[test]
    fn a_flushed_range_delete_may_have_touched_any_key() {
        let mem = memtable(&[b"a"], 11);
        mem.delete_range(b"m", b"n", SequenceNumber(12));
        let recent = RecentFlushes::new(SequenceNumber(10)).with_flushed(&mem);
        assert!(recent.may_have_touched_since(b"zz", SequenceNumber(10)));
        assert!(!recent.may_have_touched_since(b"zz", SequenceNumber(12)));
    }
}
