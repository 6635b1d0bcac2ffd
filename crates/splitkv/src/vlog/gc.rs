//! Value-log garbage collection: which segment to clean (pure policies) and how (the collector).
//!
//! Policies are pure functions of per-segment statistics (`Oldest`, `Greedy`, `CostBenefit`);
//! they never pick the active segment nor one without garbage.
//!
//! [`GarbageCollector::run_once`] cleans one victim segment in the order that keeps every
//! acknowledged write and every open read view intact:
//! 1. scan the victim (stepping over ranges recorded as skipped) and keep the records whose
//!    pointer the index still holds; unless the run needs every record first (to punch, or to
//!    sort by key), a helper thread scans while this one relocates (`victim_scan`);
//! 2. hand them to the host's write path, which re-checks each pointer *as write leader* (so a
//!    concurrent user write of the same key always wins, and the copy gets a sequence number
//!    above every write it could shadow), appends the survivors at the log head and publishes
//!    the new pointers (syncing each batch first where the index applies durably); then the host
//!    syncs the log, so the copies and the writes that made the other records dead are durable
//!    before the victim can go;
//! 3. release the victim only once no snapshot or iterator older than the relocation exists:
//!    record its removal in the MANIFEST, then delete the file. Until then it waits.
//!
//! With hole punching, runs of dead records that contain whole blocks are freed in place
//! instead (SSHKV's logical space amplification on a file system): the log is synced, the runs
//! are recorded in the MANIFEST as skipped (so no scan reads them again, and a restart knows
//! them), and once older readers are gone their block-aligned interiors are punched
//! (`fallocate(PUNCH_HOLE)`; idempotent, so open punches recorded runs again). Copying takes over
//! when the logical space budget is spent, when a segment is mostly holes, or when its garbage
//! is too scattered to free a block.
//!
//! With `compact_in_place` (the LSM index only), step 2 writes the survivors to a new file for
//! the victim's own id instead, with a map from their old offsets to their new positions
//! (`vlog::compact`): pointers stay valid, so nothing goes through the write path. The host
//! syncs the new file and the log, and once no reader older than the scan is open the new file
//! replaces the victim's (step 3's wait, with a rename instead of a removal). A victim with
//! nothing live is released as before.
//!
//! With `GcRewriteOrder::Key` the survivors are sorted by key before step 2, so that scans over
//! what one victim held read its copies in order; `Db::rewrite_value_log` (in `db::rewrite`)
//! goes further and rewrites a whole key range in order through the same relocation path.
//!
//! A segment file with a second name (a checkpoint's hard link, see `Db::checkpoint`) is never
//! punched: the checkpoint's index may still point into the dead ranges. Such a segment is
//! cleaned by copying, and deleting this database's name leaves the checkpoint's file intact.
//!
//! Only segments entirely before the recovery log head are eligible: younger records may still
//! be needed to rebuild the memtable after a crash. Space limits count physical bytes (punched
//! holes excluded): the hard `space_budget`, and the soft `space_amplification` over the host's
//! estimate of live bytes. The collector reaches the index only through [`GcHost`], so the hash
//! index can serve it too.
//!
//! Thread-safety: policies are stateless; the collector serialises runs with an internal lock.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Result;
use crate::filenames::segment_file;
use crate::fs::FileSystem;
use crate::options::GcRewriteOrder;
use crate::types::{SegmentId, SequenceNumber, ValuePointer};
use crate::version::aligned_interior;
use crate::vlog::remap::MAX_EXTENT;
use crate::vlog::victim_scan::{
    relocate, scan_victim, scan_while_compacting, scan_while_relocating, Relocated, VictimScan,
};
use crate::vlog::{KeptRecords, ReplayedRecord};

/// Block size for hole punching: holes are aligned to it so the file system can free whole blocks.
pub const PUNCH_BLOCK: u64 = 4096;

/// What GC knows about one segment when choosing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentStats {
    /// Segment id; ids grow with time, so smaller ids are older.
    pub id: SegmentId,
    /// Bytes in the segment file (its logical length).
    pub size: u64,
    /// Bytes of records no longer referenced by the index and not yet reclaimed in place: what
    /// cleaning the segment would free beyond what punched holes already freed.
    pub garbage_bytes: u64,
    /// Bytes of dead records already skipped (punched out, or about to be).
    pub skipped_bytes: u64,
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
    /// The sequence number that reads (and [`GcHost::is_current`]) see now.
    fn visible_sequence(&self) -> SequenceNumber;
    /// True if the index still maps `key` to exactly `ptr` (read at the visible sequence).
    fn is_current(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool>;
    /// Statistics of the segments eligible for GC (entirely before the log head, not active).
    fn eligible_segments(&self) -> Result<Vec<SegmentStats>>;
    /// False if the index is known never to have pointed into segment `id` (see
    /// [`crate::vlog::ValueLog::may_be_referenced`]): once eligible, all of it is garbage.
    fn may_be_referenced(&self, _id: SegmentId) -> bool {
        true
    }
    /// The runs of dead records of segment `id` that scans skip (sorted, disjoint).
    fn skipped_ranges(&self, id: SegmentId) -> Vec<(u64, u64)>;
    /// True if segment `id` is a compacted one: its records are not at the offsets pointers
    /// name, so it is never punched.
    fn is_compacted(&self, _id: SegmentId) -> bool {
        false
    }
    /// Bytes the value log occupies on the medium: segment lengths minus punched holes.
    fn log_bytes(&self) -> u64;
    /// Bytes of all value-log segment files, holes included (the logical space in use).
    fn logical_log_bytes(&self) -> u64;
    /// Bytes of records not known to be garbage: an upper bound on the live data in the log.
    fn live_log_bytes_estimate(&self) -> u64;
    /// Rewrites records found current as of `current_at` at the log head through the write path
    /// (which skips any whose key was written since), then makes the whole log durable, so that
    /// whatever made the victim's other records dead survives a crash too; returns the last
    /// sequence number published.
    /// The records may still be arriving from a scan on another thread: `records` can block.
    fn relocate(
        &self,
        records: &mut dyn Iterator<Item = ReplayedRecord>,
        current_at: SequenceNumber,
    ) -> Result<SequenceNumber>;
    /// True if no snapshot or iterator older than `seq` is open.
    fn no_reader_older_than(&self, seq: SequenceNumber) -> bool;
    /// Makes the log durable (so the writes that killed `ranges` survive a crash), then records
    /// durably that scans skip those runs of dead records of segment `id` from now on; returns
    /// the last sequence number published (older readers may still read the records).
    fn record_skipped(&self, id: SegmentId, ranges: &[(u64, u64)]) -> Result<SequenceNumber>;
    /// Returns once every point read that may read at a sequence number older than the last
    /// one published has finished (reads registered as snapshots are not waited for: ask
    /// [`GcHost::no_reader_older_than`]). Called before records are freed.
    fn wait_out_point_reads(&self);
    /// Begins the release of segment `id`, whose older readers are gone: false if it must wait
    /// still (a compaction reads it, or a reader holds a tree from before values were moved
    /// out of it); then it stays deferred and is asked again on a later run.
    fn begin_release(&self, _id: SegmentId) -> bool {
        true
    }
    /// Takes segment `id` for a run (to clean or release it): false if a compaction moving
    /// values claims it, and then the run leaves it alone. From then on no compaction claims
    /// it until it is gone or [`GcHost::end_collecting`] gives it back.
    fn begin_collecting(&self, _id: SegmentId) -> bool {
        true
    }
    /// Gives back a segment a run took but did not queue for release (it punched it, or failed).
    fn end_collecting(&self, _id: SegmentId) {}
    /// Garbage bytes of the segments compactions are emptying now (relocation through
    /// compaction): space their end will free without GC's copying.
    fn garbage_being_moved(&self) -> u64 {
        0
    }
    /// False while recorded dead ranges of segment `id`, whose older readers are gone, must not
    /// be punched yet, for the reasons of [`GcHost::begin_release`]; then the punch stays
    /// deferred.
    fn may_punch(&self, _id: SegmentId) -> bool {
        true
    }
    /// Records the segment's removal durably and deletes the file.
    fn release_segment(&self, id: SegmentId) -> Result<()>;
    /// Writes the compacted file of segment `id` keeping `kept` (its live records, in file
    /// order, possibly still arriving from a scan on another thread) and syncs it, then makes
    /// the log durable, so that whatever made the other records dead survives a crash too (see
    /// `vlog::compact`). If nothing is kept, no file is left.
    fn compact_segment(&self, id: SegmentId, kept: &mut dyn Iterator<Item = KeptRecords>) -> Result<()>;
    /// Puts the compacted file of segment `id` in place of its old one, whose older readers
    /// are gone, and records that its garbage shadowed at or below `shadowed_by` is gone.
    fn install_compacted(&self, id: SegmentId, shadowed_by: SequenceNumber) -> Result<()>;
    /// File system and directory, for scanning and punching.
    fn files(&self) -> (&dyn FileSystem, &Path);
    /// Told after every run that cleaned, punched or released something, with what it did and
    /// how long it took (for the database's LOG).
    fn on_gc_run(&self, _outcome: &GcOutcome, _took: std::time::Duration) {}
}

