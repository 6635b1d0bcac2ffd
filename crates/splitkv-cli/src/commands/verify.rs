//! `verify`: reads every byte the database depends on and reports each problem with its file and
//! offset.
//!
//! Four passes, the first three on the files directly under the directory lock:
//! 1. MANIFEST and SSTables: the MANIFEST is replayed (checksums, decodable and consistent edits);
//!    each `.sst` file is opened, [`splitkv::sstable::Table::verify`]ed (every block's checksum,
//!    key order, index separators, bloom filter, entry count) and iterated in full; the tables the
//!    MANIFEST lists must exist with the recorded size.
//! 2. Value log: every segment is scanned record by record (`scan_segment`: header and body
//!    checksums, lengths). A scan stops at the first damage in a segment, so at most one problem
//!    is reported per segment.
//! 3. Hash table (hash-index databases only): `HASHINDEX` is opened, which walks every chain
//!    (dangling links, cycles, slots in the wrong chain, damaged keys are corruption), and
//!    [`splitkv::index::hash::table::Table::check`]ed; no key may appear twice in a chain; every
//!    slot's record is read through the value log and must hold the slot's key (inline keys
//!    whole, long keys by prefix and hash), sequence number and kind. Slots whose key has a
//!    record past the log head are exempt (a note if wrong): opening replays that record and
//!    replaces the slot, so after a crash it may be torn or point at a record GC has since
//!    moved. A tombstone's delete record is garbage to GC, so a tombstone whose record GC has
//!    released is expected.
//! 4. Pointers: the database is opened read-only (which replays the value log past the head into
//!    memory and writes nothing) and iterated, which resolves every live value pointer with a
//!    validated read (record checksum, length and key). Skipped with `--files-only`.
//!
//! Tables and segments that the MANIFEST does not list are still checked; they are noted, not
//! counted as problems (a crash can leave such files behind and the engine ignores them). A torn
//! tail of the newest segment past the log head is a note too: recovery drops it.
//!
//! A database another process has open cannot be locked; then the passes check a read-only view
//! of it instead (`verify_live`): the tables and segments of that view (files the writer deleted
//! since are noted, not problems), against the newest MANIFEST's dead ranges (GC may punch them
//! meanwhile), and the view's pointers (a read that fails in a range the writer has released
//! since is a note). Pass 3 needs the table at rest: a hash-index database is not verified while
//! another process has it open.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::json;
use splitkv::filenames::{hash_table_file, lock_file, parse_file_name, segment_file, table_file, FileKind};
use splitkv::fs::FileLock;
use splitkv::index::hash::slot::{key_hash, Slot, SlotKey, SlotState};
use splitkv::iter::InternalIterator;
use splitkv::types::{parse_internal_key, FileNumber, SegmentId, ValueKind, ValuePointer};
use splitkv::version::VersionSet;
use splitkv::vlog::{scan_segment, zeros_between, RecordKind, ReplayedRecord, ValueLog, VlogOptions};
use splitkv::{Db, Error, Options, ReadOptions};

use super::dump::open_table;
use super::{hash, os_fs, print_json, stored_options, CliError, Exit, Output};

/// Most problems the pointer pass reports before giving up on a database that is badly damaged.
const MAX_POINTER_PROBLEMS: usize = 100;

/// One thing found wrong.
#[derive(Debug)]
struct Problem {
    file: PathBuf,
    offset: Option<u64>,
    reason: String,
}

impl Problem {
    /// A problem from an engine error met while checking `file`; corruption errors carry their
    /// own file and offset, which are more precise.
    fn from_error(e: Error, file: &Path) -> Problem {
        match e {
            Error::Corruption { file, offset, reason } => Problem { file, offset: Some(offset), reason },
            other => Problem { file: file.to_path_buf(), offset: None, reason: other.to_string() },
        }
    }

    fn at(file: &Path, reason: impl Into<String>) -> Problem {
        Problem { file: file.to_path_buf(), offset: None, reason: reason.into() }
    }
}

