//! The database as the value-log collector's host: the [`GcHost`] answers (is a pointer
//! current, which segments may be cleaned, relocation through the write path, durable records
//! of removals and skipped ranges), garbage surveys and the live-bytes estimate they feed, the
//! space limits writers wait on, and the background GC thread.
//!
//! Thread-safety: everything here runs on `DbInner`, shared by user threads and the GC thread;
//! runs of the collector serialise on its own lock, surveys on the index's compaction lock.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::Level;

use super::{DbInner, PendingWrite, Relocation};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::index::{IndexValue, LiveCount, ReadAt};
use crate::info_log::{log_event, ListDisplay, StallCause};
use crate::stats::Counters;
use crate::types::{SegmentId, SequenceNumber, ValuePointer};
use crate::version::{GarbageSurvey, SegmentMeta, VersionEdit};
use crate::vlog::gc::{GcHost, GcOutcome, SegmentStats, SpacePressure};
use crate::vlog::live_map::LiveMap;
use crate::vlog::{KeptRecords, ReplayedRecord};

/// The state of the value log at the last garbage survey.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SurveyMark {
    /// False until the first survey.
    surveyed: bool,
    /// Separated-value log bytes written (user and GC) at the survey: the next is due once a
    /// share of the log more has been written.
    separated_written: u64,
    /// User bytes written at the survey.
    user_written: u64,
    /// Log bytes not known to be garbage right after the survey.
    live: u64,
    /// Live bytes gained per user byte written (0 for pure overwrites, 1 for pure inserts),
    /// measured from `growth_base` to the survey that set it.
    growth: f64,
    /// Where `growth` was last measured: user bytes written and the bytes the newest version of
    /// every key pointed to ([`LiveCount::indexed_live`]) at that survey. It stays put until
    /// users have written [`MIN_GROWTH_SPAN`] of the live bytes since.
    growth_base: GrowthBase,
    /// The survey's horizon: a newer one can count more once older readers are gone.
    horizon: SequenceNumber,
    /// True if an open snapshot or iterator held the horizon below the last sequence number.
    held_back: bool,
}

/// What the last garbage survey found in each segment it counted ([`LiveCount`]), for GC's
/// liveness decisions ([`GcHost::is_current`]).
#[derive(Default)]
pub(super) struct SurveyMaps {
    /// Where the reachable records are (GC drops the others without a lookup), and which were
    /// current at `current_at` (one stays current for as long as nothing writes its key).
    maps: BTreeMap<SegmentId, LiveMap>,
    current_at: SequenceNumber,
}

/// Writers measure the value log against its space limits once per this many bytes written, or
/// per eighth of a segment if that is less ([`DbInner::space_check_bytes`]).
const SPACE_CHECK_BYTES: u64 = 1 << 20;

/// How long a writer over the space budget waits for readers that hold segments GC has already
/// cleaned, before it fails with `NoSpace`. Such readers (snapshots, iterators) are usually gone
/// within milliseconds, and failing at once turned a reader held for 5 ms into a failed write. It
/// cannot wait for ever: the reader may belong to the writer's own thread.
const READER_RELEASE_WAIT: Duration = Duration::from_secs(2);

/// The least share of the bytes written since a survey that counts towards the next one (see
/// [`DbInner::survey_due`]), however fast the last surveys found live data growing.
const MIN_REPLACING_SHARE: f64 = 0.25;

/// The user writes, as a share of the live bytes, that growth is measured over at least. GC's
/// own copies make surveys due too, so two surveys can come with almost no user write between
/// them (while writers wait for space); the live bytes then move by the noise of where each
/// walk's view was taken, and that over a few KiB read as pure inserts (growth 1). The limit
/// then took every later write as new live data and the log went uncollected: with two writers
/// over 500k keys it ended at 1.40-1.76x its live bytes in four runs of eight (`docs/design.md`).
const MIN_GROWTH_SPAN: f64 = 1.0 / 16.0;

/// A point the growth rate is measured from: user bytes written, and the bytes the newest
/// version of every key pointed to.
#[derive(Clone, Copy, Debug, Default)]
struct GrowthBase {
    user_written: u64,
    indexed_live: u64,
}

/// Most value bytes one GC relocation batch carries: a victim's live records are rewritten in
/// batches of this size so that foreground writes interleave with them.
const RELOCATION_BATCH_BYTES: usize = 1 << 20;

impl DbInner {
    /// Rewrites `records` (key, value, the pointer it replaces, which the index mapped the key
    /// to as of `current_at`) at the log head, in batches of [`RELOCATION_BATCH_BYTES`] taken in
    /// their order, each written in key order and re-checked as write leader (a put whose key no
    /// longer maps to the record's pointer is skipped). A batch is synced before it is applied
    /// only where the index applies durably ([`crate::index::Index::applies_durably`]);
    /// otherwise the caller's sync after the last batch, which must come before the victims go,
    /// makes the copies durable.
    pub(super) fn submit_relocations(
        &self,
        records: impl IntoIterator<Item = (Vec<u8>, Vec<u8>, ValuePointer)>,
        current_at: SequenceNumber,
    ) -> Result<()> {
        let sync = self.index.applies_durably();
        let mut pending = Vec::new();
        let mut bytes = 0;
        for record in records {
            bytes += record.0.len() + record.1.len();
            pending.push(record);
            if bytes >= RELOCATION_BATCH_BYTES {
                self.submit_relocation_batch(std::mem::take(&mut pending), current_at, sync)?;
                bytes = 0;
            }
        }
        if !pending.is_empty() {
            self.submit_relocation_batch(pending, current_at, sync)?;
        }
        Ok(())
    }

