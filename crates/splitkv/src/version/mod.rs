//! The database's durable shape: which SSTables form each level, which value-log segments exist
//! and how much garbage each holds, and the counters recovery needs (next file number, last
//! sequence, value-log head).
//!
//! - [`Version`]: an immutable snapshot of the levels. Readers hold an `Arc<Version>` for as long
//!   as they read; compaction and flush never change a `Version`, they publish a new one.
//! - [`VersionEdit`]: one atomic change, the unit written to the MANIFEST.
//! - [`VersionSet`]: owns the MANIFEST and the current `Version`; `log_and_apply` makes an edit
//!   durable and then installs its result.
//! - [`Catalog`]: the `VersionSet` behind its lock, owned by the database and shared with the
//!   index; the value log's metadata and the index's tables are recorded through it.
//! - `manifest`: the MANIFEST record format and the `CURRENT` pointer file.
//!
//! A `Version` also carries the database's durable range deletes (recorded when the memtable
//! holding them is flushed; see `crate::range_del`) and its partition map: split keys that no
//! table written since the split straddles, so that the tables of a deleted key range can be
//! dropped whole (TridentKV's partitions, as output boundaries of one shared tree).
//!
//! Invariants of a `Version`: level 0 is ordered by file number ascending (newest last) and its
//! files may overlap; every deeper level is ordered by smallest key and its files are disjoint in
//! internal-key order (each file's largest key sorts strictly before the next file's smallest).
//! Every file's smallest key sorts at or before its largest key.
//!
//! Thread-safety: `Version`, `FileMetaData` and `VersionEdit` are immutable data, `Send + Sync`.
//! `VersionSet` is single-owner (`&mut self` to change it); callers serialize edits behind one lock.

mod builder;
mod catalog;
mod edit;
pub mod manifest;
mod set;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::range_del::{Fragments, RangeTombstone};
use crate::types::{
    compare_internal_keys, seek_key, user_key, FileNumber, InternalKey, SegmentId, SequenceNumber, MAX_SEQUENCE,
};

pub use builder::VersionBuilder;
pub use catalog::Catalog;
pub use edit::{EditDecodeError, GarbageSurvey, VersionEdit};
pub use set::{TablesPointingInto, VersionSet, DEFAULT_MAX_MANIFEST_SIZE};

/// What the version layer knows about one SSTable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMetaData {
    /// The table's file number (`NNNNNN.sst`).
    pub number: FileNumber,
    /// Size of the table file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the table.
    pub smallest: InternalKey,
    /// Largest internal key in the table.
    pub largest: InternalKey,
    /// Number of entries (all versions, tombstones included).
    pub num_entries: u64,
    /// The value-log records the table points to: record bytes per segment, ascending by
    /// segment (Pebble keeps such a list per table). Dropping the table makes at most these
    /// bytes garbage, which an edit can charge without reading the table.
    pub log_refs: Vec<(SegmentId, u64)>,
    /// Smallest sequence number of any entry (0 when unknown: tables from older MANIFESTs).
    pub smallest_seq: SequenceNumber,
    /// Largest sequence number of any entry (`MAX_SEQUENCE` when unknown).
    pub largest_seq: SequenceNumber,
    /// No range delete at or below this sequence number covers an entry of the table: it was
    /// written after them, or by a compaction that dropped everything they cover (0 = unknown).
    pub range_clean_below: SequenceNumber,
}

impl FileMetaData {
    /// The user keys of the table, as a closed range.
    pub fn user_range(&self) -> (&[u8], &[u8]) {
        (self.smallest.user_key(), self.largest.user_key())
    }

    /// True if the table may hold an entry that `t` covers: it overlaps `t`'s range, holds an
    /// entry older than `t`, and was not written by a compaction that applied `t`.
    pub fn may_hold_covered_by(&self, t: &RangeTombstone) -> bool {
        let (lo, hi) = self.user_range();
        t.overlaps(lo, hi) && self.smallest_seq < t.seq && self.range_clean_below < t.seq
    }

