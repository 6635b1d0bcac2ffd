//! [`WriteBatch`]: a group of puts, deletes and range deletes applied atomically.
//!
//! A batch is written to the value log as consecutive records whose last one carries the
//! batch-end flag; recovery applies a batch only if its end record is intact, so a crash never
//! exposes half a batch. Operations in a batch get consecutive sequence numbers in order, so a
//! later operation on the same key wins.
//!
//! A batch may span keyspaces (`put_in`, `delete_in`, `delete_range_in`): its operations on
//! every keyspace are applied atomically together.

use smallvec::SmallVec;

use crate::db::keyspace::{is_reserved, reserved_key_error, Keyspace, KeyspaceRef, KEYSPACE_MARK};
use crate::error::Result;

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Remove every key in `[start, end)`.
    DeleteRange {
        /// First key removed.
        start: Vec<u8>,
        /// First key after the range (not removed).
        end: Vec<u8>,
    },
}

impl BatchOp {
    /// The key the operation touches (a range delete's first key).
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key,
            BatchOp::DeleteRange { start, .. } => start,
        }
    }
}

/// An ordered list of writes applied atomically by [`crate::Db::write`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// One operation inline: most batches are a single put or delete (`Db::put` wraps its
    /// argument in a batch), which then needs no vector of its own.
    ops: SmallVec<[BatchOp; 1]>,
    payload_bytes: usize,
    /// The keyspaces the batch writes to, each once, ordered by id.
    keyspaces: Vec<KeyspaceRef>,
    /// Set when an operation on the default keyspace names a key reserved for keyspaces, which
    /// makes the write fail.
    reserved_key: bool,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.check_not_reserved(key.as_ref());
        self.push(BatchOp::Put { key: key.as_ref().to_vec(), value: value.as_ref().to_vec() })
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.check_not_reserved(key.as_ref());
        self.push(BatchOp::Delete { key: key.as_ref().to_vec() })
    }

    /// Adds a delete of every key in `[start, end)` (nothing if `start >= end`). Keys written
    /// after it, in this batch or later, are not affected. Keyspaces are never affected: the
    /// range ends, at the latest, where the keys reserved for them begin.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        let start = start.as_ref();
        self.check_not_reserved(start);
        let end = end.as_ref().min(&KEYSPACE_MARK[..]);
        self.push(BatchOp::DeleteRange { start: start.to_vec(), end: end.to_vec() })
    }

    /// Adds a put of `key` in `keyspace`.
    pub fn put_in(&mut self, keyspace: &Keyspace<'_>, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.note_keyspace(keyspace);
        self.push(BatchOp::Put { key: keyspace.stored_key(key.as_ref()), value: value.as_ref().to_vec() })
    }

    /// Adds a delete of `key` in `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace<'_>, key: impl AsRef<[u8]>) -> &mut Self {
        self.note_keyspace(keyspace);
        self.push(BatchOp::Delete { key: keyspace.stored_key(key.as_ref()) })
    }

    /// Adds a delete of every key of `keyspace` in `[start, end)` (nothing if `start >= end`).
    pub fn delete_range_in(
        &mut self,
        keyspace: &Keyspace<'_>,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.note_keyspace(keyspace);
        let (start, end) = (keyspace.stored_key(start.as_ref()), keyspace.stored_key(end.as_ref()));
        self.push(BatchOp::DeleteRange { start, end })
    }

    /// Adds an operation on stored keys as they are, reserved or not: the database's own writes
    /// to keyspaces' keys and to their catalog.
    pub(crate) fn push(&mut self, op: BatchOp) -> &mut Self {
        if let BatchOp::DeleteRange { start, end } = &op {
            if start >= end {
                return self;
            }
        }
        self.payload_bytes += op.key().len()
            + match &op {
                BatchOp::Put { value, .. } => value.len(),
                BatchOp::Delete { .. } => 0,
                BatchOp::DeleteRange { end, .. } => end.len(),
            };
        self.ops.push(op);
        self
    }

    fn check_not_reserved(&mut self, key: &[u8]) {
        self.reserved_key |= is_reserved(key);
    }

    fn note_keyspace(&mut self, keyspace: &Keyspace<'_>) {
        self.add_keyspace(keyspace.reference());
    }

    fn add_keyspace(&mut self, entry: KeyspaceRef) {
        if let Err(at) = self.keyspaces.binary_search(&entry) {
            self.keyspaces.insert(at, entry);
        }
    }

    /// The keyspaces the batch writes to.
    pub(crate) fn keyspaces(&self) -> &[KeyspaceRef] {
        &self.keyspaces
    }

    /// An error if an operation on the default keyspace named a key reserved for keyspaces.
    pub(crate) fn check_keys(&self) -> Result<()> {
        match self.reserved_key {
            true => Err(reserved_key_error()),
            false => Ok(()),
        }
    }

    /// True if the batch holds a range delete.
    pub fn has_range_deletes(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, BatchOp::DeleteRange { .. }))
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.payload_bytes = 0;
        self.keyspaces.clear();
        self.reserved_key = false;
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True if the batch has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Sum of key and value lengths (the user bytes the batch writes).
    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes
    }

    /// The operations in order.
    pub(crate) fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Moves every operation of `other` to the end of this batch.
    pub fn append(&mut self, other: &mut WriteBatch) {
        self.payload_bytes += other.payload_bytes;
        self.ops.append(&mut other.ops);
        self.reserved_key |= other.reserved_key;
        for entry in std::mem::take(&mut other.keyspaces) {
            self.add_keyspace(entry);
        }
        other.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_keeps_order_and_counts_bytes() {
        let mut b = WriteBatch::new();
        b.put("k1", "v1").delete("k1").put("k2", "value");
        assert_eq!(b.len(), 3);
        assert_eq!(b.payload_bytes(), 4 + 2 + 7);
        assert_eq!(b.ops()[1], BatchOp::Delete { key: b"k1".to_vec() });
        let mut c = WriteBatch::new();
        c.put("x", "y");
        b.append(&mut c);
        assert!(c.is_empty());
        assert_eq!(b.len(), 4);
    }
}
