//! `splitkv-bench`: LevelDB's `db_bench`, same benchmark names, flags, keys, values and output
//! lines, driving splitkv or (with the `leveldb` feature) LevelDB through one harness.
//!
//! The runner mirrors db_bench's `Benchmark::Run`: print the header, destroy the database unless
//! `--use_existing_db`, open it, then run each listed benchmark in order. Fill benchmarks
//! (`fillseq`, `fillrandom`, `fillsync`, `fill100K`, `fillbatch`) start from a fresh database;
//! everything else (`overwrite`, reads, deletes, `compact`) uses what is there. Each benchmark runs
//! on `--threads` threads that each do the full operation count with their own random stream,
//! started together behind a barrier; their measurements are merged into one report line.
#![deny(unsafe_code)]

mod engines;
mod flags;
mod keys;
mod report;
mod stats_dump;
mod values;

use std::process::ExitCode;
use std::sync::Barrier;

use engines::{BenchResult, Direction, Engine, WriteOp};
use flags::{FlagError, Flags};
use keys::{KeyBuffer, LevelDbRandom};
use report::OpStats;
use values::ValueGenerator;

/// Operation counts and sizes for one benchmark (db_bench resets these before each one).
#[derive(Clone, Copy, Debug)]
struct Workload {
    num: u64,
    reads: u64,
    value_size: usize,
    entries_per_batch: usize,
    sync: bool,
}

/// What every thread of a benchmark shares, read-only.
struct Context<'a> {
    engine: &'a dyn Engine,
    flags: &'a Flags,
    workload: Workload,
}

/// One thread's private state.
struct ThreadState {
    rand: LevelDbRandom,
    stats: OpStats,
}

type Method = fn(&Context<'_>, &mut ThreadState) -> BenchResult<()>;

/// How a benchmark name maps to work.
struct Plan {
    method: Option<Method>,
    fresh_db: bool,
}

/// Chooses the method for `name` and adjusts the workload as db_bench does; `None` for an
/// unknown name.
fn plan(name: &str, workload: &mut Workload) -> Option<Plan> {
    let run = |method: Method| Some(Plan { method: Some(method), fresh_db: false });
    let fill = |method: Method| Some(Plan { method: Some(method), fresh_db: true });
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
        "readseq" => run(read_sequential),
        "readreverse" => run(read_reverse),
        "readrandom" => run(read_random),
        "readmissing" => run(read_missing),
        "seekrandom" => run(seek_random),
        "readhot" => run(read_hot),
        "readrandomsmall" => {
            workload.reads /= 1000;
            run(read_random)
        }
        "deleteseq" => run(delete_seq),
        "deleterandom" => run(delete_random),
        "compact" => run(compact),
        "stats" => Some(Plan { method: None, fresh_db: false }),
        _ => None,
    }
}

fn write_seq(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_write(ctx, thread, true)
}

fn write_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_write(ctx, thread, false)
}

