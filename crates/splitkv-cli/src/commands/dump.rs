//! `dump sst`, `dump segment`, `dump manifest`, `dump hash-table`: one file's contents,
//! human-readable or JSON; `dump FILE` picks the kind by the file's name.
//!
//! Files are read directly through the library's readers (no database is opened and nothing is
//! written), so a dump works on a copy of a file, on a database another process holds, and on a
//! damaged file: entries before the damage are printed, then the error with its file and offset.
//! A hash table is the exception to "entries before the damage": its chains are checked as a
//! whole when it is opened, so a damaged one is listed slot by slot in file order instead, with
//! no chain walked (see [`hash_table`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use splitkv::filenames::{manifest_file, parse_file_name, FileKind};
use splitkv::index::hash::slot::{decode_slot, Slot, SlotState, TableHeader, HEADER_LEN, SLOT_LEN, TABLE_VERSION};
use splitkv::index::hash::table::Table as HashTable;
use splitkv::iter::InternalIterator;
use splitkv::sstable::{Table, TableOptions};
use splitkv::types::{parse_internal_key, FileNumber, InternalKey, ValueKind, ValuePointer};
use splitkv::version::manifest::{read_current, read_records};
use splitkv::version::{FileMetaData, VersionEdit, VersionSet};
use splitkv::vlog::{scan_segment, RecordKind};
use splitkv::Options;

use super::{hash, os_fs, print_json, CliError, Exit, Output};
use crate::format::ByteStyle;

/// Dumps the file at `path` as the kind its name says: `NNNNNN.sst`, `NNNNNNNN.vlog`,
/// `MANIFEST-NNNNNN` or `HASHINDEX`. Any other name is a usage error naming the subcommands
/// that dump a file whatever its name.
pub fn by_name(path: &Path, out: Output) -> Result<Exit, CliError> {
    match path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name) {
        Some(FileKind::Table(_)) => sst(path, out),
        Some(FileKind::Segment(_)) => segment(path, out),
        Some(FileKind::Manifest(_)) => manifest(path, out),
        Some(FileKind::HashTable) => hash_table(path, out),
        _ => Err(CliError::Usage(format!(
            "cannot tell what {} is from its name (expected NNNNNN.sst, NNNNNNNN.vlog, MANIFEST-NNNNNN or \
             HASHINDEX); name the kind: dump sst|segment|manifest|hash-table FILE",
            path.display()
        ))),
    }
}

/// Opens the SSTable at `path`; its number comes from the file name (0 if the name is not one of
/// splitkv's, e.g. a copy).
pub fn open_table(path: &Path) -> splitkv::Result<Arc<Table>> {
    let file = os_fs().open(path)?;
    let size = file.len()?;
    let number = match path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name) {
        Some(FileKind::Table(n)) => n,
        _ => FileNumber(0),
    };
    Table::open(file, path.to_path_buf(), number, size, &TableOptions::default(), None, None)
}

/// One SSTable entry, for people or JSON.
fn describe_entry(ikey: &[u8], value: &[u8], out: Output) -> (String, Value) {
    let Some(parsed) = parse_internal_key(ikey) else {
        let shown = out.style.show(ikey);
        return (format!("<malformed internal key {shown}>"), json!({ "malformed_key": shown }));
    };
    let key = out.style.show(parsed.user_key);
    let seq = parsed.sequence.0;
    match parsed.kind {
        ValueKind::Deletion => {
            (format!("{key} @{seq} delete"), json!({ "key": key, "sequence": seq, "kind": "delete" }))
        }
        ValueKind::Inline => (
            format!("{key} @{seq} inline {}", out.style.preview(value)),
            json!({ "key": key, "sequence": seq, "kind": "inline", "value": out.style.show(value) }),
        ),
        ValueKind::Pointer => match ValuePointer::decode(value) {
            Some(p) => (
                format!("{key} @{seq} pointer segment {} offset {} len {}", p.segment, p.offset, p.len),
                json!({ "key": key, "sequence": seq, "kind": "pointer",
                        "pointer": { "segment": p.segment.0, "offset": p.offset, "len": p.len } }),
            ),
            None => (
                format!("{key} @{seq} pointer <malformed {}>", out.style.show(value)),
                json!({ "key": key, "sequence": seq, "kind": "pointer", "malformed_pointer": out.style.show(value) }),
            ),
        },
    }
}

