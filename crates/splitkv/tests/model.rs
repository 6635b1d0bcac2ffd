//! Seeded random operations checked against a `BTreeMap` model: puts, deletes, range deletes
//! (alone and inside batches, aligned with the LSM cases' partitions or not), batches, snapshots, iterators in both directions, flushes, compactions, value-log GC (manual, and in
//! the background), clean reopens, and crashes on the in-memory file system (with and without
//! torn tails).
//!
//! After a crash the database must equal the model as of some point between the last durability
//! point (a sync write or a flush) and the crash: unsynced writes may be lost, but only as a
//! suffix. Seeds: a fixed set plus two fresh ones per run, or `SPLITKV_MODEL_SEEDS=1,2,3`;
//! `SPLITKV_MODEL_STEPS` sets the steps per seed. A failure names its seed.
//!
//! Every index kind runs the threshold matrix under the score policy with one compaction worker;
//! the LSM index also runs it, with half the steps, under the time-slice policy with two workers,
//! and under the score policy with GC compacting victims in place (the other rows copy). A
//! failure names its index kind and row.
//!
//! Keyspaces: the model holds keyspace `name`'s key `k` as `@name/k` (before every default key),
//! and steps write batches spanning keyspaces, read and scan keyspaces, range-delete inside one
//! and drop one (a drop is, to the model, a batch deleting all its keys).

mod common;

use std::collections::BTreeMap;

