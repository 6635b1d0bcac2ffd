//! The compaction executor: merge input tables, drop what no reader can see, write outputs.
//!
//! Dropping uses snapshot stripes (as RocksDB does): the live snapshots cut the sequence space
//! into stripes, and a version is dropped when a newer version of the same key lies in the same
//! stripe, because no reader can see one without the other. A tombstone is dropped when every
//! snapshot sees it and no deeper level can hold the key. Every dropped [`ValuePointer`] is charged to
//! its value-log segment as garbage, which is what value-log GC later reclaims.
//!
//! Range deletes of the version the compaction started from count as newer versions: a version
//! below a durable range delete, with no snapshot between them, is dropped. Only durable
//! deletes count: one still in a memtable could be lost in a crash after the outputs are
//! published. Outputs are cut at partition split keys.
//!
//! Outputs are synced one by one; the caller syncs the directory and publishes them in one
//! MANIFEST edit, so a crash mid-compaction leaves only unreferenced files behind.
//!
//! With [`ValueMoves`] the compaction also relocates values (relocation through compaction, as
//! RocksDB's integrated BlobDB does it): each kept entry pointing into a segment being emptied
//! has its value read and appended to the log head as a moved record, and the output points
//! there instead. The merge already knows which versions are kept, so a move needs no lookup,
//! no sequence number and no memtable insert, where a GC copy is a write again. The old record
//! is charged as garbage like a dropped one. The caller syncs the log before it publishes the
//! outputs; moved records that a crash leaves unreferenced are garbage like any other.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::compaction::Compaction;
use crate::error::Result;
use crate::filenames::{segment_file, table_file};
use crate::fs::FileSystem;
use crate::index::LogLink;
use crate::iter::merge::MergingIterator;
use crate::iter::{entry_pointer, InternalIterator};
use crate::range_del::Fragments;
use crate::sstable::{IndexLearning, TableBuilder, TableCache, TableOptions};
use crate::types::{
    compare_internal_keys, parse_internal_key, FileNumber, InternalKey, SegmentId, SequenceNumber, ValueKind,
    ValuePointer, MAX_SEQUENCE,
};
use crate::version::FileMetaData;
use crate::vlog::{MoveTicket, RecordKind, RecordRef};

/// How often (in entries) the executor lets a pending memtable flush run.
const PREEMPT_EVERY: usize = 1024;

/// Writes a sorted stream of entries into one or more tables, cutting at a target size.
pub struct TableSink<'a> {
    fs: &'a Arc<dyn FileSystem>,
    dir: &'a Path,
    options: TableOptions,
    max_file_size: u64,
    new_file_number: &'a mut dyn FnMut() -> FileNumber,
    current: Option<OpenOutput>,
    outputs: Vec<FileMetaData>,
    bytes_written: u64,
    learning: Option<&'a IndexLearning>,
    /// Partition split keys, ascending: no output straddles one.
    partition_splits: &'a [Vec<u8>],
    /// What outputs record as `range_clean_below` unless they keep a range-deleted entry.
    range_clean_below: SequenceNumber,
}

struct OpenOutput {
    number: FileNumber,
    builder: TableBuilder,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    /// Record bytes per value-log segment the table points to.
    log_refs: BTreeMap<SegmentId, u64>,
    /// Sequence-number range of the entries.
    smallest_seq: SequenceNumber,
    largest_seq: SequenceNumber,
    /// The first partition split after the output's first key: the output ends before it.
    ends_before: Option<Vec<u8>>,
    /// See [`FileMetaData::range_clean_below`].
    range_clean_below: SequenceNumber,
}

impl<'a> TableSink<'a> {
    /// A sink writing tables named by `new_file_number` into `dir`.
    pub fn new(
        fs: &'a Arc<dyn FileSystem>,
        dir: &'a Path,
        options: TableOptions,
        max_file_size: u64,
        new_file_number: &'a mut dyn FnMut() -> FileNumber,
    ) -> Self {
        TableSink {
            fs,
            dir,
            options,
            max_file_size,
            new_file_number,
            current: None,
            outputs: Vec::new(),
            bytes_written: 0,
            learning: None,
            partition_splits: &[],
            range_clean_below: SequenceNumber(0),
        }
    }

    /// Declares that the entries handed to the sink are not covered by any range delete at or
    /// below `seq` (unless [`TableSink::note_kept_covered`] says otherwise for an output).
    pub fn with_range_clean_below(mut self, seq: SequenceNumber) -> Self {
        self.range_clean_below = seq;
        self
    }

    /// Notes that the entry just added is covered by a range delete but kept (a snapshot
    /// needs it): its table cannot vouch for any delete.
    pub fn note_kept_covered(&mut self) {
        if let Some(out) = self.current.as_mut() {
            out.range_clean_below = SequenceNumber(0);
        }
    }

