//! `splitkv.Iterator`: an engine cursor as a Python iterator, forwards or backwards over a key
//! range, yielding `(key, value)`, keys or values.
//!
//! Releasing and retaking the GIL costs more than one step of the engine's cursor, so entries
//! are read in batches with the GIL released: one entry first, then twice as many each time up
//! to 256 entries or 1 MiB, so a scan that stops early reads little ahead and a long one pays
//! for the GIL rarely. Entries are read at the cursor's sequence number (every engine cursor
//! holds a snapshot), so batching changes no result. An engine error met while filling a batch
//! is raised once the entries read before it have been yielded, and ends the iteration.
//!
//! Thread-safety: the cursor sits behind a lock, so two threads may share an iterator (each
//! entry goes to one of them); `DB.close()` drops the cursor, and a later step raises
//! `ClosedError`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use splitkv::DbIterator;

use crate::convert::byte_arg;
use crate::errors::{to_py_err, ClosedError};
use crate::handle::{Closable, SharedDb};

/// Most entries one batch reads.
const MAX_BATCH_ENTRIES: usize = 256;
/// A batch stops growing once it holds this many key and value bytes.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// What each step yields.
#[derive(Clone, Copy)]
pub struct ItemShape {
    /// Yield keys (with values: `(key, value)` tuples).
    pub keys: bool,
    /// Yield values (the cursor reads none without them).
    pub values: bool,
}

type Entry = (Vec<u8>, Bytes);

/// The engine cursor and the entries read ahead of the Python caller.
struct Cursor {
    it: DbIterator,
    reverse: bool,
    keys_only: bool,
    /// Whether the cursor has been positioned (the first step seeks).
    started: bool,
    /// Whether the cursor ran off its range.
    exhausted: bool,
    buffered: VecDeque<Entry>,
    /// An error met while filling, raised once `buffered` is drained.
    pending_error: Option<splitkv::Error>,
    /// Entries the next fill reads.
    batch: usize,
}

impl Cursor {
    fn rewind(&mut self) {
        self.started = false;
        self.exhausted = false;
        self.buffered.clear();
        self.pending_error = None;
        self.batch = 1;
    }

    /// The next entry, reading a batch if none is buffered; `None` past the end.
    fn next_entry(&mut self) -> splitkv::Result<Option<Entry>> {
        if self.buffered.is_empty() {
            if let Some(err) = self.pending_error.take() {
                self.exhausted = true;
                return Err(err);
            }
            if let Err(err) = self.fill() {
                // The engine cursor must be re-seeked after an error; the iteration ends.
                self.exhausted = true;
                self.pending_error = Some(err);
            }
        }
        match self.buffered.pop_front() {
            Some(entry) => Ok(Some(entry)),
            None => self.pending_error.take().map_or(Ok(None), Err),
        }
    }

    fn fill(&mut self) -> splitkv::Result<()> {
        if self.exhausted {
            return Ok(());
        }
        if !self.started {
            self.started = true;
            if self.reverse {
                self.it.seek_to_last()?;
            } else {
                self.it.seek_to_first()?;
            }
        }
        let mut bytes = 0;
        while self.buffered.len() < self.batch && bytes < MAX_BATCH_BYTES && self.it.valid() {
            let value = if self.keys_only { Bytes::new() } else { self.it.read_value()? };
            let key = self.it.key().to_vec();
            bytes += key.len() + value.len();
            self.buffered.push_back((key, value));
            if self.reverse {
                self.it.prev()?;
            } else {
                self.it.next()?;
            }
        }
        self.exhausted = !self.it.valid();
        self.batch = (self.batch * 2).min(MAX_BATCH_ENTRIES);
        Ok(())
    }

    /// Positions on `target`: forwards the first key at or after it, backwards the last key at
    /// or before it (both within the range).
    fn seek(&mut self, target: &[u8]) -> splitkv::Result<()> {
        self.rewind();
        self.started = true;
        self.it.seek(target)?;
        if self.reverse {
            if !self.it.valid() {
                self.it.seek_to_last()?;
            } else if self.it.key() != target {
                self.it.prev()?;
            }
        }
        self.exhausted = !self.it.valid();
        Ok(())
    }
}

