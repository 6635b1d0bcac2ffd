//! Whole-table tests: build with [`TableBuilder`], read back through [`Table`], damage bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem, RandomAccessFile};
use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::{internal_key, parse_internal_key, seek_key, FileNumber, SequenceNumber, ValueKind, MAX_SEQUENCE};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn opts(block_size: usize, compression: CompressionType) -> TableOptions {
    TableOptions { block_size, compression, ..TableOptions::default() }
}

fn user(i: usize) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// One version per key `0, 2, 4, ...` (odd keys are absent), compressible values.
fn even_keys(n: usize) -> Entries {
    (0..n)
        .map(|i| {
            let k = internal_key(&user(i * 2), SequenceNumber(i as u64 + 1), ValueKind::Inline);
            let v = format!("value-{i}-").repeat(1 + i % 7).into_bytes();
            (k, v)
        })
        .collect()
}

fn build(dir: &Path, name: &str, entries: &Entries, opts: TableOptions) -> Result<(PathBuf, u64)> {
    let fs = OsFileSystem;
    let path = dir.join(name);
    let mut b = TableBuilder::new(fs.create(&path)?, opts);
    for (k, v) in entries {
        b.add(k, v)?;
        assert!(b.estimated_size() > 0);
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let size = b.finish()?.size;
    assert_eq!(size, fs.file_size(&path)?);
    Ok((path, size))
}

/// [`build`] under the name the table cache opens for table `number` in `dir`; returns its size.
fn build_numbered(dir: &Path, number: FileNumber, entries: &Entries, opts: TableOptions) -> Result<u64> {
    let path = crate::filenames::table_file(dir, number);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    Ok(build(dir, &name, entries, opts)?.1)
}

fn open(path: &Path, number: u64, size: u64, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
    let file = OsFileSystem.open(path)?;
    Table::open(file, path.to_path_buf(), FileNumber(number), size, &TableOptions::default(), cache, None)
}

fn collect_forward(it: &mut TableIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn collect_backward(it: &mut TableIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

#[test]
fn round_trip_every_compression() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(3000);
    let mut sizes = Vec::new();
    for (n, c) in [CompressionType::None, CompressionType::Lz4, CompressionType::Zstd].into_iter().enumerate() {
        let (path, size) = build(dir.path(), &format!("{n}.sst"), &entries, opts(1024, c))?;
        sizes.push(size);
        let table = open(&path, n as u64, size, None)?;
        assert!(table.num_data_blocks() > 10, "{c:?}: {} blocks", table.num_data_blocks());
        assert_eq!(table.num_entries(), entries.len() as u64);
        table.verify()?;
        let mut it = table.iter(true);
        assert_eq!(collect_forward(&mut it)?, entries);
        assert_eq!(collect_backward(&mut it)?, entries);
        for (i, (k, v)) in entries.iter().enumerate() {
            let found = table.get(&seek_key(&user(i * 2), SequenceNumber(MAX_SEQUENCE)), true)?;
            let (fk, fv) = found.expect("present key");
            assert_eq!((&fk, fv.as_ref()), (k, v.as_slice()));
            assert!(table.get(&seek_key(&user(i * 2 + 1), SequenceNumber(MAX_SEQUENCE)), true)?.is_none());
        }
    }
    assert!(sizes[1] < sizes[0] && sizes[2] < sizes[0], "compression saved nothing: {sizes:?}");
    Ok(())
}

#[test]
fn seek_lands_on_first_key_at_or_after_target() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(500);
    let (path, size) = build(dir.path(), "t.sst", &entries, opts(256, CompressionType::None))?;
    let table = open(&path, 1, size, None)?;
    let mut it = table.iter(false);
    for t in 0..1001 {
        it.seek(&seek_key(&user(t), SequenceNumber(MAX_SEQUENCE)))?;
        match entries.get(t.div_ceil(2)) {
            Some((k, _)) => assert_eq!(it.key(), k.as_slice(), "seek {t}"),
            None => assert!(!it.valid()),
        }
    }
    // Seek followed by prev crosses back over block boundaries.
    for (i, (k, _)) in entries.iter().enumerate().skip(1) {
        it.seek(k)?;
        it.prev()?;
        assert_eq!(it.key(), entries[i - 1].0.as_slice());
    }
    it.seek(&entries[0].0)?;
    it.prev()?;
    assert!(!it.valid());
    Ok(())
}

#[test]
fn random_walk_matches_model() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(800);
    let (path, size) = build(dir.path(), "t.sst", &entries, opts(200, CompressionType::Lz4))?;
    let table = open(&path, 1, size, Some(Arc::new(BlockCache::new(1 << 20))))?;
    let seed = 0x5eed_u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut it = table.iter(true);
    let mut pos: Option<usize> = None;
    for step in 0..20_000 {
        match (rng.gen_range(0..10), pos) {
            (0, _) => {
                it.seek_to_first()?;
                pos = Some(0);
            }
            (1, _) => {
                it.seek_to_last()?;
                pos = Some(entries.len() - 1);
            }
            (2, _) => {
                let t = rng.gen_range(0..entries.len() * 2 + 2);
                it.seek(&seek_key(&user(t), SequenceNumber(MAX_SEQUENCE)))?;
                pos = Some(t.div_ceil(2)).filter(|&p| p < entries.len());
            }
            (3..=6, Some(p)) => {
                it.next()?;
                pos = Some(p + 1).filter(|&p| p < entries.len());
            }
            (_, Some(p)) => {
                it.prev()?;
                pos = p.checked_sub(1);
            }
            (_, None) => {
                it.seek_to_first()?;
                pos = Some(0);
            }
        }
        match pos {
            Some(p) => assert_eq!(it.key(), entries[p].0.as_slice(), "seed {seed} step {step}"),
            None => assert!(!it.valid(), "seed {seed} step {step}"),
        }
    }
    Ok(())
}

