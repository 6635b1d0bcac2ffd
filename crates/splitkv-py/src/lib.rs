//! The `splitkv` Python module (`splitkv._splitkv`, re-exported by the `splitkv` package):
//! the engine with plyvel/rocksdict-style access.
//!
//! Modules, one concept each: `db` (the `DB` class), `keyspace` (the `Keyspace` class),
//! `reads` (point reads and iterators shared by `DB`, `Keyspace` and `Snapshot`), `iterator`,
//! `bounds` (Python ranges to engine bounds), `snapshot`, `batch` (write batches, and the write
//! path of `DB` and `Keyspace`), `options` (keyword arguments to engine options), `stats`
//! (reports as dicts), `convert` (bytes in), `errors` (exceptions), `handle` (the shared open
//! database and the GIL release around engine calls).
//!
//! PyO3's macros expand to unsafe FFI calls; the crate writes no `unsafe` of its own.

mod batch;
mod bounds;
mod convert;
mod db;
mod errors;
mod handle;
mod iterator;
mod keyspace;
mod options;
mod reads;
mod snapshot;
mod stats;

use pyo3::prelude::*;

#[pymodule]
fn _splitkv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::PyDb>()?;
    m.add_class::<batch::PyWriteBatch>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_class::<iterator::PyIterator>()?;
    m.add_class::<keyspace::PyKeyspace>()?;
    errors::register(m)?;
    m.add("OPTION_NAMES", options::OPTION_NAMES.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
