//! Data-driven tests of compaction picking: each file under `compaction/testdata/` describes LSM
//! shapes in text and, beside each command, the pick it expects. A new policy case is a few lines
//! of text, and a reader sees the tree and the answer side by side instead of `LevelsSnapshot`
//! literals and assertions.
//!
//! The files use the `datadriven` format (that of Pebble's compaction-picker tests): a command
//! line with `key=value` arguments, an optional body, `----`, the expected output, a blank line.
//! `#` starts a comment on a command line and between cases; an expected output cannot hold a
//! blank line. For example:
//!
//! ```text
//! define levels=4 base=10MB multiplier=10
//! L0: 1:a-c:2MB 2:b-d:2MB
//! L1: 10:a-d:15MB
//! ----
//! L0: files=2 bytes=4MB ratio=0.50
//! L1: files=1 bytes=15MB target=10MB ratio=1.50
//! L2: files=0 bytes=0 target=100MB ratio=0.00
//! L3: files=0 bytes=0 target=1000MB ratio=0.00
//!
//! pick
//! ----
//! L1 -> L2: level_size ratio=1.50
//!   L1: 10
//!   L2: -
//!   trivial move
//! ```
//!
//! A failing case prints the expected and the actual output. To accept the actual output of every
//! case instead (then read the diff: it becomes the specification), run
//! `REWRITE=1 cargo test -p splitkv --lib compaction::datadriven_tests`; `RUN=score` limits a run
//! to one file.
//!
//! The runner drives the real [`Version`], [`picker`] and policies the way the scheduler
//! (`pick_compaction` in the LSM index) does: a [`LevelsSnapshot`] of the version in which bytes
//! that running compactions read do not count, the picker's free inputs at every level, levels
//! without any reported as blocked, the policy's pick, the candidate of the picked level. Both
//! build the policy's view with the same [`picker::candidates`]. Each file starts with an empty
//! tree, the defaults below and a `ScorePolicy`.
//!
//! Commands:
//! - `define [levels=7] [l0-trigger=4] [l0-slowdown=8] [l0-stop=12] [base=64MB] [multiplier=10]
//!   [target-file-size=8MB]`, body `L<level>: <number>:<smallest>-<largest>[:<size>] ...`, one
//!   line per non-empty level (size defaults to 1MB; sizes take B, KB, MB, GB suffixes, 1024
//!   based). Replaces the tree and clears running compactions and compact pointers; keeps the
//!   policy and its state, so a time-slice case can reshape the tree mid-grant. Settings given
//!   stay in force for the rest of the file (the defaults are those of `Options::default()`).
//!   Prints the levels as `levels` does.
//! - `levels`: files, bytes, target and ratio of each level as the policy sees them, the bytes
//!   running compactions read (`compacting=`), and `blocked` where the picker finds no free input.
//! - `version`: the files of each level, in `define` syntax.
//! - `policy score [l0-boost=false]` or `policy time-slice [slice=1000] [dynamic] [drain=0.5]
//!   [l0-boost=false]`: a fresh policy, and the clock back at 0.
//! - `pick [start]`: one scheduler pick: `L<n> -> L<n+1>: <reason> ratio=<r>` (the level's ratio,
//!   not the policy's score, which boosts add to), the inputs of both levels, the grandparents,
//!   `trivial move` when the file moves down without a rewrite; or `none`. Under the time-slice
//!   policy a last line shows the slice. With `start` the compaction is registered as running,
//!   as the scheduler does, and its id printed.
//! - `pick-inputs level=N`: the picker alone: free inputs of level N after its compact pointer.
//! - `range-inputs level=N [begin=k] [end=k]`: inputs of a manual compaction of `[begin, end]`.
//! - `compacting level=N files=(..)`: registers a running compaction of those files (those of
//!   level N are its inputs, those of N+1 its parents) without asking anyone; prints its id.
//! - `conflicts level=N files=(..)`: whether such a compaction would conflict with running ones.
//! - `in-flight`: the running compactions.
//! - `done id=K duration=M`: compaction K finished after M ms (at least 1, as in the scheduler):
//!   frees its files, reports it to the policy, advances the compact pointer and applies it to
//!   the tree (a trivial move moves the file; otherwise one output file spans the inputs and is
//!   as large as all of them, since nothing models dropped overwrites). Prints the new `version`.
//! - `done level=N duration=M [bytes=B]`: only reports a finished compaction to the policy (as if
//!   it moved B bytes out of level N, default 0). Both forms advance the clock; this one prints it.
//! - `compact-pointer level=N key=k`: the level's round-robin pointer, as if the last compaction
//!   there ended at user key k.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use datadriven::TestCase;

