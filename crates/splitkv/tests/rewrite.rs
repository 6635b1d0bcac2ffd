//! The key-order rewrite of the value log (`Db::rewrite_value_log`) and key-order GC
//! (`gc_rewrite_order`): every key reads back the same, scans are unchanged, snapshots held
//! across a rewrite keep their view, concurrent writers win, the old segments go, and the hash
//! index refuses the rewrite. Crashes during a rewrite are covered by `gc.rs`'s
//! crash-at-every-I/O-point test and the CLI's real-kill test.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{assert_same, dump, key, small_options, value_for, HASH};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use splitkv::{Db, Error, GcRewriteOrder, IndexKind, Options, ReadOptions, Result};

fn options() -> Options {
    Options { value_threshold: 256, background_gc: false, ..small_options(IndexKind::Lsm, 256) }
}

/// The model after a random load of `keys` keys (in shuffled order), with a mix of separated
/// and inline values, some overwrites and some deletes.
fn random_load(db: &Db, keys: u64, rng: &mut StdRng) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut model = BTreeMap::new();
    let mut order: Vec<u64> = (0..keys).collect();
    for round in 0..2u64 {
        order.shuffle(rng);
        for &k in &order {
            let len = if rng.gen_bool(0.2) { 40 } else { 700 };
            let value = value_for(round * keys + k, len);
            db.put(key(k), &value)?;
            model.insert(key(k), value);
        }
    }
    for _ in 0..keys / 10 {
        let k = key(rng.gen_range(0..keys));
        db.delete(&k)?;
        model.remove(&k);
    }
    Ok(model)
}

/// Every key's expected value.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A fresh database in a temporary directory after [`random_load`] with `seed`.
fn loaded(seed: u64, keys: u64, opts: Options) -> Result<(tempfile::TempDir, Db, Model)> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), opts)?;
    let model = random_load(&db, keys, &mut StdRng::seed_from_u64(seed))?;
    Ok((dir, db, model))
}

/// Every entry from the iterator's current position on, forward or backward.
fn walk(it: &mut splitkv::DbIterator, backward: bool) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut seen = Vec::new();
    while it.valid() {
        seen.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    Ok(seen)
}

