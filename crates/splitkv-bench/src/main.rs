//! `splitkv-bench`: LevelDB's `db_bench`, same benchmark names, flags, keys, values and output
//! lines, driving splitkv or (with the `leveldb` feature) LevelDB through one harness.
//!
//! The runner (here) mirrors db_bench's `Benchmark::Run`: print the header, destroy the database unless
//! `--use_existing_db`, open it, then run each listed benchmark in order. Fill benchmarks
//! (`fillseq`, `fillrandom`, `fillsync`, `fill100K`, `fillbatch`) start from a fresh database;
//! everything else (`overwrite`, reads, deletes, `compact`) uses what is there. Each benchmark runs
//! on `--threads` threads that each do the full operation count with their own random stream,
//! started together behind a barrier; their measurements are merged into one report line. What
//! each benchmark does is in `benchmarks`.
//!
//! YCSB's core workloads run as the benchmarks `ycsb_load` (fresh database, `--ycsb_records`
//! records split over `--ycsb_threads`) and `ycsb_a` … `ycsb_f` (`--ycsb_ops` operations in total
//! over `--ycsb_threads`). Inserts of D and E continue one key sequence across the whole run.
//!
//! After each benchmark the runner also gathers [`report::Metrics`]: throughput, latency
//! percentiles, write amplification (engine counters and `/proc/self/io`), space amplification
//! (directory size over the live data the harness tracked) and stall time; it prints them on an
//! indented line and, with `--json=FILE`, rewrites FILE with every benchmark so far.
#![deny(unsafe_code)]

mod benchmarks;
mod engines;
mod flags;
mod interval_report;
mod keys;
mod memory_limit;
mod plot;
mod progress;
mod report;
mod resources;
mod stats_dump;
mod values;
mod ycsb;

use std::process::ExitCode;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use benchmarks::{expected_ops, plan, Context, LiveSet, Method, Plan, ThreadState, Tracking, Workload};
use engines::{BenchResult, Engine};
use flags::{FlagError, Flags};
use keys::LevelDbRandom;
use memory_limit::MemoryLimit;
use progress::Progress;
use report::{Metrics, OpStats};
use ycsb::{InsertCounter, SplitMix64};

/// db_bench's `Benchmark`: the open engine, the count of threads started so far (which seeds
/// each new thread's random stream), what the database holds, and the metrics gathered so far.
struct Runner<'f> {
    flags: &'f Flags,
    engine: Option<Box<dyn Engine>>,
    total_thread_count: u32,
    tracking: Tracking,
    results: Vec<Metrics>,
    after_close: Option<AfterClose>,
    /// The `--report_interval_seconds` time series file, when asked for.
    report_file: Option<interval_report::ReportFile>,
    /// The `--memory_limit` group the process runs in, if any.
    memory_limit: Option<MemoryLimit>,
}

/// The database's footprint once the engine has closed (everything buffered is on disk).
#[derive(Clone, Debug, serde::Serialize)]
struct AfterClose {
    db_bytes_on_disk: Option<u64>,
    live_user_bytes: Option<u64>,
    space_amplification: Option<f64>,
}

impl AfterClose {
    fn format_line(&self) -> String {
        let amplification = self.space_amplification.map_or_else(|| "n/a".to_owned(), |a| format!("{a:.2}"));
        let bytes = self.db_bytes_on_disk.map_or_else(|| "n/a".to_owned(), |b| b.to_string());
        format!("  after close: {bytes} bytes on disk; space amp {amplification}")
    }
}

impl<'f> Runner<'f> {
    fn new(flags: &'f Flags) -> Self {
        // YCSB key numbers reach past the loaded records by the inserts of every D or E run.
        let inserting_runs =
            flags.benchmarks.iter().filter(|name| matches!(name.as_str(), "ycsb_d" | "ycsb_e")).count();
        let ycsb_capacity = if flags.benchmarks.iter().any(|name| name.starts_with("ycsb_")) {
            flags.ycsb_records + flags.ycsb_ops * inserting_runs as u64 + 1
        } else {
            0
        };
        Runner {
            flags,
            engine: None,
            total_thread_count: 0,
            tracking: Tracking {
                db_bench: LiveSet::new(u64::from(flags.num)),
                ycsb: LiveSet::new(ycsb_capacity),
                ycsb_inserts: InsertCounter::new(flags.ycsb_records),
                live_known: !flags.use_existing_db,
            },
            results: Vec::new(),
            after_close: None,
            report_file: None,
            memory_limit: None,
        }
    }

