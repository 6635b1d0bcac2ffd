//! The memtable: recent writes, ordered by internal key, in a lock-free arena skiplist
//! ([`skiplist`]).
//!
//! Every committed write lands here after its value-log append; values at or above the value
//! threshold are stored as encoded [`crate::types::ValuePointer`]s, smaller ones inline.
//! Insertion is concurrent-safe: pipelined write groups apply beside one another, so entries may
//! become visible out of sequence order; readers filter by sequence number. A frozen (immutable)
//! memtable is only read, then flushed.
//!
//! Range deletes sit beside the skiplist as a short list of [`RangeTombstone`]s with their
//! [`Fragments`] (rebuilt on each new one: range deletes are rare next to point writes). A
//! memtable holding only range deletes is not empty: its flush must still record them.
//!
//! A Bloom filter of the user keys ([`key_filter`]) answers point reads of absent keys without
//! searching the skiplist.

mod key_filter;
mod skiplist;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;

use self::key_filter::KeyFilter;
use self::skiplist::{Position, SkipList};
use crate::iter::{EntryOrigin, InternalIterator};
use crate::range_del::{Fragments, RangeTombstone};
use crate::types::{pack_trailer, parse_internal_key, LogPosition, SegmentId, SequenceNumber, ValueKind, TRAILER_LEN};

/// Rough per-entry overhead of the skiplist node, for size accounting. An arena node's header
/// and tower take about 27 bytes; this stays at the figure measured with the skiplist it
/// replaced, so that a memtable still holds as many entries (and flushes as often) as the
/// measured defaults assume.
const ENTRY_OVERHEAD: usize = 64;

/// Bytes per entry assumed when sizing the key filter: the node overhead plus a short key and
/// value (a 16-byte key with a value pointer comes to about this).
const FILTER_ENTRY_BYTES: usize = ENTRY_OVERHEAD + 32;

/// Internal keys up to this long are built on the stack (a 16-byte user key plus its trailer).
const STACK_KEY_BYTES: usize = 32;

/// The arena grows by chunks of about this much (less for a small memtable).
const ARENA_CHUNK_BYTES: usize = 1 << 20;

/// An internal key built for an insert or a search, on the stack ([`crate::types::internal_key`]
/// returns a `Vec`: an allocation per put).
fn key_on_stack(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> SmallVec<[u8; STACK_KEY_BYTES]> {
    let mut key = SmallVec::with_capacity(user_key.len() + TRAILER_LEN);
    key.extend_from_slice(user_key);
    key.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
    key
}

/// What a memtable knows about a key at a sequence number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible version is a value (inline bytes or an encoded pointer), written at
    /// the sequence number given.
    Found(ValueKind, Bytes, SequenceNumber),
    /// The newest visible version is a deletion.
    Deleted,
    /// The memtable has no visible version; look further down.
    Absent,
}

/// An ordered in-memory table of internal keys.
pub struct Memtable {
    map: SkipList,
    /// Every user key inserted into `map` (shared: it outlives the memtable in
    /// [`TouchedKeys`]).
    keys: Arc<KeyFilter>,
    approximate_bytes: AtomicUsize,
    /// Value-log position of this memtable's first record: once the memtable is flushed, replay
    /// can start here.
    log_start: LogPosition,
    /// Largest sequence number inserted.
    max_sequence: AtomicU64,
    /// Value-log bytes of this memtable's records that nothing will point to once it is
    /// flushed (inline values and deletions: the log only served as their write-ahead log).
    log_garbage: Mutex<BTreeMap<SegmentId, u64>>,
    /// Range deletes applied here, with their fragments.
    range_dels: RwLock<(Vec<RangeTombstone>, Arc<Fragments>)>,
    /// True once a range delete was applied: point reads skip the lock above until then.
    has_range_dels: AtomicBool,
}

impl Memtable {
    /// An empty memtable whose first record sits at `log_start` in the value log, expected to
    /// hold about `budget_bytes` (see [`Memtable::approximate_bytes`]).
    pub fn new(log_start: LogPosition, budget_bytes: usize) -> Self {
        Memtable {
            map: SkipList::new((budget_bytes / 8).clamp(4 << 10, ARENA_CHUNK_BYTES)),
            keys: Arc::new(KeyFilter::with_capacity(budget_bytes / FILTER_ENTRY_BYTES)),
            approximate_bytes: AtomicUsize::new(0),
            log_start,
            max_sequence: AtomicU64::new(0),
            log_garbage: Mutex::new(BTreeMap::new()),
            range_dels: RwLock::new((Vec::new(), Arc::new(Fragments::default()))),
            has_range_dels: AtomicBool::new(false),
        }
    }

    /// Applies a delete of `[start, end)` at `seq` (an empty range deletes nothing).
    pub fn delete_range(&self, start: &[u8], end: &[u8], seq: SequenceNumber) {
        if start >= end {
            return;
        }
        let tombstone = RangeTombstone { start: start.to_vec(), end: end.to_vec(), seq };
        self.approximate_bytes.fetch_add(start.len() + end.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
        self.max_sequence.fetch_max(seq.0, Ordering::Relaxed);
        let mut dels = self.range_dels.write();
        dels.0.push(tombstone);
        dels.1 = Arc::new(Fragments::new(&dels.0));
        self.has_range_dels.store(true, Ordering::Release);
    }

    /// The range deletes applied here, in the order applied.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.range_dels.read().0.clone()
    }

