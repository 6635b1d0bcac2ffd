//! Read-ahead for scans (WiscKey §3.3.1): the windows of entries a [`DbIterator`] walks ahead of
//! its position, and the walk that fills one.
//!
//! A window holds the next entries' keys and inline values and, for separated values, the
//! reads that fetch them. Values already in memory are left for the cursor to copy when it lands
//! on them; the others have their loads started in the background ([`ValueLog::will_need`]) and
//! are read on the shared prefetch pool, coalesced where they are near each other in the log.
//!
//! [`DbIterator`]: super::DbIterator

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::Error;
use crate::iter::db_iter::DbIter;
use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::{SegmentId, ValueKind, ValuePointer};
use crate::vlog::prefetch::{chunk, plan_reads, take_memory_batch, PrefetchPool, ReadPath, Task, ValueRequest};
use crate::vlog::ValueLog;

/// Consecutive moves in one direction after which a cursor starts reading ahead while the
/// database's values were last seen outside memory; a seek followed by one step does not pay for
/// a read-ahead it will not use.
pub(super) const PREFETCH_AFTER_MOVES: u32 = 2;
/// The same while values were last seen in memory. There is no I/O to overlap then, only the walk
/// of the index with the copying of values, which pays on long scans and costs short ones.
pub(super) const PREFETCH_AFTER_MOVES_CACHED: u32 = 128;
/// Entries in the first read-ahead window; each following window doubles, so a short scan
/// wastes little and a long one quickly reaches full parallelism.
pub(super) const FIRST_WINDOW_ENTRIES: usize = 16;
/// While values are in memory, one in this many has its residency checked.
pub(super) const RESIDENCY_SAMPLE: usize = 16;
/// Read-around for long scans, and how many of the scan's values such a chunk must be expected
/// to hold (see [`readaround`]).
const MAX_READAROUND: u64 = 64 << 10;
const READAROUND_MIN_HITS: u64 = 2;
/// Chunks a [`ReadaroundFeedback`] remembers; past this the memory starts afresh. 64 Ki chunks
/// of 64 KiB cover a 4 GiB stretch of log in about 2 MiB of memory.
const MAX_REMEMBERED_CHUNKS: usize = 64 << 10;
/// Returns to evicted chunks that, outnumbering the returns that found their chunk, turn
/// read-around off: enough that a few unlucky evictions on a roomy machine do not.
const MIN_EVICTED_RETURNS: u64 = 16;
/// Entries walked with read-around off after which it is tried again, so a database whose
/// memory grew (or whose scans changed) does not go without it for good.
const READAROUND_RETRY_ENTRIES: u64 = 1 << 20;
/// Most entries in one read-ahead window.
pub(super) const MAX_WINDOW_ENTRIES: usize = 4096;
/// A window ends once its separated values add up to this many bytes: large values get short
/// windows, and an iterator holds at most two windows of values.
const MAX_WINDOW_VALUE_BYTES: u64 = 4 << 20;
/// Separated-value bytes one cursor holds in read-ahead at most: its current window and the
/// next, each cut once its values reach [`MAX_WINDOW_VALUE_BYTES`] (each may pass it by the value
/// that crossed it, and holds the keys of at most [`MAX_WINDOW_ENTRIES`] entries besides).
pub(super) const READ_AHEAD_LIMIT_PER_CURSOR: u64 = 2 * MAX_WINDOW_VALUE_BYTES;

pub(super) type Cursor = DbIter<Box<dyn InternalIterator>>;

/// Direction of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Movement {
    Forward,
    Backward,
}

/// Where a read-ahead entry's value comes from.
pub(super) enum BufferedValue {
    /// A range of the window's inline-value arena.
    Inline(Range<usize>),
    /// A value in the log: index into the window's read requests.
    Separated(usize),
    /// A pointer that does not decode, and where it was read; reported when the cursor lands
    /// on it.
    Malformed(EntryOrigin),
}

/// One entry of a window: its key (a range of the window's key arena) and where its value is.
pub(super) struct BufferedEntry {
    pub(super) key: Range<usize>,
    pub(super) value: BufferedValue,
}

