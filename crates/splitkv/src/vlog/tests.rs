//! Behaviour of the value log over the OS file system: reads from buffer and file, rotation,
//! replay and the torn-tail rule, corruption reporting, poisoning and concurrent readers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;
use crate::fs::{Fault, FaultInjectingFileSystem, FaultKind, OsFileSystem};

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
    prev: Option<ValuePointer>,
}

impl Rec {
    fn with_prev(self, prev: ValuePointer) -> Rec {
        Rec { prev: Some(prev), ..self }
    }
}

fn put(seq: u64, key: &str, value: &[u8]) -> Rec {
    Rec { seq, kind: RecordKind::Put, key: key.as_bytes().to_vec(), value: value.to_vec(), prev: None }
}

fn del(seq: u64, key: &str) -> Rec {
    Rec { seq, kind: RecordKind::Delete, key: key.as_bytes().to_vec(), value: Vec::new(), prev: None }
}

fn append(log: &ValueLog, batch: &[Rec]) -> Vec<ValuePointer> {
    let refs: Vec<RecordRef<'_>> = batch
        .iter()
        .map(|r| RecordRef { seq: SequenceNumber(r.seq), kind: r.kind, key: &r.key, value: &r.value, prev: r.prev })
        .collect();
    log.append_batch(&refs).unwrap().into_vec()
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
    batch
        .iter()
        .map(|r| Rec { seq: r.seq.0, kind: r.kind, key: r.key.clone(), value: r.value.clone(), prev: r.prev })
        .collect()
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
    // The header is written by the flusher thread, maybe not yet.
    assert!(fs.file_size(&path).unwrap() <= SEGMENT_HEADER_LEN, "appends must still be buffered");

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
fn full_buffers_reach_the_file_in_order_without_an_explicit_flush() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 100)).unwrap();
    let path = segment_file(dir.path(), SegmentId(1));
    // Each record fills the buffer, which goes to the flusher thread: readable while in flight.
    let first = append(&log, &[put(1, "k", &[7; 200])]);
    assert_eq!(&log.read(&first[0], b"k").unwrap()[..], &[7; 200]);
    let second = append(&log, &[put(2, "l", &[8; 200])]);
    assert_eq!(&log.read(&second[0], b"l").unwrap()[..], &[8; 200]);
    assert_eq!(log.head().offset, second[0].offset + u64::from(second[0].len));
    // Both buffers may still be on their way; the flush waits for them, in order.
    log.flush_buffer().unwrap();
    let end = second[0].offset + u64::from(second[0].len);
    assert_eq!(fs.file_size(&path).unwrap(), end);
    assert_eq!(log.bytes_written(), end);
    assert_eq!(&log.read(&first[0], b"k").unwrap()[..], &[7; 200]);
}

#[test]
fn a_failed_background_write_poisons_the_log_when_it_lands() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjectingFileSystem::new(os());
    let log = ValueLog::open(Arc::new(faults.clone()), dir.path(), opts(1 << 20, 100)).unwrap();
    // The segment's header is the first append; the record's buffer, the second, fails on the
    // flusher thread, and the next flush, sync or full buffer learns it.
    faults.inject(Fault::new(FaultKind::Append).after(1));
    let lost = append(&log, &[put(1, "k", &[7; 200])]);
    assert!(matches!(log.sync(), Err(Error::Io(_))));
    assert!(matches!(log.sync(), Err(Error::Poisoned(_))));
    assert!(matches!(log.flush_buffer(), Err(Error::Poisoned(_))));
    let refs = [RecordRef::put(SequenceNumber(2), b"l", b"x")];
    assert!(matches!(log.append_batch(&refs), Err(Error::Poisoned(_))));
    // Reads go on: the record is still served from memory.
    assert_eq!(&log.read(&lost[0], b"k").unwrap()[..], &[7; 200]);
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
    let torn_len: u32 = torn.iter().map(|r| record::record_len(r.key.len(), r.value.len(), false).unwrap()).sum();
    let first_len = u64::from(record::record_len(1, 50, false).unwrap());
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
fn a_failed_background_seal_fails_the_next_sync_and_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjectingFileSystem::new(os());
    let log = ValueLog::open(Arc::new(faults.clone()), dir.path(), opts(200, 1 << 16)).unwrap();
    append(&log, &numbered_batch(1, 1, 100));
    log.flush_buffer().unwrap();
    append(&log, &numbered_batch(2, 1, 100));
    // The next batch does not fit: its rotation leaves the sealed segment's fsync (and the
    // previous rotation's fsyncs, if still on their way) to the flusher thread, where the
    // injected fault fails one of them.
    faults.inject(FaultKind::Sync);
    let refs = [RecordRef::put(SequenceNumber(3), b"k", &[0; 100])];
    let rotated = log.append_batch(&refs);
    assert!(rotated.is_err() || log.sync().is_err(), "the failed fsync must surface before a sync succeeds");
    assert!(matches!(log.append_batch(&refs), Err(Error::Poisoned(_))));
    assert!(matches!(log.sync(), Err(Error::Poisoned(_))));
}

