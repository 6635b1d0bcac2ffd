//! [`VersionBuilder`]: applies a run of edits to a base [`Version`] and produces the result once
//! (LevelDB's `VersionSet::Builder`).
//!
//! Recovery feeds it every edit of a MANIFEST and sorts each level once at the end, instead of
//! rebuilding levels after every record; `log_and_apply` feeds it one edit. Within an edit,
//! deletions apply before additions, so a file moved between levels is deleted from one and added
//! to the other in the same edit.
//!
//! Checks, each an `Err(reason)`: a level beyond the version's levels, deleting a file that is not
//! in that level, adding a file already in that level, a file whose smallest key sorts after its
//! largest, and overlapping files in a level >= 1. A file present in two different levels is not
//! detected (that would need a scan of every level per edit).
//!
//! Range deletes and partition split keys are sets: an edit adds or removes members, and
//! removing one that is absent is an error like deleting an absent file.
//!
//! Thread-safety: single-owner scratch state.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::range_del::{Fragments, RangeTombstone};
use crate::types::FileNumber;

use super::{FileMetaData, Version, VersionEdit};

/// Accumulates file changes over a base version.
pub struct VersionBuilder<'a> {
    base: &'a Version,
    levels: Vec<LevelChanges>,
    // Copied from the base the first time an edit changes them.
    tombstones: Option<BTreeSet<RangeTombstone>>,
    partitions: Option<BTreeSet<Vec<u8>>>,
}

#[derive(Default)]
struct LevelChanges {
    // Numbers of the base level's files, built the first time the level is touched.
    base_numbers: Option<HashSet<FileNumber>>,
    deleted: HashSet<FileNumber>,
    added: HashMap<FileNumber, Arc<FileMetaData>>,
}

impl LevelChanges {
    fn touched(&self) -> bool {
        self.base_numbers.is_some()
    }

    fn in_base(&mut self, base: &[Arc<FileMetaData>], number: FileNumber) -> bool {
        self.base_numbers.get_or_insert_with(|| base.iter().map(|f| f.number).collect()).contains(&number)
    }
}

impl<'a> VersionBuilder<'a> {
    /// A builder with no changes over `base`.
    pub fn new(base: &'a Version) -> Self {
        let levels = (0..base.num_levels()).map(|_| LevelChanges::default()).collect();
        VersionBuilder { base, levels, tombstones: None, partitions: None }
    }

    /// Records the file changes of `edit`.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        let num_levels = self.levels.len();
        for &(level, number) in &edit.deleted_files {
            let changes = self.levels.get_mut(level).ok_or_else(|| level_error(level, num_levels))?;
            let in_base = changes.in_base(self.base.files(level), number);
            if changes.added.remove(&number).is_none() && !(in_base && changes.deleted.insert(number)) {
                return Err(format!("deletes file {number} from level {level}, which does not hold it"));
            }
        }
        for (level, meta) in &edit.new_files {
            let level = *level;
            let changes = self.levels.get_mut(level).ok_or_else(|| level_error(level, num_levels))?;
            if meta.smallest > meta.largest {
                return Err(format!(
                    "file {} has smallest key {:?} after largest key {:?}",
                    meta.number, meta.smallest, meta.largest
                ));
            }
            let live_in_base =
                changes.in_base(self.base.files(level), meta.number) && !changes.deleted.contains(&meta.number);
            if live_in_base || changes.added.contains_key(&meta.number) {
                return Err(format!("adds file {} to level {level}, which already holds it", meta.number));
            }
            changes.added.insert(meta.number, Arc::new(meta.clone()));
        }
        if !edit.range_tombstones_added.is_empty() || !edit.range_tombstones_removed.is_empty() {
            let set = self.tombstones.get_or_insert_with(|| self.base.range_tombstones.iter().cloned().collect());
            for t in &edit.range_tombstones_removed {
                if !set.remove(t) {
                    return Err(format!("removes range delete {t:?}, which the version does not hold"));
                }
            }
            for t in &edit.range_tombstones_added {
                if t.start >= t.end {
                    return Err(format!("adds empty range delete {t:?}"));
                }
                set.insert(t.clone());
            }
        }
        if !edit.partition_splits_added.is_empty() || !edit.partition_splits_removed.is_empty() {
            let set = self.partitions.get_or_insert_with(|| self.base.partitions.iter().cloned().collect());
            for key in &edit.partition_splits_removed {
                if !set.remove(key) {
                    return Err(format!("removes partition split {key:?}, which the version does not hold"));
                }
            }
            set.extend(edit.partition_splits_added.iter().cloned());
        }
        Ok(())
    }

    /// The resulting version. Untouched levels are shared with the base.
    pub fn finish(self) -> Result<Version, String> {
        let mut levels = Vec::with_capacity(self.levels.len());
        for (level, changes) in self.levels.into_iter().enumerate() {
            if !changes.touched() {
                levels.push(Arc::clone(&self.base.levels[level]));
                continue;
            }
            let mut files: Vec<Arc<FileMetaData>> = self
                .base
                .files(level)
                .iter()
                .filter(|f| !changes.deleted.contains(&f.number))
                .cloned()
                .chain(changes.added.into_values())
                .collect();
            if level == 0 {
                files.sort_by_key(|f| f.number);
            } else {
                files.sort_by(|a, b| a.smallest.cmp(&b.smallest).then(a.number.cmp(&b.number)));
                check_disjoint(level, &files)?;
            }
            levels.push(Arc::from(files));
        }
        let (range_tombstones, fragments) = match self.tombstones {
            None => (Arc::clone(&self.base.range_tombstones), Arc::clone(&self.base.fragments)),
            Some(set) => {
                let list: Arc<[RangeTombstone]> = set.into_iter().collect();
                let fragments = Arc::new(Fragments::new(list.iter()));
                (list, fragments)
            }
        };
        let partitions = match self.partitions {
            None => Arc::clone(&self.base.partitions),
            Some(set) => set.into_iter().collect(),
        };
        let l0_depth = levels.first().map_or(0, |files| l0_depth(files, &partitions));
        Ok(Version { levels, range_tombstones, fragments, partitions, l0_depth })
    }
}

/// Most level-0 files of any one partition (by the partition of their first key): with one
/// partition, the number of level-0 files, as LevelDB counts them.
fn l0_depth(files: &[Arc<FileMetaData>], splits: &[Vec<u8>]) -> usize {
    let mut per_partition: HashMap<usize, usize> = HashMap::new();
    for f in files {
        let partition = splits.partition_point(|s| s.as_slice() <= f.smallest.user_key());
        *per_partition.entry(partition).or_default() += 1;
    }
    per_partition.into_values().max().unwrap_or(0)
}

fn level_error(level: usize, num_levels: usize) -> String {
    format!("level {level} is beyond the {num_levels} levels of this database")
}

fn check_disjoint(level: usize, files: &[Arc<FileMetaData>]) -> Result<(), String> {
    for pair in files.windows(2) {
        if pair[0].largest >= pair[1].smallest {
            return Err(format!(
                "level {level}: file {} (up to {:?}) overlaps file {} (from {:?})",
                pair[0].number, pair[0].largest, pair[1].number, pair[1].smallest
            ));
        }
    }
    Ok(())
}