#[test]
fn get_returns_newest_visible_version_across_blocks() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // Ten user keys with versions 100, 90, ..., 10; odd versions are deletions. Tiny blocks make
    // the versions of one key span several blocks.
    let mut entries = Entries::new();
    for k in 0..10 {
        for v in (1..=10u64).rev() {
            let (kind, value) = if v % 2 == 1 {
                (ValueKind::Deletion, Vec::new())
            } else {
                (ValueKind::Inline, format!("k{k}v{v}").into_bytes())
            };
            entries.push((internal_key(&user(k * 2), SequenceNumber(v * 10), kind), value));
        }
    }
    let (path, size) = build(dir.path(), "t.sst", &entries, opts(64, CompressionType::None))?;
    let table = open(&path, 1, size, None)?;
    assert!(table.num_data_blocks() > 20);
    table.verify()?;
    for k in 0..10 {
        for snapshot in 0..=110u64 {
            let got = table.get(&seek_key(&user(k * 2), SequenceNumber(snapshot)), true)?;
            let visible = (snapshot / 10).min(10);
            match got {
                None => assert_eq!(visible, 0, "key {k} at {snapshot}"),
                Some((ikey, value)) => {
                    let p = parse_internal_key(&ikey).expect("well-formed key");
                    assert_eq!(p.user_key, user(k * 2).as_slice());
                    assert_eq!(p.sequence, SequenceNumber(visible * 10), "key {k} at {snapshot}");
                    if visible % 2 == 1 {
                        assert_eq!((p.kind, value.len()), (ValueKind::Deletion, 0));
                    } else {
                        assert_eq!(value.as_ref(), format!("k{k}v{visible}").as_bytes());
                    }
                }
            }
        }
        assert!(table.get(&seek_key(&user(k * 2 + 1), SequenceNumber(MAX_SEQUENCE)), true)?.is_none());
    }
    Ok(())
}

