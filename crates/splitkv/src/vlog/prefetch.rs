//! Parallel value prefetch for range scans (WiscKey §3.3.1): a bounded worker pool shared by all
//! iterators of a database, the [`Task`] handle through which an iterator collects one piece of
//! work in order, and [`ValueLog::read_values`], which turns a set of value pointers into as few
//! positioned reads as possible.
//!
//! A scan knows its next keys (and their pointers) long before it needs their values, so it hands
//! the reads to the pool and collects them as the cursor arrives. Pointers that are adjacent in
//! one segment (consecutive keys after a sequential load) are coalesced into one larger read, and
//! small gaps between records are read through rather than split, since a syscall costs more than
//! a few KiB of copying. Reads are validated exactly like [`ValueLog::read`]; a pointer whose
//! prefetch fails for any reason yields `None`, and the iterator then reads it synchronously so
//! that the error (or success, if it was transient) is the one a plain read would give.
//!
//! Invariants: a [`Task`] runs at most once, either on a pool thread or on the thread that waits
//! for it (work stealing: a waiter never sleeps behind a queue of other iterators' work);
//! the pool never runs more than its configured number of threads.
//!
//! Thread-safety: [`PrefetchPool`] and [`Task`] are `Send + Sync`. Dropping the pool stops its
//! threads once they finish the task in hand; tasks still queued are dropped unrun, and their
//! waiters run them themselves.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::thread;

use bytes::{Buf, Bytes};
use parking_lot::{Condvar, Mutex};

use super::record::{check_record, decode_record_header, header_bytes, SEGMENT_HEADER_LEN};
use super::ValueLog;
use crate::fs::read_cold;
use crate::types::ValuePointer;

/// Records closer than this in one segment are read with the gap in between.
const MAX_READ_GAP: u64 = 4 << 10;
/// Longest single coalesced read.
const MAX_READ_LEN: u64 = 1 << 20;
/// Records [`ValueLog::read_values_in_memory`] asks the CPU for ahead of the one it copies.
/// Scattered records are each a cache (and TLB) miss the hardware prefetcher cannot foresee;
/// with several asked for at once their loads overlap instead of following one another.
const RECORDS_AHEAD: usize = 4;

enum TaskState<T> {
    Queued(Box<dyn FnOnce() -> T + Send>),
    Running,
    Done(T),
    Taken,
}

/// One unit of work whose result is collected exactly once, by [`Task::wait`].
pub struct Task<T> {
    state: Mutex<TaskState<T>>,
    finished: Condvar,
}

impl<T: Send + 'static> Task<T> {
    fn new(work: impl FnOnce() -> T + Send + 'static) -> Arc<Self> {
        Arc::new(Task { state: Mutex::new(TaskState::Queued(Box::new(work))), finished: Condvar::new() })
    }

    /// The task's result: runs it here if no pool thread has started it, otherwise waits.
    pub fn wait(&self) -> T {
        let mut state = self.state.lock();
        loop {
            match std::mem::replace(&mut *state, TaskState::Taken) {
                TaskState::Queued(work) => {
                    *state = TaskState::Running;
                    drop(state);
                    return work();
                }
                TaskState::Done(result) => return result,
                TaskState::Running => {
                    *state = TaskState::Running;
                    self.finished.wait(&mut state);
                }
                TaskState::Taken => unreachable!("a task's result is collected once"),
            }
        }
    }

    /// Drops the work if no thread has started it; a started task runs to completion and its
    /// result is dropped with the last handle.
    pub fn cancel(&self) {
        let mut state = self.state.lock();
        if let TaskState::Queued(_) = &*state {
            *state = TaskState::Taken;
        }
    }
}

/// What a pool thread can run without knowing the result type.
trait Runnable: Send + Sync {
    fn run(&self);
}

impl<T: Send + 'static> Runnable for Task<T> {
    fn run(&self) {
        let mut state = self.state.lock();
        let TaskState::Queued(_) = &*state else { return };
        let TaskState::Queued(work) = std::mem::replace(&mut *state, TaskState::Running) else { return };
        drop(state);
        let result = work();
        *self.state.lock() = TaskState::Done(result);
        self.finished.notify_all();
    }
}

struct Queue {
    tasks: VecDeque<Arc<dyn Runnable>>,
    closed: bool,
    started: usize,
}

struct PoolShared {
    queue: Mutex<Queue>,
    available: Condvar,
}

/// A fixed-size set of threads, started on first use, running [`Task`]s in submission order.
pub struct PrefetchPool {
    shared: Arc<PoolShared>,
    threads: usize,
}

