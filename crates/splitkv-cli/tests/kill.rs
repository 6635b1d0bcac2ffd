//! Real-process crash test: a child process writes synced batches while value-log GC runs in a
//! loop, and is killed with SIGKILL at a random moment. The parent then reopens the database and
//! requires exactly the acknowledged state.
//!
//! After every kill the parent checks:
//! - every one of the [`KEYS`] keys (with `get`) and one full scan equal the model after the last
//!   batch the child acknowledged (`ACK n` on stdout, printed only once `write` with
//!   `sync: true` returned `Ok`), or after the one batch that was in flight (`n + 1`), and
//!   nothing else. The last quarter of the keys lives in a keyspace that batches span and that
//!   is dropped now and then (and created again by the next write to it). A lost acknowledged
//!   write, half a batch, a resurrected delete (point or range, the latter also dropping whole
//!   partitions' tables in the LSM cases, or a keyspace drop) or a value that GC moved to the
//!   wrong key all fail here;
//! - every one of the [`SIDE_KEYS`] keys of a second writer equals its last acknowledged write
//!   (`SIDE n`) or the one in flight. That writer runs beside the batches, on a keyspace of its
//!   own, so write groups commit concurrently: in the LSM cases one group applies to the memtable
//!   while the next appends, and they publish in sequence order;
//! - `splitkv verify` accepts the directory, so no record, table or pointer is damaged, even in
//!   parts the model does not read (garbage that GC copied or punched).
//!
//! The next generation runs on the same directory and the model carries over, so damage that
//! only shows in a later recovery (a second replay, GC of a segment relocated before the kill)
//! is caught as well.
//!
//! Unlike `splitkv/tests/crash.rs`, which simulates power loss on an in-memory file system, this
//! kills real processes on the OS file system: the page cache survives, but every thread stops
//! between any two instructions, which is where races between GC, flushes and the write path
//! show. Each value encodes the generation, batch and key that wrote it, so a failure says which
//! write a wrong value came from.
//!
//! Each test runs one case: a GC mode over an index. Every mode runs over the LSM index; the
//! hash index (SSHKV mode) runs the same modes except `copy-all-separated` and
//! `copy-all-inline`, which differ from `copy` only in what the LSM index keeps inline (the hash
//! index keeps every value in the log), `key-order-rewrite`, which the hash index refuses (it
//! keeps no key order), and `compaction-moves` and `compact-in-place`, which it ignores (it has no
//! compactions, and its version chains would lose the records a compaction in place drops). Its
//! table starts at 64 buckets, so chains form and the table grows (rehash and rename)
//! while children are being killed. The hash index behind two request shards (`hash-sharded-`)
//! runs `no-gc` and `copy`: its single-key batches commit on a shard's worker and the rest
//! through group commit, so kills land in both paths and in the hand-over between them.
//!
//! The test binary is its own child: with `SPLITKV_KILL_CHILD` set, the `child_entry` test runs
//! the workload instead of returning (under `cargo test` and `cargo nextest` alike, since both
//! run one test with `<binary> --exact <name> --nocapture`).
//!
//! Environment:
//! - `SPLITKV_KILL_SEED=<u64>` reproduces a run; the seed is printed at the start and in every
//!   failure message.
//! - `SPLITKV_KILL_ROUNDS=<n>` sets the kills per case (default [`DEFAULT_ROUNDS`] for the LSM
//!   index, [`HASH_ROUNDS`] for the hash index) for a soak. The `no-gc` mode never collects its
//!   log, so its directory grows by a few MiB per kill.
//!
//! A failing case keeps its directory (the path is in the message) for a post-mortem with
//! `splitkv verify`, `info` and `dump`; passing cases remove theirs.
#![cfg(unix)]

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use splitkv::{Db, GcRewriteOrder, IndexKind, Keyspace, Options, ReadOptions, WriteBatch, WriteOptions};

/// Kills per LSM case in a normal run; seven modes make 140 kills.
const DEFAULT_ROUNDS: u32 = 20;
/// Kills per hash-index case in a normal run: four modes make 48 more, which keeps the whole
/// test within about one and a half times the LSM cases' run time. Soaks raise both with
/// `SPLITKV_KILL_ROUNDS`.
const HASH_ROUNDS: u32 = 12;
/// Keys the workload draws from: few enough that values are overwritten often (so GC always has
/// garbage to collect), enough to spread over several segments and tables.
const KEYS: u16 = 1200;
/// Value lengths: from just the identifying header up to past the default separation threshold
/// (512), so values are stored both inline and in the value log.
const VALUE_LEN: std::ops::RangeInclusive<usize> = HEADER_LEN..=1536;
/// Keys from this one on live in keyspace [`KEYSPACE`] (the last quarter: a whole partition of
/// the LSM cases), which one lone batch in 64 drops.
const FIRST_KEYSPACE_KEY: u16 = KEYS / 4 * 3;
const KEYSPACE: &str = "upper";
/// The second writer's keys, in a keyspace of their own: it overwrites them in turn.
const SIDE_KEYS: u32 = 64;
const SIDE_KEYSPACE: &str = "side";
/// Generation (u32), batch (u32) and key (u16) at the start of every value.
const HEADER_LEN: usize = 10;

/// Mixed into the seed for the child's readers and the parent's kill delays, so that their
/// random choices are independent of the workload's.
const READER_STREAM: u64 = 0x7265_6164_6572;
const PARENT_STREAM: u64 = 0x7061_7265_6e74;
/// And for the GC thread's choice of call in the key-order mode.
const GC_STREAM: u64 = 0x6763;

/// Environment of the child: its case (the variable that makes `child_entry` run), directory,
/// seed and generation.
const CHILD_ENV: &str = "SPLITKV_KILL_CHILD";
const CHILD_DIR_ENV: &str = "SPLITKV_KILL_CHILD_DIR";
const CHILD_SEED_ENV: &str = "SPLITKV_KILL_CHILD_SEED";
const CHILD_GENERATION_ENV: &str = "SPLITKV_KILL_CHILD_GENERATION";

