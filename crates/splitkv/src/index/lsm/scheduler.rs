//! The LSM index's compaction scheduler: the background workers' loop, picking (the policy
//! chooses a level, the picker free inputs there), running and publishing compactions, and
//! manual range compaction.
//!
//! Flushes pre-empt compactions: a worker always flushes before picking, and a running
//! compaction checks every few entries whether a frozen memtable waits and flushes it first.
//! Workers pick under the state lock and mark their inputs busy in [`InFlight`] before releasing
//! it, so concurrent compactions never share files or write overlapping ranges into one level; a
//! manual compaction excludes them all (`compaction_lock`). Each finished compaction is reported
//! to the policy (its level and duration), to the optional listener and to the LOG.
//!
//! A range delete may drop tables while a compaction reads them (see `partitions`); the
//! compaction then publishes nothing (its outputs hold only what the delete hid or what the
//! surviving inputs still hold) and its outputs are deleted as obsolete.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Level;

use super::{Shared, State};
use crate::compaction::exec::{self, CompactionContext, ValueMoves};
use crate::compaction::picker::{self, Compaction, PickSettings};
use crate::compaction::{
    CompactionEvent, CompactionPolicy, FinishedCompaction, PickReason, SchedulerState, ScorePolicy, TimeSliceConfig,
    TimeSlicePolicy,
};
use crate::error::{Error, Result};
use crate::info_log::{log_event, ListDisplay};
use crate::options::{CompactionPolicyKind, Options};
use crate::stats::Counters;
use crate::types::SegmentId;
use crate::version::{FileMetaData, VersionEdit, VersionSet};

/// True if every file `edit` deletes is still where the edit says: no range delete dropped an
/// input of the compaction that built the edit.
fn inputs_still_current(set: &VersionSet, edit: &VersionEdit) -> bool {
    let current = set.current();
    edit.deleted_files.iter().all(|&(level, number)| current.files(level).iter().any(|f| f.number == number))
}

/// The numbers picking takes from `options`.
pub(super) fn pick_settings(o: &Options) -> PickSettings {
    PickSettings {
        l0_trigger: o.level0_file_num_compaction_trigger,
        l0_slowdown: o.level0_slowdown_writes_trigger,
        l0_stop: o.level0_stop_writes_trigger,
        level_base: o.max_bytes_for_level_base,
        level_multiplier: o.max_bytes_for_level_multiplier,
        target_file_size: o.target_file_size,
    }
}

/// The compaction policy `options` select.
pub(super) fn policy_for(options: &Options) -> Box<dyn CompactionPolicy> {
    match options.compaction_policy {
        CompactionPolicyKind::Score => Box::new(ScorePolicy::default()),
        CompactionPolicyKind::TimeSlice { slice_ms, dynamic, drain_percent } => {
            Box::new(TimeSlicePolicy::new(TimeSliceConfig {
                slice_ms,
                dynamic,
                drain_fraction: drain_percent.map(|p| f64::from(p.min(100)) / 100.0),
                ..TimeSliceConfig::default()
            }))
        }
    }
}

impl Shared {
    fn scheduler_state(&self) -> SchedulerState {
        SchedulerState { now_ms: self.started.elapsed().as_millis() as u64 }
    }

