//! Measurement and output in `db_bench`'s format, so scripts that parse LevelDB's output parse ours,
//! plus the fuller per-benchmark [`Metrics`] written with `--json`.
//!
//! [`OpStats`] is one thread's record of a benchmark (LevelDB's `Stats`): operations done, bytes
//! moved, user bytes written, an optional message such as `(864322 of 1000000 found)`, and the
//! time between consecutive finished operations in an HDR histogram (always kept, for the latency
//! percentiles; printed only with `--histogram`), and operations per 100 ms interval (for
//! `--plot`'s throughput chart; a clock comparison per op, so it is always kept too). It also
//! feeds the benchmark's progress bar, in batches. Threads keep their own
//! `OpStats` and merge them afterwards, so nothing is shared while timing. Merged figures follow
//! db_bench: micros/op is the sum of per-thread elapsed time over all operations; MB/s uses the
//! wall time from the first start to the last finish.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::interval_report::LiveReport;
use crate::progress::Progress;

/// Width db_bench pads benchmark names to.
const NAME_WIDTH: usize = 12;

/// Operations slower than this are reported as they happen when timing each op (db_bench's rule).
const LONG_OP_MICROS: f64 = 20_000.0;

/// Granularity of the throughput-over-time series: fine enough to show stalls, which last from
/// tens of milliseconds up, coarse enough that one interval holds many operations.
pub const THROUGHPUT_INTERVAL: Duration = Duration::from_millis(100);

/// One thread's (or, after [`OpStats::merge`], all threads') measurements of one benchmark.
#[derive(Debug)]
pub struct OpStats {
    start: Instant,
    finish: Instant,
    seconds: f64,
    done: u64,
    bytes: u64,
    user_bytes_written: u64,
    last_op_finish: Instant,
    message: String,
    latencies_nanos: Histogram<u64>,
    print_histogram: bool,
    progress: Progress,
    /// Operations finished but not yet added to the progress bar.
    unreported: u64,
    next_progress_at: Instant,
    /// Operations finished in each [`THROUGHPUT_INTERVAL`] since `start` (throughput over time);
    /// the interval in progress is counted in `current_interval_ops` until it ends.
    interval_ops: Vec<u64>,
    current_interval_ops: u64,
    next_interval_at: Instant,
    /// The `--report_interval_seconds` time series, fed per operation when it is on.
    live: Option<Arc<LiveReport>>,
    /// A helper thread's measurements (the writer of `readwhilewriting`): only its user bytes
    /// are merged, as db_bench leaves its background writer out of the report.
    excluded: bool,
}

impl OpStats {
    /// Starts the clock; `print_histogram` adds the latency histogram to the report, `progress`
    /// is the benchmark's bar, shared by its threads.
    pub fn start(print_histogram: bool, progress: Progress) -> Self {
        let now = Instant::now();
        OpStats {
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            bytes: 0,
            user_bytes_written: 0,
            last_op_finish: now,
            message: String::new(),
            // Three significant digits; the histogram grows to fit whatever it records.
            latencies_nanos: Histogram::new(3).expect("3 significant figures is a valid precision"),
            print_histogram,
            progress,
            unreported: 0,
            next_progress_at: now + Progress::REPORT_EVERY,
            interval_ops: Vec::new(),
            current_interval_ops: 0,
            next_interval_at: now + THROUGHPUT_INTERVAL,
            live: None,
            excluded: false,
        }
    }

    /// Also records every operation into `live` (the interval report).
    pub fn with_live(mut self, live: Option<Arc<LiveReport>>) -> Self {
        self.live = live;
        self
    }

    /// Leaves these measurements out of the merged report (only user bytes are merged).
    pub fn exclude_from_merge(&mut self) {
        self.excluded = true;
    }

    /// True for a helper thread's measurements (see [`OpStats::exclude_from_merge`]).
    pub fn is_excluded(&self) -> bool {
        self.excluded
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = (self.finish - self.start).as_secs_f64();
        self.close_intervals_before(self.finish);
        // The partial last interval is kept; the series divides it by its real length.
        self.interval_ops.push(self.current_interval_ops);
        self.current_interval_ops = 0;
        self.progress.add(self.unreported);
        self.unreported = 0;
    }