/// Exit codes of a child that stopped on its own; any of them fails the test.
const EXIT_BAD_ARGS: i32 = 40;
const EXIT_OPEN_FAILED: i32 = 41;
const EXIT_WRITE_FAILED: i32 = 42;
const EXIT_GC_FAILED: i32 = 43;
const EXIT_READ_FAILED: i32 = 44;
const EXIT_TIMED_OUT: i32 = 45;
/// A child outlives its parent only if the parent died without killing it: stop writing then.
const EXIT_PARENT_GONE: i32 = 46;

/// The signal `Child::kill` sends on Unix (its number is fixed by POSIX).
const SIGKILL: i32 = 9;

/// A child that is never killed stops by itself after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(120);
/// How long the parent waits for the first acknowledgement (opening includes log replay).
const FIRST_ACK_TIMEOUT: Duration = Duration::from_secs(60);

/// Held while this process spawns a child or has a database open. A spawned child holds a copy
/// of every descriptor of this process until it execs, including the `LOCK` file of a database
/// that another case's thread has open; the engine locks with `flock`, whose lock lives as long
/// as any copy. Without this, `splitkv verify` (or a child) of one case could find its database
/// still locked just after its own thread closed it, because another thread was mid-spawn.
static SPAWN_OR_OPEN_DB: Mutex<()> = Mutex::new(());

fn spawn_or_open_db() -> MutexGuard<'static, ()> {
    // A failed check panics while holding it; the guarded state is the descriptor table, which
    // a panic does not leave half-changed.
    SPAWN_OR_OPEN_DB.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Cases: modes over indexes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// No value-log GC at all (flushes and compactions still run): the baseline, so that a
    /// failure here points at the write path or recovery rather than at GC.
    NoGc,
    /// GC copies live values to the head; values under 512 bytes stay inline.
    Copy,
    /// As `Copy`, but every value goes to the value log (pure WiscKey).
    CopyAllSeparated,
    /// As `Copy`, but every value stays inline: the log is only the index's write-ahead log,
    /// and GC releases its flushed segments without reading them.
    CopyAllInline,
    /// GC punches holes for dead ranges instead of copying.
    PunchHoles,
    /// A physical space budget drives GC, punching holes while logical space allows.
    SpaceBudget,
    /// The GC thread mostly rewrites the value log in key order (`rewrite_value_log`, over
    /// every key or over a random range), with `run_gc` now and then; GC sorts each victim's
    /// survivors by key (`gc_rewrite_order`). LSM only: the hash index keeps no key order.
    KeyOrderRewrite,
    /// Compactions move values out of the segments GC plans to clean (`gc_in_compaction`);
    /// the GC thread alternates full compactions, which move values, with `run_gc`, which
    /// releases the segments they emptied. LSM only: the hash index has no compactions.
    CompactionMoves,
    /// GC compacts each victim in place, its live records packed behind an offset map in a
    /// file that replaces the old one (`gc_compact_in_place`); the GC thread alternates full
    /// compactions, which also move values, with `run_gc`. LSM only.
    CompactInPlace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::NoGc => "no-gc",
            Mode::Copy => "copy",
            Mode::CopyAllSeparated => "copy-all-separated",
            Mode::CopyAllInline => "copy-all-inline",
            Mode::PunchHoles => "punch-holes",
            Mode::SpaceBudget => "space-budget",
            Mode::KeyOrderRewrite => "key-order-rewrite",
            Mode::CompactionMoves => "compaction-moves",
            Mode::CompactInPlace => "compact-in-place",
        }
    }

    /// Default options with sizes small enough that flushes, compactions, segment rotations and
    /// GC happen many times within the few hundred milliseconds a child lives.
    fn options(self) -> Options {
        let small = Options {
            write_buffer_size: 256 << 10,
            segment_size: 256 << 10,
            vlog_buffer_size: 64 << 10,
            target_file_size: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            // Partitions, so that range deletes over whole quarters drop tables (LSM only; the
            // hash index ignores them).
            partition_split_points: (1..4).map(|q| key(KEYS / 4 * q)).collect(),
            ..Options::default()
        };
        match self {
            Mode::NoGc => Options { background_gc: false, ..small },
            Mode::Copy => Options { gc_compact_in_place: false, ..small },
            Mode::CopyAllSeparated => Options { value_threshold: 0, ..small },
            Mode::CopyAllInline => Options { value_threshold: *VALUE_LEN.end() + 1, ..small },
            Mode::PunchHoles => Options { gc_punch_holes: true, ..small },
            Mode::SpaceBudget => Options { gc_space_budget: Some(4 << 20), gc_punch_holes: true, ..small },
            Mode::KeyOrderRewrite => Options { gc_rewrite_order: GcRewriteOrder::Key, ..small },
            Mode::CompactionMoves => Options { gc_in_compaction: true, gc_compact_in_place: false, ..small },
            Mode::CompactInPlace => Options { gc_in_compaction: true, gc_compact_in_place: true, ..small },
        }
    }
}

/// Which index maps keys to values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Index {
    Lsm,
    Hash,
    /// The hash index behind two request shards: single-key batches commit on a shard's
    /// worker, larger ones (which mostly span both shards) through group commit.
    HashSharded,
}

/// One configuration the test kills: a mode over an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Case {
    mode: Mode,
    index: Index,
}

