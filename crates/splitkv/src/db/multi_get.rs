//! Batched point reads (TridentKV's asynchronous reads): [`Db::multi_get`] and its asynchronous
//! forms, [`Db::multi_get_with`] (a completion callback) and [`Db::multi_get_async`] (a future,
//! [`MultiGet`]).
//!
//! A loop of `get`s pays one device round trip per value that is not in memory. A batch first
//! resolves every key through the index, in key order (so neighbouring keys share table, block
//! and filter lookups that are then cached; unless recent batches found their values in memory,
//! contiguous runs of the sorted keys are looked up concurrently on the prefetch pool, so that
//! missed table blocks load in parallel too), and only then touches the value log: the values
//! not in memory have their loads started at once ([`ValueLog::will_need`],
//! `POSIX_FADV_WILLNEED`, which queues the reads and returns) and are copied on the database's
//! prefetch pool, sorted by log position and coalesced where they are near each other, while the
//! calling thread copies the values that are in memory. N cold reads then wait for a few device
//! round trips (a table block, then a value) instead of 2N. The pool and the read planner are the ones scans read ahead
//! with (`vlog::prefetch`, `db::read_ahead`): no second pool, no io_uring ring, and every read
//! still goes through the [`FileSystem`](crate::fs::FileSystem) seam.
//!
//! Semantics are exactly those of a loop of [`Db::get_opt`] at one snapshot: the result is in the
//! caller's key order, a key given twice gets the same answer twice (it is looked up once), and
//! if any key fails the batch returns the error of the first failing key in the caller's order,
//! as the loop would. A value read ahead on the pool is validated like a plain read; any value
//! whose prefetch fails is read again on the calling thread by [`ValueLog::read`], so an error
//! is the one `get` reports.
//!
//! GC: the batch holds the database's `gc_barrier` shared from its first index lookup until its
//! last value is read, so no segment a resolved pointer names is deleted under it (the same
//! guard a `get` holds between its lookup and its read). Pool threads never take the barrier:
//! they run inside a batch that holds it.
//!
//! Thread-safety: all entry points take `&Db`; any number of batches, gets and scans run
//! concurrently. An asynchronous batch runs on a prefetch thread and waits there for its own
//! reads (work stealing: a waiter runs queued reads itself), so batches never deadlock the pool.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use parking_lot::Mutex;

use super::keyspace::{is_reserved, reserved_key_error};
use super::read_ahead::{uncached_requests, ReadaroundFeedback};
use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::index::{IndexValue, ReadAt};
use crate::options::ReadOptions;
use crate::snapshot::Snapshot;
use crate::types::SequenceNumber;
use crate::vlog::prefetch::{plan_reads, take_memory_batch, ReadPath, ValueRequest};

/// What [`Db::multi_get`] returns: one entry per key, in the caller's order.
pub type MultiGetResult = Result<Vec<Option<Bytes>>>;

impl Db {
    /// The values of several keys, read at one sequence number (the snapshot of `opts`, or now),
    /// in the order of `keys`: exactly what a loop of [`Db::get_opt`] at that snapshot returns,
    /// including which error, but with the values that are not in memory read concurrently
    /// (see the module documentation of `db::multi_get`).
    pub fn multi_get<K: AsRef<[u8]>>(&self, opts: &ReadOptions, keys: &[K]) -> MultiGetResult {
        if let [key] = keys {
            // One key reads at one sequence number anyway: no snapshot, no batch bookkeeping.
            return Ok(vec![self.get_opt(opts, key)?]);
        }
        let snapshot = self.pinned_snapshot(opts);
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner.read_batch(snapshot.sequence(), opts.fill_cache, &keys, true)
    }

    /// [`Db::multi_get`] of keys as stored (a keyspace's carry its prefix): none is refused.
    pub(super) fn multi_get_stored(&self, opts: &ReadOptions, keys: &[&[u8]]) -> MultiGetResult {
        let snapshot = self.pinned_snapshot(opts);
        self.inner.read_batch(snapshot.sequence(), opts.fill_cache, keys, false)
    }