#[test]
fn filter_rules_out_absent_keys() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(2000);
    let (path, size) = build(dir.path(), "f.sst", &entries, opts(4096, CompressionType::None))?;
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open(&path, 1, size, Some(Arc::clone(&cache)))?;
    assert!(table.filter_size() > 2000 * 10 / 8);
    let excluded = (0..2000).filter(|i| table.filter_excludes(&user(i * 2 + 1))).count();
    assert!(excluded > 1900, "filter excluded only {excluded} of 2000 absent keys");
    assert!((0..2000).all(|i| !table.filter_excludes(&user(i * 2))));
    // Excluded keys never touch a data block.
    let before = cache.hits() + cache.misses();
    for i in (0..2000).filter(|i| table.filter_excludes(&user(i * 2 + 1))) {
        assert!(table.get(&seek_key(&user(i * 2 + 1), SequenceNumber(MAX_SEQUENCE)), true)?.is_none());
    }
    assert_eq!(cache.hits() + cache.misses(), before);

    // Without a filter, lookups are still correct.
    let no_filter = TableOptions { bloom_bits_per_key: 0, ..opts(4096, CompressionType::None) };
    let (path, size) = build(dir.path(), "nf.sst", &entries, no_filter)?;
    let table = open(&path, 2, size, None)?;
    assert_eq!(table.filter_size(), 0);
    table.verify()?;
    assert!(table.get(&seek_key(&user(7), SequenceNumber(MAX_SEQUENCE)), true)?.is_none());
    assert!(table.get(&seek_key(&user(8), SequenceNumber(MAX_SEQUENCE)), true)?.is_some());
    Ok(())
}

#[test]
fn empty_table() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (path, size) = build(dir.path(), "e.sst", &Entries::new(), TableOptions::default())?;
    let table = open(&path, 1, size, None)?;
    table.verify()?;
    assert_eq!(table.num_data_blocks(), 0);
    assert!(table.get(&seek_key(b"a", SequenceNumber(1)), true)?.is_none());
    let mut it = table.iter(true);
    it.seek_to_first()?;
    assert!(!it.valid());
    it.seek_to_last()?;
    assert!(!it.valid());
    it.seek(b"a")?;
    assert!(!it.valid());
    Ok(())
}

#[test]
fn block_cache_counts_hits_and_respects_fill_cache() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(1000);
    let (path, size) = build(dir.path(), "c.sst", &entries, opts(1024, CompressionType::Lz4))?;
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open(&path, 7, size, Some(Arc::clone(&cache)))?;
    let key = seek_key(&user(10), SequenceNumber(MAX_SEQUENCE));
    // The first read, in place, finds the table's blocks compressed: from then on they go
    // through the cache (a mapped table's raw blocks never do).
    table.get(&key, false)?;
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (0, 0, 0));
    table.get(&key, false)?;
    table.get(&key, false)?;
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (0, 2, 0));
    table.get(&key, true)?;
    table.get(&key, true)?;
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (1, 3, 1));
    // A scan that does not fill the cache leaves it alone; one that does caches every block.
    collect_forward(&mut table.iter(false))?;
    assert_eq!(cache.len(), 1);
    collect_forward(&mut table.iter(true))?;
    assert_eq!(cache.len(), table.num_data_blocks());
    let hits = cache.hits();
    collect_forward(&mut table.iter(true))?;
    assert_eq!(cache.hits(), hits + table.num_data_blocks() as u64);
    assert!(cache.usage() > 0 && cache.usage() <= cache.capacity());
    Ok(())
}

/// A table file that counts copying reads and remembers where each shared read points.
struct CountingFile {
    inner: Arc<dyn RandomAccessFile>,
    copies: std::sync::atomic::AtomicUsize,
    shared: parking_lot::Mutex<Vec<std::ops::Range<usize>>>,
}

