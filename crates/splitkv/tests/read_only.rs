//! `Db::open_read_only` in one process: what it sees (the catalog and the log tail as of the
//! open), that it writes nothing and refuses every write, that a writer holding the database
//! goes on undisturbed, and what it reads once the writer has moved or freed its files. The
//! same beside a writer in another process is `read_only_process.rs`.

mod common;

use std::path::Path;

use common::{assert_same, dump, file_contents, key, small_options, value_for, HASH};
use splitkv::fs::{FileSystem, MemFileSystem};
use splitkv::{Db, Error, IndexKind, Options, ReadOptions, Result, WriteBatch, WriteOptions};

fn dir() -> &'static Path {
    Path::new("/db")
}

fn mem_options(mem: &MemFileSystem, kind: IndexKind) -> Options {
    Options { fs: mem.shared(), background_gc: false, ..small_options(kind, 64) }
}

/// Writes keys `0..n` (values `value_for(i + round, 200)`), enough to flush and compact, and
/// makes them durable: a reader sees what reached the file system, not the writer's buffer.
fn fill(db: &Db, n: u64, round: u64) -> Result<()> {
    for i in 0..n {
        db.put(key(i), value_for(i + round, 200))?;
    }
    db.write(&WriteOptions { sync: true }, WriteBatch::new())
}

#[test]
fn a_closed_database_reads_whole_and_stays_byte_for_byte_unchanged() -> Result<()> {
    for kind in [IndexKind::Lsm, HASH] {
        let mem = MemFileSystem::new();
        let options = mem_options(&mem, kind);
        let db = Db::open(dir(), options.clone())?;
        fill(&db, 600, 0)?;
        db.flush()?;
        // A tail past the last flush, which only the log holds.
        fill(&db, 50, 1)?;
        db.delete(key(7))?;
        let expected = dump(&db);
        let sequence = db.property("splitkv.last-sequence");
        db.close()?;
        let before = file_contents(&mem, dir())?;

        let reader = Db::open_read_only(dir(), options.clone())?;
        assert!(reader.is_read_only());
        assert_same(&dump(&reader), &expected, &format!("{kind:?}"));
        assert_eq!(reader.property("splitkv.last-sequence"), sequence, "{kind:?}");
        assert!(reader.get(key(7))?.is_none());
        assert_eq!(reader.multi_get(&ReadOptions::default(), &[key(3)])?[0].as_deref(), Some(&value_for(4, 200)[..]));
        let mut batch = WriteBatch::new();
        batch.put("k", "v");
        let refused: Vec<(&str, Result<()>)> = vec![
            ("put", reader.put("k", "v")),
            ("delete", reader.delete(key(1))),
            ("write", reader.write(&WriteOptions { sync: true }, batch)),
            ("delete_range", reader.delete_range(key(0), key(9))),
            ("flush", reader.flush()),
            ("compact_range", reader.compact_range(None, None)),
            ("run_gc", reader.run_gc().map(drop)),
            ("gc_step", reader.gc_step().map(drop)),
            ("checkpoint", reader.checkpoint("/copy").map(drop)),
        ];
        for (what, result) in refused {
            assert!(matches!(result, Err(Error::ReadOnly)), "{kind:?} {what}: {result:?}");
        }
        assert!(!mem.exists(Path::new("/copy")));
        reader.close()?;
        assert_eq!(file_contents(&mem, dir())?, before, "{kind:?}: a read-only open changed the directory");
        // The writer opens as if nothing happened.
        assert_same(&dump(&Db::open(dir(), options)?), &expected, "the writer after the reader");
    }
    Ok(())
}

#[test]
fn a_path_without_a_database_is_an_error_and_stays_empty() -> Result<()> {
    let mem = MemFileSystem::new();
    let err = Db::open_read_only(dir(), mem_options(&mem, IndexKind::Lsm)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(!mem.exists(dir()));
    Ok(())
}

#[test]
fn beside_a_live_writer_it_sees_the_state_at_its_open_and_the_writer_goes_on() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = mem_options(&mem, IndexKind::Lsm);
    let writer = Db::open(dir(), options.clone())?;
    fill(&writer, 600, 0)?;
    writer.flush()?;
    fill(&writer, 40, 1)?;
    let at_open = dump(&writer);

    let reader = Db::open_read_only(dir(), options)?;
    // The writer rewrites everything, compacts and collects the log: tables and segments the
    // reader's view uses are deleted under it.
    fill(&writer, 600, 2)?;
    writer.compact_range(None, None)?;
    let outcome = writer.run_gc()?;
    assert!(!outcome.segments_released.is_empty(), "GC released no segment: {outcome:?}");
    assert_same(&dump(&reader), &at_open, "the reader's view");
    for i in [0, 17, 599] {
        assert_eq!(reader.get(key(i))?.as_deref(), Some(&value_for(i + u64::from(i < 40), 200)[..]));
    }
    assert_eq!(writer.get(key(5))?.as_deref(), Some(&value_for(7, 200)[..]));
    drop(reader);
    writer.put("after", "reader")?;
    Ok(())
}

