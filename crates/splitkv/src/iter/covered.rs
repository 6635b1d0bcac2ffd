//! [`CoveredFilter`]: hides the entries that range deletes cover from a reader at one sequence
//! number.
//!
//! It wraps the merged cursor of an index, so the layers above (version selection, bounds,
//! value loading) never see a range-deleted entry. Coverage depends only on an entry's own key
//! and sequence number, so dropping entries one by one is consistent: if a version is covered,
//! every older version of its key is too. Entries above the read sequence pass through (the
//! database iterator ignores them anyway).
//!
//! Cost: one binary search per source of deletes (each memtable, the version: each keeps its
//! own fragments, so creating a cursor rebuilds nothing) per entry stepped over. A scan through a range
//! whose data is deleted but not yet compacted away still steps over every covered entry; the
//! partitioned layout avoids that by dropping whole tables (see `version::Version::files_covered_by`).

use std::sync::Arc;

use super::{EntryOrigin, InternalIterator};
use crate::range_del::Fragments;
use crate::types::{parse_internal_key, SequenceNumber};

/// An iterator that skips the entries any of `sources` covers for a reader at `read_seq`.
pub struct CoveredFilter<I> {
    inner: I,
    sources: Vec<Arc<Fragments>>,
    read_seq: SequenceNumber,
}

impl<I: InternalIterator> CoveredFilter<I> {
    /// Filters `inner`.
    pub fn new(inner: I, sources: Vec<Arc<Fragments>>, read_seq: SequenceNumber) -> Self {
        CoveredFilter { inner, sources, read_seq }
    }

    fn covered(&self) -> bool {
        // A malformed key passes through: the layer above reports it with its origin.
        parse_internal_key(self.inner.key()).is_some_and(|p| {
            p.sequence <= self.read_seq && self.sources.iter().any(|f| f.covers(p.user_key, p.sequence, self.read_seq))
        })
    }

    fn skip_forward(&mut self) -> crate::Result<()> {
        while self.inner.valid() && self.covered() {
            self.inner.next()?;
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> crate::Result<()> {
        while self.inner.valid() && self.covered() {
            self.inner.prev()?;
        }
        Ok(())
    }
}

impl<I: InternalIterator> InternalIterator for CoveredFilter<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.inner.seek_to_first()?;
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.inner.seek_to_last()?;
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        self.inner.seek(target)?;
        self.skip_forward()
    }

    fn next(&mut self) -> crate::Result<()> {
        self.inner.next()?;
        self.skip_forward()
    }

    fn prev(&mut self) -> crate::Result<()> {
        self.inner.prev()?;
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn entry_origin(&self) -> EntryOrigin {
        self.inner.entry_origin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::vec::VecIterator;
    use crate::range_del::RangeTombstone;
    use crate::types::{internal_key, ValueKind};

    fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for (key, seq) in [("a", 1), ("b", 9), ("b", 2), ("c", 3), ("d", 4)] {
            out.push((internal_key(key.as_bytes(), SequenceNumber(seq), ValueKind::Inline), b"v".to_vec()));
        }
        out
    }

    fn keys(it: &mut dyn InternalIterator, forward: bool) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        while it.valid() {
            let p = parse_internal_key(it.key()).unwrap();
            out.push((String::from_utf8(p.user_key.to_vec()).unwrap(), p.sequence.0));
            if forward {
                it.next().unwrap();
            } else {
                it.prev().unwrap();
            }
        }
        out
    }

    #[test]
    fn covered_entries_are_skipped_in_both_directions() {
        let t = RangeTombstone { start: b"b".to_vec(), end: b"d".to_vec(), seq: SequenceNumber(5) };
        let fragments = vec![Arc::new(Fragments::new(&[t])), Arc::new(Fragments::default())];
        let mut it = CoveredFilter::new(VecIterator::new(entries()), fragments.clone(), SequenceNumber(10));
        it.seek_to_first().unwrap();
        let expect = vec![("a".to_string(), 1), ("b".to_string(), 9), ("d".to_string(), 4)];
        assert_eq!(keys(&mut it, true), expect);
        it.seek_to_last().unwrap();
        assert_eq!(keys(&mut it, false), expect.into_iter().rev().collect::<Vec<_>>());
        it.seek(&internal_key(b"b", SequenceNumber(3), ValueKind::FOR_SEEK)).unwrap();
        assert_eq!(keys(&mut it, true), vec![("d".to_string(), 4)]);

        // A reader older than the delete sees everything.
        let mut old = CoveredFilter::new(VecIterator::new(entries()), fragments, SequenceNumber(4));
        old.seek_to_first().unwrap();
        assert_eq!(keys(&mut old, true).len(), 5);
    }
}