impl PrefetchPool {
    /// A pool of at most `threads` threads (none are started until work arrives). With zero
    /// threads every task runs on the thread that waits for it.
    pub fn new(threads: usize) -> Self {
        PrefetchPool {
            shared: Arc::new(PoolShared {
                queue: Mutex::new(Queue { tasks: VecDeque::new(), closed: false, started: 0 }),
                available: Condvar::new(),
            }),
            threads,
        }
    }

    /// Number of threads the pool may run.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Queues `work` and returns the handle its result is collected through.
    pub fn submit<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Arc<Task<T>> {
        let task = Task::new(work);
        if self.threads == 0 {
            return task;
        }
        let mut queue = self.shared.queue.lock();
        queue.tasks.push_back(Arc::clone(&task) as Arc<dyn Runnable>);
        if queue.started < self.threads {
            queue.started += 1;
            let shared = Arc::clone(&self.shared);
            let spawned = thread::Builder::new().name("splitkv-prefetch".into()).spawn(move || worker(&shared));
            if spawned.is_err() {
                // Without a thread the task still runs, on the thread that waits for it.
                queue.started -= 1;
            }
        }
        drop(queue);
        self.shared.available.notify_one();
        task
    }
}

impl Drop for PrefetchPool {
    fn drop(&mut self) {
        let mut queue = self.shared.queue.lock();
        queue.closed = true;
        queue.tasks.clear();
        drop(queue);
        self.shared.available.notify_all();
    }
}

fn worker(shared: &PoolShared) {
    loop {
        let task = {
            let mut queue = shared.queue.lock();
            loop {
                if queue.closed {
                    return;
                }
                if let Some(task) = queue.tasks.pop_front() {
                    break task;
                }
                shared.available.wait(&mut queue);
            }
        };
        task.run();
    }
}

/// How [`ValueLog::read_values`] reads: through the page cache, where loads started by
/// [`ValueLog::will_need`] (and their read-around) land and later reads find them, or past it
/// ([`RandomAccessFile::read_uncached`]), for values read once and in log order.
///
/// [`RandomAccessFile::read_uncached`]: crate::fs::RandomAccessFile::read_uncached
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// `pread` through the page cache.
    PageCache,
    /// [`RandomAccessFile::read_uncached`]: `O_DIRECT` where the file system allows it.
    ///
    /// [`RandomAccessFile::read_uncached`]: crate::fs::RandomAccessFile::read_uncached
    Direct,
}

/// One value to prefetch: where it is and which key it must belong to.
#[derive(Clone, Debug)]
pub struct ValueRequest {
    /// The record holding the value.
    pub pointer: ValuePointer,
    /// The key's bytes within the key arena passed to [`ValueLog::read_values`].
    pub key: Range<usize>,
}

/// A batch of values found in memory read in one go ([`ValueLog::read_values_in_memory`]) ends
/// after this many values or once it holds this many bytes: small enough that the copies are
/// still in the CPU's cache when their checksums are checked, that a short scan copies little
/// it will not visit, and that one value kept long keeps little else alive (a batch shares one
/// buffer).
const MEMORY_BATCH_ENTRIES: usize = 64;
const MEMORY_BATCH_BYTES: u64 = 64 << 10;

/// The next batch for [`ValueLog::read_values_in_memory`] from `candidates` (indices into
/// `requests`): up to [`MEMORY_BATCH_ENTRIES`] of them, ending with the one that reaches
/// [`MEMORY_BATCH_BYTES`]. Takes nothing from `candidates` beyond the batch.
pub(crate) fn take_memory_batch(requests: &[ValueRequest], candidates: &mut impl Iterator<Item = usize>) -> Vec<usize> {
    let mut batch = Vec::new();
    let mut bytes = 0u64;
    while batch.len() < MEMORY_BATCH_ENTRIES && bytes < MEMORY_BATCH_BYTES {
        let Some(i) = candidates.next() else { break };
        bytes += u64::from(requests[i].pointer.len);
        batch.push(i);
    }
    batch
}

