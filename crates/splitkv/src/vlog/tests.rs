//! Behaviour of the value log over the OS file system: reads from buffer and file, rotation,
//! replay and the torn-tail rule, corruption reporting, poisoning and concurrent readers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;
use crate::fs::{FaultInjectingFileSystem, FaultKind, OsFileSystem};

fn os() -> Arc<dyn FileSystem> {
    OsFileSystem::shared()
}

fn opts(segment_size: u64, buffer_size: usize) -> VlogOptions {
    VlogOptions { segment_size, buffer_size }
}

/// Owned form of a batch, so tests can describe batches and compare them with replay output.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    seq: u64,
    kind: RecordKind,
    key: Vec<u8>,
    value: Vec<u8>,
}

fn put(seq: u64, key: &str, value: &[u8]) -> Rec {
    Rec { seq, kind: RecordKind::Put, key: key.as_bytes().to_vec(), value: value.to_vec() }
}

fn del(seq: u64, key: &str) -> Rec {
    Rec { seq, kind: RecordKind::Delete, key: key.as_bytes().to_vec(), value: Vec::new() }
}

fn append(log: &ValueLog, batch: &[Rec]) -> Vec<ValuePointer> {
    let refs: Vec<RecordRef<'_>> = batch
        .iter()
        .map(|r| RecordRef { seq: SequenceNumber(r.seq), kind: r.kind, key: &r.key, value: &r.value })
        .collect();
    log.append_batch(&refs).unwrap()
}

fn replay_all(log: &ValueLog, from: LogPosition) -> Result<(Vec<Vec<ReplayedRecord>>, LogPosition)> {
    let mut batches = Vec::new();
    let end = log.replay(from, &mut |batch| {
        batches.push(batch.to_vec());
        Ok(())
    })?;
    Ok((batches, end))
}

fn as_recs(batch: &[ReplayedRecord]) -> Vec<Rec> {
    batch.iter().map(|r| Rec { seq: r.seq.0, kind: r.kind, key: r.key.clone(), value: r.value.clone() }).collect()
}

/// Rewrites a file with one byte flipped, through the file-system trait.
fn flip_byte(fs: &dyn FileSystem, path: &Path, offset: u64) {
    let mut bytes = fs.read_all(path).unwrap();
    bytes[offset as usize] ^= 0x40;
    let mut file = fs.create(path).unwrap();
    file.append(&bytes).unwrap();
    file.sync().unwrap();
}

/// A batch of `n` puts whose values are big enough to make rotation easy to trigger.
fn numbered_batch(first_seq: u64, n: usize, value_len: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            let seq = first_seq + i as u64;
            put(seq, &format!("key{seq:05}"), &vec![(seq % 251) as u8; value_len])
        })
        .collect()
}

#[test]
fn reads_are_served_from_the_buffer_then_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    assert_eq!(log.head(), LogPosition { segment: SegmentId(1), offset: 0 });
    let ptrs = append(&log, &[put(1, "a", b"apple"), del(2, "b"), put(3, "c", b"")]);
    assert_eq!(ptrs[0].offset, SEGMENT_HEADER_LEN);
    assert_eq!(ptrs[1].offset, ptrs[0].offset + u64::from(ptrs[0].len));
    let path = segment_file(dir.path(), SegmentId(1));
    assert_eq!(fs.file_size(&path).unwrap(), SEGMENT_HEADER_LEN, "appends must still be buffered");

    assert_eq!(&log.read(&ptrs[0], b"a").unwrap()[..], b"apple");
    assert_eq!(log.read_record(&ptrs[1]).unwrap().kind, RecordKind::Delete);

    log.flush_buffer().unwrap();
    let end = ptrs[2].offset + u64::from(ptrs[2].len);
    assert_eq!(fs.file_size(&path).unwrap(), end);
    assert_eq!(log.head(), LogPosition { segment: SegmentId(1), offset: end });
    assert_eq!(&log.read(&ptrs[0], b"a").unwrap()[..], b"apple");
    assert_eq!(&log.read(&ptrs[2], b"c").unwrap()[..], b"");
    let rec = log.read_record(&ptrs[1]).unwrap();
    assert_eq!((rec.seq, rec.key.as_slice(), rec.pointer), (SequenceNumber(2), &b"b"[..], ptrs[1]));
}