    /// Ends every throughput interval that is over by `now` (idle ones count zero operations).
    fn close_intervals_before(&mut self, now: Instant) {
        while now >= self.next_interval_at {
            self.interval_ops.push(self.current_interval_ops);
            self.current_interval_ops = 0;
            self.next_interval_at += THROUGHPUT_INTERVAL;
        }
    }

    /// Records one finished operation (latency, throughput interval, progress bar).
    pub fn finished_single_op(&mut self) {
        self.finished_ops(1);
    }

    /// Records `n` operations finished by one call (a batch): one latency sample, the call's,
    /// and `n` operations towards throughput, as RocksDB's db_bench counts `MultiGet`.
    pub fn finished_ops(&mut self, n: u64) {
        self.finished(n, 1);
    }

    /// Records `n` entries a scan read since the last record, each at their average latency.
    /// Reading the clock per entry costs about as much as a LevelDB iterator step (~40 ns of
    /// ~70), which db_bench does not pay (it reads the clock per operation only with
    /// `--histogram`), so scans read it once per chunk of entries.
    pub fn finished_scan_entries(&mut self, n: u64) {
        self.finished(n, n);
    }

    /// `n` operations finished since the last record, as `samples` latency samples of equal
    /// length.
    fn finished(&mut self, n: u64, samples: u64) {
        let now = Instant::now();
        let nanos = (now - self.last_op_finish).as_nanos() / u128::from(samples.max(1));
        let nanos_u64 = u64::try_from(nanos).unwrap_or(u64::MAX);
        // `record` grows the histogram; only values beyond its absolute limit are clamped.
        if self.latencies_nanos.record_n(nanos_u64, samples).is_err() {
            self.latencies_nanos.saturating_record_n(nanos_u64, samples);
        }
        if let Some(live) = &self.live {
            live.record(n, nanos_u64);
        }
        let micros = nanos as f64 / 1000.0;
        if micros > LONG_OP_MICROS && self.print_histogram {
            self.progress.note(format!("long op: {micros:.1} micros"));
        }
        self.last_op_finish = now;
        self.done += n;
        self.close_intervals_before(now);
        self.current_interval_ops += n;
        if self.progress.is_visible() {
            self.unreported += n;
            if now >= self.next_progress_at {
                self.progress.add(self.unreported);
                self.unreported = 0;
                self.next_progress_at = now + Progress::REPORT_EVERY;
            }
        }
    }

    /// Adds bytes moved, which makes the report show MB/s.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Adds key + value bytes the benchmark asked the engine to write (the denominator of write
    /// amplification).
    pub fn add_user_bytes_written(&mut self, n: u64) {
        self.user_bytes_written += n;
    }

    /// Appends to the message shown at the end of the report line.
    pub fn add_message(&mut self, message: &str) {
        append_with_space(&mut self.message, message);
    }

    /// Operations recorded.
    #[cfg(test)]
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Folds another thread's measurements into these (only its user bytes if it is excluded).
    pub fn merge(&mut self, other: &OpStats) {
        if other.excluded {
            self.user_bytes_written += other.user_bytes_written;
            return;
        }
        // Both histograms auto-resize, so adding cannot fail for range reasons.
        let _ = self.latencies_nanos.add(&other.latencies_nanos);
        self.done += other.done;
        self.bytes += other.bytes;
        self.user_bytes_written += other.user_bytes_written;
        self.seconds += other.seconds;
        self.merge_intervals(other);
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        // db_bench keeps one thread's message: they all say the same kind of thing.
        if self.message.is_empty() {
            self.message.clone_from(&other.message);
        }
    }

