//! `Db::open_read_only` beside a live writer in another process: a child process holds the
//! database open and writes synced batches (flushes, compactions and GC deleting tables and
//! segments as it goes) while this process opens it read-only again and again. Each read-only
//! view must be exactly the state after one of the child's batches, no older than the last batch
//! the child acknowledged before the open; the child must keep acknowledging while the reader is
//! open (it is never blocked), and once stopped it must find its own state intact, as must a
//! read-write reopen.
//!
//! A hash-index database cannot be opened read-only while a writer holds it: that open must fail
//! with a clear error and leave the writer undisturbed.
//!
//! The test binary is its own child: with `SPLITKV_READER_CHILD` set, the `child_entry` test runs
//! the writer instead of returning (under `cargo test` and `cargo nextest` alike). The child stops
//! when its standard input closes.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use common::{small_options, HASH};
use splitkv::{Db, Error, IndexKind, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "SPLITKV_READER_CHILD";
const CHILD_DIR_ENV: &str = "SPLITKV_READER_CHILD_DIR";

/// Keys the child writes; few enough that values are overwritten (garbage for GC).
const KEYS: u64 = 300;
/// The key holding the number of the last batch, written by every batch.
const COUNTER: &[u8] = b"~batch";
/// Read-only opens per case.
const READER_ROUNDS: u64 = 12;
/// Batches the child must acknowledge while a reader is open.
const ACKS_WHILE_OPEN: u64 = 15;
/// A guard against a hung child only; no speed is asserted.
const STALL: Duration = Duration::from_secs(120);

/// What batch `n` does: puts one key (value length from 20 to about 1.5 KiB, so some values
/// are separated and some inline), deletes another every fifth batch, and records `n`.
fn batch_ops(n: u64) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    let put = key((n * 13) % KEYS);
    let value = value(n, &put);
    let delete = n.is_multiple_of(5).then(|| key((n * 7 + 1) % KEYS));
    (put, value, delete)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(n: u64, key: &[u8]) -> Vec<u8> {
    let mut v = format!("batch {n} key {}:", String::from_utf8_lossy(key)).into_bytes();
    let len = 20 + (n * 97 % 1500) as usize;
    v.extend((0..len).map(|i| (n as usize + i) as u8));
    v
}

/// The state after batches `1..=n`.
fn model(n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut state = BTreeMap::new();
    for b in 1..=n {
        let (put, value, delete) = batch_ops(b);
        state.insert(put, value);
        if let Some(k) = delete {
            state.remove(&k);
        }
    }
    if n > 0 {
        state.insert(COUNTER.to_vec(), n.to_string().into_bytes());
    }
    state
}

/// Tiny memtables, tables and segments, so that flushes, compactions and GC runs create and
/// delete files every few dozen batches.
fn options(kind: IndexKind) -> Options {
    Options {
        write_buffer_size: 8 << 10,
        segment_size: 16 << 10,
        target_file_size: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        gc_garbage_ratio: 0.2,
        ..small_options(kind, 512)
    }
}

/// Names of the tables and segments in `dir`.
fn data_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list the database")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".sst") || n.ends_with(".vlog"))
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------------
// The child: the writer

#[test]
fn child_entry() {
    let Some(kind) = std::env::var_os(CHILD_ENV) else { return };
    let kind = if kind == "hash" { HASH } else { IndexKind::Lsm };
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR_ENV).expect("dir"));
    let code = match run_writer(kind, &dir) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("writer child failed: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn run_writer(kind: IndexKind, dir: &Path) -> splitkv::Result<()> {
    let db = Db::open(dir, options(kind))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    std::thread::spawn(move || {
        // The parent closes our stdin to stop us (or dies, which closes it too).
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stopper.store(true, Ordering::Release);
    });
    let mut stdout = std::io::stdout().lock();
    let mut n = 0;
    while !stop.load(Ordering::Acquire) {
        n += 1;
        let (put, value, delete) = batch_ops(n);
        let mut batch = WriteBatch::new();
        batch.put(&put, &value);
        if let Some(k) = &delete {
            batch.delete(k);
        }
        batch.put(COUNTER, n.to_string());
        db.write(&WriteOptions { sync: true }, batch)?;
        // Acknowledged only once durable; a broken pipe means the parent is gone.
        if writeln!(stdout, "ACK {n}").and_then(|()| stdout.flush()).is_err() {
            break;
        }
        if n.is_multiple_of(40) {
            // Tables and segments are deleted under any reader that is open now.
            db.run_gc()?;
        }
    }
    let state = model(n);
    for i in 0..KEYS {
        let k = key(i);
        if db.get(&k)?.as_deref() != state.get(&k).map(Vec::as_slice) {
            return Err(Error::InvalidArgument(format!("after {n} batches the writer reads a wrong {k:?}")));
        }
    }
    db.close()?;
    let _ = writeln!(stdout, "DONE {n}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The parent: readers

struct Writer {
    child: Child,
    acks: Receiver<String>,
    last_ack: u64,
}

impl Writer {
    fn spawn(kind: &str, dir: &Path) -> Writer {
        let exe = std::env::current_exe().expect("current_exe");
        let mut child = Command::new(exe)
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, kind)
            .env(CHILD_DIR_ENV, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the writer");
        let stdout = child.stdout.take().expect("piped");
        let (tx, acks) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The test harness prints its own lines too.
                if (line.starts_with("ACK ") || line.starts_with("DONE ")) && tx.send(line).is_err() {
                    break;
                }
            }
        });
        Writer { child, acks, last_ack: 0 }
    }

    /// Takes acknowledgements until batch `n` or later is acknowledged.
    fn wait_for_ack(&mut self, n: u64) {
        while self.last_ack < n {
            match self.acks.recv_timeout(STALL) {
                Ok(line) => {
                    if let Some(a) = line.strip_prefix("ACK ") {
                        self.last_ack = a.parse().expect("an ACK number");
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("the writer stalled at batch {}", self.last_ack),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the writer exited at batch {}: {:?}", self.last_ack, self.child.wait())
                }
            }
        }
    }

    /// Takes every acknowledgement already printed.
    fn drain(&mut self) -> u64 {
        while let Ok(line) = self.acks.try_recv() {
            if let Some(a) = line.strip_prefix("ACK ") {
                self.last_ack = a.parse().expect("an ACK number");
            }
        }
        self.last_ack
    }

    /// Closes the writer's input, and returns the number of its last batch once it has checked
    /// its own state and exited.
    fn stop(mut self) -> u64 {
        drop(self.child.stdin.take());
        let mut done = None;
        loop {
            match self.acks.recv_timeout(STALL) {
                Ok(line) => {
                    if let Some(n) = line.strip_prefix("DONE ") {
                        done = Some(n.parse().expect("a DONE number"));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("the writer did not stop"),
            }
        }
        let status = self.child.wait().expect("wait for the writer");
        assert!(status.success(), "the writer failed: {status:?}");
        done.expect("the writer's DONE line")
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Only when a check failed: do not leave a writer behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails with the first key that differs from the model after batch `n`.
fn check_view(db: &Db, n: u64, what: &str) -> splitkv::Result<()> {
    let expected = model(n);
    let mut got = BTreeMap::new();
    for entry in db.range::<&[u8], _>(..)? {
        let (k, v) = entry?;
        got.insert(k.to_vec(), v.to_vec());
    }
    if let Some(k) = expected.keys().chain(got.keys()).find(|k| expected.get(*k) != got.get(*k)) {
        panic!("{what}: the view is not the state after batch {n}: key {:?} differs", String::from_utf8_lossy(k));
    }
    for i in (0..KEYS).step_by(7) {
        let k = key(i);
        assert_eq!(db.get(&k)?.as_deref(), expected.get(&k).map(Vec::as_slice), "{what}: get {k:?}");
    }
    Ok(())
}

#[test]
fn read_only_opens_beside_a_writer_process_see_a_consistent_prefix_and_never_block_it() -> splitkv::Result<()> {
    let tmp = tempfile::tempdir()?;

    // LSM: read-only opens while the writer goes on.
    let dir = tmp.path().join("lsm");
    let mut writer = Writer::spawn("lsm", &dir);
    writer.wait_for_ack(40);
    let mut deleted_under_readers = 0;
    for round in 0..READER_ROUNDS {
        let acked = writer.drain();
        let files_at_open = data_files(&dir);
        // Tools open with the stored options.
        let stored = Options::load(&dir)?.expect("the writer stored its options");
        let reader = Db::open_read_only(&dir, stored)?;
        let counter = reader.get(COUNTER)?.expect("the batch counter");
        let seen: u64 = String::from_utf8_lossy(&counter).parse().expect("a number");
        assert!(seen >= acked, "round {round}: the view ends at batch {seen}, before acknowledged batch {acked}");
        check_view(&reader, seen, &format!("round {round}"))?;
        // The writer is not blocked by the open reader, and the reader's view does not move.
        let target = writer.drain() + ACKS_WHILE_OPEN;
        writer.wait_for_ack(target);
        let now = data_files(&dir);
        deleted_under_readers += files_at_open.iter().filter(|n| !now.contains(n)).count();
        check_view(&reader, seen, &format!("round {round}, after the writer went on"))?;
        assert!(matches!(reader.put("k", "v"), Err(Error::ReadOnly)));
    }

    assert!(deleted_under_readers > 0, "the writer deleted no file under a reader: the test lost its point");
    let last = writer.stop();
    let db = Db::open(&dir, Options::load(&dir)?.expect("options"))?;
    check_view(&db, last, "the read-write reopen")?;
    drop(db);

    // Hash: refused while the writer holds the database, which goes on undisturbed.
    let dir = tmp.path().join("hash");
    let mut writer = Writer::spawn("hash", &dir);
    writer.wait_for_ack(20);
    let stored = Options::load(&dir)?.expect("the writer stored its options");
    match Db::open_read_only(&dir, stored) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("hash-index") && m.contains("another process"), "{m}"),
        other => panic!("a hash database under a writer opened read-only: {other:?}"),
    }
    let target = writer.drain() + ACKS_WHILE_OPEN;
    writer.wait_for_ack(target);
    let last = writer.stop();
    let reader = Db::open_read_only(&dir, Options::load(&dir)?.expect("options"))?;
    check_view(&reader, last, "the hash database once its writer is gone")?;
    Ok(())
}
