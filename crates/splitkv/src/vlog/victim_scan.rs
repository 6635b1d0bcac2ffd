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
use crate::vlog::gc::GcHost;
use crate::vlog::{scan_segment, RecordKind, ReplayedRecord};

/// Value bytes per message from the scanning thread: small enough that relocation starts soon
/// after the scan does, large enough that the channel is not where the time goes.
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
    mut on_live: impl FnMut(ReplayedRecord) -> bool,
) -> Result<VictimScan> {
    let started = Instant::now();
    let mut scan = VictimScan::default();
    let mut records = scan_segment(fs, path, skipped)?;
    let is_live = |kind, key: &[u8], pointer: &ValuePointer| -> Result<bool> {
        Ok(matches!(kind, RecordKind::Put | RecordKind::Moved) && host.is_current(key, pointer)?)
    };
    while let Some(item) = records.next_kept(is_live) {
        let (offset, len, live) = item?;
        scan.bytes_read += u64::from(len);
        match live {
            Some(record) => {
                if !on_live(record) {
                    break;
                }
            }
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
    relocate_arrivals(host, &mut Arrivals::new(records, None), current_at)
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
    scan_while(fs, path, &[], host, |arrivals| {
        let started = Instant::now();
        host.compact_segment(victim, arrivals)?;
        Ok(Relocated {
            seq: SequenceNumber(0),
            records: arrivals.records,
            bytes: arrivals.bytes,
            time: started.elapsed().saturating_sub(arrivals.waited),
        })
    })
}

/// Scans the victim on a helper thread, sending its live records in chunks to `consume` on this
/// thread.
fn scan_while<T>(
    fs: &dyn FileSystem,
    path: &Path,
    skipped: &[(u64, u64)],
    host: &dyn GcHost,
    consume: impl FnOnce(&mut Arrivals) -> Result<T>,
) -> Result<(VictimScan, T)> {
    std::thread::scope(|scope| {
        let (sender, receiver) = sync_channel::<Vec<ReplayedRecord>>(CHANNEL_CHUNKS);
        let scanner = std::thread::Builder::new().name("splitkv-gc-scan".into()).spawn_scoped(scope, move || {
            let mut chunk = Vec::new();
            let mut chunk_bytes = 0;
            let mut waited = Duration::ZERO;
            let scan = scan_victim(fs, path, skipped, host, |record| {
                chunk_bytes += record.value.len();
                chunk.push(record);
                chunk_bytes < CHUNK_BYTES || {
                    chunk_bytes = 0;
                    let sending_since = Instant::now();
                    let sent = sender.send(std::mem::take(&mut chunk)).is_ok();
                    waited += sending_since.elapsed();
                    sent
                }
            });
            if !chunk.is_empty() {
                // A closed channel means relocation failed; its error is reported instead.
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

fn relocate_arrivals(host: &dyn GcHost, arrivals: &mut Arrivals, current_at: SequenceNumber) -> Result<Relocated> {
    let started = Instant::now();
    let seq = host.relocate(arrivals, current_at)?;
    Ok(Relocated {
        seq,
        records: arrivals.records,
        bytes: arrivals.bytes,
        time: started.elapsed().saturating_sub(arrivals.waited),
    })
}

/// Live records on their way to relocation: those at hand, then (if there is a scanning thread)
/// what it sends; with counts of what passed and of the time spent waiting for it.
struct Arrivals {
    at_hand: std::vec::IntoIter<ReplayedRecord>,
    receiver: Option<Receiver<Vec<ReplayedRecord>>>,
    records: u64,
    bytes: u64,
    waited: Duration,
}

impl Arrivals {
    fn new(at_hand: Vec<ReplayedRecord>, receiver: Option<Receiver<Vec<ReplayedRecord>>>) -> Self {
        Arrivals { at_hand: at_hand.into_iter(), receiver, records: 0, bytes: 0, waited: Duration::ZERO }
    }
}

impl Iterator for Arrivals {
    type Item = ReplayedRecord;

    fn next(&mut self) -> Option<ReplayedRecord> {
        loop {
            if let Some(record) = self.at_hand.next() {
                self.records += 1;
                self.bytes += record.value.len() as u64;
                return Some(record);
            }
            let waiting_since = Instant::now();
            let next = self.receiver.as_ref()?.recv();
            self.waited += waiting_since.elapsed();
            // Disconnected: the scan has ended and everything it sent has arrived.
            self.at_hand = next.ok()?.into_iter();
        }
    }
}