    /// A background worker: flushes first, then runs what the policy picks, until shutdown.
    pub(super) fn background_loop(self: Arc<Self>) {
        let mut state = self.state.lock();
        loop {
            if state.shutting_down {
                break;
            }
            if state.bg_error.is_some() {
                self.work_cv.wait(&mut state);
                continue;
            }
            if state.imm.is_some() && !state.flushing {
                drop(state);
                self.flush_frozen_memtable();
                state = self.state.lock();
                continue;
            }
            // A manual compaction holds the lock exclusively; look again shortly.
            let Some(shared_guard) = self.compaction_lock.try_read() else {
                drop(state);
                std::thread::sleep(Duration::from_millis(10));
                state = self.state.lock();
                continue;
            };
            let Some((compaction, reason)) = self.pick_compaction(&mut state) else {
                drop(shared_guard);
                self.work_cv.wait(&mut state);
                continue;
            };
            let id = state.in_flight.register(&compaction);
            drop(state);
            let started_ms = self.scheduler_state().now_ms;
            let timer = Instant::now();
            let level_bytes = compaction.input_bytes().0;
            let result = self.run_compaction(compaction);
            let duration = timer.elapsed();
            drop(shared_guard);
            state = self.state.lock();
            state.in_flight.release(id);
            // At least 1 ms per compaction, so that a run of sub-millisecond moves still ends a slice.
            let done =
                FinishedCompaction { level: reason.0, duration_ms: (duration.as_millis() as u64).max(1), level_bytes };
            let now = self.scheduler_state();
            state.policy.on_compaction_done(&done, &now);
            let holder = state.policy.slice_holder();
            // Other workers may have found every candidate busy.
            self.work_cv.notify_all();
            match result {
                Ok(summary) => {
                    drop(state);
                    self.report_compaction(&summary.event(reason.1, started_ms, duration, holder), &summary);
                    let upkeep = self.after_tree_change();
                    state = self.state.lock();
                    if let Err(e) = upkeep {
                        self.set_bg_error(&mut state, &e);
                    }
                }
                Err(e) => {
                    log_event!(self.info_log, Level::ERROR, level = reason.0, error = %e, "compaction failed");
                    self.set_bg_error(&mut state, &e);
                }
            }
        }
    }

    /// Tells the listener and the LOG about a finished compaction.
    fn report_compaction(&self, event: &CompactionEvent, summary: &CompactionSummary) {
        if let Some(listener) = &self.listener {
            listener.on_compaction_completed(event);
        }
        log_event!(
            self.info_log,
            Level::INFO,
            level = event.level,
            reason = event.reason.name(),
            inputs = %ListDisplay(&summary.inputs[0]),
            inputs_below = %ListDisplay(&summary.inputs[1]),
            input_bytes = event.input_bytes[0] + event.input_bytes[1],
            outputs = %ListDisplay(&summary.outputs),
            output_bytes = event.output_bytes,
            trivial_move = event.trivial_move,
            moved_from_segments = %ListDisplay(&summary.moved_from),
            moved_values = summary.moved_values,
            moved_bytes = summary.moved_bytes,
            micros = event.duration_micros,
            "compaction finished"
        );
    }

    /// Asks the policy for a level and the picker for free inputs there. Levels whose every
    /// candidate conflicts with a running compaction are reported to the policy as blocked.
    pub(super) fn pick_compaction(&self, state: &mut State) -> Option<(Compaction, (usize, PickReason))> {
        let catalog = self.catalog.lock();
        let misses = self.l0_read_misses.load(Ordering::Relaxed);
        let (levels, mut candidates) = picker::candidates(
            &catalog.current(),
            catalog.compact_pointers(),
            &state.in_flight,
            &self.pick_settings,
            misses,
        );
        drop(catalog);
        let sched = self.scheduler_state();
        let pick = state.policy.pick(&levels, &sched)?;
        let compaction = candidates.get_mut(pick.level)?.take()?;
        if pick.level == 0 {
            // The files reads missed in are on their way out; later ones start a new count.
            self.l0_read_misses.fetch_sub(misses, Ordering::Relaxed);
        }
        Some((compaction, (pick.level, pick.reason)))
    }

