//! What each benchmark does: the workload shapes db_bench gives every benchmark name, the
//! per-thread operation loops (writes, reads, scans, deletes, YCSB), and the live-data tracking
//! that space amplification divides by. The runner in `main.rs` decides order, threads and
//! reporting.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::engines::{BenchResult, Direction, Engine, WriteOp};
use crate::flags::Flags;
use crate::keys::{KeyBuffer, LevelDbRandom};
use crate::report::OpStats;
use crate::values::ValueGenerator;
use crate::ycsb::{self, InsertCounter, KeyChooser, Operation, SplitMix64};

/// Operation counts and sizes for one benchmark (db_bench resets these before each one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub(crate) num: u64,
    /// Writes per thread of the fill and overwrite benchmarks if `--writes` set them, else `num`.
    pub(crate) writes: Option<u64>,
    pub(crate) reads: u64,
    pub(crate) value_size: usize,
    pub(crate) entries_per_batch: usize,
    pub(crate) sync: bool,
}

impl Workload {
    /// Writes per thread of a fill or overwrite benchmark.
    pub(crate) fn write_count(&self) -> u64 {
        self.writes.unwrap_or(self.num)
    }
}

/// The size of every record a run has written, indexed by key number, so that space
/// amplification can divide by the live data. Writers store with relaxed atomics; the total is
/// read after the benchmark's threads have joined.
pub(crate) struct LiveSet {
    pub(crate) bytes_by_key: Vec<AtomicU32>,
    /// A key number beyond the capacity was written: the total is then unknown.
    pub(crate) overflowed: std::sync::atomic::AtomicBool,
}

impl LiveSet {
    pub(crate) fn new(capacity: u64) -> Self {
        LiveSet {
            bytes_by_key: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            overflowed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Records that key number `k` now holds `bytes` of key + value (0 after a delete).
    pub(crate) fn set(&self, k: u64, bytes: usize) {
        match usize::try_from(k).ok().and_then(|k| self.bytes_by_key.get(k)) {
            Some(slot) => slot.store(u32::try_from(bytes).unwrap_or(u32::MAX), Ordering::Relaxed),
            None => self.overflowed.store(true, Ordering::Relaxed),
        }
    }

    pub(crate) fn clear(&self) {
        self.bytes_by_key.iter().for_each(|slot| slot.store(0, Ordering::Relaxed));
        self.overflowed.store(false, Ordering::Relaxed);
    }

    pub(crate) fn total(&self) -> Option<u64> {
        if self.overflowed.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.bytes_by_key.iter().map(|slot| u64::from(slot.load(Ordering::Relaxed))).sum())
    }
}

/// State that lives across benchmarks: what is in the database, per key space.
pub(crate) struct Tracking {
    /// Keys of the db_bench benchmarks.
    pub(crate) db_bench: LiveSet,
    /// YCSB records, by key number.
    pub(crate) ycsb: LiveSet,
    /// YCSB's insert key sequence.
    pub(crate) ycsb_inserts: InsertCounter,
    /// False when the run began on an existing database whose contents the harness never saw.
    pub(crate) live_known: bool,
}

/// What every thread of a benchmark shares, read-only (apart from the atomic tracking).
pub(crate) struct Context<'a> {
    pub(crate) engine: &'a dyn Engine,
    pub(crate) flags: &'a Flags,
    pub(crate) workload: Workload,
    pub(crate) threads: usize,
    pub(crate) ycsb_workload: Option<ycsb::Workload>,
    pub(crate) tracking: &'a Tracking,
    /// Reader threads of `readwhilewriting` that have finished (its writer stops after all).
    pub(crate) finished_readers: AtomicUsize,
}

/// db_bench's `Duration`: a loop runs `max_ops` operations or, with `--duration`, for that many
/// seconds however many operations that takes.
pub(crate) struct Budget {
    max_ops: u64,
    deadline: Option<Instant>,
    ops: u64,
}

