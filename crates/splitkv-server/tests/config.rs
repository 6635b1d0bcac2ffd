//! Engine options from a TOML file, overridden by flags; bad files and maps are refused at start.

mod common;

use common::{ServerProcess, TestResult};
use redis::Commands;

fn start_fails(args: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitkv-server"))
        .arg("--dir")
        .arg(dir.path().join("db"))
        .args(["--port", "0"])
        .args(args)
        .output()?;
    assert!(!out.status.success(), "started with {args:?}");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn engine_options_come_from_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("engine.toml");
    // Every value separated into the value log, and the hash index: both must still serve.
    std::fs::write(&file, "[engine]\nvalue_threshold = 0\nindex = \"hash\"\nwrite_buffer_size = 1048576\n")?;
    let server = ServerProcess::start(&dir.path().join("db"), &["--config", file.to_str().ok_or("path")?]);
    let mut con = server.client();
    let _: () = con.set("k", "v")?;
    let _: () = redis::cmd("HSET").arg(&["h", "a", "1"]).query(&mut con)?;
    assert_eq!(con.get::<_, String>("k")?, "v");
    assert_eq!(redis::cmd("KEYS").arg("*").query::<Vec<String>>(&mut con)?, vec!["h", "k"]);
    Ok(())
}

#[test]
fn bad_configuration_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("engine.toml");
    std::fs::write(&file, "[engine]\nno_such_option = 1\n")?;
    assert!(start_fails(&["--config", file.to_str().ok_or("path")?])?.contains("no_such_option"));
    assert!(start_fails(&["--index", "btree"])?.contains("unknown index kind"));
    assert!(start_fails(&["--cluster-slots", "0-100", "--cluster-node", "x=127.0.0.1:1@50-60"])?.contains("claimed by"));
    assert!(start_fails(&["--cluster-slots", "9-3"])?.contains("bad slot range"));
    Ok(())
}