/// Entries read ahead of the cursor, in the order it will visit them, with the value reads
/// issued for them.
pub(super) struct Window {
    pub(super) movement: Movement,
    pub(super) keys: Bytes,
    pub(super) inline_values: Bytes,
    pub(super) entries: Vec<BufferedEntry>,
    pub(super) requests: Arc<[ValueRequest]>,
    /// Per request: the read task holding it and its position in that task's result; `None` for
    /// values in memory, which the cursor copies itself when it lands on them.
    pub(super) request_slots: Vec<Option<(usize, usize)>>,
    pub(super) reads: Vec<Arc<Task<Vec<Option<Bytes>>>>>,
    pub(super) read_results: Vec<Option<Vec<Option<Bytes>>>>,
    /// Values found in memory that the cursor read in a batch when it reached the first of them
    /// (see [`Window::take_value`]), with their request indices, in the order it visits them.
    in_memory: VecDeque<(usize, Option<Bytes>)>,
    /// The error that stopped the walk, reported when the cursor moves past the last entry.
    pub(super) error: Option<Error>,
    /// The walk ran out of entries: nothing lies beyond the last one.
    pub(super) exhausted: bool,
    /// The entry the user is on.
    pub(super) pos: usize,
    /// The database's gauge of read-ahead bytes, and what this window added to it.
    gauge: Arc<AtomicU64>,
    accounted: u64,
}

impl Window {
    pub(super) fn is_last(&self) -> bool {
        self.exhausted || self.error.is_some()
    }

    pub(super) fn key(&self, entry: usize) -> &[u8] {
        &self.keys[self.entries[entry].key.clone()]
    }

    /// The value of request `request` as read ahead: from the pool's read if it had one, and
    /// otherwise (the value was found in memory) from a batch read of it and the values in
    /// memory after it ([`ValueLog::read_values_in_memory`]: one allocation per batch instead of
    /// one per value). `None` if the value could not be read this way
    /// (not yet flushed, a failed read or check); the caller then reads it alone, which yields
    /// the value or the real error.
    pub(super) fn take_value(&mut self, request: usize, vlog: &ValueLog) -> Option<Bytes> {
        if let Some((task, slot)) = self.request_slots[request] {
            let results = self.read_results[task].get_or_insert_with(|| self.reads[task].wait());
            return results.get_mut(slot).and_then(Option::take);
        }
        while self.in_memory.front().is_some_and(|&(i, _)| i < request) {
            self.in_memory.pop_front();
        }
        if self.in_memory.front().is_none_or(|&(i, _)| i != request) {
            self.in_memory.clear();
            let batch = take_memory_batch(
                &self.requests,
                &mut (request..self.requests.len()).filter(|&i| self.request_slots[i].is_none()),
            );
            let values = vlog.read_values_in_memory(&self.keys, &self.requests, &batch);
            self.in_memory.extend(batch.into_iter().zip(values));
        }
        self.in_memory.pop_front().and_then(|(_, value)| value)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.gauge.fetch_sub(self.accounted, Ordering::Relaxed);
        for read in &self.reads {
            read.cancel();
        }
    }
}

/// A read-ahead walk's output: the window and the cursor, left on its last entry.
pub(super) struct Walked {
    pub(super) cursor: Cursor,
    pub(super) window: Window,
}

/// What a read-ahead walk needs besides the cursor.
#[derive(Clone)]
pub(super) struct WalkPlan {
    pub(super) movement: Movement,
    pub(super) max_entries: usize,
    pub(super) keys_only: bool,
    /// The scan is a bulk read (long, or told not to fill caches): values it finds packed in the
    /// log and not in memory are read past the page cache (see [`walk`]).
    pub(super) bulk: bool,
    /// Whether the values recent walks checked were all in memory, shared by the database's
    /// cursors (see [`uncached_requests`]); this walk reads and updates it.
    pub(super) values_cached: Arc<AtomicBool>,
    /// Whether read-around chunks last until scans come back to them, shared by the database's
    /// cursors.
    pub(super) readaround_feedback: Arc<ReadaroundFeedback>,
    /// Bytes of all live windows of the database's cursors (`MemoryStats::read_ahead_bytes`).
    pub(super) read_ahead_bytes: Arc<AtomicU64>,
    /// Entries the scan visited before this window.
    pub(super) scanned: usize,
    pub(super) vlog: Arc<ValueLog>,
    pub(super) pool: Arc<PrefetchPool>,
}

