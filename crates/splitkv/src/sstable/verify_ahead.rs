//! Verify-ahead: a long forward scan over a table read in place has its next blocks'
//! checksums verified on another thread, so that the scan's own thread only decodes entries.
//!
//! Every block is verified before any of its entries is used; verify-ahead only moves that work
//! to a pool thread (the database's prefetch pool) while the scan is still a chunk behind. The
//! scan asks for chunk `k + 1` as it enters chunk `k`, so a block is verified less than two
//! chunks (at most 512 KiB of 4 KiB blocks, well under a millisecond of scanning) before it is
//! decoded, in the same map. A block the pool has not verified when the scan reaches it (the
//! pool was busy, the checksum did not match, the read failed) is simply verified by the scan,
//! as without verify-ahead, so failures are reported exactly as before and in the same place.
//! Only forward scans over maps use it: a copy read would copy each block twice.
//!
//! Thread-safety: a [`Chunk`] is shared between the scan and one pool task; its flags are
//! written once, by the task, and read with acquire ordering by the scan.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::format::{block_checksum_matches, BlockHandle};
use crate::fs::RandomAccessFile;
use crate::vlog::prefetch::PrefetchPool;

/// Blocks verified by one pool task (256 KiB of 4 KiB blocks); the scan keeps between one and
/// two chunks ahead of itself asked for.
pub(super) const CHUNK_BLOCKS: usize = 64;

/// Blocks `first..first + CHUNK_BLOCKS` of one table (or fewer, at its end), and which of them a
/// pool task verified.
struct Chunk {
    first: usize,
    verified: [AtomicBool; CHUNK_BLOCKS],
    /// Set when the scan leaves the chunk behind (or stops): the task then stops too.
    passed: AtomicBool,
}

/// One table cursor's chunks in flight, in block order.
#[derive(Default)]
pub(super) struct VerifyAhead {
    chunks: VecDeque<Arc<Chunk>>,
    /// The block after the last chunk asked for.
    asked_to: usize,
}

impl VerifyAhead {
    /// True if block `i`'s checksum was verified ahead of the scan.
    pub(super) fn verified(&self, i: usize) -> bool {
        self.chunks.iter().any(|chunk| {
            i.checked_sub(chunk.first)
                .and_then(|k| chunk.verified.get(k))
                .is_some_and(|flag| flag.load(Ordering::Acquire))
        })
    }

    /// The scan is loading block `i` of the `blocks` in `file`, moving forward: forgets the
    /// chunks before `i` and asks `pool` to verify blocks up to one chunk past `i` if it has not
    /// yet (`handle_of` gives a block's place).
    pub(super) fn advance(
        &mut self,
        i: usize,
        blocks: usize,
        file: &Arc<dyn RandomAccessFile>,
        handle_of: impl Fn(usize) -> Option<BlockHandle>,
        pool: &PrefetchPool,
    ) {
        while self.chunks.front().is_some_and(|chunk| chunk.first + CHUNK_BLOCKS <= i) {
            if let Some(chunk) = self.chunks.pop_front() {
                chunk.passed.store(true, Ordering::Relaxed);
            }
        }
        let behind = self.chunks.front().is_none_or(|chunk| i + 1 < chunk.first);
        if behind || self.asked_to <= i {
            // A new pass, a jump back, or a scan that outran what it asked for: start after `i`.
            self.stop();
            self.asked_to = i + 1;
        }
        while self.asked_to <= i + CHUNK_BLOCKS && self.asked_to < blocks {
            let first = self.asked_to;
            let handles: Vec<BlockHandle> = (first..blocks.min(first + CHUNK_BLOCKS)).map_while(&handle_of).collect();
            self.asked_to = first + CHUNK_BLOCKS;
            let chunk = Arc::new(Chunk {
                first,
                verified: std::array::from_fn(|_| AtomicBool::new(false)),
                passed: AtomicBool::new(false),
            });
            let task_chunk = Arc::clone(&chunk);
            let file = Arc::clone(file);
            // The scan reads the flags and never waits for the task (so its handle is not
            // kept); a task the pool starts after the scan passed its chunk finds `passed` set
            // and stops.
            pool.submit(move || {
                for (flag, handle) in task_chunk.verified.iter().zip(handles) {
                    if task_chunk.passed.load(Ordering::Relaxed) || !block_checksum_matches(&*file, handle) {
                        return;
                    }
                    flag.store(true, Ordering::Release);
                }
            });
            self.chunks.push_back(chunk);
        }
    }

