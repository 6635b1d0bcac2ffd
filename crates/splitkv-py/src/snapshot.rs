//! `splitkv.Snapshot`: a consistent read view of a database, released explicitly or at the end
//! of a `with` block.
//!
//! While a snapshot lives the engine keeps every version it can see (compaction keeps them,
//! value-log GC defers freeing their segments), so a long-lived one costs space: release it
//! when done rather than waiting for Python's collector.
//!
//! A snapshot covers every keyspace: `get`, `multi_get` and `iterator` read one with their
//! `keyspace=` keyword, so reads of several keyspaces see one point in time.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use splitkv::Snapshot;

use crate::bounds::RangeArgs;
use crate::db::PyDb;
use crate::errors::ClosedError;
use crate::handle::SharedDb;
use crate::iterator::{ItemShape, PyIterator};
use crate::keyspace::PyKeyspace;
use crate::reads::{IterArgs, ReadFlags, Reader};

/// A read view of a database as of `DB.snapshot()`.
///
/// It reads like the database (`get`, `snapshot[key]`, `key in snapshot`, `multi_get`,
/// `iterator`, `iter()`) but sees no write made after it was taken. `release()`, or leaving a
/// `with` block, frees it; reading a released snapshot raises `ClosedError`.
#[pyclass(frozen, mapping, module = "splitkv", name = "Snapshot")]
pub struct PySnapshot {
    db: Arc<SharedDb>,
    snapshot: Mutex<Option<Snapshot>>,
}

impl PySnapshot {
    /// Takes a snapshot of `db`.
    pub fn new(db: &Bound<'_, PyDb>) -> PyResult<Self> {
        let shared = Arc::clone(db.get().shared());
        let snapshot = shared.run(db.py(), |db| Ok(db.snapshot()))?;
        Ok(PySnapshot { db: shared, snapshot: Mutex::new(Some(snapshot)) })
    }

    /// A reader of `keyspace` (`None`: the default keyspace) at the snapshot.
    fn reader<'a>(&'a self, keyspace: Option<&'a Bound<'_, PyKeyspace>>) -> PyResult<Reader<'a>> {
        let keyspace = keyspace.map(|k| k.get().of(&self.db)).transpose()?;
        match self.snapshot.lock().clone() {
            Some(snapshot) => Ok(Reader { db: &self.db, snapshot: Some(snapshot), keyspace }),
            None => Err(ClosedError::new_err("the snapshot has been released")),
        }
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of `key` in the snapshot (of `keyspace`, by default the default keyspace),
    /// or `default` if it is absent there.
    #[pyo3(signature = (key, default=None, *, keyspace=None, fill_cache=true, verify_checksums=false))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        keyspace: Option<&Bound<'py, PyKeyspace>>,
        fill_cache: bool,
        verify_checksums: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.reader(keyspace)?.get_or(py, key, default, ReadFlags { fill_cache, verify_checksums })
    }

    /// The values of `keys` in the snapshot (of `keyspace`), `None` for absent keys.
    #[pyo3(signature = (keys, *, keyspace=None))]
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        keyspace: Option<&Bound<'py, PyKeyspace>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.reader(keyspace)?.multi_get(py, keys)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.reader(None)?.get_item(py, key)
    }

    fn __contains__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<bool> {
        self.reader(None)?.contains(py, key)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.reader(None)?.keys(py)
    }

    /// An iterator over the snapshot (of `keyspace`); the other arguments are those of
    /// `DB.iterator()`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        *, start=None, stop=None, include_start=true, include_stop=false, prefix=None,
        reverse=false, include_key=true, include_value=true, fill_cache=true, keyspace=None
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
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<PyIterator> {
        let range = RangeArgs::from_py(start, stop, include_start, include_stop, prefix)?;
        let shape = ItemShape { keys: include_key, values: include_value };
        self.reader(keyspace)?.iterator(py, IterArgs { range, reverse, shape, fill_cache })
    }

    /// Frees the snapshot (iterators made from it keep their own view). Idempotent.
    fn release(&self) {
        self.snapshot.lock().take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.release();
        false
    }
}