/// Of a window's value reads, those that may wait on the device (on [`ReadPath::PageCache`] their
/// loads are started by [`ValueLog::will_need`]); only these go to the pool, since copying a
/// value that is in memory costs less than handing it to another thread. With `sample`, set while the values recent walks
/// checked were all in memory, only every [`RESIDENCY_SAMPLE`]th value is checked, and the rest
/// only if a sampled one is not in memory: a cached scan pays one check in that many.
pub(super) fn uncached_requests(
    vlog: &ValueLog,
    requests: &[ValueRequest],
    sample: bool,
    readaround: u64,
    feedback: &ReadaroundFeedback,
    path: ReadPath,
) -> Vec<usize> {
    let mut check = ResidencyCheck { vlog, readaround, feedback, path, last: None };
    if !sample {
        return (0..requests.len()).filter(|&i| check.misses(&requests[i].pointer)).collect();
    }
    let sampled: Vec<usize> =
        (0..requests.len()).step_by(RESIDENCY_SAMPLE).filter(|&i| check.misses(&requests[i].pointer)).collect();
    if sampled.is_empty() {
        return sampled;
    }
    (0..requests.len())
        .filter(|&i| {
            if i % RESIDENCY_SAMPLE == 0 {
                sampled.binary_search(&i).is_ok()
            } else {
                check.misses(&requests[i].pointer)
            }
        })
        .collect()
}

/// Residency checks over a window, remembering the last chunk checked: consecutive values in one
/// chunk (small values, a sequential load) share one check instead of a system call each.
struct ResidencyCheck<'a> {
    vlog: &'a ValueLog,
    readaround: u64,
    feedback: &'a ReadaroundFeedback,
    path: ReadPath,
    /// The last chunk checked and whether it was in memory.
    last: Option<(SegmentId, (u64, u64), bool)>,
}

impl ResidencyCheck<'_> {
    fn misses(&mut self, ptr: &ValuePointer) -> bool {
        if let Some((segment, (start, end), cached)) = self.last {
            if segment == ptr.segment && start <= ptr.offset && ptr.end() <= end {
                return !cached;
            }
        }
        let cached = match self.path {
            ReadPath::PageCache => self.vlog.will_need(ptr, self.readaround),
            ReadPath::Direct => self.vlog.in_memory(ptr, self.readaround),
        };
        let chunk = chunk(ptr, self.readaround);
        if self.readaround > 0 {
            self.feedback.note(ptr.segment, chunk.0, cached);
        }
        self.last = Some((ptr.segment, chunk, cached));
        !cached
    }
}

/// Whether read-around pays under the memory the machine gives the page cache, learnt from the
/// scans themselves. A read-around chunk is loaded on the bet that the scan comes back for its
/// other values; with the log larger than the page cache (a memory-capped process, a large
/// database) the chunk is evicted before that happens and every value then costs a whole chunk
/// from the device: measured at 8.8 x 4 KiB read per 1 KiB value and 4x slower scans with a
/// 2 GiB log under a 512 MiB cap. So the chunks loaded are remembered, and every return to one
/// is a hit (still in memory) or an eviction; once evictions outnumber hits (and there are
/// [`MIN_EVICTED_RETURNS`] of them) read-around stops, and each value is loaded alone, which is
/// one page per value and no more. On a machine whose memory holds the log no chunk is evicted
/// and nothing changes. After [`READAROUND_RETRY_ENTRIES`] entries without it, it is tried
/// again with fresh evidence.
#[derive(Debug, Default)]
pub(crate) struct ReadaroundFeedback {
    /// Chunks loaded by read-around, as (segment, chunk start).
    loaded: Mutex<HashSet<(SegmentId, u64)>>,
    hits: AtomicU64,
    evicted: AtomicU64,
    /// Entries walked since read-around was turned off.
    off_for: AtomicU64,
}

impl ReadaroundFeedback {
    /// Records a residency check of the read-around chunk starting at `start`.
    fn note(&self, segment: SegmentId, start: u64, cached: bool) {
        let mut loaded = self.loaded.lock();
        let known = loaded.contains(&(segment, start));
        match (known, cached) {
            (true, true) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
            (false, false) => {
                if loaded.len() >= MAX_REMEMBERED_CHUNKS {
                    loaded.clear();
                }
                loaded.insert((segment, start));
            }
            (false, true) => {}
        }
    }

    /// True while chunks are seen evicted before scans come back to them; `entries` more are
    /// being walked.
    fn thrashing(&self, entries: usize) -> bool {
        let evicted = self.evicted.load(Ordering::Relaxed);
        if evicted < MIN_EVICTED_RETURNS || evicted <= self.hits.load(Ordering::Relaxed) {
            return false;
        }
        if self.off_for.fetch_add(entries as u64, Ordering::Relaxed) < READAROUND_RETRY_ENTRIES {
            return true;
        }
        // Time to try again: forget what was learnt.
        self.loaded.lock().clear();
        self.hits.store(0, Ordering::Relaxed);
        self.evicted.store(0, Ordering::Relaxed);
        self.off_for.store(0, Ordering::Relaxed);
        false
    }
}

