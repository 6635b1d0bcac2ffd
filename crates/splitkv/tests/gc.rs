//! Value-log garbage collection: space comes back, values stay right, concurrent writers win,
//! open snapshots and iterators keep their view, and a crash at any point of a GC run loses
//! nothing. Every scenario runs under every index kind: GC reaches the index only through the
//! engine's GC host, so none of this is specific to the LSM-tree. Under the LSM index GC cleans a
//! victim in place by default (`gc_compact_in_place`); the scenarios where that changes what
//! happens (concurrent writers, readers held across a run, crashes) also run with copying.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{dump, index_kinds, key, small_options, value_for, CrashEnv};
use splitkv::fs::{Fault, FaultKind};
use splitkv::{Db, GcPolicyKind, GcRewriteOrder, IndexKind, Options, ReadOptions, Result, WriteOptions};

fn gc_options(kind: IndexKind, policy: GcPolicyKind) -> Options {
    Options { value_threshold: 256, background_gc: false, gc_policy: policy, ..small_options(kind, 256) }
}

/// [`gc_options`] under every way GC cleans a victim for index `kind`: copying through the write
/// path, and for the LSM index also compacting in place (the default).
fn gc_option_sets(kind: IndexKind, policy: GcPolicyKind) -> Vec<Options> {
    let copying = Options { gc_compact_in_place: false, ..gc_options(kind, policy) };
    let mut sets = vec![copying];
    if kind == IndexKind::Lsm {
        sets.push(Options { gc_compact_in_place: true, ..gc_options(kind, policy) });
    }
    sets
}

/// Writes `rounds` versions of `keys` keys; returns the value seed of each key's last version.
fn overwrite(db: &Db, keys: u64, rounds: u64) -> Result<Vec<u64>> {
    overwrite_sized(db, keys, rounds, |_| 700)
}

/// Like [`overwrite`], with the value of seed `s` `len(s)` bytes long.
fn overwrite_sized(db: &Db, keys: u64, rounds: u64, len: impl Fn(u64) -> usize) -> Result<Vec<u64>> {
    let mut last = vec![0; keys as usize];
    for round in 0..rounds {
        for k in 0..keys {
            let seed = round * keys + k;
            db.put(key(k), value_for(seed, len(seed)))?;
            last[k as usize] = seed;
        }
    }
    Ok(last)
}

/// Writes `rounds` versions of `keys` keys with 100-byte values (inline under `gc_options`).
fn overwrite_small(db: &Db, keys: u64, rounds: u64) -> Result<Vec<u64>> {
    overwrite_sized(db, keys, rounds, |_| 100)
}

/// Checks that key `k` holds the `len`-byte value of seed `last[k]`.
fn check_sized(db: &Db, last: &[u64], len: usize, ctx: &str) -> Result<()> {
    for (k, seed) in last.iter().enumerate() {
        assert_eq!(db.get(key(k as u64))?.map(|v| v.to_vec()), Some(value_for(*seed, len)), "{ctx}: key {k}");
    }
    Ok(())
}

fn check(db: &Db, last: &[u64], ctx: &str) -> Result<()> {
    check_sized(db, last, 700, ctx)
}

fn check_small(db: &Db, last: &[u64], ctx: &str) -> Result<()> {
    check_sized(db, last, 100, ctx)
}

#[test]
fn gc_reclaims_space_under_every_policy() -> Result<()> {
    for kind in index_kinds() {
        for policy in [GcPolicyKind::Oldest, GcPolicyKind::Greedy, GcPolicyKind::CostBenefit] {
            let ctx = format!("{kind:?} index, {policy:?}");
            let dir = tempfile::tempdir()?;
            // No moves in compaction: a background compaction that claims the dead segments
            // for its moves when the run starts (as it may, depending on when it runs) leaves
            // the run rightly taking none of them, and this test is about the policies' picks.
            let opts = Options { gc_in_compaction: false, ..gc_options(kind, policy) };
            let db = Db::open(dir.path(), opts.clone())?;
            let last = overwrite(&db, 300, 6)?;
            db.delete(key(0))?;
            let before = db.stats().vlog_bytes();
            let outcome = db.run_gc()?;
            let after = db.stats().vlog_bytes();
            assert!(!outcome.segments_released.is_empty(), "{ctx}: nothing released: {outcome:?}");
            assert!(after * 2 < before, "{ctx}: log only shrank from {before} to {after}");
            assert_eq!(db.get(key(0))?, None, "{ctx}: deleted key resurrected");
            for k in 1..300u64 {
                assert_eq!(db.get(key(k))?.map(|v| v.to_vec()), Some(value_for(last[k as usize], 700)), "{ctx}");
            }
            drop(db);
            let db = Db::open(dir.path(), opts)?;
            assert_eq!(db.get(key(0))?, None, "{ctx} reopen: deleted key resurrected");
            for k in 1..300u64 {
                assert_eq!(db.get(key(k))?.map(|v| v.to_vec()), Some(value_for(last[k as usize], 700)), "{ctx} reopen");
            }
        }
    }
    Ok(())
}

