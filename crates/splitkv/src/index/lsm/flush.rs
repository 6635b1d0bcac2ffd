//! Flushing the frozen memtable into a level-0 table, and deleting files no version needs.
//!
//! Durability order of a flush: write and sync the table, sync the value log through the
//! [`crate::index::LogLink`] (the table's pointers must not outlive their records), sync the
//! directory, then record the table, the new log head and the garbage the flush makes (inline
//! values and deletes whose log records only served as write-ahead log) in one catalog edit.
//!
//! The memtable's range deletes enter the version in that same edit, and its entries they cover
//! (with no snapshot between) are left out of the tables. Outputs are cut at partition split
//! keys, so one flush may write a level-0 table per partition it touches.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tracing::Level;

use super::Shared;
use crate::compaction::exec::TableSink;
use crate::error::Result;
use crate::filenames::{parse_file_name, FileKind};
use crate::info_log::{log_event, ListDisplay};
use crate::iter::{entry_pointer, InternalIterator};
use crate::memtable::Memtable;
use crate::stats::Counters;
use crate::types::{parse_internal_key, FileNumber, LogPosition, SequenceNumber};
use crate::version::VersionEdit;

impl Shared {
    /// Flushes the frozen memtable if there is one and no other flush is running.
    pub(super) fn flush_frozen_memtable(&self) {
        let (imm, log_head) = {
            let mut state = self.state.lock();
            let Some(imm) = state.imm.clone() else { return };
            if state.flushing || state.bg_error.is_some() {
                return;
            }
            state.flushing = true;
            (imm, state.mem.log_start())
        };
        let mut allocated = Vec::new();
        let started = Instant::now();
        let result = self.write_flush(&imm, log_head, &mut allocated);
        match &result {
            Ok(flushed) => log_event!(
                self.info_log,
                Level::INFO,
                entries = imm.len() as u64,
                memtable_bytes = imm.approximate_bytes() as u64,
                tables = %ListDisplay(&flushed.tables),
                bytes = flushed.bytes,
                range_deletes = flushed.range_deletes,
                log_head = %format_args!("{}:{}", log_head.segment.0, log_head.offset),
                micros = started.elapsed().as_micros() as u64,
                "flush finished"
            ),
            Err(e) => log_event!(self.info_log, Level::ERROR, error = %e, "flush failed"),
        }
        let mut state = self.state.lock();
        for n in &allocated {
            state.pending_outputs.remove(n);
        }
        let result = result.and_then(|_| {
            if let Some(flushed) = state.imm.take() {
                state.recent = Arc::new(state.recent.with_flushed(&flushed));
            }
            self.install_super_version(&state);
            Counters::add(&self.counters.flushes, 1);
            // Upkeep takes the catalog and state locks itself.
            parking_lot::MutexGuard::unlocked(&mut state, || self.after_tree_change())
        });
        if let Err(e) = result {
            self.set_bg_error(&mut state, &e);
        }
        // Only now, with the upkeep done: `wait_for_flush` returns once no flush is running, and
        // a caller must find what the upkeep does (snapshot-deferred drops) already done.
        state.flushing = false;
        self.done_cv.notify_all();
        self.work_cv.notify_all();
        drop(state);
        self.delete_obsolete_files();
    }

    /// A new table number, registered as a pending output (and in `allocated`).
    pub(super) fn new_output_number(&self, allocated: &mut Vec<FileNumber>) -> FileNumber {
        let mut state = self.state.lock();
        let n = self.catalog.lock().new_file_number();
        state.pending_outputs.insert(n);
        allocated.push(n);
        n
    }

