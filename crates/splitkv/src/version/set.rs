//! [`VersionSet`]: the owner of the MANIFEST and of the current [`Version`].
//!
//! Publish protocol (what makes a change durable before anyone sees it):
//! 1. fill in the counters, build the new state in memory and check it for consistency;
//! 2. append the edit as one MANIFEST record and fsync the MANIFEST;
//! 3. only then install the new `Version` and counters.
//!
//! A failed step 1 or 2 installs nothing. After a failed write the MANIFEST's tail is unknown, so
//! the next edit starts a fresh MANIFEST rather than appending after possibly torn bytes (the
//! caller is expected to poison the database anyway).
//!
//! A fresh MANIFEST (at creation, on the first edit after recovery, after a failed write, and when
//! the current one outgrows its size limit) is started by writing a snapshot of the whole new
//! state as its first record, fsyncing it, then switching `CURRENT` (`CURRENT.tmp`, fsync,
//! rename, fsync the directory). The superseded MANIFEST is removed only after that. Recovery
//! never appends to the MANIFEST it read, so a torn tail left by a crash is never followed by
//! new records.
//!
//! Segment bookkeeping within one edit applies in this order: added segments, garbage, removed
//! segments. Garbage reported for a segment that no longer exists is dropped (a flush or
//! compaction may report pointers into a segment that GC removed meanwhile).
//!
//! Thread-safety: `&mut self` for every change; callers hold one lock around edits. Readers take
//! an `Arc<Version>` from [`VersionSet::current`] and keep it as long as they need its files.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use crate::error::{Error, Result};
use crate::filenames::manifest_file;
use crate::fs::FileSystem;
use crate::types::{FileNumber, InternalKey, LogPosition, SegmentId, SequenceNumber};

use super::builder::VersionBuilder;
use super::manifest::{read_current, read_records, write_current, ManifestWriter};
use super::{FileMetaData, GarbageSurvey, SegmentMeta, Version, VersionEdit};

/// MANIFEST size beyond which the next edit starts a new MANIFEST.
pub const DEFAULT_MAX_MANIFEST_SIZE: u64 = 64 << 20;

/// The durable state besides the levels, kept together so an edit can be tried on a copy.
#[derive(Clone, Debug)]
struct Counters {
    next_file_number: u64,
    last_sequence: SequenceNumber,
    log_head: LogPosition,
    segments: BTreeMap<SegmentId, SegmentMeta>,
    compact_pointers: Vec<Option<InternalKey>>,
}

impl Counters {
    fn new(num_levels: usize) -> Counters {
        Counters {
            next_file_number: 1,
            last_sequence: SequenceNumber(0),
            log_head: LogPosition::default(),
            segments: BTreeMap::new(),
            compact_pointers: vec![None; num_levels],
        }
    }

    /// Applies everything in `edit` except the file changes.
    fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        if let Some(head) = edit.log_head {
            self.log_head = head;
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = n;
        }
        if let Some(seq) = edit.last_sequence {
            self.last_sequence = seq;
        }
        let num_levels = self.compact_pointers.len();
        for (level, key) in &edit.compact_pointers {
            let slot = self
                .compact_pointers
                .get_mut(*level)
                .ok_or_else(|| format!("compact pointer for level {level} beyond the {num_levels} levels"))?;
            *slot = Some(key.clone());
        }
        for &id in &edit.added_segments {
            if self.segments.insert(id, SegmentMeta::default()).is_some() {
                return Err(format!("adds value-log segment {id}, which already exists"));
            }
        }
        for &(id, bytes) in &edit.segment_garbage {
            if let Some(meta) = self.segments.get_mut(&id) {
                meta.garbage_bytes = meta.garbage_bytes.saturating_add(bytes);
            }
        }
        for survey in &edit.garbage_surveys {
            if let Some(meta) = self.segments.get_mut(&survey.segment) {
                meta.garbage_bytes = survey.garbage_bytes;
                meta.survey_horizon = survey.horizon;
            }
        }
        for &(id, start, end) in &edit.skipped_ranges {
            if let Some(meta) = self.segments.get_mut(&id) {
                meta.add_skipped(start, end);
            }
        }
        for id in &edit.removed_segments {
            if self.segments.remove(id).is_none() {
                return Err(format!("removes value-log segment {id}, which does not exist"));
            }
        }
        Ok(())
    }
}

/// See [`VersionSet::tables_pointing_into`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TablesPointingInto {
    /// A table of the current version does.
    pub current: bool,
    /// A table of an older version that a reader (a cursor, a point read, a running
    /// compaction) still holds does.
    pub older: bool,
}

