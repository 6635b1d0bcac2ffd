//! `DB(path, **options)`: the engine's `Options` as keyword arguments.
//!
//! Each keyword is the name of an `Options` field, with the same meaning and default; the kinds
//! and policies that are enums in Rust are strings here (`compression="lz4"`, `index="hash"`),
//! and the numbers inside an enum variant are keywords of their own, accepted only with that
//! variant (`hash_capacity` with `index="hash"`). A misspelt keyword raises `TypeError` naming
//! it (and the nearest real name), as Python does for any function; a value of the wrong type
//! raises `TypeError` and an impossible one `ValueError`, before anything is opened.
//!
//! Not exposed: `fs` and `compaction_listener` (Rust trait objects).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt};
use splitkv::{CompactionPolicyKind, CompressionType, GcPolicyKind, IndexBlockKind, IndexKind, Options};

use crate::convert::type_name;

/// Every keyword `DB()` accepts, in the order of the engine's `Options`; exported to Python as
/// `splitkv.OPTION_NAMES`.
pub const OPTION_NAMES: &[&str] = &[
    "create_if_missing",
    "error_if_exists",
    "value_threshold",
    "write_buffer_size",
    "segment_size",
    "vlog_buffer_size",
    "block_size",
    "block_restart_interval",
    "compression",
    "index_block_kind",
    "bloom_bits_per_key",
    "block_cache_capacity",
    "max_open_files",
    "num_levels",
    "level0_file_num_compaction_trigger",
    "level0_slowdown_writes_trigger",
    "level0_stop_writes_trigger",
    "max_bytes_for_level_base",
    "max_bytes_for_level_multiplier",
    "target_file_size",
    "max_background_compactions",
    "compaction_policy",
    "time_slice_ms",
    "time_slice_dynamic",
    "time_slice_drain_percent",
    "gc_policy",
    "background_gc",
    "gc_garbage_ratio",
    "gc_space_budget",
    "gc_space_amplification",
    "gc_space_trigger",
    "gc_punch_holes",
    "gc_logical_space_factor",
    "gc_rate_limit",
    "gc_in_compaction",
    "gc_compact_in_place",
    "index",
    "hash_capacity",
    "hash_shards",
    "paranoid_checks",
    "prefetch_threads",
];

/// Buckets of a new hash table when `hash_capacity` is not given (the admin tool's default);
/// the table grows as keys arrive.
const DEFAULT_HASH_CAPACITY: u64 = 1 << 16;

/// The numbers of enum variants, collected while reading the keywords and checked against the
/// variant chosen once all are read (keyword order is free).
#[derive(Default)]
struct VariantSettings {
    time_slice_ms: Option<u64>,
    time_slice_dynamic: Option<bool>,
    time_slice_drain_percent: Option<u8>,
    hash_capacity: Option<u64>,
    hash_shards: Option<usize>,
}

/// The engine options named by `kwargs`, the rest at their defaults.
pub fn from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut options = Options::default();
    let mut variants = VariantSettings::default();
    let Some(kwargs) = kwargs else { return Ok(options) };
    for (name, value) in kwargs.iter() {
        let name: String = name.extract()?;
        set(&mut options, &mut variants, &name, &value)?;
    }
    apply_variants(&mut options, variants)?;
    Ok(options)
}

