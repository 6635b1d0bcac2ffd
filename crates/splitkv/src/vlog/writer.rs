//! The append side of the value log: the active segment, the user-space buffer in front of it,
//! the full buffer on its way to the OS, segment rotation and poisoning.
//!
//! A buffer that fills is handed to the log's flusher thread, which writes it to the file and
//! starts the device's writeback, while appends go on into a second buffer. The `write` of a
//! 1 MiB buffer (the page-cache copy and ext4's block reservation) was a quarter of the writing
//! thread's time in a 1 KiB random load. Flushes that must be done when they return (syncs,
//! seals, [`crate::vlog::ValueLog::flush_buffer`]) write on the caller's thread, after the flight.
//!
//! Invariants:
//! - The buffer holds only whole batches and always belongs to the active segment. The bytes
//!   in flight, if any, start at file offset `active.flushed` and the buffer follows them. A
//!   record therefore lies wholly below `flushed` (readable with `pread`), wholly in flight, or
//!   wholly inside the buffer.
//! - At most one buffer is in flight, so the file is written in order: a crash leaves a prefix
//!   of what was appended, never a hole.
//! - `active.segment.len == active.flushed`, published after the bytes reached the OS (when the
//!   flight lands, on the thread that waits for it).
//! - Once `poisoned` is set it stays set: after a failed write or fsync the file's contents are
//!   unknown, so no further byte may be appended or acknowledged as durable. A flight's failure
//!   poisons the writer when it lands.
//!
//! Thread-safety: [`Writer`] lives behind the log's mutex; everything here runs with it held,
//! except the flusher thread's write, which holds only the active file's own lock.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::record::{encode_segment_header, FORMAT_VERSION, SEGMENT_HEADER_LEN};
use super::segment::Segment;
use crate::error::{Error, Result};
use crate::filenames::segment_file;
use crate::fs::{AccessPattern, FileSystem, WritableFile};
use crate::types::{LogPosition, SegmentId};

/// The active segment's file: the writer and the flusher thread take turns on it.
type SharedFile = Arc<Mutex<Box<dyn WritableFile>>>;

/// The segment currently being appended to.
pub(super) struct ActiveSegment {
    pub segment: Arc<Segment>,
    pub file: SharedFile,
    /// Bytes handed to the OS (header included); the flight, if any, starts here.
    pub flushed: u64,
    /// Bytes known durable; a sync with nothing new skips the fsync.
    pub synced: u64,
}

/// A full buffer the flusher thread is writing to the active segment.
struct Flight {
    bytes: Arc<Vec<u8>>,
    landed: Arc<Landing>,
}

/// Where the flusher thread leaves a flight's outcome.
#[derive(Default)]
struct Landing {
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl Landing {
    fn set(&self, result: Result<()>) {
        *self.result.lock() = Some(result);
        self.cv.notify_one();
    }

    fn wait(&self) -> Result<()> {
        let mut result = self.result.lock();
        loop {
            if let Some(r) = result.take() {
                return r;
            }
            self.cv.wait(&mut result);
        }
    }
}

/// A write for the flusher thread.
struct FlushJob {
    file: SharedFile,
    bytes: Arc<Vec<u8>>,
    landed: Arc<Landing>,
}

/// The log's flusher thread, started with the first buffer it writes; dropping it lets the
/// thread finish what it was given and joins it, so no write lands after the log is gone.
struct Flusher {
    jobs: Option<Sender<FlushJob>>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    fn start() -> Result<Self> {
        let (jobs, receiver) = channel::<FlushJob>();
        let thread = std::thread::Builder::new().name("splitkv-log-flush".into()).spawn(move || {
            for FlushJob { file, bytes, landed } in receiver {
                let mut file = file.lock();
                // A panic below (a bug in a file system) must still land the flight, or the writer
                // would wait for it for ever.
                let write = || file.append(&bytes).and_then(|()| file.flush()).and_then(|()| file.start_writeback());
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(write))
                    .unwrap_or_else(|_| Err(Error::Poisoned("the value log's flusher thread panicked".into())));
                drop(file);
                // Let go of the buffer before the writer learns the outcome, so that it gets the
                // buffer back for its next swap.
                drop(bytes);
                landed.set(result);
            }
        })?;
        Ok(Flusher { jobs: Some(jobs), thread: Some(thread) })
    }

