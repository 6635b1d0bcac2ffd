//! The key index seam: what maps a user key to its newest value or value address.
//!
//! [`Index`] is implemented by [`lsm::LsmIndex`] (memtable + leveled SSTables) and by
//! [`hash::HashIndex`] (the SSHKV mode's persistent hash table), so the write path, recovery, the value
//! log and GC's "is this pointer still current?" question do not depend on which index is in
//! use. [`open`] opens the kind that `Options::index` names.
//!
//! What an index sees of the rest of the database is narrow on purpose: committed records
//! ([`IndexRecord`], classified once by [`IndexRecord::from_log`]), the durable catalog it
//! records its own state into beside the value log's metadata ([`crate::version::Catalog`]), and
//! the [`LogLink`] through which it makes log records durable before recording a log head.

pub mod hash;
pub mod lsm;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::fs::{FileSystem, RandomAccessFile};
use crate::info_log::InfoLog;
use crate::iter::{entry_pointer, InternalIterator};
use crate::options::{IndexKind, Options};
use crate::snapshot::SnapshotList;
use crate::stats::{Counters, RangeSize, Stats};
use crate::types::{
    parse_internal_key, seek_key, FileNumber, LogPosition, SegmentId, SequenceNumber, ValueKind, ValuePointer,
    MAX_SEQUENCE,
};
use crate::version::{Catalog, TablesPointingInto};
use crate::vlog::live_map::LiveMap;
use crate::vlog::{MoveTicket, RecordKind, RecordRef, ReplayedRecord, SegmentInfo, ValueLog};

/// The sequence number a point read sees.
#[derive(Clone, Copy, Debug)]
pub enum ReadAt<'a> {
    /// A registered snapshot's (or one a caller keeps readable otherwise): flushes and
    /// compactions keep every version it sees.
    Snapshot(SequenceNumber),
    /// The newest published write (the database's last sequence number), read by the index only
    /// once it has pinned what it will search. Read before, it would be a snapshot nobody
    /// registered: a flush or compaction finishing in between may drop every version at or
    /// below it, shadowed by a newer one the read cannot see, and the key would read as absent
    /// (RocksDB takes its super version before its sequence number for the same reason). Read
    /// after, it may name writes newer than the pinned view, which the view lacks: the read
    /// returns the value as of a moment during the call.
    Latest(&'a AtomicU64),
}

impl ReadAt<'_> {
    /// The sequence number to read at; call it after pinning the index's read view.
    pub fn resolve(self) -> SequenceNumber {
        match self {
            ReadAt::Snapshot(seq) => seq,
            ReadAt::Latest(last) => SequenceNumber(last.load(Ordering::Acquire)),
        }
    }
}

/// What one committed write stores in the index, typed: a pointer stays a [`ValuePointer`] from
/// the write path into the index, which alone decides how to store it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexEntry<'a> {
    /// The key was deleted.
    Deletion,
    /// A value small enough to live in the index.
    Inline(&'a [u8]),
    /// The address of a value separated into the log.
    Pointer(ValuePointer),
    /// Every key in `[user_key, end)` was deleted (a range delete).
    RangeDeletion {
        /// First key after the range.
        end: &'a [u8],
    },
}

/// One committed write, as the index receives it.
#[derive(Clone, Copy, Debug)]
pub struct IndexRecord<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Its sequence number.
    pub seq: SequenceNumber,
    /// What the index stores for it.
    pub entry: IndexEntry<'a>,
    /// Where the write's record sits in the value log.
    pub log_pointer: ValuePointer,
}

