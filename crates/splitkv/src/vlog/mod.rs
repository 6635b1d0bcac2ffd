//! The value log: the database's only log, holding every write (puts with inline or separated
//! values, and deletes) in append order, and the home of separated values (WiscKey).
//!
//! The log is a sequence of fixed-size segment files with increasing [`SegmentId`]s. Appends are
//! whole batches, encoded straight into a user-space buffer and handed to the OS when it fills (by
//! the log's flusher thread, while appends go on in another buffer) or on
//! [`ValueLog::flush_buffer`] / [`ValueLog::sync`]. A batch never spans segments: if it does
//! not fit in the active segment's remaining space the log rotates first (the flusher thread
//! fsyncs the old segment before the new one's header is written, see `writer`), and a batch
//! larger than a segment gets a segment of its own. Recovery
//! ([`ValueLog::replay`]) hands complete batches back to the caller and truncates a torn tail of
//! the last segment; anything else that fails validation is [`Error::Corruption`]. Byte layouts
//! and the torn-tail rule are specified in `docs/format/vlog.md`.
//!
//! A record may carry the pointer of its key's previous version ([`RecordRef::prev`], format
//! version 2): the persistent-hash index's version chain, which snapshot reads walk back with
//! [`ValueLog::read_record`]. The log stores, validates and returns it but never follows it; the
//! LSM mode never sets it, so its records cost no extra byte.
//!
//! Invariants: records are immutable once appended; a [`ValuePointer`] handed out stays readable
//! until its segment is removed; after a failed write or fsync the log is poisoned and refuses
//! appends and syncs (reads keep working).
//!
//! [`ValueLog::open_read_only`] opens a log that a writer in another process may be appending
//! to: the view ends at each file's length as of opening (at a torn tail, without cutting it),
//! and nothing is ever written.
//!
//! Thread-safety: [`ValueLog`] is `Send + Sync`. Appends, flushes and syncs serialize on one
//! mutex. Reads of flushed bytes take only a short read lock on the segment map and then `pread`
//! without any lock; only a read of bytes still in the write buffer (or on their way to the OS)
//! takes the writer mutex. Dropping the log without [`ValueLog::sync`] loses buffered appends,
//! exactly like a crash; a buffer already handed to the flusher thread is written first.

mod compact;
pub use compact::KeptRecords;
pub mod gc;
pub mod live_map;
mod moves;
pub mod prefetch;
mod record;
pub(crate) mod remap;
mod replay;
mod segment;
mod victim_scan;
mod writer;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;

pub use moves::{MoveClaims, MovePlanner, MoveTicket};
pub use record::{
    RecordKind, RecordRef, FLAG_BATCH_END, FLAG_HAS_PREV, FORMAT_VERSION, MIN_FORMAT_VERSION, PREV_POINTER_LEN,
    RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, SEGMENT_MAGIC,
};
pub use segment::{scan_segment, zeros_between, SegmentScan};

use record::{check_record, decode_record_header, encode_record, header_bytes, prev_precedes, RecordHeader};
use segment::{read_segment_header, Segment};
use writer::Writer;

use crate::error::{Error, Result};
use crate::filenames::{list_segments, segment_file};
use crate::fs::{AccessPattern, FileSystem};
use crate::types::{LogPosition, SegmentId, SequenceNumber, ValuePointer};

/// Sizing of the value log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlogOptions {
    /// Target size of a segment file; only a single oversized batch makes a segment larger.
    pub segment_size: u64,
    /// User-space buffer in front of the active segment; appends reach the OS when it fills.
    pub buffer_size: usize,
}

impl Default for VlogOptions {
    fn default() -> Self {
        VlogOptions { segment_size: 16 << 20, buffer_size: 1 << 20 }
    }
}

/// A record read back from the log, with the pointer that addresses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayedRecord {
    /// Sequence number of the write.
    pub seq: SequenceNumber,
    /// Put or delete.
    pub kind: RecordKind,
    /// User key.
    pub key: Vec<u8>,
    /// Value (empty for deletes).
    pub value: Vec<u8>,
    /// Where the record lives.
    pub pointer: ValuePointer,
    /// Where the previous version of the key lives, if the writer recorded it (the
    /// persistent-hash index's version chain; always `None` in the LSM mode).
    pub prev: Option<ValuePointer>,
}

