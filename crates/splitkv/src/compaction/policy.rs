//! Compaction picking policies: pure functions from a snapshot of the levels to the level to
//! compact next.
//!
//! A policy never touches files or clocks directly: the scheduler hands it a [`LevelsSnapshot`]
//! (files and bytes per level, thresholds, which levels have no free inputs right now) and a
//! [`SchedulerState`] (an injected clock reading), and reports every finished compaction back
//! through [`CompactionPolicy::on_compaction_done`]. That is what makes policies testable tick by
//! tick. Memtable flushes are not the policy's business: the scheduler always runs them first.
//!
//! Two policies exist:
//! - [`ScorePolicy`]: LevelDB/RocksDB scoring, the highest size/threshold ratio wins, L0 boosted
//!   at the slowdown trigger. Under a steady write load the boost keeps L0 -> L1 busy and deeper
//!   levels starve: L1 balloons, every L0 -> L1 compaction then rewrites much of L1.
//! - [`TimeSlicePolicy`]: the "Slot" round-robin scheduler. One level at a time holds a slice of
//!   compaction time and outranks every other level until it has used the slice or dropped
//!   under its threshold; the slice then passes to the next level down if that one is over its
//!   threshold, else to the level with the highest ratio. Optional extensions: a slice sized from
//!   the level's excess and measured drain rate, and releasing once a fraction of the excess is
//!   gone.
//!
//! Policies are `Send` but not shared: the scheduler calls them under its state lock. They take
//! the few numbers they need (triggers, level targets), never the whole `Options`: options name
//! the compaction listener, so depending on them here would close a module cycle.

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
    /// Bytes per level that running compactions already consume; they do not count towards the
    /// level's ratio, so a second worker does not pile onto a level the first already drains.
    /// Empty means nothing is running.
    pub compacting_bytes: Vec<u64>,
    /// Levels where no compaction can start right now (every candidate input is busy or would
    /// overlap a running compaction). Empty means none.
    pub blocked: Vec<bool>,
    /// True once point reads consulted L0 files in vain often enough (LevelDB's seek-triggered
    /// compaction, for L0): L0 is then due even under its file trigger, so that reads and scans
    /// stop paying for files the writes have left behind.
    pub l0_read_due: bool,
}

impl LevelsSnapshot {
    /// Target bytes of each of `num_levels` levels: `base * multiplier^(level-1)` for levels >= 1,
    /// 0 for L0 (which is judged by file count). The shape of [`LevelsSnapshot::max_bytes`].
    pub fn level_targets(num_levels: usize, base: u64, multiplier: f64) -> Vec<u64> {
        let mut targets = vec![0u64; num_levels];
        let mut target = base as f64;
        for t in targets.iter_mut().skip(1) {
            *t = target as u64;
            target *= multiplier;
        }
        targets
    }

    /// The size/threshold ratio of a level (L0 counts files, deeper levels bytes not already
    /// being compacted).
    pub fn ratio(&self, level: usize) -> f64 {
        if level == 0 {
            self.files[0] as f64 / self.l0_trigger.max(1) as f64
        } else {
            self.free_bytes(level) as f64 / self.max_bytes[level].max(1) as f64
        }
    }

    /// Bytes above the level's threshold (L0: the share of its bytes above the file trigger).
    pub fn excess_bytes(&self, level: usize) -> u64 {
        if level == 0 {
            let files = self.files[0];
            if files <= self.l0_trigger || files == 0 {
                return 0;
            }
            (self.bytes[0] as f64 * (files - self.l0_trigger) as f64 / files as f64) as u64
        } else {
            self.free_bytes(level).saturating_sub(self.max_bytes[level])
        }
    }

    fn free_bytes(&self, level: usize) -> u64 {
        self.bytes[level].saturating_sub(self.compacting_bytes.get(level).copied().unwrap_or(0))
    }

    /// True if a compaction of `level` can start now.
    pub fn can_start(&self, level: usize) -> bool {
        !self.blocked.get(level).copied().unwrap_or(false)
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.files.len()
    }

    /// Levels that may be compacted (the last level has nowhere to go).
    fn compactable(&self) -> std::ops::Range<usize> {
        0..self.num_levels().saturating_sub(1)
    }
}

/// Scheduler state a policy may read: the injected clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerState {
    /// Milliseconds on the scheduler's clock (monotonic, injected in tests).
    pub now_ms: u64,
}

/// A finished compaction, as reported back to the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FinishedCompaction {
    /// Input level.
    pub level: usize,
    /// Wall time the compaction took, including flushes that pre-empted it.
    pub duration_ms: u64,
    /// Bytes it moved out of `level`.
    pub level_bytes: u64,
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
    /// L0 is under its file trigger, but reads keep consulting its files in vain.
    Level0Reads,
    /// The level holds the compaction time slice.
    SliceHolder,
    /// A manual `compact_range`.
    Manual,
}