impl<'a> IndexRecord<'a> {
    /// The one place that decides what a logged write becomes in the index (used by the write
    /// path and by recovery alike): a delete, an inline value below `value_threshold`, or a
    /// pointer to the record.
    pub fn from_log(
        user_key: &'a [u8],
        seq: SequenceNumber,
        kind: RecordKind,
        value: &'a [u8],
        log_pointer: ValuePointer,
        value_threshold: usize,
    ) -> Self {
        let entry = match kind {
            RecordKind::Delete => IndexEntry::Deletion,
            RecordKind::DeleteRange => IndexEntry::RangeDeletion { end: value },
            RecordKind::Put if value.len() >= value_threshold => IndexEntry::Pointer(log_pointer),
            RecordKind::Put => IndexEntry::Inline(value),
            // Replay skips moved records (their pointers live in tables only); what one would
            // be is the separated value it holds.
            RecordKind::Moved => IndexEntry::Pointer(log_pointer),
        };
        IndexRecord { user_key, seq, entry, log_pointer }
    }

    /// True if the record's log bytes are garbage as soon as the index holds the record durably
    /// (inline values and deletes: the log only served as their write-ahead log).
    pub fn log_bytes_die_with_index(&self) -> bool {
        !matches!(self.entry, IndexEntry::Pointer(_))
    }
}

/// What the index holds for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexValue {
    /// The value itself.
    Inline(Bytes),
    /// The value's address in the value log.
    Pointer(ValuePointer),
}