#[test]
fn concurrent_overwrites_always_win_over_relocation() -> Result<()> {
    for kind in index_kinds() {
        for options in gc_option_sets(kind, GcPolicyKind::Greedy) {
            concurrent_overwrites_win(kind, options)?;
        }
    }
    Ok(())
}

fn concurrent_overwrites_win(kind: IndexKind, options: Options) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Arc::new(Db::open(dir.path(), options)?);
    overwrite(&db, 200, 4)?;
    db.flush()?;
    std::thread::scope(|s| -> Result<()> {
        let writer = {
            let db = Arc::clone(&db);
            s.spawn(move || -> Result<()> {
                for round in 0..5u64 {
                    for k in 0..200u64 {
                        db.put(key(k), value_for(1_000_000 + round * 1000 + k, 700))?;
                    }
                }
                Ok(())
            })
        };
        for _ in 0..3 {
            db.run_gc()?;
        }
        writer.join().expect("writer thread")?;
        Ok(())
    })?;
    db.run_gc()?;
    for k in 0..200u64 {
        assert_eq!(
            db.get(key(k))?.map(|v| v.to_vec()),
            Some(value_for(1_000_000 + 4 * 1000 + k, 700)),
            "{kind:?}: key {k}"
        );
    }
    Ok(())
}

#[test]
fn snapshots_and_iterators_survive_gc_until_dropped() -> Result<()> {
    for kind in index_kinds() {
        for options in gc_option_sets(kind, GcPolicyKind::Oldest) {
            snapshots_and_iterators_survive_gc(kind, options)?;
        }
    }
    Ok(())
}

#[test]
fn a_run_whose_log_fails_midway_ends_and_loses_nothing() -> Result<()> {
    // GC scans a victim on one thread while another relocates what it finds, a few chunks of
    // 256 KiB apart. The victim here holds far more live data than that, so a failure on either
    // side finds the other busy (the scan waiting to send, or relocation waiting for records):
    // the run must end, not wait forever, and every value must stay, before and after a crash.
    for kind in index_kinds() {
        let options = Options { segment_size: 4 << 20, ..gc_options(kind, GcPolicyKind::Greedy) };
        let setup = |env: &CrashEnv| -> Result<(Db, Vec<u64>)> {
            let db = Db::open("/db", env.options(options.clone()))?;
            let mut last = overwrite(&db, 6000, 1)?;
            for k in 0..1000u64 {
                db.put(key(k), value_for(10_000 + k, 700))?;
                last[k as usize] = 10_000 + k;
            }
            db.put_opt(&WriteOptions { sync: true }, b"marker", b"synced")?;
            Ok((db, last))
        };
        let mut failed_runs = 0;
        for point in [0, 1, 2, 3, 5, 8, 13, 40, 100, 300, 700] {
            let ctx = format!("{kind:?} index, log failing after {point} operations");
            let env = CrashEnv::new();
            let (db, last) = setup(&env)?;
            env.fault.inject(Fault::new(FaultKind::Any).on_path(".vlog").after(point).persistent());
            if db.run_gc().is_err() {
                failed_runs += 1;
            }
            env.fault.clear();
            check(&db, &last, &format!("{ctx}, before the crash"))?;
            env.crash(db, Some(point));
            let db = Db::open("/db", env.options(options.clone()))?;
            check(&db, &last, &format!("{ctx}, after the crash"))?;
            db.run_gc().unwrap_or_else(|e| panic!("{ctx}: gc after recovery: {e}"));
            check(&db, &last, &format!("{ctx}, after a clean run"))?;
        }
        assert!(failed_runs > 5, "{kind:?}: only {failed_runs} runs met the failure");
    }
    Ok(())
}

#[test]
fn gc_runs_report_where_their_time_went() -> Result<()> {
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        overwrite(&db, 300, 3)?;
        let outcome = db.run_gc()?;
        assert!(outcome.records_relocated > 0, "{kind:?}: {outcome:?}");
        let (scan, relocate) = (outcome.scan_time, outcome.relocate_time);
        assert!(scan > Duration::ZERO && relocate > Duration::ZERO, "{kind:?}: {outcome:?}");
        // The totals add each run's times, truncated to whole microseconds.
        let stats = db.stats();
        let (runs, scan_micros, relocate_micros) =
            (stats.gc_runs, scan.as_micros() as u64, relocate.as_micros() as u64);
        assert!(
            (scan_micros.saturating_sub(runs)..=scan_micros).contains(&stats.gc_scan_micros),
            "{kind:?}: {stats:?}"
        );
        let relocated = relocate_micros.saturating_sub(runs)..=relocate_micros;
        assert!(relocated.contains(&stats.gc_relocate_micros), "{kind:?}: {stats:?}");
        let idle = db.run_gc()?;
        assert_eq!((idle.scan_time, idle.relocate_time), (Duration::ZERO, Duration::ZERO), "{kind:?}: {idle:?}");
    }
    Ok(())
}