impl Budget {
    /// Checks the clock once per this many operations.
    const CLOCK_EVERY: u64 = 64;

    pub(crate) fn new(max_ops: u64, seconds: u64) -> Self {
        let deadline = (seconds > 0).then(|| Instant::now() + Duration::from_secs(seconds));
        Budget { max_ops, deadline, ops: 0 }
    }

    /// Counts `increment` operations about to be done; true once the loop should stop instead.
    pub(crate) fn done(&mut self, increment: u64) -> bool {
        let before = self.ops;
        self.ops += increment.max(1);
        match self.deadline {
            Some(deadline) => before / Self::CLOCK_EVERY != self.ops / Self::CLOCK_EVERY && Instant::now() >= deadline,
            None => self.ops > self.max_ops,
        }
    }
}

/// One thread's private state.
pub(crate) struct ThreadState {
    pub(crate) index: usize,
    pub(crate) rand: LevelDbRandom,
    pub(crate) ycsb_rand: SplitMix64,
    pub(crate) stats: OpStats,
}

pub(crate) type Method = fn(&Context<'_>, &mut ThreadState) -> BenchResult<()>;

/// How a benchmark name maps to work.
pub(crate) struct Plan {
    pub(crate) method: Option<Method>,
    pub(crate) fresh_db: bool,
    /// Set for YCSB benchmarks: they run on `--ycsb_threads`; `None` inside is the load phase.
    pub(crate) ycsb: Option<Option<ycsb::Workload>>,
}

/// Chooses the method for `name` and adjusts the workload as db_bench does; `None` for an
/// unknown name.
pub(crate) fn plan(name: &str, workload: &mut Workload) -> Option<Plan> {
    let run = |method: Method| Some(Plan { method: Some(method), fresh_db: false, ycsb: None });
    let fill = |method: Method| Some(Plan { method: Some(method), fresh_db: true, ycsb: None });
    if name == "ycsb_load" {
        return Some(Plan { method: Some(ycsb_load), fresh_db: true, ycsb: Some(None) });
    }
    if let Some(letter) = name.strip_prefix("ycsb_") {
        let mut chars = letter.chars();
        let workload = match (chars.next(), chars.next()) {
            (Some(letter), None) => ycsb::Workload::core(letter)?,
            _ => return None,
        };
        return Some(Plan { method: Some(ycsb_run), fresh_db: false, ycsb: Some(Some(workload)) });
    }
    match name {
        "fillseq" => fill(write_seq),
        "fillbatch" => {
            workload.entries_per_batch = 1000;
            fill(write_seq)
        }
        "fillrandom" => fill(write_random),
        "overwrite" => run(write_random),
        "fillsync" => {
            workload.num /= 1000;
            workload.sync = true;
            fill(write_random)
        }
        "fill100K" => {
            workload.num /= 1000;
            // db_bench's "100K" is 100 * 1000 bytes.
            workload.value_size = 100 * 1000;
            fill(write_random)
        }
        "readwhilewriting" => run(read_while_writing),
        "readrandomwriterandom" => run(read_random_write_random),
        "updaterandom" => run(update_random),
        "readseq" => run(read_sequential),
        "readreverse" => run(read_reverse),
        "readrandom" => run(read_random),
        "readmissing" => run(read_missing),
        "seekrandom" => run(seek_random),
        "scanrandom" => run(scan_random),
        "multireadrandom" => run(multi_read_random),
        "readhot" => run(read_hot),
        "readrandomsmall" => {
            workload.reads /= 1000;
            run(read_random)
        }
        "deleteseq" => run(delete_seq),
        "deletefraction" => run(delete_fraction),
        "deleterange" => run(delete_ranges),
        "newiterator" => run(new_iterator),
        "deleterandom" => run(delete_random),
        "compact" => run(compact),
        "gc" => run(collect_garbage),
        "rewritelog" => run(rewrite_log),
        "stats" => Some(Plan { method: None, fresh_db: false, ycsb: None }),
        _ => None,
    }
}

/// Operations benchmark `name` should finish over all its threads, for the progress bar's length;
/// `None` where the count is not known in advance (a single long call, like `compact`).
pub(crate) fn expected_ops(name: &str, workload: &Workload, threads: usize, flags: &Flags) -> Option<u64> {
    let threads = threads as u64;
    match name {
        "ycsb_load" => Some(flags.ycsb_records),
        _ if name.starts_with("ycsb_") => Some(flags.ycsb_ops),
        "compact" | "gc" | "rewritelog" | "stats" => None,
        // Timed benchmarks run for `--duration` seconds, however many operations that is.
        _ if flags.duration > 0 && is_timed(name) => None,
        // Its writer runs until the readers are done; only the readers' operations count.
        "readwhilewriting" => Some(workload.reads * (threads - 1)),
        // Spread over the threads, key `k` goes when `k % 100 < percent`.
        "deletefraction" => Some(workload.num * u64::from(flags.delete_percent) / 100),
        "deleterange" => Some(u64::from(flags.delete_ranges)),
        // Each thread walks at most the whole key space.
        "readseq" | "readreverse" => Some(workload.reads.min(workload.num) * threads),
        _ if name.starts_with("fill") || name == "overwrite" => Some(workload.write_count() * threads),
        _ if name.starts_with("delete") => Some(workload.num * threads),
        _ => Some(workload.reads * threads),
    }
}

/// Benchmarks that `--duration` bounds by time (db_bench's: random writes and the random
/// reads).
pub(crate) fn is_timed(name: &str) -> bool {
    matches!(
        name,
        "fillrandom"
            | "overwrite"
            | "readrandom"
            | "readmissing"
            | "readhot"
            | "seekrandom"
            | "multireadrandom"
            | "readwhilewriting"
            | "readrandomwriterandom"
            | "updaterandom"
    )
}

pub(crate) fn write_seq(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_write(ctx, thread, true)
}

pub(crate) fn write_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_write(ctx, thread, false)
}

