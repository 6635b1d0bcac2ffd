//! `get`/`put`/`delete`/`scan` on a database written by the library: values come back intact,
//! `--hex` round-trips binary keys, and a missing key exits with 1.

mod common;

use common::{build_db, expected_value, outcome, splitkv, temp_db, TestResult};

#[test]
fn values_written_by_the_library_read_back_through_the_tool() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    for key in ["key000", "key123", "big3"] {
        let out = splitkv(["get".as_ref(), db.as_os_str(), key.as_ref()])?;
        assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
        let mut want = expected_value(key);
        want.push(b'\n');
        assert_eq!(out.stdout, want, "value of {key}");
    }
    Ok(())
}

#[test]
fn put_get_delete_round_trip_and_missing_key_exits_1() -> TestResult {
    let (_tmp, db) = temp_db()?;
    let d = db.as_os_str();
    let out = splitkv(["put".as_ref(), d, "color".as_ref(), "blue".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
    let out = splitkv(["get".as_ref(), d, "color".as_ref()])?;
    assert_eq!(outcome(&out), (Some(0), "blue\n".into(), String::new()));

    let out = splitkv(["delete".as_ref(), d, "color".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
    let out = splitkv(["get".as_ref(), d, "color".as_ref()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert!(stderr.contains("not found"), "{stderr}");

    let out = splitkv(["get".as_ref(), d, "never-written".as_ref()])?;
    assert_eq!(out.status.code(), Some(1));
    Ok(())
}

#[test]
fn hex_round_trips_binary_keys_and_values() -> TestResult {
    let (_tmp, db) = temp_db()?;
    let d = db.as_os_str();
    let out = splitkv(["put".as_ref(), "--hex".as_ref(), d, "00ff0a".as_ref(), "deadbeef00".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
    let out = splitkv(["get".as_ref(), "--hex".as_ref(), d, "00FF0A".as_ref()])?;
    assert_eq!(outcome(&out), (Some(0), "deadbeef00\n".into(), String::new()));
    let out = splitkv(["scan".as_ref(), "--hex".as_ref(), d])?;
    assert_eq!(outcome(&out).1, "00ff0a\tdeadbeef00\n");
    // Without --hex, scan escapes non-printable bytes.
    let out = splitkv(["scan".as_ref(), d])?;
    assert_eq!(outcome(&out).1, "\\x00\\xff\\x0a\t\\xde\\xad\\xbe\\xef\\x00\n");

    let out = splitkv(["get".as_ref(), "--hex".as_ref(), d, "xyz".as_ref()])?;
    assert_eq!(out.status.code(), Some(2), "bad hex is a usage error");
    Ok(())
}

#[test]
fn scan_honours_from_to_limit_and_keys_only() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let d = db.as_os_str();
    let out = splitkv([
        "scan".as_ref(),
        d,
        "--from".as_ref(),
        "key010".as_ref(),
        "--to".as_ref(),
        "key013".as_ref(),
        "--keys-only".as_ref(),
    ])?;
    assert_eq!(outcome(&out), (Some(0), "key010\nkey011\nkey012\n".into(), String::new()));

    let out = splitkv(["scan".as_ref(), d, "--limit".as_ref(), "2".as_ref(), "--json".as_ref()])?;
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let rows = rows.as_array().ok_or("scan --json prints an array")?;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["key"], "big0");
    assert_eq!(rows[0]["value"].as_str().map(str::len), Some(2000));
    assert_eq!(rows[1]["key"], "big1");

    let out = splitkv(["scan".as_ref(), d, "--keys-only".as_ref()])?;
    assert_eq!(outcome(&out).1.lines().count(), 205);
    Ok(())
}

/// `--keyspace` points get, put, delete and scan at one keyspace (put creates it, reads never
/// do), and `keyspaces` lists them.
#[test]
fn keyspace_flag_addresses_one_keyspace() -> TestResult {
    let (_tmp, db) = temp_db()?;
    // `splitkv COMMAND DB ARGS...`; the global `--keyspace` may come anywhere.
    let run = |command: &str, args: &[&str]| -> std::io::Result<(Option<i32>, String, String)> {
        let mut all = vec![std::ffi::OsString::from(command), db.clone().into_os_string()];
        all.extend(args.iter().map(std::ffi::OsString::from));
        splitkv(all).map(|out| outcome(&out))
    };
    assert_eq!(run("put", &["k", "default"])?.0, Some(0));
    assert_eq!(run("put", &["--keyspace=users", "k", "alice"])?.0, Some(0));
    assert_eq!(run("put", &["m", "bob", "--keyspace", "users"])?.0, Some(0));
    assert_eq!(run("get", &["k"])?.1, "default\n");
    assert_eq!(run("get", &["--keyspace=users", "k"])?.1, "alice\n");
    assert_eq!(run("scan", &[])?.1, "k\tdefault\n");
    assert_eq!(run("scan", &["--keyspace=users"])?.1, "k\talice\nm\tbob\n");
    assert_eq!(run("delete", &["--keyspace=users", "k"])?.0, Some(0));
    assert_eq!(run("scan", &["--keyspace=users"])?.1, "m\tbob\n");
    assert_eq!(run("keyspaces", &[])?.1, "users\n");
    let (code, _, stderr) = run("get", &["--keyspace=nobody", "k"])?;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no keyspace named"), "{stderr}");
    assert_eq!(run("keyspaces", &[])?.1, "users\n", "a read does not create a keyspace");
    Ok(())
}