fn snapshots_and_iterators_survive_gc(kind: IndexKind, options: Options) -> Result<()> {
    let in_place = options.gc_compact_in_place && kind == IndexKind::Lsm;
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options)?;
    let first = overwrite(&db, 150, 1)?;
    let snapshot = db.snapshot();
    let mut it = db.iter(ReadOptions::default())?;
    let at_snapshot = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    let last = overwrite(&db, 150, 4)?;
    let outcome = db.run_gc()?;
    assert!(outcome.bytes_read > 0, "{kind:?}: GC found nothing to do");
    assert!(outcome.segments_compacted.is_empty(), "{kind:?}: installed while older readers were open");
    // The old versions are still readable through the snapshot and the iterator.
    for k in 0..150u64 {
        assert_eq!(
            db.get_opt(&at_snapshot, key(k))?.map(|v| v.to_vec()),
            Some(value_for(first[k as usize], 700)),
            "{kind:?}: snapshot key {k}"
        );
    }
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), value_for(first[n], 700).as_slice(), "{kind:?}: iterator entry {n}");
        n += 1;
        it.next()?;
    }
    assert_eq!(n, 150, "{kind:?}: iterator entries");
    let held = db.stats().vlog_bytes();
    drop(it);
    drop(snapshot);
    drop(at_snapshot);
    let later = db.run_gc()?;
    assert!(!later.segments_released.is_empty(), "{kind:?}: segments held by readers were never released");
    assert_eq!(!later.segments_compacted.is_empty(), in_place, "{kind:?}: compacted segments installed");
    assert!(db.stats().vlog_bytes() < held, "{kind:?}: log did not shrink once the readers were gone");
    check(&db, &last, &format!("{kind:?} index, after release"))?;
    Ok(())
}

#[test]
fn hole_punching_frees_space_without_moving_values() -> Result<()> {
    for kind in index_kinds() {
        let env = CrashEnv::new();
        let opts = env.options(Options {
            gc_punch_holes: true,
            gc_space_budget: Some(64 << 20),
            ..gc_options(kind, GcPolicyKind::Greedy)
        });
        let db = Db::open("/db", opts)?;
        let last = overwrite(&db, 300, 5)?;
        let outcome = db.run_gc()?;
        assert!(outcome.bytes_punched > 0, "{kind:?}: nothing punched: {outcome:?}");
        assert_eq!(outcome.records_relocated, 0, "{kind:?}: punching must not copy");
        let stats = db.stats();
        assert!(stats.disk_bytes < stats.sstable_bytes() + stats.vlog_bytes(), "{kind:?}: holes not reflected on disk");
        check(&db, &last, &format!("{kind:?} index, after punching"))?;
    }
    Ok(())
}

/// What the crash-at-every-I/O-point test runs GC on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GcCrashCase {
    /// `run_gc` after a full compaction: copy-GC of segments whose garbage is known.
    Copy,
    /// Background-style steps while the memtable holds newer, partly unflushed versions.
    UnflushedMemtable,
    /// `run_gc` with hole punching, while a snapshot from before the overwrites is open.
    PunchWithSnapshot,
    /// `rewrite_value_log` over every key (LSM only: the hash index refuses it), then the
    /// release of the segments it emptied.
    KeyOrderRewrite,
    /// Background-style steps that rewrite each victim's survivors sorted by key.
    KeyOrderSteps,
    /// `run_gc` over a log of mostly inline values: the segments the index never pointed into
    /// are released unread, the others copied.
    MostlyInline,
    /// A full compaction that moves values out of half-garbage segments
    /// (`gc_in_compaction`, LSM only), then `run_gc`, which releases the emptied segments.
    CompactionMoves,
    /// `run_gc` compacting each victim in place (`gc_compact_in_place`, LSM only), beside
    /// compactions that move values; recovery's second pass compacts compacted segments.
    CompactInPlace,
    /// Background-style steps over a space budget: each compacts a partner segment in place
    /// beside its victim, on a thread of its own (LSM only).
    CompactInPlacePartners,
}

impl GcCrashCase {
    fn options(self, kind: IndexKind) -> Options {
        let punch = matches!(self, GcCrashCase::PunchWithSnapshot);
        let key_order = matches!(self, GcCrashCase::KeyOrderRewrite | GcCrashCase::KeyOrderSteps);
        let in_place = matches!(self, GcCrashCase::CompactInPlace | GcCrashCase::CompactInPlacePartners);
        let base = gc_options(kind, GcPolicyKind::Greedy);
        Options {
            gc_punch_holes: punch,
            gc_rewrite_order: if key_order { GcRewriteOrder::Key } else { GcRewriteOrder::Segment },
            // Small values fill segments more slowly: smaller ones, so that there are several.
            segment_size: if matches!(self, GcCrashCase::MostlyInline) { 16 << 10 } else { base.segment_size },
            gc_in_compaction: matches!(self, GcCrashCase::CompactionMoves | GcCrashCase::CompactInPlace),
            // Every other case copies, so that the copying path stays covered for the LSM index.
            gc_compact_in_place: in_place,
            // About 140 KB live in a log of about 560 KB: every step is over the budget.
            gc_space_budget: if matches!(self, GcCrashCase::CompactInPlacePartners) { Some(256 << 10) } else { None },
            ..base
        }
    }

