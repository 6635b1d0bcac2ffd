//! The Python exceptions of the module, one per kind of engine error, and the mapping to them.
//!
//! Every exception derives from `splitkv.Error`, so `except splitkv.Error` catches whatever the
//! engine reports; the message is the engine's own `Display` (a corruption names the file and
//! the offset). Wrong Python types and bad option values are not engine errors: they raise the
//! builtin `TypeError` and `ValueError`, as any Python library does.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(splitkv, Error, PyException, "Base class of every error the storage engine reports.");
create_exception!(splitkv, IoError, Error, "An operating-system I/O error while reading or writing the database.");
create_exception!(
    splitkv,
    CorruptionError,
    Error,
    "Stored bytes failed validation (checksum, length, tag); the message names the file and offset."
);
create_exception!(
    splitkv,
    PoisonedError,
    Error,
    "An earlier durability failure (a failed fsync) poisoned the write path; reads still work."
);
create_exception!(
    splitkv,
    InvalidArgumentError,
    Error,
    "The engine refused an argument or option (for example a missing database without create_if_missing)."
);
create_exception!(
    splitkv,
    LockedError,
    Error,
    "The database directory is held open by another process or another handle."
);
create_exception!(
    splitkv,
    NoSpaceError,
    Error,
    "The value log is over its space budget and garbage collection cannot bring it back under."
);
create_exception!(splitkv, ClosedError, Error, "The database, or the snapshot or iterator used, is closed.");

/// The Python exception for an engine error, carrying the engine's message.
pub fn to_py_err(err: splitkv::Error) -> PyErr {
    let message = err.to_string();
    match err {
        splitkv::Error::Io(_) => IoError::new_err(message),
        splitkv::Error::Corruption { .. } => CorruptionError::new_err(message),
        splitkv::Error::Poisoned(_) => PoisonedError::new_err(message),
        splitkv::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        splitkv::Error::Locked(_) => LockedError::new_err(message),
        splitkv::Error::NoSpace(_) => NoSpaceError::new_err(message),
        splitkv::Error::Closed => ClosedError::new_err(message),
        // The engine's error enum is non-exhaustive: a kind added later is still a splitkv.Error.
        _ => Error::new_err(message),
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add("InvalidArgumentError", py.get_type::<InvalidArgumentError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    Ok(())
}
