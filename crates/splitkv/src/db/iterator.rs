//! [`DbIterator`], the cursor over a database, and [`RangeIter`], its owning `Iterator` form.
//!
//! A cursor reads each value when it lands on its key, from the index cursor directly or, once
//! it moves sequentially, from the read-ahead windows of `read_ahead`.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::read_ahead::{
    walk, BufferedValue, Cursor, Movement, WalkPlan, Walked, Window, FIRST_WINDOW_ENTRIES, MAX_WINDOW_ENTRIES,
    PREFETCH_AFTER_MOVES, PREFETCH_AFTER_MOVES_CACHED, RESIDENCY_SAMPLE,
};
use super::DbInner;
use crate::error::{Error, Result};
use crate::iter::EntryOrigin;
use crate::options::ReadOptions;
use crate::snapshot::Snapshot;
use crate::stats::Counters;
use crate::types::{EscapedBytes, ValueKind, ValuePointer};
use crate::vlog::prefetch::Task;

/// A cursor over the database in key order, both directions.
///
/// Unpositioned when created; movement returns errors (I/O, corruption) instead of hiding them,
/// and after an error the cursor must be re-seeked.
///
/// Values: by default the value is loaded when the cursor lands on its key, so [`value`] is
/// infallible. With [`ReadOptions::keys_only`] nothing is read from the value log: [`value`] is
/// empty and [`read_value`] reads the current value on demand (the lazy path).
///
/// Read-ahead ([`ReadOptions::prefetch`], on by default): after two steps in one direction (128
/// while the database's values were last seen in memory) the cursor walks the index ahead in
/// windows of growing size, starts loading the windows' values that are not in memory and reads
/// those on the database's prefetch threads. Halfway through a window the next one is walked on
/// a prefetch thread while the rest of the current one is consumed; a window with no separated
/// values is not followed by another until the cursor reaches one. Results are exactly those of a
/// cursor without read-ahead; a seek or a change of direction drops the read-ahead.
///
/// [`value`]: DbIterator::value
/// [`read_value`]: DbIterator::read_value
pub struct DbIterator {
    db: Arc<DbInner>,
    /// The index cursor; `None` only while a read-ahead walk holds it (`next_walk` is set).
    cursor: Option<Cursor>,
    /// The current value (empty for separated values under `keys_only`), unless
    /// `value_in_cursor`.
    value: Bytes,
    /// The current value is the home cursor's inline value, read in place: stepping over small
    /// values copies and allocates nothing (outside read-ahead, whose windows hold them).
    value_in_cursor: bool,
    /// Read-ahead mode: the entries being visited. `None`: the cursor is on the current entry.
    window: Option<Window>,
    /// The walk producing the window after the current one, started halfway through it.
    next_walk: Option<Arc<Task<Walked>>>,
    keys_only: bool,
    prefetch: bool,
    /// The last window held no separated values: read-ahead stays off until the cursor lands on
    /// one (see [`DbIterator::start_next_walk_if_due`]).
    inline_only: bool,
    fill_cache: bool,
    last_move: Option<Movement>,
    moves_in_a_row: u32,
    next_window_entries: usize,
    /// Entries in the windows walked since read-ahead last started.
    scanned: usize,
    /// Calls of `next`; added to the database's count when the cursor is dropped.
    nexts: u64,
    _snapshot: Option<Snapshot>,
    /// A keyspace's prefix: stored keys carry it, keys shown and sought do not.
    key_prefix: Vec<u8>,
}

/// `next` is timed on the first call of each cursor and then once every this many calls: a
/// clock pair costs about as much as a step through memory, so timing every step would slow
/// scans by a quarter (measured in `docs/results/observability.md`).
const NEXT_SAMPLE_EVERY: u64 = 32;

impl DbIterator {
    pub(super) fn new(db: Arc<DbInner>, cursor: Cursor, opts: ReadOptions) -> Self {
        DbIterator {
            db,
            cursor: Some(cursor),
            value: Bytes::new(),
            value_in_cursor: false,
            window: None,
            next_walk: None,
            keys_only: opts.keys_only,
            prefetch: opts.prefetch,
            inline_only: false,
            fill_cache: opts.fill_cache,
            last_move: None,
            moves_in_a_row: 0,
            next_window_entries: FIRST_WINDOW_ENTRIES,
            scanned: 0,
            nexts: 0,
            _snapshot: opts.snapshot,
            key_prefix: Vec::new(),
        }
    }

