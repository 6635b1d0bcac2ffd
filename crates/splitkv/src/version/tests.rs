use std::collections::BTreeMap;
use std::path::Path;

use super::manifest::read_records;
use super::*;
use crate::error::Error;
use crate::filenames::{current_file, manifest_file};
use crate::fs::{FileSystem, OsFileSystem};
use crate::types::{LogPosition, SegmentId, ValueKind};

const LEVELS: usize = 4;

fn ikey(user_key: &str, seq: u64) -> InternalKey {
    InternalKey::new(user_key.as_bytes(), SequenceNumber(seq), ValueKind::Inline)
}

fn table(number: u64, smallest: &str, largest: &str) -> FileMetaData {
    FileMetaData {
        number: FileNumber(number),
        file_size: number * 100,
        smallest: ikey(smallest, 10),
        largest: ikey(largest, 5),
        num_entries: number,
        log_refs: Vec::new(),
        smallest_seq: SequenceNumber(5),
        largest_seq: SequenceNumber(10),
        range_clean_below: SequenceNumber(0),
    }
}

fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
    files.iter().map(|f| f.number.0).collect()
}

fn version_with(files: &[(usize, FileMetaData)]) -> Version {
    let mut edit = VersionEdit::default();
    for (level, meta) in files {
        edit.add_file(*level, meta.clone());
    }
    Version::empty(LEVELS).apply(&edit).unwrap()
}

fn os_fs() -> Arc<dyn FileSystem> {
    OsFileSystem::shared()
}

/// Everything recovery must reproduce, in comparable form.
#[derive(Debug, PartialEq)]
struct Observed {
    levels: Vec<Vec<FileMetaData>>,
    next_file_number: u64,
    last_sequence: SequenceNumber,
    log_head: LogPosition,
    segments: BTreeMap<SegmentId, SegmentMeta>,
    compact_pointers: Vec<Option<InternalKey>>,
}

fn observe(set: &VersionSet) -> Observed {
    let v = set.current();
    Observed {
        levels: (0..v.num_levels()).map(|l| v.files(l).iter().map(|f| FileMetaData::clone(f)).collect()).collect(),
        next_file_number: set.next_file_number(),
        last_sequence: set.last_sequence(),
        log_head: set.log_head(),
        segments: set.segments().clone(),
        compact_pointers: (0..v.num_levels()).map(|l| set.compact_pointer(l).cloned()).collect(),
    }
}

/// Applies a flush, a compaction with a trivial move, and segment churn with garbage.
fn apply_history(set: &mut VersionSet) {
    let mut flush = VersionEdit::default();
    let n = set.new_file_number();
    flush.add_file(0, table(n.0, "a", "m"));
    flush.add_segment(SegmentId(1));
    flush.add_segment(SegmentId(2));
    flush.log_head = Some(LogPosition { segment: SegmentId(1), offset: 4096 });
    set.set_last_sequence(SequenceNumber(100));
    set.log_and_apply(flush).unwrap();

    let mut flush2 = VersionEdit::default();
    let n2 = set.new_file_number();
    flush2.add_file(0, table(n2.0, "k", "z"));
    flush2.add_garbage(SegmentId(1), 700);
    flush2.log_head = Some(LogPosition { segment: SegmentId(2), offset: 10 });
    set.set_last_sequence(SequenceNumber(250));
    set.log_and_apply(flush2).unwrap();

    let mut compaction = VersionEdit::default();
    compaction.delete_file(0, n);
    compaction.delete_file(0, n2);
    let (o1, o2) = (set.new_file_number(), set.new_file_number());
    compaction.add_file(1, table(o2.0, "n", "z"));
    compaction.add_file(1, table(o1.0, "a", "m"));
    compaction.add_garbage(SegmentId(1), 300);
    compaction.add_garbage(SegmentId(2), 50);
    compaction.set_compact_pointer(0, ikey("z", 5));
    set.log_and_apply(compaction).unwrap();

    let mut moved = VersionEdit::default();
    moved.delete_file(1, o2);
    moved.add_file(2, table(o2.0, "n", "z"));
    moved.add_segment(SegmentId(3));
    moved.remove_segment(SegmentId(1));
    moved.add_garbage(SegmentId(1), 999); // dropped: the segment is removed in the same edit
    moved.add_garbage(SegmentId(9), 1); // dropped: no such segment
    set.log_and_apply(moved).unwrap();
}

