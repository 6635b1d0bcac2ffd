//! [`Db::checkpoint`]: an openable copy of the database, as of one sequence number, in a new
//! directory on the same file system (RocksDB's `Checkpoint::CreateCheckpoint`). Restoring is
//! opening the copy (or moving it into place first).
//!
//! What goes in, and how:
//! - SSTables and sealed value-log segments never change again: hard links, which cost no copy
//!   (a copy where the file system has none, or across file systems);
//! - the active segment is copied up to the log head, which lies between batches;
//! - a fresh MANIFEST holding one snapshot edit of the catalog, `OPTIONS`, and (hash index) a
//!   copy of the hash table are written; `CURRENT` comes last, so a directory without it is an
//!   unfinished checkpoint, never a database.
//!
//! Consistency: with the write path held (no batch half appended or half applied, no index
//! checkpoint half done), the checkpoint notes the last sequence number and the log head, hands
//! buffered log bytes to the OS, takes the catalog's state (tables and log head, recorded by one
//! edit) and copies the hash table; then it lets writers go on. The copy holds exactly the
//! writes up to that sequence number: the catalog's tables and log head cover a prefix of them,
//! and the log from that head to the noted end holds the rest, which opening the copy replays.
//!
//! Files in the copy stay valid while it is made: the captured `Version` is held, so the LSM
//! deletes none of its tables, and GC is held off (`GarbageCollector::hold_runs`), so no segment
//! is released or punched. Afterwards GC still never punches a hole in a segment with a second
//! name (`vlog::gc`), since the hole would show in the checkpoint's file too, where the records
//! may still be live; it copies such a segment instead, and deleting the database's name for it
//! leaves the checkpoint's. The same rule keeps the checkpoint, once opened, from punching the
//! database's files.
//!
//! Thread-safety: runs beside reads and writes; writers wait only while the state is noted (and,
//! with the hash index, while its table is copied).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::filenames::{manifest_file, segment_file, table_file};
use crate::fs::FileSystem;
use crate::options_file::write_options_file;
use crate::types::{FileNumber, SequenceNumber};
use crate::version::manifest::{write_current, ManifestWriter};
use crate::vlog::SegmentInfo;

/// Bytes copied per read and append.
const COPY_CHUNK: u64 = 1 << 20;

/// What [`Db::checkpoint`] made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The checkpoint holds exactly the writes with sequence numbers up to this one.
    pub sequence: u64,
    /// Files hard-linked (SSTables and sealed segments).
    pub files_linked: usize,
    /// Files written (the active segment, copies where linking was not possible, the hash
    /// table, MANIFEST, OPTIONS and CURRENT).
    pub files_copied: usize,
    /// Bytes of data copied or written: the active segment's prefix, files that could not be
    /// linked, the hash table and the MANIFEST (`OPTIONS` and `CURRENT` are a few hundred bytes
    /// more).
    pub bytes_copied: u64,
}

impl Db {
    /// Writes an openable copy of the database, as of one sequence number, into `dir`, which
    /// must not exist yet (missing parents are created) and must be on the same file system for
    /// the immutable files to be hard-linked rather than copied. Open the copy like any database to
    /// restore it; module `db::checkpoint` and `docs/design.md` describe what it shares with
    /// this database and why that is safe. A failure removes what it wrote. A read-only
    /// handle cannot checkpoint ([`Error::ReadOnly`]).
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        let target = dir.as_ref();
        let inner = &self.inner;
        inner.check_poisoned()?;
        let fs = Arc::clone(&inner.options.fs);
        if fs.exists(target) {
            return Err(Error::InvalidArgument(format!("checkpoint directory {} already exists", target.display())));
        }
        fs.create_dir_all(target)?;
        let made = inner.write_checkpoint(target);
        if made.is_err() {
            // Best effort: what is left has no CURRENT, so it never opens as a database.
            if let Ok(names) = fs.list(target) {
                for name in names {
                    let _ = fs.remove(&target.join(name));
                }
            }
            let _ = fs.remove_dir(target);
        }
        made
    }
}