    /// The cursor of a keyspace whose stored keys all begin with `prefix` (its bounds must
    /// keep it inside them).
    pub(super) fn with_key_prefix(mut self, prefix: Vec<u8>) -> Self {
        self.key_prefix = prefix;
        self
    }

    /// True if positioned on an entry.
    pub fn valid(&self) -> bool {
        self.window.is_some() || self.cursor.as_ref().is_some_and(|c| c.valid())
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.reposition(|c| c.seek_to_first())
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.reposition(|c| c.seek_to_last())
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        if self.key_prefix.is_empty() {
            let key = key.as_ref();
            return self.reposition(|c| c.seek(key));
        }
        let stored = [self.key_prefix.as_slice(), key.as_ref()].concat();
        self.reposition(|c| c.seek(&stored))
    }

    /// Moves to the next key.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.nexts += 1;
        if self.nexts % NEXT_SAMPLE_EVERY != 1 || !self.db.counters.latency.enabled {
            return self.step(Movement::Forward);
        }
        let start = quanta::Instant::now();
        let moved = self.step(Movement::Forward);
        self.db.counters.latency.iter_next.record_since(start);
        moved
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        self.step(Movement::Backward)
    }

    /// The current key. Only meaningful while `valid()`.
    pub fn key(&self) -> &[u8] {
        let stored = self.stored_key();
        stored.get(self.key_prefix.len()..).unwrap_or(stored)
    }

    /// The current key as stored (with a keyspace's prefix).
    fn stored_key(&self) -> &[u8] {
        match &self.window {
            Some(w) => w.key(w.pos),
            // Not positioned (`valid()` is false): no key.
            None => self.cursor.as_ref().map_or(&[], |c| c.key()),
        }
    }

    /// The current value; empty for every entry under [`ReadOptions::keys_only`].
    pub fn value(&self) -> &[u8] {
        match &self.cursor {
            Some(cursor) if self.value_in_cursor => cursor.raw_value(),
            _ => &self.value,
        }
    }

    /// The current value, read from the value log now if the cursor did not load it
    /// ([`ReadOptions::keys_only`]); otherwise a cheap handle to the loaded value. A value read
    /// ahead shares its buffer with its neighbours in the log (up to 64 KiB of values found in
    /// memory, or a read of up to 1 MiB), which the handle keeps alive: copy values kept long.
    pub fn read_value(&mut self) -> Result<Bytes> {
        if !self.valid() {
            return Err(Error::InvalidArgument("the iterator is not positioned on an entry".into()));
        }
        if !self.keys_only {
            return Ok(self.value_bytes());
        }
        let pointer = match &self.window {
            Some(w) => match &w.entries[w.pos].value {
                BufferedValue::Inline(range) => return Ok(w.inline_values.slice(range.clone())),
                BufferedValue::Separated(request) => Some(w.requests[*request].pointer),
                BufferedValue::Malformed(origin) => return Err(self.malformed_pointer(origin.clone())),
            },
            None => {
                let cursor = self.home_cursor()?;
                if cursor.value_kind() != ValueKind::Pointer {
                    return Ok(Bytes::copy_from_slice(cursor.raw_value()));
                }
                ValuePointer::decode(cursor.raw_value())
            }
        };
        let pointer = match pointer {
            Some(pointer) => pointer,
            None => {
                let origin = self.home_cursor_mut()?.entry_origin()?;
                return Err(self.malformed_pointer(origin));
            }
        };
        self.db.read_pointer(&pointer, self.stored_key())
    }

    /// The index cursor, which is home whenever no read-ahead walk holds it (always, outside
    /// read-ahead); an error rather than a panic if that ever failed to hold.
    fn home_cursor(&self) -> Result<&Cursor> {
        self.cursor.as_ref().ok_or_else(lost_cursor)
    }

    fn home_cursor_mut(&mut self) -> Result<&mut Cursor> {
        self.cursor.as_mut().ok_or_else(lost_cursor)
    }

    fn malformed_pointer(&self, origin: EntryOrigin) -> Error {
        origin.corruption(format!("malformed value pointer for key {}", EscapedBytes(self.stored_key())))
    }

    /// Ends read-ahead: takes the cursor back from a walk in progress and drops the windows.
    fn stop_read_ahead(&mut self) {
        self.window = None;
        if let Some(walk) = self.next_walk.take() {
            // A walk nobody started is dropped with its window; otherwise wait for the cursor.
            let walked = walk.wait();
            self.cursor = Some(walked.cursor);
        }
    }

    fn reposition(&mut self, seek: impl FnOnce(&mut Cursor) -> Result<()>) -> Result<()> {
        self.stop_read_ahead();
        self.last_move = None;
        self.moves_in_a_row = 0;
        self.next_window_entries = FIRST_WINDOW_ENTRIES;
        self.scanned = 0;
        self.inline_only = false;
        self.set_value(Bytes::new());
        seek(self.home_cursor_mut()?)?;
        self.load_value()
    }

    fn step(&mut self, movement: Movement) -> Result<()> {
        if let Some(window) = &self.window {
            if window.movement == movement {
                return self.advance_window();
            }
            // Changing direction: put the cursor back on the current key and step from there.
            let key = self.stored_key().to_vec();
            self.stop_read_ahead();
            self.set_value(Bytes::new());
            self.home_cursor_mut()?.seek(&key)?;
        }
        if self.last_move == Some(movement) {
            self.moves_in_a_row = self.moves_in_a_row.saturating_add(1);
        } else {
            self.last_move = Some(movement);
            self.moves_in_a_row = 1;
        }
        self.set_value(Bytes::new());
        let cursor = self.home_cursor_mut()?;
        match movement {
            Movement::Forward => cursor.next()?,
            Movement::Backward => cursor.prev()?,
        }
        let cursor = self.home_cursor()?;
        let valid = cursor.valid();
        if self.inline_only && valid && cursor.value_kind() == ValueKind::Pointer {
            self.inline_only = false;
        }
        if self.prefetch && !self.inline_only && valid {
            let cached = self.db.scan_values_cached.load(Ordering::Relaxed);
            let start_after = if cached { PREFETCH_AFTER_MOVES_CACHED } else { PREFETCH_AFTER_MOVES };
            if self.moves_in_a_row >= start_after {
                return self.start_read_ahead(movement);
            }
            if cached && self.moves_in_a_row.is_multiple_of(RESIDENCY_SAMPLE as u32) {
                self.sample_residency();
            }
        }
        self.load_value()
    }

    /// Checks whether the current value is in memory; if not, read-ahead starts early again.
    fn sample_residency(&self) {
        let Some(cursor) = &self.cursor else { return };
        if cursor.value_kind() != ValueKind::Pointer || self.keys_only {
            return;
        }
        if let Some(pointer) = ValuePointer::decode(cursor.raw_value()) {
            if !self.db.vlog.will_need(&pointer, 0) {
                self.db.scan_values_cached.store(false, Ordering::Relaxed);
            }
        }
    }

    fn walk_plan(&mut self, movement: Movement) -> WalkPlan {
        let max_entries = self.next_window_entries;
        self.next_window_entries = (max_entries * 2).min(MAX_WINDOW_ENTRIES);
        let scanned = self.scanned;
        self.scanned += max_entries;
        WalkPlan {
            movement,
            max_entries,
            keys_only: self.keys_only,
            bulk: !self.fill_cache || scanned >= MAX_WINDOW_ENTRIES,
            values_cached: Arc::clone(&self.db.scan_values_cached),
            readaround_feedback: Arc::clone(&self.db.scan_readaround),
            read_ahead_bytes: Arc::clone(&self.db.read_ahead_bytes),
            scanned,
            vlog: Arc::clone(&self.db.vlog),
            pool: Arc::clone(&self.db.prefetch),
        }
    }

    /// Switches to read-ahead with the cursor's current entry as the first of the window.
    fn start_read_ahead(&mut self, movement: Movement) -> Result<()> {
        let plan = self.walk_plan(movement);
        let Some(cursor) = self.cursor.take() else { return Err(lost_cursor()) };
        let walked = walk(cursor, true, &plan);
        self.install(walked)
    }

    /// Makes a walk's window current, starts the walk after it, and lands on its first entry.
    fn install(&mut self, walked: Walked) -> Result<()> {
        let Walked { cursor, mut window } = walked;
        if window.entries.is_empty() {
            self.cursor = Some(cursor);
            return window.error.take().map_or(Ok(()), Err);
        }
        self.cursor = Some(cursor);
        self.window = Some(window);
        self.land()
    }

    /// Starts walking the next window once half of the current one is consumed: early enough to
    /// overlap with the rest of it, late enough that a short scan does not pay for a window it
    /// never reaches. A long scan that waits on the device starts it at once instead, so the
    /// next window's reads are in flight while this one's complete (with the start at half, the
    /// cursor was measured waiting for most of its reads under a memory cap).
    ///
    /// A window without separated values has nothing to read: walking ahead then only copies
    /// keys and values into the window on another thread, which costs more than stepping the
    /// cursor in place (1.4x slower at 100 B values in memory, `docs/results/baseline.md`). So
    /// no next window is walked; when this one is consumed the cursor steps on its own, and
    /// read-ahead resumes once it lands on a separated value.
    fn start_next_walk_if_due(&mut self) {
        let Some(window) = &self.window else { return };
        if window.requests.is_empty() && !window.entries.is_empty() {
            self.inline_only = true;
            return;
        }
        let device_bound = !window.reads.is_empty() && self.scanned >= MAX_WINDOW_ENTRIES;
        let half_consumed = window.pos * 2 + 1 >= window.entries.len();
        if self.next_walk.is_some() || window.is_last() || !(device_bound || half_consumed) {
            return;
        }
        let plan = self.walk_plan(window.movement);
        if let Some(cursor) = self.cursor.take() {
            self.next_walk = Some(self.db.prefetch.submit(move || walk(cursor, false, &plan)));
        }
    }

    fn advance_window(&mut self) -> Result<()> {
        if self.window.is_none() {
            return Ok(());
        }
        self.set_value(Bytes::new());
        let Some(window) = self.window.as_mut() else { return Ok(()) };
        if window.pos + 1 < window.entries.len() {
            window.pos += 1;
            return self.land();
        }
        let (movement, last) = (window.movement, window.is_last());
        let error = window.error.take();
        self.window = None;
        match self.next_walk.take() {
            Some(walk) => self.install(walk.wait()),
            // An inline-only window ended: the cursor is home on its last entry; step from there.
            None if !last && self.inline_only => self.step(movement),
            // The last window: the cursor is home and invalid (exhausted or failed).
            None => error.map_or(Ok(()), Err),
        }
    }

    /// Loads the value of the window entry the cursor is on.
    fn land(&mut self) -> Result<()> {
        self.start_next_walk_if_due();
        let Some(window) = self.window.as_mut().filter(|_| !self.keys_only) else { return Ok(()) };
        let entry = &window.entries[window.pos];
        let request = match &entry.value {
            BufferedValue::Inline(range) => {
                let value = window.inline_values.slice(range.clone());
                self.set_value(value);
                return Ok(());
            }
            BufferedValue::Separated(request) => *request,
            BufferedValue::Malformed(origin) => {
                let origin = origin.clone();
                return Err(self.malformed_pointer(origin));
            }
        };
        let read_ahead = window.take_value(request, &self.db.vlog);
        self.db.counters.vlog_reads.add(1);
        let value = match read_ahead {
            Some(value) => value,
            // The read ahead failed: a plain read gives the value or the real error.
            None => {
                let pointer = window.requests[request].pointer;
                self.db.vlog.read(&pointer, window.key(window.pos))?
            }
        };
        self.set_value(value);
        Ok(())
    }

    /// Loads the value of the entry the (home) cursor is on.
    fn load_value(&mut self) -> Result<()> {
        let cursor = self.home_cursor()?;
        if !cursor.valid() || self.keys_only {
            self.set_value(Bytes::new());
            return Ok(());
        }
        let decoded = (cursor.value_kind() == ValueKind::Pointer).then(|| ValuePointer::decode(cursor.raw_value()));
        let value = match decoded {
            Some(Some(ptr)) => self.db.read_pointer(&ptr, cursor.key())?,
            Some(None) => {
                let origin = self.home_cursor_mut()?.entry_origin()?;
                return Err(self.malformed_pointer(origin));
            }
            None => {
                self.set_value(Bytes::new());
                self.value_in_cursor = true;
                return Ok(());
            }
        };
        self.set_value(value);
        Ok(())
    }

    /// The value-log pointer of the current entry if its value is separated (the key-order
    /// rewrite names the record each value replaces). Landing already refused a malformed one.
    pub(super) fn value_pointer(&self) -> Option<ValuePointer> {
        match &self.window {
            Some(window) => match &window.entries[window.pos].value {
                BufferedValue::Separated(request) => Some(window.requests[*request].pointer),
                BufferedValue::Inline(_) | BufferedValue::Malformed(_) => None,
            },
            None => {
                let cursor = self.cursor.as_ref().filter(|c| c.valid())?;
                (cursor.value_kind() == ValueKind::Pointer).then(|| ValuePointer::decode(cursor.raw_value())).flatten()
            }
        }
    }

    /// The current value as a handle of its own (a copy if it is read in place).
    pub(super) fn value_bytes(&self) -> Bytes {
        if self.value_in_cursor {
            Bytes::copy_from_slice(self.value())
        } else {
            self.value.clone()
        }
    }

    /// Makes `value` the current value.
    fn set_value(&mut self, value: Bytes) {
        self.value = value;
        self.value_in_cursor = false;
    }
}

