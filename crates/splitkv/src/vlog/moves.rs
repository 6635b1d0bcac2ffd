//! Who may read and who may delete a segment while compactions move values out of it
//! (relocation through compaction, `Options::gc_in_compaction`), and which segments GC wants
//! them to empty.
//!
//! A compaction that moves values reads their records from the segments it *claims*; GC must
//! not delete a claimed segment under it. GC in turn announces a release before it deletes a
//! segment, and from then on no compaction may claim it. Both steps take one mutex, so a
//! segment is either claimed or being released, never both.
//!
//! A segment a compaction moved values out of is remembered as *moved out of* until it is
//! released. For such a segment two shortcuts GC takes elsewhere no longer hold: a garbage
//! survey's "current" bit (a move is not a write, so the key filters that vouch for a key never
//! saw it), and the sequence-number rule for readers (a moved pointer keeps its sequence number,
//! so a reader of the tree as it was before the move is not older than anything GC can name).
//!
//! Thread-safety: everything takes the one internal mutex briefly; nothing blocks.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::types::SegmentId;

#[derive(Default)]
struct State {
    /// Running compactions reading each segment.
    claimed: HashMap<SegmentId, u32>,
    /// Segments GC has begun to release.
    releasing: HashSet<SegmentId>,
    /// Segments a compaction moved values out of.
    moved_out: HashSet<SegmentId>,
}

/// Answers which of the given segments compactions should empty (GC's plan).
pub type MovePlanner = Arc<dyn Fn(&mut dyn Iterator<Item = SegmentId>) -> Vec<SegmentId> + Send + Sync>;

/// The claims of compactions that move values, and the releases of GC, on segments.
#[derive(Default)]
pub struct MoveClaims {
    state: Mutex<State>,
    /// Set once the database is open; asked without holding `state` (it asks GC, which asks
    /// back here).
    planner: RwLock<Option<MovePlanner>>,
}

impl MoveClaims {
    /// Claims each of `ids` that `is_live` and not being released, marks it moved out of, and
    /// returns the claimed ones; the caller must pass exactly those to [`MoveClaims::end`].
    /// (`is_live` is asked under the lock: a segment is forgotten only after it is gone.)
    pub fn claim(&self, ids: &[SegmentId], is_live: impl Fn(SegmentId) -> bool) -> Vec<SegmentId> {
        let mut state = self.state.lock();
        let claimed: Vec<SegmentId> =
            ids.iter().copied().filter(|&id| !state.releasing.contains(&id) && is_live(id)).collect();
        for &id in &claimed {
            *state.claimed.entry(id).or_default() += 1;
            state.moved_out.insert(id);
        }
        claimed
    }

    /// Ends claims taken by [`MoveClaims::claim`].
    pub fn end(&self, ids: &[SegmentId]) {
        let mut state = self.state.lock();
        for id in ids {
            if let Some(n) = state.claimed.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    state.claimed.remove(id);
                }
            }
        }
    }

    /// True if a running compaction reads segment `id`.
    pub fn is_claimed(&self, id: SegmentId) -> bool {
        self.state.lock().claimed.contains_key(&id)
    }

    /// True if a compaction moved values out of segment `id` since it was created.
    pub fn was_moved_out(&self, id: SegmentId) -> bool {
        self.state.lock().moved_out.contains(&id)
    }

    /// Begins the release of segment `id`: false (and nothing changes) while a compaction
    /// reads it; otherwise no compaction claims it from now on.
    pub fn begin_release(&self, id: SegmentId) -> bool {
        let mut state = self.state.lock();
        if state.claimed.contains_key(&id) {
            return false;
        }
        state.releasing.insert(id);
        true
    }

    /// Sets what [`MoveClaims::wanted_among`] asks.
    pub fn set_planner(&self, planner: MovePlanner) {
        *self.planner.write() = Some(planner);
    }

    /// Of `ids`, those GC wants compactions to empty now (none before a planner is set).
    pub fn wanted_among(&self, ids: &mut dyn Iterator<Item = SegmentId>) -> Vec<SegmentId> {
        let planner = self.planner.read().clone();
        planner.map_or_else(Vec::new, |plan| plan(ids))
    }

    /// Forgets a segment that is gone (no longer live for [`MoveClaims::claim`]'s `is_live`).
    pub fn forget(&self, id: SegmentId) {
        let mut state = self.state.lock();
        state.releasing.remove(&id);
        state.moved_out.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_segment_cannot_begin_its_release_and_a_released_one_cannot_be_claimed() {
        let claims = MoveClaims::default();
        let (a, b) = (SegmentId(1), SegmentId(2));
        assert!(claims.begin_release(b));
        let live = |_| true;
        assert_eq!(claims.claim(&[a, b], live), vec![a], "a segment being released is not claimed");
        assert!(claims.claim(&[SegmentId(3)], |_| false).is_empty(), "a segment that is gone is not claimed");
        assert!(claims.is_claimed(a) && !claims.is_claimed(b));
        assert!(claims.was_moved_out(a) && !claims.was_moved_out(b));
        assert!(!claims.begin_release(a), "a compaction reads it");
        assert_eq!(claims.claim(&[a], live), vec![a], "two compactions may read one segment");
        claims.end(&[a]);
        assert!(!claims.begin_release(a), "one compaction still reads it");
        claims.end(&[a]);
        assert!(claims.begin_release(a));
        assert!(claims.was_moved_out(a), "moved out of until forgotten");
        claims.forget(a);
        assert!(!claims.was_moved_out(a));
    }
}