use super::picker::{self, Compaction, InFlight};
use super::policy::{
    CompactionPolicy, FinishedCompaction, LevelsSnapshot, Release, SchedulerState, ScorePolicy, TimeSliceConfig,
    TimeSlicePolicy,
};
use crate::types::{FileNumber, InternalKey, SequenceNumber, ValueKind};
use crate::version::{FileMetaData, Version, VersionEdit};

/// Relative to the crate root, where `cargo test` runs.
const TESTDATA: &str = "src/compaction/testdata";

const KB: u64 = 1 << 10;
const MB: u64 = 1 << 20;
const GB: u64 = 1 << 30;

#[test]
fn compaction_picker_testdata() {
    datadriven::walk(TESTDATA, |file| {
        let mut lsm = Lsm::new();
        file.run(|case| lsm.run(case));
    });
}

/// The numbers the scheduler hands the policy and the picker (those of `Options` by default).
#[derive(Clone, Copy, Debug)]
struct Settings {
    levels: usize,
    l0_trigger: usize,
    l0_slowdown: usize,
    l0_stop: usize,
    base: u64,
    multiplier: f64,
    target_file_size: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            levels: 7,
            l0_trigger: 4,
            l0_slowdown: 8,
            l0_stop: 12,
            base: 64 * MB,
            multiplier: 10.0,
            target_file_size: 8 * MB,
        }
    }
}

/// Kept concrete rather than `dyn CompactionPolicy` so the time-slice state can be printed.
enum Policy {
    Score(ScorePolicy),
    TimeSlice(TimeSlicePolicy),
}

impl Policy {
    fn get(&mut self) -> &mut dyn CompactionPolicy {
        match self {
            Policy::Score(p) => p,
            Policy::TimeSlice(p) => p,
        }
    }
}

/// One test file's tree, running compactions and policy.
struct Lsm {
    settings: Settings,
    version: Arc<Version>,
    pointers: Vec<Option<InternalKey>>,
    in_flight: InFlight,
    /// Running compactions by their `InFlight` id.
    running: BTreeMap<u64, Compaction>,
    policy: Policy,
    clock: SchedulerState,
    /// Number of the next output file of `done`.
    next_file: u64,
    /// L0 files point reads consulted in vain (`l0-read-misses`).
    l0_read_misses: u64,
}

type CaseResult = Result<String, String>;

impl Lsm {
    fn new() -> Lsm {
        let settings = Settings::default();
        Lsm {
            settings,
            version: Arc::new(Version::empty(settings.levels)),
            pointers: vec![None; settings.levels],
            in_flight: InFlight::default(),
            running: BTreeMap::new(),
            policy: Policy::Score(ScorePolicy::default()),
            clock: SchedulerState::default(),
            next_file: 1,
            l0_read_misses: 0,
        }
    }

    fn run(&mut self, case: &mut TestCase) -> CaseResult {
        let out = match case.directive.as_str() {
            "define" => self.define(case),
            "levels" => Ok(self.levels()),
            "version" => Ok(self.version()),
            "policy" => self.set_policy(case),
            "pick" => self.pick(case),
            "pick-inputs" => self.pick_inputs(case),
            "range-inputs" => self.range_inputs(case),
            "compacting" => self.compacting(case),
            "conflicts" => self.conflicts(case),
            "in-flight" => Ok(self.in_flight()),
            "done" => self.done(case),
            "compact-pointer" => self.compact_pointer(case),
            "l0-read-misses" => self.set_l0_read_misses(case),
            other => Err(format!("unknown command {other:?}")),
        }?;
        // Arguments nobody took are typos: fail rather than silently ignore them.
        case.expect_empty().map_err(|e| e.to_string())?;
        Ok(out)
    }

