//! Keyspaces: isolation from each other and from the default keyspace, the reserved prefix,
//! persistence across reopens and crashes, batches spanning keyspaces, and drops (O(1) in the
//! LSM: the keyspace's tables are dropped whole), under every index kind.

mod common;

use common::{index_kinds, key, matrix, small_options, value_for, CrashEnv};
use splitkv::{Db, Error, Keyspace, ReadOptions, Result, WriteBatch, WriteOptions};

fn entries(ks: &Keyspace<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.range::<&[u8], _>(..).expect("range").map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item")).collect()
}

fn backward_keys(ks: &Keyspace<'_>) -> Result<Vec<Vec<u8>>> {
    let mut it = ks.iter(ReadOptions::default())?;
    it.seek_to_last()?;
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.prev()?;
    }
    Ok(keys)
}

fn expected(range: std::ops::Range<u64>, salt: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    range.map(|i| (key(i), value_for(i + salt, 300))).collect()
}

fn load(ks: &Keyspace<'_>, range: std::ops::Range<u64>, salt: u64) -> Result<()> {
    for i in range {
        ks.put(key(i), value_for(i + salt, 300))?;
    }
    Ok(())
}

fn is_invalid_argument<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

/// The same keys in two keyspaces and the default one stay apart for get, scans both ways,
/// seeks, bounds and range deletes, in the memtable and after flushes and compactions.
#[test]
fn keyspaces_are_isolated() -> Result<()> {
    for case in matrix() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), case.options())?;
        let (a, b) = (db.keyspace("a")?, db.keyspace("b")?);
        for i in 0..200 {
            db.put(key(i), value_for(i, 300))?;
        }
        load(&a, 0..200, 1000)?;
        load(&b, 100..300, 2000)?;
        for phase in ["memtable", "flushed", "compacted"] {
            match phase {
                "flushed" => db.flush()?,
                "compacted" => db.compact_range(None, None)?,
                _ => {}
            }
            let what = format!("{case}, {phase}");
            assert_eq!(common::dump(&db), expected(0..200, 0), "{what}: default keyspace");
            assert_eq!(entries(&a), expected(0..200, 1000), "{what}: a");
            assert_eq!(entries(&b), expected(100..300, 2000), "{what}: b");
            let mut keys_b: Vec<_> = (100..300).map(key).collect();
            keys_b.reverse();
            assert_eq!(backward_keys(&b)?, keys_b, "{what}: b backward");
            assert_eq!(a.get(key(150))?.as_deref(), Some(&value_for(1150, 300)[..]), "{what}");
            assert_eq!(a.get(key(250))?, None, "{what}");
            let got = a.multi_get(&ReadOptions::default(), &[key(150), key(250), key(10)])?;
            let want = [Some(value_for(1150, 300)), None, Some(value_for(1010, 300))];
            assert_eq!(got.iter().map(|v| v.as_deref().map(<[u8]>::to_vec)).collect::<Vec<_>>(), want, "{what}");
            assert_eq!(b.get(key(250))?.as_deref(), Some(&value_for(2250, 300)[..]), "{what}");
            let mut it = a.iter(ReadOptions { upper_bound: Some(key(60)), ..ReadOptions::default() })?;
            it.seek(key(50))?;
            let mut seen = Vec::new();
            while it.valid() {
                seen.push(it.key().to_vec());
                it.next()?;
            }
            assert_eq!(seen, (50..60).map(key).collect::<Vec<_>>(), "{what}: bounded seek in a");
            let inner: Vec<_> =
                b.range(key(120)..=key(122))?.map(|r| r.map(|(k, _)| k.to_vec())).collect::<Result<_>>()?;
            assert_eq!(inner, vec![key(120), key(121), key(122)], "{what}: range in b");
        }
        // A range delete in one keyspace leaves the others alone, and so does the default one's
        // widest delete.
        a.delete_range(key(0), key(100))?;
        db.delete_range(b"", [0xFFu8; 8])?;
        assert_eq!(common::dump(&db), Vec::new(), "{case}: default after its delete");
        assert_eq!(entries(&a), expected(100..200, 1000), "{case}: a after its delete");
        assert_eq!(entries(&b), expected(100..300, 2000), "{case}: b untouched");
        a.delete(key(150))?;
        assert_eq!(a.get(key(150))?, None, "{case}");
        assert_eq!(db.keyspace_names(), vec!["a".to_string(), "b".to_string()], "{case}");
        assert_eq!(db.property("splitkv.keyspaces").as_deref(), Some("a\nb"), "{case}");
        assert!(db.existing_keyspace("c").is_none(), "{case}: looking does not create");
        assert_eq!(db.existing_keyspace("b").map(|k| k.name().to_string()).as_deref(), Some("b"), "{case}");
    }
    Ok(())
}

