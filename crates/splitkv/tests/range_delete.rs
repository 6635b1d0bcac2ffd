//! Range deletes and partitions: a delete hides keys wherever their versions live (memtable,
//! level 0, deeper levels), snapshots taken before it still see them, writes after it survive,
//! compaction drops what it covers, whole partitions are dropped without being read, and a
//! crash or a failed MANIFEST write around the drop never exposes half a delete.

mod common;

use common::{dump, index_kinds, key, lsm_matrix, small_options, value_for, CrashEnv};
use splitkv::fs::{Fault, FaultKind};
use splitkv::{Db, IndexKind, Options, ReadOptions, Result, WriteBatch, WriteOptions};

const N: u64 = 600;

fn expected(present: impl Fn(u64) -> bool, value_len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..N).filter(|&i| present(i)).map(|i| (key(i), value_for(i, value_len))).collect()
}

fn load(db: &Db, range: std::ops::Range<u64>, value_len: usize) -> Result<()> {
    for i in range {
        db.put(key(i), value_for(i, value_len))?;
    }
    Ok(())
}

fn reversed(db: &Db, opts: ReadOptions) -> Result<Vec<Vec<u8>>> {
    let mut it = db.iter(opts)?;
    it.seek_to_last()?;
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.prev()?;
    }
    Ok(keys)
}

/// Versions in the deepest level, level 0 and the memtable are all hidden; gets, forward and
/// backward scans agree; a snapshot from before the delete sees everything; a key written after
/// the delete survives; compaction and a reopen change nothing.
#[test]
fn a_range_delete_hides_versions_at_every_level() -> Result<()> {
    for case in lsm_matrix() {
        let dir = tempfile::tempdir()?;
        let opts = case.options();
        let db = Db::open(dir.path(), opts.clone())?;
        load(&db, 0..N, 200)?;
        db.flush()?;
        db.compact_range(None, None)?;
        load(&db, 200..300, 200)?; // overwrites, flushed to level 0
        db.flush()?;
        load(&db, 250..350, 200)?; // overwrites, in the memtable
        let before = db.snapshot();
        db.delete_range(key(100), key(400))?;
        db.put(key(150), value_for(150, 200))?;
        let alive = |i: u64| !(100..400).contains(&i) || i == 150;

        let check = |db: &Db, what: &str| -> Result<()> {
            assert_eq!(dump(db), expected(alive, 200), "{case}: scan {what}");
            for i in [0, 99, 100, 150, 151, 299, 399, 400, N - 1] {
                let want = alive(i).then(|| value_for(i, 200));
                assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), want, "{case}: get {i} {what}");
            }
            let mut back = reversed(db, ReadOptions::default())?;
            back.reverse();
            assert_eq!(back, expected(alive, 200).into_iter().map(|(k, _)| k).collect::<Vec<_>>(), "{case}: {what}");
            Ok(())
        };
        check(&db, "after the delete")?;
        let old = ReadOptions { snapshot: Some(before.clone()), ..ReadOptions::default() };
        assert_eq!(db.get_opt(&old, key(200))?.map(|v| v.to_vec()), Some(value_for(200, 200)), "{case}");
        assert_eq!(reversed(&db, old.clone())?.len() as u64, N, "{case}: snapshot scan");

        db.flush()?;
        db.compact_range(None, None)?;
        check(&db, "after compaction with a snapshot")?;
        assert_eq!(reversed(&db, old)?.len() as u64, N, "{case}: the snapshot keeps its versions");
        drop(before);
        db.compact_range(None, None)?;
        check(&db, "after compaction")?;
        assert_eq!(
            db.stats().range_deletes,
            0,
            "{case}: a delete covering nothing is retired: {}\n{}",
            db.property("splitkv.range-deletes").unwrap(),
            db.property("splitkv.sstables").unwrap()
        );
        db.close()?;
        let db = Db::open(dir.path(), opts)?;
        check(&db, "after reopen")?;
    }
    Ok(())
}

/// A delete still in the memtable survives a reopen (replayed from the log) and a crash after a
/// sync; every index kind answers the same (the hash index deletes the keys it finds).
#[test]
fn range_deletes_survive_reopen_and_work_on_every_index() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let opts = env.options(small_options(kind, 64));
        let db = Db::open("/db", opts.clone())?;
        load(&db, 0..N, 100)?;
        let mut batch = WriteBatch::new();
        batch.put(key(N + 1), b"x").delete_range(key(10), key(20)).put(key(15), value_for(15, 100));
        db.write(&WriteOptions { sync: true }, batch)?;
        let alive = |i: u64| !(10..20).contains(&i) || i == 15;
        let mut want = expected(alive, 100);
        want.push((key(N + 1), b"x".to_vec()));
        assert_eq!(dump(&db), want, "{kind:?}");
        env.crash(db, None);
        let db = Db::open("/db", opts)?;
        assert_eq!(dump(&db), want, "{kind:?}: after a crash");
        db.delete_range(key(0), key(N + 2))?;
        assert!(dump(&db).is_empty(), "{kind:?}: everything deleted");
        db.delete_range(key(5), key(5))?; // empty: nothing
    }
    Ok(())
}

