//! An in-memory [`FileSystem`] that can simulate power loss.
//!
//! The model follows the medium assumptions stated in the parent module. Files are *inodes*
//! (bytes plus the length known to be synced); paths name inodes through two namespaces:
//! - the **live** namespace, which `create`, `rename`, `remove` and `lock` change at once and
//!   which every lookup uses;
//! - the **durable** namespace, which only [`FileSystem::sync_dir`] updates, copying the live
//!   entries directly inside the synced directory.
//!
//! A hard link is a second path naming the same inode, in either namespace.
//!
//! [`MemFileSystem::crash`] replaces the live namespace by the durable one and cuts every inode
//! to its synced length ([`MemFileSystem::crash_with_torn_tails`] keeps a random prefix of each
//! unsynced tail instead). Directories, `truncate` and `punch_hole` are durable immediately:
//! the engine creates directories once, and the OS implementation syncs a truncation itself.
//!
//! **Mapped files** simulate persistent memory. A mapped inode's `data` is the *durable* image
//! (so its whole length counts as synced); the mapping keeps its own current view, and the inode
//! records every 8-byte unit stored since it was last made durable (its newest value, and whether
//! it was flushed since that store). `fence` copies the flushed units into `data`; a crash drops
//! the recorded units ([`MemFileSystem::crash_with_torn_tails`] keeps each one with probability
//! one half instead, flushed or not, since a cache line may be evicted at any time). The record
//! outlives the mapping, as the page cache does, so a new mapping without a crash in between
//! sees every store. Simplifications: `open` and `read_exact_at` of a mapped file read the
//! durable image only (a real page cache would show the stores too), and two live mappings of one
//! file do not see each other's stores (the engine maps a file once).
//!
//! Invariants: every inode's `synced_len <= data.len()`; the punched ranges are disjoint, sorted
//! and inside the file; every recorded unit starts inside the file. A crash gives every surviving
//! inode a fresh copy, so handles (and mappings) opened before it keep working on the old, now
//! detached, inodes and cannot disturb the post-crash state.
//!
//! Thread-safety: the file system is `Clone`; clones share one state behind a mutex. Each inode
//! has its own mutex, always taken after the namespace mutex, never before it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, MappedFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The unit, in bytes, that a mapped file's crash keeps or loses whole (see [`MappedFile`]).
const UNIT: usize = 8;

/// A mapped unit stored since it was last made durable.
#[derive(Clone, Copy, Debug)]
struct PendingUnit {
    /// The unit's newest bytes (in the last unit of a file whose length is not a multiple of
    /// [`UNIT`], those past the end are unused).
    value: [u8; UNIT],
    /// Flushed since its newest store, so the next fence makes it durable.
    flushed: bool,
}

/// The bytes of one file and how much of them would survive a crash.
#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    synced_len: usize,
    /// Disjoint, sorted `[start, end)` ranges freed by `punch_hole`.
    holes: Vec<(u64, u64)>,
    /// Mapped units (by index: offset / [`UNIT`]) stored but not yet durable. Ordered so that
    /// a seeded crash visits them in the same order every time.
    pending: BTreeMap<usize, PendingUnit>,
}

impl Inode {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }

    fn punched_bytes(&self) -> u64 {
        self.holes.iter().map(|(start, end)| end - start).sum()
    }

    fn add_hole(&mut self, start: u64, end: u64) {
        let (mut start, mut end) = (start, end);
        let mut kept = Vec::with_capacity(self.holes.len() + 1);
        for &(s, e) in &self.holes {
            if e < start || s > end {
                kept.push((s, e));
            } else {
                start = start.min(s);
                end = end.max(e);
            }
        }
        kept.push((start, end));
        kept.sort_unstable();
        self.holes = kept;
    }

    fn set_len(&mut self, len: usize) {
        self.data.resize(len, 0);
        // Stores to bytes cut off go with them.
        let units = len.div_ceil(UNIT);
        self.pending.retain(|&unit, _| unit < units);
        let len = len as u64;
        self.holes.retain(|&(start, _)| start < len);
        for hole in &mut self.holes {
            hole.1 = hole.1.min(len);
        }
    }

    /// Writes a mapped unit's bytes into the durable image, as far as the file reaches.
    fn make_durable(data: &mut [u8], unit: usize, value: &[u8; UNIT]) {
        let start = unit.saturating_mul(UNIT);
        if let Some(target) = data.get_mut(start..) {
            let n = target.len().min(UNIT);
            target[..n].copy_from_slice(&value[..n]);
        }
    }

    /// The durable image with every pending unit laid over it: what a new mapping sees.
    fn current_view(&self) -> Vec<u8> {
        let mut view = self.data.clone();
        for (&unit, pending) in &self.pending {
            Self::make_durable(&mut view, unit, &pending.value);
        }
        view
    }

    /// The inode as it would be found after power loss: `loss` decides how much of the unsynced
    /// tail and which pending mapped units survive.
    fn after_crash(&self, loss: &mut Loss) -> Inode {
        let mut survivor = Inode {
            data: self.data.clone(),
            synced_len: self.synced_len,
            holes: self.holes.clone(),
            pending: BTreeMap::new(),
        };
        let len = (self.synced_len + loss.tail_kept(self.data.len() - self.synced_len)).min(self.data.len());
        survivor.set_len(len);
        survivor.synced_len = len;
        for (&unit, pending) in &self.pending {
            if loss.keeps_unit() {
                Self::make_durable(&mut survivor.data, unit, &pending.value);
            }
        }
        survivor
    }
}

