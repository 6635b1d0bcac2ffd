//! [`LevelDbEngine`]: LevelDB (1.23, the system library) behind the benchmark seam, through a
//! hand-written binding of the parts of `leveldb/c.h` the benchmarks use.
//!
//! Options follow db_bench's `Open()`: LevelDB's own defaults, overridden only by flags that were
//! given (write buffer, block size, LRU block cache, bloom filter, max file size, open files,
//! compression none|snappy). The handle, the options and the objects they point to (cache, filter
//! policy) live as long as the engine and are freed on close. LevelDB's `DB` is safe for
//! concurrent use and read/write options are only read after creation, so the engine is
//! `Send + Sync`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

use super::{BenchError, BenchResult, Direction, Engine, WriteOp};
use crate::flags::{Compression, Flags};

/// Opaque C types.
#[repr(C)]
struct RawDb(c_void);
#[repr(C)]
struct RawOptions(c_void);
#[repr(C)]
struct RawReadOptions(c_void);
#[repr(C)]
struct RawWriteOptions(c_void);
#[repr(C)]
struct RawWriteBatch(c_void);
#[repr(C)]
struct RawIterator(c_void);
#[repr(C)]
struct RawCache(c_void);
#[repr(C)]
struct RawFilterPolicy(c_void);

const NO_COMPRESSION: c_int = 0;
const SNAPPY_COMPRESSION: c_int = 1;

extern "C" {
    fn leveldb_open(options: *const RawOptions, name: *const c_char, errptr: *mut *mut c_char) -> *mut RawDb;
    fn leveldb_close(db: *mut RawDb);
    fn leveldb_put(
        db: *mut RawDb,
        options: *const RawWriteOptions,
        key: *const c_char,
        keylen: usize,
        val: *const c_char,
        vallen: usize,
        errptr: *mut *mut c_char,
    );
    fn leveldb_delete(
        db: *mut RawDb,
        options: *const RawWriteOptions,
        key: *const c_char,
        keylen: usize,
        errptr: *mut *mut c_char,
    );
    fn leveldb_write(
        db: *mut RawDb,
        options: *const RawWriteOptions,
        batch: *mut RawWriteBatch,
        errptr: *mut *mut c_char,
    );
    fn leveldb_get(
        db: *mut RawDb,
        options: *const RawReadOptions,
        key: *const c_char,
        keylen: usize,
        vallen: *mut usize,
        errptr: *mut *mut c_char,
    ) -> *mut c_char;
    fn leveldb_create_iterator(db: *mut RawDb, options: *const RawReadOptions) -> *mut RawIterator;
    fn leveldb_property_value(db: *mut RawDb, propname: *const c_char) -> *mut c_char;
    fn leveldb_compact_range(
        db: *mut RawDb,
        start_key: *const c_char,
        start_key_len: usize,
        limit_key: *const c_char,
        limit_key_len: usize,
    );
    fn leveldb_destroy_db(options: *const RawOptions, name: *const c_char, errptr: *mut *mut c_char);

    fn leveldb_iter_destroy(iter: *mut RawIterator);
    fn leveldb_iter_valid(iter: *const RawIterator) -> u8;
    fn leveldb_iter_seek_to_first(iter: *mut RawIterator);
    fn leveldb_iter_seek_to_last(iter: *mut RawIterator);
    fn leveldb_iter_seek(iter: *mut RawIterator, k: *const c_char, klen: usize);
    fn leveldb_iter_next(iter: *mut RawIterator);
    fn leveldb_iter_prev(iter: *mut RawIterator);
    fn leveldb_iter_key(iter: *const RawIterator, klen: *mut usize) -> *const c_char;
    fn leveldb_iter_value(iter: *const RawIterator, vlen: *mut usize) -> *const c_char;
    fn leveldb_iter_get_error(iter: *const RawIterator, errptr: *mut *mut c_char);

    fn leveldb_writebatch_create() -> *mut RawWriteBatch;
    fn leveldb_writebatch_destroy(batch: *mut RawWriteBatch);
    fn leveldb_writebatch_put(
        batch: *mut RawWriteBatch,
        key: *const c_char,
        klen: usize,
        val: *const c_char,
        vlen: usize,
    );
    fn leveldb_writebatch_delete(batch: *mut RawWriteBatch, key: *const c_char, klen: usize);

    fn leveldb_options_create() -> *mut RawOptions;
    fn leveldb_options_destroy(options: *mut RawOptions);
    fn leveldb_options_set_create_if_missing(options: *mut RawOptions, value: u8);
    fn leveldb_options_set_filter_policy(options: *mut RawOptions, policy: *mut RawFilterPolicy);
    fn leveldb_options_set_cache(options: *mut RawOptions, cache: *mut RawCache);
    fn leveldb_options_set_write_buffer_size(options: *mut RawOptions, size: usize);
    fn leveldb_options_set_max_open_files(options: *mut RawOptions, n: c_int);
    fn leveldb_options_set_block_size(options: *mut RawOptions, size: usize);
    fn leveldb_options_set_block_restart_interval(options: *mut RawOptions, n: c_int);
    fn leveldb_options_set_max_file_size(options: *mut RawOptions, size: usize);
    fn leveldb_options_set_compression(options: *mut RawOptions, kind: c_int);
    fn leveldb_filterpolicy_create_bloom(bits_per_key: c_int) -> *mut RawFilterPolicy;
    fn leveldb_filterpolicy_destroy(policy: *mut RawFilterPolicy);
    fn leveldb_cache_create_lru(capacity: usize) -> *mut RawCache;
    fn leveldb_cache_destroy(cache: *mut RawCache);

    fn leveldb_readoptions_create() -> *mut RawReadOptions;
    fn leveldb_readoptions_destroy(options: *mut RawReadOptions);
    fn leveldb_writeoptions_create() -> *mut RawWriteOptions;
    fn leveldb_writeoptions_destroy(options: *mut RawWriteOptions);
    fn leveldb_writeoptions_set_sync(options: *mut RawWriteOptions, value: u8);

    fn leveldb_free(ptr: *mut c_void);
    fn leveldb_major_version() -> c_int;
    fn leveldb_minor_version() -> c_int;
}

