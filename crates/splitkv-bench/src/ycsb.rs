//! YCSB's core workloads A–F: the key-choosing generators, key names and operation mixes of YCSB
//! 0.17.0's `CoreWorkload`, re-implemented so that the benchmark touches keys with the same skew
//! a YCSB run would.
//!
//! What is reproduced, and how:
//! - Key names: `user` followed by the FNV-1a 64 hash of the key number (`insertorder=hashed`,
//!   `zeropadding=1`), including YCSB's `Math.abs` on the signed hash.
//! - [`ZipfianGenerator`]: Gray et al.'s "Quickly generating billion-record synthetic databases"
//!   as YCSB codes it, including its incremental zeta update when the item count grows and its
//!   quirk of keeping the original item count in `eta`.
//! - [`ScrambledZipfianGenerator`]: a zipfian over 10^10 items with YCSB's precomputed zeta,
//!   hashed with FNV and reduced modulo the item count, so hot keys are spread over the key space.
//! - [`SkewedLatestGenerator`]: a zipfian distance back from the newest acknowledged insert.
//! - [`Workload`]: the operation proportions of the official `workloads/workload[a-f]` files.
//!
//! The uniform source is [`SplitMix64`] rather than Java's `ThreadLocalRandom`, so individual
//! draws differ from YCSB's while their distribution matches. Every generator here is per-thread
//! state except [`InsertCounter`], which is shared and atomic.

use std::sync::atomic::{AtomicU64, Ordering};

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Items of the zipfian that [`ScrambledZipfianGenerator`] draws from before hashing.
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// zeta(10^10 + 1, 0.99) as YCSB hard-codes it (`ScrambledZipfianGenerator.ZETAN`), because
/// summing ten billion terms at start-up would take minutes.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Longest scan of workload E (`maxscanlength`).
pub const MAX_SCAN_LENGTH: u64 = 100;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of `value`, then Java's
/// `Math.abs` on the signed result (which leaves `i64::MIN` negative, as Java does).
pub fn fnv_hash64(value: i64) -> i64 {
    let mut remaining = value;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = (remaining & 0xff) as u64;
        // Java's `>>` is arithmetic; only the low byte is used, so the sign fill never matters.
        remaining >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    (hash as i64).wrapping_abs()
}

/// The record key YCSB's `CoreWorkload.buildKeyName` makes for `keynum` with hashed insert order.
pub fn key_name(keynum: u64) -> String {
    format!("user{}", fnv_hash64(keynum as i64))
}

/// A small, fast, per-thread uniform source (Steele et al.'s SplitMix64).
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A double in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A value in `[low, high]` (inclusive), like YCSB's `UniformLongGenerator`.
    pub fn uniform_inclusive(&mut self, low: u64, high: u64) -> u64 {
        let span = high - low + 1;
        low + ((self.next_f64() * span as f64) as u64).min(span - 1)
    }
}

/// sum_{i=start}^{n-1} 1 / (i+1)^theta added to `initial_sum` (YCSB's incremental `zeta`).
fn zeta(start: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    (start..n).fold(initial_sum, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// YCSB's `ZipfianGenerator`: item `base + i` is drawn with probability proportional to
/// `1 / (i+1)^theta`, so `base` is the most popular item.
#[derive(Clone, Debug)]
pub struct ZipfianGenerator {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl ZipfianGenerator {
    /// Items `min..=max` with constant `theta`, computing zeta (O(items) once).
    pub fn new(min: u64, max: u64, theta: f64) -> Self {
        let items = max - min + 1;
        Self::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// Items `min..=max` with a precomputed zeta of the item count.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Self {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut generator = ZipfianGenerator {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        generator.eta = generator.eta_for(zetan);
        generator
    }

    /// YCSB computes eta from the item count given at construction even after zeta grows.
    fn eta_for(&self, zetan: f64) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / zetan)
    }

    /// The next item when the population is `item_count` (YCSB's `nextLong(itemcount)`). A grown
    /// count extends zeta incrementally; a shrunk one is ignored, as YCSB does by default.
    pub fn next_with_count(&mut self, rng: &mut SplitMix64, item_count: u64) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = self.eta_for(self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let offset = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // u close to 1 can land one past the end; YCSB lets that through, we keep it in range.
        self.base + offset.min(item_count.saturating_sub(1))
    }

    /// The next item over the construction-time population.
    pub fn next(&mut self, rng: &mut SplitMix64) -> u64 {
        self.next_with_count(rng, self.items)
    }
}

/// YCSB's `ScrambledZipfianGenerator` with the default constant: zipfian popularity, but the
/// popular items are scattered over `min..=max` by hashing.
#[derive(Clone, Debug)]
pub struct ScrambledZipfianGenerator {
    zipfian: ZipfianGenerator,
    min: u64,
    item_count: u64,
}

impl ScrambledZipfianGenerator {
    /// Items `min..=max`.
    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfianGenerator {
            zipfian: ZipfianGenerator::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
            min,
            item_count: max - min + 1,
        }
    }

    /// The next item.
    pub fn next(&mut self, rng: &mut SplitMix64) -> u64 {
        let drawn = self.zipfian.next(rng);
        // Java's `%` keeps the sign of a negative hash (only i64::MIN); rem_euclid stays in range.
        self.min + fnv_hash64(drawn as i64).rem_euclid(self.item_count as i64) as u64
    }
}