/// Dumps every entry of an SSTable.
pub fn sst(path: &Path, out: Output) -> Result<Exit, CliError> {
    let table = open_table(path)?;
    if !out.json {
        outln!(
            "{}: {} bytes, {} entries in {} data blocks, filter {} bytes",
            path.display(),
            table.file_size(),
            table.num_entries(),
            table.num_data_blocks(),
            table.filter_size()
        );
    }
    let mut entries = Vec::new();
    let mut it = table.iter(false);
    let mut walk = || -> splitkv::Result<()> {
        it.seek_to_first()?;
        while it.valid() {
            let (text, value) = describe_entry(it.key(), it.value(), out);
            if out.json {
                entries.push(value);
            } else {
                outln!("{text}");
            }
            it.next()?;
        }
        Ok(())
    };
    let walked = walk();
    if out.json {
        print_json(&json!({
            "file": path.display().to_string(),
            "size": table.file_size(),
            "entries": table.num_entries(),
            "data_blocks": table.num_data_blocks(),
            "filter_bytes": table.filter_size(),
            "records": entries,
            "error": walked.as_ref().err().map(ToString::to_string),
        }));
    }
    walked?;
    Ok(Exit::Success)
}

/// Dumps every record of a value-log segment.
///
/// A record that carries the pointer of its key's previous version (written by the hash index
/// mode, format version 2) shows it as `prev=<segment>:<offset>+<len>`, in JSON as `prev`.
/// Runs of dead records that the MANIFEST beside the segment records as skipped (their bytes
/// may be punched out) are listed, not read.
pub fn segment(path: &Path, out: Output) -> Result<Exit, CliError> {
    let skipped = recorded_skips(path);
    let scan = scan_segment(os_fs().as_ref(), path, &skipped)?;
    let id = scan.segment_id();
    let version = scan.format_version();
    if !out.json {
        outln!("{}: segment {id}, format version {version}", path.display());
        for (start, end) in &skipped {
            outln!("skipped {start}..{end} (dead records, punched out)");
        }
    }
    let mut records = Vec::new();
    let mut failure = None;
    for item in scan {
        let (offset, rec) = match item {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let kind = rec.kind.name();
        if out.json {
            let mut row = json!({
                "offset": offset, "len": rec.pointer.len, "sequence": rec.seq.0, "kind": kind,
                "key": out.style.show(&rec.key),
            });
            match rec.kind {
                RecordKind::Put | RecordKind::Moved => row["value"] = json!(out.style.show(&rec.value)),
                RecordKind::DeleteRange => row["end"] = json!(out.style.show(&rec.value)),
                RecordKind::Delete => {}
            }
            if let Some(p) = rec.prev {
                row["prev"] = json!({ "segment": p.segment.0, "offset": p.offset, "len": p.len });
            }
            records.push(row);
        } else {
            // Before the value, whose preview can be long, so the chain link stays in view.
            let prev = rec.prev.map(|p| format!(" prev={}:{}+{}", p.segment.0, p.offset, p.len)).unwrap_or_default();
            let value = match rec.kind {
                RecordKind::Put | RecordKind::Moved => {
                    format!(" {} bytes: {}", rec.value.len(), out.style.preview(&rec.value))
                }
                RecordKind::Delete => String::new(),
                RecordKind::DeleteRange => format!(" to {}", out.style.preview(&rec.value)),
            };
            outln!(
                "offset {offset} len {} @{} {kind} {}{prev}{value}",
                rec.pointer.len,
                rec.seq,
                out.style.show(&rec.key)
            );
        }
    }
    if out.json {
        print_json(&json!({
            "file": path.display().to_string(),
            "segment": id.0,
            "format_version": version,
            "skipped": skipped.iter().map(|(start, end)| json!({ "start": start, "end": end })).collect::<Vec<_>>(),
            "records": records,
            "error": failure.as_ref().map(ToString::to_string),
        }));
    }
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(Exit::Success),
    }
}

/// The skipped ranges the MANIFEST in the segment's directory records for it; none if there is
/// no readable MANIFEST there (a copied segment is then read in full).
fn recorded_skips(path: &Path) -> Vec<(u64, u64)> {
    let (Some(dir), Some(FileKind::Segment(id))) =
        (path.parent(), path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name))
    else {
        return Vec::new();
    };
    let num_levels = super::stored_options(dir).map_or(Options::default().num_levels, |o| o.num_levels);
    VersionSet::recover(os_fs(), dir, num_levels)
        .ok()
        .and_then(|versions| versions.segments().get(&id).map(|meta| meta.skipped.clone()))
        .unwrap_or_default()
}