    fn define(&mut self, case: &mut TestCase) -> CaseResult {
        let s = &mut self.settings;
        s.levels = arg(case, "levels")?.unwrap_or(s.levels);
        s.l0_trigger = arg(case, "l0-trigger")?.unwrap_or(s.l0_trigger);
        s.l0_slowdown = arg(case, "l0-slowdown")?.unwrap_or(s.l0_slowdown);
        s.l0_stop = arg(case, "l0-stop")?.unwrap_or(s.l0_stop);
        s.base = size_arg(case, "base")?.unwrap_or(s.base);
        s.multiplier = arg(case, "multiplier")?.unwrap_or(s.multiplier);
        s.target_file_size = size_arg(case, "target-file-size")?.unwrap_or(s.target_file_size);
        let mut edit = VersionEdit::default();
        for line in case.input.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (level, files) = line.split_once(':').ok_or_else(|| format!("expected `L<n>: files`: {line}"))?;
            let level: usize = level
                .strip_prefix('L')
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| format!("bad level {level:?} in {line}"))?;
            for spec in files.split_whitespace() {
                let meta = parse_file(spec)?;
                self.next_file = self.next_file.max(meta.number.0 + 1);
                edit.add_file(level, meta);
            }
        }
        self.version = Arc::new(Version::empty(s.levels).apply(&edit)?);
        self.pointers = vec![None; s.levels];
        self.in_flight = InFlight::default();
        self.running.clear();
        Ok(self.levels())
    }

    /// The policy's view of the tree and the picker's candidate at every compactable level,
    /// built as the scheduler builds them.
    fn snapshot(&self) -> (LevelsSnapshot, Vec<Option<Compaction>>) {
        let s = &self.settings;
        let settings = picker::PickSettings {
            l0_trigger: s.l0_trigger,
            l0_slowdown: s.l0_slowdown,
            l0_stop: s.l0_stop,
            level_base: s.base,
            level_multiplier: s.multiplier,
            target_file_size: s.target_file_size,
        };
        picker::candidates(&self.version, &self.pointers, &self.in_flight, &settings, self.l0_read_misses)
    }

    fn levels(&self) -> String {
        let (s, _) = self.snapshot();
        let mut out = String::new();
        for level in 0..s.num_levels() {
            let _ = write!(out, "L{level}: files={} bytes={}", s.files[level], size(s.bytes[level]));
            if level > 0 {
                let _ = write!(out, " target={}", size(s.max_bytes[level]));
            }
            let _ = write!(out, " ratio={:.2}", s.ratio(level));
            if s.compacting_bytes[level] > 0 {
                let _ = write!(out, " compacting={}", size(s.compacting_bytes[level]));
            }
            // Empty levels and the last level are always blocked; saying so is noise.
            if s.files[level] > 0 && level + 1 < s.num_levels() && !s.can_start(level) {
                out.push_str(" blocked");
            }
            out.push('\n');
        }
        out
    }

    fn version(&self) -> String {
        let mut out = String::new();
        for level in 0..self.version.num_levels() {
            let files = self.version.files(level);
            if files.is_empty() {
                continue;
            }
            let _ = write!(out, "L{level}:");
            for f in files {
                let (lo, hi) =
                    (String::from_utf8_lossy(f.smallest.user_key()), String::from_utf8_lossy(f.largest.user_key()));
                let _ = write!(out, " {}:{lo}-{hi}:{}", f.number.0, size(f.file_size));
            }
            out.push('\n');
        }
        if out.is_empty() {
            out.push_str("empty\n");
        }
        out
    }

    fn set_policy(&mut self, case: &mut TestCase) -> CaseResult {
        let l0_boost = arg(case, "l0-boost")?;
        if flag(case, "score")? {
            self.policy = Policy::Score(ScorePolicy { l0_boost: l0_boost.unwrap_or(true) });
        } else if flag(case, "time-slice")? {
            let defaults = TimeSliceConfig::default();
            self.policy = Policy::TimeSlice(TimeSlicePolicy::new(TimeSliceConfig {
                slice_ms: arg(case, "slice")?.unwrap_or(defaults.slice_ms),
                dynamic: flag(case, "dynamic")?,
                drain_fraction: arg(case, "drain")?,
                l0_boost: l0_boost.unwrap_or(defaults.l0_boost),
            }));
        } else {
            return Err("policy: expected `score` or `time-slice`".into());
        }
        // A new policy stands for a new scheduler: its clock starts again.
        self.clock = SchedulerState::default();
        Ok(String::new())
    }

    fn pick(&mut self, case: &mut TestCase) -> CaseResult {
        let start = flag(case, "start")?;
        let (snapshot, mut candidates) = self.snapshot();
        let pick = self.policy.get().pick(&snapshot, &self.clock);
        let mut out = String::new();
        match pick {
            None => out.push_str("none\n"),
            Some(p) => match candidates.get_mut(p.level).and_then(Option::take) {
                // Policies must not pick a blocked level; the scheduler would start nothing.
                None => {
                    let _ = writeln!(out, "L{} picked ({}) but it has no free inputs", p.level, p.reason.name());
                }
                Some(c) => {
                    let _ = writeln!(
                        out,
                        "L{} -> L{}: {} ratio={:.2}",
                        p.level,
                        p.level + 1,
                        p.reason.name(),
                        snapshot.ratio(p.level)
                    );
                    describe_inputs(&mut out, &c);
                    if start {
                        let id = self.in_flight.register(&c);
                        let _ = writeln!(out, "  started id={id}");
                        self.running.insert(id, c);
                    }
                }
            },
        }
        if let Policy::TimeSlice(p) = &self.policy {
            out.push_str(&slice_state(p));
        }
        Ok(out)
    }

    fn pick_inputs(&mut self, case: &mut TestCase) -> CaseResult {
        let level: usize = required(case, "level")?;
        self.check_compactable(level)?;
        let c = picker::pick_free_inputs(
            &self.version,
            level,
            self.pointers[level].as_ref(),
            self.settings.target_file_size,
            &self.in_flight,
        );
        Ok(inputs_or_none(c))
    }

    fn range_inputs(&mut self, case: &mut TestCase) -> CaseResult {
        let level: usize = required(case, "level")?;
        self.check_compactable(level)?;
        let begin: Option<String> = arg(case, "begin")?;
        let end: Option<String> = arg(case, "end")?;
        let c = picker::range_inputs(
            &self.version,
            level,
            begin.as_deref().map(str::as_bytes),
            end.as_deref().map(str::as_bytes),
            self.settings.target_file_size,
        );
        Ok(inputs_or_none(c))
    }

    /// `l0-read-misses n=<count>`: sets how many L0 files point reads consulted in vain; prints
    /// whether that makes L0 due against the allowance of the current L0 files.
    fn set_l0_read_misses(&mut self, case: &mut TestCase) -> CaseResult {
        self.l0_read_misses = required(case, "n")?;
        let allowance = picker::l0_read_allowance(&self.version);
        let due = if self.snapshot().0.l0_read_due { "due" } else { "not due" };
        Ok(format!("allowance={allowance} {due}\n"))
    }

    fn compacting(&mut self, case: &mut TestCase) -> CaseResult {
        let c = self.compaction_of(case)?;
        let id = self.in_flight.register(&c);
        self.running.insert(id, c);
        Ok(format!("id={id}\n"))
    }

    fn conflicts(&mut self, case: &mut TestCase) -> CaseResult {
        let c = self.compaction_of(case)?;
        Ok(if self.in_flight.conflicts(&c) { "conflict\n" } else { "no conflict\n" }.into())
    }

    fn in_flight(&self) -> String {
        let mut out = String::new();
        for (id, c) in &self.running {
            let all: Vec<_> = c.inputs.iter().flatten().cloned().collect();
            let (lo, hi) = picker::user_key_range(&all).unwrap_or_default();
            let _ = writeln!(
                out,
                "id={id} L{} -> L{} files={} range={}-{}",
                c.level,
                c.level + 1,
                numbers(&all),
                String::from_utf8_lossy(&lo),
                String::from_utf8_lossy(&hi)
            );
        }
        if out.is_empty() {
            out.push_str("none\n");
        }
        out
    }

    fn done(&mut self, case: &mut TestCase) -> CaseResult {
        let duration: u64 = required(case, "duration")?;
        if let Some(id) = arg::<u64>(case, "id")? {
            let c = self.running.remove(&id).ok_or_else(|| format!("no running compaction id={id}"))?;
            self.in_flight.release(id);
            // As the scheduler: at least 1 ms, the level's input bytes.
            let done =
                FinishedCompaction { level: c.level, duration_ms: duration.max(1), level_bytes: c.input_bytes().0 };
            self.finish(&done);
            self.apply(&c)?;
            return Ok(self.version());
        }
        let level: usize = required(case, "level")?;
        let level_bytes = size_arg(case, "bytes")?.unwrap_or(0);
        self.finish(&FinishedCompaction { level, duration_ms: duration, level_bytes });
        Ok(format!("now={}ms\n", self.clock.now_ms))
    }

    fn finish(&mut self, done: &FinishedCompaction) {
        self.clock.now_ms += done.duration_ms;
        self.policy.get().on_compaction_done(done, &self.clock);
    }

    /// Installs the result of `c` as the scheduler would: pointer, deleted inputs, and a moved
    /// file or one output spanning the inputs.
    fn apply(&mut self, c: &Compaction) -> Result<(), String> {
        let mut edit = VersionEdit::default();
        if let Some(largest) = c.largest_input_key() {
            self.pointers[c.level] = Some(largest);
        }
        for (which, files) in c.inputs.iter().enumerate() {
            for f in files {
                edit.delete_file(c.level + which, f.number);
            }
        }
        if c.is_trivial_move() {
            edit.add_file(c.level + 1, FileMetaData::clone(&c.inputs[0][0]));
        } else {
            let all: Vec<_> = c.inputs.iter().flatten().cloned().collect();
            let (lo, hi) = picker::user_key_range(&all).unwrap_or_default();
            let number = self.next_file;
            self.next_file += 1;
            edit.add_file(c.level + 1, file_meta(number, &lo, &hi, c.input_bytes().0 + c.input_bytes().1));
        }
        self.version = Arc::new(self.version.apply(&edit)?);
        Ok(())
    }

    fn compact_pointer(&mut self, case: &mut TestCase) -> CaseResult {
        let level: usize = required(case, "level")?;
        self.check_compactable(level)?;
        let key: String = required(case, "key")?;
        // Sequence 0 sorts after every other entry of the key: files ending at `key` are behind.
        self.pointers[level] = Some(InternalKey::new(key.as_bytes(), SequenceNumber(0), ValueKind::Inline));
        Ok(String::new())
    }

    /// A compaction of the named files: those of `level` are inputs, those of `level + 1` parents.
    fn compaction_of(&self, case: &mut TestCase) -> Result<Compaction, String> {
        let level: usize = required(case, "level")?;
        self.check_compactable(level)?;
        let wanted: Vec<u64> = case.take_args("files").map_err(|e| e.to_string())?;
        let mut inputs: [Vec<_>; 2] = [Vec::new(), Vec::new()];
        for n in wanted {
            let found = (0..2).find_map(|which| {
                let files = self.version.files(level + which);
                files.iter().find(|f| f.number == FileNumber(n)).map(|f| (which, Arc::clone(f)))
            });
            let (which, f) = found.ok_or_else(|| format!("file {n} is in neither L{level} nor L{}", level + 1))?;
            inputs[which].push(f);
        }
        Ok(Compaction {
            level,
            inputs,
            grandparents: Vec::new(),
            version: Arc::clone(&self.version),
            max_output_file_size: self.settings.target_file_size,
        })
    }

    fn check_compactable(&self, level: usize) -> Result<(), String> {
        if level + 1 < self.version.num_levels() {
            Ok(())
        } else {
            Err(format!("L{level} has no level below it"))
        }
    }
}

