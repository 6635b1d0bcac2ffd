//! [`Db::open_read_only`]: a database opened without its lock, beside a writer that may hold it
//! in another process, writing nothing and starting no background work.
//!
//! What the handle sees is the database as of its open: the catalog (MANIFEST) the writer had
//! recorded, and every complete batch the log held then, replayed into memory (a batch the
//! writer was still appending ends the view there, as a torn tail ends recovery, but nothing is
//! cut). That is everything written before the open began that had reached the file system: all
//! synced writes, and unsynced ones the writer had handed to the OS. Later writes are not seen;
//! reopen for a newer view.
//!
//! Making that view consistent. The writer changes the directory while the reader reads it: it
//! appends MANIFEST edits, switches to a new MANIFEST, deletes tables after compactions and
//! segments after GC. The reader therefore (1) notes the MANIFEST that `CURRENT` names and its
//! length, (2) recovers the catalog from it, (3) opens every segment file and the files of the
//! catalog's tables, then (4) notes `CURRENT` and the MANIFEST length again. A writer removes a
//! file only after an edit that no longer lists it, so if nothing changed between (1) and (4)
//! every file the catalog needs was there at (3), and it is open now. Otherwise the attempt is
//! repeated (a missing file met at (3) also means the catalog was outdated).
//!
//! Guarantees while open. The handle keeps the files of its view open (all its segments, and
//! its tables up to `max_open_files`; more are opened on first use), so on POSIX file systems
//! what the writer deletes afterwards stays readable through it. Reads never return data of a
//! state other than the view's: every value read is checked (record checksum, length, key), so
//! a record the writer's GC punched out since the open, or a table beyond the pinned ones that
//! it deleted, reads as an error (`Corruption` or `Io`), never as another value. Segment files
//! are read without memory maps, because the writer's recovery may cut a torn tail off its
//! newest segment while the reader reads it.
//!
//! The hash index is the exception to "no lock": its table file is updated in place, so a copy
//! read while a writer checkpoints into it could mix two states. A hash-index database is opened
//! read-only only while no writer holds it: the lock is taken for the open (the table is copied
//! into memory, the log tail replayed) and released before it returns; with a live writer the
//! open fails with [`Error::InvalidArgument`] saying so.
//!
//! Thread-safety: as for any [`Db`]; writes fail with [`Error::ReadOnly`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::keyspace::Keyspaces;
use super::open::{new_collector, Recovered};
use super::Db;
use crate::error::{Error, Result};
use crate::filenames::{current_file, lock_file, manifest_file, table_file};
use crate::fs::{FileLock, FileSystem, RandomAccessFile};
use crate::info_log::InfoLog;
use crate::options::{IndexKind, Options};
use crate::options_file::check_shape;
use crate::types::FileNumber;
use crate::version::manifest::read_current;
use crate::version::{Catalog, VersionSet};
use crate::vlog::{ValueLog, VlogOptions};

/// Attempts at a consistent view before giving up on a database that changes too fast.
const VIEW_ATTEMPTS: u64 = 100;

