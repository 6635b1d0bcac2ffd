//! Scenarios particular to the hash index (`IndexKind::Hash`): long keys confirmed against the
//! log, snapshots reading through version chains across GC relocations, tombstones kept for
//! older snapshots, growth under crashes, and refusing to open a database of the other kind.
//! Everything the two kinds share runs over `common::index_kinds()` in the other test files.

mod common;

use std::collections::BTreeMap;

use common::{dump, small_options, value_for, CrashEnv, HASH};
use splitkv::fs::{Fault, FaultKind};
use splitkv::{Db, Error, IndexKind, Options, ReadOptions, Result, WriteBatch, WriteOptions};

fn hash_options() -> Options {
    Options { background_gc: false, ..small_options(HASH, 1024) }
}

/// Keys longer than a slot holds inline, sharing their first 16 bytes (so only the stored hash,
/// or the log, tells them apart).
fn long_key(i: u64) -> Vec<u8> {
    format!("a-common-prefix-{}-{:0>width$}", i % 7, i, width = 20 + (i % 50) as usize).into_bytes()
}

#[test]
fn long_keys_sharing_a_prefix_are_told_apart_across_growth_crashes_and_reopens() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(hash_options()))?;
    let mut model = BTreeMap::new();
    for round in 0..3u64 {
        for i in 0..300u64 {
            let k = long_key(i);
            if (i + round) % 5 == 0 {
                db.delete(&k)?;
                model.remove(&k);
            } else {
                let v = value_for(round * 1000 + i, 10 + (i % 40) as usize);
                db.put(&k, &v)?;
                model.insert(k, v);
            }
        }
        db.flush()?;
    }
    db.write(&WriteOptions { sync: true }, WriteBatch::new())?;
    assert!(db.stats().hash_table.is_some_and(|t| t.growths > 0), "the 16-bucket table never grew");
    for (k, v) in &model {
        assert_eq!(db.get(k)?.as_deref(), Some(v.as_slice()));
    }
    assert_eq!(db.get(long_key(5000))?, None);
    assert_eq!(dump(&db), model.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>());
    env.crash(db, Some(7));
    let db = Db::open("/db", env.options(hash_options()))?;
    assert_eq!(dump(&db), model.into_iter().collect::<Vec<_>>());
    Ok(())
}

#[test]
fn snapshots_read_through_relocations_and_tombstones_until_released() -> Result<()> {
    let env = CrashEnv::new();
    let opts = Options { gc_garbage_ratio: 0.0, ..env.options(hash_options()) };
    let db = Db::open("/db", opts)?;
    let key = |i: u64| format!("k{i:04}").into_bytes();
    for i in 0..200 {
        db.put(key(i), value_for(i, 300))?;
    }
    let old = db.snapshot();
    for i in 0..200 {
        if i % 3 == 0 {
            db.delete(key(i))?;
        } else {
            db.put(key(i), value_for(1000 + i, 300))?;
        }
    }
    db.flush()?;
    let tombstones = db.stats().hash_table.map(|t| t.tombstones);
    assert_eq!(tombstones, Some(67), "deletes seen by an older snapshot keep tombstones");
    // GC relocates the current versions and keeps what the snapshot reads.
    let outcome = db.run_gc()?;
    assert!(outcome.bytes_relocated > 0, "nothing relocated: {outcome:?}");
    let at_old = ReadOptions { snapshot: Some(old.clone()), ..ReadOptions::default() };
    for i in 0..200 {
        assert_eq!(
            db.get_opt(&at_old, key(i))?.as_deref(),
            Some(value_for(i, 300).as_slice()),
            "key {i} at the snapshot"
        );
        let now = (i % 3 != 0).then(|| value_for(1000 + i, 300));
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), now, "key {i} now");
    }
    let mut it = db.iter(at_old)?;
    it.seek_to_first()?;
    let mut seen = 0;
    while it.valid() {
        assert_eq!(it.value(), value_for(seen, 300).as_slice());
        seen += 1;
        it.next()?;
    }
    assert_eq!(seen, 200);
    drop(it);
    drop(old);
    // With the reader gone, the next checkpoint drops the tombstones and GC frees what it held.
    db.put(b"another", b"write")?;
    db.flush()?;
    assert_eq!(db.stats().hash_table.map(|t| t.tombstones), Some(0));
    db.run_gc()?;
    for i in 0..200 {
        let now = (i % 3 != 0).then(|| value_for(1000 + i, 300));
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), now, "key {i} after release");
    }
    Ok(())
}

