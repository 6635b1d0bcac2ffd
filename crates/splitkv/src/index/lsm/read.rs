//! Reads of the LSM index: point lookups (memtables, then the tables that may hold the key,
//! newest first) and the merged cursor over every source.
//!
//! Readers take a [`super::SuperVersion`] (memtable, frozen memtable, version) under a read lock
//! and then read without locks; everything they reach stays alive through the `Arc`s, and files
//! of a version someone still holds are never deleted.
//!
//! Range deletes: a point lookup first asks every source's fragments for the newest delete over
//! the key that the reader sees (memtables and the version), then ignores a found version older
//! than it. A cursor is wrapped in a [`CoveredFilter`] when any delete exists.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{Shared, SuperVersion};
use crate::compaction::picker;
use crate::error::Result;
use crate::filenames::table_file;
use crate::index::{IndexValue, ReadAt};
use crate::iter::covered::CoveredFilter;
use crate::iter::level::{LevelFile, LevelIterator};
use crate::iter::merge::MergingIterator;
use crate::iter::{EntryOrigin, InternalIterator, KeepAlive};
use crate::memtable::Lookup;
use crate::range_del::Fragments;
use crate::sstable::TableIterator;
use crate::types::{parse_internal_key, seek_key, FileNumber, SequenceNumber, ValueKind, ValuePointer};
use crate::version::Version;

/// Turns a stored (kind, bytes) pair into what the index returns; a pointer that does not
/// decode is corruption of where it was read.
fn decode_stored(kind: ValueKind, value: Bytes, origin: impl FnOnce() -> EntryOrigin) -> Result<Option<IndexValue>> {
    match kind {
        ValueKind::Deletion => Ok(None),
        ValueKind::Inline => Ok(Some(IndexValue::Inline(value))),
        ValueKind::Pointer => match ValuePointer::decode(&value) {
            Some(ptr) => Ok(Some(IndexValue::Pointer(ptr))),
            None => Err(origin().corruption("malformed value pointer")),
        },
    }
}

/// Whom a point read serves. Only users' reads count towards read-triggered L0 compaction: it
/// exists to make their reads cheaper. Value-log GC looks up the keys of the records it scans,
/// thousands per segment, and counted, those lookups started an L0 compaction (a rewrite of all
/// of L1 at a million keys) for nearly every table a 1 KiB overwrite flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadFor {
    User,
    Background,
}

