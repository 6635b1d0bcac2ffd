//! A [`FileSystem`] wrapper that fails chosen operations, for error-path tests.
//!
//! Each injected [`Fault`] names an operation kind, optionally a substring the path must contain,
//! a countdown (`after`: how many matching operations succeed first) and whether it keeps failing
//! once it has fired. An operation fails if any armed fault fires on it; a failed operation is not
//! passed to the wrapped file system, so a failed `append` writes nothing and a failed `sync`
//! makes nothing durable. Handles returned by `create`, `open_append` and `open` are wrapped too,
//! so `append`, `flush`, `sync` and `read_exact_at` can fail on the file's path. `map` counts as a
//! creation ([`FaultKind::Create`]) and a mapped file's `fence` as a sync ([`FaultKind::Sync`]):
//! they are the same promises (the file exists; its bytes are durable), so a test that fails
//! syncs covers both kinds of file.
//!
//! Operations without a [`FaultKind`] (`exists`, `file_size`, `list`, `create_dir_all`,
//! `allocated_size`, `link_count`, the length queries of handles, and a mapped file's stores and flushes,
//! which cannot report an error) are passed through and never fail.
//!
//! Thread-safety: clones share the faults and counters behind one mutex; the wrapper is as
//! thread-safe as the wrapped file system.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{AccessPattern, FileLock, FileSystem, MappedFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The operations a fault (see [`FaultKind::fault`]) can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// [`FileSystem::create`] and [`FileSystem::map`].
    Create,
    /// [`FileSystem::open_append`].
    OpenAppend,
    /// [`FileSystem::open`] and [`FileSystem::open_may_shrink`] (also the first step of `read_all`).
    Open,
    /// [`RandomAccessFile::read_exact_at`] on a wrapped handle.
    Read,
    /// [`WritableFile::append`] on a wrapped handle.
    Append,
    /// [`WritableFile::flush`] on a wrapped handle.
    Flush,
    /// [`WritableFile::sync`] and [`MappedFile::fence`] on a wrapped handle.
    Sync,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// [`FileSystem::rename`]; the path matched is the source.
    Rename,
    /// [`FileSystem::remove`] and [`FileSystem::remove_dir`].
    Remove,
    /// [`FileSystem::truncate`].
    Truncate,
    /// [`FileSystem::lock`].
    Lock,
    /// [`FileSystem::punch_hole`].
    PunchHole,
    /// [`FileSystem::hard_link`]; the path matched is the existing file.
    Link,
    /// Every operation of the kinds above.
    Any,
}

impl FaultKind {
    /// A fault of this kind that fails the first matching operation, once.
    pub fn fault(self) -> Fault {
        Fault::new(self)
    }

    fn covers(self, op: FaultKind) -> bool {
        self == FaultKind::Any || self == op
    }
}

/// One planned failure. Build with [`Fault::new`] (or [`FaultKind::fault`]) and the chaining
/// helpers, e.g. `FaultKind::Sync.fault().on_path(".log").after(2).persistent()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which operations this fault targets.
    pub kind: FaultKind,
    /// If set, only operations on paths containing this substring match.
    pub path_contains: Option<String>,
    /// How many matching operations succeed before the first failure.
    pub after: u64,
    /// Keep failing every matching operation after the first failure.
    pub persistent: bool,
}

impl Fault {
    /// Fails the first operation of `kind`, once.
    pub fn new(kind: FaultKind) -> Self {
        Fault { kind, path_contains: None, after: 0, persistent: false }
    }

    /// Matches only paths containing `fragment`.
    pub fn on_path(mut self, fragment: impl Into<String>) -> Self {
        self.path_contains = Some(fragment.into());
        self
    }

    /// Lets `count` matching operations succeed first.
    pub fn after(mut self, count: u64) -> Self {
        self.after = count;
        self
    }

    /// Keeps failing after the first failure.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    fn matches(&self, op: FaultKind, path: &Path) -> bool {
        self.kind.covers(op)
            && self.path_contains.as_deref().is_none_or(|fragment| path.to_string_lossy().contains(fragment))
    }
}

impl From<FaultKind> for Fault {
    fn from(kind: FaultKind) -> Self {
        Fault::new(kind)
    }
}

#[derive(Debug)]
struct ArmedFault {
    fault: Fault,
    matched: u64,
    fired: bool,
}

#[derive(Debug, Default)]
struct Injector {
    faults: Vec<ArmedFault>,
    injected: u64,
    ops: HashMap<FaultKind, u64>,
}

