//! Bad input: flipped bytes in an SSTable, a value-log segment and the MANIFEST give
//! `Error::Corruption` (never a panic, never wrong data); a failed fsync poisons writes while
//! reads keep working. Value-log damage and failed log syncs are tested under every index kind;
//! SSTable and MANIFEST damage under the LSM index, whose files they are.

mod common;

use std::path::Path;

use common::{index_kinds, key, small_options, value_for, CrashEnv};
use splitkv::fs::{Fault, FaultKind, FileSystem, MemFileSystem};
use splitkv::{Db, Error, IndexKind, Options, ReadOptions, Result, WriteOptions};

fn files_with(mem: &MemFileSystem, suffix: &str) -> Vec<String> {
    mem.file_names(Path::new("/db")).into_iter().filter(|n| n.contains(suffix)).collect()
}

fn middle_of(mem: &MemFileSystem, name: &str) -> u64 {
    mem.file_size(&Path::new("/db").join(name)).expect("size") / 2
}

/// Reads every key; each must be its true value or a corruption error.
fn read_all(db: &Db, n: u64, len: usize, ctx: &str) -> (usize, usize) {
    let (mut ok, mut corrupt) = (0, 0);
    for i in 0..n {
        match db.get(key(i)) {
            Ok(Some(v)) => {
                assert_eq!(v.to_vec(), value_for(i, len), "{ctx}: wrong data for key {i}");
                ok += 1;
            }
            Ok(None) => panic!("{ctx}: key {i} silently vanished"),
            Err(e) => {
                assert!(e.is_corruption(), "{ctx}: unexpected error for key {i}: {e}");
                corrupt += 1;
            }
        }
    }
    (ok, corrupt)
}

fn scan_result(db: &Db) -> Result<usize> {
    let mut n = 0;
    for item in db.range_opt::<&[u8], _>(ReadOptions { fill_cache: false, ..ReadOptions::default() }, ..)? {
        item?;
        n += 1;
    }
    Ok(n)
}

// LSM only: the damaged file is an SSTable.
#[test]
fn flipped_byte_in_sstable_is_corruption() -> Result<()> {
    let env = CrashEnv::new();
    let opts = env.options(Options { write_buffer_size: 4 << 20, ..small_options(IndexKind::Lsm, usize::MAX) });
    {
        let db = Db::open("/db", opts.clone())?;
        for i in 0..200 {
            db.put(key(i), value_for(i, 100))?;
        }
        db.flush()?;
    }
    let tables = files_with(&env.mem, ".sst");
    assert_eq!(tables.len(), 1);
    env.mem.flip_byte(&Path::new("/db").join(&tables[0]), middle_of(&env.mem, &tables[0]))?;
    let db = Db::open("/db", opts)?;
    let (_, corrupt) = read_all(&db, 200, 100, "Lsm index");
    assert!(corrupt > 0, "no read noticed the flipped byte");
    assert!(scan_result(&db).is_err_and(|e| e.is_corruption()));
    Ok(())
}

#[test]
fn flipped_byte_in_value_log_record_is_corruption() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let opts = env.options(small_options(kind, 0));
        {
            let db = Db::open("/db", opts.clone())?;
            for i in 0..20 {
                db.put(key(i), value_for(i, 1000))?;
            }
            db.flush()?;
        }
        let segments = files_with(&env.mem, ".vlog");
        env.mem.flip_byte(&Path::new("/db").join(&segments[0]), middle_of(&env.mem, &segments[0]))?;
        let db = Db::open("/db", opts)?;
        let (ok, corrupt) = read_all(&db, 20, 1000, &format!("{kind:?} index"));
        assert_eq!((ok, corrupt), (19, 1), "{kind:?}: exactly the damaged record should fail");
    }
    Ok(())
}

#[test]
fn flipped_byte_in_replayed_log_fails_open() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let opts = env.options(Options { write_buffer_size: 1 << 20, ..small_options(kind, 0) });
        {
            let db = Db::open("/db", opts.clone())?;
            for i in 0..40 {
                db.put_opt(&WriteOptions { sync: true }, key(i), value_for(i, 500))?;
            }
        }
        let segments = files_with(&env.mem, ".vlog");
        env.mem.flip_byte(&Path::new("/db").join(&segments[0]), middle_of(&env.mem, &segments[0]))?;
        match Db::open("/db", opts) {
            Err(e) => assert!(e.is_corruption(), "{kind:?}: expected corruption, got {e}"),
            Ok(_) => panic!("{kind:?}: a damaged record inside the log was silently accepted"),
        }
    }
    Ok(())
}

// LSM only: the MANIFEST is the LSM index's record of its tables; damage to another kind's
// metadata needs a test of that kind's files.
#[test]
fn flipped_byte_in_manifest_fails_open() -> Result<()> {
    let env = CrashEnv::new();
    let opts = env.options(small_options(IndexKind::Lsm, 1024));
    {
        let db = Db::open("/db", opts.clone())?;
        for round in 0..5 {
            for i in 0..50 {
                db.put(key(i + round * 50), value_for(i, 300))?;
            }
            db.flush()?;
        }
    }
    let manifests = files_with(&env.mem, "MANIFEST");
    assert_eq!(manifests.len(), 1);
    env.mem.flip_byte(&Path::new("/db").join(&manifests[0]), middle_of(&env.mem, &manifests[0]))?;
    match Db::open("/db", opts) {
        Err(e) => assert!(e.is_corruption(), "expected corruption, got {e}"),
        Ok(_) => panic!("a damaged MANIFEST was silently accepted"),
    }
    Ok(())
}

#[test]
fn failed_fsync_poisons_writes_but_not_reads() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let db = Db::open("/db", env.options(small_options(kind, 1024)))?;
        db.put(b"before", b"ok")?;
        env.fault.inject(Fault::new(FaultKind::Sync).on_path(".vlog"));
        assert!(db.put_opt(&WriteOptions { sync: true }, b"k", b"v").is_err(), "{kind:?}: failed sync acknowledged");
        env.fault.clear();
        assert!(matches!(db.put(b"later", b"x"), Err(Error::Poisoned(_))), "{kind:?}");
        assert!(
            matches!(db.put_opt(&WriteOptions { sync: true }, b"later", b"x"), Err(Error::Poisoned(_))),
            "{kind:?}"
        );
        assert_eq!(db.get(b"before")?.as_deref(), Some(&b"ok"[..]), "{kind:?}");
    }
    Ok(())
}
