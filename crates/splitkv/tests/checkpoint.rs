//! `Db::checkpoint`: the copy opens and holds exactly the writes up to its sequence number (also
//! under concurrent writers), shares the immutable files by hard link, survives a crash once made,
//! goes its own way after a restore, and is never damaged by the database's GC punching holes in
//! the segments they share.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{assert_same, dump, index_kinds, key, small_options, value_for, HASH};
use splitkv::fs::{FaultKind, FileSystem, MemFileSystem};
use splitkv::{Db, Error, IndexKind, Options, Result, WriteOptions};

fn src() -> &'static Path {
    Path::new("/db")
}

fn copy() -> &'static Path {
    Path::new("/backup/copy")
}

fn mem_options(mem: &MemFileSystem, kind: IndexKind) -> Options {
    Options { fs: mem.shared(), background_gc: false, ..small_options(kind, 64) }
}

#[test]
fn a_checkpoint_opens_as_the_database_was_and_then_goes_its_own_way() -> Result<()> {
    for kind in index_kinds() {
        for threshold in [0, 64, usize::MAX] {
            let ctx = format!("{kind:?}, threshold {threshold}");
            let mem = MemFileSystem::new();
            mem.create_dir_all(Path::new("/backup"))?;
            let options = Options { value_threshold: threshold, ..mem_options(&mem, kind) };
            let db = Db::open(src(), options.clone())?;
            for i in 0..800 {
                db.put(key(i % 500), value_for(i, 150))?;
            }
            db.delete(key(3))?;
            db.flush()?;
            // A tail that only the active segment holds.
            for i in 0..20 {
                db.put(key(1000 + i), value_for(i, 40))?;
            }
            let expected = dump(&db);
            let info = db.checkpoint(copy())?;
            assert_eq!(Some(info.sequence.to_string()), db.property("splitkv.last-sequence"), "{ctx}");
            assert!(info.files_linked > 0, "{ctx}: nothing linked: {info:?}");
            assert!(info.files_copied >= 4, "{ctx}: {info:?}");
            assert!(mem.file_names(copy()).contains(&"OPTIONS".to_string()));
            // Writes after the checkpoint stay out of it.
            db.put("after", "checkpoint")?;

            let restored = Db::open(copy(), Options::load_from(mem.shared(), copy())?.expect("OPTIONS"))?;
            assert_same(&dump(&restored), &expected, &ctx);
            assert_eq!(restored.property("splitkv.last-sequence"), Some(info.sequence.to_string()), "{ctx}");
            // The restored copy and the database now change independently.
            restored.put("only", "in the copy")?;
            restored.compact_range(None, None)?;
            restored.run_gc()?;
            assert!(db.get("only")?.is_none(), "{ctx}");
            assert!(restored.get("after")?.is_none(), "{ctx}");
            db.compact_range(None, None)?;
            db.run_gc()?;
            drop(db);
            assert_eq!(restored.get("only")?.as_deref(), Some(&b"in the copy"[..]));
            let mut expected_now = expected.clone();
            expected_now.push((b"only".to_vec(), b"in the copy".to_vec()));
            expected_now.sort();
            assert_same(&dump(&restored), &expected_now, &ctx);
            assert_eq!(Db::open(src(), options)?.get("after")?.as_deref(), Some(&b"checkpoint"[..]), "{ctx}");
        }
    }
    Ok(())
}

