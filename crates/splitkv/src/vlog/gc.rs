//! Value-log garbage collection: which segment to clean (pure policies) and how (the collector).
//!
//! Policies are pure functions of per-segment statistics (`Oldest`, `Greedy`, `CostBenefit`);
//! they never pick the active segment nor one without garbage.
//!
//! [`GarbageCollector::run_once`] cleans one victim segment in the order that keeps every
//! acknowledged write and every open read view intact:
//! 1. scan the victim and keep the records whose pointer the index still holds;
//! 2. hand them to the host's write path, which re-checks each pointer *as write leader* (so a
//!    concurrent user write of the same key always wins), appends the survivors at the log head,
//!    syncs, and publishes the new pointers;
//! 3. release the victim only once no snapshot or iterator older than the relocation exists:
//!    record its removal in the MANIFEST, then delete the file. Until then it waits in a queue.
//!
//! Only segments entirely before the recovery log head are eligible: younger records may still
//! be needed to rebuild the memtable after a crash.
//!
//! With hole punching enabled, a victim's dead ranges are freed in place
//! (`fallocate(PUNCH_HOLE)`, block-aligned) without copying, SSHKV's logical space
//! amplification on a file system; copy-GC takes over when the logical space budget is spent or a
//! segment is mostly holes. The collector reaches the index only through [`GcHost`], so the hash
//! index can serve it too.
//!
//! Thread-safety: policies are stateless; the collector serialises runs with an internal lock.

use std::collections::HashMap;
use std::path::Path;

use parking_lot::Mutex;

use crate::error::Result;
use crate::filenames::segment_file;
use crate::fs::{AccessPattern, FileSystem};
use crate::types::{SegmentId, SequenceNumber, ValuePointer};
use crate::vlog::{scan_segment, RecordKind, ReplayedRecord};

/// Block size for hole punching: holes are aligned to it so the file system can free whole blocks.
pub const PUNCH_BLOCK: u64 = 4096;

/// What GC knows about one segment when choosing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentStats {
    /// Segment id; ids grow with time, so smaller ids are older.
    pub id: SegmentId,
    /// Bytes in the segment file.
    pub size: u64,
    /// Bytes of records no longer referenced by the index.
    pub garbage_bytes: u64,
    /// How long ago the segment was written, in segments: the active segment's id minus this id.
    pub age: u64,
}

/// Picks the next segment to garbage-collect.
pub trait GcPolicy: Send + Sync {
    /// The segment to clean among `segments`, or `None` if none is worth it. `active` is the
    /// segment currently appended to; it is never returned.
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId>;
}

/// What the collector needs from the database.
pub trait GcHost: Send + Sync {
    /// True if the index still maps `key` to exactly `ptr`.
    fn is_current(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool>;
    /// Statistics of the segments eligible for GC (entirely before the log head, not active).
    fn eligible_segments(&self) -> Result<Vec<SegmentStats>>;
    /// Bytes of all value-log segment files (their lengths: the logical space in use).
    fn log_bytes(&self) -> u64;
    /// Rewrites still-current records at the log head through the write path (re-checking each
    /// as write leader), syncs, publishes the new pointers; returns the last sequence number
    /// used (or the current one if nothing was rewritten).
    fn relocate(&self, records: Vec<ReplayedRecord>) -> Result<SequenceNumber>;
    /// True if no snapshot or iterator older than `seq` is open.
    fn no_reader_older_than(&self, seq: SequenceNumber) -> bool;
    /// Records the segment's removal durably, waits out in-flight point reads, deletes the file.
    fn release_segment(&self, id: SegmentId) -> Result<()>;
    /// File system and directory, for scanning and punching.
    fn files(&self) -> (&dyn FileSystem, &Path);
}

/// Collector settings.
#[derive(Clone, Debug)]
pub struct GcSettings {
    /// A segment is worth cleaning in the background once this fraction of it is garbage.
    pub garbage_ratio: f64,
    /// Physical space budget for the value log, if any; GC also runs once the log exceeds
    /// `space_trigger` of it.
    pub space_budget: Option<u64>,
    /// Fraction of the budget that triggers GC (SSHKV: 0.8).
    pub space_trigger: f64,
    /// Free dead ranges in place instead of copying, while the logical space allows it.
    pub punch_holes: bool,
    /// Logical space allowed as a multiple of the physical budget when punching (SSHKV's N).
    pub logical_space_factor: f64,
}

/// What one GC run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcOutcome {
    /// Segment cleaned or punched, if any.
    pub victim: Option<SegmentId>,
    /// Bytes read from the victim.
    pub bytes_read: u64,
    /// Records rewritten at the head.
    pub records_relocated: u64,
    /// Value bytes rewritten at the head.
    pub bytes_relocated: u64,
    /// Bytes freed by hole punching.
    pub bytes_punched: u64,
    /// Segments deleted in this run (the victim, or earlier victims whose readers are gone).
    pub segments_released: Vec<SegmentId>,
}

