//! Keys and values crossing the boundary: bytes in, bytes out.
//!
//! The store holds bytes, so it takes `bytes` (borrowed, no copy) or `bytearray` (copied while
//! the GIL is held: another thread could resize it once the GIL is released) and refuses `str`
//! with a `TypeError` that says how to encode it, rather than picking an encoding silently.
//! A borrowed `bytes` stays valid while the GIL is released because the caller's frame holds a
//! reference to it and `bytes` objects are immutable.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

/// A key or value argument.
pub enum ByteArg<'py> {
    /// A `bytes` object, read in place.
    Borrowed(Bound<'py, PyBytes>),
    /// A copy of a `bytearray`.
    Owned(Vec<u8>),
}

impl ByteArg<'_> {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            ByteArg::Borrowed(b) => b.as_bytes(),
            ByteArg::Owned(v) => v,
        }
    }
}

/// Extracts a key or value argument; `what` names it in the error ("key", "value", "start").
pub fn byte_arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<ByteArg<'py>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(ByteArg::Borrowed(b.clone()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(ByteArg::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes, not str: encode it first (for example {what}.encode())"
        )));
    }
    Err(PyTypeError::new_err(format!("{what} must be bytes or bytearray, not {}", type_name(obj))))
}

/// An optional bound or prefix argument, copied (it outlives the call that passed it).
pub fn optional_bytes(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => Ok(Some(byte_arg(o, what)?.as_slice().to_vec())),
    }
}

/// The name of an object's type, for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map_or_else(|_| "object".to_string(), |n| n.to_string())
}