impl PickReason {
    /// Short lowercase name for logs.
    pub fn name(self) -> &'static str {
        match self {
            PickReason::Level0Files => "l0_files",
            PickReason::LevelSize => "level_size",
            PickReason::Level0Slowdown => "l0_slowdown",
            PickReason::Level0Reads => "l0_reads",
            PickReason::SliceHolder => "slice_holder",
            PickReason::Manual => "manual",
        }
    }
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
    /// The level to compact now, or `None` if no level is over its threshold and able to start.
    fn pick(&mut self, levels: &LevelsSnapshot, state: &SchedulerState) -> Option<LevelPick>;

    /// Called by the scheduler after every finished compaction (not after flushes).
    fn on_compaction_done(&mut self, _done: &FinishedCompaction, _state: &SchedulerState) {}

    /// The level holding the compaction time slice, for policies that have one.
    fn slice_holder(&self) -> Option<usize> {
        None
    }
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

/// Highest-score pick among levels that can start (shared by both policies).
fn best_by_score(levels: &LevelsSnapshot, l0_boost: bool) -> Option<LevelPick> {
    let mut best: Option<LevelPick> = None;
    for level in levels.compactable() {
        if !levels.can_start(level) {
            continue;
        }
        let mut pick = LevelPick {
            level,
            score: levels.ratio(level),
            reason: if level == 0 { PickReason::Level0Files } else { PickReason::LevelSize },
        };
        if level == 0 && l0_boost && levels.files[0] >= levels.l0_slowdown {
            pick.score += L0_BOOST_SCORE;
            pick.reason = PickReason::Level0Slowdown;
        }
        if level == 0 && pick.score < 1.0 && levels.l0_read_due && levels.files[0] > 0 {
            // Just due: any level over its own threshold goes first.
            pick.score = 1.0;
            pick.reason = PickReason::Level0Reads;
        }
        if pick.score >= 1.0 && best.is_none_or(|b| pick.score > b.score) {
            best = Some(pick);
        }
    }
    best
}

impl CompactionPolicy for ScorePolicy {
    fn pick(&mut self, levels: &LevelsSnapshot, _state: &SchedulerState) -> Option<LevelPick> {
        best_by_score(levels, self.l0_boost)
    }
}

/// Configuration of [`TimeSlicePolicy`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeSliceConfig {
    /// Compaction time a level may use per grant (the static slice, and the fallback of the
    /// dynamic one before the level's drain rate is known).
    pub slice_ms: u64,
    /// Size each grant from the level's excess over its measured drain rate instead.
    pub dynamic: bool,
    /// Release the slice once this fraction of the excess present at the grant is gone
    /// (`None`: hold until under threshold or the slice is used up).
    pub drain_fraction: Option<f64>,
    /// Whether L0 at the slowdown trigger outranks other levels when the holder cannot run.
    pub l0_boost: bool,
}

impl Default for TimeSliceConfig {
    fn default() -> Self {
        TimeSliceConfig { slice_ms: 1000, dynamic: false, drain_fraction: None, l0_boost: true }
    }
}

/// Dynamic slices are kept within `[slice_ms / DYNAMIC_MIN_DIVISOR, slice_ms * DYNAMIC_MAX_FACTOR]`
/// so a wild rate estimate can neither make a grant useless nor let one level hog the workers.
const DYNAMIC_MIN_DIVISOR: u64 = 8;
const DYNAMIC_MAX_FACTOR: u64 = 16;

/// Weight of the newest sample in the per-level drain-rate average.
const RATE_SMOOTHING: f64 = 0.3;

/// Score of the slice holder: above every score, including the L0 boost (the thesis' 1,000,000
/// bonus that makes the holder win in RocksDB's own ranking).
const SLICE_HOLDER_SCORE: f64 = 1e9;

/// The level currently holding the slice.
#[derive(Clone, Debug, PartialEq)]
struct Grant {
    level: usize,
    slice_ms: u64,
    used_ms: u64,
    excess_at_grant: u64,
}

/// Why a grant ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The slice was used up.
    Expired,
    /// The level dropped under its threshold.
    UnderThreshold,
    /// The configured fraction of the excess was drained.
    Drained,
}