impl Injector {
    /// Counts the operation and fails it if an armed fault fires.
    fn check(&mut self, op: FaultKind, path: &Path) -> Result<()> {
        *self.ops.entry(op).or_default() += 1;
        let mut fail = false;
        for armed in &mut self.faults {
            let spent = armed.fired && !armed.fault.persistent;
            if spent || !armed.fault.matches(op, path) {
                continue;
            }
            armed.matched += 1;
            if armed.matched > armed.fault.after {
                armed.fired = true;
                fail = true;
            }
        }
        if !fail {
            return Ok(());
        }
        self.injected += 1;
        Err(Error::Io(io::Error::other(format!("injected fault: {op:?} {}", path.display()))))
    }
}

type SharedInjector = Arc<Mutex<Injector>>;

/// Wraps a [`FileSystem`] and fails the operations chosen by [`inject`](Self::inject)ed faults.
///
/// Clones share faults and counters, so a test can keep one clone to steer the faults while the
/// database owns another.
#[derive(Clone)]
pub struct FaultInjectingFileSystem {
    inner: Arc<dyn FileSystem>,
    injector: SharedInjector,
}

impl FaultInjectingFileSystem {
    /// Wraps `inner`, with no faults armed.
    pub fn new(inner: Arc<dyn FileSystem>) -> Self {
        FaultInjectingFileSystem { inner, injector: SharedInjector::default() }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn FileSystem> {
        &self.inner
    }

    /// Arms a fault; a bare [`FaultKind`] fails the next operation of that kind once.
    pub fn inject(&self, fault: impl Into<Fault>) {
        self.injector.lock().faults.push(ArmedFault { fault: fault.into(), matched: 0, fired: false });
    }

    /// Disarms every fault (counters are kept).
    pub fn clear(&self) {
        self.injector.lock().faults.clear();
    }

    /// How many operations have been failed so far.
    pub fn injected_count(&self) -> u64 {
        self.injector.lock().injected
    }

    /// How many operations of `kind` were attempted (failed ones included);
    /// [`FaultKind::Any`] gives the total over all kinds.
    pub fn op_count(&self, kind: FaultKind) -> u64 {
        let injector = self.injector.lock();
        match kind {
            FaultKind::Any => injector.ops.values().sum(),
            kind => injector.ops.get(&kind).copied().unwrap_or(0),
        }
    }

    fn check(&self, op: FaultKind, path: &Path) -> Result<()> {
        self.injector.lock().check(op, path)
    }
}

impl fmt::Debug for FaultInjectingFileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let injector = self.injector.lock();
        f.debug_struct("FaultInjectingFileSystem")
            .field("faults", &injector.faults)
            .field("injected", &injector.injected)
            .finish_non_exhaustive()
    }
}

struct FaultyWritableFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    injector: SharedInjector,
}

impl WritableFile for FaultyWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.injector.lock().check(FaultKind::Append, &self.path)?;
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.injector.lock().check(FaultKind::Flush, &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.injector.lock().check(FaultKind::Sync, &self.path)?;
        self.inner.sync()
    }

    fn start_writeback(&mut self) -> Result<()> {
        self.inner.start_writeback()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultyRandomAccessFile {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    injector: SharedInjector,
}

impl RandomAccessFile for FaultyRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.injector.lock().check(FaultKind::Read, &self.path)?;
        self.inner.read_exact_at(offset, buf)
    }

    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.injector.lock().check(FaultKind::Read, &self.path)?;
        self.inner.read_vec(offset, len)
    }

    fn read_shared(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.injector.lock().check(FaultKind::Read, &self.path)?;
        self.inner.read_shared(offset, len)
    }

    fn reads_in_place(&self) -> bool {
        self.inner.reads_in_place()
    }

    fn read_exact_at_cold(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.injector.lock().check(FaultKind::Read, &self.path)?;
        self.inner.read_exact_at_cold(offset, buf)
    }

    fn read_uncached(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.injector.lock().check(FaultKind::Read, &self.path)?;
        self.inner.read_uncached(offset, len)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn advise(&self, pattern: AccessPattern) {
        self.inner.advise(pattern);
    }

    fn is_cached(&self, offset: u64, len: u64) -> bool {
        self.inner.is_cached(offset, len)
    }

    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len);
    }

    fn prefetch_in_memory(&self, offset: u64, len: u64) {
        self.inner.prefetch_in_memory(offset, len);
    }
}

struct FaultyMappedFile {
    inner: Box<dyn MappedFile>,
    path: PathBuf,
    injector: SharedInjector,
}

