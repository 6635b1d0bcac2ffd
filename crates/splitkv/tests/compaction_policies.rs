//! Scheduling scenarios under each compaction policy and with two compaction workers: the data
//! stays correct while compactions run concurrently, deeper levels form, every finished
//! compaction is reported to the listener, and a time slice never holds up memtable flushes.
//!
//! LSM only: compaction policies, compaction workers and levels belong to the LSM index, so these
//! scenarios do not run under the other index kinds of `common::index_kinds`.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{dump, small_options, value_for, CrashEnv};
use splitkv::{CompactionEvent, CompactionListener, CompactionPolicyKind, Db, IndexKind, Options, PickReason};

/// Collects every event.
#[derive(Default)]
struct Recorder(Mutex<Vec<CompactionEvent>>);

impl CompactionListener for Recorder {
    fn on_compaction_completed(&self, event: &CompactionEvent) {
        self.0.lock().expect("recorder lock").push(event.clone());
    }
}

fn policies() -> Vec<(CompactionPolicyKind, usize)> {
    vec![
        (CompactionPolicyKind::Score, 1),
        (CompactionPolicyKind::Score, 2),
        (CompactionPolicyKind::time_slice(20), 1),
        (CompactionPolicyKind::time_slice(20), 2),
        (CompactionPolicyKind::TimeSlice { slice_ms: 20, dynamic: true, drain_percent: Some(70) }, 2),
    ]
}

fn options(env: &CrashEnv, policy: CompactionPolicyKind, workers: usize, threshold: usize) -> Options {
    env.options(Options {
        compaction_policy: policy,
        max_background_compactions: workers,
        // Small levels so that a few thousand writes reach L3.
        max_bytes_for_level_base: 16 << 10,
        max_bytes_for_level_multiplier: 4.0,
        // GC's relocations would be writes of their own, flushed at any time: the tests here
        // count on compactions being the only thing that moves L0.
        background_gc: false,
        ..small_options(IndexKind::Lsm, threshold)
    })
}

/// Overwrites `keys` keys `rounds` times; returns the expected final contents.
fn load(db: &Db, keys: u64, rounds: u64, value_len: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..keys {
            // A scattered order so that every flush overlaps most of the key space.
            let k = (i * 7919) % keys;
            let key = common::key(k);
            let value = value_for(round * keys + k, value_len);
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
    }
    model
}

#[test]
fn overwrites_read_back_under_every_policy_and_worker_count() {
    for (policy, workers) in policies() {
        for threshold in [0, usize::MAX] {
            let env = CrashEnv::new();
            let recorder = Arc::new(Recorder::default());
            let mut opts = options(&env, policy, workers, threshold);
            opts.compaction_listener = Some(recorder.clone());
            let db = Db::open("/db", opts.clone()).expect("open");
            let model = load(&db, 5000, 3, 100);
            let got = dump(&db);
            assert!(got == model.clone().into_iter().collect::<Vec<_>>(), "{policy:?} x{workers} t{threshold}: scan");
            let stats = db.stats();
            assert!(stats.flushes > 0 && stats.compactions > 0, "{policy:?} x{workers}: {stats}");
            assert!(
                stats.levels.iter().skip(2).any(|l| l.files > 0),
                "{policy:?} x{workers}: data reached L2 or deeper: {:?}",
                stats.levels
            );
            drop(db);
            // The published tree is consistent on disk too.
            let db = Db::open("/db", opts).expect("reopen");
            assert!(dump(&db) == model.into_iter().collect::<Vec<_>>(), "{policy:?} x{workers}: after reopen");

            let events = recorder.0.lock().expect("recorder lock").clone();
            assert!(!events.is_empty(), "{policy:?} x{workers}: listener saw compactions");
            for e in &events {
                assert!(e.level + 1 < 7 && e.input_files[0] > 0 && e.input_bytes[0] > 0, "{e:?}");
                assert_eq!(e.trivial_move, e.output_files == 0 && e.input_files[1] == 0, "{e:?}");
                if !e.trivial_move {
                    assert!(e.write_amplification() >= 1.0, "{e:?}");
                }
                let slice = matches!(policy, CompactionPolicyKind::TimeSlice { .. });
                if !slice {
                    assert_ne!(e.reason, PickReason::SliceHolder, "{e:?}");
                    assert_eq!(e.slice_holder, None, "{e:?}");
                }
            }
            if matches!(policy, CompactionPolicyKind::TimeSlice { .. }) {
                assert!(
                    events.iter().any(|e| e.reason == PickReason::SliceHolder && e.level >= 1),
                    "{policy:?}: deeper levels got the slice"
                );
            }
        }
    }
}