/// What a crash keeps of the state that was not yet durable.
enum Loss {
    /// Nothing.
    Everything,
    /// Parts chosen pseudo-randomly by the generator.
    Torn(SplitMix64),
}

impl Loss {
    /// How many of `unsynced` appended bytes survive.
    fn tail_kept(&mut self, unsynced: usize) -> usize {
        match self {
            Loss::Everything => 0,
            Loss::Torn(rng) => rng.tail_length(unsynced),
        }
    }

    /// Whether the next pending mapped unit survives: independently of the others, half the time.
    fn keeps_unit(&mut self) -> bool {
        match self {
            Loss::Everything => false,
            Loss::Torn(rng) => rng.next() >> 63 == 1,
        }
    }
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Default)]
struct State {
    live: BTreeMap<PathBuf, InodeRef>,
    durable: BTreeMap<PathBuf, InodeRef>,
    dirs: BTreeSet<PathBuf>,
    /// Locked path -> token of the guard holding it. Tokens keep a guard taken before a crash
    /// from releasing a lock taken after it.
    locks: HashMap<PathBuf, u64>,
    next_lock_token: u64,
}

impl State {
    fn parent_exists(&self, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(parent) => parent.as_os_str().is_empty() || parent == Path::new("/") || self.dirs.contains(parent),
        }
    }

    fn require_parent(&self, path: &Path) -> Result<()> {
        if self.parent_exists(path) {
            Ok(())
        } else {
            Err(not_found(path.parent().unwrap_or(path)))
        }
    }

    fn live_inode(&self, path: &Path) -> Result<InodeRef> {
        self.live.get(path).cloned().ok_or_else(|| not_found(path))
    }

    /// Replaces the live namespace by the durable one, each inode reduced to what `loss` keeps.
    fn crash(&mut self, loss: &mut Loss) {
        let mut survivors: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        let mut durable = BTreeMap::new();
        for (path, inode) in &self.durable {
            // Keyed by identity so that a file reachable by two durable names stays one file.
            let survivor = survivors
                .entry(Arc::as_ptr(inode))
                .or_insert_with(|| Arc::new(Mutex::new(inode.lock().after_crash(loss))));
            durable.insert(path.clone(), Arc::clone(survivor));
        }
        self.live = durable.clone();
        self.durable = durable;
        self.locks.clear();
    }
}

fn not_found(path: &Path) -> Error {
    Error::Io(io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file or directory", path.display())))
}

fn is_in_dir(path: &Path, dir: &Path) -> bool {
    path.parent() == Some(dir)
}

/// splitmix64: a tiny deterministic generator, enough to choose torn-tail lengths from a seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A length in `0..=max`: a quarter of the time nothing, a quarter of the time all of it,
    /// otherwise anywhere, so recovery meets whole, lost and torn tails alike.
    fn tail_length(&mut self, max: usize) -> usize {
        let roll = self.next();
        match roll % 4 {
            0 => 0,
            1 => max,
            _ => ((roll >> 2) % (max as u64 + 1)) as usize,
        }
    }
}

/// An in-memory file system whose [`crash`](MemFileSystem::crash) keeps only durable state.
///
/// Clones share the same files, so a test can keep one clone to crash and inspect while the
/// database owns another.
#[derive(Clone, Default)]
pub struct MemFileSystem {
    state: Arc<Mutex<State>>,
    /// Test hook: readers report their bytes as not in memory (see [`MemFileSystem::set_uncached`]).
    uncached: Arc<AtomicBool>,
}

impl MemFileSystem {
    /// An empty file system (the root and relative top level exist; nothing else does).
    pub fn new() -> Self {
        Self::default()
    }

    /// This file system as the shared handle the engine takes.
    pub fn shared(&self) -> Arc<dyn FileSystem> {
        Arc::new(self.clone())
    }

    /// With `true`, every reader's [`RandomAccessFile::is_cached`] answers "not in memory", as
    /// an OS file system does for bytes outside the page cache, so that code paths which wait
    /// for I/O (read-ahead on background threads) run under test. Reads are unaffected.
    pub fn set_uncached(&self, uncached: bool) {
        self.uncached.store(uncached, Ordering::Relaxed);
    }

    /// Simulates power loss: only directory entries made durable by `sync_dir` remain, each file
    /// cut to the bytes synced by `WritableFile::sync`, each mapped file holding only the units
    /// made durable by `MappedFile::fence` (every other store is lost); every lock is released.
    /// Mappings taken before the crash keep working on the dead files, invisible from now on.
    pub fn crash(&self) {
        self.state.lock().crash(&mut Loss::Everything);
    }

    /// Like [`crash`](Self::crash), but each file keeps a prefix, chosen pseudo-randomly from
    /// `seed`, of its unsynced tail: appended-but-unsynced bytes survive at most as a prefix
    /// (sometimes none of them, sometimes all). In a mapped file, each 8-byte unit stored since it
    /// was last made durable, flushed or not, independently keeps its newest value about half the
    /// time and its durable value otherwise. The same seed and the same history give the same
    /// result.
    pub fn crash_with_torn_tails(&self, seed: u64) {
        self.state.lock().crash(&mut Loss::Torn(SplitMix64(seed)));
    }