#[test]
fn a_failed_table_fence_poisons_writes_and_recovery_replays_the_batch() -> Result<()> {
    for torn_seed in 0..20u64 {
        let env = CrashEnv::new();
        let db = Db::open("/db", env.options(hash_options()))?;
        let key = |i: u64| format!("key{i:05}").into_bytes();
        let sync = WriteOptions { sync: true };
        for i in 0..100 {
            db.put_opt(&sync, key(i), value_for(i, 50))?;
        }
        db.flush()?;
        for i in 0..100 {
            db.put_opt(&sync, key(i), value_for(500 + i, 50))?;
        }
        // The checkpoint's first or second fence fails: the batch is half on the medium.
        env.fault.inject(Fault::new(FaultKind::Sync).on_path("HASHINDEX").after(torn_seed % 2).persistent());
        assert!(db.flush().is_err(), "seed {torn_seed}: a failed fence must fail the checkpoint");
        let err = db.put(b"later", b"write").expect_err("writes after a failed fence");
        assert!(matches!(err, Error::Poisoned(_)), "seed {torn_seed}: {err}");
        env.crash(db, Some(torn_seed));
        let db = Db::open("/db", env.options(hash_options()))?;
        for i in 0..100 {
            assert_eq!(
                db.get(key(i))?.as_deref(),
                Some(value_for(500 + i, 50).as_slice()),
                "seed {torn_seed}: key {i}"
            );
        }
        assert_eq!(db.stats().hash_table.map(|t| t.entries), Some(100));
    }
    Ok(())
}

#[test]
fn a_database_opens_only_with_the_index_kind_it_was_created_with() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/lsm", env.options(small_options(IndexKind::Lsm, 1024)))?;
    db.put(b"k", b"v")?;
    db.flush()?;
    drop(db);
    let err = Db::open("/lsm", env.options(hash_options())).expect_err("an LSM database opened as hash");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    let db = Db::open("/hash", env.options(hash_options()))?;
    db.put(b"k", b"v")?;
    drop(db);
    let err = Db::open("/hash", env.options(small_options(IndexKind::Lsm, 1024))).expect_err("hash opened as LSM");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    Ok(())
}

/// Regression: GC relocated long keys (into `recent`) and released their old records while the
/// table still named them; after a reopen, iterating (which every open now does for the keyspace
/// catalog) read those records to learn the slots' keys and failed with "pointer into a segment
/// that is not live", and the next checkpoint failed the same way confirming the slots it replaced.
#[test]
fn long_key_slots_whose_records_gc_released_do_not_break_reopen_iteration_or_checkpoints() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let long = |i: u64| format!("a-key-longer-than-a-hash-slot-holds-{i:04}").into_bytes();
    let db = Db::open(tmp.path(), hash_options())?;
    for i in 0..200 {
        db.put(long(i), format!("value {i}"))?;
    }
    for i in 0..50 {
        db.delete(long(i))?;
    }
    db.flush()?;
    let outcome = db.run_gc()?;
    assert!(!outcome.segments_released.is_empty() && outcome.records_relocated > 0, "{outcome:?}");
    drop(db);

    let db = Db::open(tmp.path(), hash_options())?;
    assert_eq!(db.range::<&[u8], _>(..)?.count(), 150);
    db.put("more", "x")?;
    db.flush()?;
    db.run_gc()?;
    drop(db);
    let db = Db::open(tmp.path(), hash_options())?;
    for i in 0..200 {
        assert_eq!(db.get(long(i))?.is_some(), i >= 50, "key {i}");
    }
    assert_eq!(db.range::<&[u8], _>(..)?.count(), 151);
    Ok(())
}