#[test]
fn a_checkpoint_under_concurrent_writers_holds_exactly_the_writes_up_to_its_sequence() -> Result<()> {
    const WRITERS: u64 = 3;
    const PUTS: u64 = 3000;
    for kind in index_kinds() {
        let mem = MemFileSystem::new();
        mem.create_dir_all(Path::new("/backup"))?;
        // No GC, so every sequence number is one of the writers' puts.
        let db = Arc::new(Db::open(src(), mem_options(&mem, kind))?);
        let stop = AtomicBool::new(false);
        let (info, done) = thread::scope(|scope| -> Result<_> {
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let db = Arc::clone(&db);
                    let stop = &stop;
                    scope.spawn(move || -> Result<u64> {
                        // Writer `w` puts its keys in order, each key twice (the value names the put).
                        let mut n = 0;
                        while n < PUTS && !stop.load(Ordering::Relaxed) {
                            let k = format!("w{w}-{:05}", n / 2);
                            db.put(k, format!("{n}"))?;
                            n += 1;
                        }
                        Ok(n)
                    })
                })
                .collect();
            // Let the writers get going, then checkpoint while they run.
            while db.property("splitkv.last-sequence").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) < 500 {
                thread::yield_now();
            }
            let info = db.checkpoint(copy())?;
            stop.store(true, Ordering::Relaxed);
            let done: Vec<u64> = writers.into_iter().map(|h| h.join().expect("writer")).collect::<Result<_>>()?;
            Ok((info, done))
        })?;
        let restored = Db::open(copy(), mem_options(&mem, kind))?;
        // Each writer's puts reached the copy as a prefix: `n` puts show as keys 0..=(n-1)/2,
        // the last with value n-1. The prefixes add up to the sequence number.
        let mut total = 0;
        for w in 0..WRITERS {
            let entries: Vec<(String, String)> = dump(&restored)
                .into_iter()
                .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), String::from_utf8_lossy(&v).into_owned()))
                .filter(|(k, _)| k.starts_with(&format!("w{w}-")))
                .collect();
            let n = match entries.last() {
                None => 0,
                Some((_, v)) => v.parse::<u64>().expect("a put number") + 1,
            };
            for (i, (k, v)) in entries.iter().enumerate() {
                let last_put_of_key = (2 * i as u64 + 1).min(n - 1);
                assert_eq!(k, &format!("w{w}-{i:05}"), "{kind:?}: writer {w}'s keys are not a prefix");
                assert_eq!(v, &last_put_of_key.to_string(), "{kind:?}: writer {w}, key {k}");
            }
            assert!(n <= done[w as usize], "{kind:?}: writer {w}: more puts than were made");
            total += n;
        }
        assert_eq!(total, info.sequence, "{kind:?}: the copy's writes and its sequence number disagree");
        assert_eq!(restored.property("splitkv.last-sequence"), Some(info.sequence.to_string()));
    }
    Ok(())
}

#[test]
fn a_finished_checkpoint_survives_a_crash_and_an_unfinished_one_leaves_nothing() -> Result<()> {
    let env = common::CrashEnv::new();
    env.mem.create_dir_all(Path::new("/backup"))?;
    let options = env.options(Options { background_gc: false, ..small_options(IndexKind::Lsm, 64) });
    let db = Db::open(src(), options.clone())?;
    for i in 0..600 {
        db.put(key(i), value_for(i, 120))?;
    }
    // Tables to link, and a tail in the active segment to copy.
    db.flush()?;
    db.put_opt(&WriteOptions { sync: true }, "tail", "synced")?;
    let expected = dump(&db);

    // Failing at each step removes what was written: no directory is left to mistake for a
    // database.
    let faults = [
        FaultKind::Link.fault(),
        FaultKind::Create.fault().on_path("/backup/"),
        FaultKind::Sync.fault().on_path("/backup/"),
        FaultKind::SyncDir.fault().on_path("/backup/"),
        FaultKind::Rename.fault().on_path("/backup/"),
    ];
    for fault in faults {
        env.fault.inject(fault.clone());
        assert!(db.checkpoint(copy()).is_err(), "{fault:?} did not fail the checkpoint");
        env.fault.clear();
        assert!(!env.mem.exists(copy()), "{fault:?} left {:?}", env.mem.file_names(copy()));
    }
    assert!(matches!(db.checkpoint(src()), Err(Error::InvalidArgument(_))), "an existing directory");

    db.checkpoint(copy())?;
    db.put("lost", "in the crash")?;
    env.crash(db, None);
    assert_same(&dump(&Db::open(copy(), options.clone())?), &expected, "the checkpoint after a crash");
    Ok(())
}

