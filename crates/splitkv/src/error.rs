//! The library's one error type.
//!
//! Every fallible operation returns [`Result<T>`]. Bytes that came from disk are never trusted:
//! a failed checksum, a bad length or an unknown tag becomes [`Error::Corruption`] naming the file
//! and the byte offset, so operators can find the damage. A failed `fsync` poisons the write path
//! ([`Error::Poisoned`]): after it the on-disk state is unknown, so further writes are refused
//! while reads keep working.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by splitkv.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error (or one injected by the fault-injecting file system).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// Stored bytes failed validation: checksum, length, tag or ordering.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// File holding the bad bytes.
        file: PathBuf,
        /// Byte offset of the bad record or block within `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// A previous durability failure (failed fsync, failed MANIFEST write) poisoned the write path.
    #[error("database is poisoned by an earlier write failure: {0}")]
    Poisoned(String),

    /// The caller passed an argument or option that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The database directory is locked by another process or another open handle.
    #[error("database at {} is locked by another process", .0.display())]
    Locked(PathBuf),

    /// The value log is over its space budget and garbage collection cannot bring it back
    /// under (the message says why: live data fills the budget, a reader pins old segments, or
    /// the collector stopped).
    #[error("no space: {0}")]
    NoSpace(String),

    /// The database has been closed.
    #[error("database is closed")]
    Closed,

    /// A write (or flush, compaction, GC, checkpoint) on a database opened with
    /// [`crate::Db::open_read_only`].
    #[error("database is open read-only")]
    ReadOnly,
}

impl Error {
    /// Builds a [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption { file: file.into(), offset, reason: reason.into() }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