fn lost_cursor() -> Error {
    Error::InvalidArgument("the iterator lost its cursor".into())
}

impl Drop for DbIterator {
    fn drop(&mut self) {
        Counters::add(&self.db.counters.iter_nexts, self.nexts);
        if let Some(walk) = self.next_walk.take() {
            walk.cancel();
        }
    }
}

/// An owning iterator over a key range, yielding `Result<(key, value)>` in key order.
///
/// After an error it yields that error once and then ends.
pub struct RangeIter {
    cursor: DbIterator,
    start: Option<Bound<Vec<u8>>>,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl RangeIter {
    /// The entries in `range` of the cursor `open` makes from `opts` with the range's bounds.
    pub(super) fn over<K: AsRef<[u8]>, R: RangeBounds<K>>(
        mut opts: ReadOptions,
        range: R,
        open: impl FnOnce(ReadOptions) -> Result<DbIterator>,
    ) -> Result<RangeIter> {
        let owned = |bound: Bound<&K>| match bound {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (start, end) = (owned(range.start_bound()), owned(range.end_bound()));
        // Exclusive upper bounds go to the cursor, which then never reads past them.
        if let Bound::Excluded(k) = &end {
            opts.upper_bound = Some(k.clone());
        }
        if let Bound::Included(k) | Bound::Excluded(k) = &start {
            opts.lower_bound = Some(k.clone());
        }
        let cursor = open(opts)?;
        Ok(RangeIter { cursor, start: Some(start), end, done: false })
    }

    fn advance(&mut self) -> Result<()> {
        match self.start.take() {
            None => self.cursor.next(),
            Some(Bound::Unbounded) => self.cursor.seek_to_first(),
            Some(Bound::Included(k)) => self.cursor.seek(&k),
            Some(Bound::Excluded(k)) => {
                self.cursor.seek(&k)?;
                if self.cursor.valid() && self.cursor.key() == k.as_slice() {
                    self.cursor.next()?;
                }
                Ok(())
            }
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Err(e) = self.advance() {
            self.done = true;
            return Some(Err(e));
        }
        if !self.cursor.valid() {
            self.done = true;
            return None;
        }
        let key = self.cursor.key();
        let past_end = match &self.end {
            Bound::Included(end) => key > end.as_slice(),
            Bound::Excluded(end) => key >= end.as_slice(),
            Bound::Unbounded => false,
        };
        if past_end {
            self.done = true;
            return None;
        }
        Some(Ok((Bytes::copy_from_slice(key), self.cursor.value_bytes())))
    }
}
