//! Point reads and writes and range scans: `get`, `put`, `batchput`, `delete`, `deleterange`,
//! `scan`, in the default keyspace or the one `--keyspace` names; and `keyspaces`, which lists
//! them.
//!
//! Reads open the database read-only, so they work while another process has it open. Writes
//! open it read-write and are synced before the command returns: a one-shot process has no later
//! moment to make them durable; `batchput` writes all its pairs as one atomic batch. `get` prints
//! the value's raw bytes (so `splitkv get DB k > file` round-trips) unless `--hex` or `--json`
//! asks otherwise; `scan` prints escaped text, one `key<TAB>value` line per entry, in key order
//! or, with `--reverse`, from the last key down.

use std::io::{Read, Write};
use std::ops::Bound;
use std::path::Path;

use serde_json::json;
use splitkv::{Db, Keyspace, ReadOptions, WriteBatch, WriteOptions};

use super::{existing_index, open_db, open_read_only, print_json, CliError, Exit, IndexChoice, Output};
use crate::format::ByteStyle;

/// Prints the value of `key`; [`Exit::NotFound`] if there is none.
pub fn get(dir: &Path, keyspace: Option<&str>, key: &str, out: Output) -> Result<Exit, CliError> {
    let key = out.parse_bytes(key)?;
    let db = open_read_only(dir)?;
    let value = match existing_keyspace(&db, keyspace)? {
        Some(ks) => ks.get(&key)?,
        None => db.get(&key)?,
    };
    let Some(value) = value else {
        if out.json {
            print_json(&json!({ "key": out.style.show(&key), "found": false }));
        } else {
            eprintln!("key {} not found", out.style.show(&key));
        }
        return Ok(Exit::NotFound);
    };
    if out.json {
        print_json(&json!({ "key": out.style.show(&key), "found": true, "value": out.style.show(&value) }));
    } else if out.style == ByteStyle::Hex {
        outln!("{}", out.style.show(&value));
    } else {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&value)?;
        stdout.write_all(b"\n")?;
    }
    Ok(Exit::Success)
}

/// Sets `key` to `value`, or to standard input when `value` is `None`. Creates the database if
/// there is none, with `index` (LSM if not given); an `index` that differs from an existing
/// database's is a usage error, since the engine cannot change a database's index.
pub fn put(
    dir: &Path,
    keyspace: Option<&str>,
    key: &str,
    value: Option<&str>,
    index: Option<IndexChoice>,
    out: Output,
) -> Result<Exit, CliError> {
    check_index_choice(dir, index)?;
    let key = out.parse_bytes(key)?;
    let value = match value {
        Some(v) => out.parse_bytes(v)?,
        None => {
            let mut input = Vec::new();
            std::io::stdin().read_to_end(&mut input)?;
            if out.style == ByteStyle::Hex {
                let text = String::from_utf8(input).map_err(|_| CliError::Usage("standard input is not hex".into()))?;
                out.parse_bytes(text.trim())?
            } else {
                input
            }
        }
    };
    let db = open_db(dir, Some(index.unwrap_or(IndexChoice::Lsm)))?;
    match keyspace {
        Some(name) => db.keyspace(name)?.put_opt(&WriteOptions { sync: true }, &key, &value)?,
        None => db.put_opt(&WriteOptions { sync: true }, &key, &value)?,
    }
    db.close()?;
    Ok(Exit::Success)
}

/// Refuses an `--index` that differs from an existing database's, since the engine cannot
/// change a database's index.
pub fn check_index_choice(dir: &Path, index: Option<IndexChoice>) -> Result<(), CliError> {
    if let (Some(wanted), Some(existing)) = (index, existing_index(dir)) {
        if wanted != existing {
            return Err(CliError::Usage(format!(
                "{} holds a database with the {} index; --index {} only applies to a new database",
                dir.display(),
                existing.name(),
                wanted.name()
            )));
        }
    }
    Ok(())
}

/// Sets every `KEY VALUE` pair of `args` in one atomic batch, in the default keyspace or
/// `keyspace` (created if missing, as `put` does); creates the database like `put`.
pub fn batchput(
    dir: &Path,
    keyspace: Option<&str>,
    args: &[String],
    index: Option<IndexChoice>,
    out: Output,
) -> Result<Exit, CliError> {
    if args.is_empty() || !args.len().is_multiple_of(2) {
        return Err(CliError::Usage(format!(
            "batchput needs KEY VALUE pairs: {} argument{} given",
            args.len(),
            if args.len() == 1 { "" } else { "s" }
        )));
    }
    check_index_choice(dir, index)?;
    let pairs = args
        .chunks_exact(2)
        .map(|pair| Ok((out.parse_bytes(&pair[0])?, out.parse_bytes(&pair[1])?)))
        .collect::<Result<Vec<_>, CliError>>()?;
    let db = open_db(dir, Some(index.unwrap_or(IndexChoice::Lsm)))?;
    let ks = keyspace.map(|name| db.keyspace(name)).transpose()?;
    let mut batch = WriteBatch::new();
    for (key, value) in pairs {
        match &ks {
            Some(ks) => batch.put_in(ks, key, value),
            None => batch.put(key, value),
        };
    }
    db.write(&WriteOptions { sync: true }, batch)?;
    db.close()?;
    Ok(Exit::Success)
}