#[test]
fn a_crash_during_rotation_leaves_a_headerless_newest_file_and_a_torn_tail_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let (kept, torn);
    {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
        kept = append(&log, &[put(1, "a", b"one")]);
        torn = append(&log, &[put(2, "b", &[9; 60])]);
        log.sync().unwrap();
    }
    // The rotation had created the next file (empty) and not yet made the sealed segment
    // durable: the crash cut the sealed segment's last record.
    let sealed = segment_file(dir.path(), SegmentId(1));
    fs.truncate(&sealed, torn[0].offset + 7).unwrap();
    let newest = segment_file(dir.path(), SegmentId(2));
    fs.create(&newest).unwrap().sync().unwrap();

    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let (replayed, end) = replay_all(&log, LogPosition::default()).unwrap();
    assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), vec![vec![put(1, "a", b"one")]]);
    assert_eq!(end, LogPosition { segment: SegmentId(1), offset: kept[0].offset + u64::from(kept[0].len) });
    assert_eq!(fs.file_size(&sealed).unwrap(), end.offset, "the torn tail is cut");
    assert!(!fs.exists(&newest), "the headerless file is removed");
}

#[test]
fn the_logical_length_read_without_the_writer_lock_matches_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1000, 300)).unwrap();
    let total = |log: &ValueLog| log.segments().iter().map(|s| s.len).sum::<u64>();
    assert_eq!(log.logical_len(), 0);
    for seq in 1..40 {
        // Buffered, in flight, rotated: every state the active segment's bytes pass through.
        append(&log, &numbered_batch(seq, 1, 60 + seq as usize * 7));
        assert_eq!(log.logical_len(), total(&log), "after append {seq}");
        if seq % 9 == 0 {
            log.flush_buffer().unwrap();
            assert_eq!(log.logical_len(), total(&log), "after flush {seq}");
        }
    }
    assert!(log.segments().len() > 3);
    log.sync().unwrap();
    assert_eq!(log.logical_len(), total(&log));
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

/// Three generations of key "k" and one of "j", each generation a batch whose records point at
/// the previous one: what the hash index writes. Returns the batches as appended and their
/// pointers.
fn append_chain(log: &ValueLog) -> (Vec<Vec<Rec>>, Vec<Vec<ValuePointer>>) {
    let mut batches = Vec::new();
    let mut pointers: Vec<Vec<ValuePointer>> = Vec::new();
    let first = vec![put(1, "k", b"v1"), put(2, "j", b"j1")];
    pointers.push(append(log, &first));
    batches.push(first);
    let second = vec![put(3, "k", &[2; 150]).with_prev(pointers[0][0]), put(4, "x", b"no chain")];
    pointers.push(append(log, &second));
    batches.push(second);
    let third = vec![del(5, "k").with_prev(pointers[1][0]), del(6, "j").with_prev(pointers[0][1])];
    pointers.push(append(log, &third));
    batches.push(third);
    (batches, pointers)
}

#[test]
fn prevs_survive_read_record_replay_and_scan() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let (batches, pointers) = {
        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
        let (batches, pointers) = append_chain(&log);
        for flushed in [false, true] {
            if flushed {
                log.flush_buffer().unwrap();
            }
            for (batch, ptrs) in batches.iter().zip(&pointers) {
                for (rec, ptr) in batch.iter().zip(ptrs) {
                    let read = log.read_record(ptr).unwrap();
                    assert_eq!((read.prev, &read.value, read.kind), (rec.prev, &rec.value, rec.kind), "{ptr:?}");
                    assert_eq!(&log.read(ptr, &rec.key).unwrap()[..], rec.value.as_slice());
                }
            }
        }
        // The predecessor's bytes count in the record's length: a delete's pointer covers them.
        assert_eq!(pointers[2][0].len as usize, RECORD_HEADER_LEN + PREV_POINTER_LEN + 1);
        log.sync().unwrap();
        (batches, pointers)
    };

    // Walking the chain back from the newest version of "k" visits every version, newest first.
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let mut walked = Vec::new();
    let mut at = Some(pointers[2][0]);
    while let Some(ptr) = at {
        let rec = log.read_record(&ptr).unwrap();
        walked.push(rec.seq.0);
        at = rec.prev;
    }
    assert_eq!(walked, vec![5, 3, 1]);

    let (replayed, _) = replay_all(&log, LogPosition::default()).unwrap();
    assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), batches);
    let replayed_ptrs: Vec<Vec<ValuePointer>> =
        replayed.iter().map(|b| b.iter().map(|r| r.pointer).collect()).collect();
    assert_eq!(replayed_ptrs, pointers);

    let scanned: Vec<Option<ValuePointer>> = scan_segment(fs.as_ref(), &segment_file(dir.path(), SegmentId(1)), &[])
        .unwrap()
        .map(|r| r.unwrap().1.prev)
        .collect();
    assert_eq!(scanned, batches.concat().iter().map(|r| r.prev).collect::<Vec<_>>());
}