/// YCSB's `SkewedLatestGenerator`: the newest item is the most popular, popularity falling off
/// zipfian-fashion with distance from it.
#[derive(Clone, Debug)]
pub struct SkewedLatestGenerator {
    zipfian: ZipfianGenerator,
}

impl SkewedLatestGenerator {
    /// A generator for a population whose newest item is currently `last_value` (at least 1).
    pub fn new(last_value: u64) -> Self {
        SkewedLatestGenerator { zipfian: ZipfianGenerator::new(0, last_value.max(1) - 1, ZIPFIAN_CONSTANT) }
    }

    /// The next item given the newest one now.
    pub fn next(&mut self, rng: &mut SplitMix64, last_value: u64) -> u64 {
        let max = last_value.max(1);
        max - self.zipfian.next_with_count(rng, max)
    }
}

/// The shared insert key sequence (YCSB's `AcknowledgedCounterGenerator`, simplified): inserts
/// take the next key number; readers see key numbers below the acknowledged limit.
#[derive(Debug)]
pub struct InsertCounter {
    next: AtomicU64,
    acknowledged: AtomicU64,
}

impl InsertCounter {
    /// A sequence whose first `records` key numbers already exist.
    pub fn new(records: u64) -> Self {
        InsertCounter { next: AtomicU64::new(records), acknowledged: AtomicU64::new(records) }
    }

    /// Claims the next key number to insert.
    pub fn claim(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `keynum` as inserted. With several threads the limit can move past a key another
    /// thread is still writing (YCSB waits for a contiguous window); a read of it is then a miss.
    pub fn acknowledge(&self, keynum: u64) {
        self.acknowledged.fetch_max(keynum + 1, Ordering::Release);
    }

    /// The newest readable key number (YCSB's `lastValue()`).
    pub fn last_value(&self) -> u64 {
        self.acknowledged.load(Ordering::Acquire).saturating_sub(1)
    }
}

/// One YCSB operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Read a whole record.
    Read,
    /// Overwrite a record.
    Update,
    /// Add a new record.
    Insert,
    /// Read up to 100 consecutive records.
    Scan,
    /// Read a record, then write it back.
    ReadModifyWrite,
}

/// How a workload picks the key of a read, update, scan or read-modify-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestDistribution {
    /// [`ScrambledZipfianGenerator`].
    Zipfian,
    /// [`SkewedLatestGenerator`].
    Latest,
}

/// A core workload's operation mix (`workloads/workload[a-f]` of YCSB 0.17.0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Proportion of reads.
    pub read: f64,
    /// Proportion of updates.
    pub update: f64,
    /// Proportion of inserts.
    pub insert: f64,
    /// Proportion of scans.
    pub scan: f64,
    /// Proportion of read-modify-writes.
    pub read_modify_write: f64,
    /// Key distribution.
    pub distribution: RequestDistribution,
}

