//! Compaction events: what the scheduler reports about every finished compaction to an optional
//! [`CompactionListener`] (set in `Options::compaction_listener`).
//!
//! A listener is the whole instrumentation interface: it is called on the compaction worker's
//! thread after the result is published and outside every engine lock, so it may take its time
//! (the worker is not picking meanwhile) but must not call back into the database's compaction
//! paths. Listeners are shared across workers and must be `Send + Sync`.

use crate::compaction::policy::PickReason;

/// One finished compaction (or trivial move).
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionEvent {
    /// Input level; outputs went to `level + 1`.
    pub level: usize,
    /// Why it was picked.
    pub reason: PickReason,
    /// Input files from `level` and from `level + 1`.
    pub input_files: [usize; 2],
    /// Input bytes from `level` and from `level + 1`.
    pub input_bytes: [u64; 2],
    /// Output tables written.
    pub output_files: usize,
    /// Output bytes written (0 for a trivial move).
    pub output_bytes: u64,
    /// The file moved down a level without being rewritten.
    pub trivial_move: bool,
    /// Start, in milliseconds since the database was opened.
    pub start_ms: u64,
    /// Wall time, including memtable flushes that pre-empted it.
    pub duration_micros: u64,
    /// The level holding the compaction time slice when it finished (time-slice policy only).
    pub slice_holder: Option<usize>,
}

impl CompactionEvent {
    /// Bytes rewritten per byte moved down: `(input from level + input from level+1) / input
    /// from level`, the Slot thesis' per-compaction write amplification (`N + 1` in a balanced
    /// tree with fan-out `N`). 0 for a trivial move, which rewrites nothing.
    pub fn write_amplification(&self) -> f64 {
        if self.trivial_move || self.input_bytes[0] == 0 {
            return 0.0;
        }
        (self.input_bytes[0] + self.input_bytes[1]) as f64 / self.input_bytes[0] as f64
    }
}

/// Receives compaction events.
pub trait CompactionListener: Send + Sync {
    /// Called once per finished compaction.
    fn on_compaction_completed(&self, event: &CompactionEvent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_amplification_counts_rewritten_bytes_per_byte_moved_down() {
        let mut e = CompactionEvent {
            level: 1,
            reason: PickReason::LevelSize,
            input_files: [1, 10],
            input_bytes: [100, 1000],
            output_files: 11,
            output_bytes: 1100,
            trivial_move: false,
            start_ms: 0,
            duration_micros: 5,
            slice_holder: None,
        };
        assert_eq!(e.write_amplification(), 11.0);
        e.trivial_move = true;
        assert_eq!(e.write_amplification(), 0.0);
    }
}
