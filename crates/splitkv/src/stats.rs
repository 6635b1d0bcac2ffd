//! stats (under construction).