fn do_write(ctx: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> BenchResult<()> {
    let w = ctx.workload;
    if w.num != u64::from(ctx.flags.num) {
        thread.stats.add_message(&format!("({} ops)", w.num));
    }
    let mut values = ValueGenerator::new(ctx.flags.compression_ratio);
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    let mut bytes = 0u64;
    let batch_len = w.entries_per_batch as u64;
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(w.entries_per_batch);
    let mut i = 0u64;
    while i < w.num {
        let mut next_key = |j: u64| if sequential { i + j } else { u64::from(thread.rand.uniform(ctx.flags.num)) };
        if batch_len == 1 {
            let k = next_key(0);
            ctx.engine.put(key.set(k), values.generate(w.value_size), w.sync)?;
            bytes += (w.value_size + key.len()) as u64;
            thread.stats.finished_single_op();
        } else {
            batch.clear();
            for j in 0..batch_len {
                let k = next_key(j);
                batch.push((key.set(k).to_vec(), values.generate(w.value_size).to_vec()));
                bytes += (w.value_size + key.len()) as u64;
                thread.stats.finished_single_op();
            }
            let ops: Vec<WriteOp<'_>> = batch.iter().map(|(key, value)| WriteOp::Put { key, value }).collect();
            ctx.engine.write_batch(&ops, w.sync)?;
        }
        i += batch_len;
    }
    thread.stats.add_bytes(bytes);
    Ok(())
}

fn read_sequential(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    scan(ctx, thread, Direction::Forward)
}

fn read_reverse(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    scan(ctx, thread, Direction::Reverse)
}

fn scan(ctx: &Context<'_>, thread: &mut ThreadState, direction: Direction) -> BenchResult<()> {
    let (mut entries, mut bytes) = (0u64, 0u64);
    let limit = ctx.workload.reads;
    ctx.engine.scan(direction, &mut |key, value| {
        if entries >= limit {
            return false;
        }
        bytes += (key.len() + value.len()) as u64;
        thread.stats.finished_single_op();
        entries += 1;
        true
    })?;
    thread.stats.add_bytes(bytes);
    Ok(())
}

fn read_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    let mut found = 0u64;
    for _ in 0..ctx.workload.reads {
        let k = thread.rand.uniform(ctx.flags.num);
        if ctx.engine.get(key.set(u64::from(k)))?.is_some() {
            found += 1;
        }
        thread.stats.finished_single_op();
    }
    thread.stats.add_message(&format!("({found} of {} found)", ctx.workload.num));
    Ok(())
}

