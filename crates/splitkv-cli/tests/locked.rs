//! A database held open by another process: every command that needs it fails with a clear
//! "locked" error (exit 3) and leaves every file as it was.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{build_db, outcome, splitkv, temp_db, TestResult};
use splitkv::{Db, Options};

fn contents(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        files.insert(entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path())?);
    }
    Ok(files)
}

#[test]
fn commands_on_a_locked_database_fail_clearly_and_change_nothing() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let holder = Db::open(&db, Options::default())?;
    let before = contents(&db)?;
    let d = db.as_os_str();
    let commands: [&[&std::ffi::OsStr]; 7] = [
        &["get".as_ref(), d, "key001".as_ref()],
        &["put".as_ref(), d, "k".as_ref(), "v".as_ref()],
        &["delete".as_ref(), d, "key001".as_ref()],
        &["scan".as_ref(), d],
        &["info".as_ref(), d],
        &["verify".as_ref(), d],
        &["compact".as_ref(), d],
    ];
    for args in commands {
        let out = splitkv(args)?;
        let (code, _, stderr) = outcome(&out);
        assert_eq!(code, Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("is locked: another process has it open"), "{args:?}: {stderr}");
    }
    assert_eq!(contents(&db)?, before, "files changed while locked");
    assert_eq!(holder.get("key001")?.as_deref(), Some(&common::expected_value("key001")[..]));
    drop(holder);

    let out = splitkv(["get".as_ref(), d, "key001".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "released lock is usable: {:?}", outcome(&out));
    Ok(())
}