    fn run(&mut self) -> BenchResult<()> {
        engines::ensure_built_in(self.flags)?;
        // Joined before the database is opened, so its page cache is charged to the group too.
        if let Some(bytes) = self.flags.memory_limit {
            self.memory_limit = Some(MemoryLimit::enter(bytes)?);
            // Pages already cached stay charged to whichever group first read them (an earlier
            // run's); evicted now, they are read again under this limit.
            if self.flags.use_existing_db && self.flags.db.exists() {
                engines::drop_os_cache(&self.flags.db)?;
            }
        }
        eprint!("{}", report::format_environment(&engines::provenance::environment_lines(self.flags)));
        engines::provenance::refuse_handicapped_peer(self.flags)?;
        let key_size = self.flags.key_size();
        println!("{}", MemoryLimit::header_line(self.memory_limit.as_ref()));
        print!(
            "{}",
            report::format_header(key_size, self.flags.value_size, self.flags.compression_ratio, self.flags.num)
        );
        if !self.flags.use_existing_db {
            engines::destroy(self.flags)?;
        }
        self.engine = Some(engines::open(self.flags)?);
        if self.flags.report_interval_seconds > 0.0 {
            self.report_file = Some(interval_report::create(&self.flags.report_file)?);
        }

        for (position, name) in self.flags.benchmarks.iter().enumerate() {
            let mut workload = Workload {
                num: u64::from(self.flags.num),
                writes: self.flags.writes_per_thread(),
                reads: self.flags.reads_per_thread(),
                value_size: self.flags.value_size,
                // RocksDB's db_bench: `--batch_size` writes per batch (`fillbatch` says 1000).
                entries_per_batch: self.flags.batch_size,
                sync: self.flags.sync,
            };
            let Some(Plan { mut method, fresh_db, ycsb }) = plan(name, &mut workload) else {
                // db_bench stays silent about empty names (a trailing comma).
                if !name.is_empty() {
                    eprintln!("unknown benchmark '{name}'");
                }
                continue;
            };
            if fresh_db {
                if self.flags.use_existing_db {
                    println!("{}", report::format_skipped_line(name));
                    method = None;
                } else {
                    self.reopen_fresh()?;
                }
            }
            if self.flags.drop_os_cache && !fresh_db && method.is_some() {
                self.reopen_cold()?;
            }
            if name == "stats" {
                println!("\n{}", self.engine_stats());
            }
            if let Some(method) = method {
                let threads = match (ycsb.is_some(), name.as_str()) {
                    (true, _) => self.flags.ycsb_threads,
                    // db_bench adds the writer to the readers.
                    (false, "readwhilewriting") => self.flags.threads + 1,
                    (false, _) => self.flags.threads,
                };
                let ordinal = position + 1;
                let (line, metrics) = self.run_benchmark(name, ordinal, method, workload, threads, ycsb.flatten())?;
                println!("{line}");
                println!("{}", metrics.format_line());
                println!("{}", metrics.resources.format_line());
                self.results.push(metrics);
                self.write_json()?;
                if self.flags.histogram || self.flags.stats {
                    println!("{}", self.engine_stats());
                }
            }
        }
        if let Some(engine) = self.engine.take() {
            engine.close()?;
            // Closing flushes what the engine still buffered, so this is the settled footprint.
            let db_bytes_on_disk = engines::disk_usage(&self.flags.db).ok();
            let live_user_bytes = self.live_user_bytes();
            self.after_close = Some(AfterClose {
                db_bytes_on_disk,
                live_user_bytes,
                space_amplification: report::ratio(db_bytes_on_disk, live_user_bytes),
            });
            if let Some(after_close) = &self.after_close {
                println!("{}", after_close.format_line());
            }
            self.write_json()?;
        }
        Ok(())
    }