fn partitioned(env: &CrashEnv) -> Options {
    let splits = [150, 300, 450].iter().map(|&i| key(i)).collect();
    env.options(Options { partition_split_points: splits, ..small_options(IndexKind::Lsm, 0) })
}

fn property_lines(db: &Db, name: &str) -> Vec<String> {
    db.property(name).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Deleting a whole partition drops its tables in one edit, without rewriting anything, charges
/// their values as garbage, and GC then frees the log space.
#[test]
fn deleting_a_partition_drops_its_tables_whole() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", partitioned(&env))?;
    load(&db, 0..N, 1000)?;
    db.flush()?;
    db.compact_range(None, None)?;
    let partitions = property_lines(&db, "splitkv.partitions");
    assert_eq!(partitions.len(), 4, "{partitions:?}");
    // No table straddles a split key.
    for line in db.property("splitkv.sstables").unwrap().lines() {
        for split in [150, 300, 450] {
            let split = format!("{:?}", key(split));
            assert!(!line.contains(&split) || line.contains(&format!("[{split}")), "{line}");
        }
    }
    let written = db.stats().compaction_bytes_written;
    let garbage_before = db.stats().vlog_garbage_bytes();
    db.delete_range(key(150), key(300))?;
    let stats = db.stats();
    assert!(stats.tables_dropped_by_range_deletes > 0, "{stats}");
    assert_eq!(stats.compaction_bytes_written, written, "nothing was rewritten");
    assert!(stats.vlog_garbage_bytes() >= garbage_before + 150 * 1000, "{stats}");
    assert!(property_lines(&db, "splitkv.partitions")[1].contains(" 0 tables"), "{partitions:?}");
    assert_eq!(dump(&db), expected(|i| !(150..300).contains(&i), 1000));
    let log_before = db.stats().vlog_bytes();
    db.run_gc()?;
    assert!(db.stats().vlog_bytes() < log_before, "GC reclaims the dropped partition's values");
    assert_eq!(dump(&db), expected(|i| !(150..300).contains(&i), 1000));
    Ok(())
}

/// A snapshot older than the delete keeps the partition's tables; once it is gone, the next
/// flush drops them.
#[test]
fn a_snapshot_defers_the_drop() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", partitioned(&env))?;
    load(&db, 0..N, 100)?;
    db.flush()?;
    db.compact_range(None, None)?;
    let snap = db.snapshot();
    db.delete_range(key(300), key(450))?;
    assert_eq!(db.stats().tables_dropped_by_range_deletes, 0);
    let old = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    assert_eq!(db.get_opt(&old, key(310))?.map(|v| v.to_vec()), Some(value_for(310, 100)));
    assert_eq!(db.get(key(310))?, None);
    drop(snap);
    drop(old);
    db.put(key(N + 5), b"x")?;
    db.flush()?;
    assert!(db.stats().tables_dropped_by_range_deletes > 0);
    assert_eq!(db.get(key(310))?, None);
    Ok(())
}

/// A crash at any point around the drop, or a failed MANIFEST write during it, leaves the
/// database either before or after the delete as a whole; after the failure the database is
/// poisoned, and a reopen shows the delete complete (it was made durable before the drop).
#[test]
fn a_failed_drop_edit_never_exposes_half_a_delete() -> Result<()> {
    let env = CrashEnv::new();
    let opts = partitioned(&env);
    let db = Db::open("/db", opts.clone())?;
    load(&db, 0..N, 100)?;
    db.flush()?;
    db.compact_range(None, None)?;
    env.fault.inject(Fault::new(FaultKind::Append).on_path("MANIFEST").persistent());
    let result = db.delete_range(key(150), key(450));
    assert!(result.is_err(), "the drop's MANIFEST write failed");
    assert!(db.put(key(1), b"y").is_err(), "a failed MANIFEST write poisons writes");
    env.crash(db, Some(7));
    let db = Db::open("/db", opts)?;
    assert_eq!(dump(&db), expected(|i| !(150..450).contains(&i), 100));
    for i in [149, 150, 300, 449, 450] {
        assert_eq!(db.get(key(i))?.is_some(), !(150..450).contains(&i), "key {i}");
    }
    Ok(())
}
