//! A write right after reopening a database whose values are all separated, with tiny
//! memtables and segments (found by the Python package's reopen test).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::thread::ThreadId;

use common::{key, small_options, value_for};
use parking_lot::{Condvar, Mutex};
use splitkv::fs::{AccessPattern, FileLock, FileSystem, MappedFile, MemFileSystem, RandomAccessFile, WritableFile};
use splitkv::{Db, IndexKind, Options, ReadOptions, Result};

fn count(db: &Db) -> Result<usize> {
    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next()?;
    }
    Ok(n)
}

#[test]
fn writes_after_reopen_succeed() -> Result<()> {
    let rounds: usize = std::env::var("SPLITKV_REOPEN_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    for round in 0..rounds {
        let dir = tempfile::tempdir()?;
        let opts = small_options(IndexKind::Lsm, 0);
        {
            let db = Db::open(dir.path(), opts.clone())?;
            for i in 0..2000u64 {
                db.put(key(i), value_for(i, 8 * (i as usize % 30)))?;
            }
            assert_eq!(count(&db)?, 2000);
            db.delete(key(7))?;
            db.close()?;
        }
        let db = Db::open(dir.path(), opts)?;
        assert_eq!(count(&db)?, 1999);
        db.put(b"after", b"reopen").unwrap_or_else(|e| {
            let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            panic!("round {round}: {e}; files {names:?}")
        });
    }
    Ok(())
}

/// What the gates of [`GatedFs`] have seen.
#[derive(Default)]
struct GateState {
    /// The thread running `Db::open`; every other thread is background work.
    opener: Option<ThreadId>,
    /// A background thread created `CURRENT.tmp` (switching to a new MANIFEST).
    temp_created: bool,
    /// The test let the background thread rename `CURRENT.tmp` over `CURRENT`.
    rename_released: bool,
    /// How that rename ended.
    rename_result: Option<std::result::Result<(), String>>,
}

/// A file system that holds two threads at chosen points, to force one interleaving of a
/// reopen with the background work it starts:
/// - the opening thread's first read of log records (the replay of the log tail, which runs
///   after the index has started its background workers) waits until a background thread has
///   created `CURRENT.tmp`;
/// - that background thread's rename of `CURRENT.tmp` waits until the test releases it.
struct GatedFs {
    inner: Arc<dyn FileSystem>,
    gate: Arc<(Mutex<GateState>, Condvar)>,
}

impl GatedFs {
    fn is_opener(state: &GateState) -> bool {
        state.opener == Some(std::thread::current().id())
    }
}

struct GatedFile {
    inner: Arc<dyn RandomAccessFile>,
    gate: Arc<(Mutex<GateState>, Condvar)>,
}

impl RandomAccessFile for GatedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        // Offset 0 is the segment header, read when the log is opened; records come after it.
        if offset > 0 {
            let (lock, cv) = &*self.gate;
            let mut state = lock.lock();
            if GatedFs::is_opener(&state) {
                while !state.temp_created {
                    cv.wait(&mut state);
                }
            }
        }
        self.inner.read_exact_at(offset, buf)
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn advise(&self, pattern: AccessPattern) {
        self.inner.advise(pattern)
    }
    fn is_cached(&self, offset: u64, len: u64) -> bool {
        self.inner.is_cached(offset, len)
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len)
    }
}

impl FileSystem for GatedFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = self.inner.create(path)?;
        if path.ends_with("CURRENT.tmp") {
            let (lock, cv) = &*self.gate;
            let mut state = lock.lock();
            if state.opener.is_some() && !Self::is_opener(&state) {
                state.temp_created = true;
                cv.notify_all();
            }
        }
        Ok(file)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = self.inner.open(path)?;
        if path.extension().is_some_and(|e| e == "vlog") {
            return Ok(Arc::new(GatedFile { inner: file, gate: Arc::clone(&self.gate) }));
        }
        Ok(file)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.inner.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (lock, cv) = &*self.gate;
        let mut state = lock.lock();
        let gated = from.ends_with("CURRENT.tmp")
            && state.opener.is_some()
            && !Self::is_opener(&state)
            && state.rename_result.is_none();
        if !gated {
            drop(state);
            return self.inner.rename(from, to);
        }
        while !state.rename_released {
            cv.wait(&mut state);
        }
        let result = self.inner.rename(from, to);
        state.rename_result = Some(result.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        cv.notify_all();
        result
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<bool> {
        self.inner.punch_hole(path, offset, len)
    }
    fn allocated_size(&self, path: &Path) -> Result<u64> {
        self.inner.allocated_size(path)
    }
    fn map(&self, path: &Path, len: u64) -> Result<Box<dyn MappedFile>> {
        self.inner.map(path, len)
    }
}

