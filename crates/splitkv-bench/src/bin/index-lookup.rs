//! The index step alone: binary-search index blocks against learned ones (TridentKV), on the key
//! sets the learned index's tests use. For each set it builds both index encodings of one table
//! (`--keys` distinct keys, `--per_block` entries per data block: about 32 for 100-byte values
//! in 4 KiB blocks, about 120 for value pointers), then times `locate` for the stored keys in
//! random order and prints nanoseconds per lookup, index bytes, and the model's shape.
//!
//! Only the step that picks where to search is timed; the learned index then binary-searches
//! fewer restart keys inside the block (`docs/results/learned.md` measures whole reads).

use std::hint::black_box;
use std::time::Instant;

use splitkv::sstable::{
    BinaryIndex, BinaryIndexBuilder, BlockHandle, IndexBlock, IndexBlockBuilder, IndexBlockKind, LearnedIndex,
    LearnedIndexBuilder,
};
use splitkv::types::{internal_key, seek_key, SequenceNumber, ValueKind, MAX_SEQUENCE};

/// A tiny deterministic generator, so every run measures the same keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Fisher-Yates.
fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

fn key_set(name: &str, n: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..n * 11 / 10)
        .map(|i| match name {
            "sequential" => format!("{i:016}").into_bytes(),
            "uniform" => format!("{:016}", rng.below(10_000_000_000_000)).into_bytes(),
            "clustered" => format!("{:016}", rng.below(8) * 1_000_000_000_000 + rng.below(n as u64)).into_bytes(),
            "shared-prefix" => format!("user:{:010}:profile", rng.below(10_000_000_000)).into_bytes(),
            "random-bytes" => (0..16).map(|_| rng.next() as u8).collect(),
            "shared-u64-runs" => {
                let mut k = format!("run{:02}-xxxxxxxx", rng.below(4)).into_bytes();
                k.extend_from_slice(&(rng.next() as u32).to_be_bytes());
                k
            }
            other => panic!("unknown key set {other}"),
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys.truncate(n);
    keys
}

fn flag(name: &str, default: usize) -> usize {
    std::env::args()
        .find_map(|a| a.strip_prefix(&format!("--{name}=")).map(|v| v.parse().expect("a number")))
        .unwrap_or(default)
}

fn time_lookups(index: &dyn IndexBlock, probes: &[Vec<u8>], rounds: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..rounds {
        for p in probes {
            black_box(index.locate(black_box(p)));
        }
    }
    started.elapsed().as_nanos() as f64 / (rounds * probes.len()) as f64
}

fn main() {
    let (n, per_block, rounds) = (flag("keys", 200_000), flag("per_block", 32), flag("rounds", 5));
    println!("index-lookup: {n} keys, {per_block} entries per block, {rounds} rounds over the keys in random order");
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>12} {:>9} {:>10} {:>8} {:>8}",
        "keys", "binary ns", "learned ns", "binary B", "learned B", "segments", "sub-ranges", "max err", "mean err"
    );
    for name in ["sequential", "uniform", "clustered", "shared-prefix", "random-bytes", "shared-u64-runs"] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let keys = key_set(name, n, &mut rng);
        let ikeys: Vec<Vec<u8>> = keys.iter().map(|k| internal_key(k, SequenceNumber(1), ValueKind::Inline)).collect();
        let (mut binary, mut learned) = (BinaryIndexBuilder::default(), LearnedIndexBuilder::new(16));
        let mut offset = 0;
        for chunk in ikeys.chunks(per_block) {
            for k in chunk {
                learned.add_entry(k);
            }
            // The separator a table would store: the block's last key (the builder shortens
            // it when it can; this keeps the binary index at its largest realistic size).
            let handle = BlockHandle { offset, size: 4091 };
            binary.add_block(&chunk[chunk.len() - 1], handle, chunk.len() as u64);
            learned.add_block(&chunk[chunk.len() - 1], handle, chunk.len() as u64);
            offset = handle.end();
        }
        let binary = binary.finish();
        let learned = learned.finish();
        let binary_index = BinaryIndex::decode(binary.bytes.clone().into(), offset).expect("binary index");
        let learned_index = (learned.kind == IndexBlockKind::Learned)
            .then(|| LearnedIndex::decode(&learned.bytes, offset, ikeys.len() as u64).expect("learned index"));
        let mut probes: Vec<Vec<u8>> = keys.iter().map(|k| seek_key(k, SequenceNumber(MAX_SEQUENCE))).collect();
        shuffle(&mut probes, &mut rng);
        let binary_ns = time_lookups(&binary_index, &probes, rounds);
        match learned_index {
            Some(model) => {
                let learned_ns = time_lookups(&model, &probes, rounds);
                let m = model.summary().model.expect("a model");
                println!(
                    "{name:<16} {binary_ns:>10.1} {learned_ns:>10.1} {:>12} {:>12} {:>9} {:>10} {:>8} {:>8.2}",
                    binary.bytes.len(),
                    learned.bytes.len(),
                    m.segments,
                    m.sub_ranges,
                    m.max_error,
                    m.mean_error
                );
            }
            None => println!(
                "{name:<16} {binary_ns:>10.1} {:>10} {:>12} {:>12}   (model rejected: binary index kept)",
                "-",
                binary.bytes.len(),
                "-"
            ),
        }
    }
}
