//! [`FileSystem`] over the operating system.
//!
//! Writable files buffer appends in user space (64 KiB) so that many small appends become few
//! `write(2)` calls; `sync` is `fdatasync` after the buffer is written. Readers map the file's
//! bytes as of opening read-only into memory and copy from the map (no system call per read), or,
//! for [`RandomAccessFile::read_shared`], hand out a slice of it that keeps the map alive;
//! bytes appended later are read with `pread`, so readers need no lock and see every byte
//! appended after they were opened. Directory locks use `flock(LOCK_EX | LOCK_NB)`, which is
//! released when the process dies. [`FileSystem::map`] is in `os_mapped`.
//!
//! Maps are only taken of files this engine owns, and not by [`FileSystem::open_may_shrink`], which
//! a read-only database uses for log segments that a live writer in another process may cut. Tables and sealed log segments never change;
//! the one file that shrinks is a log segment whose torn tail recovery cuts off, and no read
//! addresses bytes past the end the log knows for it (reads are bounded by that length, which
//! recovery lowers before truncating), so no read touches a page beyond the end of a file. A file
//! deleted while mapped stays readable until unmapped.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use smallvec::SmallVec;

use super::direct::DirectFile;
use super::{read_cold, AccessPattern, FileLock, FileSystem, MappedFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

const WRITE_BUFFER: usize = 64 * 1024;

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

impl OsFileSystem {
    /// A handle on the OS file system, ready to share.
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(OsFileSystem)
    }
}

struct OsWritableFile {
    file: File,
    buf: Vec<u8>,
    len: u64,
    /// Offset up to which [`WritableFile::start_writeback`] has started writeback.
    writeback_started: u64,
}

impl WritableFile for OsWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
            if data.len() >= WRITE_BUFFER {
                self.file.write_all(data)?;
                return Ok(());
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data()?;
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&mut self) -> Result<()> {
        let handed_over = self.len - self.buf.len() as u64;
        if handed_over <= self.writeback_started {
            return Ok(());
        }
        let (from, to) = (self.writeback_started, handed_over);
        let (Ok(offset), Ok(len)) = (libc::off64_t::try_from(from), libc::off64_t::try_from(to - from)) else {
            return Ok(());
        };
        #[allow(unsafe_code)]
        // SAFETY: a plain system call on the descriptor `self.file` owns; it reads no memory.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
        if rc != 0 {
            // A failure here is the device's, which a later sync would meet too: report it now.
            return Err(std::io::Error::last_os_error().into());
        }
        self.writeback_started = to;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct OsRandomAccessFile {
    file: File,
    /// The file's bytes as of opening, if it was non-empty and could be mapped.
    map: Option<Arc<memmap2::Mmap>>,
    /// The same map as shared bytes, which reads copy from or, in
    /// [`RandomAccessFile::read_shared`], slice.
    shared: Option<Bytes>,
    /// The handle [`RandomAccessFile::read_uncached`] reads through.
    direct: DirectFile,
}

impl RandomAccessFile for OsRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if let Some(bytes) = self.mapped(offset, buf.len()) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        self.file.read_exact_at(buf, offset)?;
        Ok(())
    }

    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if let Some(bytes) = self.mapped(offset, len) {
            return Ok(bytes.to_vec());
        }
        let mut buf = vec![0; len];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    fn read_shared(&self, offset: u64, len: usize) -> Result<Bytes> {
        if let Some((shared, range)) = self.shared.as_ref().zip(self.mapped_range(offset, len)) {
            return Ok(shared.slice(range));
        }
        self.read_vec(offset, len).map(Bytes::from)
    }

    fn reads_in_place(&self) -> bool {
        self.shared.is_some()
    }

    fn read_exact_at_cold(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, offset)?;
        Ok(())
    }

    fn read_uncached(&self, offset: u64, len: usize) -> Result<Bytes> {
        match self.direct.read(offset, len)? {
            Some(bytes) => Ok(bytes),
            None => read_cold(self, offset, len),
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn advise(&self, pattern: AccessPattern) {
        if let Some(map) = &self.map {
            let advice = match pattern {
                AccessPattern::Normal => memmap2::Advice::Normal,
                AccessPattern::Sequential => memmap2::Advice::Sequential,
                AccessPattern::Random => memmap2::Advice::Random,
            };
            // A hint only.
            let _ = map.advise(advice);
        }
        let advice = match pattern {
            AccessPattern::Normal => libc::POSIX_FADV_NORMAL,
            AccessPattern::Sequential => libc::POSIX_FADV_SEQUENTIAL,
            AccessPattern::Random => libc::POSIX_FADV_RANDOM,
        };
        fadvise(&self.file, 0, 0, advice);
    }

    fn is_cached(&self, offset: u64, len: u64) -> bool {
        self.resident(offset, len) == Some(true)
    }

    /// `POSIX_FADV_WILLNEED` queues the reads and returns without waiting for them: one thread
    /// can keep many reads in flight, which is what lets read-ahead use the device's parallelism.
    fn will_need(&self, offset: u64, len: u64) {
        if let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) {
            fadvise(&self.file, off, len, libc::POSIX_FADV_WILLNEED);
        }
    }

    fn prefetch_in_memory(&self, offset: u64, len: u64) {
        if let Some(bytes) = usize::try_from(len).ok().and_then(|len| self.mapped(offset, len)) {
            crate::prefetch::cache_lines_at(bytes.as_ptr(), bytes.len().div_ceil(crate::prefetch::LINE));
        }
    }
}