/// Collector settings.
#[derive(Clone, Debug)]
pub struct GcSettings {
    /// A segment is worth cleaning in the background once this fraction of it is garbage.
    pub garbage_ratio: f64,
    /// Physical space budget for the value log, if any; GC also runs once the log exceeds
    /// `space_trigger` of it.
    pub space_budget: Option<u64>,
    /// Soft limit on the log as a multiple of its estimated live bytes, if any: GC runs past
    /// `space_trigger` of the garbage it allows and writers wait past it, but it never fails a
    /// write.
    pub space_amplification: Option<f64>,
    /// Fraction of the budget, or of the garbage the amplification limit allows, that triggers
    /// GC (SSHKV: 0.8).
    pub space_trigger: f64,
    /// Free dead ranges in place instead of copying, while the logical space allows it.
    pub punch_holes: bool,
    /// Logical space allowed as a multiple of the physical budget when punching (SSHKV's N).
    pub logical_space_factor: f64,
    /// Order in which a victim's survivors are rewritten at the head.
    pub rewrite_order: GcRewriteOrder,
    /// Compactions move values out of the segments GC plans to clean
    /// ([`GarbageCollector::plan_moves`]); below its trigger GC only releases what they emptied.
    pub moves_in_compaction: bool,
    /// Clean a victim by rewriting it in place, its survivors packed and followed by an offset
    /// map, instead of copying them to the log head (never while punching holes).
    pub compact_in_place: bool,
}

/// Which space limit the value log is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpacePressure {
    /// Within every limit.
    None,
    /// Over `gc_space_budget`: writers wait for GC, and fail if it cannot free space.
    OverBudget,
    /// Over `gc_space_amplification` times the live bytes: writers wait while GC can free space.
    OverAmplification,
}

/// What one GC run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcOutcome {
    /// Segment cleaned or punched, if any.
    pub victim: Option<SegmentId>,
    /// A second segment compacted in place beside the victim, on a thread of its own, while
    /// writers waited for log space (see `GarbageCollector::take_partner`). The run's byte
    /// counts and times include its work.
    pub partner: Option<SegmentId>,
    /// Bytes read from the victim.
    pub bytes_read: u64,
    /// Records rewritten at the head.
    pub records_relocated: u64,
    /// Value bytes rewritten at the head.
    pub bytes_relocated: u64,
    /// Bytes freed by hole punching (in this run, including punches that waited for readers).
    pub bytes_punched: u64,
    /// Segments deleted in this run (the victim, or earlier victims whose readers are gone).
    pub segments_released: Vec<SegmentId>,
    /// Segments whose compacted file replaced their old one in this run (the victim, or
    /// earlier victims whose readers are gone).
    pub segments_compacted: Vec<SegmentId>,
    /// Time spent reading the victim and deciding which of its records are live. The scan and
    /// the relocation may overlap (on two threads); neither time counts waits for the other.
    pub scan_time: Duration,
    /// Time spent rewriting the live records at the head, including the sync that makes them
    /// durable.
    pub relocate_time: Duration,
}

impl GcOutcome {
    /// Adds what `other` (another run, or a partner's part of this one) read, relocated,
    /// punched, released and compacted, and its times.
    fn add(&mut self, other: GcOutcome) {
        self.bytes_read += other.bytes_read;
        self.records_relocated += other.records_relocated;
        self.bytes_relocated += other.bytes_relocated;
        self.bytes_punched += other.bytes_punched;
        self.segments_released.extend(other.segments_released);
        self.segments_compacted.extend(other.segments_compacted);
        self.scan_time += other.scan_time;
        self.relocate_time += other.relocate_time;
    }

    /// True if the run cleaned, punched or released anything.
    pub fn did_work(&self) -> bool {
        self.victim.is_some()
            || self.partner.is_some()
            || !self.segments_released.is_empty()
            || !self.segments_compacted.is_empty()
            || self.bytes_punched > 0
    }
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
    /// Segments whose compacted file replaced the old one.
    pub segments_compacted: u64,
}

/// Work that must wait until no reader older than `after` is open.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Deferred {
    /// Delete a cleaned victim.
    Release(SegmentId),
    /// Punch the block-aligned interiors of recorded dead runs.
    Punch(SegmentId, Vec<(u64, u64)>),
    /// Put a victim's compacted file in place of its old one; the garbage its records shadowed
    /// at or below the sequence number is gone with them.
    Install(SegmentId, SequenceNumber),
}

impl Deferred {
    fn segment(&self) -> SegmentId {
        match self {
            Deferred::Release(id) | Deferred::Punch(id, _) | Deferred::Install(id, _) => *id,
        }
    }
}

