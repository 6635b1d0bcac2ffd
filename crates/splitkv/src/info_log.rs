//! The information LOG: what the engine did (open and recovery, flushes, compactions, GC runs,
//! write stalls, background errors), as `tracing` events and as lines of a `LOG` file in the
//! database directory.
//!
//! Every event is emitted twice through the crate's `log_event!` macro:
//! - once as an ordinary `tracing` event with target `splitkv` and a `db` field (the directory),
//!   delivered to whatever subscriber the application installed, and to nothing (so no output
//!   at all) when it installed none;
//! - once inside [`tracing::dispatcher::with_default`] of the database's own `LogFile`
//!   subscriber, which formats it as one text line of `LOG` (byte-level rules in
//!   `docs/format/log.md`) and never forwards it anywhere else.
//!
//! The application's subscriber is global state the library must not touch, and a process may
//! hold several databases each with its own `LOG`; a scoped dispatch per database gives each
//! event to exactly its database's file without installing anything globally.
//!
//! Costs: events are emitted only on background and rare paths (open, flush, compaction, GC,
//! the start and end of a stall, errors), never per read or write. Writing a line is one append
//! and one flush through the database's [`FileSystem`]; the `LOG` is never fsynced (it is
//! diagnostics: a crash may lose its tail) and write errors are swallowed (a failing `LOG` must
//! not fail the database). The file is rotated when the next line would take it over
//! [`InfoLogOptions::max_file_size`]: `LOG.old.(k)` becomes `LOG.old.(k+1)`, the oldest beyond
//! [`InfoLogOptions::keep_old_files`] is removed, `LOG` becomes `LOG.old.1`, and a new `LOG` is
//! started. Each read-write open also starts a new `LOG` the same way; a read-only open writes
//! no file (`InfoLog::silent`).
//!
//! Thread-safety: [`InfoLog`] is shared by every thread of a database; the file is behind a
//! mutex, taken only while a line is written.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{span, Dispatch, Event, Level, Metadata, Subscriber};

use crate::filenames::{info_log_file, old_info_log_file};
use crate::fs::{FileSystem, WritableFile};

/// The `tracing` target of every event the engine emits.
pub const TARGET: &str = "splitkv";

/// Emits one engine event: to the application's subscriber (target `splitkv`, plus a `db`
/// field naming the directory) and to the database's `LOG` file. `$log` is an [`InfoLog`]; the
/// rest is what `tracing::event!` takes after its target: a level, fields, a message.
macro_rules! log_event {
    ($log:expr, $level:expr, $($rest:tt)+) => {{
        let log: &$crate::info_log::InfoLog = &$log;
        ::tracing::event!(target: "splitkv", $level, db = log.db_name(), $($rest)+);
        log.in_file(|| ::tracing::event!(target: "splitkv", $level, $($rest)+));
    }};
}
pub(crate) use log_event;

/// Where and how big the `LOG` file of a database may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoLogOptions {
    /// Write the `LOG` file (events still reach the application's subscriber without it).
    pub enabled: bool,
    /// Rotate `LOG` before a line would take it over this many bytes (0: rotate only at open).
    pub max_file_size: u64,
    /// Rotated files kept (`LOG.old.1` the newest); older ones are removed. 0 keeps none.
    pub keep_old_files: usize,
}

impl Default for InfoLogOptions {
    fn default() -> Self {
        InfoLogOptions { enabled: true, max_file_size: 1 << 20, keep_old_files: 4 }
    }
}

/// Why writers are held back, for the stall events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StallCause {
    /// Level 0 reached the slowdown trigger: each write group is delayed 1 ms.
    L0Slowdown = 0,
    /// Level 0 reached the stop trigger.
    L0Stop = 1,
    /// The memtable is full and the previous one is still being flushed.
    MemtableFull = 2,
    /// The value log is over a space limit and writers wait for GC.
    LogSpace = 3,
    /// The value log is over its space budget and the segments GC has cleaned wait for older
    /// snapshots or iterators to be released.
    LogReaders = 4,
}

impl StallCause {
    const ALL: [StallCause; 5] = [
        StallCause::L0Slowdown,
        StallCause::L0Stop,
        StallCause::MemtableFull,
        StallCause::LogSpace,
        StallCause::LogReaders,
    ];

    fn bit(self) -> u8 {
        1 << self as u8
    }

    fn name(self) -> &'static str {
        match self {
            StallCause::L0Slowdown => "level0-slowdown",
            StallCause::L0Stop => "level0-stop",
            StallCause::MemtableFull => "memtable-full",
            StallCause::LogSpace => "value-log-space",
            StallCause::LogReaders => "value-log-readers",
        }
    }
}

/// The stall causes an index's `make_room` can report (everything but the log's space).
pub(crate) const INDEX_STALLS: [StallCause; 3] = [StallCause::L0Slowdown, StallCause::L0Stop, StallCause::MemtableFull];

