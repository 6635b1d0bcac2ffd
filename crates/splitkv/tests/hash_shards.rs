//! Scenarios particular to the hash mode's request shards (`IndexKind::Hash { shards: 2.. }`):
//! concurrent writers over several shards, batches that span shards staying atomic across
//! crashes, snapshots taken while shard workers commit, and the completion handles of
//! `submit_write` / `submit_get`. The shared scenarios and the model test run the sharded kind
//! too, through `common::index_kinds()` and `common::matrix()`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{dump, key, small_options, value_for, CrashEnv, HASH_SHARDED};
use splitkv::{Db, Options, ReadOptions, Result, WriteBatch, WriteOptions};

fn sharded_options() -> Options {
    Options { background_gc: false, ..small_options(HASH_SHARDED, 1024) }
}

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 150;

/// The value writer `w` gives its key `i` in `round`.
fn writer_value(w: u64, i: u64, round: u64) -> Vec<u8> {
    value_for(w * 1_000_000 + i * 100 + round, 20 + (i % 200) as usize)
}

#[test]
fn concurrent_writers_over_shards_read_their_writes_and_survive_reopen_and_crash() -> Result<()> {
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(sharded_options()))?);
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<()> {
                for round in 0..3 {
                    for i in 0..KEYS_PER_WRITER {
                        let k = key(w * KEYS_PER_WRITER + i);
                        let v = writer_value(w, i, round);
                        db.put(&k, &v)?;
                        // Read-your-writes through the key's shard.
                        assert_eq!(db.get(&k)?.as_deref(), Some(v.as_slice()), "writer {w} key {i} round {round}");
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread")?;
    }
    let expected: Vec<_> = (0..WRITERS)
        .flat_map(|w| (0..KEYS_PER_WRITER).map(move |i| (key(w * KEYS_PER_WRITER + i), writer_value(w, i, 2))))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    assert_eq!(dump(&db), expected);
    // Every write got its own sequence number, and all of them are published.
    assert_eq!(db.property("splitkv.last-sequence"), Some((WRITERS * KEYS_PER_WRITER * 3).to_string()));
    db.write(&WriteOptions { sync: true }, WriteBatch::new())?;
    let db = Arc::into_inner(db).expect("one handle left");
    env.crash(db, Some(11));
    let db = Db::open("/db", env.options(sharded_options()))?;
    assert_eq!(dump(&db), expected);
    drop(db);
    let db = Db::open("/db", env.options(sharded_options()))?;
    assert_eq!(dump(&db), expected);
    Ok(())
}

/// Batches set two keys to one value; single-key writes interleave on the shards. After any
/// crash both keys of a pair must hold the same value (or both be absent): a batch spanning
/// shards is all-or-nothing.
#[test]
fn batches_spanning_shards_stay_atomic_across_crashes() -> Result<()> {
    for seed in 0..12u64 {
        let env = CrashEnv::new();
        let db = Arc::new(Db::open("/db", env.options(sharded_options()))?);
        let pair = |i: u64| (format!("pair-a-{i:04}").into_bytes(), format!("pair-b-{i:04}").into_bytes());
        let single = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<()> {
                for i in 0..400u64 {
                    db.put(key(i % 97), value_for(seed ^ i, 300))?;
                }
                Ok(())
            })
        };
        for round in 0..4u64 {
            for i in 0..60u64 {
                let (a, b) = pair(i);
                let v = value_for(seed * 1000 + round * 100 + i, 50 + (i % 7) as usize * 300);
                let mut batch = WriteBatch::new();
                batch.put(&a, &v);
                batch.put(&b, &v);
                db.write(&WriteOptions { sync: i == 30 && round == 1 }, batch)?;
            }
        }
        single.join().expect("single-key writer")?;
        let db = Arc::into_inner(db).expect("one handle left");
        env.crash(db, Some(seed));
        let db = Db::open("/db", env.options(sharded_options()))?;
        for i in 0..60u64 {
            let (a, b) = pair(i);
            let (va, vb) = (db.get(&a)?, db.get(&b)?);
            assert_eq!(va, vb, "seed {seed}: pair {i} torn apart by the crash");
            // Round 1's synced batch made all of round 0 durable.
            assert!(va.is_some(), "seed {seed}: pair {i} lost a synced write");
        }
    }
    Ok(())
}

/// Four writers keep several shard groups in flight at once, so a group can finish applying
/// before an older one; a snapshot must still read the same values every time it is read (a
/// group published ahead of an older, unapplied one would let the older one appear later).
#[test]
fn snapshots_taken_while_shards_commit_stay_stable() -> Result<()> {
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(sharded_options()))?);
    const KEYS: u64 = 200;
    for i in 0..KEYS {
        db.put(key(i), value_for(i, 100))?;
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<()> {
                for round in 1..=20u64 {
                    for i in (w..KEYS).step_by(WRITERS as usize) {
                        db.put(key(i), value_for(round * 1000 + i, 100))?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut checked = 0;
    while writers.iter().any(|w| !w.is_finished()) || checked < 3 {
        let snapshot = db.snapshot();
        let opts = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
        let first: Vec<_> = (0..KEYS).map(|i| db.get_opt(&opts, key(i))).collect::<Result<_>>()?;
        let scanned: Vec<_> = db.range_opt::<&[u8], _>(opts.clone(), ..)?.collect::<Result<Vec<_>>>()?;
        let again: Vec<_> = (0..KEYS).map(|i| db.get_opt(&opts, key(i))).collect::<Result<_>>()?;
        assert_eq!(first, again, "a snapshot's point reads changed under concurrent shard commits");
        let scanned: Vec<_> = scanned.into_iter().map(|(_, v)| Some(v)).collect();
        assert_eq!(scanned, first, "a snapshot's scan disagrees with its point reads");
        checked += 1;
    }
    for w in writers {
        w.join().expect("writer")?;
    }
    Ok(())
}

#[test]
fn submitted_requests_complete_through_their_handles() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(sharded_options()))?;
    let handles: Vec<_> = (0..300u64)
        .map(|i| {
            let mut batch = WriteBatch::new();
            batch.put(key(i), value_for(i, 64));
            db.submit_write(&WriteOptions::default(), batch)
        })
        .collect();
    for h in handles {
        h.wait()?;
    }
    let reads: Vec<_> = (0..300u64).map(|i| db.submit_get(&ReadOptions::default(), key(i))).collect();
    for (i, h) in reads.into_iter().enumerate() {
        assert_eq!(h.wait()?.as_deref(), Some(value_for(i as u64, 64).as_slice()));
    }
    // Without shards the handles come back already complete.
    drop(db);
    let db = Db::open("/db2", env.options(Options { background_gc: false, ..small_options(common::HASH, 1024) }))?;
    let h = db.submit_write(&WriteOptions::default(), {
        let mut b = WriteBatch::new();
        b.put("k", "v");
        b
    });
    assert!(h.is_done());
    h.wait()?;
    assert_eq!(db.submit_get(&ReadOptions::default(), "k").wait()?.as_deref(), Some(&b"v"[..]));
    Ok(())
}