struct CollectorState {
    /// False once a run freed almost nothing of what it read: cleaning more would only move
    /// live data around, so the tail fallback stops until a run frees space again.
    effective: bool,
    /// Set when the file system refused to punch: later runs copy instead.
    punch_unsupported: bool,
    /// Work waiting for older readers, with the sequence number they must have passed.
    deferred: Vec<(Deferred, SequenceNumber)>,
    /// Bytes punched out of each live segment, so the space budget counts physical bytes.
    punched: BTreeMap<SegmentId, u64>,
    /// Unreclaimed garbage a segment had when it was last punched: it is picked again only once
    /// more has accrued (what punching left is scattered between live records).
    punched_at: BTreeMap<SegmentId, u64>,
    /// The victims of the run in progress (its partner too), with the garbage each will free,
    /// until the run queues their release: what [`GarbageCollector::plan_moves`] counts as about
    /// to be freed, and what a second pick must not take again.
    cleaning: Vec<(SegmentId, u64)>,
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
    /// Set while a key-order rewrite of the log (`Db::rewrite_value_log`) holds `run_lock`: no
    /// run can free space meanwhile, so writers must not wait for one.
    rewriting: AtomicBool,
    /// Smallest live-bytes estimate the amplification limit uses (one segment).
    segment_floor: u64,
}

impl GarbageCollector {
    /// A collector with a policy and settings.
    pub fn new(policy: Box<dyn GcPolicy>, settings: GcSettings, segment_size: u64) -> Self {
        GarbageCollector {
            policy,
            settings,
            state: Mutex::new(CollectorState {
                effective: true,
                punch_unsupported: false,
                deferred: Vec::new(),
                punched: BTreeMap::new(),
                punched_at: BTreeMap::new(),
                cleaning: Vec::new(),
                totals: GcTotals::default(),
            }),
            run_lock: Mutex::new(()),
            rewriting: AtomicBool::new(false),
            segment_floor: segment_size,
        }
    }

    /// Holds off every run (and with it every deferred release and punch) until the guard is
    /// dropped, waiting for a run in progress to end: a checkpoint links segment files while it
    /// holds it, so none is deleted or punched in the meantime. Take it before any lock of the
    /// write path: a run takes this first and then writes.
    pub fn hold_runs(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.run_lock.lock()
    }

