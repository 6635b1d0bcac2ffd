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
//! and written to the database's `LOG` file (see [`InfoLogOptions`]); the library prints nothing.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Panics are for bugs, not for bad input or a failed lock: library code returns errors. The
// modules that decode bytes read from disk also warn on `clippy::indexing_slicing` (see their
// headers). Tests may unwrap and index freely (`clippy.toml`).
#![warn(clippy::unwrap_used, clippy::expect_used)]

// The public API is what this file re-exports, plus the `fs` module.
pub use batch::WriteBatch;
pub use compaction::{CompactionEvent, CompactionListener, PickReason};
pub use db::{
    CheckpointInfo, Completion, Db, DbIterator, Keyspace, MultiGet, MultiGetResult, RangeIter, RewriteOutcome,
};
pub use error::{Error, Result};
pub use info_log::InfoLogOptions;
pub use options::{
    CompactionPolicyKind, CompressionType, GcPolicyKind, GcRewriteOrder, IndexBlockKind, IndexKind, Options,
    ReadOptions, WriteOptions,
};
pub use snapshot::Snapshot;
pub use stats::{
    HashTableStats, HistogramSnapshot, IndexBlockStats, LatencyHistogram, LatencyStats, LevelStats, MemoryStats,
    RangeSize, SegmentStatsReport, Stats,
};
pub use types::{SegmentId, SequenceNumber};
pub use vlog::gc::GcOutcome;

// Public so that applications can test their own crash and fault handling with the engine's
// in-memory and fault-injecting file systems.
pub mod fs;

mod batch;
mod coding;
mod db;
mod error;
mod info_log;
mod memtable;
mod options;
mod options_file;
mod prefetch;
mod range_del;
mod snapshot;
mod stats;

// Internals, public only for the workspace's own tools and tests and hidden from the API: no
// stability promise. The CLI's `dump`, `verify` and `info` read SSTables, value-log segments,
// the MANIFEST and the hash table directly (`sstable`, `vlog`, `version`, `index`, `iter`,
// `types`, `filenames`); the benchmark's `index-lookup` drives index blocks (`sstable`) and its
// stats dump computes level targets as the compaction policy does (`compaction`); the engine's
// integration tests inspect segments and the MANIFEST.
#[doc(hidden)]
pub mod compaction;
#[doc(hidden)]
pub mod filenames;
#[doc(hidden)]
pub mod index;
#[doc(hidden)]
pub mod iter;
#[doc(hidden)]
pub mod sstable;
#[doc(hidden)]
pub mod types;
#[doc(hidden)]
pub mod version;
#[doc(hidden)]
pub mod vlog;