/// What was checked and what was found.
#[derive(Debug, Default)]
struct Report {
    problems: Vec<Problem>,
    notes: Vec<String>,
    tables: u64,
    table_entries: u64,
    segments: u64,
    records: u64,
    /// Hash-table slots checked (hash-index databases).
    hash_slots: Option<u64>,
    keys: Option<u64>,
}

/// Runs all passes and prints the report; [`Exit::ProblemsFound`] if anything is wrong.
pub fn run(dir: &Path, files_only: bool, out: Output) -> Result<Exit, CliError> {
    let options = stored_options(dir)?;
    let mut report = Report::default();
    match os_fs().lock(&lock_file(dir)) {
        Ok(lock) => verify_at_rest(dir, files_only, &options, lock, &mut report)?,
        Err(Error::Locked(_)) => verify_live(dir, files_only, &options, &mut report)?,
        Err(e) => return Err(e.into()),
    }
    print_report(dir, &report, out);
    Ok(if report.problems.is_empty() { Exit::Success } else { Exit::ProblemsFound })
}

/// The passes over a database nobody has open, holding its lock for the file passes.
fn verify_at_rest(
    dir: &Path,
    files_only: bool,
    options: &Options,
    lock: Box<dyn FileLock>,
    report: &mut Report,
) -> Result<(), CliError> {
    let fs = os_fs();
    let (mut tables, mut segments) = (Vec::new(), Vec::new());
    for name in fs.list(dir)? {
        match parse_file_name(&name) {
            Some(FileKind::Table(n)) => tables.push(n),
            Some(FileKind::Segment(id)) => segments.push(id),
            _ => {}
        }
    }
    tables.sort_unstable();
    segments.sort_unstable();

    let versions = match VersionSet::recover(fs.clone(), dir, options.num_levels) {
        Ok(v) => Some(v),
        Err(e) => {
            report.problems.push(Problem::from_error(e, &dir.join("CURRENT")));
            None
        }
    };
    if let Some(versions) = &versions {
        check_manifest_lists(dir, versions, &tables, &segments, report);
    }
    for &number in &tables {
        check_table(&table_file(dir, number), false, report);
    }
    let log_head = versions.as_ref().map(VersionSet::log_head);
    let hash_table = hash_table_file(dir);
    let is_hash = fs.exists(&hash_table);
    // Hashes of the keys written past the log head, which opening replays (hash databases only).
    let mut tail_keys = HashSet::new();
    for (i, &id) in segments.iter().enumerate() {
        // Only the newest segment may end in a torn record, and only past the log head: records
        // before the head are referenced by SSTables, so losing one is damage.
        let may_be_torn_from = match log_head {
            Some(head) if i + 1 == segments.len() && id >= head.segment => {
                Some(if id == head.segment { head.offset } else { 0 })
            }
            _ => None,
        };
        let skipped =
            versions.as_ref().and_then(|v| v.segments().get(&id)).map(|m| m.skipped.clone()).unwrap_or_default();
        let tail_from = match log_head {
            Some(head) if is_hash && id >= head.segment => Some(if id == head.segment { head.offset } else { 0 }),
            _ => None,
        };
        let mut on_record = |offset: u64, record: &ReplayedRecord| {
            if tail_from.is_some_and(|from| offset >= from) {
                tail_keys.insert(key_hash(&record.key));
            }
        };
        check_segment(&segment_file(dir, id), &skipped, may_be_torn_from, false, &mut on_record, report);
    }
    if is_hash {
        check_hash_table(dir, &hash_table, versions.as_ref(), &tail_keys, report);
    }
    // A read-only open of a hash database takes the lock itself.
    drop(lock);

    if files_only {
        report.notes.push("value pointers not resolved (--files-only)".into());
    } else if versions.is_none() {
        report.notes.push("value pointers not resolved: the MANIFEST cannot be read".into());
    } else {
        match Db::open_read_only(dir, options.clone()) {
            Ok(db) => check_pointers(&db, dir, report)?,
            Err(e) => report.problems.push(Problem::from_error(e, dir)),
        }
    }
    Ok(())
}

