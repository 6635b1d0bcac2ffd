//! [`MappedFile`] over the operating system: a shared, writable `mmap` of a file.
//!
//! Stores go straight into the map, which is the page cache itself (`MAP_SHARED`), so they are
//! visible to every later read and survive a process crash. Write-back is `msync(MS_SYNC)`:
//! [`MappedFile::flush`] only records the range, page-aligned, in a sorted list of disjoint dirty
//! ranges, and [`MappedFile::fence`] syncs every recorded range, so a burst of flushes over one
//! page costs one system call. The kernel may also write dirty pages back on its own at any time,
//! which the persistent-memory model allows (a unit not yet fenced may hold its new value).
//!
//! An aligned [`MappedFile::store_u64`] is one volatile 8-byte store; the map starts on a page
//! boundary, so an 8-aligned offset is an 8-aligned address. On the 64-bit targets the engine runs
//! on, the CPU writes such a word to memory as a whole, so a concurrent write-back copies the old
//! or the new word; and the word lies inside one sector, which the device is assumed to write
//! atomically (as every database assumes).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use super::os::page_size;
use super::MappedFile;
use crate::error::{Error, Result};

/// Maps `path` read-write and shared, creating it or extending it to `len` bytes (see
/// [`super::FileSystem::map`]).
pub(super) fn map(path: &Path, len: u64) -> Result<Box<dyn MappedFile>> {
    let map_len = usize::try_from(len)
        .map_err(|_| Error::InvalidArgument(format!("{}: mapping length {len} too large", path.display())))?;
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    let current = file.metadata()?.len();
    if current > len {
        // Mapping a prefix would leave bytes no store can reach; callers always pass the file's
        // size or a larger new one, so a longer file means they are confused about which file
        // this is.
        return Err(Error::InvalidArgument(format!(
            "{} holds {current} bytes, more than the {len} bytes to map",
            path.display()
        )));
    }
    if current < len {
        file.set_len(len)?;
        // The new length must be durable before any fenced store relies on it: `msync` writes
        // back pages, not necessarily the size of the file that holds them.
        file.sync_all()?;
    }
    #[allow(unsafe_code)]
    // SAFETY: memmap2 requires that no one else truncates or changes the file while it is mapped
    // (a truncation would turn accesses past the new end into SIGBUS). The file belongs to a
    // database directory whose lock this process holds, the engine never truncates a file it has
    // mapped (the `FileSystem::map` contract), and changes by other processes are outside the
    // contract. The file is at least `map_len` bytes long (checked and extended above), so every
    // byte of the map is backed by the file. Every access goes through this map's own methods.
    let map = unsafe { MmapOptions::new().len(map_len).map_mut(&file) }?;
    Ok(Box::new(OsMappedFile { map, path: path.to_path_buf(), dirty: Vec::new() }))
}

/// A shared writable map and the ranges flushed since the last fence.
struct OsMappedFile {
    map: MmapMut,
    /// For error messages.
    path: PathBuf,
    /// Sorted, disjoint, non-adjacent `[start, end)` ranges awaiting `msync`; each starts on a
    /// page boundary and ends on one or at the end of the map.
    dirty: Vec<(usize, usize)>,
}

impl OsMappedFile {
    /// The in-bounds range `[offset, offset + len)`, if it is one.
    fn range(&self, offset: usize, len: usize) -> Option<std::ops::Range<usize>> {
        let end = offset.checked_add(len).filter(|&end| end <= self.map.len())?;
        Some(offset..end)
    }
}

impl MappedFile for OsMappedFile {
    fn len(&self) -> usize {
        self.map.len()
    }

    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        let range = self.range(offset, data.len());
        debug_assert!(range.is_some(), "store of {} bytes at {offset} outside {}", data.len(), self.path.display());
        if let Some(target) = range.and_then(|range| self.map.get_mut(range)) {
            target.copy_from_slice(data);
        }
    }

    fn store_u64(&mut self, offset: usize, value: u64) {
        debug_assert!(offset.is_multiple_of(8), "misaligned 8-byte store at {offset} in {}", self.path.display());
        let Some(word) = self.range(offset, 8).and_then(|range| self.map.get_mut(range)) else {
            debug_assert!(false, "8-byte store at {offset} outside {}", self.path.display());
            return;
        };
        let target = word.as_mut_ptr().cast::<u64>();
        if target.is_aligned() {
            #[allow(unsafe_code)]
            // SAFETY: `target` addresses 8 in-bounds bytes of the live map, borrowed mutably
            // through `&mut self`, and is 8-aligned. Volatile so that the compiler keeps it one
            // 8-byte store (an aligned 64-bit volatile store is one instruction on 64-bit
            // targets) instead of splitting, merging or dropping it: that single store is what
            // makes the word atomic with respect to a crash.
            unsafe {
                target.write_volatile(value.to_le())
            };
        } else {
            // Only reachable on a misaligned offset (a caller bug): a plain copy, which may tear.
            self.write(offset, &value.to_le_bytes());
        }
    }

    fn flush(&mut self, offset: usize, len: usize) {
        // Clip rather than refuse: writing back more than the stores is harmless, and the part
        // outside the map holds nothing to write back.
        let start = offset.min(self.map.len());
        let end = offset.saturating_add(len).min(self.map.len());
        if start >= end {
            return;
        }
        let page = page_size();
        let start = start - start % page;
        let end = end.checked_next_multiple_of(page).unwrap_or(usize::MAX).min(self.map.len());
        add_range(&mut self.dirty, start, end);
    }

    fn fence(&mut self) -> Result<()> {
        let mut synced = 0;
        let mut result = Ok(());
        for &(start, end) in &self.dirty {
            if let Err(err) = self.map.flush_range(start, end - start) {
                result = Err(Error::Io(std::io::Error::new(
                    err.kind(),
                    format!("msync of [{start}, {end}) in {}: {err}", self.path.display()),
                )));
                break;
            }
            synced += 1;
        }
        // Ranges not yet synced stay recorded; after an error the caller stops anyway.
        self.dirty.drain(..synced);
        result
    }
}