    /// Cuts outputs at these partition split keys (ascending), so that no table straddles one.
    pub fn with_partitions(mut self, splits: &'a [Vec<u8>]) -> Self {
        self.partition_splits = splits;
        self
    }

    /// Counts each finished table's index outcome in `learning`.
    pub fn with_learning(mut self, learning: Option<&'a IndexLearning>) -> Self {
        self.learning = learning;
        self
    }

    /// Appends an entry; keys must arrive in internal-key order. `pointer` is the entry's value
    /// decoded when it is a value-log pointer, counted in the table's log references.
    pub fn add(&mut self, ikey: &[u8], value: &[u8], pointer: Option<ValuePointer>) -> Result<()> {
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            crate::Error::InvalidArgument("a table output was handed a malformed internal key".into())
        })?;
        let crosses_split =
            self.current.as_ref().and_then(|o| o.ends_before.as_deref()).is_some_and(|split| parsed.user_key >= split);
        if crosses_split {
            self.finish_current()?;
        }
        let out = match &mut self.current {
            Some(out) => out,
            slot @ None => {
                let number = (self.new_file_number)();
                let file = self.fs.create(&table_file(self.dir, number))?;
                let next_split = self.partition_splits.partition_point(|s| s.as_slice() <= parsed.user_key);
                slot.insert(OpenOutput {
                    number,
                    builder: TableBuilder::new(file, self.options),
                    smallest: ikey.to_vec(),
                    largest: Vec::new(),
                    log_refs: BTreeMap::new(),
                    smallest_seq: parsed.sequence,
                    largest_seq: parsed.sequence,
                    ends_before: self.partition_splits.get(next_split).cloned(),
                    range_clean_below: self.range_clean_below,
                })
            }
        };
        out.builder.add(ikey, value)?;
        out.smallest_seq = out.smallest_seq.min(parsed.sequence);
        out.largest_seq = out.largest_seq.max(parsed.sequence);
        if let Some(ptr) = pointer {
            *out.log_refs.entry(ptr.segment).or_default() += u64::from(ptr.len);
        }
        out.largest.clear();
        out.largest.extend_from_slice(ikey);
        Ok(())
    }

    /// True if the current output reached the target size.
    pub fn current_is_full(&self) -> bool {
        self.current.as_ref().is_some_and(|o| o.builder.estimated_size() >= self.max_file_size)
    }

    /// Finishes the current output, if any.
    pub fn finish_current(&mut self) -> Result<()> {
        if let Some(out) = self.current.take() {
            let num_entries = out.builder.num_entries();
            let built = out.builder.finish()?;
            if let Some(learning) = self.learning {
                learning.note_built(&built);
            }
            let size = built.size;
            self.bytes_written += size;
            self.outputs.push(FileMetaData {
                number: out.number,
                file_size: size,
                smallest: InternalKey(out.smallest),
                largest: InternalKey(out.largest),
                num_entries,
                log_refs: out.log_refs.into_iter().collect(),
                smallest_seq: out.smallest_seq,
                largest_seq: out.largest_seq,
                range_clean_below: out.range_clean_below,
            });
        }
        Ok(())
    }

    /// Finishes and returns every output with the bytes written.
    pub fn finish(mut self) -> Result<(Vec<FileMetaData>, u64)> {
        self.finish_current()?;
        Ok((self.outputs, self.bytes_written))
    }
}

/// What a compaction needs from the engine.
pub struct CompactionContext<'a> {
    /// File system for outputs.
    pub fs: &'a Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: &'a Path,
    /// Opens input tables.
    pub table_cache: &'a TableCache,
    /// Options for output tables.
    pub table_options: TableOptions,
    /// Counts the outputs' index outcomes.
    pub learning: Option<&'a IndexLearning>,
    /// Sequence numbers of the live snapshots (and iterators), ascending.
    pub snapshots: Vec<SequenceNumber>,
    /// Allocates output file numbers (and registers them as pending).
    pub new_file_number: &'a mut dyn FnMut() -> FileNumber,
    /// Called every few entries so that a memtable flush can pre-empt a long compaction.
    pub preempt: &'a mut dyn FnMut() -> Result<()>,
    /// The durable range deletes.
    pub range_fragments: Arc<Fragments>,
    /// The newest of them (what outputs that keep no covered entry vouch for).
    pub range_clean_below: SequenceNumber,
    /// Partition split keys, ascending.
    pub partition_splits: &'a [Vec<u8>],
    /// Segments to move kept values out of, if any.
    pub moves: Option<ValueMoves<'a>>,
}

