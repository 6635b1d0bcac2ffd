//! Reading a GC victim and handing its live records to relocation: either after the whole
//! segment is read ([`scan_victim`], when the run must see every record first, to punch holes or
//! to sort by key), or while it is read ([`scan_while_relocating`]); or, for a compaction in
//! place, to the victim's compacted file while it is read ([`scan_while_compacting`]).
//!
//! Why overlap them: a run's time splits about evenly between the scan (reading records and a
//! liveness lookup for each) and the relocation (the write path: memtable inserts, log appends,
//! syncs), and the two share nothing but the records passed from one to the other. While
//! writers wait for log space, one core ran both halves in turn and the other ran only flushes
//! and compactions. The scan therefore runs on a helper thread and sends the live records
//! through a small bounded channel, so that memory stays bounded by the channel rather than by
//! the victim.
//!
//! Relocating records before the scan has finished is safe for the same reason relocating after
//! it is: every record sent was current at or after `current_at` (read before the first lookup),
//! and the write path re-checks each as write leader. If the scan fails halfway, the records
//! already relocated are ordinary copies at the log head; the run fails and the victim stays.

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::fs::FileSystem;
use crate::types::{SegmentId, SequenceNumber, ValuePointer};
use crate::vlog::compact::KeptRecords;
use crate::vlog::gc::GcHost;
use crate::vlog::segment::CursorRecord;
use crate::vlog::{scan_segment, RecordKind, ReplayedRecord};

/// Bytes per message from the scanning thread: small enough that relocation starts soon after
/// the scan does, large enough that the channel is not where the time goes.
const CHUNK_BYTES: usize = 256 << 10;

/// Messages the channel holds before the scan waits for relocation to catch up.
const CHANNEL_CHUNKS: usize = 4;

/// What reading a victim found besides its live records.
#[derive(Debug, Default)]
pub(super) struct VictimScan {
    /// `(offset, len)` of records nothing points to, in file order.
    pub dead: Vec<(u64, u64)>,
    /// Bytes of records read.
    pub bytes_read: u64,
    /// Time spent reading and deciding liveness, not counting waits for relocation to take
    /// what was sent.
    pub time: Duration,
}

/// What relocating a victim's live records did.
#[derive(Debug)]
pub(super) struct Relocated {
    /// The last sequence number published by the relocation.
    pub seq: SequenceNumber,
    /// Records handed to the write path (it skips those whose key was written since).
    pub records: u64,
    /// Their value bytes.
    pub bytes: u64,
    /// Time spent in the write path, not counting waits for the scan.
    pub time: Duration,
}