    /// Adds `other`'s throughput intervals to these, aligned on wall-clock time. Threads start
    /// together behind a barrier, so the offset is almost always zero; it is rounded to whole
    /// intervals either way.
    fn merge_intervals(&mut self, other: &OpStats) {
        let offset = |later: Instant, earlier: Instant| {
            let gap = later.saturating_duration_since(earlier);
            (gap.as_secs_f64() / THROUGHPUT_INTERVAL.as_secs_f64()).round() as usize
        };
        let (self_offset, other_offset) = (offset(self.start, other.start), offset(other.start, self.start));
        let len = (self.interval_ops.len() + self_offset).max(other.interval_ops.len() + other_offset);
        let mut merged = vec![0u64; len];
        for (i, ops) in self.interval_ops.iter().enumerate() {
            merged[i + self_offset] += ops;
        }
        for (i, ops) in other.interval_ops.iter().enumerate() {
            merged[i + other_offset] += ops;
        }
        self.interval_ops = merged;
    }

    /// Throughput over time: `(seconds since start at the interval's end, ops/s in the interval)`
    /// per [`THROUGHPUT_INTERVAL`], after [`OpStats::stop`]. The last interval is usually partial
    /// and is divided by its real length; one shorter than a millisecond is left out, since a
    /// handful of operations in it would show as a meaningless spike.
    #[cfg_attr(not(feature = "plot"), allow(dead_code))]
    pub fn throughput_series(&self) -> Vec<(f64, f64)> {
        let interval = THROUGHPUT_INTERVAL.as_secs_f64();
        let wall = (self.finish - self.start).as_secs_f64();
        let mut series = Vec::with_capacity(self.interval_ops.len());
        for (i, &ops) in self.interval_ops.iter().enumerate() {
            let begin = i as f64 * interval;
            let end = (begin + interval).min(wall.max(begin));
            let length = end - begin;
            if length < 0.001 {
                continue;
            }
            series.push((end, ops as f64 / length));
        }
        series
    }

    /// The latency distribution as `(percentile, microseconds)` points from the 0th to the
    /// 99.99th percentile, spaced evenly in "nines" (`-log10(1 - p/100)`) so the tail, where
    /// LSM stalls show, gets as many points as the body.
    #[cfg_attr(not(feature = "plot"), allow(dead_code))]
    pub fn latency_cdf(&self) -> Vec<(f64, f64)> {
        const STEPS: u32 = 200;
        const MAX_NINES: f64 = 4.0;
        if self.latencies_nanos.is_empty() {
            return Vec::new();
        }
        (0..=STEPS)
            .map(|step| {
                let nines = MAX_NINES * f64::from(step) / f64::from(STEPS);
                let quantile = 1.0 - 10f64.powf(-nines);
                (quantile * 100.0, self.latencies_nanos.value_at_quantile(quantile) as f64 / 1000.0)
            })
            .collect()
    }

    /// The report: db_bench's result line, then the histogram when per-op timing was on.
    pub fn report(&self, name: &str) -> String {
        // A benchmark that never finishes an op (compact) reports its whole time as one op.
        let done = self.done.max(1);
        let micros_per_op = self.seconds * 1e6 / done as f64;
        let mb_per_s = (self.bytes > 0).then(|| {
            let elapsed = (self.finish - self.start).as_secs_f64();
            (self.bytes as f64 / 1_048_576.0) / elapsed
        });
        let mut out = format_result_line(name, micros_per_op, mb_per_s, &self.message);
        if self.print_histogram {
            out.push('\n');
            out.push_str(&format_histogram(&self.latencies_nanos));
        }
        out
    }