    /// [`Db::multi_get`] without blocking the caller: the batch reads at the snapshot of `opts`
    /// (or at the moment of this call) on one of the database's prefetch threads and hands its
    /// result to `done` there. `done` should be quick (send the result somewhere, wake a task):
    /// it holds up a pool thread. With `Options::prefetch_threads == 0` the batch and `done` run
    /// on the calling thread before this returns. A pending batch keeps the database's files
    /// open (and its directory locked) until it completes.
    pub fn multi_get_with<K, F>(&self, opts: &ReadOptions, keys: &[K], done: F)
    where
        K: AsRef<[u8]>,
        F: FnOnce(MultiGetResult) + Send + 'static,
    {
        let batch = OwnedBatch::new(Arc::clone(&self.inner), self.pinned_snapshot(opts), opts.fill_cache, keys);
        if self.inner.prefetch.threads() == 0 {
            done(batch.run());
            return;
        }
        // The handle is not needed: the pool runs the task and `done` delivers its result.
        drop(self.inner.prefetch.submit(move || done(batch.run())));
    }

    /// [`Db::multi_get`] as a future, for servers that must not block a thread per request. The
    /// batch starts at once on a prefetch thread (see [`Db::multi_get_with`]); the future only
    /// collects its result, so it works under any executor and needs no runtime. Dropping the
    /// future does not cancel the reads; their result is discarded.
    pub fn multi_get_async<K: AsRef<[u8]>>(&self, opts: &ReadOptions, keys: &[K]) -> MultiGet {
        let completion = Arc::new(Mutex::new(Completion::Waiting(None)));
        let deliver = Arc::clone(&completion);
        self.multi_get_with(opts, keys, move |result| {
            let previous = std::mem::replace(&mut *deliver.lock(), Completion::Ready(result));
            if let Completion::Waiting(Some(waker)) = previous {
                waker.wake();
            }
        });
        MultiGet { completion }
    }
}

/// The pending result of [`Db::multi_get_async`].
#[must_use = "a future does nothing unless polled"]
pub struct MultiGet {
    completion: Arc<Mutex<Completion>>,
}

enum Completion {
    /// The batch is running; the waker of the last poll, if any.
    Waiting(Option<Waker>),
    Ready(MultiGetResult),
    /// The result was handed out.
    Taken,
}

impl Future for MultiGet {
    type Output = MultiGetResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MultiGetResult> {
        let mut completion = self.completion.lock();
        match std::mem::replace(&mut *completion, Completion::Taken) {
            Completion::Ready(result) => Poll::Ready(result),
            Completion::Waiting(_) => {
                *completion = Completion::Waiting(Some(cx.waker().clone()));
                Poll::Pending
            }
            Completion::Taken => {
                Poll::Ready(Err(Error::InvalidArgument("a multi_get future was polled after it completed".into())))
            }
        }
    }
}

impl std::fmt::Debug for MultiGet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.completion.lock() {
            Completion::Waiting(_) => "waiting",
            Completion::Ready(_) => "ready",
            Completion::Taken => "taken",
        };
        f.debug_struct("MultiGet").field("state", &state).finish()
    }
}

/// A batch that owns what it reads with, so it can run on another thread.
struct OwnedBatch {
    db: Arc<DbInner>,
    snapshot: Snapshot,
    fill_cache: bool,
    /// Every key's bytes, back to back, and each key's range in them.
    arena: Vec<u8>,
    keys: Vec<Range<usize>>,
}

impl OwnedBatch {
    fn new<K: AsRef<[u8]>>(db: Arc<DbInner>, snapshot: Snapshot, fill_cache: bool, keys: &[K]) -> Self {
        let mut arena = Vec::with_capacity(keys.iter().map(|k| k.as_ref().len()).sum());
        let keys = keys
            .iter()
            .map(|k| {
                let start = arena.len();
                arena.extend_from_slice(k.as_ref());
                start..arena.len()
            })
            .collect();
        OwnedBatch { db, snapshot, fill_cache, arena, keys }
    }