/// Cumulative GC counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcTotals {
    /// Runs that cleaned or punched a segment.
    pub runs: u64,
    /// Bytes read from victims.
    pub bytes_read: u64,
    /// Bytes rewritten at the log head.
    pub bytes_relocated: u64,
    /// Bytes freed by punching holes.
    pub bytes_punched: u64,
    /// Segments deleted.
    pub segments_released: u64,
}

struct CollectorState {
    /// False once a run copied back almost everything it read: cleaning more would only move
    /// live data around, so writers must not wait for it.
    effective: bool,
    /// Cleaned victims waiting for older readers to finish, with the relocation's sequence.
    pending_release: Vec<(SegmentId, SequenceNumber)>,
    /// Garbage bytes a segment had when its holes were last punched.
    punched_at: HashMap<SegmentId, u64>,
    totals: GcTotals,
}

/// Runs garbage collection against a [`GcHost`].
pub struct GarbageCollector {
    policy: Box<dyn GcPolicy>,
    settings: GcSettings,
    state: Mutex<CollectorState>,
    /// Held for a whole run: the background thread and `run_gc` must not clean (or release)
    /// the same segment twice.
    run_lock: Mutex<()>,
}

impl GarbageCollector {
    /// A collector with a policy and settings.
    pub fn new(policy: Box<dyn GcPolicy>, settings: GcSettings) -> Self {
        GarbageCollector {
            policy,
            settings,
            state: Mutex::new(CollectorState {
                effective: true,
                pending_release: Vec::new(),
                punched_at: HashMap::new(),
                totals: GcTotals::default(),
            }),
            run_lock: Mutex::new(()),
        }
    }

    /// Cumulative counters.
    pub fn totals(&self) -> GcTotals {
        self.state.lock().totals.clone()
    }

    /// Segments cleaned but not yet deleted because an older reader is still open.
    pub fn pending_releases(&self) -> Vec<SegmentId> {
        self.state.lock().pending_release.iter().map(|(id, _)| *id).collect()
    }

    /// True if the value log exceeds the space budget and GC can still shrink it: there is a
    /// victim, and the last run freed a meaningful part of what it read.
    pub fn can_relieve_space(&self, host: &dyn GcHost) -> bool {
        self.over_space_trigger_hard(host)
            && self.state.lock().effective
            && self.pick(host, false, None).is_ok_and(|victim| victim.is_some())
    }

    /// True if the value log is over the whole space budget.
    pub fn over_space_trigger_hard(&self, host: &dyn GcHost) -> bool {
        self.settings.space_budget.is_some_and(|b| host.log_bytes() > b)
    }

    /// True if a background run is due: a segment over the garbage ratio, the space trigger
    /// reached, or a cleaned segment waiting to be released.
    pub fn is_due(&self, host: &dyn GcHost) -> Result<bool> {
        if !self.state.lock().pending_release.is_empty() {
            return Ok(true);
        }
        Ok(self.pick(host, false, None)?.is_some())
    }

    fn over_space_trigger(&self, host: &dyn GcHost) -> bool {
        self.settings.space_budget.is_some_and(|b| host.log_bytes() as f64 >= b as f64 * self.settings.space_trigger)
    }