/// The passes over a read-only view of a database another process has open (see the module
/// header).
fn verify_live(dir: &Path, files_only: bool, options: &Options, report: &mut Report) -> Result<(), CliError> {
    let db = Db::open_read_only(dir, options.clone())?;
    report.notes.push(
        "another process has the database open: checked the files of a read-only view as of the start \
         (newer files are not checked)"
            .into(),
    );
    let (version, recorded, head) = {
        let set = db.catalog().lock();
        (set.current(), set.segments().clone(), set.log_head())
    };
    for (_, meta) in version.all_files() {
        check_table(&table_file(dir, meta.number), true, report);
    }
    // GC may have punched ranges since the view was taken; it records them first, so the newest
    // MANIFEST names every range punched by now (ranges are only ever added to).
    let newest = VersionSet::recover(os_fs(), dir, options.num_levels).ok();
    let ids: Vec<SegmentId> = db.stats().segments.iter().map(|s| SegmentId(s.id)).collect();
    for (i, &id) in ids.iter().enumerate() {
        let skipped = newest
            .as_ref()
            .and_then(|v| v.segments().get(&id))
            .or_else(|| recorded.get(&id))
            .map(|m| m.skipped.clone())
            .unwrap_or_default();
        // The newest segment of the view may be the one the writer is appending to.
        let may_be_torn_from =
            (i + 1 == ids.len() && id >= head.segment).then_some(if id == head.segment { head.offset } else { 0 });
        check_segment(&segment_file(dir, id), &skipped, may_be_torn_from, true, &mut |_, _| {}, report);
    }
    if files_only {
        report.notes.push("value pointers not resolved (--files-only)".into());
        return Ok(());
    }
    let before = report.problems.len();
    check_pointers(&db, dir, report)?;
    let newest = VersionSet::recover(os_fs(), dir, options.num_levels).ok();
    let mut released = 0;
    report.problems = std::mem::take(&mut report.problems)
        .into_iter()
        .enumerate()
        .filter(|(i, p)| {
            let gone = *i >= before && released_since(newest.as_ref(), p);
            released += usize::from(gone);
            !gone
        })
        .map(|(_, p)| p)
        .collect();
    if released > 0 {
        report.notes.push(format!(
            "{released} values could not be read because the writer's GC released their records after the view \
             was taken"
        ));
    }
    Ok(())
}

/// True if `problem` is a value read in a segment that the newest MANIFEST no longer lists, or
/// in a range it records as dead: the writer released it after the read-only view was taken.
fn released_since(newest: Option<&VersionSet>, problem: &Problem) -> bool {
    let (Some(newest), Some(offset)) = (newest, problem.offset) else { return false };
    let name = problem.file.file_name().and_then(|n| n.to_str());
    let Some(FileKind::Segment(id)) = name.and_then(parse_file_name) else { return false };
    match newest.segments().get(&id) {
        None => true,
        Some(meta) => meta.skipped.iter().any(|&(start, end)| start <= offset && offset < end),
    }
}

/// Every table and segment the MANIFEST lists must exist (tables with their recorded size).
fn check_manifest_lists(
    dir: &Path,
    versions: &VersionSet,
    tables: &[FileNumber],
    segments: &[SegmentId],
    report: &mut Report,
) {
    let fs = os_fs();
    let version = versions.current();
    let mut listed = Vec::new();
    for (level, meta) in version.all_files() {
        listed.push(meta.number);
        let path = table_file(dir, meta.number);
        match fs.file_size(&path) {
            Ok(size) if size == meta.file_size => {}
            Ok(size) => report.problems.push(Problem::at(
                &path,
                format!("L{level} table is {size} bytes, the MANIFEST records {}", meta.file_size),
            )),
            Err(_) => {
                report.problems.push(Problem::at(&path, format!("L{level} table listed in the MANIFEST is missing")))
            }
        }
    }
    for number in tables.iter().filter(|n| !listed.contains(n)) {
        report
            .notes
            .push(format!("{} is not listed in the MANIFEST (left over; ignored)", table_file(dir, *number).display()));
    }
    for id in versions.segments().keys().filter(|id| !segments.contains(id)) {
        report.problems.push(Problem::at(&segment_file(dir, *id), "segment listed in the MANIFEST is missing"));
    }
}

