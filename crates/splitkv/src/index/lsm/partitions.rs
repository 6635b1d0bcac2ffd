//! Partitions and what range deletes free: dropping covered tables whole, retiring range
//! deletes that cover nothing any more, and splitting partitions that grew too large.
//!
//! A partition is a key range between two split keys of the version's partition map. Flushes and
//! compactions cut their outputs at split keys, so (apart from tables written before a split)
//! every table lies inside one partition. That is what makes a range delete cheap for the
//! partitions it covers: once the delete is durable and no snapshot older than it remains, every
//! table wholly inside the range with only older entries holds nothing any reader can see, and
//! one MANIFEST edit drops them all (TridentKV's partition drop), charging the value-log records
//! they point to as garbage from their metadata alone. Nothing is read or rewritten, and reads
//! after the delete find no covered data left in those partitions.
//!
//! Dropping is semantically invisible (the range delete already hides everything dropped), so a
//! crash before, during or after the edit changes nothing a reader sees. A drop that a snapshot
//! blocks waits in `pending_reclaims` and is tried again after every flush and compaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Shared, State};
use crate::error::Result;
use crate::range_del::RangeTombstone;
use crate::stats::Counters;
use crate::types::{SegmentId, SequenceNumber};
use crate::version::{Version, VersionEdit};

impl Shared {
    /// Records the static split points of the options that the partition map lacks.
    pub(super) fn record_static_partitions(&self) -> Result<()> {
        self.update_partition_splits(&self.options.partition_split_points, &[])
    }

    /// Adds the split keys in `add` that the partition map lacks and removes those in `remove`
    /// it holds, in one edit (none if nothing changes). Removing a split merges two partitions;
    /// no table straddles a split that remains, so nothing needs rewriting.
    pub(super) fn update_partition_splits(&self, add: &[Vec<u8>], remove: &[Vec<u8>]) -> Result<()> {
        self.record_and_install(|current| {
            let splits = current.partition_splits();
            let mut added: Vec<Vec<u8>> =
                add.iter().filter(|key| !key.is_empty() && splits.binary_search(key).is_err()).cloned().collect();
            added.sort();
            added.dedup();
            let mut removed: Vec<Vec<u8>> =
                remove.iter().filter(|key| splits.binary_search(key).is_ok() && !add.contains(key)).cloned().collect();
            removed.sort();
            removed.dedup();
            VersionEdit { partition_splits_added: added, partition_splits_removed: removed, ..VersionEdit::default() }
        })
    }

    /// Records the edit `build` makes of the current version (nothing if it is empty) and
    /// hands the new version to readers.
    fn record_and_install(&self, build: impl FnOnce(&Arc<Version>) -> VersionEdit) -> Result<()> {
        let mut changed = false;
        self.catalog.record_with(|set| {
            let edit = build(&set.current());
            changed = !edit.is_empty();
            edit
        })?;
        if changed {
            self.install_super_version(&self.state.lock());
        }
        Ok(())
    }

    /// Frees what a durable range delete at `seq` over `[start, end)` hides, now or (while a
    /// snapshot older than it lives) later.
    pub(super) fn reclaim_range(&self, start: &[u8], end: &[u8], seq: SequenceNumber) -> Result<()> {
        let tombstone = RangeTombstone { start: start.to_vec(), end: end.to_vec(), seq };
        if self.snapshots.oldest().is_some_and(|oldest| oldest < seq) {
            self.state.lock().pending_reclaims.push(tombstone);
            return Ok(());
        }
        let dropped = self.drop_covered_tables(&tombstone);
        if let Err(e) = &dropped {
            // The durable state is unknown from here on, as after any failed flush.
            self.set_bg_error(&mut self.state.lock(), e);
        }
        dropped
    }

    /// Drops, in one edit, every table wholly inside the delete's range with only older entries,
    /// after making the log (and with it the delete) durable.
    fn drop_covered_tables(&self, t: &RangeTombstone) -> Result<()> {
        // Checked first, so that a delete covering no whole table costs no log sync.
        if self.catalog.lock().current().files_covered_by(&t.start, &t.end, t.seq).is_empty() {
            return Ok(());
        }
        // The delete must survive a crash before the tables it hides are gone.
        self.log.sync()?;
        let mut dropped = 0u64;
        self.catalog.record_with(|set| {
            let current = set.current();
            let covered = current.files_covered_by(&t.start, &t.end, t.seq);
            dropped = covered.len() as u64;
            let mut edit = VersionEdit::default();
            let mut garbage: BTreeMap<SegmentId, u64> = BTreeMap::new();
            for (level, file) in covered {
                edit.delete_file(level, file.number);
                for &(segment, bytes) in &file.log_refs {
                    *garbage.entry(segment).or_default() += bytes;
                }
            }
            edit.segment_garbage = garbage.into_iter().collect();
            edit
        })?;
        if dropped > 0 {
            Counters::add(&self.counters.tables_dropped_by_range_deletes, dropped);
            let state = self.state.lock();
            self.install_super_version(&state);
            self.done_cv.notify_all();
            drop(state);
            self.delete_obsolete_files();
        }
        Ok(())
    }

    /// Upkeep after the tree changed (a flush or a compaction): drops that snapshots held back,
    /// range deletes that cover nothing any more, partitions grown past their target.
    pub(super) fn after_tree_change(&self) -> Result<()> {
        let ready: Vec<RangeTombstone> = {
            let mut state = self.state.lock();
            take_ready(&mut state, self.snapshots.oldest())
        };
        for t in &ready {
            self.drop_covered_tables(t)?;
        }
        self.record_and_install(|current| {
            let mut edit =
                VersionEdit { range_tombstones_removed: current.retired_tombstones(), ..VersionEdit::default() };
            if let Some(target) = self.options.partition_target_bytes {
                edit.partition_splits_added = oversized_partition_splits(current, target);
            }
            edit
        })
    }
}

/// The pending drops no live snapshot holds back any more, removed from `state`.
fn take_ready(state: &mut State, oldest_snapshot: Option<SequenceNumber>) -> Vec<RangeTombstone> {
    let (ready, waiting) = std::mem::take(&mut state.pending_reclaims)
        .into_iter()
        .partition(|t| oldest_snapshot.is_none_or(|oldest| oldest >= t.seq));
    state.pending_reclaims = waiting;
    ready
}

/// A split key for every partition whose tables hold more than `target` bytes: the first key of
/// the table at the byte median of its largest level, so that no table of that level straddles
/// the split.
fn oversized_partition_splits(version: &Arc<Version>, target: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for partition in version.partitions() {
        let mut per_level = vec![Vec::new(); version.num_levels()];
        let mut total = 0;
        for &(level, f) in &partition.files {
            let (lo, hi) = f.user_range();
            if partition.contains_range(lo, hi) {
                total += f.file_size;
                per_level[level].push(f);
            }
        }
        if total <= target {
            continue;
        }
        let Some(files) = per_level.iter().skip(1).max_by_key(|fs| fs.iter().map(|f| f.file_size).sum::<u64>()) else {
            continue;
        };
        let half = files.iter().map(|f| f.file_size).sum::<u64>() / 2;
        let mut seen = 0;
        for f in files {
            let key = f.smallest.user_key();
            if seen >= half && partition.start.is_none_or(|s| s < key) {
                out.push(key.to_vec());
                break;
            }
            seen += f.file_size;
        }
    }
    out
}