fn describe_inputs(out: &mut String, c: &Compaction) {
    let _ = writeln!(out, "  L{}: {}", c.level, numbers(&c.inputs[0]));
    let _ = writeln!(out, "  L{}: {}", c.level + 1, numbers(&c.inputs[1]));
    if !c.grandparents.is_empty() {
        let _ = writeln!(out, "  grandparents: {}", numbers(&c.grandparents));
    }
    if c.is_trivial_move() {
        out.push_str("  trivial move\n");
    }
}

fn inputs_or_none(c: Option<Compaction>) -> String {
    let mut out = String::new();
    match c {
        None => out.push_str("none\n"),
        Some(c) => {
            let _ = writeln!(out, "L{} -> L{}", c.level, c.level + 1);
            describe_inputs(&mut out, &c);
        }
    }
    out
}

fn slice_state(p: &TimeSlicePolicy) -> String {
    let mut out = match (p.slice_holder(), p.current_slice_ms()) {
        (Some(level), Some(ms)) => format!("slice: L{level} for {ms}ms"),
        _ => "slice: nobody".to_string(),
    };
    let _ = write!(out, ", grants={}", p.grants());
    if let Some(why) = p.last_release() {
        let why = match why {
            Release::Expired => "expired",
            Release::UnderThreshold => "under threshold",
            Release::Drained => "drained",
        };
        let _ = write!(out, ", last release: {why}");
    }
    out.push('\n');
    out
}