impl Shared {
    /// The newest value of `user_key` visible at `at`.
    pub(super) fn get(
        &self,
        user_key: &[u8],
        at: ReadAt<'_>,
        fill_cache: bool,
        read_for: ReadFor,
    ) -> Result<Option<IndexValue>> {
        // The view first, then the sequence number (`ReadAt::Latest`): the view keeps every
        // version it holds readable whatever flushes and compactions do meanwhile, and what it
        // lacks is newer than it.
        let sv = self.current();
        let seq = at.resolve();
        // Versions below the newest range delete over the key are gone for this reader.
        let mut hidden_below = sv.version.range_fragments().covering(user_key, seq);
        for mem in sv.memtables() {
            if let Some(fragments) = mem.range_fragments() {
                hidden_below = hidden_below.max(fragments.covering(user_key, seq));
            }
        }
        for mem in sv.memtables() {
            match mem.get(user_key, seq) {
                Lookup::Found(_, _, found) if found < hidden_below => return Ok(None),
                Lookup::Found(kind, value, _) => return decode_stored(kind, value, || EntryOrigin::Memtable),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        self.get_from_tables(&sv.version, user_key, seq, hidden_below, fill_cache, read_for)
    }

    fn get_from_tables(
        &self,
        version: &Version,
        user_key: &[u8],
        seq: SequenceNumber,
        hidden_below: SequenceNumber,
        fill_cache: bool,
        read_for: ReadFor,
    ) -> Result<Option<IndexValue>> {
        let lookup = seek_key(user_key, seq);
        let mut found = None;
        let mut error = None;
        let mut l0_misses = 0;
        version.for_each_candidate(&lookup, |level, file| {
            self.counters.tables_probed.add(1);
            let hit = self
                .table_cache
                .get_table(file.number, file.file_size)
                .and_then(|table| table.get(&lookup, fill_cache));
            match hit {
                Ok(Some((ikey, value))) => {
                    found = Some((Arc::clone(file), ikey, value));
                    false
                }
                Ok(None) => {
                    l0_misses += u64::from(level == 0);
                    true
                }
                Err(e) => {
                    error = Some(e);
                    false
                }
            }
        });
        if l0_misses > 0 && read_for == ReadFor::User {
            self.note_l0_read_misses(version, l0_misses);
        }
        if let Some(e) = error {
            return Err(e);
        }
        let Some((file, ikey, value)) = found else { return Ok(None) };
        // Where the entry was read is asked only on the error paths.
        let origin = || match self.table_cache.get_table(file.number, file.file_size) {
            Ok(table) => table.entry_origin(&lookup),
            Err(_) => EntryOrigin::Table { file: table_file(&self.dir, file.number), block_offset: 0 },
        };
        let Some(parsed) = parse_internal_key(&ikey) else {
            return Err(origin().corruption("malformed internal key in table"));
        };
        if parsed.sequence < hidden_below {
            return Ok(None);
        }
        decode_stored(parsed.kind, value, origin)
    }

    /// Counts L0 files a point read consulted in vain, and wakes the compaction scheduler once
    /// the count has reached L0's allowance: L0 is then due (LevelDB's seek-triggered
    /// compaction). The allowance, a walk over the L0 files, is looked at only when the count
    /// passes a multiple of 64, not on every read; an allowance that changed under the count is
    /// then still caught at the next multiple.
    fn note_l0_read_misses(&self, version: &Version, misses: u64) {
        const LOOK_EVERY: u64 = 64;
        let before = self.l0_read_misses.fetch_add(misses, Ordering::Relaxed);
        let after = before + misses;
        if after / LOOK_EVERY != before / LOOK_EVERY && after >= picker::l0_read_allowance(version) {
            // Under the state lock, so the wake-up cannot fall between the scheduler's look
            // and its wait.
            let _state = self.state.lock();
            self.work_cv.notify_all();
        }
    }

    /// The fragmented range deletes of every source of `sv` (memtables, then the version);
    /// empty if there are none. Each source keeps its own fragments, so a cursor costs no
    /// rebuild.
    fn range_deletes_of(sv: &SuperVersion) -> Vec<Arc<Fragments>> {
        let mut sets: Vec<Arc<Fragments>> = sv.memtables().filter_map(|m| m.range_fragments()).collect();
        if !sv.version.range_fragments().is_empty() {
            sets.push(Arc::clone(sv.version.range_fragments()));
        }
        sets
    }

    /// A merged cursor over every entry of the current super version, which it keeps alive,
    /// without the entries range deletes hide from a reader at `seq` (every entry, for `None`).
    pub(super) fn iter(&self, seq: Option<SequenceNumber>, fill_cache: bool) -> Result<Box<dyn InternalIterator>> {
        let sv: Arc<SuperVersion> = self.super_version();
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(sv.mem.iter())];
        if let Some(imm) = &sv.imm {
            children.push(Box::new(imm.iter()));
        }
        for file in sv.version.files(0) {
            let table = self.table_cache.get_table(file.number, file.file_size)?;
            children.push(Box::new(table.iter(fill_cache)));
        }
        for level in 1..sv.version.num_levels() {
            let level_files = Arc::clone(&sv.level_files[level]);
            if level_files.is_empty() {
                continue;
            }
            let cache = Arc::clone(&self.table_cache);
            let open = Arc::new(move |f: &LevelFile| -> Result<TableIterator> {
                let table = cache.get_table(FileNumber(f.id), f.size)?;
                Ok(table.iter(fill_cache))
            });
            children.push(Box::new(LevelIterator::new(level_files, open)));
        }
        let merged = MergingIterator::new(children);
        // The iterator keeps its super version, and so every file it may still open, alive.
        let deletes = seq.map(|seq| (seq, Self::range_deletes_of(&sv))).filter(|(_, sets)| !sets.is_empty());
        Ok(match deletes {
            Some((seq, sets)) => Box::new(KeepAlive { inner: CoveredFilter::new(merged, sets, seq), keep: sv }),
            None => Box::new(KeepAlive { inner: merged, keep: sv }),
        })
    }
}
