//! Concurrent writers on the paths that apply write groups out of order and publish them in
//! sequence order: the hash mode's request shards, the LSM's group commit, which appends a
//! group and hands the lead on before it applies the group, and the LSM's plain writes, which
//! skip the write queue and commit on their own threads (`db::write`). Acknowledged writes
//! must be readable at once and survive a crash, a batch must stay atomic, and a snapshot must
//! read the same values however often it is read while groups commit. The LSM runs with a
//! 32 KiB memtable, so memtable switches (which need every appended group applied) and flushes
//! fall among the concurrent groups, and with background GC, whose relocations must see them
//! applied too.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{dump, key, small_options, value_for, CrashEnv, HASH_SHARDED};
use splitkv::{Db, IndexKind, Options, ReadOptions, Result, WriteBatch, WriteOptions};

/// The index kinds whose write groups commit beside one another.
const KINDS: [IndexKind; 2] = [IndexKind::Lsm, HASH_SHARDED];

fn options(kind: IndexKind) -> Options {
    Options { background_gc: kind == IndexKind::Lsm, ..small_options(kind, 1024) }
}

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 150;

/// The value writer `w` gives its key `i` in `round`.
fn writer_value(w: u64, i: u64, round: u64) -> Vec<u8> {
    value_for(w * 1_000_000 + i * 100 + round, 20 + (i % 200) as usize)
}

#[test]
fn concurrent_writers_read_their_writes_and_survive_reopen_and_crash() -> Result<()> {
    KINDS.into_iter().try_for_each(concurrent_writers_read_their_writes_and_survive_reopen_and_crash_with)
}

fn concurrent_writers_read_their_writes_and_survive_reopen_and_crash_with(kind: IndexKind) -> Result<()> {
    // No GC: its relocations would take sequence numbers too, and the count below is exact.
    let options = |kind| Options { background_gc: false, ..options(kind) };
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(options(kind)))?);
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<()> {
                for round in 0..3 {
                    for i in 0..KEYS_PER_WRITER {
                        let k = key(w * KEYS_PER_WRITER + i);
                        let v = writer_value(w, i, round);
                        db.put(&k, &v)?;
                        // Read-your-writes (for the sharded kind, through the key's shard).
                        assert_eq!(
                            db.get(&k)?.as_deref(),
                            Some(v.as_slice()),
                            "{kind:?}: writer {w} key {i} round {round}"
                        );
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
    let db = Db::open("/db", env.options(options(kind)))?;
    assert_eq!(dump(&db), expected);
    drop(db);
    let db = Db::open("/db", env.options(options(kind)))?;
    assert_eq!(dump(&db), expected);
    Ok(())
}

/// Plain writes commit on their writers' threads with no write queue, while sync writes and
/// flush requests still go through the queue (a sync write leads a group that shares one sync; a
/// flush freezes the memtable alone). Mixed, every acknowledged write must be readable at once,
/// each must get its own sequence number, and a crash after the last sync must lose nothing.
#[test]
fn sync_writes_and_flushes_interleave_with_writes_that_skip_the_queue() -> Result<()> {
    let options = Options { background_gc: false, ..options(IndexKind::Lsm) };
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(options.clone()))?);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<()> {
                for i in 0..KEYS_PER_WRITER {
                    let (k, v) = (key(w * KEYS_PER_WRITER + i), writer_value(w, i, 0));
                    let mut batch = WriteBatch::new();
                    batch.put(&k, &v);
                    db.write(&WriteOptions { sync: (i + w) % 5 == 0 }, batch)?;
                    assert_eq!(db.get(&k)?.as_deref(), Some(v.as_slice()), "writer {w} key {i}");
                }
                Ok(())
            })
        })
        .collect();
    let mut flushes = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        db.flush()?;
        flushes += 1;
    }
    for w in writers {
        w.join().expect("writer thread")?;
    }
    assert!(flushes > 0);
    let expected: BTreeMap<_, _> = (0..WRITERS)
        .flat_map(|w| (0..KEYS_PER_WRITER).map(move |i| (key(w * KEYS_PER_WRITER + i), writer_value(w, i, 0))))
        .collect();
    let expected: Vec<_> = expected.into_iter().collect();
    assert_eq!(dump(&db), expected);
    assert_eq!(db.property("splitkv.last-sequence"), Some((WRITERS * KEYS_PER_WRITER).to_string()));
    db.write(&WriteOptions { sync: true }, WriteBatch::new())?;
    let db = Arc::into_inner(db).expect("one handle left");
    env.crash(db, Some(5));
    let db = Db::open("/db", env.options(options))?;
    assert_eq!(dump(&db), expected);
    Ok(())
}

/// Batches set two keys to one value; single-key writes interleave (on the shards, or in other
/// groups). After any crash both keys of a pair must hold the same value (or both be absent): a
/// batch spanning shards, or applied beside other groups, is all-or-nothing.
#[test]
fn batches_stay_atomic_across_crashes_among_concurrent_writes() -> Result<()> {
    KINDS.into_iter().try_for_each(batches_stay_atomic_across_crashes_among_concurrent_writes_with)
}

fn batches_stay_atomic_across_crashes_among_concurrent_writes_with(kind: IndexKind) -> Result<()> {
    for seed in 0..12u64 {
        let env = CrashEnv::new();
        let db = Arc::new(Db::open("/db", env.options(options(kind)))?);
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
        let db = Db::open("/db", env.options(options(kind)))?;
        for i in 0..60u64 {
            let (a, b) = pair(i);
            let (va, vb) = (db.get(&a)?, db.get(&b)?);
            assert_eq!(va, vb, "{kind:?}, seed {seed}: pair {i} torn apart by the crash");
            // Round 1's synced batch made all of round 0 durable.
            assert!(va.is_some(), "{kind:?}, seed {seed}: pair {i} lost a synced write");
        }
    }
    Ok(())
}

/// Four writers keep several groups in flight at once, so a group can finish applying
/// before an older one; a snapshot must still read the same values every time it is read (a
/// group published ahead of an older, unapplied one would let the older one appear later).
#[test]
fn snapshots_taken_while_groups_commit_stay_stable() -> Result<()> {
    KINDS.into_iter().try_for_each(snapshots_taken_while_groups_commit_stay_stable_with)
}

fn snapshots_taken_while_groups_commit_stay_stable_with(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(options(kind)))?);
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
        let changed = first.iter().zip(&again).position(|(a, b)| a != b);
        assert!(changed.is_none(), "{kind:?}: a snapshot's read of key {changed:?} changed under concurrent commits");
        let scanned: Vec<_> = scanned.into_iter().map(|(_, v)| Some(v)).collect();
        let differs = (0..first.len().max(scanned.len())).find(|&i| first.get(i) != scanned.get(i));
        assert!(differs.is_none(), "{kind:?}: a snapshot's scan disagrees with its point reads at key {differs:?}");
        checked += 1;
    }
    for w in writers {
        w.join().expect("writer")?;
    }
    Ok(())
}