impl Case {
    const ALL: [Case; 15] = [
        Case::lsm(Mode::NoGc),
        Case::lsm(Mode::Copy),
        Case::lsm(Mode::CopyAllSeparated),
        Case::lsm(Mode::CopyAllInline),
        Case::lsm(Mode::PunchHoles),
        Case::lsm(Mode::SpaceBudget),
        Case::lsm(Mode::KeyOrderRewrite),
        Case::lsm(Mode::CompactionMoves),
        Case::lsm(Mode::CompactInPlace),
        Case::hash(Mode::NoGc),
        Case::hash(Mode::Copy),
        Case::hash(Mode::PunchHoles),
        Case::hash(Mode::SpaceBudget),
        Case { mode: Mode::NoGc, index: Index::HashSharded },
        Case { mode: Mode::Copy, index: Index::HashSharded },
    ];

    const fn lsm(mode: Mode) -> Case {
        Case { mode, index: Index::Lsm }
    }

    const fn hash(mode: Mode) -> Case {
        Case { mode, index: Index::Hash }
    }

    /// The mode's name, prefixed with `hash-` for the hash index (LSM names are unchanged, so
    /// seeds reported before the hash index joined still name their case).
    fn name(self) -> String {
        match self.index {
            Index::Lsm => self.mode.name().to_string(),
            Index::Hash => format!("hash-{}", self.mode.name()),
            Index::HashSharded => format!("hash-sharded-{}", self.mode.name()),
        }
    }

    fn parse(s: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The mode's options over the case's index; the child, the parent's reopen and the space
    /// figure all open with these.
    fn options(self) -> Options {
        let options = self.mode.options();
        match self.index {
            Index::Lsm => options,
            // In the hash index `write_buffer_size` bounds the keys written since the last
            // checkpoint (their bytes plus a fixed overhead each), not value bytes. At the
            // modes' 256 KiB that exceeds the whole 1200-key working set, so only GC's forced
            // checkpoints (and none at all in `no-gc`) would ever write the table; 32 KiB lets
            // the write path checkpoint every few hundred keys, in every mode.
            Index::Hash | Index::HashSharded => {
                let shards = if self.index == Index::HashSharded { 2 } else { 1 };
                Options { index: IndexKind::Hash { capacity: 64, shards }, write_buffer_size: 32 << 10, ..options }
            }
        }
    }

    fn default_rounds(self) -> u32 {
        match self.index {
            Index::Lsm => DEFAULT_ROUNDS,
            Index::Hash | Index::HashSharded => HASH_ROUNDS,
        }
    }
}

#[test]
fn kill_without_gc() {
    run_case(Case::lsm(Mode::NoGc));
}

#[test]
fn kill_during_copy_gc() {
    run_case(Case::lsm(Mode::Copy));
}

#[test]
fn kill_during_copy_gc_all_values_separated() {
    run_case(Case::lsm(Mode::CopyAllSeparated));
}

#[test]
fn kill_during_copy_gc_all_values_inline() {
    run_case(Case::lsm(Mode::CopyAllInline));
}

#[test]
fn kill_during_hole_punching_gc() {
    run_case(Case::lsm(Mode::PunchHoles));
}

#[test]
fn kill_during_space_budget_gc() {
    run_case(Case::lsm(Mode::SpaceBudget));
}

#[test]
fn kill_during_key_order_rewrite() {
    run_case(Case::lsm(Mode::KeyOrderRewrite));
}

#[test]
fn kill_during_compaction_moves() {
    run_case(Case::lsm(Mode::CompactionMoves));
}

#[test]
fn kill_during_compaction_in_place() {
    run_case(Case::lsm(Mode::CompactInPlace));
}

#[test]
fn kill_hash_index_without_gc() {
    run_case(Case::hash(Mode::NoGc));
}

#[test]
fn kill_hash_index_during_copy_gc() {
    run_case(Case::hash(Mode::Copy));
}

#[test]
fn kill_hash_index_during_hole_punching_gc() {
    run_case(Case::hash(Mode::PunchHoles));
}

#[test]
fn kill_hash_index_during_space_budget_gc() {
    run_case(Case::hash(Mode::SpaceBudget));
}

#[test]
fn kill_sharded_hash_index_without_gc() {
    run_case(Case { mode: Mode::NoGc, index: Index::HashSharded });
}

#[test]
fn kill_sharded_hash_index_during_copy_gc() {
    run_case(Case { mode: Mode::Copy, index: Index::HashSharded });
}

// ---------------------------------------------------------------------------------------------
// The workload: batches and values both processes derive from (seed, generation, batch)

/// One operation of a workload batch; the value of a put is [`value`] of its write.
#[derive(Clone, Copy, Debug)]
enum Op {
    Put {
        key: u16,
        len: usize,
    },
    Delete {
        key: u16,
    },
    /// Deletes the keys in `[start, end)`.
    DeleteRange {
        start: u16,
        end: u16,
    },
    /// Drops [`KEYSPACE`]; always alone in its batch.
    DropKeyspace,
}

/// The write that produced a key's current value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    generation: u32,
    batch: u32,
    len: usize,
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:04}").into_bytes()
}

fn side_key(j: u32) -> Vec<u8> {
    format!("side{j:02}").into_bytes()
}

/// The value of the second writer's write `n` of `generation` (to key `n % SIDE_KEYS`), inline
/// or separated by its length.
fn side_value(generation: u32, n: u32) -> Vec<u8> {
    let len = HEADER_LEN + (mix(u64::from(n)) % 1200) as usize;
    value(generation, n, (n % SIDE_KEYS) as u16, len)
}

/// The second writer's keys: the write (generation, n) each holds, carried across generations.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SideModel(Vec<Option<(u32, u32)>>);

impl SideModel {
    fn empty() -> SideModel {
        SideModel(vec![None; SIDE_KEYS as usize])
    }

    /// The model once `generation`'s writes `0..=last` are applied.
    fn after(&self, generation: u32, last: Option<u32>) -> SideModel {
        let mut next = self.clone();
        if let Some(last) = last {
            // Only the last write to each key counts.
            for n in last.saturating_sub(SIDE_KEYS - 1)..=last {
                next.0[(n % SIDE_KEYS) as usize] = Some((generation, n));
            }
        }
        next
    }

