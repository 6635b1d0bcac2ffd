//! [`WriteBatch`]: a group of puts, deletes and range deletes applied atomically.
//!
//! A batch is written to the value log as consecutive records whose last one carries the
//! batch-end flag; recovery applies a batch only if its end record is intact, so a crash never
//! exposes half a batch. Operations in a batch get consecutive sequence numbers in order, so a
//! later operation on the same key wins.

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

    /// The value of a put, `None` for a delete or a range delete.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            BatchOp::Put { value, .. } => Some(value),
            BatchOp::Delete { .. } | BatchOp::DeleteRange { .. } => None,
        }
    }
}

/// An ordered list of writes applied atomically by [`crate::Db::write`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    payload_bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref().to_vec(), value.as_ref().to_vec());
        self.payload_bytes += key.len() + value.len();
        self.ops.push(BatchOp::Put { key, value });
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref().to_vec();
        self.payload_bytes += key.len();
        self.ops.push(BatchOp::Delete { key });
        self
    }

    /// Adds a delete of every key in `[start, end)` (nothing if `start >= end`). Keys written
    /// after it, in this batch or later, are not affected.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        let (start, end) = (start.as_ref().to_vec(), end.as_ref().to_vec());
        if start >= end {
            return self;
        }
        self.payload_bytes += start.len() + end.len();
        self.ops.push(BatchOp::DeleteRange { start, end });
        self
    }

    /// True if the batch holds a range delete.
    pub fn has_range_deletes(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, BatchOp::DeleteRange { .. }))
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.payload_bytes = 0;
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
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Moves every operation of `other` to the end of this batch.
    pub fn append(&mut self, other: &mut WriteBatch) {
        self.payload_bytes += other.payload_bytes;
        self.ops.append(&mut other.ops);
        other.payload_bytes = 0;
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