    /// Submits one relocation batch with its records in key order: the memtable then inserts
    /// each from where the one before went, instead of searching from the head (a cache miss
    /// per level for keys in log order, which land all over it), and the copies lie in key
    /// order in the log, as a scan reads them. The sort is stable: two versions of a key keep
    /// their order, the newer last.
    fn submit_relocation_batch(
        &self,
        mut records: Vec<(Vec<u8>, Vec<u8>, ValuePointer)>,
        current_at: SequenceNumber,
        sync: bool,
    ) -> Result<()> {
        records.sort_by(|a, b| a.0.cmp(&b.0));
        let mut batch = WriteBatch::new();
        let mut from = Vec::with_capacity(records.len());
        for (key, value, pointer) in records {
            // Moved in, not copied: the records were read for this batch alone. Stored keys go
            // in as they are (`push`), keyspace prefixes included.
            batch.push(BatchOp::Put { key, value });
            from.push(pointer);
        }
        self.submit(PendingWrite::relocation(batch, Relocation { from, current_at }, sync)).map(|_| ())
    }

    /// Makes every appended log record durable; a failure poisons the write path.
    pub(super) fn sync_log(&self) -> Result<()> {
        self.poison_on_error(self.vlog.sync())
    }

    /// Seals the active segment, so that everything written so far can be collected.
    pub(super) fn seal_log(&self) -> Result<()> {
        self.poison_on_error(self.vlog.seal_active())
    }

    /// A failed value-log write leaves the log's tail unknown: no further write may go on.
    pub(super) fn poison_on_error(&self, result: Result<()>) -> Result<()> {
        result.inspect_err(|e| self.poison_with(e.to_string()))
    }

    /// Stops the write path for `reason` (the first reason stays), and says so in the LOG.
    pub(super) fn poison_with(&self, reason: String) {
        let mut poisoned = self.poisoned.lock();
        if poisoned.is_none() {
            log_event!(self.info_log, Level::ERROR, error = %reason, "write path poisoned: writes fail until reopen");
            *poisoned = Some(reason);
        }
    }

    /// With a space limit on the value log, holds a writer (before it joins the write queue, so
    /// GC's own relocations can pass) while the log is over it and GC can still shrink it, or
    /// segments it has cleaned wait only for older readers (for [`READER_RELEASE_WAIT`]). Ends
    /// with an error, never by waiting forever, when GC cannot: the database is poisoned, the
    /// collector stopped, no segment holds garbage a run could free, or readers held cleaned
    /// segments for longer than that.
    pub(super) fn wait_for_log_space(&self) -> Result<()> {
        let limited = self.options.gc_space_budget.is_some() || self.options.gc_space_amplification.is_some();
        if !limited || !self.options.background_gc {
            return Ok(());
        }
        // Measuring the log costs a walk over its segments: do it once per check interval of
        // writes (`space_check_bytes`), and on every write while the last measurement found it
        // over a limit.
        let written = self.vlog.bytes_written();
        let last = self.space_checked_at.load(Ordering::Relaxed);
        if !self.space_pressed.load(Ordering::Relaxed) && written < last + self.space_check_bytes() {
            return Ok(());
        }
        self.space_checked_at.store(written, Ordering::Relaxed);
        let start = std::time::Instant::now();
        let mut surveyed = false;
        let mut flushed = false;
        let mut waiting_for_readers: Option<std::time::Instant> = None;
        let result = loop {
            let pressure = self.gc.space_pressure(self);
            self.space_pressed.store(pressure != SpacePressure::None, Ordering::Relaxed);
            if pressure == SpacePressure::None {
                // Past the space trigger GC should be cleaning. Left to its own clock it slept up
                // to 100 ms after the run that last brought the log under the trigger, while
                // writers filled the log to the limit and stalled (two writers at 1 KiB: a 126 ms
                // stall behind 100 ms without a run).
                if self.gc.hurried(self, false) {
                    self.gc_wake.1.notify_all();
                }
                // Logged once the pressure is gone, not whenever one writer passes.
                self.info_log.stalls_ended([StallCause::LogSpace, StallCause::LogReaders]);
                break Ok(());
            }
            self.check_poisoned()?;
            if let Some(reason) = self.gc_failure.lock().clone() {
                // The amplification limit is a target, not a budget: with no collector, write.
                break match pressure {
                    SpacePressure::OverBudget => {
                        Err(Error::NoSpace(format!("value log over its space budget and GC stopped: {reason}")))
                    }
                    _ => Ok(()),
                };
            }
            if self.gc_stop.load(Ordering::Acquire) {
                break Err(Error::Closed);
            }
            let waiting_for = if self.gc.can_relieve_space(self) {
                StallCause::LogSpace
            } else {
                // Likewise past what GC can do. Writers then pass without measuring again for a
                // check interval: measuring on every write while over the target cost a 100 B put
                // a tenth of its instructions (a walk over the segments and a GC pick each).
                if pressure == SpacePressure::OverAmplification {
                    self.space_pressed.store(false, Ordering::Relaxed);
                    break Ok(());
                }
                // The index may hold the only reference to sealed segments' garbage in memory
                // (a memtable, or the hash index's unapplied writes), and the recorded log head
                // keeps GC off every segment after it: flush once, so the head moves on.
                if !flushed {
                    flushed = true;
                    self.submit(PendingWrite::flush())?;
                    self.index.wait_for_flush()?;
                    continue;
                }
                // Garbage may exist that nothing has counted yet: count it once, then decide.
                if !surveyed {
                    surveyed = true;
                    self.survey_garbage()?;
                    continue;
                }
                // Segments GC has cleaned are freed once the older readers holding them go:
                // wait for that a while, as for a run.
                let deferred = self.gc.has_deferred_work();
                if deferred
                    && waiting_for_readers.get_or_insert_with(std::time::Instant::now).elapsed() < READER_RELEASE_WAIT
                {
                    StallCause::LogReaders
                } else {
                    let why = if deferred {
                        "cleaned segments wait for older snapshots or iterators to be released"
                    } else {
                        "no segment holds garbage that GC could free"
                    };
                    break Err(Error::NoSpace(format!(
                        "value log uses {} bytes of its {}-byte budget and {why}",
                        self.log_bytes(),
                        self.options.gc_space_budget.unwrap_or(0)
                    )));
                }
            };
            if waiting_for == StallCause::LogSpace {
                // A run can shrink the log again: the wait for readers, if any, is over.
                self.info_log.stalls_ended([StallCause::LogReaders]);
            }
            self.info_log.stall_began(waiting_for, &format_args!("{pressure:?}, {} log bytes", self.log_bytes()));
            self.gc_wake.1.notify_all();
            std::thread::sleep(Duration::from_millis(1));
        };
        if start.elapsed() > Duration::from_millis(1) {
            Counters::add(&self.counters.stall_gc_micros, start.elapsed().as_micros() as u64);
        }
        if result.is_err() {
            // This writer no longer waits; one still waiting begins the stall again.
            self.info_log.stalls_ended([StallCause::LogSpace, StallCause::LogReaders]);
        }
        result
    }