    /// True if the table's user-key range intersects `[begin, end]` (`None` is unbounded).
    pub fn overlaps_user_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let before_begin = begin.is_some_and(|b| self.largest.user_key() < b);
        let after_end = end.is_some_and(|e| self.smallest.user_key() > e);
        !before_begin && !after_end
    }

    /// True if `user_key` lies within the table's user-key range.
    pub fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest.user_key() <= user_key && user_key <= self.largest.user_key()
    }
}

/// What the version layer knows about one value-log segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentMeta {
    /// Bytes of records in the segment that no index entry reaches any more.
    pub garbage_bytes: u64,
    /// Compaction drops of versions shadowed at or below this sequence number are already
    /// counted in `garbage_bytes` (set by a garbage survey; 0 = none).
    pub survey_horizon: SequenceNumber,
    /// Sorted, disjoint runs of whole dead records `[start, end)` that scans skip; their
    /// block-aligned interiors are punched out of the file.
    pub skipped: Vec<(u64, u64)>,
}

impl SegmentMeta {
    /// Bytes of records inside skipped ranges (already reclaimed or being reclaimed in place).
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped.iter().map(|(s, e)| e - s).sum()
    }

    /// Garbage bytes not yet freed in place: what cleaning (or emptying) the segment still frees.
    pub fn unreclaimed_garbage(&self) -> u64 {
        self.garbage_bytes.saturating_sub(self.skipped_bytes())
    }

    /// Adds a skipped range; overlapping or touching ranges merge.
    fn add_skipped(&mut self, start: u64, end: u64) {
        let at = self.skipped.partition_point(|&(_, e)| e < start);
        let mut merged = (start, end);
        while let Some(&(s, e)) = self.skipped.get(at) {
            if s > merged.1 {
                break;
            }
            merged = (merged.0.min(s), merged.1.max(e));
            self.skipped.remove(at);
        }
        self.skipped.insert(at, merged);
    }
}

/// The whole `block`-sized blocks inside `[start, end)`, if any: what punching that range frees.
pub fn aligned_interior(start: u64, end: u64, block: u64) -> Option<(u64, u64)> {
    let (lo, hi) = (start.div_ceil(block) * block, end / block * block);
    (hi > lo).then_some((lo, hi))
}

/// One partition of a [`Version`]: `[start, end)` (`None` is unbounded) and the tables whose
/// first key lies in it.
#[derive(Debug)]
pub struct Partition<'a> {
    /// First key of the partition.
    pub start: Option<&'a [u8]>,
    /// First key after it.
    pub end: Option<&'a [u8]>,
    /// Its tables with their levels, level 0 first.
    pub files: Vec<(usize, &'a Arc<FileMetaData>)>,
}

impl Partition<'_> {
    /// True if the closed user-key range `[lo, hi]` lies inside the partition.
    pub fn contains_range(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.start.is_none_or(|s| s <= lo) && self.end.is_none_or(|e| hi < e)
    }

    /// Bytes of its tables.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, f)| f.file_size).sum()
    }
}

/// An immutable set of SSTables arranged in levels (see the module header for the invariants).
#[derive(Clone, Debug)]
pub struct Version {
    // One shared slice per level, so installing an edit copies only the levels it touches.
    levels: Vec<Arc<[Arc<FileMetaData>]>>,
    /// Durable range deletes, and their fragments for reads and compaction.
    range_tombstones: Arc<[RangeTombstone]>,
    fragments: Arc<Fragments>,
    /// Partition split keys, ascending: partition `i` holds `[split[i-1], split[i])`.
    partitions: Arc<[Vec<u8>]>,
    /// Most level-0 files any one user key falls into (what L0 triggers count: with
    /// partitions, one flush writes a level-0 file per partition it touches).
    l0_depth: usize,
}

impl Version {
    /// A version with `num_levels` empty levels.
    pub fn empty(num_levels: usize) -> Version {
        let empty: Arc<[Arc<FileMetaData>]> = Arc::from(Vec::new());
        Version {
            levels: vec![empty; num_levels],
            range_tombstones: Arc::from(Vec::new()),
            fragments: Arc::new(Fragments::default()),
            partitions: Arc::from(Vec::new()),
            l0_depth: 0,
        }
    }

