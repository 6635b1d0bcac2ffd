//! Engine reports as Python dicts: `DB.stats()` and `DB.run_gc()`.
//!
//! Keys are the engine's field names, so the Rust documentation of `splitkv::Stats`
//! describes each; the derived figures (`write_amplification`, `sstable_bytes`, `vlog_bytes`,
//! `vlog_garbage_bytes`) are added beside the counters they come from.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use splitkv::{GcOutcome, Stats};

/// `stats` as a dict.
pub fn to_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let counters = [
        ("user_bytes_written", s.user_bytes_written),
        ("vlog_bytes_written", s.vlog_bytes_written),
        ("flush_bytes_written", s.flush_bytes_written),
        ("compaction_bytes_written", s.compaction_bytes_written),
        ("compaction_bytes_read", s.compaction_bytes_read),
        ("manifest_bytes_written", s.manifest_bytes_written),
        ("flushes", s.flushes),
        ("compactions", s.compactions),
        ("stall_slowdown_micros", s.stall_slowdown_micros),
        ("stall_stop_micros", s.stall_stop_micros),
        ("stall_gc_micros", s.stall_gc_micros),
        ("gc_surveys", s.gc_surveys),
        ("gc_survey_micros", s.gc_survey_micros),
        ("gc_scan_micros", s.gc_scan_micros),
        ("gc_relocate_micros", s.gc_relocate_micros),
        ("gets", s.gets),
        ("vlog_reads", s.vlog_reads),
        ("tables_probed", s.tables_probed),
        ("block_cache_hits", s.block_cache_hits),
        ("block_cache_misses", s.block_cache_misses),
        ("last_sequence", s.last_sequence),
        ("memtable_bytes", s.memtable_bytes),
        ("gc_runs", s.gc_runs),
        ("gc_bytes_read", s.gc_bytes_read),
        ("gc_bytes_relocated", s.gc_bytes_relocated),
        ("gc_bytes_punched", s.gc_bytes_punched),
        ("gc_segments_released", s.gc_segments_released),
        ("gc_segments_compacted", s.gc_segments_compacted),
        ("disk_bytes", s.disk_bytes),
        ("engine_bytes_written", s.engine_bytes_written()),
        ("sstable_bytes", s.sstable_bytes()),
        ("vlog_bytes", s.vlog_bytes()),
        ("vlog_garbage_bytes", s.vlog_garbage_bytes()),
    ];
    for (name, value) in counters {
        d.set_item(name, value)?;
    }
    d.set_item("write_amplification", s.write_amplification())?;
    d.set_item("log_head", s.log_head)?;
    let levels = PyList::empty(py);
    for l in &s.levels {
        let level = PyDict::new(py);
        level.set_item("level", l.level)?;
        level.set_item("files", l.files)?;
        level.set_item("bytes", l.bytes)?;
        levels.append(level)?;
    }
    d.set_item("levels", levels)?;
    let segments = PyList::empty(py);
    for seg in &s.segments {
        let segment = PyDict::new(py);
        segment.set_item("id", seg.id)?;
        segment.set_item("bytes", seg.bytes)?;
        segment.set_item("garbage_bytes", seg.garbage_bytes)?;
        segments.append(segment)?;
    }
    d.set_item("segments", segments)?;
    match &s.hash_table {
        None => d.set_item("hash_table", py.None())?,
        Some(t) => {
            let table = PyDict::new(py);
            let fields = [
                ("buckets", t.buckets),
                ("entries", t.entries),
                ("tombstones", t.tombstones),
                ("collision_used", t.collision_used),
                ("file_bytes", t.file_bytes),
                ("recent_keys", t.recent_keys),
                ("checkpoints", t.checkpoints),
                ("growths", t.growths),
            ];
            for (name, value) in fields {
                table.set_item(name, value)?;
            }
            d.set_item("hash_table", table)?;
        }
    }
    let ib = &s.index_blocks;
    let index_blocks = PyDict::new(py);
    let counts = [
        ("learned_tables", ib.learned_tables),
        ("binary_tables", ib.binary_tables),
        ("model_bytes", ib.model_bytes),
        ("binary_index_bytes", ib.binary_index_bytes),
        ("max_error", ib.max_error),
        ("built_learned", ib.built_learned),
        ("build_rejections", ib.build_rejections),
        ("lazy_trained", ib.lazy_trained),
        ("lazy_rejections", ib.lazy_rejections),
    ];
    for (name, value) in counts {
        index_blocks.set_item(name, value)?;
    }
    index_blocks.set_item("mean_error", ib.mean_error)?;
    index_blocks.set_item("learned_lookup_nanos", ib.learned_lookup_nanos)?;
    index_blocks.set_item("binary_lookup_nanos", ib.binary_lookup_nanos)?;
    d.set_item("index_blocks", index_blocks)?;
    Ok(d)
}

/// What a garbage-collection run did, as a dict.
pub fn gc_outcome<'py>(py: Python<'py>, o: &GcOutcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("victim", o.victim.map(|id| id.0))?;
    d.set_item("bytes_read", o.bytes_read)?;
    d.set_item("records_relocated", o.records_relocated)?;
    d.set_item("bytes_relocated", o.bytes_relocated)?;
    d.set_item("bytes_punched", o.bytes_punched)?;
    d.set_item("segments_released", o.segments_released.iter().map(|id| id.0).collect::<Vec<_>>())?;
    Ok(d)
}
