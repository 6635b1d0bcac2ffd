//! memtable (under construction).
