//! Shared helpers for scenario tests: the option matrix (index kind x value threshold), small
//! sizes that make flushes, compactions and segment rotations happen with little data, and a
//! crashable environment.
#![allow(dead_code)]

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use splitkv::fs::{Fault, FaultInjectingFileSystem, FaultKind, FileSystem, MemFileSystem};
use splitkv::{Db, IndexBlockKind, IndexKind, Options};

/// Index kinds every scenario runs against: the LSM-tree, and the persistent hash index with a
/// table small enough to collide and grow under test, through group commit and through two
/// request shards. Scenarios that only make sense for the LSM-tree (compaction policies, level
/// shapes, SSTable and MANIFEST damage) use `IndexKind::Lsm` or [`lsm_matrix`] instead, with a
/// comment saying why.
pub fn index_kinds() -> Vec<IndexKind> {
    vec![IndexKind::Lsm, HASH, HASH_SHARDED]
}

/// The hash index as the scenarios use it: 16 buckets, so chains form and the table grows.
pub const HASH: IndexKind = IndexKind::Hash { capacity: 16, shards: 1 };

/// [`HASH`] behind two request shards (half-sync/half-async): point reads and single-shard
/// batches go through the shards' queues and workers, other batches through group commit.
pub const HASH_SHARDED: IndexKind = IndexKind::Hash { capacity: 16, shards: 2 };

/// Value thresholds every core scenario runs under: separate everything, separate values of
/// 1 KiB and more, separate nothing.
pub const THRESHOLDS: [usize; 3] = [0, 1024, usize::MAX];

/// One cell of the core scenario matrix. Its `Display` form (`Lsm index, threshold 1024`)
/// names the cell in assertion messages.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub kind: IndexKind,
    pub threshold: usize,
    /// SSTables' index blocks (LSM only).
    pub index_block: IndexBlockKind,
}

impl Case {
    /// [`small_options`] for this cell.
    pub fn options(self) -> Options {
        Options { index_block_kind: self.index_block, ..small_options(self.kind, self.threshold) }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} index, {:?} index blocks, threshold ", self.kind, self.index_block)?;
        match self.threshold {
            usize::MAX => write!(f, "max"),
            t => write!(f, "{t}"),
        }
    }
}

/// Every index kind under every value threshold, and every index-block kind.
pub fn matrix() -> Vec<Case> {
    let mut cases = lsm_matrix();
    // The hash index keeps every value in the log whatever the threshold: one cell is enough.
    cases.push(Case { kind: HASH, threshold: 1024, index_block: IndexBlockKind::Binary });
    cases.push(Case { kind: HASH_SHARDED, threshold: 1024, index_block: IndexBlockKind::Binary });
    cases
}

/// Every value threshold under the LSM index alone, for scenarios that only make sense for it:
/// binary index blocks under every threshold, learned ones with inline values and adaptive ones
/// with separated values (index blocks do not care what the values are, so two cells suffice).
pub fn lsm_matrix() -> Vec<Case> {
    let mut cases: Vec<Case> = THRESHOLDS
        .map(|threshold| Case { kind: IndexKind::Lsm, threshold, index_block: IndexBlockKind::Binary })
        .to_vec();
    cases.push(Case { kind: IndexKind::Lsm, threshold: usize::MAX, index_block: IndexBlockKind::Learned });
    cases.push(Case { kind: IndexKind::Lsm, threshold: 0, index_block: IndexBlockKind::Adaptive });
    cases
}

/// Options for index `kind` with tiny memtables, segments, files and levels.
pub fn small_options(kind: IndexKind, value_threshold: usize) -> Options {
    Options {
        index: kind,
        value_threshold,
        write_buffer_size: 32 << 10,
        segment_size: 128 << 10,
        vlog_buffer_size: 4 << 10,
        block_size: 1024,
        target_file_size: 32 << 10,
        max_bytes_for_level_base: 128 << 10,
        block_cache_capacity: 1 << 20,
        ..Options::default()
    }
}

/// An in-memory file system wrapped in a fault injector, so a test can "pull the plug":
/// stop every further operation, drop what was not synced, and reopen.
pub struct CrashEnv {
    pub mem: MemFileSystem,
    pub fault: FaultInjectingFileSystem,
}

impl CrashEnv {
    pub fn new() -> Self {
        let mem = MemFileSystem::new();
        let fault = FaultInjectingFileSystem::new(Arc::new(mem.clone()));
        CrashEnv { mem, fault }
    }

    /// `base` with this environment's file system.
    pub fn options(&self, base: Options) -> Options {
        Options { fs: Arc::new(self.fault.clone()), ..base }
    }

    /// Simulates power loss while `db` is open: nothing the old handle does afterwards reaches
    /// the medium, unsynced data is lost (or, with a seed, survives as a random prefix).
    pub fn crash(&self, db: Db, torn_tail_seed: Option<u64>) {
        self.fault.inject(Fault::new(FaultKind::Any).persistent());
        match torn_tail_seed {
            Some(seed) => self.mem.crash_with_torn_tails(seed),
            None => self.mem.crash(),
        }
        drop(db);
        self.fault.clear();
    }
}

/// A value of `len` bytes derived from `seed`, so tests can recompute expected values.
pub fn value_for(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `key000123`-style keys.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every `(key, value)` of the database, in order, via the owning range iterator.
pub fn dump(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range::<&[u8], _>(..)
        .expect("range")
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("range item"))
        .collect()
}

/// Fails with the first entry that differs, without printing whole databases.
pub fn assert_same(got: &[(Vec<u8>, Vec<u8>)], expected: &[(Vec<u8>, Vec<u8>)], what: &str) {
    let first_difference = got.iter().zip(expected).position(|(g, e)| g != e);
    if let Some(i) = first_difference {
        panic!("{what}: entry {i} differs: key {:?}", String::from_utf8_lossy(&got[i].0));
    }
    assert_eq!(got.len(), expected.len(), "{what}: entry count");
}

/// Every file directly in `dir` of `mem`, with its bytes: compare before and after to show an
/// operation changed nothing.
pub fn file_contents(mem: &MemFileSystem, dir: &Path) -> splitkv::Result<Vec<(String, Vec<u8>)>> {
    mem.file_names(dir).into_iter().map(|n| Ok((n.clone(), mem.read_all(&dir.join(&n))?))).collect()
}