    /// Hands `job` to the thread; if the thread is gone, lands the job's flight as failed.
    fn send(&self, job: FlushJob) -> Result<()> {
        let landed = Arc::clone(&job.landed);
        match self.jobs.as_ref().map(|jobs| jobs.send(job)) {
            Some(Ok(())) => Ok(()),
            _ => {
                let gone = || Error::Poisoned("the value log's flusher thread is gone".into());
                landed.set(Err(gone()));
                Err(gone())
            }
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            // A panic there was already reported; the writes it left are lost as in a crash.
            let _ = thread.join();
        }
    }
}

/// True if a buffer of `capacity` bytes is more than the log keeps around between flushes: a
/// batch larger than the buffer grew it.
fn oversized(capacity: usize, buffer_size: usize) -> bool {
    capacity > buffer_size.saturating_mul(2).max(1 << 16)
}

/// Writer state, guarded by the log's mutex.
pub(super) struct Writer {
    pub active: Option<ActiveSegment>,
    pub buffer: Vec<u8>,
    /// The buffer before `buffer`, on its way to the OS.
    flight: Option<Flight>,
    /// A landed flight's buffer, kept for the next swap.
    spare: Vec<u8>,
    flusher: Option<Flusher>,
    pub next_id: SegmentId,
    pub poisoned: Option<String>,
}

impl Writer {
    pub fn new(next_id: SegmentId, buffer_size: usize) -> Self {
        Writer {
            active: None,
            buffer: Vec::with_capacity(buffer_size),
            flight: None,
            spare: Vec::new(),
            flusher: None,
            next_id,
            poisoned: None,
        }
    }