#[test]
fn a_batch_the_writer_is_still_appending_ends_the_view_and_is_not_cut() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = mem_options(&mem, IndexKind::Lsm);
    let writer = Db::open(dir(), options.clone())?;
    fill(&writer, 30, 0)?;
    let expected = dump(&writer);
    let segment = mem.file_names(dir()).into_iter().filter(|n| n.ends_with(".vlog")).max().expect("a segment");
    let path = dir().join(segment);
    let before = mem.file_size(&path)?;
    let mut batch = WriteBatch::new();
    batch.put("half", value_for(1, 300));
    batch.put("written", value_for(2, 300));
    writer.write(&WriteOptions { sync: true }, batch)?;
    drop(writer);
    // Cut the last batch in the middle: what a reader meets while a writer appends it.
    let record = {
        let file = mem.open(&path)?;
        let mut buf = vec![0u8; (mem.file_size(&path)? - before) as usize];
        file.read_exact_at(before, &mut buf)?;
        buf
    };
    mem.truncate(&path, before)?;
    let mut append = mem.open_append(&path)?;
    append.append(&record[..record.len() / 2])?;
    append.sync()?;
    drop(append);
    let torn_len = mem.file_size(&path)?;

    let reader = Db::open_read_only(dir(), options)?;
    assert_same(&dump(&reader), &expected, "the view up to the torn batch");
    assert!(reader.get("half")?.is_none());
    assert_eq!(mem.file_size(&path)?, torn_len, "the reader cut the writer's tail");
    Ok(())
}

#[test]
fn a_hash_database_is_read_only_while_no_writer_holds_it() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = mem_options(&mem, HASH);
    let writer = Db::open(dir(), options.clone())?;
    fill(&writer, 300, 0)?;
    let err = Db::open_read_only(dir(), options.clone()).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("hash")), "{err:?}");
    writer.put("still", "writable")?;
    let expected = dump(&writer);
    writer.close()?;

    let reader = Db::open_read_only(dir(), options.clone())?;
    // The lock was only held while opening.
    let writer = Db::open(dir(), options)?;
    writer.put("more", "writes")?;
    assert_same(&dump(&reader), &expected, "the hash reader");
    Ok(())
}

#[test]
fn a_record_the_writer_punches_out_later_reads_as_an_error_never_as_other_data() -> Result<()> {
    let mem = MemFileSystem::new();
    let options = Options { gc_punch_holes: true, value_threshold: 0, ..mem_options(&mem, IndexKind::Lsm) };
    let writer = Db::open(dir(), options.clone())?;
    let big = |i: u64, round: u64| value_for(i * 7 + round, 3000);
    for i in 0..200 {
        writer.put(key(i), big(i, 0))?;
    }
    writer.flush()?;
    let reader = Db::open_read_only(dir(), options)?;
    for i in 0..200 {
        writer.put(key(i), big(i, 1))?;
    }
    let outcome = writer.run_gc()?;
    assert!(outcome.bytes_punched > 0, "nothing punched: {outcome:?}");
    let mut errors = 0;
    for i in 0..200 {
        match reader.get(key(i)) {
            Ok(value) => assert_eq!(value.as_deref(), Some(&big(i, 0)[..]), "key {i}: another value"),
            Err(e) => {
                assert!(e.is_corruption(), "key {i}: {e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "no read met a punched record: the test no longer covers it");
    Ok(())
}

/// A file system that runs `hook` once, the first time the database directory is listed: the
/// moment between a reader's MANIFEST read and its opening of the segments.
struct ListHookFs {
    inner: MemFileSystem,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// Methods that pass straight through to `self.inner`.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret { self.inner.$name($($arg),*) })*
    };
}

impl FileSystem for ListHookFs {
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let hook = self.hook.lock().expect("hook").take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.list(dir)
    }
    forward! {
        create(path: &Path) -> Result<Box<dyn splitkv::fs::WritableFile>>;
        open_append(path: &Path) -> Result<Box<dyn splitkv::fs::WritableFile>>;
        open(path: &Path) -> Result<std::sync::Arc<dyn splitkv::fs::RandomAccessFile>>;
        exists(path: &Path) -> bool;
        file_size(path: &Path) -> Result<u64>;
        create_dir_all(dir: &Path) -> Result<()>;
        remove(path: &Path) -> Result<()>;
        remove_dir(dir: &Path) -> Result<()>;
        rename(from: &Path, to: &Path) -> Result<()>;
        truncate(path: &Path, len: u64) -> Result<()>;
        sync_dir(dir: &Path) -> Result<()>;
        lock(path: &Path) -> Result<Box<dyn splitkv::fs::FileLock>>;
        map(path: &Path, len: u64) -> Result<Box<dyn splitkv::fs::MappedFile>>;
    }
}

#[test]
fn files_the_writer_deletes_while_the_reader_opens_make_it_read_a_newer_view_not_a_broken_one() -> Result<()> {
    let mem = MemFileSystem::new();
    // No compaction: the tables of the reader's first MANIFEST read stay, so only the check of
    // the MANIFEST before and after can tell that the view is stale.
    let options = Options {
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        ..mem_options(&mem, IndexKind::Lsm)
    };
    let writer = std::sync::Arc::new(Db::open(dir(), options.clone())?);
    fill(&writer, 600, 0)?;
    writer.flush()?;
    // Between the reader's MANIFEST read and its segment listing, the writer deletes every key,
    // flushes the deletes into a table and collects their log records, which are garbage once
    // flushed. A reader that replayed what is left of the log over the tables it read first
    // would bring every key back.
    let busy = std::sync::Arc::clone(&writer);
    let hook = move || {
        for i in 0..600 {
            busy.delete(key(i)).expect("delete");
        }
        busy.flush().expect("flush");
        let outcome = busy.run_gc().expect("gc");
        assert!(!outcome.segments_released.is_empty(), "GC released nothing: {outcome:?}");
    };
    let fs = ListHookFs { inner: mem.clone(), hook: std::sync::Mutex::new(Some(Box::new(hook))) };
    let reader = Db::open_read_only(dir(), Options { fs: std::sync::Arc::new(fs), ..options })?;
    assert_same(&dump(&reader), &dump(&writer), "the reader's view after the writer's changes");
    assert!(dump(&reader).is_empty());
    Ok(())
}