    /// Requires the side keys to hold the writes after `last` acknowledged or after the one in
    /// flight, and returns that state.
    fn check(&self, db: &Db, generation: u32, last: Option<u32>) -> Result<SideModel, String> {
        let ks = db.existing_keyspace(SIDE_KEYSPACE);
        let mut actual = Vec::with_capacity(SIDE_KEYS as usize);
        for j in 0..SIDE_KEYS {
            let v = match &ks {
                Some(ks) => ks.get(side_key(j)).map_err(|e| format!("get side key {j}: {e}"))?.map(|v| v.to_vec()),
                None => None,
            };
            actual.push(v);
        }
        let matches = |model: &SideModel| {
            model.0.iter().zip(&actual).all(|(m, a)| m.map(|(g, n)| side_value(g, n)).as_ref() == a.as_ref())
        };
        let after_ack = self.after(generation, last);
        let after_in_flight = self.after(generation, Some(last.map_or(0, |l| l + 1)));
        match (matches(&after_ack), matches(&after_in_flight)) {
            (true, _) => Ok(after_ack),
            (false, true) => Ok(after_in_flight),
            (false, false) => {
                let j = (0..SIDE_KEYS as usize).find(|&j| {
                    let ack = after_ack.0[j].map(|(g, n)| side_value(g, n));
                    ack.as_ref() != actual[j].as_ref()
                });
                Err(format!(
                    "second writer (last SIDE {last:?}): side key {j:?} holds {}, expected the write {:?}",
                    describe_actual(j.and_then(|j| actual[j].as_deref())),
                    j.and_then(|j| after_ack.0[j])
                ))
            }
        }
    }
}

/// SplitMix64 finaliser: decorrelates the seeds of neighbouring batches.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The operations of batch `batch` of `generation`. Most batches are small; some are large
/// (many records, likely to cross a segment boundary); a quarter also delete keys. One in 32
/// starts with a range delete (half of them over a whole partition of the LSM cases). A key can
/// appear twice in a batch, and then the later operation wins. One batch in 64 drops the
/// keyspace, alone; batches touching its keys span it and the default keyspace.
fn batch_ops(seed: u64, generation: u32, batch: u32) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(mix(seed ^ mix(u64::from(generation) << 32 | u64::from(batch))));
    if rng.gen_ratio(1, 64) {
        return vec![Op::DropKeyspace];
    }
    let mut ops = Vec::new();
    if rng.gen_ratio(1, 32) {
        let (start, end) = if rng.gen_bool(0.5) {
            let q = rng.gen_range(0..4);
            (KEYS / 4 * q, KEYS / 4 * (q + 1))
        } else {
            let start = rng.gen_range(0..KEYS);
            (start, (start + rng.gen_range(1..=64)).min(KEYS))
        };
        ops.push(Op::DeleteRange { start, end });
    }
    let count = if rng.gen_ratio(1, 16) { rng.gen_range(32..=96) } else { rng.gen_range(1..=8) };
    let deletes = rng.gen_ratio(1, 4);
    ops.extend((0..count).map(|_| {
        let key = rng.gen_range(0..KEYS);
        if deletes && rng.gen_ratio(1, 3) {
            Op::Delete { key }
        } else {
            Op::Put { key, len: rng.gen_range(VALUE_LEN) }
        }
    }));
    ops
}

/// The value `key` gets from batch `batch` of `generation`: a header naming the write, then
/// filler derived from it, so a damaged value is told apart from a stale one.
fn value(generation: u32, batch: u32, key: u16, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&generation.to_le_bytes());
    v.extend_from_slice(&batch.to_le_bytes());
    v.extend_from_slice(&key.to_le_bytes());
    let mut x = mix(u64::from(generation) << 40 ^ u64::from(batch) << 16 ^ u64::from(key)) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// What a value read from the database is: the write its header names, and whether the rest
/// of it is intact.
fn describe_actual(actual: Option<&[u8]>) -> String {
    let Some(v) = actual else { return "absent".into() };
    if v.len() < HEADER_LEN {
        return format!("{} undecodable bytes {:02x?}", v.len(), v);
    }
    let generation = u32::from_le_bytes(v[0..4].try_into().expect("4 bytes"));
    let batch = u32::from_le_bytes(v[4..8].try_into().expect("4 bytes"));
    let key = u16::from_le_bytes(v[8..10].try_into().expect("2 bytes"));
    let mut s = format!("generation {generation} batch {batch} key {key} ({} B", v.len());
    let regenerated = value(generation, batch, key, v.len());
    match v.iter().zip(&regenerated).position(|(a, b)| a != b) {
        None => s.push(')'),
        Some(i) => write!(s, ", damaged from byte {i})").expect("write to String"),
    }
    s
}

fn describe_expected(k: u16, expected: Option<Version>) -> String {
    match expected {
        None => "absent".into(),
        Some(v) => format!("generation {} batch {} key {k} ({} B)", v.generation, v.batch, v.len),
    }
}

/// The expected content of the database: the version of every key, `None` if absent.
#[derive(Clone, PartialEq, Eq)]
struct Model(Vec<Option<Version>>);

impl Model {
    fn empty() -> Model {
        Model(vec![None; usize::from(KEYS)])
    }

    fn apply(&mut self, seed: u64, generation: u32, batch: u32) {
        for op in batch_ops(seed, generation, batch) {
            match op {
                Op::Put { key, len } => self.0[usize::from(key)] = Some(Version { generation, batch, len }),
                Op::Delete { key } => self.0[usize::from(key)] = None,
                Op::DeleteRange { start, end } => self.0[usize::from(start)..usize::from(end)].fill(None),
                Op::DropKeyspace => self.0[usize::from(FIRST_KEYSPACE_KEY)..].fill(None),
            }
        }
    }