/// Verifies one table and walks all its entries, checking that pointers decode. With `live`,
/// a table that is gone was deleted by the writer (a note).
fn check_table(path: &Path, live: bool, report: &mut Report) {
    let table = match open_table(path) {
        Ok(t) => t,
        Err(e) if live && is_not_found(&e) => return report.notes.push(deleted_by_writer(path)),
        Err(e) => {
            report.tables += 1;
            return report.problems.push(Problem::from_error(e, path));
        }
    };
    report.tables += 1;
    if let Err(e) = table.verify() {
        return report.problems.push(Problem::from_error(e, path));
    }
    let mut it = table.iter(false);
    let mut entries = 0u64;
    // Entries carry no offset of their own here; a bad one is named by its position.
    let walked = (|| -> Result<(), Problem> {
        it.seek_to_first().map_err(|e| Problem::from_error(e, path))?;
        while it.valid() {
            entries += 1;
            let pointer_ok = match parse_internal_key(it.key()) {
                None => return Err(Problem::at(path, format!("entry {entries}: malformed internal key"))),
                Some(parsed) => parsed.kind != ValueKind::Pointer || ValuePointer::decode(it.value()).is_some(),
            };
            if !pointer_ok {
                return Err(Problem::at(path, format!("entry {entries}: malformed value pointer")));
            }
            it.next().map_err(|e| Problem::from_error(e, path))?;
        }
        Ok(())
    })();
    report.table_entries += entries;
    if let Err(problem) = walked {
        report.problems.push(problem);
    } else if entries != table.num_entries() {
        report.problems.push(Problem::at(
            path,
            format!("iteration found {entries} entries, the footer records {}", table.num_entries()),
        ));
    }
}

/// Scans one segment, handing every intact record to `on_record`; returns true if it ends in a
/// torn record at or after `may_be_torn_from`, which is noted rather than counted as a problem:
/// a crash in the middle of an append leaves exactly that, and recovery drops it.
/// Ranges the MANIFEST records as skipped (runs of dead records, possibly punched out) are not
/// read.
fn check_segment(
    path: &Path,
    skipped: &[(u64, u64)],
    may_be_torn_from: Option<u64>,
    live: bool,
    on_record: &mut dyn FnMut(u64, &ReplayedRecord),
    report: &mut Report,
) -> bool {
    let scan = match scan_segment(os_fs().as_ref(), path, skipped) {
        Ok(scan) => scan,
        Err(e) if live && is_not_found(&e) => {
            report.notes.push(deleted_by_writer(path));
            return false;
        }
        Err(e) => {
            report.segments += 1;
            report.problems.push(Problem::from_error(e, path));
            return false;
        }
    };
    report.segments += 1;
    for item in scan {
        match item {
            Ok((offset, record)) => {
                report.records += 1;
                on_record(offset, &record);
            }
            Err(Error::Corruption { offset, reason, .. })
                if may_be_torn_from.is_some_and(|from| offset >= from)
                    && (reason.starts_with("file ends inside") || zeros_to_end(path, offset)) =>
            {
                report.notes.push(format!(
                    "{} ends in a torn record at offset {offset} ({reason}); recovery drops it",
                    path.display()
                ));
                return true;
            }
            Err(e) => report.problems.push(Problem::from_error(e, path)),
        }
    }
    false
}