/// Turns a LevelDB error out-parameter into a `Result`, freeing the C string.
fn check(err: *mut c_char) -> BenchResult<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null errptr is a NUL-terminated string LevelDB allocated with malloc; we own
    // it and free it exactly once with leveldb_free.
    let message = unsafe {
        let text = CStr::from_ptr(err).to_string_lossy().into_owned();
        leveldb_free(err.cast());
        text
    };
    Err(BenchError::from(format!("leveldb: {message}")))
}

fn path_cstring(flags: &Flags) -> BenchResult<CString> {
    let text = flags.db.to_str().ok_or("database path is not UTF-8")?;
    Ok(CString::new(text)?)
}

/// The library's version from its C API (`1.23`).
pub fn version() -> String {
    // SAFETY: plain functions returning constants.
    let (major, minor) = unsafe { (leveldb_major_version(), leveldb_minor_version()) };
    format!("{major}.{minor}")
}

/// `leveldb_options_t` plus the cache and filter policy it points to, freed together.
struct OwnedOptions {
    options: *mut RawOptions,
    cache: *mut RawCache,
    filter: *mut RawFilterPolicy,
}

impl OwnedOptions {
    fn from_flags(flags: &Flags) -> BenchResult<Self> {
        let compression = match flags.compression_type {
            None => None,
            Some(Compression::None) => Some(NO_COMPRESSION),
            Some(Compression::Snappy) => Some(SNAPPY_COMPRESSION),
            Some(other) => return Err(format!("LevelDB 1.23 has no {other:?} compression; use none or snappy").into()),
        };
        let open_files = flags.open_files.map(c_int::try_from).transpose()?;
        let restart_interval = flags.block_restart_interval.map(c_int::try_from).transpose()?;
        let bloom_bits = flags.bloom_bits.map(c_int::try_from).transpose()?;
        let max_file_size = flags.target_file_size.map(usize::try_from).transpose()?;
        // SAFETY: each create function returns a fresh object we own; setters take the pointer we
        // just created. The cache and filter outlive the options because Drop frees them after.
        unsafe {
            let owned =
                OwnedOptions { options: leveldb_options_create(), cache: ptr::null_mut(), filter: ptr::null_mut() };
            let options = owned.options;
            leveldb_options_set_create_if_missing(options, 1);
            if let Some(size) = flags.write_buffer_size {
                leveldb_options_set_write_buffer_size(options, size);
            }
            if let Some(size) = flags.block_size {
                leveldb_options_set_block_size(options, size);
            }
            if let Some(n) = restart_interval {
                leveldb_options_set_block_restart_interval(options, n);
            }
            if let Some(size) = max_file_size {
                leveldb_options_set_max_file_size(options, size);
            }
            if let Some(n) = open_files {
                leveldb_options_set_max_open_files(options, n);
            }
            if let Some(kind) = compression {
                leveldb_options_set_compression(options, kind);
            }
            let mut owned = owned;
            if let Some(capacity) = flags.cache_size {
                owned.cache = leveldb_cache_create_lru(capacity);
                leveldb_options_set_cache(options, owned.cache);
            }
            if let Some(bits) = bloom_bits {
                owned.filter = leveldb_filterpolicy_create_bloom(bits);
                leveldb_options_set_filter_policy(options, owned.filter);
            }
            Ok(owned)
        }
    }
}