/// One database's event sink: its name for the application's events, its `LOG` writer, and
/// which stalls are in progress (so a stall is logged when it starts and when it ends, not once
/// per delayed write).
pub struct InfoLog {
    db: String,
    file: Option<Dispatch>,
    /// Bit per [`StallCause`] in progress; read on the write path, so an atomic.
    stalls: AtomicU8,
    stall_started: Mutex<[Option<Instant>; StallCause::ALL.len()]>,
}

impl fmt::Debug for InfoLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InfoLog").field("db", &self.db).field("file", &self.file.is_some()).finish()
    }
}

impl InfoLog {
    /// The log of the database in `dir`: starts a new `LOG` file there (rotating the previous
    /// one) when `options.enabled`. Never fails: a `LOG` that cannot be written is skipped.
    pub fn open(fs: Arc<dyn FileSystem>, dir: &Path, options: &InfoLogOptions) -> InfoLog {
        let file = options.enabled.then(|| {
            let file = LogFile::new(fs, dir, options);
            file.start();
            Dispatch::new(file)
        });
        InfoLog { file, ..InfoLog::silent(dir) }
    }

    /// A log that writes no file; events still reach the application's subscriber.
    pub fn silent(dir: &Path) -> InfoLog {
        InfoLog {
            db: dir.display().to_string(),
            file: None,
            stalls: AtomicU8::new(0),
            stall_started: Mutex::new([None; StallCause::ALL.len()]),
        }
    }

    /// The database's directory, as the `db` field of application events.
    pub fn db_name(&self) -> &str {
        &self.db
    }

    /// Runs `emit` with the `LOG` file as the current subscriber (nothing without a file).
    pub fn in_file(&self, emit: impl FnOnce()) {
        if let Some(file) = &self.file {
            tracing::dispatcher::with_default(file, emit);
        }
    }

    /// The names of the stalls in progress, in [`StallCause`] order.
    pub(crate) fn stalls_in_progress(&self) -> Vec<&'static str> {
        let stalls = self.stalls.load(Ordering::Relaxed);
        StallCause::ALL.into_iter().filter(|c| stalls & c.bit() != 0).map(StallCause::name).collect()
    }

    /// True while writers are stopped (not merely slowed down) for any cause.
    pub(crate) fn writes_stopped(&self) -> bool {
        let slowdown = StallCause::L0Slowdown.bit();
        self.stalls.load(Ordering::Relaxed) & !slowdown != 0
    }

    /// Notes that writers are being held back for `cause`; logs the stall when it starts.
    pub(crate) fn stall_began(&self, cause: StallCause, detail: &dyn fmt::Display) {
        if self.stalls.load(Ordering::Relaxed) & cause.bit() != 0 {
            return;
        }
        let mut started = self.stall_started.lock();
        let slot = &mut started[cause as usize];
        if slot.is_some() {
            return;
        }
        *slot = Some(Instant::now());
        self.stalls.fetch_or(cause.bit(), Ordering::Relaxed);
        drop(started);
        log_event!(self, Level::WARN, cause = cause.name(), detail = %detail, "write stall began");
    }

    /// Ends the stalls among `causes` that are in progress, logging how long each lasted. Costs
    /// one relaxed load when none is (the write path calls it for every write group).
    pub(crate) fn stalls_ended(&self, causes: impl IntoIterator<Item = StallCause>) {
        let mask = causes.into_iter().fold(0, |m, c| m | c.bit());
        if self.stalls.load(Ordering::Relaxed) & mask == 0 {
            return;
        }
        let mut ended = Vec::new();
        {
            let mut started = self.stall_started.lock();
            for cause in StallCause::ALL.into_iter().filter(|c| mask & c.bit() != 0) {
                if let Some(since) = started[cause as usize].take() {
                    self.stalls.fetch_and(!cause.bit(), Ordering::Relaxed);
                    ended.push((cause, since.elapsed()));
                }
            }
        }
        for (cause, lasted) in ended {
            log_event!(
                self,
                Level::INFO,
                cause = cause.name(),
                micros = lasted.as_micros() as u64,
                "write stall ended"
            );
        }
    }
}

/// The `LOG` writer: a `tracing` subscriber that formats `splitkv` events as lines.
struct LogFile {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    dir: PathBuf,
    max_file_size: u64,
    keep_old_files: usize,
    out: Mutex<Option<Box<dyn WritableFile>>>,
}

impl LogFile {
    fn new(fs: Arc<dyn FileSystem>, dir: &Path, options: &InfoLogOptions) -> LogFile {
        LogFile {
            fs,
            path: info_log_file(dir),
            dir: dir.to_path_buf(),
            max_file_size: options.max_file_size,
            keep_old_files: options.keep_old_files,
            out: Mutex::new(None),
        }
    }

