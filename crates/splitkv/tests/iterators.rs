//! Cursor and range iteration: both directions, seeks, bounds, snapshots, data spread over
//! memtable, L0 and deeper levels (for the LSM index), under every index kind and value threshold.

mod common;

use common::{dump, key, matrix, value_for, Case};
use splitkv::{Db, ReadOptions, Result};

fn populated(dir: &std::path::Path, case: Case) -> Result<Db> {
    let db = Db::open(dir, case.options())?;
    for i in (0..600).step_by(2) {
        db.put(key(i), value_for(i, 900))?;
    }
    db.flush()?;
    db.compact_range(None, None)?;
    for i in (1..600).step_by(4) {
        db.put(key(i), value_for(i, 1500))?;
    }
    db.flush()?;
    for i in (0..600).step_by(10) {
        db.delete(key(i))?;
    }
    db.put(key(1), b"latest")?;
    Ok(db)
}

fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..600u64 {
        if i == 1 {
            out.push((key(i), b"latest".to_vec()));
        } else if i % 2 == 0 && i % 10 != 0 {
            out.push((key(i), value_for(i, 900)));
        } else if i % 4 == 1 {
            out.push((key(i), value_for(i, 1500)));
        }
    }
    out
}

#[test]
fn cursor_walks_forward_and_backward() -> Result<()> {
    for case in matrix() {
        let dir = tempfile::tempdir()?;
        let db = populated(dir.path(), case)?;
        let want = expected();
        assert_eq!(dump(&db), want, "{case}");

        let mut it = db.iter(ReadOptions::default())?;
        it.seek_to_last()?;
        let mut backward = Vec::new();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev()?;
        }
        backward.reverse();
        assert_eq!(backward, want, "{case}");

        // Seek lands on the first key >= target, and direction switches work mid-stream.
        it.seek(key(19))?;
        assert_eq!(it.key(), key(21), "{case}");
        it.prev()?;
        assert_eq!(it.key(), key(18), "{case}");
        it.next()?;
        assert_eq!(it.key(), key(21), "{case}");
        it.seek(b"zzz")?;
        assert!(!it.valid(), "{case}");
    }
    Ok(())
}

#[test]
fn bounds_and_ranges_limit_the_view() -> Result<()> {
    for case in matrix() {
        let dir = tempfile::tempdir()?;
        let db = populated(dir.path(), case)?;
        let want: Vec<_> = expected().into_iter().filter(|(k, _)| k >= &key(100) && k < &key(200)).collect();
        let got: Vec<_> =
            db.range(key(100)..key(200))?.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_>>()?;
        assert_eq!(got, want, "{case}");

        let inclusive: Vec<_> =
            db.range(key(102)..=key(106))?.map(|r| r.map(|(k, _)| k.to_vec())).collect::<Result<_>>()?;
        assert_eq!(inclusive, vec![key(102), key(104), key(105), key(106)], "{case}");

        let opts = ReadOptions { lower_bound: Some(key(100)), upper_bound: Some(key(200)), ..ReadOptions::default() };
        let mut it = db.iter(opts)?;
        it.seek_to_last()?;
        assert_eq!(it.key(), want.last().unwrap().0.as_slice(), "{case}");
        it.seek_to_first()?;
        assert_eq!(it.key(), want[0].0.as_slice(), "{case}");
        it.prev()?;
        assert!(!it.valid(), "{case}: moved below the lower bound");
    }
    Ok(())
}

#[test]
fn iterators_read_their_snapshot_despite_later_writes() -> Result<()> {
    for case in matrix() {
        let dir = tempfile::tempdir()?;
        let db = populated(dir.path(), case)?;
        let before = dump(&db);
        let snap = db.snapshot();
        let mut it = db.iter(ReadOptions::default())?;
        for i in 0..600 {
            db.put(key(i), b"overwritten")?;
        }
        db.flush()?;
        db.compact_range(None, None)?;
        it.seek_to_first()?;
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        assert_eq!(seen, before, "{case}: open iterator saw later writes");
        let at_snap = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
        let snap_view: Vec<_> = db
            .range_opt::<&[u8], _>(at_snap, ..)?
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_>>()?;
        assert_eq!(snap_view, before, "{case}");
        assert_eq!(dump(&db).len(), 600, "{case}");
    }
    Ok(())
}