impl Workload {
    /// The workload for a letter `a`..=`f`.
    pub fn core(letter: char) -> Option<Workload> {
        let mix = |read, update, insert, scan, read_modify_write, distribution| Workload {
            read,
            update,
            insert,
            scan,
            read_modify_write,
            distribution,
        };
        use RequestDistribution::{Latest, Zipfian};
        Some(match letter {
            'a' => mix(0.5, 0.5, 0.0, 0.0, 0.0, Zipfian),
            'b' => mix(0.95, 0.05, 0.0, 0.0, 0.0, Zipfian),
            'c' => mix(1.0, 0.0, 0.0, 0.0, 0.0, Zipfian),
            'd' => mix(0.95, 0.0, 0.05, 0.0, 0.0, Latest),
            'e' => mix(0.0, 0.0, 0.05, 0.95, 0.0, Zipfian),
            'f' => mix(0.5, 0.0, 0.0, 0.0, 0.5, Zipfian),
            _ => return None,
        })
    }

    /// Picks an operation the way YCSB's `DiscreteGenerator` does: walk the choices in the
    /// order read, update, insert, scan, read-modify-write, subtracting normalised weights.
    pub fn choose(&self, rng: &mut SplitMix64) -> Operation {
        let choices = [
            (self.read, Operation::Read),
            (self.update, Operation::Update),
            (self.insert, Operation::Insert),
            (self.scan, Operation::Scan),
            (self.read_modify_write, Operation::ReadModifyWrite),
        ];
        let total: f64 = choices.iter().map(|(weight, _)| weight).sum();
        let mut point = rng.next_f64();
        for (weight, op) in choices {
            if weight <= 0.0 {
                continue;
            }
            let share = weight / total;
            if point < share {
                return op;
            }
            point -= share;
        }
        // Rounding can leave `point` a hair above the last share.
        choices.iter().rev().find(|(weight, _)| *weight > 0.0).map_or(Operation::Read, |(_, op)| *op)
    }
}

/// One thread's key chooser for a workload (YCSB's `CoreWorkload.nextKeynum`).
#[derive(Clone, Debug)]
pub enum KeyChooser {
    /// Scrambled zipfian over the loaded records plus the inserts the run expects.
    Zipfian(ScrambledZipfianGenerator),
    /// Skewed towards the newest insert.
    Latest(SkewedLatestGenerator),
}

impl KeyChooser {
    /// The chooser YCSB builds for `workload` with `records` loaded and `operations` to run:
    /// zipfian keys range over `records + 2 * expected inserts` so new keys can become hot.
    pub fn new(workload: &Workload, records: u64, operations: u64, last_value: u64) -> KeyChooser {
        match workload.distribution {
            RequestDistribution::Zipfian => {
                let expected_new_keys = (operations as f64 * workload.insert * 2.0) as u64;
                KeyChooser::Zipfian(ScrambledZipfianGenerator::new(0, records + expected_new_keys))
            }
            RequestDistribution::Latest => KeyChooser::Latest(SkewedLatestGenerator::new(last_value)),
        }
    }

    /// The next existing key number, redrawing numbers not yet inserted.
    pub fn next(&mut self, rng: &mut SplitMix64, inserts: &InsertCounter) -> u64 {
        match self {
            KeyChooser::Latest(latest) => latest.next(rng, inserts.last_value()),
            KeyChooser::Zipfian(zipfian) => loop {
                let keynum = zipfian.next(rng);
                if keynum <= inserts.last_value() {
                    return keynum;
                }
            },
        }
    }
}

/// Scan length for workload E: uniform in `1..=100`.
pub fn scan_length(rng: &mut SplitMix64) -> u64 {
    rng.uniform_inclusive(1, MAX_SCAN_LENGTH)
}

#[cfg(test)]
mod tests {
    //! Reference figures come from YCSB 0.17.0 core generators, 10M draws each: hottest-key share,
    //! top-10 share, share of the top 1% and top 10% of keys (by draw count), and for the latest
    //! generator the share of draws within the newest 1% and 10% of items.

    use super::*;
    use std::collections::HashMap;

    /// Our sample size: large enough for the tolerances below, small enough to run in well under
    /// a second.
    const DRAWS: usize = 2_000_000;

    struct Shares {
        hottest: f64,
        top10: f64,
        top1pct: f64,
        top10pct: f64,
    }

    fn shares(items: u64, mut draw: impl FnMut() -> u64) -> Shares {
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for _ in 0..DRAWS {
            *counts.entry(draw()).or_default() += 1;
        }
        let mut sorted: Vec<u64> = counts.into_values().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top = |k: usize| sorted.iter().take(k).sum::<u64>() as f64 / DRAWS as f64;
        Shares {
            hottest: top(1),
            top10: top(10),
            top1pct: top(items as usize / 100),
            top10pct: top(items as usize / 10),
        }
    }