    /// Starts a fresh `LOG`, rotating a non-empty one left by an earlier open.
    fn start(&self) {
        let mut out = self.out.lock();
        if self.fs.file_size(&self.path).is_ok_and(|len| len > 0) {
            self.rotate();
        }
        *out = self.fs.create(&self.path).ok();
    }

    /// Shifts the rotated files up by one and moves `LOG` to `LOG.old.1` (or removes it when
    /// none are kept). Best effort, like every `LOG` write.
    fn rotate(&self) {
        let old = |n: usize| old_info_log_file(&self.dir, n);
        if self.keep_old_files == 0 {
            let _ = self.fs.remove(&self.path);
            return;
        }
        if self.fs.exists(&old(self.keep_old_files)) {
            let _ = self.fs.remove(&old(self.keep_old_files));
        }
        for n in (1..self.keep_old_files).rev() {
            if self.fs.exists(&old(n)) {
                let _ = self.fs.rename(&old(n), &old(n + 1));
            }
        }
        let _ = self.fs.rename(&self.path, &old(1));
    }

    fn write_line(&self, line: &str) {
        let mut out = self.out.lock();
        let len = out.as_ref().map_or(0, |f| f.len());
        if self.max_file_size > 0 && len > 0 && len + line.len() as u64 > self.max_file_size {
            *out = None;
            self.rotate();
            *out = self.fs.create(&self.path).ok();
        }
        if out.is_none() {
            // The file failed earlier (or could not be created): try again, keeping what it holds.
            *out =
                if self.fs.exists(&self.path) { self.fs.open_append(&self.path) } else { self.fs.create(&self.path) }
                    .ok();
        }
        let Some(file) = out.as_mut() else { return };
        if file.append(line.as_bytes()).and_then(|()| file.flush()).is_err() {
            *out = None;
        }
    }
}

impl Subscriber for LogFile {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_event() && self.enabled(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == TARGET && *metadata.level() <= Level::INFO
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
    }

    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        // Spans are not recorded; the engine emits none to this subscriber.
        span::Id::from_u64(1)
    }

    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = String::with_capacity(160);
        format_prefix(&mut line, SystemTime::now(), *event.metadata().level());
        let mut fields = LineFields { message: String::new(), rest: String::new() };
        event.record(&mut fields);
        line.push_str(&fields.message);
        line.push_str(&fields.rest);
        line.push('\n');
        self.write_line(&line);
    }

    fn enter(&self, _span: &span::Id) {}

    fn exit(&self, _span: &span::Id) {}
}

/// `2026-11-24T15:42:45.123456Z INFO  thread-name ` (see `docs/format/log.md`).
fn format_prefix(line: &mut String, now: SystemTime, level: Level) {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    let _ = write!(
        line,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z {:<5} ",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since_epoch.subsec_micros(),
        level.as_str()
    );
    let thread = std::thread::current();
    match thread.name() {
        Some(name) => line.extend(name.chars().map(|c| if c.is_whitespace() || c.is_control() { '_' } else { c })),
        None => line.push_str("unnamed"),
    }
    line.push(' ');
}

/// The proleptic Gregorian date of a day number counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), so the timestamp needs no date crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Collects an event's message and its ` key=value` fields.
struct LineFields {
    message: String,
    rest: String,
}

impl LineFields {
    fn push(&mut self, field: &Field, value: &str) {
        let _ = write!(self.rest, " {}=", field.name());
        push_value(&mut self.rest, value);
    }
}

/// A value bare when it is a non-empty run of printable characters other than `"`, `=` and
/// spaces; otherwise quoted with Rust's string escapes.
fn push_value(out: &mut String, value: &str) {
    let bare = !value.is_empty() && value.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '=');
    if bare {
        out.push_str(value);
    } else {
        let _ = write!(out, "{value:?}");
    }
}

impl Visit for LineFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            // The message is a literal of the engine's; keep the line one line whatever it is.
            let text = format!("{value:?}");
            self.message.extend(text.chars().map(|c| if c.is_control() { ' ' } else { c }));
        } else {
            self.push(field, &format!("{value:?}"));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let _ = write!(self.rest, " {}={value}", field.name());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        let _ = write!(self.rest, " {}={value}", field.name());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        let _ = write!(self.rest, " {}={value}", field.name());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        let _ = write!(self.rest, " {}={value:.3}", field.name());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, &value.to_string());
    }
}

/// A list written as `[a,b,c]` in events (file numbers, segment ids).
pub(crate) struct ListDisplay<'a, T>(pub &'a [T]);

