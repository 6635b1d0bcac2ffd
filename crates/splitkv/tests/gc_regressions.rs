//! Regression tests for value-log GC bugs, one per bug, named after what broke: acknowledged
//! writes lost when a manual compaction raced the write leader, hole punching that corrupted the
//! log, writers that waited forever for space, space never reclaimed once a snapshot was
//! released, the MANIFEST listing deleted segments, and a zero-filled tail read as corruption.
//! Each runs under every index kind.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{dump, index_kinds, key, small_options, value_for, CrashEnv};
use splitkv::filenames::segment_file;
use splitkv::version::VersionSet;
use splitkv::vlog::scan_segment;
use splitkv::{Db, Error, GcPolicyKind, IndexKind, Options, ReadOptions, Result, WriteOptions};

fn gc_options(kind: IndexKind) -> Options {
    Options { value_threshold: 256, background_gc: false, gc_policy: GcPolicyKind::Greedy, ..small_options(kind, 256) }
}

/// Every segment the database records exists, and scans cleanly with its skipped ranges.
fn check_log_files(env: &CrashEnv, kind: IndexKind, dir: &str) -> Result<()> {
    let fs: Arc<dyn splitkv::fs::FileSystem> = Arc::new(env.mem.clone());
    // Both index kinds record the segment list in the database's MANIFEST; a kind that kept it
    // elsewhere would add its arm here.
    let segments = match kind {
        IndexKind::Lsm | IndexKind::Hash { .. } => {
            VersionSet::recover(Arc::clone(&fs), dir.as_ref(), Options::default().num_levels)?.segments().clone()
        }
    };
    for (id, meta) in &segments {
        let path = segment_file(dir.as_ref(), *id);
        assert!(fs.exists(&path), "{kind:?}: segment {id} the database records is missing");
        for item in scan_segment(fs.as_ref(), &path, &meta.skipped)? {
            item?;
        }
    }
    Ok(())
}

#[test]
fn compact_range_racing_sync_writes_loses_no_acknowledged_write() -> Result<()> {
    // `compact_range` used to freeze the memtable itself, outside the write leader: records
    // appended before the freeze but applied after it landed behind the new memtable's log
    // start, and the next flush recorded a log head past them.
    for kind in index_kinds() {
        for round in 0..8u64 {
            compact_range_racing_sync_writes(kind, round)?;
        }
    }
    Ok(())
}

fn compact_range_racing_sync_writes(kind: IndexKind, round: u64) -> Result<()> {
    let env = CrashEnv::new();
    let db = Arc::new(Db::open("/db", env.options(gc_options(kind)))?);
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) && i < 3000 {
                if db.put_opt(&WriteOptions { sync: true }, key(i), value_for(i + round, 300)).is_err() {
                    break;
                }
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    for _ in 0..20 {
        db.compact_range(None, None)?;
    }
    stop.store(true, Ordering::Release);
    writer.join().expect("writer thread");
    let acked = acked.load(Ordering::Acquire);
    let db = Arc::into_inner(db).expect("sole handle");
    env.crash(db, Some(round));
    let db = Db::open("/db", env.options(gc_options(kind)))?;
    for i in 0..acked {
        assert_eq!(
            db.get(key(i))?.map(|v| v.to_vec()),
            Some(value_for(i + round, 300)),
            "{kind:?}: round {round} key {i}"
        );
    }
    Ok(())
}

#[test]
fn hole_punching_twice_keeps_every_segment_readable() -> Result<()> {
    // Punched ranges read back as zeros; the second GC run used to scan them and fail with a
    // body checksum mismatch, and `verify` and `dump` reported them as damage.
    for kind in index_kinds() {
        hole_punching_twice(kind)?;
    }
    Ok(())
}

