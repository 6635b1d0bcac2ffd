//! The append side of the value log: the active segment, the user-space buffer in front of it,
//! the full buffer on its way to the OS, segment rotation and poisoning.
//!
//! A buffer that fills is handed to the log's flusher thread, which writes it to the file and
//! starts the device's writeback, while appends go on into another buffer. The `write` of a
//! 1 MiB buffer (the page-cache copy and ext4's block reservation) was a quarter of the writing
//! thread's time in a 1 KiB random load. Up to [`MAX_FLIGHTS`] buffers may be on their way at
//! once, so that an append waits for the flusher only when it is that far behind. Flushes that
//! must be done when they return (syncs, seals, [`crate::vlog::ValueLog::flush_buffer`]) write on
//! the caller's thread, after the flights.
//!
//! Rotation to a new segment does its durable steps on the flusher thread too: the sealed
//! segment's fsync, then the new segment's header, its fsync and the directory's. The appending
//! thread only writes out the sealed segment's last buffer and creates the new, empty file. With
//! those fsyncs on the appending thread, every write behind it (all of them, under the log-order
//! lock) waited about 1.7 ms per rotation, 6-9% of a 1 KiB random load. The order is what keeps
//! recovery's torn-tail rule true: the new segment's header is written only once the sealed
//! segment is durable, and its records only after the header, so a crash leaves at most one
//! segment without a header (the newest, still empty: replay removes it) and only the newest
//! segment with a header can be torn. A rotation waits for the one before it to land first.
//!
//! Invariants:
//! - The buffer holds only whole batches and always belongs to the active segment. The bytes
//!   in flight, if any, start at file offset `active.flushed`, follow each other in file order,
//!   and the buffer follows them. A record therefore lies wholly below `flushed` (readable with
//!   `pread`), wholly in one flight, or wholly inside the buffer. A new segment's first flight
//!   is its header (with the rotation's fsyncs).
//! - One thread writes the flights, in the order they were sent, so the file is written in
//!   order: a crash leaves a prefix of what was appended, never a hole.
//! - `active.segment.len == active.flushed`, published after the bytes reached the OS (when the
//!   flight lands, on the thread that collects it).
//! - Once `poisoned` is set it stays set: after a failed write or fsync the file's contents are
//!   unknown, so no further byte may be appended or acknowledged as durable. A flight's failure
//!   poisons the writer when it lands.
//!
//! Thread-safety: [`Writer`] lives behind the log's mutex; everything here runs with it held,
//! except the flusher thread's work, which holds only the files' own locks.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::record::{encode_segment_header, FORMAT_VERSION};
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
    /// Bytes handed to the OS (header included); the flights, if any, start here.
    pub flushed: u64,
    /// Bytes known durable; a sync with nothing new skips the fsync.
    pub synced: u64,
}

/// Buffers that may be on their way to the OS at once before an append waits for the oldest.
const MAX_FLIGHTS: usize = 4;

