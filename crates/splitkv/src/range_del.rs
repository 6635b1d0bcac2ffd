//! Range tombstones: `delete_range(start, end)` as data, and the fragmented form reads use.
//!
//! A [`RangeTombstone`] deletes every version of every key in `[start, end)` whose sequence
//! number is below its own. Coverage depends only on sequence numbers, never on where a version
//! is stored, so one tombstone covers the memtables and every level alike, and a reader at
//! sequence `r` honours only tombstones at or below `r` (a snapshot taken before the delete still
//! sees the data).
//!
//! Tombstones may overlap. [`Fragments`] cuts them at every start and end into disjoint pieces,
//! each listing the sequence numbers of the tombstones over it (newest first), so the question
//! "which tombstone covers this key?" is one binary search. Fragments are built once per
//! memtable change and once per version, never per read.
//!
//! Thread-safety: plain immutable data, `Send + Sync`.

use std::collections::BTreeMap;

use crate::types::SequenceNumber;

/// `[start, end)` deleted at `seq`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RangeTombstone {
    /// First user key deleted.
    pub start: Vec<u8>,
    /// First user key after the deleted range (exclusive).
    pub end: Vec<u8>,
    /// Sequence number of the delete: versions below it are covered.
    pub seq: SequenceNumber,
}

impl RangeTombstone {
    /// True if `user_key` lies in `[start, end)`.
    pub fn contains(&self, user_key: &[u8]) -> bool {
        self.start.as_slice() <= user_key && user_key < self.end.as_slice()
    }

    /// True if `[start, end)` intersects the closed user-key range `[smallest, largest]`.
    pub fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.start.as_slice() <= largest && smallest < self.end.as_slice()
    }
}

/// Disjoint pieces of a set of tombstones, for lookups (see the module header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fragments {
    /// Start of each piece, ascending; pieces are disjoint.
    starts: Vec<Vec<u8>>,
    /// End (exclusive) of each piece.
    ends: Vec<Vec<u8>>,
    /// Sequence numbers of the tombstones over each piece, descending.
    seqs: Vec<Vec<SequenceNumber>>,
}

impl Fragments {
    /// Fragments `tombstones` (any order, overlaps allowed; empty ranges are ignored).
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Fragments {
        // Sweep over the boundaries: at each one, the tombstones that start there join the
        // active set and those that end there leave it.
        let mut events: BTreeMap<&[u8], (Vec<SequenceNumber>, Vec<SequenceNumber>)> = BTreeMap::new();
        for t in tombstones {
            if t.start >= t.end {
                continue;
            }
            events.entry(&t.start).or_default().0.push(t.seq);
            events.entry(&t.end).or_default().1.push(t.seq);
        }
        let mut active: BTreeMap<SequenceNumber, usize> = BTreeMap::new();
        let mut out = Fragments::default();
        let mut open: Option<&[u8]> = None;
        for (point, (starting, ending)) in events {
            if let Some(start) = open {
                if !active.is_empty() {
                    out.starts.push(start.to_vec());
                    out.ends.push(point.to_vec());
                    out.seqs.push(active.keys().rev().copied().collect());
                }
            }
            for seq in ending {
                if let Some(count) = active.get_mut(&seq) {
                    *count -= 1;
                    if *count == 0 {
                        active.remove(&seq);
                    }
                }
            }
            for seq in starting {
                *active.entry(seq).or_default() += 1;
            }
            open = Some(point);
        }
        out
    }

    /// True if there are no tombstones.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Number of disjoint pieces.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// The tombstone sequence numbers over `user_key`, newest first (empty if none).
    fn seqs_at(&self, user_key: &[u8]) -> &[SequenceNumber] {
        let after = self.starts.partition_point(|s| s.as_slice() <= user_key);
        match after.checked_sub(1) {
            Some(i) if user_key < self.ends[i].as_slice() => &self.seqs[i],
            _ => &[],
        }
    }

    /// The newest tombstone over `user_key` that a reader at `read_seq` sees (`0` if none): the
    /// reader must ignore every version of the key below it.
    pub fn covering(&self, user_key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        self.seqs_at(user_key).iter().copied().find(|&s| s <= read_seq).unwrap_or_default()
    }

    /// The oldest tombstone over `user_key` newer than `seq`: the delete that made a version at
    /// `seq` invisible first (compaction may drop the version if no snapshot lies between them).
    pub fn first_covering_above(&self, user_key: &[u8], seq: SequenceNumber) -> Option<SequenceNumber> {
        self.seqs_at(user_key).iter().rev().copied().find(|&s| s > seq)
    }

    /// True if a version of `user_key` at `seq` is covered for a reader at `read_seq`.
    pub fn covers(&self, user_key: &[u8], seq: SequenceNumber, read_seq: SequenceNumber) -> bool {
        seq <= read_seq && seq < self.covering(user_key, read_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone { start: start.into(), end: end.into(), seq: SequenceNumber(seq) }
    }

    #[test]
    fn overlapping_tombstones_fragment_into_disjoint_pieces() {
        let f = Fragments::new(&[t("b", "f", 10), t("d", "h", 20), t("x", "x", 30)]);
        assert_eq!(f.len(), 3);
        assert_eq!(f.covering(b"a", SequenceNumber(100)), SequenceNumber(0));
        assert_eq!(f.covering(b"c", SequenceNumber(100)), SequenceNumber(10));
        assert_eq!(f.covering(b"e", SequenceNumber(100)), SequenceNumber(20));
        assert_eq!(f.covering(b"e", SequenceNumber(15)), SequenceNumber(10));
        assert_eq!(f.covering(b"e", SequenceNumber(5)), SequenceNumber(0));
        assert_eq!(f.covering(b"g", SequenceNumber(100)), SequenceNumber(20));
        assert_eq!(f.covering(b"h", SequenceNumber(100)), SequenceNumber(0), "end is exclusive");
        assert_eq!(f.covering(b"x", SequenceNumber(100)), SequenceNumber(0), "empty range ignored");
    }

    #[test]
    fn coverage_follows_sequence_numbers() {
        let f = Fragments::new(&[t("a", "m", 10), t("c", "e", 30)]);
        // Versions below the tombstone are covered for readers that see it.
        assert!(f.covers(b"d", SequenceNumber(9), SequenceNumber(50)));
        assert!(f.covers(b"d", SequenceNumber(29), SequenceNumber(50)));
        assert!(!f.covers(b"d", SequenceNumber(31), SequenceNumber(50)), "written after the delete");
        assert!(!f.covers(b"d", SequenceNumber(9), SequenceNumber(9)), "snapshot before the delete");
        assert_eq!(f.first_covering_above(b"d", SequenceNumber(5)), Some(SequenceNumber(10)));
        assert_eq!(f.first_covering_above(b"d", SequenceNumber(10)), Some(SequenceNumber(30)));
        assert_eq!(f.first_covering_above(b"d", SequenceNumber(30)), None);
        assert_eq!(f.first_covering_above(b"z", SequenceNumber(0)), None);
    }

    #[test]
    fn identical_and_adjacent_tombstones() {
        let f = Fragments::new(&[t("a", "c", 5), t("a", "c", 5), t("c", "e", 7)]);
        assert_eq!(f.covering(b"b", SequenceNumber(9)), SequenceNumber(5));
        assert_eq!(f.covering(b"c", SequenceNumber(9)), SequenceNumber(7));
        assert!(Fragments::new(&[]).is_empty());
    }
}
