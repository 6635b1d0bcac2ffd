//! Compaction: deciding which level to compact (a pure policy), which files (a picker), and
//! doing it (the executor).
//!
//! - [`policy`]: `CompactionPolicy::pick(&LevelsSnapshot, &SchedulerState) -> Option<LevelPick>`,
//!   a pure function of a snapshot of level sizes, testable tick by tick without I/O, told about
//!   finished compactions through `on_compaction_done`. `ScorePolicy` is LevelDB's policy,
//!   `TimeSlicePolicy` the Slot round-robin scheduler.
//! - [`picker`]: turns a picked level into input files (round-robin cursor per level, parent-level
//!   overlap, trivial-move detection) and tracks what running compactions hold, so that several
//!   workers never pick the same files or overlapping output ranges.
//! - [`exec`]: merges the inputs, drops versions no snapshot can see, writes output tables and
//!   reports the value-log bytes it made garbage.
//! - [`events`]: the per-compaction report handed to an optional listener.
//!
//! Nothing here imports `Options` (which names the compaction listener): callers pass the
//! numbers (triggers, level targets, output file size). Picking is tested from text files under
//! `testdata/` (see `datadriven_tests`).

pub mod events;
pub mod exec;
pub mod picker;
pub mod policy;

#[cfg(test)]
mod datadriven_tests;

pub use events::{CompactionEvent, CompactionListener};
pub use picker::{Compaction, InFlight};
pub use policy::{
    CompactionPolicy, FinishedCompaction, LevelPick, LevelsSnapshot, PickReason, SchedulerState, ScorePolicy,
    TimeSliceConfig, TimeSlicePolicy,
};