/// The MANIFEST to dump: the file itself, or the one `CURRENT` names when given a directory.
/// A writer that has the database open may switch to a new MANIFEST and delete the old one
/// between the two reads; `CURRENT` is then read again. Nothing is locked or written.
fn manifest_path(path: &Path) -> Result<PathBuf, CliError> {
    let fs = os_fs();
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    super::require_db(path)?;
    let mut file = manifest_file(path, read_current(fs.as_ref(), path)?);
    for _ in 0..10 {
        if fs.exists(&file) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        file = manifest_file(path, read_current(fs.as_ref(), path)?);
    }
    Ok(file)
}

/// Dumps every version edit of a MANIFEST.
pub fn manifest(path: &Path, out: Output) -> Result<Exit, CliError> {
    let file = manifest_path(path)?;
    if !out.json {
        outln!("{}", file.display());
    }
    let mut edits = Vec::new();
    let read = read_records(os_fs().as_ref(), &file, |offset, payload| {
        let edit = VersionEdit::decode(payload)
            .map_err(|e| splitkv::Error::corruption(&file, offset, format!("undecodable version edit: {e}")))?;
        if out.json {
            edits.push(edit_json(offset, &edit, out.style));
        } else {
            print_edit(offset, &edit, out.style);
        }
        Ok(())
    });
    if out.json {
        let (end, error) = match &read {
            Ok(end) => {
                (json!({ "records": end.records, "valid_len": end.valid_len, "torn_bytes": end.torn_bytes }), None)
            }
            Err(e) => (Value::Null, Some(e.to_string())),
        };
        print_json(&json!({ "file": file.display().to_string(), "edits": edits, "end": end, "error": error }));
    }
    let end = read?;
    if !out.json {
        outln!("{} records, {} valid bytes, {} torn bytes at the end", end.records, end.valid_len, end.torn_bytes);
    }
    Ok(Exit::Success)
}

fn show_ikey(key: &InternalKey, style: ByteStyle) -> String {
    match parse_internal_key(key.as_bytes()) {
        Some(p) => format!("{}@{}", style.show(p.user_key), p.sequence),
        None => format!("<malformed {}>", style.show(key.as_bytes())),
    }
}

fn file_json(level: usize, f: &FileMetaData, style: ByteStyle) -> Value {
    json!({
        "level": level, "number": f.number.0, "size": f.file_size, "entries": f.num_entries,
        "smallest": show_ikey(&f.smallest, style), "largest": show_ikey(&f.largest, style),
        "log_refs": f.log_refs.iter().map(|(segment, bytes)| json!({"segment": segment.0, "bytes": bytes})).collect::<Vec<_>>(),
    })
}

fn print_edit(offset: u64, edit: &VersionEdit, style: ByteStyle) {
    outln!("edit at offset {offset}:");
    if let Some(head) = edit.log_head {
        outln!("  log head {}:{}", head.segment, head.offset);
    }
    if let Some(n) = edit.next_file_number {
        outln!("  next file number {n}");
    }
    if let Some(seq) = edit.last_sequence {
        outln!("  last sequence {seq}");
    }
    for (level, key) in &edit.compact_pointers {
        outln!("  compact pointer L{level} {}", show_ikey(key, style));
    }
    for (level, number) in &edit.deleted_files {
        outln!("  delete L{level} {number:06}.sst");
    }
    for (level, f) in &edit.new_files {
        outln!(
            "  add L{level} {:06}.sst {} bytes {} entries [{} .. {}]",
            f.number.0,
            f.file_size,
            f.num_entries,
            show_ikey(&f.smallest, style),
            show_ikey(&f.largest, style)
        );
        if !f.log_refs.is_empty() {
            let refs: Vec<String> = f.log_refs.iter().map(|(segment, bytes)| format!("{segment}:{bytes}")).collect();
            outln!("    points into segments {}", refs.join(" "));
        }
    }
    for id in &edit.added_segments {
        outln!("  add segment {id}");
    }
    for id in &edit.removed_segments {
        outln!("  remove segment {id}");
    }
    for (id, bytes) in &edit.segment_garbage {
        outln!("  segment {id} garbage +{bytes} bytes");
    }
    for s in &edit.garbage_surveys {
        outln!("  segment {} garbage = {} bytes (survey, horizon @{})", s.segment, s.garbage_bytes, s.horizon);
    }
    for (id, start, end) in &edit.skipped_ranges {
        outln!("  segment {id} skip {start}..{end} (dead records, punched)");
    }
}