    /// Throughput and latency figures of the benchmark, for [`Metrics`].
    pub fn summary(&self, name: &str) -> Metrics {
        let done = self.done.max(1);
        let wall_seconds = (self.finish - self.start).as_secs_f64();
        let per_wall_second = |n: f64| if wall_seconds > 0.0 { n / wall_seconds } else { 0.0 };
        let micros = |nanos: u64| nanos as f64 / 1000.0;
        let hist = &self.latencies_nanos;
        Metrics {
            name: name.to_owned(),
            ops: self.done,
            seconds: wall_seconds,
            ops_per_sec: per_wall_second(self.done as f64),
            mb_per_sec: per_wall_second(self.bytes as f64 / 1_048_576.0),
            micros_per_op: self.seconds * 1e6 / done as f64,
            latency_micros: Latency {
                p50: micros(hist.value_at_quantile(0.5)),
                p99: micros(hist.value_at_quantile(0.99)),
                p99_9: micros(hist.value_at_quantile(0.999)),
                max: micros(hist.max()),
            },
            user_bytes_written: self.user_bytes_written,
            message: self.message.clone(),
            ..Metrics::default()
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Slowest operation.
    pub max: f64,
}

/// Everything measured about one benchmark run; `None` where the engine or the situation cannot
/// tell (no engine counters, unknown live data after `--use_existing_db`, no `/proc/self/io`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Benchmark name.
    pub name: String,
    /// Operations done over all threads.
    pub ops: u64,
    /// Wall time from the first thread's start to the last one's finish.
    pub seconds: f64,
    /// Operations per wall-clock second over all threads.
    pub ops_per_sec: f64,
    /// MiB of keys and values moved per wall-clock second.
    pub mb_per_sec: f64,
    /// db_bench's figure: summed thread time per operation.
    pub micros_per_op: f64,
    /// Per-operation latency.
    pub latency_micros: Latency,
    /// Key + value bytes the benchmark wrote.
    pub user_bytes_written: u64,
    /// Bytes the engine says it wrote during the benchmark.
    pub engine_bytes_written: Option<u64>,
    /// `engine_bytes_written / user_bytes_written`.
    pub write_amplification: Option<f64>,
    /// `write_bytes` growth of `/proc/self/io` during the benchmark (the kernel's count of bytes
    /// this process sent towards storage).
    pub os_bytes_written: Option<u64>,
    /// `os_bytes_written / user_bytes_written`.
    pub os_write_amplification: Option<f64>,
    /// Bytes of the database directory right after the benchmark.
    pub db_bytes_on_disk: Option<u64>,
    /// Key + value bytes of the live (latest, undeleted) records.
    pub live_user_bytes: Option<u64>,
    /// `db_bytes_on_disk / live_user_bytes`.
    pub space_amplification: Option<f64>,
    /// Microseconds writers were stalled during the benchmark, per the engine.
    pub stall_micros: Option<u64>,
    /// The db_bench message (found counts and the like).
    pub message: String,
    /// Device reads, read calls, peak RSS and the engine's read counters over the benchmark.
    pub resources: crate::resources::Resources,
}

/// A ratio, or `None` when either side is unknown or the denominator is zero.
pub fn ratio(numerator: Option<u64>, denominator: Option<u64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0 => Some(n as f64 / d as f64),
        _ => None,
    }
}

impl Metrics {
    /// One indented line with the figures db_bench's line lacks; indented so that tools matching
    /// db_bench result lines (`^\w+\s*:`) skip it.
    pub fn format_line(&self) -> String {
        let show = |value: Option<f64>, unit: &str| value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}{unit}"));
        let l = &self.latency_micros;
        format!(
            "  {:.0} ops/s; latency us p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}; write amp {} (os {}); space amp {}; stall {}",
            self.ops_per_sec,
            l.p50,
            l.p99,
            l.p99_9,
            l.max,
            show(self.write_amplification, ""),
            show(self.os_write_amplification, ""),
            show(self.space_amplification, ""),
            show(self.stall_micros.map(|m| m as f64 / 1e6), " s"),
        )
    }
}

/// `write_bytes` from `/proc/self/io`, if the kernel provides it.
pub fn os_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    parse_proc_io_write_bytes(&text)
}

fn parse_proc_io_write_bytes(text: &str) -> Option<u64> {
    text.lines().find_map(|line| line.strip_prefix("write_bytes:")?.trim().parse().ok())
}

fn append_with_space(text: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(more);
}

/// db_bench's line: `%-12s : %11.3f micros/op;` then ` %6.1f MB/s` if bytes were counted, then the
/// message, space-separated.
pub fn format_result_line(name: &str, micros_per_op: f64, mb_per_s: Option<f64>, message: &str) -> String {
    let mut extra = mb_per_s.map(|rate| format!("{rate:6.1} MB/s")).unwrap_or_default();
    append_with_space(&mut extra, message);
    let separator = if extra.is_empty() { "" } else { " " };
    format!("{name:<NAME_WIDTH$} : {micros_per_op:11.3} micros/op;{separator}{extra}")
}

