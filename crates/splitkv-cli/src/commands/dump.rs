//! `dump sst`, `dump segment`, `dump manifest`: one file's contents, human-readable or JSON.
//!
//! Files are read directly through the library's readers (no database is opened and nothing is
//! written), so a dump works on a copy of a file, on a database another process holds, and on a
//! damaged file: entries before the damage are printed, then the error with its file and offset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use splitkv::filenames::{manifest_file, parse_file_name, FileKind};
use splitkv::iter::InternalIterator;
use splitkv::sstable::{Table, TableOptions};
use splitkv::types::{parse_internal_key, FileNumber, InternalKey, ValueKind, ValuePointer};
use splitkv::version::manifest::{read_current, read_records};
use splitkv::version::{FileMetaData, VersionEdit, VersionSet};
use splitkv::vlog::{scan_segment, RecordKind};
use splitkv::Options;

use super::{os_fs, print_json, CliError, Exit, Output};
use crate::format::ByteStyle;

/// Opens the SSTable at `path`; its number comes from the file name (0 if the name is not one of
/// splitkv's, e.g. a copy).
pub fn open_table(path: &Path) -> splitkv::Result<Arc<Table>> {
    let file = os_fs().open(path)?;
    let size = file.len()?;
    let number = match path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name) {
        Some(FileKind::Table(n)) => n,
        _ => FileNumber(0),
    };
    Table::open(file, path.to_path_buf(), number, size, &TableOptions::default(), None)
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
        let kind = match rec.kind {
            RecordKind::Put => "put",
            RecordKind::Delete => "delete",
        };
        if out.json {
            let mut row = json!({
                "offset": offset, "len": rec.pointer.len, "sequence": rec.seq.0, "kind": kind,
                "key": out.style.show(&rec.key),
            });
            if rec.kind == RecordKind::Put {
                row["value"] = json!(out.style.show(&rec.value));
            }
            if let Some(p) = rec.prev {
                row["prev"] = json!({ "segment": p.segment.0, "offset": p.offset, "len": p.len });
            }
            records.push(row);
        } else {
            // Before the value, whose preview can be long, so the chain link stays in view.
            let prev = rec.prev.map(|p| format!(" prev={}:{}+{}", p.segment.0, p.offset, p.len)).unwrap_or_default();
            let value = match rec.kind {
                RecordKind::Put => format!(" {} bytes: {}", rec.value.len(), out.style.preview(&rec.value)),
                RecordKind::Delete => String::new(),
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
    VersionSet::recover(os_fs(), dir, Options::default().num_levels)
        .ok()
        .and_then(|versions| versions.segments().get(&id).map(|meta| meta.skipped.clone()))
        .unwrap_or_default()
}

/// The MANIFEST to dump: the file itself, or the one `CURRENT` names when given a directory.
fn manifest_path(path: &Path) -> Result<PathBuf, CliError> {
    let fs = os_fs();
    if path.is_dir() {
        super::require_db(path)?;
        Ok(manifest_file(path, read_current(fs.as_ref(), path)?))
    } else {
        Ok(path.to_path_buf())
    }
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