fn edit_json(offset: u64, edit: &VersionEdit, style: ByteStyle) -> Value {
    json!({
        "offset": offset,
        "log_head": edit.log_head.map(|h| json!({ "segment": h.segment.0, "offset": h.offset })),
        "next_file_number": edit.next_file_number,
        "last_sequence": edit.last_sequence.map(|s| s.0),
        "compact_pointers": edit.compact_pointers.iter()
            .map(|(level, key)| json!({ "level": level, "key": show_ikey(key, style) })).collect::<Vec<_>>(),
        "deleted_files": edit.deleted_files.iter()
            .map(|(level, n)| json!({ "level": level, "number": n.0 })).collect::<Vec<_>>(),
        "new_files": edit.new_files.iter().map(|(level, f)| file_json(*level, f, style)).collect::<Vec<_>>(),
        "added_segments": edit.added_segments.iter().map(|id| id.0).collect::<Vec<_>>(),
        "removed_segments": edit.removed_segments.iter().map(|id| id.0).collect::<Vec<_>>(),
        "segment_garbage": edit.segment_garbage.iter()
            .map(|(id, bytes)| json!({ "segment": id.0, "bytes": bytes })).collect::<Vec<_>>(),
        "garbage_surveys": edit.garbage_surveys.iter()
            .map(|s| json!({ "segment": s.segment.0, "bytes": s.garbage_bytes, "horizon": s.horizon.0 }))
            .collect::<Vec<_>>(),
        "skipped_ranges": edit.skipped_ranges.iter()
            .map(|(id, start, end)| json!({ "segment": id.0, "start": start, "end": end })).collect::<Vec<_>>(),
    })
}

/// Dumps a hash index's table file: its geometry and counts, every non-empty slot reachable from
/// a bucket (chain by chain, bucket order) and how long the chains are.
///
/// A table that does not open (damaged header, a broken chain, a damaged slot key) is listed
/// slot by slot in file order after the error, since no chain can be trusted then: every slot
/// that is not empty, including unreachable collision slots (free, whatever they hold) and slots
/// that do not decode. The command then ends with the error.
pub fn hash_table(path: &Path, out: Output) -> Result<Exit, CliError> {
    let (bytes, table) = hash::open_copy(path)?;
    match table {
        Ok(table) => {
            dump_hash_chains(path, &table, out)?;
            Ok(Exit::Success)
        }
        Err(e) => {
            dump_hash_slots_raw(path, &bytes, &e, out);
            Err(e.into())
        }
    }
}

/// One hash slot for people or JSON. `bucket` is `None` where it cannot be known (a collision
/// slot whose key does not decode).
fn describe_slot(index: u64, bucket: Option<u64>, slot: &Slot, buckets: u64, out: Output) -> (String, Value) {
    let p = &slot.payload;
    let next = slot.next.checked_sub(1).map(|c| buckets.saturating_add(c));
    let region = if index < buckets { "normal" } else { "collision" };
    let mut row = json!({
        "slot": index, "offset": hash::slot_offset(index), "region": region, "bucket": bucket,
        "state": hash::state_name(slot.state), "sequence": p.seq.0,
        "pointer": { "segment": p.pointer.segment.0, "offset": p.pointer.offset, "len": p.pointer.len },
        "payload_intact": slot.payload_intact, "next": next,
    });
    hash::add_key_json(&mut row, &slot.key, out.style);
    let bucket = bucket.map_or_else(|| "?".to_string(), |b| b.to_string());
    let next = next.map(|n| format!(" next={n}")).unwrap_or_default();
    // A torn payload's sequence number and pointer are whatever the interrupted update left.
    let torn = if slot.payload_intact { "" } else { " TORN PAYLOAD (checksum mismatch)" };
    let text = format!(
        "slot {index} bucket {bucket} {} {} @{} ptr={}:{}+{}{next}{torn}",
        hash::state_name(slot.state),
        hash::show_key(&slot.key, out.style),
        p.seq,
        p.pointer.segment.0,
        p.pointer.offset,
        p.pointer.len
    );
    (text, row)
}

/// Keys per bucket, for the chain summary.
#[derive(Default)]
struct Chains {
    /// Entries of each bucket that has any, in bucket order (the walk's order).
    per_bucket: Vec<(u64, u64)>,
}

impl Chains {
    fn add(&mut self, bucket: u64) {
        match self.per_bucket.last_mut() {
            Some((b, n)) if *b == bucket => *n += 1,
            _ => self.per_bucket.push((bucket, 1)),
        }
    }

