//! `splitkv.WriteBatch`: puts and deletes collected in Python and applied atomically.
//!
//! The operations are kept in an engine `WriteBatch` (nothing is written until `write()`); a
//! `with` block writes the batch when it ends normally and discards it when an exception ends
//! it, so a failed block leaves the database untouched. An operation's `keyspace=` names the
//! keyspace it writes to, so that one batch spans keyspaces atomically; `DB` and `Keyspace`
//! write their single operations through the same path.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use splitkv::{Db, WriteBatch, WriteOptions};

use crate::convert::byte_arg;
use crate::handle::SharedDb;
use crate::keyspace::{NamedKeyspace, PyKeyspace};

/// One write operation.
pub enum Op<'a> {
    /// Sets a key (the first bytes) to a value.
    Put(&'a [u8], &'a [u8]),
    /// Removes a key.
    Delete(&'a [u8]),
    /// Removes every key in `[start, end)`.
    DeleteRange(&'a [u8], &'a [u8]),
}

/// Adds `op` on `keyspace` (`None`: the default keyspace) to `batch`; an error if the keyspace
/// has been dropped.
fn add(db: &Db, batch: &mut WriteBatch, keyspace: Option<&NamedKeyspace>, op: Op<'_>) -> splitkv::Result<()> {
    let Some(keyspace) = keyspace else {
        add_default(batch, op);
        return Ok(());
    };
    let keyspace = keyspace.resolve(db)?;
    match op {
        Op::Put(key, value) => batch.put_in(&keyspace, key, value),
        Op::Delete(key) => batch.delete_in(&keyspace, key),
        Op::DeleteRange(start, end) => batch.delete_range_in(&keyspace, start, end),
    };
    Ok(())
}

/// [`add`] on the default keyspace, which needs no lookup (and so no open database).
fn add_default(batch: &mut WriteBatch, op: Op<'_>) {
    match op {
        Op::Put(key, value) => batch.put(key, value),
        Op::Delete(key) => batch.delete(key),
        Op::DeleteRange(start, end) => batch.delete_range(start, end),
    };
}

/// Writes `op` on `keyspace` (`None`: the default keyspace) by itself.
pub fn write_one(
    py: Python<'_>,
    db: &SharedDb,
    keyspace: Option<&NamedKeyspace>,
    sync: bool,
    op: Op<'_>,
) -> PyResult<()> {
    db.run(py, |db| {
        let mut batch = WriteBatch::new();
        add(db, &mut batch, keyspace, op)?;
        db.write(&WriteOptions { sync }, batch)
    })
}

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

    fn add(&self, py: Python<'_>, keyspace: Option<&Bound<'_, PyKeyspace>>, op: Op<'_>) -> PyResult<()> {
        match keyspace {
            None => {
                add_default(&mut self.ops.lock(), op);
                Ok(())
            }
            Some(keyspace) => {
                // Resolving a keyspace may wait for one being created (a write), so the GIL is
                // released; `ops` is never held by a thread waiting for the GIL.
                let keyspace = keyspace.get().of(&self.db)?;
                self.db.run(py, |db| add(db, &mut self.ops.lock(), Some(keyspace), op))
            }
        }
    }
}

#[pymethods]
impl PyWriteBatch {
    /// Adds a put of `value` at `key` (in `keyspace`, by default the default keyspace).
    #[pyo3(signature = (key, value, *, keyspace=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let (key, value) = (byte_arg(key, "key")?, byte_arg(value, "value")?);
        self.add(py, keyspace, Op::Put(key.as_slice(), value.as_slice()))
    }

    /// Adds a delete of `key` (in `keyspace`).
    #[pyo3(signature = (key, *, keyspace=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, keyspace: Option<&Bound<'_, PyKeyspace>>) -> PyResult<()> {
        let key = byte_arg(key, "key")?;
        self.add(py, keyspace, Op::Delete(key.as_slice()))
    }

    /// Adds a delete of every key in `[start, end)` (of `keyspace`).
    #[pyo3(signature = (start, end, *, keyspace=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let (start, end) = (byte_arg(start, "start")?, byte_arg(end, "end")?);
        self.add(py, keyspace, Op::DeleteRange(start.as_slice(), end.as_slice()))
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
