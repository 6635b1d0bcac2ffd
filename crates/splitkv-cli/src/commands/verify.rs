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
//! 4. Pointers: the database is opened and iterated, which resolves every live value pointer with
//!    a validated read (record checksum, length and key). Opening replays the value log past the
//!    head into memory and may start background compaction, so this pass is skipped with
//!    `--files-only`, and also when pass 2 found a torn tail past the log head (opening would
//!    truncate it; such a tail is a note, while a cut before the head is a problem).
//!
//! Tables and segments that the MANIFEST does not list are still checked; they are noted, not
//! counted as problems (a crash can leave such files behind and the engine ignores them).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::json;
use splitkv::filenames::{hash_table_file, parse_file_name, segment_file, table_file, FileKind};
use splitkv::index::hash::slot::{key_hash, Slot, SlotKey, SlotState};
use splitkv::iter::InternalIterator;
use splitkv::types::{parse_internal_key, FileNumber, SegmentId, ValueKind, ValuePointer};
use splitkv::version::VersionSet;
use splitkv::vlog::{scan_segment, zeros_between, RecordKind, ReplayedRecord, ValueLog, VlogOptions};
use splitkv::{Error, Options, ReadOptions};

use super::dump::open_table;
use super::{hash, lock_db_dir, open_db, os_fs, print_json, CliError, Exit, Output};

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
    let mut report = Report::default();
    let lock = lock_db_dir(dir)?;
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

    let versions = match VersionSet::recover(fs.clone(), dir, Options::default().num_levels) {
        Ok(v) => Some(v),
        Err(e) => {
            report.problems.push(Problem::from_error(e, &dir.join("CURRENT")));
            None
        }
    };
    if let Some(versions) = &versions {
        check_manifest_lists(dir, versions, &tables, &segments, &mut report);
    }
    for &number in &tables {
        check_table(&table_file(dir, number), &mut report);
    }
    let log_head = versions.as_ref().map(VersionSet::log_head);
    let hash_table = hash_table_file(dir);
    let is_hash = fs.exists(&hash_table);
    // Hashes of the keys written past the log head, which opening replays (hash databases only).
    let mut tail_keys = HashSet::new();
    let mut torn_tail = false;
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
        torn_tail |= check_segment(&segment_file(dir, id), &skipped, may_be_torn_from, &mut on_record, &mut report);
    }
    if is_hash {
        check_hash_table(dir, &hash_table, versions.as_ref(), &tail_keys, &mut report);
    }
    drop(lock);

    if files_only {
        report.notes.push("value pointers not resolved (--files-only)".into());
    } else if torn_tail {
        report.notes.push("value pointers not resolved: opening the database would truncate the torn tail".into());
    } else if versions.is_none() {
        report.notes.push("value pointers not resolved: the MANIFEST cannot be read".into());
    } else {
        check_pointers(dir, &mut report)?;
    }
    print_report(dir, &report, out);
    Ok(if report.problems.is_empty() { Exit::Success } else { Exit::ProblemsFound })
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

/// Verifies one table and walks all its entries, checking that pointers decode.
fn check_table(path: &Path, report: &mut Report) {
    report.tables += 1;
    let table = match open_table(path) {
        Ok(t) => t,
        Err(e) => return report.problems.push(Problem::from_error(e, path)),
    };
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
    on_record: &mut dyn FnMut(u64, &ReplayedRecord),
    report: &mut Report,
) -> bool {
    report.segments += 1;
    let scan = match scan_segment(os_fs().as_ref(), path, skipped) {
        Ok(scan) => scan,
        Err(e) => {
            report.problems.push(Problem::from_error(e, path));
            return false;
        }
    };
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
        let kind = |kind: RecordKind| match kind {
            RecordKind::Put => "put",
            RecordKind::Delete => "delete",
            RecordKind::DeleteRange => "delete_range",
        };
        let expected = match slot.state {
            SlotState::Tombstone => RecordKind::Delete,
            _ => RecordKind::Put,
        };
        if record.kind != expected {
            return Some(format!("{at} is a {} record, not a {}", kind(record.kind), kind(expected)));
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

/// Opens the database and reads every live key and value; each value pointer is resolved with a
/// validated read.
fn check_pointers(dir: &Path, report: &mut Report) -> Result<(), CliError> {
    let db = match open_db(dir, None) {
        Ok(db) => db,
        Err(CliError::Db(e @ Error::Locked(_))) => return Err(CliError::Db(e)),
        Err(CliError::Db(e)) => {
            report.problems.push(Problem::from_error(e, dir));
            return Ok(());
        }
        Err(other) => return Err(other),
    };
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
    drop(it);
    db.close()?;
    report.keys = Some(keys);
    Ok(())
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
