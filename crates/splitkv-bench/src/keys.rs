//! Keys and the random numbers that choose them, bit-for-bit as LevelDB's `db_bench` makes them.
//!
//! Keys are `--key_prefix` bytes of `a` followed by the key number printed as 16 zero-padded
//! decimal digits (`printf("%016d")`), or as many as `--key_size` leaves after the prefix. Random key numbers come from [`LevelDbRandom`], the
//! Park-Miller generator of LevelDB's `util/random.h`, seeded the same way per thread; so a run
//! here touches exactly the keys a `db_bench` run with the same flags touches, and "found" counts
//! are comparable across tools. Both types are per-thread state, not shared.

/// Width of the decimal key number without `--key_size`.
pub const KEY_DIGITS: usize = 16;

/// LevelDB's `Random`: a multiplicative congruential generator (`seed * 16807 mod 2^31-1`).
/// Cheap (one multiply, no division) and, above all, the same sequence as `db_bench`.
#[derive(Clone, Debug)]
pub struct LevelDbRandom {
    seed: u32,
}

impl LevelDbRandom {
    const MODULUS: u32 = 2_147_483_647;
    const MULTIPLIER: u64 = 16_807;

    /// A generator seeded like LevelDB's (0 and 2^31-1 are fixed points, so they become 1).
    pub fn new(seed: u32) -> Self {
        let seed = seed & Self::MODULUS;
        let seed = if seed == 0 || seed == Self::MODULUS { 1 } else { seed };
        LevelDbRandom { seed }
    }

    /// The next value in `[1, 2^31-2]`.
    pub fn next_u32(&mut self) -> u32 {
        let product = u64::from(self.seed) * Self::MULTIPLIER;
        // product mod (2^31-1) without a division: 2^31 == 1 (mod 2^31-1).
        let mut folded = (product >> 31) + (product & u64::from(Self::MODULUS));
        if folded > u64::from(Self::MODULUS) {
            folded -= u64::from(Self::MODULUS);
        }
        self.seed = folded as u32;
        self.seed
    }

    /// A value in `[0, n)` (LevelDB's `Uniform`, with its slight modulo bias kept for fidelity).
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }
}

/// A reusable key buffer: setting a key number rewrites the digits in place, no allocation.
#[derive(Clone, Debug)]
pub struct KeyBuffer {
    bytes: Vec<u8>,
    prefix_len: usize,
}

impl KeyBuffer {
    /// A buffer for keys with `prefix_len` leading `a` bytes and a `digits`-digit number.
    pub fn new(prefix_len: usize, digits: usize) -> Self {
        let mut bytes = vec![b'a'; prefix_len + digits];
        bytes[prefix_len..].fill(b'0');
        KeyBuffer { bytes, prefix_len }
    }

    /// A buffer for the keys `flags` describe (`--key_prefix`, `--key_size`).
    pub fn for_flags(flags: &crate::flags::Flags) -> Self {
        KeyBuffer::new(flags.key_prefix, flags.key_digits())
    }

    /// Makes the buffer hold key number `k` and returns the key.
    pub fn set(&mut self, k: u64) -> &[u8] {
        let digits = &mut self.bytes[self.prefix_len..];
        let mut rest = k;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        debug_assert_eq!(rest, 0, "--key_size is checked to hold every key number");
        &self.bytes
    }

    /// Key length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sixteen_zero_padded_digits() {
        let mut key = KeyBuffer::new(0, KEY_DIGITS);
        assert_eq!(key.set(0), b"0000000000000000");
        assert_eq!(key.set(42), format!("{:016}", 42).as_bytes());
        assert_eq!(key.set(2_147_483_646), b"0000002147483646");
        // Rewriting a shorter number clears the digits of the longer one.
        assert_eq!(key.set(7), b"0000000000000007");
        assert_eq!(key.len(), 16);
    }

    #[test]
    fn key_prefix_is_letters_a() {
        let mut key = KeyBuffer::new(3, KEY_DIGITS);
        assert_eq!(key.set(12), b"aaa0000000000000012");
    }

    #[test]
    fn key_size_sets_the_digits() {
        let mut key = KeyBuffer::new(2, 6);
        assert_eq!(key.set(42), b"aa000042");
        assert_eq!(key.len(), 8);
        let mut key = KeyBuffer::new(0, 24);
        assert_eq!(key.set(7), format!("{:024}", 7).as_bytes());
    }

    #[test]
    fn random_matches_park_miller_reference_sequence() {
        // The minimal standard generator's published sequence from seed 1.
        let mut r = LevelDbRandom::new(1);
        assert_eq!(r.next_u32(), 16_807);
        assert_eq!(r.next_u32(), 282_475_249);
        assert_eq!(r.next_u32(), 1_622_650_073);
        // After 10000 steps from seed 1 the value is 1043618065 (Park & Miller's check value).
        let mut r = LevelDbRandom::new(1);
        let last = (0..10_000).map(|_| r.next_u32()).last();
        assert_eq!(last, Some(1_043_618_065));
    }

    #[test]
    fn random_fixed_points_are_remapped_and_uniform_stays_in_range() {
        assert_eq!(LevelDbRandom::new(0).next_u32(), 16_807);
        assert_eq!(LevelDbRandom::new(i32::MAX as u32).next_u32(), 16_807);
        let mut r = LevelDbRandom::new(1001);
        assert!((0..1000).all(|_| r.uniform(10) < 10));
    }
}