pub(crate) fn do_write(ctx: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> BenchResult<()> {
    let w = ctx.workload;
    let ops = w.write_count();
    if ops != u64::from(ctx.flags.num) {
        thread.stats.add_message(&format!("({ops} ops)"));
    }
    let mut values = ValueGenerator::new(ctx.flags.compression_ratio);
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let mut bytes = 0u64;
    let batch_len = w.entries_per_batch as u64;
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(w.entries_per_batch);
    let mut i = 0u64;
    // Random writes may run for `--duration` instead (db_bench times only those).
    let mut budget = Budget::new(ops.div_ceil(batch_len), if sequential { 0 } else { ctx.flags.duration });
    while (budget.deadline.is_some() || i < ops) && !budget.done(1) {
        let mut next_key = |j: u64| if sequential { i + j } else { u64::from(thread.rand.uniform(ctx.flags.num)) };
        if batch_len == 1 {
            let k = next_key(0);
            ctx.engine.put(key.set(k), values.generate(w.value_size), w.sync)?;
            bytes += (w.value_size + key.len()) as u64;
            ctx.tracking.db_bench.set(k, w.value_size + key.len());
            thread.stats.finished_single_op();
        } else {
            batch.clear();
            // Sequential keys stop at `num`: the last batch may be short.
            let len = if sequential { batch_len.min(ops - i) } else { batch_len };
            for j in 0..len {
                let k = next_key(j);
                batch.push((key.set(k).to_vec(), values.generate(w.value_size).to_vec()));
                bytes += (w.value_size + key.len()) as u64;
                ctx.tracking.db_bench.set(k, w.value_size + key.len());
                thread.stats.finished_single_op();
            }
            let ops: Vec<WriteOp<'_>> = batch.iter().map(|(key, value)| WriteOp::Put { key, value }).collect();
            ctx.engine.write_batch(&ops, w.sync)?;
        }
        i += batch_len;
    }
    thread.stats.add_bytes(bytes);
    thread.stats.add_user_bytes_written(bytes);
    Ok(())
}

pub(crate) fn read_sequential(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    scan(ctx, thread, Direction::Forward)
}

pub(crate) fn read_reverse(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    scan(ctx, thread, Direction::Reverse)
}

pub(crate) fn scan(ctx: &Context<'_>, thread: &mut ThreadState, direction: Direction) -> BenchResult<()> {
    // Entries per clock reading: a step costs tens of nanoseconds, about what reading the clock
    // does, so entries are timed per entry only with `--histogram` (as db_bench does).
    const CLOCK_EVERY: u64 = 256;
    let (mut entries, mut bytes, mut unclocked) = (0u64, 0u64, 0u64);
    let limit = ctx.workload.reads;
    let per_entry = ctx.flags.histogram;
    ctx.engine.scan(direction, &mut |key, value| {
        if entries >= limit {
            return false;
        }
        bytes += (key.len() + value.len()) as u64;
        entries += 1;
        unclocked += 1;
        if per_entry || unclocked == CLOCK_EVERY {
            thread.stats.finished_scan_entries(unclocked);
            unclocked = 0;
        }
        true
    })?;
    if unclocked > 0 {
        thread.stats.finished_scan_entries(unclocked);
    }
    thread.stats.add_bytes(bytes);
    Ok(())
}

pub(crate) fn read_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let mut found = 0u64;
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let k = thread.rand.uniform(ctx.flags.num);
        if ctx.engine.get(key.set(u64::from(k)))?.is_some() {
            found += 1;
        }
        thread.stats.finished_single_op();
    }
    thread.stats.add_message(&format!("({found} of {} found)", ctx.workload.num));
    Ok(())
}