    /// Bytes written between two measurements of the log while it was last found within its
    /// limits, or over one that GC could not yet relieve. What is written meanwhile is not held
    /// back, so this bounds how far writes overshoot a limit: an eighth of a segment at most
    /// (GC frees whole segments), which keeps a database of small segments near its limit
    /// too. With 128 KiB segments a fixed 1 MiB let eight segments' writes pass unmeasured.
    fn space_check_bytes(&self) -> u64 {
        SPACE_CHECK_BYTES.min(self.options.segment_size / 8).max(1)
    }

    /// Counts every segment's garbage exactly (see `Index::survey_garbage`), seen by no reader:
    /// versions shadowed before the oldest open snapshot, or before now if there is none.
    pub(super) fn survey_garbage(&self) -> Result<()> {
        let started = std::time::Instant::now();
        let separated_written = self.separated_bytes_written.get();
        let user_written = self.counters.user_bytes_written.get();
        let now = SequenceNumber(self.last_sequence.load(Ordering::Acquire));
        let horizon = self.snapshots.oldest().map_or(now, |oldest| oldest.min(now));
        let applied_before = SegmentId(self.applied_segment.load(Ordering::Acquire));
        let mut indexed_live = 0;
        self.index.survey_live(horizon, applied_before, &mut |count| {
            indexed_live = count.indexed_live;
            self.record_survey(count, horizon)
        })?;
        let live = self.counted_live_bytes();
        let mut mark = self.last_survey.lock();
        // How much of what users wrote since the previous survey became new live data (inserts)
        // rather than replacing old data (overwrites): live data is extrapolated at that rate.
        // Measured on the newest versions the walks met, not on `live`: a key written while the
        // walk runs (after its horizon) keeps its old version live too, and so does one an open
        // snapshot reads. Under 1 KiB overwrites (no growth at all) `live` jumped by up to 90 MiB
        // between two surveys, read as growth of 0.4 to 1, and the limit grew with every write:
        // a log at 2.3x its live data went uncollected. Too few writes since the base say
        // nothing: the rate stays, and so does the base (see `MIN_GROWTH_SPAN`).
        let here = GrowthBase { user_written, indexed_live };
        let span = user_written.saturating_sub(mark.growth_base.user_written);
        let (growth, growth_base) = if !mark.surveyed {
            (1.0, here)
        } else if span == 0 || (span as f64) < indexed_live as f64 * MIN_GROWTH_SPAN {
            (mark.growth, mark.growth_base)
        } else {
            let gained = indexed_live.saturating_sub(mark.growth_base.indexed_live);
            ((gained as f64 / span as f64).min(1.0), here)
        };
        *mark = SurveyMark {
            surveyed: true,
            separated_written,
            user_written,
            live,
            growth,
            growth_base,
            horizon,
            held_back: horizon < now,
        };
        Counters::add(&self.counters.gc_surveys, 1);
        Counters::add(&self.counters.gc_survey_micros, started.elapsed().as_micros() as u64);
        log_event!(
            self.info_log,
            Level::INFO,
            horizon = horizon.0,
            live_bytes = live,
            indexed_live_bytes = indexed_live,
            growth = mark.growth,
            garbage_bytes = self.catalog.garbage_bytes(),
            micros = started.elapsed().as_micros() as u64,
            "garbage survey finished"
        );
        Ok(())
    }