    fn run(self) -> MultiGetResult {
        let keys: Vec<&[u8]> = self.keys.iter().map(|r| &self.arena[r.clone()]).collect();
        self.db.read_batch(self.snapshot.sequence(), self.fill_cache, &keys, true)
    }
}

/// Where a distinct key's answer comes from after the index stage.
enum Resolved {
    Done(Result<Option<Bytes>>),
    /// A value in the log: index into the batch's value requests.
    Pointer(usize),
}

impl DbInner {
    /// Reads `keys` at `seq`: index lookups in key order, then the separated values, those not in
    /// memory concurrently. See the module documentation for the exact semantics. With
    /// `refuse_reserved`, keys reserved for keyspaces get the error `get` gives them.
    fn read_batch(
        &self,
        seq: SequenceNumber,
        fill_cache: bool,
        keys: &[&[u8]],
        refuse_reserved: bool,
    ) -> MultiGetResult {
        self.counters.gets.add(keys.len() as u64);
        // Stable, so each distinct key's first position comes first among its duplicates.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(keys[b]));
        // The distinct keys, sorted, back to back in one arena that the value reads share.
        let mut distinct_of = vec![0usize; keys.len()];
        let mut arena = Vec::new();
        let mut distinct: Vec<Range<usize>> = Vec::new();
        for &i in &order {
            if distinct.last().is_none_or(|last| arena[last.clone()] != *keys[i]) {
                let start = arena.len();
                arena.extend_from_slice(keys[i]);
                distinct.push(start..arena.len());
            }
            distinct_of[i] = distinct.len() - 1;
        }
        let arena = Bytes::from(arena);

        let no_segment_release = self.gc_barrier.read();
        let mut requests = Vec::new();
        let resolved: Vec<Resolved> = self
            .look_up(&arena, &distinct, seq, fill_cache)
            .into_iter()
            .zip(&distinct)
            .map(|(found, key)| match found {
                // Refused as `get` refuses them: they would read keyspaces' keys.
                _ if refuse_reserved && is_reserved(&arena[key.clone()]) => Resolved::Done(Err(reserved_key_error())),
                Err(e) => Resolved::Done(Err(e)),
                Ok(None) => Resolved::Done(Ok(None)),
                Ok(Some(IndexValue::Inline(value))) => Resolved::Done(Ok(Some(value))),
                Ok(Some(IndexValue::Pointer(pointer))) => {
                    requests.push(ValueRequest { pointer, key: key.clone() });
                    Resolved::Pointer(requests.len() - 1)
                }
            })
            .collect();
        let mut values = self.read_values(arena, requests);
        drop(no_segment_release);

        let mut answers: Vec<Result<Option<Bytes>>> = resolved
            .into_iter()
            .map(|r| match r {
                Resolved::Done(answer) => answer,
                Resolved::Pointer(request) => std::mem::replace(&mut values[request], Ok(Bytes::new())).map(Some),
            })
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for distinct in distinct_of {
            match &answers[distinct] {
                Ok(value) => out.push(value.clone()),
                // The first failing key in the caller's order: its error is the batch's, as it
                // would be a loop's.
                Err(_) => return answers.swap_remove(distinct).map(|_| out),
            }
        }
        Ok(out)
    }

