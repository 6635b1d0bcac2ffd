//! Read-ahead iterators: a cursor with value prefetch shows exactly what a cursor without it
//! shows (and what a `BTreeMap` model says), in both directions, across seeks and direction
//! changes, with writes landing between steps and concurrently, and at older snapshots.
//! Key-only cursors show the same keys and read values lazily. A damaged value surfaces at the
//! same key with or without prefetch. Each scenario runs on the OS file system (values in the
//! page cache: the cursor copies them itself) and on an in-memory one that reports every file as
//! uncached (values go through the prefetch pool). GC relocates values under open cursors here
//! and in the model test (`tests/model.rs`), whose scans also alternate between the two paths.
//! Every scenario runs under every index kind.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{index_kinds, key, matrix, small_options, value_for, Case};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use splitkv::fs::{FileSystem, MemFileSystem};
use splitkv::{Db, DbIterator, IndexKind, Options, ReadOptions, Result};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A cursor over a frozen copy of the model.
struct ModelCursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl ModelCursor {
    fn new(model: &Model) -> Self {
        ModelCursor { entries: model.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), pos: None }
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self.entries.partition_point(|(k, _)| k.as_slice() < target);
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn next(&mut self) {
        self.pos = self.pos.and_then(|i| (i + 1 < self.entries.len()).then_some(i + 1));
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|i| i.checked_sub(1));
    }
    fn current(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.pos.map(|i| self.entries[i].clone())
    }
}

fn current(it: &DbIterator) -> Option<(Vec<u8>, Vec<u8>)> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

fn options(kind: IndexKind, threshold: usize, prefetch_threads: usize) -> Options {
    Options { prefetch_threads, ..small_options(kind, threshold) }
}

/// Where a scenario's database lives.
#[derive(Clone, Copy, Debug)]
enum Storage {
    /// A temporary directory: values are in the page cache.
    Os,
    /// In memory, every file reported as uncached.
    Uncached,
}

impl Storage {
    /// Opens a database with `opts`; the guard keeps a temporary directory alive.
    fn open(self, opts: Options) -> Result<(Db, Option<tempfile::TempDir>)> {
        match self {
            Storage::Os => {
                let dir = tempfile::tempdir()?;
                Ok((Db::open(dir.path(), opts)?, Some(dir)))
            }
            Storage::Uncached => {
                let mem = MemFileSystem::new();
                mem.set_uncached(true);
                Ok((Db::open("/db", Options { fs: Arc::new(mem), ..opts })?, None))
            }
        }
    }
}

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    key(rng.gen_range(0..400))
}

fn random_value(rng: &mut SmallRng) -> Vec<u8> {
    // Lengths on both sides of the 1 KiB test threshold, plus empty values.
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1..=4 => rng.gen_range(1..200),
        _ => rng.gen_range(1000..3000),
    };
    value_for(rng.gen(), len)
}

/// Writes between iterator steps: the open cursors must not see them.
fn random_write(db: &Db, live: &mut Model, rng: &mut SmallRng) -> Result<()> {
    let k = random_key(rng);
    if rng.gen_bool(0.2) {
        db.delete(&k)?;
        live.remove(&k);
    } else {
        let v = random_value(rng);
        db.put(&k, &v)?;
        live.insert(k, v);
    }
    Ok(())
}