    /// Length of the value of seed `seed` (see [`overwrite_sized`]): separated (700 bytes),
    /// except in `MostlyInline`, where only a few of the last round's are (seeds from 600 on,
    /// 200 keys a round) and the earlier rounds fill segments of inline values only.
    fn value_len(self, seed: u64) -> usize {
        if matches!(self, GcCrashCase::MostlyInline) && (seed < 600 || !seed.is_multiple_of(64)) {
            100
        } else {
            700
        }
    }
}

#[test]
fn snapshots_and_iterators_keep_their_view_across_hole_punching() -> Result<()> {
    for kind in index_kinds() {
        readers_keep_their_view_across_hole_punching(kind)?;
    }
    Ok(())
}

fn readers_keep_their_view_across_hole_punching(kind: IndexKind) -> Result<()> {
    let env = CrashEnv::new();
    let db = Db::open("/db", env.options(Options { gc_punch_holes: true, ..gc_options(kind, GcPolicyKind::Greedy) }))?;
    let first = overwrite(&db, 200, 1)?;
    let snapshot = db.snapshot();
    let mut it = db.iter(ReadOptions::default())?;
    let last = overwrite(&db, 200, 4)?;
    let held = db.run_gc()?;
    assert_eq!(held.bytes_punched, 0, "{kind:?}: punched while older readers could still read the records");
    let at_snapshot = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
    for k in 0..200u64 {
        assert_eq!(
            db.get_opt(&at_snapshot, key(k))?.map(|v| v.to_vec()),
            Some(value_for(first[k as usize], 700)),
            "{kind:?}: snapshot key {k}"
        );
    }
    it.seek_to_first()?;
    for (n, seed) in first.iter().enumerate() {
        assert!(it.valid(), "{kind:?}: iterator ended at {n}");
        assert_eq!(it.value(), value_for(*seed, 700).as_slice(), "{kind:?}: iterator entry {n}");
        it.next()?;
    }
    drop(it);
    drop(at_snapshot);
    let released = db.run_gc()?;
    assert!(released.bytes_punched > 0, "{kind:?}: nothing punched once the readers were gone: {released:?}");
    assert_eq!(db.stats().gc_bytes_punched, released.bytes_punched, "{kind:?}: each punched byte is counted once");
    check(&db, &last, &format!("{kind:?} index, after punching"))?;
    Ok(())
}

#[test]
fn crash_at_every_io_point_of_gc_loses_nothing() -> Result<()> {
    for kind in index_kinds() {
        for case in [
            GcCrashCase::Copy,
            GcCrashCase::UnflushedMemtable,
            GcCrashCase::PunchWithSnapshot,
            GcCrashCase::KeyOrderRewrite,
            GcCrashCase::KeyOrderSteps,
            GcCrashCase::MostlyInline,
            GcCrashCase::CompactionMoves,
            GcCrashCase::CompactInPlace,
            GcCrashCase::CompactInPlacePartners,
        ] {
            let lsm_only = matches!(
                case,
                GcCrashCase::KeyOrderRewrite
                    | GcCrashCase::CompactionMoves
                    | GcCrashCase::CompactInPlace
                    | GcCrashCase::CompactInPlacePartners
            );
            if lsm_only && kind != IndexKind::Lsm {
                continue;
            }
            crash_at_every_io_point_of_gc(kind, case)?;
        }
    }
    Ok(())
}