/// Bytes loaded around each value that is not in memory, for a scan that has visited `scanned`
/// entries whose window's values lie within `span` bytes of the log. Loading a large aligned
/// chunk costs one device read instead of several, but is waste unless the scan will come back
/// for its neighbours: it pays once, by the scan's own history, the chunk should hold several
/// of its values ([`READAROUND_MIN_HITS`]). A random load spreads a scan's values over the
/// whole log, so short scans read only their values and a long scan switches to large reads.
fn readaround(scanned: usize, span: u64) -> u64 {
    let expected_hits = scanned as u64 * MAX_READAROUND / span.max(1);
    if expected_hits >= READAROUND_MIN_HITS {
        MAX_READAROUND
    } else {
        0
    }
}

/// Bytes of the log between the first and last of the values of `requests` in each segment,
/// summed over segments.
fn log_span(requests: &[ValueRequest]) -> u64 {
    let mut ranges: BTreeMap<SegmentId, (u64, u64)> = BTreeMap::new();
    for r in requests {
        let (start, end) = (r.pointer.offset, r.pointer.end());
        let range = ranges.entry(r.pointer.segment).or_insert((start, end));
        *range = (range.0.min(start), range.1.max(end));
    }
    ranges.values().map(|(start, end)| end - start).sum()
}

