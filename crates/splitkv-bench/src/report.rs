//! Measurement and output in `db_bench`'s format, so scripts that parse LevelDB's output parse ours.
//!
//! [`OpStats`] is one thread's record of a benchmark (LevelDB's `Stats`): operations done, bytes
//! moved, an optional message such as `(864322 of 1000000 found)`, and with `--histogram` the
//! time between consecutive finished operations in an HDR histogram. Threads keep their own
//! `OpStats` and merge them afterwards, so nothing is shared while timing. Merged figures follow
//! db_bench: micros/op is the sum of per-thread elapsed time over all operations; MB/s uses the
//! wall time from the first start to the last finish.

use std::io::Write;
use std::time::Instant;

use hdrhistogram::Histogram;

/// Width db_bench pads benchmark names to.
const NAME_WIDTH: usize = 12;

/// Operations slower than this are reported as they happen when timing each op (db_bench's rule).
const LONG_OP_MICROS: f64 = 20_000.0;

/// One thread's (or, after [`OpStats::merge`], all threads') measurements of one benchmark.
#[derive(Debug)]
pub struct OpStats {
    start: Instant,
    finish: Instant,
    seconds: f64,
    done: u64,
    next_report: u64,
    bytes: u64,
    last_op_finish: Instant,
    message: String,
    latencies_nanos: Option<Histogram<u64>>,
    show_progress: bool,
}

impl OpStats {
    /// Starts the clock; `histogram` turns on per-operation timing.
    pub fn start(histogram: bool, show_progress: bool) -> Self {
        let now = Instant::now();
        OpStats {
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            next_report: 100,
            bytes: 0,
            last_op_finish: now,
            message: String::new(),
            // Three significant digits; the histogram grows to fit whatever it records.
            latencies_nanos: histogram.then(|| Histogram::new(3).expect("3 significant figures is a valid precision")),
            show_progress,
        }
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = (self.finish - self.start).as_secs_f64();
    }

    /// Records one finished operation, printing db_bench's progress line at growing intervals.
    pub fn finished_single_op(&mut self) {
        if let Some(hist) = &mut self.latencies_nanos {
            let now = Instant::now();
            let nanos = (now - self.last_op_finish).as_nanos();
            let nanos_u64 = u64::try_from(nanos).unwrap_or(u64::MAX);
            // `record` grows the histogram; only values beyond its absolute limit are clamped.
            if hist.record(nanos_u64).is_err() {
                hist.saturating_record(nanos_u64);
            }
            let micros = nanos as f64 / 1000.0;
            if micros > LONG_OP_MICROS && self.show_progress {
                eprint!("long op: {micros:.1} micros{:30}\r", "");
            }
            self.last_op_finish = now;
        }
        self.done += 1;
        if self.done >= self.next_report {
            self.next_report += match self.next_report {
                0..=999 => 100,
                1000..=4999 => 500,
                5000..=9999 => 1000,
                10_000..=49_999 => 5000,
                50_000..=99_999 => 10_000,
                100_000..=499_999 => 50_000,
                _ => 100_000,
            };
            if self.show_progress {
                eprint!("... finished {} ops{:30}\r", self.done, "");
                let _ = std::io::stderr().flush();
            }
        }
    }

    /// Adds bytes moved, which makes the report show MB/s.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
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

    /// Folds another thread's measurements into these.
    pub fn merge(&mut self, other: &OpStats) {
        if let (Some(mine), Some(theirs)) = (&mut self.latencies_nanos, &other.latencies_nanos) {
            // Both histograms auto-resize, so adding cannot fail for range reasons.
            let _ = mine.add(theirs);
        }
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        // db_bench keeps one thread's message: they all say the same kind of thing.
        if self.message.is_empty() {
            self.message.clone_from(&other.message);
        }
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
        if let Some(hist) = &self.latencies_nanos {
            out.push('\n');
            out.push_str(&format_histogram(hist));
        }
        out
    }
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
        let mut a = OpStats::start(true, false);
        let mut b = OpStats::start(true, false);
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
        let mut stats = OpStats::start(true, false);
        std::thread::sleep(std::time::Duration::from_millis(2));
        stats.finished_single_op();
        stats.stop();
        let hist = stats.latencies_nanos.as_ref().expect("histogram is on");
        assert!(hist.max() >= 2_000_000, "max {} ns", hist.max());
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