#[test]
fn new_segments_are_written_as_format_version_3() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    append(&log, &[put(1, "a", b"1")]);
    log.sync().unwrap();
    let path = segment_file(dir.path(), SegmentId(1));
    let bytes = fs.read_all(&path).unwrap();
    assert_eq!(bytes[8..12], 3u32.to_le_bytes());
    assert_eq!(scan_segment(fs.as_ref(), &path, &[]).unwrap().format_version(), 3);
}

#[test]
fn prefetched_values_of_records_with_prevs_are_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let (batches, pointers) = append_chain(&log);
    log.flush_buffer().unwrap();
    let recs = batches.concat();
    let ptrs = pointers.concat();
    let mut arena = Vec::new();
    let mut requests = Vec::new();
    for (rec, ptr) in recs.iter().zip(&ptrs) {
        requests.push(prefetch::ValueRequest { pointer: *ptr, key: arena.len()..arena.len() + rec.key.len() });
        arena.extend_from_slice(&rec.key);
    }
    let indices: Vec<usize> = (0..requests.len()).collect();
    let arena = Bytes::from(arena);
    for path in [prefetch::ReadPath::PageCache, prefetch::ReadPath::Direct] {
        let values = log.read_values(&arena, &requests, &indices, path);
        for (rec, value) in recs.iter().zip(values) {
            assert_eq!(value.as_deref(), Some(rec.value.as_slice()), "{path:?} {rec:?}");
        }
    }
}

#[test]
fn values_read_in_memory_are_the_values_and_bad_requests_read_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
    let ptrs = append(&log, &[put(1, "a", &[1; 1100]), put(2, "b", &[2; 30]), put(3, "c", &[3; 1100])]);
    log.flush_buffer().unwrap();
    // Still in the write buffer: not in the file yet.
    let unflushed = append(&log, &[put(4, "d", b"later")])[0];
    let gone = ValuePointer { segment: SegmentId(99), ..ptrs[0] };
    let keys = Bytes::from_static(b"abcdx");
    let request = |pointer, key: usize| prefetch::ValueRequest { pointer, key: key..key + 1 };
    let requests = [
        request(ptrs[0], 0),
        request(ptrs[1], 4), // the record belongs to "b", not "x"
        request(ptrs[2], 2),
        request(unflushed, 3),
        request(gone, 0),
        request(ptrs[1], 1),
    ];
    let values = log.read_values_in_memory(&keys, &requests, &[0, 1, 2, 3, 4, 5]);
    let expected: [Option<&[u8]>; 6] = [Some(&[1; 1100]), None, Some(&[3; 1100]), None, None, Some(&[2; 30])];
    assert_eq!(values.iter().map(Option::as_deref).collect::<Vec<_>>(), expected);
    // The unflushed value is still readable the plain way, which is what the cursor falls back to.
    assert_eq!(log.read(&unflushed, b"d").unwrap(), &b"later"[..]);
}

#[test]
fn a_flipped_prev_byte_is_corruption_not_truncation() {
    for delta in
        [RECORD_HEADER_LEN as u64, RECORD_HEADER_LEN as u64 + 9, (RECORD_HEADER_LEN + PREV_POINTER_LEN) as u64 - 1]
    {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let path = segment_file(dir.path(), SegmentId(1));
        let pointers;
        {
            let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
            (_, pointers) = append_chain(&log);
            log.sync().unwrap();
        }
        let target = pointers[1][0];
        let len_before = fs.file_size(&path).unwrap();
        flip_byte(fs.as_ref(), &path, target.offset + delta);

        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
        match replay_all(&log, LogPosition::default()) {
            Err(Error::Corruption { file, offset, reason }) => {
                assert_eq!((file, offset), (path.clone(), target.offset), "delta {delta}");
                assert!(reason.contains("body checksum"), "delta {delta}: {reason}");
            }
            other => panic!("delta {delta}: expected corruption, got {other:?}"),
        }
        assert_eq!(fs.file_size(&path).unwrap(), len_before, "corruption must not be truncated away");
        assert!(log.read_record(&target).unwrap_err().is_corruption());
        assert!(log.read(&target, b"k").unwrap_err().is_corruption());
    }
}