    /// The fragments of the range deletes applied here, `None` if there are none.
    pub fn range_fragments(&self) -> Option<Arc<Fragments>> {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return None;
        }
        Some(Arc::clone(&self.range_dels.read().1))
    }

    /// Inserts one version.
    pub fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.insert_in_order(user_key, seq, kind, value, false);
    }

    /// Inserts one version; `next_follows` says that the caller's next insert comes after this
    /// one in key order (a run of keys sorted but not adjacent, such as a GC relocation batch),
    /// so that it starts its search from where this one went rather than from the head.
    pub fn insert_in_order(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        next_follows: bool,
    ) {
        let key = key_on_stack(user_key, seq, kind);
        self.approximate_bytes.fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
        self.max_sequence.fetch_max(seq.0, Ordering::Relaxed);
        // Before the entry: a reader that finds the entry must find the key in the filter too.
        self.keys.insert(user_key);
        self.map.insert(&key, value, next_follows);
    }

    /// False only if no version of `user_key` and no range delete was ever inserted here (one
    /// filter probe, no search).
    pub fn may_have_touched(&self, user_key: &[u8]) -> bool {
        self.has_range_dels.load(Ordering::Acquire) || self.keys.may_contain(user_key)
    }

    /// What this memtable wrote, as far as [`Memtable::may_have_touched`] can tell, kept once
    /// its entries are flushed (call it when no more inserts come: the memtable is frozen).
    pub fn touched_keys(&self) -> TouchedKeys {
        TouchedKeys {
            keys: Arc::clone(&self.keys),
            range_deletes: self.has_range_dels.load(Ordering::Acquire),
            max_sequence: self.max_sequence(),
        }
    }

    /// The newest version of `user_key` with sequence `<= seq`.
    pub fn get(&self, user_key: &[u8], seq: SequenceNumber) -> Lookup {
        if !self.keys.may_contain(user_key) {
            return Lookup::Absent;
        }
        let target = key_on_stack(user_key, seq, ValueKind::FOR_SEEK);
        let Some(entry) = self.map.lower_bound(&target) else {
            return Lookup::Absent;
        };
        match parse_internal_key(entry.key()) {
            Some(p) if p.user_key == user_key => match p.kind {
                ValueKind::Deletion => Lookup::Deleted,
                kind => Lookup::Found(kind, Bytes::copy_from_slice(entry.value()), p.sequence),
            },
            _ => Lookup::Absent,
        }
    }

    /// Records that `bytes` of `segment` become garbage when this memtable is flushed.
    pub fn note_log_garbage(&self, segment: SegmentId, bytes: u64) {
        *self.log_garbage.lock().entry(segment).or_default() += bytes;
    }

    /// Value-log garbage per segment that flushing this memtable creates.
    pub fn log_garbage(&self) -> BTreeMap<SegmentId, u64> {
        self.log_garbage.lock().clone()
    }

    /// Approximate bytes used (keys, values and node overhead).
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of the key filter, allocated whole at creation (not in `approximate_bytes`, which
    /// decides when the memtable is full).
    pub fn filter_bytes(&self) -> usize {
        self.keys.memory_bytes()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if a version (not only range deletes) was inserted.
    pub fn has_versions(&self) -> bool {
        !self.map.is_empty()
    }

    /// True if nothing was inserted (no version and no range delete).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty() && !self.has_range_dels.load(Ordering::Acquire)
    }

    /// Value-log position of the first record of this memtable.
    pub fn log_start(&self) -> LogPosition {
        self.log_start
    }

    /// Largest sequence number inserted (0 if empty).
    pub fn max_sequence(&self) -> SequenceNumber {
        SequenceNumber(self.max_sequence.load(Ordering::Relaxed))
    }

    /// A cursor over all entries; it keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator { current: None, table: Arc::clone(self) }
    }
}

/// The user keys a frozen memtable wrote (its key filter) and whether it held a range delete,
/// outliving its entries: the LSM index keeps a few after their flush, so that it can still
/// tell that a key was not written since a given sequence number (GC's liveness proofs).
#[derive(Clone)]
pub struct TouchedKeys {
    keys: Arc<KeyFilter>,
    range_deletes: bool,
    max_sequence: SequenceNumber,
}

impl TouchedKeys {
    /// False only if the memtable wrote no version of `user_key` and no range delete.
    pub fn may_have_touched(&self, user_key: &[u8]) -> bool {
        self.range_deletes || self.keys.may_contain(user_key)
    }

    /// The memtable's largest sequence number: it wrote nothing newer.
    pub fn max_sequence(&self) -> SequenceNumber {
        self.max_sequence
    }

    /// Bytes of memory the filter holds.
    pub fn memory_bytes(&self) -> usize {
        self.keys.memory_bytes()
    }
}

