//! Which records of a value-log segment a garbage survey found reachable: a bitmap over the
//! segment in granules, with a bit set for every granule in which a pointer the survey counted
//! live starts.
//!
//! A survey walks every version a reader can still see, so a record whose bit is clear was
//! unreachable at the survey; and a surveyed segment is sealed and wholly applied, so no pointer
//! into it can appear later (writes, relocations and rewrites all go to the log head). GC may
//! therefore drop such a record without looking its key up. A set bit proves nothing (the
//! lookup decides), so the granule size trades memory for lookups, never correctness: two
//! records sharing a granule only cost a lookup.

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
    words: Box<[u64]>,
}

impl LiveMap {
    /// An empty map (nothing reachable) over a segment of `segment_len` bytes.
    pub fn new(segment_len: u64, granule_shift: u32) -> Self {
        let granules = (segment_len >> granule_shift) + 1;
        LiveMap { granule_shift, words: vec![0; granules.div_ceil(64) as usize].into_boxed_slice() }
    }

    /// Marks the record at `offset` reachable.
    pub fn mark(&mut self, offset: u64) {
        let (word, bit) = self.position(offset);
        if let Some(w) = self.words.get_mut(word) {
            *w |= bit;
        }
    }

    /// False only if no pointer the survey counted starts in `offset`'s granule. An offset past
    /// the segment's length at the survey is not known to be unreachable.
    pub fn may_be_reachable(&self, offset: u64) -> bool {
        let (word, bit) = self.position(offset);
        self.words.get(word).is_none_or(|w| w & bit != 0)
    }

    /// True if no two records can share a granule (the smallest granule), so that a marked
    /// granule names exactly one record: see [`LiveMap::marks_record`].
    pub fn one_record_per_granule(&self) -> bool {
        self.granule_shift == MIN_GRANULE_SHIFT
    }

    /// True only if the record that starts at `offset` was marked: false for a map whose
    /// granules may hold several records (a marked granule would not say which).
    pub fn marks_record(&self, offset: u64) -> bool {
        let (word, bit) = self.position(offset);
        self.one_record_per_granule() && self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Bytes of memory the map holds.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }

    fn position(&self, offset: u64) -> (usize, u64) {
        let granule = offset >> self.granule_shift;
        (usize::try_from(granule / 64).unwrap_or(usize::MAX), 1 << (granule % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_granules_may_be_reachable() {
        let mut map = LiveMap::new(4096, MIN_GRANULE_SHIFT);
        for offset in [0, 100, 1000, 4095] {
            map.mark(offset);
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
        map.mark(u64::MAX); // ignored, not a panic
    }

    #[test]
    fn the_granule_grows_with_the_log_to_bound_memory() {
        assert_eq!(granule_shift(1 << 20, 1 << 27), MIN_GRANULE_SHIFT);
        assert_eq!(granule_shift(1 << 31, 1 << 27), 4);
        assert_eq!(granule_shift(1 << 32, 1 << 27), 5);
        assert_eq!(granule_shift(u64::MAX, 1), 63);
        let map = LiveMap::new(16 << 20, granule_shift(1 << 40, 1 << 27));
        assert!(map.memory_bytes() <= (16 << 20) / 8 / 16);
    }
}
