//! RocksDB-style properties and statistics on a known database: key estimates, level summary,
//! snapshots, key-range sizes (`Db::approximate_size` and its property form) and the latency
//! histograms of `stats()`.

mod common;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{index_kinds, small_options, value_for};
use splitkv::fs::MemFileSystem;
use splitkv::{Db, IndexKind, Options, ReadOptions, Result};

fn open(kind: IndexKind) -> Result<Db> {
    let options = Options { fs: Arc::new(MemFileSystem::new()), background_gc: false, ..small_options(kind, 0) };
    Db::open("/db", options)
}

fn key(i: u64) -> String {
    format!("key{i:05}")
}

/// 1000 keys with 500-byte values (all in the value log), flushed and compacted.
fn load(db: &Db) -> Result<()> {
    for i in 0..1000 {
        db.put(key(i), value_for(i, 500))?;
    }
    db.compact_range(None, None)
}

fn number(db: &Db, name: &str) -> u64 {
    let text = db.property(name).unwrap_or_default();
    text.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("{name} = {text:?}"))
}

#[test]
fn key_estimates_and_snapshot_properties() -> Result<()> {
    for kind in index_kinds() {
        let db = open(kind)?;
        load(&db)?;
        assert_eq!(number(&db, "splitkv.estimate-num-keys"), 1000, "{kind:?}");
        assert_eq!(number(&db, "splitkv.num-snapshots"), 0);
        assert_eq!(number(&db, "splitkv.oldest-snapshot-time"), 0, "RocksDB's 0 without snapshots");
        let before = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let first = db.snapshot();
        let second = db.snapshot();
        let cursor = db.iter(ReadOptions::default())?;
        assert_eq!(number(&db, "splitkv.num-snapshots"), 3, "{kind:?}: two snapshots and an iterator's");
        let oldest = number(&db, "splitkv.oldest-snapshot-time");
        let after = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        assert!((before..=after).contains(&oldest), "{oldest} not in {before}..={after}");
        drop((first, second, cursor));
        assert_eq!(number(&db, "splitkv.num-snapshots"), 0);
    }
    Ok(())
}

#[test]
fn levelstats_lists_every_level() -> Result<()> {
    let db = open(IndexKind::Lsm)?;
    load(&db)?;
    let text = db.property("splitkv.levelstats").unwrap_or_default();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("Level Files Size(MB)"));
    assert!(lines.next().is_some_and(|l| l.starts_with("----")));
    let rows: Vec<Vec<String>> = lines.map(|l| l.split_whitespace().map(str::to_string).collect()).collect();
    assert_eq!(rows.len(), db.options().num_levels, "{text}");
    for (level, row) in rows.iter().enumerate() {
        assert_eq!(row[0], level.to_string());
        assert_eq!(Some(row[1].clone()), db.property(&format!("splitkv.num-files-at-level{level}")), "{text}");
    }
    // The hash index has no levels: the table's heading alone.
    let hash = open(common::HASH)?;
    assert_eq!(hash.property("splitkv.levelstats").map(|t| t.lines().count()), Some(2));
    Ok(())
}

