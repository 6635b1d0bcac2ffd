//! Relocation through compaction (`Options::gc_in_compaction`): compactions move the values
//! they keep out of segments past the garbage ratio, every key reads back the same before and
//! after a reopen (replay skips the moved records), GC releases the emptied segments without
//! reading them, and a reader holding the tree from before a move keeps its values until it
//! is dropped.

mod common;

use common::{key, small_options, value_for};
use splitkv::{Db, IndexKind, Options, ReadOptions, Result};

fn options() -> Options {
    Options { value_threshold: 256, background_gc: false, gc_in_compaction: true, ..small_options(IndexKind::Lsm, 256) }
}

const KEYS: u64 = 300;

/// Writes every key, then overwrites the even ones, and compacts: the first segments are then
/// about half garbage, known from the compaction's drops. Returns each key's value seed.
fn half_overwritten(db: &Db) -> Result<Vec<u64>> {
    let mut last = vec![0; KEYS as usize];
    for k in 0..KEYS {
        db.put(key(k), value_for(k, 700))?;
        last[k as usize] = k;
    }
    for k in (0..KEYS).step_by(2) {
        db.put(key(k), value_for(1000 + k, 700))?;
        last[k as usize] = 1000 + k;
    }
    db.compact_range(None, None)?;
    Ok(last)
}

/// A few new keys spread over the range, so the next full compaction merges every table.
fn touch_the_range(db: &Db) -> Result<()> {
    for k in (0..KEYS).step_by(50) {
        db.put(format!("{}+", String::from_utf8_lossy(&key(k))).as_bytes(), b"small")?;
    }
    Ok(())
}

/// A database after [`half_overwritten`] and [`touch_the_range`], ready for a compaction that
/// moves values; with each key's value seed and the id of the log's first segment.
fn ready_to_move(dir: &tempfile::TempDir) -> Result<(Db, Vec<u64>, u64)> {
    let db = Db::open(dir.path(), options())?;
    let last = half_overwritten(&db)?;
    let first_segment = db.stats().segments.first().map(|s| s.id).expect("segments");
    touch_the_range(&db)?;
    Ok((db, last, first_segment))
}

fn check(db: &Db, last: &[u64], ctx: &str) -> Result<()> {
    for (k, seed) in last.iter().enumerate() {
        assert_eq!(db.get(key(k as u64))?.map(|v| v.to_vec()), Some(value_for(*seed, 700)), "{ctx}: key {k}");
    }
    Ok(())
}

#[test]
fn compactions_move_kept_values_and_gc_releases_the_emptied_segments_unread() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, last, first_segment) = ready_to_move(&dir)?;
    db.compact_range(None, None)?;
    let stats = db.stats();
    assert!(stats.compaction_values_moved > 0, "nothing moved: {stats:?}");
    check(&db, &last, "after the moving compaction")?;
    // The segments the values left are all garbage now; GC reads only the others.
    let segments = db.stats().segments;
    let emptied = |s: &&splitkv::SegmentStatsReport| s.garbage_bytes + 64 >= s.bytes;
    assert!(segments.iter().filter(emptied).any(|s| s.id == first_segment), "{segments:?}");
    let others: u64 = segments.iter().filter(|s| !emptied(s)).map(|s| s.bytes).sum();
    let outcome = db.run_gc()?;
    assert!(
        outcome.segments_released.iter().any(|s| s.0 == first_segment),
        "the emptied first segment was not released: {outcome:?}"
    );
    assert!(outcome.bytes_read <= others, "GC read the emptied segments: {outcome:?}, {segments:?}");
    check(&db, &last, "after GC")?;
    drop(db);

    let db = Db::open(dir.path(), options())?;
    check(&db, &last, "after a reopen")?;
    assert_eq!(db.stats().compaction_values_moved, 0, "replay applied moved records as writes");
    Ok(())
}

#[test]
fn a_cursor_from_before_a_move_keeps_its_values_until_dropped() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, last, first_segment) = ready_to_move(&dir)?;
    // Holds the tree from before the move: its pointers lead into the first segments.
    let mut it = db.iter(ReadOptions::default())?;
    db.compact_range(None, None)?;
    assert!(db.stats().compaction_values_moved > 0);

    let held = db.run_gc()?;
    assert!(
        !held.segments_released.iter().any(|s| s.0 == first_segment),
        "released a segment an open cursor's tree points into: {held:?}"
    );
    it.seek_to_first()?;
    let mut seen = 0;
    while it.valid() {
        if it.value().len() == 700 {
            let k: u64 = std::str::from_utf8(&it.key()[3..]).expect("utf-8").parse().expect("key number");
            assert_eq!(it.value(), value_for(last[k as usize], 700).as_slice(), "cursor: key {k}");
            seen += 1;
        }
        it.next()?;
    }
    assert_eq!(seen, KEYS, "cursor entries");
    drop(it);

    let released = db.run_gc()?;
    assert!(
        released.segments_released.iter().any(|s| s.0 == first_segment),
        "the first segment stayed once the cursor was gone: {released:?}"
    );
    check(&db, &last, "after the release")?;
    Ok(())
}

#[test]
fn a_moved_value_is_moved_again_and_survives_gc_of_its_new_segment() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, mut last, _) = ready_to_move(&dir)?;
    db.compact_range(None, None)?;
    let moved_once = db.stats().compaction_values_moved;
    // Overwrite most keys: the segments the first moves went to become mostly garbage too.
    for k in (0..KEYS).filter(|k| k % 5 != 0) {
        db.put(key(k), value_for(5000 + k, 700))?;
        last[k as usize] = 5000 + k;
    }
    db.compact_range(None, None)?;
    touch_the_range(&db)?;
    db.compact_range(None, None)?;
    assert!(db.stats().compaction_values_moved > moved_once, "nothing moved the second time");
    check(&db, &last, "after moving twice")?;
    db.run_gc()?;
    db.run_gc()?;
    check(&db, &last, "after GC")?;
    drop(db);
    let db = Db::open(dir.path(), options())?;
    check(&db, &last, "after a reopen")?;
    Ok(())
}
