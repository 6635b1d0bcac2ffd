//! An iterator's key range as Python names it (`start`, `stop`, `include_start`,
//! `include_stop`, `prefix`) turned into the engine's half-open `[lower_bound, upper_bound)`.
//!
//! The engine's cursor never reads past its bounds in either direction, so every form becomes
//! bounds rather than a filter: an inclusive `stop` is the bound just above it (`stop + b"\0"`,
//! the smallest key greater than `stop`), an exclusive `start` likewise, and a prefix is
//! `[prefix, the smallest key greater than every key with that prefix)`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert::optional_bytes;

/// `[lower, upper)`; `None` is unbounded.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KeyRange {
    /// Smallest key shown.
    pub lower: Option<Vec<u8>>,
    /// Every key shown is below it.
    pub upper: Option<Vec<u8>>,
}

/// The range arguments of `DB.iterator()`.
pub struct RangeArgs {
    /// First key (inclusive unless `include_start` is false).
    pub start: Option<Vec<u8>>,
    /// Last key (exclusive unless `include_stop` is true).
    pub stop: Option<Vec<u8>>,
    /// Whether `start` itself is shown.
    pub include_start: bool,
    /// Whether `stop` itself is shown.
    pub include_stop: bool,
    /// Only keys beginning with these bytes; excludes `start` and `stop`.
    pub prefix: Option<Vec<u8>>,
}

impl RangeArgs {
    /// Reads the Python arguments (bytes or `None`).
    pub fn from_py(
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_stop: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(RangeArgs {
            start: optional_bytes(start, "start")?,
            stop: optional_bytes(stop, "stop")?,
            include_start,
            include_stop,
            prefix: optional_bytes(prefix, "prefix")?,
        })
    }

    /// The engine bounds these arguments describe.
    pub fn to_range(&self) -> PyResult<KeyRange> {
        if let Some(prefix) = &self.prefix {
            if self.start.is_some() || self.stop.is_some() {
                return Err(PyTypeError::new_err("prefix cannot be combined with start or stop"));
            }
            return Ok(KeyRange { lower: Some(prefix.clone()), upper: prefix_end(prefix) });
        }
        let lower = self.start.as_ref().map(|s| if self.include_start { s.clone() } else { successor(s) });
        let upper = self.stop.as_ref().map(|s| if self.include_stop { successor(s) } else { s.clone() });
        Ok(KeyRange { lower, upper })
    }
}

/// The smallest key greater than `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The smallest key greater than every key that starts with `prefix`; `None` when there is
/// none (the prefix is empty or all `0xff`).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|b| *b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}