/// Collects up to `plan.max_entries` entries from `cursor` (its current one first if
/// `include_current`, then stepping in `plan.movement`) and issues the reads of their separated
/// values on the pool. Errors end the window and are kept for the cursor to report in turn.
pub(super) fn walk(mut cursor: Cursor, include_current: bool, plan: &WalkPlan) -> Walked {
    let mut keys = Vec::new();
    let mut inline_values = Vec::new();
    let mut entries = Vec::new();
    let mut requests = Vec::new();
    let mut value_bytes = 0u64;
    let mut error = None;
    let mut exhausted = false;
    let mut step = !include_current;
    while entries.len() < plan.max_entries && value_bytes < MAX_WINDOW_VALUE_BYTES {
        if step {
            let moved = match plan.movement {
                Movement::Forward => cursor.next(),
                Movement::Backward => cursor.prev(),
            };
            if let Err(e) = moved {
                error = Some(e);
                break;
            }
        }
        step = true;
        if !cursor.valid() {
            exhausted = true;
            break;
        }
        let key_start = keys.len();
        keys.extend_from_slice(cursor.key());
        let key = key_start..keys.len();
        let decoded = (cursor.value_kind() == ValueKind::Pointer).then(|| ValuePointer::decode(cursor.raw_value()));
        let value = match decoded {
            Some(Some(pointer)) => {
                value_bytes += u64::from(pointer.len);
                requests.push(ValueRequest { pointer, key: key.clone() });
                BufferedValue::Separated(requests.len() - 1)
            }
            // Where the entry came from is asked only here, on the error path.
            Some(None) => BufferedValue::Malformed(cursor.entry_origin().unwrap_or(EntryOrigin::Unpositioned)),
            None => {
                let start = inline_values.len();
                inline_values.extend_from_slice(cursor.raw_value());
                BufferedValue::Inline(start..inline_values.len())
            }
        };
        entries.push(BufferedEntry { key, value });
    }
    let keys = Bytes::from(keys);
    let requests: Arc<[ValueRequest]> = requests.into();
    let mut request_slots = vec![None; requests.len()];
    let mut reads = Vec::new();
    if !plan.keys_only && !requests.is_empty() {
        // Values packed in the log (after a key-order rewrite or a sequential load: they fill at
        // least half the stretch of log between the window's first and last value).
        let span = log_span(&requests);
        let packed = span <= 2 * value_bytes;
        // A packed window's chunks hold its own values, so loading (or checking) a whole chunk is
        // no bet on later windows, and whether such bets paid lately does not matter: checking
        // value by value would cost a system call per value.
        let readaround = if packed {
            MAX_READAROUND
        } else if plan.readaround_feedback.thrashing(entries.len()) {
            0
        } else {
            readaround(plan.scanned + entries.len(), span)
        };
        // A bulk scan reads packed values past the page cache: it reads each byte once, and
        // caching them would only cost the kernel's work of adding and reclaiming pages, and push
        // out pages still to be used. Scattered values go through the cache, where the
        // read-around loaded with them holds values that later windows come back for.
        let path = if plan.bulk && packed { ReadPath::Direct } else { ReadPath::PageCache };
        let sample = plan.values_cached.load(Ordering::Relaxed);
        let uncached = uncached_requests(&plan.vlog, &requests, sample, readaround, &plan.readaround_feedback, path);
        plan.values_cached.store(uncached.is_empty(), Ordering::Relaxed);
        for (task, group) in plan_reads(&requests, uncached, plan.pool.threads()).into_iter().enumerate() {
            for (slot, &request) in group.iter().enumerate() {
                request_slots[request] = Some((task, slot));
            }
            let (vlog, keys, requests) = (Arc::clone(&plan.vlog), keys.clone(), Arc::clone(&requests));
            reads.push(plan.pool.submit(move || vlog.read_values(&keys, &requests, &group, path)));
        }
    }
    // What the window holds once its reads are in: keys, inline values and separated values.
    let accounted = keys.len() as u64 + inline_values.len() as u64 + if plan.keys_only { 0 } else { value_bytes };
    plan.read_ahead_bytes.fetch_add(accounted, Ordering::Relaxed);
    let window = Window {
        movement: plan.movement,
        keys,
        inline_values: Bytes::from(inline_values),
        entries,
        requests,
        request_slots,
        read_results: (0..reads.len()).map(|_| None).collect(),
        in_memory: VecDeque::new(),
        reads,
        error,
        exhausted,
        pos: 0,
        gauge: Arc::clone(&plan.read_ahead_bytes),
        accounted,
    };
    Walked { cursor, window }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vlog::prefetch::test_request as request;

    #[test]
    fn readaround_stops_once_chunks_are_evicted_before_scans_return_and_retries_later() {
        let feedback = ReadaroundFeedback::default();
        let segment = SegmentId(1);
        // Loaded chunks that are found again in memory: read-around pays.
        for chunk in 0..100u64 {
            feedback.note(segment, chunk << 16, false);
            feedback.note(segment, chunk << 16, true);
        }
        assert!(!feedback.thrashing(16));
        // Chunks in memory without being loaded by a scan say nothing.
        feedback.note(SegmentId(2), 0, true);
        assert_eq!(feedback.hits.load(Ordering::Relaxed), 100);
        // Returns that find their chunks gone, more of them than hits: read-around stops.
        for chunk in 0..100u64 {
            feedback.note(segment, chunk << 16, false);
        }
        assert!(!feedback.thrashing(16), "as many evictions as hits");
        feedback.note(segment, 0, false);
        assert!(feedback.thrashing(16));
        assert!(feedback.thrashing(READAROUND_RETRY_ENTRIES as usize));
        // After that many entries it is tried again, with the evidence forgotten.
        assert!(!feedback.thrashing(16));
        assert_eq!(feedback.evicted.load(Ordering::Relaxed), 0);
        assert!(feedback.loaded.lock().is_empty());
    }

    #[test]
    fn a_few_evictions_do_not_stop_readaround() {
        let feedback = ReadaroundFeedback::default();
        for chunk in 0..(MIN_EVICTED_RETURNS - 1) {
            feedback.note(SegmentId(1), chunk, false);
            feedback.note(SegmentId(1), chunk, false);
        }
        assert!(!feedback.thrashing(16));
    }

    #[test]
    fn log_span_sums_the_extent_of_each_segment() {
        let requests = [request(1, 1000, 100), request(2, 50, 10), request(1, 200, 100), request(2, 90, 30)];
        assert_eq!(log_span(&requests), (1100 - 200) + (120 - 50));
        assert_eq!(log_span(&[]), 0);
    }

    #[test]
    fn readaround_starts_once_a_chunk_is_expected_to_hold_several_of_the_scans_values() {
        let gib = 1u64 << 30;
        // Values spread over a whole 1 GiB log: a 10 000-entry scan reads only its values,
        // a 100 000-entry one loads 64 KiB chunks (about six of its values in each).
        assert_eq!(readaround(10_000, gib), 0);
        assert_eq!(readaround(100_000, gib), MAX_READAROUND);
        // Adjacent values (a sequential load): large reads from the first window on.
        assert_eq!(readaround(16, 16 * 1100), MAX_READAROUND);
        assert_eq!(readaround(0, 0), 0);
    }
}
