//! What a benchmark cost the machine besides time: bytes the process read from the device and
//! the read system calls it made (`/proc/self/io`, summed over all of its threads, engine
//! background threads included), the process's peak resident set (`VmHWM` of
//! `/proc/self/status`), and the engine's own read counters where it keeps them.
//!
//! "Device reads per op" is `read_bytes / 4096 / ops`: the kernel counts bytes it asked the block
//! layer for, not requests, so one 64 KiB read-ahead counts as 16 and one 8 KiB read of a value
//! that straddles two pages counts as 2. It is an approximation of the number of 4 KiB page reads,
//! exact only when every read is one page; the engine's counters (value-log reads, block-cache
//! misses) say where the reads came from.
//!
//! The whole process's count includes what the engine's background work (compaction, value-log
//! GC) read meanwhile, which after a load can be more than the lookups themselves; so the line
//! also gives what the benchmark's own threads read (`/proc/thread-self/io` of each, summed),
//! which is what a point lookup costs. Reads made for a scan by a prefetch pool count only in
//! the process's figure.

/// Read counters an engine keeps about itself (splitkv's `stats()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadCounters {
    /// Point lookups served.
    pub gets: u64,
    /// Value-log reads made to resolve pointers.
    pub vlog_reads: u64,
    /// SSTable blocks that were not in the block cache (each one a read of the table file).
    pub block_cache_misses: u64,
}

/// A reading of the process's I/O counters and the engine's read counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    io: Option<ProcIo>,
    engine: Option<ReadCounters>,
}

/// `read_bytes` and `syscr` of `/proc/self/io`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ProcIo {
    read_bytes: u64,
    syscr: u64,
}

/// What one benchmark cost, as printed on its `resources:` line and written to `--json`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Resources {
    /// Bytes the process read from the device during the benchmark.
    pub device_read_bytes: Option<u64>,
    /// Read system calls (`read`, `pread`, ...) during the benchmark; page faults are not calls.
    pub read_syscalls: Option<u64>,
    /// `device_read_bytes / 4096 / ops`; see the module header.
    pub device_reads_per_op: Option<f64>,
    /// Bytes the benchmark's own threads read from the device (engine threads excluded).
    pub caller_device_read_bytes: Option<u64>,
    /// `caller_device_read_bytes / 4096 / ops`.
    pub caller_device_reads_per_op: Option<f64>,
    /// The engine's read counters over the benchmark.
    pub engine: Option<ReadCounters>,
    /// Peak resident set of the process so far, in bytes.
    pub peak_rss_bytes: Option<u64>,
}

/// Device bytes read by the calling thread so far (`read_bytes` of `/proc/thread-self/io`).
pub fn thread_read_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    parse_proc_io(&text).map(|io| io.read_bytes)
}

/// Bytes per 4 KiB page per op (see the module header).
fn pages_per_op(bytes: Option<u64>, ops: u64) -> Option<f64> {
    bytes.filter(|_| ops > 0).map(|bytes| bytes as f64 / 4096.0 / ops as f64)
}

impl Snapshot {
    /// The counters now; `engine` is the engine's own, if it keeps them.
    pub fn take(engine: Option<ReadCounters>) -> Snapshot {
        let io = std::fs::read_to_string("/proc/self/io").ok().and_then(|text| parse_proc_io(&text));
        Snapshot { io, engine }
    }

    /// What happened between `self` and `after`, over `ops` operations, of which the
    /// benchmark's threads read `caller_read_bytes` themselves.
    pub fn since(&self, after: &Snapshot, ops: u64, caller_read_bytes: Option<u64>) -> Resources {
        let io = self.io.zip(after.io);
        let device_read_bytes = io.map(|(b, a)| a.read_bytes.saturating_sub(b.read_bytes));
        let engine = self.engine.zip(after.engine).map(|(b, a)| ReadCounters {
            gets: a.gets.saturating_sub(b.gets),
            vlog_reads: a.vlog_reads.saturating_sub(b.vlog_reads),
            block_cache_misses: a.block_cache_misses.saturating_sub(b.block_cache_misses),
        });
        Resources {
            device_read_bytes,
            read_syscalls: io.map(|(b, a)| a.syscr.saturating_sub(b.syscr)),
            device_reads_per_op: pages_per_op(device_read_bytes, ops),
            caller_device_read_bytes: caller_read_bytes,
            caller_device_reads_per_op: pages_per_op(caller_read_bytes, ops),
            engine,
            peak_rss_bytes: peak_rss_bytes(),
        }
    }
}