#[test]
fn a_full_buffer_reaches_the_file_without_an_explicit_flush() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 100)).unwrap();
    let ptrs = append(&log, &[put(1, "k", &[7; 200])]);
    let path = segment_file(dir.path(), SegmentId(1));
    assert_eq!(fs.file_size(&path).unwrap(), ptrs[0].offset + u64::from(ptrs[0].len));
    assert_eq!(log.bytes_written(), fs.file_size(&path).unwrap());
}

#[test]
fn rotation_keeps_batches_whole_and_every_pointer_readable() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(600, 256)).unwrap();
    let mut written = Vec::new();
    for b in 0..20u64 {
        let batch = numbered_batch(b * 3 + 1, 3, 40);
        let ptrs = append(&log, &batch);
        assert!(ptrs.iter().all(|p| p.segment == ptrs[0].segment), "a batch spans segments");
        written.extend(batch.into_iter().zip(ptrs));
    }
    // A batch larger than a segment gets a segment of its own.
    let big = numbered_batch(1000, 2, 500);
    let big_ptrs = append(&log, &big);
    assert_eq!(big_ptrs[0].offset, SEGMENT_HEADER_LEN);
    written.extend(big.into_iter().zip(big_ptrs.iter().copied()));
    let after = append(&log, &[put(2000, "after", b"x")]);
    assert_eq!(after[0].segment.0, big_ptrs[0].segment.0 + 1);

    let segments = log.segments();
    assert!(segments.len() > 3);
    for s in &segments[..segments.len() - 2] {
        assert!(s.len <= 600, "segment {} is {} bytes", s.id, s.len);
    }
    for (rec, ptr) in &written {
        assert_eq!(&log.read(ptr, &rec.key).unwrap()[..], rec.value.as_slice());
    }
    log.sync().unwrap();
    drop(log);
    let reopened = ValueLog::open(os(), dir.path(), opts(600, 256)).unwrap();
    for (rec, ptr) in &written {
        assert_eq!(&reopened.read(ptr, &rec.key).unwrap()[..], rec.value.as_slice());
    }
}

#[test]
fn replay_returns_exactly_the_appended_batches() {
    let dir = tempfile::tempdir().unwrap();
    let batches = vec![
        vec![put(1, "a", b"1")],
        vec![put(2, "b", &[9; 300]), del(3, "a"), put(4, "c", b"")],
        vec![del(5, "zz")],
        numbered_batch(6, 5, 120),
        vec![put(11, "last", b"value")],
    ];
    let mut pointers = Vec::new();
    let head;
    {
        let log = ValueLog::open(os(), dir.path(), opts(700, 128)).unwrap();
        for batch in &batches {
            pointers.push(append(&log, batch));
        }
        log.sync().unwrap();
        head = log.head();
    }
    let log = ValueLog::open(os(), dir.path(), opts(700, 128)).unwrap();
    let (replayed, end) = replay_all(&log, LogPosition::default()).unwrap();
    assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), batches);
    let replayed_ptrs: Vec<Vec<ValuePointer>> =
        replayed.iter().map(|b| b.iter().map(|r| r.pointer).collect()).collect();
    assert_eq!(replayed_ptrs, pointers);
    assert_eq!(end, head);
    assert!(log.segments().len() > 1, "the test should cover several segments");

    // Appends after recovery go to a new segment with a larger id.
    let max_existing = log.segments().last().unwrap().id;
    assert_eq!(log.head(), LogPosition { segment: SegmentId(max_existing.0 + 1), offset: 0 });
    let ptr = append(&log, &[put(12, "new", b"n")]);
    assert_eq!(ptr[0].segment, SegmentId(max_existing.0 + 1));
}

#[test]
fn replay_from_a_mid_position_skips_earlier_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(500, 64)).unwrap();
    let mut heads = Vec::new();
    let mut batches = Vec::new();
    for b in 0..12u64 {
        heads.push(log.head());
        let batch = numbered_batch(b * 2 + 1, 2, 60);
        append(&log, &batch);
        batches.push(batch);
    }
    log.sync().unwrap();
    drop(log);
    for k in [0usize, 1, 5, 11] {
        let log = ValueLog::open(os(), dir.path(), opts(500, 64)).unwrap();
        let (replayed, _) = replay_all(&log, heads[k]).unwrap();
        assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), batches[k..].to_vec(), "from batch {k}");
    }
}