fn crash_at_every_io_point_of_gc(kind: IndexKind, case: GcCrashCase) -> Result<()> {
    // Returns the database, each key's expected value seed, and a snapshot to hold.
    let setup = |env: &CrashEnv| -> Result<(Db, Vec<u64>, Option<splitkv::Snapshot>)> {
        let db = Db::open("/db", env.options(case.options(kind)))?;
        let snapshot = matches!(case, GcCrashCase::PunchWithSnapshot).then(|| db.snapshot());
        let mut last = overwrite_sized(&db, 200, 4, |seed| case.value_len(seed))?;
        db.delete(key(7))?;
        db.compact_range(None, None)?;
        if let GcCrashCase::UnflushedMemtable | GcCrashCase::KeyOrderSteps = case {
            for k in 100..150u64 {
                db.put(key(k), value_for(10_000 + k, 700))?;
                last[k as usize] = 10_000 + k;
            }
        }
        if let GcCrashCase::CompactionMoves = case {
            // The last round's segments become half garbage, and a few newer versions spread
            // over the range make the next full compaction merge every table.
            for (from, step, base) in [(0, 2, 10_000), (1, 40, 20_000)] {
                for k in (from..200u64).step_by(step) {
                    db.put(key(k), value_for(base + k, 700))?;
                    last[k as usize] = base + k;
                }
                if base == 10_000 {
                    db.compact_range(None, None)?;
                }
            }
        }
        // Synced last, so every write above is durable too.
        db.put_opt(&WriteOptions { sync: true }, b"marker", b"synced")?;
        Ok((db, last, snapshot))
    };
    let partners = std::cell::Cell::new(0);
    let collect = |db: &Db| -> Result<()> {
        match case {
            GcCrashCase::CompactInPlacePartners => loop {
                let step = db.gc_step()?;
                partners.set(partners.get() + u32::from(step.partner.is_some()));
                if step.victim.is_none() {
                    return Ok(());
                }
            },
            GcCrashCase::UnflushedMemtable | GcCrashCase::KeyOrderSteps => {
                while db.gc_step()?.victim.is_some() {}
                Ok(())
            }
            GcCrashCase::KeyOrderRewrite => db.rewrite_value_log(None, None).map(drop),
            GcCrashCase::CompactionMoves => {
                db.compact_range(None, None)?;
                assert!(db.stats().compaction_values_moved > 0, "the compaction moved nothing");
                db.run_gc().map(drop)
            }
            _ => db.run_gc().map(drop),
        }
    };
    let env = CrashEnv::new();
    let (db, _, snapshot) = setup(&env)?;
    let before = env.fault.op_count(FaultKind::Any);
    collect(&db)?;
    let total = env.fault.op_count(FaultKind::Any) - before;
    assert!(db.stats().gc_runs > 0, "{kind:?} index, {case:?}: GC did nothing");
    if matches!(case, GcCrashCase::CompactInPlace | GcCrashCase::CompactInPlacePartners) {
        assert!(db.stats().gc_segments_compacted > 0, "{kind:?} index, {case:?}: nothing compacted in place");
    }
    if case == GcCrashCase::CompactInPlacePartners {
        assert!(partners.get() > 0, "{kind:?} index, {case:?}: no step took a partner");
    }
    drop(snapshot);
    drop(db);

    for point in (0..total).step_by((total / 40).max(1) as usize) {
        let env = CrashEnv::new();
        let (db, last, snapshot) = setup(&env)?;
        env.fault.inject(Fault::new(FaultKind::Any).after(point).persistent());
        let _ = collect(&db);
        drop(snapshot);
        env.crash(db, (point % 2 == 0).then_some(point));
        let ctx = format!("{kind:?} index, {case:?}: crash after {point} of {total} GC I/O operations");
        let db = Db::open("/db", env.options(case.options(kind))).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        assert_eq!(db.get(key(7))?, None, "{ctx}: deleted key resurrected");
        assert_eq!(db.get(b"marker")?.as_deref(), Some(&b"synced"[..]), "{ctx}");
        for k in (0..200u64).filter(|k| *k != 7) {
            let got = db.get(key(k)).unwrap_or_else(|e| panic!("{ctx}: key {k}: {e}"));
            let want = value_for(last[k as usize], case.value_len(last[k as usize]));
            assert_eq!(got.map(|v| v.to_vec()), Some(want), "{ctx}: key {k}");
        }
        // GC can finish after recovery, and a second pass finds every scan still readable.
        db.run_gc().unwrap_or_else(|e| panic!("{ctx}: gc after recovery: {e}"));
        db.run_gc().unwrap_or_else(|e| panic!("{ctx}: second gc after recovery: {e}"));
        assert_eq!(dump(&db).len(), 200, "{ctx}");
    }
    Ok(())
}

#[test]
fn segment_ids_are_never_reused_after_gc_deletes_the_newest_segments() -> Result<()> {
    for kind in index_kinds() {
        segment_ids_are_never_reused(kind)?;
    }
    Ok(())
}

fn segment_ids_are_never_reused(kind: IndexKind) -> Result<()> {
    let hash = matches!(kind, IndexKind::Hash { .. });
    let env = CrashEnv::new();
    let opts = env.options(Options { write_buffer_size: 1 << 20, ..gc_options(kind, GcPolicyKind::Greedy) });
    {
        let db = Db::open("/db", opts.clone())?;
        for i in 0..50 {
            db.put(key(i), b"small inline value")?;
        }
    }
    {
        // After a reopen the log head moves past every existing segment at the next flush.
        // Every record is garbage once flushed (values are inline), so GC deletes every segment
        // file, the newest included.
        let db = Db::open("/db", opts.clone())?;
        if hash {
            // The hash index keeps every value in the log, however small: deleting the keys is
            // what makes every record garbage.
            for i in 0..50 {
                db.delete(key(i))?;
            }
        }
        let outcome = db.run_gc()?;
        assert!(!outcome.segments_released.is_empty(), "{kind:?}: nothing released");
        assert!(db.stats().segments.is_empty(), "{kind:?}: {:?}", db.stats().segments);
    }
    let db = Db::open("/db", opts.clone())?;
    db.delete_opt(&WriteOptions { sync: true }, key(3))?;
    env.crash(db, None);
    let db = Db::open("/db", opts)?;
    assert_eq!(db.get(key(3))?, None, "{kind:?}: a synced delete written to a reused segment id was never replayed");
    assert_eq!(db.get(key(4))?.is_some(), !hash, "{kind:?}: key 4 lost (or a deleted key back)");
    Ok(())
}

#[test]
fn manual_and_background_gc_never_release_a_segment_twice() -> Result<()> {
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let opts = Options {
            background_gc: true,
            gc_garbage_ratio: 0.05,
            gc_rate_limit: 0,
            ..gc_options(kind, GcPolicyKind::Greedy)
        };
        let db = Db::open(dir.path(), opts)?;
        let mut last = Vec::new();
        for _ in 0..4 {
            last = overwrite(&db, 300, 3)?;
            db.compact_range(None, None)?;
            db.run_gc()?;
        }
        check(&db, &last, &format!("{kind:?} index, after racing collectors"))?;
    }
    Ok(())
}