impl Drop for OwnedOptions {
    fn drop(&mut self) {
        // SAFETY: pointers were created in from_flags and are freed once; the database that used
        // them has been closed first (LevelDbEngine drops `db` before `options`).
        unsafe {
            leveldb_options_destroy(self.options);
            if !self.cache.is_null() {
                leveldb_cache_destroy(self.cache);
            }
            if !self.filter.is_null() {
                leveldb_filterpolicy_destroy(self.filter);
            }
        }
    }
}

/// An open LevelDB database.
pub struct LevelDbEngine {
    db: *mut RawDb,
    read_options: *mut RawReadOptions,
    write_options: *mut RawWriteOptions,
    sync_write_options: *mut RawWriteOptions,
    // Declared last so it is dropped after `Drop::drop` closed the database.
    _options: OwnedOptions,
}

// SAFETY: leveldb::DB is thread-safe; the options objects are immutable after open.
unsafe impl Send for LevelDbEngine {}
// SAFETY: as above; every method takes &self and only calls thread-safe DB functions.
unsafe impl Sync for LevelDbEngine {}

impl LevelDbEngine {
    /// Opens (creating if missing) the database at `flags.db`.
    pub fn open(flags: &Flags) -> BenchResult<Self> {
        let options = OwnedOptions::from_flags(flags)?;
        let name = path_cstring(flags)?;
        let mut err = ptr::null_mut();
        // SAFETY: valid options and NUL-terminated name; err is a valid out-pointer.
        let db = unsafe { leveldb_open(options.options, name.as_ptr(), &mut err) };
        check(err)?;
        // SAFETY: create functions return fresh objects we own until Drop.
        unsafe {
            let sync_write_options = leveldb_writeoptions_create();
            leveldb_writeoptions_set_sync(sync_write_options, 1);
            Ok(LevelDbEngine {
                db,
                read_options: leveldb_readoptions_create(),
                write_options: leveldb_writeoptions_create(),
                sync_write_options,
                _options: options,
            })
        }
    }

    /// Removes the database at `flags.db`.
    pub fn destroy(flags: &Flags) -> BenchResult<()> {
        let options = OwnedOptions::from_flags(flags)?;
        let name = path_cstring(flags)?;
        let mut err = ptr::null_mut();
        // SAFETY: valid options and name; err is a valid out-pointer.
        unsafe { leveldb_destroy_db(options.options, name.as_ptr(), &mut err) };
        check(err)
    }

    fn write_options(&self, sync: bool) -> *const RawWriteOptions {
        if sync {
            self.sync_write_options
        } else {
            self.write_options
        }
    }
}

impl Drop for LevelDbEngine {
    fn drop(&mut self) {
        // SAFETY: every pointer is owned by self and freed exactly once, the database first.
        unsafe {
            leveldb_close(self.db);
            leveldb_readoptions_destroy(self.read_options);
            leveldb_writeoptions_destroy(self.write_options);
            leveldb_writeoptions_destroy(self.sync_write_options);
        }
    }
}

/// An iterator that is destroyed when dropped, so early returns cannot leak it.
struct OwnedIterator(*mut RawIterator);

impl OwnedIterator {
    fn valid(&self) -> bool {
        // SAFETY: self.0 is a live iterator.
        unsafe { leveldb_iter_valid(self.0) != 0 }
    }

    /// Key and value of the current entry; valid until the iterator moves.
    fn entry(&self) -> (&[u8], &[u8]) {
        let (mut klen, mut vlen) = (0usize, 0usize);
        // SAFETY: only called while valid(); LevelDB returns pointers into its own buffers that
        // stay valid until the iterator moves, which needs &mut self.
        unsafe {
            let k = leveldb_iter_key(self.0, &mut klen);
            let v = leveldb_iter_value(self.0, &mut vlen);
            (std::slice::from_raw_parts(k.cast(), klen), std::slice::from_raw_parts(v.cast(), vlen))
        }
    }

    fn status(&self) -> BenchResult<()> {
        let mut err = ptr::null_mut();
        // SAFETY: live iterator and valid out-pointer.
        unsafe { leveldb_iter_get_error(self.0, &mut err) };
        check(err)
    }
}

impl Drop for OwnedIterator {
    fn drop(&mut self) {
        // SAFETY: created by leveldb_create_iterator and destroyed once, before the database.
        unsafe { leveldb_iter_destroy(self.0) }
    }
}