    fn expected(&self, k: u16) -> Option<Vec<u8>> {
        self.0[usize::from(k)].map(|v| value(v.generation, v.batch, k, v.len))
    }

    fn live_keys(&self) -> usize {
        self.0.iter().filter(|v| v.is_some()).count()
    }
}

// ---------------------------------------------------------------------------------------------
// Child

/// Runs the child workload when started by [`spawn_child`]; passes at once otherwise.
#[test]
fn child_entry() {
    let Some(case) = std::env::var_os(CHILD_ENV) else { return };
    let arg = |name: &str| std::env::var_os(name).unwrap_or_else(|| die(EXIT_BAD_ARGS, &format!("{name} not set")));
    let case = case.to_str().and_then(Case::parse).unwrap_or_else(|| die(EXIT_BAD_ARGS, &format!("case {case:?}")));
    let dir = PathBuf::from(arg(CHILD_DIR_ENV));
    let number = |name: &str| -> u64 {
        arg(name).to_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| die(EXIT_BAD_ARGS, &format!("bad {name}")))
    };
    let seed = number(CHILD_SEED_ENV);
    let generation = u32::try_from(number(CHILD_GENERATION_ENV)).unwrap_or_else(|_| die(EXIT_BAD_ARGS, "generation"));
    run_child(case, &dir, seed, generation);
}

/// The value log's state when a write failed, for the parent's message: a write refused for
/// space is only diagnosable from what the log held (each segment's size and known garbage,
/// where recovery starts, what GC had done, and who held readers).
fn describe_log(db: &Db) -> String {
    let stats = db.stats();
    let segments: Vec<String> =
        stats.segments.iter().map(|s| format!("{}:{}/{}", s.id, s.bytes, s.garbage_bytes)).collect();
    format!(
        "log head {:?}; {} segments (id:bytes/garbage) {}; GC runs {}, punched {} bytes, released {} segments; \
         snapshots {}; stalls [{}]",
        stats.log_head,
        segments.len(),
        segments.join(" "),
        stats.gc_runs,
        stats.gc_bytes_punched,
        stats.gc_segments_released,
        db.property("splitkv.num-snapshots").unwrap_or_default(),
        db.property("splitkv.write-stalls").unwrap_or_default().replace('\n', ", "),
    )
}

/// Ends the child with `code` after saying why on stderr (the parent shows it).
fn die(code: i32, message: &str) -> ! {
    eprintln!("kill test child: {message}");
    std::process::exit(code)
}

/// Writes batches until killed, with GC and short-lived readers running alongside.
fn run_child(case: Case, dir: &Path, seed: u64, generation: u32) -> ! {
    let db = match Db::open(dir, case.options()) {
        Ok(db) => Arc::new(db),
        Err(e) => die(EXIT_OPEN_FAILED, &format!("open {}: {e}", dir.display())),
    };
    let started = Instant::now();

    // GC back to back, so that a kill most likely lands inside a run (compaction, relocation,
    // hole punching or segment release). An error is a finding, never retried.
    if case.mode != Mode::NoGc {
        let gc_db = Arc::clone(&db);
        let mut gc_rng = StdRng::seed_from_u64(mix(seed ^ GC_STREAM) ^ u64::from(generation));
        thread::spawn(move || loop {
            let collected = match case.mode {
                Mode::KeyOrderRewrite => match gc_rng.gen_range(0..4) {
                    0 => gc_db.run_gc().map(drop),
                    1 => {
                        let from = gc_rng.gen_range(0..KEYS);
                        let to = gc_rng.gen_range(from..KEYS);
                        gc_db.rewrite_value_log(Some(&key(from)), Some(&key(to))).map(drop)
                    }
                    _ => gc_db.rewrite_value_log(None, None).map(drop),
                },
                Mode::CompactionMoves => match gc_rng.gen_range(0..2) {
                    0 => gc_db.compact_range(None, None),
                    _ => gc_db.run_gc().map(drop),
                },
                // Background steps too: over the space limit, those compact a partner segment
                // beside their victim, on a thread of their own.
                Mode::CompactInPlace => match gc_rng.gen_range(0..3) {
                    0 => gc_db.compact_range(None, None),
                    1 => gc_db.gc_step().map(drop),
                    _ => gc_db.run_gc().map(drop),
                },
                _ => gc_db.run_gc().map(drop),
            };
            if let Err(e) = collected {
                die(EXIT_GC_FAILED, &format!("GC: {e}"));
            }
            // Counted by the parent, to show that kills do land while GC is busy.
            if std::io::stdout().write_all(b"GC\n").is_err() {
                die(EXIT_PARENT_GONE, "stdout closed");
            }
        });
    }

    // Snapshots and iterators held for a few milliseconds, so GC has to wait for readers before
    // it releases segments. Values read must belong to their key.
    let reader_db = Arc::clone(&db);
    let mut reader_rng = StdRng::seed_from_u64(mix(seed ^ READER_STREAM) ^ u64::from(generation));
    thread::spawn(move || loop {
        thread::sleep(Duration::from_millis(reader_rng.gen_range(2..30)));
        if let Err(e) = read_briefly(&reader_db, &mut reader_rng) {
            die(EXIT_READ_FAILED, &e);
        }
    });

    // The second writer: synced single puts beside the batches, acknowledged as `SIDE n`.
    let side_db = Arc::clone(&db);
    thread::spawn(move || {
        for n in 0u32.. {
            let written = side_db.keyspace(SIDE_KEYSPACE).and_then(|ks| {
                let mut wb = WriteBatch::new();
                wb.put_in(&ks, side_key(n % SIDE_KEYS), side_value(generation, n));
                side_db.write(&WriteOptions { sync: true }, wb)
            });
            if let Err(e) = written {
                die(EXIT_WRITE_FAILED, &format!("side write {n}: {e}\n{}", describe_log(&side_db)));
            }
            if std::io::stdout().write_all(format!("SIDE {n}\n").as_bytes()).is_err() {
                die(EXIT_PARENT_GONE, "stdout closed");
            }
        }
    });

    let mut stdout = std::io::stdout();
    for batch in 0u32.. {
        let ops = batch_ops(seed, generation, batch);
        let written = match ops.as_slice() {
            [Op::DropKeyspace] => db.drop_keyspace(KEYSPACE).map(drop),
            _ => db
                .keyspace(KEYSPACE)
                .and_then(|ks| db.write(&WriteOptions { sync: true }, workload_batch(&ks, &ops, generation, batch))),
        };
        if let Err(e) = written {
            die(EXIT_WRITE_FAILED, &format!("write of batch {batch}: {e}\n{}", describe_log(&db)));
        }
        // One write call per line: a pipe write of this size is atomic, so the parent never
        // sees a prefix of a number (it also ignores a line without its newline).
        let line = format!("ACK {batch}\n");
        if stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush()).is_err() {
            die(EXIT_PARENT_GONE, "stdout closed");
        }
        if started.elapsed() > CHILD_LIFETIME {
            die(EXIT_TIMED_OUT, &format!("not killed within {CHILD_LIFETIME:?}"));
        }
    }
    unreachable!("u32 batch numbers ran out")
}