    fn pick(&self, host: &dyn GcHost, force: bool, among: Option<&[SegmentId]>) -> Result<Option<SegmentStats>> {
        let mut segments = host.eligible_segments()?;
        if let Some(ids) = among {
            segments.retain(|s| ids.contains(&s.id));
        }
        {
            let state = self.state.lock();
            // Cleaned segments awaiting release are not picked again; punched ones only once
            // enough new garbage has accrued.
            segments.retain(|s| !state.pending_release.iter().any(|(id, _)| *id == s.id));
            for s in &mut segments {
                if let Some(&at) = state.punched_at.get(&s.id) {
                    s.garbage_bytes = s.garbage_bytes.saturating_sub(at);
                }
            }
        }
        let over_budget = self.over_space_trigger(host);
        let oldest = segments.iter().min_by_key(|s| s.id).copied();
        if !force && !over_budget {
            segments.retain(|s| s.garbage_bytes as f64 >= self.settings.garbage_ratio * s.size.max(1) as f64);
        }
        let active = SegmentId(u64::MAX);
        let victim = self.policy.pick(&segments, active).and_then(|id| segments.into_iter().find(|s| s.id == id));
        // Garbage becomes known only when compaction drops old versions. A background run over
        // budget with none known yet cleans the log's tail as WiscKey does (its validity check
        // finds the garbage), but only while runs free space: on a log of live data that would
        // copy the same bytes around forever. A forced run (`run_gc`, which compacts first and
        // so knows the garbage exactly) never takes this fallback.
        let tail_fallback = over_budget && !force && self.state.lock().effective;
        Ok(victim.or(if tail_fallback { oldest } else { None }))
    }

    /// Releases waiting victims whose older readers are gone.
    fn release_ready(&self, host: &dyn GcHost, outcome: &mut GcOutcome) -> Result<()> {
        let ready: Vec<SegmentId> = {
            let state = self.state.lock();
            state.pending_release.iter().filter(|(_, seq)| host.no_reader_older_than(*seq)).map(|(id, _)| *id).collect()
        };
        for id in ready {
            host.release_segment(id)?;
            let mut state = self.state.lock();
            state.pending_release.retain(|(p, _)| *p != id);
            state.punched_at.remove(&id);
            state.totals.segments_released += 1;
            outcome.segments_released.push(id);
        }
        Ok(())
    }

    /// Cleans (or punches) at most one segment. `force` ignores the garbage-ratio trigger (any
    /// segment with garbage qualifies), as for a manual `run_gc`.
    pub fn run_once(&self, host: &dyn GcHost, force: bool) -> Result<GcOutcome> {
        self.run_once_among(host, force, None)
    }

    /// Cleans every segment that holds garbage now, one run at a time; segments written while it
    /// works (relocated records among them) are left for later runs, so it always ends.
    pub fn run_to_completion(&self, host: &dyn GcHost) -> Result<GcOutcome> {
        let candidates: Vec<SegmentId> = host.eligible_segments()?.iter().map(|s| s.id).collect();
        let mut total = GcOutcome::default();
        loop {
            let run = self.run_once_among(host, true, Some(&candidates))?;
            total.bytes_read += run.bytes_read;
            total.records_relocated += run.records_relocated;
            total.bytes_relocated += run.bytes_relocated;
            total.bytes_punched += run.bytes_punched;
            total.segments_released.extend(run.segments_released);
            if run.victim.is_none() {
                return Ok(total);
            }
            total.victim = run.victim;
        }
    }