/// Keys that begin with the keyspace mark are refused by the default keyspace, which never
/// shows a keyspace's keys.
#[test]
fn the_default_keyspace_refuses_reserved_keys() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), small_options(splitkv::IndexKind::Lsm, 1024))?;
    let ks = db.keyspace("k")?;
    ks.put(b"x", b"1")?;
    let reserved = [0xFFu8, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1, b'x'];
    assert!(is_invalid_argument(db.put(reserved, b"2")));
    assert!(is_invalid_argument(db.get(reserved)));
    assert!(is_invalid_argument(db.delete(reserved)));
    assert!(is_invalid_argument(db.delete_range(reserved, [0xFFu8; 12])));
    let mut batch = WriteBatch::new();
    batch.put(b"fine", b"1").put(reserved, b"2");
    assert!(is_invalid_argument(db.write(&WriteOptions::default(), batch)));
    assert_eq!(db.get(b"fine")?, None, "a refused batch writes nothing");
    db.put([0xFFu8, 0xFF, 0xFF], b"just below")?;
    let mut it = db.iter(ReadOptions { upper_bound: Some(vec![0xFF; 9]), ..ReadOptions::default() })?;
    it.seek_to_last()?;
    assert_eq!(it.key(), &[0xFFu8, 0xFF, 0xFF][..]);
    it.seek(reserved)?;
    assert!(!it.valid(), "the default keyspace ends at the mark");
    assert_eq!(ks.get(b"x")?.as_deref(), Some(&b"1"[..]));
    assert!(db.keyspace("").is_err() && db.keyspace(&"n".repeat(257)).is_err(), "name limits");
    Ok(())
}

/// One batch writes to the default keyspace and two others atomically; a crash keeps all of
/// it or none, and keyspaces (names, ids, data) survive reopens and crashes.
#[test]
fn batches_span_keyspaces_and_keyspaces_persist() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let options = env.options(small_options(kind, 64));
        let db = Db::open("/db", options.clone())?;
        let (a, b) = (db.keyspace("a")?, db.keyspace("b")?);
        let mut batch = WriteBatch::new();
        batch.put(b"plain", b"0").put_in(&a, b"k", b"1").put_in(&b, b"k", b"2").delete_in(&a, b"gone");
        db.write(&WriteOptions { sync: true }, batch)?;
        let mut unsynced = WriteBatch::new();
        unsynced.put_in(&a, b"late", b"3").put_in(&b, b"late", b"4").put(b"late", b"5");
        db.write(&WriteOptions::default(), unsynced)?;
        let _ = (a, b);
        env.crash(db, Some(7));
        let db = Db::open("/db", options.clone())?;
        assert_eq!(db.keyspace_names(), vec!["a".to_string(), "b".to_string()], "{kind:?}");
        let (a, b) = (db.keyspace("a")?, db.keyspace("b")?);
        assert_eq!(db.get(b"plain")?.as_deref(), Some(&b"0"[..]), "{kind:?}");
        assert_eq!(a.get(b"k")?.as_deref(), Some(&b"1"[..]), "{kind:?}");
        assert_eq!(b.get(b"k")?.as_deref(), Some(&b"2"[..]), "{kind:?}");
        let late = [a.get(b"late")?.is_some(), b.get(b"late")?.is_some(), db.get(b"late")?.is_some()];
        assert!(late == [true; 3] || late == [false; 3], "{kind:?}: half a batch survived: {late:?}");
        // A keyspace created after the reopen gets a new id: its keys are its own.
        let c = db.keyspace("c")?;
        assert_eq!(c.get(b"k")?, None, "{kind:?}");
        c.put(b"k", b"c")?;
        drop((a, b, c));
        drop(db);
        let db = Db::open("/db", options)?;
        assert_eq!(db.keyspace("c")?.get(b"k")?.as_deref(), Some(&b"c"[..]), "{kind:?}");
        assert_eq!(db.keyspace("a")?.get(b"k")?.as_deref(), Some(&b"1"[..]), "{kind:?}");
    }
    Ok(())
}