    fn assert_close(what: &str, ours: f64, reference: f64, tolerance: f64) {
        assert!((ours - reference).abs() <= tolerance, "{what}: ours {ours:.5}, YCSB {reference:.5}");
    }

    #[test]
    fn key_names_match_ycsb_hashed_insert_order() {
        // YCSB 0.17.0 CoreWorkload.buildKeyName for key numbers 0..9, insertorder=hashed.
        let expected = [
            "user6284781860667377211",
            "user8517097267634966620",
            "user1820151046732198393",
            "user4052466453699787802",
            "user3232700585171816769",
            "user1000385178204227360",
            "user7697331399106995587",
            "user5465015992139406178",
            "user6873002678636213555",
            "user9105318085603802964",
        ];
        for (keynum, name) in expected.iter().enumerate() {
            assert_eq!(key_name(keynum as u64), *name);
        }
    }

    #[test]
    fn scrambled_zipfian_matches_ycsb_at_100k_items() {
        // YCSB 0.17.0 core generators, 10M draws: scrambled_zipfian_0.99, 100000 items.
        let (hottest, top10, top1pct, top10pct) = (0.03772, 0.11781, 0.30377, 0.44844);
        let mut rng = SplitMix64::new(1);
        let mut generator = ScrambledZipfianGenerator::new(0, 99_999);
        let ours = shares(100_000, || generator.next(&mut rng));
        assert_close("hottest", ours.hottest, hottest, 0.002);
        assert_close("top10", ours.top10, top10, 0.004);
        assert_close("top1%", ours.top1pct, top1pct, 0.01);
        // Fewer draws than the reference inflate the top-10% share a little (sampling noise
        // ranks lucky tail keys into the top), hence the wider tolerance.
        assert_close("top10%", ours.top10pct, top10pct, 0.03);
    }

    #[test]
    fn scrambled_zipfian_hottest_key_is_independent_of_item_count() {
        // YCSB 0.17.0 core generators, 10M draws: scrambled_zipfian_0.99, 1000000 items.
        let (hottest, top10) = (0.03787, 0.11806);
        let mut rng = SplitMix64::new(2);
        let mut generator = ScrambledZipfianGenerator::new(0, 999_999);
        let ours = shares(1_000_000, || generator.next(&mut rng));
        assert_close("hottest", ours.hottest, hottest, 0.002);
        assert_close("top10", ours.top10, top10, 0.004);
    }

    #[test]
    fn plain_zipfian_matches_ycsb_at_100k_items() {
        // YCSB 0.17.0 core generators, 10M draws: plain_zipfian_0.99, 100000 items.
        let (hottest, top10, top1pct, top10pct) = (0.07818, 0.24284, 0.61302, 0.80469);
        let mut rng = SplitMix64::new(3);
        let mut generator = ZipfianGenerator::new(0, 99_999, ZIPFIAN_CONSTANT);
        let ours = shares(100_000, || generator.next(&mut rng));
        assert_close("hottest", ours.hottest, hottest, 0.002);
        assert_close("top10", ours.top10, top10, 0.004);
        assert_close("top1%", ours.top1pct, top1pct, 0.01);
        assert_close("top10%", ours.top10pct, top10pct, 0.01);
    }

    fn latest_shares(items: u64, seed: u64) -> (f64, f64) {
        let mut rng = SplitMix64::new(seed);
        let last = items - 1;
        let mut generator = SkewedLatestGenerator::new(last);
        let (mut within1pct, mut within10pct) = (0u64, 0u64);
        for _ in 0..DRAWS {
            let distance = last - generator.next(&mut rng, last);
            within1pct += u64::from(distance < items / 100);
            within10pct += u64::from(distance < items / 10);
        }
        (within1pct as f64 / DRAWS as f64, within10pct as f64 / DRAWS as f64)
    }

    #[test]
    fn latest_favours_recent_inserts_like_ycsb() {
        // YCSB 0.17.0 core generators, 10M draws: skewed_latest at 100000 and 1000000 items.
        for (items, latest1pct, latest10pct, seed) in [(100_000, 0.61277, 0.80412, 4), (1_000_000, 0.6695, 0.83267, 5)]
        {
            let (ours1, ours10) = latest_shares(items, seed);
            assert_close("newest 1%", ours1, latest1pct, 0.01);
            assert_close("newest 10%", ours10, latest10pct, 0.01);
        }
    }