    fn run_once_among(&self, host: &dyn GcHost, force: bool, among: Option<&[SegmentId]>) -> Result<GcOutcome> {
        let _one_run_at_a_time = self.run_lock.lock();
        let mut outcome = GcOutcome::default();
        self.release_ready(host, &mut outcome)?;
        let Some(victim) = self.pick(host, force, among)? else { return Ok(outcome) };
        outcome.victim = Some(victim.id);
        let (fs, dir) = host.files();
        let path = segment_file(dir, victim.id);
        let scan = scan_victim(fs, &path, host)?;
        outcome.bytes_read = scan.bytes_read;

        let allocated = fs.allocated_size(&path).unwrap_or(victim.size);
        let mostly_holes = (allocated as f64) < 0.25 * victim.size as f64;
        let logical_room = self
            .settings
            .space_budget
            .is_none_or(|b| (host.log_bytes() as f64) < b as f64 * self.settings.logical_space_factor);
        if self.settings.punch_holes && logical_room && !mostly_holes {
            if let Some(bytes) = punch_dead_ranges(fs, &path, &scan.dead)? {
                outcome.bytes_punched = bytes;
                let mut state = self.state.lock();
                state.punched_at.insert(victim.id, victim.garbage_bytes);
                state.totals.runs += 1;
                state.totals.bytes_read += outcome.bytes_read;
                state.totals.bytes_punched += outcome.bytes_punched;
                return Ok(outcome);
            }
            // The file system cannot punch holes: fall back to copying.
        }

        outcome.records_relocated = scan.live.len() as u64;
        outcome.bytes_relocated = scan.live.iter().map(|r| r.value.len() as u64).sum();
        let seq = host.relocate(scan.live)?;
        {
            let mut state = self.state.lock();
            state.effective = outcome.bytes_relocated * 20 < outcome.bytes_read * 19;
            state.pending_release.push((victim.id, seq));
            state.totals.runs += 1;
            state.totals.bytes_read += outcome.bytes_read;
            state.totals.bytes_relocated += outcome.bytes_relocated;
        }
        self.release_ready(host, &mut outcome)?;
        Ok(outcome)
    }
}

/// A victim's records sorted into live and dead.
struct VictimScan {
    live: Vec<ReplayedRecord>,
    /// `(offset, len)` of records nothing points to.
    dead: Vec<(u64, u64)>,
    bytes_read: u64,
}

fn scan_victim(fs: &dyn FileSystem, path: &Path, host: &dyn GcHost) -> Result<VictimScan> {
    if let Ok(file) = fs.open(path) {
        file.advise(AccessPattern::Sequential);
    }
    let mut scan = VictimScan { live: Vec::new(), dead: Vec::new(), bytes_read: 0 };
    for item in scan_segment(fs, path)? {
        let (offset, record) = item?;
        let len = u64::from(record.pointer.len);
        scan.bytes_read += len;
        let live = record.kind == RecordKind::Put && host.is_current(&record.key, &record.pointer)?;
        if live {
            scan.live.push(record);
        } else {
            scan.dead.push((offset, len));
        }
    }
    Ok(scan)
}

/// Punches the block-aligned interiors of merged dead ranges; `None` if unsupported.
fn punch_dead_ranges(fs: &dyn FileSystem, path: &Path, dead: &[(u64, u64)]) -> Result<Option<u64>> {
    let mut punched = 0;
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for &(off, len) in dead {
        match merged.last_mut() {
            Some((start, end)) if *end == off => *end = off + len,
            _ => merged.push((off, off + len)),
        }
    }
    for (start, end) in merged {
        let (lo, hi) = (start.div_ceil(PUNCH_BLOCK) * PUNCH_BLOCK, end / PUNCH_BLOCK * PUNCH_BLOCK);
        if hi > lo {
            if !fs.punch_hole(path, lo, hi - lo)? {
                return Ok(None);
            }
            punched += hi - lo;
        }
    }
    Ok(Some(punched))
}

/// Builds the policy an [`crate::options::GcPolicyKind`] names.
pub fn policy_for(kind: crate::options::GcPolicyKind) -> Box<dyn GcPolicy> {
    match kind {
        crate::options::GcPolicyKind::Oldest => Box::new(OldestPolicy),
        crate::options::GcPolicyKind::Greedy => Box::new(GreedyPolicy),
        crate::options::GcPolicyKind::CostBenefit => Box::new(CostBenefitPolicy),
    }
}

/// WiscKey's tail-first order: the oldest non-active segment that holds any garbage.
#[derive(Clone, Copy, Debug, Default)]
pub struct OldestPolicy;