/// RocksDB's `readwhilewriting`: `--threads` readers do `readrandom` while one more thread
/// writes random keys until they are done. The writer's measurements are left out of the
/// report (only the bytes it wrote count, for write amplification), as in db_bench.
pub(crate) fn read_while_writing(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let readers = ctx.threads - 1;
    if thread.index > 0 {
        let read = read_random(ctx, thread);
        ctx.finished_readers.fetch_add(1, Ordering::Release);
        return read;
    }
    thread.stats.exclude_from_merge();
    let mut writer = RandomWriter::new(ctx);
    // At least one write, however quickly the readers finish.
    loop {
        let written = writer.put(ctx, u64::from(thread.rand.uniform(ctx.flags.num)))?;
        thread.stats.add_user_bytes_written(written);
        if ctx.finished_readers.load(Ordering::Acquire) >= readers {
            return Ok(());
        }
    }
}

/// Puts fresh values at db_bench key numbers and tracks them as live data.
struct RandomWriter {
    values: ValueGenerator,
    key: KeyBuffer,
    value_size: usize,
}

impl RandomWriter {
    fn new(ctx: &Context<'_>) -> Self {
        RandomWriter {
            values: ValueGenerator::new(ctx.flags.compression_ratio),
            key: KeyBuffer::for_flags(ctx.flags),
            value_size: ctx.workload.value_size,
        }
    }

    /// Writes key number `k`; returns the key and value bytes written.
    fn put(&mut self, ctx: &Context<'_>, k: u64) -> BenchResult<u64> {
        ctx.engine.put(self.key.set(k), self.values.generate(self.value_size), ctx.workload.sync)?;
        let bytes = self.value_size + self.key.len();
        ctx.tracking.db_bench.set(k, bytes);
        Ok(bytes as u64)
    }
}

