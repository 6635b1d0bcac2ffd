//! index (under construction).