    /// Key + value bytes of the live records, if the harness has seen every write.
    fn live_user_bytes(&self) -> Option<u64> {
        if !self.tracking.live_known {
            return None;
        }
        self.tracking.db_bench.total().zip(self.tracking.ycsb.total()).map(|(a, b)| a + b)
    }

    fn reopen_fresh(&mut self) -> BenchResult<()> {
        if let Some(engine) = self.engine.take() {
            engine.close()?;
        }
        engines::destroy(self.flags)?;
        self.engine = Some(engines::open(self.flags)?);
        self.tracking.db_bench.clear();
        self.tracking.ycsb.clear();
        self.tracking.ycsb_inserts = InsertCounter::new(self.flags.ycsb_records);
        self.tracking.live_known = true;
        Ok(())
    }

    /// Closes the database, evicts it from the OS page cache and opens it again. The memtable is
    /// written out first: otherwise reopening replays the log's tail and so reads it back into
    /// the cache.
    fn reopen_cold(&mut self) -> BenchResult<()> {
        if let Some(engine) = self.engine.take() {
            engine.flush()?;
            engine.close()?;
        }
        engines::drop_os_cache(&self.flags.db)?;
        self.engine = Some(engines::open(self.flags)?);
        Ok(())
    }

    fn engine_stats(&self) -> String {
        self.engine.as_ref().and_then(|e| e.stats_text()).unwrap_or_else(|| "(failed)".to_owned())
    }

    /// Rewrites the `--json` file with the flags and every benchmark measured so far, so a run
    /// that fails midway still leaves what it measured.
    fn write_json(&self) -> BenchResult<()> {
        let Some(path) = &self.flags.json else { return Ok(()) };
        let document = serde_json::json!({
            "engine": engines::version_line(self.flags),
            "flags": self.flags,
            "memory_limit": MemoryLimit::header_line(self.memory_limit.as_ref()),
            "benchmarks": self.results,
            "after_close": self.after_close,
        });
        std::fs::write(path, serde_json::to_string_pretty(&document)?)?;
        Ok(())
    }

    /// Runs `method` on `threads` threads at once and returns the merged report line and metrics.
    fn run_benchmark(
        &mut self,
        name: &str,
        ordinal: usize,
        method: Method,
        workload: Workload,
        threads: usize,
        ycsb_workload: Option<ycsb::Workload>,
    ) -> BenchResult<(String, Metrics)> {
        let engine = self.engine.as_deref().ok_or("database is not open")?;
        let seeds: Vec<u32> = (0..threads)
            .map(|_| {
                self.total_thread_count += 1;
                self.flags.seed.wrapping_add(self.total_thread_count)
            })
            .collect();
        let ctx = Context {
            engine,
            flags: self.flags,
            workload,
            threads,
            ycsb_workload,
            tracking: &self.tracking,
            finished_readers: AtomicUsize::new(0),
        };
        let reporter = match &self.report_file {
            Some(file) => Some(interval_report::Reporter::start(
                name,
                Duration::from_secs_f64(self.flags.report_interval_seconds),
                Arc::clone(file),
            )?),
            None => None,
        };
        let live = reporter.as_ref().map(interval_report::Reporter::live);
        let counters_before = engine.write_counters();
        let os_bytes_before = report::os_write_bytes();
        let reads_before = resources::Snapshot::take(engine.read_counters());
        // Level samples from before this benchmark (an earlier one, the open) are not its own.
        engine.take_level_samples();
        let progress = Progress::start(name, expected_ops(name, &workload, threads, self.flags));
        let start_together = Barrier::new(threads);
        let results: Vec<BenchResult<(OpStats, Option<u64>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(index, &seed)| {
                    let (ctx, start_together) = (&ctx, &start_together);
                    let progress = progress.clone();
                    let live = live.clone();
                    scope.spawn(move || {
                        start_together.wait();
                        let read_before = resources::thread_read_bytes();
                        let mut thread = ThreadState {
                            index,
                            rand: LevelDbRandom::new(seed),
                            ycsb_rand: SplitMix64::new(u64::from(seed)),
                            stats: OpStats::start(ctx.flags.histogram, progress).with_live(live),
                        };
                        let outcome = method(ctx, &mut thread);
                        thread.stats.stop();
                        let read = read_before.zip(resources::thread_read_bytes()).map(|(b, a)| a.saturating_sub(b));
                        outcome.map(|()| (thread.stats, read))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|_| Err("benchmark thread panicked".into())))
                .collect()
        });
        // Cleared before anything else is printed, whether the benchmark succeeded or not.
        progress.finish();
        if let Some(reporter) = reporter {
            reporter.finish()?;
        }
        let level_samples = engine.take_level_samples();
        let (mut all, thread_reads): (Vec<OpStats>, Vec<Option<u64>>) =
            results.into_iter().collect::<BenchResult<Vec<_>>>()?.into_iter().unzip();
        let caller_read_bytes = thread_reads.into_iter().sum::<Option<u64>>();
        // The report is the measured threads'; helpers (a background writer) only add bytes.
        all.sort_by_key(OpStats::is_excluded);
        let mut all = all.into_iter();
        let mut merged = all.next().filter(|s| !s.is_excluded()).ok_or("no benchmark threads ran")?;
        for stats in all {
            merged.merge(&stats);
        }
        let mut metrics = merged.summary(name);
        metrics.resources =
            reads_before.since(&resources::Snapshot::take(engine.read_counters()), metrics.ops, caller_read_bytes);
        self.add_engine_metrics(&mut metrics, counters_before, os_bytes_before);
        self.plot(name, ordinal, &merged, &level_samples)?;
        Ok((merged.report(name), metrics))
    }