    /// Records what a survey counted: each surveyed segment's garbage is SET to its record bytes
    /// minus the live ones. Segments the next flush would record are recorded now, so their
    /// counts stick.
    fn record_survey(&self, count: LiveCount, horizon: SequenceNumber) -> Result<()> {
        let lengths: BTreeMap<SegmentId, u64> =
            self.vlog.segments().into_iter().map(|s| (s.id, s.record_bytes)).collect();
        let garbage_surveys = count
            .surveyed
            .iter()
            .filter_map(|id| {
                let records = *lengths.get(id)?;
                let live = count.live.get(id).copied().unwrap_or(0);
                Some(GarbageSurvey { segment: *id, garbage_bytes: records.saturating_sub(live), horizon })
            })
            .collect();
        let recorded = self.catalog.record_with(|set| VersionEdit {
            added_segments: count.surveyed.iter().copied().filter(|id| set.is_unrecorded_segment(*id)).collect(),
            garbage_surveys,
            ..VersionEdit::default()
        });
        self.poison_on_error(recorded)?;
        // A newer survey's maps replace the older ones (both are right; the newer knows more).
        *self.survey_maps.lock() = SurveyMaps { maps: count.reachable, current_at: count.current_at };
        Ok(())
    }

    /// Bytes of log records not known to be garbage.
    fn counted_live_bytes(&self) -> u64 {
        self.logical_log_bytes().saturating_sub(self.catalog.garbage_bytes())
    }

    /// True if garbage may have appeared that no survey or compaction has counted: a good
    /// share of the log was written since the last survey, or the reader that held its horizon
    /// back is gone.
    fn survey_due(&self) -> bool {
        if self.index.charges_garbage_exactly() {
            return false;
        }
        let SurveyMark { separated_written, horizon, held_back, growth, .. } = *self.last_survey.lock();
        // Inline values and deletes become garbage at flush, which counts them itself.
        let written = self.separated_bytes_written.get().saturating_sub(separated_written);
        // A survey walks every key: spacing them by a share of the log keeps their cost a fixed
        // fraction of the writes, while garbage stays known within that share. An eighth since
        // surveys prefetch their marks, which halved their cost. What a survey finds is garbage,
        // so the writes count by the share that replaced data rather than added it (at the last
        // survey's rate): a load of new keys is surveyed less often, overwrites as before. At
        // least a quarter counts, so a load that turns into overwrites is surveyed again within
        // half the log's size written.
        let share = (self.logical_log_bytes() / 8).max(4 << 20);
        let replacing = (1.0 - growth).clamp(MIN_REPLACING_SHARE, 1.0);
        let reader_gone = held_back && self.snapshots.oldest().is_none_or(|oldest| oldest > horizon);
        written as f64 * replacing >= share as f64 || reader_gone
    }

