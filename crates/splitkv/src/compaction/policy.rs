//! Compaction picking policies: pure functions from a snapshot of the levels to the level to
//! compact next.
//!
//! A policy never touches files or clocks directly: the scheduler hands it a [`LevelsSnapshot`]
//! (files and bytes per level, thresholds) and a [`SchedulerState`] (an injected clock reading),
//! which is what makes policies testable tick by tick. Memtable flushes are not the policy's
//! business: the scheduler always runs them first.

use crate::options::Options;

/// Sizes and thresholds of every level, as seen when picking.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelsSnapshot {
    /// Number of files per level.
    pub files: Vec<usize>,
    /// Bytes per level.
    pub bytes: Vec<u64>,
    /// L0 file count that makes L0 due for compaction.
    pub l0_trigger: usize,
    /// L0 file count at which writes are slowed.
    pub l0_slowdown: usize,
    /// L0 file count at which writes stop.
    pub l0_stop: usize,
    /// Target bytes of each level (index 0 unused).
    pub max_bytes: Vec<u64>,
}

impl LevelsSnapshot {
    /// Level targets from options: `base * multiplier^(level-1)` for levels >= 1.
    pub fn max_bytes_for_levels(options: &Options) -> Vec<u64> {
        let mut targets = vec![0u64; options.num_levels];
        let mut target = options.max_bytes_for_level_base as f64;
        for t in targets.iter_mut().skip(1) {
            *t = target as u64;
            target *= options.max_bytes_for_level_multiplier;
        }
        targets
    }

    /// The size/threshold ratio of a level (L0 counts files, deeper levels bytes).
    pub fn ratio(&self, level: usize) -> f64 {
        if level == 0 {
            self.files[0] as f64 / self.l0_trigger.max(1) as f64
        } else {
            self.bytes[level] as f64 / self.max_bytes[level].max(1) as f64
        }
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.files.len()
    }
}

/// Scheduler state a policy may read (and, for stateful policies, update): the injected clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerState {
    /// Milliseconds on the scheduler's clock (monotonic, injected in tests).
    pub now_ms: u64,
}

/// Why a level was picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PickReason {
    /// L0 reached its file-count trigger.
    Level0Files,
    /// A level exceeded its size target.
    LevelSize,
    /// L0 is at the slowdown trigger and gets priority over everything.
    Level0Slowdown,
}

/// The level a policy chose to compact into the next one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelPick {
    /// Input level.
    pub level: usize,
    /// Score or ratio that won.
    pub score: f64,
    /// Why.
    pub reason: PickReason,
}

/// Picks the next level to compact.
pub trait CompactionPolicy: Send {
    /// The level to compact now, or `None` if every level is within its threshold.
    fn pick(&mut self, levels: &LevelsSnapshot, state: &SchedulerState) -> Option<LevelPick>;
}

/// LevelDB/RocksDB scoring: L0 by file count over its trigger, deeper levels by bytes over target;
/// the highest score >= 1 wins.
///
/// With `l0_boost`, L0 at or above the slowdown trigger gets a very large score (RocksDB's
/// behaviour the Slot thesis describes): it keeps writes flowing but can starve deeper levels.
#[derive(Clone, Debug)]
pub struct ScorePolicy {
    /// Whether L0 at the slowdown trigger outranks every other level.
    pub l0_boost: bool,
}

impl Default for ScorePolicy {
    fn default() -> Self {
        ScorePolicy { l0_boost: true }
    }
}

/// Score given to L0 at the slowdown trigger when boosting.
const L0_BOOST_SCORE: f64 = 1e6;

impl CompactionPolicy for ScorePolicy {
    fn pick(&mut self, levels: &LevelsSnapshot, _state: &SchedulerState) -> Option<LevelPick> {
        let mut best: Option<LevelPick> = None;
        // The last level has nowhere to go.
        for level in 0..levels.num_levels().saturating_sub(1) {
            let mut pick = LevelPick {
                level,
                score: levels.ratio(level),
                reason: if level == 0 { PickReason::Level0Files } else { PickReason::LevelSize },
            };
            if level == 0 && self.l0_boost && levels.files[0] >= levels.l0_slowdown {
                pick.score = L0_BOOST_SCORE + pick.score;
                pick.reason = PickReason::Level0Slowdown;
            }
            if pick.score >= 1.0 && best.is_none_or(|b| pick.score > b.score) {
                best = Some(pick);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(files: &[usize], bytes: &[u64]) -> LevelsSnapshot {
        LevelsSnapshot {
            files: files.to_vec(),
            bytes: bytes.to_vec(),
            l0_trigger: 4,
            l0_slowdown: 8,
            l0_stop: 12,
            max_bytes: vec![0, 100, 1000, 10_000],
        }
    }

    #[test]
    fn nothing_to_do_under_thresholds() {
        let s = snapshot(&[3, 1, 1, 1], &[30, 90, 900, 5000]);
        assert_eq!(ScorePolicy::default().pick(&s, &SchedulerState::default()), None);
    }

    #[test]
    fn highest_ratio_wins() {
        let s = snapshot(&[4, 1, 1, 1], &[40, 150, 3000, 5000]);
        let p = ScorePolicy::default().pick(&s, &SchedulerState::default()).unwrap();
        assert_eq!((p.level, p.reason), (2, PickReason::LevelSize));
    }

    #[test]
    fn l0_boost_outranks_deeper_levels_only_when_enabled() {
        let s = snapshot(&[8, 1, 1, 1], &[80, 150, 9000, 5000]);
        let p = ScorePolicy { l0_boost: true }.pick(&s, &SchedulerState::default()).unwrap();
        assert_eq!((p.level, p.reason), (0, PickReason::Level0Slowdown));
        let p = ScorePolicy { l0_boost: false }.pick(&s, &SchedulerState::default()).unwrap();
        assert_eq!(p.level, 2);
    }

    #[test]
    fn last_level_is_never_picked() {
        let s = snapshot(&[0, 0, 0, 1], &[0, 0, 0, 1 << 40]);
        assert_eq!(ScorePolicy::default().pick(&s, &SchedulerState::default()), None);
    }

    #[test]
    fn level_targets_grow_by_multiplier() {
        let o = Options {
            num_levels: 4,
            max_bytes_for_level_base: 10,
            max_bytes_for_level_multiplier: 10.0,
            ..Options::default()
        };
        assert_eq!(LevelsSnapshot::max_bytes_for_levels(&o), vec![0, 10, 100, 1000]);
    }
}