use common::{lsm_matrix, matrix, Case, CrashEnv};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use splitkv::{CompactionPolicyKind, Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
type Change = (Vec<u8>, Option<Vec<u8>>);

const KEYS: u64 = 300;
/// Key numbers where the LSM cases split partitions (the ends bound range deletes, not splits).
const PARTITIONS: [u64; 5] = [0, 60, 150, 220, KEYS];

fn partition_key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// The case's options with the row's compaction and GC settings; LSM cases split the key space
/// into partitions (statically, and under the time-slice row also by size).
fn model_options(case: Case, row: Row) -> Options {
    let Row { policy, workers, gc_compact_in_place } = row;
    let base = Options {
        compaction_policy: policy,
        max_background_compactions: workers,
        gc_compact_in_place,
        ..case.options()
    };
    if base.index != splitkv::IndexKind::Lsm {
        return base;
    }
    let splits = PARTITIONS[1..PARTITIONS.len() - 1].iter().map(|&i| partition_key(i)).collect();
    let by_size = (workers > 1).then_some(64 << 10);
    Options { partition_split_points: splits, partition_target_bytes: by_size, ..base }
}
const VALUE_SIZES: [usize; 7] = [0, 10, 100, 700, 1023, 1500, 6000];
const KEYSPACES: [&str; 2] = ["a", "b"];

/// The model key of `key` in keyspace `name`.
fn keyspace_model_key(name: &str, key: &[u8]) -> Vec<u8> {
    [format!("@{name}/").as_bytes(), key].concat()
}

/// The keyspace and key a model key names (`None` for the default keyspace).
fn split_model_key(key: &[u8]) -> (Option<&str>, &[u8]) {
    if key.first() != Some(&b'@') {
        return (None, key);
    }
    let slash = key.iter().position(|&b| b == b'/').expect("model keyspace key");
    (Some(std::str::from_utf8(&key[1..slash]).expect("name")), &key[slash + 1..])
}

fn default_entries(map: &Map) -> Vec<(Vec<u8>, Vec<u8>)> {
    map.iter().filter(|(k, _)| split_model_key(k).0.is_none()).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn keyspace_entries(map: &Map, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let prefix = keyspace_model_key(name, b"");
    map.range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Applies a batch's changes to a model map, in order.
fn apply_changes(map: &mut Map, changes: &[Change]) {
    for (k, v) in changes {
        match v {
            Some(v) => map.insert(k.clone(), v.clone()),
            None => map.remove(k),
        };
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(list) = std::env::var("SPLITKV_MODEL_SEEDS") {
        return list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    }
    let fresh =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7);
    vec![1, 2, 3, 4, 5, 6, fresh, fresh.rotate_left(17) ^ 0x5eed]
}

fn steps() -> usize {
    std::env::var("SPLITKV_MODEL_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(1200)
}

/// A row of the model test: the settings it runs every case of its matrix under.
#[derive(Clone, Copy, Debug)]
struct Row {
    policy: CompactionPolicyKind,
    workers: usize,
    gc_compact_in_place: bool,
}

struct Harness {
    seed: u64,
    case: Case,
    row: Row,
    rng: SmallRng,
    env: CrashEnv,
    db: Option<Db>,
    model: Map,
    /// Model as of the last durability point.
    durable: Map,
    /// Batches applied since the durability point, in order.
    since_durable: Vec<Vec<Change>>,
    /// Open snapshots, the model as of each, and the keyspaces dropped since (their handles
    /// are gone, so the snapshot can no longer read them).
    snapshots: Vec<(Snapshot, Map, Vec<String>)>,
    step: usize,
}

impl Harness {
    fn new(seed: u64, case: Case, row: Row) -> Self {
        let env = CrashEnv::new();
        let options = model_options(case, row);
        let db = Db::open("/db", env.options(options)).unwrap_or_else(|e| panic!("seed {seed} {case}: open: {e}"));
        Harness {
            seed,
            case,
            row,
            rng: SmallRng::seed_from_u64(seed ^ case.threshold as u64),
            env,
            db: Some(db),
            model: Map::new(),
            durable: Map::new(),
            since_durable: Vec::new(),
            snapshots: Vec::new(),
            step: 0,
        }
    }

    fn ctx(&self) -> String {
        format!("seed {} {} {:?} step {}", self.seed, self.case, self.row, self.step)
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("db open")
    }

    fn random_key(&mut self) -> Vec<u8> {
        format!("k{:05}", self.rng.gen_range(0..KEYS)).into_bytes()
    }

    fn random_value(&mut self) -> Vec<u8> {
        let len = VALUE_SIZES[self.rng.gen_range(0..VALUE_SIZES.len())];
        let fill: u8 = self.rng.gen();
        let mut v = vec![fill; len];
        if let Some(first) = v.first_mut() {
            *first = self.step as u8;
        }
        v
    }

    fn mark_durable(&mut self) {
        self.durable = self.model.clone();
        self.since_durable.clear();
    }

    fn apply(&mut self, changes: Vec<Change>, sync: bool) {
        let db = self.db();
        let mut batch = WriteBatch::new();
        for (k, v) in &changes {
            match split_model_key(k) {
                (None, k) => match v {
                    Some(v) => batch.put(k, v),
                    None => batch.delete(k),
                },
                (Some(name), k) => {
                    let ks = db.keyspace(name).unwrap_or_else(|e| panic!("{}: keyspace: {e}", self.ctx()));
                    match v {
                        Some(v) => batch.put_in(&ks, k, v),
                        None => batch.delete_in(&ks, k),
                    }
                }
            };
        }
        db.write(&WriteOptions { sync }, batch).unwrap_or_else(|e| panic!("{}: write: {e}", self.ctx()));
        self.written(changes, sync);
    }

    /// A model key in a random keyspace, or the default one.
    fn random_key_anywhere(&mut self) -> Vec<u8> {
        let k = self.random_key();
        match self.rng.gen_range(0..=KEYSPACES.len()) {
            0 => k,
            i => keyspace_model_key(KEYSPACES[i - 1], &k),
        }
    }

    /// Drops a keyspace: to the model, a synced batch deleting every key it holds.
    fn drop_keyspace(&mut self) {
        let name = KEYSPACES[self.rng.gen_range(0..KEYSPACES.len())];
        let existed = self.db().drop_keyspace(name).unwrap_or_else(|e| panic!("{}: drop_keyspace: {e}", self.ctx()));
        let changes = keyspace_entries(&self.model, name).into_iter().map(|(k, _)| (k, None)).collect();
        // A drop is durable when it returns (and so is everything written before it); a drop
        // of a keyspace that does not exist writes nothing.
        self.written(changes, existed);
        for (_, _, dropped) in &mut self.snapshots {
            dropped.push(name.to_string());
        }
    }

    /// Deletes a random range of a keyspace.
    fn keyspace_range_delete(&mut self) {
        let name = KEYSPACES[self.rng.gen_range(0..KEYSPACES.len())];
        let (a, b) = (self.random_key(), self.random_key());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let ks = self.db().keyspace(name).unwrap_or_else(|e| panic!("{}: keyspace: {e}", self.ctx()));
        ks.delete_range(&lo, &hi).unwrap_or_else(|e| panic!("{}: keyspace delete_range: {e}", self.ctx()));
        let (lo, hi) = (keyspace_model_key(name, &lo), keyspace_model_key(name, &hi));
        let changes = self.model.range(lo..hi).map(|(k, _)| (k.clone(), None)).collect();
        self.written(changes, false);
    }

    /// A get and a scan (forward or backward) of a keyspace.
    fn check_keyspace(&mut self) {
        let name = KEYSPACES[self.rng.gen_range(0..KEYSPACES.len())];
        let k = self.random_key();
        let backward = self.rng.gen_bool(0.5);
        let ks = self.db().keyspace(name).unwrap_or_else(|e| panic!("{}: keyspace: {e}", self.ctx()));
        let got = ks.get(&k).unwrap_or_else(|e| panic!("{}: keyspace get: {e}", self.ctx()));
        let want = self.model.get(&keyspace_model_key(name, &k));
        assert_eq!(got.map(|v| v.to_vec()).as_ref(), want, "{}: get {name}/{k:?}", self.ctx());
        let mut got = keyspace_dump(&ks, ReadOptions::default(), backward);
        let mut want = keyspace_entries(&self.model, name);
        if backward {
            got.reverse();
        }
        want.iter_mut().for_each(|(k, _)| *k = split_model_key(k).1.to_vec());
        assert_eq!(got, want, "{}: scan of keyspace {name} (backward: {backward})", self.ctx());
    }

    /// Records in the model a batch the database acknowledged.
    fn written(&mut self, changes: Vec<Change>, sync: bool) {
        apply_changes(&mut self.model, &changes);
        self.since_durable.push(changes);
        if sync {
            self.mark_durable();
        }
    }

    /// Deletes `[lo, hi)`, then (in the same batch) puts `after` if given.
    fn apply_range_delete(&mut self, lo: Vec<u8>, hi: Vec<u8>, after: Option<(Vec<u8>, Vec<u8>)>, sync: bool) {
        let mut batch = WriteBatch::new();
        batch.delete_range(&lo, &hi);
        if let Some((k, v)) = &after {
            batch.put(k, v);
        }
        self.db().write(&WriteOptions { sync }, batch).unwrap_or_else(|e| panic!("{}: delete_range: {e}", self.ctx()));
        // As a change list: the keys the range held at that point, then the put.
        let mut changes: Vec<Change> =
            self.model.range(lo.clone()..hi.clone()).map(|(k, _)| (k.clone(), None)).collect();
        changes.extend(after.map(|(k, v)| (k, Some(v))));
        self.written(changes, sync);
    }

    fn check_get(&mut self) {
        let k = self.random_key();
        let got = self.db().get(&k).unwrap_or_else(|e| panic!("{}: get: {e}", self.ctx()));
        assert_eq!(got.map(|v| v.to_vec()), self.model.get(&k).cloned(), "{}: get {:?}", self.ctx(), k);
    }

    fn dump(&self, opts: ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.db()
            .range_opt::<&[u8], _>(opts, ..)
            .unwrap_or_else(|e| panic!("{}: range: {e}", self.ctx()))
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap_or_else(|e| panic!("{}: scan: {e}", self.ctx())))
            .collect()
    }

    /// Every entry of every keyspace, default included, as model entries in model order.
    fn dump_all(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let db = self.db();
        let mut out = Vec::new();
        for name in db.keyspace_names() {
            let ks = db.keyspace(&name).unwrap_or_else(|e| panic!("{}: keyspace: {e}", self.ctx()));
            let entries = keyspace_dump(&ks, ReadOptions::default(), false);
            out.extend(entries.into_iter().map(|(k, v)| (keyspace_model_key(&name, &k), v)));
        }
        out.extend(self.dump(ReadOptions::default()));
        out.sort();
        out
    }

    fn check_scan(&mut self) {
        // Half the scans see every file as outside the page cache, so read-ahead hands their
        // values to its pool threads instead of copying them on the cursor's thread.
        self.env.mem.set_uncached(self.rng.gen_bool(0.5));
        match self.rng.gen_range(0..3) {
            0 => {
                let want = default_entries(&self.model);
                assert_eq!(self.dump(ReadOptions::default()), want, "{}: forward scan", self.ctx());
            }
            1 => {
                let mut it = self.db().iter(ReadOptions::default()).expect("iter");
                it.seek_to_last().expect("seek_to_last");
                let mut got = Vec::new();
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev().unwrap_or_else(|e| panic!("{}: prev: {e}", self.ctx()));
                }
                let want: Vec<_> = default_entries(&self.model).into_iter().rev().collect();
                assert_eq!(got, want, "{}: backward scan", self.ctx());
            }
            _ => {
                // Seek, then a random walk mixing next and prev.
                let start = self.random_key();
                let mut it = self.db().iter(ReadOptions::default()).expect("iter");
                it.seek(&start).expect("seek");
                let keys: Vec<&Vec<u8>> = self.model.keys().filter(|k| split_model_key(k).0.is_none()).collect();
                let mut pos = keys.partition_point(|k| **k < start) as isize;
                for _ in 0..20 {
                    let expect = usize::try_from(pos).ok().and_then(|p| keys.get(p));
                    match expect {
                        Some(k) => {
                            assert!(it.valid(), "{}: walk ended early", self.ctx());
                            assert_eq!(it.key(), k.as_slice(), "{}: walk key", self.ctx());
                            assert_eq!(it.value(), self.model[*k].as_slice(), "{}: walk value", self.ctx());
                        }
                        None => {
                            assert!(!it.valid(), "{}: walk went past the end", self.ctx());
                            break;
                        }
                    }
                    if self.rng.gen_bool(0.7) {
                        it.next().expect("next");
                        pos += 1;
                    } else {
                        it.prev().expect("prev");
                        pos -= 1;
                    }
                }
            }
        }
    }

    fn check_snapshot(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let i = self.rng.gen_range(0..self.snapshots.len());
        let (snap, map, dropped) = self.snapshots[i].clone();
        let opts = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
        assert_eq!(self.dump(opts.clone()), default_entries(&map), "{}: snapshot scan", self.ctx());
        for name in KEYSPACES.iter().filter(|n| !dropped.iter().any(|d| d == *n)) {
            let ks = self.db().keyspace(name).unwrap_or_else(|e| panic!("{}: keyspace: {e}", self.ctx()));
            let mut want = keyspace_entries(&map, name);
            want.iter_mut().for_each(|(k, _)| *k = split_model_key(k).1.to_vec());
            assert_eq!(keyspace_dump(&ks, opts.clone(), false), want, "{}: snapshot scan of {name}", self.ctx());
        }
        let k = self.random_key();
        let got = self.db().get_opt(&ReadOptions { snapshot: Some(snap), ..ReadOptions::default() }, &k).expect("get");
        assert_eq!(got.map(|v| v.to_vec()), map.get(&k).cloned(), "{}: snapshot get", self.ctx());
    }

    fn reopen(&mut self) {
        self.snapshots.clear();
        drop(self.db.take());
        self.db = Some(
            Db::open("/db", self.env.options(self.options())).unwrap_or_else(|e| panic!("{}: reopen: {e}", self.ctx())),
        );
    }

    fn crash(&mut self) {
        self.snapshots.clear();
        let torn = self.rng.gen_bool(0.5).then(|| self.rng.gen());
        self.env.crash(self.db.take().expect("db"), torn);
        self.db = Some(
            Db::open("/db", self.env.options(self.options()))
                .unwrap_or_else(|e| panic!("{}: open after crash: {e}", self.ctx())),
        );
        let got = self.dump_all();
        // The recovered state must be the durable state plus a prefix of later batches.
        let mut candidate = self.durable.clone();
        let mut matched = got == candidate.clone().into_iter().collect::<Vec<_>>();
        for batch in &self.since_durable {
            if matched {
                break;
            }
            apply_changes(&mut candidate, batch);
            matched = got == candidate.clone().into_iter().collect::<Vec<_>>();
        }
        assert!(
            matched,
            "{}: state after crash is not the durable state plus a prefix of later writes ({} keys recovered, {} in model)",
            self.ctx(),
            got.len(),
            self.model.len()
        );
        self.model = got.into_iter().collect();
        self.mark_durable();
    }

    fn options(&self) -> Options {
        model_options(self.case, self.row)
    }

    fn run(&mut self, steps: usize) {
        for step in 0..steps {
            self.step = step;
            match self.rng.gen_range(0..112) {
                0..=34 => {
                    let (k, v) = (self.random_key(), self.random_value());
                    self.apply(vec![(k, Some(v))], false);
                }
                35..=44 => {
                    let k = self.random_key();
                    self.apply(vec![(k, None)], false);
                }
                45..=51 => {
                    let n = self.rng.gen_range(1..6);
                    let changes = (0..n)
                        .map(|_| {
                            let k = self.random_key();
                            let v = self.rng.gen_bool(0.7).then(|| self.random_value());
                            (k, v)
                        })
                        .collect();
                    self.apply(changes, false);
                }
                52..=54 => {
                    let (k, v) = (self.random_key(), self.random_value());
                    self.apply(vec![(k, Some(v))], true);
                }
                55..=66 => self.check_get(),
                67..=72 => self.check_scan(),
                73..=76 => {
                    let snap = self.db().snapshot();
                    self.snapshots.push((snap, self.model.clone(), Vec::new()));
                    if self.snapshots.len() > 4 {
                        self.snapshots.remove(0);
                    }
                }
                77..=80 => self.check_snapshot(),
                81..=83 => {
                    self.db().flush().unwrap_or_else(|e| panic!("{}: flush: {e}", self.ctx()));
                    self.mark_durable();
                }
                84..=86 => {
                    let (a, b) = (self.random_key(), self.random_key());
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    let full = self.rng.gen_bool(0.3);
                    let res = if full {
                        self.db().compact_range(None, None)
                    } else {
                        self.db().compact_range(Some(&lo), Some(&hi))
                    };
                    res.unwrap_or_else(|e| panic!("{}: compact: {e}", self.ctx()));
                    self.mark_durable();
                }
                87..=90 => self.reopen(),
                91..=94 => self.crash(),
                95..=97 => {
                    // GC flushes and compacts first, so everything written so far is durable.
                    self.db().run_gc().unwrap_or_else(|e| panic!("{}: gc: {e}", self.ctx()));
                    self.mark_durable();
                }
                98..=99 => {
                    self.snapshots.clear();
                }
                104..=106 => {
                    let n = self.rng.gen_range(1..5);
                    let changes = (0..n)
                        .map(|_| {
                            let k = self.random_key_anywhere();
                            let v = self.rng.gen_bool(0.8).then(|| self.random_value());
                            (k, v)
                        })
                        .collect();
                    let sync = self.rng.gen_bool(0.1);
                    self.apply(changes, sync);
                }
                107..=108 => self.check_keyspace(),
                109 => self.drop_keyspace(),
                110 => self.keyspace_range_delete(),
                _ => {
                    // A partition of the LSM cases, or any range.
                    let (lo, hi) = if self.rng.gen_bool(0.3) {
                        let first = self.rng.gen_range(0..PARTITIONS.len() - 1);
                        (partition_key(PARTITIONS[first]), partition_key(PARTITIONS[first + 1]))
                    } else {
                        let (a, b) = (self.random_key(), self.random_key());
                        if a <= b {
                            (a, b)
                        } else {
                            (b, a)
                        }
                    };
                    let after = self.rng.gen_bool(0.3).then(|| (self.random_key(), self.random_value()));
                    let sync = self.rng.gen_bool(0.2);
                    self.apply_range_delete(lo, hi, after, sync);
                }
            }
        }
        // Final full check.
        let want: Vec<_> = self.model.clone().into_iter().collect();
        assert_eq!(self.dump_all(), want, "{}: final scan", self.ctx());
    }
}

/// The entries of a keyspace in key order (or reverse order, walking backward), keys as the
/// keyspace shows them.
fn keyspace_dump(ks: &splitkv::Keyspace<'_>, opts: ReadOptions, backward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = ks.iter(opts).expect("keyspace iter");
    let mut out = Vec::new();
    if backward {
        it.seek_to_last().expect("seek_to_last");
    } else {
        it.seek_to_first().expect("seek_to_first");
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev().expect("prev");
        } else {
            it.next().expect("next");
        }
    }
    out
}

#[test]
fn random_operations_match_the_model() {
    let row = |policy, workers, gc_compact_in_place| Row { policy, workers, gc_compact_in_place };
    let score = (matrix(), row(CompactionPolicyKind::Score, 1, false), steps());
    // LSM only: compaction policies and workers belong to the LSM index, and so does GC's
    // compaction in place; under another kind these rows would repeat the score row.
    let time_slice = (lsm_matrix(), row(CompactionPolicyKind::time_slice(5), 2, false), steps() / 2);
    let in_place = (lsm_matrix(), row(CompactionPolicyKind::Score, 1, true), steps() / 2);
    for (cases, row, steps) in [score, time_slice, in_place] {
        for seed in seeds() {
            for &case in &cases {
                eprintln!(
                    "model test: seed {seed} {case} {row:?} steps {steps} (rerun with SPLITKV_MODEL_SEEDS={seed})"
                );
                Harness::new(seed, case, row).run(steps);
            }
        }
    }
}