#[test]
fn gc_never_punches_a_segment_a_checkpoint_shares() -> Result<()> {
    let mem = MemFileSystem::new();
    mem.create_dir_all(Path::new("/backup"))?;
    let options = Options { gc_punch_holes: true, value_threshold: 0, ..mem_options(&mem, IndexKind::Lsm) };
    let db = Db::open(src(), options.clone())?;
    let value = |i: u64, round: u64| value_for(i * 31 + round, 3000);
    for i in 0..200 {
        db.put(key(i), value(i, 0))?;
    }
    let expected = dump(&db);
    db.checkpoint(copy())?;
    let shared: Vec<String> = mem
        .file_names(copy())
        .into_iter()
        .filter(|n| n.ends_with(".vlog") && mem.link_count(&copy().join(n)).is_ok_and(|links| links == 2))
        .collect();
    assert!(!shared.is_empty(), "the checkpoint linked no segment");
    // Every record the checkpoint holds is garbage to the database now.
    for i in 0..200 {
        db.put(key(i), value(i, 1))?;
    }
    let outcome = db.run_gc()?;
    assert!(!outcome.segments_released.is_empty(), "shared segments are cleaned by copying: {outcome:?}");
    for name in &shared {
        let path = copy().join(name);
        assert_eq!(mem.allocated_size(&path)?, mem.file_size(&path)?, "{name}: a hole in a shared segment");
    }
    let restored = Db::open(copy(), options.clone())?;
    assert_same(&dump(&restored), &expected, "the checkpoint after the database's GC");
    // Opening the checkpoint re-punches its recorded ranges; with a shared file that must not
    // touch the database either, and the checkpoint's own GC leaves the database whole.
    for i in 0..200 {
        restored.put(key(i), value(i, 2))?;
    }
    restored.run_gc()?;
    drop(restored);
    for i in 0..200 {
        assert_eq!(db.get(key(i))?.as_deref(), Some(&value(i, 1)[..]));
    }
    Ok(())
}

#[test]
fn once_the_checkpoint_is_gone_gc_punches_again() -> Result<()> {
    let mem = MemFileSystem::new();
    mem.create_dir_all(Path::new("/backup"))?;
    let options = Options { gc_punch_holes: true, value_threshold: 0, ..mem_options(&mem, IndexKind::Lsm) };
    let db = Db::open(src(), options)?;
    for i in 0..200 {
        db.put(key(i), value_for(i, 3000))?;
    }
    db.checkpoint(copy())?;
    for name in mem.file_names(copy()) {
        mem.remove(&copy().join(name))?;
    }
    for i in 0..200 {
        db.put(key(i), value_for(i + 1, 3000))?;
    }
    assert!(db.run_gc()?.bytes_punched > 0, "a segment with one name again is punched");
    Ok(())
}

#[test]
fn a_hash_checkpoint_copies_the_table_and_replays_the_tail() -> Result<()> {
    let mem = MemFileSystem::new();
    mem.create_dir_all(Path::new("/backup"))?;
    let options = mem_options(&mem, HASH);
    let db = Db::open(src(), options.clone())?;
    for i in 0..400 {
        db.put(key(i), value_for(i, 100))?;
    }
    db.flush()?;
    for i in 0..30 {
        db.delete(key(i))?;
    }
    let expected = dump(&db);
    let info = db.checkpoint(copy())?;
    assert!(mem.file_names(copy()).contains(&"HASHINDEX".to_string()));
    for i in 0..400 {
        db.put(key(i), "newer")?;
    }
    db.flush()?;
    let restored = Db::open(copy(), options)?;
    assert_same(&dump(&restored), &expected, "the hash checkpoint");
    assert_eq!(restored.property("splitkv.last-sequence"), Some(info.sequence.to_string()));
    Ok(())
}

#[test]
fn on_the_os_file_system_immutable_files_are_hard_links() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let (dir, target) = (tmp.path().join("db"), tmp.path().join("copy"));
    let options = Options { background_gc: false, ..small_options(IndexKind::Lsm, 64) };
    let db = Db::open(&dir, options.clone())?;
    for i in 0..2000 {
        db.put(key(i), value_for(i, 200))?;
    }
    db.flush()?;
    let info = db.checkpoint(&target)?;
    assert!(info.files_linked >= 2, "{info:?}");
    let fs = options.fs.clone();
    let linked = fs.list(&target)?.into_iter().filter(|n| n.ends_with(".sst")).count();
    assert!(linked > 0);
    for name in fs.list(&target)?.into_iter().filter(|n| n.ends_with(".sst")) {
        assert_eq!(fs.link_count(&target.join(&name))?, 2, "{name}");
    }
    let expected = dump(&db);
    drop(db);
    assert_same(&dump(&Db::open(&target, options)?), &expected, "the OS checkpoint");
    Ok(())
}
