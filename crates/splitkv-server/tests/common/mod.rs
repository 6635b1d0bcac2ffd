//! Test support: a real `splitkv-server` process on a free port, stopped with SIGTERM.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub struct ServerProcess {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
}

/// Held while a child server starts, from `spawn` until its ready line (by then it has exec'd),
/// and by a test while it has a database open in this process. A new child holds a copy of
/// every descriptor of this process until it execs, among them the `LOCK` of a database a test
/// has open here; the engine locks with `flock`, whose lock lives as long as any copy, and the
/// kernel resumes a `posix_spawn` parent before the child closes its close-on-exec descriptors.
/// Without this, a server started on a database a test just closed here could find it locked.
static NO_CHILD_STARTING: Mutex<()> = Mutex::new(());

/// Runs `f` while no child server is starting (see [`NO_CHILD_STARTING`]).
pub fn with_no_child_starting<T>(f: impl FnOnce() -> T) -> T {
    let _guard = no_child_starting();
    f()
}

fn no_child_starting() -> MutexGuard<'static, ()> {
    NO_CHILD_STARTING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Picks a port the OS considers free; the server binds it right after.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl ServerProcess {
    /// Starts the server on `dir` with extra flags and waits for its ready line (which it prints
    /// once the port accepts connections).
    pub fn start(dir: &Path, extra: &[&str]) -> ServerProcess {
        Self::start_on(dir, 0, extra)
    }

    pub fn start_on(dir: &Path, port: u16, extra: &[&str]) -> ServerProcess {
        let starting = no_child_starting();
        let mut child = Command::new(env!("CARGO_BIN_EXE_splitkv-server"))
            .arg("--dir")
            .arg(dir)
            .args(["--port", &port.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning splitkv-server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("reading the ready line");
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no ready line from the server, got {line:?}"));
        drop(starting);
        ServerProcess { child: Some(child), port, dir: dir.to_path_buf() }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url()).and_then(|c| c.get_connection()).expect("connecting")
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
        child.wait().expect("wait")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs one command and returns the error code and message it failed with.
pub fn error_of(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}
