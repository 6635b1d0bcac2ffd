//! Batched point reads: `multi_get` (and its future and callback forms) returns exactly what a
//! loop of `get_opt` at one snapshot returns — values, `None`s, order, and the first error in the
//! caller's order — for duplicate, missing and deleted keys, inline and separated values, values
//! in the memtable and in tables, with writes landing after the snapshot. Each scenario runs on
//! the OS file system (values in the page cache: the calling thread copies them) and on an
//! in-memory one that reports every file as uncached (values go through the prefetch pool), under
//! every cell of the option matrix; a damaged value record is reported as `get` reports it, and
//! GC relocating values under running batches changes no answer.

mod common;

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use bytes::Bytes;
use common::{index_kinds, key, matrix, small_options, value_for, Case};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use splitkv::fs::{FileSystem, MemFileSystem};
use splitkv::{Db, Error, IndexBlockKind, IndexKind, Options, ReadOptions, Result};

/// Where a scenario's database lives.
#[derive(Clone, Copy, Debug)]
enum Storage {
    /// A temporary directory: values are in the page cache.
    Os,
    /// In memory, every file reported as uncached.
    Uncached,
}

/// A database on `storage`, with what keeps it alive.
struct Opened {
    db: Db,
    _dir: Option<tempfile::TempDir>,
}

fn open_on(storage: Storage, opts: Options) -> Result<Opened> {
    match storage {
        Storage::Os => {
            let dir = tempfile::tempdir()?;
            Ok(Opened { db: Db::open(dir.path(), opts)?, _dir: Some(dir) })
        }
        Storage::Uncached => {
            let mem = MemFileSystem::new();
            mem.set_uncached(true);
            Ok(Opened { db: Db::open("/db", Options { fs: Arc::new(mem), ..opts })?, _dir: None })
        }
    }
}

/// Wakes the thread that blocks on a future.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion on this thread, parking between polls.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

/// What a loop of gets at `opts` returns for `keys`: the values, or the first error.
fn loop_of_gets(db: &Db, opts: &ReadOptions, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
    keys.iter().map(|k| db.get_opt(opts, k)).collect()
}

/// Results compared by value, errors by their text.
fn comparable(result: Result<Vec<Option<Bytes>>>) -> std::result::Result<Vec<Option<Bytes>>, String> {
    result.map_err(|e| e.to_string())
}

/// Checks every entry point of a batch against a loop of gets for `keys` at `opts`.
fn check_batch(db: &Db, opts: &ReadOptions, keys: &[Vec<u8>], ctx: &str) {
    let expected = comparable(loop_of_gets(db, opts, keys));
    assert_eq!(comparable(db.multi_get(opts, keys)), expected, "{ctx}: multi_get");
    assert_eq!(comparable(block_on(db.multi_get_async(opts, keys))), expected, "{ctx}: multi_get_async");
    let (sender, receiver) = mpsc::channel();
    db.multi_get_with(opts, keys, move |result| sender.send(result).expect("the test waits"));
    let delivered = receiver.recv().expect("the callback runs exactly once");
    assert_eq!(comparable(delivered), expected, "{ctx}: multi_get_with");
}

/// A value length on either side of the 1 KiB test threshold, or empty.
fn random_len(rng: &mut SmallRng) -> usize {
    match rng.gen_range(0..10) {
        0 => 0,
        1..=3 => rng.gen_range(1..300),
        _ => rng.gen_range(1024..3000),
    }
}

/// A batch of `len` keys: mostly written keys, some never written, some repeated.
fn random_batch(rng: &mut SmallRng, len: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(len);
    while keys.len() < len {
        let roll = rng.gen_range(0..10);
        if roll == 0 && !keys.is_empty() {
            let again = keys[rng.gen_range(0..keys.len())].clone();
            keys.push(again);
        } else if roll == 1 {
            keys.push(key(rng.gen_range(10_000..10_100)));
        } else {
            keys.push(key(rng.gen_range(0..400)));
        }
    }
    keys
}

/// Writes `count` random puts and deletes over keys 0..400, flushing now and then so that
/// versions spread over the memtable, level-0 and deeper tables.
fn random_writes(db: &Db, rng: &mut SmallRng, count: usize) -> Result<()> {
    for i in 0..count {
        let k = key(rng.gen_range(0..400));
        if rng.gen_bool(0.15) {
            db.delete(&k)?;
        } else {
            db.put(&k, value_for(rng.gen(), random_len(rng)))?;
        }
        if i % 500 == 499 {
            db.flush()?;
        }
    }
    Ok(())
}

