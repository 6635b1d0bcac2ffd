//! `Stats::memory`: each component the engine holds memory for is reported next to the limit it
//! is kept under, and the read-ahead gauge follows the cursors' windows (up while a cursor reads
//! ahead, back to zero once it has left its windows).

mod common;

use std::sync::Arc;

use common::{key, small_options, value_for};
use splitkv::fs::MemFileSystem;
use splitkv::{Db, IndexKind, Options, ReadOptions, Result};

#[test]
fn memory_is_reported_by_component_under_its_limit() -> Result<()> {
    let mem = MemFileSystem::new();
    // Every value looks uncached, so read-ahead reads them on the prefetch pool.
    mem.set_uncached(true);
    let opts = Options { fs: Arc::new(mem.clone()), max_open_files: 50, ..small_options(IndexKind::Lsm, 0) };
    let (write_buffer_size, block_cache_capacity) = (opts.write_buffer_size as u64, opts.block_cache_capacity as u64);
    let db = Db::open("/db", opts)?;
    for i in 0..2000 {
        db.put(key(i), value_for(i, 200))?;
    }
    db.flush()?;
    for i in (0..2000).step_by(7) {
        assert!(db.get(key(i))?.is_some());
    }
    let memory = db.stats().memory;
    assert_eq!(memory.memtable_limit, 2 * write_buffer_size);
    assert!(memory.memtable_bytes <= memory.memtable_limit, "{memory:?}");
    assert_eq!(memory.block_cache_capacity, block_cache_capacity);
    assert!(memory.block_cache_bytes > 0 && memory.block_cache_bytes <= block_cache_capacity, "{memory:?}");
    assert_eq!(memory.table_cache_capacity, 50);
    assert!(memory.open_tables > 0 && memory.open_tables <= 50, "{memory:?}");
    assert!(memory.table_index_filter_bytes > 0, "open tables pin their index and filter: {memory:?}");
    assert_eq!(memory.read_ahead_bytes, 0, "no cursor");
    assert!(memory.prefetch_threads > 0 && memory.read_ahead_limit_per_cursor > 0);

    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_first()?;
    for _ in 0..100 {
        it.next()?;
    }
    assert!(it.valid());
    let reading = db.stats().memory.read_ahead_bytes;
    assert!(reading > 0, "a cursor reading ahead holds its windows");
    assert!(reading <= memory.read_ahead_limit_per_cursor + 2 * 1024 * 64, "{reading}");
    while it.valid() {
        it.next()?;
    }
    assert_eq!(db.stats().memory.read_ahead_bytes, 0, "windows are released once the cursor leaves them");
    assert!(db.stats().to_string().contains("Memory: memtables"));
    Ok(())
}
