//! version (under construction).