/// The Slot time-slice round-robin scheduler (see the module documentation).
///
/// Grant: a level over its threshold; the level after the one that last released first (wrapping
/// from the deepest compactable level to L0), else the highest ratio, the releasing level only if
/// no other level is over its threshold. To bound waiting, an
/// over-threshold level passed over by `num_levels` consecutive grants is served first; the
/// thesis' rules alone can bounce the slice between two levels forever.
/// Use: every finished compaction of the holder adds its duration to the slice.
/// Revoke: slice used up, level under threshold, or (optionally) the drain fraction reached.
#[derive(Clone, Debug)]
pub struct TimeSlicePolicy {
    config: TimeSliceConfig,
    holder: Option<Grant>,
    last_released: Option<usize>,
    /// Per level: grants given to other levels while this one was over its threshold.
    passed_over: Vec<u32>,
    /// Per level: smoothed bytes drained per millisecond of compaction.
    drain_rate: Vec<Option<f64>>,
    /// Grants so far and how the last one ended (for reports and tests).
    grants: u64,
    last_release: Option<Release>,
}

impl TimeSlicePolicy {
    /// A policy with nobody holding the slice.
    pub fn new(config: TimeSliceConfig) -> Self {
        TimeSlicePolicy {
            config,
            holder: None,
            last_released: None,
            passed_over: Vec::new(),
            drain_rate: Vec::new(),
            grants: 0,
            last_release: None,
        }
    }

    /// Grants made so far.
    pub fn grants(&self) -> u64 {
        self.grants
    }

    /// How the most recent grant ended.
    pub fn last_release(&self) -> Option<Release> {
        self.last_release
    }

    /// The slice length of the current grant.
    pub fn current_slice_ms(&self) -> Option<u64> {
        self.holder.as_ref().map(|g| g.slice_ms)
    }

    fn release_reason(&self, grant: &Grant, levels: &LevelsSnapshot) -> Option<Release> {
        if grant.used_ms >= grant.slice_ms {
            return Some(Release::Expired);
        }
        if levels.ratio(grant.level) < 1.0 {
            return Some(Release::UnderThreshold);
        }
        if let Some(fraction) = self.config.drain_fraction {
            let target = grant.excess_at_grant as f64 * (1.0 - fraction.clamp(0.0, 1.0));
            if (levels.excess_bytes(grant.level) as f64) <= target {
                return Some(Release::Drained);
            }
        }
        None
    }

    fn choose_grantee(&self, levels: &LevelsSnapshot) -> Option<usize> {
        let over: Vec<usize> = levels.compactable().filter(|&l| levels.ratio(l) >= 1.0).collect();
        if over.is_empty() {
            return None;
        }
        let starving_after = levels.num_levels() as u32;
        let passed = |l: usize| self.passed_over.get(l).copied().unwrap_or(0);
        if let Some(&l) = over.iter().filter(|&&l| passed(l) >= starving_after).max_by_key(|&&l| passed(l)) {
            return Some(l);
        }
        if let Some(prev) = self.last_released {
            let deepest = levels.num_levels().saturating_sub(1).max(1);
            let next = (prev + 1) % deepest;
            if over.contains(&next) {
                return Some(next);
            }
        }
        // The level that just released goes last: re-granting it at once would defeat a partial
        // drain and let one level keep the slice whenever its ratio stays highest.
        let others = over.iter().copied().filter(|&l| Some(l) != self.last_released);
        let highest = |it: &mut dyn Iterator<Item = usize>| {
            it.max_by(|&a, &b| levels.ratio(a).total_cmp(&levels.ratio(b)).then(b.cmp(&a)))
        };
        highest(&mut others.clone()).or_else(|| highest(&mut over.iter().copied()))
    }

    fn slice_for(&self, level: usize, levels: &LevelsSnapshot) -> u64 {
        let base = self.config.slice_ms.max(1);
        if !self.config.dynamic {
            return base;
        }
        match self.drain_rate.get(level).copied().flatten() {
            Some(rate) if rate > 0.0 => {
                let wanted = (levels.excess_bytes(level) as f64 / rate).ceil() as u64;
                wanted.clamp((base / DYNAMIC_MIN_DIVISOR).max(1), base * DYNAMIC_MAX_FACTOR)
            }
            _ => base,
        }
    }

    fn grant(&mut self, level: usize, levels: &LevelsSnapshot) {
        self.passed_over.resize(levels.num_levels(), 0);
        for l in levels.compactable() {
            if l == level {
                self.passed_over[l] = 0;
            } else if levels.ratio(l) >= 1.0 {
                self.passed_over[l] += 1;
            } else {
                self.passed_over[l] = 0;
            }
        }
        self.grants += 1;
        self.holder = Some(Grant {
            level,
            slice_ms: self.slice_for(level, levels),
            used_ms: 0,
            excess_at_grant: levels.excess_bytes(level),
        });
    }
}

