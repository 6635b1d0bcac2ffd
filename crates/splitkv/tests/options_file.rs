//! The `OPTIONS` file: written at every read-write open, read back by `Options::load`, checked
//! against the shape options at every open (read-only too), and never a panic when damaged.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{file_contents, small_options, HASH};
use splitkv::fs::{FaultKind, FileSystem, MemFileSystem};
use splitkv::{CompressionType, Db, Error, GcPolicyKind, IndexKind, Options, Result};

fn dir() -> &'static Path {
    Path::new("/db")
}

fn mem_options(mem: &MemFileSystem, kind: IndexKind) -> Options {
    Options { fs: mem.shared(), ..small_options(kind, 1024) }
}

#[test]
fn every_open_stores_its_options_and_load_reads_them_back() -> Result<()> {
    let mem = MemFileSystem::new();
    let given = Options {
        gc_policy: GcPolicyKind::Oldest,
        compression: CompressionType::Lz4,
        partition_split_points: vec![b"m".to_vec()],
        ..mem_options(&mem, IndexKind::Lsm)
    };
    Db::open(dir(), given.clone())?.close()?;
    let loaded = Options::load_from(mem.shared(), dir())?.expect("an OPTIONS file");
    // Everything but what describes one open call.
    let expected = Options { create_if_missing: false, ..given.clone() };
    assert_eq!(format!("{loaded:?}"), format!("{expected:?}"));
    assert!(Db::open(dir(), loaded)?.get("k")?.is_none(), "the stored options reopen the database");

    // Tuning options may change from one open to the next; the file follows.
    let retuned = Options {
        value_threshold: 0,
        segment_size: 1 << 20,
        block_size: 8192,
        compression: CompressionType::Zstd,
        write_buffer_size: 1 << 20,
        ..given
    };
    let db = Db::open(dir(), retuned)?;
    db.put("k", "v")?;
    db.close()?;
    let loaded = Options::load_from(mem.shared(), dir())?.expect("an OPTIONS file");
    assert_eq!((loaded.value_threshold, loaded.segment_size, loaded.block_size), (0, 1 << 20, 8192));
    assert_eq!(loaded.compression, CompressionType::Zstd);
    assert!(!mem.file_names(dir()).iter().any(|n| n.ends_with(".tmp")));
    Ok(())
}

#[test]
fn each_shape_option_that_differs_is_refused_by_name_and_nothing_changes() -> Result<()> {
    for kind in [IndexKind::Lsm, HASH] {
        let mem = MemFileSystem::new();
        let base = mem_options(&mem, kind);
        let db = Db::open(dir(), base.clone())?;
        db.put("k", "v")?;
        db.close()?;
        let before = file_contents(&mem, dir())?;
        let other_kind = match kind {
            IndexKind::Lsm => IndexKind::Hash { capacity: 64, shards: 1 },
            IndexKind::Hash { .. } => IndexKind::Lsm,
        };
        let (stored_kind, given_kind) = match kind {
            IndexKind::Lsm => ("lsm", "hash"),
            IndexKind::Hash { .. } => ("hash", "lsm"),
        };
        let wrong: [(Options, &str, &str, &str); 2] = [
            (Options { index: other_kind, ..base.clone() }, "index", stored_kind, given_kind),
            (Options { num_levels: 5, ..base.clone() }, "num_levels", "7", "5"),
        ];
        for (options, name, stored, given) in wrong {
            for read_only in [false, true] {
                let opened = if read_only {
                    Db::open_read_only(dir(), options.clone())
                } else {
                    Db::open(dir(), options.clone())
                };
                match opened {
                    Err(Error::InvalidArgument(m)) => {
                        assert!(m.contains(&format!("option {name} ")), "{kind:?}/{name}: {m}");
                        assert!(m.contains(&format!("is {stored} (stored")), "{kind:?}/{name}: {m}");
                        assert!(m.contains(&format!("but {given} was given")), "{kind:?}/{name}: {m}");
                    }
                    other => panic!("{kind:?}/{name} (read-only {read_only}): expected a mismatch, got {other:?}"),
                }
                assert_eq!(file_contents(&mem, dir())?, before, "{kind:?}/{name}: a refused open changed files");
            }
        }
        // A hash table's capacity and shards only size a new table and start threads.
        if let IndexKind::Hash { .. } = kind {
            let db = Db::open(dir(), Options { index: IndexKind::Hash { capacity: 1 << 20, shards: 2 }, ..base })?;
            assert_eq!(db.get("k")?.as_deref(), Some(&b"v"[..]));
        }
    }
    Ok(())
}