/// Where a compaction moves kept values from, and the log it moves them to.
pub struct ValueMoves<'a> {
    /// The value log: read from, appended to.
    pub log: &'a dyn LogLink,
    /// The compaction's claims.
    pub ticket: MoveTicket,
    /// Segments claimed for the compaction ([`LogLink::claim_for_moves`]): every kept pointer
    /// into one of them is moved, except into the ranges GC recorded as dead (read after the
    /// claim, so none of them is punched under the compaction): a kept entry whose newer
    /// version lies outside the compaction is dead, and its record may be in one.
    pub from: &'a HashMap<SegmentId, Vec<(u64, u64)>>,
}

impl ValueMoves<'_> {
    /// True if the value at `ptr` is to be moved. A kept entry whose newer version lies outside
    /// the compaction is dead, and its record may be in a skipped range or dropped by GC's
    /// compaction of the segment: those are not moved (and the entry goes when its newer
    /// version meets it).
    fn moves(&self, ptr: &ValuePointer) -> bool {
        self.from
            .get(&ptr.segment)
            .is_some_and(|skipped| !skipped.iter().any(|&(start, end)| (start..end).contains(&ptr.offset)))
            && self.log.holds(ptr)
    }

    /// Moves the value at `ptr` of the version `user_key`@`seq` to the log head.
    fn move_value(&self, dir: &Path, user_key: &[u8], seq: SequenceNumber, ptr: &ValuePointer) -> Result<ValuePointer> {
        let record = self.log.read_record(ptr)?;
        if record.key != user_key || !matches!(record.kind, RecordKind::Put | RecordKind::Moved) {
            return Err(crate::Error::corruption(
                segment_file(dir, ptr.segment),
                ptr.offset,
                "the record a table points to is not a value of the table's key",
            ));
        }
        let moved = self.log.append_moved(self.ticket, &[RecordRef::moved(seq, &record.key, &record.value)])?;
        moved.first().copied().ok_or_else(|| crate::Error::Poisoned("a moved value was not appended".into()))
    }
}

/// What a compaction produced.
#[derive(Debug, Default)]
pub struct CompactionResult {
    /// New tables for `level + 1`.
    pub outputs: Vec<FileMetaData>,
    /// Value-log records whose last reference this compaction dropped.
    pub garbage: Vec<DroppedPointer>,
    /// Table bytes read.
    pub bytes_read: u64,
    /// Table bytes written.
    pub bytes_written: u64,
    /// Entries dropped.
    pub dropped_entries: u64,
    /// Values moved to the log head, and their record bytes.
    pub moved_values: u64,
    /// See `moved_values`.
    pub moved_bytes: u64,
}

/// A dropped version's value-log record, now garbage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DroppedPointer {
    /// Segment holding the record.
    pub segment: SegmentId,
    /// Record bytes.
    pub bytes: u64,
    /// Sequence number of the next newer version of the key, whose arrival made this one
    /// garbage: a garbage survey at or past it has counted the record already.
    pub shadowed_by: SequenceNumber,
}

