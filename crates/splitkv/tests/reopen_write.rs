//! A write right after reopening a database whose values are all separated, with tiny
//! memtables and segments (found by the Python package's reopen test).

mod common;

use common::{key, small_options, value_for};
use splitkv::{Db, IndexKind, ReadOptions, Result};

fn count(db: &Db) -> Result<usize> {
    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next()?;
    }
    Ok(n)
}

#[test]
fn writes_after_reopen_succeed() -> Result<()> {
    let rounds: usize = std::env::var("SPLITKV_REOPEN_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    for round in 0..rounds {
        let dir = tempfile::tempdir()?;
        let opts = small_options(IndexKind::Lsm, 0);
        {
            let db = Db::open(dir.path(), opts.clone())?;
            for i in 0..2000u64 {
                db.put(key(i), value_for(i, 8 * (i as usize % 30)))?;
            }
            assert_eq!(count(&db)?, 2000);
            db.delete(key(7))?;
            db.close()?;
        }
        let db = Db::open(dir.path(), opts)?;
        assert_eq!(count(&db)?, 1999);
        db.put(b"after", b"reopen").unwrap_or_else(|e| {
            let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            panic!("round {round}: {e}; files {names:?}")
        });
    }
    Ok(())
}
