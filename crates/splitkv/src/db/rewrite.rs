//! The key-order rewrite of the value log ([`Db::rewrite_value_log`]).
//!
//! After a random load, consecutive keys' values lie anywhere in the log, so a scan costs one
//! random value read per key. The rewrite walks the index in key order over a key range and
//! appends each live separated value at the log head in that order; a later scan of the range
//! then reads the log front to back (and read-ahead coalesces neighbouring values into large
//! reads). It is GC with another order, and reuses GC's crash-safe path:
//! 1. seal the active segment and flush the memtable, so every segment written before the
//!    rewrite lies before the recovery log head (and may be released later);
//! 2. with GC runs held off (no run moves a not-yet-visited record out of order, and no segment
//!    is deleted under the walk's reads), read each value the index points to and hand the
//!    records, in key order, to the write path as relocations: the leader re-checks every pointer
//!    (a concurrent user write of the key always wins), appends the survivors, syncs, and only
//!    then publishes their pointers;
//! 3. sync the log and compact the range in the index: the rewrite gave every key in it a second
//!    version, and until a compaction drops the old ones a scan merges both (docs/design.md,
//!    "Key-order rewrite");
//! 4. count every segment's garbage with one walk over the index, and clean, as ordinary GC
//!    victims, the old segments that now hold no live record: each is scanned (its validity
//!    check finds nothing to copy), its removal recorded in the MANIFEST, and its file deleted
//!    once no snapshot or iterator older than the rewrite is open.
//!
//! A crash at any point leaves acknowledged writes intact: a relocation that was not synced was
//! never published (recovery replays only what the log holds, and a rewritten value is just a
//! newer version of the same key), and segments go only after the MANIFEST says so.
//!
//! The hash index has no key order to follow: the rewrite refuses it with
//! [`Error::InvalidArgument`].
//!
//! Thread-safety: runs on the caller's thread beside user reads and writes; it holds the
//! collector's run lock for the walk (a background run or `run_gc` waits), not the write path.

use bytes::Bytes;

use super::Db;
use crate::error::{Error, Result};
use crate::options::{IndexKind, ReadOptions};
use crate::types::{SegmentId, SequenceNumber, ValuePointer};
use crate::vlog::gc::{GcHost, GcOutcome};
use crate::vlog::SEGMENT_HEADER_LEN;

/// Value bytes the walk gathers before handing them to the write path: one relocation batch.
const CHUNK_BYTES: usize = 1 << 20;

/// What one [`Db::rewrite_value_log`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewriteOutcome {
    /// Separated values found in the range (inline values are not in the log and stay put).
    pub records_visited: u64,
    /// Value bytes read from the log by the walk.
    pub bytes_read: u64,
    /// Values handed to the write path to be rewritten in key order (a value whose key a user
    /// overwrote meanwhile is skipped by the write path and not written).
    pub records_rewritten: u64,
    /// Value bytes handed to the write path.
    pub bytes_rewritten: u64,
    /// True if the walk stopped before the end of the range because the value log reached the
    /// share of `gc_space_budget` that triggers GC (the rest of the range keeps its old order).
    pub stopped_at_space_budget: bool,
    /// The clean-up run over the old segments that the rewrite left without a live record.
    pub gc: GcOutcome,
}

/// One value on its way to the head: key, value and the pointer it replaces.
type Visited = (Vec<u8>, Bytes, ValuePointer);

