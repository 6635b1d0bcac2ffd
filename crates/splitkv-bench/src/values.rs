//! Values, generated as LevelDB's `db_bench` `RandomGenerator` does.
//!
//! A 1 MiB pool is built once from 100-byte pieces; each piece is `len * compression_ratio`
//! printable random bytes repeated to fill 100 bytes (LevelDB's `test::CompressibleString`), so a
//! block compressor shrinks values to about `compression_ratio` of their size. Values are slices
//! of the pool taken at a rolling offset that wraps to 0 when a slice would run past the end.
//! The pool is larger than compressors' windows (32 KiB), so a codec cannot find repeats across
//! values. A generator is per-thread state.

use crate::keys::LevelDbRandom;

/// Size of the pool values are cut from.
pub const POOL_SIZE: usize = 1 << 20;

/// Length of each compressible piece of the pool.
const PIECE_LEN: usize = 100;

/// db_bench's value source.
#[derive(Clone, Debug)]
pub struct ValueGenerator {
    pool: Vec<u8>,
    position: usize,
}

impl ValueGenerator {
    /// Builds the pool from LevelDB's fixed seed (301), so values equal db_bench's.
    pub fn new(compression_ratio: f64) -> Self {
        let mut rng = LevelDbRandom::new(301);
        let mut pool = Vec::with_capacity(POOL_SIZE + PIECE_LEN);
        while pool.len() < POOL_SIZE {
            pool.extend_from_slice(&compressible_piece(&mut rng, compression_ratio, PIECE_LEN));
        }
        ValueGenerator { pool, position: 0 }
    }

    /// The next value of `len` bytes. `len` must be below the pool size (1 MiB).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        assert!(len < self.pool.len(), "values must be smaller than the {} byte pool", self.pool.len());
        if self.position + len > self.pool.len() {
            self.position = 0;
        }
        self.position += len;
        &self.pool[self.position - len..self.position]
    }
}

/// `len` bytes made of `len * ratio` random printable bytes repeated (LevelDB's
/// `test::CompressibleString`, whose random bytes are `' ' + Uniform(95)`).
fn compressible_piece(rng: &mut LevelDbRandom, ratio: f64, len: usize) -> Vec<u8> {
    let raw_len = ((len as f64 * ratio) as usize).max(1);
    let raw: Vec<u8> = (0..raw_len).map(|_| b' ' + rng.uniform(95) as u8).collect();
    raw.iter().copied().cycle().take(len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_pieces_repeat_their_random_prefix() {
        let mut gen = ValueGenerator::new(0.5);
        let piece = gen.generate(100).to_vec();
        assert_eq!(piece[..50], piece[50..]);
        assert!(piece.iter().all(|b| (b' '..=b'~').contains(b)));
        // Incompressible values do not repeat inside a piece.
        let mut gen = ValueGenerator::new(1.0);
        let piece = gen.generate(100).to_vec();
        assert_ne!(piece[..50], piece[50..]);
    }

    #[test]
    fn values_compress_to_about_the_requested_ratio() {
        for (ratio, low, high) in [(0.5, 0.45, 0.65), (0.25, 0.2, 0.4)] {
            let mut gen = ValueGenerator::new(ratio);
            let block: Vec<u8> = (0..16).flat_map(|_| gen.generate(1000).to_vec()).collect();
            let compressed = lz4_flex::compress(&block).len() as f64 / block.len() as f64;
            assert!((low..high).contains(&compressed), "ratio {ratio}: compressed to {compressed}");
        }
        let mut gen = ValueGenerator::new(1.0);
        let block: Vec<u8> = (0..16).flat_map(|_| gen.generate(1000).to_vec()).collect();
        assert!(lz4_flex::compress(&block).len() as f64 > 0.9 * block.len() as f64);
    }

    #[test]
    fn offset_rolls_over_and_wraps_at_the_pool_end() {
        let mut gen = ValueGenerator::new(0.5);
        let first = gen.generate(1000).to_vec();
        let second = gen.generate(1000).to_vec();
        assert_ne!(first, second);
        for _ in 2..POOL_SIZE / 1000 {
            gen.generate(1000);
        }
        // 1048 values of 1000 bytes fit; the next one wraps to offset 0.
        assert_eq!(gen.generate(1000), &first[..]);
        assert_eq!(gen.generate(100_000).len(), 100_000);
    }
}
