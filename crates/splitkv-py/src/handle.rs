//! The open database as every Python object of it sees it, and the one place the GIL is
//! released around engine calls.
//!
//! A `DB`, its write batches, snapshots and iterators share one [`SharedDb`]. `close()` takes
//! the engine handle out, so every later call fails with `ClosedError` instead of reaching a
//! closed engine, and it drops the engine cursors of iterators still alive: each holds the
//! engine open (and its directory lock) until dropped, which would make a reopen in the same
//! process fail with `LockedError` while a forgotten iterator waits for Python's collector.
//!
//! Lock order: the database lock, then a cursor's lock; no thread waits for the GIL while
//! holding either (engine calls run detached, and Python objects are made after the locks are
//! released), so a thread holding the GIL may wait for them without deadlock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use splitkv::Db;

use crate::errors::to_py_err;

/// The engine handle, `None` once closed, and the cursors to drop with it.
pub struct SharedDb {
    path: PathBuf,
    db: RwLock<Option<Db>>,
    cursors: Mutex<Vec<Weak<dyn Closable>>>,
}

/// Engine state that must be dropped when the database closes.
pub trait Closable: Send + Sync {
    /// Drops the engine objects held.
    fn close(&self);
}

impl SharedDb {
    /// Opens the database with the GIL released (recovery may replay a log).
    pub fn open(py: Python<'_>, path: PathBuf, options: splitkv::Options) -> PyResult<Arc<SharedDb>> {
        let db = py.detach(|| Db::open(&path, options)).map_err(to_py_err)?;
        Ok(Arc::new(SharedDb { path, db: RwLock::new(Some(db)), cursors: Mutex::new(Vec::new()) }))
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// Runs `f` on the open database with the GIL released, so other Python threads run while
    /// it waits for the disk, for the write queue or for a compaction.
    pub fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Db) -> splitkv::Result<T> + Send) -> PyResult<T> {
        py.detach(|| self.run_detached(f)).map_err(to_py_err)
    }

    /// Like [`SharedDb::run`] for a caller that has already released the GIL.
    pub fn run_detached<T>(&self, f: impl FnOnce(&Db) -> splitkv::Result<T>) -> splitkv::Result<T> {
        match self.db.read().as_ref() {
            Some(db) => f(db),
            None => Err(splitkv::Error::Closed),
        }
    }

    /// Registers engine state to drop at close.
    pub fn register(&self, cursor: Weak<dyn Closable>) {
        let mut cursors = self.cursors.lock();
        cursors.retain(|c| c.strong_count() > 0);
        cursors.push(cursor);
    }

    /// Closes the database: waits for calls in flight, drops the live cursors, stops the
    /// engine's background work and hands buffered log records to the OS. Idempotent.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut slot = self.db.write();
            let Some(db) = slot.take() else { return Ok(()) };
            for cursor in self.cursors.lock().drain(..).filter_map(|c| c.upgrade()) {
                cursor.close();
            }
            db.close()
        })
        .map_err(to_py_err)
    }
}
