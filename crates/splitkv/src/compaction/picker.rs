//! Turns a picked level (or a manual key range) into concrete input files.
//!
//! Within a level, files are taken round-robin: the first file after the level's compact
//! pointer (the largest key of the previous compaction there), wrapping around, as in LevelDB.
//! L0 inputs are expanded to every overlapping L0 file, because L0 files overlap each other and
//! an older version must never be pushed below a newer one.
//!
//! With several compaction workers, [`InFlight`] records what running compactions hold: their
//! input files (busy) and the user-key range each writes into its output level. A new compaction
//! is only started if it touches no busy file and its range overlaps no running compaction with
//! the same output level (two such compactions would write overlapping files into one level).
//! At most one L0 compaction runs at a time: L0 files overlap and must go down oldest first.
//! `InFlight` is plain data guarded by the scheduler's state lock.
//!
//! Tested from text in `testdata/picker` (and through the policies in `testdata/score`).

use std::collections::HashSet;
use std::sync::Arc;

use super::policy::LevelsSnapshot;
use crate::types::{compare_internal_keys, FileNumber, InternalKey};
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
    pick_free_inputs(version, level, compact_pointer, max_output_file_size, &InFlight::default())
}

/// The numbers picking depends on besides the tree (taken from the database's options).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PickSettings {
    /// L0 file count that makes L0 due for compaction.
    pub l0_trigger: usize,
    /// L0 file count at which writes are slowed.
    pub l0_slowdown: usize,
    /// L0 file count at which writes stop.
    pub l0_stop: usize,
    /// Target size of level 1.
    pub level_base: u64,
    /// Growth of the target from one level to the next.
    pub level_multiplier: f64,
    /// Size at which compaction outputs are cut.
    pub target_file_size: u64,
}

/// Point reads that may consult an L0 file in vain before L0 is due for compaction: LevelDB's
/// allowance of one wasted seek per 16 KiB of file, at least 100 per file (a seek costs about
/// what compacting 16 KiB does), summed over the L0 files.
pub fn l0_read_allowance(version: &Version) -> u64 {
    version.files(0).iter().map(|f| (f.file_size / (16 << 10)).max(100)).sum()
}

/// What the scheduler shows a policy: the levels of `version` as a [`LevelsSnapshot`], and the
/// free inputs the picker finds at every compactable level (`None`, reported to the policy as
/// blocked, where every candidate conflicts with a running compaction). `pointers` holds each
/// level's round-robin compact pointer; `l0_read_misses` counts the L0 files point reads
/// consulted in vain since L0 was last compacted.
pub fn candidates(
    version: &Arc<Version>,
    pointers: &[Option<InternalKey>],
    in_flight: &InFlight,
    settings: &PickSettings,
    l0_read_misses: u64,
) -> (LevelsSnapshot, Vec<Option<Compaction>>) {
    let levels = 0..version.num_levels();
    let candidates: Vec<Option<Compaction>> = (0..version.num_levels().saturating_sub(1))
        .map(|level| {
            let pointer = pointers.get(level).and_then(Option::as_ref);
            pick_free_inputs(version, level, pointer, settings.target_file_size, in_flight)
        })
        .collect();
    let mut blocked: Vec<bool> = candidates.iter().map(Option::is_none).collect();
    // The last level has nowhere to go.
    blocked.push(true);
    let snapshot = LevelsSnapshot {
        // L0 counts the files of its fullest partition: a flush writes one level-0 table per
        // partition it touches, and those do not add up.
        files: levels.clone().map(|l| if l == 0 { version.l0_depth() } else { version.files(l).len() }).collect(),
        bytes: levels.clone().map(|l| version.level_bytes(l)).collect(),
        l0_trigger: settings.l0_trigger,
        l0_slowdown: settings.l0_slowdown,
        l0_stop: settings.l0_stop,
        max_bytes: LevelsSnapshot::level_targets(version.num_levels(), settings.level_base, settings.level_multiplier),
        compacting_bytes: levels.map(|l| in_flight.busy_bytes(version, l)).collect(),
        blocked,
        l0_read_due: l0_read_misses >= l0_read_allowance(version),
    };
    (snapshot, candidates)
}

