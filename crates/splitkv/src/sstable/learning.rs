//! When to train learned index blocks (TridentKV's adaptive rule), and the counters that show how
//! the models do.
//!
//! Two training modes exist. *At write time* a flush or compaction trains the table's model in
//! one pass over keys it already holds: cheap, but paid on the write path. *Lazily*, a table
//! written with a binary index gets a model trained in memory once it has been read often and has
//! lived long (Bourbon's wait-before-learning: a file that survived a while is likely to survive
//! longer, so the training pays back). TridentKV's rule picks between them: write-time training
//! unless the workload is write-intensive, lazy training otherwise; a model whose measured error
//! is too large is never used. The decisions are the pure functions [`write_intensive`] and
//! [`lazy_training_due`]; [`IndexLearning`] holds one database's state for them.
//!
//! Thread-safety: [`IndexLearning`] is shared (`Arc`) by the flush and compaction threads, the
//! table cache and readers; everything in it is atomic or briefly locked.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::builder::BuiltTable;
use super::format::IndexBlockKind;

/// Writes per read above which the workload is write-intensive: training on the write path would
/// slow the writes that dominate, while few reads would use the models.
pub const WRITE_INTENSIVE_RATIO: u64 = 4;
/// Lookups a table must have served before it is trained lazily (at least one per data block
/// too: training reads every block once, and should not cost more reads than it saves).
pub const LAZY_MIN_LOOKUPS: u64 = 1000;
/// Age a table must have reached before it is trained lazily.
pub const LAZY_MIN_AGE: Duration = Duration::from_secs(1);
/// One in this many lookups is timed, so timing costs little.
pub const LOOKUP_SAMPLE: u64 = 64;

/// True if `writes` and `reads` since the last decision make a write-intensive workload. With
/// no point lookup at all (a compaction right after a flush, say) nothing would use a model, so
/// that counts as write-intensive too.
pub fn write_intensive(writes: u64, reads: u64) -> bool {
    reads == 0 || writes > WRITE_INTENSIVE_RATIO.saturating_mul(reads)
}

/// True if a table with `data_blocks` blocks, `lookups` served and `age` should be trained now.
pub fn lazy_training_due(lookups: u64, age: Duration, data_blocks: usize) -> bool {
    lookups >= LAZY_MIN_LOOKUPS.max(data_blocks as u64) && age >= LAZY_MIN_AGE
}

/// Counters of learned-index activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearningCounters {
    /// Tables written with a learned index.
    pub tables_learned: u64,
    /// Tables written with a binary index because the trained model was rejected.
    pub build_rejections: u64,
    /// Tables that got a model trained lazily.
    pub lazy_trained: u64,
    /// Lazy trainings whose model was rejected (or whose table could not be read).
    pub lazy_rejections: u64,
    /// Sampled index lookups through a model, and their total nanoseconds.
    pub sampled_learned_lookups: u64,
    /// Nanoseconds of the sampled lookups through a model.
    pub sampled_learned_nanos: u64,
    /// Sampled index lookups by binary search.
    pub sampled_binary_lookups: u64,
    /// Nanoseconds of the sampled binary-search lookups.
    pub sampled_binary_nanos: u64,
}

/// One database's learned-index state: the workload meter, the lazy-training slot and counters.
#[derive(Debug, Default)]
pub struct IndexLearning {
    /// Write and read totals at the last write-time decision.
    meter: Mutex<(u64, u64)>,
    /// A lazy training is running (one at a time, so training never takes both cores).
    training: AtomicBool,
    tables_learned: AtomicU64,
    build_rejections: AtomicU64,
    lazy_trained: AtomicU64,
    lazy_rejections: AtomicU64,
    sampled: [AtomicU64; 4],
}