/// The engine batch of `ops`: keys from [`FIRST_KEYSPACE_KEY`] on go to `ks`, and a range delete
/// across that key becomes one delete on each side, in the same batch.
fn workload_batch(ks: &Keyspace<'_>, ops: &[Op], generation: u32, batch: u32) -> WriteBatch {
    let mut wb = WriteBatch::new();
    for &op in ops {
        match op {
            Op::Put { key: k, len } if k >= FIRST_KEYSPACE_KEY => {
                wb.put_in(ks, key(k), value(generation, batch, k, len))
            }
            Op::Put { key: k, len } => wb.put(key(k), value(generation, batch, k, len)),
            Op::Delete { key: k } if k >= FIRST_KEYSPACE_KEY => wb.delete_in(ks, key(k)),
            Op::Delete { key: k } => wb.delete(key(k)),
            Op::DeleteRange { start, end } => {
                let split = start.max(end.min(FIRST_KEYSPACE_KEY));
                wb.delete_range(key(start), key(split)).delete_range_in(ks, key(split), key(end))
            }
            Op::DropKeyspace => unreachable!("a drop is a batch of its own"),
        };
    }
    wb
}

/// The value of key `k` as of `opts`, from the default keyspace or [`KEYSPACE`] (absent while
/// it does not exist).
fn get_key(db: &Db, opts: &ReadOptions, k: u16) -> splitkv::Result<Option<Vec<u8>>> {
    let value = if k < FIRST_KEYSPACE_KEY {
        db.get_opt(opts, key(k))?
    } else if let Some(ks) = db.existing_keyspace(KEYSPACE) {
        ks.get_opt(opts, key(k))?
    } else {
        None
    };
    Ok(value.map(|v| v.to_vec()))
}

/// Takes a snapshot or an iterator, reads a little through it, holds it briefly and drops it.
fn read_briefly(db: &Db, rng: &mut StdRng) -> Result<(), String> {
    let check = |k: &[u8], v: &[u8]| -> Result<(), String> {
        let named = (v.len() >= HEADER_LEN).then(|| u16::from_le_bytes([v[8], v[9]]));
        match named {
            Some(n) if key(n) == k => Ok(()),
            _ => Err(format!("{} holds {}", String::from_utf8_lossy(k), describe_actual(Some(v)))),
        }
    };
    let n = rng.gen_range(0..KEYS);
    let k = key(n);
    // The keyspace may be dropped under the reader (its handles then refuse to read).
    let dropped_meanwhile =
        |e: &splitkv::Error| n >= FIRST_KEYSPACE_KEY && matches!(e, splitkv::Error::InvalidArgument(_));
    if rng.gen_bool(0.5) {
        let snapshot = db.snapshot();
        thread::sleep(Duration::from_millis(rng.gen_range(0..5)));
        let opts = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
        match get_key(db, &opts, n) {
            Ok(Some(v)) => check(&k, &v)?,
            Ok(None) => {}
            Err(e) if dropped_meanwhile(&e) => {}
            Err(e) => return Err(format!("snapshot get: {e}")),
        }
    } else {
        let entries = rng.gen_range(1..50);
        let range = match (n < FIRST_KEYSPACE_KEY, db.existing_keyspace(KEYSPACE)) {
            (true, _) => db.range(k..),
            (false, Some(ks)) => ks.range(k..),
            (false, None) => return Ok(()),
        };
        let range = match range {
            Ok(range) => range,
            Err(e) if dropped_meanwhile(&e) => return Ok(()),
            Err(e) => return Err(format!("range: {e}")),
        };
        for item in range.take(entries) {
            let (k, v) = item.map_err(|e| format!("range item: {e}"))?;
            check(&k, &v)?;
        }
        thread::sleep(Duration::from_millis(rng.gen_range(0..5)));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Parent

/// What a case's run did, for the summary line.
#[derive(Default)]
struct Tally {
    batches_acked: u64,
    /// Writes the second writer had acknowledged.
    side_acked: u64,
    gc_runs: u64,
    in_flight_applied: u32,
}

fn run_case(case: Case) {
    let seed = match std::env::var("SPLITKV_KILL_SEED") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("SPLITKV_KILL_SEED={s:?} is not a u64")),
        Err(_) => rand::random(),
    };
    let rounds = match std::env::var("SPLITKV_KILL_ROUNDS") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("SPLITKV_KILL_ROUNDS={s:?} is not a number")),
        Err(_) => case.default_rounds(),
    };
    println!("kill test seed = {seed} (case {}, {rounds} kills)", case.name());
    let started = Instant::now();
    let tmp = tempfile::Builder::new().prefix("splitkv-kill-").tempdir().expect("create temp dir");
    let dir = tmp.path().join("db");
    let mut rng = StdRng::seed_from_u64(mix(seed ^ PARENT_STREAM));
    let mut model = Model::empty();
    let mut side = SideModel::empty();
    let mut tally = Tally::default();
    for generation in 0..rounds {
        if let Err(e) = kill_round(case, &dir, seed, generation, &mut rng, (&mut model, &mut side), &mut tally) {
            // Keep the directory for a post-mortem; it is the state the message describes.
            let kept = tmp.keep();
            panic!(
                "kill test FAILED: seed = {seed}, case {}, generation {generation}: {e}\n\
                 (directory kept: {})",
                case.name(),
                kept.display()
            );
        }
    }
    let (left, collected) = final_space_amplification(case, &dir);
    println!(
        "kill test case {}: {rounds} kills, {} batches and {} side writes acknowledged, 0 lost, {} GC calls returned, \
         in-flight batch applied {} times, {} keys live at the end, space amplification {left:.2} as \
         the last kill left it and {collected:.2} after run_gc, {:.1?}",
        case.name(),
        tally.batches_acked,
        tally.side_acked,
        tally.gc_runs,
        tally.in_flight_applied,
        model.live_keys(),
        started.elapsed()
    );
}

