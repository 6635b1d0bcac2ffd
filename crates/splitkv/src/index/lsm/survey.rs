//! Garbage surveys of the LSM index: one walk over every version of every key, counting the
//! value-log bytes still reachable per segment.
//!
//! A version is dead when its next newer version is at or below the survey's horizon (no reader
//! can see it); every other pointer is live, and marked in its segment's [`LiveMap`], so that GC
//! can drop the records it does not mark without looking them up.
//!
//! The newest version of each key, if it is a pointer, is also marked current, so that GC can
//! keep a record without a lookup when the index can tell that its key was not written since
//! ([`crate::index::Index::unchanged_since`]). That mark is exact or absent: it is made only when
//! granules hold one record each, and only when the tree holds no range delete (a newest version
//! that a range delete covers is not current). Its sequence number is
//! read before the walk's view is taken, so the walk sees every write at or below it; a newest
//! version written after it is marked too, but its own write then fails the "not written since"
//! test, so it is never kept on the map's word alone.
//!
//! Compactions are excluded for the walk and the caller's record of its result (a drop the walk
//! counted as live and published before the record would be overwritten by it). Flushes and the
//! dropping of tables a range delete covers go on: they can charge a surveyed segment for
//! range-deleted pointers during the walk, and the record then overwrites that charge, so the
//! segment's garbage is undercounted until the next survey. That only delays GC; the maps are
//! unaffected (the walk sees range-deleted versions and marks them, more than needed).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;

use super::Shared;
use crate::error::Result;
use crate::index::LiveCount;
use crate::iter::{entry_pointer, InternalIterator};
use crate::types::{parse_internal_key, SegmentId, SequenceNumber};
use crate::vlog::live_map::{granule_shift, LiveMap};

/// Most granules the record maps of one survey hold together: 16-byte granules up to 2 GiB of
/// surveyed log, coarser beyond; 16 MiB of maps, or 32 MiB at 16-byte granules with a current
/// bit beside each reachable one.
const MAX_LIVE_MAP_GRANULES: u64 = 1 << 27;

impl Shared {
    /// See [`crate::index::Index::survey_live`].
    pub(super) fn survey_live(
        &self,
        horizon: SequenceNumber,
        applied_before: SegmentId,
        record: &mut dyn FnMut(LiveCount) -> Result<()>,
    ) -> Result<()> {
        let _no_compactions = self.compaction_lock.write();
        let surveyed = self.surveyable_segments(applied_before);
        let current_at = SequenceNumber(self.last_sequence.load(Ordering::Acquire));
        let sv = self.super_version();
        let range_deletes =
            !sv.version.range_tombstones().is_empty() || sv.memtables().any(|m| !m.range_tombstones().is_empty());
        drop(sv);
        let mut live = SegmentTally::new(&surveyed, !range_deletes);
        let mut indexed_live = 0;
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
                    if newer.is_none() {
                        indexed_live += u64::from(ptr.len);
                    }
                    live.add(ptr.segment, ptr.offset, u64::from(ptr.len), newer.is_none());
                }
            }
            newer = Some(parsed.sequence);
            it.next()?;
        }
        drop(it);
        let (live, reachable) = live.into_maps();
        record(LiveCount { live, reachable, current_at, surveyed: surveyed.into_keys().collect(), indexed_live })
    }

    /// The segments a survey can count exactly, with their lengths: every live one before `applied_before` (records
    /// are applied in log order, so all of theirs are in the index), except those holding
    /// records of inline values or deletes in a memtable, whose flush charges them itself.
    fn surveyable_segments(&self, applied_before: SegmentId) -> HashMap<SegmentId, u64> {
        let state = self.state.lock();
        let mut pending = state.mem.log_garbage();
        if let Some(imm) = &state.imm {
            pending.extend(imm.log_garbage());
        }
        drop(state);
        self.log
            .segments()
            .into_iter()
            .filter(|seg| seg.id < applied_before && !pending.contains_key(&seg.id))
            // Record maps are indexed by the offsets pointers name, which in a compacted
            // segment reach past its length.
            .map(|seg| (seg.id, seg.extent))
            .collect()
    }
}

/// Marks a survey has asked the CPU for but not yet made. The walk visits keys in order and
/// their records lie all over the log, so each mark is a cache miss in a map of several MiB;
/// made this many pointers later, the word has arrived meanwhile.
const MARKS_IN_FLIGHT: usize = 16;

/// Live bytes and reachable (and current) records per surveyed segment, in a table indexed by
/// segment number: the walk adds to it once per version of every key, where a hashed or ordered
/// map costs a search each time.
struct SegmentTally {
    first: u64,
    /// Per segment from `first`: its live bytes and records, `None` for a segment not surveyed.
    segments: Vec<Option<(u64, LiveMap)>>,
    /// Marks to make, oldest first: index into `segments`, offset, newest.
    in_flight: VecDeque<(usize, u64, bool)>,
}

impl SegmentTally {
    /// A tally of the `surveyed` segments, given with their lengths; with `track_current`, also
    /// of their current records (where a granule holds one record).
    fn new(surveyed: &HashMap<SegmentId, u64>, track_current: bool) -> Self {
        let first = surveyed.keys().map(|s| s.0).min().unwrap_or(0);
        let last = surveyed.keys().map(|s| s.0).max().unwrap_or(0);
        let shift = granule_shift(surveyed.values().sum(), MAX_LIVE_MAP_GRANULES);
        let mut segments = vec![None; if surveyed.is_empty() { 0 } else { (last - first + 1) as usize }];
        for (id, len) in surveyed {
            segments[(id.0 - first) as usize] = Some((0, LiveMap::new(*len, shift, track_current)));
        }
        SegmentTally { first, segments, in_flight: VecDeque::with_capacity(MARKS_IN_FLIGHT + 1) }
    }