impl CountingFile {
    fn copies(&self) -> usize {
        self.copies.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn shared_reads(&self) -> usize {
        self.shared.lock().len()
    }

    /// True if `bytes` lie inside bytes a shared read returned.
    fn is_shared(&self, bytes: &[u8]) -> bool {
        self.shared.lock().iter().any(|r| r.contains(&(bytes.as_ptr() as usize)))
    }
}

impl RandomAccessFile for CountingFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }

    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.copies.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_vec(offset, len)
    }

    fn read_shared(&self, offset: u64, len: usize) -> Result<bytes::Bytes> {
        let bytes = self.inner.read_shared(offset, len)?;
        let start = bytes.as_ptr() as usize;
        self.shared.lock().push(start..start + bytes.len());
        Ok(bytes)
    }

    fn reads_in_place(&self) -> bool {
        self.inner.reads_in_place()
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

#[test]
fn a_mapped_table_of_raw_blocks_is_read_in_place_and_never_cached() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(20_000);
    let (path, size) = build(dir.path(), "l.sst", &entries, opts(1024, CompressionType::None))?;
    let cache = Arc::new(BlockCache::new(64 << 20));
    let file =
        Arc::new(CountingFile { inner: OsFileSystem.open(&path)?, copies: 0.into(), shared: Default::default() });
    let table = Table::open(
        file.clone(),
        path.clone(),
        FileNumber(9),
        size,
        &TableOptions::default(),
        Some(Arc::clone(&cache)),
        None,
    )?;
    assert!(file.reads_in_place(), "the table file should be mapped");
    let blocks = table.num_data_blocks();
    // Passes in either direction read every block in place, and every entry is still right.
    let copies_at_open = file.copies();
    assert!(collect_forward(&mut table.iter(true))? == entries, "a forward pass read wrong entries");
    assert_eq!((file.copies() - copies_at_open, file.shared_reads()), (0, blocks));
    assert!(collect_backward(&mut table.iter(true))? == entries, "a backward pass read wrong entries");
    assert_eq!((file.copies() - copies_at_open, file.shared_reads()), (0, 2 * blocks));
    // So do point reads, and a value read in place is the caller's own copy.
    for i in (0..entries.len()).step_by(97) {
        let (_, value) =
            table.get(&seek_key(&user(2 * i), SequenceNumber(MAX_SEQUENCE)), true)?.expect("the key is in the table");
        assert_eq!(&value[..], entries[i].1.as_slice());
        assert!(!file.is_shared(&value), "a value read in place must not point into the map");
    }
    assert_eq!(file.copies() - copies_at_open, 0, "no block should have been copied");
    assert_eq!((cache.len(), cache.hits(), cache.misses()), (0, 0, 0), "the cache should not have been used");
    Ok(())
}

#[test]
fn table_cache_opens_once_and_evicts() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(100);
    let number = FileNumber(12);
    let size = build_numbered(dir.path(), number, &entries, TableOptions::default())?;
    let tc = TableCache::new(OsFileSystem::shared(), dir.path().to_path_buf(), 10, None, None, TableOptions::default());
    let a = tc.get_table(number, size)?;
    let b = tc.get_table(number, size)?;
    assert!(Arc::ptr_eq(&a, &b));
    tc.evict(number);
    let c = tc.get_table(number, size)?;
    assert!(!Arc::ptr_eq(&a, &c));
    assert!(tc.get_table(FileNumber(99), size).is_err());
    Ok(())
}

#[test]
fn evicting_a_deleted_table_drops_its_cached_blocks() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(2000);
    let number = FileNumber(13);
    // Compressed, so that its blocks go through the cache.
    let size = build_numbered(dir.path(), number, &entries, opts(1024, CompressionType::Lz4))?;
    let cache = Arc::new(BlockCache::new(1 << 20));
    let tc = TableCache::new(
        OsFileSystem::shared(),
        dir.path().to_path_buf(),
        10,
        Some(Arc::clone(&cache)),
        None,
        TableOptions::default(),
    );
    let table = tc.get_table(number, size)?;
    for i in 0..entries.len() {
        table.get(&seek_key(&user(2 * i), SequenceNumber(MAX_SEQUENCE)), true)?;
    }
    assert_eq!(cache.len(), table.num_data_blocks());
    tc.evict(number);
    assert_eq!((cache.len(), cache.usage()), (0, 0));
    Ok(())
}