/// The current version, the counters, and the MANIFEST that makes changes to them durable.
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    current: Arc<Version>,
    // Every installed version that may still be referenced; pruned in `live_files`.
    installed: Vec<Weak<Version>>,
    counters: Counters,
    manifest_number: FileNumber,
    // `None` until the first edit after recovery, and after a failed write.
    manifest: Option<ManifestWriter>,
    // Size of the snapshot that opens the current MANIFEST, so a huge state does not roll over
    // on every edit.
    manifest_snapshot_len: u64,
    max_manifest_size: u64,
    manifest_bytes_written: u64,
}

impl VersionSet {
    /// Creates the version state of a new, empty database in `dir`: writes `MANIFEST-000001`
    /// holding a snapshot edit, syncs it and points `CURRENT` at it. Refuses a directory that
    /// already has a `CURRENT`, so an existing database is never overwritten.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, num_levels: usize) -> Result<VersionSet> {
        if num_levels == 0 {
            return Err(Error::InvalidArgument("a database needs at least one level".into()));
        }
        fs.create_dir_all(dir)?;
        let current = crate::filenames::current_file(dir);
        if fs.exists(&current) {
            return Err(Error::InvalidArgument(format!("a database already exists at {}", dir.display())));
        }
        let mut set = VersionSet::with_state(fs, dir, Version::empty(num_levels), Counters::new(num_levels));
        set.log_and_apply(VersionEdit::default())?;
        Ok(set)
    }

    /// Rebuilds the state from the MANIFEST that `CURRENT` names.
    ///
    /// A torn final record is ignored (it was never acknowledged). A damaged record, an edit that
    /// does not decode, an edit inconsistent with the state before it, or a missing MANIFEST is
    /// [`Error::Corruption`]. The MANIFEST read is never appended to: the first edit after
    /// recovery starts a new one.
    pub fn recover(fs: Arc<dyn FileSystem>, dir: &Path, num_levels: usize) -> Result<VersionSet> {
        if num_levels == 0 {
            return Err(Error::InvalidArgument("a database needs at least one level".into()));
        }
        let manifest_number = read_current(fs.as_ref(), dir)?;
        let path = manifest_file(dir, manifest_number);
        if !fs.exists(&path) {
            return Err(Error::corruption(
                crate::filenames::current_file(dir),
                0,
                format!("CURRENT names {}, which does not exist", path.display()),
            ));
        }
        let empty = Version::empty(num_levels);
        let mut builder = VersionBuilder::new(&empty);
        let mut counters = Counters::new(num_levels);
        let (mut saw_next_file, mut saw_last_sequence, mut saw_log_head) = (false, false, false);
        let end = read_records(fs.as_ref(), &path, |offset, payload| {
            let corrupt = |reason: String| Error::corruption(&path, offset, reason);
            let edit = VersionEdit::decode(payload).map_err(|e| corrupt(format!("undecodable version edit: {e}")))?;
            builder.apply(&edit).map_err(|r| corrupt(format!("inconsistent version edit: {r}")))?;
            counters.apply(&edit).map_err(|r| corrupt(format!("inconsistent version edit: {r}")))?;
            saw_next_file |= edit.next_file_number.is_some();
            saw_last_sequence |= edit.last_sequence.is_some();
            saw_log_head |= edit.log_head.is_some();
            Ok(())
        })?;
        let missing =
            [(saw_next_file, "next file number"), (saw_last_sequence, "last sequence"), (saw_log_head, "log head")]
                .into_iter()
                .find_map(|(seen, what)| (!seen).then_some(what));
        if let Some(what) = missing {
            return Err(Error::corruption(&path, end.valid_len, format!("MANIFEST never records the {what}")));
        }
        let version = builder
            .finish()
            .map_err(|r| Error::corruption(&path, end.valid_len, format!("replayed state is inconsistent: {r}")))?;

        let mut set = VersionSet::with_state(fs, dir, version, counters);
        set.manifest_number = manifest_number;
        set.mark_file_number_used(manifest_number);
        let max_table = set.current.all_files().map(|(_, f)| f.number).max();
        if let Some(n) = max_table {
            set.mark_file_number_used(n);
        }
        Ok(set)
    }

    fn with_state(fs: Arc<dyn FileSystem>, dir: &Path, version: Version, counters: Counters) -> VersionSet {
        let current = Arc::new(version);
        VersionSet {
            fs,
            dir: dir.to_path_buf(),
            installed: vec![Arc::downgrade(&current)],
            current,
            counters,
            manifest_number: FileNumber(0),
            manifest: None,
            manifest_snapshot_len: 0,
            max_manifest_size: DEFAULT_MAX_MANIFEST_SIZE,
            manifest_bytes_written: 0,
        }
    }

    /// Makes `edit` durable, then installs the state it produces.
    ///
    /// The edit's `next_file_number` and `last_sequence` are raised to at least this set's
    /// counters. An inconsistent edit is [`Error::InvalidArgument`]; an I/O failure leaves the
    /// installed state unchanged and the durable MANIFEST in an unknown state (either with or
    /// without the record), which is why callers poison the database on any error here.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        let new_manifest = self.needs_new_manifest().then(|| self.new_file_number());
        for (_, file) in &edit.new_files {
            self.mark_file_number_used(file.number);
        }
        edit.next_file_number = Some(edit.next_file_number.unwrap_or(0).max(self.counters.next_file_number));
        edit.last_sequence = Some(edit.last_sequence.unwrap_or_default().max(self.counters.last_sequence));

        let version = self.current.apply(&edit).map_err(Error::InvalidArgument)?;
        let mut counters = self.counters.clone();
        counters.apply(&edit).map_err(Error::InvalidArgument)?;

        match new_manifest {
            Some(number) => {
                let snapshot = snapshot_edit(&version, &counters);
                self.start_manifest(number, &snapshot)?;
            }
            None => self.append_to_manifest(&edit)?,
        }

        self.current = Arc::new(version);
        self.installed.push(Arc::downgrade(&self.current));
        self.counters = counters;
        Ok(())
    }

    fn needs_new_manifest(&self) -> bool {
        match &self.manifest {
            None => true,
            Some(writer) => writer.len() >= self.max_manifest_size && writer.len() >= 2 * self.manifest_snapshot_len,
        }
    }

    fn append_to_manifest(&mut self, edit: &VersionEdit) -> Result<()> {
        let Some(writer) = self.manifest.as_mut() else {
            return Err(Error::InvalidArgument("no MANIFEST open for appending".into()));
        };
        let before = writer.len();
        let result = writer.add_record(&edit.encode()).and_then(|()| writer.sync());
        self.manifest_bytes_written += writer.len() - before;
        if result.is_err() {
            self.manifest = None;
        }
        result
    }

    /// Writes a new MANIFEST holding `snapshot`, makes it durable and switches `CURRENT` to it.
    fn start_manifest(&mut self, number: FileNumber, snapshot: &VersionEdit) -> Result<()> {
        // Whatever fails below, CURRENT may or may not name the new file, so the old writer must
        // not be appended to again: the next edit starts yet another MANIFEST.
        self.manifest = None;
        // A half-written MANIFEST is never named by CURRENT; the next open removes it.
        let path = manifest_file(&self.dir, number);
        let mut writer = ManifestWriter::create(self.fs.as_ref(), &path)?;
        let written = writer.add_record(&snapshot.encode()).and_then(|()| writer.sync());
        self.manifest_bytes_written += writer.len();
        written?;
        write_current(self.fs.as_ref(), &self.dir, number)?;

        let superseded = std::mem::replace(&mut self.manifest_number, number);
        self.manifest_snapshot_len = writer.len();
        self.manifest = Some(writer);
        if superseded != FileNumber(0) && superseded != number {
            // CURRENT no longer names it, so a failed removal leaves only a stray file.
            let _ = self.fs.remove(&manifest_file(&self.dir, superseded));
        }
        Ok(())
    }

    /// The installed version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.current.num_levels()
    }

    /// Hands out a file number never used before (not durable until the next edit).
    pub fn new_file_number(&mut self) -> FileNumber {
        let n = self.counters.next_file_number;
        self.counters.next_file_number += 1;
        FileNumber(n)
    }

    /// The next file number [`VersionSet::new_file_number`] would hand out.
    pub fn next_file_number(&self) -> u64 {
        self.counters.next_file_number
    }

    /// Makes sure `n` is never handed out.
    pub fn mark_file_number_used(&mut self, n: FileNumber) {
        self.counters.next_file_number = self.counters.next_file_number.max(n.0.saturating_add(1));
    }

    /// Largest sequence number recorded.
    pub fn last_sequence(&self) -> SequenceNumber {
        self.counters.last_sequence
    }

    /// Sets the last sequence (recorded by the next edit).
    pub fn set_last_sequence(&mut self, seq: SequenceNumber) {
        debug_assert!(seq >= self.counters.last_sequence, "last sequence must not go backwards");
        self.counters.last_sequence = seq;
    }

    /// Where value-log replay starts.
    pub fn log_head(&self) -> LogPosition {
        self.counters.log_head
    }

    /// The garbage that dropped value-log records add, per segment, leaving out the records a
    /// garbage survey of their segment has counted already (shadowed at or below its horizon).
    pub fn new_garbage(
        &self,
        dropped: impl IntoIterator<Item = (SegmentId, u64, SequenceNumber)>,
    ) -> Vec<(SegmentId, u64)> {
        let mut added: BTreeMap<SegmentId, u64> = BTreeMap::new();
        for (segment, bytes, shadowed_by) in dropped {
            if let Some(meta) = self.counters.segments.get(&segment) {
                if shadowed_by > meta.survey_horizon {
                    *added.entry(segment).or_default() += bytes;
                }
            }
        }
        added.into_iter().collect()
    }

    /// True if segment `id` exists in the log but no edit has recorded it yet. Every segment
    /// before the recorded head was recorded by the flush that moved the head past it, so one
    /// of those missing here was removed (GC may still be deleting its file), not new.
    pub fn is_unrecorded_segment(&self, id: SegmentId) -> bool {
        id >= self.counters.log_head.segment && !self.counters.segments.contains_key(&id)
    }

    /// Live value-log segments and their garbage.
    pub fn segments(&self) -> &BTreeMap<SegmentId, SegmentMeta> {
        &self.counters.segments
    }

    /// Where the next compaction of `level` starts, if one was recorded.
    pub fn compact_pointer(&self, level: usize) -> Option<&InternalKey> {
        self.counters.compact_pointers.get(level)?.as_ref()
    }

    /// Every level's compact pointer, level 0 first.
    pub fn compact_pointers(&self) -> &[Option<InternalKey>] {
        &self.counters.compact_pointers
    }

    /// Numbers of the SSTables of every version still alive: the current one and any held by a
    /// reader. Files outside this set may be deleted.
    pub fn live_files(&mut self) -> HashSet<FileNumber> {
        let mut live = HashSet::new();
        self.installed.retain(|weak| match weak.upgrade() {
            Some(version) => {
                live.extend(version.all_files().map(|(_, f)| f.number));
                true
            }
            None => false,
        });
        live
    }

    /// Whether a table of the current version, and of any older version a reader still holds,
    /// points into value-log segment `id` (by the tables' `log_refs`).
    pub fn tables_pointing_into(&mut self, id: SegmentId) -> TablesPointingInto {
        let points_into = |v: &Version| v.all_files().any(|(_, f)| f.log_refs.iter().any(|&(s, _)| s == id));
        let current = &self.current;
        let mut older = false;
        self.installed.retain(|weak| match weak.upgrade() {
            Some(version) => {
                older = older || (!Arc::ptr_eq(&version, current) && points_into(&version));
                true
            }
            None => false,
        });
        TablesPointingInto { current: points_into(current), older }
    }

    /// Number of the MANIFEST that `CURRENT` names.
    pub fn manifest_number(&self) -> FileNumber {
        self.manifest_number
    }

    /// Bytes appended to MANIFEST files by this set, for write-amplification statistics.
    pub fn manifest_bytes_written(&self) -> u64 {
        self.manifest_bytes_written
    }

    /// Sets the size beyond which the next edit starts a new MANIFEST.
    pub fn set_max_manifest_size(&mut self, bytes: u64) {
        self.max_manifest_size = bytes;
    }

    /// An edit that recreates the whole installed state from nothing.
    pub fn snapshot(&self) -> VersionEdit {
        snapshot_edit(&self.current, &self.counters)
    }
}

