//! Names of the files in a database directory.
//!
//! ```text
//! CURRENT            name of the live MANIFEST
//! MANIFEST-000005    version edits
//! 000012.sst         SSTable
//! 00000003.vlog      value-log segment
//! HASHINDEX          the persistent hash table (hash index mode)
//! OPTIONS            the options of the last read-write open (docs/format/options.md)
//! LOCK               held while the database is open
//! LOG                what the engine did (text, see docs/format/log.md)
//! LOG.old.N          rotated LOGs, 1 the newest
//! ```

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::fs::FileSystem;
use crate::types::{FileNumber, SegmentId};

/// What a file in the database directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// `MANIFEST-NNNNNN`.
    Manifest(FileNumber),
    /// `NNNNNN.sst`.
    Table(FileNumber),
    /// `NNNNNNNN.vlog`.
    Segment(SegmentId),
    /// `HASHINDEX`: the hash table of the hash index mode.
    HashTable,
    /// `OPTIONS`: the options the database was last opened read-write with.
    Options,
    /// A temporary file (`*.tmp`).
    Temp,
    /// `LOG` or a rotated `LOG.old.N`: the information log.
    InfoLog,
}

/// `dir/CURRENT`.
pub fn current_file(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// `dir/LOCK`.
pub fn lock_file(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// `dir/MANIFEST-NNNNNN`.
pub fn manifest_file(dir: &Path, number: FileNumber) -> PathBuf {
    dir.join(format!("MANIFEST-{:06}", number.0))
}

/// `dir/NNNNNN.sst`.
pub fn table_file(dir: &Path, number: FileNumber) -> PathBuf {
    dir.join(format!("{:06}.sst", number.0))
}

/// `dir/NNNNNNNN.vlog`.
pub fn segment_file(dir: &Path, id: SegmentId) -> PathBuf {
    dir.join(format!("{:08}.vlog", id.0))
}

/// `dir/HASHINDEX`.
pub fn hash_table_file(dir: &Path) -> PathBuf {
    dir.join("HASHINDEX")
}

/// `dir/OPTIONS`.
pub fn options_file(dir: &Path) -> PathBuf {
    dir.join("OPTIONS")
}

/// `dir/LOG`.
pub fn info_log_file(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

/// `dir/LOG.old.N`: the `n`th newest rotated LOG.
pub fn old_info_log_file(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("LOG.old.{n}"))
}

/// `dir/NAME.tmp`.
pub fn temp_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.tmp"))
}

/// Classifies a directory entry name; `None` for files splitkv does not own.
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    if name == "CURRENT" {
        return Some(FileKind::Current);
    }
    if name == "LOCK" {
        return Some(FileKind::Lock);
    }
    if name == "HASHINDEX" {
        return Some(FileKind::HashTable);
    }
    if name == "OPTIONS" {
        return Some(FileKind::Options);
    }
    if name == "LOG" || name.strip_prefix("LOG.old.").is_some_and(|n| n.parse::<u64>().is_ok()) {
        return Some(FileKind::InfoLog);
    }
    if name.ends_with(".tmp") {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(|n| FileKind::Manifest(FileNumber(n)));
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(|n| FileKind::Table(FileNumber(n)));
    }
    if let Some(n) = name.strip_suffix(".vlog") {
        return n.parse().ok().map(|n| FileKind::Segment(SegmentId(n)));
    }
    None
}

/// Ids of the value-log segment files in `dir`, ascending.
pub fn list_segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<SegmentId>> {
    let mut ids: Vec<SegmentId> = fs
        .list(dir)?
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::Segment(id)) => Some(id),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/db");
        let name = |p: PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(parse_file_name(&name(table_file(d, FileNumber(12)))), Some(FileKind::Table(FileNumber(12))));
        assert_eq!(parse_file_name(&name(segment_file(d, SegmentId(3)))), Some(FileKind::Segment(SegmentId(3))));
        assert_eq!(parse_file_name(&name(manifest_file(d, FileNumber(5)))), Some(FileKind::Manifest(FileNumber(5))));
        assert_eq!(parse_file_name("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse_file_name(&name(options_file(d))), Some(FileKind::Options));
        assert_eq!(parse_file_name("notes.txt"), None);
        assert_eq!(parse_file_name("LOG"), Some(FileKind::InfoLog));
        assert_eq!(parse_file_name(&name(old_info_log_file(d, 3))), Some(FileKind::InfoLog));
        assert_eq!(parse_file_name("LOG.old.x"), None);
    }
}
