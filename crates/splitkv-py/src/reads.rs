//! The read path shared by `DB`, `Keyspace` and `Snapshot`: point reads, multi-reads and
//! iterators, of the default keyspace or of a named one, as of the latest state or of a
//! snapshot.

use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use splitkv::{Db, ReadOptions, Snapshot};

use crate::bounds::RangeArgs;
use crate::convert::byte_arg;
use crate::handle::SharedDb;
use crate::iterator::{ItemShape, PyIterator};
use crate::keyspace::NamedKeyspace;

/// A read view: the database, the keyspace read and the snapshot reads are made at (`None`:
/// the latest state).
pub struct Reader<'a> {
    /// The database read.
    pub db: &'a Arc<SharedDb>,
    /// The read view, if pinned.
    pub snapshot: Option<Snapshot>,
    /// The keyspace read (`None`: the default keyspace).
    pub keyspace: Option<&'a NamedKeyspace>,
}

/// Per-call read settings.
#[derive(Clone, Copy)]
pub struct ReadFlags {
    /// Keep the blocks read in the block cache.
    pub fill_cache: bool,
    /// Verify block checksums even for cached blocks.
    pub verify_checksums: bool,
}

impl Default for ReadFlags {
    fn default() -> Self {
        ReadFlags { fill_cache: true, verify_checksums: false }
    }
}

/// The arguments of `iterator()`.
pub struct IterArgs {
    /// The key range.
    pub range: RangeArgs,
    /// Largest key first.
    pub reverse: bool,
    /// What each item is.
    pub shape: ItemShape,
    /// Keep the blocks read in the block cache.
    pub fill_cache: bool,
}

impl Reader<'_> {
    fn options(&self, flags: ReadFlags) -> ReadOptions {
        ReadOptions {
            snapshot: self.snapshot.clone(),
            fill_cache: flags.fill_cache,
            verify_checksums: flags.verify_checksums,
            ..ReadOptions::default()
        }
    }

    /// The value of `key` as Python `bytes`, or `None`.
    pub fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        flags: ReadFlags,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = byte_arg(key, "key")?;
        let key = key.as_slice();
        let opts = self.options(flags);
        let keyspace = self.keyspace;
        let value = self.db.run(py, |db| match keyspace {
            None => db.get_opt(&opts, key),
            Some(keyspace) => keyspace.resolve(db)?.get_opt(&opts, key),
        })?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// `get(key, default)`: the value, or `default` if the key is absent.
    pub fn get_or<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        flags: ReadFlags,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.get(py, key, flags)?.map(Bound::into_any).or(default))
    }

    /// `reader[key]`: the value, or `KeyError`.
    pub fn get_item<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.get(py, key, ReadFlags::default())?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    /// `key in reader`.
    pub fn contains<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<bool> {
        Ok(self.get(py, key, ReadFlags::default())?.is_some())
    }

    /// The values of `keys` (an iterable of bytes), read at one sequence number.
    pub fn multi_get<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let keys: Vec<Vec<u8>> =
            keys.try_iter()?.map(|k| Ok(byte_arg(&k?, "key")?.as_slice().to_vec())).collect::<PyResult<_>>()?;
        let opts = self.options(ReadFlags::default());
        let keyspace = self.keyspace;
        let values = self.db.run(py, |db| match keyspace {
            None => db.multi_get(&opts, &keys),
            Some(keyspace) => keyspace.resolve(db)?.multi_get(&opts, &keys),
        })?;
        PyList::new(py, values.iter().map(|v| v.as_ref().map(|v| PyBytes::new(py, v))))
    }

    /// An iterator over a key range.
    pub fn iterator(&self, py: Python<'_>, args: IterArgs) -> PyResult<PyIterator> {
        if !args.shape.keys && !args.shape.values {
            return Err(PyValueError::new_err("include_key and include_value cannot both be False"));
        }
        let range = args.range.to_range()?;
        let opts = ReadOptions {
            snapshot: self.snapshot.clone(),
            fill_cache: args.fill_cache,
            lower_bound: range.lower,
            upper_bound: range.upper,
            keys_only: !args.shape.values,
            ..ReadOptions::default()
        };
        let keyspace = self.keyspace;
        let cursor = |db: &Db| match keyspace {
            None => db.iter(opts),
            Some(keyspace) => keyspace.resolve(db)?.iter(opts),
        };
        // Registered while the database cannot close, so that a close cannot miss it.
        self.db.run(py, |db| Ok(PyIterator::new(self.db, cursor(db)?, args.reverse, args.shape)))
    }

    /// `iter(reader)`: every key in order.
    pub fn keys(&self, py: Python<'_>) -> PyResult<PyIterator> {
        let range = RangeArgs { start: None, stop: None, include_start: true, include_stop: false, prefix: None };
        self.iterator(
            py,
            IterArgs { range, reverse: false, shape: ItemShape { keys: true, values: false }, fill_cache: true },
        )
    }
}
