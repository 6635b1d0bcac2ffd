//! A database held open by another process (this test process, for the `splitkv` it runs): the
//! read commands open it read-only and work, seeing every write synced before they started; the
//! write commands fail with a clear "locked" error (exit 3). Neither changes a file. A hash-index
//! database cannot be read while a writer changes its table: the read commands say so.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use common::{build_db, build_hash_db, hash_options, outcome, reopen, splitkv, temp_db, TestResult};
use splitkv::{Options, WriteOptions};

fn contents(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        files.insert(entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path())?);
    }
    Ok(files)
}

#[test]
fn read_commands_work_on_a_locked_database_and_write_commands_fail_clearly() -> TestResult {
    let (tmp, db) = temp_db()?;
    build_db(&db)?;
    let holder = reopen(&db, Options::load(&db)?.expect("stored options"))?;
    // Synced before the commands start: every read-only open sees it.
    holder.put_opt(&WriteOptions { sync: true }, "fresh", "from the holder")?;
    let before = contents(&db)?;
    let d = db.as_os_str();
    let copy = tmp.path().join("copy");

    let out = splitkv(["get".as_ref(), d, "fresh".as_ref()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!((code, stdout.as_str()), (Some(0), "from the holder\n"), "get: {stderr}");
    let reads: [&[&OsStr]; 8] = [
        &["get".as_ref(), d, "key001".as_ref()],
        &["scan".as_ref(), d],
        &["info".as_ref(), d],
        &["--json".as_ref(), "info".as_ref(), d],
        &["stats".as_ref(), d],
        &["verify".as_ref(), d],
        &["dump".as_ref(), "manifest".as_ref(), d],
        &["--json".as_ref(), "scan".as_ref(), d],
    ];
    for args in reads {
        let out = splitkv(args)?;
        let (code, stdout, stderr) = outcome(&out);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stdout.is_empty(), "{args:?} printed nothing");
    }
    let out = splitkv(["--json".as_ref(), "scan".as_ref(), d])?;
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(rows.as_array().map(Vec::len), Some(206), "205 fixture keys and the holder's");
    let out = splitkv(["--json".as_ref(), "info".as_ref(), d])?;
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(info["last_sequence"], 206);
    assert_eq!(info["options_stored"], true);
    let out = splitkv(["verify".as_ref(), d])?;
    let (_, stdout, _) = outcome(&out);
    assert!(stdout.contains("another process has the database open") && stdout.contains("no problems"), "{stdout}");

    let writes: [&[&OsStr]; 5] = [
        &["put".as_ref(), d, "k".as_ref(), "v".as_ref()],
        &["delete".as_ref(), d, "key001".as_ref()],
        &["compact".as_ref(), d],
        &["gc".as_ref(), d],
        &["checkpoint".as_ref(), d, copy.as_os_str()],
    ];
    for args in writes {
        let out = splitkv(args)?;
        let (code, _, stderr) = outcome(&out);
        assert_eq!(code, Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("is locked: another process has it open"), "{args:?}: {stderr}");
    }
    assert!(!copy.exists(), "a refused checkpoint left a directory");
    assert_eq!(contents(&db)?, before, "files changed while locked");
    assert_eq!(holder.get("key001")?.as_deref(), Some(&common::expected_value("key001")[..]));
    drop(holder);

    let out = splitkv(["put".as_ref(), d, "k".as_ref(), "v".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "released lock is usable: {:?}", outcome(&out));
    Ok(())
}

#[test]
fn a_locked_hash_database_is_refused_by_the_read_commands_with_the_reason() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let holder = reopen(&db, hash_options())?;
    let before = contents(&db)?;
    let d = db.as_os_str();
    let reads: [&[&OsStr]; 4] =
        [&["get".as_ref(), d, "key001".as_ref()], &["scan".as_ref(), d], &["info".as_ref(), d], &["stats".as_ref(), d]];
    for args in reads {
        let out = splitkv(args)?;
        let (code, _, stderr) = outcome(&out);
        assert_eq!(code, Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("hash-index database") && stderr.contains("another process"), "{args:?}: {stderr}");
    }
    assert_eq!(contents(&db)?, before, "files changed while locked");
    drop(holder);
    let out = splitkv(["get".as_ref(), d, "key001".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "readable once the writer is gone: {:?}", outcome(&out));
    Ok(())
}