#[test]
fn a_torn_last_batch_is_truncated_and_the_next_replay_is_clean() {
    let complete = vec![vec![put(1, "a", b"one")], vec![put(2, "b", b"two"), del(3, "a")]];
    let torn = vec![put(4, "c", &[1; 50]), put(5, "d", &[2; 50]), put(6, "e", &[3; 50])];
    // Cut points: inside a record header, inside a body, and exactly after whole records
    // of the unfinished batch (no batch-end record).
    let torn_len: u32 = torn.iter().map(|r| record_len(r.key.len(), r.value.len()).unwrap()).sum();
    let first_len = u64::from(record_len(1, 50).unwrap());
    let cuts = [1, 10, 30, first_len, first_len + 5, 2 * first_len, u64::from(torn_len) - 1];
    for cut in cuts {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let path = segment_file(dir.path(), SegmentId(1));
        let complete_end;
        {
            let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
            for batch in &complete {
                append(&log, batch);
            }
            complete_end = log.head();
            append(&log, &torn);
            log.sync().unwrap();
        }
        fs.truncate(&path, complete_end.offset + cut).unwrap();

        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
        let (replayed, end) = replay_all(&log, LogPosition::default()).unwrap();
        assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), complete, "cut {cut}");
        assert_eq!(end, complete_end, "cut {cut}");
        assert_eq!(fs.file_size(&path).unwrap(), complete_end.offset, "cut {cut}");
        drop(log);

        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
        let (again, end_again) = replay_all(&log, LogPosition::default()).unwrap();
        assert_eq!((again, end_again), (replayed, end));
        // Scanning the repaired segment finds nothing wrong.
        assert!(scan_segment(fs.as_ref(), &path, &[]).unwrap().all(|r| r.is_ok()));
    }
}

#[test]
fn a_last_segment_without_a_complete_header_is_removed_by_replay() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
        append(&log, &[put(1, "a", b"1")]);
        log.sync().unwrap();
    }
    let partial = segment_file(dir.path(), SegmentId(2));
    let mut file = fs.create(&partial).unwrap();
    file.append(&encode_segment_header_prefix(SegmentId(2), 10)).unwrap();
    file.sync().unwrap();

    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    let (replayed, end) = replay_all(&log, LogPosition::default()).unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(end.segment, SegmentId(1));
    assert!(!fs.exists(&partial));
    assert_eq!(log.segments().iter().map(|s| s.id).collect::<Vec<_>>(), vec![SegmentId(1)]);
}

fn encode_segment_header_prefix(id: SegmentId, n: usize) -> Vec<u8> {
    record::encode_segment_header(id)[..n].to_vec()
}

#[test]
fn a_flipped_byte_in_a_non_tail_record_is_corruption_not_truncation() {
    // Offsets inside the first record: a checksum field, the sequence, the kind, a length,
    // the key and the value.
    for delta in [0u64, 5, 9, 16, 19, 26, 28] {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let path = segment_file(dir.path(), SegmentId(1));
        let ptrs;
        {
            let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
            ptrs = append(&log, &[put(1, "key", b"value"), put(2, "k2", b"v2")]);
            append(&log, &[put(3, "k3", b"v3")]);
            log.sync().unwrap();
        }
        let len_before = fs.file_size(&path).unwrap();
        flip_byte(fs.as_ref(), &path, ptrs[0].offset + delta);

        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
        match replay_all(&log, LogPosition::default()) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (path.clone(), ptrs[0].offset), "delta {delta}");
            }
            other => panic!("delta {delta}: expected corruption, got {other:?}"),
        }
        assert_eq!(fs.file_size(&path).unwrap(), len_before, "corruption must not be truncated away");
        assert!(log.read(&ptrs[0], b"key").unwrap_err().is_corruption());
        let scanned: Vec<_> = scan_segment(fs.as_ref(), &path, &[]).unwrap().collect();
        assert!(matches!(scanned.as_slice(), [Err(Error::Corruption { offset, .. })] if *offset == ptrs[0].offset));
    }
}

#[test]
fn a_torn_record_in_a_sealed_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let first;
    {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(300, 64)).unwrap();
        first = append(&log, &numbered_batch(1, 2, 80));
        append(&log, &numbered_batch(3, 2, 80));
        log.sync().unwrap();
        assert!(log.segments().len() >= 2);
    }
    let path = segment_file(dir.path(), first[1].segment);
    fs.truncate(&path, first[1].offset + 10).unwrap();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(300, 64)).unwrap();
    let err = replay_all(&log, LogPosition::default()).unwrap_err();
    assert!(matches!(err, Error::Corruption { ref file, .. } if *file == path), "{err:?}");
}

