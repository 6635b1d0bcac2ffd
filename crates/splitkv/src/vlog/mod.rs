//! vlog (under construction).
