//! `--stats_dump=FILE`: a JSON-lines record of how the LSM tree evolves during a run.
//!
//! Two kinds of line, in time order per writer thread:
//! - `{"type":"sample",...}` every `--stats_interval_ms` (100 ms by default): per level its
//!   files, bytes and size/threshold score, the level holding the compaction time slice (if the
//!   policy has one), user bytes written and stall time by cause so far.
//! - `{"type":"compaction",...}` per finished compaction, from the engine's compaction listener:
//!   input level, reason, input files and bytes from level and level+1, output, per-compaction
//!   write amplification, duration, slice holder.
//!
//! Times are milliseconds since the database was opened (the sampler's and the engine's clocks
//! start within the same `open` call). The file is truncated at every open, so it covers the last
//! database the benchmark opened (fill benchmarks reopen a fresh one). The sampler holds the
//! `Db` through an `Arc` and is stopped and joined before the database closes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use splitkv::compaction::{CompactionEvent, CompactionListener, LevelsSnapshot};
use splitkv::{Db, Options};

type Sink = Arc<Mutex<BufWriter<File>>>;

/// Writes compaction events as they are reported.
pub struct EventWriter {
    sink: Sink,
}

impl CompactionListener for EventWriter {
    fn on_compaction_completed(&self, e: &CompactionEvent) {
        let line = format!(
            "{{\"type\":\"compaction\",\"t_ms\":{},\"level\":{},\"reason\":\"{}\",\"in_files\":[{},{}],\
             \"in_bytes\":[{},{}],\"out_files\":{},\"out_bytes\":{},\"trivial\":{},\"wa\":{:.3},\
             \"duration_us\":{},\"holder\":{}}}",
            e.start_ms,
            e.level,
            e.reason.name(),
            e.input_files[0],
            e.input_files[1],
            e.input_bytes[0],
            e.input_bytes[1],
            e.output_files,
            e.output_bytes,
            e.trivial_move,
            e.write_amplification(),
            e.duration_micros,
            json_level(e.slice_holder),
        );
        if let Ok(mut sink) = self.sink.lock() {
            // Instrumentation is best effort: a full disk must not fail the benchmark.
            let _ = writeln!(sink, "{line}");
        }
    }
}

fn json_level(level: Option<usize>) -> String {
    level.map_or_else(|| "null".to_owned(), |l| l.to_string())
}

/// The open dump: a listener to install before opening and a sampler to start after.
pub struct StatsDump {
    sink: Sink,
    interval: Duration,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<()>>,
}

impl StatsDump {
    /// Creates (truncates) `path` and installs the compaction listener into `options`.
    pub fn create(path: &Path, interval_ms: u64, options: &mut Options) -> std::io::Result<StatsDump> {
        let sink: Sink = Arc::new(Mutex::new(BufWriter::new(File::create(path)?)));
        options.compaction_listener = Some(Arc::new(EventWriter { sink: Arc::clone(&sink) }));
        Ok(StatsDump {
            sink,
            interval: Duration::from_millis(interval_ms.max(1)),
            stop: Arc::new(AtomicBool::new(false)),
            sampler: None,
        })
    }

    /// Starts sampling `db` (opened with `options`).
    pub fn start(&mut self, db: Arc<Db>, options: &Options) {
        let (sink, stop, interval) = (Arc::clone(&self.sink), Arc::clone(&self.stop), self.interval);
        let max_bytes = LevelsSnapshot::max_bytes_for_levels(options);
        let l0_trigger = options.level0_file_num_compaction_trigger.max(1);
        let started = Instant::now();
        self.sampler = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let line = sample(&db, started, &max_bytes, l0_trigger);
                if let Ok(mut sink) = sink.lock() {
                    let _ = writeln!(sink, "{line}");
                }
                std::thread::sleep(interval);
            }
        }));
    }

    /// Stops the sampler (releasing its `Db`) and flushes the file.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.sampler.take() {
            let _ = handle.join();
        }
        if let Ok(mut sink) = self.sink.lock() {
            let _ = sink.flush();
        }
    }
}

impl Drop for StatsDump {
    fn drop(&mut self) {
        self.finish();
    }
}

fn sample(db: &Db, started: Instant, max_bytes: &[u64], l0_trigger: usize) -> String {
    let stats = db.stats();
    let holder = db.property("splitkv.compaction-slice-holder").and_then(|h| h.parse::<usize>().ok());
    let levels: Vec<String> = stats
        .levels
        .iter()
        .map(|l| {
            let score = if l.level == 0 {
                l.files as f64 / l0_trigger as f64
            } else {
                l.bytes as f64 / max_bytes.get(l.level).copied().unwrap_or(u64::MAX).max(1) as f64
            };
            format!("{{\"level\":{},\"files\":{},\"bytes\":{},\"score\":{:.3}}}", l.level, l.files, l.bytes, score)
        })
        .collect();
    format!(
        "{{\"type\":\"sample\",\"t_ms\":{},\"user_bytes\":{},\"compactions\":{},\"stall_slowdown_us\":{},\
         \"stall_stop_us\":{},\"holder\":{},\"levels\":[{}]}}",
        started.elapsed().as_millis(),
        stats.user_bytes_written,
        stats.compactions,
        stats.stall_slowdown_micros,
        stats.stall_stop_micros,
        json_level(holder),
        levels.join(",")
    )
}
