//! splitkv: an embedded key-value store that keeps keys and value addresses in an LSM-tree and
//! values in a log (WiscKey key-value separation).
//!
//! Layers, top to bottom (dependencies point down):
//! - [`Db`]: write path (batch -> group commit -> value-log append -> memtable) and read path.
//! - `index`: the key index seam (the LSM-tree today; the persistent hash index later).
//! - `vlog`: value-log segments, buffered appends, validated pointer reads, replay.
//! - `compaction`: pure picking policies plus the executor.
//! - `version`: MANIFEST, version edits, the current set of SSTables and segments.
//! - `sstable`: blocks, filters, index blocks, table and block caches.
//! - [`fs`]: the one I/O boundary.
//!
//! What the engine does in the background is reported as `tracing` events (target `splitkv`)
//! and written to the database's `LOG` file ([`info_log`]); the library prints nothing.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod error;
pub mod filenames;
pub mod fs;
pub mod index;
pub mod info_log;
pub mod iter;
pub mod memtable;
pub mod options;
mod options_file;
pub mod range_del;
pub mod snapshot;
pub mod sstable;
pub mod stats;
pub mod types;
pub mod version;
pub mod vlog;

pub use batch::WriteBatch;
pub use db::{CheckpointInfo, Completion, Db, DbIterator, Keyspace, MultiGet, MultiGetResult, RangeIter};
pub use error::{Error, Result};
pub use options::{CompressionType, IndexBlockKind, IndexKind, Options, ReadOptions, WriteOptions};
pub use snapshot::Snapshot;