    /// Runs one compaction (or trivial move) and publishes its result.
    pub(super) fn run_compaction(&self, compaction: Compaction) -> Result<CompactionSummary> {
        let level = compaction.level;
        let mut summary = CompactionSummary {
            level,
            input_files: [compaction.inputs[0].len(), compaction.inputs[1].len()],
            inputs: [0, 1].map(|which| compaction.inputs[which].iter().map(|f| f.number.0).collect()),
            input_bytes: {
                let (a, b) = compaction.input_bytes();
                [a, b]
            },
            ..CompactionSummary::default()
        };
        let mut edit = VersionEdit::default();
        if let Some(largest) = compaction.largest_input_key() {
            edit.compact_pointers.push((level, largest));
        }
        for (which, files) in compaction.inputs.iter().enumerate() {
            for f in files {
                edit.deleted_files.push((level + which, f.number));
            }
        }
        // A table that may hold range-deleted entries is rewritten rather than moved, so the
        // delete is applied (and can retire).
        let holds_deleted = |f: &FileMetaData| self.catalog.lock().current().holds_range_deleted(f);
        if compaction.is_trivial_move() && !holds_deleted(&compaction.inputs[0][0]) {
            let file = &compaction.inputs[0][0];
            edit.new_files.push((level + 1, FileMetaData::clone(file)));
            self.catalog
                .record_with(|set| if inputs_still_current(set, &edit) { edit } else { VersionEdit::default() })?;
            let state = self.state.lock();
            self.install_super_version(&state);
            self.done_cv.notify_all();
            drop(state);
            drop(compaction);
            self.delete_obsolete_files();
            summary.trivial_move = true;
            summary.outputs = summary.inputs[0].clone();
            return Ok(summary);
        }

        let snapshots = self.snapshots.all();
        let started_from = self.catalog.lock().current();
        // Claimed before the merge reads a value, ended once the outputs are published (or the
        // compaction failed): GC touches none of these segments, nor those it appends moved
        // values to, meanwhile.
        let (ticket, claimed) = self.log.claim_for_moves(&self.segments_to_move_from(&compaction));
        let end_moves = || self.log.end_moves(ticket);
        let move_from: HashMap<SegmentId, Vec<(u64, u64)>> =
            claimed.iter().map(|&id| (id, self.catalog.segment(id).map(|m| m.skipped).unwrap_or_default())).collect();
        let mut allocated = Vec::new();
        let result = {
            let mut new_file_number = || self.new_output_number(&mut allocated);
            let mut preempt = || {
                self.flush_frozen_memtable();
                match self.state.lock().bg_error.clone() {
                    Some(e) => Err(Error::Poisoned(e)),
                    None => Ok(()),
                }
            };
            exec::run(
                &compaction,
                CompactionContext {
                    fs: &self.fs,
                    dir: &self.dir,
                    table_cache: &self.table_cache,
                    table_options: self.table_options_for_build(),
                    learning: Some(&self.learning),
                    snapshots,
                    new_file_number: &mut new_file_number,
                    preempt: &mut preempt,
                    range_fragments: Arc::clone(started_from.range_fragments()),
                    range_clean_below: started_from.newest_range_delete(),
                    partition_splits: started_from.partition_splits(),
                    moves: (!move_from.is_empty()).then_some(ValueMoves {
                        log: self.log.as_ref(),
                        ticket,
                        from: &move_from,
                    }),
                },
            )
        };
        let outcome = result.and_then(|res| {
            self.fs.sync_dir(&self.dir)?;
            // The moved values must be durable before a table that points at them is recorded.
            if res.moved_values > 0 {
                self.log.sync()?;
            }
            Ok(res)
        });
        // Release the input version so its files can be judged obsolete below.
        drop(compaction);
        drop(started_from);
        let release_outputs = |state: &mut State| {
            for n in &allocated {
                state.pending_outputs.remove(n);
            }
        };
        let res = match outcome {
            Ok(res) => res,
            Err(e) => {
                end_moves();
                release_outputs(&mut self.state.lock());
                self.delete_obsolete_files();
                return Err(e);
            }
        };
        summary.output_files = res.outputs.len();
        summary.moved_from = claimed.iter().map(|id| id.0).collect();
        summary.moved_from.sort_unstable();
        (summary.moved_values, summary.moved_bytes) = (res.moved_values, res.moved_bytes);
        summary.outputs = res.outputs.iter().map(|meta| meta.number.0).collect();
        summary.output_bytes = res.bytes_written;
        edit.new_files.extend(res.outputs.into_iter().map(|meta| (level + 1, meta)));
        // The outputs stay pending until the edit lists them, or obsolete-file deletion running
        // meanwhile would take them for leftovers.
        let recorded = self.catalog.record_with(|set| {
            if !inputs_still_current(set, &edit) {
                return VersionEdit::default();
            }
            edit.segment_garbage = set.new_garbage(res.garbage.iter().map(|d| (d.segment, d.bytes, d.shadowed_by)));
            edit
        });
        let mut state = self.state.lock();
        release_outputs(&mut state);
        if recorded.is_ok() {
            self.install_super_version(&state);
        }
        // Held until readers take the new version, so GC does not copy what was just moved.
        end_moves();
        recorded?;
        Counters::add(&self.counters.compaction_values_moved, res.moved_values);
        Counters::add(&self.counters.compaction_value_bytes_moved, res.moved_bytes);
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_bytes_read, res.bytes_read);
        Counters::add(&self.counters.compaction_bytes_written, res.bytes_written);
        self.done_cv.notify_all();
        drop(state);
        self.delete_obsolete_files();
        Ok(summary)
    }

    /// The segments whose values the compaction should move (`Options::gc_in_compaction`): of
    /// those its inputs point into, the ones GC wants emptied (`GarbageCollector`'s plan).
    fn segments_to_move_from(&self, compaction: &Compaction) -> Vec<SegmentId> {
        if !self.options.gc_in_compaction {
            return Vec::new();
        }
        let referenced: BTreeSet<SegmentId> =
            compaction.inputs.iter().flatten().flat_map(|f| f.log_refs.iter().map(|&(id, _)| id)).collect();
        self.log.wanted_moves(&mut referenced.into_iter())
    }

    /// Compacts the key range `[begin, end]` down through every level, excluding background
    /// compactions meanwhile.
    pub(super) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _guard = self.compaction_lock.write();
        // Like LevelDB: push the range down to the deepest level that already holds part of it,
        // so data ends where a full compaction would leave it without rewriting empty levels.
        // Range deletes over the range are applied by rewriting: then the deepest level is
        // pushed down one more (when there is a level below), or its covered data would stay.
        let deepest = {
            let version = self.catalog.lock().current();
            let deepest = (1..version.num_levels())
                .rev()
                .find(|&l| !version.overlapping_files(l, begin, end).is_empty())
                .unwrap_or(1);
            let deletes_apply = version
                .range_tombstones()
                .iter()
                .any(|t| begin.is_none_or(|b| b < t.end.as_slice()) && end.is_none_or(|e| t.start.as_slice() <= e));
            if deletes_apply && deepest + 1 < version.num_levels() {
                deepest + 1
            } else {
                deepest
            }
        };
        for level in 0..deepest {
            let version = self.catalog.lock().current();
            let picked = picker::range_inputs(&version, level, begin, end, self.options.target_file_size);
            drop(version);
            if let Some(c) = picked {
                let started_ms = self.scheduler_state().now_ms;
                let timer = Instant::now();
                let summary = self.run_compaction(c)?;
                let holder = self.state.lock().policy.slice_holder();
                self.report_compaction(
                    &summary.event(PickReason::Manual, started_ms, timer.elapsed(), holder),
                    &summary,
                );
            }
        }
        // Workers that found nothing to do before may find work in the new shape of the tree.
        self.work_cv.notify_all();
        self.after_tree_change()
    }
}

/// What one compaction did, before timing is attached.
#[derive(Debug, Default)]
pub(super) struct CompactionSummary {
    level: usize,
    input_files: [usize; 2],
    input_bytes: [u64; 2],
    output_files: usize,
    output_bytes: u64,
    trivial_move: bool,
    /// Input table numbers from `level` and from `level + 1`.
    inputs: [Vec<u64>; 2],
    /// Output table numbers (the moved table for a trivial move).
    outputs: Vec<u64>,
    /// Value-log segments values were moved out of (`Options::gc_in_compaction`).
    moved_from: Vec<u64>,
    /// Values moved, and their record bytes.
    moved_values: u64,
    moved_bytes: u64,
}

impl CompactionSummary {
    pub(super) fn event(
        &self,
        reason: PickReason,
        start_ms: u64,
        duration: Duration,
        slice_holder: Option<usize>,
    ) -> CompactionEvent {
        CompactionEvent {
            level: self.level,
            reason,
            input_files: self.input_files,
            input_bytes: self.input_bytes,
            output_files: self.output_files,
            output_bytes: self.output_bytes,
            trivial_move: self.trivial_move,
            start_ms,
            duration_micros: duration.as_micros() as u64,
            slice_holder,
        }
    }
}