    /// Holds off every run, like [`GarbageCollector::hold_runs`], for a key-order rewrite of the
    /// log: runs would relocate records the rewrite has not reached yet in segment order (out of
    /// key order), and no segment is deleted under the rewrite's reads. Until the guard drops,
    /// compactions move no values ([`GarbageCollector::plan_moves`] plans none), and writers over
    /// a space limit do not wait for GC ([`GarbageCollector::can_relieve_space`] answers false):
    /// none can run.
    pub fn hold_runs_for_rewrite(&self) -> RewriteGuard<'_> {
        let runs = self.run_lock.lock();
        self.rewriting.store(true, Ordering::Release);
        RewriteGuard { _runs: runs, rewriting: &self.rewriting }
    }

    /// True if the value log has reached the share of its space budget that triggers GC (never
    /// without a budget): a key-order rewrite stops there rather than fill the budget.
    pub fn near_space_budget(&self, host: &dyn GcHost) -> bool {
        self.settings.space_budget.is_some_and(|b| host.log_bytes() as f64 >= b as f64 * self.settings.space_trigger)
    }

    /// Counts value bytes a key-order rewrite handed to the write path as relocated bytes.
    pub fn note_rewritten(&self, bytes: u64) {
        self.state.lock().totals.bytes_relocated += bytes;
    }

    /// True if compactions move values out of the segments GC plans to clean.
    pub fn moves_in_compaction(&self) -> bool {
        self.settings.moves_in_compaction
    }

    /// Cumulative counters.
    pub fn totals(&self) -> GcTotals {
        self.state.lock().totals.clone()
    }

    /// Segments cleaned but not yet deleted because an older reader is still open.
    pub fn pending_releases(&self) -> Vec<SegmentId> {
        self.state
            .lock()
            .deferred
            .iter()
            .filter_map(|(work, _)| match work {
                Deferred::Release(id) => Some(*id),
                Deferred::Punch(..) | Deferred::Install(..) => None,
            })
            .collect()
    }

    /// Notes bytes punched out of a segment before this collector existed (at open).
    pub fn note_punched(&self, id: SegmentId, bytes: u64) {
        *self.state.lock().punched.entry(id).or_default() += bytes;
    }

    /// Bytes punched out of segments that still exist.
    pub fn punched_bytes(&self) -> u64 {
        self.state.lock().punched.values().sum()
    }

    /// True if work waits for an older reader to go away.
    pub fn has_deferred_work(&self) -> bool {
        !self.state.lock().deferred.is_empty()
    }

    /// True if the value log exceeds a space limit and a run can still shrink it.
    pub fn can_relieve_space(&self, host: &dyn GcHost) -> bool {
        !self.rewriting.load(Ordering::Acquire)
            && self.space_pressure(host) != SpacePressure::None
            && self.pick(host, false, None).is_ok_and(|victim| victim.is_some())
    }

    /// Which space limit, if any, the value log is over.
    pub fn space_pressure(&self, host: &dyn GcHost) -> SpacePressure {
        let used = host.log_bytes();
        if self.settings.space_budget.is_some_and(|b| used > b) {
            SpacePressure::OverBudget
        } else if self.settings.space_amplification.is_some_and(|a| used as f64 > a * self.live_floor(host)) {
            SpacePressure::OverAmplification
        } else {
            SpacePressure::None
        }
    }

    /// The live-bytes estimate the amplification limit multiplies; at least one segment, so an
    /// almost empty log is never "amplified".
    fn live_floor(&self, host: &dyn GcHost) -> f64 {
        host.live_log_bytes_estimate().max(self.segment_floor) as f64
    }

    /// True if a background run is due: a segment over the garbage ratio, the space trigger
    /// reached, or deferred work whose readers are gone.
    pub fn is_due(&self, host: &dyn GcHost) -> Result<bool> {
        let ready = self.state.lock().deferred.iter().any(|(_, seq)| host.no_reader_older_than(*seq));
        Ok(ready || self.pick(host, false, None)?.is_some())
    }

    /// True if GC should spend a second thread on its work: a manual run (`force`), whose
    /// caller waits for it, or a log over its space trigger, where writers wait or soon will.
    /// Cleaning only because a segment crossed the garbage ratio stays on one thread: with no
    /// space limit, a scan helper and a survey thread beside the run took the writers' core
    /// (1 KiB random load without a limit: 0.94x with them, `docs/design.md`).
    pub fn hurried(&self, host: &dyn GcHost, force: bool) -> bool {
        force || self.over_space_trigger(host)
    }

    /// True past `space_trigger` of a budget, or of the garbage an amplification limit allows:
    /// with a limit of 1.3, GC starts once garbage reaches 0.8 x 0.3 of the live bytes (a log at
    /// 1.24x), not at 0.8 x 1.3 = 1.04x. Started at 1.04x, GC cleaned segments that still held
    /// little garbage; starting at 1.24x it relocated 12-25% less for the same space
    /// (`docs/design.md`, "GC starts at 80% of the allowed garbage"). A limit below 1 allows no
    /// garbage at all: GC starts at the limit itself, never above it.
    fn over_space_trigger(&self, host: &dyn GcHost) -> bool {
        self.over_space_trigger_freeing(host, 0)
    }

    /// [`GarbageCollector::over_space_trigger`] once `freeing` more bytes are gone.
    fn over_space_trigger_freeing(&self, host: &dyn GcHost, freeing: u64) -> bool {
        let used = host.log_bytes().saturating_sub(freeing) as f64;
        let trigger = self.settings.space_trigger;
        self.settings.space_budget.is_some_and(|b| used >= b as f64 * trigger)
            || self
                .settings
                .space_amplification
                .is_some_and(|a| used >= (1.0 + trigger * (a - 1.0)).min(a) * self.live_floor(host))
    }

    /// The segments a run may take (among `among`, if given): eligible, with no deferred work,
    /// their garbage net of what punching already freed.
    fn candidates(&self, host: &dyn GcHost, among: Option<&[SegmentId]>) -> Result<Vec<SegmentStats>> {
        Ok(self.without_deferred(host.eligible_segments()?, among))
    }

    /// [`GarbageCollector::candidates`] among `segments`, the host's eligible ones.
    fn without_deferred(&self, mut segments: Vec<SegmentStats>, among: Option<&[SegmentId]>) -> Vec<SegmentStats> {
        if let Some(ids) = among {
            segments.retain(|s| ids.contains(&s.id));
        }
        let state = self.state.lock();
        // Segments with deferred work are not picked again until it is done, nor the run's own
        // victim when it picks a partner.
        segments.retain(|s| {
            !state.deferred.iter().any(|(work, _)| work.segment() == s.id)
                && !state.cleaning.iter().any(|&(id, _)| id == s.id)
        });
        for s in &mut segments {
            if let Some(&at) = state.punched_at.get(&s.id) {
                s.garbage_bytes = s.garbage_bytes.saturating_sub(at);
            }
        }
        segments
    }

    fn pick(&self, host: &dyn GcHost, force: bool, among: Option<&[SegmentId]>) -> Result<Option<SegmentStats>> {
        let mut segments = self.candidates(host, among)?;
        let effective = self.state.lock().effective;
        if self.settings.moves_in_compaction && !force {
            // Below its trigger GC leaves cleaning to compactions (they move what it would
            // copy) and only releases what they emptied and what nothing ever pointed into;
            // above it, it copies as usual.
            if !self.must_copy(host) {
                segments.retain(|s| !host.may_be_referenced(s.id));
                return Ok(self.policy_pick(segments));
            }
        }
        let over_budget = self.over_space_trigger(host);
        let oldest = segments.iter().min_by_key(|s| s.id).copied();
        if !force && !over_budget {
            segments.retain(|s| s.garbage_bytes as f64 >= self.settings.garbage_ratio * s.size.max(1) as f64);
        }
        let victim = self.policy_pick(segments);
        // Over budget with no garbage known, clean the log's tail as WiscKey does (its validity
        // check finds the garbage), but only while runs free space: on a log of live data that
        // would copy the same bytes around forever. A forced run (`run_gc`, which surveys the
        // garbage first) never takes this fallback.
        let tail_fallback = over_budget && !force && effective;
        Ok(victim.or(if tail_fallback { oldest } else { None }))
    }

    /// With relocation through compaction: true if a run must copy rather than leave the
    /// cleaning to compactions: the log is over a space limit, or over its trigger even once
    /// the segments compactions are emptying now are gone. Counting those, GC and a compaction
    /// no longer both clean the same excess: with two writer threads over 500k keys they relocated
    /// up to 0.8 GB where GC alone relocated 0.45 (`docs/design.md`, "Relocation through
    /// compaction").
    fn must_copy(&self, host: &dyn GcHost) -> bool {
        self.space_pressure(host) != SpacePressure::None
            || self.over_space_trigger_freeing(host, host.garbage_being_moved())
    }

    /// The policy's choice among `segments`.
    fn policy_pick(&self, segments: Vec<SegmentStats>) -> Option<SegmentStats> {
        let active = SegmentId(u64::MAX);
        self.policy.pick(&segments, active).and_then(|id| segments.into_iter().find(|s| s.id == id))
    }

    /// The segments compactions should empty next, when they move values
    /// ([`GcSettings::moves_in_compaction`]), among `among`. Under a space limit: while the log
    /// is over the point where GC starts, enough segments, most garbage first, to bring it back
    /// there (what GC itself would clean next). With no limit: those past the garbage ratio.
    /// Segments nothing points into are GC's to release, never planned.
    pub fn plan_moves(&self, host: &dyn GcHost, among: &mut dyn Iterator<Item = SegmentId>) -> Result<Vec<SegmentId>> {
        // A key-order rewrite relocates every value it reaches, in key order: a move during it
        // copies a value the rewrite copies again, or moves a rewritten one out of its place.
        if self.rewriting.load(Ordering::Acquire) {
            return Ok(Vec::new());
        }
        let eligible = host.eligible_segments()?;
        let unreferenced: HashSet<SegmentId> =
            eligible.iter().map(|s| s.id).filter(|&id| !host.may_be_referenced(id)).collect();
        // Space GC is about to free without any move: segments waiting for their release, and
        // segments nothing points into any more (emptied by earlier moves), which it releases
        // unread. Counted as gone, or the next plan would move more to free the same space.
        let waiting = self.pending_releases();
        let cleaning = self.state.lock().cleaning.clone();
        // The victims of GC's run in progress free their garbage (their live records are being
        // copied) and are not planned: no compaction may claim them.
        let pending: u64 = eligible
            .iter()
            .filter(|s| waiting.contains(&s.id) || unreferenced.contains(&s.id))
            .map(|s| s.size)
            .chain(cleaning.iter().map(|&(_, garbage)| garbage))
            .sum();
        let segments = self.without_deferred(eligible, None);
        let live = self.live_floor(host);
        let trigger = self.settings.space_trigger;
        let start = [
            self.settings.space_amplification.map(|a| (1.0 + trigger * (a - 1.0)).min(a) * live),
            self.settings.space_budget.map(|b| trigger * b as f64),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min);
        let mut candidates: Vec<&SegmentStats> =
            segments.iter().filter(|s| s.garbage_bytes > 0 && !unreferenced.contains(&s.id)).collect();
        candidates.retain(|s| !cleaning.iter().any(|&(id, _)| id == s.id));
        let share = |s: &SegmentStats| s.garbage_bytes as f64 / s.size.max(1) as f64;
        candidates.sort_by(|a, b| share(b).total_cmp(&share(a)));
        let plan: Vec<SegmentId> = match start {
            Some(start) => {
                let mut excess = host.log_bytes().saturating_sub(pending) as f64 - start;
                candidates
                    .into_iter()
                    .take_while(|s| {
                        let take = excess > 0.0;
                        excess -= s.garbage_bytes as f64;
                        take
                    })
                    .map(|s| s.id)
                    .collect()
            }
            None => candidates.into_iter().filter(|s| share(s) >= self.settings.garbage_ratio).map(|s| s.id).collect(),
        };
        Ok(among.filter(|id| plan.contains(id)).collect())
    }

    /// Does deferred work whose older readers are gone.
    fn do_ready_work(&self, host: &dyn GcHost, outcome: &mut GcOutcome) -> Result<()> {
        let ready: Vec<Deferred> = {
            let state = self.state.lock();
            state.deferred.iter().filter(|(_, seq)| host.no_reader_older_than(*seq)).map(|(w, _)| w.clone()).collect()
        };
        // No registered reader needs the records any more; point reads are not registered, so
        // those that started before the work's sequence number was published are waited out.
        if !ready.is_empty() {
            host.wait_out_point_reads();
        }
        for work in ready {
            match &work {
                Deferred::Release(id) => {
                    if !host.begin_release(*id) {
                        continue;
                    }
                    host.release_segment(*id)?;
                    outcome.segments_released.push(*id);
                }
                Deferred::Install(id, shadowed_by) => {
                    // The same wait as a release: a reader holding a tree from before a
                    // compaction's move may still follow a pointer to a record dropped here.
                    if !host.begin_release(*id) {
                        continue;
                    }
                    host.install_compacted(*id, *shadowed_by)?;
                    host.end_collecting(*id);
                    outcome.segments_compacted.push(*id);
                    self.state.lock().totals.segments_compacted += 1;
                }
                Deferred::Punch(id, ranges) => {
                    if !host.may_punch(*id) {
                        continue;
                    }
                    let (fs, dir) = host.files();
                    match punch_ranges(fs, &segment_file(dir, *id), ranges)? {
                        Some(bytes) => {
                            outcome.bytes_punched += bytes;
                            let mut state = self.state.lock();
                            *state.punched.entry(*id).or_default() += bytes;
                            state.totals.bytes_punched += bytes;
                        }
                        None => self.state.lock().punch_unsupported = true,
                    }
                }
            }
            let mut state = self.state.lock();
            state.deferred.retain(|(w, _)| *w != work);
            if let Deferred::Release(id) = work {
                state.punched.remove(&id);
                state.punched_at.remove(&id);
                state.totals.segments_released += 1;
            }
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
        self.run_to_completion_among(host, candidates)
    }

    /// Like [`GarbageCollector::run_to_completion`], over the segments in `candidates` only.
    pub fn run_to_completion_among(&self, host: &dyn GcHost, mut candidates: Vec<SegmentId>) -> Result<GcOutcome> {
        let mut total = GcOutcome::default();
        loop {
            let run = self.run_once_among(host, true, Some(&candidates))?;
            // Each segment once: a punched one keeps the garbage that punching cannot free.
            candidates.retain(|id| Some(*id) != run.victim);
            let victim = run.victim;
            total.add(run);
            if victim.is_none() {
                return Ok(total);
            }
            total.victim = victim;
        }
    }

    fn run_once_among(&self, host: &dyn GcHost, force: bool, among: Option<&[SegmentId]>) -> Result<GcOutcome> {
        let started = Instant::now();
        let outcome = self.clean_once_among(host, force, among)?;
        if outcome.did_work() {
            host.on_gc_run(&outcome, started.elapsed());
        }
        Ok(outcome)
    }

    fn clean_once_among(&self, host: &dyn GcHost, force: bool, among: Option<&[SegmentId]>) -> Result<GcOutcome> {
        let _one_run_at_a_time = self.run_lock.lock();
        let mut outcome = GcOutcome::default();
        self.do_ready_work(host, &mut outcome)?;
        let Some(victim) = self.pick(host, force, among)? else { return Ok(outcome) };
        if !host.begin_collecting(victim.id) {
            // A compaction claimed it since the pick: it moves the live values out itself.
            return Ok(outcome);
        }
        self.state.lock().cleaning.push((victim.id, victim.garbage_bytes));
        let cleaned = self.clean(host, force, victim, outcome);
        self.end_cleaning(host, victim.id, &cleaned);
        cleaned
    }

    /// Ends a run's hold on its victim `id` (or partner), `cleaned` being how its run ended. A
    /// victim waiting for its release or its compacted file stays taken from compactions.
    fn end_cleaning(&self, host: &dyn GcHost, id: SegmentId, cleaned: &Result<GcOutcome>) {
        let mut state = self.state.lock();
        state.cleaning.retain(|&(cleaning, _)| cleaning != id);
        let queued = state
            .deferred
            .iter()
            .any(|(work, _)| matches!(work, Deferred::Release(_) | Deferred::Install(..)) && work.segment() == id);
        drop(state);
        let released = cleaned.as_ref().is_ok_and(|o| o.segments_released.contains(&id));
        if !queued && !released {
            host.end_collecting(id);
        }
    }

    /// Cleans `victim`, which the run has taken: punches it, or copies its live records and
    /// queues its release.
    fn clean(&self, host: &dyn GcHost, force: bool, victim: SegmentStats, mut outcome: GcOutcome) -> Result<GcOutcome> {
        outcome.victim = Some(victim.id);
        let (fs, dir) = host.files();
        let path = segment_file(dir, victim.id);
        let skipped = host.skipped_ranges(victim.id);
        // Read before any lookup: every record found live is current at this sequence number or
        // later, which is what the write path re-checks against.
        let current_at = host.visible_sequence();
        let may_punch = self.may_punch(host, fs, &path, &victim)?;
        // A segment nothing ever pointed into (a log of inline values is only a write-ahead
        // log) needs no scan: no record can be live, and releasing beats punching.
        let referenced = host.may_be_referenced(victim.id);

        if self.compacts_in_place(&victim, referenced, &skipped, may_punch) {
            let partner = if force { None } else { self.take_partner(host, fs, dir)? };
            return self.compact(host, fs, &path, victim.id, partner, current_at, outcome);
        }

        if referenced
            && !may_punch
            && self.settings.rewrite_order == GcRewriteOrder::Segment
            && self.hurried(host, force)
        {
            // Nothing needs the whole scan before copying: relocate while scanning.
            let (scan, relocated) = scan_while_relocating(fs, &path, &skipped, host, current_at)?;
            outcome.scan_time = scan.time;
            outcome.bytes_read = scan.bytes_read;
            return self.finish_run(host, Deferred::Release(victim.id), relocated, outcome);
        }

        let mut live = Vec::new();
        let scan = if referenced {
            scan_victim(fs, &path, &skipped, host, |record, segment| {
                live.push(record.to_replayed(segment));
                true
            })?
        } else {
            VictimScan::default()
        };
        outcome.scan_time = scan.time;
        outcome.bytes_read = scan.bytes_read;

        if may_punch {
            // Record first, punch later: once recorded, no scan reads the ranges, and a crash
            // before the punch only leaves dead bytes in place. The punch itself waits for
            // readers that may still reach the records.
            let runs = punchable_runs(&scan.dead);
            let freed: u64 =
                runs.iter().filter_map(|&(s, e)| aligned_interior(s, e, PUNCH_BLOCK)).map(|(lo, hi)| hi - lo).sum();
            // Dead records scattered between live ones free no whole block: only copying helps.
            // A forced run (`run_gc`: reclaim everything now) copies unless punching frees
            // nearly all of the victim's garbage.
            let dead: u64 = scan.dead.iter().map(|(_, len)| len).sum();
            let enough = !force || freed as f64 >= 0.9 * dead as f64;
            if !runs.is_empty() && enough {
                let seq = host.record_skipped(victim.id, &runs)?;
                let mut state = self.state.lock();
                state.deferred.push((Deferred::Punch(victim.id, runs), seq));
                state.punched_at.insert(victim.id, victim.garbage_bytes);
                state.effective = freed * 20 >= outcome.bytes_read;
                state.totals.runs += 1;
                state.totals.bytes_read += outcome.bytes_read;
                drop(state);
                self.do_ready_work(host, &mut outcome)?;
                return Ok(outcome);
            }
        }

        if self.settings.rewrite_order == GcRewriteOrder::Key {
            // Keys in the log are the index's keys (keyspace prefix included): sorting them
            // here is sorting them as scans visit them.
            live.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        }
        let relocated = relocate(host, live, current_at)?;
        self.finish_run(host, Deferred::Release(victim.id), relocated, outcome)
    }

    /// True if the run would punch holes in `victim` rather than clean it (`gc_punch_holes`).
    fn may_punch(&self, host: &dyn GcHost, fs: &dyn FileSystem, path: &Path, victim: &SegmentStats) -> Result<bool> {
        let mostly_holes = (victim.skipped_bytes as f64) > 0.75 * victim.size as f64;
        let logical_room = self
            .settings
            .space_budget
            .is_none_or(|b| (host.logical_log_bytes() as f64) < b as f64 * self.settings.logical_space_factor);
        let punch = self.settings.punch_holes && !self.state.lock().punch_unsupported && !is_shared(fs, path)?;
        Ok(punch && logical_room && !mostly_holes && !host.is_compacted(victim.id))
    }

    /// True if a run compacts `victim` in place: something may point into it (`referenced`), it
    /// has no `skipped` ranges, and it is not to be punched (`may_punch`). In place, survivors
    /// are sorted by key a MiB at a time; a run that must sort all of them
    /// (`GcRewriteOrder::Key`) copies them. A segment past 4 GiB (one huge batch) is copied too:
    /// a map's offsets are 32-bit.
    fn compacts_in_place(
        &self,
        victim: &SegmentStats,
        referenced: bool,
        skipped: &[(u64, u64)],
        may_punch: bool,
    ) -> bool {
        self.settings.compact_in_place
            && self.settings.rewrite_order == GcRewriteOrder::Segment
            && victim.size <= MAX_EXTENT
            && referenced
            && skipped.is_empty()
            && !may_punch
    }

    /// A second victim for a background run that compacts in place, taken (from compactions
    /// too) as the first was, if writers wait for log space: the run then compacts both at
    /// once. One compaction keeps about one core busy (its scan on a helper thread, its writes
    /// on the run's), and with the writers stalled the other core had little else to do. Only
    /// a segment that would be compacted in place itself qualifies.
    fn take_partner(&self, host: &dyn GcHost, fs: &dyn FileSystem, dir: &Path) -> Result<Option<SegmentId>> {
        if self.space_pressure(host) == SpacePressure::None {
            return Ok(None);
        }
        let Some(partner) = self.pick(host, false, None)? else { return Ok(None) };
        let referenced = host.may_be_referenced(partner.id);
        // Whether it would be punched asks the file system (a checkpoint's hard link): only for a
        // segment the in-memory conditions have not already ruled out.
        let qualifies = self.compacts_in_place(&partner, referenced, &host.skipped_ranges(partner.id), false)
            && !self.may_punch(host, fs, &segment_file(dir, partner.id), &partner)?;
        if !qualifies || !host.begin_collecting(partner.id) {
            return Ok(None);
        }
        self.state.lock().cleaning.push((partner.id, partner.garbage_bytes));
        Ok(Some(partner.id))
    }

    /// Cleans `victim` in place: writes its live records to its compacted file, which replaces
    /// the old one once no reader older than the scan's liveness checks is open (see
    /// `vlog::compact`). A `partner` the run took is compacted at the same time on a thread of
    /// its own, and its hold ended here.
    #[allow(clippy::too_many_arguments)]
    fn compact(
        &self,
        host: &dyn GcHost,
        fs: &dyn FileSystem,
        path: &Path,
        victim: SegmentId,
        partner: Option<SegmentId>,
        current_at: SequenceNumber,
        outcome: GcOutcome,
    ) -> Result<GcOutcome> {
        let dir = host.files().1;
        let (compacted, partner_compacted) = std::thread::scope(|scope| {
            let partner = partner.map(|id| {
                std::thread::Builder::new()
                    .name("splitkv-gc-partner".into())
                    .spawn_scoped(scope, move || scan_while_compacting(fs, &segment_file(dir, id), id, host))
            });
            let compacted = scan_while_compacting(fs, path, victim, host);
            let partner_compacted =
                partner.map(|spawned| spawned?.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            (compacted, partner_compacted)
        });
        // Every record dropped was dead for a reader at this sequence number or later.
        let checked_at = host.visible_sequence();
        let finish = |id: SegmentId, compacted: Result<(VictimScan, Relocated)>, mut outcome: GcOutcome| {
            let (scan, kept) = compacted?;
            outcome.scan_time = scan.time;
            outcome.bytes_read = scan.bytes_read;
            // Nothing kept (the host wrote no file): released as a copying run would.
            let work = if kept.records == 0 { Deferred::Release(id) } else { Deferred::Install(id, current_at) };
            self.finish_run(host, work, Relocated { seq: checked_at, ..kept }, outcome)
        };
        let partner_outcome = partner.zip(partner_compacted).map(|(id, compacted)| {
            let finished = finish(id, compacted, GcOutcome::default());
            self.end_cleaning(host, id, &finished);
            finished
        });
        let mut outcome = finish(victim, compacted, outcome)?;
        if let Some(theirs) = partner_outcome {
            outcome.add(theirs?);
            outcome.partner = partner;
        }
        Ok(outcome)
    }

    /// Ends a run that copied or compacted the victim's live records: `work` (the victim's
    /// release, or its compacted file's install) is done once no reader older than
    /// `relocated.seq` is open.
    fn finish_run(
        &self,
        host: &dyn GcHost,
        work: Deferred,
        relocated: Relocated,
        mut outcome: GcOutcome,
    ) -> Result<GcOutcome> {
        outcome.records_relocated = relocated.records;
        outcome.bytes_relocated = relocated.bytes;
        outcome.relocate_time = relocated.time;
        {
            let mut state = self.state.lock();
            // A victim released unread (nothing in it was live) freed all of it.
            state.effective = outcome.bytes_read == 0 || outcome.bytes_relocated * 20 < outcome.bytes_read * 19;
            state.deferred.push((work, relocated.seq));
            state.totals.runs += 1;
            state.totals.bytes_read += outcome.bytes_read;
            state.totals.bytes_relocated += outcome.bytes_relocated;
        }
        self.do_ready_work(host, &mut outcome)?;
        Ok(outcome)
    }
}

/// Keeps GC runs off while a key-order rewrite walks the log; see
/// [`GarbageCollector::hold_runs_for_rewrite`].
pub struct RewriteGuard<'a> {
    _runs: parking_lot::MutexGuard<'a, ()>,
    rewriting: &'a AtomicBool,
}