impl Engine for LevelDbEngine {
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> BenchResult<()> {
        let mut err = ptr::null_mut();
        // SAFETY: live handle; key and value slices are valid for the call.
        unsafe {
            leveldb_put(
                self.db,
                self.write_options(sync),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        check(err)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        let (mut err, mut len) = (ptr::null_mut(), 0usize);
        // SAFETY: live handle; key valid for the call; a non-null result is malloc'd by LevelDB
        // and freed here.
        unsafe {
            let value = leveldb_get(self.db, self.read_options, key.as_ptr().cast(), key.len(), &mut len, &mut err);
            check(err)?;
            if value.is_null() {
                return Ok(None);
            }
            leveldb_free(value.cast());
        }
        Ok(Some(len))
    }

    fn delete(&self, key: &[u8], sync: bool) -> BenchResult<()> {
        let mut err = ptr::null_mut();
        // SAFETY: live handle; key valid for the call.
        unsafe { leveldb_delete(self.db, self.write_options(sync), key.as_ptr().cast(), key.len(), &mut err) };
        check(err)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], sync: bool) -> BenchResult<()> {
        let mut err = ptr::null_mut();
        // SAFETY: the batch copies keys and values; it is destroyed before returning.
        unsafe {
            let batch = leveldb_writebatch_create();
            for op in ops {
                match *op {
                    WriteOp::Put { key, value } => leveldb_writebatch_put(
                        batch,
                        key.as_ptr().cast(),
                        key.len(),
                        value.as_ptr().cast(),
                        value.len(),
                    ),
                    WriteOp::Delete { key } => leveldb_writebatch_delete(batch, key.as_ptr().cast(), key.len()),
                }
            }
            leveldb_write(self.db, self.write_options(sync), batch, &mut err);
            leveldb_writebatch_destroy(batch);
        }
        check(err)
    }

    fn scan(&self, direction: Direction, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> BenchResult<()> {
        // SAFETY: live handle; the iterator is destroyed by OwnedIterator before the engine.
        let iter = OwnedIterator(unsafe { leveldb_create_iterator(self.db, self.read_options) });
        // SAFETY: the iterator is live for every call below.
        unsafe {
            match direction {
                Direction::Forward => leveldb_iter_seek_to_first(iter.0),
                Direction::Reverse => leveldb_iter_seek_to_last(iter.0),
            }
        }
        while iter.valid() {
            let (key, value) = iter.entry();
            if !visit(key, value) {
                break;
            }
            // SAFETY: as above.
            unsafe {
                match direction {
                    Direction::Forward => leveldb_iter_next(iter.0),
                    Direction::Reverse => leveldb_iter_prev(iter.0),
                }
            }
        }
        iter.status()
    }

    fn scan_from(&self, start: &[u8], limit: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> BenchResult<usize> {
        // SAFETY: live handle; start valid for the call.
        let iter = OwnedIterator(unsafe { leveldb_create_iterator(self.db, self.read_options) });
        // SAFETY: live iterator.
        unsafe { leveldb_iter_seek(iter.0, start.as_ptr().cast(), start.len()) };
        let mut visited = 0;
        while visited < limit && iter.valid() {
            let (key, value) = iter.entry();
            visit(key, value);
            visited += 1;
            // SAFETY: live, valid iterator.
            unsafe { leveldb_iter_next(iter.0) };
        }
        iter.status()?;
        Ok(visited)
    }

    fn seek_lands_on(&self, target: &[u8]) -> BenchResult<bool> {
        // SAFETY: live handle; target valid for the call.
        let iter = OwnedIterator(unsafe { leveldb_create_iterator(self.db, self.read_options) });
        // SAFETY: live iterator.
        unsafe { leveldb_iter_seek(iter.0, target.as_ptr().cast(), target.len()) };
        let landed = iter.valid() && iter.entry().0 == target;
        iter.status()?;
        Ok(landed)
    }

    fn new_iterator(&self) -> BenchResult<()> {
        // SAFETY: live handle; the iterator is destroyed when dropped.
        let iter = OwnedIterator(unsafe { leveldb_create_iterator(self.db, self.read_options) });
        iter.status()
    }

    fn compact(&self) -> BenchResult<()> {
        // SAFETY: null bounds mean the whole key range.
        unsafe { leveldb_compact_range(self.db, ptr::null(), 0, ptr::null(), 0) };
        Ok(())
    }

    fn stats_text(&self) -> Option<String> {
        let name = c"leveldb.stats";
        // SAFETY: live handle; a non-null result is a malloc'd C string we free.
        unsafe {
            let text = leveldb_property_value(self.db, name.as_ptr());
            if text.is_null() {
                return None;
            }
            let owned = CStr::from_ptr(text).to_string_lossy().into_owned();
            leveldb_free(text.cast());
            Some(owned)
        }
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        // leveldb_close reports nothing; dropping closes.
        drop(self);
        Ok(())
    }
}
