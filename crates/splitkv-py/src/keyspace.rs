//! `splitkv.Keyspace`: a named keyspace of a database (RocksDB's column families) with the
//! database's data API: `get/put/delete/delete_range`, `multi_get`, the dict protocol and
//! `iterator()`, over the keyspace's keys alone.
//!
//! The engine's `Keyspace<'db>` borrows its `Db`, which a Python object cannot hold (the `DB`
//! may be closed under it), so a Python keyspace holds the shared database with the keyspace's
//! name and id, and resolves the engine handle inside each call, with the GIL released. Ids are
//! never reused: once its keyspace is dropped a handle raises `InvalidArgumentError`, even after
//! a keyspace of the same name was created again, rather than reading the new one.
//!
//! Snapshots read a keyspace through their `keyspace=` keyword, and write batches write to one
//! the same way, so one snapshot sees several keyspaces at one point in time and one batch writes
//! to several atomically.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use splitkv::{Db, Keyspace};

use crate::batch::{write_one, Op};
use crate::bounds::RangeArgs;
use crate::convert::byte_arg;
use crate::handle::SharedDb;
use crate::iterator::{ItemShape, PyIterator};
use crate::reads::{IterArgs, ReadFlags, Reader};

/// A keyspace as a binding holds it: by name, and by id to tell it from a later namesake.
pub struct NamedKeyspace {
    name: String,
    id: u32,
}

impl NamedKeyspace {
    /// The engine handle of the keyspace; `InvalidArgument` if it has been dropped.
    pub fn resolve<'db>(&self, db: &'db Db) -> splitkv::Result<Keyspace<'db>> {
        match db.existing_keyspace(&self.name) {
            Some(keyspace) if keyspace.id() == self.id => Ok(keyspace),
            _ => Err(splitkv::Error::InvalidArgument(format!("keyspace {:?} was dropped", self.name))),
        }
    }
}

/// A keyspace of a database: keys apart from the default keyspace's and from every other
/// keyspace's, with the same methods as `DB` for data.
///
/// Made by `DB.keyspace(name)`. A snapshot reads it with `keyspace=` (`snap.get(key,
/// keyspace=ks)`), and a write batch writes to it the same way (`batch.put(key, value,
/// keyspace=ks)`). After `DB.drop_keyspace(name)` every call raises `InvalidArgumentError`.
#[pyclass(frozen, mapping, module = "splitkv", name = "Keyspace")]
pub struct PyKeyspace {
    db: Arc<SharedDb>,
    keyspace: NamedKeyspace,
}

impl PyKeyspace {
    /// The keyspace `name` of `db`, created if missing.
    pub fn open(py: Python<'_>, db: &Arc<SharedDb>, name: &str) -> PyResult<Self> {
        let keyspace = db.run(py, |db| {
            let keyspace = db.keyspace(name)?;
            Ok(NamedKeyspace { name: keyspace.name().to_owned(), id: keyspace.id() })
        })?;
        Ok(PyKeyspace { db: Arc::clone(db), keyspace })
    }

    /// The keyspace, for an object of `db` that reads or writes it; `ValueError` if it belongs
    /// to another database (or to an earlier opening of the same one).
    pub fn of(&self, db: &Arc<SharedDb>) -> PyResult<&NamedKeyspace> {
        match Arc::ptr_eq(&self.db, db) {
            true => Ok(&self.keyspace),
            false => Err(PyValueError::new_err(format!(
                "keyspace {:?} belongs to another database handle",
                self.keyspace.name
            ))),
        }
    }

    fn reader(&self) -> Reader<'_> {
        Reader { db: &self.db, snapshot: None, keyspace: Some(&self.keyspace) }
    }

    fn write(&self, py: Python<'_>, sync: bool, op: Op<'_>) -> PyResult<()> {
        write_one(py, &self.db, Some(&self.keyspace), sync, op)
    }
}

#[pymethods]
impl PyKeyspace {
    /// The keyspace's name.
    #[getter]
    fn name(&self) -> &str {
        &self.keyspace.name
    }

    /// The value of `key`, or `default` if it is absent.
    #[pyo3(signature = (key, default=None, *, fill_cache=true, verify_checksums=false))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        fill_cache: bool,
        verify_checksums: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.reader().get_or(py, key, default, ReadFlags { fill_cache, verify_checksums })
    }

    /// Sets `key` to `value`; with `sync=True` the write is durable when this returns.
    #[pyo3(signature = (key, value, *, sync=false))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let (key, value) = (byte_arg(key, "key")?, byte_arg(value, "value")?);
        self.write(py, sync, Op::Put(key.as_slice(), value.as_slice()))
    }

    /// Removes `key` (nothing happens if it is absent).
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = byte_arg(key, "key")?;
        self.write(py, sync, Op::Delete(key.as_slice()))
    }

    /// Removes every key of the keyspace in `[start, end)` (nothing if `start >= end`).
    #[pyo3(signature = (start, end, *, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (start, end) = (byte_arg(start, "start")?, byte_arg(end, "end")?);
        self.write(py, sync, Op::DeleteRange(start.as_slice(), end.as_slice()))
    }

    /// The values of `keys` (an iterable of bytes) as a list, `None` for absent keys, all read
    /// at one point in time.
    fn multi_get<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        self.reader().multi_get(py, keys)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.reader().get_item(py, key)
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    /// `del ks[key]`: like `delete`, no `KeyError` for an absent key.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    fn __contains__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<bool> {
        self.reader().contains(py, key)
    }

    /// `iter(ks)`: every key of the keyspace, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.reader().keys(py)
    }

    /// An iterator over a key range of the keyspace; the arguments are those of
    /// `DB.iterator()`, and keys are the keyspace's own (bounds and `seek()` too).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        *, start=None, stop=None, include_start=true, include_stop=false, prefix=None,
        reverse=false, include_key=true, include_value=true, fill_cache=true
    ))]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_stop: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        let range = RangeArgs::from_py(start, stop, include_start, include_stop, prefix)?;
        let shape = ItemShape { keys: include_key, values: include_value };
        self.reader().iterator(py, IterArgs { range, reverse, shape, fill_cache })
    }

    fn __repr__(&self) -> String {
        format!("<splitkv.Keyspace {:?}>", self.keyspace.name)
    }
}