#[test]
fn approximate_offsets_increase_through_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(2000);
    let (path, size) = build(dir.path(), "a.sst", &entries, opts(1024, CompressionType::None))?;
    let table = open(&path, 1, size, None)?;
    let first = table.approximate_offset_of(&entries[0].0);
    let middle = table.approximate_offset_of(&entries[1000].0);
    let past = table.approximate_offset_of(&seek_key(b"zzz", SequenceNumber(1)));
    assert_eq!(first, 0);
    assert!(middle > size / 4 && middle < size * 3 / 4, "middle {middle} of {size}");
    assert!(past > middle && past < size);
    Ok(())
}

#[test]
fn entry_origin_names_the_file_and_the_data_block_of_each_entry() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(500);
    let (path, size) = build(dir.path(), "o.sst", &entries, opts(256, CompressionType::Lz4))?;
    let table = open(&path, 1, size, None)?;
    let mut it = table.iter(false);
    let mut blocks = Vec::new();
    it.seek_to_first()?;
    for (i, (key, _)) in entries.iter().enumerate() {
        let EntryOrigin::Table { file, block_offset } = it.entry_origin() else {
            panic!("entry {i}: {:?}", it.entry_origin());
        };
        assert_eq!((&file, block_offset), (&path, table.approximate_offset_of(key)), "entry {i}");
        // A point lookup reads the same block.
        let lookup = seek_key(&user(i * 2), SequenceNumber(MAX_SEQUENCE));
        assert_eq!(table.entry_origin(&lookup), it.entry_origin(), "entry {i}");
        if blocks.last() != Some(&block_offset) {
            blocks.push(block_offset);
        }
        it.next()?;
    }
    assert!(!it.valid());
    assert_eq!(it.entry_origin(), EntryOrigin::Unpositioned);
    assert_eq!(blocks.len(), table.num_data_blocks());

    it.seek(&entries[300].0)?;
    match it.entry_origin().corruption("bad entry") {
        Error::Corruption { file, offset, reason } => {
            assert_eq!(
                (file, offset, reason.as_str()),
                (path, table.approximate_offset_of(&entries[300].0), "bad entry")
            );
            assert!(offset > 0);
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}

/// A file held in memory, so damaged copies need no disk round trip.
struct BufferFile(Vec<u8>);

impl RandomAccessFile for BufferFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start.checked_add(buf.len()).and_then(|end| self.0.get(start..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// Opens a damaged copy and exercises every read path; the first error, if any.
fn exercise(bytes: Vec<u8>, entries: &Entries) -> Result<()> {
    let size = bytes.len() as u64;
    let table = Table::open(
        Arc::new(BufferFile(bytes)),
        PathBuf::from("t.sst"),
        FileNumber(1),
        size,
        &TableOptions::default(),
        None,
        None,
    )?;
    let mut first_error = table.verify().err();
    let mut it = table.iter(false);
    let mut record = |r: Result<()>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };
    record(collect_forward(&mut it).map(drop));
    record(collect_backward(&mut it).map(drop));
    for (k, _) in entries.iter().step_by(7) {
        record(table.get(k, false).map(drop));
        record(it.seek(k));
    }
    first_error.map_or(Ok(()), Err)
}

fn assert_corruption(r: Result<()>, what: &str) -> Error {
    match r {
        Err(e) if e.is_corruption() => e,
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

#[test]
fn every_flipped_byte_is_detected_without_panicking() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(150);
    for c in [CompressionType::None, CompressionType::Lz4] {
        let (path, _) = build(dir.path(), "d.sst", &entries, opts(512, c))?;
        let good = OsFileSystem.read_all(&path)?;
        exercise(good.clone(), &entries)?;
        for pos in 0..good.len() {
            let mut bad = good.clone();
            bad[pos] ^= 0x40;
            assert_corruption(exercise(bad, &entries), &format!("{c:?}: flip at {pos}"));
        }
        // Truncation and a wrong recorded size are caught at open.
        assert_corruption(exercise(good[..good.len() - 1].to_vec(), &entries), "truncated");
        assert_corruption(exercise(Vec::new(), &entries), "empty file");
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 16]);
        assert_corruption(exercise(longer, &entries), "trailing bytes");
    }
    Ok(())
}

#[test]
fn corruption_names_the_file_and_block() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(500);
    let (path, size) = build(dir.path(), "x.sst", &entries, opts(1024, CompressionType::None))?;
    let good = OsFileSystem.read_all(&path)?;
    let flip = |pos: usize| -> Result<()> {
        let mut bad = good.clone();
        bad[pos] ^= 1;
        let mut f = OsFileSystem.create(&path)?;
        f.append(&bad)?;
        f.sync()
    };
    // A damaged first data block: open succeeds (data blocks are read lazily); get, iteration
    // and verify report the block.
    flip(10)?;
    let table = open(&path, 1, size, None)?;
    let err = assert_corruption(table.get(&entries[0].0, true).map(drop), "get");
    match err {
        Error::Corruption { file, offset, .. } => assert_eq!((file, offset), (path.clone(), 0)),
        _ => unreachable!(),
    }
    assert_corruption(table.iter(true).seek_to_first(), "iter");
    assert_corruption(table.verify(), "verify");
    // Keys in other blocks are still readable.
    assert!(table.get(&entries[400].0, true)?.is_some());

    // A damaged index block or footer fails open.
    let footer_start = good.len() - FOOTER_LEN;
    flip(footer_start - 10)?;
    assert_corruption(open(&path, 1, size, None).map(drop), "index");
    flip(footer_start + 3)?;
    assert_corruption(open(&path, 1, size, None).map(drop), "footer handle");
    flip(good.len() - 1)?;
    assert_corruption(open(&path, 1, size, None).map(drop), "magic");
    Ok(())
}

