//! Flushing the frozen memtable into a level-0 table, and deleting files no version needs.
//!
//! Durability order of a flush: write and sync the table, sync the value log through the
//! [`crate::index::LogLink`] (the table's pointers must not outlive their records), sync the
//! directory, then record the table, the new log head and the garbage the flush makes (inline
//! values and deletes whose log records only served as write-ahead log) in one catalog edit.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Shared;
use crate::compaction::exec::TableSink;
use crate::error::Result;
use crate::filenames::{parse_file_name, FileKind};
use crate::iter::{entry_pointer, InternalIterator};
use crate::memtable::Memtable;
use crate::stats::Counters;
use crate::types::{parse_internal_key, FileNumber, LogPosition, SequenceNumber};
use crate::version::VersionEdit;

impl Shared {
    /// Flushes the frozen memtable if there is one and no other flush is running.
    pub(super) fn flush_frozen_memtable(&self) {
        let (imm, log_head, number) = {
            let mut state = self.state.lock();
            let Some(imm) = state.imm.clone() else { return };
            if state.flushing || state.bg_error.is_some() {
                return;
            }
            state.flushing = true;
            let number = self.catalog.lock().new_file_number();
            state.pending_outputs.insert(number);
            (imm, state.mem.log_start(), number)
        };
        let result = self.write_flush(&imm, log_head, number);
        let mut state = self.state.lock();
        state.flushing = false;
        state.pending_outputs.remove(&number);
        match result {
            Ok(()) => {
                state.imm = None;
                self.install_super_version(&state);
                Counters::add(&self.counters.flushes, 1);
            }
            Err(e) => self.set_bg_error(&mut state, &e),
        }
        self.done_cv.notify_all();
        self.work_cv.notify_all();
        drop(state);
        self.delete_obsolete_files();
    }

    fn write_flush(&self, imm: &Arc<Memtable>, log_head: LogPosition, number: FileNumber) -> Result<()> {
        let mut edit = VersionEdit::default();
        if !imm.is_empty() {
            let mut numbers = Some(number);
            let mut next_number = || numbers.take().expect("a flush writes exactly one table");
            let mut sink =
                TableSink::new(&self.fs, &self.dir, self.table_options_for_build(), u64::MAX, &mut next_number)
                    .with_learning(Some(&self.learning));
            let mut it = imm.iter();
            it.seek_to_first()?;
            while it.valid() {
                let pointer = match parse_internal_key(it.key()) {
                    Some(parsed) => entry_pointer(&it, parsed.kind)?,
                    None => None,
                };
                sink.add(it.key(), it.value(), pointer)?;
                it.next()?;
            }
            let (outputs, bytes) = sink.finish()?;
            Counters::add(&self.counters.flush_bytes_written, bytes);
            edit.new_files.extend(outputs.into_iter().map(|meta| (0, meta)));
        }
        // The table's pointers must not reach disk before the records they point to.
        self.log.sync()?;
        self.fs.sync_dir(&self.dir)?;
        edit.log_head = Some(log_head);
        edit.last_sequence = Some(SequenceNumber(self.last_sequence.load(Ordering::Acquire)));
        edit.segment_garbage = imm.log_garbage().into_iter().collect();
        let segments = self.log.segments();
        self.catalog.record_with(|set| {
            edit.added_segments = segments.iter().map(|s| s.id).filter(|id| set.is_unrecorded_segment(*id)).collect();
            edit
        })
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