/// Pass 3 (see the module docs): the hash table's structure and every slot's record.
/// `tail_keys` holds the hashes of the keys with a record past the log head.
fn check_hash_table(
    dir: &Path,
    path: &Path,
    versions: Option<&VersionSet>,
    tail_keys: &HashSet<u64>,
    report: &mut Report,
) {
    let table = match hash::open_locked(path).and_then(|t| t.check().map(|()| t)) {
        Ok(t) => t,
        Err(e) => return report.problems.push(Problem::from_error(e, path)),
    };
    // Reads records only; a log opened this way creates no segment.
    let log = match ValueLog::open(os_fs(), dir, VlogOptions::default()) {
        Ok(log) => Some(log),
        Err(e) => {
            report.notes.push(format!("hash slots' records not read: the value log does not open: {e}"));
            None
        }
    };
    let mut checker = SlotChecker {
        dir,
        path,
        buckets: table.buckets(),
        versions,
        log: log.as_ref(),
        tail_keys,
        bucket: None,
        chain: Vec::new(),
        slots: 0,
        superseded: 0,
        collected_tombstones: 0,
        problems: Vec::new(),
    };
    let walked = table.for_each(&mut |index, slot| {
        checker.check(index, slot);
        Ok(())
    });
    if let Err(e) = walked {
        report.problems.push(Problem::from_error(e, path));
    }
    report.hash_slots = Some(checker.slots);
    report.problems.append(&mut checker.problems);
    if checker.superseded > 0 {
        report.notes.push(format!(
            "{} hash slots are torn or out of date, each superseded by a record past the log head that \
             opening the database replays",
            checker.superseded
        ));
    }
    if checker.collected_tombstones > 0 {
        report.notes.push(format!(
            "{} tombstone slots name delete records that GC has already collected (a delete's record is \
             garbage once the table holds the delete; a later checkpoint removes the tombstone)",
            checker.collected_tombstones
        ));
    }
}

/// Checks hash slots one by one, in the table's walk order (bucket by bucket).
struct SlotChecker<'a> {
    dir: &'a Path,
    path: &'a Path,
    buckets: u64,
    versions: Option<&'a VersionSet>,
    log: Option<&'a ValueLog>,
    tail_keys: &'a HashSet<u64>,
    /// The bucket being walked and the keys seen in its chain so far, with their slots.
    bucket: Option<u64>,
    chain: Vec<(SlotKey, u64)>,
    slots: u64,
    superseded: u64,
    collected_tombstones: u64,
    problems: Vec<Problem>,
}

impl SlotChecker<'_> {
    fn check(&mut self, index: u64, slot: &Slot) {
        self.slots += 1;
        let bucket = hash::bucket_of(index, slot, self.buckets);
        if self.bucket != Some(bucket) {
            self.bucket = Some(bucket);
            self.chain.clear();
        }
        // Two slots of one key: lookups find the first, so the other is a stale version that
        // would come back once the first is removed. Equal keys hash alike, so they share a chain.
        if let Some(&(_, first)) = self.chain.iter().find(|(key, _)| *key == slot.key) {
            self.problem(index, slot, format!("the same key as slot {first} in bucket {bucket}"));
        }
        self.chain.push((slot.key, index));

        let reason = if slot.payload_intact {
            match self.log {
                Some(log) => self.record_problem(log, slot),
                None => None,
            }
        } else {
            Some("torn payload (checksum mismatch)".to_string())
        };
        let Some(reason) = reason else { return };
        if self.tail_keys.contains(&slot.key.hash()) {
            self.superseded += 1;
        } else if !slot.payload_intact {
            self.problem(index, slot, format!("{reason}, and no record past the log head rewrites it"));
        } else {
            self.problem(index, slot, reason);
        }
    }

    /// What is wrong with the record the slot points at, if anything.
    fn record_problem(&mut self, log: &ValueLog, slot: &Slot) -> Option<String> {
        let p = &slot.payload;
        let ptr = p.pointer;
        let at = format!("its record at {}:{}+{}", ptr.segment.0, ptr.offset, ptr.len);
        let record = match log.read_record(&ptr) {
            Ok(record) => record,
            Err(_) if slot.state == SlotState::Tombstone && self.released(&ptr) => {
                self.collected_tombstones += 1;
                return None;
            }
            Err(e) => return Some(format!("{at} does not read back: {e}")),
        };
        if slot.state == SlotState::Value && self.released(&ptr) {
            return Some(format!("{at} lies in a range GC recorded as dead"));
        }
        if slot.key.matches(&record.key, key_hash(&record.key)) == Some(false) {
            let shown = crate::format::escape(&record.key);
            return Some(format!("{at} holds another key, {shown}"));
        }
        if record.seq != p.seq {
            return Some(format!("{at} has sequence number {}, the slot says {}", record.seq, p.seq));
        }
        let expected = match slot.state {
            SlotState::Tombstone => RecordKind::Delete,
            _ => RecordKind::Put,
        };
        if record.kind != expected {
            return Some(format!("{at} is a {} record, not a {}", record.kind.name(), expected.name()));
        }
        None
    }

    /// True if GC has let go of the record at `ptr`: its segment is gone, or the MANIFEST
    /// records its bytes as dead (possibly punched out).
    fn released(&self, ptr: &ValuePointer) -> bool {
        if !os_fs().exists(&segment_file(self.dir, ptr.segment)) {
            return true;
        }
        self.versions
            .and_then(|v| v.segments().get(&ptr.segment))
            .is_some_and(|meta| meta.skipped.iter().any(|&(start, end)| ptr.offset < end && ptr.end() > start))
    }

    fn problem(&mut self, index: u64, slot: &Slot, reason: String) {
        let key = hash::show_key(&slot.key, crate::format::ByteStyle::Escaped);
        let reason = format!("slot {index} ({} key {key}): {reason}", hash::state_name(slot.state));
        self.problems.push(Problem { file: self.path.to_path_buf(), offset: Some(hash::slot_offset(index)), reason });
    }
}

