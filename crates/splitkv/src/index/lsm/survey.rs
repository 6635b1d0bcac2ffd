//! Garbage surveys of the LSM index: one walk over every version of every key, counting the
//! value-log bytes still reachable per segment.
//!
//! A version is dead when its next newer version is at or below the survey's horizon (no reader
//! can see it); every other pointer is live. Compactions are excluded for the walk and the
//! caller's record of its result (a drop the walk counted as live and published before the
//! record would be overwritten by it); flushes go on, since they only charge segments the
//! survey leaves out.

use std::collections::{BTreeMap, HashSet};

use super::Shared;
use crate::error::Result;
use crate::index::LiveCount;
use crate::iter::{entry_pointer, InternalIterator};
use crate::types::{parse_internal_key, SegmentId, SequenceNumber};

impl Shared {
    /// See [`crate::index::Index::survey_live`].
    pub(super) fn survey_live(
        &self,
        horizon: SequenceNumber,
        applied_before: SegmentId,
        record: &mut dyn FnMut(&LiveCount) -> Result<()>,
    ) -> Result<()> {
        let _no_compactions = self.compaction_lock.write();
        let surveyed = self.surveyable_segments(applied_before);
        let mut live = SegmentTally::new(&surveyed);
        // Every version, range-deleted ones included: their drops are charged as they happen.
        let mut it = self.iter(None, false)?;
        it.seek_to_first()?;
        // The current user key (reused: a survey visits every key) and the sequence number of
        // its last version seen, which is newer than the one at hand.
        let mut key: Vec<u8> = Vec::new();
        let mut newer: Option<SequenceNumber> = None;
        while it.valid() {
            let Some(parsed) = parse_internal_key(it.key()) else {
                return Err(it.entry_origin().corruption("malformed internal key in the index"));
            };
            if newer.is_none() || key != parsed.user_key {
                key.clear();
                key.extend_from_slice(parsed.user_key);
                newer = None;
            }
            let shadowed = newer.is_some_and(|n| n <= horizon);
            if !shadowed {
                if let Some(ptr) = entry_pointer(&it, parsed.kind)? {
                    live.add(ptr.segment, u64::from(ptr.len));
                }
            }
            newer = Some(parsed.sequence);
            it.next()?;
        }
        drop(it);
        record(&LiveCount { live: live.into_map(), surveyed })
    }

    /// The segments a survey can count exactly: every live one before `applied_before` (records
    /// are applied in log order, so all of theirs are in the index), except those holding
    /// records of inline values or deletes in a memtable, whose flush charges them itself.
    fn surveyable_segments(&self, applied_before: SegmentId) -> HashSet<SegmentId> {
        let state = self.state.lock();
        let mut pending = state.mem.log_garbage();
        if let Some(imm) = &state.imm {
            pending.extend(imm.log_garbage());
        }
        drop(state);
        self.log
            .segments()
            .into_iter()
            .map(|seg| seg.id)
            .filter(|id| *id < applied_before && !pending.contains_key(id))
            .collect()
    }
}

/// Live bytes per surveyed segment, in a table indexed by segment number: the walk adds to it
/// once per version of every key, where a hashed or ordered map costs a search each time.
struct SegmentTally {
    first: u64,
    /// Per segment from `first`: its live bytes, `None` for a segment not surveyed.
    bytes: Vec<Option<u64>>,
}

impl SegmentTally {
    fn new(surveyed: &HashSet<SegmentId>) -> Self {
        let first = surveyed.iter().map(|s| s.0).min().unwrap_or(0);
        let last = surveyed.iter().map(|s| s.0).max().unwrap_or(0);
        let mut bytes = vec![None; if surveyed.is_empty() { 0 } else { (last - first + 1) as usize }];
        for id in surveyed {
            bytes[(id.0 - first) as usize] = Some(0);
        }
        SegmentTally { first, bytes }
    }

    /// Adds `len` bytes to `segment` if it is surveyed.
    fn add(&mut self, segment: SegmentId, len: u64) {
        let slot = segment.0.checked_sub(self.first).and_then(|i| self.bytes.get_mut(usize::try_from(i).ok()?));
        if let Some(Some(bytes)) = slot {
            *bytes += len;
        }
    }

    /// The surveyed segments with live bytes.
    fn into_map(self) -> BTreeMap<SegmentId, u64> {
        let first = self.first;
        self.bytes
            .into_iter()
            .enumerate()
            .filter_map(|(i, bytes)| bytes.filter(|&b| b > 0).map(|b| (SegmentId(first + i as u64), b)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_counts_only_surveyed_segments() {
        let surveyed: HashSet<SegmentId> = [SegmentId(7), SegmentId(9), SegmentId(12)].into_iter().collect();
        let mut tally = SegmentTally::new(&surveyed);
        for (segment, len) in [(7, 10), (8, 100), (9, 1), (9, 2), (3, 1000), (13, 1000), (u64::MAX, 5)] {
            tally.add(SegmentId(segment), len);
        }
        let expected: BTreeMap<SegmentId, u64> = [(SegmentId(7), 10), (SegmentId(9), 3)].into_iter().collect();
        assert_eq!(tally.into_map(), expected, "12 was surveyed but holds nothing live");
        assert!(SegmentTally::new(&HashSet::new()).into_map().is_empty());
    }
}
