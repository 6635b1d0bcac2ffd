//! The half-sync/half-async front end of the hash mode (SSHKV section 3.4): requests are hashed
//! by key to one of N shards, each a bounded queue drained by one worker thread; callers get
//! their results through `Completion` handles, and the synchronous `Db` API waits on them.
//!
//! A shard's worker owns its keys: every single-shard write of a key passes through it, in
//! queue order. It drains a group from its queue and commits it through
//! `DbInner::commit_shard_group`: looks up its keys' predecessors (the version chain through the
//! log), appends the group's batches to the one value log under the log-order lock (the only
//! serial step), applies them to its keys in the index, and publishes in sequence order (see
//! `publish`). It also serves its keys' point reads.
//!
//! What goes around the shards, through the group-commit path (`write::submit`), which runs
//! alone while no shard worker is inside a commit: batches whose keys map to more than one shard
//! (so every batch stays one atomic run of records in the log, whatever shards it touches),
//! empty sync writes, flushes and GC relocations. `multi_get` and iterators read directly.
//!
//! The shards share the value log and the table file: recovery replays one log from one head in
//! sequence order, and a multi-shard batch is atomic because it is one run of that log. Shard-
//! owned zones would need a log head per shard and a merge by sequence number at recovery.
//!
//! Thread-safety: submitting is `&self` from any thread; `shutdown` closes the queues, lets the
//! workers finish what is queued, and joins them.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use super::completion::Completer;
use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::index::hash::slot::key_hash;
use crate::snapshot::Snapshot;

/// Requests a shard's queue holds before submitters wait (back-pressure).
const QUEUE_DEPTH: usize = 1024;

/// Most payload bytes a worker drains into one commit group (as the group-commit leader does).
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A request to a shard.
pub(super) enum Request {
    Write { batch: WriteBatch, sync: bool, done: Completer<()> },
    Get { key: Vec<u8>, snapshot: Snapshot, fill_cache: bool, done: Completer<Option<Bytes>> },
}

/// A write a shard worker commits: its batch, and whether its caller asked for a sync.
pub(super) struct ShardWrite {
    pub(super) batch: WriteBatch,
    pub(super) sync: bool,
}

/// The shards: their queues and workers.
pub(super) struct ShardFront {
    /// One sender per shard; `None` once shut down.
    queues: RwLock<Option<Vec<SyncSender<Request>>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Which of `shards` shards owns `key`. The table's bucket is the hash's remainder; the shard
/// takes the high half, so that shards do not split by bucket parity.
pub(super) fn shard_of(key: &[u8], shards: usize) -> usize {
    ((key_hash(key) >> 32) % shards as u64) as usize
}

/// The one shard every key of `batch` maps to, if there is one.
pub(super) fn single_shard(batch: &WriteBatch, shards: usize) -> Option<usize> {
    let mut keys = batch.ops().iter().map(|op| shard_of(op.key(), shards));
    let first = keys.next()?;
    keys.all(|s| s == first).then_some(first)
}

impl ShardFront {
    /// Starts `shards` workers over `db`.
    pub(super) fn start(db: &Arc<DbInner>, shards: usize) -> Result<ShardFront> {
        let mut queues = Vec::with_capacity(shards);
        let mut workers = Vec::with_capacity(shards);
        for i in 0..shards {
            let (tx, rx) = sync_channel(QUEUE_DEPTH);
            let db = Arc::clone(db);
            let handle = std::thread::Builder::new()
                .name(format!("splitkv-shard-{i}"))
                .spawn(move || serve(&db, &rx))
                .map_err(Error::Io)?;
            queues.push(tx);
            workers.push(handle);
        }
        Ok(ShardFront { queues: RwLock::new(Some(queues)), workers: Mutex::new(workers) })
    }

    /// The number of shards.
    pub(super) fn shards(&self) -> usize {
        self.queues.read().as_ref().map_or(1, Vec::len)
    }

    /// Queues `request` on `shard`; blocks while that queue is full.
    pub(super) fn send(&self, shard: usize, request: Request) -> Result<()> {
        let queues = self.queues.read();
        let Some(tx) = queues.as_ref().and_then(|q| q.get(shard)) else { return Err(Error::Closed) };
        // A dropped request's completer answers `Closed` to its waiter.
        tx.send(request).map_err(|_| Error::Closed)
    }

    /// Closes the queues; workers serve what is queued, then exit and are joined.
    pub(super) fn shutdown(&self) {
        drop(self.queues.write().take());
        for handle in std::mem::take(&mut *self.workers.lock()) {
            let _ = handle.join();
        }
    }
}

/// A worker's loop: drain a group, commit its writes, serve its reads, until the queue closes.
fn serve(db: &DbInner, queue: &Receiver<Request>) {
    let mut group = Vec::new();
    while let Ok(first) = queue.recv() {
        group.push(first);
        let mut bytes = 0;
        while bytes < MAX_GROUP_BYTES {
            match queue.try_recv() {
                Ok(request) => {
                    if let Request::Write { batch, .. } = &request {
                        bytes += batch.payload_bytes();
                    }
                    group.push(request);
                }
                Err(_) => break,
            }
        }
        let mut writes = Vec::new();
        let mut write_done = Vec::new();
        let mut reads = Vec::new();
        for request in group.drain(..) {
            match request {
                Request::Write { batch, sync, done } => {
                    writes.push(ShardWrite { batch, sync });
                    write_done.push(done);
                }
                Request::Get { key, snapshot, fill_cache, done } => reads.push((key, snapshot, fill_cache, done)),
            }
        }
        // Writes first, so their callers are released before the reads' value I/O. The order
        // changes no answer: a read sees the database at the sequence number it was submitted
        // with.
        if !writes.is_empty() {
            let result = db.commit_shard_group(&writes);
            for done in write_done {
                done.complete(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(super::write::share_error(e)),
                });
            }
        }
        for (key, snapshot, fill_cache, done) in reads {
            let value = db.get_at(&key, Some(snapshot.sequence()), fill_cache);
            // Released before the caller hears back: once its read is answered, it may count on
            // holding no reader (a GC run it starts next must see none).
            drop(snapshot);
            done.complete(value);
        }
    }
}