impl Db {
    /// Opens the database at `path` for reading only (RocksDB's `OpenForReadOnly`), beside a
    /// writer that may hold it open in another process: takes no lock (except briefly for a
    /// hash-index database, see below), writes nothing, starts no background work. The handle
    /// sees the database as of this call; module `db::read_only` and `docs/design.md` say what
    /// it guarantees while the writer goes on. Writes, flushes, compactions, GC and checkpoints
    /// fail with [`Error::ReadOnly`].
    ///
    /// Open with the options the database was made with ([`Options::load`]); a shape option
    /// that differs from the stored ones is [`Error::InvalidArgument`]. `create_if_missing` is
    /// ignored: a path without a database is an error.
    ///
    /// A hash-index database cannot be read while another process has it open (its table is
    /// changed in place): then this fails with [`Error::InvalidArgument`]; otherwise it holds
    /// the lock while it copies the table and replays the log, and releases it before returning.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.fs);
        if !fs.exists(&current_file(&dir)) {
            return Err(Error::InvalidArgument(format!("{} has no database", dir.display())));
        }
        check_shape(&dir, &options)?;
        let _no_writer = match options.index {
            IndexKind::Lsm => None,
            IndexKind::Hash { .. } => Some(lock_hash_database(fs.as_ref(), &dir)?),
        };
        let view = View::read(&fs, &dir, &options)?;
        let catalog = Arc::new(Catalog::read_only(view.versions));
        let (log_head, recorded) = catalog.log_segments();
        // Segments GC released whose files the writer has not deleted yet.
        for seg in view.vlog.segments() {
            if seg.id < log_head.segment && !recorded.contains_key(&seg.id) {
                view.vlog.forget_segment(seg.id);
            }
        }
        // No LOG file: the writer owns it (and rotates it at its opens).
        let info_log = Arc::new(InfoLog::silent(&dir));
        let recovered =
            Recovered::open_index(&options, &dir, catalog, Arc::new(view.vlog), true, view.tables, info_log)?;
        recovered.replay_tail(&options, &dir, log_head)?;
        let gc = new_collector(&options);
        let inner = recovered.into_inner(options, dir, gc, None);
        let db = Db { inner, gc_thread: Mutex::new(None), front: None, keyspaces: Keyspaces::default() };
        db.keyspaces.load(&db)?;
        Ok(db)
    }

    /// True if this handle was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The catalog this handle reads (the MANIFEST's state: levels, segments and their garbage,
    /// the log head), for tools such as `splitkv info` and `verify`; not a stable interface.
    #[doc(hidden)]
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }
}

/// Takes the lock of a hash-index database for a read-only open, or says why it cannot.
fn lock_hash_database(fs: &dyn FileSystem, dir: &Path) -> Result<Box<dyn FileLock>> {
    fs.lock(&lock_file(dir)).map_err(|e| match e {
        Error::Locked(_) => Error::InvalidArgument(format!(
            "the hash-index database at {} cannot be opened read-only while another process has it open: \
             the writer updates its hash table in place, so no consistent copy can be read; close it, or \
             take a checkpoint in the writer (Db::checkpoint) and open that",
            dir.display()
        )),
        other => other,
    })
}

/// A consistent view of the database's files (see the module header).
struct View {
    versions: VersionSet,
    vlog: ValueLog,
    tables: HashMap<FileNumber, Arc<dyn RandomAccessFile>>,
}

impl View {
    fn read(fs: &Arc<dyn FileSystem>, dir: &Path, options: &Options) -> Result<View> {
        let mut last_error = None;
        for attempt in 0..VIEW_ATTEMPTS {
            let before = manifest_mark(fs.as_ref(), dir);
            let view = View::read_once(fs, dir, options);
            let after = manifest_mark(fs.as_ref(), dir);
            let stable = matches!((&before, &after), (Ok(b), Ok(a)) if a == b);
            match view {
                Ok(view) if stable => return Ok(view),
                // Damage, not a race: the MANIFEST did not move and every file was there.
                Err(e) if stable && !is_not_found(&e) => return Err(e),
                Ok(_) => {}
                Err(e) => last_error = Some(e),
            }
            // Give the writer time to finish what it is switching (a new MANIFEST, a deletion).
            std::thread::sleep(Duration::from_millis((attempt + 1).min(20)));
        }
        Err(last_error.unwrap_or_else(|| {
            Error::InvalidArgument(format!(
                "the MANIFEST of {} changed during each of {VIEW_ATTEMPTS} attempts to read a consistent view",
                dir.display()
            ))
        }))
    }

    fn read_once(fs: &Arc<dyn FileSystem>, dir: &Path, options: &Options) -> Result<View> {
        let versions = VersionSet::recover(Arc::clone(fs), dir, options.num_levels)?;
        let vlog = ValueLog::open_read_only(
            Arc::clone(fs),
            dir,
            VlogOptions { segment_size: options.segment_size, buffer_size: options.vlog_buffer_size },
        )?;
        let mut tables = HashMap::new();
        for (_, file) in versions.current().all_files().take(options.max_open_files) {
            tables.insert(file.number, fs.open(&table_file(dir, file.number))?);
        }
        Ok(View { versions, vlog, tables })
    }
}

/// Which MANIFEST `CURRENT` names and how long it is: any edit or MANIFEST switch changes it.
fn manifest_mark(fs: &dyn FileSystem, dir: &Path) -> Result<(FileNumber, u64)> {
    let number = read_current(fs, dir)?;
    Ok((number, fs.file_size(&manifest_file(dir, number))?))
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
}