/// File numbers, or `-` for none (an empty line would end the expected output).
fn numbers(files: &[Arc<FileMetaData>]) -> String {
    if files.is_empty() {
        return "-".into();
    }
    files.iter().map(|f| f.number.0.to_string()).collect::<Vec<_>>().join(" ")
}

/// `<number>:<smallest>-<largest>[:<size>]`.
fn parse_file(spec: &str) -> Result<FileMetaData, String> {
    let mut parts = spec.split(':');
    let bad = || format!("expected <number>:<smallest>-<largest>[:<size>], got {spec:?}");
    let number: u64 = parts.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let (lo, hi) = parts.next().and_then(|r| r.split_once('-')).ok_or_else(bad)?;
    let size = parts.next().map(parse_size).transpose()?.unwrap_or(MB);
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(file_meta(number, lo.as_bytes(), hi.as_bytes(), size))
}

fn file_meta(number: u64, lo: &[u8], hi: &[u8], size: u64) -> FileMetaData {
    FileMetaData {
        number: FileNumber(number),
        file_size: size,
        smallest: InternalKey::new(lo, SequenceNumber(number), ValueKind::Inline),
        largest: InternalKey::new(hi, SequenceNumber(number), ValueKind::Inline),
        num_entries: 1,
        log_refs: Vec::new(),
        smallest_seq: SequenceNumber(number),
        largest_seq: SequenceNumber(number),
        range_clean_below: SequenceNumber(0),
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().map_err(|_| format!("bad size {s:?}"))?;
    let unit = match unit {
        "" | "B" => 1,
        "K" | "KB" => KB,
        "M" | "MB" => MB,
        "G" | "GB" => GB,
        _ => return Err(format!("bad size unit in {s:?}")),
    };
    Ok(n * unit)
}

/// The largest exact unit, so sizes read as they were written.
fn size(bytes: u64) -> String {
    match bytes {
        0 => "0".into(),
        b if b % GB == 0 => format!("{}GB", b / GB),
        b if b % MB == 0 => format!("{}MB", b / MB),
        b if b % KB == 0 => format!("{}KB", b / KB),
        b => format!("{b}B"),
    }
}

fn arg<T>(case: &mut TestCase, name: &str) -> Result<Option<T>, String>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    case.try_take_arg(name).map_err(|e| format!("{name}: {e}"))
}

fn required<T>(case: &mut TestCase, name: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    arg(case, name)?.ok_or_else(|| format!("missing argument {name}="))
}

fn size_arg(case: &mut TestCase, name: &str) -> Result<Option<u64>, String> {
    arg::<String>(case, name)?.map(|s| parse_size(&s)).transpose()
}

fn flag(case: &mut TestCase, name: &str) -> Result<bool, String> {
    case.take_flag(name).map_err(|e| e.to_string())
}
