//! Scenarios particular to the hash mode's request shards (`IndexKind::Hash { shards: 2.. }`):
//! the completion handles of `submit_write` / `submit_get`. Concurrent writers, batches that
//! span shards and snapshots taken while groups commit are in `concurrent_writes.rs`, for the
//! sharded kind and the LSM; the shared scenarios and the model test run the sharded kind too,
//! through `common::index_kinds()` and `common::matrix()`.

mod common;

use common::{key, small_options, value_for, CrashEnv, HASH_SHARDED};
use splitkv::{Db, Options, ReadOptions, Result, WriteBatch, WriteOptions};

fn sharded_options() -> Options {
    Options { background_gc: false, ..small_options(HASH_SHARDED, 1024) }
}

#[test]
fn submitted_requests_complete_through_their_handles() -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(sharded_options()))?;
    let handles: Vec<_> = (0..300u64)
        .map(|i| {
            let mut batch = WriteBatch::new();
            batch.put(key(i), value_for(i, 64));
            db.submit_write(&WriteOptions::default(), batch)
        })
        .collect();
    for h in handles {
        h.wait()?;
    }
    let reads: Vec<_> = (0..300u64).map(|i| db.submit_get(&ReadOptions::default(), key(i))).collect();
    for (i, h) in reads.into_iter().enumerate() {
        assert_eq!(h.wait()?.as_deref(), Some(value_for(i as u64, 64).as_slice()));
    }
    // Without shards the handles come back already complete.
    drop(db);
    let db = Db::open("/db2", env.options(Options { background_gc: false, ..small_options(common::HASH, 1024) }))?;
    let h = db.submit_write(&WriteOptions::default(), {
        let mut b = WriteBatch::new();
        b.put("k", "v");
        b
    });
    assert!(h.is_done());
    h.wait()?;
    assert_eq!(db.submit_get(&ReadOptions::default(), "k").wait()?.as_deref(), Some(&b"v"[..]));
    Ok(())
}

#[test]
fn an_answered_sharded_read_holds_no_snapshot() -> Result<()> {
    // A shard worker reads at a snapshot it holds for the caller. It used to release it only
    // after answering, so a caller that dropped its own snapshot right after the answer could
    // still find a reader registered (and a GC run it started then deferred its work).
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(sharded_options()))?;
    db.put(key(1), value_for(1, 64))?;
    for round in 0..2000u64 {
        let opts = ReadOptions { snapshot: (round % 2 == 0).then(|| db.snapshot()), ..ReadOptions::default() };
        assert_eq!(db.get_opt(&opts, key(1))?.as_deref(), Some(value_for(1, 64).as_slice()));
        drop(opts);
        assert_eq!(db.property("splitkv.num-snapshots").as_deref(), Some("0"), "round {round}");
    }
    Ok(())
}