/// The line db_bench prints for a fill benchmark that `--use_existing_db` forbids.
pub fn format_skipped_line(name: &str) -> String {
    format!("{name:<NAME_WIDTH$} : skipped (--use_existing_db is true)")
}

/// `Microseconds per op:` followed by count, average and percentiles in micros.
pub fn format_histogram(hist: &Histogram<u64>) -> String {
    let micros = |nanos: u64| nanos as f64 / 1000.0;
    let at = |q: f64| micros(hist.value_at_quantile(q));
    format!(
        "Microseconds per op:\nCount: {}  Average: {:.4}  StdDev: {:.2}\nMin: {:.4}  Median: {:.4}  Max: {:.4}\n\
         Percentiles: P50: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n",
        hist.len(),
        hist.mean() / 1000.0,
        hist.stdev() / 1000.0,
        micros(hist.min()),
        at(0.5),
        micros(hist.max()),
        at(0.5),
        at(0.99),
        at(0.999),
        at(0.9999),
    )
}

/// The header db_bench prints to stdout before the first benchmark.
pub fn format_header(key_size: usize, value_size: usize, compression_ratio: f64, entries: u32) -> String {
    let compressed = (value_size as f64 * compression_ratio + 0.5) as u64;
    let raw_mb = (key_size + value_size) as f64 * f64::from(entries) / 1_048_576.0;
    let file_mb = (key_size as f64 + value_size as f64 * compression_ratio) * f64::from(entries) / 1_048_576.0;
    let mut out = format!(
        "Keys:       {key_size} bytes each\n\
         Values:     {value_size} bytes each ({compressed} bytes after compression)\n\
         Entries:    {entries}\n\
         RawSize:    {raw_mb:.1} MB (estimated)\n\
         FileSize:   {file_mb:.1} MB (estimated)\n"
    );
    if cfg!(debug_assertions) {
        out.push_str("WARNING: Optimization is disabled: benchmarks unnecessarily slow\n");
        out.push_str("WARNING: Assertions are enabled; benchmarks unnecessarily slow\n");
    }
    out.push_str("------------------------------------------------\n");
    out
}

/// The environment lines db_bench prints to stderr: engine version, date, CPU.
pub fn format_environment(engine_line: &str) -> String {
    let mut out = format!("{engine_line}\n");
    if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        out.push_str(&format!("Date:       {}\n", format_ctime_utc(since_epoch.as_secs())));
    }
    if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
        let mut cpus = 0;
        let (mut model, mut cache) = (String::new(), String::new());
        for line in cpuinfo.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            match key.trim() {
                "model name" => {
                    cpus += 1;
                    model = value.trim().to_owned();
                }
                "cache size" => cache = value.trim().to_owned(),
                _ => {}
            }
        }
        out.push_str(&format!("CPU:        {cpus} * {model}\nCPUCache:   {cache}\n"));
    }
    out
}