#[test]
fn overlapping_files_expands_level0_ranges() {
    let v = version_with(&[
        (0, table(1, "a", "c")),
        (0, table(2, "b", "f")),
        (0, table(3, "e", "g")),
        (0, table(4, "x", "z")),
        (1, table(5, "a", "b")),
        (1, table(6, "d", "f")),
        (1, table(7, "h", "k")),
    ]);
    // [a, a] touches file 1 only directly, but 1 overlaps 2 and 2 overlaps 3.
    assert_eq!(numbers(&v.overlapping_files(0, Some(b"a"), Some(b"a"))), [1, 2, 3]);
    assert_eq!(numbers(&v.overlapping_files(0, Some(b"y"), None)), [4]);
    assert_eq!(numbers(&v.overlapping_files(0, None, None)), [1, 2, 3, 4]);
    assert!(v.overlapping_files(0, Some(b"h"), Some(b"w")).is_empty());
    // Deeper levels are not expanded; range ends are inclusive.
    assert_eq!(numbers(&v.overlapping_files(1, Some(b"b"), Some(b"d"))), [5, 6]);
    assert_eq!(numbers(&v.overlapping_files(1, Some(b"g"), Some(b"g"))), Vec::<u64>::new());
    assert_eq!(numbers(&v.overlapping_files(1, None, Some(b"e"))), [5, 6]);
    assert_eq!(numbers(&v.overlapping_files(1, Some(b"e"), None)), [6, 7]);
}

#[test]
fn candidates_search_level0_newest_first_then_one_file_per_level() {
    let v = version_with(&[
        (0, table(3, "a", "m")),
        (0, table(8, "c", "d")),
        (0, table(9, "k", "z")),
        (1, table(4, "a", "e")),
        (1, table(5, "f", "p")),
        (2, table(6, "a", "z")),
        (3, table(7, "x", "z")),
    ]);
    assert_eq!(numbers(&v.files_for_key(b"l")), [9, 3, 5, 6]);
    assert_eq!(numbers(&v.files_for_key(b"c")), [8, 3, 4, 6]);
    assert_eq!(numbers(&v.files_for_key(b"y")), [9, 6, 7]);

    let mut visited = Vec::new();
    v.for_each_candidate(&crate::types::seek_key(b"l", SequenceNumber(50)), |level, file| {
        visited.push((level, file.number.0));
        visited.len() < 2
    });
    assert_eq!(visited, [(0, 9), (0, 3)]);
}

#[test]
fn candidates_respect_a_user_key_split_across_files() {
    // File 1 holds b@9..b@5 and file 2 holds b@4.., so a read at sequence 4 must go to file 2.
    let mut edit = VersionEdit::default();
    edit.add_file(1, FileMetaData { largest: ikey("b", 5), ..table(1, "a", "b") });
    edit.add_file(1, FileMetaData { smallest: ikey("b", 4), ..table(2, "b", "c") });
    let v = Version::empty(LEVELS).apply(&edit).unwrap();
    assert_eq!(numbers(&v.files_for_key(b"b")), [1]);
    assert_eq!(numbers(&v.files_for_key_at(b"b", SequenceNumber(4))), [2]);
}

#[test]
fn builder_rejects_inconsistent_edits() {
    let v = version_with(&[(1, table(1, "a", "c"))]);
    let mut missing = VersionEdit::default();
    missing.delete_file(1, FileNumber(2));
    assert!(v.apply(&missing).unwrap_err().contains("does not hold"));

    let mut overlap = VersionEdit::default();
    overlap.add_file(1, table(2, "b", "d"));
    assert!(v.apply(&overlap).unwrap_err().contains("overlaps"));

    let mut twice = VersionEdit::default();
    twice.add_file(1, table(1, "x", "y"));
    assert!(v.apply(&twice).unwrap_err().contains("already holds"));

    let mut deep = VersionEdit::default();
    deep.add_file(LEVELS, table(3, "a", "b"));
    assert!(v.apply(&deep).unwrap_err().contains("beyond"));

    let mut inverted = VersionEdit::default();
    inverted.add_file(2, table(4, "z", "a"));
    assert!(v.apply(&inverted).unwrap_err().contains("after largest"));
}

