//! Maintenance: `compact`, `gc`, `rewrite-log`, `checkpoint` and `stats`.
//!
//! `stats` reports the engine's own [`splitkv::Stats`] for the database as this process
//! opened it (read-only, so also while another process has it open): the shape (levels,
//! segments, log head) is the database's, while the counters (bytes written, reads, stalls)
//! cover only this process's short life and are mostly zero.
//!
//! `checkpoint` opens the database read-write (a checkpoint must hold off the writer, so a
//! database another process has open is checkpointed from that process, with `Db::checkpoint`).

use std::path::Path;

use serde_json::json;
use splitkv::Stats;

use super::{open_db, open_read_only, print_json, CliError, Exit, Output};
use crate::format;

/// Compacts the whole key range through every level, then prints the resulting shape.
pub fn compact(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_db(dir, None)?;
    let before = db.stats();
    db.compact_range(None, None)?;
    let after = db.stats();
    db.close()?;
    if out.json {
        print_json(&json!({ "before": levels_json(&before), "after": levels_json(&after) }));
    } else {
        outln!("compacted {}", dir.display());
        for (b, a) in before.levels.iter().zip(&after.levels) {
            if b.files > 0 || a.files > 0 {
                outln!(
                    "  L{}: {} files, {} -> {} files, {}",
                    a.level,
                    b.files,
                    format::size(b.bytes),
                    a.files,
                    format::size(a.bytes)
                );
            }
        }
    }
    Ok(Exit::Success)
}

/// Rewrites the live values of the keys in `[from, to]` at the log head in key order
/// (`Db::rewrite_value_log`) and reports what it read, wrote and released.
pub fn rewrite_log(dir: &Path, from: Option<&str>, to: Option<&str>, out: Output) -> Result<Exit, CliError> {
    let from = from.map(|k| out.parse_bytes(k)).transpose()?;
    let to = to.map(|k| out.parse_bytes(k)).transpose()?;
    let db = open_db(dir, None)?;
    let before = db.stats();
    let started = std::time::Instant::now();
    let outcome = db.rewrite_value_log(from.as_deref(), to.as_deref())?;
    let took = started.elapsed();
    let after = db.stats();
    db.close()?;
    let released: Vec<u64> = outcome.gc.segments_released.iter().map(|s| s.0).collect();
    if out.json {
        print_json(&json!({
            "records_rewritten": outcome.records_rewritten,
            "bytes_rewritten": outcome.bytes_rewritten,
            "stopped_at_space_budget": outcome.stopped_at_space_budget,
            "segments_released": released,
            "seconds": took.as_secs_f64(),
            "vlog_bytes_before": before.vlog_bytes(),
            "vlog_bytes_after": after.vlog_bytes(),
        }));
    } else {
        outln!(
            "rewrite-log: rewrote {} records ({}) in key order{}, released {} segments {:?}; value log {} -> {}, {:.2?}",
            outcome.records_rewritten,
            format::size(outcome.bytes_rewritten),
            if outcome.stopped_at_space_budget { " (stopped at the space budget)" } else { "" },
            released.len(),
            released,
            format::size(before.vlog_bytes()),
            format::size(after.vlog_bytes()),
            took
        );
    }
    Ok(Exit::Success)
}

/// Runs value-log garbage collection to completion (flush, full compaction, then every segment
/// holding garbage) and reports what it read, rewrote and released.
pub fn gc(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_db(dir, None)?;
    let before = db.stats();
    let outcome = db.run_gc()?;
    let after = db.stats();
    db.close()?;
    let released: Vec<u64> = outcome.segments_released.iter().map(|s| s.0).collect();
    if out.json {
        print_json(&json!({
            "bytes_read": outcome.bytes_read,
            "records_relocated": outcome.records_relocated,
            "bytes_relocated": outcome.bytes_relocated,
            "bytes_punched": outcome.bytes_punched,
            "segments_released": released,
            "vlog_bytes_before": before.vlog_bytes(),
            "vlog_bytes_after": after.vlog_bytes(),
        }));
    } else {
        outln!(
            "gc: read {}, relocated {} records ({}), released {} segments {:?}; value log {} -> {}",
            format::size(outcome.bytes_read),
            outcome.records_relocated,
            format::size(outcome.bytes_relocated),
            released.len(),
            released,
            format::size(before.vlog_bytes()),
            format::size(after.vlog_bytes())
        );
    }
    Ok(Exit::Success)
}