/// Runs a (non-trivial) compaction.
pub fn run(compaction: &Compaction, ctx: CompactionContext<'_>) -> Result<CompactionResult> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut bytes_read = 0;
    for file in compaction.inputs.iter().flatten() {
        bytes_read += file.file_size;
        let table = ctx.table_cache.get_table(file.number, file.file_size)?;
        children.push(Box::new(table.iter(false)));
    }
    let mut input = MergingIterator::new(children);
    input.seek_to_first()?;

    let mut sink =
        TableSink::new(ctx.fs, ctx.dir, ctx.table_options, compaction.max_output_file_size, ctx.new_file_number)
            .with_learning(ctx.learning)
            .with_partitions(ctx.partition_splits)
            .with_range_clean_below(ctx.range_clean_below);
    let mut garbage = Vec::new();
    let mut dropped_entries = 0;
    // The user key of the entries being merged, valid once `seen_key`. One buffer, reused: a new
    // vector per user key was 10% of a compaction's instructions (callgrind, 300k x 100 B).
    let mut current_user_key: Vec<u8> = Vec::new();
    // Stripe of the previous (newer) version of the current key; `None` at a key's first version.
    let mut newer_stripe: Option<usize> = None;
    let mut newer_sequence = SequenceNumber(0);
    let stripe = |seq: SequenceNumber| ctx.snapshots.partition_point(|s| *s < seq);
    let mut grandparent_index = 0;
    let mut overlapped_bytes = 0u64;
    let mut seen_key = false;
    let mut since_preempt = 0;
    let (mut moved_values, mut moved_bytes) = (0, 0);

    while input.valid() {
        since_preempt += 1;
        if since_preempt >= PREEMPT_EVERY {
            since_preempt = 0;
            (ctx.preempt)()?;
        }
        let ikey = input.key();
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| input.entry_origin().corruption("compaction input has a malformed internal key"))?;

        // Cut the output before it overlaps too much of the grandparent level, so that a later
        // compaction of this output does not have to rewrite a huge range below it.
        while grandparent_index < compaction.grandparents.len()
            && compare_internal_keys(ikey, &compaction.grandparents[grandparent_index].largest.0).is_gt()
        {
            if seen_key {
                overlapped_bytes += compaction.grandparents[grandparent_index].file_size;
            }
            grandparent_index += 1;
        }
        let first_occurrence = !seen_key || current_user_key != parsed.user_key;
        seen_key = true;
        if first_occurrence {
            current_user_key.clear();
            current_user_key.extend_from_slice(parsed.user_key);
            newer_stripe = None;
            // Outputs are cut only between user keys, so all versions of a key share one file
            // and files of a level never overlap in user-key space.
            if overlapped_bytes > 10 * compaction.max_output_file_size || sink.current_is_full() {
                sink.finish_current()?;
                overlapped_bytes = 0;
            }
        }
        let this_stripe = stripe(parsed.sequence);
        // A range delete with no snapshot between it and this version hides it from everyone.
        let covered_by = ctx.range_fragments.first_covering_above(parsed.user_key, parsed.sequence);
        let range_deleted = covered_by.is_some_and(|t| stripe(t) == this_stripe);
        // Every reader that could see this version sees the newer one instead.
        let shadowed = newer_stripe == Some(this_stripe);
        let drop = shadowed
            || range_deleted
            || (parsed.kind == ValueKind::Deletion
                && this_stripe == 0
                && compaction.is_base_level_for_key(parsed.user_key));
        newer_stripe = Some(this_stripe);
        let mut shadowed_by = std::mem::replace(&mut newer_sequence, parsed.sequence);
        if range_deleted && !shadowed {
            // Garbage surveys walk point versions only and count a range-deleted record as live,
            // so its drop is charged whatever survey its segment had.
            shadowed_by = SequenceNumber(MAX_SEQUENCE);
        }

        let pointer = entry_pointer(&input, parsed.kind)?;
        if drop {
            dropped_entries += 1;
            if let Some(ptr) = pointer {
                garbage.push(DroppedPointer { segment: ptr.segment, bytes: u64::from(ptr.len), shadowed_by });
            }
        } else {
            match (pointer, &ctx.moves) {
                (Some(old), Some(moves)) if moves.moves(&old) => {
                    let new = moves.move_value(ctx.dir, parsed.user_key, parsed.sequence, &old)?;
                    // Always charged: a survey that counted the old record counted it live.
                    let shadowed_by = SequenceNumber(MAX_SEQUENCE);
                    garbage.push(DroppedPointer { segment: old.segment, bytes: u64::from(old.len), shadowed_by });
                    moved_values += 1;
                    moved_bytes += u64::from(new.len);
                    let mut buf = [0; ValuePointer::MAX_ENCODED_LEN];
                    sink.add(ikey, new.encode_into(&mut buf), Some(new))?;
                }
                _ => sink.add(ikey, input.value(), pointer)?,
            }
            if covered_by.is_some() {
                sink.note_kept_covered();
            }
        }
        input.next()?;
    }
    let (outputs, bytes_written) = sink.finish()?;
    Ok(CompactionResult { outputs, garbage, bytes_read, bytes_written, dropped_entries, moved_values, moved_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;
    use crate::types::internal_key;

    #[test]
    fn each_output_lists_the_log_records_it_points_to() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let mut next = 10;
        let mut numbers = || {
            next += 1;
            FileNumber(next)
        };
        let mut sink = TableSink::new(&fs, dir, TableOptions::default(), u64::MAX, &mut numbers);
        let ptr = |segment, len| ValuePointer { segment: SegmentId(segment), offset: 64, len };
        let put = |key: &str, kind| internal_key(key.as_bytes(), SequenceNumber(1), kind);
        sink.add(&put("a", ValueKind::Pointer), &ptr(3, 100).encode(), Some(ptr(3, 100))).unwrap();
        sink.add(&put("b", ValueKind::Inline), b"small", None).unwrap();
        sink.add(&put("c", ValueKind::Pointer), &ptr(1, 50).encode(), Some(ptr(1, 50))).unwrap();
        sink.finish_current().unwrap();
        sink.add(&put("d", ValueKind::Pointer), &ptr(3, 7).encode(), Some(ptr(3, 7))).unwrap();
        let (outputs, _) = sink.finish().unwrap();
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0].log_refs, vec![(SegmentId(1), 50), (SegmentId(3), 100)]);
        assert_eq!(outputs[1].log_refs, vec![(SegmentId(3), 7)]);
    }
}