fn hole_punching_twice(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let opts = env.options(Options { gc_punch_holes: true, ..gc_options(kind) });
    let db = Db::open("/db", opts.clone())?;
    let mut punched = 0;
    for round in 0..4u64 {
        for k in 0..300u64 {
            db.put(key(k), value_for(round * 1000 + k, 700))?;
        }
        punched += db.run_gc()?.bytes_punched;
        punched += db.run_gc()?.bytes_punched;
        check_log_files(&env, kind, "/db")?;
    }
    assert!(punched > 0, "{kind:?}: nothing was punched");
    drop(db);
    let db = Db::open("/db", opts)?;
    db.run_gc()?;
    let all = dump(&db);
    assert_eq!(all.len(), 300, "{kind:?}");
    for (k, (_, value)) in all.iter().enumerate() {
        assert_eq!(value, &value_for(3000 + k as u64, 700), "{kind:?}: key {k}");
    }
    Ok(())
}

#[test]
fn writer_over_the_space_budget_gets_an_error_instead_of_waiting_forever() -> Result<()> {
    // With a budget and hole punching, the budget counted logical lengths, so punched space never
    // counted as freed and a sync write blocked for good. Live data beyond the budget must now
    // end the wait with `NoSpace`.
    for kind in index_kinds() {
        writer_over_the_space_budget(kind)?;
    }
    Ok(())
}

fn writer_over_the_space_budget(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let budget = 1 << 20;
    let opts = env.options(Options {
        gc_punch_holes: true,
        gc_space_budget: Some(budget),
        background_gc: true,
        gc_rate_limit: 0,
        ..gc_options(kind)
    });
    let db = Db::open("/db", opts)?;
    let mut refused = None;
    // Three times the budget of distinct keys: nothing GC could free.
    for i in 0..(3 * budget / 700) {
        match db.put_opt(&WriteOptions { sync: true }, key(i), value_for(i, 700)) {
            Ok(()) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (at, err) = refused.unwrap_or_else(|| panic!("{kind:?}: writes beyond the budget were all accepted"));
    assert!(matches!(err, Error::NoSpace(_)), "{kind:?}: expected NoSpace, got {err}");
    assert!(err.to_string().contains("budget"), "{kind:?}: the error should say why: {err}");
    // What was accepted is intact.
    for i in (0..at).step_by(97) {
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), Some(value_for(i, 700)), "{kind:?}: key {i}");
    }
    Ok(())
}

#[test]
fn writer_over_the_space_budget_waits_for_a_reader_that_holds_cleaned_segments() -> Result<()> {
    // A writer over a hard budget failed with `NoSpace` as soon as the only segments GC could
    // free were ones it had cleaned and a snapshot still held: a snapshot held for 5 ms failed a
    // write in the real-process kill test. It must wait for the reader (as a stalled writer
    // waits for a run) and go on once the reader is released.
    for kind in index_kinds() {
        writer_waits_for_reader(kind)?;
    }
    Ok(())
}

fn writer_waits_for_reader(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let budget: u64 = 1 << 20;
    let opts = env.options(Options {
        gc_space_budget: Some(budget),
        background_gc: true,
        gc_rate_limit: 0,
        ..gc_options(kind)
    });
    let db = Db::open("/db", opts)?;
    // A fifth of the budget of live data, then a snapshot that sees all of it: while it is held,
    // every segment GC cleans stays on disk.
    let keys = budget / 5 / 700;
    for i in 0..keys {
        db.put(key(i), value_for(i, 700))?;
    }
    let snapshot = db.snapshot();
    let overwrites = 4 * budget / 700;
    std::thread::scope(|s| -> Result<()> {
        let writer = s.spawn(|| -> Result<()> {
            for n in 0..overwrites {
                db.put_opt(&WriteOptions { sync: true }, key(n % keys), value_for(keys + n, 700))?;
            }
            Ok(())
        });
        // Release the reader only once the writer waits for it (or has finished: then it did
        // not wait, and its result below says why).
        let waits_for_readers = || db.property("splitkv.write-stalls").is_some_and(|s| s.contains("value-log-readers"));
        while !writer.is_finished() && !waits_for_readers() {
            std::thread::yield_now();
        }
        let stopped = !writer.is_finished();
        drop(snapshot);
        let written = writer.join().expect("writer thread");
        assert!(written.is_ok(), "{kind:?}: a write over the budget failed instead of waiting: {written:?}");
        assert!(stopped, "{kind:?}: the writer never waited for the reader, so nothing was tested");
        Ok(())
    })?;
    for i in 0..keys {
        let newest = (0..overwrites).rfind(|n| n % keys == i).map_or(i, |n| keys + n);
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), Some(value_for(newest, 700)), "{kind:?}: key {i}");
    }
    Ok(())
}