#[test]
fn background_gc_holds_the_amplification_limit_with_surveys_beside_its_runs() -> Result<()> {
    // The default way a database stays within its space: background GC, told what is garbage by
    // surveys that run on their own thread while runs go on. Writers wait at the limit, so
    // once the writes return the log must be near it, with every value right, and a database
    // closed while the collector works must reopen whole.
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let opts = Options {
            background_gc: true,
            gc_rate_limit: 0,
            gc_space_amplification: Some(1.5),
            ..gc_options(kind, GcPolicyKind::Greedy)
        };
        let db = Db::open(dir.path(), opts.clone())?;
        let keys = 300u64;
        // Write until the collector has run and surveyed a few times (it looks every 100 ms, or
        // when a writer waits), whatever the machine's speed. The hash index charges garbage
        // exactly as it is made, so it never needs a survey.
        let surveys = if kind == IndexKind::Lsm { 4 } else { 0 };
        let enough = |stats: &splitkv::Stats| stats.gc_runs >= 4 && stats.gc_surveys >= surveys;
        let mut last = overwrite(&db, keys, 1)?;
        for _ in 0..5_000 {
            if enough(&db.stats()) {
                break;
            }
            last = overwrite(&db, keys, 1)?;
        }
        let stats = db.stats();
        assert!(enough(&stats), "{kind:?}: {stats:?}");
        let log: u64 = stats.segments.iter().map(|s| s.bytes).sum();
        // About 215 KB live; the limit with the log's open segments and what a survey has not
        // counted yet (a quarter of the log) stays far below the 6.4 MB written.
        let live = keys * 717;
        assert!(log < 4 * live, "{kind:?}: the log holds {log} bytes for {live} live: {stats:?}");
        check(&db, &last, &format!("{kind:?} index, background GC"))?;
        let last = overwrite(&db, keys, 2)?;
        drop(db);
        let db = Db::open(dir.path(), opts)?;
        check(&db, &last, &format!("{kind:?} index, reopened"))?;
    }
    Ok(())
}

#[test]
fn run_gc_ends_when_the_log_is_over_its_space_budget() -> Result<()> {
    // Over the space trigger with only live data left, a run that kept cleaning the log's tail
    // would relocate the same records forever; run_gc must clean what holds garbage and stop.
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let opts = Options { gc_space_budget: Some(64 << 10), ..gc_options(kind, GcPolicyKind::Oldest) };
        let db = Db::open(dir.path(), opts)?;
        let last = overwrite(&db, 300, 3)?;
        db.run_gc()?;
        db.run_gc()?;
        check(&db, &last, &format!("{kind:?} index, after gc over budget"))?;
    }
    Ok(())
}

#[test]
fn relocations_count_as_engine_writes_not_user_writes() -> Result<()> {
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        overwrite(&db, 300, 4)?;
        let user_before = db.stats().user_bytes_written;
        let outcome = db.run_gc()?;
        assert!(outcome.bytes_relocated > 0, "{kind:?}: nothing relocated: {outcome:?}");
        let stats = db.stats();
        assert_eq!(stats.user_bytes_written, user_before, "{kind:?}: GC rewrites were counted as user writes");
        assert!(stats.vlog_bytes_written >= user_before + outcome.bytes_relocated, "{kind:?}: {stats}");
    }
    Ok(())
}

#[test]
fn segments_the_index_never_pointed_into_are_released_without_reading_them() -> Result<()> {
    // With inline values the LSM keeps nothing in the log: the log is only their write-ahead
    // log, so GC can drop its flushed segments unread. The hash index points at every record
    // and must read them. Segments found at open may hold anything, so they are read too.
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        let last = overwrite_small(&db, 300, 8)?;
        let before = db.stats().vlog_bytes();
        let outcome = db.run_gc()?;
        let after = db.stats().vlog_bytes();
        assert!(!outcome.segments_released.is_empty(), "{kind:?}: nothing released: {outcome:?}");
        assert!(after * 2 < before, "{kind:?}: log only shrank from {before} to {after}");
        match kind {
            IndexKind::Lsm => {
                assert_eq!(outcome.bytes_read, 0, "{kind:?}: GC read segments of inline values");
                assert_eq!(outcome.records_relocated, 0, "{kind:?}: GC relocated inline values");
            }
            _ => assert!(outcome.bytes_read > 0, "{kind:?}: GC released segments its index points into unread"),
        }
        check_small(&db, &last, &format!("{kind:?} index, after gc"))?;

        // Written, then reopened before GC: the new process knows nothing of those segments.
        let last = overwrite_small(&db, 300, 8)?;
        drop(db);
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        check_small(&db, &last, &format!("{kind:?} index, reopened"))?;
        let outcome = db.run_gc()?;
        assert!(!outcome.segments_released.is_empty(), "{kind:?} reopened: nothing released: {outcome:?}");
        assert!(outcome.bytes_read > 0, "{kind:?} reopened: GC released segments from before the open unread");
        check_small(&db, &last, &format!("{kind:?} index, reopened, after gc"))?;
        drop(db);
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        check_small(&db, &last, &format!("{kind:?} index, reopened twice"))?;
    }
    Ok(())
}

