//! The one I/O boundary: every file the engine touches goes through [`FileSystem`].
//!
//! Three implementations share the trait:
//! - [`OsFileSystem`]: the real operating system (`pread`, `write`, `fsync`, `rename`, `flock`,
//!   shared `mmap` and `msync` for [`MappedFile`]s).
//! - [`MemFileSystem`]: in memory; [`MemFileSystem::crash`] keeps only what was synced or fenced
//!   (and, optionally, a random prefix of each unsynced tail and a random subset of the mapped
//!   8-byte units not yet fenced), so crash tests exercise real recovery.
//! - [`FaultInjectingFileSystem`]: wraps another file system and fails chosen operations.
//!
//! Medium assumptions (documented in `docs/design.md`): `sync` makes a file's bytes durable;
//! `sync_dir` makes creations, renames and removals in a directory durable; after a crash an
//! appended-but-unsynced file tail survives at most as a prefix of what was appended.
//!
//! Thread-safety: file systems and [`RandomAccessFile`]s are `Send + Sync` and may be used
//! concurrently; a [`WritableFile`] has one owner. A reader opened on a file that is still being
//! appended sees every byte appended (and flushed) after it was opened.

mod direct;
mod fault;
mod mem;
mod os;
mod os_mapped;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

pub use fault::{Fault, FaultInjectingFileSystem, FaultKind};
pub use mem::MemFileSystem;
pub use os::OsFileSystem;

use crate::error::Result;

/// Access pattern hint for a file (`posix_fadvise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessPattern {
    /// No particular pattern.
    Normal,
    /// Front-to-back reads: recovery, GC, compaction inputs.
    Sequential,
    /// Point reads.
    Random,
}

/// A file opened for appending. Appends may be buffered until [`WritableFile::flush`].
pub trait WritableFile: Send {
    /// Appends `data` at the end of the file.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system (visible to readers, not yet durable).
    fn flush(&mut self) -> Result<()>;
    /// Flushes and makes every appended byte durable.
    fn sync(&mut self) -> Result<()>;
    /// Asks the OS to start writing the bytes handed to it so far (by `flush`) to the device,
    /// without waiting for them (RocksDB's `bytes_per_sync`). Promises nothing about durability;
    /// it only leaves a later `sync` less to write, so that a writer that syncs a large file at
    /// once does not wait for all of it then. The default does nothing.
    fn start_writeback(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bytes appended so far (including any not yet flushed).
    fn len(&self) -> u64;
    /// True if nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file opened for positioned reads.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`; an attempt to read past the end is an `UnexpectedEof` I/O error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The `len` bytes at `offset`, as an owned buffer; an attempt to read past the end is an
    /// `UnexpectedEof` I/O error. An implementation that serves reads from a memory map copies
    /// the bytes out of it into a new buffer, without zeroing the buffer first (a table's blocks
    /// are read this way: zeroing them was about 3% of the instructions of a 100 B scan).
    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }
    /// The `len` bytes at `offset`, to be used now and let go; an attempt to read past the end
    /// is an `UnexpectedEof` I/O error. An implementation that serves reads from a memory map
    /// returns a slice of the map itself, without copying: the slice keeps the whole map (and a
    /// deleted file's space) alive, and bytes the kernel evicts and reads back are not the
    /// bytes a caller once checked, so nothing should keep it long (a long scan's table blocks
    /// are read this way; blocks the block cache keeps come from [`RandomAccessFile::read_vec`]).
    fn read_shared(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.read_vec(offset, len).map(Bytes::from)
    }
    /// True if [`RandomAccessFile::read_shared`] returns the bytes where they lie (a slice of a
    /// memory map) rather than a copy: such a read costs neither a system call nor an allocation.
    fn reads_in_place(&self) -> bool {
        false
    }
    /// [`RandomAccessFile::read_exact_at`] for bytes that are probably not in memory (a
    /// prefetch of values found uncached). An implementation that serves reads from a memory
    /// map reads these with a system call instead: a fault brings in one page at a time and
    /// leaves it mapped, and mapped pages are the last the kernel reclaims, so under memory
    /// pressure they push out pages that read-ahead loaded and nobody has read yet.
    fn read_exact_at_cold(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_exact_at(offset, buf)
    }
    /// The `len` bytes at `offset`, found not in memory and to be read once (a scan's prefetch of
    /// a stretch of log it consumes in order). An implementation over an OS page cache reads them
    /// past the cache where it can (`O_DIRECT`): caching them would cost CPU to add and reclaim
    /// pages, and under memory pressure push out pages still to be used.
    fn read_uncached(&self, offset: u64, len: usize) -> Result<Bytes> {
        read_cold(self, offset, len)
    }
    /// Current length of the file.
    fn len(&self) -> Result<u64>;
    /// True if the file holds no bytes.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Hints the access pattern; implementations may ignore it.
    fn advise(&self, _pattern: AccessPattern) {}
    /// True if reading `len` bytes at `offset` costs no I/O (they are in memory). False if a
    /// read may wait for the device, and also when the implementation cannot tell.
    fn is_cached(&self, _offset: u64, _len: u64) -> bool {
        false
    }
    /// Hints that `len` bytes at `offset` will be read soon, so the implementation may start
    /// loading them in the background; it may ignore the hint.
    fn will_need(&self, _offset: u64, _len: u64) {}
    /// Hints that `len` bytes at `offset`, already in memory, will be copied out soon, so the CPU
    /// may start loading them into its caches; it may ignore the hint. An implementation that
    /// serves reads from a memory map asks for the bytes' cache lines there: a scan that copies
    /// scattered values one after another otherwise waits for memory once per value.
    fn prefetch_in_memory(&self, _offset: u64, _len: u64) {}
}