#[test]
fn approximate_sizes_follow_the_data_in_a_range() -> Result<()> {
    for kind in index_kinds() {
        let db = open(kind)?;
        load(&db)?;
        let whole = db.approximate_size::<&[u8], _>(..)?;
        // Every value is in the log: 1000 records of 500 bytes plus headers and keys.
        assert!((500_000..=600_000).contains(&whole.value_log_bytes), "{kind:?}: {whole:?}");
        assert!(whole.index_bytes > 0 && whole.index_bytes < 100_000, "{kind:?}: {whole:?}");
        let half = db.approximate_size(key(0)..key(500))?;
        let ratio = half.total() as f64 / whole.total() as f64;
        assert!(
            (0.35..=0.65).contains(&ratio),
            "{kind:?}: half the keys, {ratio:.2} of the bytes: {half:?} of {whole:?}"
        );
        let tenth = db.approximate_size(key(300)..key(400))?;
        let ratio = tenth.total() as f64 / whole.total() as f64;
        assert!((0.0..=0.3).contains(&ratio), "{kind:?}: a tenth of the keys, {ratio:.2} of the bytes");
        let none = db.approximate_size("zzz".as_bytes().."zzzz".as_bytes())?;
        assert!(none.total() * 50 < whole.total(), "{kind:?}: an empty range is near 0: {none:?}");
        // The property form: hex bounds, first word the total.
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let spec = format!("splitkv.approximate-sizes:{}:{}", hex(&key(0)), hex(&key(500)));
        assert_eq!(number(&db, &spec), half.total(), "{kind:?}");
        assert_eq!(number(&db, "splitkv.approximate-sizes"), whole.total());
        assert_eq!(db.property("splitkv.approximate-sizes:zz:"), None, "malformed hex");
        // Writes not yet flushed count as memtable bytes (LSM) or through the index (hash).
        for i in 0..50 {
            db.put(format!("new{i:03}"), value_for(i, 100))?;
        }
        let fresh = db.approximate_size("new".as_bytes().."nex".as_bytes())?;
        match kind {
            IndexKind::Lsm => assert!(fresh.memtable_bytes >= 50 * 8, "{fresh:?}"),
            IndexKind::Hash { .. } => assert!(fresh.index_bytes >= 50 * 6, "{fresh:?}"),
        }
        assert!(fresh.value_log_bytes >= 50 * 100, "{kind:?}: {fresh:?}");
    }
    Ok(())
}

#[test]
fn stats_count_and_time_gets_puts_writes_and_iterator_steps() -> Result<()> {
    for kind in index_kinds() {
        let db = open(kind)?;
        for i in 0..100 {
            db.put(key(i), "v")?;
        }
        db.delete(key(0))?;
        for i in 0..40 {
            db.get(key(i))?;
        }
        let mut cursor = db.iter(ReadOptions::default())?;
        cursor.seek_to_first()?;
        let mut steps = 0;
        while cursor.valid() {
            cursor.next()?;
            steps += 1;
        }
        drop(cursor);
        let stats = db.stats();
        assert_eq!(stats.iter_nexts, steps, "{kind:?}: every step counted once the cursor is gone");
        let latency = stats.latency;
        assert_eq!(latency.put.count(), 100, "{kind:?}");
        assert_eq!(latency.write.count(), 101, "{kind:?}: puts and the delete");
        assert_eq!(latency.get.count(), 40, "{kind:?}");
        assert_eq!(latency.iter_next.count(), steps.div_ceil(32), "{kind:?}: the first step and every 32nd");
        for h in [&latency.put, &latency.write, &latency.get, &latency.iter_next] {
            assert!(h.p50() <= h.p99() && h.p99() <= h.p999() && h.p999() <= h.max_nanos(), "{h:?}");
            assert!(h.max_nanos() > 0);
        }
        let text = db.stats().to_string();
        assert!(text.contains("Latency (us)") && text.contains("  get "), "{text}");
    }
    Ok(())
}

#[test]
fn latency_histograms_can_be_turned_off() -> Result<()> {
    let options =
        Options { fs: Arc::new(MemFileSystem::new()), latency_histograms: false, ..small_options(IndexKind::Lsm, 0) };
    let db = Db::open("/db", options)?;
    for i in 0..100 {
        db.put(key(i), "v")?;
        db.get(key(i))?;
    }
    let mut cursor = db.iter(ReadOptions::default())?;
    cursor.seek_to_first()?;
    while cursor.valid() {
        cursor.next()?;
    }
    drop(cursor);
    let stats = db.stats();
    let l = &stats.latency;
    assert_eq!((l.get.count(), l.put.count(), l.write.count(), l.iter_next.count()), (0, 0, 0, 0));
    assert_eq!((stats.gets, stats.iter_nexts), (100, 100), "the counters still count");
    assert!(!stats.to_string().contains("Latency"));
    Ok(())
}