/// One record read through a pointer and validated, from [`ValueLog::fetch`].
struct Fetched {
    /// The whole encoded record.
    bytes: Vec<u8>,
    header: RecordHeader,
    prev: Option<ValuePointer>,
    /// The segment it was read from, for error reports.
    segment: Arc<Segment>,
}

/// A segment and its current length (buffered bytes included for the active one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Segment id.
    pub id: SegmentId,
    /// Length in bytes, header included: the space the segment takes.
    pub len: u64,
    /// The offsets of pointers into the segment lie below this: `len`, except for a compacted
    /// segment, where it is the length the segment had before.
    pub extent: u64,
    /// Bytes of records: `len` without the segment header (and a compacted segment's offset
    /// map), what garbage is counted against.
    pub record_bytes: u64,
}

/// The value log of one database directory.
pub struct ValueLog {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    opts: VlogOptions,
    segments: RwLock<HashMap<SegmentId, Arc<Segment>>>,
    writer: Mutex<Writer>,
    /// The active segment's bytes not yet in its published length (in flight or buffered), as
    /// of the last release of `writer` after a change: with the segments' lengths, the log's
    /// size without taking `writer` (see [`ValueLog::logical_len`]).
    unflushed: AtomicU64,
    bytes_written: AtomicU64,
    /// Segments created by this process into which the index holds no pointer: every record
    /// the write path put there was applied inline or as a delete (see
    /// [`ValueLog::note_referenced`]). A segment found at open may hold anything and is never here.
    unreferenced: Mutex<HashSet<SegmentId>>,
    /// The segment last passed to [`ValueLog::note_referenced`], so that marking it again costs
    /// one atomic load instead of a lock.
    last_referenced: AtomicU64,
    /// Which segments compactions are moving values out of, and which GC is collecting.
    moves: MoveClaims,
    /// Opened with [`ValueLog::open_read_only`]: nothing is ever written, truncated or removed.
    read_only: bool,
}

// Reads check records read from disk: short or damaged input is an error, never a panic.
#[warn(clippy::indexing_slicing)]
impl ValueLog {
    /// Discovers the segment files in `dir` and opens them for reading.
    ///
    /// Creates no segment until the first append; new segment ids are greater than every
    /// existing one, so appends after a restart never touch a recovered segment. A segment whose
    /// header is damaged is corruption; a newest segment too short to hold its header is left
    /// for [`ValueLog::replay`] to remove (a crash during its creation).
    pub fn open(fs: Arc<dyn FileSystem>, dir: &Path, opts: VlogOptions) -> Result<ValueLog> {
        fs.create_dir_all(dir)?;
        Self::open_segments(fs, dir, opts, false)
    }

    /// Opens the segments in `dir` for reading only, for a database opened read-only beside a
    /// writer that may still be appending: every segment file is opened now (so one the writer
    /// deletes later stays readable through its handle) with the length it has now, and
    /// [`ValueLog::replay`] stops at a torn tail instead of truncating it. Appends, syncs,
    /// seals and removals fail with [`Error::ReadOnly`]; nothing is written.
    pub fn open_read_only(fs: Arc<dyn FileSystem>, dir: &Path, opts: VlogOptions) -> Result<ValueLog> {
        Self::open_segments(fs, dir, opts, true)
    }

