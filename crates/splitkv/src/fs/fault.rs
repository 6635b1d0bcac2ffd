//! Fault-injecting file system (under construction).
/// Fault-injecting wrapper.
pub struct FaultInjectingFileSystem;
/// Operation kinds that can fail.
pub enum FaultKind {}
