//! `splitkv checkpoint DB DIR` end to end: the copy is a database the other commands open (restore
//! = open the copy), equal to the original at the checkpoint, independent of it afterwards; a
//! directory that exists is refused, and so is a database another process has open.

mod common;

use std::ffi::OsStr;

use common::{build_db, build_hash_db, expected_value, outcome, splitkv, temp_db, TestResult};

#[test]
fn a_checkpoint_opens_with_every_command_and_goes_its_own_way() -> TestResult {
    for hash in [false, true] {
        let (tmp, db) = temp_db()?;
        if hash {
            build_hash_db(&db)?;
        } else {
            build_db(&db)?;
        }
        let copy = tmp.path().join("copy");
        let (d, c) = (db.as_os_str(), copy.as_os_str());

        let out = splitkv(["--json".as_ref(), "checkpoint".as_ref(), d, c])?;
        let (code, stdout, stderr) = outcome(&out);
        assert_eq!(code, Some(0), "hash {hash}: {stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout)?;
        assert!(report["files_linked"].as_u64() > Some(0), "hash {hash}: {stdout}");
        let sequence = report["sequence"].as_u64().expect("a sequence number");

        // Restore = open the copy: every command works on it, and it holds what the database did.
        let scan = |dir: &OsStr| -> Result<serde_json::Value, Box<dyn std::error::Error>> {
            let out = splitkv(["--json".as_ref(), "scan".as_ref(), dir])?;
            assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
            Ok(serde_json::from_slice(&out.stdout)?)
        };
        assert_eq!(scan(c)?, scan(d)?, "hash {hash}");
        let out = splitkv(["get".as_ref(), c, "big2".as_ref()])?;
        assert_eq!(out.stdout, [expected_value("big2"), b"\n".to_vec()].concat(), "hash {hash}");
        let out = splitkv(["verify".as_ref(), c])?;
        assert_eq!(out.status.code(), Some(0), "hash {hash}: {:?}", outcome(&out));
        let out = splitkv(["--json".as_ref(), "info".as_ref(), c])?;
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert_eq!(info["last_sequence"].as_u64(), Some(sequence), "hash {hash}");
        assert_eq!(info["options_stored"], true);

        // From now on they are two databases.
        for (dir, key) in [(d, "only-in-db"), (c, "only-in-copy")] {
            let out = splitkv(["put".as_ref(), dir, key.as_ref(), "x".as_ref()])?;
            assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
        }
        for args in [[d, "only-in-copy".as_ref()], [c, "only-in-db".as_ref()]] {
            let out = splitkv([&["get".as_ref()][..], &args].concat())?;
            assert_eq!(out.status.code(), Some(1), "hash {hash}: {args:?} {:?}", outcome(&out));
        }
        let out = splitkv(["gc".as_ref(), d])?;
        assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
        let out = splitkv(["verify".as_ref(), c])?;
        assert_eq!(out.status.code(), Some(0), "the copy after the database's GC: {:?}", outcome(&out));

        // The target must not exist.
        let out = splitkv(["checkpoint".as_ref(), d, c])?;
        let (code, _, stderr) = outcome(&out);
        assert_eq!(code, Some(3), "{stderr}");
        assert!(stderr.contains("already exists"), "{stderr}");
    }
    Ok(())
}

#[test]
fn a_path_without_a_database_is_a_usage_error() -> TestResult {
    let (tmp, db) = temp_db()?;
    let copy = tmp.path().join("copy");
    let out = splitkv(["checkpoint".as_ref(), db.as_os_str(), copy.as_os_str()])?;
    assert_eq!(out.status.code(), Some(2), "{:?}", outcome(&out));
    assert!(!db.exists() && !copy.exists());
    Ok(())
}
