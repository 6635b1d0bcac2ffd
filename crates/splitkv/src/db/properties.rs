//! Properties answered by the database rather than its index (snapshots, key-range sizes, a
//! level summary for indexes without levels), and [`Db::approximate_size`].
//!
//! Property names follow RocksDB's (`rocksdb.num-snapshots` is `splitkv.num-snapshots` here).
//! `splitkv.approximate-sizes` takes its key range in the name, as hex:
//! `splitkv.approximate-sizes:START:END` (either may be empty for an open end); alone it covers
//! the whole key space. Its value is `TOTAL index=N value_log=N memtable=N`, so the first word
//! is the figure RocksDB's `GetApproximateSizes` gives with memtables included.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;

use super::Db;
use crate::error::Result;
use crate::stats::{level_stats_header, RangeSize};
use crate::types::SequenceNumber;

impl Db {
    /// Estimates the bytes the keys in `range` take: the share of each SSTable the range covers
    /// (from the tables' index blocks, without reading data blocks), the value-log records those
    /// tables point to (in the same proportion), and the range's entries in the memtables. The
    /// hash index keeps no order and walks its keys instead (see `Index::approximate_size`).
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeSize> {
        let seq = SequenceNumber(self.inner.last_sequence.load(Ordering::Acquire));
        self.inner.index.approximate_size(as_bytes(range.start_bound()), as_bytes(range.end_bound()), seq)
    }

    /// The properties [`Db::property`] does not answer itself, then the index's.
    pub(super) fn more_property(&self, name: &str) -> Option<String> {
        match name {
            "splitkv.num-snapshots" => Some(self.inner.snapshots.count().to_string()),
            // RocksDB's convention: 0 when no snapshot is held.
            "splitkv.oldest-snapshot-time" => Some(self.inner.snapshots.oldest_time().unwrap_or(0).to_string()),
            // RocksDB's `rocksdb.is-write-stopped`: 1 while a stall that stops writes is in
            // progress (a slowdown is not a stop). A stall ends when a later write passes
            // without waiting, so it still shows after the last write that waited.
            "splitkv.is-write-stopped" => Some(u8::from(self.inner.info_log.writes_stopped()).to_string()),
            // The causes of the stalls in progress, one a line (`value-log-space`, ...).
            "splitkv.write-stalls" => Some(self.inner.info_log.stalls_in_progress().join("\n")),
            "splitkv.levelstats" => self.inner.index.property(name).or_else(|| Some(level_stats_header())),
            _ if name == APPROXIMATE_SIZES || name.starts_with(APPROXIMATE_SIZES_OF) => {
                let (start, end) = parse_range(name.strip_prefix(APPROXIMATE_SIZES_OF).unwrap_or(":"))?;
                let size = self.approximate_size((start, end)).ok()?;
                Some(format!(
                    "{} index={} value_log={} memtable={}",
                    size.total(),
                    size.index_bytes,
                    size.value_log_bytes,
                    size.memtable_bytes
                ))
            }
            _ => self.inner.index.property(name),
        }
    }
}

fn as_bytes<K: AsRef<[u8]>>(bound: Bound<&K>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A range of owned keys, as `approximate_size` takes it.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

const APPROXIMATE_SIZES: &str = "splitkv.approximate-sizes";
const APPROXIMATE_SIZES_OF: &str = "splitkv.approximate-sizes:";

/// `START:END` in hex (either may be empty: unbounded) as `[START, END)`; `None` if malformed.
fn parse_range(spec: &str) -> Option<KeyRange> {
    let (start, end) = spec.split_once(':')?;
    let key = |hex: &str, make: fn(Vec<u8>) -> Bound<Vec<u8>>| -> Option<Bound<Vec<u8>>> {
        if hex.is_empty() {
            return Some(Bound::Unbounded);
        }
        if !hex.len().is_multiple_of(2) {
            return None;
        }
        let bytes: Option<Vec<u8>> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect();
        bytes.map(make)
    };
    Some((key(start, Bound::Included)?, key(end, Bound::Excluded)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_specs_are_hex_with_open_ends() {
        assert_eq!(parse_range(":"), Some((Bound::Unbounded, Bound::Unbounded)));
        assert_eq!(parse_range("61:7a7a"), Some((Bound::Included(b"a".to_vec()), Bound::Excluded(b"zz".to_vec()))));
        assert_eq!(parse_range("00:"), Some((Bound::Included(vec![0]), Bound::Unbounded)));
        assert_eq!(parse_range("6"), None);
        assert_eq!(parse_range("6:"), None);
        assert_eq!(parse_range("zz:"), None);
    }
}
