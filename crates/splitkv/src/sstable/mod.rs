//! sstable (under construction).
