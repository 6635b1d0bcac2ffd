//! `info`: the shape of a database, read from its files without opening it.
//!
//! The MANIFEST gives the levels, the live segments with their known garbage, the log head and
//! the sequence number as of the last flush; the value log past the head is scanned (read-only)
//! for the writes not yet flushed, which raise the sequence number. Nothing is replayed, written
//! or truncated, and the directory lock is held throughout so the files cannot change under us.
//!
//! A hash-index database has no SSTable levels; its table file (`HASHINDEX`) is opened instead
//! (which walks every chain) for its geometry and counts.
//!
//! Space amplification is bytes on disk (SSTables + segments + MANIFEST + hash table) over the
//! estimated live bytes (the same minus the known value-log garbage). Garbage becomes known only
//! when a flush, compaction or checkpoint drops the last reference to a record, so this is a
//! lower bound.

use std::path::Path;

use serde_json::{json, Value};
use splitkv::filenames::{hash_table_file, manifest_file, segment_file};
use splitkv::index::hash::table::TableStats;
use splitkv::types::{compare_internal_keys, InternalKey, SegmentId};
use splitkv::version::VersionSet;
use splitkv::vlog::{scan_segment, SEGMENT_HEADER_LEN};
use splitkv::Options;

use super::{db_options, hash, lock_db_dir, os_fs, print_json, CliError, Exit, IndexChoice, Output};
use crate::format;

/// One value-log segment as `info` reports it.
struct SegmentReport {
    id: SegmentId,
    bytes: u64,
    garbage_bytes: u64,
    live_bytes: u64,
    hole_bytes: u64,
    in_manifest: bool,
}

/// Records in the value log past the head: written but not yet in any SSTable.
#[derive(Default)]
struct Tail {
    records: u64,
    bytes: u64,
    max_sequence: u64,
    error: Option<String>,
}

/// The hash table of a hash-index database as `info` reports it.
struct HashReport {
    file: std::path::PathBuf,
    /// Bytes of the file, known even when it does not open.
    file_bytes: u64,
    /// Its figures, or why the table could not be opened.
    stats: Result<TableStats, String>,
}

impl HashReport {
    fn read(dir: &Path) -> Result<Option<HashReport>, CliError> {
        let file = hash_table_file(dir);
        let fs = os_fs();
        if !fs.exists(&file) {
            return Ok(None);
        }
        let file_bytes = fs.file_size(&file)?;
        let stats = hash::open_locked(&file).map(|t| t.stats()).map_err(|e| e.to_string());
        Ok(Some(HashReport { file, file_bytes, stats }))
    }

    fn json(&self) -> Value {
        let mut fields = match &self.stats {
            Ok(stats) => hash::stats_json(stats),
            Err(e) => json!({ "file_bytes": self.file_bytes, "error": e }),
        };
        fields["file"] = json!(self.file.display().to_string());
        fields
    }

    fn print(&self) {
        outln!("hash table {} ({})", self.file.display(), format::size(self.file_bytes));
        match &self.stats {
            Ok(s) => {
                outln!("  buckets          {}", s.buckets);
                outln!("  entries          {} ({} tombstones)", s.entries, s.tombstones);
                outln!("  collision slots  {} used of {}", s.collision_used, s.buckets);
                outln!("  file bytes       {}", s.file_bytes);
                outln!("  load factor      {:.3} (entries per bucket)", hash::load_factor(s));
            }
            Err(e) => outln!("  cannot be read: {e}"),
        }
    }
}

