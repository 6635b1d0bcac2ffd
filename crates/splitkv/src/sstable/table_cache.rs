//! The table cache: open [`Table`]s of one database directory, keyed by file number.
//!
//! Opening a table costs a file open plus reading and verifying its footer, index and filter, so
//! readers keep recently used tables open here, bounded by count (`max_open_files`); concurrent
//! misses for one table open it once. It is a separate module from the block cache because it
//! sits one level higher: it opens tables, while tables themselves read through the block cache.
//!
//! A read-only database pins its tables' files at open (see `Db::open_read_only`): the cache
//! then builds a table from the pinned handle instead of opening the path, which a live writer
//! may have deleted meanwhile.
//!
//! Thread-safety: `Send + Sync`, shared through `Arc`; sharded (`quick_cache`) so concurrent
//! readers rarely contend.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use quick_cache::sync::Cache;

use super::block_cache::BlockCache;
use super::learning::IndexLearning;
use super::table::Table;
use super::TableOptions;
use crate::error::Result;
use crate::filenames::table_file;
use crate::fs::{AccessPattern, FileSystem, RandomAccessFile};
use crate::types::FileNumber;

// Readers on many threads share the table cache.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<TableCache>();
};

/// Open tables of one database directory, bounded by count (`max_open_files`).
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    block_cache: Option<Arc<BlockCache>>,
    learning: Option<Arc<IndexLearning>>,
    opts: TableOptions,
    tables: Cache<FileNumber, Arc<Table>>,
    /// Files opened ahead of use (by a read-only database, whose writer may delete them), used
    /// instead of opening the path on a miss.
    pinned: HashMap<FileNumber, Arc<dyn RandomAccessFile>>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache").field("dir", &self.dir).field("open", &self.tables.len()).finish_non_exhaustive()
    }
}

impl TableCache {
    /// A cache of up to `capacity` open tables of `dir`, sharing `block_cache` and the
    /// database's learned-index state.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Option<Arc<BlockCache>>,
        learning: Option<Arc<IndexLearning>>,
        opts: TableOptions,
    ) -> Self {
        TableCache { fs, dir, block_cache, learning, opts, tables: Cache::new(capacity.max(1)), pinned: HashMap::new() }
    }

    /// Serves the tables in `files` from these already open handles rather than by path: they
    /// stay readable after another process deletes their files.
    pub fn with_pinned(mut self, files: HashMap<FileNumber, Arc<dyn RandomAccessFile>>) -> Self {
        self.pinned = files;
        self
    }

    /// The open table `number` of `size` bytes, opening it on a miss.
    pub fn get_table(&self, number: FileNumber, size: u64) -> Result<Arc<Table>> {
        self.tables.get_or_insert_with(&number, || {
            let path = table_file(&self.dir, number);
            let file = match self.pinned.get(&number) {
                Some(file) => Arc::clone(file),
                None => self.fs.open(&path)?,
            };
            file.advise(AccessPattern::Random);
            Table::open(file, path, number, size, &self.opts, self.block_cache.clone(), self.learning.clone())
        })
    }

    /// Table `number` if it is open, without opening it.
    pub fn open_table(&self, number: FileNumber) -> Option<Arc<Table>> {
        self.tables.get(&number)
    }

    /// Forgets table `number` (after it was deleted), and its blocks in the block cache if it
    /// was open; iterators holding it keep it alive.
    pub fn evict(&self, number: FileNumber) {
        if let Some((_, table)) = self.tables.remove(&number) {
            table.forget_cached_blocks();
        }
    }

    /// The block cache shared by the tables.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }

    /// Most tables open at once.
    pub fn capacity(&self) -> u64 {
        self.tables.capacity()
    }

    /// Number of open tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True if no table is open.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}