fn read_missing(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    for _ in 0..ctx.workload.reads {
        let k = thread.rand.uniform(ctx.flags.num);
        // Dropping the last digit makes a key that sorts among real keys but never exists.
        let full = key.set(u64::from(k));
        ctx.engine.get(&full[..full.len() - 1])?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

fn read_hot(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    // The hottest 1% of the key space.
    let range = ctx.flags.num.div_ceil(100);
    for _ in 0..ctx.workload.reads {
        let k = thread.rand.uniform(range);
        ctx.engine.get(key.set(u64::from(k)))?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

fn seek_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    let mut found = 0u64;
    for _ in 0..ctx.workload.reads {
        let k = thread.rand.uniform(ctx.flags.num);
        if ctx.engine.seek_lands_on(key.set(u64::from(k)))? {
            found += 1;
        }
        thread.stats.finished_single_op();
    }
    thread.stats.add_message(&format!("({found} of {} found)", ctx.workload.num));
    Ok(())
}

fn delete_seq(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_delete(ctx, thread, true)
}

fn delete_random(ctx: &Context<'_>, thread: &mut ThreadState) -> BenchResult<()> {
    do_delete(ctx, thread, false)
}

fn do_delete(ctx: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> BenchResult<()> {
    let w = ctx.workload;
    let mut key = KeyBuffer::new(ctx.flags.key_prefix);
    let batch_len = w.entries_per_batch as u64;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(w.entries_per_batch);
    let mut i = 0u64;
    while i < w.num {
        let mut next_key = |j: u64| if sequential { i + j } else { u64::from(thread.rand.uniform(ctx.flags.num)) };
        if batch_len == 1 {
            let k = next_key(0);
            ctx.engine.delete(key.set(k), w.sync)?;
            thread.stats.finished_single_op();
        } else {
            batch.clear();
            for j in 0..batch_len {
                let k = next_key(j);
                batch.push(key.set(k).to_vec());
                thread.stats.finished_single_op();
            }
            let ops: Vec<WriteOp<'_>> = batch.iter().map(|key| WriteOp::Delete { key }).collect();
            ctx.engine.write_batch(&ops, w.sync)?;
        }
        i += batch_len;
    }
    Ok(())
}

fn compact(ctx: &Context<'_>, _thread: &mut ThreadState) -> BenchResult<()> {
    ctx.engine.compact()
}

/// db_bench's `Benchmark`: the open engine and the count of threads started so far, which seeds
/// each new thread's random stream.
struct Runner<'f> {
    flags: &'f Flags,
    engine: Option<Box<dyn Engine>>,
    total_thread_count: u32,
}

impl Runner<'_> {
    fn run(&mut self) -> BenchResult<()> {
        engines::ensure_built_in(self.flags)?;
        eprint!("{}", report::format_environment(&engines::version_line(self.flags)));
        let key_size = keys::KEY_DIGITS + self.flags.key_prefix;
        print!(
            "{}",
            report::format_header(key_size, self.flags.value_size, self.flags.compression_ratio, self.flags.num)
        );
        if !self.flags.use_existing_db {
            engines::destroy(self.flags)?;
        }
        self.engine = Some(engines::open(self.flags)?);

        for name in &self.flags.benchmarks {
            let mut workload = Workload {
                num: u64::from(self.flags.num),
                reads: self.flags.reads_per_thread(),
                value_size: self.flags.value_size,
                entries_per_batch: 1,
                sync: self.flags.sync,
            };
            let Some(Plan { mut method, fresh_db }) = plan(name, &mut workload) else {
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
            if name == "stats" {
                println!("\n{}", self.engine_stats());
            }
            if let Some(method) = method {
                let line = self.run_benchmark(name, method, workload)?;
                println!("{line}");
                if self.flags.histogram || self.flags.stats {
                    println!("{}", self.engine_stats());
                }
            }
        }
        match self.engine.take() {
            Some(engine) => engine.close(),
            None => Ok(()),
        }
    }

    fn reopen_fresh(&mut self) -> BenchResult<()> {
        if let Some(engine) = self.engine.take() {
            engine.close()?;
        }
        engines::destroy(self.flags)?;
        self.engine = Some(engines::open(self.flags)?);
        Ok(())
    }

    fn engine_stats(&self) -> String {
        self.engine.as_ref().and_then(|e| e.stats_text()).unwrap_or_else(|| "(failed)".to_owned())
    }

    /// Runs `method` on every thread at once and returns the merged report.
    fn run_benchmark(&mut self, name: &str, method: Method, workload: Workload) -> BenchResult<String> {
        let engine = self.engine.as_deref().ok_or("database is not open")?;
        let threads = self.flags.threads;
        let seeds: Vec<u32> = (0..threads)
            .map(|_| {
                self.total_thread_count += 1;
                self.flags.seed.wrapping_add(self.total_thread_count)
            })
            .collect();
        let ctx = Context { engine, flags: self.flags, workload };
        let start_together = Barrier::new(threads);
        let results: Vec<BenchResult<OpStats>> = std::thread::scope(|scope| {
            let handles: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(tid, &seed)| {
                    let (ctx, start_together) = (&ctx, &start_together);
                    scope.spawn(move || {
                        start_together.wait();
                        let mut thread =
                            ThreadState { rand: LevelDbRandom::new(seed), stats: OpStats::start(ctx.flags.histogram, tid == 0) };
                        let outcome = method(ctx, &mut thread);
                        thread.stats.stop();
                        outcome.map(|()| thread.stats)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|_| Err("benchmark thread panicked".into())))
                .collect()
        });
        let mut merged: Option<OpStats> = None;
        for result in results {
            let stats = result?;
            match &mut merged {
                Some(total) => total.merge(&stats),
                None => merged = Some(stats),
            }
        }
        let merged = merged.ok_or("no benchmark threads ran")?;
        Ok(merged.report(name))
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
    let mut runner = Runner { flags: &flags, engine: None, total_thread_count: 0 };
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

    fn workload() -> Workload {
        Workload { num: 1_000_000, reads: 1_000_000, value_size: 100, entries_per_batch: 1, sync: false }
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
            "seekrandom",
            "deleterandom",
            "deleteseq",
            "compact",
            "stats",
        ] {
            assert!(plan(name, &mut workload()).is_some_and(|p| !p.fresh_db), "{name}");
        }
        assert!(plan("nosuchbench", &mut workload()).is_none());
        assert!(plan("stats", &mut workload()).is_some_and(|p| p.method.is_none()));
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
