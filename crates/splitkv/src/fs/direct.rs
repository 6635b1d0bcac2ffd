//! Reads that bypass the OS page cache (`O_DIRECT`), for [`RandomAccessFile::read_uncached`].
//!
//! A scan that reads a stretch of the value log it found not in memory reads each byte once. Going
//! through the page cache then costs twice: the kernel adds every page to the cache (and charges
//! it to the memory cgroup), and under memory pressure reclaims as many other pages to make room,
//! which pushes out pages still to be used. Measured on a scan under a 512 MiB cap, the prefetch
//! threads spent most of their time in exactly that, and in faulting in fresh buffers. A direct
//! read moves the bytes from the device into the caller's buffer and leaves the cache alone.
//!
//! `O_DIRECT` wants the offset, the length and the buffer's address aligned to the device's
//! logical block. Reads are widened to [`ALIGN`] on both ends into page-aligned buffers, and the
//! caller gets a slice of the bytes it asked for. Buffers are recycled: a freed buffer goes back to
//! a small process-wide free list (at most [`MAX_IDLE_BYTES`]), so a long scan reuses memory that
//! is already mapped instead of faulting in and zeroing fresh pages for every read.
//!
//! Where a file cannot be read this way (a file system without `O_DIRECT`, such as tmpfs; a device
//! whose logical block is larger than [`ALIGN`]; a file removed since it was opened) the read
//! returns `None` and the caller reads through the cache instead.
//!
//! [`RandomAccessFile::read_uncached`]: super::RandomAccessFile::read_uncached

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aligned_vec::{AVec, ConstAlign};
use bytes::Bytes;
use parking_lot::Mutex;

/// Alignment of direct reads' offsets, lengths and buffers: a multiple of every common logical
/// block size (512 B and 4 KiB).
const ALIGN: usize = 4096;
/// Bytes of idle buffers kept for reuse, process-wide: one 1 MiB read per prefetch thread.
const MAX_IDLE_BYTES: usize = 8 << 20;

type Buffer = AVec<u8, ConstAlign<ALIGN>>;

/// Idle buffers, and their total capacity.
static IDLE: Mutex<(Vec<Buffer>, usize)> = Mutex::new((Vec::new(), 0));

/// A second, `O_DIRECT` handle on a file, opened on first use.
pub(super) struct DirectFile {
    path: PathBuf,
    file: OnceLock<Option<File>>,
}

impl DirectFile {
    pub(super) fn new(path: PathBuf) -> Self {
        DirectFile { path, file: OnceLock::new() }
    }

    /// The `len` bytes at `offset`, read past the page cache; `Ok(None)` if this file cannot be
    /// read that way (see the module header). A read that ends past the end of the file is an
    /// `UnexpectedEof` error, as for a buffered read.
    pub(super) fn read(&self, offset: u64, len: usize) -> io::Result<Option<Bytes>> {
        let Some(file) = self.file.get_or_init(|| open_direct(&self.path)) else { return Ok(None) };
        let head = usize::try_from(offset % ALIGN as u64).map_err(io::Error::other)?;
        let start = offset - head as u64;
        let wanted = head + len;
        let mut buffer = take_buffer(wanted.next_multiple_of(ALIGN));
        let mut filled = 0;
        while filled < wanted {
            match file.read_at(&mut buffer[filled..], start + filled as u64) {
                // A direct read stops short only at the end of the file (the next read would be
                // unaligned): the bytes asked for are not all there.
                Ok(n) if n == 0 || n % ALIGN != 0 && filled + n < wanted => {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(Bytes::from_owner(Recycled(buffer)).slice(head..wanted)))
    }
}

fn open_direct(path: &Path) -> Option<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).ok()
}

/// The smallest idle buffer of at least `len` bytes, or a new one.
fn take_buffer(len: usize) -> Buffer {
    let mut idle = IDLE.lock();
    let found = (0..idle.0.len()).filter(|&i| idle.0[i].len() >= len).min_by_key(|&i| idle.0[i].len());
    if let Some(i) = found {
        let buffer = idle.0.swap_remove(i);
        idle.1 -= buffer.len();
        return buffer;
    }
    drop(idle);
    let mut buffer = Buffer::with_capacity(ALIGN, len);
    buffer.resize(len, 0);
    buffer
}

/// A buffer that goes back to the idle list when the last [`Bytes`] slicing it is dropped.
struct Recycled(Buffer);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let buffer = std::mem::replace(&mut self.0, Buffer::new(ALIGN));
        let mut idle = IDLE.lock();
        if idle.1 + buffer.len() <= MAX_IDLE_BYTES {
            idle.1 += buffer.len();
            idle.0.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_reads_return_the_bytes_asked_for_or_none_where_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = DirectFile::new(path);
        for (offset, len) in [(0usize, 1usize), (5, 4096), (4095, 2), (8192, 8192), (39_000, 1000), (1, 39_999)] {
            match file.read(offset as u64, len).unwrap() {
                Some(bytes) => assert_eq!(&bytes[..], &data[offset..offset + len], "{offset}+{len}"),
                // The temporary directory is on a file system without O_DIRECT.
                None => return,
            }
        }
        let past_end = file.read(39_000, 1001).unwrap_err();
        assert_eq!(past_end.kind(), io::ErrorKind::UnexpectedEof);
        assert!(IDLE.lock().1 <= MAX_IDLE_BYTES);
    }
}