#[test]
fn a_long_slice_never_holds_up_flushes() {
    // A slice far longer than the test: only dropping under threshold ends a grant, and the
    // holder outranks L0. Writes must still complete, because flushes never wait for the policy.
    let env = CrashEnv::new();
    let opts = options(&env, CompactionPolicyKind::time_slice(3_600_000), 2, usize::MAX);
    let db = Db::open("/db", opts).expect("open");
    let model = load(&db, 4000, 2, 200);
    db.flush().expect("flush");
    let stats = db.stats();
    assert!(stats.flushes >= 20, "{stats}");
    assert!(dump(&db) == model.into_iter().collect::<Vec<_>>());
    let holder = db.property("splitkv.compaction-slice-holder").expect("property");
    assert!(holder == "none" || holder.parse::<usize>().is_ok(), "{holder}");
}

#[test]
fn manual_compaction_excludes_background_workers_and_is_reported() {
    for (policy, workers) in policies() {
        let env = CrashEnv::new();
        let recorder = Arc::new(Recorder::default());
        let mut opts = options(&env, policy, workers, 0);
        opts.compaction_listener = Some(recorder.clone());
        let db = Db::open("/db", opts).expect("open");
        let mut model = load(&db, 2000, 2, 100);
        db.compact_range(None, None).expect("compact");
        assert!(dump(&db) == model.clone().into_iter().collect::<Vec<_>>(), "{policy:?} x{workers}");
        assert_eq!(db.stats().levels[0].files, 0, "{policy:?} x{workers}: L0 pushed down");
        // Background workers may already have pushed everything down before the first manual
        // compaction, leaving it nothing to do. One flushed key is an L0 file no policy picks
        // (it is below every trigger), so the second one has work, and must report it.
        db.put(common::key(5), b"last").expect("put");
        model.insert(common::key(5), b"last".to_vec());
        db.compact_range(None, None).expect("compact");
        assert_eq!(db.stats().levels[0].files, 0, "{policy:?} x{workers}: L0 pushed down");
        assert!(dump(&db) == model.into_iter().collect::<Vec<_>>(), "{policy:?} x{workers}");
        assert!(recorder.0.lock().expect("recorder lock").iter().any(|e| e.reason == PickReason::Manual));
    }
}

/// Signals every event to a waiting test.
#[derive(Default)]
struct Waiter {
    events: Mutex<Vec<CompactionEvent>>,
    arrived: std::sync::Condvar,
}

impl CompactionListener for Waiter {
    fn on_compaction_completed(&self, event: &CompactionEvent) {
        self.events.lock().expect("waiter lock").push(event.clone());
        self.arrived.notify_all();
    }
}

#[test]
fn point_reads_that_miss_in_level0_get_it_compacted_under_its_trigger() {
    for policy in [CompactionPolicyKind::Score, CompactionPolicyKind::time_slice(20)] {
        let env = CrashEnv::new();
        let waiter = Arc::new(Waiter::default());
        let mut opts = options(&env, policy, 1, usize::MAX);
        // L0 is never due by its file count here: only reads can make it due.
        opts.level0_file_num_compaction_trigger = 100;
        opts.level0_slowdown_writes_trigger = 100;
        opts.level0_stop_writes_trigger = 100;
        // One table per flush below.
        opts.write_buffer_size = 1 << 20;
        opts.compaction_listener = Some(waiter.clone());
        let db = Db::open("/db", opts).expect("open");
        // Two level-0 tables over the same range of even keys.
        let mut model = BTreeMap::new();
        for round in 0..2u64 {
            for i in (0..200u64).map(|i| i * 2) {
                let value = value_for(round * 1000 + i, 100);
                db.put(common::key(i), &value).expect("put");
                model.insert(common::key(i), value);
            }
            db.flush().expect("flush");
        }
        assert_eq!(db.property("splitkv.num-files-at-level0").as_deref(), Some("2"), "{policy:?}");
        assert!(waiter.events.lock().expect("waiter lock").is_empty(), "{policy:?}: nothing was due");

        // Odd keys lie inside both tables' ranges and in neither: every get consults both in
        // vain. The allowance is 100 misses per small table; read well past it.
        for i in 0..1000u64 {
            assert_eq!(db.get(common::key(i * 2 % 398 + 1)).expect("get"), None);
        }
        let mut events = waiter.events.lock().expect("waiter lock");
        while !events.iter().any(|e| e.reason == PickReason::Level0Reads) {
            events = waiter.arrived.wait(events).expect("waiter lock");
        }
        let event = events.iter().find(|e| e.reason == PickReason::Level0Reads).cloned();
        drop(events);
        assert_eq!(event.map(|e| (e.level, e.input_files[0])), Some((0, 2)), "{policy:?}");
        assert_eq!(db.property("splitkv.num-files-at-level0").as_deref(), Some("0"), "{policy:?}");
        assert!(dump(&db) == model.into_iter().collect::<Vec<_>>(), "{policy:?}: contents kept");
    }
}