fn set(o: &mut Options, v: &mut VariantSettings, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let value = Value { name, obj: value };
    match name {
        "create_if_missing" => o.create_if_missing = value.boolean()?,
        "error_if_exists" => o.error_if_exists = value.boolean()?,
        // None: never separate (the engine's usize::MAX, a plain LSM-tree).
        "value_threshold" => o.value_threshold = value.optional(|v| v.usize())?.unwrap_or(usize::MAX),
        "write_buffer_size" => o.write_buffer_size = value.usize()?,
        "segment_size" => o.segment_size = value.u64()?,
        "vlog_buffer_size" => o.vlog_buffer_size = value.usize()?,
        "block_size" => o.block_size = value.usize()?,
        "block_restart_interval" => o.block_restart_interval = value.usize()?,
        "compression" => {
            o.compression = match value.string()?.as_str() {
                "none" => CompressionType::None,
                "lz4" => CompressionType::Lz4,
                "zstd" => CompressionType::Zstd,
                other => return Err(value.choice_error(other, &["none", "lz4", "zstd"])),
            }
        }
        "index_block_kind" => {
            let kind = value.string()?;
            o.index_block_kind = IndexBlockKind::parse(&kind)
                .ok_or_else(|| value.choice_error(&kind, &["binary", "learned", "adaptive"]))?;
        }
        "bloom_bits_per_key" => o.bloom_bits_per_key = value.usize()?,
        "block_cache_capacity" => o.block_cache_capacity = value.usize()?,
        "max_open_files" => o.max_open_files = value.usize()?,
        "num_levels" => o.num_levels = value.usize()?,
        "level0_file_num_compaction_trigger" => o.level0_file_num_compaction_trigger = value.usize()?,
        "level0_slowdown_writes_trigger" => o.level0_slowdown_writes_trigger = value.usize()?,
        "level0_stop_writes_trigger" => o.level0_stop_writes_trigger = value.usize()?,
        "max_bytes_for_level_base" => o.max_bytes_for_level_base = value.u64()?,
        "max_bytes_for_level_multiplier" => o.max_bytes_for_level_multiplier = value.float()?,
        "target_file_size" => o.target_file_size = value.u64()?,
        "max_background_compactions" => o.max_background_compactions = value.usize()?,
        "compaction_policy" => {
            o.compaction_policy = match value.string()?.as_str() {
                "score" => CompactionPolicyKind::Score,
                // The slice itself is set from the time_slice_* keywords once all are read.
                "time_slice" => CompactionPolicyKind::time_slice(0),
                other => return Err(value.choice_error(other, &["score", "time_slice"])),
            }
        }
        "time_slice_ms" => v.time_slice_ms = Some(value.u64()?),
        "time_slice_dynamic" => v.time_slice_dynamic = Some(value.boolean()?),
        "time_slice_drain_percent" => {
            let percent = value.u64()?;
            v.time_slice_drain_percent =
                Some(u8::try_from(percent).ok().filter(|p| *p <= 100).ok_or_else(|| value.range_error("0 to 100"))?);
        }
        "gc_policy" => {
            let choice = value.string()?;
            o.gc_policy = GcPolicyKind::parse(&choice)
                .ok_or_else(|| value.choice_error(&choice, &["oldest", "greedy", "cost_benefit"]))?
        }
        "background_gc" => o.background_gc = value.boolean()?,
        "gc_garbage_ratio" => o.gc_garbage_ratio = value.float()?,
        "gc_space_budget" => o.gc_space_budget = value.optional(|v| v.u64())?,
        "gc_space_amplification" => o.gc_space_amplification = value.optional(|v| v.float())?,
        "gc_space_trigger" => o.gc_space_trigger = value.float()?,
        "gc_punch_holes" => o.gc_punch_holes = value.boolean()?,
        "gc_logical_space_factor" => o.gc_logical_space_factor = value.float()?,
        "gc_rate_limit" => o.gc_rate_limit = value.u64()?,
        "gc_in_compaction" => o.gc_in_compaction = value.boolean()?,
        "gc_compact_in_place" => o.gc_compact_in_place = value.boolean()?,
        "index" => {
            o.index = match value.string()?.as_str() {
                "lsm" => IndexKind::Lsm,
                "hash" => IndexKind::Hash { capacity: DEFAULT_HASH_CAPACITY, shards: 1 },
                other => return Err(value.choice_error(other, &["lsm", "hash"])),
            }
        }
        "hash_capacity" => v.hash_capacity = Some(value.u64()?),
        "hash_shards" => v.hash_shards = Some(value.usize()?),
        "paranoid_checks" => o.paranoid_checks = value.boolean()?,
        "prefetch_threads" => o.prefetch_threads = value.usize()?,
        _ => return Err(unknown_keyword(name)),
    }
    Ok(())
}