    /// The background GC loop: checks every 100 ms whether a run (or a garbage survey) is due,
    /// and paces itself to `gc_rate_limit` bytes per second. A failure stops it and is kept, so
    /// that writers waiting for space learn why none will come.
    ///
    /// While GC is hurried ([`crate::vlog::gc::GarbageCollector::hurried`]), a survey runs on a
    /// thread of its own and runs go on with the counts of the one before: it walks every key
    /// (about 0.1 s per million here), and on this thread it held up every run, while writers
    /// waited for space, for as long. Unhurried, it runs here, off the writers' core. Runs and
    /// surveys may overlap anyway (`Db::run_gc` surveys on the caller's thread); a survey records
    /// counts only for segments still in the log.
    pub(super) fn background_gc(self: Arc<Self>) {
        let this = self.as_ref();
        std::thread::scope(|scope| {
            let mut survey: Option<std::thread::ScopedJoinHandle<'_, Result<()>>> = None;
            let mut worked = false;
            let failed = |e: Error| {
                log_event!(this.info_log, Level::ERROR, error = %e, "background GC stopped");
                *this.gc_failure.lock() = Some(e.to_string());
            };
            while !this.gc_stop.load(Ordering::Acquire) {
                // After a run that did work, look again at once (the pacing below has already
                // waited): another segment may be due, and waiting here too held GC to a run per
                // 100 ms until writers reached the space limit and stalled.
                if !worked {
                    let mut guard = this.gc_wake.0.lock();
                    if this.gc_stop.load(Ordering::Acquire) {
                        break;
                    }
                    this.gc_wake.1.wait_for(&mut guard, Duration::from_millis(100));
                }
                worked = false;
                if this.gc_stop.load(Ordering::Acquire) || this.poisoned.lock().is_some() {
                    continue;
                }
                if survey.as_ref().is_some_and(|s| s.is_finished()) {
                    let finished = survey.take().map(|s| s.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
                    if let Some(Err(e)) = finished {
                        failed(e);
                        break;
                    }
                }
                if survey.is_none() && this.survey_due() {
                    if this.gc.hurried(this, false) {
                        let spawned =
                            std::thread::Builder::new().name("splitkv-gc-survey".into()).spawn_scoped(scope, || {
                                let surveyed = this.survey_garbage();
                                // Runs waiting for work may find some in the new counts.
                                this.gc_wake.1.notify_all();
                                surveyed
                            });
                        match spawned {
                            Ok(handle) => survey = Some(handle),
                            Err(e) => {
                                failed(e.into());
                                break;
                            }
                        }
                    } else if let Err(e) = this.survey_garbage() {
                        // Nobody waits for space: the survey took its turn on this thread.
                        failed(e);
                        break;
                    }
                }
                let run = this.gc.is_due(this).and_then(|due| due.then(|| this.gc.run_once(this, false)).transpose());
                // Over the space trigger writers will wait at the limit unless GC keeps up, so it
                // runs unpaced until the log is back under the trigger.
                let hurried = this.gc.hurried(this, false);
                worked = run.as_ref().is_ok_and(|outcome| outcome.as_ref().is_some_and(GcOutcome::did_work));
                match run {
                    Ok(Some(_)) if hurried => {}
                    Ok(Some(outcome)) if this.options.gc_rate_limit > 0 => {
                        let secs = outcome.bytes_read as f64 / this.options.gc_rate_limit as f64;
                        let mut guard = this.gc_wake.0.lock();
                        if !this.gc_stop.load(Ordering::Acquire) {
                            this.gc_wake.1.wait_for(&mut guard, Duration::from_secs_f64(secs.min(10.0)));
                        }
                    }
                    Ok(_) => {}
                    // A failed run leaves everything as it was; stop retrying a broken log.
                    Err(e) => {
                        failed(e);
                        break;
                    }
                }
            }
            // The scope joins a survey still running; its result no longer matters.
        });
    }
}

impl DbInner {
    /// True if compactions moved values out of segment `id` and a reader still holds a tree
    /// from before: a moved pointer keeps its sequence number, so such a reader is not older
    /// than anything GC can name, and GC must wait until no such tree is held.
    fn held_by_tree_from_before_a_move(&self, id: SegmentId) -> bool {
        self.gc.moves_in_compaction()
            && self.vlog.moves().was_moved_out(id)
            && self.index.tables_pointing_into(id).older
    }
}

impl GcHost for DbInner {
    fn is_current(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool> {
        let current_since = {
            let survey = self.survey_maps.lock();
            let map = survey.maps.get(&ptr.segment);
            // What the last survey found unreachable stays so (`LiveMap`): no lookup needed.
            if map.is_some_and(|map| !map.may_be_reachable(ptr.offset)) {
                Counters::add(&self.counters.gc_lookups_skipped, 1);
                return Ok(false);
            }
            // A move out of the segment is not a write, so the filters would not see it.
            let moved_out = self.gc.moves_in_compaction() && self.vlog.moves().was_moved_out(ptr.segment);
            map.is_some_and(|map| !moved_out && map.was_current(ptr.offset)).then_some(survey.current_at)
        };
        // What it found current stays so until its key is written again: a few filter probes
        // instead of a lookup, for most of the records a 1 KiB overwrite's GC keeps.
        if current_since.is_some_and(|at| self.index.unchanged_since(key, at)) {
            Counters::add(&self.counters.gc_lookups_proven_live, 1);
            return Ok(true);
        }
        // Through the block cache, filling it: GC looks up every record it scans, twice for the
        // live ones (again as write leader), and the index's blocks are small next to the values
        // (WiscKey's premise is that they stay in memory). Reading around the cache cost a block
        // read and checksum per lookup: a third of GC's CPU time in a 1 KiB random load.
        let at = ReadAt::Latest(&self.last_sequence);
        Ok(matches!(self.index.get_in_background(key, at)?, Some(IndexValue::Pointer(p)) if p == *ptr))
    }

    fn eligible_segments(&self) -> Result<Vec<SegmentStats>> {
        let (head, recorded) = self.catalog.log_segments();
        let active = self.vlog.head().segment;
        Ok(self
            .vlog
            .segments()
            .into_iter()
            .filter(|s| s.id < head.segment && s.id < active && !self.vlog.moves().is_claimed(s.id))
            .map(|s| {
                let meta = recorded.get(&s.id);
                let skipped_bytes = meta.map_or(0, |m| m.skipped_bytes());
                SegmentStats {
                    id: s.id,
                    size: s.len,
                    garbage_bytes: meta.map_or(0, SegmentMeta::unreclaimed_garbage),
                    skipped_bytes,
                    age: active.0.saturating_sub(s.id.0),
                }
            })
            .collect())
    }

    fn skipped_ranges(&self, id: SegmentId) -> Vec<(u64, u64)> {
        self.catalog.segment(id).map(|m| m.skipped).unwrap_or_default()
    }

    fn is_compacted(&self, id: SegmentId) -> bool {
        self.vlog.is_compacted(id)
    }

    fn log_bytes(&self) -> u64 {
        self.logical_log_bytes().saturating_sub(self.gc.punched_bytes())
    }

    fn logical_log_bytes(&self) -> u64 {
        self.vlog.logical_len()
    }

    fn live_log_bytes_estimate(&self) -> u64 {
        let counted = self.counted_live_bytes();
        let mark = *self.last_survey.lock();
        if !mark.surveyed {
            return counted;
        }
        // Garbage made since the survey is not counted yet: extrapolate the survey's live bytes
        // at the rate writes have been adding live data, never beyond what is not known garbage.
        let since = self.counters.user_bytes_written.get().saturating_sub(mark.user_written);
        (mark.live + (since as f64 * mark.growth) as u64).min(counted)
    }

    fn visible_sequence(&self) -> SequenceNumber {
        SequenceNumber(self.last_sequence.load(Ordering::Acquire))
    }

    fn may_be_referenced(&self, id: SegmentId) -> bool {
        // Compactions may have moved every value out (`Options::gc_in_compaction`): then no
        // table points into it, and, being before the log head, no memtable does.
        let emptied = || self.vlog.moves().was_moved_out(id) && !self.index.tables_pointing_into(id).current;
        self.vlog.may_be_referenced(id) && !emptied()
    }

    fn relocate(
        &self,
        records: &mut dyn Iterator<Item = ReplayedRecord>,
        current_at: SequenceNumber,
    ) -> Result<SequenceNumber> {
        self.submit_relocations(records.map(|r| (r.key, r.value, r.pointer)), current_at)?;
        // The victim's other records are dead because newer writes shadow them; those writes
        // must be durable before the victim goes, or a crash would bring back pointers into it.
        self.sync_log()?;
        Ok(SequenceNumber(self.last_sequence.load(Ordering::Acquire)))
    }

    fn no_reader_older_than(&self, seq: SequenceNumber) -> bool {
        self.snapshots.oldest().is_none_or(|oldest| oldest >= seq)
    }

    fn record_skipped(&self, id: SegmentId, ranges: &[(u64, u64)]) -> Result<SequenceNumber> {
        self.sync_log()?;
        let seq = SequenceNumber(self.last_sequence.load(Ordering::Acquire));
        let skipped_ranges = ranges.iter().map(|&(start, end)| (id, start, end)).collect();
        let recorded = self.catalog.record_for_segment(id, VersionEdit { skipped_ranges, ..VersionEdit::default() });
        self.poison_on_error(recorded)?;
        Ok(seq)
    }

    fn wait_out_point_reads(&self) {
        // Point reads read "now" holding the barrier shared (see `DbInner::get_at`).
        drop(self.gc_barrier.write());
    }

    fn begin_collecting(&self, id: SegmentId) -> bool {
        self.vlog.moves().begin_collecting(id)
    }

    fn end_collecting(&self, id: SegmentId) {
        self.vlog.moves().end_collecting(id);
    }

    fn garbage_being_moved(&self) -> u64 {
        // A few segments at most: looked up one by one, not by copying every segment's record.
        self.vlog
            .moves()
            .claimed()
            .into_iter()
            .filter_map(|id| self.catalog.segment(id))
            .map(|m| m.unreclaimed_garbage())
            .sum()
    }

    fn begin_release(&self, id: SegmentId) -> bool {
        // Taken at the run's pick already; taking it again only checks for claims.
        !self.held_by_tree_from_before_a_move(id) && self.vlog.moves().begin_collecting(id)
    }

    fn may_punch(&self, id: SegmentId) -> bool {
        // A compaction that claimed the segment before the ranges were recorded may still read
        // records in them (one it keeps, whose newer version is outside the compaction, is
        // dead); claims taken later see the ranges and step over them.
        !self.held_by_tree_from_before_a_move(id) && !self.vlog.moves().is_claimed(id)
    }

    fn release_segment(&self, id: SegmentId) -> Result<()> {
        let removed_segments = vec![id];
        let recorded = self.catalog.record_for_segment(id, VersionEdit { removed_segments, ..VersionEdit::default() });
        self.poison_on_error(recorded)?;
        self.survey_maps.lock().maps.remove(&id);
        self.vlog.remove_segment(id)
    }

    fn compact_segment(&self, id: SegmentId, kept: &mut dyn Iterator<Item = KeptRecords>) -> Result<()> {
        let mut file = self.vlog.begin_compacted(id)?;
        for records in kept {
            file.push(records)?;
        }
        if file.records() == 0 {
            // Dropped unfinished: removed. The run releases the victim instead.
            drop(file);
        } else {
            file.finish()?;
        }
        // The writes that made the dropped records dead must be durable before the compacted
        // file can replace the old one.
        let synced = self.sync_log();
        if synced.is_err() {
            self.vlog.discard_compacted(id);
        }
        synced
    }

    fn install_compacted(&self, id: SegmentId, shadowed_by: SequenceNumber) -> Result<()> {
        // A failure between the rename and the directory sync would leave the segment's name
        // undecided: stop writing, as after any failed sync.
        let installed = self.vlog.install_compacted(id);
        self.poison_on_error(installed)?;
        // The dropped records' garbage is gone with them. Drops of versions shadowed after the
        // scan began are still to be counted; those counted since it began and kept are lost
        // until the next survey (GC then waits a little longer for this segment).
        let survey = GarbageSurvey { segment: id, garbage_bytes: 0, horizon: shadowed_by };
        let recorded = self
            .catalog
            .record_for_segment(id, VersionEdit { garbage_surveys: vec![survey], ..VersionEdit::default() });
        self.poison_on_error(recorded)
    }

    fn files(&self) -> (&dyn FileSystem, &Path) {
        (self.options.fs.as_ref(), &self.dir)
    }

    fn on_gc_run(&self, outcome: &GcOutcome, took: Duration) {
        Counters::add(&self.counters.gc_scan_micros, outcome.scan_time.as_micros() as u64);
        Counters::add(&self.counters.gc_relocate_micros, outcome.relocate_time.as_micros() as u64);
        let released: Vec<u64> = outcome.segments_released.iter().map(|s| s.0).collect();
        let compacted: Vec<u64> = outcome.segments_compacted.iter().map(|s| s.0).collect();
        log_event!(
            self.info_log,
            Level::INFO,
            victim = outcome.victim.map_or(-1, |v| v.0 as i64),
            partner = outcome.partner.map_or(-1, |v| v.0 as i64),
            bytes_read = outcome.bytes_read,
            records_relocated = outcome.records_relocated,
            bytes_relocated = outcome.bytes_relocated,
            bytes_punched = outcome.bytes_punched,
            released = %ListDisplay(&released),
            compacted = %ListDisplay(&compacted),
            scan_micros = outcome.scan_time.as_micros() as u64,
            relocate_micros = outcome.relocate_time.as_micros() as u64,
            micros = took.as_micros() as u64,
            "gc run finished"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::options::Options;

    fn open(dir: &std::path::Path) -> Result<Db> {
        Db::open(dir, Options { background_gc: false, value_threshold: 64, ..Options::default() })
    }

    fn seq(db: &Db) -> SequenceNumber {
        db.inner.visible_sequence()
    }

    fn pointer(db: &Db, key: &[u8]) -> Result<ValuePointer> {
        match db.inner.index.get(key, ReadAt::Snapshot(seq(db)), true)? {
            Some(IndexValue::Pointer(p)) => Ok(p),
            other => panic!("expected a pointer for {key:?}, found {other:?}"),
        }
    }

    #[test]
    fn the_index_tells_from_memory_only_what_nothing_newer_touched() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        db.put("a", vec![1; 100])?;
        let before = seq(&db);
        let index = &db.inner.index;
        assert!(index.unchanged_since(b"zzz", before), "no write touched zzz");
        assert!(!index.unchanged_since(b"a", before), "a is in the memtable: a lookup must decide");
        db.put("b", vec![2; 100])?;
        assert!(!index.unchanged_since(b"b", before), "b was written after `before`");
        db.flush()?;
        // The write of b now sits in a table; the flushed memtable's filter still knows it.
        assert!(!index.unchanged_since(b"b", before));
        assert!(index.unchanged_since(b"zzz", before));
        let after_flush = seq(&db);
        assert!(index.unchanged_since(b"zzz", after_flush));
        db.delete_range("x", "y")?;
        assert!(!index.unchanged_since(b"zzz", after_flush), "a range delete may cover any key");
        db.flush()?;
        assert!(!index.unchanged_since(b"zzz", after_flush), "a flushed range delete too");
        // Past the filters the index keeps, it can no longer tell.
        for i in 0..FLUSHES_PAST_MEMORY {
            db.put(format!("other{i}"), vec![3; 100])?;
            db.flush()?;
        }
        assert!(!index.unchanged_since(b"zzz", before) && !index.unchanged_since(b"b", before));
        assert!(index.unchanged_since(b"zzz", seq(&db)));
        Ok(())
    }

    #[test]
    fn an_empty_flush_after_a_write_hides_nothing_from_the_re_check() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        db.put("k", vec![1; 100])?;
        db.flush()?;
        let (old_k, current_at) = (pointer(&db, b"k")?, seq(&db));
        db.put("k", vec![2; 100])?;
        db.flush()?;
        // Sealing moves the log head, so the next flush freezes the empty memtable too (as
        // `run_gc` does): its filter holds nothing and its largest sequence number is 0.
        db.inner.seal_log()?;
        db.flush()?;
        assert!(!db.inner.index.unchanged_since(b"k", current_at), "k was written after `current_at`");
        db.inner.submit_relocations([(b"k".to_vec(), vec![1u8; 100], old_k)], current_at)?;
        assert_eq!(db.get("k")?.as_deref(), Some(&[2u8; 100][..]), "the stale copy won");
        Ok(())
    }

    /// More flushes than the LSM index keeps key filters of.
    const FLUSHES_PAST_MEMORY: usize = 20;

    #[test]
    fn overwrites_measure_as_no_growth_even_while_a_snapshot_keeps_the_old_versions() -> Result<()> {
        // The amplification limit extrapolates live data at the growth the last two surveys
        // measured. Overwrites read as growth once counted by what the log holds live: the
        // versions a snapshot (or a write racing the walk) keeps count twice. Then the limit
        // grew with every write.
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        let growth = |db: &Db| db.inner.last_survey.lock().growth;
        for i in 0..50 {
            db.put(format!("key{i:02}"), vec![1; 100])?;
        }
        db.inner.survey_garbage()?;
        let snapshot = db.snapshot();
        for i in 0..50 {
            db.put(format!("key{i:02}"), vec![2; 100])?;
        }
        db.inner.survey_garbage()?;
        assert_eq!(growth(&db), 0.0, "the same 50 keys, written again");
        drop(snapshot);
        for i in 50..100 {
            db.put(format!("key{i:02}"), vec![3; 100])?;
        }
        db.inner.survey_garbage()?;
        assert!(growth(&db) > 0.8, "50 new keys: growth {}", growth(&db));
        Ok(())
    }

    #[test]
    fn a_few_writes_between_two_surveys_keep_the_growth_measured_before() -> Result<()> {
        // Surveys also come due by GC's own copies, so two can come with almost no user write
        // between them; a rate measured over those few bytes once read a single insert as pure
        // growth, and the limit then let the log grow with every later write.
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        let growth = |db: &Db| db.inner.last_survey.lock().growth;
        for i in 0..100 {
            db.put(format!("key{i:03}"), vec![1; 100])?;
        }
        db.inner.survey_garbage()?;
        for i in 0..100 {
            db.put(format!("key{i:03}"), vec![2; 100])?;
        }
        db.inner.survey_garbage()?;
        assert_eq!(growth(&db), 0.0, "the same 100 keys, written again");
        db.put("key100", vec![3; 100])?;
        db.inner.survey_garbage()?;
        assert_eq!(growth(&db), 0.0, "one new key is 1% of the live bytes: too few to measure on");
        for i in 101..200 {
            db.put(format!("key{i:03}"), vec![3; 100])?;
        }
        db.inner.survey_garbage()?;
        assert!(growth(&db) > 0.8, "100 new keys since the last measurement: growth {}", growth(&db));
        Ok(())
    }

    #[test]
    fn gc_lookups_are_not_reads_that_make_level_0_due_for_compaction() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        // Two L0 tables; the newer one's range covers k1, so a lookup of k1 consults it in vain.
        db.put("k1", vec![1; 100])?;
        db.put("k3", vec![1; 100])?;
        db.flush()?;
        db.put("k0", vec![2; 100])?;
        db.put("k4", vec![2; 100])?;
        db.flush()?;
        assert_eq!(db.property("splitkv.num-files-at-level0").as_deref(), Some("2"));
        let k1 = pointer(&db, b"k1")?;
        let misses = || -> u64 {
            let counted = db.property("splitkv.l0-read-misses").expect("an LSM property");
            counted.split(' ').next().and_then(|n| n.parse().ok()).expect("a count first")
        };
        let before = misses();
        for _ in 0..10 {
            assert!(db.inner.is_current(b"k1", &k1)?, "GC's lookup found the record current");
        }
        assert_eq!(misses(), before, "GC's lookups are not counted");
        assert_eq!(db.get("k1")?.as_deref(), Some(&[1u8; 100][..]));
        assert_eq!(misses(), before + 1, "a user's read is counted");
        Ok(())
    }

