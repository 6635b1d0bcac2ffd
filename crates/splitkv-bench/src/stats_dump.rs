//! `--stats_dump=FILE`: a JSON-lines record of how the LSM tree evolves during a run; the same
//! sampler also keeps per-level file counts in memory for `--plot` ([`LevelSample`]).
//!
//! Two kinds of line, in time order per writer thread:
//! - `{"type":"sample",...}` every `--stats_interval_ms` (100 ms by default): per level its
//!   files, bytes and size/threshold score, the level holding the compaction time slice (if the
//!   policy has one), user bytes written, bytes on disk (holes excluded), write amplification
//!   and GC bytes relocated so far, and stall time by cause.
//! - `{"type":"compaction",...}` per finished compaction, from the engine's compaction listener:
//!   input level, reason, input files and bytes from level and level+1, output, per-compaction
//!   write amplification, duration, slice holder.
//!
//! Times are milliseconds since the database was opened (the sampler's and the engine's clocks
//! start within the same `open` call). The file is truncated at every open, so it covers the last
//! database the benchmark opened (fill benchmarks reopen a fresh one). The sampler holds the
//! `Db` through an `Arc` and is stopped and joined before the database closes. Samples kept for
//! plotting sit behind a mutex shared with the sampler thread; the runner drains them around each
//! benchmark, so they never outgrow one benchmark's run.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use splitkv::compaction::LevelsSnapshot;
use splitkv::{CompactionEvent, CompactionListener, Db, Options, Stats};

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

/// SSTables per level at one moment, for the levels chart of `--plot`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelSample {
    /// Milliseconds since the database was opened.
    pub t_ms: u64,
    /// Files in level 0, 1, ...
    pub files: Vec<usize>,
}

type Samples = Arc<Mutex<Vec<LevelSample>>>;

/// The open dump: a listener to install before opening and a sampler to start after. It writes
/// the JSON-lines file, keeps [`LevelSample`]s in memory, or both.
pub struct StatsDump {
    sink: Option<Sink>,
    samples: Option<Samples>,
    interval: Duration,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<()>>,
}

impl StatsDump {
    /// Creates (truncates) `path`, if given, and installs the compaction listener into `options`;
    /// `keep_samples` also keeps level samples for [`StatsDump::take_samples`].
    pub fn create(
        path: Option<&Path>,
        keep_samples: bool,
        interval_ms: u64,
        options: &mut Options,
    ) -> std::io::Result<StatsDump> {
        let sink = match path {
            Some(path) => {
                let sink: Sink = Arc::new(Mutex::new(BufWriter::new(File::create(path)?)));
                options.compaction_listener = Some(Arc::new(EventWriter { sink: Arc::clone(&sink) }));
                Some(sink)
            }
            None => None,
        };
        Ok(StatsDump {
            sink,
            samples: keep_samples.then(Samples::default),
            interval: Duration::from_millis(interval_ms.max(1)),
            stop: Arc::new(AtomicBool::new(false)),
            sampler: None,
        })
    }

    /// Starts sampling `db` (opened with `options`).
    pub fn start(&mut self, db: Arc<Db>, options: &Options) {
        let (sink, samples) = (self.sink.clone(), self.samples.clone());
        let (stop, interval) = (Arc::clone(&self.stop), self.interval);
        let max_bytes = LevelsSnapshot::level_targets(
            options.num_levels,
            options.max_bytes_for_level_base,
            options.max_bytes_for_level_multiplier,
        );
        let l0_trigger = options.level0_file_num_compaction_trigger.max(1);
        let started = Instant::now();
        self.sampler = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let stats = db.stats();
                if let Some(sink) = &sink {
                    let line = sample_line(&db, &stats, t_ms, &max_bytes, l0_trigger);
                    if let Ok(mut sink) = sink.lock() {
                        let _ = writeln!(sink, "{line}");
                    }
                }
                if let Some(samples) = &samples {
                    let files = stats.levels.iter().map(|l| l.files).collect();
                    if let Ok(mut samples) = samples.lock() {
                        samples.push(LevelSample { t_ms, files });
                    }
                }
                std::thread::sleep(interval);
            }
        }));
    }

    /// Removes and returns the level samples kept since the last call (none unless created with
    /// `keep_samples`).
    pub fn take_samples(&self) -> Vec<LevelSample> {
        self.samples.as_ref().and_then(|s| s.lock().ok().map(|mut s| std::mem::take(&mut *s))).unwrap_or_default()
    }

    /// Stops the sampler (releasing its `Db`) and flushes the file.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.sampler.take() {
            let _ = handle.join();
        }
        if let Some(Ok(mut sink)) = self.sink.as_ref().map(|sink| sink.lock()) {
            let _ = sink.flush();
        }
    }
}

impl Drop for StatsDump {
    fn drop(&mut self) {
        self.finish();
    }
}

fn sample_line(db: &Db, stats: &Stats, t_ms: u64, max_bytes: &[u64], l0_trigger: usize) -> String {
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
        "{{\"type\":\"sample\",\"t_ms\":{},\"user_bytes\":{},\"disk_bytes\":{},\"vlog_bytes\":{},\"known_garbage\":{},\"write_amp\":{:.4},\
         \"gc_bytes_relocated\":{},\"compactions\":{},\"stall_slowdown_us\":{},\"stall_stop_us\":{},\
         \"holder\":{},\"levels\":[{}]}}",
        t_ms,
        stats.user_bytes_written,
        stats.disk_bytes,
        stats.vlog_bytes(),
        stats.vlog_garbage_bytes(),
        stats.write_amplification(),
        stats.gc_bytes_relocated,
        stats.compactions,
        stats.stall_slowdown_micros,
        stats.stall_stop_micros,
        json_level(holder),
        levels.join(",")
    )
}