/// Prints the report.
pub fn run(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let _lock = lock_db_dir(dir)?;
    let fs = os_fs();
    let options = db_options(dir, IndexChoice::Lsm);
    let hash_table = HashReport::read(dir)?;
    let versions = VersionSet::recover(fs.clone(), dir, options.num_levels)?;
    let version = versions.current();

    let mut levels = Vec::new();
    for level in 0..version.num_levels() {
        let files = version.files(level);
        let smallest =
            files.iter().map(|f| &f.smallest).min_by(|a, b| compare_internal_keys(a.as_bytes(), b.as_bytes()));
        let largest = files.iter().map(|f| &f.largest).max_by(|a, b| compare_internal_keys(a.as_bytes(), b.as_bytes()));
        levels.push((level, files.len(), version.level_bytes(level), smallest.cloned(), largest.cloned()));
    }

    let segment_ids = splitkv::filenames::list_segments(fs.as_ref(), dir)?;
    let mut segments = Vec::new();
    for &id in &segment_ids {
        let path = segment_file(dir, id);
        let bytes = fs.file_size(&path)?;
        let garbage_bytes = versions.segments().get(&id).map_or(0, |m| m.garbage_bytes);
        segments.push(SegmentReport {
            id,
            bytes,
            garbage_bytes,
            live_bytes: bytes.saturating_sub(SEGMENT_HEADER_LEN).saturating_sub(garbage_bytes),
            hole_bytes: bytes.saturating_sub(fs.allocated_size(&path)?),
            in_manifest: versions.segments().contains_key(&id),
        });
    }

    let head = versions.log_head();
    let mut tail = Tail::default();
    for &id in segment_ids.iter().filter(|&&id| id >= head.segment) {
        let path = segment_file(dir, id);
        let scanned = scan_segment(fs.as_ref(), &path, &[]).and_then(|scan| {
            for item in scan {
                let (offset, rec) = item?;
                if id == head.segment && offset < head.offset {
                    continue;
                }
                tail.records += 1;
                tail.bytes += u64::from(rec.pointer.len);
                tail.max_sequence = tail.max_sequence.max(rec.seq.0);
            }
            Ok(())
        });
        if let Err(e) = scanned {
            tail.error = Some(e.to_string());
            break;
        }
    }
    let last_sequence = versions.last_sequence().0.max(tail.max_sequence);

    let manifest_path = manifest_file(dir, versions.manifest_number());
    let manifest_bytes = fs.file_size(&manifest_path)?;
    let sst_bytes: u64 = levels.iter().map(|l| l.2).sum();
    let vlog_bytes: u64 = segments.iter().map(|s| s.bytes).sum();
    let garbage: u64 = segments.iter().map(|s| s.garbage_bytes).sum();
    let holes: u64 = segments.iter().map(|s| s.hole_bytes).sum();
    let hash_bytes = hash_table.as_ref().map_or(0, |h| h.file_bytes);
    let on_disk = (sst_bytes + vlog_bytes + manifest_bytes + hash_bytes).saturating_sub(holes);
    let live = on_disk.saturating_sub(garbage);
    let space_amplification = if live == 0 { 1.0 } else { on_disk as f64 / live as f64 };
    let show_key = |k: &Option<InternalKey>| k.as_ref().map(|k| out.style.show(k.user_key()));
    // Partitions: tables counted by the partition of their first key.
    let partitions: Vec<(Option<String>, Option<String>, usize, u64)> = version
        .partitions()
        .iter()
        .map(|p| (p.start.map(|k| out.style.show(k)), p.end.map(|k| out.style.show(k)), p.files.len(), p.bytes()))
        .collect();
    let range_deletes: Vec<Value> = version
        .range_tombstones()
        .iter()
        .map(|t| json!({ "start": out.style.show(&t.start), "end": out.style.show(&t.end), "sequence": t.seq.0 }))
        .collect();

    if out.json {
        print_json(&json!({
            "path": dir.display().to_string(),
            "manifest": { "file": manifest_path.display().to_string(), "bytes": manifest_bytes },
            "next_file_number": versions.next_file_number(),
            "last_sequence": last_sequence,
            "flushed_sequence": versions.last_sequence().0,
            "log_head": { "segment": head.segment.0, "offset": head.offset },
            "index": if hash_table.is_some() { "hash" } else { "lsm" },
            "hash_table": hash_table.as_ref().map(HashReport::json),
            "unflushed_log": {
                "records": tail.records, "bytes": tail.bytes, "error": tail.error,
            },
            "levels": levels.iter().map(|(level, files, bytes, smallest, largest)| json!({
                "level": level, "files": files, "bytes": bytes,
                "smallest_key": show_key(smallest), "largest_key": show_key(largest),
            })).collect::<Vec<_>>(),
            "partitions": partitions.iter().map(|(start, end, tables, bytes)| json!({
                "start": start, "end": end, "tables": tables, "bytes": bytes,
            })).collect::<Vec<_>>(),
            "range_deletes": range_deletes,
            "segments": segments.iter().map(|s| json!({
                "id": s.id.0, "bytes": s.bytes, "live_bytes": s.live_bytes, "garbage_bytes": s.garbage_bytes,
                "hole_bytes": s.hole_bytes, "in_manifest": s.in_manifest,
            })).collect::<Vec<_>>(),
            "space": {
                "sstable_bytes": sst_bytes, "vlog_bytes": vlog_bytes, "manifest_bytes": manifest_bytes,
                "hash_table_bytes": hash_bytes,
                "hole_bytes": holes, "known_garbage_bytes": garbage, "on_disk_bytes": on_disk,
                "estimated_live_bytes": live, "space_amplification": space_amplification,
            },
            "options": options_json(&options),
        }));
        return Ok(Exit::Success);
    }

    outln!("database  {}", dir.display());
    outln!("manifest  {} ({})", manifest_path.display(), format::size(manifest_bytes));
    outln!("sequence  {last_sequence} (flushed through {})", versions.last_sequence());
    outln!("log head  segment {} offset {}", head.segment, head.offset);
    match &tail.error {
        None => outln!("unflushed {} records, {} past the head", tail.records, format::size(tail.bytes)),
        Some(e) => outln!("unflushed {} records before an unreadable record: {e}", tail.records),
    }
    outln!("next file {}", versions.next_file_number());
    outln!();
    if let Some(hash_table) = &hash_table {
        outln!("index     hash table (no SSTable levels)");
        hash_table.print();
    } else {
        outln!("index     LSM");
        outln!("level  files        size  key range");
        for (level, files, bytes, smallest, largest) in &levels {
            if *files == 0 {
                continue;
            }
            let range = match (show_key(smallest), show_key(largest)) {
                (Some(a), Some(b)) => format!("{a} .. {b}"),
                _ => String::new(),
            };
            outln!("{level:>5} {files:>6} {:>11}  {range}", format::size(*bytes));
        }
        if partitions.len() > 1 {
            outln!();
            outln!("partition  tables        size  key range");
            for (i, (start, end, tables, bytes)) in partitions.iter().enumerate() {
                let (start, end) = (start.as_deref().unwrap_or("(first)"), end.as_deref().unwrap_or("(last)"));
                outln!("{i:>9} {tables:>7} {:>11}  {start} .. {end}", format::size(*bytes));
            }
        }
        if !range_deletes.is_empty() {
            outln!("range deletes in the MANIFEST: {}", range_deletes.len());
        }
    }
    outln!();
    outln!("segment        size        live     garbage       holes");
    for s in &segments {
        let note = if s.in_manifest { "" } else { "  (not in the MANIFEST)" };
        outln!(
            "{:>7} {:>11} {:>11} {:>11} {:>11}{note}",
            s.id,
            format::size(s.bytes),
            format::size(s.live_bytes),
            format::size(s.garbage_bytes),
            format::size(s.hole_bytes)
        );
    }
    outln!();
    let hash_part =
        if hash_table.is_some() { format!(", hash table {}", format::size(hash_bytes)) } else { String::new() };
    outln!(
        "space     {} on disk (SSTables {}, value log {}, MANIFEST {}{hash_part}), {} known garbage",
        format::size(on_disk),
        format::size(sst_bytes),
        format::size(vlog_bytes),
        format::size(manifest_bytes),
        format::size(garbage)
    );
    outln!(
        "space amplification {space_amplification:.3} (a lower bound: garbage is known only after flushes, \
         compactions and checkpoints)"
    );
    outln!();
    outln!("options this tool opens the database with (splitkv does not store options in the database):");
    if let Value::Object(fields) = options_json(&options) {
        for (name, value) in fields {
            outln!("  {name} = {value}");
        }
    }
    Ok(Exit::Success)
}

fn options_json(o: &Options) -> Value {
    json!({
        "value_threshold": o.value_threshold,
        "write_buffer_size": o.write_buffer_size,
        "segment_size": o.segment_size,
        "vlog_buffer_size": o.vlog_buffer_size,
        "block_size": o.block_size,
        "block_restart_interval": o.block_restart_interval,
        "compression": format!("{:?}", o.compression),
        "bloom_bits_per_key": o.bloom_bits_per_key,
        "block_cache_capacity": o.block_cache_capacity,
        "num_levels": o.num_levels,
        "level0_file_num_compaction_trigger": o.level0_file_num_compaction_trigger,
        "level0_slowdown_writes_trigger": o.level0_slowdown_writes_trigger,
        "level0_stop_writes_trigger": o.level0_stop_writes_trigger,
        "max_bytes_for_level_base": o.max_bytes_for_level_base,
        "max_bytes_for_level_multiplier": o.max_bytes_for_level_multiplier,
        "target_file_size": o.target_file_size,
        "compaction_policy": format!("{:?}", o.compaction_policy),
        "gc_policy": format!("{:?}", o.gc_policy),
        "index": format!("{:?}", o.index),
        "index_block_kind": format!("{:?}", o.index_block_kind),
    })
}