/// Held while a database directory is locked; dropping it releases the lock.
pub trait FileLock: Send + Sync {}

/// A file mapped into memory as a persistent-memory medium (the SSHKV hash table lives in one).
///
/// The model is persistent memory's: stores land in the mapping at once and are visible to
/// every later read through [`MappedFile::bytes`]; they become durable (survive power loss) only
/// once written back. [`MappedFile::flush`] asks for a range to be written back (`clwb` over its
/// cache lines) and [`MappedFile::fence`] waits until every range flushed so far is durable
/// (`sfence`; `msync` for a file). Until then, after a crash, each aligned 8-byte unit written
/// since its last write-back holds either its old or its new value, independently of the others;
/// an aligned 8-byte [`MappedFile::store_u64`] is never torn. A process crash without power loss
/// keeps every store (the mapping is shared with the OS page cache).
pub trait MappedFile: Send + Sync {
    /// Length of the mapping in bytes.
    fn len(&self) -> usize;
    /// True if the mapping is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The current contents: every store so far, durable or not.
    fn bytes(&self) -> &[u8];
    /// Stores `data` at `offset` (in bounds; not yet durable). A store reaching past the end is a
    /// caller bug: it trips a debug assertion and is otherwise ignored (nothing is written).
    fn write(&mut self, offset: usize, data: &[u8]);
    /// Stores one 8-byte-aligned little-endian word as a single store: a crash leaves the old or
    /// the new word, never a mix. A misaligned `offset` is a caller bug: it trips a debug
    /// assertion and is otherwise stored as [`MappedFile::write`] would, which may tear.
    fn store_u64(&mut self, offset: usize, value: u64);
    /// Asks for `[offset, offset + len)` to be written back; durable after the next `fence`.
    fn flush(&mut self, offset: usize, len: usize);
    /// Waits until every range flushed so far is durable. An error means the medium's state is
    /// unknown: callers must stop writing to it.
    fn fence(&mut self) -> Result<()>;
}

/// File-system operations used by the engine.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) `path` for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positioned reads.
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Like [`FileSystem::open`], for a file that another process may shrink while it is open
    /// (a live writer's newest log segment, whose torn tail its recovery cuts off): a read past
    /// the new end must be an error, never a fault, so the OS implementation maps nothing.
    fn open_may_shrink(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open(path)?;
        let mut buf = vec![0; usize::try_from(file.len()?).unwrap_or(usize::MAX)];
        file.read_exact_at(0, &mut buf)?;
        Ok(buf)
    }
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of the file at `path`.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Names (not paths) of the entries in `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Shrinks a file to `len` bytes (durable once the file or directory is synced).
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); fails with
    /// [`crate::Error::Locked`] if another holder has it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Frees the blocks of `[offset, offset + len)` without changing the file's length
    /// (`fallocate(PUNCH_HOLE)`); returns `Ok(false)` where unsupported.
    fn punch_hole(&self, _path: &Path, _offset: u64, _len: u64) -> Result<bool> {
        Ok(false)
    }
    /// Bytes the file occupies on the medium (smaller than its length where holes were punched).
    fn allocated_size(&self, path: &Path) -> Result<u64> {
        self.file_size(path)
    }
    /// Gives the file at `from` a second name `to` on the same file system (`link(2)`): both
    /// names share one file, so a change through either (a punched hole) shows through both.
    /// `to` must not exist; the new name is durable once its directory is synced. Returns
    /// `Ok(false)` where unsupported (another file system, no hard links), and the caller copies
    /// instead. Implementations that create links must also count them in `link_count`.
    fn hard_link(&self, _from: &Path, _to: &Path) -> Result<bool> {
        Ok(false)
    }
    /// How many names the file at `path` has (1 unless hard-linked). GC never punches holes in a
    /// file with more than one: another name (a checkpoint's) may still need the bytes.
    fn link_count(&self, path: &Path) -> Result<u64> {
        self.file_size(path).map(|_| 1)
    }
    /// Maps `path` into memory as a persistent-memory medium of exactly `len` bytes, creating
    /// the file (zero-filled) or extending it with zeros if it is shorter (the new length is
    /// durable on return); a file longer than `len` is [`crate::Error::InvalidArgument`]. The
    /// caller makes a new file's directory entry durable with `sync_dir`. The file must not be
    /// truncated while it is mapped.
    fn map(&self, path: &Path, len: u64) -> Result<Box<dyn MappedFile>>;
}

/// The `len` bytes at `offset` of `file`, read with [`RandomAccessFile::read_exact_at_cold`]:
/// the page-cache path of values found not in memory.
pub(crate) fn read_cold(file: &(impl RandomAccessFile + ?Sized), offset: u64, len: usize) -> Result<Bytes> {
    let mut buf = vec![0; len];
    file.read_exact_at_cold(offset, &mut buf)?;
    Ok(Bytes::from(buf))
}

/// Joins a directory and a file name.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