/// The database's state as a checkpoint captures it, with the write path held.
struct Captured {
    sequence: SequenceNumber,
    /// Every segment with its length; the log head's segment (if it exists) is the active one.
    segments: Vec<SegmentInfo>,
    active: Option<SegmentInfo>,
}

impl DbInner {
    fn write_checkpoint(&self, target: &Path) -> Result<CheckpointInfo> {
        let fs = self.options.fs.as_ref();
        let mut info = CheckpointInfo::default();
        // Before the write path: a GC run takes its lock first and then writes.
        let _no_gc = self.gc.hold_runs();
        let (captured, snapshot, version) = {
            let _alone = self.commit_gate.alone();
            self.check_poisoned()?;
            self.vlog.flush_buffer()?;
            let head = self.vlog.head();
            let segments = self.vlog.segments();
            let active = segments.iter().find(|s| s.id == head.segment).copied();
            let sequence = SequenceNumber(self.last_sequence.load(Ordering::Acquire));
            let (snapshot, version) = {
                let set = self.catalog.lock();
                (set.snapshot(), set.current())
            };
            let written = self.index.write_checkpoint_state(fs, target)?;
            if written > 0 {
                info.files_copied += 1;
                info.bytes_copied += written;
            }
            (Captured { sequence, segments, active }, snapshot, version)
        };
        info.sequence = captured.sequence.0;

        for seg in &captured.segments {
            let (from, to) = (segment_file(&self.dir, seg.id), segment_file(target, seg.id));
            match captured.active {
                // Appends go on past `len`; the bytes before it never change.
                Some(active) if active.id == seg.id => copy_prefix(fs, &from, &to, active.len, &mut info)?,
                _ => link_or_copy(fs, &from, &to, &mut info)?,
            }
        }
        // `version` is held until here, so none of its tables is deleted meanwhile.
        for (_, file) in version.all_files() {
            link_or_copy(fs, &table_file(&self.dir, file.number), &table_file(target, file.number), &mut info)?;
        }
        drop(version);

        let mut snapshot = snapshot;
        let manifest_number = FileNumber(snapshot.next_file_number.unwrap_or(1));
        snapshot.next_file_number = Some(manifest_number.0 + 1);
        let mut manifest = ManifestWriter::create(fs, &manifest_file(target, manifest_number))?;
        manifest.add_record(&snapshot.encode())?;
        manifest.sync()?;
        info.files_copied += 1;
        info.bytes_copied += manifest.len();
        drop(manifest);
        write_options_file(fs, target, &self.options)?;
        info.files_copied += 1;
        // Every link and file made durable, then the one name that makes it a database.
        fs.sync_dir(target)?;
        write_current(fs, target, manifest_number)?;
        info.files_copied += 1;
        Ok(info)
    }
}

/// Hard-links `from` as `to`, or copies it whole where the file system cannot link.
fn link_or_copy(fs: &dyn FileSystem, from: &Path, to: &Path, info: &mut CheckpointInfo) -> Result<()> {
    if fs.hard_link(from, to)? {
        info.files_linked += 1;
        return Ok(());
    }
    let len = fs.file_size(from)?;
    copy_prefix(fs, from, to, len, info)
}

/// Copies the first `len` bytes of `from` into a new file `to` and syncs it.
fn copy_prefix(fs: &dyn FileSystem, from: &Path, to: &Path, len: u64, info: &mut CheckpointInfo) -> Result<()> {
    let source = fs.open(from)?;
    let mut copy = fs.create(to)?;
    let mut buf = Vec::new();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(COPY_CHUNK);
        buf.resize(n as usize, 0);
        source.read_exact_at(at, &mut buf)?;
        copy.append(&buf)?;
        at += n;
    }
    copy.sync()?;
    info.files_copied += 1;
    info.bytes_copied += len;
    Ok(())
}