/// Bytes on disk over live key and value bytes, as the last kill left the database and after
/// a `run_gc`: what the kills cost in space.
fn final_space_amplification(case: Case, dir: &Path) -> (f64, f64) {
    let _no_spawn = spawn_or_open_db();
    let db = Db::open(dir, case.options()).expect("reopen for the space figure");
    let live: usize = db
        .range::<&[u8], _>(..)
        .expect("range")
        .map(|item| item.map(|(k, v)| k.len() + v.len()).expect("range item"))
        .sum();
    let amplification = |db: &Db| db.stats().disk_bytes as f64 / live.max(1) as f64;
    let left = amplification(&db);
    db.run_gc().expect("run_gc after the last kill");
    (left, amplification(&db))
}

/// One generation: run a child, kill it, check the database, run `splitkv verify`.
fn kill_round(
    case: Case,
    dir: &Path,
    seed: u64,
    generation: u32,
    rng: &mut StdRng,
    (model, side): (&mut Model, &mut SideModel),
    tally: &mut Tally,
) -> Result<(), String> {
    let stderr_path = dir.with_file_name(format!("child-{generation}.stderr"));
    let (mut child, acks, output) = spawn_child(case, dir, seed, generation, &stderr_path)?;
    let child_stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();

    let first_ack = match acks.recv_timeout(FIRST_ACK_TIMEOUT) {
        Ok(n) => n,
        Err(RecvTimeoutError::Disconnected) => {
            let status = child.wait().map_err(|e| format!("wait for child: {e}"))?;
            return Err(format!("child ended ({status}) before acknowledging a write; stderr:\n{}", child_stderr()));
        }
        Err(RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no write acknowledged in {FIRST_ACK_TIMEOUT:?}; stderr:\n{}", child_stderr()));
        }
    };
    // Mostly short delays (the child is killed while the first flushes and GC runs of the
    // generation are in progress), sometimes long ones (many segments and levels).
    let delay = if rng.gen_ratio(1, 8) { rng.gen_range(400..2000) } else { rng.gen_range(20..400) };
    thread::sleep(Duration::from_millis(delay));
    child.kill().map_err(|e| format!("kill child: {e}"))?;
    let status = child.wait().map_err(|e| format!("wait for child: {e}"))?;
    if status.signal() != Some(SIGKILL) {
        return Err(format!("child ended on its own ({status}) before the kill; stderr:\n{}", child_stderr()));
    }
    // The reader thread ends at EOF, which the kill guarantees; every ACK is in the channel.
    let (gc_runs, last_side) = output.join().expect("stdout reader thread");
    tally.gc_runs += gc_runs;
    tally.side_acked += last_side.map_or(0, |n| u64::from(n) + 1);
    let acked: Vec<u32> = std::iter::once(first_ack).chain(acks.iter()).collect();
    if acked.iter().enumerate().any(|(i, &n)| n as usize != i) {
        return Err(format!("acknowledgements out of order: {acked:?}"));
    }
    let last_ack = acked.len() as u32 - 1;
    tally.batches_acked += u64::from(last_ack) + 1;

    let mut after_ack = model.clone();
    for batch in 0..=last_ack {
        after_ack.apply(seed, generation, batch);
    }
    let mut after_in_flight = after_ack.clone();
    after_in_flight.apply(seed, generation, last_ack + 1);

    // Whatever the child said before it died (a reader that saw a wrong value just before the
    // kill, say) belongs next to what the parent found.
    let failed = |e: String| {
        let mut message = format!("killed after {delay} ms, last ACK {last_ack}: {e}");
        let stderr = child_stderr();
        if !stderr.trim().is_empty() {
            write!(message, "\nchild stderr:\n{stderr}").expect("write to String");
        }
        message
    };
    let state = {
        let _no_spawn = spawn_or_open_db();
        let db = Db::open(dir, case.options()).map_err(|e| failed(format!("reopen failed: {e}")))?;
        *side = side.check(&db, generation, last_side).map_err(failed)?;
        check_state(&db, &after_ack, &after_in_flight, last_ack).map_err(failed)?
    };
    if state == InFlight::Applied {
        tally.in_flight_applied += 1;
        *model = after_in_flight;
    } else {
        *model = after_ack;
    }
    run_verify(dir).map_err(failed)
}

/// What the child printed besides its `ACK` lines: the number of `GC` lines and the last
/// complete `SIDE <n>`.
type ChildOutput = (u64, Option<u32>);

