//! `--report_interval_seconds` and `--report_file`: a time series of each benchmark, one JSON
//! object per line and interval (RocksDB db_bench's report file, as JSON lines):
//!
//! ```text
//! {"benchmark":"readwhilewriting","secs_elapsed":1.0,"interval_seconds":1.0,"interval_ops":51234,
//!  "ops_per_sec":51234.0,"total_ops":51234,"p50_micros":3.1,"p99_micros":9.8,"p999_micros":40.2,
//!  "max_micros":1200.0}
//! ```
//!
//! Benchmark threads add each finished operation to a shared [`LiveReport`] (an atomic count
//! and the engine's lock-free latency histogram, `splitkv::LatencyHistogram`); a reporter
//! thread wakes every interval, takes the difference since its last look and writes a line.
//! The last, partial interval is written when the benchmark ends. Without the flag nothing is
//! shared and nothing runs. `max_micros` of an interval is the top of its highest histogram
//! bucket (within 1/16 of the true maximum).

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use splitkv::{HistogramSnapshot, LatencyHistogram};

/// What the benchmark threads record for the reporter.
#[derive(Debug, Default)]
pub struct LiveReport {
    ops: AtomicU64,
    latency: LatencyHistogram,
}

impl LiveReport {
    /// Records `ops` operations finished by one call that took `nanos`.
    pub fn record(&self, ops: u64, nanos: u64) {
        self.ops.fetch_add(ops, Ordering::Relaxed);
        self.latency.record(nanos);
    }
}

/// The report file, shared by the benchmarks of one run.
pub type ReportFile = Arc<Mutex<File>>;

/// Creates (truncates) the report file.
pub fn create(path: &std::path::Path) -> io::Result<ReportFile> {
    Ok(Arc::new(Mutex::new(File::create(path)?)))
}

/// The reporter thread of one benchmark.
pub struct Reporter {
    live: Arc<LiveReport>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Reporter {
    /// Starts reporting benchmark `name` every `interval` into `file`.
    pub fn start(name: &str, interval: Duration, file: ReportFile) -> io::Result<Reporter> {
        let live = Arc::new(LiveReport::default());
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (name, shared, stopping) = (name.to_owned(), Arc::clone(&live), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("report".into())
            .spawn(move || report_loop(&name, interval, &shared, &stopping, &file))?;
        Ok(Reporter { live, stop, thread: Some(thread) })
    }

    /// What the benchmark threads record into.
    pub fn live(&self) -> Arc<LiveReport> {
        Arc::clone(&self.live)
    }

    /// Writes the last interval and stops.
    pub fn finish(mut self) -> io::Result<()> {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> io::Result<()> {
        if let Ok(mut stopped) = self.stop.0.lock() {
            *stopped = true;
        }
        self.stop.1.notify_all();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the report thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        let _ = self.stop_thread();
    }
}

fn report_loop(
    name: &str,
    interval: Duration,
    live: &LiveReport,
    stop: &(Mutex<bool>, Condvar),
    file: &ReportFile,
) -> io::Result<()> {
    let start = Instant::now();
    let (mut last_at, mut last_ops, mut last_latency) = (start, 0u64, HistogramSnapshot::default());
    let mut next_tick = start + interval;
    loop {
        let stopped = {
            let mut stopped = stop.0.lock().map_err(|_| io::Error::other("report lock poisoned"))?;
            while !*stopped && Instant::now() < next_tick {
                let wait = next_tick.saturating_duration_since(Instant::now());
                stopped = stop.1.wait_timeout(stopped, wait).map_err(|_| io::Error::other("report lock poisoned"))?.0;
            }
            *stopped
        };
        let now = Instant::now();
        let ops = live.ops.load(Ordering::Relaxed);
        let latency = live.latency.snapshot();
        let line = interval_line(name, now - start, now - last_at, ops - last_ops, ops, &latency.since(&last_latency));
        // A stop right at a tick has nothing left to report.
        if !(stopped && now == last_at) {
            let mut out = file.lock().map_err(|_| io::Error::other("report file lock poisoned"))?;
            writeln!(out, "{line}")?;
        }
        if stopped {
            return Ok(());
        }
        (last_at, last_ops, last_latency) = (now, ops, latency);
        next_tick += interval;
    }
}

/// One line of the report.
fn interval_line(
    name: &str,
    elapsed: Duration,
    length: Duration,
    interval_ops: u64,
    total_ops: u64,
    latency: &HistogramSnapshot,
) -> String {
    let micros = |nanos: u64| nanos as f64 / 1000.0;
    let seconds = length.as_secs_f64();
    serde_json::json!({
        "benchmark": name,
        "secs_elapsed": elapsed.as_secs_f64(),
        "interval_seconds": seconds,
        "interval_ops": interval_ops,
        "ops_per_sec": if seconds > 0.0 { interval_ops as f64 / seconds } else { 0.0 },
        "total_ops": total_ops,
        "p50_micros": micros(latency.p50()),
        "p99_micros": micros(latency.p99()),
        "p999_micros": micros(latency.p999()),
        "max_micros": micros(latency.max_nanos()),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_add_up_to_the_operations_recorded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("report.jsonl");
        let file = create(&path).expect("report file");
        let reporter = Reporter::start("readrandom", Duration::from_millis(20), file).expect("reporter");
        let live = reporter.live();
        for i in 0..50u64 {
            live.record(2, 1_000 + i);
            std::thread::sleep(Duration::from_millis(2));
        }
        reporter.finish().expect("finished");
        let text = std::fs::read_to_string(&path).expect("report");
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
        assert!(!lines.is_empty(), "{text}");
        let total: u64 = lines.iter().map(|l| l["interval_ops"].as_u64().unwrap_or(0)).sum();
        assert_eq!(total, 100);
        assert_eq!(lines.last().and_then(|l| l["total_ops"].as_u64()), Some(100));
        assert!(lines.iter().all(|l| l["benchmark"] == "readrandom"));
        let busy = lines.iter().find(|l| l["interval_ops"].as_u64().unwrap_or(0) > 0).expect("a busy interval");
        let p50 = busy["p50_micros"].as_f64().unwrap_or(0.0);
        assert!((0.9..1.2).contains(&p50), "{busy}");
        let elapsed: Vec<f64> = lines.iter().map(|l| l["secs_elapsed"].as_f64().unwrap_or(0.0)).collect();
        assert!(elapsed.windows(2).all(|w| w[0] <= w[1]), "{elapsed:?}");
    }
}
