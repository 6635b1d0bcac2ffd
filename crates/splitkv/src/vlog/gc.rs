//! Value-log garbage collection policy: which segment to clean next.
//!
//! A policy is a pure function of a snapshot of per-segment statistics; executing GC
//! (relocating live records, swinging pointers, deleting or hole-punching the segment) lives
//! elsewhere. Keeping the choice pure lets policies be tested in isolation and swapped by
//! configuration.
//!
//! Invariant every policy keeps: never pick the active segment (it is still being appended to)
//! and never pick a segment without garbage (cleaning it would only copy bytes).
//!
//! Thread-safety: policies are `Send + Sync` and stateless, shared by any thread that asks.

use crate::types::SegmentId;

/// What GC knows about one segment when choosing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentStats {
    /// Segment id; ids grow with time, so smaller ids are older.
    pub id: SegmentId,
    /// Bytes in the segment file.
    pub size: u64,
    /// Bytes of records no longer referenced by the index.
    pub garbage_bytes: u64,
    /// How long ago the segment was written, in segments: the active segment's id minus this id.
    pub age: u64,
}

/// Picks the next segment to garbage-collect.
pub trait GcPolicy: Send + Sync {
    /// The segment to clean among `segments`, or `None` if none is worth it. `active` is the
    /// segment currently appended to; it is never returned.
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId>;
}

/// WiscKey's tail-first order: the oldest non-active segment that holds any garbage.
#[derive(Clone, Copy, Debug, Default)]
pub struct OldestPolicy;

impl GcPolicy for OldestPolicy {
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId> {
        segments.iter().filter(|s| s.id != active && s.garbage_bytes > 0).map(|s| s.id).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(id: u64, garbage_bytes: u64) -> SegmentStats {
        SegmentStats { id: SegmentId(id), size: 1000, garbage_bytes, age: 10 - id }
    }

    #[test]
    fn oldest_picks_smallest_id_with_garbage_regardless_of_slice_order() {
        let segments = [stats(5, 10), stats(3, 1), stats(4, 900)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(3)));
    }

    #[test]
    fn oldest_skips_segments_without_garbage() {
        let segments = [stats(1, 0), stats(2, 0), stats(3, 7)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(3)));
    }

    #[test]
    fn oldest_never_picks_the_active_segment() {
        let segments = [stats(7, 500), stats(8, 0)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(7)), None);
        assert_eq!(OldestPolicy.pick(&[], SegmentId(1)), None);
    }

    #[test]
    fn policies_work_as_trait_objects() {
        let policy: Box<dyn GcPolicy> = Box::new(OldestPolicy);
        assert_eq!(policy.pick(&[stats(2, 1)], SegmentId(3)), Some(SegmentId(2)));
    }
}