    /// The index entries of `keys` (ranges of `arena`, sorted), in order. While the values of
    /// recent batches were in memory the index's blocks are assumed to be too, and the lookups
    /// run here, one after the other; otherwise they are split into contiguous runs of keys
    /// looked up concurrently on the prefetch pool, so that the table blocks a batch misses are
    /// read in parallel too (each run still walks its keys in order, sharing blocks).
    fn look_up(
        &self,
        arena: &Bytes,
        keys: &[Range<usize>],
        seq: SequenceNumber,
        fill_cache: bool,
    ) -> Vec<Result<Option<IndexValue>>> {
        let threads = self.prefetch.threads();
        if keys.len() < 2 || threads == 0 || self.point_values_cached.load(Ordering::Relaxed) {
            return keys
                .iter()
                .map(|key| self.index.get(&arena[key.clone()], ReadAt::Snapshot(seq), fill_cache))
                .collect();
        }
        let run = keys.len().div_ceil(threads);
        let keys: Arc<[Range<usize>]> = keys.into();
        let lookups: Vec<_> = (0..keys.len())
            .step_by(run)
            .map(|start| {
                let (index, arena, keys) = (Arc::clone(&self.index), arena.clone(), Arc::clone(&keys));
                let end = (start + run).min(keys.len());
                self.prefetch.submit(move || {
                    keys[start..end]
                        .iter()
                        .map(|key| index.get(&arena[key.clone()], ReadAt::Snapshot(seq), fill_cache))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // The first run is usually still queued: waiting for it runs it here.
        lookups.iter().flat_map(|lookup| lookup.wait()).collect()
    }

    /// The values of `requests` (keys in `keys`), in request order. Values not in memory are
    /// read on the prefetch pool after their loads are started; the rest, and any a prefetch
    /// could not deliver, are read here by [`ValueLog::read`](crate::vlog::ValueLog::read).
    fn read_values(&self, keys: Bytes, requests: Vec<ValueRequest>) -> Vec<Result<Bytes>> {
        self.counters.vlog_reads.add(requests.len() as u64);
        let requests: Arc<[ValueRequest]> = requests.into();
        // One value has nothing to overlap with: read it here, as `get` would.
        let uncached = if requests.len() > 1 {
            let sample = self.point_values_cached.load(Ordering::Relaxed);
            let uncached = uncached_requests(
                &self.vlog,
                &requests,
                sample,
                0,
                &ReadaroundFeedback::default(),
                ReadPath::PageCache,
            );
            self.point_values_cached.store(uncached.is_empty(), Ordering::Relaxed);
            uncached
        } else {
            Vec::new()
        };
        let mut slots: Vec<Option<(usize, usize)>> = vec![None; requests.len()];
        let mut reads = Vec::new();
        for (task, group) in plan_reads(&requests, uncached, self.prefetch.threads()).into_iter().enumerate() {
            for (slot, &request) in group.iter().enumerate() {
                slots[request] = Some((task, slot));
            }
            let (vlog, keys, requests) = (Arc::clone(&self.vlog), keys.clone(), Arc::clone(&requests));
            reads.push(self.prefetch.submit(move || vlog.read_values(&keys, &requests, &group, ReadPath::PageCache)));
        }
        let read_here = |request: &ValueRequest| self.vlog.read(&request.pointer, &keys[request.key.clone()]);
        // Values in memory first, while the pool waits for the device: in batches that share a
        // buffer and overlap their loads (`ValueLog::read_values_in_memory`). A value a batch
        // could not deliver is read alone, for `get`'s exact answer.
        let mut here: Vec<Option<Result<Bytes>>> = (0..requests.len()).map(|_| None).collect();
        let mut in_memory = (0..requests.len()).filter(|&i| slots[i].is_none());
        loop {
            let batch = take_memory_batch(&requests, &mut in_memory);
            if batch.is_empty() {
                break;
            }
            let values = self.vlog.read_values_in_memory(&keys, &requests, &batch);
            for (i, value) in batch.into_iter().zip(values) {
                here[i] = Some(value.map_or_else(|| read_here(&requests[i]), Ok));
            }
        }
        let mut prefetched: Vec<Vec<Option<Bytes>>> = reads.iter().map(|read| read.wait()).collect();
        here.into_iter()
            .zip(slots)
            .zip(requests.iter())
            .map(|((here, slot), request)| {
                let fetched = slot.and_then(|(task, position)| prefetched[task].get_mut(position)?.take());
                // A prefetch that failed for any reason is read again, for `get`'s exact answer.
                here.unwrap_or_else(|| fetched.map_or_else(|| read_here(request), Ok))
            })
            .collect()
    }
}