fn model_entries(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn check_model(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u64, ctx: &str) -> Result<()> {
    for k in 0..keys {
        let got = db.get(key(k))?.map(|v| v.to_vec());
        assert_eq!(got.as_ref(), model.get(&key(k)), "{ctx}: key {k}");
    }
    assert_same(&dump(db), &model_entries(model), ctx);
    // A bounded scan in the middle, and one backwards.
    let (lo, hi) = (key(keys / 4), key(keys / 2));
    let ranged: Vec<(Vec<u8>, Vec<u8>)> =
        db.range(lo.clone()..hi.clone())?.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_>>()?;
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_same(&ranged, &expected, &format!("{ctx}: range scan"));
    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_last()?;
    let mut backwards = walk(&mut it, true)?;
    backwards.reverse();
    assert_same(&backwards, &model_entries(model), &format!("{ctx}: reverse scan"));
    Ok(())
}

#[test]
fn rewrite_keeps_every_key_and_scan_and_frees_the_old_segments() -> Result<()> {
    let (dir, db, model) = loaded(1, 600, options())?;
    let segments_before: Vec<u64> = db.stats().segments.iter().map(|s| s.id).collect();
    let outcome = db.rewrite_value_log(None, None)?;
    assert!(outcome.records_rewritten > 0 && outcome.bytes_rewritten > 0, "{outcome:?}");
    assert_eq!(outcome.records_visited, outcome.records_rewritten, "{outcome:?}");
    assert!(!outcome.stopped_at_space_budget);
    let left: Vec<u64> = db.stats().segments.iter().map(|s| s.id).collect();
    // Every segment written before the rewrite held only values the rewrite moved or garbage.
    assert!(
        segments_before.iter().filter(|id| left.contains(id)).count() <= 1,
        "old segments left: before {segments_before:?}, after {left:?}, {outcome:?}"
    );
    check_model(&db, &model, 600, "after the rewrite")?;
    // A second rewrite and GC change nothing visible, and the database reopens to the same.
    db.rewrite_value_log(None, None)?;
    db.run_gc()?;
    check_model(&db, &model, 600, "after a second rewrite")?;
    db.close()?;
    let db = Db::open(dir.path(), options())?;
    check_model(&db, &model, 600, "after reopening")?;
    Ok(())
}

#[test]
fn snapshots_and_iterators_held_across_a_rewrite_keep_their_view() -> Result<()> {
    let (_dir, db, first) = loaded(2, 400, options())?;
    let snapshot = db.snapshot();
    let mut it = db.iter(ReadOptions::default())?;
    let mut current = first.clone();
    for k in (0..400).step_by(3) {
        let value = value_for(90_000 + k, 700);
        db.put(key(k), &value)?;
        current.insert(key(k), value);
    }
    db.rewrite_value_log(None, None)?;
    let held = db.stats().vlog_bytes();
    check_model(&db, &current, 400, "current view after the rewrite")?;
    // The snapshot and the iterator opened before the rewrite still see the first load.
    let at_snapshot = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
    for k in 0..400 {
        let got = db.get_opt(&at_snapshot, key(k))?.map(|v| v.to_vec());
        assert_eq!(got.as_ref(), first.get(&key(k)), "snapshot key {k}");
    }
    let snapshot_scan: Vec<(Vec<u8>, Vec<u8>)> = db
        .range_opt::<&[u8], _>(at_snapshot.clone(), ..)?
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_>>()?;
    assert_same(&snapshot_scan, &model_entries(&first), "scan at the snapshot");
    it.seek_to_first()?;
    let seen = walk(&mut it, false)?;
    assert_same(&seen, &model_entries(&first), "iterator opened before the rewrite");
    drop(it);
    drop(at_snapshot);
    // Once the readers are gone, GC frees what they held.
    db.run_gc()?;
    assert!(db.stats().vlog_bytes() < held, "log did not shrink once the readers were gone");
    check_model(&db, &current, 400, "after the readers were dropped")?;
    Ok(())
}

#[test]
fn a_range_rewrite_moves_only_its_keys() -> Result<()> {
    let (_dir, db, model) = loaded(3, 500, options())?;
    let (lo, hi) = (key(100), key(199));
    let outcome = db.rewrite_value_log(Some(&lo), Some(&hi))?;
    let separated_in_range = model.range(lo.clone()..=hi.clone()).filter(|(_, v)| v.len() >= 256).count() as u64;
    assert_eq!(outcome.records_rewritten, separated_in_range, "{outcome:?}");
    // Only segments left without a live record are cleaned (the first load's, which the second
    // overwrote): the other keys' values stay where they are, nothing is copied in log order.
    assert_eq!(outcome.gc.records_relocated, 0, "{outcome:?}");
    check_model(&db, &model, 500, "after a range rewrite")?;
    Ok(())
}

#[test]
fn concurrent_writes_win_over_the_rewrite() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Arc::new(Db::open(dir.path(), options())?);
    let mut rng = StdRng::seed_from_u64(4);
    let mut model = random_load(&db, 500, &mut rng)?;
    let writer_db = Arc::clone(&db);
    let writer = std::thread::spawn(move || -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut written = Vec::new();
        for round in 0..3u64 {
            for k in (0..500u64).rev().step_by(7) {
                let value = value_for(1_000_000 + round * 1000 + k, 700);
                writer_db.put(key(k), &value)?;
                written.push((key(k), value));
            }
        }
        Ok(written)
    });
    for _ in 0..3 {
        db.rewrite_value_log(None, None)?;
    }
    let written = writer.join().expect("writer thread")?;
    for (k, v) in written {
        model.insert(k, v);
    }
    check_model(&db, &model, 500, "after rewrites beside a writer")?;
    Ok(())
}

#[test]
fn key_order_gc_keeps_every_value() -> Result<()> {
    let opts = Options { gc_rewrite_order: GcRewriteOrder::Key, ..options() };
    let (dir, db, model) = loaded(5, 600, opts.clone())?;
    let outcome = db.run_gc()?;
    assert!(outcome.records_relocated > 0, "{outcome:?}");
    check_model(&db, &model, 600, "after key-order GC")?;
    db.close()?;
    let db = Db::open(dir.path(), opts)?;
    check_model(&db, &model, 600, "after reopening")?;
    Ok(())
}

#[test]
fn the_hash_index_refuses_the_rewrite() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options { background_gc: false, ..small_options(HASH, 256) })?;
    db.put(b"k", vec![7u8; 700])?;
    match db.rewrite_value_log(None, None) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("hash index"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(db.get(b"k")?.as_deref(), Some(&[7u8; 700][..]));
    Ok(())
}