/// Reads every live key and value of `db`; each value pointer is resolved with a validated read.
fn check_pointers(db: &Db, dir: &Path, report: &mut Report) -> Result<(), CliError> {
    let opts = ReadOptions { fill_cache: false, verify_checksums: true, ..ReadOptions::default() };
    let mut it = db.iter(opts)?;
    let mut keys = 0u64;
    let mut found = 0;
    let mut last_bad_key: Option<Vec<u8>> = None;
    let mut step = it.seek_to_first();
    loop {
        match step {
            Ok(()) if !it.valid() => break,
            Ok(()) => keys += 1,
            Err(e) => {
                report.problems.push(Problem::from_error(e, dir));
                found += 1;
                // A failed value read leaves the cursor on its key, so it can move on; a failure
                // to move at all would repeat forever.
                if !it.valid() || last_bad_key.as_deref() == Some(it.key()) || found >= MAX_POINTER_PROBLEMS {
                    break;
                }
                last_bad_key = Some(it.key().to_vec());
            }
        }
        step = it.next();
    }
    report.keys = Some(keys);
    Ok(())
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
}

fn deleted_by_writer(path: &Path) -> String {
    format!("{} was deleted by the writer after the view was taken (not checked)", path.display())
}

fn print_report(dir: &Path, report: &Report, out: Output) {
    if out.json {
        print_json(&json!({
            "path": dir.display().to_string(),
            "ok": report.problems.is_empty(),
            "problems": report.problems.iter().map(|p| json!({
                "file": p.file.display().to_string(), "offset": p.offset, "reason": p.reason,
            })).collect::<Vec<_>>(),
            "notes": report.notes,
            "checked": {
                "tables": report.tables, "table_entries": report.table_entries,
                "segments": report.segments, "records": report.records, "hash_slots": report.hash_slots,
                "keys": report.keys,
            },
        }));
        return;
    }
    for p in &report.problems {
        match p.offset {
            Some(offset) => outln!("PROBLEM {} at offset {offset}: {}", p.file.display(), p.reason),
            None => outln!("PROBLEM {}: {}", p.file.display(), p.reason),
        }
    }
    for note in &report.notes {
        outln!("note: {note}");
    }
    let keys = report.keys.map_or(String::new(), |k| format!(", {k} keys read through the database"));
    let slots = report.hash_slots.map_or(String::new(), |n| format!(", hash table ({n} slots)"));
    outln!(
        "checked {} tables ({} entries), {} segments ({} records){slots}{keys}: {}",
        report.tables,
        report.table_entries,
        report.segments,
        report.records,
        match report.problems.len() {
            0 => "no problems".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        }
    );
}

/// True if the file holds only zero bytes from `offset` on: the tail ext4 can leave after a
/// power loss, which recovery treats as torn.
fn zeros_to_end(path: &Path, offset: u64) -> bool {
    let Ok(file) = os_fs().open(path) else { return false };
    file.len().and_then(|len| zeros_between(file.as_ref(), offset, len)).unwrap_or(false)
}
