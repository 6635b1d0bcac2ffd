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

/// Picks `n` distinct ports that are free right now and lie below the kernel's ephemeral range
/// (`ip_local_port_range`), for servers that must know each other's ports before they start.
/// A port from `bind(":0")` would be ephemeral: between the probe and the server's bind, a
/// client connection or another test's `:0` listener may be handed the same number. Below the
/// range only an explicit bind can take it, so the callers' retry (a port taken anyway by a
/// concurrent test) stays rare.
pub fn free_fixed_ports(n: usize) -> Vec<u16> {
    use rand::Rng;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next().and_then(|p| p.parse::<u16>().ok()))
        .unwrap_or(32768);
    let low = 10_000.min(ephemeral_start / 2);
    let mut rng = rand::thread_rng();
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        let port = rng.gen_range(low..ephemeral_start);
        if !ports.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    ports
}

impl ServerProcess {
    /// Starts the server on `dir` with extra flags and waits for its ready line (which it prints
    /// once the port accepts connections).
    pub fn start(dir: &Path, extra: &[&str]) -> ServerProcess {
        Self::try_start_on(dir, 0, extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the server on a given port (0: any). Fails, with the child reaped, when the
    /// server exits before its ready line, as it does when the port is taken.
    pub fn try_start_on(dir: &Path, port: u16, extra: &[&str]) -> Result<ServerProcess, String> {
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
        drop(starting);
        match line.trim().rsplit(':').next().and_then(|p| p.parse().ok()) {
            Some(port) => Ok(ServerProcess { child: Some(child), port, dir: dir.to_path_buf() }),
            None => {
                let status = child.wait().expect("wait");
                Err(format!("no ready line from the server on port {port} ({status}), got {line:?}"))
            }
        }
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