/// `posix_fadvise` on `file`. A hint only: failure changes nothing but speed, so it is ignored.
fn fadvise(file: &File, offset: libc::off_t, len: libc::off_t, advice: libc::c_int) {
    #[allow(unsafe_code)]
    // SAFETY: the descriptor is owned by `file` and open for the duration of the call.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, advice);
    }
}

/// A file's map as the owner of [`Bytes`] sliced from it: the map lives while any slice does.
struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl OsRandomAccessFile {
    /// The `len` mapped bytes at `offset`, if the map (the file as of opening) holds them all.
    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.shared.as_ref()?.get(self.mapped_range(offset, len)?)
    }

    /// `[offset, offset + len)` as a range of the map, if the map holds all of it.
    fn mapped_range(&self, offset: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        (end <= self.shared.as_ref()?.len()).then_some(start..end)
    }

    /// Whether every page of `[offset, offset + len)` is in the page cache; `None` if the kernel
    /// does not say. `cachestat(2)` (Linux 6.5) answers for any range of the file; older kernels
    /// answer through `mincore(2)` for the mapped part only.
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        if len == 0 {
            return Some(true);
        }
        let page = page_size() as u64;
        let end = offset.checked_add(len)?;
        let pages = end.div_ceil(page) - offset / page;
        #[repr(C)]
        struct CachestatRange {
            off: u64,
            len: u64,
        }
        #[repr(C)]
        #[derive(Default)]
        struct Cachestat {
            nr_cache: u64,
            nr_dirty: u64,
            nr_writeback: u64,
            nr_evicted: u64,
            nr_recently_evicted: u64,
        }
        let range = CachestatRange { off: offset, len };
        let mut stat = Cachestat::default();
        #[allow(unsafe_code)]
        // SAFETY: both structs match the kernel's layout and outlive the call; the descriptor is
        // owned by `self.file`.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                self.file.as_raw_fd(),
                &range as *const CachestatRange,
                &mut stat as *mut Cachestat,
                0,
            )
        };
        if rc == 0 {
            return Some(stat.nr_cache >= pages);
        }
        self.mapped_range_resident(offset, len)
    }

    /// `mincore(2)` over the map, for a range inside it.
    fn mapped_range_resident(&self, offset: u64, len: u64) -> Option<bool> {
        let map = self.map.as_ref()?;
        let page = page_size();
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if end > map.len() {
            return None;
        }
        let first_page = start - start % page;
        let mut residency: SmallVec<[u8; 64]> = smallvec::smallvec![0; (end - first_page).div_ceil(page)];
        #[allow(unsafe_code)]
        // SAFETY: `[first_page, end)` lies inside the live map and starts on a page boundary (the
        // map itself is page-aligned); `residency` has one byte per page of that range.
        let rc = unsafe {
            libc::mincore(map.as_ptr().add(first_page) as *mut libc::c_void, end - first_page, residency.as_mut_ptr())
        };
        (rc == 0).then(|| residency.iter().all(|&flags| flags & 1 == 1))
    }
}