#[test]
fn a_torn_record_with_prev_at_the_tail_is_a_torn_tail() {
    let first = [put(1, "key", b"one")];
    // Cut points inside the fixed header, inside the predecessor, inside the key and the value.
    let cuts = [3u64, 26, 30, 45, 47, 60];
    for cut in cuts {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let path = segment_file(dir.path(), SegmentId(1));
        let complete_end;
        {
            let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
            let ptrs = append(&log, &first);
            complete_end = log.head();
            let torn = [put(2, "key", &[7; 40]).with_prev(ptrs[0])];
            let torn_ptr = append(&log, &torn)[0];
            assert!(cut < u64::from(torn_ptr.len));
            log.sync().unwrap();
        }
        fs.truncate(&path, complete_end.offset + cut).unwrap();

        let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1 << 16)).unwrap();
        let (replayed, end) = replay_all(&log, LogPosition::default()).unwrap();
        assert_eq!(replayed.iter().map(|b| as_recs(b)).collect::<Vec<_>>(), vec![first.to_vec()], "cut {cut}");
        assert_eq!(end, complete_end, "cut {cut}");
        assert_eq!(fs.file_size(&path).unwrap(), complete_end.offset, "cut {cut}");
    }
}

/// A version-1 segment file holding `records` (encoded by this code), as the previous release
/// would have left it if the records carry no predecessor.
fn write_v1_segment(fs: &dyn FileSystem, dir: &Path, id: SegmentId, records: &[RecordRef<'_>]) -> Vec<ValuePointer> {
    let mut bytes = record::encode_segment_header_version(id, 1).to_vec();
    let mut pointers = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        let offset = bytes.len() as u64;
        let len = record::encode_record(&mut bytes, rec, i + 1 == records.len());
        pointers.push(ValuePointer { segment: id, offset, len });
    }
    let mut file = fs.create(&segment_file(dir, id)).unwrap();
    file.append(&bytes).unwrap();
    file.sync().unwrap();
    pointers
}

#[test]
fn version_1_segments_are_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let recs = [RecordRef::put(SequenceNumber(1), b"a", b"old"), RecordRef::delete(SequenceNumber(2), b"b")];
    let pointers = write_v1_segment(fs.as_ref(), dir.path(), SegmentId(1), &recs);
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    let (replayed, _) = replay_all(&log, LogPosition::default()).unwrap();
    assert_eq!(as_recs(&replayed[0]), vec![put(1, "a", b"old"), del(2, "b")]);
    assert_eq!(&log.read(&pointers[0], b"a").unwrap()[..], b"old");
    assert_eq!(log.read_record(&pointers[1]).unwrap().prev, None);
    // New writes go to a version-2 segment and may point back into the version-1 one.
    let new = append(&log, &[put(3, "a", b"new").with_prev(pointers[0])]);
    assert_eq!(new[0].segment, SegmentId(2));
    assert_eq!(log.read_record(&new[0]).unwrap().prev, Some(pointers[0]));
}