    fn write_flush(
        &self,
        imm: &Arc<Memtable>,
        log_head: LogPosition,
        allocated: &mut Vec<FileNumber>,
    ) -> Result<Flushed> {
        let mut flushed = Flushed::default();
        let mut edit = VersionEdit::default();
        let mut dropped_pointers = Vec::new();
        let tombstones = imm.range_tombstones();
        if imm.has_versions() {
            let (splits, clean_below) = {
                let current = self.catalog.lock().current();
                // The memtable's entries are newer than every durable range delete, and the
                // ones its own deletes cover are left out below.
                let own = tombstones.iter().map(|t| t.seq).max().unwrap_or_default();
                (current.partition_splits().to_vec(), current.newest_range_delete().max(own))
            };
            let covering = imm.range_fragments();
            let snapshots = self.snapshots.all();
            let stripe = |seq: SequenceNumber| snapshots.partition_point(|s| *s < seq);
            let mut next_number = || self.new_output_number(allocated);
            let mut sink =
                TableSink::new(&self.fs, &self.dir, self.table_options_for_build(), u64::MAX, &mut next_number)
                    .with_learning(Some(&self.learning))
                    .with_partitions(&splits)
                    .with_range_clean_below(clean_below);
            let mut it = imm.iter();
            it.seek_to_first()?;
            while it.valid() {
                let Some(parsed) = parse_internal_key(it.key()) else {
                    return Err(it.entry_origin().corruption("malformed internal key in the memtable"));
                };
                let pointer = entry_pointer(&it, parsed.kind)?;
                // Hidden from every reader by a range delete of this memtable: not written.
                let covered = covering.as_ref().and_then(|f| f.first_covering_above(parsed.user_key, parsed.sequence));
                if covered.is_some_and(|t| stripe(t) == stripe(parsed.sequence)) {
                    dropped_pointers.extend(pointer);
                } else {
                    sink.add(it.key(), it.value(), pointer)?;
                    if covered.is_some() {
                        sink.note_kept_covered();
                    }
                }
                it.next()?;
            }
            let (outputs, bytes) = sink.finish()?;
            Counters::add(&self.counters.flush_bytes_written, bytes);
            flushed.tables = outputs.iter().map(|meta| meta.number.0).collect();
            flushed.bytes = bytes;
            edit.new_files.extend(outputs.into_iter().map(|meta| (0, meta)));
        }
        flushed.range_deletes = tombstones.len() as u64;
        edit.range_tombstones_added = tombstones;
        // The table's pointers must not reach disk before the records they point to.
        self.log.sync()?;
        self.fs.sync_dir(&self.dir)?;
        edit.log_head = Some(log_head);
        edit.last_sequence = Some(SequenceNumber(self.last_sequence.load(Ordering::Acquire)));
        let mut garbage = imm.log_garbage();
        for p in dropped_pointers {
            *garbage.entry(p.segment).or_default() += u64::from(p.len);
        }
        edit.segment_garbage = garbage.into_iter().collect();
        let segments = self.log.segments();
        self.catalog.record_with(|set| {
            edit.added_segments = segments.iter().map(|s| s.id).filter(|id| set.is_unrecorded_segment(*id)).collect();
            edit
        })?;
        Ok(flushed)
    }

    /// Deletes files no live version needs, leaving alone outputs that may be in progress.
    pub(super) fn delete_obsolete_files(&self) {
        self.delete_unlisted_files(false);
    }

    /// Deletes tables no live version references and superseded MANIFESTs. While the index
    /// runs, tables numbered at or above the next file number may be outputs being created after
    /// this snapshot of the live set, so they are left alone; at open (`at_open`) nothing is in
    /// progress, and such a table is what a crash left of an unfinished flush or compaction.
    pub(super) fn delete_unlisted_files(&self, at_open: bool) {
        let (live, manifest, first_unknown) = {
            let state = self.state.lock();
            let mut catalog = self.catalog.lock();
            let mut live = catalog.live_files();
            live.extend(state.pending_outputs.iter().copied());
            let first_unknown = if at_open { u64::MAX } else { catalog.next_file_number() };
            (live, catalog.manifest_number(), first_unknown)
        };
        let Ok(names) = self.fs.list(&self.dir) else { return };
        for name in names {
            let obsolete = match parse_file_name(&name) {
                Some(FileKind::Table(n)) => {
                    let dead = n.0 < first_unknown && !live.contains(&n);
                    if dead {
                        self.table_cache.evict(n);
                    }
                    dead
                }
                Some(FileKind::Manifest(n)) => n < manifest,
                _ => false,
            };
            if obsolete {
                // Best effort: a file left behind is found again next time.
                let _ = self.fs.remove(&self.dir.join(&name));
            }
        }
    }
}

/// What a flush wrote, for the LOG.
#[derive(Debug, Default)]
struct Flushed {
    /// Numbers of the level-0 tables written.
    tables: Vec<u64>,
    /// Their bytes.
    bytes: u64,
    /// Range deletes the flush moved into the version.
    range_deletes: u64,
}
