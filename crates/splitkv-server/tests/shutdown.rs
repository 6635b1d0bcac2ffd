//! Durability across restarts under each `--sync` policy, and graceful SIGTERM shutdown.

mod common;

use common::{ServerProcess, TestResult};
use redis::Commands;

fn write_then_restart(policy: &str) -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("db");
    // A long interval: only the shutdown path can make these writes durable.
    let server = ServerProcess::start(&db, &["--sync", policy, "--sync-interval-ms", "3600000"]);
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    pipe.cmd("HSET").arg("h").arg("f").arg("v").ignore();
    pipe.cmd("ZADD").arg("z").arg(2.5).arg("m").ignore();
    let _: () = pipe.query(&mut con)?;
    let _: () = redis::cmd("SET").arg(&["ttl", "v", "EX", "1000"]).query(&mut con)?;
    drop(con);
    let status = server.terminate();
    assert!(status.success(), "SIGTERM exit status {status:?}");

    let server = ServerProcess::start(&db, &["--sync", policy]);
    let mut con = server.client();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con)?, 503);
    assert_eq!(con.get::<_, i64>("k499")?, 499);
    assert_eq!(con.hget::<_, _, String>("h", "f")?, "v");
    assert_eq!(con.zscore::<_, _, f64>("z", "m")?, 2.5);
    assert!(con.ttl::<_, i64>("ttl")? > 900);
    Ok(())
}

#[test]
fn interval_policy_survives_sigterm() -> TestResult {
    write_then_restart("interval")
}

#[test]
fn group_policy_survives_sigterm() -> TestResult {
    write_then_restart("group")
}

#[test]
fn always_policy_survives_sigterm() -> TestResult {
    write_then_restart("always")
}

#[test]
fn acknowledged_writes_survive_sigkill_under_always_and_group() -> TestResult {
    // No graceful path: the process is killed outright, so only fsyncs made before the replies
    // can have kept the data.
    for policy in ["always", "group"] {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("db");
        let server = ServerProcess::start(&db, &["--sync", policy]);
        let mut con = server.client();
        for i in 0..50 {
            let _: () = con.set(format!("k{i}"), i)?;
        }
        drop(server); // SIGKILL
        let server = ServerProcess::start(&db, &[]);
        assert_eq!(server.client().get::<_, i64>("k49")?, 49, "policy {policy}");
    }
    Ok(())
}

#[test]
fn a_directory_of_other_data_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("db");
    // Opened and closed here while no child starts, so none keeps a copy of its LOCK.
    common::with_no_child_starting(|| splitkv_open(&db).put(b"not-ours", b"x"))?;
    let out = common::with_no_child_starting(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_splitkv-server"))
            .arg("--dir")
            .arg(&db)
            .args(["--port", "0"])
            .output()
    })?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not written by splitkv-server"));
    Ok(())
}

fn splitkv_open(path: &std::path::Path) -> splitkv::Db {
    splitkv::Db::open(path, splitkv::Options::default()).expect("open")
}

#[test]
fn sigterm_right_after_the_ready_line_shuts_down_cleanly() -> TestResult {
    // A supervisor may stop a server the moment it reports ready: the signal handlers must be
    // in place by then, or the default action kills it without the final sync and flush.
    let dir = tempfile::tempdir()?;
    for _ in 0..10 {
        let status = ServerProcess::start(&dir.path().join("db"), &[]).terminate();
        assert!(status.success(), "SIGTERM right after the ready line: exit status {status:?}");
    }
    Ok(())
}