    /// The version that results from applying the file changes of `edit` to this one (segments
    /// and counters are the [`VersionSet`]'s business). `Err` names the inconsistency.
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version, String> {
        let mut builder = VersionBuilder::new(self);
        builder.apply(edit)?;
        builder.finish()
    }

    /// Number of levels, level 0 included.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Files of `level` in level order; empty for a level beyond [`Version::num_levels`].
    pub fn files(&self, level: usize) -> &[Arc<FileMetaData>] {
        self.levels.get(level).map_or(&[], |files| files)
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files(level).len()
    }

    /// Total size of the files in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.file_size).sum()
    }

    /// The value-log record bytes per segment that the files `dropped` (`(level, number)`)
    /// point to: the most garbage dropping them without a rewrite can make, known from the
    /// table metadata alone (files not in this version count nothing).
    pub fn log_refs_of(&self, dropped: &[(usize, FileNumber)]) -> BTreeMap<SegmentId, u64> {
        let mut refs = BTreeMap::new();
        for &(level, number) in dropped {
            let Some(file) = self.files(level).iter().find(|f| f.number == number) else { continue };
            for &(segment, bytes) in &file.log_refs {
                *refs.entry(segment).or_default() += bytes;
            }
        }
        refs
    }

    /// Every file with its level, level 0 first.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> + '_ {
        self.levels.iter().enumerate().flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
    }

    /// Files of `level` whose user-key range overlaps `[begin, end]` (`None` is unbounded).
    ///
    /// For level 0 the range grows to the union of the files found, repeatedly, so the result is
    /// closed under overlap: compacting it never leaves behind an older L0 version of a key.
    pub fn overlapping_files(&self, level: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Arc<FileMetaData>> {
        let files = self.files(level);
        if level > 0 {
            // Largest user keys are non-decreasing in a sorted disjoint level.
            let first = begin.map_or(0, |b| files.partition_point(|f| f.largest.user_key() < b));
            return files[first..]
                .iter()
                .take_while(|f| end.is_none_or(|e| f.smallest.user_key() <= e))
                .cloned()
                .collect();
        }
        let mut begin = begin.map(Cow::Borrowed);
        let mut end = end.map(Cow::Borrowed);
        'restart: loop {
            let mut found = Vec::new();
            for file in files {
                if !file.overlaps_user_range(begin.as_deref(), end.as_deref()) {
                    continue;
                }
                found.push(Arc::clone(file));
                let (smallest, largest) = (file.smallest.user_key(), file.largest.user_key());
                let mut widened = false;
                if let Some(b) = &mut begin {
                    if smallest < b.as_ref() {
                        *b = Cow::Owned(smallest.to_vec());
                        widened = true;
                    }
                }
                if let Some(e) = &mut end {
                    if largest > e.as_ref() {
                        *e = Cow::Owned(largest.to_vec());
                        widened = true;
                    }
                }
                if widened {
                    continue 'restart;
                }
            }
            return found;
        }
    }

    /// Calls `visit(level, file)` for every file that may hold the newest entry of
    /// `lookup_key`'s user key at or below its sequence number, in search order: overlapping
    /// level-0 files newest first, then at most one file per deeper level. `lookup_key` is an
    /// internal seek key ([`crate::types::seek_key`]). Stops early when `visit` returns `false`.
    ///
    /// Allocation-free, for the point-read path.
    pub fn for_each_candidate(&self, lookup_key: &[u8], mut visit: impl FnMut(usize, &Arc<FileMetaData>) -> bool) {
        let target = user_key(lookup_key);
        for file in self.files(0).iter().rev() {
            if file.may_contain_user_key(target) && !visit(0, file) {
                return;
            }
        }
        for level in 1..self.levels.len() {
            let files = self.files(level);
            // The first file whose largest key is at or after the lookup key is the only one in
            // this level that can hold an entry at or after it.
            let index = files.partition_point(|f| compare_internal_keys(f.largest.as_bytes(), lookup_key).is_lt());
            if let Some(file) = files.get(index) {
                if file.smallest.user_key() <= target && !visit(level, file) {
                    return;
                }
            }
        }
    }

    /// [`Version::for_each_candidate`] for the newest version of `user_key`, collected.
    pub fn files_for_key(&self, user_key: &[u8]) -> Vec<Arc<FileMetaData>> {
        self.files_for_key_at(user_key, SequenceNumber(MAX_SEQUENCE))
    }

    /// [`Version::for_each_candidate`] for `user_key` as of `sequence`, collected.
    pub fn files_for_key_at(&self, user_key: &[u8], sequence: SequenceNumber) -> Vec<Arc<FileMetaData>> {
        let mut found = Vec::new();
        self.for_each_candidate(&seek_key(user_key, sequence), |_, file| {
            found.push(Arc::clone(file));
            true
        });
        found
    }

    /// The durable range deletes.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_tombstones
    }

    /// The durable range deletes, fragmented.
    pub fn range_fragments(&self) -> &Arc<Fragments> {
        &self.fragments
    }

    /// The partition split keys, ascending.
    pub fn partition_splits(&self) -> &[Vec<u8>] {
        &self.partitions
    }

    /// The bounds `[start, end)` of partition `i` (`None` is unbounded; `i` from 0 to the
    /// number of split keys).
    fn partition_bounds(&self, i: usize) -> (Option<&[u8]>, Option<&[u8]>) {
        let start = i.checked_sub(1).map(|j| self.partitions[j].as_slice());
        (start, self.partitions.get(i).map(Vec::as_slice))
    }

    /// Every partition, in key order: its bounds, and the tables (with their levels) whose
    /// first key lies in it.
    pub fn partitions(&self) -> Vec<Partition<'_>> {
        let mut out: Vec<Partition<'_>> = (0..=self.partitions.len())
            .map(|i| {
                let (start, end) = self.partition_bounds(i);
                Partition { start, end, files: Vec::new() }
            })
            .collect();
        for (level, f) in self.all_files() {
            let i = self.partitions.partition_point(|s| s.as_slice() <= f.smallest.user_key());
            out[i].files.push((level, f));
        }
        out
    }

    /// Most level-0 files of any one partition: the L0 file count that triggers and write
    /// stalls compare (the number of L0 files without partitions).
    pub fn l0_depth(&self) -> usize {
        self.l0_depth
    }

    /// Every file wholly inside `[start, end)` whose entries are all older than `seq`: what a
    /// range delete at `seq` lets the tree drop without reading them.
    pub fn files_covered_by(&self, start: &[u8], end: &[u8], seq: SequenceNumber) -> Vec<(usize, Arc<FileMetaData>)> {
        self.all_files()
            .filter(|(_, f)| {
                let (lo, hi) = f.user_range();
                start <= lo && hi < end && f.largest_seq < seq
            })
            .map(|(level, f)| (level, Arc::clone(f)))
            .collect()
    }

    /// Range deletes that no longer cover anything: every table over their range either holds
    /// only newer entries or was written by a compaction that applied them. (Memtables never
    /// hold covered entries: a delete reaches the version when its memtable is flushed, and
    /// every later memtable holds only newer writes.)
    pub fn retired_tombstones(&self) -> Vec<RangeTombstone> {
        self.range_tombstones
            .iter()
            .filter(|t| !self.all_files().any(|(_, f)| f.may_hold_covered_by(t)))
            .cloned()
            .collect()
    }

    /// True if `file` may hold an entry one of the durable range deletes covers.
    pub fn holds_range_deleted(&self, file: &FileMetaData) -> bool {
        self.range_tombstones.iter().any(|t| file.may_hold_covered_by(t))
    }

    /// The newest durable range delete's sequence number (0 if none).
    pub fn newest_range_delete(&self) -> SequenceNumber {
        self.range_tombstones.iter().map(|t| t.seq).max().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