    /// Flips every bit of the byte at `offset` of `path` (for corruption tests). The damage is
    /// treated as already on the medium: it survives a crash if the byte was synced.
    pub fn flip_byte(&self, path: &Path, offset: u64) -> Result<()> {
        let inode = self.state.lock().live_inode(path)?;
        let mut inode = inode.lock();
        let len = inode.len();
        let byte = usize::try_from(offset).ok().and_then(|at| inode.data.get_mut(at)).ok_or_else(|| {
            Error::InvalidArgument(format!("offset {offset} is outside {} ({len} bytes)", path.display()))
        })?;
        *byte ^= 0xff;
        Ok(())
    }

    /// Sorted names of the files (not directories) directly in `dir`, in the live namespace.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let state = self.state.lock();
        state
            .live
            .keys()
            .filter(|path| is_in_dir(path, dir))
            .filter_map(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()))
            .collect()
    }

    /// Total length of all live files (a file reachable by two names counts once).
    pub fn total_bytes(&self) -> u64 {
        let state = self.state.lock();
        let mut seen = BTreeSet::new();
        state.live.values().filter(|inode| seen.insert(Arc::as_ptr(inode))).map(|inode| inode.lock().len()).sum()
    }
}

impl fmt::Debug for MemFileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("MemFileSystem")
            .field("live_files", &state.live.len())
            .field("durable_files", &state.durable.len())
            .field("dirs", &state.dirs.len())
            .field("locks", &state.locks.len())
            .finish()
    }
}

struct MemWritableFile {
    inode: InodeRef,
    len: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        // Appends are visible to readers at once; only `sync` decides what survives a crash.
        self.inode.lock().data.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut inode = self.inode.lock();
        inode.synced_len = inode.data.len();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct MemRandomAccessFile {
    inode: InodeRef,
    path: PathBuf,
    uncached: Arc<AtomicBool>,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let inode = self.inode.lock();
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .filter(|range| range.end <= inode.data.len());
        let Some(range) = range else {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at {offset} past the end of {} ({} bytes)",
                    buf.len(),
                    self.path.display(),
                    inode.len()
                ),
            )));
        };
        buf.copy_from_slice(&inode.data[range]);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.inode.lock().len())
    }

    fn is_cached(&self, _offset: u64, _len: u64) -> bool {
        !self.uncached.load(Ordering::Relaxed)
    }
}

/// A mapping of a [`MemFileSystem`] file: its own current view, the pending units in the inode.
struct MemMappedFile {
    inode: InodeRef,
    /// Every store so far: the durable image with the pending units laid over it.
    view: Vec<u8>,
    /// For assertion messages.
    path: PathBuf,
}

impl MemMappedFile {
    /// Records the units covering `[start, end)` of the view as stored and not yet flushed.
    fn record(&self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let mut inode = self.inode.lock();
        for unit in start / UNIT..=(end - 1) / UNIT {
            let from = unit * UNIT;
            if from >= inode.data.len() {
                // The file was cut while mapped (outside the contract): nothing left to keep.
                break;
            }
            let bytes = self.view.get(from..self.view.len().min(from + UNIT)).unwrap_or_default();
            let mut value = [0; UNIT];
            value[..bytes.len()].copy_from_slice(bytes);
            inode.pending.insert(unit, PendingUnit { value, flushed: false });
        }
    }
}

impl MappedFile for MemMappedFile {
    fn len(&self) -> usize {
        self.view.len()
    }

    fn bytes(&self) -> &[u8] {
        &self.view
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        let end = offset.checked_add(data.len()).filter(|&end| end <= self.view.len());
        debug_assert!(end.is_some(), "store of {} bytes at {offset} outside {}", data.len(), self.path.display());
        let Some(target) = end.and_then(|end| self.view.get_mut(offset..end)) else {
            return;
        };
        target.copy_from_slice(data);
        self.record(offset, offset + data.len());
    }

    fn store_u64(&mut self, offset: usize, value: u64) {
        // An aligned word is exactly one unit, so the crash model keeps it whole; a misaligned
        // one spans two units that a crash may split, as the OS implementation's copy would.
        debug_assert!(offset.is_multiple_of(UNIT), "misaligned 8-byte store at {offset} in {}", self.path.display());
        self.write(offset, &value.to_le_bytes());
    }

    fn flush(&mut self, offset: usize, len: usize) {
        let start = offset.min(self.view.len());
        let end = offset.saturating_add(len).min(self.view.len());
        if start >= end {
            return;
        }
        // A unit partly inside the range is flushed whole: write-back moves whole cache lines.
        let mut inode = self.inode.lock();
        for (_, pending) in inode.pending.range_mut(start / UNIT..=(end - 1) / UNIT) {
            pending.flushed = true;
        }
    }

    fn fence(&mut self) -> Result<()> {
        let mut inode = self.inode.lock();
        let Inode { data, pending, .. } = &mut *inode;
        pending.retain(|&unit, unit_state| {
            if unit_state.flushed {
                Inode::make_durable(data, unit, &unit_state.value);
            }
            !unit_state.flushed
        });
        Ok(())
    }
}