    #[test]
    fn latest_follows_the_insert_counter() {
        let inserts = InsertCounter::new(1000);
        let workload = Workload::core('d').unwrap_or_else(|| unreachable!());
        let mut chooser = KeyChooser::new(&workload, 1000, 100, inserts.last_value());
        let mut rng = SplitMix64::new(6);
        for _ in 0..500 {
            let keynum = inserts.claim();
            inserts.acknowledge(keynum);
        }
        let draws: Vec<u64> = (0..10_000).map(|_| chooser.next(&mut rng, &inserts)).collect();
        assert!(draws.iter().all(|k| *k <= 1499));
        let newest = draws.iter().filter(|k| **k == 1499).count() as f64 / draws.len() as f64;
        assert!(newest > 0.05, "the newest insert is the hottest key: {newest}");
        let among_new = draws.iter().filter(|k| **k >= 1000).count() as f64 / draws.len() as f64;
        assert!(among_new > 0.8, "reads concentrate on the 500 new keys: {among_new}");
    }

    #[test]
    fn zipfian_keys_never_exceed_the_inserted_range() {
        let inserts = InsertCounter::new(1000);
        let workload = Workload::core('e').unwrap_or_else(|| unreachable!());
        let mut chooser = KeyChooser::new(&workload, 1000, 10_000, inserts.last_value());
        let mut rng = SplitMix64::new(7);
        assert!((0..10_000).all(|_| chooser.next(&mut rng, &inserts) < 1000));
    }

    #[test]
    fn operation_mixes_match_the_core_workload_files() {
        const N: usize = 400_000;
        let expected = [
            ('a', [0.5, 0.5, 0.0, 0.0, 0.0]),
            ('b', [0.95, 0.05, 0.0, 0.0, 0.0]),
            ('c', [1.0, 0.0, 0.0, 0.0, 0.0]),
            ('d', [0.95, 0.0, 0.05, 0.0, 0.0]),
            ('e', [0.0, 0.0, 0.05, 0.95, 0.0]),
            ('f', [0.5, 0.0, 0.0, 0.0, 0.5]),
        ];
        let order =
            [Operation::Read, Operation::Update, Operation::Insert, Operation::Scan, Operation::ReadModifyWrite];
        let mut rng = SplitMix64::new(8);
        for (letter, proportions) in expected {
            let workload = Workload::core(letter).unwrap_or_else(|| unreachable!());
            let mut counts: HashMap<Operation, usize> = HashMap::new();
            for _ in 0..N {
                *counts.entry(workload.choose(&mut rng)).or_default() += 1;
            }
            for (op, want) in order.iter().zip(proportions) {
                let got = counts.get(op).copied().unwrap_or(0) as f64 / N as f64;
                // Binomial standard deviation at 400k draws is at most 0.0008.
                assert!((got - want).abs() < 0.005, "workload {letter} {op:?}: {got} vs {want}");
                if want == 0.0 {
                    assert_eq!(got, 0.0, "workload {letter} never does {op:?}");
                }
            }
        }
        assert!(Workload::core('g').is_none());
    }

    #[test]
    fn scan_lengths_cover_1_to_100_uniformly() {
        let mut rng = SplitMix64::new(9);
        let mut counts = [0u32; MAX_SCAN_LENGTH as usize + 1];
        for _ in 0..200_000 {
            let len = scan_length(&mut rng);
            assert!((1..=MAX_SCAN_LENGTH).contains(&len), "{len}");
            counts[len as usize] += 1;
        }
        assert_eq!(counts[0], 0);
        // Each length expects 2000 draws; all of them appear, none far from expectation.
        assert!(counts[1..].iter().all(|c| (1700..2300).contains(c)), "{counts:?}");
    }

    #[test]
    fn fnv_hash_is_non_negative_and_spreads_small_numbers() {
        let hashes: Vec<i64> = (0..1000).map(fnv_hash64).collect();
        assert!(hashes.iter().all(|h| *h >= 0));
        let mut unique = hashes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), hashes.len());
    }
}