#[test]
fn apply_shares_untouched_levels() {
    let v = version_with(&[(1, table(1, "a", "c")), (2, table(2, "a", "c"))]);
    let mut edit = VersionEdit::default();
    edit.add_file(2, table(3, "d", "e"));
    let next = v.apply(&edit).unwrap();
    assert!(Arc::ptr_eq(&v.files(1)[0], &next.files(1)[0]));
    assert_eq!(numbers(next.files(2)), [2, 3]);
    assert_eq!(next.level_bytes(2), 500);
}

#[test]
fn create_apply_recover_gives_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = VersionSet::create(os_fs(), dir.path(), LEVELS).unwrap();
    assert_eq!(set.manifest_number(), FileNumber(1));
    assert!(matches!(VersionSet::create(os_fs(), dir.path(), LEVELS), Err(Error::InvalidArgument(_))));
    apply_history(&mut set);
    let before = observe(&set);
    assert_eq!(numbers(set.current().files(1)), [4]);
    assert_eq!(numbers(set.current().files(2)), [5]);
    assert_eq!(
        before.segments,
        BTreeMap::from([
            (SegmentId(2), SegmentMeta { garbage_bytes: 50, ..SegmentMeta::default() }),
            (SegmentId(3), SegmentMeta::default())
        ])
    );
    let written = set.manifest_bytes_written();
    assert_eq!(written, OsFileSystem.file_size(&manifest_file(dir.path(), FileNumber(1))).unwrap());
    drop(set);

    let mut recovered = VersionSet::recover(os_fs(), dir.path(), LEVELS).unwrap();
    assert_eq!(observe(&recovered), before);
    assert_eq!(recovered.manifest_number(), FileNumber(1));

    // The first edit after recovery goes to a fresh MANIFEST, and the old one is removed.
    let mut edit = VersionEdit::default();
    edit.add_garbage(SegmentId(3), 10);
    recovered.log_and_apply(edit).unwrap();
    let new_manifest = recovered.manifest_number();
    assert!(new_manifest.0 >= before.next_file_number);
    assert!(!OsFileSystem.exists(&manifest_file(dir.path(), FileNumber(1))));
    let after = observe(&recovered);
    drop(recovered);
    let again = VersionSet::recover(os_fs(), dir.path(), LEVELS).unwrap();
    assert_eq!(observe(&again), after);
    assert_eq!(again.segments()[&SegmentId(3)].garbage_bytes, 10);
    assert_eq!(again.manifest_number(), new_manifest);
}

#[test]
fn manifest_rolls_over_when_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = VersionSet::create(os_fs(), dir.path(), LEVELS).unwrap();
    set.set_max_manifest_size(256);
    let first = set.manifest_number();
    let mut manifests = vec![first];
    for i in 0..40u64 {
        let mut edit = VersionEdit::default();
        edit.add_segment(SegmentId(i + 1));
        set.log_and_apply(edit).unwrap();
        if set.manifest_number() != *manifests.last().unwrap() {
            manifests.push(set.manifest_number());
        }
    }
    assert!(manifests.len() > 2, "expected several roll-overs, saw {manifests:?}");
    for old in &manifests[..manifests.len() - 1] {
        assert!(!OsFileSystem.exists(&manifest_file(dir.path(), *old)));
    }
    let state = observe(&set);
    drop(set);
    let recovered = VersionSet::recover(os_fs(), dir.path(), LEVELS).unwrap();
    assert_eq!(observe(&recovered), state);
    assert_eq!(recovered.segments().len(), 40);
}

fn record_offsets(fs: &dyn FileSystem, path: &Path) -> Vec<u64> {
    let mut offsets = Vec::new();
    read_records(fs, path, |offset, _| {
        offsets.push(offset);
        Ok(())
    })
    .unwrap();
    offsets
}

#[test]
fn torn_last_record_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os_fs();
    let mut set = VersionSet::create(fs.clone(), dir.path(), LEVELS).unwrap();
    let mut edit = VersionEdit::default();
    edit.add_segment(SegmentId(1));
    set.log_and_apply(edit).unwrap();
    let acknowledged = observe(&set);
    let mut edit = VersionEdit::default();
    edit.add_segment(SegmentId(2));
    set.log_and_apply(edit).unwrap();
    drop(set);

    let path = manifest_file(dir.path(), FileNumber(1));
    let last = *record_offsets(fs.as_ref(), &path).last().unwrap();
    let full = fs.file_size(&path).unwrap();
    for cut in [full - 1, last + 3] {
        fs.truncate(&path, cut).unwrap();
        let recovered = VersionSet::recover(fs.clone(), dir.path(), LEVELS).unwrap();
        assert_eq!(observe(&recovered), acknowledged, "cut at {cut}");
    }
}