#[test]
fn bad_pointers_and_key_mismatches_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let ptrs = append(&log, &[put(1, "key", b"value"), put(2, "other", b"v")]);
    let p = ptrs[0];
    let path = segment_file(dir.path(), SegmentId(1));
    for flushed in [false, true] {
        if flushed {
            log.flush_buffer().unwrap();
        }
        let bad = [
            ValuePointer { offset: 0, ..p },
            ValuePointer { len: p.len - 1, ..p },
            ValuePointer { len: p.len + 1, ..p },
            ValuePointer { len: 3, ..p },
            ValuePointer { offset: p.offset + 1, ..p },
            ValuePointer { offset: 1 << 40, ..p },
            ValuePointer { offset: u64::MAX - 2, ..p },
            ValuePointer { len: u32::MAX, ..p },
        ];
        for ptr in bad {
            match log.read(&ptr, b"key") {
                Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (path.clone(), ptr.offset)),
                other => panic!("{ptr:?} (flushed {flushed}): expected corruption, got {other:?}"),
            }
        }
        let err = log.read(&p, b"kez").unwrap_err();
        assert!(err.is_corruption(), "{err:?}");
        let missing = ValuePointer { segment: SegmentId(42), ..p };
        assert!(
            matches!(log.read(&missing, b"key"), Err(Error::Corruption { file, .. }) if file == segment_file(dir.path(), SegmentId(42)))
        );
        assert_eq!(&log.read(&p, b"key").unwrap()[..], b"value");
    }
}

#[test]
fn a_damaged_value_on_disk_fails_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let ptrs;
    {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
        ptrs = append(&log, &[put(1, "key", b"value")]);
        log.sync().unwrap();
    }
    let path = segment_file(dir.path(), SegmentId(1));
    flip_byte(fs.as_ref(), &path, ptrs[0].offset + u64::from(ptrs[0].len) - 1);
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    assert!(matches!(log.read(&ptrs[0], b"key"), Err(Error::Corruption { offset, .. }) if offset == ptrs[0].offset));
}

#[test]
fn segment_header_corruption_is_detected() {
    for offset in [0u64, 9, 13, 21] {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        {
            let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
            append(&log, &[put(1, "a", b"1")]);
            log.sync().unwrap();
        }
        let path = segment_file(dir.path(), SegmentId(1));
        flip_byte(fs.as_ref(), &path, offset);
        let err = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).err().unwrap();
        assert!(matches!(&err, Error::Corruption { file, offset: 0, .. } if *file == path), "{err:?}");
        assert!(scan_segment(fs.as_ref(), &path, &[]).err().unwrap().is_corruption());
    }
}

#[test]
fn a_segment_renamed_to_another_id_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
        append(&log, &[put(1, "a", b"1")]);
        log.sync().unwrap();
    }
    fs.rename(&segment_file(dir.path(), SegmentId(1)), &segment_file(dir.path(), SegmentId(5))).unwrap();
    assert!(ValueLog::open(fs, dir.path(), opts(1 << 20, 1024)).err().unwrap().is_corruption());
}

#[test]
fn scan_segment_yields_every_record_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    let mut ptrs = append(&log, &[put(1, "a", b"1"), del(2, "b")]);
    ptrs.extend(append(&log, &[put(3, "c", &[5; 3000])]));
    log.sync().unwrap();
    let scan = scan_segment(fs.as_ref(), &segment_file(dir.path(), SegmentId(1)), &[]).unwrap();
    assert_eq!(scan.segment_id(), SegmentId(1));
    let records: Vec<(u64, ReplayedRecord)> = scan.collect::<Result<_>>().unwrap();
    assert_eq!(
        records.iter().map(|(o, r)| (*o, r.pointer)).collect::<Vec<_>>(),
        ptrs.iter().map(|p| (p.offset, *p)).collect::<Vec<_>>()
    );
    assert_eq!(records[2].1.value, vec![5; 3000]);
    assert_eq!(records[1].1.kind, RecordKind::Delete);
}

#[test]
fn removed_segments_are_forgotten_and_the_active_one_is_protected() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(200, 64)).unwrap();
    let old = append(&log, &numbered_batch(1, 1, 100));
    let new = append(&log, &numbered_batch(2, 1, 100));
    assert_ne!(old[0].segment, new[0].segment);
    assert!(matches!(log.remove_segment(new[0].segment), Err(Error::InvalidArgument(_))));
    log.remove_segment(old[0].segment).unwrap();
    assert!(!fs.exists(&segment_file(dir.path(), old[0].segment)));
    assert!(log.read(&old[0], b"key00001").unwrap_err().is_corruption());
    assert_eq!(log.segments().iter().map(|s| s.id).collect::<Vec<_>>(), vec![new[0].segment]);
    assert!(matches!(log.remove_segment(old[0].segment), Err(Error::InvalidArgument(_))));
}