/// Drives a prefetching cursor, a plain cursor and a key-only prefetching cursor through the
/// same random movements, comparing each with the model after every step.
fn compare_cursors(
    db: &Db,
    snapshot_model: &Model,
    read: &ReadOptions,
    live: &mut Model,
    rng: &mut SmallRng,
    ctx: &str,
) -> Result<()> {
    let mut fast = db.iter(ReadOptions { prefetch: true, ..read.clone() })?;
    let mut plain = db.iter(ReadOptions { prefetch: false, ..read.clone() })?;
    let mut keys = db.iter(ReadOptions { prefetch: true, keys_only: true, ..read.clone() })?;
    let mut model = ModelCursor::new(snapshot_model);
    for step in 0..60 {
        let op = rng.gen_range(0..10);
        if op == 0 || !model.current().is_some_and(|_| fast.valid()) {
            match rng.gen_range(0..3) {
                0 => {
                    let k = random_key(rng);
                    fast.seek(&k)?;
                    plain.seek(&k)?;
                    keys.seek(&k)?;
                    model.seek(&k);
                }
                1 => {
                    fast.seek_to_first()?;
                    plain.seek_to_first()?;
                    keys.seek_to_first()?;
                    model.seek_to_first();
                }
                _ => {
                    fast.seek_to_last()?;
                    plain.seek_to_last()?;
                    keys.seek_to_last()?;
                    model.seek_to_last();
                }
            }
        } else {
            // Long runs in one direction so that read-ahead windows start, grow and roll over.
            let forward = rng.gen_bool(0.6);
            let run = if rng.gen_bool(0.3) { rng.gen_range(1..4) } else { rng.gen_range(10..150) };
            for _ in 0..run {
                if !fast.valid() {
                    break;
                }
                if forward {
                    fast.next()?;
                    plain.next()?;
                    keys.next()?;
                    model.next();
                } else {
                    fast.prev()?;
                    plain.prev()?;
                    keys.prev()?;
                    model.prev();
                }
                let want = model.current();
                assert_eq!(current(&fast), want, "{ctx} step {step}: prefetching cursor");
                assert_eq!(current(&plain), want, "{ctx} step {step}: plain cursor");
                if rng.gen_bool(0.05) {
                    random_write(db, live, rng)?;
                }
            }
        }
        let want = model.current();
        assert_eq!(current(&fast), want, "{ctx} step {step}: prefetching cursor");
        assert_eq!(current(&plain), want, "{ctx} step {step}: plain cursor");
        assert_eq!(keys.valid(), want.is_some(), "{ctx} step {step}: key-only cursor");
        if let Some((k, v)) = want {
            assert_eq!(keys.key(), k.as_slice(), "{ctx} step {step}: key-only cursor");
            assert!(keys.value().is_empty(), "{ctx} step {step}: key-only cursor loaded a value");
            assert_eq!(keys.read_value()?.to_vec(), v, "{ctx} step {step}: lazy value");
            assert_eq!(fast.read_value()?.to_vec(), v, "{ctx} step {step}: read_value");
        }
        random_write(db, live, rng)?;
    }
    Ok(())
}

fn run_random_case(seed: u64, case: Case, prefetch_threads: usize, storage: Storage) -> Result<()> {
    let ctx = format!("seed {seed} {case} threads {prefetch_threads} {storage:?}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (db, _dir) = storage.open(options(case.kind, case.threshold, prefetch_threads))?;
    let mut live = Model::new();
    let mut snapshots = Vec::new();
    for round in 0..6 {
        for _ in 0..rng.gen_range(100..400) {
            random_write(&db, &mut live, &mut rng)?;
        }
        if rng.gen_bool(0.5) {
            db.flush()?;
        }
        if rng.gen_bool(0.5) {
            snapshots.push((db.snapshot(), live.clone()));
        }
        // At the latest state, then at a random older snapshot.
        let frozen = live.clone();
        compare_cursors(&db, &frozen, &ReadOptions::default(), &mut live, &mut rng, &format!("{ctx} round {round}"))?;
        if !snapshots.is_empty() {
            let (snap, model) = &snapshots[rng.gen_range(0..snapshots.len())];
            let read = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
            compare_cursors(&db, model, &read, &mut live, &mut rng, &format!("{ctx} round {round} snapshot"))?;
        }
    }
    Ok(())
}

#[test]
fn prefetching_cursors_match_plain_cursors_and_the_model() -> Result<()> {
    for seed in 1..=3u64 {
        for case in matrix() {
            for (threads, storage) in [(0, Storage::Os), (3, Storage::Os), (3, Storage::Uncached)] {
                run_random_case(seed * 1000 + case.threshold.min(9999) as u64, case, threads, storage)?;
            }
        }
    }
    Ok(())
}

#[test]
fn bounded_ranges_match_with_and_without_prefetch() -> Result<()> {
    for kind in index_kinds() {
        for storage in [Storage::Os, Storage::Uncached] {
            bounded_ranges_match(kind, storage)?;
        }
    }
    Ok(())
}

fn bounded_ranges_match(kind: IndexKind, storage: Storage) -> Result<()> {
    let (db, _dir) = storage.open(options(kind, 0, 2))?;
    for i in 0..2000 {
        db.put(key(i), value_for(i, 100 + (i as usize % 7) * 300))?;
    }
    db.flush()?;
    for i in (0..2000).step_by(3) {
        db.delete(key(i))?;
    }
    let collect = |prefetch: bool, keys_only: bool| -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let read = ReadOptions { prefetch, keys_only, ..ReadOptions::default() };
        db.range_opt(read, key(150)..key(1700))?.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect()
    };
    let want: Vec<_> =
        (150..1700).filter(|i| i % 3 != 0).map(|i| (key(i), value_for(i, 100 + (i as usize % 7) * 300))).collect();
    assert_eq!(collect(true, false)?, want, "{kind:?} {storage:?}: prefetching range");
    assert_eq!(collect(false, false)?, want, "{kind:?} {storage:?}: plain range");
    let keys: Vec<_> = collect(true, true)?.into_iter().map(|(k, v)| (k, v.is_empty())).collect();
    assert_eq!(
        keys,
        want.iter().map(|(k, _)| (k.clone(), true)).collect::<Vec<_>>(),
        "{kind:?} {storage:?}: key-only range"
    );
    Ok(())
}