/// Reads the victim at `path` (stepping over `skipped`) and passes each record the index still
/// points to to `on_live`, which returns false to stop the scan early (its receiver is gone).
pub(super) fn scan_victim(
    fs: &dyn FileSystem,
    path: &Path,
    skipped: &[(u64, u64)],
    host: &dyn GcHost,
    mut on_live: impl FnMut(&CursorRecord<'_>, SegmentId) -> bool,
) -> Result<VictimScan> {
    let started = Instant::now();
    let mut scan = VictimScan::default();
    let mut records = scan_segment(fs, path, skipped)?;
    let is_live = |kind, key: &[u8], pointer: &ValuePointer| -> Result<bool> {
        Ok(matches!(kind, RecordKind::Put | RecordKind::Moved) && host.is_current(key, pointer)?)
    };
    while let Some(item) = records.next_kept(is_live, &mut on_live) {
        let (offset, len, live) = item?;
        scan.bytes_read += u64::from(len);
        match live {
            Some(true) => {}
            Some(false) => break,
            None => scan.dead.push((offset, u64::from(len))),
        }
    }
    scan.time = started.elapsed();
    Ok(scan)
}

/// Hands a victim's live `records`, read in full, to the host's relocation (see
/// [`GcHost::relocate`]).
pub(super) fn relocate(
    host: &dyn GcHost,
    records: Vec<ReplayedRecord>,
    current_at: SequenceNumber,
) -> Result<Relocated> {
    let value_bytes = records.iter().map(|r| r.value.len()).sum();
    relocate_arrivals(host, &mut Arrivals::new(vec![Decoded { records, value_bytes }], None), current_at)
}

/// Scans the victim on a helper thread while this thread relocates its live records as they
/// arrive (see the module documentation). Returns the scan's error first: a failed scan may
/// have let part of the live records through, which is harmless, but the victim must stay.
pub(super) fn scan_while_relocating(
    fs: &dyn FileSystem,
    path: &Path,
    skipped: &[(u64, u64)],
    host: &dyn GcHost,
    current_at: SequenceNumber,
) -> Result<(VictimScan, Relocated)> {
    scan_while(fs, path, skipped, host, |arrivals| relocate_arrivals(host, arrivals, current_at))
}

/// Scans the victim on a helper thread while this thread writes its live records to the
/// victim's compacted file as they arrive ([`GcHost::compact_segment`]); returns the scan and
/// what the records were (counts and time as for a relocation; the run sets `seq` once the scan
/// is over). Errors as for [`scan_while_relocating`]: the victim stays.
pub(super) fn scan_while_compacting(
    fs: &dyn FileSystem,
    path: &Path,
    victim: SegmentId,
    host: &dyn GcHost,
) -> Result<(VictimScan, Relocated)> {
    scan_while(fs, path, &[], host, |arrivals: &mut Arrivals<KeptRecords>| {
        let started = Instant::now();
        host.compact_segment(victim, arrivals)?;
        Ok(arrivals.relocated(SequenceNumber(0), started))
    })
}

/// Scans the victim on a helper thread, which adds its live records to chunks and sends them
/// on, [`CHUNK_BYTES`] or so at a time, to `consume` on this thread.
fn scan_while<C: Chunk, T>(
    fs: &dyn FileSystem,
    path: &Path,
    skipped: &[(u64, u64)],
    host: &dyn GcHost,
    consume: impl FnOnce(&mut Arrivals<C>) -> Result<T>,
) -> Result<(VictimScan, T)> {
    std::thread::scope(|scope| {
        let (sender, receiver) = sync_channel::<C>(CHANNEL_CHUNKS);
        let scanner = std::thread::Builder::new().name("splitkv-gc-scan".into()).spawn_scoped(scope, move || {
            let mut chunk = C::with_room();
            let mut waited = Duration::ZERO;
            let scan = scan_victim(fs, path, skipped, host, |record, segment| {
                chunk.add(record, segment);
                chunk.size() < CHUNK_BYTES || {
                    let sending_since = Instant::now();
                    let sent = sender.send(std::mem::replace(&mut chunk, C::with_room())).is_ok();
                    waited += sending_since.elapsed();
                    sent
                }
            });
            if chunk.records() > 0 {
                // A closed channel means the consumer failed; its error is reported instead.
                let _ = sender.send(chunk);
            }
            scan.map(|scan| VictimScan { time: scan.time.saturating_sub(waited), ..scan })
        })?;
        let mut arrivals = Arrivals::new(Vec::new(), Some(receiver));
        let consumed = consume(&mut arrivals);
        // Close the channel before joining, so that a scan still sending after a failed
        // consumer stops instead of waiting forever.
        drop(arrivals);
        let scan = scanner.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        Ok((scan, consumed?))
    })
}

fn relocate_arrivals(
    host: &dyn GcHost,
    arrivals: &mut Arrivals<Decoded>,
    current_at: SequenceNumber,
) -> Result<Relocated> {
    let started = Instant::now();
    let seq = host.relocate(&mut arrivals.flat_map(|chunk| chunk.records), current_at)?;
    Ok(arrivals.relocated(seq, started))
}

/// A batch of live records a scan passes on: decoded ones to relocate ([`Decoded`]), or the
/// records' bytes for a compacted file ([`KeptRecords`]).
trait Chunk: Default + Send {
    /// An empty chunk, with room for what the scan puts in one.
    fn with_room() -> Self {
        Self::default()
    }
    /// Adds a live record of `segment`.
    fn add(&mut self, record: &CursorRecord<'_>, segment: SegmentId);
    /// Bytes held, what the scan sends chunks by.
    fn size(&self) -> usize;
    /// Records held.
    fn records(&self) -> u64;
    /// Bytes of their values.
    fn value_bytes(&self) -> u64;
}

/// Live records decoded for relocation, which writes each key and value again.
#[derive(Default)]
struct Decoded {
    records: Vec<ReplayedRecord>,
    value_bytes: usize,
}

impl Chunk for Decoded {
    fn add(&mut self, record: &CursorRecord<'_>, segment: SegmentId) {
        let record = record.to_replayed(segment);
        self.value_bytes += record.value.len();
        self.records.push(record);
    }

    fn size(&self) -> usize {
        self.value_bytes
    }

    fn records(&self) -> u64 {
        self.records.len() as u64
    }

    fn value_bytes(&self) -> u64 {
        self.value_bytes as u64
    }
}

impl Chunk for KeptRecords {
    fn with_room() -> Self {
        // Grown from nothing, its bytes were copied about twice over on the way to a chunk.
        KeptRecords::with_capacity(CHUNK_BYTES + (16 << 10))
    }

    fn add(&mut self, record: &CursorRecord<'_>, segment: SegmentId) {
        self.push(record, segment);
    }

    fn size(&self) -> usize {
        self.record_bytes()
    }

    fn records(&self) -> u64 {
        self.len() as u64
    }

    fn value_bytes(&self) -> u64 {
        KeptRecords::value_bytes(self)
    }
}

/// Chunks of live records on their way to relocation or compaction: those at hand, then (if
/// there is a scanning thread) what it sends; with counts of what passed and of the time spent
/// waiting for it.
struct Arrivals<C> {
    at_hand: std::vec::IntoIter<C>,
    receiver: Option<Receiver<C>>,
    records: u64,
    bytes: u64,
    waited: Duration,
}

impl<C: Chunk> Arrivals<C> {
    fn new(at_hand: Vec<C>, receiver: Option<Receiver<C>>) -> Self {
        Arrivals { at_hand: at_hand.into_iter(), receiver, records: 0, bytes: 0, waited: Duration::ZERO }
    }

    /// What passed, for a consumer that began at `started` and ended with `seq`: its time not
    /// counting the waits for the scan.
    fn relocated(&self, seq: SequenceNumber, started: Instant) -> Relocated {
        Relocated { seq, records: self.records, bytes: self.bytes, time: started.elapsed().saturating_sub(self.waited) }
    }
}

impl<C: Chunk> Iterator for Arrivals<C> {
    type Item = C;

    fn next(&mut self) -> Option<C> {
        let chunk = match self.at_hand.next() {
            Some(chunk) => chunk,
            None => {
                let waiting_since = Instant::now();
                let next = self.receiver.as_ref()?.recv();
                self.waited += waiting_since.elapsed();
                // Disconnected: the scan has ended and everything it sent has arrived.
                next.ok()?
            }
        };
        self.records += chunk.records();
        self.bytes += chunk.value_bytes();
        Some(chunk)
    }
}