/// The value log as an index reaches it: enough to make the records an index's durable state
/// points to durable first, and to know which segments exist.
pub trait LogLink: Send + Sync {
    /// Makes every appended record durable.
    fn sync(&self) -> Result<()>;
    /// Where the next record will be appended.
    fn head(&self) -> LogPosition;
    /// Every segment of the log with its length, oldest first.
    fn segments(&self) -> Vec<SegmentInfo>;
    /// Reads and validates the whole record at `ptr`.
    fn read_record(&self, ptr: &ValuePointer) -> Result<ReplayedRecord>;
    /// False if `ptr` names a record its segment no longer holds (GC compacted the segment and
    /// dropped it, so no current version points at it).
    fn holds(&self, ptr: &ValuePointer) -> bool;
    /// Appends values a compaction moves, as one batch of moved records (not writes: replay
    /// skips them); returns their pointers. Durable only after [`LogLink::sync`].
    fn append_moved(&self, ticket: MoveTicket, records: &[RecordRef<'_>]) -> Result<Vec<ValuePointer>>;
    /// Claims segments a compaction will read moved values from: returns its ticket and the
    /// segments it may read until [`LogLink::end_moves`]. GC touches none of them, nor the
    /// segments it appends moved records to, meanwhile.
    fn claim_for_moves(&self, ids: &[SegmentId]) -> (MoveTicket, Vec<SegmentId>);
    /// Ends a compaction's claims, once the tables pointing at its moved records are
    /// published (or it failed).
    fn end_moves(&self, ticket: MoveTicket);
    /// Of `ids`, the segments GC wants compactions to empty by moving their values.
    fn wanted_moves(&self, ids: &mut dyn Iterator<Item = SegmentId>) -> Vec<SegmentId>;
}

impl LogLink for ValueLog {
    fn sync(&self) -> Result<()> {
        ValueLog::sync(self)
    }
    fn head(&self) -> LogPosition {
        ValueLog::head(self)
    }
    fn segments(&self) -> Vec<SegmentInfo> {
        ValueLog::segments(self)
    }
    fn read_record(&self, ptr: &ValuePointer) -> Result<ReplayedRecord> {
        ValueLog::read_record(self, ptr)
    }
    fn holds(&self, ptr: &ValuePointer) -> bool {
        ValueLog::holds(self, ptr)
    }
    fn append_moved(&self, ticket: MoveTicket, records: &[RecordRef<'_>]) -> Result<Vec<ValuePointer>> {
        ValueLog::append_moved(self, ticket, records).map(|p| p.into_vec())
    }
    fn claim_for_moves(&self, ids: &[SegmentId]) -> (MoveTicket, Vec<SegmentId>) {
        ValueLog::claim_for_moves(self, ids)
    }
    fn end_moves(&self, ticket: MoveTicket) {
        ValueLog::end_moves(self, ticket)
    }
    fn wanted_moves(&self, ids: &mut dyn Iterator<Item = SegmentId>) -> Vec<SegmentId> {
        ValueLog::wanted_moves(self, ids)
    }
}

/// What a garbage survey counted: the live (reachable) record bytes of each surveyed segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveCount {
    /// The segments counted exactly; records of others were skipped.
    pub surveyed: HashSet<SegmentId>,
    /// Record bytes still reachable, per surveyed segment (absent = none).
    pub live: BTreeMap<SegmentId, u64>,
    /// For surveyed segments, where their reachable records are, if the index can tell (the
    /// LSM walks every pointer; absent = unknown), so GC may drop the others unlooked-up; and,
    /// where a map tracks them, which were current (their key's newest version, not
    /// range-deleted) for a read at `current_at`. A record current then whose key the index can
    /// tell was not written since ([`Index::unchanged_since`]) is still current: GC keeps it
    /// without a lookup.
    pub reachable: BTreeMap<SegmentId, LiveMap>,
    /// See `reachable`.
    pub current_at: SequenceNumber,
    /// Bytes the newest version of every key points to, in any segment, surveyed or not: the
    /// data the index holds. Unlike the live bytes above, it does not count a version twice
    /// when its key is written again while the walk runs.
    pub indexed_live: u64,
}

/// A key index.
pub trait Index: Send + Sync {
    /// Applies committed records, in sequence order. Called by one writer at a time (and by
    /// recovery, replaying the log tail, before any writer), except that the hash index's
    /// request shards (`db::shards`) apply groups of disjoint keys concurrently, and that write
    /// groups are applied concurrently where [`Index::applies_groups_concurrently`] says so.
    fn apply(&self, records: &[IndexRecord<'_>]);
    /// True if write groups of puts and point deletes, any keys, may be applied concurrently
    /// and out of order (each once appended): the index keeps every version apart, ordered by
    /// sequence number, and names no predecessors. The write path then overlaps one group's
    /// apply with the next group's append. False (the safe answer) serialises every group.
    fn applies_groups_concurrently(&self) -> bool {
        false
    }
    /// True if what [`Index::apply`] writes can outlive the process before the log records it
    /// names are durable (the hash index's table is a file mapping the kernel writes back at
    /// any time). False if applied records stay in memory until a flush, which syncs the log
    /// before it installs a table (the LSM's memtable). GC syncs each relocation batch before
    /// applying it only for an index that answers true (the safe answer).
    fn applies_durably(&self) -> bool {
        true
    }
    /// For indexes that chain versions through the log: the record of `user_key`'s newest
    /// version, which a new write of the key supersedes and names as its predecessor. Called by
    /// the write leader before it appends. Indexes that keep old versions themselves answer
    /// `None`.
    fn predecessor(&self, _user_key: &[u8]) -> Result<Option<ValuePointer>> {
        Ok(None)
    }
    /// Makes room for the next write group: delays or blocks the writer while background work
    /// catches up, and freezes a full memtable (or any non-empty one if `force`). Called by the
    /// write leader, so no record is appended concurrently.
    fn make_room(&self, force: bool) -> Result<()>;
    /// False if `make_room(false)` would do nothing now: a cheap check that lets a request shard's
    /// worker skip the exclusive section `make_room` needs. Indexes that cannot tell answer `true`.
    fn room_due(&self) -> bool {
        true
    }
    /// Blocks until no frozen memtable awaits flushing.
    fn wait_for_flush(&self) -> Result<()>;
    /// The newest value of `user_key` visible at `at`; `None` if absent or deleted.
    fn get(&self, user_key: &[u8], at: ReadAt<'_>, fill_cache: bool) -> Result<Option<IndexValue>>;
    /// As [`Index::get`] through the block cache, for a lookup background work makes (value-log
    /// GC's liveness checks) rather than a user: indexes whose reads can trigger work of their
    /// own (the LSM's read-triggered L0 compaction) do not count it.
    fn get_in_background(&self, user_key: &[u8], at: ReadAt<'_>) -> Result<Option<IndexValue>> {
        self.get(user_key, at, true)
    }
    /// True if the index can tell from memory, without a lookup, that nothing newer than `seq`
    /// touched `user_key` (no version of it and no range delete was applied since); false when
    /// it cannot tell, and the caller looks the key up. GC's write-leader re-check uses it.
    fn unchanged_since(&self, _user_key: &[u8], _seq: SequenceNumber) -> bool {
        false
    }
    /// Whether the index's current state, and an older state a reader still holds, may point
    /// into value-log segment `id` from their tables. Asked only of segments a compaction moved
    /// values out of; an index that cannot tell says both may.
    fn tables_pointing_into(&self, _id: SegmentId) -> TablesPointingInto {
        TablesPointingInto { current: true, older: true }
    }
    /// A cursor over the entries a reader at `seq` may see (at least the newest version of each
    /// key at or below `seq`; an index may return more versions), pinning what it reads.
    fn iter(&self, seq: SequenceNumber, fill_cache: bool) -> Result<Box<dyn InternalIterator>>;
    /// Compacts the key range `[begin, end]` down through every level.
    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()>;
    /// True if [`Index::apply`] takes range deletions. The database turns a range delete into
    /// point deletes of the keys it finds for an index that does not.
    fn supports_range_deletes(&self) -> bool {
        false
    }
    /// Called after a range delete at `seq` is applied and durable in the log: the index may
    /// free what the delete made invisible to every reader at once (whole tables inside the
    /// range), or later, once no snapshot older than the delete remains.
    fn reclaim_range(&self, _start: &[u8], _end: &[u8], _seq: SequenceNumber) -> Result<()> {
        Ok(())
    }
    /// Adds the partition split keys in `add` and removes those in `remove` (keyspaces keep
    /// their key prefixes in partitions of their own). An index without partitions ignores it.
    fn update_partition_splits(&self, _add: &[Vec<u8>], _remove: &[Vec<u8>]) -> Result<()> {
        Ok(())
    }
    /// Adds index-specific figures to a report.
    fn fill_stats(&self, stats: &mut Stats);
    /// An index-specific property (`splitkv.…`).
    fn property(&self, name: &str) -> Option<String>;
    /// Estimates the bytes the keys in the range take, as a reader at `seq` sees them. This
    /// default walks the index's cursor over the range (exact, but its cost grows with the
    /// range, and an unordered index sorts every key first); indexes with per-file metadata
    /// answer from it instead.
    fn approximate_size(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, seq: SequenceNumber) -> Result<RangeSize> {
        let mut it = self.iter(seq, false)?;
        let (index_bytes, value_log_bytes) = range_entry_bytes(&mut it, start, end, seq)?;
        Ok(RangeSize { index_bytes, value_log_bytes, memtable_bytes: 0 })
    }
    /// Counts, by walking every version in the index, the live record bytes of every segment
    /// before `applied_before` (all of whose records the index has received) that the survey
    /// can count exactly, and hands the count to `record` while no background work of the index
    /// can charge garbage meanwhile (a charge published between the count and its record would
    /// be overwritten). A version is dead when its next newer version has a sequence number at
    /// or below `horizon` (no reader can see it).
    fn survey_live(
        &self,
        horizon: SequenceNumber,
        applied_before: SegmentId,
        record: &mut dyn FnMut(LiveCount) -> Result<()>,
    ) -> Result<()>;
    /// True if the index keeps `record`'s log pointer once applied, so that its log record stays
    /// live until superseded. A segment into which no applied record's pointer was kept is
    /// released by GC without being read, so an index answers `false` only for records it
    /// never reads from the log (the LSM: inline values and deletes, which live in its tables);
    /// the default keeps every pointer, as the hash index does.
    fn keeps_log_pointer(&self, _record: &IndexRecord<'_>) -> bool {
        true
    }
    /// True if the index charges every version it supersedes as garbage when it happens (the
    /// hash index does, at each checkpoint), so periodic garbage surveys would find nothing new.
    /// An LSM learns most garbage only when compaction drops versions, and answers `false`.
    fn charges_garbage_exactly(&self) -> bool {
        false
    }
    /// Stops background work; later calls may fail.
    fn shutdown(&self);
    /// Writes into `dir` the index's durable state that lives outside the catalog and the value
    /// log, as it is now (the hash index's table file; nothing for the LSM, whose tables the
    /// catalog lists), for a checkpoint; returns the bytes written. The caller holds the write
    /// path, so no write or index checkpoint changes that state meanwhile.
    fn write_checkpoint_state(&self, _fs: &dyn FileSystem, _dir: &Path) -> Result<u64> {
        Ok(0)
    }
}

/// Bytes of the entries of `it` in the range that a reader at `seq` sees (the newest version of
/// each key, deletes left out): `(key + stored value bytes, value-log record bytes the entries
/// point to)`.
pub(crate) fn range_entry_bytes(
    it: &mut dyn InternalIterator,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    seq: SequenceNumber,
) -> Result<(u64, u64)> {
    match start {
        Bound::Included(k) | Bound::Excluded(k) => it.seek(&seek_key(k, SequenceNumber(MAX_SEQUENCE)))?,
        Bound::Unbounded => it.seek_to_first()?,
    }
    let (mut entry_bytes, mut value_bytes) = (0u64, 0u64);
    let mut last_key: Option<Vec<u8>> = None;
    while it.valid() {
        let Some(parsed) = parse_internal_key(it.key()) else {
            return Err(it.entry_origin().corruption("malformed internal key"));
        };
        let key = parsed.user_key;
        let past_end = match end {
            Bound::Included(e) => key > e,
            Bound::Excluded(e) => key >= e,
            Bound::Unbounded => false,
        };
        if past_end {
            break;
        }
        let skipped_start = matches!(start, Bound::Excluded(s) if key == s);
        let newest_visible = parsed.sequence <= seq && last_key.as_deref() != Some(key);
        if newest_visible {
            last_key = Some(key.to_vec());
        }
        if newest_visible && !skipped_start && parsed.kind != ValueKind::Deletion {
            entry_bytes += (it.key().len() + it.value().len()) as u64;
            if let Some(ptr) = entry_pointer(&*it, parsed.kind)? {
                value_bytes += u64::from(ptr.len);
            }
        }
        it.next()?;
    }
    Ok((entry_bytes, value_bytes))
}

/// Everything an index needs from the database to open.
pub struct IndexParts {
    /// Database options.
    pub options: Options,
    /// Database directory.
    pub dir: PathBuf,
    /// The durable catalog (recovered or new).
    pub catalog: Arc<Catalog>,
    /// The value log, as the index may reach it.
    pub log: Arc<dyn LogLink>,
    /// Live snapshots (background work keeps what they can see).
    pub snapshots: Arc<SnapshotList>,
    /// Last published sequence number.
    pub last_sequence: Arc<AtomicU64>,
    /// Shared counters.
    pub counters: Arc<Counters>,
    /// Open for `Db::open_read_only`: the index writes nothing (no table file, MANIFEST edit or
    /// deletion), starts no background work, and is never asked to make room.
    pub read_only: bool,
    /// Read-only: the table files opened at open, served instead of opening their paths (a live
    /// writer may delete them). Empty otherwise.
    pub pinned_tables: HashMap<FileNumber, Arc<dyn RandomAccessFile>>,
    /// Where the index reports what it did (flushes, compactions, stalls, errors).
    pub info_log: Arc<InfoLog>,
}

/// Opens the index kind `parts.options.index` names over the recovered catalog. The log tail
/// after the catalog's log head is replayed by the caller through [`Index::apply`].
pub fn open(parts: IndexParts) -> Result<Arc<dyn Index>> {
    match parts.options.index {
        IndexKind::Lsm => {
            let table = crate::filenames::hash_table_file(&parts.dir);
            if parts.options.fs.exists(&table) {
                return Err(crate::Error::InvalidArgument(format!(
                    "{} holds a hash-index database ({} exists); open it with the hash index",
                    parts.dir.display(),
                    table.display()
                )));
            }
            Ok(Arc::new(lsm::LsmIndex::open(parts)?))
        }
        IndexKind::Hash { capacity, .. } => Ok(Arc::new(hash::HashIndex::open(parts, capacity)?)),
    }
}
