//! A Bloom filter over the user keys of one memtable (RocksDB's `memtable_whole_key_filtering`).
//!
//! A point read of a key the memtable does not hold would otherwise search the skiplist, a cache
//! miss per level. Most such reads are misses: value-log GC asks for the newest version of every
//! record it scans (two memtables each time, and the keys of old records are rarely there), and
//! so do reads of flushed keys. Profiles of a 1 KiB random load put these skiplist searches at a
//! tenth of the process's CPU time.
//!
//! Layout: cache-line blocked (one 64-byte line per key, Putze, Sanders and Singler 2007), so a
//! probe touches one line. The key's hash picks the line and [`PROBES`] bit positions inside it.
//! Bits are only ever set, with relaxed `fetch_or`: a reader that can see an entry (it read the
//! published sequence number after the writer inserted) also sees the bits set before it.
//!
//! Size: fixed when the memtable is created, from its byte budget; a memtable that outgrows the
//! estimate (tiny entries) only gets more false positives, never a wrong answer.

use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh3::xxh3_64;

/// Bits set per key; with about ten bits per key this gives roughly a 1% false-positive rate.
const PROBES: u32 = 6;

/// Filter bits per expected key.
const BITS_PER_KEY: usize = 10;

/// Words in a 64-byte line.
const LINE_WORDS: usize = 8;

/// Bits in a line.
const LINE_BITS: usize = LINE_WORDS * 64;

/// A fixed-size, concurrently settable Bloom filter over byte strings.
pub struct KeyFilter {
    lines: Box<[[AtomicU64; LINE_WORDS]]>,
    /// `lines.len() - 1`; the line count is a power of two.
    line_mask: u64,
}

impl KeyFilter {
    /// A filter sized for `expected_keys` keys.
    pub fn with_capacity(expected_keys: usize) -> Self {
        let lines = (expected_keys.saturating_mul(BITS_PER_KEY) / LINE_BITS).max(1).next_power_of_two();
        KeyFilter { lines: (0..lines).map(|_| Default::default()).collect(), line_mask: lines as u64 - 1 }
    }

    /// Adds `key`.
    pub fn insert(&self, key: &[u8]) {
        let (line, bits) = self.probe(key);
        for (word, mask) in bits.iter().enumerate().filter(|(_, m)| **m != 0) {
            line[word].fetch_or(*mask, Ordering::Relaxed);
        }
    }

    /// False only if `key` was never added.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        let (line, bits) = self.probe(key);
        bits.iter().zip(line).all(|(mask, word)| word.load(Ordering::Relaxed) & mask == *mask)
    }

    /// Bytes of filter memory.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
    }

    /// The line `key` maps to and, per word of it, the bits the key sets.
    fn probe(&self, key: &[u8]) -> (&[AtomicU64; LINE_WORDS], [u64; LINE_WORDS]) {
        let hash = xxh3_64(key);
        // The line comes from the high bits, the positions from a remix of the whole hash, so
        // keys sharing a line still spread over its bits.
        let line = &self.lines[((hash >> 32) & self.line_mask) as usize];
        let mut positions = hash.rotate_left(23).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut bits = [0u64; LINE_WORDS];
        for _ in 0..PROBES {
            let bit = (positions & (LINE_BITS as u64 - 1)) as usize;
            bits[bit / 64] |= 1 << (bit % 64);
            positions >>= 9;
        }
        (line, bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_denies_an_added_key() {
        let f = KeyFilter::with_capacity(10_000);
        for i in 0..20_000u32 {
            f.insert(&i.to_be_bytes());
        }
        assert!((0..20_000u32).all(|i| f.may_contain(&i.to_be_bytes())));
    }

    #[test]
    fn denies_most_absent_keys_at_capacity() {
        let f = KeyFilter::with_capacity(10_000);
        for i in 0..10_000u32 {
            f.insert(format!("key{i:08}").as_bytes());
        }
        let false_positives = (0..10_000u32).filter(|i| f.may_contain(format!("other{i:08}").as_bytes())).count();
        // About 1% expected; 5% leaves room for an unlucky hash without hiding a broken filter
        // (one that answers `true` for everything gives 100%).
        assert!(false_positives < 500, "{false_positives} false positives in 10000");
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = KeyFilter::with_capacity(0);
        assert_eq!(f.memory_bytes(), 64);
        assert!(!f.may_contain(b"anything"));
    }
}