impl IndexLearning {
    /// The index kind to write a table with, given the configured kind and the database's total
    /// writes and reads so far (`Adaptive` resolves by the workload since the last decision).
    pub fn kind_for_build(&self, configured: IndexBlockKind, writes: u64, reads: u64) -> IndexBlockKind {
        match configured {
            IndexBlockKind::Adaptive => {
                let mut meter = self.meter.lock();
                let (dw, dr) = (writes.saturating_sub(meter.0), reads.saturating_sub(meter.1));
                *meter = (writes, reads);
                if write_intensive(dw, dr) {
                    IndexBlockKind::Binary
                } else {
                    IndexBlockKind::Learned
                }
            }
            other => other,
        }
    }

    /// Counts a finished table.
    pub fn note_built(&self, built: &BuiltTable) {
        if built.index_kind == IndexBlockKind::Learned {
            self.tables_learned.fetch_add(1, Ordering::Relaxed);
        }
        if built.model_rejected {
            self.build_rejections.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Claims the lazy-training slot; `false` if a training is running.
    pub(super) fn claim_trainer(&self) -> bool {
        !self.training.swap(true, Ordering::AcqRel)
    }

    /// Releases the slot and counts the outcome.
    pub(super) fn release_trainer(&self, trained: bool) {
        let counter = if trained { &self.lazy_trained } else { &self.lazy_rejections };
        counter.fetch_add(1, Ordering::Relaxed);
        self.training.store(false, Ordering::Release);
    }

    /// Records a timed lookup.
    pub(super) fn note_lookup(&self, learned: bool, nanos: u64) {
        let base = if learned { 0 } else { 2 };
        self.sampled[base].fetch_add(1, Ordering::Relaxed);
        self.sampled[base + 1].fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn counters(&self) -> LearningCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LearningCounters {
            tables_learned: get(&self.tables_learned),
            build_rejections: get(&self.build_rejections),
            lazy_trained: get(&self.lazy_trained),
            lazy_rejections: get(&self.lazy_rejections),
            sampled_learned_lookups: get(&self.sampled[0]),
            sampled_learned_nanos: get(&self.sampled[1]),
            sampled_binary_lookups: get(&self.sampled[2]),
            sampled_binary_nanos: get(&self.sampled[3]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_trains_at_write_time_unless_writes_dominate() {
        let l = IndexLearning::default();
        // A load: only writes since open.
        assert_eq!(l.kind_for_build(IndexBlockKind::Adaptive, 100_000, 0), IndexBlockKind::Binary);
        // Then a mixed phase: 50k writes, 40k reads since the last decision.
        assert_eq!(l.kind_for_build(IndexBlockKind::Adaptive, 150_000, 40_000), IndexBlockKind::Learned);
        // Then writes again outnumber reads more than 4 to 1.
        assert_eq!(l.kind_for_build(IndexBlockKind::Adaptive, 250_000, 60_000), IndexBlockKind::Binary);
        // Fixed kinds are kept.
        assert_eq!(l.kind_for_build(IndexBlockKind::Learned, 1 << 40, 0), IndexBlockKind::Learned);
        assert_eq!(l.kind_for_build(IndexBlockKind::Binary, 0, 1 << 40), IndexBlockKind::Binary);
    }

    #[test]
    fn lazy_training_waits_for_reads_and_age() {
        assert!(!lazy_training_due(LAZY_MIN_LOOKUPS - 1, LAZY_MIN_AGE, 10));
        assert!(!lazy_training_due(LAZY_MIN_LOOKUPS, LAZY_MIN_AGE / 2, 10));
        assert!(lazy_training_due(LAZY_MIN_LOOKUPS, LAZY_MIN_AGE, 10));
        // Big tables need a lookup per block first.
        assert!(!lazy_training_due(LAZY_MIN_LOOKUPS, LAZY_MIN_AGE, 5000));
        assert!(lazy_training_due(5000, LAZY_MIN_AGE, 5000));
    }

    #[test]
    fn one_trainer_at_a_time() {
        let l = IndexLearning::default();
        assert!(l.claim_trainer());
        assert!(!l.claim_trainer());
        l.release_trainer(true);
        assert!(l.claim_trainer());
        l.release_trainer(false);
        let c = l.counters();
        assert_eq!((c.lazy_trained, c.lazy_rejections), (1, 1));
    }
}
