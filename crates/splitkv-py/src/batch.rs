//! `splitkv.WriteBatch`: puts and deletes collected in Python and applied atomically.
//!
//! The operations are kept in an engine `WriteBatch` (nothing is written until `write()`); a
//! `with` block writes the batch when it ends normally and discards it when an exception ends
//! it, so a failed block leaves the database untouched.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use splitkv::{WriteBatch, WriteOptions};

use crate::convert::byte_arg;
use crate::handle::SharedDb;

/// Puts and deletes applied atomically, in the order made (a later operation on a key wins).
///
/// Made by `DB.write_batch(sync=False)`. `write()` applies and empties it; as a context manager
/// it is written on a normal exit and discarded when an exception leaves the block.
#[pyclass(frozen, module = "splitkv", name = "WriteBatch")]
pub struct PyWriteBatch {
    db: Arc<SharedDb>,
    sync: bool,
    ops: Mutex<WriteBatch>,
}

impl PyWriteBatch {
    /// An empty batch for `db`.
    pub fn new(db: &Arc<SharedDb>, sync: bool) -> Self {
        PyWriteBatch { db: Arc::clone(db), sync, ops: Mutex::new(WriteBatch::new()) }
    }
}

#[pymethods]
impl PyWriteBatch {
    /// Adds a put of `value` at `key`.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = byte_arg(key, "key")?;
        let value = byte_arg(value, "value")?;
        self.ops.lock().put(key.as_slice(), value.as_slice());
        Ok(())
    }

    /// Adds a delete of `key`.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = byte_arg(key, "key")?;
        self.ops.lock().delete(key.as_slice());
        Ok(())
    }

    /// Adds a delete of every key in `[start, end)`.
    fn delete_range(&self, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let start = byte_arg(start, "start")?;
        let end = byte_arg(end, "end")?;
        self.ops.lock().delete_range(start.as_slice(), end.as_slice());
        Ok(())
    }

    /// Drops every operation added so far.
    fn clear(&self) {
        self.ops.lock().clear();
    }

    /// Operations in the batch.
    fn __len__(&self) -> usize {
        self.ops.lock().len()
    }

    /// Applies the batch atomically (durably with `sync=True`) and empties it.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let batch = std::mem::take(&mut *self.ops.lock());
        let opts = WriteOptions { sync: self.sync };
        self.db.run(py, |db| db.write(&opts, batch))
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type, *_rest))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _rest: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        match exc_type {
            Some(t) if !t.is_none() => self.clear(),
            _ => self.write(py)?,
        }
        Ok(false)
    }
}