#[test]
fn a_database_from_before_options_files_opens_and_gets_one() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = mem_options(&mem, IndexKind::Lsm);
    let db = Db::open(dir(), options.clone())?;
    db.put("k", "v")?;
    db.close()?;
    mem.remove(&dir().join("OPTIONS"))?;
    assert!(Options::load_from(mem.shared(), dir())?.is_none());
    // No stored options: nothing to check, even read-only with other shape options.
    let reader = Db::open_read_only(dir(), Options { num_levels: 9, ..options.clone() })?;
    assert_eq!(reader.get("k")?.as_deref(), Some(&b"v"[..]));
    drop(reader);
    assert!(!mem.file_names(dir()).contains(&"OPTIONS".to_string()), "read-only wrote OPTIONS");
    Db::open(dir(), options)?.close()?;
    assert!(Options::load_from(mem.shared(), dir())?.is_some());
    Ok(())
}

#[test]
fn a_damaged_options_file_is_an_error_never_a_panic() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = mem_options(&mem, IndexKind::Lsm);
    Db::open(dir(), options.clone())?.close()?;
    let path = dir().join("OPTIONS");
    let good = mem.read_all(&path)?;
    let rewrite = |bytes: &[u8]| -> Result<()> {
        let mut f = mem.create(&path)?;
        f.append(bytes)?;
        f.sync()
    };
    // Gross damage: every way of opening says where, as corruption.
    for damaged in [&good[..good.len() / 2], b"", b"\x00\x01garbage", b"{\"format_version\": 1, \"options\": 7}"] {
        rewrite(damaged)?;
        let load = Options::load_from(mem.shared(), dir());
        assert!(matches!(load, Err(Error::Corruption { ref file, .. }) if file == &path), "{load:?}");
        for read_only in [false, true] {
            let opened =
                if read_only { Db::open_read_only(dir(), options.clone()) } else { Db::open(dir(), options.clone()) };
            assert!(matches!(opened, Err(Error::Corruption { .. })), "read-only {read_only}: {opened:?}");
        }
    }
    // Every single flipped byte: some still parse (a digit for a digit), none may panic.
    for at in 0..good.len() {
        let mut damaged = good.clone();
        damaged[at] ^= 0x5a;
        rewrite(&damaged)?;
        let _ = Options::load_from(mem.shared(), dir());
        if let Ok(db) = Db::open_read_only(dir(), options.clone()) {
            drop(db);
        }
    }
    // Removing the damaged file lets the database open with the options given.
    mem.remove(&path)?;
    Db::open(dir(), options)?.close()?;
    Ok(())
}

#[test]
fn a_failed_options_write_fails_the_open_and_leaves_the_old_file() -> Result<()> {
    let env = common::CrashEnv::new();
    let options = env.options(small_options(IndexKind::Lsm, 1024));
    Db::open(dir(), options.clone())?.close()?;
    let before = env.mem.read_all(&dir().join("OPTIONS"))?;
    env.fault.inject(FaultKind::Rename.fault().on_path("OPTIONS"));
    let retuned = Options { block_size: 8192, ..options.clone() };
    assert!(Db::open(dir(), retuned.clone()).is_err());
    assert_eq!(env.mem.read_all(&dir().join("OPTIONS"))?, before);
    env.mem.crash();
    let db = Db::open(dir(), retuned)?;
    drop(db);
    let names = env.mem.file_names(dir());
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "leftover temporary file: {names:?}");
    let loaded = Options::load_from(Arc::new(env.mem.clone()), dir())?.expect("OPTIONS");
    assert_eq!(loaded.block_size, 8192);
    Ok(())
}