/// RocksDB's `readrandomwriterandom`: each operation on a random key is a read with
/// probability `--readwritepercent`%, else a write.
pub(crate) fn read_random_write_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut writer = RandomWriter::new(ctx);
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let (mut reads, mut writes, mut found, mut written) = (0u64, 0u64, 0u64, 0u64);
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let k = u64::from(thread.rand.uniform(ctx.flags.num));
        if thread.rand.uniform(100) < u32::from(ctx.flags.readwritepercent) {
            reads += 1;
            found += u64::from(ctx.engine.get(key.set(k))?.is_some());
        } else {
            writes += 1;
            written += writer.put(ctx, k)?;
        }
        thread.stats.finished_single_op();
    }
    thread.stats.add_user_bytes_written(written);
    thread.stats.add_message(&format!("( reads:{reads} writes:{writes} total:{} found:{found})", reads + writes));
    Ok(())
}

/// RocksDB's `updaterandom`: read a random key, then write it with a new value (a
/// read-modify-write), `--reads` times.
pub(crate) fn update_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut writer = RandomWriter::new(ctx);
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let (mut updates, mut found, mut bytes, mut written) = (0u64, 0u64, 0u64, 0u64);
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let k = u64::from(thread.rand.uniform(ctx.flags.num));
        if let Some(len) = ctx.engine.get(key.set(k))? {
            found += 1;
            bytes += (key.len() + len) as u64;
        }
        written += writer.put(ctx, k)?;
        updates += 1;
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes + written);
    thread.stats.add_user_bytes_written(written);
    thread.stats.add_message(&format!("( updates:{updates} found:{found})"));
    Ok(())
}

/// RocksDB's `multireadrandom`: random keys looked up `--batch_size` at a time with the engine's
/// batched read; throughput counts keys, the latency histogram batches.
pub(crate) fn multi_read_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let batch_size = ctx.flags.batch_size as u64;
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(ctx.flags.batch_size);
    let mut found = 0u64;
    let mut read = 0u64;
    let timed = ctx.flags.duration > 0;
    let mut budget = Budget::new(ctx.workload.reads.div_ceil(batch_size), ctx.flags.duration);
    while (timed || read < ctx.workload.reads) && !budget.done(1) {
        let n = if timed { batch_size } else { batch_size.min(ctx.workload.reads - read) };
        batch.clear();
        for _ in 0..n {
            batch.push(key.set(u64::from(thread.rand.uniform(ctx.flags.num))).to_vec());
        }
        let keys: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        found += ctx.engine.multi_get(&keys)? as u64;
        thread.stats.finished_ops(n);
        read += n;
    }
    thread.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

pub(crate) fn read_missing(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let k = thread.rand.uniform(ctx.flags.num);
        // Dropping the last digit makes a key that sorts among real keys but never exists.
        let full = key.set(u64::from(k));
        ctx.engine.get(&full[..full.len() - 1])?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

pub(crate) fn read_hot(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    // The hottest 1% of the key space.
    let range = ctx.flags.num.div_ceil(100);
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let k = thread.rand.uniform(range);
        ctx.engine.get(key.set(u64::from(k)))?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

/// Seeks to random keys; with `--seek_nexts=N` also reads the N entries after each landing
/// (db_bench's `seekrandom`), through the same iterator.
pub(crate) fn seek_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let (mut found, mut bytes) = (0u64, 0u64);
    let nexts = usize::try_from(ctx.flags.seek_nexts).unwrap_or(usize::MAX);
    let mut budget = Budget::new(ctx.workload.reads, ctx.flags.duration);
    while !budget.done(1) {
        let target = key.set(u64::from(thread.rand.uniform(ctx.flags.num)));
        let landed = if nexts == 0 {
            ctx.engine.seek_lands_on(target)?
        } else {
            let mut first = None;
            ctx.engine.scan_from(target, nexts.saturating_add(1), &mut |k, v| {
                first.get_or_insert_with(|| k == target);
                bytes += (k.len() + v.len()) as u64;
            })?;
            first.unwrap_or(false)
        };
        found += u64::from(landed);
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes);
    thread.stats.add_message(&format!("({found} of {} found)", ctx.workload.num));
    Ok(())
}

/// YCSB E's scans: seek to a random key, then read the next 1 to 100 entries (uniform).
pub(crate) fn scan_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let (mut entries, mut bytes) = (0u64, 0u64);
    for _ in 0..ctx.workload.reads {
        let start = thread.rand.uniform(ctx.flags.num);
        let length = 1 + u64::from(thread.rand.uniform(100));
        let seen = ctx.engine.scan_from(key.set(u64::from(start)), length as usize, &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
        })?;
        entries += seen as u64;
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes);
    thread.stats.add_message(&format!("({entries} entries)"));
    Ok(())
}