#[test]
fn a_version_1_segment_with_the_prev_flag_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let earlier = ValuePointer { segment: SegmentId(1), offset: SEGMENT_HEADER_LEN, len: 40 };
    let recs = [
        RecordRef::put(SequenceNumber(1), b"a", &[1; 13]),
        RecordRef::put(SequenceNumber(2), b"a", b"x").with_prev(Some(earlier)),
    ];
    let pointers = write_v1_segment(fs.as_ref(), dir.path(), SegmentId(1), &recs);
    assert_eq!(pointers[0], earlier);
    let path = segment_file(dir.path(), SegmentId(1));
    let len_before = fs.file_size(&path).unwrap();

    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    match replay_all(&log, LogPosition::default()) {
        Err(Error::Corruption { file, offset, reason }) => {
            assert_eq!((file, offset), (path.clone(), pointers[1].offset));
            assert!(reason.contains("version-1"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(fs.file_size(&path).unwrap(), len_before, "the last segment must not be truncated");
    assert!(log.read_record(&pointers[1]).unwrap_err().is_corruption());
    let scanned: Vec<_> = scan_segment(fs.as_ref(), &path, &[]).unwrap().collect();
    assert!(
        matches!(scanned.as_slice(), [Ok(_), Err(Error::Corruption { offset, .. })] if *offset == pointers[1].offset)
    );
}

#[test]
fn a_prev_that_is_not_before_the_batch_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = ValueLog::open(os(), dir.path(), opts(1 << 20, 1024)).unwrap();
    // Before the first segment exists nothing can precede the batch in it.
    let ahead = ValuePointer { segment: SegmentId(1), offset: SEGMENT_HEADER_LEN, len: 30 };
    let refs = [RecordRef::put(SequenceNumber(1), b"k", b"v").with_prev(Some(ahead))];
    assert!(matches!(log.append_batch(&refs), Err(Error::InvalidArgument(_))));

    let first = append(&log, &[put(1, "k", b"v")]);
    let head = log.head();
    let bad = [
        ValuePointer { offset: head.offset, ..first[0] }, // the next record's own position
        ValuePointer { len: first[0].len + 1, ..first[0] }, // runs past the head
        ValuePointer { segment: SegmentId(2), ..first[0] }, // a segment not yet written
        ValuePointer { offset: 0, ..first[0] },           // the segment header
        ValuePointer { len: RECORD_HEADER_LEN as u32 - 1, ..first[0] }, // shorter than a record
    ];
    for prev in bad {
        // The bad record comes second: the first must not be left behind either.
        let refs = [
            RecordRef::put(SequenceNumber(2), b"k", b"w").with_prev(Some(first[0])),
            RecordRef::put(SequenceNumber(3), b"k", b"x").with_prev(Some(prev)),
        ];
        assert!(matches!(log.append_batch(&refs), Err(Error::InvalidArgument(_))), "{prev:?}");
        assert_eq!(log.head(), head, "{prev:?}");
    }
    // The log is not poisoned by a refused batch.
    let ok = append(&log, &[put(2, "k", b"w").with_prev(first[0])]);
    assert_eq!(log.read_record(&ok[0]).unwrap().prev, Some(first[0]));
}

/// A compacted segment keeps its records' bytes as they were, batch-end flags and checksums
/// included (a compacted segment is never replayed), sorted by key, and every kept pointer reads
/// its value through the offset map.
#[test]
fn a_compacted_segment_keeps_its_records_bytes_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os();
    let log = ValueLog::open(fs.clone(), dir.path(), opts(1 << 20, 1024)).unwrap();
    // One batch of three: only its last record carries the batch-end flag.
    let ptrs = append(&log, &[put(1, "c", &[3; 700]), put(2, "a", &[1; 900]), put(3, "b", &[2; 800])]);
    log.seal_active().unwrap();
    let path = segment_file(dir.path(), SegmentId(1));
    let original = std::fs::read(&path).unwrap();
    let bytes_of = |file: &[u8], at: u64, len: u32| file[at as usize..(at + u64::from(len)) as usize].to_vec();

    // Keep "c" and "a" (dropping "b"), as a scan that found them live would hand them over.
    let mut kept = KeptRecords::default();
    let mut scan = scan_segment(fs.as_ref(), &path, &[]).unwrap();
    while let Some(item) = scan.next_kept(|_, key, _| Ok(key != b"b"), |rec, id| kept.push(rec, id)) {
        item.unwrap();
    }
    assert_eq!(kept.len(), 2);
    let mut file = log.begin_compacted(SegmentId(1)).unwrap();
    file.push(kept).unwrap();
    file.finish().unwrap();
    log.install_compacted(SegmentId(1)).unwrap();

    let compacted = std::fs::read(&path).unwrap();
    let header = SEGMENT_HEADER_LEN;
    // "a" first (sorted by key), then "c"; each the original record's bytes, flags included.
    let a = bytes_of(&original, ptrs[1].offset, ptrs[1].len);
    let c = bytes_of(&original, ptrs[0].offset, ptrs[0].len);
    assert_eq!(bytes_of(&compacted, header, ptrs[1].len), a);
    assert_eq!(bytes_of(&compacted, header + u64::from(ptrs[1].len), ptrs[0].len), c);
    assert_eq!(c[17] & FLAG_BATCH_END, 0, "the first record of the batch had no batch-end flag");
    assert_eq!(&log.read(&ptrs[1], b"a").unwrap()[..], &[1; 900][..]);
    assert_eq!(&log.read(&ptrs[0], b"c").unwrap()[..], &[3; 700][..]);
    assert!(log.read(&ptrs[2], b"b").unwrap_err().is_corruption(), "a dropped record is gone");
}
