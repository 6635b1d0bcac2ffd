//! The LOG file: what open, flushes, compactions, GC and background errors write there, its
//! rotation at the size cap and at each open, and that the library prints nothing on stderr.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{index_kinds, small_options, value_for, CrashEnv};
use splitkv::fs::{Fault, FaultKind, FileSystem, MemFileSystem};
use splitkv::{Db, IndexKind, InfoLogOptions, Options, Result};

/// Every LOG file in `/db`, oldest first, concatenated.
fn log_text(fs: &dyn FileSystem) -> String {
    let dir = Path::new("/db");
    let mut names: Vec<String> =
        fs.list(dir).unwrap_or_default().into_iter().filter(|n| n.starts_with("LOG")).collect();
    // LOG.old.N is older the larger N is; LOG is the newest.
    names.sort_by_key(|n| {
        std::cmp::Reverse(n.strip_prefix("LOG.old.").and_then(|k| k.parse::<u64>().ok()).unwrap_or(0))
    });
    names.iter().map(|n| String::from_utf8_lossy(&fs.read_all(&dir.join(n)).unwrap_or_default()).into_owned()).collect()
}

fn mem_options(fs: &MemFileSystem, kind: IndexKind) -> Options {
    Options { fs: Arc::new(fs.clone()), background_gc: false, ..small_options(kind, 0) }
}

/// Writes `rounds` versions of 200 keys, flushing after each round.
fn overwrite(db: &Db, rounds: u64) -> Result<()> {
    for round in 0..rounds {
        for k in 0..200u64 {
            db.put(format!("key{k:04}"), value_for(round * 1000 + k, 300))?;
        }
        db.flush()?;
    }
    Ok(())
}

#[test]
fn the_log_records_open_flushes_compactions_and_gc() -> Result<()> {
    for kind in index_kinds() {
        let fs = MemFileSystem::new();
        let db = Db::open("/db", mem_options(&fs, kind))?;
        overwrite(&db, 3)?;
        db.compact_range(None, None)?;
        let gc = db.run_gc()?;
        // GC's relocations went to the log after the last flush: flush them, so that the reopen
        // replays exactly one batch.
        db.flush()?;
        db.put("after", "reopen")?;
        drop(db);
        let db = Db::open("/db", mem_options(&fs, kind))?;
        drop(db);
        let log = log_text(&fs);
        let lines = |what: &str| log.lines().filter(|l| l.contains(what)).count();
        assert_eq!(lines(" opening database "), 2, "{kind:?}:\n{log}");
        assert_eq!(lines(" recovered MANIFEST "), 2, "{kind:?}");
        assert_eq!(lines(" opened database "), 2, "{kind:?}");
        assert_eq!(lines(" closed database"), 2, "{kind:?}");
        // The reopen replayed the one batch written after the last flush.
        let replays: Vec<&str> = log.lines().filter(|l| l.contains(" replayed value log ")).collect();
        assert!(replays.last().is_some_and(|l| l.contains(" batches=1 ") && l.contains(" records=1 ")), "{replays:?}");
        match kind {
            IndexKind::Lsm => {
                assert!(lines(" flush finished ") >= 3, "{log}");
                let flush = log.lines().find(|l| l.contains(" flush finished ")).unwrap_or_default();
                for field in [" entries=200 ", " tables=[", " bytes=", " micros="] {
                    assert!(flush.contains(field), "{field} in {flush}");
                }
                let compaction = log.lines().find(|l| l.contains(" compaction finished ")).unwrap_or_default();
                for field in
                    [" level=0 ", " reason=manual ", " inputs=[", " outputs=[", " input_bytes=", " output_bytes="]
                {
                    assert!(compaction.contains(field), "{field} in {compaction}");
                }
            }
            IndexKind::Hash { .. } => assert!(lines(" checkpoint finished ") >= 3, "{log}"),
        }
        assert!(!gc.segments_released.is_empty(), "{kind:?}: the overwrites left garbage to collect");
        let released: usize = log
            .lines()
            .filter(|l| l.contains(" gc run finished "))
            .filter_map(|l| {
                l.split(" released=[")
                    .nth(1)?
                    .split(']')
                    .next()
                    .map(|ids| ids.split(',').filter(|s| !s.is_empty()).count())
            })
            .sum();
        assert_eq!(released, gc.segments_released.len(), "{kind:?}:\n{log}");
        assert!(lines(" garbage survey finished ") >= 1 || matches!(kind, IndexKind::Hash { .. }), "{log}");
    }
    Ok(())
}