    fn open_segments(fs: Arc<dyn FileSystem>, dir: &Path, opts: VlogOptions, read_only: bool) -> Result<ValueLog> {
        if opts.segment_size <= SEGMENT_HEADER_LEN + RECORD_HEADER_LEN as u64 {
            return Err(Error::InvalidArgument(format!(
                "value-log segment size {} cannot hold a record",
                opts.segment_size
            )));
        }
        let ids = list_segments(fs.as_ref(), dir)?;
        let mut segments = HashMap::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            let path = segment_file(dir, id);
            let file = if read_only { fs.open_may_shrink(&path)? } else { fs.open(&path)? };
            // Pointer reads are random; replay and GC scans switch to sequential while they walk.
            // Advised before the header is read: under the default advice that first read would
            // bring in a whole read-ahead window (megabytes) of a segment nobody asked for.
            file.advise(AccessPattern::Random);
            let len = file.len()?;
            // A header-less newest segment holds no record, so the version it would have had
            // never decides anything; replay removes it.
            let (mut version, mut remap) = (FORMAT_VERSION, None);
            if len >= SEGMENT_HEADER_LEN {
                let header;
                (header, remap) = read_segment_header(file.as_ref(), &path, Some(id), len)?;
                version = header.version;
            } else if i + 1 != ids.len() {
                return Err(Error::corruption(&path, 0, "segment is shorter than its header"));
            }
            let len = AtomicU64::new(len);
            let segment = Segment { id, path, file, version, len, active: AtomicBool::new(false), remap };
            segments.insert(id, Arc::new(segment));
        }
        let next_id = SegmentId(ids.last().map_or(1, |id| id.0 + 1));
        Ok(ValueLog {
            fs,
            dir: dir.to_path_buf(),
            opts,
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer::new(next_id, opts.buffer_size)),
            unflushed: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            unreferenced: Mutex::new(HashSet::new()),
            last_referenced: AtomicU64::new(0),
            moves: MoveClaims::default(),
            read_only,
        })
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Appends a batch atomically and returns one pointer per record.
    ///
    /// The records are consecutive in one segment and the last carries the batch-end flag, so
    /// recovery applies all of them or none. The bytes are buffered; they are durable only after
    /// [`ValueLog::sync`]. An empty batch appends nothing.
    ///
    /// A record's predecessor ([`RecordRef::prev`]) must address a record wholly before the
    /// batch: in an older segment, or ending at or before the current head of the same one.
    /// Readers reject any other predecessor as corruption (so a version chain always descends
    /// and a walk along it ends); here it is refused as an invalid argument before anything is
    /// written. A record's predecessor therefore cannot be another record of the same batch.
    pub fn append_batch(&self, records: &[RecordRef<'_>]) -> Result<SmallVec<[ValuePointer; 4]>> {
        self.append(records, None)
    }

    /// [`ValueLog::append_batch`]; with a compaction's `moves` ticket, the batch's segment also
    /// joins its claims and is noted as one the index points into, before the writer lock is
    /// released: GC takes only sealed segments, so it can never find the moved records
    /// unclaimed while their table is on its way.
    fn append(&self, records: &[RecordRef<'_>], moves: Option<MoveTicket>) -> Result<SmallVec<[ValuePointer; 4]>> {
        self.check_writable()?;
        let mut guard = self.lock_writer();
        let w = &mut *guard;
        w.check_usable()?;
        if records.is_empty() {
            return Ok(SmallVec::new());
        }
        // Rotation below only moves the head forward, so a predecessor before it now stays so.
        let head = w.head();
        let mut batch_len = 0u64;
        for rec in records {
            let len = rec.encoded_len().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "record of {} key bytes and {} value bytes exceeds the 4 GiB record limit",
                    rec.key.len(),
                    rec.value.len()
                ))
            })?;
            if let Some(prev) = rec.prev.filter(|p| !prev_precedes(p, head.segment, head.offset)) {
                return Err(Error::InvalidArgument(format!(
                    "predecessor pointer (segment {}, offset {}, len {}) does not address a record before \
                     the log head (segment {}, offset {})",
                    prev.segment, prev.offset, prev.len, head.segment, head.offset
                )));
            }
            batch_len += u64::from(len);
        }
        w.poison_on_error(|w| self.make_room(w, batch_len))?;
        let Some(active) = w.active.as_ref() else {
            return Err(Error::Poisoned("value log has no active segment".into()));
        };
        let segment = active.segment.id;
        let mut offset = w.active_len(active);
        w.buffer.reserve(usize::try_from(batch_len).unwrap_or(usize::MAX));
        let mut pointers = SmallVec::with_capacity(records.len());
        for (i, rec) in records.iter().enumerate() {
            let len = encode_record(&mut w.buffer, rec, i + 1 == records.len());
            pointers.push(ValuePointer { segment, offset, len });
            offset += u64::from(len);
        }
        if let Some(ticket) = moves {
            self.moves.note_target(ticket, segment);
            self.note_referenced(segment);
        }
        if w.buffer.len() >= self.opts.buffer_size {
            let (buffer_size, written) = (self.opts.buffer_size, &self.bytes_written);
            w.poison_on_error(|w| w.flush_in_background(buffer_size, written))?;
        }
        Ok(pointers)
    }

    /// Appends values a compaction moves out of older segments, as one batch of
    /// [`RecordKind::Moved`] records; their segment joins the compaction's claims (GC leaves it
    /// alone until the table pointing at them is published) and is noted as referenced, both
    /// before the writer lock is released. Durable only after [`ValueLog::sync`].
    pub fn append_moved(&self, ticket: MoveTicket, records: &[RecordRef<'_>]) -> Result<SmallVec<[ValuePointer; 4]>> {
        debug_assert!(records.iter().all(|r| r.kind == RecordKind::Moved && r.prev.is_none()));
        self.append(records, Some(ticket))
    }

    /// Claims segments for a compaction that moves values out of them (see [`MoveClaims`]):
    /// returns its ticket and the segments claimed, which stay readable until
    /// [`ValueLog::end_moves`].
    pub fn claim_for_moves(&self, ids: &[SegmentId]) -> (MoveTicket, Vec<SegmentId>) {
        self.moves.claim(ids, |id| self.segments.read().contains_key(&id))
    }

    /// Ends a compaction's claims.
    pub fn end_moves(&self, ticket: MoveTicket) {
        self.moves.end(ticket);
    }

    /// Of `ids`, the segments GC wants compactions to empty ([`MoveClaims::wanted_among`]).
    pub fn wanted_moves(&self, ids: &mut dyn Iterator<Item = SegmentId>) -> Vec<SegmentId> {
        self.moves.wanted_among(ids)
    }

    /// The claims of compactions that move values, for GC.
    pub fn moves(&self) -> &MoveClaims {
        &self.moves
    }

    /// Ensures an active segment with room for `batch_len` more bytes, rotating if needed.
    fn make_room(&self, w: &mut Writer, batch_len: u64) -> Result<()> {
        if let Some(active) = &w.active {
            let len = w.active_len(active);
            if len == SEGMENT_HEADER_LEN || len + batch_len <= self.opts.segment_size {
                return Ok(());
            }
        }
        let sealed = w.active.as_ref().map(|active| Arc::clone(&active.segment));
        let segment = w.rotate(&self.fs, &self.dir, self.opts.buffer_size, &self.bytes_written)?;
        if let Some(sealed) = sealed {
            self.reopen_sealed(&sealed);
        }
        self.unreferenced.lock().insert(segment.id);
        self.segments.write().insert(segment.id, segment);
        Ok(())
    }

    /// Records that the index may now hold a pointer into segment `id`. The write path calls it
    /// for every batch it applies as pointers, before applying it; GC asks
    /// [`ValueLog::may_be_referenced`] only of segments whose records were all applied.
    pub fn note_referenced(&self, id: SegmentId) {
        if self.last_referenced.swap(id.0, Ordering::AcqRel) != id.0 {
            self.unreferenced.lock().remove(&id);
        }
    }

    /// False if the index is known to hold no pointer into segment `id`: its records are all
    /// garbage once applied and flushed, and GC may release it without reading it.
    pub fn may_be_referenced(&self, id: SegmentId) -> bool {
        !self.unreferenced.lock().contains(&id)
    }

    /// Swaps a just-sealed segment's reader for a fresh one: the file will not change again, so
    /// the file system may serve reads from a memory map of its final length. Failure only
    /// keeps the old reader.
    fn reopen_sealed(&self, sealed: &Segment) {
        if let Ok(file) = self.fs.open(&sealed.path) {
            file.advise(AccessPattern::Random);
            let fresh = Segment {
                id: sealed.id,
                path: sealed.path.clone(),
                file,
                version: sealed.version,
                len: AtomicU64::new(sealed.readable_len()),
                active: AtomicBool::new(false),
                remap: None,
            };
            self.segments.write().insert(sealed.id, Arc::new(fresh));
        }
    }

    /// Hands buffered appends to the OS and makes the active segment durable.
    pub fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let mut w = self.lock_writer();
        w.check_usable()?;
        w.poison_on_error(|w| w.sync(self.opts.buffer_size, &self.bytes_written))
    }

    /// Makes the active segment durable and stops appending to it, so that everything written
    /// so far can be garbage-collected; the next append starts a new segment. Does nothing if
    /// the active segment holds no record.
    pub fn seal_active(&self) -> Result<()> {
        self.check_writable()?;
        let mut guard = self.lock_writer();
        let w = &mut *guard;
        w.check_usable()?;
        let Some(active) = w.active.as_ref() else { return Ok(()) };
        if w.active_len(active) == SEGMENT_HEADER_LEN {
            return Ok(());
        }
        let sealed = Arc::clone(&active.segment);
        let (buffer_size, written) = (self.opts.buffer_size, &self.bytes_written);
        w.poison_on_error(|w| w.seal(buffer_size, written))?;
        self.reopen_sealed(&sealed);
        Ok(())
    }

    /// Hands buffered appends to the OS without waiting for durability.
    pub fn flush_buffer(&self) -> Result<()> {
        let mut w = self.lock_writer();
        w.check_usable()?;
        w.poison_on_error(|w| w.flush(self.opts.buffer_size, &self.bytes_written))
    }

    /// Where the next record will start (buffered bytes counted); `(next id, 0)` before the
    /// first segment exists. If the next batch does not fit, it starts at the head of the next
    /// segment instead; replaying from this position still covers it.
    pub fn head(&self) -> LogPosition {
        self.writer.lock().head()
    }

    /// Reads the value at `ptr`, verifying that the record there is intact and belongs to `key`.
    pub fn read(&self, ptr: &ValuePointer, key: &[u8]) -> Result<Bytes> {
        let Fetched { bytes, header, segment, .. } = self.fetch(ptr)?;
        if bytes.get(header.key_range()) != Some(key) {
            return Err(Error::corruption(&segment.path, ptr.offset, "record key differs from the key looked up"));
        }
        // The value ends the record (`fetch` checked the length): the buffer keeps its one
        // allocation.
        Ok(prefetch::take_range(Bytes::from(bytes), header.value_range()))
    }

    /// Reads and validates the whole record at `ptr`, predecessor pointer included: the step a
    /// snapshot read takes along a key's version chain.
    pub fn read_record(&self, ptr: &ValuePointer) -> Result<ReplayedRecord> {
        let Fetched { bytes, header, prev, segment } = self.fetch(ptr)?;
        let (key, value) = header
            .key_and_value(&bytes)
            .ok_or_else(|| Error::corruption(&segment.path, ptr.offset, "record shorter than its header says"))?;
        Ok(ReplayedRecord {
            seq: header.seq,
            kind: header.kind,
            key: key.to_vec(),
            value: value.to_vec(),
            pointer: *ptr,
            prev,
        })
    }

    /// Reads the `ptr.len` bytes at `ptr` (from the file, or the write buffer if not yet
    /// flushed) and validates them as one record; returns them with the decoded header and
    /// predecessor pointer.
    fn fetch(&self, ptr: &ValuePointer) -> Result<Fetched> {
        let segment = self.segments.read().get(&ptr.segment).cloned();
        let Some(segment) = segment else {
            return Err(Error::corruption(
                segment_file(&self.dir, ptr.segment),
                ptr.offset,
                "pointer into a segment that is not live",
            ));
        };
        let corrupt = |reason: String| Error::corruption(&segment.path, ptr.offset, reason);
        let len = ptr.len as usize;
        if ptr.offset < SEGMENT_HEADER_LEN || len < RECORD_HEADER_LEN {
            return Err(corrupt(format!("pointer (offset {}, len {}) cannot address a record", ptr.offset, ptr.len)));
        }
        let Some(end) = ptr.offset.checked_add(u64::from(ptr.len)) else {
            return Err(corrupt(format!("pointer (offset {}, len {}) overflows", ptr.offset, ptr.len)));
        };
        // Whether the segment is active is read before its length: sealing publishes the final
        // length first, so a segment seen sealed has its final length. (Read the other way
        // round, a seal between the two reads makes a record just flushed look out of range.)
        let active = segment.is_active();
        let readable_len = segment.readable_len();
        let bytes = if let Some(remap) = &segment.remap {
            let at = remap
                .locate(ptr.offset, ptr.len)
                .ok_or_else(|| corrupt("pointer to a record the segment's compaction did not keep".into()))?;
            segment.file.read_vec(at, len)?
        } else if end <= readable_len {
            segment.file.read_vec(ptr.offset, len)?
        } else {
            let unflushed = if active { self.read_unflushed(&segment, ptr.offset, len)? } else { None };
            unflushed.ok_or_else(|| corrupt(format!("pointer ends at {end}, past the segment end {readable_len}")))?
        };
        let header = header_bytes(&bytes)
            .ok_or("short record")
            .and_then(|h| decode_record_header(h, segment.version))
            .map_err(|reason| corrupt(reason.into()))?;
        if header.record_len() != u64::from(ptr.len) {
            return Err(corrupt(format!(
                "pointer length {} differs from the record length {}",
                ptr.len,
                header.record_len()
            )));
        }
        let prev = check_record(&header, &bytes, ptr.segment, ptr.offset).map_err(|reason| corrupt(reason.into()))?;
        Ok(Fetched { bytes, header, prev, segment })
    }

    /// The `len` bytes at `offset` of the active segment, from the write buffer or, if a flush
    /// or rotation got there first, from the file; `None` if the range is not in the segment.
    /// The range is checked before anything is allocated.
    fn read_unflushed(&self, segment: &Segment, offset: u64, len: usize) -> Result<Option<Vec<u8>>> {
        let end = offset + len as u64;
        {
            let w = self.writer.lock();
            if let Some(active) = w.active.as_ref().filter(|a| a.segment.id == segment.id) {
                if end > active.flushed {
                    return Ok(w.unflushed(offset, len).map(<[u8]>::to_vec));
                }
            }
        }
        if end > segment.readable_len() {
            return Ok(None);
        }
        segment.file.read_vec(offset, len).map(Some)
    }

    /// The writer, for a change to the active segment: [`ValueLog::unflushed`] is brought up to
    /// date as the lock is released.
    fn lock_writer(&self) -> WriterGuard<'_> {
        WriterGuard { writer: self.writer.lock(), unflushed: &self.unflushed }
    }

    /// Bytes in the log's segments, buffered appends included, as [`ValueLog::segments`] adds
    /// them up but without the writer's lock: a writer asks before every write while the log is
    /// over its space limit, and taking the lock there made it wait for the other writers'
    /// appends. The buffered part is as of the last append, so a concurrent one may be missed.
    pub fn logical_len(&self) -> u64 {
        let published: u64 = self.segments.read().values().map(|s| s.readable_len()).sum();
        published + self.unflushed.load(Ordering::Acquire)
    }

    /// Every live segment in id order.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let w = self.writer.lock();
        let active = w.active.as_ref().map(|a| (a.segment.id, w.active_len(a)));
        let mut infos: Vec<SegmentInfo> = self
            .segments
            .read()
            .values()
            .map(|s| match active {
                Some((id, len)) if id == s.id => {
                    SegmentInfo { id, len, extent: len, record_bytes: len.saturating_sub(SEGMENT_HEADER_LEN) }
                }
                _ => {
                    SegmentInfo { id: s.id, len: s.readable_len(), extent: s.extent(), record_bytes: s.record_bytes() }
                }
            })
            .collect();
        infos.sort_unstable_by_key(|s| s.id);
        infos
    }

    /// Deletes a segment that is no longer appended to and forgets it; later reads through
    /// pointers into it are corruption.
    pub fn remove_segment(&self, id: SegmentId) -> Result<()> {
        self.check_writable()?;
        let segment = self.segments.read().get(&id).cloned();
        let Some(segment) = segment else {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is not live")));
        };
        // A sealed segment never becomes active again, so this check cannot go stale.
        if segment.is_active() {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is being appended to")));
        }
        // GC takes the segment itself, and waits, while a compaction reads the segment or
        // appends moved records to it.
        if !self.moves.begin_collecting(id) {
            return Err(Error::InvalidArgument(format!("value-log segment {id} is being read by a compaction")));
        }
        self.fs.remove(&segment.path)?;
        self.segments.write().remove(&id);
        self.unreferenced.lock().remove(&id);
        self.moves.forget(id);
        self.fs.sync_dir(&self.dir)
    }

    /// Forgets segment `id` without touching its file: a read-only view drops a segment its
    /// catalog no longer lists (GC released it; the writer is deleting the file).
    pub fn forget_segment(&self, id: SegmentId) {
        self.segments.write().remove(&id);
    }

    /// Makes every segment created from now on have an id of at least `id`. The caller passes
    /// ids it knows were used (the recovery log head, segments named by the MANIFEST): once GC
    /// has deleted the newest segment files, the directory alone would let an id be reused,
    /// and a reused id below the log head would never be replayed.
    pub fn reserve_ids_below(&self, id: SegmentId) {
        let mut writer = self.writer.lock();
        if writer.active.is_none() && writer.next_id < id {
            writer.next_id = id;
        }
    }

    /// Bytes written to segment files since open (headers included), for write amplification.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    /// The directory holding the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The writer's lock, held for a change to the active segment; publishes the bytes not yet
/// flushed to [`ValueLog::unflushed`] when released.
struct WriterGuard<'a> {
    writer: parking_lot::MutexGuard<'a, Writer>,
    unflushed: &'a AtomicU64,
}

impl std::ops::Deref for WriterGuard<'_> {
    type Target = Writer;

    fn deref(&self) -> &Writer {
        &self.writer
    }
}

impl std::ops::DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut Writer {
        &mut self.writer
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        self.unflushed.store(self.writer.unflushed_len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