/// A full buffer the flusher thread is writing to the active segment (or, first in a new
/// segment, its header).
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

    fn has_landed(&self) -> bool {
        self.result.lock().is_some()
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

/// Work for the flusher thread; `landed` learns the outcome.
struct FlushJob {
    work: Work,
    landed: Arc<Landing>,
}

enum Work {
    /// Append `bytes` to `file` and start its writeback.
    Write { file: SharedFile, bytes: Arc<Vec<u8>> },
    /// Rotation's durable steps, in this order: fsync the sealed segment (if any), write the
    /// new segment's header, fsync it, sync the directory.
    Rotate { sealed: Option<SharedFile>, file: SharedFile, header: Arc<Vec<u8>>, fs: Arc<dyn FileSystem>, dir: PathBuf },
}

impl Work {
    fn run(&self) -> Result<()> {
        match self {
            Work::Write { file, bytes } => {
                let mut file = file.lock();
                file.append(bytes)?;
                file.flush()?;
                file.start_writeback()
            }
            Work::Rotate { sealed, file, header, fs, dir } => {
                if let Some(sealed) = sealed {
                    sealed.lock().sync()?;
                }
                {
                    let mut file = file.lock();
                    file.append(header)?;
                    file.sync()?;
                }
                fs.sync_dir(dir)
            }
        }
    }
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
            for FlushJob { work, landed } in receiver {
                // A panic below (a bug in a file system) must still land the flight, or the writer
                // would wait for it for ever.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run()))
                    .unwrap_or_else(|_| Err(Error::Poisoned("the value log's flusher thread panicked".into())));
                // Let go of the buffer before the writer learns the outcome, so that it gets the
                // buffer back for a later swap.
                drop(work);
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
    /// The buffers before `buffer`, oldest first, on their way to the OS.
    flights: VecDeque<Flight>,
    /// Bytes in `flights`.
    in_flight: u64,
    /// Landed flights' buffers, kept for later swaps.
    spares: Vec<Vec<u8>>,
    flusher: Option<Flusher>,
    pub next_id: SegmentId,
    pub poisoned: Option<String>,
}

impl Writer {
    pub fn new(next_id: SegmentId, buffer_size: usize) -> Self {
        Writer {
            active: None,
            buffer: Vec::with_capacity(buffer_size),
            flights: VecDeque::new(),
            in_flight: 0,
            spares: Vec::new(),
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

    /// The active segment's bytes in flight and in the buffer (0 without one).
    pub fn unflushed_len(&self) -> u64 {
        self.active.as_ref().map_or(0, |active| self.active_len(active) - active.flushed)
    }

    /// The active segment's length with the bytes in flight and in the buffer.
    pub fn active_len(&self, active: &ActiveSegment) -> u64 {
        active.flushed + self.in_flight + self.buffer.len() as u64
    }

    /// The `len` bytes at `offset` of the active segment if they lie in flight or in the buffer
    /// (a record lies wholly in one of them); `None` otherwise.
    pub fn unflushed(&self, offset: u64, len: usize) -> Option<&[u8]> {
        fn slice_at(bytes: &[u8], from: u64, offset: u64, len: usize) -> Option<&[u8]> {
            let start = usize::try_from(offset.checked_sub(from)?).ok()?;
            bytes.get(start..start.checked_add(len)?)
        }
        let mut start = self.active.as_ref()?.flushed;
        for flight in &self.flights {
            let end = start + flight.bytes.len() as u64;
            if offset < end {
                return slice_at(&flight.bytes, start, offset, len);
            }
            start = end;
        }
        slice_at(&self.buffer, start, offset, len)
    }

    /// Waits for every flight to reach the OS and publishes the new readable length; a failure
    /// is returned (the caller poisons the writer).
    fn land(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        while !self.flights.is_empty() {
            self.land_oldest(buffer_size, bytes_written)?;
        }
        Ok(())
    }

    /// Collects the flights that have landed, oldest first, without waiting.
    fn land_landed(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        while self.flights.front().is_some_and(|f| f.landed.has_landed()) {
            self.land_oldest(buffer_size, bytes_written)?;
        }
        Ok(())
    }

    /// Waits for the oldest flight and publishes its bytes.
    fn land_oldest(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        let Some(flight) = self.flights.front() else { return Ok(()) };
        if let Err(e) = flight.landed.wait() {
            // The bytes stay readable from memory (a poisoned log still serves reads), and a
            // later wait learns the failure again instead of waiting for ever.
            flight.landed.set(Err(Error::Poisoned(format!("value-log write failed: {e}"))));
            return Err(e);
        }
        let Some(flight) = self.flights.pop_front() else { return Ok(()) };
        let n = flight.bytes.len() as u64;
        self.in_flight -= n;
        self.publish_flushed(n, bytes_written);
        // The flusher has let go of it: a later swap reuses its memory, unless it is oversized.
        if let Ok(mut bytes) = Arc::try_unwrap(flight.bytes) {
            if bytes.capacity() >= buffer_size && !oversized(bytes.capacity(), buffer_size) {
                bytes.clear();
                self.spares.push(bytes);
            }
        }
        Ok(())
    }

    /// Sends `work` to the flusher thread (started on first use) as the newest flight.
    fn send(&mut self, bytes: Arc<Vec<u8>>, work: Work) -> Result<()> {
        if self.flusher.is_none() {
            self.flusher = Some(Flusher::start()?);
        }
        let landed = Arc::new(Landing::default());
        self.in_flight += bytes.len() as u64;
        self.flights.push_back(Flight { bytes, landed: Arc::clone(&landed) });
        match self.flusher.as_ref() {
            Some(flusher) => flusher.send(FlushJob { work, landed }),
            None => Ok(()),
        }
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

    /// Hands the buffer to the OS on this thread, after the flights, and publishes the new
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
    /// goes on in another buffer. Waits only if [`MAX_FLIGHTS`] buffers are still on their way.
    pub fn flush_in_background(&mut self, buffer_size: usize, bytes_written: &AtomicU64) -> Result<()> {
        self.land_landed(buffer_size, bytes_written)?;
        while self.flights.len() >= MAX_FLIGHTS {
            self.land_oldest(buffer_size, bytes_written)?;
        }
        let Some(file) = self.active.as_ref().map(|active| Arc::clone(&active.file)) else { return Ok(()) };
        if self.buffer.is_empty() {
            return Ok(());
        }
        let next = self.spares.pop().unwrap_or_else(|| Vec::with_capacity(buffer_size));
        let bytes = Arc::new(std::mem::replace(&mut self.buffer, next));
        self.send(Arc::clone(&bytes), Work::Write { file, bytes })
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

    /// Seals the active segment, if any (its last bytes written on this thread, its fsync left
    /// to the flusher thread), creates segment `next_id` and makes it active; the flusher thread
    /// then fsyncs the sealed segment, writes the new header, fsyncs it and syncs the directory,
    /// in that order, before any record of the new segment (see the module documentation).
    /// Returns the new segment's shared handle for the caller to publish in the reader map.
    pub fn rotate(
        &mut self,
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        buffer_size: usize,
        bytes_written: &AtomicU64,
    ) -> Result<Arc<Segment>> {
        // Lands every flight, the previous rotation's too: at most one rotation is on its way,
        // so at most the newest file lacks its header.
        self.flush(buffer_size, bytes_written)?;
        let sealed = self.active.take().map(|active| {
            active.segment.active.store(false, Ordering::Release);
            (active.synced < active.flushed).then_some(active.file)
        });
        let id = self.next_id;
        let path = segment_file(dir, id);
        let file: SharedFile = Arc::new(Mutex::new(fs.create(&path)?));
        self.next_id = SegmentId(id.0 + 1);
        let reader = fs.open(&path)?;
        reader.advise(AccessPattern::Random);
        let segment = Arc::new(Segment {
            id,
            path,
            file: reader,
            version: FORMAT_VERSION,
            // Nothing is readable from the file until the header flight lands.
            len: AtomicU64::new(0),
            active: AtomicBool::new(true),
            remap: None,
        });
        self.active =
            Some(ActiveSegment { segment: Arc::clone(&segment), file: Arc::clone(&file), flushed: 0, synced: 0 });
        let header = Arc::new(encode_segment_header(id).to_vec());
        let work = Work::Rotate {
            sealed: sealed.flatten(),
            file,
            header: Arc::clone(&header),
            fs: Arc::clone(fs),
            dir: dir.to_path_buf(),
        };
        self.send(header, work)?;
        Ok(segment)
    }
}
