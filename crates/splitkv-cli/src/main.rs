//! `splitkv`: the admin tool for splitkv databases.
//!
//! Parses the command line ([`Cli`]) and hands each subcommand to its module under `commands`.
//! Every command opens the database with the options stored in it (`OPTIONS`). Commands that
//! change nothing on disk (`get`, `scan`, `info`, `stats`, `verify`, `dump`) open it read-only or
//! read its files directly: they take no lock, write nothing and start no background work, so
//! they work on a database that another process has open (except a hash-index one, whose table
//! that process changes in place).
//!
//! Exit codes: 0 success; 1 key not found (`get`) or problems found (`verify`); 2 usage error or
//! a path without a database; 3 any other error (a write command on a locked database, I/O,
//! corruption met while serving the command).

/// `println!` that ends the process quietly when stdout is closed early (`splitkv dump ... |
/// head`) instead of panicking; the tool only prints after its writes are done.
macro_rules! outln {
    () => {
        $crate::format::emit_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::format::emit_line(format_args!($($arg)*))
    };
}

mod commands;
mod format;
mod hex;
mod pairs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{CliError, IndexChoice};

/// Admin tool for splitkv databases.
#[derive(Debug, Parser)]
#[command(name = "splitkv", version, about)]
struct Cli {
    /// Keys and values are hex digits, on the command line and in output.
    #[arg(long, global = true)]
    hex: bool,
    /// Machine-readable JSON output (info, verify, dump, scan, stats).
    #[arg(long, global = true)]
    json: bool,
    /// The keyspace that get, put, batchput, delete, deleterange, scan, export and import
    /// address (put, batchput and import create it); default: the database's default keyspace.
    #[arg(long, global = true, value_name = "NAME")]
    keyspace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the value of KEY (raw bytes, or hex with --hex); exit 1 if it is missing.
    Get { db: PathBuf, key: String },
    /// Set KEY to VALUE (read from standard input when VALUE is omitted); creates DB if there is
    /// none.
    Put {
        db: PathBuf,
        key: String,
        value: Option<String>,
        /// Index of a database this command creates [default: lsm]; an existing database keeps
        /// its own, and naming another is an error.
        #[arg(long, value_enum)]
        index: Option<IndexChoice>,
    },
    /// Remove KEY.
    Delete { db: PathBuf, key: String },
    /// List entries in key order, from --from (inclusive) to --to (exclusive).
    Scan {
        db: PathBuf,
        /// First key to list (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Key to stop before (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Most entries to list.
        #[arg(long = "max_keys", visible_aliases = ["max-keys", "limit"])]
        limit: Option<usize>,
        /// List keys only.
        #[arg(long)]
        keys_only: bool,
        /// List from the last key of the range down to the first.
        #[arg(long)]
        reverse: bool,
    },
    /// Set every KEY to its VALUE in one atomic batch; creates DB if there is none.
    Batchput {
        db: PathBuf,
        /// KEY VALUE [KEY VALUE ...]
        #[arg(required = true, num_args = 2..)]
        pairs: Vec<String>,
        /// Index of a database this command creates [default: lsm].
        #[arg(long, value_enum)]
        index: Option<IndexChoice>,
    },
    /// Remove every key in [FROM, TO) with one range delete.
    Deleterange { db: PathBuf, from: String, to: String },
    /// Print a named property of the database (`splitkv.stats`, `splitkv.levelstats`,
    /// `splitkv.estimate-num-keys`, `splitkv.approximate-sizes[:START:END]`, ...); exit 1 if
    /// there is no such property.
    #[command(name = "get_property", alias = "get-property")]
    GetProperty { db: PathBuf, name: String },
    /// Write every key-value pair to FILE in the portable pairs format (docs/format/export.md).
    Export { db: PathBuf, file: PathBuf },
    /// Check FILE (a pairs file from `export`) whole, then write its pairs; creates DB if there
    /// is none.
    #[command(alias = "load")]
    Import {
        db: PathBuf,
        file: PathBuf,
        /// Index of a database this command creates [default: lsm].
        #[arg(long, value_enum)]
        index: Option<IndexChoice>,
    },
    /// List the database's keyspaces, one name a line.
    Keyspaces { db: PathBuf },
    /// Levels (or the hash table), value-log segments, log head, sequence number, options and
    /// space amplification.
    Info { db: PathBuf },
    /// Check every SSTable block, every value-log record, the hash table's chains and slots, and
    /// every value pointer.
    Verify {
        db: PathBuf,
        /// Check files only; skip opening the database to resolve value pointers.
        #[arg(long)]
        files_only: bool,
    },
    /// Print the contents of one file: `dump FILE` tells the kind by the file's name, or name it.
    #[command(args_conflicts_with_subcommands = true, arg_required_else_help = true)]
    Dump {
        #[command(subcommand)]
        what: Option<DumpTarget>,
        /// NNNNNN.sst, NNNNNNNN.vlog, MANIFEST-NNNNNN or HASHINDEX.
        file: Option<PathBuf>,
    },
    /// Compact the whole key range down through every level.
    Compact { db: PathBuf },
    /// Value-log garbage collection: flush, compact, clean every segment holding garbage.
    Gc { db: PathBuf },
    /// Rewrite the value log's live values in key order (over `--from`..=`--to`, every key by
    /// default) so later scans read the log sequentially, compact the range in the index, then
    /// release the segments it emptied. LSM index only.
    RewriteLog {
        db: PathBuf,
        /// First key to rewrite (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key to rewrite (inclusive).
        #[arg(long)]
        to: Option<String>,
    },
    /// Write an openable copy of DB into DIR (which must not exist, on the same file system):
    /// SSTables and sealed segments hard-linked, the rest copied. Restore by opening DIR.
    Checkpoint { db: PathBuf, dir: PathBuf },
    /// Engine statistics of the database as opened (read-only) by this tool.
    Stats { db: PathBuf },
}