// ---- Learned index blocks ----

/// Key sets the learned index must handle exactly, by name.
fn key_set(kind: &str, n: usize, rng: &mut SmallRng) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = match kind {
        "sequential" => (0..n).map(|i| format!("{i:016}").into_bytes()).collect(),
        "uniform" => (0..n).map(|_| format!("{:016}", rng.gen_range(0..10_000_000_000u64)).into_bytes()).collect(),
        "clustered" => (0..n)
            .map(|_| {
                let cluster = rng.gen_range(0..5u64) * 1_000_000_000_000;
                format!("{:016}", cluster + rng.gen_range(0..1000u64)).into_bytes()
            })
            .collect(),
        "shared-prefix" => {
            (0..n).map(|_| format!("user:{:06}:profile", rng.gen_range(0..1_000_000u32)).into_bytes()).collect()
        }
        "random-bytes" => (0..n)
            .map(|_| {
                let len = rng.gen_range(1..24);
                (0..len).map(|_| rng.gen::<u8>()).collect()
            })
            .collect(),
        // Keys equal in their first 8 bytes after the common prefix: runs sharing one number.
        "shared-u64-runs" => (0..n)
            .map(|_| {
                let mut k = format!("run{:02}-xxxxxxxx", rng.gen_range(0..4u32)).into_bytes();
                k.extend_from_slice(&rng.gen::<u32>().to_be_bytes());
                k
            })
            .collect(),
        other => panic!("unknown key set {other}"),
    };
    keys.sort();
    keys.dedup();
    keys
}

/// Entries for `keys`, one to three versions each (newest first), some deletions.
fn versions(keys: &[Vec<u8>], rng: &mut SmallRng) -> Entries {
    let mut out = Vec::new();
    for k in keys {
        let n = rng.gen_range(1..=3u64);
        for v in 0..n {
            let seq = 100 - v * 10 - rng.gen_range(0..5);
            let kind = if rng.gen_bool(0.1) { ValueKind::Deletion } else { ValueKind::Inline };
            out.push((internal_key(k, SequenceNumber(seq), kind), vec![b'v'; rng.gen_range(1..40)]));
        }
    }
    out
}

