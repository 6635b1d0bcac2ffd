//! Compaction: deciding which level to compact (a pure policy), which files (a picker), and
//! doing it (the executor).
//!
//! - [`policy`]: `CompactionPolicy::pick(&LevelsSnapshot, &SchedulerState) -> Option<LevelPick>`,
//!   a pure function of a snapshot of level sizes, testable tick by tick without I/O. `Score` is
//!   LevelDB's policy; the time-slice policy plugs in beside it.
//! - [`picker`]: turns a picked level into input files (round-robin cursor per level, parent-level
//!   overlap, trivial-move detection).
//! - [`exec`]: merges the inputs, drops versions no snapshot can see, writes output tables and
//!   reports the value-log bytes it made garbage.

pub mod exec;
pub mod picker;
pub mod policy;

pub use picker::Compaction;
pub use policy::{CompactionPolicy, LevelPick, LevelsSnapshot, SchedulerState, ScorePolicy};