/// Dropping a keyspace removes all of it in one write, leaves the others alone, turns its
/// handles and batches naming it into errors, and lets the name start afresh; in the LSM its
/// flushed tables are dropped whole, without a compaction.
#[test]
fn dropping_a_keyspace() -> Result<()> {
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), small_options(kind, 64))?;
        let (a, b) = (db.keyspace("a")?, db.keyspace("b")?);
        load(&a, 0..400, 1)?;
        load(&b, 0..400, 2)?;
        db.flush()?;
        db.compact_range(None, None)?;
        load(&a, 400..500, 1)?; // in the memtable
        let tables_before = db.stats().levels.iter().map(|l| l.files).sum::<usize>();
        let mut pending = WriteBatch::new();
        pending.put_in(&a, b"after", b"x");
        assert!(db.drop_keyspace("a")?, "{kind:?}");
        assert!(!db.drop_keyspace("a")?, "{kind:?}: a second drop finds nothing");
        assert!(is_invalid_argument(a.get(key(1))), "{kind:?}: a dropped keyspace's handle");
        assert!(is_invalid_argument(a.put(key(1), b"x")), "{kind:?}");
        assert!(is_invalid_argument(db.write(&WriteOptions::default(), pending)), "{kind:?}: a batch naming it");
        assert_eq!(entries(&b), expected(0..400, 2), "{kind:?}: b untouched");
        assert_eq!(db.keyspace_names(), vec!["b".to_string()], "{kind:?}");
        let again = db.keyspace("a")?;
        assert_eq!(entries(&again), Vec::new(), "{kind:?}: a new keyspace under the old name starts empty");
        if kind == splitkv::IndexKind::Lsm {
            let stats = db.stats();
            let tables_after = stats.levels.iter().map(|l| l.files).sum::<usize>();
            assert!(stats.tables_dropped_by_range_deletes > 0, "{kind:?}: no table dropped whole");
            assert!(tables_after < tables_before, "{kind:?}: {tables_after} tables, {tables_before} before");
        }
        drop((b, again));
        drop(db);
        let db = Db::open(dir.path(), small_options(kind, 64))?;
        assert_eq!(db.keyspace_names(), vec!["a".to_string(), "b".to_string()], "{kind:?}");
        assert_eq!(entries(&db.keyspace("a")?), Vec::new(), "{kind:?}: after reopen");
        assert_eq!(entries(&db.keyspace("b")?), expected(0..400, 2), "{kind:?}: after reopen");
    }
    Ok(())
}

/// A snapshot is one view of every keyspace.
#[test]
fn snapshots_span_keyspaces() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), small_options(splitkv::IndexKind::Lsm, 64))?;
    let a = db.keyspace("a")?;
    a.put(b"k", b"old")?;
    db.put(b"k", b"old")?;
    let snap = db.snapshot();
    a.put(b"k", b"new")?;
    a.delete_range(b"a", b"z")?;
    db.put(b"k", b"new")?;
    let at = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
    assert_eq!(a.get_opt(&at, b"k")?.as_deref(), Some(&b"old"[..]));
    assert_eq!(db.get_opt(&at, b"k")?.as_deref(), Some(&b"old"[..]));
    assert_eq!(a.get(b"k")?, None);
    let seen: Vec<_> =
        a.range_opt::<&[u8], _>(at, ..)?.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_>>()?;
    assert_eq!(seen, vec![(b"k".to_vec(), b"old".to_vec())]);
    Ok(())
}

/// Writers racing a drop either land before it (the drop waits for those in flight, and
/// removes them) or fail with `InvalidArgument`; the name then starts afresh.
#[test]
fn writes_racing_a_drop() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), small_options(splitkv::IndexKind::Lsm, 64))?;
    for round in 0..5 {
        let ks = db.keyspace("racy")?;
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut ok = 0;
                for i in 0..2000u64 {
                    match ks.put(key(i), b"v") {
                        Ok(()) => ok += 1,
                        Err(Error::InvalidArgument(_)) => break,
                        Err(e) => panic!("round {round}: {e}"),
                    }
                }
                ok
            });
            std::thread::yield_now();
            assert!(db.drop_keyspace("racy").expect("drop"));
            writer.join().expect("writer");
        });
        let fresh = db.keyspace("racy")?;
        assert_eq!(entries(&fresh), Vec::new(), "round {round}");
        drop(fresh);
        assert!(db.drop_keyspace("racy")?);
    }
    Ok(())
}