    /// How many buckets hold 0, 1, 2, ... keys.
    fn histogram(&self, buckets: u64) -> Vec<u64> {
        let longest = self.per_bucket.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let mut counts = vec![0u64; usize::try_from(longest).unwrap_or(0) + 1];
        for &(_, n) in &self.per_bucket {
            if let Some(c) = usize::try_from(n).ok().and_then(|n| counts.get_mut(n)) {
                *c += 1;
            }
        }
        counts[0] = buckets.saturating_sub(self.per_bucket.len() as u64);
        counts
    }

    /// The bucket with the most keys (the first such), and how many.
    fn longest(&self) -> Option<(u64, u64)> {
        self.per_bucket.iter().copied().reduce(|best, c| if c.1 > best.1 { c } else { best })
    }
}

fn dump_hash_chains(path: &Path, table: &HashTable, out: Output) -> splitkv::Result<()> {
    let stats = table.stats();
    let buckets = stats.buckets;
    if !out.json {
        outln!(
            "{}: hash table format version {TABLE_VERSION}, {buckets} buckets + {buckets} collision slots, {} bytes",
            path.display(),
            stats.file_bytes
        );
        outln!(
            "{} entries ({} tombstones), {} collision slots used, load factor {:.3}",
            stats.entries,
            stats.tombstones,
            stats.collision_used,
            hash::load_factor(&stats)
        );
    }
    let mut rows = Vec::new();
    let mut chains = Chains::default();
    table.for_each(&mut |index, slot| {
        let bucket = hash::bucket_of(index, slot, buckets);
        chains.add(bucket);
        let (text, row) = describe_slot(index, Some(bucket), slot, buckets, out);
        if out.json {
            rows.push(row);
        } else {
            outln!("{text}");
        }
        Ok(())
    })?;
    let histogram = chains.histogram(buckets);
    let longest = chains.longest();
    if out.json {
        let mut header = hash::stats_json(&stats);
        header["file"] = json!(path.display().to_string());
        header["format_version"] = json!(TABLE_VERSION);
        header["slots"] = json!(rows);
        header["chains"] = json!({
            "buckets_with_keys": chains.per_bucket.len(),
            "longest": longest.map(|(bucket, keys)| json!({ "bucket": bucket, "keys": keys })),
            "buckets_by_keys": histogram,
        });
        print_json(&header);
    } else {
        let spread: Vec<String> =
            histogram.iter().enumerate().filter(|(_, &n)| n > 0).map(|(keys, n)| format!("{keys}:{n}")).collect();
        let longest = longest.map_or(String::from("no keys"), |(b, n)| {
            format!("the longest holds {n} {} (bucket {b})", if n == 1 { "key" } else { "keys" })
        });
        outln!(
            "chains: {} of {buckets} buckets hold keys, {longest}; buckets by keys held: {}",
            chains.per_bucket.len(),
            spread.join(" ")
        );
    }
    Ok(())
}

/// Lists every non-empty slot of a table that does not open, in file order (see
/// [`hash_table`]).
fn dump_hash_slots_raw(path: &Path, bytes: &[u8], error: &splitkv::Error, out: Output) {
    let header = TableHeader::decode(bytes);
    if !out.json {
        outln!("{}: hash table that does not open: {error}", path.display());
    }
    let mut rows = Vec::new();
    if let Ok(h) = &header {
        if !out.json {
            outln!("header: {} buckets; listing slots in file order, chains not walked", h.buckets);
        }
        let slots = bytes.len().saturating_sub(HEADER_LEN) / SLOT_LEN;
        for index in 0..slots as u64 {
            let at = hash::slot_offset(index) as usize;
            let Some(raw) = bytes.get(at..at + SLOT_LEN) else { break };
            let (text, row) = match decode_slot(raw) {
                Ok(slot) if slot.state == SlotState::Empty => continue,
                Ok(slot) => {
                    let bucket = Some(hash::bucket_of(index, &slot, h.buckets));
                    describe_slot(index, bucket, &slot, h.buckets, out)
                }
                Err(reason) => (
                    format!("slot {index} at offset {at}: does not decode: {reason}"),
                    json!({ "slot": index, "offset": at, "error": reason }),
                ),
            };
            if out.json {
                rows.push(row);
            } else {
                outln!("{text}");
            }
        }
    }
    if out.json {
        print_json(&json!({
            "file": path.display().to_string(),
            "buckets": header.as_ref().ok().map(|h| h.buckets),
            "header_error": header.as_ref().err(),
            "raw": true,
            "slots": rows,
            "error": error.to_string(),
        }));
    }
}