#[test]
fn space_is_reclaimed_once_the_snapshot_that_held_it_is_released() -> Result<()> {
    // Garbage used to become known only when compaction dropped a version; once the snapshot
    // was gone nothing dropped them, and 3x the live data stayed on disk.
    for kind in index_kinds() {
        for punch_holes in [false, true] {
            space_is_reclaimed_after_snapshot_release(kind, punch_holes)?;
        }
    }
    Ok(())
}

fn space_is_reclaimed_after_snapshot_release(kind: IndexKind, punch_holes: bool) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let opts = Options { value_threshold: 0, segment_size: 1 << 20, gc_punch_holes: punch_holes, ..gc_options(kind) };
    let db = Db::open(dir.path(), opts.clone())?;
    let keys = 2000u64;
    for k in 0..keys {
        db.put(key(k), value_for(k, 4000))?;
    }
    let snapshot = db.snapshot();
    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_first()?;
    for round in 1..=2u64 {
        for k in 0..keys {
            db.put(key(k), value_for(round * keys + k, 4000))?;
        }
    }
    for k in (0..keys).step_by(2) {
        db.delete(key(k))?;
    }
    db.run_gc()?;
    drop(it);
    drop(snapshot);
    // Reopened, so the garbage must be found again from what is on disk.
    drop(db);
    let db = Db::open(dir.path(), opts)?;
    for _ in 0..5 {
        db.run_gc()?;
    }
    let stats = db.stats();
    let live: u64 = dump(&db).iter().map(|(k, v)| (26 + k.len() + v.len()) as u64).sum();
    // The hash table is sized for the most keys the database has held (2000 here) and does
    // not shrink when keys are deleted: it is not garbage GC could free, so it is left out.
    let table_bytes = stats.hash_table.map_or(0, |t| t.file_bytes);
    let amplification = (stats.disk_bytes - table_bytes) as f64 / live as f64;
    // Punched segments keep whole blocks: each its header's and its tail's (8 KiB of data, by
    // `filefrag`), and on ext4 some also keep a block of the file's extent tree, allocated while
    // punching split the file into many extents (12 KiB in `stat`, from run to run). That is
    // 1.09-1.11 of the live bytes in this test; the fault it guards against left 3x.
    let bound = if punch_holes { 1.15 } else { 1.1 };
    assert!(
        amplification <= bound,
        "{kind:?} index, punch holes {punch_holes}: space amplification {amplification:.2} ({} on disk, {live} live)\n{stats}",
        stats.disk_bytes
    );
    Ok(())
}

#[test]
fn manifest_never_lists_a_segment_gc_deleted_while_writers_flush() -> Result<()> {
    // A flush computed "segments created since the last edit" as every segment the MANIFEST did
    // not list, which included a victim GC had just recorded as removed but not yet deleted.
    for kind in index_kinds() {
        no_deleted_segment_listed_while_writers_flush(kind)?;
    }
    Ok(())
}

