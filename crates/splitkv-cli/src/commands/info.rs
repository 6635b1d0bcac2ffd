//! `info`: the shape of a database, as a read-only open of it sees it.
//!
//! The database is opened read-only with its stored options: no lock is taken and nothing is
//! written, so this works while another process has the database open (except a hash-index one,
//! which the engine reads only while no writer changes its table). The read-only open gives a
//! consistent view: the MANIFEST's levels, live segments with their known garbage, the log head
//! and the sequence number as of the last flush, plus the log past the head, replayed into
//! memory, which raises the sequence number.
//!
//! A hash-index database has no SSTable levels; its table's geometry and counts are reported
//! instead.
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
use splitkv::vlog::SEGMENT_HEADER_LEN;
use splitkv::Options;

use super::{hash, open_read_only, os_fs, print_json, CliError, Exit, Output};
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

/// The hash table of a hash-index database as `info` reports it.
struct HashReport {
    file: std::path::PathBuf,
    stats: TableStats,
}

impl HashReport {
    fn json(&self) -> Value {
        let mut fields = hash::stats_json(&self.stats);
        fields["file"] = json!(self.file.display().to_string());
        fields
    }

    fn print(&self) {
        let s = &self.stats;
        outln!("hash table {} ({})", self.file.display(), format::size(s.file_bytes));
        outln!("  buckets          {}", s.buckets);
        outln!("  entries          {} ({} tombstones)", s.entries, s.tombstones);
        outln!("  collision slots  {} used of {}", s.collision_used, s.buckets);
        outln!("  file bytes       {}", s.file_bytes);
        outln!("  load factor      {:.3} (entries per bucket)", hash::load_factor(s));
    }
}

/// Prints the report.
pub fn run(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_read_only(dir)?;
    let fs = os_fs();
    let options = db.options().clone();
    let stored = Options::load(dir)?.is_some();
    let stats = db.stats();
    let hash_table = stats.hash_table.map(|h| HashReport {
        file: hash_table_file(dir),
        stats: TableStats {
            buckets: h.buckets,
            entries: h.entries,
            tombstones: h.tombstones,
            collision_used: h.collision_used,
            file_bytes: h.file_bytes,
        },
    });
    let catalog = db.catalog().lock();
    let version = catalog.current();

    let mut levels = Vec::new();
    for level in 0..version.num_levels() {
        let files = version.files(level);
        let smallest =
            files.iter().map(|f| &f.smallest).min_by(|a, b| compare_internal_keys(a.as_bytes(), b.as_bytes()));
        let largest = files.iter().map(|f| &f.largest).max_by(|a, b| compare_internal_keys(a.as_bytes(), b.as_bytes()));
        levels.push((level, files.len(), version.level_bytes(level), smallest.cloned(), largest.cloned()));
    }

    // The segments of the view, with their lengths as of the open (the last one up to the end of
    // its last complete batch).
    let mut segments = Vec::new();
    for seg in &stats.segments {
        let id = SegmentId(seg.id);
        let garbage_bytes = catalog.segments().get(&id).map_or(0, |m| m.garbage_bytes);
        // A segment the writer deleted since the open has no holes left to count.
        let allocated = fs.allocated_size(&segment_file(dir, id)).unwrap_or(seg.bytes);
        segments.push(SegmentReport {
            id,
            bytes: seg.bytes,
            garbage_bytes,
            live_bytes: seg.bytes.saturating_sub(SEGMENT_HEADER_LEN).saturating_sub(garbage_bytes),
            hole_bytes: seg.bytes.saturating_sub(allocated),
            in_manifest: catalog.segments().contains_key(&id),
        });
    }

    let head = catalog.log_head();
    let flushed_sequence = catalog.last_sequence().0;
    // Every record past the head has its own sequence number, above the flushed one.
    let tail_records = stats.last_sequence.saturating_sub(flushed_sequence);
    let tail_bytes: u64 = segments
        .iter()
        .filter(|s| s.id >= head.segment)
        .map(|s| s.bytes.saturating_sub(if s.id == head.segment { head.offset } else { SEGMENT_HEADER_LEN }))
        .sum();

    let manifest_path = manifest_file(dir, catalog.manifest_number());
    // A writer may have moved on to a newer MANIFEST since the open.
    let manifest_bytes = fs.file_size(&manifest_path).unwrap_or(0);
    let sst_bytes: u64 = levels.iter().map(|l| l.2).sum();
    let vlog_bytes: u64 = segments.iter().map(|s| s.bytes).sum();
    let garbage: u64 = segments.iter().map(|s| s.garbage_bytes).sum();
    let holes: u64 = segments.iter().map(|s| s.hole_bytes).sum();
    let hash_bytes = hash_table.as_ref().map_or(0, |h| h.stats.file_bytes);
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
    let next_file_number = catalog.next_file_number();
    drop(catalog);
    let options_source = if stored { "stored in the database's OPTIONS file" } else { "defaults: no OPTIONS file" };

    if out.json {
        print_json(&json!({
            "path": dir.display().to_string(),
            "manifest": { "file": manifest_path.display().to_string(), "bytes": manifest_bytes },
            "next_file_number": next_file_number,
            "last_sequence": stats.last_sequence,
            "flushed_sequence": flushed_sequence,
            "log_head": { "segment": head.segment.0, "offset": head.offset },
            "index": if hash_table.is_some() { "hash" } else { "lsm" },
            "hash_table": hash_table.as_ref().map(HashReport::json),
            "unflushed_log": { "records": tail_records, "bytes": tail_bytes },
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
            "options_stored": stored,
        }));
        return Ok(Exit::Success);
    }

    outln!("database  {}", dir.display());
    outln!("manifest  {} ({})", manifest_path.display(), format::size(manifest_bytes));
    outln!("sequence  {} (flushed through {flushed_sequence})", stats.last_sequence);
    outln!("log head  segment {} offset {}", head.segment, head.offset);
    outln!("unflushed {tail_records} records, {} past the head", format::size(tail_bytes));
    outln!("next file {next_file_number}");
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
    outln!("options ({options_source}):");
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