/// Adds `[start, end)` to the sorted, disjoint ranges in `ranges`, merging it with every range it
/// overlaps or touches so that each `msync` covers as much as possible.
fn add_range(ranges: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    let first = ranges.partition_point(|&(_, e)| e < start);
    let last = first + ranges[first..].partition_point(|&(s, _)| s <= end);
    let merged = ranges[first..last].iter().fold((start, end), |(lo, hi), &(s, e)| (lo.min(s), hi.max(e)));
    ranges.splice(first..last, std::iter::once(merged));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OsFileSystem};

    #[test]
    fn stores_survive_fence_drop_and_remap() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("table");
        let mut mapped = OsFileSystem.map(&path, 8192)?;
        assert_eq!(mapped.len(), 8192);
        assert!(mapped.bytes().iter().all(|&b| b == 0), "a new file is zero-filled");
        mapped.write(10, b"hello");
        mapped.store_u64(4096, 0x0123_4567_89ab_cdef);
        mapped.store_u64(8184, u64::MAX);
        assert_eq!(&mapped.bytes()[10..15], b"hello", "stores are visible at once");
        mapped.flush(10, 5);
        mapped.flush(4096, 8);
        mapped.flush(8184, 8);
        mapped.fence()?;
        mapped.fence()?; // nothing left to sync
        drop(mapped);

        assert_eq!(OsFileSystem.file_size(&path)?, 8192);
        let mapped = OsFileSystem.map(&path, 8192)?;
        assert_eq!(&mapped.bytes()[10..15], b"hello");
        assert_eq!(mapped.bytes()[4096..4104], 0x0123_4567_89ab_cdef_u64.to_le_bytes());
        assert_eq!(mapped.bytes()[8184..], [0xff; 8]);
        let on_disk = OsFileSystem.read_all(&path)?;
        assert_eq!(on_disk, mapped.bytes(), "reads through the file see the mapped stores");
        Ok(())
    }

    #[test]
    fn shorter_file_is_extended_with_zeros_and_longer_file_is_refused() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("table");
        let mut file = OsFileSystem.create(&path)?;
        file.append(b"head")?;
        file.sync()?;
        drop(file);

        let mapped = OsFileSystem.map(&path, 100)?;
        assert_eq!(mapped.len(), 100);
        assert_eq!(&mapped.bytes()[..4], b"head");
        assert!(mapped.bytes()[4..].iter().all(|&b| b == 0));
        drop(mapped);
        assert_eq!(OsFileSystem.file_size(&path)?, 100);

        assert!(matches!(OsFileSystem.map(&path, 50), Err(Error::InvalidArgument(_))));
        assert_eq!(OsFileSystem.file_size(&path)?, 100, "a refused map leaves the file alone");
        let empty = OsFileSystem.map(&dir.path().join("empty"), 0)?;
        assert!(empty.is_empty());
        Ok(())
    }

    #[test]
    fn out_of_range_flushes_are_clipped() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let mut mapped = OsFileSystem.map(&dir.path().join("t"), 104)?;
        mapped.store_u64(96, 7);
        mapped.flush(90, usize::MAX);
        mapped.flush(usize::MAX, 8);
        mapped.flush(0, 0);
        mapped.fence()?;
        assert_eq!(mapped.bytes()[96..104], 7u64.to_le_bytes());
        Ok(())
    }

    #[test]
    fn dirty_ranges_stay_sorted_and_merged() {
        let mut ranges = Vec::new();
        add_range(&mut ranges, 8, 12);
        add_range(&mut ranges, 0, 4);
        add_range(&mut ranges, 20, 24);
        assert_eq!(ranges, [(0, 4), (8, 12), (20, 24)]);
        add_range(&mut ranges, 12, 16);
        assert_eq!(ranges, [(0, 4), (8, 16), (20, 24)], "touching ranges merge");
        add_range(&mut ranges, 2, 21);
        assert_eq!(ranges, [(0, 24)], "a range spanning several swallows them");
        add_range(&mut ranges, 4, 8);
        assert_eq!(ranges, [(0, 24)]);
        add_range(&mut ranges, 30, 40);
        assert_eq!(ranges, [(0, 24), (30, 40)]);
    }
}