    /// Draws the benchmark's charts into the `--plot` directory, if one was given.
    #[cfg(feature = "plot")]
    fn plot(&self, name: &str, ordinal: usize, stats: &OpStats, levels: &[stats_dump::LevelSample]) -> BenchResult<()> {
        let Some(dir) = &self.flags.plot else { return Ok(()) };
        let (throughput, latency_cdf) = (stats.throughput_series(), stats.latency_cdf());
        let series =
            plot::BenchmarkSeries { name, ordinal, throughput: &throughput, latency_cdf: &latency_cdf, levels };
        plot::render(dir, &series)?;
        Ok(())
    }

    /// Without the `plot` feature `--plot` is refused before anything runs, so there is nothing
    /// to draw.
    #[cfg(not(feature = "plot"))]
    fn plot(
        &self,
        _name: &str,
        _ordinal: usize,
        _stats: &OpStats,
        _levels: &[stats_dump::LevelSample],
    ) -> BenchResult<()> {
        Ok(())
    }

    /// Fills in the figures that come from the engine, the kernel and the directory rather than
    /// from the benchmark threads.
    fn add_engine_metrics(
        &self,
        metrics: &mut Metrics,
        counters_before: Option<engines::WriteCounters>,
        os_bytes_before: Option<u64>,
    ) {
        let engine = self.engine.as_deref();
        let counters_after = engine.and_then(|e| e.write_counters());
        if let (Some(before), Some(after)) = (counters_before, counters_after) {
            metrics.engine_bytes_written = Some(after.engine_bytes.saturating_sub(before.engine_bytes));
            metrics.stall_micros = Some(after.stall_micros.saturating_sub(before.stall_micros));
        }
        let user = Some(metrics.user_bytes_written);
        metrics.write_amplification = report::ratio(metrics.engine_bytes_written, user);
        metrics.os_bytes_written =
            os_bytes_before.zip(report::os_write_bytes()).map(|(before, after)| after.saturating_sub(before));
        metrics.os_write_amplification = report::ratio(metrics.os_bytes_written, user);
        metrics.db_bytes_on_disk = engines::disk_usage(&self.flags.db).ok();
        metrics.live_user_bytes = self.live_user_bytes();
        metrics.space_amplification = report::ratio(metrics.db_bytes_on_disk, metrics.live_user_bytes);
    }
}