    #[test]
    fn a_record_the_survey_found_current_is_kept_unlooked_up_until_its_key_is_written() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        for key in ["k", "untouched", "deleted"] {
            db.put(key, vec![1; 100])?;
        }
        db.put("k", vec![2; 100])?; // the first "k" is now dead
        db.flush()?;
        db.inner.seal_log()?;
        db.put("next", vec![1; 100])?; // a write to the next segment: the sealed one is applied
        db.inner.survey_garbage()?;
        let [k, untouched, deleted] = ["k", "untouched", "deleted"].map(|key| pointer(&db, key.as_bytes()));
        let (k, untouched, deleted) = (k?, untouched?, deleted?);
        let proven = || db.stats().gc_lookups_proven_live;
        assert!(db.inner.is_current(b"untouched", &untouched)?);
        assert_eq!(proven(), 1, "untouched: current at the survey, no write since");
        // Writes after the survey, flushed: their memtables' filters still know the keys, so the
        // lookup decides, and finds the records dead.
        db.put("k", vec![3; 100])?;
        db.delete("deleted")?;
        db.flush()?;
        assert!(!db.inner.is_current(b"k", &k)?);
        assert!(!db.inner.is_current(b"deleted", &deleted)?);
        assert!(db.inner.is_current(b"untouched", &untouched)?);
        assert_eq!(proven(), 2, "only untouched was proven current");
        // Once the index has forgotten the writes since the survey, every record is looked up.
        for i in 0..FLUSHES_PAST_MEMORY {
            db.put(format!("other{i}"), vec![4; 100])?;
            db.flush()?;
        }
        assert!(db.inner.is_current(b"untouched", &untouched)?);
        assert!(!db.inner.is_current(b"k", &k)?);
        assert_eq!(proven(), 2, "past the index's memory, the lookup decided");
        // A range delete in the tree at the survey (here still in the memtable): the survey
        // proves nothing current.
        db.delete_range("x", "y")?;
        db.inner.survey_garbage()?;
        assert!(db.inner.is_current(b"untouched", &untouched)?);
        assert_eq!(proven(), 2, "a range delete may cover a newest version: no current map");
        Ok(())
    }