/// Removes every key in `[from, to)` with one range delete.
pub fn deleterange(dir: &Path, keyspace: Option<&str>, from: &str, to: &str, out: Output) -> Result<Exit, CliError> {
    let (from, to) = (out.parse_bytes(from)?, out.parse_bytes(to)?);
    let db = open_db(dir, None)?;
    let mut batch = WriteBatch::new();
    match existing_keyspace(&db, keyspace)? {
        Some(ks) => batch.delete_range_in(&ks, &from, &to),
        None => batch.delete_range(&from, &to),
    };
    db.write(&WriteOptions { sync: true }, batch)?;
    db.close()?;
    Ok(Exit::Success)
}

/// Removes `key` (removing a missing key is not an error, as in the library).
pub fn delete(dir: &Path, keyspace: Option<&str>, key: &str, out: Output) -> Result<Exit, CliError> {
    let key = out.parse_bytes(key)?;
    let db = open_db(dir, None)?;
    match existing_keyspace(&db, keyspace)? {
        Some(ks) => ks.delete_opt(&WriteOptions { sync: true }, &key)?,
        None => db.delete_opt(&WriteOptions { sync: true }, &key)?,
    }
    db.close()?;
    Ok(Exit::Success)
}

/// What `scan` lists.
#[derive(Debug)]
pub struct ScanArgs<'a> {
    /// The keyspace listed (`None`: the default one).
    pub keyspace: Option<&'a str>,
    /// First key (inclusive).
    pub from: Option<String>,
    /// Key to stop before (exclusive).
    pub to: Option<String>,
    /// Most entries (`--max_keys`, or its alias `--limit`).
    pub limit: Option<usize>,
    /// Omit values.
    pub keys_only: bool,
    /// From the last key in the range down.
    pub reverse: bool,
}

/// One scanned entry, or the error that ended the scan.
type Entry = splitkv::Result<(Vec<u8>, Vec<u8>)>;

/// Lists entries in key order.
pub fn scan(dir: &Path, args: &ScanArgs<'_>, out: Output) -> Result<Exit, CliError> {
    let bound = |k: &Option<String>, make: fn(Vec<u8>) -> Bound<Vec<u8>>| -> Result<Bound<Vec<u8>>, CliError> {
        Ok(match k {
            Some(k) => make(out.parse_bytes(k)?),
            None => Bound::Unbounded,
        })
    };
    let range = (bound(&args.from, Bound::Included)?, bound(&args.to, Bound::Excluded)?);
    let db = open_read_only(dir)?;
    let ks = existing_keyspace(&db, args.keyspace)?;
    let limit = args.limit.unwrap_or(usize::MAX);
    let entries: Box<dyn Iterator<Item = Entry>> = if args.reverse {
        Box::new(reverse_entries(&db, ks.as_ref(), range)?.take(limit))
    } else {
        let entries = match &ks {
            Some(ks) => ks.range(range)?,
            None => db.range(range)?,
        };
        Box::new(entries.take(limit).map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec()))))
    };
    let mut stdout = std::io::stdout().lock();
    let mut rows = Vec::new();
    for entry in entries {
        let (key, value) = entry?;
        if out.json {
            let mut row = json!({ "key": out.style.show(&key) });
            if !args.keys_only {
                row["value"] = json!(out.style.show(&value));
            }
            rows.push(row);
        } else if args.keys_only {
            writeln!(stdout, "{}", out.style.show(&key))?;
        } else {
            writeln!(stdout, "{}\t{}", out.style.show(&key), out.style.show(&value))?;
        }
    }
    if out.json {
        writeln!(stdout, "{}", crate::format::json(&serde_json::Value::Array(rows)))?;
    }
    Ok(Exit::Success)
}

/// Lists the keyspaces, one name a line (a JSON array with `--json`).
pub fn keyspaces(dir: &Path, out: Output) -> Result<Exit, CliError> {
    let db = open_read_only(dir)?;
    let names = db.keyspace_names();
    if out.json {
        print_json(&json!(names));
    } else {
        for name in names {
            outln!("{name}");
        }
    }
    Ok(Exit::Success)
}

/// The keyspace `--keyspace` names, which must exist (`None` without the flag: the default
/// keyspace). Reading a keyspace never creates it.
pub fn existing_keyspace<'db>(db: &'db Db, keyspace: Option<&str>) -> Result<Option<Keyspace<'db>>, CliError> {
    match keyspace {
        None => Ok(None),
        Some(name) => match db.existing_keyspace(name) {
            Some(ks) => Ok(Some(ks)),
            None => Err(CliError::Usage(format!("the database has no keyspace named {name:?}"))),
        },
    }
}

/// The entries of `range` (`[from, to)`) of the default keyspace or `ks`, from the last down,
/// streamed; an error ends them.
fn reverse_entries(
    db: &Db,
    ks: Option<&Keyspace<'_>>,
    (from, to): (Bound<Vec<u8>>, Bound<Vec<u8>>),
) -> Result<impl Iterator<Item = Entry>, CliError> {
    let bound = |b: Bound<Vec<u8>>| match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    };
    // The cursor's bounds are `[lower, upper)`, exactly the scan's range.
    let opts = ReadOptions { lower_bound: bound(from), upper_bound: bound(to), ..ReadOptions::default() };
    let mut cursor = match ks {
        Some(ks) => ks.iter(opts)?,
        None => db.iter(opts)?,
    };
    cursor.seek_to_last()?;
    let mut pending_error = None;
    let mut done = false;
    Ok(std::iter::from_fn(move || {
        if let Some(e) = pending_error.take() {
            done = true;
            return Some(Err(e));
        }
        if done || !cursor.valid() {
            return None;
        }
        let entry = (cursor.key().to_vec(), cursor.value().to_vec());
        if let Err(e) = cursor.prev() {
            pending_error = Some(e);
        }
        Some(Ok(entry))
    }))
}
