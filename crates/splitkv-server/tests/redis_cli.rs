//! A scripted `redis-cli` session: the real client, fed a script on standard input, its
//! output compared line by line. Skipped (with a message) where redis-cli is not installed;
//! CI installs it.

mod common;

use common::{ServerProcess, TestResult};
use std::io::Write;
use std::process::{Command, Stdio};

const SCRIPT: &str = "\
PING
SET greeting hello
GET greeting
APPEND greeting \", world\"
GETRANGE greeting 0 4
INCR visits
INCRBY visits 9
HSET user:1 name alice lang rust
HGET user:1 name
HGETALL user:1
ZADD board 30 carol 10 alice 20 bob
ZRANGE board 0 -1 WITHSCORES
ZRANGEBYSCORE board (10 +inf
EXPIRE greeting 60
TTL greeting
TYPE board
GET user:1
KEYS *
DBSIZE
DEL greeting visits
EXISTS greeting
";

const EXPECTED: &str = "\
PONG
OK
hello
12
hello
1
10
2
alice
lang
rust
name
alice
3
alice
10
bob
20
carol
30
bob
carol
1
60
zset
WRONGTYPE Operation against a key holding the wrong kind of value
board
greeting
user:1
visits
4
2
0
";

#[test]
fn scripted_redis_cli_session() -> TestResult {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        println!("SKIPPED: redis-cli is not installed (CI installs redis-tools)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let server = ServerProcess::start(&dir.path().join("db"), &[]);
    let mut cli = Command::new("redis-cli")
        .args(["-p", &server.port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    cli.stdin.take().expect("stdin").write_all(SCRIPT.as_bytes())?;
    let out = cli.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    // redis-cli prints errors with a leading blank line when not on a terminal; compare lines.
    let got: Vec<&str> = stdout.lines().map(|l| l.trim_start_matches("(error) ")).filter(|l| !l.is_empty()).collect();
    let want: Vec<&str> = EXPECTED.lines().collect();
    assert_eq!(got, want, "stderr: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