fn apply_variants(o: &mut Options, v: VariantSettings) -> PyResult<()> {
    match &mut o.compaction_policy {
        CompactionPolicyKind::TimeSlice { slice_ms, dynamic, drain_percent } => {
            *slice_ms = v.time_slice_ms.ok_or_else(|| {
                PyValueError::new_err("compaction_policy='time_slice' needs time_slice_ms (the slice in milliseconds)")
            })?;
            *dynamic = v.time_slice_dynamic.unwrap_or(false);
            *drain_percent = v.time_slice_drain_percent;
        }
        _ => {
            if v.time_slice_ms.is_some() || v.time_slice_dynamic.is_some() || v.time_slice_drain_percent.is_some() {
                return Err(PyValueError::new_err(
                    "time_slice_* options apply only with compaction_policy='time_slice'",
                ));
            }
        }
    }
    match &mut o.index {
        IndexKind::Hash { capacity, shards } => {
            *capacity = v.hash_capacity.unwrap_or(*capacity);
            *shards = v.hash_shards.unwrap_or(*shards);
        }
        _ => {
            if v.hash_capacity.is_some() || v.hash_shards.is_some() {
                return Err(PyValueError::new_err("hash_capacity and hash_shards apply only with index='hash'"));
            }
        }
    }
    Ok(())
}

fn unknown_keyword(name: &str) -> PyErr {
    let hint = OPTION_NAMES
        .iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= 3)
        .min()
        .map_or_else(String::new, |(_, candidate)| format!(" (did you mean '{candidate}'?)"));
    PyTypeError::new_err(format!("DB() got an unexpected keyword argument '{name}'{hint}"))
}

/// Levenshtein distance, for suggesting the option a typo meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// One keyword's value, read as the type its option needs.
struct Value<'a, 'py> {
    name: &'a str,
    obj: &'a Bound<'py, PyAny>,
}

impl Value<'_, '_> {
    fn type_error(&self, expected: &str) -> PyErr {
        PyTypeError::new_err(format!("option {} must be {expected}, not {}", self.name, type_name(self.obj)))
    }

    fn range_error(&self, range: &str) -> PyErr {
        PyValueError::new_err(format!("option {} must be {range}, got {}", self.name, self.obj))
    }

    fn choice_error(&self, got: &str, choices: &[&str]) -> PyErr {
        PyValueError::new_err(format!("option {} must be one of {}, got '{got}'", self.name, choices.join(", ")))
    }

    fn boolean(&self) -> PyResult<bool> {
        self.obj.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| self.type_error("a bool"))
    }

    /// Integers only: a bool is an `int` to Python, but `block_size=True` is a mistake.
    fn u64(&self) -> PyResult<u64> {
        if !self.obj.is_instance_of::<PyInt>() || self.obj.is_instance_of::<PyBool>() {
            return Err(self.type_error("an int"));
        }
        self.obj.extract().map_err(|_| self.range_error("a non-negative integer below 2**64"))
    }

    fn usize(&self) -> PyResult<usize> {
        usize::try_from(self.u64()?).map_err(|_| self.range_error("a non-negative integer that fits a pointer"))
    }

    fn float(&self) -> PyResult<f64> {
        if self.obj.is_instance_of::<PyBool>()
            || !(self.obj.is_instance_of::<PyFloat>() || self.obj.is_instance_of::<PyInt>())
        {
            return Err(self.type_error("a number"));
        }
        self.obj.extract()
    }

    fn string(&self) -> PyResult<String> {
        self.obj.extract().map_err(|_| self.type_error("a str"))
    }

    fn optional<T>(&self, read: impl FnOnce(&Self) -> PyResult<T>) -> PyResult<Option<T>> {
        if self.obj.is_none() {
            Ok(None)
        } else {
            read(self).map(Some)
        }
    }
}