    /// Stops every chunk in flight: the scan jumped, turned back or ended.
    pub(super) fn stop(&mut self) {
        for chunk in self.chunks.drain(..) {
            chunk.passed.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for VerifyAhead {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::error::Result;
    use crate::sstable::format::{block_trailer, BLOCK_TRAILER_LEN};

    const BODY: usize = 100;

    /// `blocks` blocks of `BODY` bytes and their trailers, back to back; block `bad`'s body is
    /// damaged after its checksum was taken.
    struct Blocks(Vec<u8>);

    impl Blocks {
        fn new(blocks: usize, bad: Option<usize>) -> Self {
            let mut bytes = Vec::new();
            for b in 0..blocks {
                let body = vec![b as u8; BODY];
                let trailer = block_trailer(&body, 0);
                let start = bytes.len();
                bytes.extend_from_slice(&body);
                bytes.extend_from_slice(&trailer);
                if bad == Some(b) {
                    bytes[start] ^= 1;
                }
            }
            Blocks(bytes)
        }

        fn handle(i: usize) -> Option<BlockHandle> {
            Some(BlockHandle { offset: (i * (BODY + BLOCK_TRAILER_LEN)) as u64, size: BODY as u64 })
        }
    }

    impl RandomAccessFile for Blocks {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            let start = offset as usize;
            buf.copy_from_slice(&self.0[start..start + buf.len()]);
            Ok(())
        }

        fn len(&self) -> Result<u64> {
            Ok(self.0.len() as u64)
        }
    }

    /// Waits until a one-thread `pool` has run every task submitted before: it runs them in
    /// order. (Not `Task::wait`, which would run a queued task on this thread.)
    fn finish(pool: &PrefetchPool) {
        let (done, finished) = mpsc::channel();
        pool.submit(move || done.send(()).ok());
        finished.recv().expect("the pool thread ran the marker");
    }

    fn verified(ahead: &VerifyAhead, range: std::ops::Range<usize>) -> Vec<usize> {
        range.filter(|&i| ahead.verified(i)).collect()
    }

    #[test]
    fn the_pool_verifies_up_to_a_chunk_past_the_scan_and_forgets_what_it_passed() {
        let blocks = 3 * CHUNK_BLOCKS + 10;
        let file: Arc<dyn RandomAccessFile> = Arc::new(Blocks::new(blocks, None));
        let pool = PrefetchPool::new(1);
        let mut ahead = VerifyAhead::default();
        // A pass starting at block 5 has blocks 6 up to 5 + 2 chunks asked for (the second as
        // soon as the first is no longer a whole chunk ahead), and never block 5 itself.
        ahead.advance(5, blocks, &file, Blocks::handle, &pool);
        ahead.advance(6, blocks, &file, Blocks::handle, &pool);
        finish(&pool);
        assert_eq!(verified(&ahead, 0..blocks), (6..6 + 2 * CHUNK_BLOCKS).collect::<Vec<_>>());
        // Moving on drops the chunk it left and asks for the next, and never past the last block.
        ahead.advance(6 + CHUNK_BLOCKS + 1, blocks, &file, Blocks::handle, &pool);
        finish(&pool);
        assert_eq!(verified(&ahead, 0..blocks), (6 + CHUNK_BLOCKS..6 + 3 * CHUNK_BLOCKS).collect::<Vec<_>>());
        ahead.advance(6 + 2 * CHUNK_BLOCKS + 1, blocks, &file, Blocks::handle, &pool);
        finish(&pool);
        assert_eq!(verified(&ahead, 0..blocks), (6 + 2 * CHUNK_BLOCKS..blocks).collect::<Vec<_>>());
        // A jump starts again after the block it lands on.
        ahead.advance(2, blocks, &file, Blocks::handle, &pool);
        finish(&pool);
        assert_eq!(verified(&ahead, 0..blocks), (3..3 + CHUNK_BLOCKS).collect::<Vec<_>>());
    }

    #[test]
    fn a_block_whose_checksum_fails_is_left_to_the_scan_with_the_rest_of_its_chunk() {
        let blocks = 2 * CHUNK_BLOCKS;
        let file: Arc<dyn RandomAccessFile> = Arc::new(Blocks::new(blocks, Some(20)));
        let pool = PrefetchPool::new(1);
        let mut ahead = VerifyAhead::default();
        ahead.advance(0, blocks, &file, Blocks::handle, &pool);
        ahead.advance(1, blocks, &file, Blocks::handle, &pool);
        finish(&pool);
        assert_eq!(verified(&ahead, 0..blocks), (1..20).chain(CHUNK_BLOCKS + 1..blocks).collect::<Vec<_>>());
    }

    #[test]
    fn a_chunk_the_scan_stopped_before_its_task_started_verifies_nothing() {
        let blocks = 2 * CHUNK_BLOCKS;
        let file: Arc<dyn RandomAccessFile> = Arc::new(Blocks::new(blocks, None));
        let pool = PrefetchPool::new(1);
        // The pool's one thread is held until the scan has stopped.
        let (release, held) = mpsc::channel::<()>();
        pool.submit(move || held.recv().ok());
        let mut ahead = VerifyAhead::default();
        ahead.advance(0, blocks, &file, Blocks::handle, &pool);
        ahead.advance(1, blocks, &file, Blocks::handle, &pool);
        let chunks: Vec<Arc<Chunk>> = ahead.chunks.iter().cloned().collect();
        assert_eq!(chunks.len(), 2);
        ahead.stop();
        drop(release);
        finish(&pool);
        assert!(chunks.iter().flat_map(|chunk| &chunk.verified).all(|flag| !flag.load(Ordering::Acquire)));
    }
}
