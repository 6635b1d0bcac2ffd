//! Where an iterator's current entry is stored, so that a report about a bad entry can name it.
//!
//! Some damage passes every block checksum (an internal key or value pointer that was written
//! malformed), and is only noticed by the code that interprets the entry, several iterators above
//! the table that holds it. [`super::InternalIterator::entry_origin`] passes the location up
//! through the merging, level and wrapper iterators, and [`EntryOrigin::corruption`] turns it
//! into an [`Error::Corruption`] naming the file and offset, like every other corruption report.

use std::path::PathBuf;

use crate::Error;

/// The file name a corruption report gives for a memtable entry.
pub const MEMTABLE: &str = "memtable";

/// The storage holding an iterator's current entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryOrigin {
    /// A data block of a table file.
    Table {
        /// The table file.
        file: PathBuf,
        /// File offset of the data block holding the entry.
        block_offset: u64,
    },
    /// A memtable. Its entries came from validated writes or checksummed log records, so a bad
    /// one there is a bug in the code that wrote it, not damage in a file.
    Memtable,
    /// A list the caller built in memory ([`super::vec::VecIterator`]).
    Memory,
    /// The iterator is not positioned on an entry (asking is a caller bug; this keeps the answer
    /// honest instead of guessing).
    Unpositioned,
}

impl EntryOrigin {
    /// An [`Error::Corruption`] about the entry stored here: the table file and the offset of its
    /// data block; for the other origins the file is a name that says what held the entry
    /// ([`MEMTABLE`] for memtables) and the offset is 0.
    pub fn corruption(self, reason: impl Into<String>) -> Error {
        match self {
            EntryOrigin::Table { file, block_offset } => Error::corruption(file, block_offset, reason),
            EntryOrigin::Memtable => Error::corruption(MEMTABLE, 0, reason),
            EntryOrigin::Memory => Error::corruption("in-memory entries", 0, reason),
            EntryOrigin::Unpositioned => Error::corruption("unpositioned iterator", 0, reason),
        }
    }
}