struct MemFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    token: u64,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if state.locks.get(&self.path) == Some(&self.token) {
            state.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut state = self.state.lock();
        state.require_parent(path)?;
        if state.dirs.contains(path) {
            return Err(Error::InvalidArgument(format!("{} is a directory", path.display())));
        }
        let inode = match state.live.get(path) {
            // O_TRUNC keeps the inode, and the lost bytes are lost for good.
            Some(existing) => {
                let mut inode = existing.lock();
                inode.set_len(0);
                inode.synced_len = 0;
                drop(inode);
                Arc::clone(existing)
            }
            None => {
                let inode = InodeRef::default();
                state.live.insert(path.to_path_buf(), Arc::clone(&inode));
                inode
            }
        };
        Ok(Box::new(MemWritableFile { inode, len: 0 }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inode = self.state.lock().live_inode(path)?;
        let len = inode.lock().len();
        Ok(Box::new(MemWritableFile { inode, len }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let inode = self.state.lock().live_inode(path)?;
        Ok(Arc::new(MemRandomAccessFile { inode, path: path.to_path_buf(), uncached: Arc::clone(&self.uncached) }))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.state.lock();
        state.live.contains_key(path) || state.dirs.contains(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let inode = self.state.lock().live_inode(path)?;
        let len = inode.lock().len();
        Ok(len)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let state = self.state.lock();
        if !state.dirs.contains(dir) && !dir.as_os_str().is_empty() && dir != Path::new("/") {
            return Err(not_found(dir));
        }
        let files = state.live.keys();
        let subdirs = state.dirs.iter();
        Ok(files
            .chain(subdirs)
            .filter(|path| is_in_dir(path, dir))
            .filter_map(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()))
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() || ancestor == Path::new("/") {
                continue;
            }
            if state.live.contains_key(ancestor) {
                return Err(Error::InvalidArgument(format!("{} is a file", ancestor.display())));
            }
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.live.remove(path).map(drop).ok_or_else(|| not_found(path))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let occupied =
            state.live.keys().any(|path| is_in_dir(path, dir)) || state.dirs.iter().any(|path| is_in_dir(path, dir));
        if occupied {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                format!("{}: directory not empty", dir.display()),
            )));
        }
        state.dirs.remove(dir);
        // The directory itself is gone durably, so names the directory never synced go with it.
        state.durable.retain(|path, _| !is_in_dir(path, dir));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state.require_parent(to)?;
        if state.dirs.contains(to) {
            return Err(Error::InvalidArgument(format!("{} is a directory", to.display())));
        }
        let inode = state.live.remove(from).ok_or_else(|| not_found(from))?;
        state.live.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let inode = self.state.lock().live_inode(path)?;
        let len = usize::try_from(len).map_err(|_| Error::InvalidArgument(format!("length {len} too large")))?;
        let mut inode = inode.lock();
        inode.set_len(len);
        // The OS implementation syncs the whole file after changing its length.
        inode.synced_len = len;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        if !state.dirs.contains(dir) && !dir.as_os_str().is_empty() && dir != Path::new("/") {
            return Err(not_found(dir));
        }
        let State { live, durable, .. } = &mut *state;
        durable.retain(|path, _| !is_in_dir(path, dir));
        for (path, inode) in live.iter().filter(|(path, _)| is_in_dir(path, dir)) {
            durable.insert(path.clone(), Arc::clone(inode));
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state.lock();
        state.require_parent(path)?;
        if state.locks.contains_key(path) {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| path.to_path_buf());
            return Err(Error::Locked(dir));
        }
        if !state.live.contains_key(path) {
            state.live.insert(path.to_path_buf(), InodeRef::default());
        }
        let token = state.next_lock_token;
        state.next_lock_token += 1;
        state.locks.insert(path.to_path_buf(), token);
        Ok(Box::new(MemFileLock { state: Arc::clone(&self.state), path: path.to_path_buf(), token }))
    }

    fn map(&self, path: &Path, len: u64) -> Result<Box<dyn MappedFile>> {
        let map_len = usize::try_from(len)
            .map_err(|_| Error::InvalidArgument(format!("{}: mapping length {len} too large", path.display())))?;
        let mut state = self.state.lock();
        state.require_parent(path)?;
        if state.dirs.contains(path) {
            return Err(Error::InvalidArgument(format!("{} is a directory", path.display())));
        }
        let inode = match state.live.get(path) {
            Some(existing) => Arc::clone(existing),
            None => {
                // Like `create`: the name is live at once, durable after `sync_dir`.
                let inode = InodeRef::default();
                state.live.insert(path.to_path_buf(), Arc::clone(&inode));
                inode
            }
        };
        let mut guard = inode.lock();
        if guard.data.len() > map_len {
            return Err(Error::InvalidArgument(format!(
                "{} holds {} bytes, more than the {map_len} bytes to map",
                path.display(),
                guard.data.len()
            )));
        }
        // The OS implementation syncs an extension at once; from now on `data` is the durable
        // image, all of it.
        guard.set_len(map_len);
        guard.synced_len = map_len;
        let view = guard.current_view();
        drop(guard);
        Ok(Box::new(MemMappedFile { inode, view, path: path.to_path_buf() }))
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<bool> {
        let inode = self.state.lock().live_inode(path)?;
        let mut inode = inode.lock();
        let file_len = inode.len();
        let start = offset.min(file_len);
        let end = offset.saturating_add(len).min(file_len);
        if start < end {
            // Both bounds are at most the in-memory length, so they fit in usize.
            inode.data[start as usize..end as usize].fill(0);
            inode.add_hole(start, end);
        }
        Ok(true)
    }

    fn allocated_size(&self, path: &Path) -> Result<u64> {
        let inode = self.state.lock().live_inode(path)?;
        let inode = inode.lock();
        Ok(inode.len() - inode.punched_bytes())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<bool> {
        let mut state = self.state.lock();
        let inode = state.live_inode(from)?;
        state.require_parent(to)?;
        if state.live.contains_key(to) || state.dirs.contains(to) {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: file exists", to.display()),
            )));
        }
        // Like `create`: the name is live at once, durable after `sync_dir`.
        state.live.insert(to.to_path_buf(), inode);
        Ok(true)
    }