    pub fn check_usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned(cause.clone())),
            None => Ok(()),
        }
    }

    /// Runs a step that does I/O; a failure poisons the writer before it is returned.
    pub fn poison_on_error<T>(&mut self, step: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let result = step(self);
        if let Err(e) = &result {
            self.poisoned.get_or_insert_with(|| format!("value-log write failed: {e}"));
        }
        result
    }

    /// Where the next record will start.
    pub fn head(&self) -> LogPosition {
        match &self.active {
            Some(active) => LogPosition { segment: active.segment.id, offset: self.active_len(active) },
            None => LogPosition { segment: self.next_id, offset: 0 },
        }
    }

    /// The active segment's length with the bytes in flight and in the buffer.
    pub fn active_len(&self, active: &ActiveSegment) -> u64 {
        active.flushed + self.flight_len() + self.buffer.len() as u64
    }

    fn flight_len(&self) -> u64 {
        self.flight.as_ref().map_or(0, |f| f.bytes.len() as u64)
    }

    /// The `len` bytes at `offset` of the active segment if they lie in flight or in the buffer
    /// (a record lies wholly in one of them); `None` otherwise.
    pub fn unflushed(&self, offset: u64, len: usize) -> Option<&[u8]> {
        fn slice_at(bytes: &[u8], from: u64, offset: u64, len: usize) -> Option<&[u8]> {
            let start = usize::try_from(offset.checked_sub(from)?).ok()?;
            bytes.get(start..start.checked_add(len)?)
        }
        let active = self.active.as_ref()?;
        let buffer_start = active.flushed + self.flight_len();
        match &self.flight {
            Some(flight) if offset < buffer_start => slice_at(&flight.bytes, active.flushed, offset, len),
            _ => slice_at(&self.buffer, buffer_start, offset, len),
        }
    }

    /// Waits for the bytes in flight, if any, to reach the OS and publishes the new readable
    /// length; their failure is returned (the caller poisons the writer).
    fn land(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        let Some(flight) = self.flight.take() else { return Ok(()) };
        if let Err(e) = flight.landed.wait() {
            // The bytes stay readable from memory (a poisoned log still serves reads), and a
            // later wait learns the failure again instead of waiting for ever.
            flight.landed.set(Err(Error::Poisoned(format!("value-log write failed: {e}"))));
            self.flight = Some(flight);
            return Err(e);
        }
        self.publish_flushed(flight.bytes.len() as u64, bytes_written);
        // The flusher has let go of it: the next swap reuses its memory, unless it is oversized.
        if let Ok(mut bytes) = Arc::try_unwrap(flight.bytes) {
            if !oversized(bytes.capacity(), buffer_size) {
                bytes.clear();
                self.spare = bytes;
            }
        }
        Ok(())
    }

    /// Counts `n` more bytes of the active segment as handed to the OS and publishes its new
    /// readable length.
    fn publish_flushed(&mut self, n: u64, bytes_written: &AtomicU64) {
        if let Some(active) = self.active.as_mut() {
            active.flushed += n;
            active.segment.len.store(active.flushed, Ordering::Release);
        }
        bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    /// Hands the buffer to the OS on this thread, after the flight, and publishes the new
    /// readable length.
    pub fn flush(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.land(buffer_size, bytes_written)?;
        let Some(active) = self.active.as_ref() else { return Ok(()) };
        if self.buffer.is_empty() {
            return Ok(());
        }
        {
            let mut file = active.file.lock();
            file.append(&self.buffer)?;
            file.flush()?;
        }
        self.publish_flushed(self.buffer.len() as u64, bytes_written);
        self.buffer.clear();
        if oversized(self.buffer.capacity(), buffer_size) {
            self.buffer.shrink_to(buffer_size);
        }
        Ok(())
    }

    /// Hands a full buffer to the flusher thread, which writes it and starts the device writing
    /// it (so that the segment's seal, which fsyncs it, waits only for the last buffers), and
    /// goes on in a second buffer. Waits first for the previous flight: one at a time keeps the
    /// file written in order.
    pub fn flush_in_background(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.land(buffer_size, bytes_written)?;
        let Some(file) = self.active.as_ref().map(|active| Arc::clone(&active.file)) else { return Ok(()) };
        if self.buffer.is_empty() {
            return Ok(());
        }
        if self.flusher.is_none() {
            self.flusher = Some(Flusher::start()?);
        }
        let next = match std::mem::take(&mut self.spare) {
            spare if spare.capacity() > 0 => spare,
            _ => Vec::with_capacity(buffer_size),
        };
        let bytes = Arc::new(std::mem::replace(&mut self.buffer, next));
        let landed = Arc::new(Landing::default());
        let job = FlushJob { file, bytes: Arc::clone(&bytes), landed: Arc::clone(&landed) };
        self.flight = Some(Flight { bytes, landed });
        match self.flusher.as_ref() {
            Some(flusher) => flusher.send(job),
            None => Ok(()),
        }
    }

    /// Flushes and fsyncs the active segment.
    pub fn sync(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.flush(buffer_size, bytes_written)?;
        if let Some(active) = self.active.as_mut() {
            if active.synced < active.flushed {
                active.file.lock().sync()?;
                active.synced = active.flushed;
            }
        }
        Ok(())
    }

    /// Makes the active segment durable and stops appending to it.
    pub fn seal(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.sync(buffer_size, bytes_written)?;
        if let Some(active) = self.active.take() {
            active.segment.active.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Creates segment `next_id` with a durable header and makes it active. Returns the shared
    /// handle for the caller to publish in the reader map.
    pub fn start_segment(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        bytes_written: &AtomicU64,
    ) -> Result<Arc<Segment>> {
        debug_assert!(self.active.is_none() && self.buffer.is_empty() && self.flight.is_none());
        let id = self.next_id;
        let path = segment_file(dir, id);
        let mut file = fs.create(&path)?;
        self.next_id = SegmentId(id.0 + 1);
        // The header is synced now so that a crash can only ever leave a header-less file as the
        // newest segment, never behind records of a later one.
        file.append(&encode_segment_header(id))?;
        file.sync()?;
        fs.sync_dir(dir)?;
        bytes_written.fetch_add(SEGMENT_HEADER_LEN, Ordering::Relaxed);
        let reader = fs.open(&path)?;
        reader.advise(AccessPattern::Random);
        let segment = Arc::new(Segment {
            id,
            path,
            file: reader,
            version: FORMAT_VERSION,
            len: AtomicU64::new(SEGMENT_HEADER_LEN),
            active: AtomicBool::new(true),
            remap: None,
        });
        self.active = Some(ActiveSegment {
            segment: Arc::clone(&segment),
            file: Arc::new(Mutex::new(file)),
            flushed: SEGMENT_HEADER_LEN,
            synced: SEGMENT_HEADER_LEN,
        });
        Ok(segment)
    }
}