impl MappedFile for FaultyMappedFile {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn bytes(&self) -> &[u8] {
        self.inner.bytes()
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.inner.write(offset, data);
    }

    fn store_u64(&mut self, offset: usize, value: u64) {
        self.inner.store_u64(offset, value);
    }

    fn flush(&mut self, offset: usize, len: usize) {
        self.inner.flush(offset, len);
    }

    fn fence(&mut self) -> Result<()> {
        self.injector.lock().check(FaultKind::Sync, &self.path)?;
        self.inner.fence()
    }
}

impl FileSystem for FaultInjectingFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(FaultKind::Create, path)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FaultyWritableFile { inner, path: path.to_path_buf(), injector: Arc::clone(&self.injector) }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(FaultKind::OpenAppend, path)?;
        let inner = self.inner.open_append(path)?;
        Ok(Box::new(FaultyWritableFile { inner, path: path.to_path_buf(), injector: Arc::clone(&self.injector) }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check(FaultKind::Open, path)?;
        let inner = self.inner.open(path)?;
        Ok(Arc::new(FaultyRandomAccessFile { inner, path: path.to_path_buf(), injector: Arc::clone(&self.injector) }))
    }

    fn open_may_shrink(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check(FaultKind::Open, path)?;
        let inner = self.inner.open_may_shrink(path)?;
        Ok(Arc::new(FaultyRandomAccessFile { inner, path: path.to_path_buf(), injector: Arc::clone(&self.injector) }))
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
        self.check(FaultKind::Remove, path)?;
        self.inner.remove(path)
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.check(FaultKind::Remove, dir)?;
        self.inner.remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(FaultKind::Rename, from)?;
        self.inner.rename(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.check(FaultKind::Truncate, path)?;
        self.inner.truncate(path, len)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(FaultKind::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(FaultKind::Lock, path)?;
        self.inner.lock(path)
    }

    fn map(&self, path: &Path, len: u64) -> Result<Box<dyn MappedFile>> {
        self.check(FaultKind::Create, path)?;
        let inner = self.inner.map(path, len)?;
        Ok(Box::new(FaultyMappedFile { inner, path: path.to_path_buf(), injector: Arc::clone(&self.injector) }))
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<bool> {
        self.check(FaultKind::PunchHole, path)?;
        self.inner.punch_hole(path, offset, len)
    }

    fn allocated_size(&self, path: &Path) -> Result<u64> {
        self.inner.allocated_size(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<bool> {
        self.check(FaultKind::Link, from)?;
        self.inner.hard_link(from, to)
    }

    fn link_count(&self, path: &Path) -> Result<u64> {
        self.inner.link_count(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;

    fn setup() -> (MemFileSystem, FaultInjectingFileSystem) {
        let mem = MemFileSystem::new();
        mem.create_dir_all(Path::new("/db")).unwrap();
        let faulty = FaultInjectingFileSystem::new(mem.shared());
        (mem, faulty)
    }

    fn is_injected(result: Result<()>) -> bool {
        matches!(result, Err(Error::Io(e)) if e.to_string().starts_with("injected fault"))
    }

    #[test]
    fn countdown_lets_matching_ops_succeed_first() {
        let (_mem, fs) = setup();
        fs.inject(Fault::new(FaultKind::Create).after(2));
        assert!(fs.create(Path::new("/db/1")).is_ok());
        assert!(fs.create(Path::new("/db/2")).is_ok());
        assert!(is_injected(fs.create(Path::new("/db/3")).map(drop)));
        assert!(fs.create(Path::new("/db/4")).is_ok(), "a one-shot fault fires once");
        assert_eq!(fs.injected_count(), 1);
        assert_eq!(fs.op_count(FaultKind::Create), 4);
        assert!(!fs.exists(Path::new("/db/3")), "the failed create never reached the inner fs");
    }

    #[test]
    fn path_filter_only_counts_matching_paths() {
        let (_mem, fs) = setup();
        fs.inject(FaultKind::Create.fault().on_path(".log").after(1));
        assert!(fs.create(Path::new("/db/000001.sst")).is_ok());
        assert!(fs.create(Path::new("/db/000002.log")).is_ok());
        assert!(fs.create(Path::new("/db/000003.sst")).is_ok());
        let err = fs.create(Path::new("/db/000004.log")).err().unwrap();
        assert_eq!(err.to_string(), "I/O error: injected fault: Create /db/000004.log");
    }

    #[test]
    fn persistent_fault_keeps_failing_until_cleared() {
        let (_mem, fs) = setup();
        fs.inject(FaultKind::SyncDir.fault().after(1).persistent());
        let dir = Path::new("/db");
        assert!(fs.sync_dir(dir).is_ok());
        for _ in 0..3 {
            assert!(is_injected(fs.sync_dir(dir)));
        }
        assert_eq!(fs.injected_count(), 3);
        fs.clear();
        assert!(fs.sync_dir(dir).is_ok());
        assert_eq!(fs.op_count(FaultKind::SyncDir), 5);
    }

    #[test]
    fn failed_sync_on_wrapped_file_makes_nothing_durable() {
        let (mem, fs) = setup();
        let path = Path::new("/db/000001.log");
        fs.inject(FaultKind::Sync);
        let mut file = fs.create(path).unwrap();
        file.append(b"record").unwrap();
        assert!(is_injected(file.sync()));
        fs.sync_dir(Path::new("/db")).unwrap();
        mem.crash();
        assert_eq!(mem.file_size(path).unwrap(), 0, "the failed sync did not reach the medium");

        let mut file = fs.open_append(path).unwrap();
        file.append(b"again").unwrap();
        file.sync().unwrap();
        mem.crash();
        assert_eq!(mem.read_all(path).unwrap(), b"again");
    }

    #[test]
    fn append_flush_and_read_faults_on_handles() {
        let (_mem, fs) = setup();
        let path = Path::new("/db/vlog-1");
        let mut file = fs.create(path).unwrap();
        fs.inject(FaultKind::Append.fault().after(1));
        fs.inject(FaultKind::Flush);
        fs.inject(FaultKind::Read.fault().on_path("vlog"));
        file.append(b"ok").unwrap();
        assert!(is_injected(file.append(b"lost")));
        assert!(is_injected(file.flush()));
        assert_eq!(file.len(), 2);
        let reader = fs.open(path).unwrap();
        let mut buf = [0u8; 2];
        assert!(is_injected(reader.read_exact_at(0, &mut buf)));
        reader.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"ok");
        assert_eq!(fs.injected_count(), 3);
    }

    #[test]
    fn any_kind_matches_every_faultable_operation() {
        let (_mem, fs) = setup();
        drop(fs.create(Path::new("/db/a")).unwrap());
        fs.inject(FaultKind::Any.fault().on_path("/db/a").persistent());
        assert!(is_injected(fs.rename(Path::new("/db/a"), Path::new("/db/b"))));
        assert!(is_injected(fs.remove(Path::new("/db/a"))));
        assert!(is_injected(fs.truncate(Path::new("/db/a"), 0)));
        assert!(is_injected(fs.lock(Path::new("/db/a")).map(drop)));
        assert!(is_injected(fs.read_all(Path::new("/db/a")).map(drop)));
        assert!(fs.exists(Path::new("/db/a")), "queries are never faulted");
        assert_eq!(fs.op_count(FaultKind::Any), 6);
    }

    #[test]
    fn map_fails_as_a_creation_and_fence_as_a_sync() {
        let (mem, fs) = setup();
        let path = Path::new("/db/000007.hash");
        fs.inject(FaultKind::Create.fault().on_path(".hash"));
        assert!(is_injected(fs.map(path, 64).map(drop)));
        assert!(!fs.exists(path), "the failed map never reached the inner fs");

        let mut mapped = fs.map(path, 64).unwrap();
        fs.sync_dir(Path::new("/db")).unwrap();
        fs.inject(FaultKind::Sync.fault().on_path(".hash"));
        mapped.store_u64(8, 42);
        mapped.flush(8, 8);
        assert!(is_injected(mapped.fence()));
        assert_eq!(mapped.bytes()[8..16], 42u64.to_le_bytes(), "the store itself is not undone");
        assert_eq!(fs.op_count(FaultKind::Sync), 1);
        mem.crash();
        assert_eq!(mem.read_all(path).unwrap(), [0; 64], "the failed fence made nothing durable");

        let mut mapped = fs.map(path, 64).unwrap();
        mapped.store_u64(8, 43);
        mapped.flush(8, 8);
        mapped.fence().unwrap();
        mem.crash();
        assert_eq!(mem.read_all(path).unwrap()[8..16], 43u64.to_le_bytes());
    }

    #[test]
    fn debug_shows_armed_faults() {
        let (_mem, fs) = setup();
        fs.inject(FaultKind::Lock);
        assert!(format!("{fs:?}").contains("Lock"));
    }
}