#[test]
fn flipped_byte_in_a_middle_record_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os_fs();
    let mut set = VersionSet::create(fs.clone(), dir.path(), LEVELS).unwrap();
    apply_history(&mut set);
    drop(set);
    let path = manifest_file(dir.path(), FileNumber(1));
    let offsets = record_offsets(fs.as_ref(), &path);
    let pristine = fs.read_all(&path).unwrap();
    // One flip in the record header, one in the payload.
    for delta in [1, 20] {
        let mut bytes = pristine.clone();
        bytes[offsets[2] as usize + delta] ^= 0x10;
        let mut f = fs.create(&path).unwrap();
        f.append(&bytes).unwrap();
        f.sync().unwrap();
        match VersionSet::recover(fs.clone(), dir.path(), LEVELS) {
            Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (path.clone(), offsets[2])),
            Err(other) => panic!("expected corruption, got {other}"),
            Ok(_) => panic!("expected corruption, recovery succeeded"),
        }
    }
}

#[test]
fn inconsistent_or_missing_manifest_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let fs = os_fs();
    let mut set = VersionSet::create(fs.clone(), dir.path(), LEVELS).unwrap();
    apply_history(&mut set);
    drop(set);

    // Append a well-formed record whose edit deletes a file that does not exist.
    let path = manifest_file(dir.path(), FileNumber(1));
    let end = fs.file_size(&path).unwrap();
    let mut bad = VersionEdit::default();
    bad.delete_file(3, FileNumber(999));
    let mut tail = manifest::ManifestWriter::create(fs.as_ref(), &dir.path().join("scratch")).unwrap();
    tail.add_record(&bad.encode()).unwrap();
    tail.sync().unwrap();
    let scratch = fs.read_all(&dir.path().join("scratch")).unwrap();
    let mut f = fs.open_append(&path).unwrap();
    f.append(&scratch[manifest::FILE_HEADER_LEN..]).unwrap();
    f.sync().unwrap();
    match VersionSet::recover(fs.clone(), dir.path(), LEVELS) {
        Err(Error::Corruption { offset, reason, .. }) => {
            assert_eq!(offset, end);
            assert!(reason.contains("does not hold"), "{reason}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }

    fs.remove(&path).unwrap();
    let err = VersionSet::recover(fs.clone(), dir.path(), LEVELS).map(|_| ()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(fs.exists(&current_file(dir.path())));
}

#[test]
fn live_files_keeps_files_of_versions_still_held() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = VersionSet::create(os_fs(), dir.path(), LEVELS).unwrap();
    let mut flush = VersionEdit::default();
    flush.add_file(0, table(10, "a", "b"));
    set.log_and_apply(flush).unwrap();
    let reader = set.current();

    let mut compaction = VersionEdit::default();
    compaction.delete_file(0, FileNumber(10));
    compaction.add_file(1, table(11, "a", "b"));
    set.log_and_apply(compaction).unwrap();
    assert!(set.next_file_number() > 11);

    assert_eq!(set.live_files(), [FileNumber(10), FileNumber(11)].into());
    drop(reader);
    assert_eq!(set.live_files(), [FileNumber(11)].into());
}

#[test]
fn failed_edit_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = VersionSet::create(os_fs(), dir.path(), LEVELS).unwrap();
    let before = observe(&set);
    let mut bad = VersionEdit::default();
    bad.add_segment(SegmentId(1));
    bad.delete_file(1, FileNumber(7));
    assert!(matches!(set.log_and_apply(bad), Err(Error::InvalidArgument(_))));
    assert_eq!(observe(&set).segments, before.segments);
    assert!(set.current().all_files().next().is_none());
}

/// Delegates to the OS file system but fails every file sync while `fail_syncs` is set.
struct FailingSyncs {
    inner: OsFileSystem,
    fail_syncs: Arc<std::sync::atomic::AtomicBool>,
}

struct FailingFile {
    inner: Box<dyn crate::fs::WritableFile>,
    fail_syncs: Arc<std::sync::atomic::AtomicBool>,
}

impl crate::fs::WritableFile for FailingFile {
    fn append(&mut self, data: &[u8]) -> crate::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> crate::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> crate::Result<()> {
        if self.fail_syncs.load(std::sync::atomic::Ordering::SeqCst) {
            self.inner.flush()?;
            return Err(std::io::Error::other("injected sync failure").into());
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for FailingSyncs {
    fn create(&self, path: &Path) -> crate::Result<Box<dyn crate::fs::WritableFile>> {
        Ok(Box::new(FailingFile { inner: self.inner.create(path)?, fail_syncs: self.fail_syncs.clone() }))
    }
    fn open_append(&self, path: &Path) -> crate::Result<Box<dyn crate::fs::WritableFile>> {
        Ok(Box::new(FailingFile { inner: self.inner.open_append(path)?, fail_syncs: self.fail_syncs.clone() }))
    }
    fn open(&self, path: &Path) -> crate::Result<Arc<dyn crate::fs::RandomAccessFile>> {
        self.inner.open(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> crate::Result<u64> {
        self.inner.file_size(path)
    }
    fn list(&self, dir: &Path) -> crate::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> crate::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove(&self, path: &Path) -> crate::Result<()> {
        self.inner.remove(path)
    }
    fn remove_dir(&self, dir: &Path) -> crate::Result<()> {
        self.inner.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> crate::Result<()> {
        self.inner.rename(from, to)
    }
    fn truncate(&self, path: &Path, len: u64) -> crate::Result<()> {
        self.inner.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> crate::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> crate::Result<Box<dyn crate::fs::FileLock>> {
        self.inner.lock(path)
    }
    fn map(&self, path: &Path, len: u64) -> crate::Result<Box<dyn crate::fs::MappedFile>> {
        self.inner.map(path, len)
    }
}

#[test]
fn failed_manifest_sync_installs_nothing_and_next_edit_starts_a_new_manifest() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let fail_syncs = Arc::new(AtomicBool::new(false));
    let fs: Arc<dyn FileSystem> = Arc::new(FailingSyncs { inner: OsFileSystem, fail_syncs: fail_syncs.clone() });
    let mut set = VersionSet::create(fs.clone(), dir.path(), LEVELS).unwrap();
    let mut edit = VersionEdit::default();
    edit.add_segment(SegmentId(1));
    set.log_and_apply(edit).unwrap();
    let before = observe(&set);

    fail_syncs.store(true, Ordering::SeqCst);
    let mut failing = VersionEdit::default();
    failing.add_segment(SegmentId(2));
    assert!(matches!(set.log_and_apply(failing), Err(Error::Io(_))));
    assert_eq!(observe(&set).segments, before.segments);
    assert_eq!(set.manifest_number(), FileNumber(1));

    fail_syncs.store(false, Ordering::SeqCst);
    let mut retry = VersionEdit::default();
    retry.add_segment(SegmentId(3));
    set.log_and_apply(retry).unwrap();
    assert_ne!(set.manifest_number(), FileNumber(1), "appending after a failed write must not happen");
    let after = observe(&set);
    drop(set);
    let recovered = VersionSet::recover(fs, dir.path(), LEVELS).unwrap();
    assert_eq!(observe(&recovered), after);
    assert_eq!(recovered.segments().keys().copied().collect::<Vec<_>>(), [SegmentId(1), SegmentId(3)]);
}

#[test]
fn dropping_tables_charges_their_log_references_from_metadata_alone() {
    let mut a = table(1, "a", "c");
    a.log_refs = vec![(SegmentId(2), 100), (SegmentId(5), 40)];
    let mut b = table(2, "d", "f");
    b.log_refs = vec![(SegmentId(5), 60)];
    let mut edit = VersionEdit::default();
    edit.add_file(1, a);
    edit.add_file(1, b);
    let version = Version::empty(LEVELS).apply(&edit).unwrap();
    let both = version.log_refs_of(&[(1, FileNumber(1)), (1, FileNumber(2))]);
    assert_eq!(both.into_iter().collect::<Vec<_>>(), vec![(SegmentId(2), 100), (SegmentId(5), 100)]);
    // A file the version does not hold (or not at that level) charges nothing.
    assert!(version.log_refs_of(&[(2, FileNumber(1)), (1, FileNumber(9))]).is_empty());
}