    fn link_count(&self, path: &Path) -> Result<u64> {
        let state = self.state.lock();
        let inode = state.live_inode(path)?;
        Ok(state.live.values().filter(|other| Arc::ptr_eq(other, &inode)).count() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db_dir() -> PathBuf {
        PathBuf::from("/db")
    }

    fn setup() -> MemFileSystem {
        let fs = MemFileSystem::new();
        fs.create_dir_all(&db_dir()).unwrap();
        fs
    }

    fn write_file(fs: &MemFileSystem, path: &Path, chunks: &[(&[u8], bool)]) -> Box<dyn WritableFile> {
        let mut file = fs.create(path).unwrap();
        for (bytes, sync) in chunks {
            file.append(bytes).unwrap();
            if *sync {
                file.sync().unwrap();
            }
        }
        file
    }

    fn io_kind(err: Error) -> io::ErrorKind {
        match err {
            Error::Io(e) => e.kind(),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn synced_bytes_survive_crash_and_unsynced_are_dropped() {
        let fs = setup();
        let path = db_dir().join("000001.log");
        let _file = write_file(&fs, &path, &[(b"durable", true), (b"-volatile", false)]);
        fs.sync_dir(&db_dir()).unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"durable-volatile");

        fs.crash();
        assert_eq!(fs.read_all(&path).unwrap(), b"durable");
    }

    #[test]
    fn never_synced_file_is_empty_after_crash() {
        let fs = setup();
        let path = db_dir().join("a");
        let _file = write_file(&fs, &path, &[(b"lost", false)]);
        fs.sync_dir(&db_dir()).unwrap();
        fs.crash();
        assert_eq!(fs.file_size(&path).unwrap(), 0);
    }

    #[test]
    fn torn_tail_crash_keeps_only_a_prefix_of_the_unsynced_tail() {
        let tail: Vec<u8> = (0..200u8).collect();
        let mut kept_lengths = BTreeSet::new();
        for seed in 0..32 {
            let fs = setup();
            let path = db_dir().join("seg");
            let _file = write_file(&fs, &path, &[(b"head", true), (&tail, false)]);
            fs.sync_dir(&db_dir()).unwrap();
            fs.crash_with_torn_tails(seed);
            let data = fs.read_all(&path).unwrap();
            assert!(data.len() >= 4 && data.len() <= 204, "seed {seed}: {} bytes", data.len());
            assert_eq!(&data[..4], b"head");
            assert_eq!(&data[4..], &tail[..data.len() - 4], "seed {seed}: not a prefix");
            kept_lengths.insert(data.len());
        }
        assert!(kept_lengths.contains(&4), "some seed drops the whole tail");
        assert!(kept_lengths.contains(&204), "some seed keeps the whole tail");
        assert!(kept_lengths.iter().any(|&len| len > 4 && len < 204), "some seed tears mid-tail");
    }

    #[test]
    fn torn_tail_crash_is_deterministic_per_seed() {
        let run = |seed| {
            let fs = setup();
            let path = db_dir().join("seg");
            let _file = write_file(&fs, &path, &[(&[7u8; 1000], false)]);
            fs.sync_dir(&db_dir()).unwrap();
            fs.crash_with_torn_tails(seed);
            fs.file_size(&path).unwrap()
        };
        assert_eq!(run(42), run(42));
    }

    #[test]
    fn created_file_vanishes_after_crash_unless_directory_synced() {
        let fs = setup();
        let path = db_dir().join("MANIFEST-000002");
        let _file = write_file(&fs, &path, &[(b"edit", true)]);
        assert!(fs.exists(&path));
        fs.crash();
        assert!(!fs.exists(&path));
        assert!(fs.file_names(&db_dir()).is_empty());
    }

    #[test]
    fn removal_is_undone_by_crash_until_directory_synced() {
        let fs = setup();
        let path = db_dir().join("old.sst");
        let _file = write_file(&fs, &path, &[(b"table", true)]);
        fs.sync_dir(&db_dir()).unwrap();
        fs.remove(&path).unwrap();
        assert!(!fs.exists(&path));
        fs.crash();
        assert_eq!(fs.read_all(&path).unwrap(), b"table");

        fs.remove(&path).unwrap();
        fs.sync_dir(&db_dir()).unwrap();
        fs.crash();
        assert!(!fs.exists(&path));
    }

    #[test]
    fn rename_becomes_durable_through_sync_dir() {
        let fs = setup();
        let current = db_dir().join("CURRENT");
        let temp = db_dir().join("CURRENT.tmp");
        let _old = write_file(&fs, &current, &[(b"MANIFEST-1", true)]);
        fs.sync_dir(&db_dir()).unwrap();

        let _new = write_file(&fs, &temp, &[(b"MANIFEST-2", true)]);
        fs.rename(&temp, &current).unwrap();
        assert_eq!(fs.read_all(&current).unwrap(), b"MANIFEST-2");
        fs.crash();
        assert_eq!(fs.read_all(&current).unwrap(), b"MANIFEST-1", "rename without sync_dir is lost");
        assert!(!fs.exists(&temp));

        let _new = write_file(&fs, &temp, &[(b"MANIFEST-2", true)]);
        fs.rename(&temp, &current).unwrap();
        fs.sync_dir(&db_dir()).unwrap();
        fs.crash();
        assert_eq!(fs.read_all(&current).unwrap(), b"MANIFEST-2");
        assert_eq!(fs.file_names(&db_dir()), vec!["CURRENT".to_string()]);
    }

    #[test]
    fn reader_sees_later_appends_and_eof_past_end() {
        let fs = setup();
        let path = db_dir().join("f");
        let mut file = write_file(&fs, &path, &[(b"abc", false)]);
        let reader = fs.open(&path).unwrap();
        file.append(b"def").unwrap();
        file.flush().unwrap();
        assert_eq!(reader.len().unwrap(), 6);
        let mut buf = [0u8; 3];
        reader.read_exact_at(3, &mut buf).unwrap();
        assert_eq!(&buf, b"def");
        assert_eq!(io_kind(reader.read_exact_at(4, &mut buf).unwrap_err()), io::ErrorKind::UnexpectedEof);
        assert_eq!(io_kind(reader.read_exact_at(u64::MAX, &mut buf).unwrap_err()), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn handles_opened_before_crash_do_not_touch_the_survivors() {
        let fs = setup();
        let path = db_dir().join("wal");
        let mut writer = write_file(&fs, &path, &[(b"kept", true)]);
        fs.sync_dir(&db_dir()).unwrap();
        let reader = fs.open(&path).unwrap();
        fs.crash();
        writer.append(b"zombie").unwrap();
        writer.sync().unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"kept");
        assert_eq!(reader.len().unwrap(), 10);
    }

    #[test]
    fn open_append_continues_at_the_end() {
        let fs = setup();
        let path = db_dir().join("f");
        drop(write_file(&fs, &path, &[(b"one", true)]));
        let mut file = fs.open_append(&path).unwrap();
        assert_eq!(file.len(), 3);
        file.append(b"two").unwrap();
        assert_eq!(file.len(), 6);
        assert_eq!(fs.read_all(&path).unwrap(), b"onetwo");
    }

    #[test]
    fn missing_files_are_not_found() {
        let fs = setup();
        let missing = db_dir().join("missing");
        assert_eq!(io_kind(fs.open(&missing).err().unwrap()), io::ErrorKind::NotFound);
        assert_eq!(io_kind(fs.open_append(&missing).err().unwrap()), io::ErrorKind::NotFound);
        assert_eq!(io_kind(fs.file_size(&missing).unwrap_err()), io::ErrorKind::NotFound);
        assert_eq!(io_kind(fs.remove(&missing).unwrap_err()), io::ErrorKind::NotFound);
        assert_eq!(io_kind(fs.list(Path::new("/nowhere")).unwrap_err()), io::ErrorKind::NotFound);
        assert_eq!(io_kind(fs.create(Path::new("/nowhere/f")).err().unwrap()), io::ErrorKind::NotFound);
    }

    #[test]
    fn list_names_entries_directly_in_the_directory() {
        let fs = setup();
        fs.create_dir_all(&db_dir().join("sub/deeper")).unwrap();
        drop(write_file(&fs, &db_dir().join("b"), &[]));
        drop(write_file(&fs, &db_dir().join("sub/c"), &[]));
        let mut names = fs.list(&db_dir()).unwrap();
        names.sort();
        assert_eq!(names, vec!["b".to_string(), "sub".to_string()]);
        assert_eq!(fs.file_names(&db_dir()), vec!["b".to_string()]);
        assert!(fs.remove_dir(&db_dir().join("sub")).is_err(), "not empty");
    }

    #[test]
    fn truncate_is_durable_at_once() {
        let fs = setup();
        let path = db_dir().join("seg");
        let _file = write_file(&fs, &path, &[(b"good", true), (b"torn", false)]);
        fs.sync_dir(&db_dir()).unwrap();
        fs.truncate(&path, 6).unwrap();
        fs.crash();
        assert_eq!(fs.read_all(&path).unwrap(), b"goodto");
    }

    #[test]
    fn lock_is_exclusive_until_dropped_or_crash() {
        let fs = setup();
        let path = db_dir().join("LOCK");
        let guard = fs.lock(&path).unwrap();
        assert!(fs.exists(&path));
        match fs.lock(&path) {
            Err(Error::Locked(dir)) => assert_eq!(dir, db_dir()),
            other => panic!("expected Locked, got {:?}", other.map(|_| ())),
        }
        drop(guard);
        let stale = fs.lock(&path).unwrap();

        fs.crash();
        let fresh = fs.lock(&path).unwrap();
        // A guard from before the crash must not release the lock taken after it.
        drop(stale);
        assert!(matches!(fs.lock(&path), Err(Error::Locked(_))));
        drop(fresh);
        assert!(fs.lock(&path).is_ok());
    }

    #[test]
    fn flip_byte_corrupts_exactly_one_byte() {
        let fs = setup();
        let path = db_dir().join("f");
        drop(write_file(&fs, &path, &[(b"\x00\x01\x02", true)]));
        fs.flip_byte(&path, 1).unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"\x00\xfe\x02");
        assert!(fs.flip_byte(&path, 3).is_err());
        assert!(fs.flip_byte(&db_dir().join("missing"), 0).is_err());
    }

    #[test]
    fn punch_hole_zeroes_and_shrinks_allocation() {
        let fs = setup();
        let path = db_dir().join("seg");
        drop(write_file(&fs, &path, &[(&[9u8; 100], true)]));
        assert!(fs.punch_hole(&path, 10, 20).unwrap());
        assert!(fs.punch_hole(&path, 20, 20).unwrap(), "overlapping hole counts once");
        assert!(fs.punch_hole(&path, 90, 50).unwrap(), "hole clipped to the file");
        assert_eq!(fs.file_size(&path).unwrap(), 100);
        assert_eq!(fs.allocated_size(&path).unwrap(), 100 - 30 - 10);
        let data = fs.read_all(&path).unwrap();
        assert!(data[10..40].iter().all(|&b| b == 0));
        assert!(data[..10].iter().chain(&data[40..90]).all(|&b| b == 9));
    }

    #[test]
    fn total_bytes_counts_live_files() {
        let fs = setup();
        drop(write_file(&fs, &db_dir().join("a"), &[(b"12345", false)]));
        drop(write_file(&fs, &db_dir().join("b"), &[(b"678", false)]));
        assert_eq!(fs.total_bytes(), 8);
        fs.crash();
        assert_eq!(fs.total_bytes(), 0);
    }

    #[test]
    fn create_truncates_an_existing_file() {
        let fs = setup();
        let path = db_dir().join("f");
        drop(write_file(&fs, &path, &[(b"old contents", true)]));
        drop(write_file(&fs, &path, &[(b"new", false)]));
        assert_eq!(fs.read_all(&path).unwrap(), b"new");
    }

    /// The 8-byte word at unit `unit` of `bytes`.
    fn word(bytes: &[u8], unit: usize) -> u64 {
        u64::from_le_bytes(bytes[unit * 8..unit * 8 + 8].try_into().unwrap())
    }

    /// Maps a new `len`-byte file at `/db/name` whose directory entry is durable.
    fn map_durable(fs: &MemFileSystem, name: &str, len: u64) -> Box<dyn MappedFile> {
        let mapped = fs.map(&db_dir().join(name), len).unwrap();
        fs.sync_dir(&db_dir()).unwrap();
        mapped
    }

    #[test]
    fn mapped_stores_are_durable_only_after_flush_and_fence() {
        let fs = setup();
        let path = db_dir().join("table");
        let mut mapped = map_durable(&fs, "table", 64);
        mapped.store_u64(16, 3);
        mapped.store_u64(24, 4);
        mapped.flush(16, 16);
        mapped.fence().unwrap(); // units 2 and 3 are durable
        mapped.store_u64(0, 1); // never flushed
        mapped.store_u64(8, 2);
        mapped.flush(8, 8); // flushed, not fenced
        mapped.store_u64(24, 44);
        mapped.flush(24, 8);
        mapped.store_u64(24, 444); // stored again after its flush: unflushed again
        mapped.fence().unwrap();
        mapped.flush(0, 0);
        assert_eq!((0..4).map(|u| word(mapped.bytes(), u)).collect::<Vec<_>>(), [1, 2, 3, 444]);
        let durable = fs.read_all(&path).unwrap();
        assert_eq!((0..4).map(|u| word(&durable, u)).collect::<Vec<_>>(), [0, 2, 3, 4], "reads see the durable image");

        fs.crash();
        let remapped = fs.map(&path, 64).unwrap();
        assert_eq!((0..4).map(|u| word(remapped.bytes(), u)).collect::<Vec<_>>(), [0, 2, 3, 4]);
        assert_eq!(fs.read_all(&path).unwrap(), remapped.bytes());
    }

    #[test]
    fn crash_drops_flushed_but_unfenced_units() {
        let fs = setup();
        let mut mapped = map_durable(&fs, "table", 16);
        mapped.store_u64(0, 1);
        mapped.flush(0, 16);
        mapped.store_u64(8, 2);
        fs.crash();
        assert_eq!(fs.read_all(&db_dir().join("table")).unwrap(), [0; 16]);
    }

    #[test]
    fn remapping_without_a_crash_sees_every_store() {
        let fs = setup();
        let path = db_dir().join("table");
        let mut mapped = map_durable(&fs, "table", 20);
        mapped.write(6, b"abcdefghijkl"); // units 0, 1 and the short unit 2 (bytes 16..20)
        drop(mapped);
        let remapped = fs.map(&path, 20).unwrap();
        assert_eq!(&remapped.bytes()[6..18], b"abcdefghijkl", "the page cache outlives the process");
        drop(remapped);
        fs.crash();
        assert_eq!(fs.read_all(&path).unwrap(), [0; 20], "but none of it was durable");

        let mut mapped = fs.map(&path, 20).unwrap();
        mapped.write(12, b"wxyz1234");
        mapped.flush(15, 1); // one byte flushes its whole unit (1)
        mapped.flush(16, 100); // the short last unit, the range clipped to the file
        mapped.fence().unwrap();
        fs.crash();
        assert_eq!(&fs.read_all(&path).unwrap()[8..], b"\0\0\0\0wxyz1234");
    }

    #[test]
    fn torn_crash_keeps_some_pending_units_deterministically() {
        const UNITS: usize = 1000;
        let run = |seed| {
            let fs = setup();
            let mut mapped = map_durable(&fs, "table", (UNITS * 8) as u64);
            for unit in 0..UNITS {
                mapped.store_u64(unit * 8, unit as u64 + 1);
                if unit % 2 == 0 {
                    mapped.flush(unit * 8, 8);
                }
            }
            fs.crash_with_torn_tails(seed);
            fs.read_all(&db_dir().join("table")).unwrap()
        };
        for seed in 0..4 {
            let data = run(seed);
            let mut kept = [0usize; 2]; // by flushed-ness
            for unit in 0..UNITS {
                let value = word(&data, unit);
                assert!(value == 0 || value == unit as u64 + 1, "seed {seed} unit {unit}: {value}");
                kept[unit % 2] += usize::from(value != 0);
            }
            for kept in kept {
                assert!((150..350).contains(&kept), "seed {seed}: about half of 500 kept, got {kept}");
            }
            assert_eq!(data, run(seed), "seed {seed}: same seed, same survivors");
        }
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn torn_crash_never_splits_an_aligned_word() {
        const OLD: u64 = 0x1111_1111_1111_1111;
        const NEW: u64 = 0x2222_2222_2222_2222;
        let mut outcomes = BTreeSet::new();
        for seed in 0..64 {
            let fs = setup();
            let mut mapped = map_durable(&fs, "table", 64);
            for unit in 0..8 {
                mapped.store_u64(unit * 8, OLD);
            }
            mapped.flush(0, 64);
            mapped.fence().unwrap();
            for unit in 0..8 {
                mapped.store_u64(unit * 8, NEW);
            }
            mapped.flush(0, 32);
            fs.crash_with_torn_tails(seed);
            let data = fs.read_all(&db_dir().join("table")).unwrap();
            for unit in 0..8 {
                let value = word(&data, unit);
                assert!(value == OLD || value == NEW, "seed {seed} unit {unit}: {value:#x}");
                outcomes.insert(value);
            }
        }
        assert_eq!(outcomes.len(), 2, "both the old and the new word survive under some seed");
    }

    #[test]
    fn mapping_from_before_a_crash_cannot_touch_the_survivors() {
        let fs = setup();
        let path = db_dir().join("table");
        let mut old = map_durable(&fs, "table", 16);
        old.store_u64(0, 7);
        old.flush(0, 8);
        old.fence().unwrap();
        fs.crash();
        old.store_u64(0, 8);
        old.store_u64(8, 9);
        old.flush(0, 16);
        old.fence().unwrap();
        assert_eq!(word(old.bytes(), 1), 9, "the dead mapping still works on its own");
        let new = fs.map(&path, 16).unwrap();
        assert_eq!((word(new.bytes(), 0), word(new.bytes(), 1)), (7, 0));
        fs.crash_with_torn_tails(5);
        assert_eq!(word(&fs.read_all(&path).unwrap(), 0), 7);
    }

    #[test]
    fn map_creates_extends_and_refuses_like_create() {
        let fs = setup();
        let path = db_dir().join("table");
        assert_eq!(io_kind(fs.map(Path::new("/nowhere/t"), 8).err().unwrap()), io::ErrorKind::NotFound);
        assert!(matches!(fs.map(&db_dir(), 8), Err(Error::InvalidArgument(_))));

        let mapped = fs.map(&path, 8).unwrap();
        assert_eq!(mapped.bytes(), [0; 8]);
        drop(mapped);
        fs.crash();
        assert!(!fs.exists(&path), "a new name is durable only after sync_dir");

        let _file = write_file(&fs, &path, &[(b"head", true)]);
        fs.sync_dir(&db_dir()).unwrap();
        assert!(matches!(fs.map(&path, 2), Err(Error::InvalidArgument(_))), "the file is longer");
        let mapped = fs.map(&path, 12).unwrap();
        assert_eq!(mapped.len(), 12);
        assert_eq!(mapped.bytes(), b"head\0\0\0\0\0\0\0\0");
        fs.crash();
        assert_eq!(fs.read_all(&path).unwrap(), b"head\0\0\0\0\0\0\0\0", "the extension is durable");
        assert!(fs.map(&path, 0).is_err());
        assert!(fs.map(&db_dir().join("empty"), 0).unwrap().is_empty());
    }

    #[test]
    fn hard_links_share_one_file_and_survive_a_crash_once_synced() {
        let fs = setup();
        let (a, b) = (db_dir().join("a"), db_dir().join("b"));
        let _file = write_file(&fs, &a, &[(&[7u8; 8192], true)]);
        fs.sync_dir(&db_dir()).unwrap();
        assert_eq!(fs.link_count(&a).unwrap(), 1);
        assert!(fs.hard_link(&a, &b).unwrap());
        assert_eq!((fs.link_count(&a).unwrap(), fs.link_count(&b).unwrap()), (2, 2));
        assert_eq!(io_kind(fs.hard_link(&a, &b).unwrap_err()), io::ErrorKind::AlreadyExists);
        assert_eq!(io_kind(fs.hard_link(&db_dir().join("none"), &b).unwrap_err()), io::ErrorKind::NotFound);
        // A hole punched through one name shows through the other: one file.
        assert!(fs.punch_hole(&b, 0, 4096).unwrap());
        assert_eq!(fs.read_all(&a).unwrap()[..4096], [0u8; 4096]);
        assert_eq!(fs.allocated_size(&a).unwrap(), 4096);

        fs.crash();
        assert!(!fs.exists(&b), "the link is durable only after sync_dir");
        assert!(fs.hard_link(&a, &b).unwrap());
        fs.sync_dir(&db_dir()).unwrap();
        fs.crash();
        assert_eq!(fs.link_count(&b).unwrap(), 2, "still one file after a crash");
        fs.remove(&a).unwrap();
        assert_eq!(fs.link_count(&b).unwrap(), 1);
        assert_eq!(fs.file_size(&b).unwrap(), 8192);
    }

    #[test]
    fn clones_share_state_and_debug_prints() {
        let fs = setup();
        let other = fs.clone();
        drop(write_file(&fs, &db_dir().join("a"), &[]));
        assert!(other.exists(&db_dir().join("a")));
        assert!(format!("{other:?}").contains("live_files: 1"));
    }
}