#[test]
fn replay_after_an_append_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
    append(&log, &[put(1, "a", b"1")]);
    assert!(matches!(replay_all(&log, LogPosition::default()), Err(Error::InvalidArgument(_))));
}

#[test]
fn concurrent_readers_see_every_published_pointer_while_the_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(4096, 512)).unwrap();
    let published: parking_lot::Mutex<Vec<(Rec, ValuePointer)>> = parking_lot::Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for reader in 0..3usize {
            let (log, published, done) = (&log, &published, &done);
            scope.spawn(move || {
                let mut reads = 0usize;
                let mut i = reader;
                while !done.load(Ordering::Acquire) || reads == 0 {
                    let entry = {
                        let all = published.lock();
                        if all.is_empty() {
                            None
                        } else {
                            i = (i * 31 + 7) % all.len();
                            Some(all[i].clone())
                        }
                    };
                    if let Some((rec, ptr)) = entry {
                        let value = log.read(&ptr, &rec.key).unwrap();
                        assert_eq!(&value[..], rec.value.as_slice());
                        reads += 1;
                    }
                }
            });
        }
        for b in 0..300u64 {
            let batch = numbered_batch(b * 2 + 1, 2, (b as usize * 7) % 200);
            let ptrs = append(&log, &batch);
            if b % 50 == 0 {
                log.sync().unwrap();
            }
            published.lock().extend(batch.into_iter().zip(ptrs));
        }
        done.store(true, Ordering::Release);
    });
    assert!(log.segments().len() > 5);
}

#[test]
fn a_failed_fsync_poisons_appends_and_syncs_but_not_reads() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjectingFileSystem::new(os());
    let log = ValueLog::open(Arc::new(faults.clone()), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let synced = append(&log, &[put(1, "a", b"durable")]);
    log.sync().unwrap();
    let buffered = append(&log, &[put(2, "b", b"pending")]);

    faults.inject(FaultKind::Sync);
    assert!(matches!(log.sync(), Err(Error::Io(_))));

    assert!(matches!(log.sync(), Err(Error::Poisoned(_))));
    assert!(matches!(log.flush_buffer(), Err(Error::Poisoned(_))));
    let refs = [RecordRef::put(SequenceNumber(3), b"c", b"x")];
    assert!(matches!(log.append_batch(&refs), Err(Error::Poisoned(_))));
    assert_eq!(&log.read(&synced[0], b"a").unwrap()[..], b"durable");
    assert_eq!(&log.read(&buffered[0], b"b").unwrap()[..], b"pending");
}

#[test]
fn a_failed_rotation_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjectingFileSystem::new(os());
    let log = ValueLog::open(Arc::new(faults.clone()), dir.path(), opts(200, 1 << 16)).unwrap();
    append(&log, &numbered_batch(1, 1, 100));
    faults.inject(FaultKind::Sync);
    let refs = [RecordRef::put(SequenceNumber(2), b"k", &[0; 100])];
    assert!(log.append_batch(&refs).is_err());
    assert!(matches!(log.append_batch(&refs), Err(Error::Poisoned(_))));
}

#[test]
fn options_too_small_for_a_record_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(ValueLog::open(os(), dir.path(), opts(40, 0)), Err(Error::InvalidArgument(_))));
}

#[test]
fn value_log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ValueLog>();
}

#[test]
fn an_error_from_apply_stops_replay_and_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
        append(&log, &[put(1, "a", b"1")]);
        append(&log, &[put(2, "b", b"2")]);
        log.sync().unwrap();
    }
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
    let mut calls = 0;
    let result = log.replay(LogPosition::default(), &mut |_| {
        calls += 1;
        Err(Error::InvalidArgument("stop".into()))
    });
    assert!(matches!(result, Err(Error::InvalidArgument(_))));
    assert_eq!(calls, 1);
}

#[test]
fn a_replay_start_past_the_segment_end_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let end;
    {
        let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
        append(&log, &[put(1, "a", b"1")]);
        log.sync().unwrap();
        end = log.head();
    }
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
    let past = LogPosition { offset: end.offset + 1, ..end };
    assert!(replay_all(&log, past).unwrap_err().is_corruption());
    let (batches, at) = replay_all(&log, end).unwrap();
    assert!(batches.is_empty());
    assert_eq!(at, end);
}
