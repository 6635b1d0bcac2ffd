//! In-memory crashable file system (under construction).
/// In-memory file system.
#[derive(Default)]
pub struct MemFileSystem;
