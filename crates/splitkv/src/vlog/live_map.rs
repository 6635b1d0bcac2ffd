//! Which records of a value-log segment a garbage survey found reachable, and which of those
//! current: a bitmap over the segment in granules, with a bit set for every granule in which a
//! pointer the survey counted live starts, and optionally a second bit, beside it in the same
//! word, for a pointer that was its key's newest version.
//!
//! A survey walks every version a reader can still see, so a record whose bit is clear was
//! unreachable at the survey; and a surveyed segment is sealed and wholly applied, so no pointer
//! into it can appear later (writes, relocations and rewrites all go to the log head). GC may
//! therefore drop such a record without looking its key up. A set bit proves nothing (the
//! lookup decides), so the granule size trades memory for lookups, never correctness: two
//! records sharing a granule only cost a lookup.
//!
//! The current bit is the opposite kind of claim (this record was current), which a shared
//! granule would make about the wrong record; so it is kept only at the smallest granule, where
//! a granule holds one record. Kept beside the reachable bit, marking it costs no second cache
//! miss in a survey.

/// The smallest granule, 16 bytes: less than any record (header, key and value), so records
/// never share one.
const MIN_GRANULE_SHIFT: u32 = 4;

/// The granule size (as a shift) that maps `log_bytes` of segments into at most `max_bits` bits.
pub fn granule_shift(log_bytes: u64, max_bits: u64) -> u32 {
    let mut shift = MIN_GRANULE_SHIFT;
    while shift < 63 && log_bytes >> shift > max_bits {
        shift += 1;
    }
    shift
}

/// One segment's reachable-record bitmap (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveMap {
    granule_shift: u32,
    /// Bits per granule: 1 (reachable), or 2 (reachable, then current).
    bits_per_granule: u32,
    words: Box<[u64]>,
}

impl LiveMap {
    /// An empty map (nothing reachable) over a segment of `segment_len` bytes; with
    /// `track_current`, it also records current records if `granule_shift` is the smallest.
    pub fn new(segment_len: u64, granule_shift: u32, track_current: bool) -> Self {
        let bits_per_granule = if track_current && granule_shift == MIN_GRANULE_SHIFT { 2 } else { 1 };
        let bits = ((segment_len >> granule_shift) + 1) * u64::from(bits_per_granule);
        LiveMap { granule_shift, bits_per_granule, words: vec![0; bits.div_ceil(64) as usize].into_boxed_slice() }
    }

    /// Marks the record at `offset` reachable, and current if it is its key's newest version.
    pub fn mark(&mut self, offset: u64, current: bool) {
        let (word, bit) = self.position(offset);
        let mask = if current && self.tracks_current() { bit | bit << 1 } else { bit };
        if let Some(w) = self.words.get_mut(word) {
            *w |= mask;
        }
    }

    /// Asks the CPU to start loading the word [`LiveMap::mark`] will change for `offset`: a
    /// survey's marks land all over its maps, a cache miss each if it waits for them.
    pub fn prefetch(&self, offset: u64) {
        let (word, _) = self.position(offset);
        if let Some(w) = self.words.get(word) {
            crate::prefetch::cache_lines_at(std::ptr::from_ref(w).cast::<u8>(), 1);
        }
    }

    /// False only if no pointer the survey counted starts in `offset`'s granule. An offset past
    /// the segment's length at the survey is not known to be unreachable.
    pub fn may_be_reachable(&self, offset: u64) -> bool {
        let (word, bit) = self.position(offset);
        self.words.get(word).is_none_or(|w| w & bit != 0)
    }

    /// True only if the record that starts at `offset` was marked current (never for a map that
    /// does not track current records).
    pub fn was_current(&self, offset: u64) -> bool {
        let (word, bit) = self.position(offset);
        self.tracks_current() && self.words.get(word).is_some_and(|w| w & (bit << 1) != 0)
    }

    /// True if the map records current records.
    pub fn tracks_current(&self) -> bool {
        self.bits_per_granule == 2
    }

    /// Bytes of memory the map holds.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }

    /// The word holding `offset`'s granule, and its reachable bit (the current bit is the next).
    fn position(&self, offset: u64) -> (usize, u64) {
        let bit = (offset >> self.granule_shift).saturating_mul(u64::from(self.bits_per_granule));
        (usize::try_from(bit / 64).unwrap_or(usize::MAX), 1 << (bit % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_granules_may_be_reachable() {
        let mut map = LiveMap::new(4096, MIN_GRANULE_SHIFT, false);
        for offset in [0, 100, 1000, 4095] {
            map.mark(offset, true);
        }
        for offset in [0, 15, 96, 100, 111, 992, 1000, 4095] {
            assert!(map.may_be_reachable(offset), "offset {offset} shares a marked granule");
        }
        for offset in [16, 95, 112, 991, 1008, 4079] {
            assert!(!map.may_be_reachable(offset), "offset {offset} was never marked");
        }
        // Past the segment as surveyed: unknown, so possibly reachable.
        assert!(map.may_be_reachable(1 << 20));
        assert!(map.may_be_reachable(u64::MAX));
        map.mark(u64::MAX, true); // ignored, not a panic
        assert!(!map.was_current(0), "not tracked");
    }

    #[test]
    fn current_records_are_marked_beside_reachable_ones_at_the_smallest_granule() {
        let mut map = LiveMap::new(4096, MIN_GRANULE_SHIFT, true);
        assert!(map.tracks_current());
        map.mark(32, true);
        map.mark(48, false);
        map.mark(4095, true);
        assert!(map.was_current(32) && map.may_be_reachable(32));
        assert!(!map.was_current(48) && map.may_be_reachable(48), "reachable, not current");
        assert!(!map.was_current(64) && !map.may_be_reachable(64));
        assert!(map.was_current(4095));
        assert!(!map.was_current(1 << 20) && map.may_be_reachable(1 << 20), "past the segment: unknown");
        map.mark(u64::MAX, true);
        // Coarser granules may hold several records: no current bits.
        let mut coarse = LiveMap::new(4096, MIN_GRANULE_SHIFT + 1, true);
        coarse.mark(32, true);
        assert!(!coarse.tracks_current() && !coarse.was_current(32) && coarse.may_be_reachable(32));
    }

    #[test]
    fn the_granule_grows_with_the_log_to_bound_memory() {
        assert_eq!(granule_shift(1 << 20, 1 << 27), MIN_GRANULE_SHIFT);
        assert_eq!(granule_shift(1 << 31, 1 << 27), 4);
        assert_eq!(granule_shift(1 << 32, 1 << 27), 5);
        assert_eq!(granule_shift(u64::MAX, 1), 63);
        let map = LiveMap::new(16 << 20, granule_shift(1 << 40, 1 << 27), true);
        assert!(map.memory_bytes() <= (16 << 20) / 8 / 16);
    }
}