#[test]
fn a_segment_with_one_separated_value_among_inline_ones_is_read_and_keeps_it() -> Result<()> {
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        // No moves in compaction: a background compaction that happened to move the value out
        // (as it may, depending on when it runs) would leave GC rightly releasing the segment
        // unread, and this test is about GC's own reading of it.
        let opts = Options { gc_in_compaction: false, ..gc_options(kind, GcPolicyKind::Greedy) };
        let db = Db::open(dir.path(), opts.clone())?;
        overwrite_small(&db, 300, 2)?;
        db.put(key(1_000), value_for(7, 700))?;
        let last = overwrite_small(&db, 300, 2)?;
        let outcome = db.run_gc()?;
        assert!(outcome.bytes_read > 0, "{kind:?}: the segment holding a pointer target was not read");
        assert_eq!(db.get(key(1_000))?.map(|v| v.to_vec()), Some(value_for(7, 700)), "{kind:?}");
        check_small(&db, &last, &format!("{kind:?} index"))?;
        drop(db);
        let db = Db::open(dir.path(), opts)?;
        assert_eq!(db.get(key(1_000))?.map(|v| v.to_vec()), Some(value_for(7, 700)), "{kind:?} reopened");
        check_small(&db, &last, &format!("{kind:?} index, reopened"))?;
    }
    Ok(())
}

#[test]
fn records_a_survey_found_unreachable_are_dropped_without_a_lookup() -> Result<()> {
    // The LSM's survey maps where each segment's reachable records are; GC then drops the rest
    // unlooked-up. Versions an open snapshot still sees are reachable and must survive; the
    // hash index makes no such map, and every record is looked up.
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        let seen = overwrite(&db, 200, 2)?;
        let snapshot = db.snapshot();
        let opts = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
        let mut last = Vec::new();
        for round in 1..=2u64 {
            last = (0..200u64).map(|k| round * 1000 + k).collect();
            for (k, seed) in last.iter().enumerate() {
                db.put(key(k as u64), value_for(*seed, 700))?;
            }
        }
        // Victims wait for the snapshot to go before they are released.
        let outcome = db.run_gc()?;
        assert!(outcome.bytes_read > 0, "{kind:?}: nothing cleaned: {outcome:?}");
        let unreachable = db.stats().gc_lookups_skipped;
        match kind {
            IndexKind::Lsm => assert!(unreachable > 0, "{kind:?}: GC looked up every record"),
            _ => assert_eq!(unreachable, 0, "{kind:?}: the hash index's survey maps nothing"),
        }
        check(&db, &last, &format!("{kind:?}, after gc"))?;
        for (k, seed) in seen.iter().enumerate() {
            let v = db.get_opt(&opts, key(k as u64))?.map(|v| v.to_vec());
            assert_eq!(v, Some(value_for(*seed, 700)), "{kind:?}: the snapshot lost key {k}");
        }
        drop(opts);
        let outcome = db.run_gc()?;
        assert!(!outcome.segments_released.is_empty(), "{kind:?}: nothing released: {outcome:?}");
        check(&db, &last, &format!("{kind:?}, after gc without the snapshot"))?;
        drop(db);
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        check(&db, &last, &format!("{kind:?}, reopened"))?;
    }
    Ok(())
}

#[test]
fn records_a_survey_found_current_are_kept_without_a_lookup() -> Result<()> {
    // The LSM's survey also maps each segment's current records; GC keeps those whose key no
    // write touched since without looking them up, and looks up the rest. (Keys written and
    // flushed after a survey are the gc_host unit tests' case: `run_gc` surveys first.) The
    // hash index maps nothing.
    for kind in index_kinds() {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        let mut last = overwrite(&db, 200, 1)?;
        // Half the keys again, twice: their first versions become garbage.
        for round in 1..=2u64 {
            for k in (0..200u64).step_by(2) {
                let seed = round * 1000 + k;
                db.put(key(k), value_for(seed, 700))?;
                last[k as usize] = seed;
            }
        }
        let outcome = db.run_gc()?;
        assert!(outcome.bytes_relocated > 0, "{kind:?}: nothing relocated: {outcome:?}");
        let proven = db.stats().gc_lookups_proven_live;
        match kind {
            IndexKind::Lsm => assert!(proven > 0, "{kind:?}: GC looked up every record it kept"),
            _ => assert_eq!(proven, 0, "{kind:?}: the hash index's survey maps nothing"),
        }
        check(&db, &last, &format!("{kind:?}, after gc"))?;
        drop(db);
        let db = Db::open(dir.path(), gc_options(kind, GcPolicyKind::Greedy))?;
        check(&db, &last, &format!("{kind:?}, reopened"))?;
    }
    Ok(())
}

/// Options under which GC compacts victims in place (LSM only).
fn in_place_options() -> Options {
    Options { gc_compact_in_place: true, ..gc_options(IndexKind::Lsm, GcPolicyKind::Greedy) }
}

