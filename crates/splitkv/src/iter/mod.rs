//! Iterators over internal keys and the merging machinery above them.
//!
//! Every source of entries (memtable, SSTable block, whole SSTable, level, merged view)
//! implements [`InternalIterator`], a bidirectional cursor over `(internal key, value)` pairs in
//! [`crate::types::compare_internal_keys`] order. Movement returns `Result` so that I/O and
//! corruption errors surface where they happen instead of being stored and forgotten; and every
//! iterator can say where its current entry is stored ([`EntryOrigin`]), so that code above it
//! that finds an entry malformed can report the file and offset.

pub mod covered;
pub mod db_iter;
pub mod level;
pub mod merge;
pub mod origin;
pub mod vec;

pub use origin::EntryOrigin;

use crate::types::{ValueKind, ValuePointer};

/// The current entry's value as a [`ValuePointer`] when `kind` (the entry's kind) says it is
/// one; a pointer that does not decode is corruption where the entry is stored.
pub fn entry_pointer<I: InternalIterator + ?Sized>(it: &I, kind: ValueKind) -> crate::Result<Option<ValuePointer>> {
    if kind != ValueKind::Pointer {
        return Ok(None);
    }
    match ValuePointer::decode(it.value()) {
        Some(ptr) => Ok(Some(ptr)),
        None => Err(it.entry_origin().corruption("malformed value pointer")),
    }
}

/// A bidirectional cursor over internal-key-ordered entries.
///
/// After any movement the iterator is either positioned on an entry (`valid()`) or exhausted.
/// `key()` and `value()` may only be called while `valid()`.
pub trait InternalIterator: Send {
    /// True if positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self) -> crate::Result<()>;
    /// Positions on the last entry.
    fn seek_to_last(&mut self) -> crate::Result<()>;
    /// Positions on the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> crate::Result<()>;
    /// Moves to the next entry.
    fn next(&mut self) -> crate::Result<()>;
    /// Moves to the previous entry.
    fn prev(&mut self) -> crate::Result<()>;
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value (inline value, encoded pointer, or empty for a deletion).
    fn value(&self) -> &[u8];
    /// The current key and value, `None` while not `valid()`: one call where a caller needs all
    /// three, as a merge does after each movement of a child (three calls through a box otherwise).
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.valid().then(|| (self.key(), self.value()))
    }
    /// Where the current entry is stored, for reporting it as corrupt:
    /// `it.entry_origin().corruption(reason)`. Iterators over other iterators answer for their
    /// current child; [`EntryOrigin::Unpositioned`] while not `valid()`.
    fn entry_origin(&self) -> EntryOrigin;
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> crate::Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> crate::Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        (**self).seek(target)
    }
    fn next(&mut self) -> crate::Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> crate::Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        (**self).entry()
    }
    fn entry_origin(&self) -> EntryOrigin {
        (**self).entry_origin()
    }
}

/// An iterator bundled with something that must live exactly as long as it: the tree state whose
/// files it may still open, or, in tests, a guard that notices when the iterator is dropped.
pub struct KeepAlive<I, T> {
    /// The iterator all calls go to.
    pub inner: I,
    /// Dropped together with the iterator.
    pub keep: T,
}

impl<I: InternalIterator, T: Send> InternalIterator for KeepAlive<I, T> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        self.inner.seek(target)
    }
    fn next(&mut self) -> crate::Result<()> {
        self.inner.next()
    }
    fn prev(&mut self) -> crate::Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.inner.entry()
    }
    fn entry_origin(&self) -> EntryOrigin {
        self.inner.entry_origin()
    }
}

/// Collectors shared by the iterator tests.
#[cfg(test)]
pub(crate) mod test_util {
    use super::InternalIterator;

    /// Every value, front to back, as text.
    pub fn values_forward(it: &mut dyn InternalIterator) -> crate::Result<Vec<String>> {
        let mut out = Vec::new();
        it.seek_to_first()?;
        while it.valid() {
            out.push(String::from_utf8_lossy(it.value()).into_owned());
            it.next()?;
        }
        Ok(out)
    }

    /// Every value, back to front, as text.
    pub fn values_backward(it: &mut dyn InternalIterator) -> crate::Result<Vec<String>> {
        let mut out = Vec::new();
        it.seek_to_last()?;
        while it.valid() {
            out.push(String::from_utf8_lossy(it.value()).into_owned());
            it.prev()?;
        }
        Ok(out)
    }
}
