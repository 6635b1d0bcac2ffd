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
        let mut live: BTreeMap<SegmentId, u64> = BTreeMap::new();
        // Every version, range-deleted ones included: their drops are charged as they happen.
        let mut it = self.iter(None, false)?;
        it.seek_to_first()?;
        let mut key: Option<Vec<u8>> = None;
        let mut newer: Option<SequenceNumber> = None;
        while it.valid() {
            let Some(parsed) = parse_internal_key(it.key()) else {
                return Err(it.entry_origin().corruption("malformed internal key in the index"));
            };
            if key.as_deref() != Some(parsed.user_key) {
                key = Some(parsed.user_key.to_vec());
                newer = None;
            }
            let shadowed = newer.is_some_and(|n| n <= horizon);
            let pointer = if shadowed { None } else { entry_pointer(&it, parsed.kind)? };
            if let Some(ptr) = pointer.filter(|p| surveyed.contains(&p.segment)) {
                *live.entry(ptr.segment).or_default() += u64::from(ptr.len);
            }
            newer = Some(parsed.sequence);
            it.next()?;
        }
        drop(it);
        record(&LiveCount { surveyed, live })
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
