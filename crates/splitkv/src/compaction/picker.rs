//! Turns a picked level (or a manual key range) into concrete input files.
//!
//! Within a level, files are taken round-robin: the first file after the level's compact
//! pointer (the largest key of the previous compaction there), wrapping around, as in LevelDB.
//! L0 inputs are expanded to every overlapping L0 file, because L0 files overlap each other and
//! an older version must never be pushed below a newer one.

use std::sync::Arc;

use crate::types::{compare_internal_keys, InternalKey};
use crate::version::{FileMetaData, Version};

/// A compaction's inputs: files of `level` and the overlapping files of `level + 1`.
#[derive(Clone)]
pub struct Compaction {
    /// Input level; outputs go to `level + 1`.
    pub level: usize,
    /// `inputs[0]`: files of `level`; `inputs[1]`: overlapping files of `level + 1`.
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files of `level + 2` overlapping the inputs (bounds how much one output may overlap).
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// The version the inputs were picked from.
    pub version: Arc<Version>,
    /// Size at which outputs are cut.
    pub max_output_file_size: u64,
}

impl Compaction {
    /// Bytes read from `level` and from `level + 1`.
    pub fn input_bytes(&self) -> (u64, u64) {
        let sum = |files: &[Arc<FileMetaData>]| files.iter().map(|f| f.file_size).sum();
        (sum(&self.inputs[0]), sum(&self.inputs[1]))
    }

    /// True when the single input file can move down a level without rewriting: nothing in
    /// `level + 1` overlaps it and it overlaps little of `level + 2`.
    pub fn is_trivial_move(&self) -> bool {
        let grandparent_bytes: u64 = self.grandparents.iter().map(|f| f.file_size).sum();
        self.inputs[0].len() == 1 && self.inputs[1].is_empty() && grandparent_bytes <= 10 * self.max_output_file_size
    }

    /// True if no level below the output level can hold `user_key`, so a tombstone for it
    /// that no snapshot needs can be dropped.
    pub fn is_base_level_for_key(&self, user_key: &[u8]) -> bool {
        (self.level + 2..self.version.num_levels()).all(|lvl| {
            let files = self.version.files(lvl);
            let idx = files.partition_point(|f| f.largest.user_key() < user_key);
            files.get(idx).is_none_or(|f| f.smallest.user_key() > user_key)
        })
    }

    /// Largest internal key among the level's inputs (the next compact pointer).
    pub fn largest_input_key(&self) -> Option<InternalKey> {
        self.inputs[0].iter().map(|f| &f.largest).max_by(|a, b| compare_internal_keys(&a.0, &b.0)).cloned()
    }
}

/// Smallest and largest user key covered by `files`.
pub fn user_key_range(files: &[Arc<FileMetaData>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let smallest = files.iter().map(|f| f.smallest.user_key()).min()?;
    let largest = files.iter().map(|f| f.largest.user_key()).max()?;
    Some((smallest.to_vec(), largest.to_vec()))
}

/// Picks the inputs for compacting `level`, starting after `compact_pointer`.
pub fn pick_inputs(
    version: &Arc<Version>,
    level: usize,
    compact_pointer: Option<&InternalKey>,
    max_output_file_size: u64,
) -> Option<Compaction> {
    let files = version.files(level);
    let first = match compact_pointer {
        Some(ptr) if level > 0 => files.iter().find(|f| compare_internal_keys(&f.largest.0, &ptr.0).is_gt()),
        _ => None,
    };
    let seed = first.or_else(|| files.first())?.clone();
    let mut inputs = vec![seed];
    if level == 0 {
        let (lo, hi) = user_key_range(&inputs)?;
        inputs = version.overlapping_files(0, Some(&lo), Some(&hi));
    }
    Some(with_parents(version, level, inputs, max_output_file_size))
}

/// Inputs for a manual compaction of `level` restricted to `[begin, end]` (user keys).
pub fn range_inputs(
    version: &Arc<Version>,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    max_output_file_size: u64,
) -> Option<Compaction> {
    let inputs = version.overlapping_files(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    Some(with_parents(version, level, inputs, max_output_file_size))
}

fn with_parents(
    version: &Arc<Version>,
    level: usize,
    inputs: Vec<Arc<FileMetaData>>,
    max_output_file_size: u64,
) -> Compaction {
    let (lo, hi) = user_key_range(&inputs).unwrap_or_default();
    let parents = if level + 1 < version.num_levels() {
        version.overlapping_files(level + 1, Some(&lo), Some(&hi))
    } else {
        Vec::new()
    };
    let mut all = inputs.clone();
    all.extend(parents.iter().cloned());
    let (lo, hi) = user_key_range(&all).unwrap_or_default();
    let grandparents = if level + 2 < version.num_levels() {
        version.overlapping_files(level + 2, Some(&lo), Some(&hi))
    } else {
        Vec::new()
    };
    Compaction { level, inputs: [inputs, parents], grandparents, version: Arc::clone(version), max_output_file_size }
}