pub(crate) fn delete_seq(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_delete(ctx, thread, true)
}

/// Deletes `--delete_percent` of the keys `0..num`, spread evenly (key `k` goes when
/// `k % 100 < percent`), so that after a sequential load every value-log segment holds that
/// share of garbage: the setup of WiscKey's GC experiment (Figure 13).
pub(crate) fn delete_fraction(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let percent = u64::from(ctx.flags.delete_percent);
    let (start, end) = thread_share(ctx.workload.num, thread.index, ctx.flags.threads);
    for k in (start..end).filter(|k| k % 100 < percent) {
        ctx.engine.delete(key.set(k), ctx.workload.sync)?;
        ctx.tracking.db_bench.set(k, 0);
        thread.stats.add_user_bytes_written(key.len() as u64);
        thread.stats.finished_single_op();
    }
    Ok(())
}

/// Deletes `--delete_percent` of the keys as `--delete_ranges` range deletes: the first share
/// of each of that many equal slices of the key space. One operation per range.
pub(crate) fn delete_ranges(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let (mut start_key, mut end_key) = (KeyBuffer::for_flags(ctx.flags), KeyBuffer::for_flags(ctx.flags));
    let ranges = u64::from(ctx.flags.delete_ranges);
    let num = ctx.workload.num;
    let percent = u64::from(ctx.flags.delete_percent);
    let (first, last) = thread_share(ranges, thread.index, ctx.flags.threads);
    for r in first..last {
        let start = num * r / ranges;
        let end = start + (num * (r + 1) / ranges - start) * percent / 100;
        ctx.engine.delete_range(start_key.set(start), end_key.set(end))?;
        thread.stats.finished_single_op();
        for k in start..end {
            ctx.tracking.db_bench.set(k, 0);
        }
    }
    Ok(())
}