/// Probe keys: every stored key, keys just before and after them, and random ones (absent).
fn probes(keys: &[Vec<u8>], rng: &mut SmallRng) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new(), vec![0xff; 30]];
    for k in keys {
        out.push(k.clone());
        let mut after = k.clone();
        after.push(0);
        out.push(after);
        if let Some(mut before) = k.get(..k.len() - 1).map(<[u8]>::to_vec) {
            before.push(k[k.len() - 1].wrapping_sub(1));
            out.push(before);
        }
        if rng.gen_bool(0.2) {
            out.push((0..rng.gen_range(0..20)).map(|_| rng.gen::<u8>()).collect());
        }
    }
    out
}

fn learned_opts(block_size: usize) -> TableOptions {
    TableOptions { block_size, index_block_kind: IndexBlockKind::Learned, ..TableOptions::default() }
}

#[test]
fn learned_lookups_equal_binary_search_lookups() -> Result<()> {
    let dir = tempfile::tempdir()?;
    for (seed, set) in
        ["sequential", "uniform", "clustered", "shared-prefix", "random-bytes", "shared-u64-runs"].iter().enumerate()
    {
        let mut rng = SmallRng::seed_from_u64(seed as u64);
        let keys = key_set(set, 3000, &mut rng);
        let entries = versions(&keys, &mut rng);
        for (block_size, compression) in
            [(256, CompressionType::None), (1024, CompressionType::Lz4), (4096, CompressionType::None)]
        {
            let (bp, bs) = build(dir.path(), "b.sst", &entries, opts(block_size, compression))?;
            let binary = open(&bp, 1, bs, None)?;
            let (lp, ls) =
                build(dir.path(), "l.sst", &entries, TableOptions { compression, ..learned_opts(block_size) })?;
            let learned = open(&lp, 2, ls, None)?;
            assert_eq!(learned.index_summary().0, IndexBlockKind::Learned, "{set}: model rejected");
            learned.verify()?;
            let (mut bi, mut li) = (binary.iter(true), learned.iter(true));
            for probe in probes(&keys, &mut rng) {
                for seq in [MAX_SEQUENCE, 95, 85, 1] {
                    let target = seek_key(&probe, SequenceNumber(seq));
                    assert_eq!(
                        learned.get(&target, true)?,
                        binary.get(&target, true)?,
                        "{set}, block size {block_size}: get {probe:?} at {seq}"
                    );
                    bi.seek(&target)?;
                    li.seek(&target)?;
                    assert_eq!(li.valid(), bi.valid(), "{set}: seek {probe:?}");
                    if bi.valid() {
                        assert_eq!(li.key(), bi.key(), "{set}: seek {probe:?} at {seq}");
                    }
                }
            }
            // Whole scans agree too (both ways).
            assert_eq!(collect_forward(&mut learned.iter(false))?, entries);
        }
    }
    Ok(())
}

#[test]
fn learned_index_is_smaller_than_the_binary_one() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rng = SmallRng::seed_from_u64(7);
    let keys = key_set("uniform", 20_000, &mut rng);
    let entries: Entries =
        keys.iter().map(|k| (internal_key(k, SequenceNumber(1), ValueKind::Inline), vec![1; 100])).collect();
    let (bp, bs) = build(dir.path(), "b.sst", &entries, TableOptions::default())?;
    let (lp, ls) = build(dir.path(), "l.sst", &entries, learned_opts(4096))?;
    let (binary, learned) = (open(&bp, 1, bs, None)?, open(&lp, 2, ls, None)?);
    let (kind, summary) = learned.index_summary();
    assert_eq!(kind, IndexBlockKind::Learned);
    let model = summary.model.expect("a learned index has a model");
    assert!(model.max_error <= MAX_ACCEPTED_ERROR && model.mean_error <= model.max_error as f64);
    assert!(summary.encoded_bytes < binary.index_summary().1.encoded_bytes, "{summary:?}");
    Ok(())
}