/// A cursor slot: `None` once the iterator or its database is closed.
struct CursorSlot(Mutex<Option<Cursor>>);

impl Closable for CursorSlot {
    fn close(&self) {
        self.0.lock().take();
    }
}

/// Why a step yields nothing.
enum StepError {
    Closed,
    Engine(splitkv::Error),
}

impl From<StepError> for PyErr {
    fn from(err: StepError) -> PyErr {
        match err {
            StepError::Closed => ClosedError::new_err("the iterator is closed"),
            StepError::Engine(err) => to_py_err(err),
        }
    }
}

/// An iterator over a key range of a database or snapshot, in key order or reversed.
///
/// Made by `DB.iterator()` or `Snapshot.iterator()`; see their documentation for the
/// arguments. Iterating yields `(key, value)` tuples, or keys or values alone. `seek(key)`
/// repositions it, `seek_to_start()` rewinds it; `close()` (or leaving a `with` block) releases
/// the read view it holds.
#[pyclass(frozen, module = "splitkv", name = "Iterator")]
pub struct PyIterator {
    db: Arc<SharedDb>,
    slot: Arc<CursorSlot>,
    shape: ItemShape,
}

impl PyIterator {
    /// Wraps an engine cursor, registering it to be dropped when `db` closes.
    pub fn new(db: &Arc<SharedDb>, it: DbIterator, reverse: bool, shape: ItemShape) -> Self {
        let cursor = Cursor {
            it,
            reverse,
            keys_only: !shape.values,
            started: false,
            exhausted: false,
            buffered: VecDeque::new(),
            pending_error: None,
            batch: 1,
        };
        let slot = Arc::new(CursorSlot(Mutex::new(Some(cursor))));
        let weak = Arc::downgrade(&slot);
        db.register(weak);
        PyIterator { db: Arc::clone(db), slot, shape }
    }

    /// Runs `f` on the cursor with the GIL released, while the database is open.
    fn with_cursor<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Cursor) -> splitkv::Result<T> + Send,
    ) -> PyResult<T> {
        let result = py.detach(|| {
            self.db
                .run_detached(|_| {
                    let mut slot = self.slot.0.lock();
                    Ok(match slot.as_mut() {
                        Some(cursor) => f(cursor).map_err(StepError::Engine),
                        None => Err(StepError::Closed),
                    })
                })
                .map_err(StepError::Engine)
        });
        Ok(result.and_then(|r| r)?)
    }

    fn item<'py>(&self, py: Python<'py>, (key, value): Entry) -> PyResult<Bound<'py, PyAny>> {
        Ok(match (self.shape.keys, self.shape.values) {
            (true, true) => PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?.into_any(),
            (true, false) => PyBytes::new(py, &key).into_any(),
            _ => PyBytes::new(py, &value).into_any(),
        })
    }
}

#[pymethods]
impl PyIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // Entries already read are handed out without releasing the GIL: the lock is never
        // held by a thread that waits for the GIL, so taking it here cannot deadlock.
        let buffered = match self.slot.0.lock().as_mut() {
            Some(cursor) => cursor.buffered.pop_front(),
            None => return Err(StepError::Closed.into()),
        };
        let entry = match buffered {
            Some(entry) => Some(entry),
            None => self.with_cursor(py, |cursor| cursor.next_entry())?,
        };
        entry.map(|e| self.item(py, e)).transpose()
    }

    /// Positions the iterator on `target`: the next item is the first key at or after it
    /// (reverse iterators: the last key at or before it), within the iterator's range.
    fn seek(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        let target = byte_arg(target, "target")?;
        let target = target.as_slice();
        self.with_cursor(py, |cursor| cursor.seek(target))
    }

    /// Rewinds the iterator to the beginning of its range (the end, if reversed).
    fn seek_to_start(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cursor(py, |cursor| {
            cursor.rewind();
            Ok(())
        })
    }

    /// Releases the iterator's read view; later steps raise `ClosedError`. Idempotent.
    fn close(&self) {
        self.slot.close();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}