fn snapshot_edit(version: &Version, counters: &Counters) -> VersionEdit {
    VersionEdit {
        log_head: Some(counters.log_head),
        next_file_number: Some(counters.next_file_number),
        last_sequence: Some(counters.last_sequence),
        compact_pointers: counters
            .compact_pointers
            .iter()
            .enumerate()
            .filter_map(|(level, key)| Some((level, key.clone()?)))
            .collect(),
        deleted_files: Vec::new(),
        new_files: version.all_files().map(|(level, f)| (level, FileMetaData::clone(f))).collect(),
        added_segments: counters.segments.keys().copied().collect(),
        removed_segments: Vec::new(),
        segment_garbage: counters
            .segments
            .iter()
            .filter(|(_, meta)| meta.garbage_bytes > 0)
            .map(|(&id, meta)| (id, meta.garbage_bytes))
            .collect(),
        skipped_ranges: counters
            .segments
            .iter()
            .flat_map(|(&id, meta)| meta.skipped.iter().map(move |&(start, end)| (id, start, end)))
            .collect(),
        garbage_surveys: counters
            .segments
            .iter()
            .filter(|(_, meta)| meta.survey_horizon.0 > 0)
            .map(|(&id, meta)| GarbageSurvey {
                segment: id,
                garbage_bytes: meta.garbage_bytes,
                horizon: meta.survey_horizon,
            })
            .collect(),
        range_tombstones_added: version.range_tombstones().to_vec(),
        range_tombstones_removed: Vec::new(),
        partition_splits_added: version.partition_splits().to_vec(),
        partition_splits_removed: Vec::new(),
    }
}