#[test]
fn scan_under_concurrent_writers_sees_exactly_its_snapshot() -> Result<()> {
    for kind in index_kinds() {
        for storage in [Storage::Os, Storage::Uncached] {
            scan_under_concurrent_writers(kind, storage)?;
        }
    }
    Ok(())
}

fn scan_under_concurrent_writers(kind: IndexKind, storage: Storage) -> Result<()> {
    let (db, _dir) = storage.open(options(kind, 0, 4))?;
    let db = Arc::new(db);
    for i in 0..3000 {
        db.put(key(i), value_for(i, 600))?;
    }
    // Round 0 reads a snapshot taken before any concurrent write: exactly the 3000 keys.
    let mut before_writes = Some(db.snapshot());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || -> Result<()> {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Overwrites, deletes and new keys, all invisible to the scan.
                db.put(key(i % 3000), b"overwritten")?;
                db.delete(key((i * 7) % 3000))?;
                db.put(format!("key{:06}x", i % 3000), value_for(i, 700))?;
                i += 1;
            }
            Ok(())
        })
    };
    for round in 0..4 {
        let snap = before_writes.take().unwrap_or_else(|| db.snapshot());
        let read = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
        let mut fast = db.iter(ReadOptions { prefetch: true, ..read.clone() })?;
        let mut plain = db.iter(ReadOptions { prefetch: false, ..read })?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        if round % 2 == 0 {
            fast.seek_to_first()?;
            plain.seek_to_first()?;
        } else {
            fast.seek_to_last()?;
            plain.seek_to_last()?;
        }
        while fast.valid() {
            a.push((fast.key().to_vec(), fast.value().to_vec()));
            if round % 2 == 0 {
                fast.next()?
            } else {
                fast.prev()?
            }
        }
        while plain.valid() {
            b.push((plain.key().to_vec(), plain.value().to_vec()));
            if round % 2 == 0 {
                plain.next()?
            } else {
                plain.prev()?
            }
        }
        assert_eq!(a.len(), b.len(), "{kind:?} {storage:?} round {round}");
        assert!(a == b, "{kind:?} {storage:?} round {round}: prefetching scan differs from the plain scan");
        if round == 0 {
            assert_eq!(a.len(), 3000, "{kind:?} {storage:?}: scan before the writers started");
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer thread")?;
    Ok(())
}

/// Scans until the first error; returns the keys seen before it and whether one occurred.
fn scan_until_error(db: &Db, prefetch: bool, forward: bool, ctx: &str) -> (Vec<Vec<u8>>, bool) {
    let mut seen = Vec::new();
    let Ok(mut it) = db.iter(ReadOptions { prefetch, fill_cache: false, ..ReadOptions::default() }) else {
        return (seen, true);
    };
    let mut moved = if forward { it.seek_to_first() } else { it.seek_to_last() };
    loop {
        if let Err(e) = moved {
            assert!(e.is_corruption(), "{ctx}: unexpected error: {e}");
            return (seen, true);
        }
        if !it.valid() {
            return (seen, false);
        }
        seen.push(it.key().to_vec());
        moved = if forward { it.next() } else { it.prev() };
    }
}

/// A scan with prefetch and one without both report the damage, after the same keys.
fn assert_damage_surfaces_alike(db: &Db, forward: bool, ctx: &str) {
    let plain = scan_until_error(db, false, forward, ctx);
    let fast = scan_until_error(db, true, forward, ctx);
    assert!(plain.1, "{ctx}: the damage must be reported");
    assert_eq!(fast, plain, "{ctx}");
}

#[test]
fn damaged_value_surfaces_at_the_same_key_with_and_without_prefetch() -> Result<()> {
    for kind in index_kinds() {
        damaged_value_surfaces_at_the_same_key(kind)?;
    }
    Ok(())
}

fn damaged_value_surfaces_at_the_same_key(kind: IndexKind) -> Result<()> {
    let mem = MemFileSystem::new();
    let opts = Options { fs: Arc::new(mem.clone()), ..options(kind, 0, 2) };
    let db = Db::open("/db", opts)?;
    for i in 0..500 {
        db.put(key(i), value_for(i, 1000))?;
    }
    db.flush()?;
    let segment = mem.file_names(Path::new("/db")).into_iter().find(|n| n.ends_with(".vlog")).expect("a segment");
    let path = Path::new("/db").join(segment);
    mem.flip_byte(&path, mem.file_size(&path)? / 3)?;
    for (forward, uncached) in [(true, false), (false, false), (true, true), (false, true)] {
        mem.set_uncached(uncached);
        let ctx = format!("{kind:?} forward {forward} uncached {uncached}");
        assert_damage_surfaces_alike(&db, forward, &ctx);
    }
    Ok(())
}

#[test]
fn damaged_table_under_inline_values_surfaces_at_the_same_key_with_and_without_prefetch() -> Result<()> {
    // Values of 1000 bytes, all inline: about four to a 4 KiB data block. With every file
    // reported uncached a prefetching cursor starts reading ahead at its third entry, and its
    // first window (16 entries, no separated values, so the last one it walks) runs into the
    // damaged third block; plain cursors and later steps meet it while stepping.
    let mem = MemFileSystem::new();
    mem.set_uncached(true);
    let opts = Options { fs: Arc::new(mem.clone()), ..options(IndexKind::Lsm, usize::MAX, 2) };
    let db = Db::open("/db", opts.clone())?;
    for i in 0..100 {
        db.put(key(i), value_for(i, 1000))?;
    }
    db.flush()?;
    db.close()?;
    let table = mem.file_names(Path::new("/db")).into_iter().find(|n| n.ends_with(".sst")).expect("a table");
    let path = Path::new("/db").join(table);
    mem.flip_byte(&path, 10_000)?;
    // Reopened, so no block of the table is cached.
    let db = Db::open("/db", opts)?;
    for forward in [true, false] {
        let ctx = format!("forward {forward}");
        assert_damage_surfaces_alike(&db, forward, &ctx);
    }
    Ok(())
}

#[test]
fn short_scans_after_seeks_match() -> Result<()> {
    for kind in index_kinds() {
        for storage in [Storage::Os, Storage::Uncached] {
            short_scans_after_seeks(kind, storage)?;
        }
    }
    Ok(())
}

fn short_scans_after_seeks(kind: IndexKind, storage: Storage) -> Result<()> {
    // Like YCSB E: seek, then a few nexts; read-ahead starts and is abandoned constantly.
    let (db, _dir) = storage.open(options(kind, 0, 2))?;
    for i in 0..3000 {
        db.put(key(i * 2), value_for(i, 500))?;
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let mut it = db.iter(ReadOptions::default())?;
    for _ in 0..300 {
        let start = rng.gen_range(0..6000u64);
        it.seek(key(start))?;
        let first = start.div_ceil(2);
        for expected in first..first + rng.gen_range(1..100) {
            if expected >= 3000 {
                assert!(!it.valid(), "{kind:?} {storage:?}: cursor went past the last key");
                break;
            }
            assert_eq!(
                current(&it),
                Some((key(expected * 2), value_for(expected, 500))),
                "{kind:?} {storage:?}: seek to {start}"
            );
            it.next()?;
        }
    }
    Ok(())
}

#[test]
fn cursors_read_on_through_gc_relocations_and_overwrites() -> Result<()> {
    for kind in index_kinds() {
        for (storage, forward) in
            [(Storage::Os, true), (Storage::Os, false), (Storage::Uncached, true), (Storage::Uncached, false)]
        {
            cursors_read_on_through_gc(kind, storage, forward)?;
        }
    }
    Ok(())
}

fn cursors_read_on_through_gc(kind: IndexKind, storage: Storage, forward: bool) -> Result<()> {
    let (db, _dir) = storage.open(Options { background_gc: false, ..options(kind, 0, 3) })?;
    let n = 3000u64;
    // Half the keys overwritten once: every segment holds garbage and live values to move.
    for i in 0..n {
        db.put(key(i), value_for(i, 300))?;
    }
    for i in (0..n).step_by(2) {
        db.put(key(i), value_for(i + n, 300))?;
    }
    let expected: Vec<_> = (0..n).map(|i| (key(i), value_for(if i % 2 == 0 { i + n } else { i }, 300))).collect();
    let mut fast = db.iter(ReadOptions { prefetch: true, ..ReadOptions::default() })?;
    let mut plain = db.iter(ReadOptions { prefetch: false, ..ReadOptions::default() })?;
    let mut seen = [Vec::new(), Vec::new()];
    for (it, seen) in [&mut fast, &mut plain].into_iter().zip(&mut seen) {
        if forward {
            it.seek_to_first()?;
        } else {
            it.seek_to_last()?;
        }
        seen.push(current(it));
    }
    for step in 1..n {
        if step == 700 {
            // Overwrite a third of the keys and collect: GC relocates the live values of
            // the cursors' segments to new ones while both cursors are mid-scan.
            for i in (0..n).step_by(3) {
                db.put(key(i), b"overwritten")?;
            }
            let outcome = db.run_gc()?;
            assert!(outcome.records_relocated > 0, "{kind:?} {storage:?}: GC relocated nothing: {outcome:?}");
        }
        for (it, seen) in [&mut fast, &mut plain].into_iter().zip(&mut seen) {
            if forward {
                it.next()?;
            } else {
                it.prev()?;
            }
            seen.push(current(it));
        }
    }
    let [fast_seen, plain_seen] = seen;
    let mut want: Vec<_> = expected.into_iter().map(Some).collect();
    if !forward {
        want.reverse();
    }
    assert!(plain_seen == want, "{kind:?} {storage:?} forward {forward}: plain cursor differs from its snapshot");
    assert!(fast_seen == want, "{kind:?} {storage:?} forward {forward}: prefetching cursor differs from its snapshot");
    Ok(())
}

#[test]
fn read_ahead_stays_off_over_inline_values_and_resumes_at_separated_ones() -> Result<()> {
    // Long stretches of inline values (100 B) between shorter ones of separated values (2000 B,
    // over the 1 KiB threshold). Windows hold at most 4096 entries, so a stretch of 10,000
    // inline values ends well past the last window that reached into it.
    const STRETCHES: [(u64, usize); 4] = [(10_000, 100), (1_000, 2_000), (10_000, 100), (1_000, 2_000)];
    for storage in [Storage::Os, Storage::Uncached] {
        let (db, _dir) = storage.open(options(IndexKind::Lsm, 1024, 2))?;
        let mut model = Model::new();
        let mut stretch_ends = Vec::new();
        let mut i = 0u64;
        for (count, len) in STRETCHES {
            for _ in 0..count {
                let value = value_for(i, len);
                db.put(key(i), &value)?;
                model.insert(key(i), value);
                i += 1;
            }
            stretch_ends.push(i - 1);
        }
        db.flush()?;
        let mut it = db.iter(ReadOptions::default())?;
        it.seek_to_first()?;
        let mut seen = Vec::new();
        let mut reading_ahead_at_ends = Vec::new();
        while it.valid() {
            if stretch_ends.contains(&(seen.len() as u64)) {
                reading_ahead_at_ends.push(db.stats().memory.read_ahead_bytes > 0);
            }
            seen.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        assert!(seen == model.into_iter().collect::<Vec<_>>(), "{storage:?}: the scan differs from the model");
        assert_eq!(reading_ahead_at_ends, [false, true, false, true], "{storage:?}");
    }
    Ok(())
}