/// `cachestat(2)`'s number, the same on every architecture (the libc crate lacks it for some).
const SYS_CACHESTAT: libc::c_long = 451;

/// The size of a memory page (the granularity of `mincore` and `msync`).
pub(super) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        #[allow(unsafe_code)]
        // SAFETY: sysconf only reads a system constant.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).ok().filter(|&s| s.is_power_of_two()).unwrap_or(4096)
    })
}

struct OsFileLock {
    _file: File,
}

impl FileLock for OsFileLock {}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
        Ok(Box::new(OsWritableFile { file, buf: Vec::with_capacity(WRITE_BUFFER), len: 0, writeback_started: 0 }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Box::new(OsWritableFile { file, buf: Vec::with_capacity(WRITE_BUFFER), len, writeback_started: len }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path)?;
        let map = if file.metadata()?.len() > 0 {
            #[allow(unsafe_code)]
            // SAFETY: the map is read-only and private to this handle, and the engine never
            // reads mapped bytes past a file's current end (see the module header), so no read
            // faults on a page that is no longer backed by the file. A failed map falls back to
            // `pread`.
            unsafe { memmap2::Mmap::map(&file) }.ok().map(Arc::new)
        } else {
            None
        };
        let shared = map.as_ref().map(|m| Bytes::from_owner(SharedMap(Arc::clone(m))));
        Ok(Arc::new(OsRandomAccessFile { file, map, shared, direct: DirectFile::new(path.to_path_buf()) }))
    }

    fn open_may_shrink(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        // A map would fault (SIGBUS) on a page the other process cut off; `pread` reports it.
        Ok(Arc::new(OsRandomAccessFile {
            file: File::open(path)?,
            map: None,
            shared: None,
            direct: DirectFile::new(path.to_path_buf()),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        Ok(fs::create_dir_all(dir)?)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        Ok(fs::remove_file(path)?)
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        Ok(fs::remove_dir(dir)?)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        Ok(fs::rename(from, to)?)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)?.sync_all()?;
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        #[allow(unsafe_code)]
        // SAFETY: the descriptor is owned by `file`, which outlives the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(Error::Locked(parent_or_self(path)));
        }
        Ok(Box::new(OsFileLock { _file: file }))
    }

    fn map(&self, path: &Path, len: u64) -> Result<Box<dyn MappedFile>> {
        super::os_mapped::map(path, len)
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<bool> {
        let file = OpenOptions::new().write(true).open(path)?;
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(Error::InvalidArgument("hole range exceeds off_t".into()));
        };
        #[allow(unsafe_code)]
        // SAFETY: the descriptor is owned by `file`; fallocate does not touch user memory.
        let rc = unsafe {
            libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, off, len)
        };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(false),
            _ => Err(err.into()),
        }
    }

    fn allocated_size(&self, path: &Path) -> Result<u64> {
        Ok(fs::metadata(path)?.blocks() * 512)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<bool> {
        match fs::hard_link(from, to) {
            Ok(()) => Ok(true),
            // Another file system (EXDEV), or one without hard links: the caller copies.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)) => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn link_count(&self, path: &Path) -> Result<u64> {
        Ok(fs::metadata(path)?.nlink())
    }
}

fn parent_or_self(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_else(|| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_are_counted_and_share_bytes() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let mut file = OsFileSystem.create(&a)?;
        file.append(b"shared")?;
        file.sync()?;
        assert_eq!(OsFileSystem.link_count(&a)?, 1);
        assert!(OsFileSystem.hard_link(&a, &b)?);
        assert_eq!(OsFileSystem.link_count(&a)?, 2);
        assert_eq!(OsFileSystem.read_all(&b)?, b"shared");
        assert!(OsFileSystem.hard_link(&a, &b).is_err(), "the new name must not exist");
        OsFileSystem.remove(&a)?;
        assert_eq!(OsFileSystem.link_count(&b)?, 1);
        Ok(())
    }

    #[test]
    fn shared_reads_slice_the_map_and_outlive_the_handle_and_the_name() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 13 % 251) as u8).collect();
        let mut file = OsFileSystem.create(&path)?;
        file.append(&data)?;
        file.sync()?;
        let reader = OsFileSystem.open(&path)?;
        let (a, b) = (reader.read_shared(5000, 4096)?, reader.read_shared(5000, 4096)?);
        assert_eq!(&a[..], &data[5000..9096]);
        assert_eq!(a.as_ptr(), b.as_ptr(), "two shared reads of the same bytes should be one slice of the map");
        let copy = reader.read_vec(5000, 4096)?;
        assert_eq!(copy, &a[..]);
        assert_ne!(copy.as_ptr(), a.as_ptr(), "read_vec must copy");
        match reader.read_shared(19_000, 4096) {
            Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof),
            other => panic!("a read past the end returned {other:?}"),
        }
        // The slice keeps the map: readable after the handle is gone and the file deleted.
        drop(reader);
        OsFileSystem.remove(&path)?;
        assert_eq!(&a[..], &data[5000..9096]);
        Ok(())
    }

    #[test]
    fn starting_writeback_between_appends_leaves_appends_and_syncs_exact() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let mut file = OsFileSystem.create(&path)?;
        let mut expected = Vec::new();
        // Many ranges, some started twice, one empty.
        file.start_writeback()?;
        for i in 0..300u32 {
            let chunk: Vec<u8> = (0..5000u32).map(|j| ((i * 31 + j) % 251) as u8).collect();
            file.append(&chunk)?;
            expected.extend_from_slice(&chunk);
            if i % 3 == 0 {
                file.flush()?;
                file.start_writeback()?;
                file.start_writeback()?;
            }
        }
        file.sync()?;
        assert_eq!(file.len(), expected.len() as u64);
        assert_eq!(OsFileSystem.read_all(&path)?, expected);
        Ok(())
    }

    #[test]
    fn freshly_written_bytes_are_cached_and_hinted_reads_stay_exact() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut file = OsFileSystem.create(&path)?;
        file.append(&data)?;
        file.sync()?;
        let reader = OsFileSystem.open(&path)?;
        // Just written, so in the page cache, whether the kernel answers by cachestat or mincore.
        assert!(reader.is_cached(0, data.len() as u64));
        assert!(reader.is_cached(1000, 10));
        assert!(reader.is_cached(0, 0));
        reader.will_need(4096, 8192);
        reader.will_need(60_000, 1 << 20); // past the end: still only a hint

        // Cache-line hints anywhere, the map's edges and past them included, change nothing.
        for (offset, len) in [(5000, 3000), (0, 0), (60_000, 1 << 20), (u64::MAX - 10, 100), (0, u64::MAX)] {
            reader.prefetch_in_memory(offset, len);
        }
        let mut buf = vec![0u8; 3000];
        reader.read_exact_at(5000, &mut buf)?;
        assert_eq!(buf, data[5000..8000]);
        Ok(())
    }
}