/// Creates `--reads` iterators, one at a time, without positioning them.
pub(crate) fn new_iterator(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    for _ in 0..ctx.workload.reads {
        ctx.engine.new_iterator()?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

pub(crate) fn delete_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_delete(ctx, thread, false)
}

pub(crate) fn do_delete(ctx: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> BenchResult<()> {
    let w = ctx.workload;
    let mut key = KeyBuffer::for_flags(ctx.flags);
    let batch_len = w.entries_per_batch as u64;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(w.entries_per_batch);
    let mut i = 0u64;
    while i < w.num {
        let mut next_key = |j: u64| if sequential { i + j } else { u64::from(thread.rand.uniform(ctx.flags.num)) };
        if batch_len == 1 {
            let k = next_key(0);
            ctx.engine.delete(key.set(k), w.sync)?;
            ctx.tracking.db_bench.set(k, 0);
            thread.stats.add_user_bytes_written(key.len() as u64);
            thread.stats.finished_single_op();
        } else {
            batch.clear();
            for j in 0..batch_len {
                let k = next_key(j);
                batch.push(key.set(k).to_vec());
                ctx.tracking.db_bench.set(k, 0);
                thread.stats.add_user_bytes_written(key.len() as u64);
                thread.stats.finished_single_op();
            }
            let ops: Vec<WriteOp<'_>> = batch.iter().map(|key| WriteOp::Delete { key }).collect();
            ctx.engine.write_batch(&ops, w.sync)?;
        }
        i += batch_len;
    }
    Ok(())
}

pub(crate) fn compact(ctx: &Context<'_>, _thread: &mut ThreadState) -> BenchResult<()> {
    ctx.engine.compact()
}

pub(crate) fn collect_garbage(ctx: &Context<'_>, _thread: &mut ThreadState) -> BenchResult<()> {
    ctx.engine.gc()
}

/// Lays values out in key order (splitkv's key-order value-log rewrite; a full compaction for
/// engines that keep values in their LSM).
pub(crate) fn rewrite_log(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let (message, bytes) = ctx.engine.rewrite_log()?;
    thread.stats.add_bytes(bytes);
    thread.stats.add_message(&message);
    Ok(())
}

/// This thread's share `[start, end)` of `total` items split evenly over the benchmark's threads.
pub(crate) fn thread_share(total: u64, index: usize, threads: usize) -> (u64, u64) {
    let (index, threads) = (index as u64, threads as u64);
    (total * index / threads, total * (index + 1) / threads)
}

/// YCSB's load phase: records `0..ycsb_records` in key-number order (hashed key names).
pub(crate) fn ycsb_load(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let record_size = ctx.flags.ycsb_record_size();
    let mut values = ValueGenerator::new(ctx.flags.compression_ratio);
    let (start, end) = thread_share(ctx.flags.ycsb_records, thread.index, ctx.threads);
    let mut bytes = 0u64;
    for keynum in start..end {
        let key = ycsb::key_name(keynum);
        ctx.engine.put(key.as_bytes(), values.generate(record_size), ctx.workload.sync)?;
        ctx.tracking.ycsb.set(keynum, key.len() + record_size);
        bytes += (key.len() + record_size) as u64;
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes);
    thread.stats.add_user_bytes_written(bytes);
    Ok(())
}

/// One YCSB transaction phase: this thread's share of `--ycsb_ops` operations drawn from the
/// workload's mix. Updates and the write half of read-modify-write replace the whole record,
/// since all fields are stored as one value.
pub(crate) fn ycsb_run(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let workload = ctx.ycsb_workload.ok_or("YCSB workload missing")?;
    let flags = ctx.flags;
    let inserts = &ctx.tracking.ycsb_inserts;
    let record_size = flags.ycsb_record_size();
    let mut values = ValueGenerator::new(flags.compression_ratio);
    let mut chooser = KeyChooser::new(&workload, flags.ycsb_records, flags.ycsb_ops, inserts.last_value());
    let rng = &mut thread.ycsb_rand;
    let (start, end) = thread_share(flags.ycsb_ops, thread.index, ctx.threads);
    let (mut reads, mut found, mut scanned) = (0u64, 0u64, 0u64);
    let (mut bytes, mut written) = (0u64, 0u64);
    for _ in start..end {
        let op = workload.choose(rng);
        let keynum = match op {
            Operation::Insert => inserts.claim(),
            _ => chooser.next(rng, inserts),
        };
        let key = ycsb::key_name(keynum);
        if matches!(op, Operation::Read | Operation::ReadModifyWrite) {
            reads += 1;
            if let Some(len) = ctx.engine.get(key.as_bytes())? {
                found += 1;
                bytes += (key.len() + len) as u64;
            }
        }
        if matches!(op, Operation::Update | Operation::Insert | Operation::ReadModifyWrite) {
            ctx.engine.put(key.as_bytes(), values.generate(record_size), ctx.workload.sync)?;
            ctx.tracking.ycsb.set(keynum, key.len() + record_size);
            written += (key.len() + record_size) as u64;
            if op == Operation::Insert {
                inserts.acknowledge(keynum);
            }
        }
        if op == Operation::Scan {
            let length = ycsb::scan_length(rng) as usize;
            ctx.engine.scan_from(key.as_bytes(), length, &mut |k, v| {
                scanned += 1;
                bytes += (k.len() + v.len()) as u64;
            })?;
        }
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes + written);
    thread.stats.add_user_bytes_written(written);
    if reads > 0 {
        thread.stats.add_message(&format!("({found} of {reads} reads found)"));
    }
    if scanned > 0 {
        thread.stats.add_message(&format!("({scanned} records scanned)"));
    }
    Ok(())
}