impl Resources {
    /// The indented line printed under a benchmark's metrics.
    pub fn format_line(&self) -> String {
        let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20));
        let ratio = |r: Option<f64>| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}"));
        let mut line = format!(
            "  resources: device reads {} ({} x 4 KiB per op, approx.; benchmark threads {}, {}), {} read calls; \
             peak RSS {}",
            self.device_read_bytes.map_or_else(|| "n/a".to_owned(), mib),
            ratio(self.device_reads_per_op),
            self.caller_device_read_bytes.map_or_else(|| "n/a".to_owned(), mib),
            ratio(self.caller_device_reads_per_op),
            self.read_syscalls.map_or_else(|| "n/a".to_owned(), |n| n.to_string()),
            self.peak_rss_bytes.map_or_else(|| "n/a".to_owned(), mib),
        );
        if let Some(engine) = &self.engine {
            line.push_str(&format!(
                "; engine: {} gets, {} value-log reads, {} block-cache misses",
                engine.gets, engine.vlog_reads, engine.block_cache_misses
            ));
        }
        line
    }
}

/// `VmHWM` of `/proc/self/status`: the most memory the process has had resident, in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib_field(&status, "VmHWM:")
}

fn parse_kib_field(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find_map(|line| line.strip_prefix(field))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

fn parse_proc_io(text: &str) -> Option<ProcIo> {
    let field = |name: &str| text.lines().find_map(|line| line.strip_prefix(name)?.trim().parse().ok());
    Some(ProcIo { read_bytes: field("read_bytes:")?, syscr: field("syscr:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let io = "rchar: 100\nwchar: 5\nsyscr: 7\nsyscw: 2\nread_bytes: 8192\nwrite_bytes: 0\n";
        assert_eq!(parse_proc_io(io), Some(ProcIo { read_bytes: 8192, syscr: 7 }));
        assert_eq!(parse_proc_io("rchar: 1\n"), None);
        let status = "Name:\tx\nVmPeak:\t  2000 kB\nVmHWM:\t    1500 kB\nVmRSS:\t 1200 kB\n";
        assert_eq!(parse_kib_field(status, "VmHWM:"), Some(1500 * 1024));
        assert_eq!(parse_kib_field("VmHWM: lots", "VmHWM:"), None);
        assert!(peak_rss_bytes().is_some_and(|b| b > 0), "this process has a resident set");
        assert!(thread_read_bytes().is_some(), "Linux reports each thread's I/O");
    }

    #[test]
    fn a_benchmark_costs_the_difference_of_two_snapshots() {
        let engine = |gets, vlog_reads| Some(ReadCounters { gets, vlog_reads, block_cache_misses: 1 });
        let before = Snapshot { io: Some(ProcIo { read_bytes: 4096, syscr: 10 }), engine: engine(5, 5) };
        let after = Snapshot { io: Some(ProcIo { read_bytes: 4096 * 41, syscr: 30 }), engine: engine(25, 35) };
        let cost = before.since(&after, 20, Some(4096 * 10));
        assert_eq!(cost.device_read_bytes, Some(4096 * 40));
        assert_eq!(cost.read_syscalls, Some(20));
        assert_eq!(cost.device_reads_per_op, Some(2.0));
        assert_eq!(cost.caller_device_reads_per_op, Some(0.5));
        assert_eq!(cost.engine, Some(ReadCounters { gets: 20, vlog_reads: 30, block_cache_misses: 0 }));
        let line = cost.format_line();
        assert!(line.contains("2.00 x 4 KiB per op") && line.contains("20 gets, 30 value-log reads"), "{line}");
        assert!(line.contains("benchmark threads 0.0 MiB, 0.50"), "{line}");
        assert_eq!(Snapshot::default().since(&after, 20, None).device_reads_per_op, None);
    }
}