    /// Adds the live record of `len` bytes at `offset` of `segment`, if it is surveyed; `newest`
    /// if it is its key's newest version. Its mark is made [`MARKS_IN_FLIGHT`] adds later.
    fn add(&mut self, segment: SegmentId, offset: u64, len: u64, newest: bool) {
        let Some(index) = segment.0.checked_sub(self.first).and_then(|i| usize::try_from(i).ok()) else { return };
        let Some(Some((bytes, map))) = self.segments.get_mut(index) else { return };
        *bytes += len;
        map.prefetch(offset);
        self.in_flight.push_back((index, offset, newest));
        if self.in_flight.len() > MARKS_IN_FLIGHT {
            self.mark_oldest();
        }
    }

    /// Makes the oldest mark in flight.
    fn mark_oldest(&mut self) {
        if let Some((index, offset, newest)) = self.in_flight.pop_front() {
            if let Some(Some((_, map))) = self.segments.get_mut(index) {
                map.mark(offset, newest);
            }
        }
    }

    /// The surveyed segments' live bytes (those with any) and record maps (all).
    fn into_maps(mut self) -> (BTreeMap<SegmentId, u64>, BTreeMap<SegmentId, LiveMap>) {
        while !self.in_flight.is_empty() {
            self.mark_oldest();
        }
        let mut live = BTreeMap::new();
        let mut reachable = BTreeMap::new();
        for (i, slot) in self.segments.into_iter().enumerate() {
            if let Some((bytes, map)) = slot {
                let id = SegmentId(self.first + i as u64);
                if bytes > 0 {
                    live.insert(id, bytes);
                }
                reachable.insert(id, map);
            }
        }
        (live, reachable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_counts_only_surveyed_segments() {
        let surveyed: HashMap<SegmentId, u64> =
            [(SegmentId(7), 4096), (SegmentId(9), 4096), (SegmentId(12), 4096)].into_iter().collect();
        let mut tally = SegmentTally::new(&surveyed, true);
        for (segment, offset, len, newest) in [
            (7, 64, 10, true),
            (8, 64, 100, true),
            (9, 128, 1, false),
            (9, 256, 2, true),
            (3, 64, 1000, true),
            (13, 64, 1000, true),
            (u64::MAX, 64, 5, true),
        ] {
            tally.add(SegmentId(segment), offset, len, newest);
        }
        let (live, reachable) = tally.into_maps();
        let expected: BTreeMap<SegmentId, u64> = [(SegmentId(7), 10), (SegmentId(9), 3)].into_iter().collect();
        assert_eq!(live, expected, "12 was surveyed but holds nothing live");
        assert_eq!(reachable.keys().copied().collect::<Vec<_>>(), [SegmentId(7), SegmentId(9), SegmentId(12)]);
        assert!(reachable[&SegmentId(7)].may_be_reachable(64) && !reachable[&SegmentId(7)].may_be_reachable(128));
        assert!(reachable[&SegmentId(9)].may_be_reachable(128) && reachable[&SegmentId(9)].may_be_reachable(256));
        assert!(!reachable[&SegmentId(9)].may_be_reachable(64), "nothing live at 64 in 9");
        assert!(!reachable[&SegmentId(12)].may_be_reachable(64), "nothing live in 12");
        // Only newest versions are current.
        assert!(reachable[&SegmentId(7)].was_current(64));
        assert!(!reachable[&SegmentId(9)].was_current(128), "an older version a snapshot reads is not current");
        assert!(reachable[&SegmentId(9)].was_current(256));
        let (live, reachable) = SegmentTally::new(&HashMap::new(), true).into_maps();
        assert!(live.is_empty() && reachable.is_empty());
    }

    #[test]
    fn every_mark_in_flight_is_made_and_made_as_given() {
        // Far more adds than marks in flight, spread over segments as a walk's are.
        let surveyed: HashMap<SegmentId, u64> = (1..=3).map(|i| (SegmentId(i), 1 << 16)).collect();
        let mut tally = SegmentTally::new(&surveyed, true);
        let mut expected: BTreeMap<SegmentId, LiveMap> =
            surveyed.iter().map(|(id, len)| (*id, LiveMap::new(*len, granule_shift(3 << 16, 1 << 27), true))).collect();
        let mut state = 12345u64;
        for i in 0..1000u64 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (segment, offset, newest) = (SegmentId(1 + (state >> 60) % 3), (state >> 20) % (1 << 16), i % 3 != 0);
            tally.add(segment, offset, 1, newest);
            expected.get_mut(&segment).unwrap().mark(offset, newest);
        }
        let (live, reachable) = tally.into_maps();
        assert_eq!(live.values().sum::<u64>(), 1000);
        assert_eq!(reachable, expected);
    }

    #[test]
    fn current_records_are_tracked_only_when_asked_and_one_per_granule() {
        let small: HashMap<SegmentId, u64> = [(SegmentId(1), 4096)].into_iter().collect();
        let mut tally = SegmentTally::new(&small, false);
        tally.add(SegmentId(1), 64, 100, true);
        assert!(!tally.into_maps().1[&SegmentId(1)].was_current(64), "not asked (range deletes)");
        // A log so large that granules grow past one record: no current marks.
        let large: HashMap<SegmentId, u64> = (0..200).map(|i| (SegmentId(i), 16 << 20)).collect();
        let mut tally = SegmentTally::new(&large, true);
        tally.add(SegmentId(3), 4096, 100, true);
        let (_, reachable) = tally.into_maps();
        assert!(reachable[&SegmentId(3)].may_be_reachable(4096));
        assert!(!reachable[&SegmentId(3)].was_current(4096));
    }
}
