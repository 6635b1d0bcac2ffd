//! An [`InternalIterator`] over an owned, in-memory list of entries.
//!
//! Used wherever a small sorted run is already materialised (tests, compaction fixtures, the
//! output of a filter) and as the reference cursor the other iterators are checked against.
//! Invariant: `entries` is sorted by [`compare_internal_keys`]; construction sorts stably, so
//! entries with identical keys keep the order they were given in. Exclusively owned, no locking.

use std::cmp::Ordering;

use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::compare_internal_keys;
use crate::Result;

/// A cursor over a sorted `Vec` of `(internal key, value)` pairs.
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Index of the current entry; `entries.len()` means exhausted.
    position: usize,
}

impl VecIterator {
    /// Takes ownership of `entries` and sorts them into internal-key order. Starts unpositioned.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let position = entries.len();
        VecIterator { entries, position }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.position < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.position = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        // An empty list leaves `position == len`, i.e. exhausted.
        self.position = self.entries.len().saturating_sub(1);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position = self.entries.partition_point(|(key, _)| compare_internal_keys(key, target) == Ordering::Less);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.position = (self.position + 1).min(self.entries.len());
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.position = match self.position {
            0 => self.entries.len(),
            p => p - 1,
        };
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entries.get(self.position).map_or(&[], |(key, _)| key)
    }

    fn value(&self) -> &[u8] {
        self.entries.get(self.position).map_or(&[], |(_, value)| value)
    }

    fn entry_origin(&self) -> EntryOrigin {
        if self.valid() {
            EntryOrigin::Memory
        } else {
            EntryOrigin::Unpositioned
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{internal_key, seek_key, SequenceNumber, ValueKind};

    fn ikey(user: &str, seq: u64) -> Vec<u8> {
        internal_key(user.as_bytes(), SequenceNumber(seq), ValueKind::Inline)
    }

    #[test]
    fn sorts_on_construction_and_walks_both_ways() -> Result<()> {
        let mut it = VecIterator::new(vec![
            (ikey("b", 1), b"b1".to_vec()),
            (ikey("a", 1), b"a1".to_vec()),
            (ikey("a", 5), b"a5".to_vec()),
        ]);
        assert!(!it.valid());
        it.seek_to_first()?;
        let mut forward = Vec::new();
        while it.valid() {
            forward.push(it.value().to_vec());
            it.next()?;
        }
        assert_eq!(forward, vec![b"a5".to_vec(), b"a1".to_vec(), b"b1".to_vec()]);
        it.seek_to_last()?;
        let mut backward = Vec::new();
        while it.valid() {
            backward.push(it.value().to_vec());
            it.prev()?;
        }
        forward.reverse();
        assert_eq!(backward, forward);
        Ok(())
    }

    #[test]
    fn seek_lands_on_first_entry_not_below_target() -> Result<()> {
        let mut it = VecIterator::new(vec![(ikey("a", 5), vec![]), (ikey("a", 1), vec![]), (ikey("c", 1), vec![])]);
        it.seek(&seek_key(b"a", SequenceNumber(3)))?;
        assert_eq!(it.key(), ikey("a", 1));
        it.seek(&seek_key(b"b", SequenceNumber(3)))?;
        assert_eq!(it.key(), ikey("c", 1));
        it.seek(&seek_key(b"d", SequenceNumber(3)))?;
        assert!(!it.valid());
        Ok(())
    }

    #[test]
    fn empty_list_is_never_valid() -> Result<()> {
        let mut it = VecIterator::new(Vec::new());
        it.seek_to_first()?;
        assert!(!it.valid());
        it.seek_to_last()?;
        assert!(!it.valid());
        it.seek(b"anything")?;
        assert!(!it.valid());
        assert_eq!(it.key(), b"");
        Ok(())
    }
}
