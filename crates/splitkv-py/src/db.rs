//! `splitkv.DB`: an open database with plyvel-style methods and the dict protocol.
//!
//! Every engine call runs with the GIL released (see `handle`), so Python threads keep running
//! while one of them waits for the disk; the engine itself is safe to call from many threads.
//! Keys and values are bytes (see `convert`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::batch::{write_one, Op, PyWriteBatch};
use crate::bounds::RangeArgs;
use crate::convert::{byte_arg, optional_bytes};
use crate::handle::SharedDb;
use crate::iterator::{ItemShape, PyIterator};
use crate::keyspace::PyKeyspace;
use crate::options;
use crate::reads::{IterArgs, ReadFlags, Reader};
use crate::snapshot::PySnapshot;
use crate::stats;

/// An open splitkv database.
///
/// `DB(path, **options)` opens (by default creating) the database in directory `path`; each
/// keyword is an engine option (`splitkv.OPTION_NAMES` lists them, a misspelt one raises
/// `TypeError`). Keys and values are `bytes`. Use it as a context manager, or call `close()`:
/// a database stays locked against other handles until closed.
#[pyclass(frozen, mapping, module = "splitkv", name = "DB")]
pub struct PyDb {
    shared: Arc<SharedDb>,
}

impl PyDb {
    fn reader(&self) -> Reader<'_> {
        Reader { db: &self.shared, snapshot: None, keyspace: None }
    }

    /// The shared handle, for the objects a database makes.
    pub fn shared(&self) -> &Arc<SharedDb> {
        &self.shared
    }
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let options = options::from_kwargs(options)?;
        Ok(PyDb { shared: SharedDb::open(py, path, options)? })
    }

    /// The database directory, as a str.
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.shared.path().as_os_str().to_os_string()
    }

    /// True once `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
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
        write_one(py, &self.shared, None, sync, Op::Put(key.as_slice(), value.as_slice()))
    }

    /// Removes `key` (nothing happens if it is absent).
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = byte_arg(key, "key")?;
        write_one(py, &self.shared, None, sync, Op::Delete(key.as_slice()))
    }

    /// Removes every key in `[start, end)` (nothing if `start >= end`): one range tombstone
    /// with the LSM index, whatever the number of keys.
    #[pyo3(signature = (start, end, *, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (start, end) = (byte_arg(start, "start")?, byte_arg(end, "end")?);
        write_one(py, &self.shared, None, sync, Op::DeleteRange(start.as_slice(), end.as_slice()))
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

    /// `del db[key]`: like `delete`, no `KeyError` for an absent key (finding out would cost a
    /// read).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    fn __contains__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<bool> {
        self.reader().contains(py, key)
    }

    /// `iter(db)`: every key, in order (as `iter(dict)`).
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.reader().keys(py)
    }

    /// An iterator over a key range: `[start, stop)` by default (`include_start`,
    /// `include_stop` change either end), or every key beginning with `prefix`. Items are
    /// `(key, value)` tuples, or keys or values alone with `include_value=False` or
    /// `include_key=False` (keys alone read no values). `reverse=True` yields the largest key
    /// first. The iterator reads a consistent view as of its creation.
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

    /// A batch of puts and deletes applied atomically by `write()`, or on leaving a `with`
    /// block without an exception (an exception discards it). `sync=True` makes the write
    /// durable before it returns.
    #[pyo3(signature = (*, sync=false))]
    fn write_batch(&self, sync: bool) -> PyWriteBatch {
        PyWriteBatch::new(&self.shared, sync)
    }

    /// The keyspace called `name` (a `Keyspace`: keys apart from this database's own and from
    /// every other keyspace's), created if there is none. Names are non-empty str of at most
    /// 256 UTF-8 bytes; the list of keyspaces persists.
    fn keyspace(&self, py: Python<'_>, name: &str) -> PyResult<PyKeyspace> {
        PyKeyspace::open(py, &self.shared, name)
    }

    /// Drops the keyspace called `name` and everything in it, in one atomic write whatever its
    /// size; returns whether it existed. Its `Keyspace` objects raise `InvalidArgumentError`
    /// from then on, and a keyspace created later under the same name starts empty.
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        self.shared.run(py, |db| db.drop_keyspace(name))
    }

    /// The names of the keyspaces, in order.
    fn keyspace_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.shared.run(py, |db| Ok(db.keyspace_names()))
    }

    /// A consistent read view as of now, with `get`, `[]`, `in`, `multi_get` and `iterator`.
    /// Release it with `release()` or by leaving a `with` block: while it lives the engine keeps
    /// every version it can see.
    fn snapshot(slf: &Bound<'_, Self>) -> PyResult<PySnapshot> {
        PySnapshot::new(slf)
    }

    /// Writes the memtable to a table file and waits until it is done.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.run(py, |db| db.flush())
    }

    /// Compacts the keys from `start` to `stop`, both inclusive (`None`: unbounded), down
    /// through every level. Returns when done.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start = optional_bytes(start, "start")?;
        let stop = optional_bytes(stop, "stop")?;
        self.shared.run(py, |db| db.compact_range(start.as_deref(), stop.as_deref()))
    }

    /// Collects value-log garbage now (every segment holding garbage is cleaned) and returns
    /// what the last step did, as a dict.
    fn run_gc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let outcome = self.shared.run(py, |db| db.run_gc())?;
        stats::gc_outcome(py, &outcome)
    }

    /// A point-in-time report (levels, value-log segments, write amplification, stalls, GC) as
    /// a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.shared.run(py, |db| Ok(db.stats()))?;
        stats::to_dict(py, &report)
    }

    /// A named engine property (`splitkv.stats`, `splitkv.estimate-num-keys`,
    /// `splitkv.num-files-at-level0`, ...) as a string, or `None` if there is no such property.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        self.shared.run(py, |db| Ok(db.property(name)))
    }

    /// An estimate of the number of keys, free to compute: exact for a database of distinct
    /// keys, high by overwrites and deletes that compaction has not merged yet. (There is no
    /// `len(db)`: an exact count needs a full scan, `sum(1 for _ in db)`.)
    #[getter]
    fn approximate_len(&self, py: Python<'_>) -> PyResult<u64> {
        let estimate = self.property(py, "splitkv.estimate-num-keys")?;
        Ok(estimate.and_then(|e| e.parse().ok()).unwrap_or(0))
    }

    /// Closes the database: waits for calls in flight, closes its iterators, stops background
    /// work and hands buffered writes to the OS (writes made without `sync=True` are not
    /// fsynced). Later calls raise `ClosedError`. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() { "closed" } else { "open" };
        format!("<splitkv.DB {:?} {state}>", self.shared.path().display().to_string())
    }
}