impl<T: fmt::Display> fmt::Display for ListDisplay<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{item}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fs::MemFileSystem;

    fn read(fs: &MemFileSystem, path: &Path) -> String {
        String::from_utf8(fs.read_all(path).unwrap_or_default()).unwrap_or_default()
    }

    /// A file system holding the directory `/db`.
    fn fs_with_db() -> Arc<MemFileSystem> {
        let fs = Arc::new(MemFileSystem::new());
        fs.create_dir_all(Path::new("/db")).expect("directory in memory");
        fs
    }

    #[test]
    fn dates_follow_the_gregorian_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        // 2000-02-29 (a leap day of a century divisible by 400) and 2100-03-01.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
        let mut line = String::new();
        format_prefix(&mut line, UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456), Level::WARN);
        assert!(line.starts_with("2023-11-14T22:13:20.123456Z WARN  "), "{line}");
    }

    #[test]
    fn values_with_spaces_or_quotes_are_quoted() {
        let mut out = String::new();
        push_value(&mut out, "000012.sst");
        out.push(' ');
        push_value(&mut out, "I/O error: disk \"full\"");
        out.push(' ');
        push_value(&mut out, "");
        assert_eq!(out, r#"000012.sst "I/O error: disk \"full\"" """#);
    }

    #[test]
    fn lines_carry_the_message_then_the_fields() {
        let fs = fs_with_db();
        let dir = Path::new("/db");
        let log = InfoLog::open(Arc::clone(&fs) as Arc<dyn FileSystem>, dir, &InfoLogOptions::default());
        log_event!(log, Level::INFO, table = 12u64, reason = "a b", ok = true, "flush finished");
        log_event!(log, Level::DEBUG, "not in the LOG");
        let text = read(&fs, &dir.join("LOG"));
        let line = text.lines().next().unwrap_or_default();
        let (stamp, rest) = line.split_once(' ').unwrap_or_default();
        assert_eq!((stamp.len(), &stamp[4..5], &stamp[10..11], &stamp[26..]), (27, "-", "T", "Z"), "{line}");
        assert!(rest.starts_with("INFO  "), "{line}");
        assert!(rest.ends_with(" flush finished table=12 reason=\"a b\" ok=true"), "{line}");
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    #[test]
    fn rotation_keeps_the_newest_files_under_the_cap() {
        let fs = fs_with_db();
        let dir = Path::new("/db");
        let options = InfoLogOptions { enabled: true, max_file_size: 300, keep_old_files: 2 };
        let log = InfoLog::open(Arc::clone(&fs) as Arc<dyn FileSystem>, dir, &options);
        for i in 0..40u64 {
            log_event!(log, Level::INFO, n = i, "an event long enough that a few of them fill the file");
        }
        let current = read(&fs, &dir.join("LOG"));
        assert!(current.len() <= 300 && !current.is_empty(), "{}", current.len());
        assert!(current.contains("n=39"), "{current}");
        let newest_old = read(&fs, &dir.join("LOG.old.1"));
        assert!(!newest_old.is_empty() && newest_old.len() <= 300);
        assert!(fs.exists(&dir.join("LOG.old.2")));
        assert!(!fs.exists(&dir.join("LOG.old.3")), "only two rotated files are kept");
        // A reopen starts a new LOG and keeps the previous one as LOG.old.1.
        drop(log);
        let log = InfoLog::open(Arc::clone(&fs) as Arc<dyn FileSystem>, dir, &options);
        log_event!(log, Level::INFO, "reopened");
        assert!(read(&fs, &dir.join("LOG.old.1")).contains("n=39"));
        assert!(read(&fs, &dir.join("LOG")).contains("reopened"));
    }

    #[test]
    fn stalls_are_logged_once_when_they_begin_and_when_they_end() {
        let fs = fs_with_db();
        let dir = Path::new("/db");
        let log = InfoLog::open(Arc::clone(&fs) as Arc<dyn FileSystem>, dir, &InfoLogOptions::default());
        log.stalls_ended(INDEX_STALLS);
        for _ in 0..3 {
            log.stall_began(StallCause::L0Slowdown, &"8 files");
        }
        log.stalls_ended([StallCause::L0Stop]);
        log.stalls_ended(INDEX_STALLS);
        log.stalls_ended(INDEX_STALLS);
        let text = read(&fs, &dir.join("LOG"));
        assert_eq!(text.matches("write stall began cause=level0-slowdown").count(), 1, "{text}");
        assert_eq!(text.matches("write stall ended cause=level0-slowdown").count(), 1, "{text}");
    }

    #[test]
    fn a_disabled_log_writes_no_file() {
        let fs = fs_with_db();
        let dir = Path::new("/db");
        let options = InfoLogOptions { enabled: false, ..InfoLogOptions::default() };
        let log = InfoLog::open(Arc::clone(&fs) as Arc<dyn FileSystem>, dir, &options);
        log_event!(log, Level::INFO, "nothing");
        assert!(!fs.exists(&dir.join("LOG")));
    }
}