/// Like [`pick_inputs`], but skips seeds whose compaction would conflict with `in_flight`: the
/// first conflict-free file at or after the compact pointer, wrapping around.
pub fn pick_free_inputs(
    version: &Arc<Version>,
    level: usize,
    compact_pointer: Option<&InternalKey>,
    max_output_file_size: u64,
    in_flight: &InFlight,
) -> Option<Compaction> {
    if level == 0 && in_flight.level0_running() {
        return None;
    }
    let files = version.files(level);
    let start = match compact_pointer {
        Some(ptr) if level > 0 => {
            files.iter().position(|f| compare_internal_keys(&f.largest.0, &ptr.0).is_gt()).unwrap_or(0)
        }
        _ => 0,
    };
    // L0 always starts from its first file: any seed pulls in every file overlapping it.
    let seeds = if level == 0 { files.len().min(1) } else { files.len() };
    (0..seeds).map(|i| &files[(start + i) % files.len()]).find_map(|seed| {
        let mut inputs = vec![Arc::clone(seed)];
        if level == 0 {
            let (lo, hi) = user_key_range(&inputs)?;
            inputs = version.overlapping_files(0, Some(&lo), Some(&hi));
        }
        let c = with_parents(version, level, inputs, max_output_file_size);
        (!in_flight.conflicts(&c)).then_some(c)
    })
}

/// What running compactions hold (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    busy: HashSet<FileNumber>,
    running: Vec<Running>,
    next_id: u64,
}

#[derive(Clone, Debug)]
struct Running {
    id: u64,
    level: usize,
    /// User-key range written into `level + 1`.
    smallest: Vec<u8>,
    largest: Vec<u8>,
    files: Vec<FileNumber>,
}

impl InFlight {
    /// True if `c` touches a busy file or writes into a range a running compaction writes.
    pub fn conflicts(&self, c: &Compaction) -> bool {
        if c.level == 0 && self.level0_running() {
            return true;
        }
        if c.inputs.iter().flatten().any(|f| self.busy.contains(&f.number)) {
            return true;
        }
        let all: Vec<_> = c.inputs.iter().flatten().cloned().collect();
        let Some((lo, hi)) = user_key_range(&all) else { return false };
        self.running.iter().any(|r| r.level == c.level && lo <= r.largest && r.smallest <= hi)
    }

    /// Marks `c`'s inputs busy; returns the id to pass to [`InFlight::release`].
    pub fn register(&mut self, c: &Compaction) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let files: Vec<FileNumber> = c.inputs.iter().flatten().map(|f| f.number).collect();
        self.busy.extend(files.iter().copied());
        let all: Vec<_> = c.inputs.iter().flatten().cloned().collect();
        let (smallest, largest) = user_key_range(&all).unwrap_or_default();
        self.running.push(Running { id, level: c.level, smallest, largest, files });
        id
    }

    /// Frees what compaction `id` held.
    pub fn release(&mut self, id: u64) {
        if let Some(pos) = self.running.iter().position(|r| r.id == id) {
            let r = self.running.swap_remove(pos);
            for f in r.files {
                self.busy.remove(&f);
            }
        }
    }

    /// True if an L0 compaction is running.
    pub fn level0_running(&self) -> bool {
        self.running.iter().any(|r| r.level == 0)
    }

    /// Bytes of `level`'s files that running compactions consume.
    pub fn busy_bytes(&self, version: &Version, level: usize) -> u64 {
        version.files(level).iter().filter(|f| self.busy.contains(&f.number)).map(|f| f.file_size).sum()
    }

    /// Number of running compactions.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// True if nothing runs.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }
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
