//! What dropping a keyspace costs, against deleting the same keys one by one.
//!
//! Loads `--keyspaces` keyspaces of `--num` keys each (16-byte keys, `--value_size`-byte
//! incompressible values, written in random order in batches of 100) into a default database at
//! `--db`, flushes and compacts, then:
//! 1. times 100k random `get`s in the last keyspace (the one left alone) as the baseline;
//! 2. drops keyspace 0 with `drop_keyspace` and times it, with the tables and SSTable bytes gone;
//! 3. deletes every key of keyspace 1 with point deletes (batches of 100) and times that, which
//!    frees nothing until compaction rewrites the tables;
//! 4. times the gets in the untouched keyspace again, then `run_gc`, and reports the value-log
//!    and SSTable bytes after.
//!
//! Prints one `name: value` line per figure, for `docs/results/partitions.md`.

use std::time::Instant;

use splitkv::{Db, Options, WriteBatch, WriteOptions};

struct Args {
    db: String,
    num: u64,
    keyspaces: u64,
    value_size: usize,
    reads: u64,
}

fn parse_args() -> Args {
    let mut args =
        Args { db: "/tmp/splitkv-keyspace-drop".into(), num: 250_000, keyspaces: 4, value_size: 1024, reads: 100_000 };
    for arg in std::env::args().skip(1) {
        let (name, value) = arg.split_once('=').unwrap_or((&arg, ""));
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{name} wants a number, not {value:?}"));
        match name {
            "--db" => args.db = value.to_string(),
            "--num" => args.num = number(),
            "--keyspaces" => args.keyspaces = number().max(3),
            "--value_size" => args.value_size = number() as usize,
            "--reads" => args.reads = number(),
            _ => panic!("unknown flag {arg} (flags: --db --num --keyspaces --value_size --reads)"),
        }
    }
    args
}

/// xorshift64: deterministic keys and values without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
}

fn sst_bytes(db: &Db) -> u64 {
    db.stats().levels.iter().map(|l| l.bytes).sum()
}

fn tables(db: &Db) -> usize {
    db.stats().levels.iter().map(|l| l.files).sum()
}

fn timed_gets(db: &Db, name: &str, args: &Args, rng: &mut Rng) -> splitkv::Result<f64> {
    let ks = db.keyspace(name)?;
    let start = Instant::now();
    let mut found = 0u64;
    for _ in 0..args.reads {
        found += u64::from(ks.get(key(rng.next() % args.num))?.is_some());
    }
    assert_eq!(found, args.reads, "every key of the untouched keyspace is present");
    Ok(start.elapsed().as_secs_f64() * 1e6 / args.reads as f64)
}

fn main() -> splitkv::Result<()> {
    let args = parse_args();
    let _ = std::fs::remove_dir_all(&args.db);
    let db = Db::open(&args.db, Options::default())?;
    let names: Vec<String> = (0..args.keyspaces).map(|i| format!("ks{i}")).collect();
    let handles = names.iter().map(|n| db.keyspace(n)).collect::<splitkv::Result<Vec<_>>>()?;
    let mut rng = Rng(0x5eed_1234_abcd_9876);
    let mut value = vec![0u8; args.value_size];
    let load_start = Instant::now();
    for ks in &handles {
        let mut order: Vec<u64> = (0..args.num).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        for chunk in order.chunks(100) {
            let mut batch = WriteBatch::new();
            for &i in chunk {
                value.iter_mut().for_each(|b| *b = rng.next() as u8);
                batch.put_in(ks, key(i), &value);
            }
            db.write(&WriteOptions::default(), batch)?;
        }
    }
    println!("load_seconds: {:.2}", load_start.elapsed().as_secs_f64());
    db.compact_range(None, None)?;
    println!("keys_per_keyspace: {}", args.num);
    println!("keyspaces: {}", args.keyspaces);
    println!("value_size: {}", args.value_size);
    println!("tables_before: {}", tables(&db));
    println!("sst_bytes_before: {}", sst_bytes(&db));
    println!("vlog_bytes_before: {}", db.stats().vlog_bytes());
    let last = names.last().expect("keyspaces").clone();
    println!("get_us_before: {:.3}", timed_gets(&db, &last, &args, &mut rng)?);

    let (ks0, ks1) = (handles[0].clone(), handles[1].clone());
    drop(handles);
    drop(ks0);
    let start = Instant::now();
    db.drop_keyspace(&names[0])?;
    println!("drop_keyspace_ms: {:.3}", start.elapsed().as_secs_f64() * 1e3);
    println!("tables_after_drop: {}", tables(&db));
    println!("sst_bytes_after_drop: {}", sst_bytes(&db));
    println!("tables_dropped_by_range_deletes: {}", db.stats().tables_dropped_by_range_deletes);

    let start = Instant::now();
    for chunk in (0..args.num).collect::<Vec<_>>().chunks(100) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.delete_in(&ks1, key(i));
        }
        db.write(&WriteOptions::default(), batch)?;
    }
    db.flush()?;
    println!("point_deletes_ms: {:.3}", start.elapsed().as_secs_f64() * 1e3);
    println!("sst_bytes_after_point_deletes: {}", sst_bytes(&db));

    println!("get_us_after: {:.3}", timed_gets(&db, &last, &args, &mut rng)?);
    let start = Instant::now();
    db.run_gc()?;
    println!("run_gc_seconds: {:.2}", start.elapsed().as_secs_f64());
    println!("sst_bytes_after_gc: {}", sst_bytes(&db));
    println!("vlog_bytes_after_gc: {}", db.stats().vlog_bytes());
    drop(ks1);
    db.close()?;
    let _ = std::fs::remove_dir_all(&args.db);
    Ok(())
}