fn equals_a_loop_of_gets(case: Case, storage: Storage, prefetch_threads: usize) -> Result<()> {
    let ctx = format!("{case}, {storage:?}, {prefetch_threads} prefetch threads");
    let opened = open_on(storage, Options { prefetch_threads, ..case.options() })?;
    let db = &opened.db;
    let mut rng = SmallRng::seed_from_u64(0x6d67_6574);
    random_writes(db, &mut rng, 1500)?;
    let snapshot = db.snapshot();
    // Versions written after the snapshot must not show through it.
    random_writes(db, &mut rng, 700)?;
    let at_snapshot = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
    for len in [0, 1, 2, 8, 33, 128, 400] {
        let keys = random_batch(&mut rng, len);
        check_batch(db, &at_snapshot, &keys, &format!("{ctx}, {len} keys at the snapshot"));
        check_batch(db, &ReadOptions::default(), &keys, &format!("{ctx}, {len} keys now"));
        let uncached_blocks = ReadOptions { fill_cache: false, ..at_snapshot.clone() };
        check_batch(db, &uncached_blocks, &keys, &format!("{ctx}, {len} keys, fill_cache off"));
    }
    Ok(())
}

#[test]
fn multi_get_equals_a_loop_of_gets_at_one_snapshot() -> Result<()> {
    for case in matrix() {
        for storage in [Storage::Os, Storage::Uncached] {
            equals_a_loop_of_gets(case, storage, 8)?;
        }
    }
    Ok(())
}

#[test]
fn without_prefetch_threads_batches_run_on_the_caller() -> Result<()> {
    for kind in index_kinds() {
        equals_a_loop_of_gets(
            Case { kind, threshold: 1024, index_block: IndexBlockKind::Binary },
            Storage::Uncached,
            0,
        )?;
        let opened = open_on(Storage::Uncached, Options { prefetch_threads: 0, ..small_options(kind, 0) })?;
        opened.db.put("k", "v")?;
        // Nothing else would run the batch: the future is complete when it is returned.
        let mut future = pin!(opened.db.multi_get_async(&ReadOptions::default(), &["k"]));
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(matches!(&polled, Poll::Ready(Ok(v)) if v == &[Some(Bytes::from("v"))]), "{kind:?}: {polled:?}");
    }
    Ok(())
}

#[test]
fn duplicates_missing_and_deleted_keys_keep_the_callers_order() -> Result<()> {
    for case in matrix() {
        for storage in [Storage::Os, Storage::Uncached] {
            let ctx = format!("{case}, {storage:?}");
            let opened = open_on(storage, case.options())?;
            let db = &opened.db;
            db.put("big", value_for(1, 4000))?;
            db.put("small", "s")?;
            db.put("gone", value_for(2, 2000))?;
            db.flush()?;
            db.delete("gone")?;
            let keys: [&[u8]; 6] = [b"small", b"missing", b"big", b"gone", b"small", b"big"];
            let expected = vec![
                Some(Bytes::from("s")),
                None,
                Some(Bytes::from(value_for(1, 4000))),
                None,
                Some(Bytes::from("s")),
                Some(Bytes::from(value_for(1, 4000))),
            ];
            assert_eq!(db.multi_get(&ReadOptions::default(), &keys)?, expected, "{ctx}");
            assert_eq!(block_on(db.multi_get_async(&ReadOptions::default(), &keys))?, expected, "{ctx}");
            assert_eq!(db.multi_get::<&[u8]>(&ReadOptions::default(), &[])?, Vec::<Option<Bytes>>::new(), "{ctx}");
        }
    }
    Ok(())
}

/// Regression: a batch of several keys read keys reserved for keyspaces (the stored keys of a
/// keyspace's data), which `get` refuses.
#[test]
fn keys_reserved_for_keyspaces_are_refused_as_get_refuses_them() -> Result<()> {
    for kind in index_kinds() {
        let opened = open_on(Storage::Os, small_options(kind, 0))?;
        let db = &opened.db;
        db.put("k", "v")?;
        db.keyspace("ks")?.put("k", "secret")?;
        let stored = db.keyspace("ks")?.id().to_be_bytes();
        let reserved = [&[0xFF; 4][..], &stored, b"k"].concat();
        let opts = ReadOptions::default();
        for keys in
            [vec![b"k".to_vec(), reserved.clone()], vec![reserved.clone(), b"k".to_vec()], vec![reserved.clone()]]
        {
            let refused = db.multi_get(&opts, &keys).expect_err("a reserved key fails the batch");
            assert!(matches!(refused, Error::InvalidArgument(_)), "{kind:?}: {refused}");
            check_batch(db, &opts, &keys, &format!("{kind:?}"));
        }
    }
    Ok(())
}