/// Starts the child for one generation. Its stdout is read by a thread that forwards each
/// complete `ACK <n>` line, and returns the number of `GC` lines and the last complete
/// `SIDE <n>` once the child's stdout closes (which also closes the channel).
fn spawn_child(
    case: Case,
    dir: &Path,
    seed: u64,
    generation: u32,
    stderr_path: &Path,
) -> Result<(Child, Receiver<u32>, JoinHandle<ChildOutput>), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let stderr = File::create(stderr_path).map_err(|e| format!("create {}: {e}", stderr_path.display()))?;
    let mut command = Command::new(exe);
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case.name())
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_SEED_ENV, seed.to_string())
        .env(CHILD_GENERATION_ENV, generation.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut child = {
        let _no_open_db = spawn_or_open_db();
        command.spawn().map_err(|e| format!("spawn child: {e}"))?
    };
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let mut gc_runs = 0;
        let mut last_side = None;
        // The test harness prints too, and may leave `test child_entry ... ` without a newline
        // before the first ACK: an ACK ends its line, it need not start it. A line cut short by
        // the kill has no newline and is not an acknowledgement.
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            let complete = line.strip_suffix('\n');
            let ack = complete.and_then(|l| l.rsplit_once("ACK ")).map(|(_, n)| n.parse());
            let side = complete.and_then(|l| l.rsplit_once("SIDE ")).map(|(_, n)| n.parse::<u32>());
            if let Some(Ok(n)) = ack {
                // The parent stops listening only when it gives up on the child.
                let _ = tx.send(n);
            } else if let Some(Ok(n)) = side {
                // One writer, in order: the last line is the newest acknowledgement.
                last_side = Some(n);
            } else if line.ends_with("GC\n") {
                gc_runs += 1;
            }
            line.clear();
        }
        (gc_runs, last_side)
    });
    Ok((child, rx, reader))
}

#[derive(Debug, PartialEq, Eq)]
enum InFlight {
    Applied,
    Lost,
}

/// Requires the database to equal `after_ack` or `after_in_flight`, key by key and in one scan;
/// returns which one.
fn check_state(db: &Db, after_ack: &Model, after_in_flight: &Model, last_ack: u32) -> Result<InFlight, String> {
    let mut actual = Vec::with_capacity(usize::from(KEYS));
    for k in 0..KEYS {
        let v = get_key(db, &ReadOptions::default(), k)
            .map_err(|e| format!("get {}: {e}", String::from_utf8_lossy(&key(k))))?;
        actual.push(v);
    }
    let ack_diff = differences(after_ack, &actual);
    let in_flight_diff = differences(after_in_flight, &actual);
    let (state, model) = match (ack_diff.is_empty(), in_flight_diff.is_empty()) {
        (true, _) => (InFlight::Lost, after_ack),
        (false, true) => (InFlight::Applied, after_in_flight),
        (false, false) => {
            return Err(format!(
                "the database matches neither the state after ACK {last_ack} nor after the in-flight \
                 batch {}\n  against ACK {last_ack}: {}\n  against batch {}: {}",
                last_ack + 1,
                summarize(&ack_diff, after_ack, &actual),
                last_ack + 1,
                summarize(&in_flight_diff, after_in_flight, &actual),
            ))
        }
    };

    // The scan goes through the iterator path (merging, value prefetch), which `get` does not.
    let mut expected = (0..KEYS).filter_map(|k| model.expected(k).map(|v| (key(k), v)));
    let mut scanned = 0usize;
    let mut scan = db.range::<&[u8], _>(..).map_err(|e| format!("range: {e}"))?.collect::<Vec<_>>();
    if let Some(ks) = db.existing_keyspace(KEYSPACE) {
        scan.extend(ks.range::<&[u8], _>(..).map_err(|e| format!("keyspace range: {e}"))?);
    }
    for item in scan {
        let (k, v) = item.map_err(|e| format!("scan after {scanned} entries: {e}"))?;
        match expected.next() {
            Some((ek, ev)) if ek == k.as_ref() && ev == v.as_ref() => scanned += 1,
            Some((ek, ev)) => {
                return Err(format!(
                    "scan entry {scanned}: expected {} = {}, got {} = {}",
                    String::from_utf8_lossy(&ek),
                    describe_actual(Some(&ev)),
                    String::from_utf8_lossy(&k),
                    describe_actual(Some(&v))
                ))
            }
            None => {
                return Err(format!(
                    "scan entry {scanned}: unexpected {} = {} after the last expected key",
                    String::from_utf8_lossy(&k),
                    describe_actual(Some(&v))
                ))
            }
        }
    }
    if let Some((ek, _)) = expected.next() {
        return Err(format!("scan ended after {scanned} entries; missing {}", String::from_utf8_lossy(&ek)));
    }
    Ok(state)
}

/// Keys whose value differs from the model.
fn differences(model: &Model, actual: &[Option<Vec<u8>>]) -> Vec<u16> {
    (0..KEYS).filter(|&k| model.expected(k) != actual[usize::from(k)]).collect()
}

/// The number of differing keys and the first few, with expected and actual values decoded.
fn summarize(diff: &[u16], model: &Model, actual: &[Option<Vec<u8>>]) -> String {
    let mut s = format!("{} of {KEYS} keys differ", diff.len());
    for &k in diff.iter().take(5) {
        write!(
            s,
            "\n    {}: expected {}, actual {}",
            String::from_utf8_lossy(&key(k)),
            describe_expected(k, model.0[usize::from(k)]),
            describe_actual(actual[usize::from(k)].as_deref())
        )
        .expect("write to String");
    }
    s
}

/// Runs `splitkv verify` on the closed database; it must find no problem.
fn run_verify(dir: &Path) -> Result<(), String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_splitkv"));
    command.arg("verify").arg(dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = {
        let _no_open_db = spawn_or_open_db();
        command.spawn().map_err(|e| format!("run splitkv verify: {e}"))?
    };
    let out = child.wait_with_output().map_err(|e| format!("wait for splitkv verify: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "splitkv verify failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