fn no_deleted_segment_listed_while_writers_flush(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let opts = env.options(gc_options(kind));
    let db = Arc::new(Db::open("/db", opts.clone())?);
    std::thread::scope(|s| -> Result<()> {
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let db = Arc::clone(&db);
                s.spawn(move || -> Result<()> {
                    for i in 0..1500u64 {
                        db.put(key(w * 100 + i % 100), value_for(i, 600))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for _ in 0..10 {
            db.run_gc()?;
            db.compact_range(None, None)?;
        }
        for w in writers {
            w.join().expect("writer thread")?;
        }
        Ok(())
    })?;
    db.run_gc()?;
    drop(Arc::into_inner(db).expect("sole handle"));
    check_log_files(&env, kind, "/db")?;
    Db::open("/db", opts)?;
    Ok(())
}

#[test]
fn zero_filled_tail_of_the_newest_segment_is_a_torn_tail() -> Result<()> {
    // ext4 can leave the newest file's unsynced tail as zeros after a power loss.
    for kind in index_kinds() {
        zero_filled_tail_is_a_torn_tail(kind)?;
    }
    Ok(())
}

fn zero_filled_tail_is_a_torn_tail(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let opts = env.options(gc_options(kind));
    {
        let db = Db::open("/db", opts.clone())?;
        for i in 0..50 {
            db.put_opt(&WriteOptions { sync: true }, key(i), value_for(i, 400))?;
        }
    }
    let fs: Arc<dyn splitkv::fs::FileSystem> = Arc::new(env.mem.clone());
    let newest = fs.list("/db".as_ref())?.into_iter().filter(|name| name.ends_with(".vlog")).max().expect("a segment");
    let mut file = fs.open_append(&std::path::Path::new("/db").join(newest))?;
    file.append(&[0u8; 5000])?;
    file.sync()?;
    drop(file);
    let db = Db::open("/db", opts)?;
    for i in 0..50 {
        assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), Some(value_for(i, 400)), "{kind:?}: key {i}");
    }
    db.put(b"after", b"reopen")?;
    Ok(())
}

#[test]
fn readers_that_start_while_gc_frees_a_segment_never_reach_it() -> Result<()> {
    // Readers used to read the sequence number they read at before they registered (a cursor, a
    // snapshot) or took the GC barrier (a point read). One stalled in between read at a sequence
    // number older than a GC run's relocations after the run had looked for older readers, and
    // reached the segment the run then freed: "pointer into a segment that is not live". The
    // window is a few instructions wide, so this test makes the race likely, not certain; a
    // real-process kill soak found it.
    for kind in index_kinds() {
        readers_while_gc_frees_segments(kind)?;
    }
    Ok(())
}

fn readers_while_gc_frees_segments(kind: IndexKind) -> Result<()> {
    const KEYS: u64 = 64;
    const ROUNDS: u64 = 400;
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(gc_options(kind)))?;
    let write_round = |round: u64| -> Result<()> {
        for k in 0..KEYS {
            db.put(key(k), value_for(round * KEYS + k, 700))?;
        }
        Ok(())
    };
    write_round(0)?;
    let stop = AtomicBool::new(false);
    let released = std::thread::scope(|s| -> Result<u64> {
        let readers: Vec<_> = (0..3u64)
            .map(|role| {
                let (db, stop) = (&db, &stop);
                s.spawn(move || -> Result<()> {
                    let mut x = role + 1;
                    while !stop.load(Ordering::Relaxed) {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                        let k = (x >> 33) % KEYS;
                        let values: Vec<_> = match role {
                            0 => vec![db.get(key(k))?],
                            1 => db
                                .range(key(k)..)?
                                .take(4)
                                .map(|item| item.map(|(_, v)| Some(v)))
                                .collect::<Result<_>>()?,
                            _ => {
                                let opts = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
                                vec![db.get_opt(&opts, key(k))?]
                            }
                        };
                        for v in values {
                            assert_eq!(v.map(|v| v.len()), Some(700), "{kind:?}: key {k} as reader {role} read it");
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let gc_under_writes = || -> Result<u64> {
            let mut released = 0;
            for round in 1..ROUNDS {
                write_round(round)?;
                released += db.gc_step()?.segments_released.len() as u64;
            }
            Ok(released)
        };
        let released = gc_under_writes();
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().expect("reader thread")?;
        }
        released
    })?;
    assert!(released > 0, "{kind:?}: GC must free segments while the readers run for this to test anything");
    Ok(())
}