#[test]
fn a_damaged_value_record_is_reported_as_get_reports_it() -> Result<()> {
    for kind in index_kinds() {
        let mem = MemFileSystem::new();
        let db = Db::open("/db", Options { fs: Arc::new(mem.clone()), ..small_options(kind, 0) })?;
        for i in 0..60 {
            db.put(key(i), value_for(i, 1000))?;
        }
        db.flush()?;
        let segment = mem.file_names(Path::new("/db")).into_iter().find(|n| n.ends_with(".vlog")).expect("a segment");
        let path = Path::new("/db").join(segment);
        mem.flip_byte(&path, mem.file_size(&path)? / 2)?;
        let all: Vec<Vec<u8>> = (0..60).map(key).collect();
        let damaged: Vec<&Vec<u8>> = all.iter().filter(|k| db.get(k).is_err()).collect();
        assert_eq!(damaged.len(), 1, "{kind:?}: exactly one record is damaged");
        for uncached in [false, true] {
            mem.set_uncached(uncached);
            let ctx = format!("{kind:?}, uncached {uncached}");
            let opts = ReadOptions::default();
            let batch_error = db.multi_get(&opts, &all).expect_err("the damaged value fails the batch");
            assert!(batch_error.is_corruption(), "{ctx}: {batch_error}");
            check_batch(&db, &opts, &all, &ctx);
            let reversed: Vec<Vec<u8>> = all.iter().rev().cloned().collect();
            check_batch(&db, &opts, &reversed, &format!("{ctx}, reversed"));
            // Alone and beside its neighbours (which a coalesced read covers together).
            check_batch(&db, &opts, &[damaged[0].clone()], &format!("{ctx}, alone"));
            let healthy: Vec<Vec<u8>> = all.iter().filter(|k| *k != damaged[0]).cloned().collect();
            let values = db.multi_get(&opts, &healthy)?;
            assert!(values.iter().all(Option::is_some), "{ctx}: the other values still read");
        }
    }
    Ok(())
}

#[test]
fn a_future_polled_after_completion_gives_an_error_not_a_panic() -> Result<()> {
    let opened = open_on(Storage::Uncached, small_options(IndexKind::Lsm, 0))?;
    opened.db.put("k", "v")?;
    let mut future = pin!(opened.db.multi_get_async(&ReadOptions::default(), &["k"]));
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let first = loop {
        if let Poll::Ready(result) = future.as_mut().poll(&mut cx) {
            break result;
        }
        thread::park();
    };
    assert_eq!(first?, vec![Some(Bytes::from("v"))]);
    let again = future.as_mut().poll(&mut cx);
    assert!(matches!(again, Poll::Ready(Err(Error::InvalidArgument(_)))), "{again:?}");
    Ok(())
}

/// Batches running while GC relocates their values and releases segments: every batch sees the
/// stable keys' values, whichever segment they have moved to.
fn batches_under_gc(kind: IndexKind, storage: Storage) -> Result<()> {
    let ctx = format!("{kind:?}, {storage:?}");
    let opts = Options { background_gc: false, ..small_options(kind, 0) };
    let opened = open_on(storage, opts)?;
    let db = &opened.db;
    let stable: Vec<Vec<u8>> = (0..100).map(key).collect();
    for (i, k) in stable.iter().enumerate() {
        db.put(k, value_for(i as u64, 900))?;
    }
    let expected: Vec<Option<Bytes>> = (0..100).map(|i| Some(Bytes::from(value_for(i, 900)))).collect();
    let stop = AtomicBool::new(false);
    thread::scope(|scope| -> Result<()> {
        let churn = scope.spawn(|| -> Result<()> {
            for round in 0..12u64 {
                // Garbage beside the stable values, so GC relocates them.
                for i in 0..150 {
                    db.put(key(1000 + i), value_for(round * 1000 + i, 900))?;
                }
                db.run_gc()?;
            }
            stop.store(true, Ordering::Release);
            Ok(())
        });
        let mut rng = SmallRng::seed_from_u64(7);
        let mut batches = 0;
        while !stop.load(Ordering::Acquire) || batches < 10 {
            let start = rng.gen_range(0..90);
            let keys = &stable[start..];
            let got = if batches % 2 == 0 {
                db.multi_get(&ReadOptions::default(), keys)?
            } else {
                block_on(db.multi_get_async(&ReadOptions::default(), keys))?
            };
            assert_eq!(got, expected[start..], "{ctx}: batch {batches}");
            batches += 1;
        }
        churn.join().expect("the churn thread")
    })?;
    // Every release may have waited for a batch in flight; with the readers gone, one more run
    // does what they deferred.
    db.run_gc()?;
    assert!(db.stats().gc_segments_released > 0, "{ctx}: GC released nothing");
    Ok(())
}

#[test]
fn gc_under_running_batches_changes_no_answer() -> Result<()> {
    for kind in index_kinds() {
        for storage in [Storage::Os, Storage::Uncached] {
            batches_under_gc(kind, storage)?;
        }
    }
    Ok(())
}
