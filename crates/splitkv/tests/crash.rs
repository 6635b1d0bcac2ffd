//! Crash consistency: a simulated power cut at every I/O point of a workload with sync writes,
//! flushes and compactions. Every acknowledged sync write survives; lost unsynced writes form a
//! suffix; the database always reopens. The power cut runs under every index kind; the two
//! injected-failure scenarios target the LSM index's own files.

mod common;

use common::{key, lsm_matrix, matrix, value_for, CrashEnv};
use splitkv::fs::{Fault, FaultKind};
use splitkv::{Db, Result, WriteOptions};

const WRITES: u64 = 400;

fn value_len(i: u64) -> usize {
    [50usize, 700, 1100, 3000][(i % 4) as usize]
}

/// Writes keys in order; every third write is synced; flushes and a compaction on the way.
/// Returns how many writes were acknowledged and the index of the last acknowledged sync write.
fn workload(db: &Db) -> (u64, Option<u64>) {
    let mut last_synced = None;
    for i in 0..WRITES {
        let sync = i % 3 == 0;
        if db.put_opt(&WriteOptions { sync }, key(i), value_for(i, value_len(i))).is_err() {
            return (i, last_synced);
        }
        if sync {
            last_synced = Some(i);
        }
        let maintenance = match i {
            99 | 249 => db.flush(),
            199 => db.compact_range(None, None),
            _ => Ok(()),
        };
        if maintenance.is_err() {
            return (i + 1, last_synced);
        }
    }
    (WRITES, last_synced)
}

fn check_recovered(db: &Db, acked: u64, last_synced: Option<u64>, ctx: &str) -> Result<()> {
    // Keys were written in order, so "a suffix was lost" means: keys 0..m are present, none after.
    let mut present = 0;
    while present < WRITES && db.get(key(present))?.is_some() {
        present += 1;
    }
    for i in present..WRITES {
        assert!(db.get(key(i))?.is_none(), "{ctx}: key {i} present after a lost key {present}");
    }
    for i in 0..present {
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), Some(value_for(i, value_len(i))), "{ctx}: key {i}");
    }
    if let Some(s) = last_synced {
        assert!(present > s, "{ctx}: acknowledged sync write {s} lost ({present} keys recovered)");
    }
    // Nothing past the write that failed (which may have reached the log before its error).
    assert!(present <= acked + 1, "{ctx}: {present} keys recovered, only {acked} writes acknowledged");
    Ok(())
}

#[test]
fn crash_at_every_io_point_keeps_synced_writes() -> Result<()> {
    for case in matrix() {
        // A clean run tells how many I/O operations the workload makes.
        let env = CrashEnv::new();
        let db = Db::open("/db", env.options(case.options()))?;
        let before = env.fault.op_count(FaultKind::Any);
        assert_eq!(workload(&db).0, WRITES, "{case}: clean run");
        let total = env.fault.op_count(FaultKind::Any) - before;
        drop(db);

        let step = (total / 60).max(1);
        for (n, point) in (0..total).step_by(step as usize).enumerate() {
            let env = CrashEnv::new();
            let db = Db::open("/db", env.options(case.options()))?;
            env.fault.inject(Fault::new(FaultKind::Any).after(point).persistent());
            let (acked, last_synced) = workload(&db);
            let torn = (n % 2 == 1).then_some(point);
            env.crash(db, torn);
            let ctx = format!("{case}, crash after {point} of {total} I/O operations, torn {torn:?}");
            let db =
                Db::open("/db", env.options(case.options())).unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            check_recovered(&db, acked, last_synced, &ctx).unwrap_or_else(|e| {
                panic!(
                    "{ctx}: {e}\n{}\nfiles: {:?}",
                    db.property("splitkv.sstables").unwrap_or_default(),
                    env.mem.file_names(std::path::Path::new("/db"))
                )
            });
            // The recovered database accepts writes and survives another clean reopen.
            db.put(b"after", b"crash").unwrap_or_else(|e| panic!("{ctx}: write after recovery: {e}"));
            drop(db);
            let db =
                Db::open("/db", env.options(case.options())).unwrap_or_else(|e| panic!("{ctx}: second reopen: {e}"));
            assert_eq!(db.get(b"after")?.as_deref(), Some(&b"crash"[..]), "{ctx}");
        }
    }
    Ok(())
}

// LSM only: the failure is injected into SSTable writes, which only the LSM index makes.
#[test]
fn failed_table_write_during_flush_recovers_from_the_log() -> Result<()> {
    for case in lsm_matrix() {
        let env = CrashEnv::new();
        let db = Db::open("/db", env.options(case.options()))?;
        for i in 0..100 {
            db.put_opt(&WriteOptions { sync: true }, key(i), value_for(i, 900))?;
        }
        env.fault.inject(Fault::new(FaultKind::Sync).on_path(".sst").persistent());
        assert!(db.flush().is_err(), "{case}: flush should fail");
        // Reads keep working on the poisoned database.
        assert_eq!(db.get(key(5))?.map(|v| v.to_vec()), Some(value_for(5, 900)), "{case}");
        env.crash(db, None);
        let db = Db::open("/db", env.options(case.options()))?;
        for i in 0..100 {
            assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), Some(value_for(i, 900)), "{case} key {i}");
        }
    }
    Ok(())
}

// LSM only: the failure is injected into the MANIFEST edit that installs a compaction's tables.
#[test]
fn failed_manifest_write_during_compaction_recovers() -> Result<()> {
    for case in lsm_matrix() {
        let env = CrashEnv::new();
        let db = Db::open("/db", env.options(case.options()))?;
        for i in 0..600 {
            db.put(key(i % 200), value_for(i, 800))?;
        }
        db.flush()?;
        env.fault.inject(Fault::new(FaultKind::Append).on_path("MANIFEST").persistent());
        assert!(db.compact_range(None, None).is_err(), "{case}: compaction should fail");
        env.crash(db, Some(7));
        let db = Db::open("/db", env.options(case.options()))?;
        for i in 400..600 {
            assert_eq!(db.get(key(i % 200))?.map(|v| v.to_vec()), Some(value_for(i, 800)), "{case}");
        }
        db.compact_range(None, None)?;
        assert_eq!(db.get(key(10))?.map(|v| v.to_vec()), Some(value_for(410, 800)), "{case}");
    }
    Ok(())
}