/// `ctime()`'s layout (`Sat Nov 22 07:14:00 2025`) for a Unix time, in UTC.
pub fn format_ctime_utc(unix_seconds: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = unix_seconds / 86_400;
    let secs = unix_seconds % 86_400;
    // Civil date from a day count (Howard Hinnant's days_from_civil, inverted), eras of 400 years.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LevelDB's tooling reads result lines with `^(\w+)\s*:\s*([0-9.]+) micros/op;`; this is that
    /// pattern by hand, returning the two captures.
    fn match_db_bench_line(line: &str) -> Option<(&str, f64)> {
        let name_end = line.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
        if name_end == 0 {
            return None;
        }
        let (name, rest) = line.split_at(name_end);
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, rest) = rest.split_at(number_end);
        rest.strip_prefix(" micros/op;")?;
        Some((name, number.parse().ok()?))
    }

    #[test]
    fn result_lines_have_db_bench_layout() {
        assert_eq!(
            format_result_line("fillrandom", 1.2344, Some(89.04), ""),
            "fillrandom   :       1.234 micros/op;   89.0 MB/s"
        );
        assert_eq!(
            format_result_line("readrandom", 5.19, None, "(864322 of 1000000 found)"),
            "readrandom   :       5.190 micros/op; (864322 of 1000000 found)"
        );
        assert_eq!(
            format_result_line("fill100K", 1234.5, Some(77.25), "(1000 ops)"),
            "fill100K     :    1234.500 micros/op;   77.2 MB/s (1000 ops)"
        );
        assert_eq!(format_result_line("compact", 250_000.0, None, ""), "compact      :  250000.000 micros/op;");
        assert_eq!(format_skipped_line("fillseq"), "fillseq      : skipped (--use_existing_db is true)");
    }

    #[test]
    fn result_lines_match_leveldbs_parsing_pattern() {
        for (name, micros, rate, message) in [
            ("fillseq", 0.5, Some(1882.0), ""),
            ("readrandom", 8.4, None, "(632000 of 1000000 found)"),
            ("deleterandom", 12_345.678, None, ""),
            ("longbenchmarkname", 1.0, Some(3.0), ""),
        ] {
            let line = format_result_line(name, micros, rate, message);
            let (parsed_name, parsed_micros) = match_db_bench_line(&line).unwrap_or_else(|| panic!("no match: {line}"));
            assert_eq!(parsed_name, name);
            assert!((parsed_micros - micros).abs() < 0.001, "{line}");
        }
        assert_eq!(match_db_bench_line("fillseq      : skipped (--use_existing_db is true)"), None);
    }

    #[test]
    fn merged_stats_sum_ops_and_keep_one_message() {
        let mut a = OpStats::start(true, Progress::hidden());
        let mut b = OpStats::start(true, Progress::hidden());
        for _ in 0..3 {
            a.finished_single_op();
        }
        b.finished_single_op();
        a.add_bytes(100);
        b.add_message("(1 of 2 found)");
        a.stop();
        b.stop();
        a.merge(&b);
        assert_eq!(a.done(), 4);
        let report = a.report("readrandom");
        let first_line = report.lines().next().unwrap_or_default();
        assert!(first_line.ends_with("MB/s (1 of 2 found)"), "{report}");
        assert!(report.contains("Microseconds per op:\nCount: 4  Average: "), "{report}");
        assert!(report.contains("P99.9: "), "{report}");
    }

    #[test]
    fn histogram_keeps_latencies_far_above_its_initial_range() {
        let mut stats = OpStats::start(true, Progress::hidden());
        std::thread::sleep(std::time::Duration::from_millis(2));
        stats.finished_single_op();
        stats.stop();
        let hist = &stats.latencies_nanos;
        assert!(hist.max() >= 2_000_000, "max {} ns", hist.max());
    }

    #[test]
    fn scan_entries_count_one_sample_each_at_the_chunk_average() {
        let mut stats = OpStats::start(false, Progress::hidden());
        std::thread::sleep(std::time::Duration::from_millis(4));
        stats.finished_scan_entries(4);
        stats.stop();
        assert_eq!(stats.done(), 4);
        let hist = &stats.latencies_nanos;
        assert_eq!(hist.len(), 4);
        // Each entry gets the same quarter of the chunk's time (at least 1 ms).
        assert!(hist.min() >= 1_000_000, "{}", hist.min());
        assert!(hist.equivalent(hist.min(), hist.max()), "{} vs {}", hist.min(), hist.max());
    }

    #[test]
    fn summary_reports_throughput_and_latency_without_printing_the_histogram() {
        let mut stats = OpStats::start(false, Progress::hidden());
        for _ in 0..10 {
            stats.finished_single_op();
        }
        std::thread::sleep(std::time::Duration::from_millis(3));
        stats.finished_single_op();
        stats.add_bytes(1 << 20);
        stats.add_user_bytes_written(1000);
        stats.stop();
        assert_eq!(stats.report("fillrandom").lines().count(), 1);
        let m = stats.summary("fillrandom");
        assert_eq!((m.ops, m.user_bytes_written), (11, 1000));
        assert!(m.ops_per_sec > 0.0 && m.mb_per_sec > 0.0);
        let l = &m.latency_micros;
        assert!(l.p50 <= l.p99 && l.p99 <= l.p99_9 && l.p99_9 <= l.max);
        assert!(l.max >= 3000.0, "the slow op is the max: {}", l.max);
        // The metrics line never looks like a db_bench result line.
        assert_eq!(match_db_bench_line(&m.format_line()), None);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["latency_micros"]["p99_9"], serde_json::json!(l.p99_9));
        assert!(json["space_amplification"].is_null());
    }

    #[test]
    fn throughput_intervals_count_every_op_once_even_after_merging() {
        let mut a = OpStats::start(false, Progress::hidden());
        let mut b = OpStats::start(false, Progress::hidden());
        for _ in 0..7 {
            a.finished_single_op();
        }
        // An idle gap longer than one interval must show as an interval of zero ops.
        std::thread::sleep(THROUGHPUT_INTERVAL * 2);
        a.finished_single_op();
        b.finished_single_op();
        a.stop();
        b.stop();
        assert_eq!(a.interval_ops.iter().sum::<u64>(), 8);
        assert!(a.interval_ops.len() >= 3 && a.interval_ops.contains(&0), "{:?}", a.interval_ops);
        a.merge(&b);
        assert_eq!(a.interval_ops.iter().sum::<u64>(), 9);
        let series = a.throughput_series();
        assert!(!series.is_empty());
        assert!(series.windows(2).all(|w| w[0].0 < w[1].0), "time moves forward: {series:?}");
        assert!(series.iter().any(|&(_, rate)| rate > 0.0));
    }

    #[test]
    fn latency_cdf_runs_from_p0_to_p99_99_and_never_decreases() {
        let stats = OpStats::start(false, Progress::hidden());
        assert!(stats.latency_cdf().is_empty(), "no operations, no distribution");
        let mut stats = OpStats::start(false, Progress::hidden());
        for _ in 0..50 {
            stats.finished_single_op();
        }
        stats.stop();
        let cdf = stats.latency_cdf();
        assert_eq!(cdf.first().map(|p| p.0), Some(0.0));
        assert!(cdf.last().is_some_and(|p| (p.0 - 99.99).abs() < 1e-9), "{:?}", cdf.last());
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn ratios_need_both_sides_and_a_positive_denominator() {
        assert_eq!(ratio(Some(30), Some(10)), Some(3.0));
        assert_eq!(ratio(Some(30), Some(0)), None);
        assert_eq!(ratio(None, Some(10)), None);
        assert_eq!(ratio(Some(1), None), None);
    }

    #[test]
    fn proc_io_write_bytes_parse() {
        let text = "rchar: 10\nwchar: 20\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_proc_io_write_bytes(text), Some(8192));
        assert_eq!(parse_proc_io_write_bytes("rchar: 1\n"), None);
    }

    #[test]
    fn ctime_layout_in_utc() {
        assert_eq!(format_ctime_utc(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(format_ctime_utc(951_782_400), "Tue Feb 29 00:00:00 2000");
        assert_eq!(format_ctime_utc(1_700_000_000), "Tue Nov 14 22:13:20 2023");
    }

    #[test]
    fn header_matches_db_bench() {
        let header = format_header(16, 1024, 0.5, 1_000_000);
        let lines: Vec<&str> = header.lines().collect();
        assert_eq!(lines[0], "Keys:       16 bytes each");
        assert_eq!(lines[1], "Values:     1024 bytes each (512 bytes after compression)");
        assert_eq!(lines[2], "Entries:    1000000");
        assert_eq!(lines[3], "RawSize:    991.8 MB (estimated)");
        assert_eq!(lines[4], "FileSize:   503.5 MB (estimated)");
        assert_eq!(lines.last(), Some(&"------------------------------------------------"));
    }
}
