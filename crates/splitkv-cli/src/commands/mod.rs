//! The subcommands, one module per family, and what they share: output settings, exit codes,
//! the tool's error type and the ways of getting at a database.
//!
//! Every command uses the options the database stores in its `OPTIONS` file ([`stored_options`];
//! defaults, with the index its files show, for a database made before splitkv stored options).
//! Commands that only read ([`open_read_only`]: `get`, `scan`, `info`, `stats`, the pointer pass
//! of `verify`) open the database read-only, which takes no lock and writes nothing, so they work
//! on a database that another process has open. Commands that write ([`open_db`]: `put`,
//! `delete`, `compact`, `gc`, `checkpoint`) open it read-write and fail with a clear message when
//! another process has it open. `verify` of a closed database holds the directory lock itself
//! while it reads the files.

pub mod admin;
pub mod dump;
pub mod hash;
pub mod info;
pub mod kv;
pub mod property;
pub mod transfer;
pub mod verify;

use std::fmt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use splitkv::filenames::{current_file, hash_table_file};
use splitkv::fs::{FileSystem, OsFileSystem};
use splitkv::{Db, Error, IndexKind, Options};

use crate::format::ByteStyle;
use crate::hex;

/// How a command prints.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    /// Spelling of keys and values (also how they are read from the command line).
    pub style: ByteStyle,
    /// JSON instead of text.
    pub json: bool,
}

impl Output {
    /// Reads a key or value given on the command line: hex digits with `--hex`, else its bytes.
    pub fn parse_bytes(&self, text: &str) -> Result<Vec<u8>, CliError> {
        match self.style {
            ByteStyle::Hex => hex::decode(text).map_err(CliError::Usage),
            ByteStyle::Escaped => Ok(text.as_bytes().to_vec()),
        }
    }
}

/// How a command that did its job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done.
    Success,
    /// The key asked for does not exist.
    NotFound,
    /// `verify` found problems.
    ProblemsFound,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::NotFound | Exit::ProblemsFound => ExitCode::from(1),
        }
    }
}

/// Why a command could not do its job.
#[derive(Debug)]
pub enum CliError {
    /// The engine refused or failed (locked, I/O, corruption, ...). Exit code 3.
    Db(Error),
    /// Bad input on the command line. Exit code 2.
    Usage(String),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit(&self) -> ExitCode {
        match self {
            CliError::Db(_) => ExitCode::from(3),
            CliError::Usage(_) => ExitCode::from(2),
        }
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError::Db(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Db(Error::Io(e))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Db(Error::Locked(dir)) => write!(
                f,
                "database at {} is locked: another process has it open. Nothing was changed; \
                 stop that process (or wait for it to close the database) and try again",
                dir.display()
            ),
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
        }
    }
}

/// The file system the tool works on.
pub fn os_fs() -> Arc<dyn FileSystem> {
    OsFileSystem::shared()
}

/// Refuses a path that does not hold a database, so that no command creates one by accident.
pub fn require_db(dir: &Path) -> Result<(), CliError> {
    if !os_fs().exists(&current_file(dir)) {
        return Err(CliError::Usage(format!("{} is not a splitkv database (no CURRENT file)", dir.display())));
    }
    Ok(())
}

/// Buckets of a hash table this tool creates; it grows as keys arrive. An existing table's
/// size comes from its file, so this matters only for a new database.
pub const HASH_CAPACITY: u64 = 1 << 16;

/// Which index a database uses (`--index` on the commands that can create one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IndexChoice {
    /// Memtable and leveled SSTables.
    Lsm,
    /// The persistent hash table (SSHKV mode).
    Hash,
}

impl IndexChoice {
    /// The engine's index kind for this choice.
    pub fn kind(self) -> IndexKind {
        match self {
            IndexChoice::Lsm => IndexKind::Lsm,
            IndexChoice::Hash => IndexKind::Hash { capacity: HASH_CAPACITY, shards: 1 },
        }
    }

    /// `lsm` or `hash`, as on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            IndexChoice::Lsm => "lsm",
            IndexChoice::Hash => "hash",
        }
    }
}

/// The index of the database at `dir`, `None` if there is no database: the one its stored
/// options name, else (a database from before stored options) hash when its table file exists
/// and LSM otherwise.
pub fn existing_index(dir: &Path) -> Option<IndexChoice> {
    let fs = os_fs();
    if !fs.exists(&current_file(dir)) {
        return None;
    }
    match Options::load(dir) {
        Ok(Some(options)) => Some(match options.index {
            IndexKind::Lsm => IndexChoice::Lsm,
            IndexKind::Hash { .. } => IndexChoice::Hash,
        }),
        _ if fs.exists(&hash_table_file(dir)) => Some(IndexChoice::Hash),
        _ => Some(IndexChoice::Lsm),
    }
}

/// The options the database at `dir` stores (see [`Options::load`]); for a database without an
/// `OPTIONS` file, the defaults with the index its files show. A directory without a database
/// is a usage error; a damaged `OPTIONS` file is an error that says so.
pub fn stored_options(dir: &Path) -> Result<Options, CliError> {
    require_db(dir)?;
    if let Some(options) = Options::load(dir)? {
        return Ok(options);
    }
    let index = existing_index(dir).unwrap_or(IndexChoice::Lsm);
    Ok(Options { index: index.kind(), create_if_missing: false, ..Options::default() })
}

/// Opens the database at `dir` read-write with its stored options. With `create`, makes a new
/// one with that index (and default options) if there is none; without, a directory without a
/// database is a usage error.
pub fn open_db(dir: &Path, create: Option<IndexChoice>) -> Result<Db, CliError> {
    let options = match create {
        Some(index) if existing_index(dir).is_none() => {
            Options { index: index.kind(), create_if_missing: true, ..Options::default() }
        }
        _ => stored_options(dir)?,
    };
    Ok(Db::open(dir, options)?)
}

/// Opens the database at `dir` read-only with its stored options: no lock, no writes, so it
/// works beside a writer in another process (a hash-index database excepted, which the engine
/// refuses to read while a writer changes its table).
pub fn open_read_only(dir: &Path) -> Result<Db, CliError> {
    Ok(Db::open_read_only(dir, stored_options(dir)?)?)
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json(value: &serde_json::Value) {
    outln!("{}", crate::format::json(value));
}