impl Db {
    /// Rewrites the separated values of the keys in `[begin, end]` (`None` = unbounded, as in
    /// [`Db::compact_range`]; both `None` covers every key, named keyspaces included) at the
    /// value-log head in key order, so a later scan of the range reads the log sequentially
    /// (WiscKey's remedy for range queries after a random load). Then compacts the range in the
    /// index, which drops the versions the rewrite replaced, and collects, as ordinary GC
    /// victims, the segments written before the call that no longer hold a live record.
    ///
    /// A concurrent write of a key always wins over its rewrite. Values an open snapshot or
    /// iterator can still read keep their segments until it is dropped (a later GC run frees
    /// them). Costs one value read and one value write per key in the range, and needs room in
    /// the log for the range's values until the old segments go: with `gc_space_budget` set the
    /// walk stops early once the log reaches `gc_space_trigger` of the budget
    /// ([`RewriteOutcome::stopped_at_space_budget`]).
    ///
    /// The hash index keeps no key order: `Error::InvalidArgument`.
    pub fn rewrite_value_log(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<RewriteOutcome> {
        let inner = self.inner.as_ref();
        inner.check_poisoned()?;
        if matches!(inner.options.index, IndexKind::Hash { .. }) {
            return Err(Error::InvalidArgument(
                "rewrite_value_log needs key order, which the hash index does not keep; \
                 use run_gc to reclaim space"
                    .into(),
            ));
        }
        inner.seal_log()?;
        self.flush()?;
        // Everything before the segment now active was written before the rewrite began.
        let first_new = inner.vlog.head().segment;
        let mut outcome = RewriteOutcome::default();
        {
            let _no_runs = inner.gc.hold_runs_for_rewrite();
            // The database's own cursor, so the walk reads values ahead on the prefetch pool
            // like a scan does, instead of one value at a time (the values of a randomly loaded
            // log are random reads, and under memory pressure each is a device read).
            // Bounded, so it reads nothing ahead past `end` (`end + [0]` is the first key after it).
            let upper_bound = end.map(|end| [end, &[0]].concat());
            let snapshot = self.snapshot();
            // Each value the walk reads is its key's newest as of the snapshot.
            let current_at = snapshot.sequence();
            let mut it = self.inner.cursor(ReadOptions {
                snapshot: Some(snapshot),
                lower_bound: begin.map(<[u8]>::to_vec),
                upper_bound,
                ..ReadOptions::default()
            })?;
            it.seek_to_first()?;
            let mut chunk: Vec<Visited> = Vec::new();
            let mut chunk_bytes = 0;
            while it.valid() {
                // The cursor read the value and checked that its record belongs to this key.
                if let Some(ptr) = it.value_pointer() {
                    let value = it.value_bytes();
                    outcome.records_visited += 1;
                    outcome.bytes_read += value.len() as u64;
                    chunk_bytes += value.len();
                    chunk.push((it.key().to_vec(), value, ptr));
                }
                if chunk_bytes >= CHUNK_BYTES {
                    if inner.gc.near_space_budget(inner) {
                        outcome.stopped_at_space_budget = true;
                        chunk.clear();
                        break;
                    }
                    self.rewrite_chunk(&mut chunk, current_at, &mut outcome)?;
                    chunk_bytes = 0;
                }
                it.next()?;
            }
            self.rewrite_chunk(&mut chunk, current_at, &mut outcome)?;
            // The cursor's snapshot would keep the replaced versions through the compaction below.
            drop(it);
            // The copies are durable from here on (over an index that does not apply durably,
            // their batches were not synced), and so are the user writes that made the old
            // records dead, before any old segment can go.
            inner.sync_log()?;
            // The old versions are shadowed now; dropping them keeps scans of the range from
            // merging two versions of every key (the index holds keys and pointers only, so
            // this costs little next to the rewrite itself). Still under the guard, so the
            // compaction moves no value out of the order just written.
            self.compact_range(begin, end)?;
        }
        outcome.gc = self.release_emptied_segments(first_new)?;
        Ok(outcome)
    }

    /// Hands a chunk of the walk to the write path, in its (key) order.
    fn rewrite_chunk(
        &self,
        chunk: &mut Vec<Visited>,
        current_at: SequenceNumber,
        outcome: &mut RewriteOutcome,
    ) -> Result<()> {
        let bytes = chunk.iter().map(|(_, v, _)| v.len() as u64).sum::<u64>();
        outcome.records_rewritten += chunk.len() as u64;
        outcome.bytes_rewritten += bytes;
        // In the GC totals (`Stats::gc_bytes_relocated`): the rewrite is GC in another order.
        self.inner.gc.note_rewritten(bytes);
        let records = chunk.drain(..).map(|(k, v, p)| (k, Vec::from(v), p));
        self.inner.submit_relocations(records, current_at)?;
        Ok(())
    }

    /// Counts garbage exactly, then cleans the segments older than `first_new` whose every
    /// record is garbage (each is still scanned, so a record the count missed is copied, never
    /// lost).
    fn release_emptied_segments(&self, first_new: SegmentId) -> Result<GcOutcome> {
        let inner = self.inner.as_ref();
        inner.survey_garbage()?;
        let emptied = inner
            .eligible_segments()?
            .into_iter()
            .filter(|s| s.id < first_new)
            .filter(|s| s.garbage_bytes + s.skipped_bytes >= s.size.saturating_sub(SEGMENT_HEADER_LEN))
            .map(|s| s.id)
            .collect();
        inner.gc.run_to_completion_among(inner, emptied)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::iter::db_iter::DbIter;
    use crate::options::Options;
    use crate::types::ValueKind;

    /// The pointers of the separated values in key order, as the index holds them now.
    fn pointers_in_key_order(db: &Db) -> Result<Vec<ValuePointer>> {
        let inner = db.inner.as_ref();
        let seq = SequenceNumber(inner.last_sequence.load(Ordering::Acquire));
        let mut it = DbIter::new(inner.index.iter(seq, false)?, seq, None, None);
        it.seek_to_first()?;
        let mut pointers = Vec::new();
        while it.valid() {
            if it.value_kind() == ValueKind::Pointer {
                pointers.extend(ValuePointer::decode(it.raw_value()));
            }
            it.next()?;
        }
        Ok(pointers)
    }

    /// Every version the index holds, shadowed ones included.
    fn versions_in_index(db: &Db) -> Result<usize> {
        let inner = db.inner.as_ref();
        let seq = SequenceNumber(inner.last_sequence.load(Ordering::Acquire));
        let mut it = inner.index.iter(seq, false)?;
        it.seek_to_first()?;
        let mut versions = 0;
        while it.valid() {
            versions += 1;
            it.next()?;
        }
        Ok(versions)
    }

    fn in_log_order(pointers: &[ValuePointer]) -> bool {
        pointers.windows(2).all(|w| (w[0].segment, w[0].offset) < (w[1].segment, w[1].offset))
    }

    #[test]
    fn after_a_random_load_the_rewrite_lays_values_out_in_key_order() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let options = Options {
            write_buffer_size: 64 << 10,
            segment_size: 128 << 10,
            background_gc: false,
            value_threshold: 256,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options)?;
        // A scrambled order of 800 keys (multiplying by a unit modulo 800).
        for i in 0..800u64 {
            let k = (i * 337) % 800;
            db.put(format!("key{k:05}"), vec![(k % 251) as u8; 600])?;
        }
        assert!(!in_log_order(&pointers_in_key_order(&db)?), "a random load is not in key order");
        let outcome = db.rewrite_value_log(None, None)?;
        assert_eq!(outcome.records_rewritten, 800);
        let pointers = pointers_in_key_order(&db)?;
        assert_eq!(pointers.len(), 800);
        assert!(in_log_order(&pointers), "values are not in key order after the rewrite");
        // The versions the rewrite replaced were compacted away: scans merge one per key.
        assert_eq!(versions_in_index(&db)?, 800);
        for k in 0..800u64 {
            assert_eq!(db.get(format!("key{k:05}"))?.as_deref(), Some(&vec![(k % 251) as u8; 600][..]));
        }
        Ok(())
    }
}