    #[test]
    fn a_relocation_never_overwrites_a_newer_write_wherever_that_write_lives() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path())?;
        for flushes_after_overwrite in [0, 1, FLUSHES_PAST_MEMORY] {
            db.put("k", vec![1; 100])?;
            db.put("untouched", vec![3; 100])?;
            db.flush()?;
            let (old_k, old_untouched, current_at) = (pointer(&db, b"k")?, pointer(&db, b"untouched")?, seq(&db));
            db.put("k", vec![2; 100])?;
            for i in 0..flushes_after_overwrite {
                db.put(format!("other{i}"), vec![4; 100])?;
                db.flush()?;
            }
            // The leader skips the lookup for `untouched` while the memtables, flushed or not,
            // can say that no write touched it. The write of `k` makes it look `k` up.
            let index = &db.inner.index;
            let remembered = flushes_after_overwrite < FLUSHES_PAST_MEMORY;
            assert_eq!(index.unchanged_since(b"untouched", current_at), remembered);
            assert!(!index.unchanged_since(b"k", current_at));
            let records =
                [(b"k".to_vec(), vec![1u8; 100], old_k), (b"untouched".to_vec(), vec![3u8; 100], old_untouched)];
            db.inner.submit_relocations(records, current_at)?;
            assert_eq!(
                db.get("k")?.as_deref(),
                Some(&[2u8; 100][..]),
                "{flushes_after_overwrite} flushes after the overwrite"
            );
            assert_eq!(db.get("untouched")?.as_deref(), Some(&[3u8; 100][..]));
            assert_ne!(pointer(&db, b"untouched")?, old_untouched, "the untouched value moved to the head");
        }
        Ok(())
    }
}
