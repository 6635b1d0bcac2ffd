//! Helpers shared by the end-to-end tests: build a database with the library, run the built
//! `splitkv` binary on it, and damage files byte by byte.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

use splitkv::{Db, IndexKind, Options};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Keys and values written by [`build_db`]: `key000`..`key199` with 100-byte inline values, and
/// `big0`..`big4` with 2000-byte values that go to the value log.
pub fn expected_value(key: &str) -> Vec<u8> {
    let (fill, len) = if key.starts_with("big") { (b'B', 2000) } else { (b'v', 100) };
    let mut value = key.as_bytes().to_vec();
    value.resize(len, fill);
    value
}

/// Creates a database in `dir` holding the keys of [`expected_value`], flushed to an SSTable,
/// and closes it.
pub fn build_db(dir: &Path) -> Result<(), splitkv::Error> {
    let db = Db::open(dir, Options::default())?;
    put_fixture_keys(&db)?;
    db.flush()?;
    db.close()
}

/// Puts `key000`..`key199` and `big0`..`big4`, each with its [`expected_value`].
fn put_fixture_keys(db: &Db) -> Result<(), splitkv::Error> {
    for i in 0..200 {
        let key = format!("key{i:03}");
        db.put(&key, expected_value(&key))?;
    }
    for i in 0..5 {
        let key = format!("big{i}");
        db.put(&key, expected_value(&key))?;
    }
    Ok(())
}

/// Options of the hash-index databases the tests build: a small first table, so that it grows
/// and keys share chains.
pub fn hash_options() -> Options {
    Options { index: IndexKind::Hash { capacity: 16, shards: 1 }, ..Options::default() }
}

/// The long keys (over the 24 bytes a hash slot holds whole) written by [`build_hash_db`].
pub fn long_key(i: usize) -> String {
    format!("a-key-longer-than-a-hash-slot-holds-{i:02}")
}

/// Creates a hash-index database in `dir`: the keys of [`build_db`] and ten [`long_key`]s with
/// [`expected_value`]s, then deletes `key010`..`key019` and `long_key(3)`, and checkpoints, so
/// the table holds 204 keys. Then writes past the checkpoint, which stay in the log only (the
/// table learns of them when the database is next opened and checkpointed): `key020` is
/// deleted and `late` is put. Closes it.
pub fn build_hash_db(dir: &Path) -> Result<(), splitkv::Error> {
    let db = Db::open(dir, hash_options())?;
    put_fixture_keys(&db)?;
    for i in 0..10 {
        let key = long_key(i);
        db.put(&key, expected_value(&key))?;
    }
    for i in 10..20 {
        db.delete(format!("key{i:03}"))?;
    }
    db.delete(long_key(3))?;
    db.flush()?;
    db.delete("key020")?;
    db.put("late", expected_value("late"))?;
    db.close()
}

/// A fresh temporary directory and the database path inside it.
pub fn temp_db() -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join("db");
    Ok((tmp, db))
}

/// Held while a child [`splitkv`] starts is alive. A new child holds a copy of every descriptor
/// of this process, among them the `LOCK` file of a database another test's thread has open;
/// the engine locks with `flock`, whose lock lives as long as any copy. The copies go when the
/// child execs, but not before `spawn` returns: the kernel resumes the parent of a
/// `posix_spawn` as soon as the child has replaced its memory, before it closes the descriptors
/// marked close-on-exec (a test failed with `Locked` about once in 60 runs so). A child that
/// has exited holds nothing. A test that reopens a database it just closed takes this first
/// ([`reopen`]), so no child keeps the old lock alive.
static NO_CHILD_ALIVE: Mutex<()> = Mutex::new(());

fn no_child_alive() -> MutexGuard<'static, ()> {
    NO_CHILD_ALIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Opens the database at `dir` that this process just closed (see [`NO_CHILD_ALIVE`]).
pub fn reopen(dir: &Path, options: Options) -> Result<Db, splitkv::Error> {
    let _no_child = no_child_alive();
    Db::open(dir, options)
}

/// Runs `splitkv` with `args` and no standard input.
pub fn splitkv<I, S>(args: I) -> std::io::Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    // Until it has exited, the child may still hold copies of our descriptors (see
    // `NO_CHILD_ALIVE`).
    let _no_reopen = no_child_alive();
    Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?
        .wait_with_output()
}

/// Exit code, stdout and stderr of a run, for assertions and failure messages.
pub fn outcome(out: &Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Files of `dir` with the given extension, sorted.
pub fn files_with_ext(dir: &Path, ext: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    Ok(files)
}

/// Flips the low bit of the byte at `offset` in `path`.
pub fn flip_byte(path: &Path, offset: usize) -> std::io::Result<()> {
    let mut bytes = std::fs::read(path)?;
    bytes[offset] ^= 1;
    std::fs::write(path, bytes)
}
