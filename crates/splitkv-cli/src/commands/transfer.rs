//! `export` and `import`: every key-value pair of a database to a portable pairs file and back
//! (format in `docs/format/export.md`, code in `crate::pairs`).
//!
//! `export` opens the database read-only (so it works while another process has it open) and
//! reads through one iterator, so the file holds the database as of one moment (the iterator's
//! snapshot), in key order. `import` checks the whole file (every record's checksum,
//! the count and the file checksum) before it writes anything, so a damaged file changes
//! nothing; it then writes the pairs in batches of about 1 MiB, syncing the last, into a new
//! or an existing database (existing keys are overwritten, others kept). A pairs file holds one
//! keyspace: the default one, or the one `--keyspace` names (`import --keyspace` creates it).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use serde_json::json;
use splitkv::{Error, ReadOptions, WriteBatch, WriteOptions};

use super::kv::existing_keyspace;

use super::{open_db, open_read_only, print_json, CliError, Exit, IndexChoice, Output};
use crate::pairs::{PairReader, PairWriter, PairsError};

/// Bytes of keys and values per import batch.
const IMPORT_BATCH_BYTES: usize = 1 << 20;

/// Writes every pair of the database at `dir` to `file`.
pub fn export(dir: &Path, keyspace: Option<&str>, file: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_read_only(dir)?;
    let ks = existing_keyspace(&db, keyspace)?;
    let mut writer = PairWriter::new(BufWriter::new(File::create(file)?))?;
    let opts = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    let mut cursor = match &ks {
        Some(ks) => ks.iter(opts)?,
        None => db.iter(opts)?,
    };
    cursor.seek_to_first()?;
    while cursor.valid() {
        writer.pair(cursor.key(), cursor.value())?;
        cursor.next()?;
    }
    drop(cursor);
    drop(ks);
    let (pairs, bytes) = writer.finish()?;
    db.close()?;
    if out.json {
        print_json(&json!({ "file": file.display().to_string(), "pairs": pairs, "bytes": bytes }));
    } else {
        outln!("exported {pairs} pairs ({bytes} bytes) to {}", file.display());
    }
    Ok(Exit::Success)
}

/// Reads `file` twice: once to check it whole, once to write its pairs into the database at
/// `dir` (created with `index` if there is none).
pub fn import(
    dir: &Path,
    keyspace: Option<&str>,
    file: &Path,
    index: Option<IndexChoice>,
    out: Output,
) -> Result<Exit, CliError> {
    let open_pairs = || -> Result<PairReader<BufReader<File>>, CliError> {
        let f = File::open(file)?;
        let len = f.metadata()?.len();
        PairReader::new(BufReader::new(f), len).map_err(|e| pairs_error(file, e))
    };
    let mut check = open_pairs()?;
    let mut total = 0u64;
    while check.next_pair().map_err(|e| pairs_error(file, e))?.is_some() {
        total += 1;
    }
    super::kv::check_index_choice(dir, index)?;
    let db = open_db(dir, Some(index.unwrap_or(IndexChoice::Lsm)))?;
    let ks = keyspace.map(|name| db.keyspace(name)).transpose()?;
    let mut reader = open_pairs()?;
    let mut batch = WriteBatch::new();
    let mut batch_bytes = 0;
    while let Some((key, value)) = reader.next_pair().map_err(|e| pairs_error(file, e))? {
        batch_bytes += key.len() + value.len();
        match &ks {
            Some(ks) => batch.put_in(ks, key, value),
            None => batch.put(key, value),
        };
        if batch_bytes >= IMPORT_BATCH_BYTES {
            db.write(&WriteOptions::default(), std::mem::take(&mut batch))?;
            batch_bytes = 0;
        }
    }
    // Syncing the last batch makes every earlier one durable too (one log, written in order).
    db.write(&WriteOptions { sync: true }, batch)?;
    drop(ks);
    db.close()?;
    if out.json {
        print_json(&json!({ "file": file.display().to_string(), "pairs": total }));
    } else {
        outln!("imported {total} pairs from {}", file.display());
    }
    Ok(Exit::Success)
}

fn pairs_error(file: &Path, e: PairsError) -> CliError {
    match e {
        PairsError::Io(e) => CliError::Db(Error::Io(e)),
        PairsError::Corrupt { offset, reason } => CliError::Db(Error::corruption(file, offset, reason)),
    }
}