/// Splits the requests at `order` (indices into `requests`, in any order) into coalesced runs and
/// then into at most `jobs` groups of roughly equal byte size; returns request indices, grouped,
/// each group sorted by position.
pub fn plan_reads(requests: &[ValueRequest], mut order: Vec<usize>, jobs: usize) -> Vec<Vec<usize>> {
    order.sort_unstable_by_key(|&i| (requests[i].pointer.segment, requests[i].pointer.offset));
    let total: u64 = order.iter().map(|&i| u64::from(requests[i].pointer.len)).sum();
    let target = total.div_ceil(jobs.max(1) as u64).max(64 << 10);
    let mut groups = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    let mut group_bytes = 0u64;
    let mut previous: Option<ValuePointer> = None;
    for i in order {
        let ptr = requests[i].pointer;
        // Only cut a group between runs, so a coalesced read is never split across jobs.
        let continues_run = previous.is_some_and(|p| continues(&p, &ptr));
        if !continues_run && group_bytes >= target {
            groups.push(std::mem::take(&mut group));
            group_bytes = 0;
        }
        group.push(i);
        group_bytes += u64::from(ptr.len);
        previous = Some(ptr);
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
}

/// The aligned stretch of the log that [`ValueLog::will_need`] checks and loads for `ptr`: the
/// `readaround` bytes around it, or at least the pages it occupies.
pub fn chunk(ptr: &ValuePointer, readaround: u64) -> (u64, u64) {
    let align = readaround.max(PAGE);
    (ptr.offset / align * align, ptr.end().next_multiple_of(align))
}

/// The granularity of residency: a memory page.
const PAGE: u64 = 4096;

/// True if `next` is close enough after `prev` in the same segment to be read together.
fn continues(prev: &ValuePointer, next: &ValuePointer) -> bool {
    prev.segment == next.segment && next.offset >= prev.offset && next.offset <= prev.end() + MAX_READ_GAP
}

impl ValueLog {
    /// Announces that the record at `ptr` will be read soon, together with the rest of its
    /// [`chunk`]. True if reading the record will not wait for the device: the chunk is in
    /// memory (page cache or write buffer), or the pointer is one a read rejects anyway.
    /// Otherwise starts loading the chunk in the background and returns false.
    pub fn will_need(&self, ptr: &ValuePointer, readaround: u64) -> bool {
        self.check_residency(ptr, readaround, true)
    }

    /// [`ValueLog::will_need`] without the load: for values the caller reads past the page cache
    /// ([`ReadPath::Direct`]), which a load into the cache would read twice.
    pub fn in_memory(&self, ptr: &ValuePointer, readaround: u64) -> bool {
        self.check_residency(ptr, readaround, false)
    }

    fn check_residency(&self, ptr: &ValuePointer, readaround: u64, load: bool) -> bool {
        let Some(segment) = self.segments.read().get(&ptr.segment).cloned() else { return true };
        let Some(at) = segment.position_of(ptr) else { return true };
        // In a compacted segment the record lies elsewhere than its pointer says.
        let (start, end) = chunk(&ValuePointer { offset: at, ..*ptr }, readaround);
        let readable = segment.readable_len();
        let len = end.min(readable) - start;
        if segment.file.is_cached(start, len) {
            return true;
        }
        if load {
            segment.file.will_need(start, len);
        }
        false
    }

    /// Reads the values of `requests[i]` for every `i` in `indices` (sorted by position), with one
    /// positioned read along `path` per run of nearby records. Returns one entry per index, `None`
    /// where the value could not be prefetched (unflushed bytes, a segment that is gone, an I/O
    /// error, a record that fails validation): the caller reads those with [`ValueLog::read`].
    pub fn read_values(
        &self,
        keys: &Bytes,
        requests: &[ValueRequest],
        indices: &[usize],
        path: ReadPath,
    ) -> Vec<Option<Bytes>> {
        let mut out = Vec::with_capacity(indices.len());
        let mut start = 0;
        while start < indices.len() {
            let first = requests[indices[start]].pointer;
            let mut end = start + 1;
            let mut run_end = first.end();
            while end < indices.len() {
                let next = requests[indices[end]].pointer;
                let prev = requests[indices[end - 1]].pointer;
                let next_end = next.end();
                if !continues(&prev, &next) || next_end.max(run_end) - first.offset > MAX_READ_LEN {
                    break;
                }
                run_end = run_end.max(next_end);
                end += 1;
            }
            let run = &indices[start..end];
            match self.read_span(first, run_end, path) {
                Some((span, version)) => {
                    let value_range = |i: usize| {
                        let req = &requests[i];
                        value_in_span(&span, first.offset, version, &req.pointer, &keys[req.key.clone()])
                    };
                    // A run holds at least one value: `end` starts past `start`.
                    let (rest, last) = (&run[..run.len() - 1], run[run.len() - 1]);
                    out.extend(rest.iter().map(|&i| value_range(i).map(|range| span.slice(range))));
                    let last = value_range(last);
                    out.push(last.map(|range| take_range(span, range)));
                }
                None => out.extend(run.iter().map(|_| None)),
            }
            start = end;
        }
        out
    }

    /// Reads the values of `requests[i]` for every `i` in `indices`, found in memory, into one
    /// buffer that they then share: one allocation per batch instead of one per value (a value
    /// a little over 1 KiB is past the C allocator's per-thread cache, and allocating and
    /// freeing it cost about as much as checking its checksum). Each record is copied on its
    /// own (through the file's map, where it has one), so scattered values cost no more than
    /// packed ones. Returns one entry per index, `None` as in [`ValueLog::read_values`].
    pub fn read_values_in_memory(
        &self,
        keys: &Bytes,
        requests: &[ValueRequest],
        indices: &[usize],
    ) -> Vec<Option<Bytes>> {
        let total: usize = indices.iter().map(|&i| requests[i].pointer.len as usize).sum();
        let mut buffer = Vec::with_capacity(total);
        // Where each record starts in the buffer, and its segment's format version.
        let mut placed = Vec::with_capacity(indices.len());
        {
            let segments = self.segments.read();
            let found: Vec<_> =
                indices.iter().map(|&i| (segments.get(&requests[i].pointer.segment), requests[i].pointer)).collect();
            // A compacted segment translates each pointer through its offset map, two cache
            // misses (bucket, then entries) that would come one after another for every value:
            // ask for all the buckets, then all the entries, so that the misses overlap.
            let remaps =
                || found.iter().filter_map(|(segment, ptr)| Some((segment.as_ref()?.remap.as_ref()?, ptr.offset)));
            remaps().for_each(|(remap, offset)| remap.prefetch_bucket(offset));
            remaps().for_each(|(remap, offset)| remap.prefetch_entries(offset));
            // Each record's segment, looked up once, if the record lies within what is readable.
            let located: Vec<_> = found
                .into_iter()
                .map(|(segment, ptr)| {
                    let segment = segment?;
                    segment.position_of(&ptr).map(|at| (segment, ptr, at))
                })
                .collect();
            let ask_for = |n: usize| {
                if let Some(Some((segment, ptr, at))) = located.get(n) {
                    segment.file.prefetch_in_memory(*at, u64::from(ptr.len));
                }
            };
            (0..RECORDS_AHEAD).for_each(ask_for);
            for (n, record) in located.iter().enumerate() {
                ask_for(n + RECORDS_AHEAD);
                let start = buffer.len();
                let version = record.and_then(|(segment, ptr, at)| {
                    buffer.resize(start + ptr.len as usize, 0);
                    match segment.file.read_exact_at(at, &mut buffer[start..]) {
                        Ok(()) => Some(segment.version),
                        Err(_) => {
                            buffer.truncate(start);
                            None
                        }
                    }
                });
                placed.push(version.map(|version| (start, version)));
            }
        }
        let buffer = Bytes::from(buffer);
        placed
            .into_iter()
            .zip(indices)
            .map(|(placed, &i)| {
                let (start, version) = placed?;
                let req = &requests[i];
                let record = buffer.get(start..start + req.pointer.len as usize)?;
                let value = value_in_span(record, req.pointer.offset, version, &req.pointer, &keys[req.key.clone()])?;
                Some(buffer.slice(start + value.start..start + value.end))
            })
            .collect()
    }

    /// The bytes `[first.offset, end)` of `first.segment` if they are all in the file, with the
    /// segment's format version (which its records are decoded by).
    fn read_span(&self, first: ValuePointer, end: u64, path: ReadPath) -> Option<(Bytes, u32)> {
        let segment = self.segments.read().get(&first.segment).cloned()?;
        // A compacted segment's records are not where the span's offsets say: they are read
        // one by one, through their pointers.
        if segment.remap.is_some() || first.offset < SEGMENT_HEADER_LEN || end > segment.readable_len() {
            return None;
        }
        let len = usize::try_from(end - first.offset).ok()?;
        // Only values found not in memory come here: read them with a system call, not through
        // the map (see `RandomAccessFile::read_exact_at_cold`), or past the page cache.
        let bytes = match path {
            ReadPath::Direct => segment.file.read_uncached(first.offset, len),
            ReadPath::PageCache => read_cold(&*segment.file, first.offset, len),
        };
        let bytes = bytes.ok()?;
        Some((bytes, segment.version))
    }
}

/// Where in `span` (which starts at `span_start` in a segment of format `version`) the value of
/// the record at `ptr` lies, if the record is intact, has the pointer's length and belongs to
/// `key`.
fn value_in_span(span: &[u8], span_start: u64, version: u32, ptr: &ValuePointer, key: &[u8]) -> Option<Range<usize>> {
    let start = usize::try_from(ptr.offset.checked_sub(span_start)?).ok()?;
    let record = span.get(start..start.checked_add(ptr.len as usize)?)?;
    let header = decode_record_header(header_bytes(record)?, version).ok()?;
    if header.record_len() != u64::from(ptr.len) || record.get(header.key_range())? != key {
        return None;
    }
    check_record(&header, record, ptr.segment, ptr.offset).ok()?;
    let value = header.value_range();
    Some(start + value.start..start + value.end)
}

/// `range` of `span`, the span's last use. A range that ends the span is the span itself,
/// advanced: `slice` would make a buffer read as one piece shareable, which costs an allocation
/// (the common case of a run of one value, when values are scattered, and of a single value
/// read by [`ValueLog::read`]).
pub(super) fn take_range(mut span: Bytes, range: Range<usize>) -> Bytes {
    if range.end == span.len() {
        span.advance(range.start);
        span
    } else {
        span.slice(range)
    }
}

/// A request for the record at `offset` of `segment`, for tests.
#[cfg(test)]
pub(crate) fn test_request(segment: u64, offset: u64, len: u32) -> ValueRequest {
    let pointer = ValuePointer { segment: crate::types::SegmentId(segment), offset, len };
    ValueRequest { pointer, key: 0..0 }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::test_request as request;
    use super::*;

    #[test]
    fn memory_batches_end_at_their_limits_and_take_nothing_beyond() {
        // 100 small records: the count limit ends batches, and what one leaves the next takes.
        let small: Vec<ValueRequest> = (0..100).map(|i| request(1, 1000 + 100 * i, 100)).collect();
        let mut candidates = 0..small.len();
        let first = take_memory_batch(&small, &mut candidates);
        assert_eq!(first, (0..MEMORY_BATCH_ENTRIES).collect::<Vec<_>>());
        assert_eq!(take_memory_batch(&small, &mut candidates), (MEMORY_BATCH_ENTRIES..100).collect::<Vec<_>>());
        assert!(take_memory_batch(&small, &mut candidates).is_empty());
        // 20 KiB records: the byte limit ends a batch with the record that reaches it.
        let large: Vec<ValueRequest> = (0..10).map(|i| request(1, 1000 + (20 << 10) * i, 20 << 10)).collect();
        let mut candidates = [9, 3, 5, 7, 1, 0].into_iter();
        assert_eq!(take_memory_batch(&large, &mut candidates), [9, 3, 5, 7]);
        assert_eq!(candidates.collect::<Vec<_>>(), [1, 0], "the batch took nothing beyond itself");
    }

    #[test]
    fn plan_keeps_adjacent_records_in_one_group_and_sorts_by_position() {
        // Two contiguous runs in segment 1 (given out of order) and one record in segment 2.
        let requests = [request(1, 1100, 100), request(1, 1000, 100), request(2, 24, 50), request(1, 900_000, 10)];
        let groups = plan_reads(&requests, (0..requests.len()).collect(), 8);
        let flat: Vec<usize> = groups.concat();
        assert_eq!(flat, vec![1, 0, 3, 2]);
        assert!(groups.iter().any(|g| g.starts_with(&[1, 0])), "adjacent records split: {groups:?}");
        assert!(continues(&requests[1].pointer, &requests[0].pointer));
        assert!(!continues(&requests[0].pointer, &requests[3].pointer));
        assert!(!continues(&requests[0].pointer, &requests[2].pointer));
    }

    #[test]
    fn large_plans_are_split_across_jobs() {
        let requests: Vec<ValueRequest> = (0..64).map(|i| request(1, 24 + i * 1_000_000, 60_000)).collect();
        let groups = plan_reads(&requests, (0..requests.len()).collect(), 4);
        assert_eq!(groups.len(), 4);
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 64);
    }

    #[test]
    fn without_threads_a_task_runs_on_its_waiter_and_cancel_drops_queued_work() {
        let pool = PrefetchPool::new(0);
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let task = pool.submit(move || counted.fetch_add(1, Ordering::SeqCst) + 41);
        assert_eq!(task.wait(), 41);
        let counted = Arc::clone(&runs);
        let cancelled = pool.submit(move || counted.fetch_add(1, Ordering::SeqCst));
        cancelled.cancel();
        cancelled.run();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn pool_threads_run_every_task_once() {
        let pool = PrefetchPool::new(3);
        let runs = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let runs = Arc::clone(&runs);
                pool.submit(move || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    i * 2
                })
            })
            .collect();
        for (i, task) in tasks.iter().enumerate() {
            assert_eq!(task.wait(), i * 2);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 100);
    }
}