#[test]
fn compacting_in_place_keeps_every_value_frees_space_and_writes_nothing_to_the_index() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), in_place_options())?;
    let mut last = overwrite(&db, 200, 4)?;
    db.delete(key(7))?;
    let before = db.stats();
    let sequence_before = db.snapshot().sequence();
    let outcome = db.run_gc()?;
    let after = db.stats();
    assert!(outcome.records_relocated > 0 && !outcome.segments_compacted.is_empty(), "{outcome:?}");
    assert!(after.vlog_bytes() < before.vlog_bytes() / 2, "{} -> {}", before.vlog_bytes(), after.vlog_bytes());
    // Nothing went through the write path: no sequence number was spent on a copy.
    assert_eq!(db.snapshot().sequence(), sequence_before, "GC wrote through the write path");
    let check_all = |db: &Db, last: &[u64], ctx: &str| -> Result<()> {
        assert_eq!(db.get(key(7))?, None, "{ctx}: deleted key");
        for (k, seed) in last.iter().enumerate().filter(|(k, _)| *k != 7) {
            assert_eq!(db.get(key(k as u64))?.map(|v| v.to_vec()), Some(value_for(*seed, 700)), "{ctx}: key {k}");
        }
        assert_eq!(dump(db).len(), 199, "{ctx}: scan");
        Ok(())
    };
    check_all(&db, &last, "after compaction")?;
    // Half the keys again: the compacted segments gain garbage, and compacting them again
    // keeps the rest where the pointers still say.
    for k in (0..200u64).step_by(2).filter(|k| *k != 7) {
        db.put(key(k), value_for(50_000 + k, 700))?;
        last[k as usize] = 50_000 + k;
    }
    db.compact_range(None, None)?;
    let again = db.run_gc()?;
    assert!(!again.segments_compacted.is_empty(), "no compacted segment compacted again: {again:?}");
    check_all(&db, &last, "after a second compaction")?;
    drop(db);
    let db = Db::open(dir.path(), in_place_options())?;
    check_all(&db, &last, "after reopen")?;
    db.run_gc()?;
    check_all(&db, &last, "after reopen and GC")?;
    Ok(())
}

#[test]
fn over_its_space_limit_a_background_step_compacts_a_partner_beside_its_victim() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // About 143 KB live in a log of about 860 KB: over the budget, so writers would wait, and a
    // background step compacts a second segment on a thread of its own.
    let opts = Options { gc_space_budget: Some(256 << 10), ..in_place_options() };
    let db = Db::open(dir.path(), opts.clone())?;
    let last = overwrite(&db, 200, 6)?;
    db.compact_range(None, None)?;
    let step = db.gc_step()?;
    let (Some(victim), Some(partner)) = (step.victim, step.partner) else {
        panic!("a step over the budget took no partner: {step:?}")
    };
    assert_ne!(victim, partner);
    for id in [victim, partner] {
        // No reader is open: each is installed (or released, if nothing in it was live) at once.
        let done = step.segments_compacted.contains(&id) || step.segments_released.contains(&id);
        assert!(done, "{id:?} neither compacted nor released: {step:?}");
    }
    check(&db, &last, "after a step with a partner")?;
    let mut steps = 0;
    while db.gc_step()?.victim.is_some() {
        steps += 1;
        assert!(steps < 1_000, "GC never ended");
    }
    assert!(db.stats().vlog_bytes() <= 256 << 10, "{:?}", db.stats());
    check(&db, &last, "after GC")?;
    drop(db);
    let db = Db::open(dir.path(), opts)?;
    check(&db, &last, "reopened")?;
    Ok(())
}

#[test]
fn a_damaged_compacted_segment_is_an_error_never_a_panic_or_a_wrong_value() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), in_place_options())?;
    let last = overwrite(&db, 200, 4)?;
    let compacted = db.run_gc()?.segments_compacted;
    drop(db);
    let path = dir.path().join(format!("{:08}.vlog", compacted[0].0));
    let good = std::fs::read(&path)?;
    assert!(good.len() > 40 + 700, "the compacted segment keeps records");
    // The offset map ends the file: a flipped byte in it, or a cut file, fails the open.
    let mut flipped = good.clone();
    flipped[good.len() - 10] ^= 1;
    for (bytes, what) in [(flipped, "a flipped map byte"), (good[..good.len() - 1].to_vec(), "a cut file")] {
        std::fs::write(&path, bytes)?;
        match Db::open(dir.path(), in_place_options()) {
            Err(splitkv::Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
    }
    // A flipped byte in the first kept record: its read is an error, every other read is right.
    let mut flipped = good.clone();
    flipped[40] ^= 1;
    std::fs::write(&path, flipped)?;
    let db = Db::open(dir.path(), in_place_options())?;
    let mut failed = 0;
    for (k, seed) in last.iter().enumerate() {
        match db.get(key(k as u64)) {
            Ok(got) => assert_eq!(got.map(|v| v.to_vec()), Some(value_for(*seed, 700)), "key {k}"),
            Err(splitkv::Error::Corruption { file, .. }) => {
                assert_eq!(file, path, "key {k}");
                failed += 1;
            }
            Err(e) => panic!("key {k}: {e}"),
        }
    }
    assert_eq!(failed, 1, "exactly the damaged record's key fails");
    drop(db);
    std::fs::write(&path, good)?;
    let db = Db::open(dir.path(), in_place_options())?;
    check(&db, &last, "repaired")?;
    Ok(())
}