#[test]
fn learned_tables_detect_every_flipped_byte() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let entries = even_keys(150);
    let (path, _) = build(dir.path(), "l.sst", &entries, learned_opts(512))?;
    let good = OsFileSystem.read_all(&path)?;
    exercise(good.clone(), &entries)?;
    for pos in 0..good.len() {
        let mut bad = good.clone();
        bad[pos] ^= 0x40;
        assert_corruption(exercise(bad, &entries), &format!("flip at {pos}"));
    }
    Ok(())
}

#[test]
fn damaged_model_bytes_are_corruption_never_a_panic() -> Result<()> {
    // Bypass the block checksum: decode model bytes changed in every position directly.
    let mut rng = SmallRng::seed_from_u64(3);
    let keys = key_set("clustered", 2000, &mut rng);
    let mut b = LearnedIndexBuilder::new(16);
    let mut blocks = 0u64;
    for chunk in keys.chunks(20) {
        for k in chunk {
            b.add_entry(&internal_key(k, SequenceNumber(1), ValueKind::Inline));
        }
        let separator = internal_key(&chunk[chunk.len() - 1], SequenceNumber(1), ValueKind::Inline);
        b.add_block(&separator, BlockHandle { offset: blocks * 105, size: 100 }, chunk.len() as u64);
        blocks += 1;
    }
    let built = b.finish();
    assert_eq!(built.kind, IndexBlockKind::Learned);
    let (data_end, n) = (blocks * 105, keys.len() as u64);
    let good = LearnedIndex::decode(&built.bytes, data_end, n).expect("valid");
    for k in &keys {
        assert!(good.locate(&seek_key(k, SequenceNumber(MAX_SEQUENCE))).is_some());
    }
    let mut rejected = 0;
    for pos in 0..built.bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = built.bytes.clone();
            bad[pos] ^= flip;
            // Either rejected or a model that answers every lookup without panicking.
            match LearnedIndex::decode(&bad, data_end, n) {
                Err(_) => rejected += 1,
                Ok(model) => {
                    for k in keys.iter().step_by(17) {
                        if let Some(w) = model.locate(&seek_key(k, SequenceNumber(1))) {
                            assert!(w.start.block <= w.guess && w.guess <= w.end.block && w.end.block < model.len());
                        }
                    }
                }
            }
        }
    }
    assert!(rejected > 0);
    // Truncation, a wrong entry count and a wrong data size are rejected.
    assert!(LearnedIndex::decode(&built.bytes[..built.bytes.len() - 1], data_end, n).is_err());
    assert!(LearnedIndex::decode(&built.bytes, data_end, n + 1).is_err());
    assert!(LearnedIndex::decode(&built.bytes, data_end + 1, n).is_err());
    Ok(())
}

#[test]
fn lazily_trained_model_answers_like_the_binary_index() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rng = SmallRng::seed_from_u64(11);
    let keys = key_set("shared-prefix", 4000, &mut rng);
    let entries = versions(&keys, &mut rng);
    let (path, size) = build(dir.path(), "b.sst", &entries, opts(1024, CompressionType::Lz4))?;
    let adaptive = TableOptions { index_block_kind: IndexBlockKind::Adaptive, ..TableOptions::default() };
    let learning = Arc::new(IndexLearning::default());
    let table =
        Table::open(OsFileSystem.open(&path)?, path.clone(), FileNumber(1), size, &adaptive, None, Some(learning))?;
    let binary = open(&path, 2, size, None)?;
    assert_eq!(table.index_summary().0, IndexBlockKind::Binary);
    assert!(table.train_index()?, "the model is accepted");
    assert!(table.trained_lazily());
    assert_eq!(table.index_summary().0, IndexBlockKind::Learned);
    assert!(!table.train_index()?, "trained once");
    table.verify()?;
    for probe in probes(&keys, &mut rng) {
        let target = seek_key(&probe, SequenceNumber(90));
        assert_eq!(table.get(&target, true)?, binary.get(&target, true)?);
    }
    Ok(())
}