#[derive(Debug, Subcommand)]
enum DumpTarget {
    /// Every entry of an SSTable file.
    Sst { file: PathBuf },
    /// Every record of a value-log segment file.
    Segment { file: PathBuf },
    /// Every version edit in the MANIFEST that CURRENT names (or a MANIFEST file given directly).
    Manifest { db: PathBuf },
    /// The geometry, every non-empty slot and the chain lengths of a hash table (HASHINDEX).
    HashTable { file: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = commands::Output { style: format::ByteStyle::from_hex_flag(cli.hex), json: cli.json };
    let keyspace = cli.keyspace.as_deref();
    let result = match cli.command {
        Command::Get { db, key } => commands::kv::get(&db, keyspace, &key, out),
        Command::Put { db, key, value, index } => commands::kv::put(&db, keyspace, &key, value.as_deref(), index, out),
        Command::Delete { db, key } => commands::kv::delete(&db, keyspace, &key, out),
        Command::Scan { db, from, to, limit, keys_only, reverse } => {
            let scan = commands::kv::ScanArgs { keyspace, from, to, limit, keys_only, reverse };
            commands::kv::scan(&db, &scan, out)
        }
        Command::Keyspaces { db } => commands::kv::keyspaces(&db, out),
        Command::Batchput { db, pairs, index } => commands::kv::batchput(&db, keyspace, &pairs, index, out),
        Command::Deleterange { db, from, to } => commands::kv::deleterange(&db, keyspace, &from, &to, out),
        Command::GetProperty { db, name } => commands::property::get_property(&db, &name, out),
        Command::Export { db, file } => commands::transfer::export(&db, keyspace, &file, out),
        Command::Import { db, file, index } => commands::transfer::import(&db, keyspace, &file, index, out),
        Command::Info { db } => commands::info::run(&db, out),
        Command::Verify { db, files_only } => commands::verify::run(&db, files_only, out),
        Command::Dump { what: Some(DumpTarget::Sst { file }), .. } => commands::dump::sst(&file, out),
        Command::Dump { what: Some(DumpTarget::Segment { file }), .. } => commands::dump::segment(&file, out),
        Command::Dump { what: Some(DumpTarget::Manifest { db }), .. } => commands::dump::manifest(&db, out),
        Command::Dump { what: Some(DumpTarget::HashTable { file }), .. } => commands::dump::hash_table(&file, out),
        Command::Dump { what: None, file: Some(file) } => commands::dump::by_name(&file, out),
        Command::Dump { what: None, file: None } => {
            Err(CliError::Usage("dump needs a file: dump FILE or dump sst|segment|manifest|hash-table FILE".into()))
        }
        Command::Compact { db } => commands::admin::compact(&db, out),
        Command::Gc { db } => commands::admin::gc(&db, out),
        Command::RewriteLog { db, from, to } => commands::admin::rewrite_log(&db, from.as_deref(), to.as_deref(), out),
        Command::Checkpoint { db, dir } => commands::admin::checkpoint(&db, &dir, out),
        Command::Stats { db } => commands::admin::stats(&db, out),
    };
    match result {
        Ok(exit) => exit.into(),
        Err(e) => report(e),
    }
}

fn report(e: CliError) -> ExitCode {
    if let CliError::Db(splitkv::Error::Io(io)) = &e {
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
    }
    eprintln!("splitkv: {e}");
    e.exit()
}