/// Bidirectional cursor over a memtable.
///
/// It holds the node it is on and steps from it, so `next` costs one link instead of a search
/// from the top (`prev` searches: the skiplist has no backward links).
pub struct MemtableIterator {
    current: Option<Position>,
    table: Arc<Memtable>,
}

impl MemtableIterator {
    fn node(&self) -> Option<skiplist::Node<'_>> {
        #[allow(unsafe_code)]
        // SAFETY: every position this cursor holds came from a node of `self.table.map`, which
        // the `Arc` keeps alive for as long as `self` is borrowed.
        self.current.map(|position| unsafe { self.table.map.at(position) })
    }
}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.current = self.table.map.first().map(skiplist::Node::position);
        Ok(())
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.current = self.table.map.last().map(skiplist::Node::position);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        self.current = self.table.map.lower_bound(target).map(skiplist::Node::position);
        Ok(())
    }

    fn next(&mut self) -> crate::Result<()> {
        let next = self.node().and_then(|n| self.table.map.next(n));
        if let Some(node) = next {
            self.table.map.prefetch_next(node);
        }
        self.current = next.map(skiplist::Node::position);
        Ok(())
    }

    fn prev(&mut self) -> crate::Result<()> {
        self.current = self.node().and_then(|n| self.table.map.last_before(n.key())).map(skiplist::Node::position);
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.node().map(skiplist::Node::key).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.node().map(skiplist::Node::value).unwrap_or_default()
    }

    fn entry_origin(&self) -> EntryOrigin {
        if self.valid() {
            EntryOrigin::Memtable
        } else {
            EntryOrigin::Unpositioned
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::origin::MEMTABLE;
    use crate::types::{seek_key, user_key};

    fn table() -> Arc<Memtable> {
        let m = Arc::new(Memtable::new(LogPosition::default(), 1 << 20));
        m.insert(b"a", SequenceNumber(1), ValueKind::Inline, b"a1");
        m.insert(b"a", SequenceNumber(3), ValueKind::Inline, b"a3");
        m.insert(b"b", SequenceNumber(2), ValueKind::Pointer, b"ptr");
        m.insert(b"b", SequenceNumber(4), ValueKind::Deletion, b"");
        m
    }

    #[test]
    fn get_sees_newest_visible_version() {
        let m = table();
        assert_eq!(
            m.get(b"a", SequenceNumber(2)),
            Lookup::Found(ValueKind::Inline, Bytes::from_static(b"a1"), SequenceNumber(1))
        );
        assert_eq!(
            m.get(b"a", SequenceNumber(9)),
            Lookup::Found(ValueKind::Inline, Bytes::from_static(b"a3"), SequenceNumber(3))
        );
        assert_eq!(m.get(b"a", SequenceNumber(0)), Lookup::Absent);
        assert_eq!(
            m.get(b"b", SequenceNumber(3)),
            Lookup::Found(ValueKind::Pointer, Bytes::from_static(b"ptr"), SequenceNumber(2))
        );
        assert_eq!(m.get(b"b", SequenceNumber(4)), Lookup::Deleted);
        assert_eq!(m.get(b"c", SequenceNumber(9)), Lookup::Absent);
        assert_eq!(m.max_sequence(), SequenceNumber(4));
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn range_deletes_are_kept_beside_the_entries() {
        let m = Memtable::new(LogPosition::default(), 1 << 20);
        assert!(m.range_fragments().is_none());
        m.delete_range(b"b", b"d", SequenceNumber(7));
        assert!(!m.is_empty(), "a memtable with only a range delete must still be flushed");
        assert_eq!(m.max_sequence(), SequenceNumber(7));
        let f = m.range_fragments().unwrap();
        assert_eq!(f.covering(b"c", SequenceNumber(9)), SequenceNumber(7));
        assert_eq!(m.range_tombstones().len(), 1);
    }

    #[test]
    fn iterator_walks_both_directions() {
        let m = table();
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut forward = Vec::new();
        while it.valid() {
            forward.push(it.key().to_vec());
            it.next().unwrap();
        }
        assert_eq!(forward.len(), 4);
        assert_eq!(user_key(&forward[0]), b"a");
        assert_eq!(parse_internal_key(&forward[0]).unwrap().sequence, SequenceNumber(3));
        it.seek_to_last().unwrap();
        let mut backward = Vec::new();
        while it.valid() {
            backward.push(it.key().to_vec());
            it.prev().unwrap();
        }
        backward.reverse();
        assert_eq!(forward, backward);
        it.seek(&seek_key(b"b", SequenceNumber(3))).unwrap();
        assert_eq!(it.value(), b"ptr");
    }

    #[test]
    fn entries_report_the_memtable_as_their_origin() {
        let m = table();
        let mut it = m.iter();
        assert_eq!(it.entry_origin(), EntryOrigin::Unpositioned);
        it.seek_to_first().unwrap();
        match it.entry_origin().corruption("bad entry") {
            crate::Error::Corruption { file, offset, .. } => assert_eq!((file.to_str(), offset), (Some(MEMTABLE), 0)),
            other => panic!("{other:?}"),
        }
    }
}
