//! Which segments compactions that move values are using (relocation through compaction,
//! `Options::gc_in_compaction`), which GC is collecting, and which segments GC wants emptied.
//!
//! A compaction that moves values takes a [`MoveTicket`] that *claims* two kinds of segment
//! until it ends: those it reads values from, and those it appends moved records to. GC must
//! leave both alone. A segment read from must not be deleted or punched under the compaction.
//! A moved record appended to a segment is live only once the compaction publishes the table
//! that points at it; until then GC, which decides liveness by asking the index, would take it
//! for garbage. (The kill test found that one: `run_gc` sealed the head segment while a
//! compaction was still filling it, found every moved record unreferenced and punched them.)
//! GC takes a segment as its victim before it copies anything out of it, and from then on until
//! the segment is gone no compaction may claim it: its live values are being copied (moving
//! them too would relocate them twice). Both steps take one mutex, so a segment is either
//! claimed or GC's, never both. A run that ends without queueing the release (it punched holes,
//! or failed) gives the segment back.
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

/// One compaction's claims, from [`MoveClaims::claim`] to [`MoveClaims::end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MoveTicket(u64);

#[derive(Default)]
struct State {
    /// The segments each running compaction reads from and appends to.
    tickets: HashMap<MoveTicket, HashSet<SegmentId>>,
    next_ticket: u64,
    /// Segments GC has taken: from its pick until they are gone (or the run gives them back).
    collecting: HashSet<SegmentId>,
    /// Segments a compaction moved values out of.
    moved_out: HashSet<SegmentId>,
}

impl State {
    fn is_claimed(&self, id: SegmentId) -> bool {
        self.tickets.values().any(|claimed| claimed.contains(&id))
    }
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
    /// Starts a compaction's claims with each of `ids` that `is_live` and GC has not taken
    /// (those are returned, and marked moved out of). (`is_live` is asked under the
    /// lock: a segment is forgotten only after it is gone.)
    pub fn claim(&self, ids: &[SegmentId], is_live: impl Fn(SegmentId) -> bool) -> (MoveTicket, Vec<SegmentId>) {
        let mut state = self.state.lock();
        let claimed: Vec<SegmentId> =
            ids.iter().copied().filter(|&id| !state.collecting.contains(&id) && is_live(id)).collect();
        state.moved_out.extend(claimed.iter().copied());
        let ticket = MoveTicket(state.next_ticket);
        state.next_ticket += 1;
        state.tickets.insert(ticket, claimed.iter().copied().collect());
        (ticket, claimed)
    }

    /// Adds the segment a compaction appended moved records to (the active segment, which GC
    /// cannot be cleaning) to its claims.
    pub fn note_target(&self, ticket: MoveTicket, id: SegmentId) {
        if let Some(claimed) = self.state.lock().tickets.get_mut(&ticket) {
            claimed.insert(id);
        }
    }

    /// Ends a compaction's claims.
    pub fn end(&self, ticket: MoveTicket) {
        self.state.lock().tickets.remove(&ticket);
    }

    /// True if a running compaction reads segment `id` or appended moved records to it.
    pub fn is_claimed(&self, id: SegmentId) -> bool {
        self.state.lock().is_claimed(id)
    }

    /// True if a compaction moved values out of segment `id` since it was created.
    pub fn was_moved_out(&self, id: SegmentId) -> bool {
        self.state.lock().moved_out.contains(&id)
    }

    /// GC takes segment `id` (to clean it, or to release it): false (and nothing changes) while
    /// a compaction claims it; otherwise no compaction claims it from now on.
    pub fn begin_collecting(&self, id: SegmentId) -> bool {
        let mut state = self.state.lock();
        if state.is_claimed(id) {
            return false;
        }
        state.collecting.insert(id);
        true
    }

    /// Gives back a segment GC took but will not release (it punched it, or its run failed).
    pub fn end_collecting(&self, id: SegmentId) {
        self.state.lock().collecting.remove(&id);
    }

    /// Every segment running compactions claim (read from or append to).
    pub fn claimed(&self) -> HashSet<SegmentId> {
        self.state.lock().tickets.values().flatten().copied().collect()
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
        state.collecting.remove(&id);
        state.moved_out.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_segment_cannot_be_collected_and_a_collected_one_cannot_be_claimed() {
        let claims = MoveClaims::default();
        let (a, b, head) = (SegmentId(1), SegmentId(2), SegmentId(9));
        let live = |_| true;
        assert!(claims.begin_collecting(b));
        let (first, claimed) = claims.claim(&[a, b], live);
        assert_eq!(claimed, vec![a], "a segment GC collects is not claimed");
        assert_eq!(claims.claimed(), [a].into_iter().collect());
        assert!(claims.claim(&[SegmentId(3)], |_| false).1.is_empty(), "a segment that is gone is not claimed");
        assert!(claims.is_claimed(a) && !claims.is_claimed(b));
        assert!(claims.was_moved_out(a) && !claims.was_moved_out(b));
        assert!(!claims.begin_collecting(a), "a compaction reads it");
        claims.note_target(first, head);
        assert!(!claims.begin_collecting(head), "a compaction's moved records there are not published yet");
        let (second, _) = claims.claim(&[a], live);
        claims.end(first);
        assert!(claims.begin_collecting(head), "its compaction ended");
        assert!(!claims.begin_collecting(a), "the second compaction still reads it");
        claims.end(second);
        assert!(claims.begin_collecting(a));
        assert!(claims.was_moved_out(a), "moved out of until forgotten");
        claims.forget(a);
        assert!(!claims.was_moved_out(a));
        let (forgotten, claimed) = claims.claim(&[a], live);
        assert_eq!(claimed, vec![a], "a forgotten segment is no longer GC's");
        claims.end(forgotten);
        assert!(claims.begin_collecting(b), "taking it twice is harmless");
        assert!(claims.claim(&[b], live).1.is_empty(), "still GC's");
        claims.end_collecting(b);
        assert_eq!(claims.claim(&[b], live).1, vec![b], "given back, it can be claimed");
    }
}
