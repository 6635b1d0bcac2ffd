//! compaction (under construction).
