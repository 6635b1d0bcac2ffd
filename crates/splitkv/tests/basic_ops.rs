//! Point operations, batches, flush, compaction and reopen, under every value threshold.

mod common;

use common::{dump, key, small_options, value_for, THRESHOLDS};
use splitkv::{Db, Options, ReadOptions, Result, WriteBatch, WriteOptions};

fn open(dir: &std::path::Path, threshold: usize) -> Result<Db> {
    Db::open(dir, small_options(threshold))
}

#[test]
fn put_get_delete_round_trip() -> Result<()> {
    for t in THRESHOLDS {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path(), t)?;
        db.put(b"a", b"1")?;
        db.put(b"b", vec![7u8; 5000])?;
        db.put(b"empty", b"")?;
        assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]), "threshold {t}");
        assert_eq!(db.get(b"b")?.as_deref(), Some(&vec![7u8; 5000][..]));
        assert_eq!(db.get(b"empty")?.as_deref(), Some(&b""[..]));
        assert_eq!(db.get(b"missing")?, None);
        db.put(b"a", b"2")?;
        assert_eq!(db.get(b"a")?.as_deref(), Some(&b"2"[..]));
        db.delete(b"a")?;
        assert_eq!(db.get(b"a")?, None);
        db.delete(b"never-existed")?;
    }
    Ok(())
}

#[test]
fn batch_applies_in_order() -> Result<()> {
    for t in THRESHOLDS {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path(), t)?;
        let mut batch = WriteBatch::new();
        batch.put("k", "first").put("k", "second").put("gone", "x").delete("gone");
        db.write(&WriteOptions { sync: true }, batch)?;
        assert_eq!(db.get("k")?.as_deref(), Some(&b"second"[..]));
        assert_eq!(db.get("gone")?, None);
    }
    Ok(())
}

#[test]
fn data_survives_flush_compaction_and_reopen() -> Result<()> {
    for t in THRESHOLDS {
        let dir = tempfile::tempdir()?;
        let n = 3000u64;
        {
            let db = open(dir.path(), t)?;
            for i in 0..n {
                db.put(key(i), value_for(i, 100 + (i as usize % 7) * 300))?;
            }
            for i in (0..n).step_by(3) {
                db.delete(key(i))?;
            }
            db.flush()?;
            assert!(
                db.stats().levels.iter().map(|l| l.files).sum::<usize>() > 0,
                "threshold {t}: no table after flush"
            );
            db.compact_range(None, None)?;
            let stats = db.stats();
            assert_eq!(stats.levels[0].files, 0, "threshold {t}: L0 not empty after full compaction");
            db.close()?;
        }
        let db = open(dir.path(), t)?;
        for i in 0..n {
            let expected = (i % 3 != 0).then(|| value_for(i, 100 + (i as usize % 7) * 300));
            assert_eq!(db.get(key(i))?.map(|v| v.to_vec()), expected, "threshold {t} key {i}");
        }
        assert_eq!(dump(&db).len() as u64, n - n.div_ceil(3));
    }
    Ok(())
}

#[test]
fn unflushed_writes_are_replayed_from_the_value_log() -> Result<()> {
    for t in THRESHOLDS {
        let dir = tempfile::tempdir()?;
        {
            let db = open(dir.path(), t)?;
            for i in 0..50 {
                db.put(key(i), value_for(i, 2000))?;
            }
            db.delete(key(7))?;
        }
        let db = open(dir.path(), t)?;
        assert_eq!(db.get(key(3))?.map(|v| v.to_vec()), Some(value_for(3, 2000)), "threshold {t}");
        assert_eq!(db.get(key(7))?, None);
        // Sequence numbers continue after recovery: a new write must shadow replayed ones.
        db.put(key(3), b"new")?;
        drop(db);
        let db = open(dir.path(), t)?;
        assert_eq!(db.get(key(3))?.as_deref(), Some(&b"new"[..]));
    }
    Ok(())
}

#[test]
fn snapshots_see_the_past() -> Result<()> {
    for t in THRESHOLDS {
        let dir = tempfile::tempdir()?;
        let db = open(dir.path(), t)?;
        db.put("k", vec![1u8; 2000])?;
        let snap = db.snapshot();
        db.put("k", vec![2u8; 2000])?;
        db.delete("other")?;
        db.flush()?;
        db.compact_range(None, None)?;
        let at_snap = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
        assert_eq!(db.get_opt(&at_snap, "k")?.as_deref(), Some(&vec![1u8; 2000][..]), "threshold {t}");
        assert_eq!(db.get("k")?.as_deref(), Some(&vec![2u8; 2000][..]));
        let got = db.multi_get(&at_snap, &["k", "missing"])?;
        assert_eq!(got[0].as_deref(), Some(&vec![1u8; 2000][..]));
        assert_eq!(got[1], None);
    }
    Ok(())
}

#[test]
fn open_options_are_honoured() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("nope");
    let no_create = Options { create_if_missing: false, ..Options::default() };
    assert!(Db::open(&missing, no_create).is_err());
    let db = Db::open(&missing, Options::default())?;
    // A second handle on the same directory is refused by the lock.
    assert!(matches!(Db::open(&missing, Options::default()), Err(splitkv::Error::Locked(_))));
    drop(db);
    let exclusive = Options { error_if_exists: true, ..Options::default() };
    assert!(Db::open(&missing, exclusive).is_err());
    Db::destroy(&missing, &Options::default())?;
    assert!(!missing.exists());
    Ok(())
}

#[test]
fn properties_and_stats_report_state() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options { write_buffer_size: 4 << 20, ..small_options(0) })?;
    for i in 0..500 {
        db.put(key(i), value_for(i, 1000))?;
    }
    db.flush()?;
    let stats = db.stats();
    assert!(stats.user_bytes_written >= 500 * 1000);
    assert!(stats.vlog_bytes_written >= stats.user_bytes_written);
    assert!(stats.write_amplification() >= 1.0);
    assert_eq!(db.property("splitkv.num-files-at-level0").as_deref(), Some("1"));
    assert_eq!(db.property("splitkv.last-sequence").as_deref(), Some("500"));
    assert!(db.property("splitkv.stats").unwrap().contains("Value log"));
    assert_eq!(db.property("splitkv.no-such-property"), None);
    Ok(())
}