impl Drop for RewriteGuard<'_> {
    fn drop(&mut self) {
        self.rewriting.store(false, Ordering::Release);
    }
}

/// True if the file at `path` has more than one name: a checkpoint hard-linked it, and its
/// bytes may be read through the other name by a database whose index still points at them, so
/// GC must not punch it (copying and deleting this name are safe: the other keeps the file).
fn is_shared(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    Ok(fs.link_count(path)? > 1)
}

/// Merges adjacent dead records into runs and keeps the runs that contain at least one whole
/// block: only those free anything when punched.
fn punchable_runs(dead: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &(off, len) in dead {
        match runs.last_mut() {
            Some((_, end)) if *end == off => *end = off + len,
            _ => runs.push((off, off + len)),
        }
    }
    runs.retain(|&(start, end)| aligned_interior(start, end, PUNCH_BLOCK).is_some());
    runs
}

/// Punches the block-aligned interiors of `ranges` (idempotent); `None` if the file system cannot.
/// A file with another name (a checkpoint's hard link) is left whole, `Some(0)`: the other name
/// may belong to a database that still reads those bytes.
pub fn punch_ranges(fs: &dyn FileSystem, path: &Path, ranges: &[(u64, u64)]) -> Result<Option<u64>> {
    if is_shared(fs, path)? {
        return Ok(Some(0));
    }
    let mut punched = 0;
    for &(start, end) in ranges {
        if let Some((lo, hi)) = aligned_interior(start, end, PUNCH_BLOCK) {
            if !fs.punch_hole(path, lo, hi - lo)? {
                return Ok(None);
            }
            punched += hi - lo;
        }
    }
    Ok(Some(punched))
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
    use crate::fs::MemFileSystem;

    /// A host of fixed segments, for the collector's decisions alone: every record is dead, and
    /// nothing is ever read (the tests below release only segments never pointed into).
    struct FixedHost {
        segments: Mutex<Vec<(SegmentStats, bool)>>,
        log_bytes: u64,
        live_bytes: u64,
        /// What [`GcHost::garbage_being_moved`] answers.
        being_moved: u64,
        fs: MemFileSystem,
    }

    impl GcHost for FixedHost {
        fn visible_sequence(&self) -> SequenceNumber {
            SequenceNumber(1)
        }
        fn is_current(&self, _key: &[u8], _ptr: &ValuePointer) -> Result<bool> {
            Ok(false)
        }
        fn eligible_segments(&self) -> Result<Vec<SegmentStats>> {
            Ok(self.segments.lock().iter().map(|(s, _)| *s).collect())
        }
        fn may_be_referenced(&self, id: SegmentId) -> bool {
            self.segments.lock().iter().any(|(s, referenced)| s.id == id && *referenced)
        }
        fn skipped_ranges(&self, _id: SegmentId) -> Vec<(u64, u64)> {
            Vec::new()
        }
        fn log_bytes(&self) -> u64 {
            self.log_bytes
        }
        fn logical_log_bytes(&self) -> u64 {
            self.log_bytes
        }
        fn live_log_bytes_estimate(&self) -> u64 {
            self.live_bytes
        }
        fn garbage_being_moved(&self) -> u64 {
            self.being_moved
        }
        fn relocate(
            &self,
            records: &mut dyn Iterator<Item = ReplayedRecord>,
            _current_at: SequenceNumber,
        ) -> Result<SequenceNumber> {
            assert!(records.next().is_none(), "nothing here is live");
            Ok(SequenceNumber(1))
        }
        fn no_reader_older_than(&self, _seq: SequenceNumber) -> bool {
            true
        }
        fn record_skipped(&self, _id: SegmentId, _ranges: &[(u64, u64)]) -> Result<SequenceNumber> {
            Ok(SequenceNumber(1))
        }
        fn wait_out_point_reads(&self) {}
        fn release_segment(&self, id: SegmentId) -> Result<()> {
            self.segments.lock().retain(|(s, _)| s.id != id);
            Ok(())
        }
        fn compact_segment(&self, _id: SegmentId, _kept: &mut dyn Iterator<Item = KeptRecords>) -> Result<()> {
            unreachable!("these settings never compact in place")
        }
        fn install_compacted(&self, _id: SegmentId, _shadowed_by: SequenceNumber) -> Result<()> {
            unreachable!("these settings never compact in place")
        }
        fn files(&self) -> (&dyn FileSystem, &Path) {
            (&self.fs, Path::new("/db"))
        }
    }

    #[test]
    fn a_segment_released_unread_counts_as_an_effective_run() {
        // Over the space budget, with no garbage known, the collector cleans the log's tail only
        // while its runs free space. A run that released a never-referenced segment unread freed
        // all of it; counting it as ineffective would leave the tail uncleaned and writers
        // waiting for a survey.
        let settings = GcSettings {
            garbage_ratio: 0.3,
            space_budget: Some(1000),
            space_amplification: None,
            space_trigger: 0.8,
            punch_holes: false,
            logical_space_factor: 1.0,
            rewrite_order: GcRewriteOrder::Segment,
            moves_in_compaction: false,
            compact_in_place: false,
        };
        let gc = GarbageCollector::new(Box::new(GreedyPolicy), settings, 1000);
        let inline_only = (stats(1, 1000), false);
        let separated = (stats(2, 0), true);
        let host = FixedHost {
            segments: Mutex::new(vec![inline_only, separated]),
            log_bytes: 2000,
            live_bytes: 2000,
            being_moved: 0,
            fs: MemFileSystem::new(),
        };
        let outcome = gc.run_once(&host, false).expect("run");
        assert_eq!(outcome.victim, Some(SegmentId(1)));
        assert_eq!(outcome.bytes_read, 0, "a segment never pointed into must not be read");
        assert_eq!(outcome.segments_released, vec![SegmentId(1)]);
        assert!(gc.can_relieve_space(&host), "the log's tail is still worth cleaning over the budget");
    }

    /// A greedy collector under a 1.3x limit (trigger 0.8) that leaves cleaning to compactions
    /// when it can.
    fn collector_with_moves() -> GarbageCollector {
        let settings = GcSettings {
            garbage_ratio: 0.3,
            space_budget: None,
            space_amplification: Some(1.3),
            space_trigger: 0.8,
            punch_holes: false,
            logical_space_factor: 1.0,
            rewrite_order: GcRewriteOrder::Segment,
            moves_in_compaction: true,
            compact_in_place: false,
        };
        GarbageCollector::new(Box::new(GreedyPolicy), settings, 1000)
    }

    #[test]
    fn moves_are_planned_most_garbage_first_down_to_where_gc_starts() {
        // Limit 1.3x over 10,000 live bytes: GC starts at 12,400. The log holds 14,000, of which
        // segment 1 (1,000 bytes) is about to be released unread: 600 bytes to free by moves.
        let gc = collector_with_moves();
        let host = FixedHost {
            segments: Mutex::new(vec![
                (stats(1, 1000), false),
                (stats(2, 100), true),
                (stats(3, 400), true),
                (stats(4, 300), true),
                (stats(5, 0), true),
            ]),
            log_bytes: 14_000,
            live_bytes: 10_000,
            being_moved: 0,
            fs: MemFileSystem::new(),
        };
        let plan = |among: &[u64]| gc.plan_moves(&host, &mut among.iter().map(|&id| SegmentId(id))).expect("plan");
        assert_eq!(plan(&[1, 2, 3, 4, 5]), vec![SegmentId(3), SegmentId(4)]);
        assert_eq!(plan(&[2, 4]), vec![SegmentId(4)], "only what the compaction's inputs point into");
        // During a key-order rewrite nothing is moved: the rewrite relocates every value itself.
        {
            let _rewrite = gc.hold_runs_for_rewrite();
            assert!(plan(&[1, 2, 3, 4, 5]).is_empty());
        }
        assert_eq!(plan(&[1, 2, 3, 4, 5]), vec![SegmentId(3), SegmentId(4)]);
        // Below the point where GC starts, nothing is moved.
        let calm = FixedHost { log_bytes: 12_300, ..host };
        assert!(gc.plan_moves(&calm, &mut [3, 4].map(SegmentId).into_iter()).expect("plan").is_empty());
        // Below it, GC releases what nothing points into and leaves the rest to compactions.
        let outcome = gc.run_once(&calm, false).expect("run");
        assert_eq!(outcome.segments_released, vec![SegmentId(1)]);
        assert_eq!(gc.run_once(&calm, false).expect("run").victim, None);
    }

    #[test]
    fn gc_and_compactions_do_not_clean_the_same_excess_twice() {
        // Limit 1.3x over 10,000 live bytes: GC starts at 12,400, writers wait from 13,000.
        let gc = collector_with_moves();
        let segments = || Mutex::new(vec![(stats(2, 100), true), (stats(3, 400), true), (stats(4, 300), true)]);
        let host = |log_bytes, being_moved| FixedHost {
            segments: segments(),
            log_bytes,
            live_bytes: 10_000,
            being_moved,
            fs: MemFileSystem::new(),
        };
        let victim = |host: &FixedHost| gc.pick(host, false, None).expect("pick").map(|s| s.id);
        assert_eq!(victim(&host(12_900, 0)), Some(SegmentId(3)), "over the trigger, GC copies");
        assert_eq!(victim(&host(12_900, 600)), None, "a compaction's moves bring the log below the trigger");
        assert_eq!(victim(&host(13_100, 600)), Some(SegmentId(3)), "over the limit GC copies all the same");

        // The victim of GC's run in progress is not planned, and its garbage counts as freed:
        // at 13,000 that leaves 200 over the trigger, which segment 4 covers.
        let plan = |host: &FixedHost| gc.plan_moves(host, &mut [2, 3, 4].map(SegmentId).into_iter()).expect("plan");
        assert_eq!(plan(&host(13_000, 0)), [3, 4].map(SegmentId));
        gc.state.lock().cleaning = vec![(SegmentId(3), 400)];
        assert_eq!(plan(&host(13_000, 0)), [4].map(SegmentId));
        assert_eq!(plan(&host(14_000, 0)), [2, 4].map(SegmentId), "the rest, most garbage first, never the victim");
    }

    #[test]
    fn the_amplification_trigger_is_a_share_of_the_garbage_the_limit_allows() {
        // Limit 1.3x, trigger 0.8: GC hurries from 1 + 0.8 x 0.3 = 1.24x the live bytes on (at
        // 0.8 x 1.3 = 1.04x it cleaned segments that still held little garbage); a byte budget's
        // trigger stays a share of its bytes.
        let settings = |space_budget, space_amplification| GcSettings {
            garbage_ratio: 0.3,
            space_budget,
            space_amplification,
            space_trigger: 0.8,
            punch_holes: false,
            logical_space_factor: 1.0,
            rewrite_order: GcRewriteOrder::Segment,
            moves_in_compaction: false,
            compact_in_place: false,
        };
        let host = |log_bytes| FixedHost {
            segments: Mutex::new(Vec::new()),
            log_bytes,
            live_bytes: 100_000,
            being_moved: 0,
            fs: MemFileSystem::new(),
        };
        let amplification = GarbageCollector::new(Box::new(GreedyPolicy), settings(None, Some(1.3)), 1000);
        for (log_bytes, hurried) in [(104_000, false), (123_900, false), (124_100, true), (131_000, true)] {
            assert_eq!(amplification.hurried(&host(log_bytes), false), hurried, "log of {log_bytes} bytes");
        }
        // Below 1 the limit allows no garbage: GC hurries from the limit itself, not above it.
        let below_one = GarbageCollector::new(Box::new(GreedyPolicy), settings(None, Some(0.9)), 1000);
        assert!(!below_one.hurried(&host(89_000), false));
        assert!(below_one.hurried(&host(90_100), false));
        let budget = GarbageCollector::new(Box::new(GreedyPolicy), settings(Some(200_000), None), 1000);
        assert!(!budget.hurried(&host(159_000), false));
        assert!(budget.hurried(&host(160_000), false));
    }

    fn stats(id: u64, garbage_bytes: u64) -> SegmentStats {
        SegmentStats { id: SegmentId(id), size: 1000, garbage_bytes, skipped_bytes: 0, age: 10 - id }
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