/// Writes an openable copy of the database into `target` (which must not exist): SSTables and
/// sealed value-log segments hard-linked, the rest copied. Restore by opening the copy.
pub fn checkpoint(dir: &Path, target: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_db(dir, None)?;
    let info = db.checkpoint(target)?;
    db.close()?;
    if out.json {
        print_json(&json!({
            "path": dir.display().to_string(),
            "checkpoint": target.display().to_string(),
            "sequence": info.sequence,
            "files_linked": info.files_linked,
            "files_copied": info.files_copied,
            "bytes_copied": info.bytes_copied,
        }));
    } else {
        outln!(
            "checkpoint of {} at sequence {} in {}: {} files linked, {} files copied ({})",
            dir.display(),
            info.sequence,
            target.display(),
            info.files_linked,
            info.files_copied,
            format::size(info.bytes_copied)
        );
    }
    Ok(Exit::Success)
}

/// Prints the engine statistics.
pub fn stats(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_read_only(dir)?;
    let stats = db.stats();
    db.close()?;
    if out.json {
        print_json(&stats_json(&stats));
    } else {
        outln!("{stats}");
        outln!("Last sequence {}; memtable {}", stats.last_sequence, format::size(stats.memtable_bytes));
    }
    Ok(Exit::Success)
}

fn levels_json(stats: &Stats) -> serde_json::Value {
    stats.levels.iter().map(|l| json!({ "level": l.level, "files": l.files, "bytes": l.bytes })).collect()
}

fn stats_json(s: &Stats) -> serde_json::Value {
    json!({
        "levels": levels_json(s),
        "segments": s.segments.iter().map(|seg| json!({
            "id": seg.id, "bytes": seg.bytes, "garbage_bytes": seg.garbage_bytes,
        })).collect::<Vec<_>>(),
        "log_head": { "segment": s.log_head.0, "offset": s.log_head.1 },
        "last_sequence": s.last_sequence,
        "memtable_bytes": s.memtable_bytes,
        "hash_table": s.hash_table.map(|h| json!({
            "buckets": h.buckets, "entries": h.entries, "tombstones": h.tombstones,
            "collision_used": h.collision_used, "file_bytes": h.file_bytes, "recent_keys": h.recent_keys,
            "checkpoints": h.checkpoints, "growths": h.growths,
        })),
        "sstable_bytes": s.sstable_bytes(),
        "vlog_bytes": s.vlog_bytes(),
        "vlog_garbage_bytes": s.vlog_garbage_bytes(),
        "since_open": {
            "user_bytes_written": s.user_bytes_written,
            "vlog_bytes_written": s.vlog_bytes_written,
            "flush_bytes_written": s.flush_bytes_written,
            "compaction_bytes_written": s.compaction_bytes_written,
            "compaction_bytes_read": s.compaction_bytes_read,
            "manifest_bytes_written": s.manifest_bytes_written,
            "write_amplification": s.write_amplification(),
            "flushes": s.flushes,
            "compactions": s.compactions,
            "stall_slowdown_micros": s.stall_slowdown_micros,
            "stall_stop_micros": s.stall_stop_micros,
            "gets": s.gets,
            "vlog_reads": s.vlog_reads,
            "tables_probed": s.tables_probed,
            "block_cache_hits": s.block_cache_hits,
            "block_cache_misses": s.block_cache_misses,
        },
    })
}