/// The first edit after a reopen starts a new MANIFEST, writing `CURRENT.tmp` and renaming it
/// over `CURRENT`. A compaction left pending by the previous run makes that edit on a background
/// worker while `Db::open` is still recovering; the temporary files open removes (left by a
/// crash) must not include that one. When they did, the rename failed with "not found", the
/// worker's error poisoned the database (the next write failed), and the new MANIFEST stayed
/// beside the old one.
#[test]
fn recovery_does_not_remove_a_background_workers_current_tmp() -> Result<()> {
    let mem = MemFileSystem::new();
    let gate = Arc::new((Mutex::new(GateState::default()), Condvar::new()));
    let fs: Arc<dyn FileSystem> = Arc::new(GatedFs { inner: mem.shared(), gate: Arc::clone(&gate) });
    let dir = Path::new("/db");
    let base = Options { fs, background_gc: false, ..small_options(IndexKind::Lsm, 0) };
    // The first run leaves three level-0 tables (no compaction: the trigger is out of reach)
    // and a log tail to replay.
    let first = Options {
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        ..base.clone()
    };
    let db = Db::open(dir, first)?;
    let mut next = 0u64;
    for _ in 0..3 {
        for _ in 0..100 {
            db.put(key(next), value_for(next, 100))?;
            next += 1;
        }
        db.flush()?;
    }
    for _ in 0..10 {
        db.put(key(next), value_for(next, 100))?;
        next += 1;
    }
    assert_eq!(db.property("splitkv.num-files-at-level0").as_deref(), Some("3"));
    db.close()?;

    // Reopened with a trigger the three tables reach: a worker compacts them at once.
    let second = Options { level0_file_num_compaction_trigger: 2, ..base.clone() };
    gate.0.lock().opener = Some(std::thread::current().id());
    let db = Db::open(dir, second)?;
    let rename = {
        let (lock, cv) = &*gate;
        let mut state = lock.lock();
        state.rename_released = true;
        cv.notify_all();
        while state.rename_result.is_none() {
            cv.wait(&mut state);
        }
        state.rename_result.clone().unwrap()
    };
    let outcome = db.put(b"after", b"reopen");
    db.close()?;
    let manifests: Vec<String> = mem.file_names(dir).into_iter().filter(|n| n.starts_with("MANIFEST-")).collect();
    assert_eq!(rename, Ok(()), "the worker's switch to a new MANIFEST failed; MANIFESTs: {manifests:?}");
    outcome?;
    assert_eq!(manifests.len(), 1, "{manifests:?}");

    let db = Db::open(dir, base)?;
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"reopen"[..]));
    for i in 0..next {
        assert_eq!(db.get(key(i))?.as_deref(), Some(&value_for(i, 100)[..]), "key {i}");
    }
    Ok(())
}

/// Open removes what an earlier run left behind (a MANIFEST whose switch failed or was cut
/// short, temporary files) and nothing else, whatever the index.
#[test]
fn open_removes_manifests_current_does_not_name_and_temporary_files() -> Result<()> {
    for kind in common::index_kinds() {
        let mem = MemFileSystem::new();
        let dir = Path::new("/db");
        let opts = Options { fs: mem.shared(), ..small_options(kind, 0) };
        let db = Db::open(dir, opts.clone())?;
        db.put(b"k", b"v")?;
        db.flush()?;
        db.close()?;
        let before = mem.file_names(dir);
        let live = before.iter().find(|n| n.starts_with("MANIFEST-")).cloned().expect("a MANIFEST");
        for stray in ["MANIFEST-000099", "CURRENT.tmp", "HASHINDEX.tmp"] {
            let mut file = mem.create(&dir.join(stray))?;
            file.append(b"left over")?;
            file.sync()?;
        }

        let db = Db::open(dir, opts)?;
        let names = mem.file_names(dir);
        for stray in ["MANIFEST-000099", "CURRENT.tmp", "HASHINDEX.tmp"] {
            assert!(!names.iter().any(|n| n == stray), "{kind:?}: {stray} is left in {names:?}");
        }
        assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]), "{kind:?}");
        db.put(b"k2", b"v2")?;
        db.flush()?;
        db.close()?;
        let manifests: Vec<String> = mem.file_names(dir).into_iter().filter(|n| n.starts_with("MANIFEST-")).collect();
        assert_eq!(manifests.len(), 1, "{kind:?}: {manifests:?} (was {live})");
    }
    Ok(())
}
