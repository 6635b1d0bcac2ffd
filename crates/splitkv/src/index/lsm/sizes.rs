//! Key-range size estimates for the LSM index (`Index::approximate_size`), answered from table
//! metadata rather than by reading data: a table wholly inside the range counts whole; a table
//! the range cuts counts the share between the offsets its index gives for the range's ends
//! (RocksDB's `ApproximateOffsetOf`). The value-log records a table points to (its `log_refs`)
//! count in the same proportion. Memtables, bounded by the write buffer, are walked.

use std::ops::Bound;

use super::Shared;
use crate::error::Result;
use crate::index::range_entry_bytes;
use crate::stats::RangeSize;
use crate::types::{seek_key, SequenceNumber, MAX_SEQUENCE};

impl Shared {
    pub(super) fn approximate_size(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        seq: SequenceNumber,
    ) -> Result<RangeSize> {
        let sv = self.super_version();
        let mut size = RangeSize::default();
        for mem in sv.memtables() {
            let mut it = mem.iter();
            let (entries, values) = range_entry_bytes(&mut it, start, end, seq)?;
            size.memtable_bytes += entries;
            size.value_log_bytes += values;
        }
        let (lo, hi) = (bound_key(start), bound_key(end));
        let offset_of = |table: &crate::sstable::Table, k: &[u8]| {
            table.approximate_offset_of(&seek_key(k, SequenceNumber(MAX_SEQUENCE)))
        };
        for level in 0..sv.version.num_levels() {
            for f in sv.version.overlapping_files(level, lo, hi) {
                let (smallest, largest) = f.user_range();
                let cut_below = lo.filter(|s| *s > smallest);
                let cut_above = hi.filter(|e| *e <= largest);
                let bytes = if cut_below.is_none() && cut_above.is_none() {
                    f.file_size
                } else {
                    let table = self.table_cache.get_table(f.number, f.file_size)?;
                    let from = cut_below.map_or(0, |s| offset_of(&table, s));
                    let to = cut_above.map_or(f.file_size, |e| offset_of(&table, e));
                    to.saturating_sub(from).min(f.file_size)
                };
                size.index_bytes += bytes;
                let referenced: u64 = f.log_refs.iter().map(|(_, b)| b).sum();
                size.value_log_bytes += (referenced as f64 * bytes as f64 / f.file_size.max(1) as f64) as u64;
            }
        }
        Ok(size)
    }
}

fn bound_key(bound: Bound<&[u8]>) -> Option<&[u8]> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}