fn main() -> ExitCode {
    let flags = match flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(FlagError::HelpRequested) => {
            println!("{}", flags::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(message) = plot::ensure_available(&flags) {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    let mut runner = Runner::new(&flags);
    match runner.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchmarks::thread_share;

    fn workload() -> Workload {
        Workload { num: 1_000_000, writes: None, reads: 1_000_000, value_size: 100, entries_per_batch: 1, sync: false }
    }

    #[test]
    fn fills_get_a_fresh_database_and_reads_do_not() {
        for name in ["fillseq", "fillrandom", "fillsync", "fill100K", "fillbatch"] {
            assert!(plan(name, &mut workload()).is_some_and(|p| p.fresh_db), "{name}");
        }
        for name in [
            "overwrite",
            "readrandom",
            "readmissing",
            "readseq",
            "readreverse",
            "scanrandom",
            "seekrandom",
            "deleterandom",
            "deleteseq",
            "compact",
            "rewritelog",
            "stats",
            "readwhilewriting",
            "readrandomwriterandom",
            "updaterandom",
        ] {
            assert!(plan(name, &mut workload()).is_some_and(|p| !p.fresh_db), "{name}");
        }
        assert!(plan("nosuchbench", &mut workload()).is_none());
        assert!(plan("stats", &mut workload()).is_some_and(|p| p.method.is_none()));
    }

    #[test]
    fn ycsb_benchmarks_plan_the_load_fresh_and_the_workloads_in_place() {
        assert!(plan("ycsb_load", &mut workload()).is_some_and(|p| p.fresh_db && p.ycsb == Some(None)));
        for letter in ['a', 'b', 'c', 'd', 'e', 'f'] {
            let planned = plan(&format!("ycsb_{letter}"), &mut workload());
            assert!(planned.is_some_and(|p| !p.fresh_db && p.ycsb == Some(ycsb::Workload::core(letter))), "{letter}");
        }
        assert!(plan("ycsb_g", &mut workload()).is_none());
        assert!(plan("ycsb_ab", &mut workload()).is_none());
    }

    #[test]
    fn thread_shares_cover_the_total_exactly_once() {
        let shares: Vec<(u64, u64)> = (0..3).map(|i| thread_share(10, i, 3)).collect();
        assert_eq!(shares, vec![(0, 3), (3, 6), (6, 10)]);
        assert_eq!(thread_share(7, 0, 1), (0, 7));
    }

    #[test]
    fn live_set_tracks_overwrites_deletes_and_overflow() {
        let live = LiveSet::new(4);
        live.set(0, 100);
        live.set(1, 50);
        live.set(0, 30);
        live.set(1, 0);
        assert_eq!(live.total(), Some(30));
        live.set(9, 1);
        assert_eq!(live.total(), None);
        live.clear();
        assert_eq!(live.total(), Some(0));
    }

    #[test]
    fn ycsb_run_on_splitkv_reports_metrics_and_json() {
        let dir = std::env::temp_dir().join(format!("splitkv-bench-ycsb-test-{}", std::process::id()));
        let json = dir.with_extension("json");
        let flags = flags::parse([
            format!("--db={}", dir.display()),
            format!("--json={}", json.display()),
            "--benchmarks=ycsb_load,ycsb_a,ycsb_d,ycsb_e,ycsb_f".to_owned(),
            "--ycsb_records=300".to_owned(),
            "--ycsb_ops=200".to_owned(),
            "--ycsb_threads=2".to_owned(),
            "--ycsb_field_length=20".to_owned(),
        ])
        .unwrap();
        let mut runner = Runner::new(&flags);
        runner.run().unwrap();
        let names: Vec<&str> = runner.results.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["ycsb_load", "ycsb_a", "ycsb_d", "ycsb_e", "ycsb_f"]);
        let load = &runner.results[0];
        assert_eq!(load.ops, 300);
        // 300 records of a 200-byte value and a `user…` key of 5 to 23 bytes.
        assert!((300 * 205..=300 * 223).contains(&load.user_bytes_written), "{}", load.user_bytes_written);
        assert!(load.write_amplification.is_some() && load.space_amplification.is_some());
        assert_eq!(runner.results[1].ops, 200);
        // D and E insert about 5% each on top of the loaded records.
        assert!(runner.tracking.ycsb_inserts.last_value() > 300);
        let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(written["benchmarks"].as_array().map(Vec::len), Some(5));
        assert_eq!(written["flags"]["ycsb_records"], 300);
        assert!(written["benchmarks"][1]["latency_micros"]["p99"].is_number());
        assert!(written["after_close"]["space_amplification"].as_f64().is_some_and(|a| a > 0.0), "{written}");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&json);
    }

    #[test]
    fn writes_set_the_fill_count_per_thread_and_keys_still_come_from_num() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags::parse([
            format!("--db={}", dir.path().join("db").display()),
            "--benchmarks=fillrandom,readseq".to_owned(),
            "--num=2000".to_owned(),
            "--writes=700".to_owned(),
            "--threads=2".to_owned(),
        ])
        .unwrap();
        let mut runner = Runner::new(&flags);
        runner.run().unwrap();
        let by_name = |n: &str| runner.results.iter().find(|m| m.name == n).unwrap_or_else(|| panic!("{n} ran"));
        let fill = by_name("fillrandom");
        assert_eq!(fill.ops, 1400);
        assert!(fill.message.contains("(700 ops)"), "{}", fill.message);
        // 1400 random keys drawn from 2000: well over the 700 that keys below 700 would allow,
        // and at most 1400. Each of the two scans counts what it visits.
        let keys = by_name("readseq").ops / 2;
        assert!((800..=1400).contains(&keys), "{keys} distinct keys");
    }

    #[test]
    fn parity_workloads_run_on_splitkv_with_a_time_series_report() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.jsonl");
        let flags = flags::parse([
            format!("--db={}", dir.path().join("db").display()),
            format!("--report_file={}", report.display()),
            "--report_interval_seconds=0.01".to_owned(),
            "--benchmarks=fillrandom,readwhilewriting,readrandomwriterandom,updaterandom,seekrandom".to_owned(),
            "--num=2000".to_owned(),
            "--reads=300".to_owned(),
            "--threads=2".to_owned(),
            "--seek_nexts=5".to_owned(),
            "--key_size=20".to_owned(),
            "--batch_size=4".to_owned(),
            "--readwritepercent=50".to_owned(),
        ])
        .unwrap();
        let mut runner = Runner::new(&flags);
        runner.run().unwrap();
        let by_name = |n: &str| runner.results.iter().find(|m| m.name == n).unwrap_or_else(|| panic!("{n} ran"));
        // Two threads each fill 2000 keys in batches of 4.
        assert_eq!(by_name("fillrandom").ops, 4000);
        // Two readers; the writer's operations are not counted, its bytes are.
        let rww = by_name("readwhilewriting");
        assert_eq!(rww.ops, 600);
        assert!(rww.user_bytes_written > 0, "the writer wrote while the readers read");
        let mixed = by_name("readrandomwriterandom");
        assert_eq!(mixed.ops, 600);
        assert!(mixed.message.contains("reads:") && mixed.message.contains("writes:"), "{}", mixed.message);
        let update = by_name("updaterandom");
        assert_eq!(update.ops, 600);
        assert_eq!(update.user_bytes_written, 600 * (20 + 100));
        let seek = by_name("seekrandom");
        assert_eq!(seek.ops, 600);
        assert!(seek.mb_per_sec > 0.0, "seeks read their next entries");
        // The time series: one JSON object per line, every benchmark, intervals that add up.
        let lines: Vec<serde_json::Value> =
            std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        for name in ["fillrandom", "readwhilewriting", "readrandomwriterandom", "updaterandom", "seekrandom"] {
            let mine: Vec<&serde_json::Value> = lines.iter().filter(|l| l["benchmark"] == name).collect();
            let total: u64 = mine.iter().map(|l| l["interval_ops"].as_u64().unwrap_or(0)).sum();
            assert_eq!(total, by_name(name).ops, "{name}: {mine:?}");
            assert!(mine.iter().all(|l| l["p99_micros"].is_number() && l["ops_per_sec"].is_number()));
        }
    }

    #[test]
    fn duration_bounds_a_benchmark_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags::parse([
            format!("--db={}", dir.path().join("db").display()),
            "--benchmarks=fillseq,readrandom".to_owned(),
            "--num=1000".to_owned(),
            "--reads=10".to_owned(),
            "--duration=1".to_owned(),
        ])
        .unwrap();
        let mut runner = Runner::new(&flags);
        runner.run().unwrap();
        // fillseq is not timed; readrandom runs its second, not its 10 reads.
        assert_eq!(runner.results[0].ops, 1000);
        let read = &runner.results[1];
        assert!(read.seconds >= 1.0, "{}", read.seconds);
        assert!(read.ops > 10, "{}", read.ops);
    }

    #[cfg(feature = "plot")]
    #[test]
    fn plot_flag_writes_charts_per_benchmark() {
        let dir = tempfile::tempdir().unwrap();
        let charts = dir.path().join("charts");
        let flags = flags::parse([
            format!("--db={}", dir.path().join("db").display()),
            format!("--plot={}", charts.display()),
            "--benchmarks=fillseq,readrandom".to_owned(),
            "--num=2000".to_owned(),
        ])
        .unwrap();
        Runner::new(&flags).run().unwrap();
        for name in
            ["fillseq-1-throughput", "fillseq-1-latency-cdf", "readrandom-2-throughput", "readrandom-2-latency-cdf"]
        {
            let svg = std::fs::read_to_string(charts.join(format!("{name}.svg"))).unwrap_or_default();
            assert!(svg.contains("<svg") && svg.contains("<polyline"), "{name}");
        }
    }

    #[test]
    fn progress_bars_expect_each_benchmarks_operation_count() {
        let flags = flags::parse(["--num=1000", "--reads=300", "--ycsb_records=50", "--ycsb_ops=70"]).unwrap();
        let w = Workload { num: 1000, writes: None, reads: 300, value_size: 100, entries_per_batch: 1, sync: false };
        assert_eq!(expected_ops("fillrandom", &w, 2, &flags), Some(2000));
        assert_eq!(expected_ops("overwrite", &w, 1, &flags), Some(1000));
        assert_eq!(expected_ops("deleteseq", &w, 1, &flags), Some(1000));
        let halved = Workload { writes: Some(500), ..w };
        assert_eq!(expected_ops("fillrandom", &halved, 2, &flags), Some(1000));
        assert_eq!(expected_ops("deleteseq", &halved, 1, &flags), Some(1000), "--writes is for writes");
        assert_eq!(expected_ops("readrandom", &w, 3, &flags), Some(900));
        assert_eq!(expected_ops("readseq", &Workload { reads: 5000, ..w }, 1, &flags), Some(1000));
        assert_eq!(expected_ops("deletefraction", &w, 4, &flags), Some(500));
        assert_eq!(expected_ops("ycsb_load", &w, 2, &flags), Some(50));
        assert_eq!(expected_ops("ycsb_a", &w, 2, &flags), Some(70));
        assert_eq!(expected_ops("compact", &w, 1, &flags), None);
        // The writer of readwhilewriting is not counted.
        assert_eq!(expected_ops("readwhilewriting", &w, 3, &flags), Some(600));
        assert_eq!(expected_ops("updaterandom", &w, 1, &flags), Some(300));
        let timed = flags::parse(["--duration=3"]).unwrap();
        assert_eq!(expected_ops("readrandom", &w, 1, &timed), None);
        assert_eq!(expected_ops("fillseq", &w, 1, &timed), Some(1000), "sequential fills are not timed");
    }

    #[test]
    fn scaled_benchmarks_adjust_the_workload_like_db_bench() {
        let mut w = workload();
        plan("fillsync", &mut w);
        assert_eq!((w.num, w.sync), (1000, true));
        let mut w = workload();
        plan("fill100K", &mut w);
        assert_eq!((w.num, w.value_size), (1000, 100_000));
        let mut w = workload();
        plan("fillbatch", &mut w);
        assert_eq!(w.entries_per_batch, 1000);
        let mut w = workload();
        plan("readrandomsmall", &mut w);
        assert_eq!(w.reads, 1000);
    }
}