impl CompactionPolicy for TimeSlicePolicy {
    fn pick(&mut self, levels: &LevelsSnapshot, _state: &SchedulerState) -> Option<LevelPick> {
        if let Some(grant) = self.holder.take() {
            match self.release_reason(&grant, levels) {
                Some(why) => {
                    self.last_released = Some(grant.level);
                    self.last_release = Some(why);
                }
                None => self.holder = Some(grant),
            }
        }
        if self.holder.is_none() {
            if let Some(level) = self.choose_grantee(levels) {
                self.grant(level, levels);
            }
        }
        match &self.holder {
            Some(g) if levels.can_start(g.level) => Some(LevelPick {
                level: g.level,
                score: SLICE_HOLDER_SCORE + levels.ratio(g.level),
                reason: PickReason::SliceHolder,
            }),
            // The holder's inputs are all busy (another worker drains it): let this worker do
            // the most urgent other work instead of idling.
            _ => best_by_score(levels, self.config.l0_boost),
        }
    }

    fn on_compaction_done(&mut self, done: &FinishedCompaction, _state: &SchedulerState) {
        if let Some(g) = self.holder.as_mut().filter(|g| g.level == done.level) {
            g.used_ms += done.duration_ms;
        }
        if done.level_bytes > 0 {
            if self.drain_rate.len() <= done.level {
                self.drain_rate.resize(done.level + 1, None);
            }
            let sample = done.level_bytes as f64 / done.duration_ms.max(1) as f64;
            let rate = &mut self.drain_rate[done.level];
            *rate = Some(match *rate {
                Some(old) => old * (1.0 - RATE_SMOOTHING) + sample * RATE_SMOOTHING,
                None => sample,
            });
        }
    }

    fn slice_holder(&self) -> Option<usize> {
        self.holder.as_ref().map(|g| g.level)
    }
}

#[cfg(test)]
mod tests {
    //! Picks on concrete trees are tested from text in `testdata/score` and
    //! `testdata/time_slice` (see `datadriven_tests`); what stays here needs loops or no tree.

    use super::*;

    #[test]
    fn level_targets_grow_by_multiplier() {
        assert_eq!(LevelsSnapshot::level_targets(4, 10, 10.0), vec![0, 10, 100, 1000]);
        assert_eq!(LevelsSnapshot::level_targets(1, 10, 10.0), vec![0]);
    }

    // ---- Time-slice policy, driven tick by tick with a fake clock. ----

    fn five_levels(bytes: &[u64]) -> LevelsSnapshot {
        LevelsSnapshot {
            files: vec![1; bytes.len()],
            bytes: bytes.to_vec(),
            l0_trigger: 4,
            l0_slowdown: 8,
            l0_stop: 12,
            max_bytes: vec![0, 100, 1000, 10_000, 100_000],
            ..LevelsSnapshot::default()
        }
    }

    fn slot(slice_ms: u64) -> TimeSlicePolicy {
        TimeSlicePolicy::new(TimeSliceConfig { slice_ms, ..TimeSliceConfig::default() })
    }

    /// Runs one compaction of `level` taking `ms` on the fake clock.
    fn finish(p: &mut TimeSlicePolicy, clock: &mut SchedulerState, level: usize, ms: u64) {
        clock.now_ms += ms;
        p.on_compaction_done(&FinishedCompaction { level, duration_ms: ms, level_bytes: 10 }, clock);
    }

    /// A synthetic tree under constant write pressure: every level stays over its threshold and
    /// the one with the slice drains slowly. No over-threshold level may wait for more than a
    /// bounded number of grants, whatever the ratios.
    #[test]
    #[allow(clippy::needless_range_loop)] // levels index three parallel arrays
    fn no_over_threshold_level_waits_more_than_a_bounded_number_of_slices() {
        let mut p = slot(40);
        let mut clock = SchedulerState::default();
        // L1 is hugely over, L3 moderately, L2 barely; with highest-ratio fallback alone L2 would
        // lose every contest.
        let mut s = five_levels(&[0, 100_000, 1001, 50_000, 0]);
        let mut last_grant = [0u64; 5];
        let mut max_wait = [0u64; 5];
        let mut held = [false; 5];
        for _ in 0..2000 {
            let pick = p.pick(&s, &clock).unwrap();
            let holder = p.slice_holder().unwrap();
            assert_eq!(pick.level, holder);
            let g = p.grants();
            if g != last_grant[holder] {
                held[holder] = true;
            }
            for level in 1..4 {
                if level == holder {
                    last_grant[level] = g;
                } else {
                    max_wait[level] = max_wait[level].max(g - last_grant[level]);
                }
            }
            finish(&mut p, &mut clock, holder, 15);
            // Writes refill L1 as fast as it drains; deeper levels receive what is pushed down.
            s.bytes[1] = 100_000;
            s.bytes[2] = 1001;
            s.bytes[3] = 50_000;
        }
        assert!(held[1] && held[2] && held[3], "every over-threshold level got the slice: {held:?}");
        let bound = s.num_levels() as u64 + 1;
        for level in 1..4 {
            assert!(max_wait[level] <= bound, "L{level} waited {} grants (bound {bound})", max_wait[level]);
        }
    }
}