#[test]
fn the_log_rotates_at_its_cap_and_at_each_open() -> Result<()> {
    let fs = MemFileSystem::new();
    let options = Options {
        info_log: InfoLogOptions { enabled: true, max_file_size: 1024, keep_old_files: 2 },
        ..mem_options(&fs, IndexKind::Lsm)
    };
    let db = Db::open("/db", options.clone())?;
    overwrite(&db, 12)?;
    let names = fs.list(Path::new("/db"))?;
    for name in ["LOG", "LOG.old.1", "LOG.old.2"] {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
        let len = fs.file_size(&Path::new("/db").join(name))?;
        assert!(len > 0 && len <= 1024, "{name}: {len} bytes");
    }
    assert!(!names.iter().any(|n| n == "LOG.old.3"), "only two rotated files are kept: {names:?}");
    drop(db);
    // The reopen moves the LOG of the closed database, whole, to LOG.old.1.
    let at_close = String::from_utf8_lossy(&fs.read_all(Path::new("/db/LOG"))?).into_owned();
    assert!(at_close.contains(" closed database"), "{at_close}");
    let db = Db::open("/db", options)?;
    let previous = String::from_utf8_lossy(&fs.read_all(Path::new("/db/LOG.old.1"))?).into_owned();
    assert_eq!(previous, at_close, "the reopen rotated the LOG away");
    let fresh = String::from_utf8_lossy(&fs.read_all(Path::new("/db/LOG"))?).into_owned();
    assert!(fresh.lines().next().is_some_and(|l| l.contains(" opening database ")), "{fresh}");
    drop(db);
    // Destroying the database removes its LOGs too.
    Db::destroy("/db", &Options { fs: Arc::new(fs.clone()), ..Options::default() })?;
    assert!(!fs.exists(Path::new("/db/LOG")) && !fs.exists(Path::new("/db/LOG.old.1")));
    Ok(())
}

#[test]
fn a_disabled_log_leaves_no_file() -> Result<()> {
    let fs = MemFileSystem::new();
    let options = Options {
        info_log: InfoLogOptions { enabled: false, ..InfoLogOptions::default() },
        ..mem_options(&fs, IndexKind::Lsm)
    };
    let db = Db::open("/db", options)?;
    overwrite(&db, 1)?;
    drop(db);
    assert!(log_text(&fs).is_empty());
    Ok(())
}

#[test]
fn background_errors_are_logged() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(small_options(IndexKind::Lsm, 0)))?;
    db.put("k", "v")?;
    env.fault.inject(Fault::new(FaultKind::Sync).on_path(".sst").persistent());
    assert!(db.flush().is_err(), "the flush cannot sync its table");
    env.fault.clear();
    let log = log_text(&env.mem);
    assert!(log.lines().any(|l| l.contains(" ERROR ") && l.contains(" flush failed error=")), "{log}");
    assert!(log.lines().any(|l| l.contains(" background error: writes stop until reopen ")), "{log}");
    Ok(())
}

/// A failing LOG must never fail the database: every LOG write fails here, and the database
/// works as ever.
#[test]
fn a_log_that_cannot_be_written_is_skipped() -> Result<()> {
    let env = CrashEnv::new();
    env.fault.inject(Fault::new(FaultKind::Create).on_path("LOG").persistent());
    env.fault.inject(Fault::new(FaultKind::Append).on_path("LOG").persistent());
    let db = Db::open("/db", env.options(small_options(IndexKind::Lsm, 0)))?;
    overwrite(&db, 2)?;
    assert_eq!(db.get("key0001")?.as_deref(), Some(&value_for(1001, 300)[..]));
    Ok(())
}

/// The library writes nothing to stderr (nor stdout) while it opens, writes, flushes, compacts,
/// collects garbage and closes: a child process does all that on a real directory, and its
/// output is checked.
#[test]
fn the_library_prints_nothing() -> Result<()> {
    const CHILD: &str = "SPLITKV_QUIET_CHILD_DIR";
    if let Ok(dir) = std::env::var(CHILD) {
        let options = Options { background_gc: true, ..small_options(IndexKind::Lsm, 0) };
        let db = Db::open(&dir, options)?;
        overwrite(&db, 4)?;
        db.compact_range(None, None)?;
        db.run_gc()?;
        let _ = db.stats().to_string();
        db.close()?;
        let db = Db::open(&dir, small_options(IndexKind::Lsm, 0))?;
        drop(db);
        return Ok(());
    }
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("db");
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["--exact", "the_library_prints_nothing", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD, &dir)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert_eq!(stderr, "", "the library wrote to stderr");
    // The harness prints its own summary on stdout; the library adds nothing to it.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().all(|l| l.is_empty() || l.starts_with("running ") || l.starts_with("test result") || l == "."),
        "{stdout}"
    );
    // And the LOG was written.
    let log = std::fs::read_to_string(dir.join("LOG.old.1"))?;
    assert!(log.contains(" compaction finished ") && log.contains(" flush finished "), "{log}");
    Ok(())
}
