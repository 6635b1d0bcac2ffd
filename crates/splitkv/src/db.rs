//! db (under construction).