impl GcPolicy for OldestPolicy {
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId> {
        segments.iter().filter(|s| s.id != active && s.garbage_bytes > 0).map(|s| s.id).min()
    }
}

/// SSHKV's choice: the segment with the most garbage bytes (ties: the older one).
#[derive(Clone, Copy, Debug, Default)]
pub struct GreedyPolicy;

impl GcPolicy for GreedyPolicy {
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId> {
        segments
            .iter()
            .filter(|s| s.id != active && s.garbage_bytes > 0)
            .max_by(|a, b| a.garbage_bytes.cmp(&b.garbage_bytes).then(b.id.cmp(&a.id)))
            .map(|s| s.id)
    }
}

/// LFS's cost-benefit choice: maximise `(1 - u) * age / (1 + u)`, where `u` is the live fraction.
/// Reading the segment costs 1, writing its live part back costs `u`; the benefit is the freed
/// `1 - u`, weighted by age because old garbage-rich segments are unlikely to gain more garbage
/// soon while young ones still are.
#[derive(Clone, Copy, Debug, Default)]
pub struct CostBenefitPolicy;

impl CostBenefitPolicy {
    fn score(s: &SegmentStats) -> f64 {
        let size = s.size.max(1) as f64;
        let live = 1.0 - (s.garbage_bytes.min(s.size) as f64 / size);
        (1.0 - live) * (s.age as f64 + 1.0) / (1.0 + live)
    }
}

impl GcPolicy for CostBenefitPolicy {
    fn pick(&self, segments: &[SegmentStats], active: SegmentId) -> Option<SegmentId> {
        segments
            .iter()
            .filter(|s| s.id != active && s.garbage_bytes > 0)
            .max_by(|a, b| Self::score(a).total_cmp(&Self::score(b)).then(b.id.cmp(&a.id)))
            .map(|s| s.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(id: u64, garbage_bytes: u64) -> SegmentStats {
        SegmentStats { id: SegmentId(id), size: 1000, garbage_bytes, age: 10 - id }
    }

    #[test]
    fn oldest_picks_smallest_id_with_garbage_regardless_of_slice_order() {
        let segments = [stats(5, 10), stats(3, 1), stats(4, 900)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(3)));
    }

    #[test]
    fn oldest_skips_segments_without_garbage() {
        let segments = [stats(1, 0), stats(2, 0), stats(3, 7)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(3)));
    }

    #[test]
    fn oldest_never_picks_the_active_segment() {
        let segments = [stats(7, 500), stats(8, 0)];
        assert_eq!(OldestPolicy.pick(&segments, SegmentId(7)), None);
        assert_eq!(OldestPolicy.pick(&[], SegmentId(1)), None);
    }

    #[test]
    fn greedy_picks_most_garbage_and_skips_active() {
        let segments = [stats(1, 100), stats(2, 900), stats(3, 950)];
        assert_eq!(GreedyPolicy.pick(&segments, SegmentId(3)), Some(SegmentId(2)));
        assert_eq!(GreedyPolicy.pick(&segments, SegmentId(9)), Some(SegmentId(3)));
        assert_eq!(GreedyPolicy.pick(&[stats(1, 0)], SegmentId(9)), None);
    }

    #[test]
    fn cost_benefit_prefers_old_segments_at_equal_garbage_and_empty_ones_always() {
        // Same garbage: the older (larger age) wins.
        let segments = [stats(2, 500), stats(6, 500)];
        assert_eq!(CostBenefitPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(2)));
        // A young, almost empty segment beats an old, mostly live one.
        let segments = [stats(1, 50), stats(8, 990)];
        assert_eq!(CostBenefitPolicy.pick(&segments, SegmentId(10)), Some(SegmentId(8)));
        assert_eq!(CostBenefitPolicy.pick(&[stats(4, 10)], SegmentId(4)), None);
    }

    #[test]
    fn policies_work_as_trait_objects() {
        let policy: Box<dyn GcPolicy> = Box::new(OldestPolicy);
        assert_eq!(policy.pick(&[stats(2, 1)], SegmentId(3)), Some(SegmentId(2)));
    }
}
