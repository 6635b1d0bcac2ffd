//! [`Db`]: the public handle (API skeleton; bodies land with the engine).
#![allow(missing_docs, unused_variables)]

use std::ops::RangeBounds;
use std::path::Path;

use bytes::Bytes;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::Stats;

pub struct Db {}

impl Db {
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> { todo!() }
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> { todo!() }
    pub fn close(self) -> Result<()> { todo!() }
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> { todo!() }
    pub fn put_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> { todo!() }
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> { todo!() }
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> { todo!() }
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> { todo!() }
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> { todo!() }
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> { todo!() }
    pub fn multi_get<K: AsRef<[u8]>>(&self, opts: &ReadOptions, keys: &[K]) -> Result<Vec<Option<Bytes>>> { todo!() }
    pub fn snapshot(&self) -> Snapshot { todo!() }
    pub fn iter(&self, opts: ReadOptions) -> Result<DbIterator> { todo!() }
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeIter> { todo!() }
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, opts: ReadOptions, range: R) -> Result<RangeIter> { todo!() }
    pub fn flush(&self) -> Result<()> { todo!() }
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> { todo!() }
    pub fn stats(&self) -> Stats { todo!() }
    pub fn property(&self, name: &str) -> Option<String> { todo!() }
    pub fn path(&self) -> &Path { todo!() }
}

/// Cursor over the database (both directions).
pub struct DbIterator {}
impl DbIterator {
    pub fn valid(&self) -> bool { todo!() }
    pub fn seek_to_first(&mut self) -> Result<()> { todo!() }
    pub fn seek_to_last(&mut self) -> Result<()> { todo!() }
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> { todo!() }
    pub fn next(&mut self) -> Result<()> { todo!() }
    pub fn prev(&mut self) -> Result<()> { todo!() }
    pub fn key(&self) -> &[u8] { todo!() }
    pub fn value(&self) -> &[u8] { todo!() }
}

/// Owning forward iterator over a key range.
pub struct RangeIter {}
impl Iterator for RangeIter {
    type Item = Result<(Bytes, Bytes)>;
    fn next(&mut self) -> Option<Self::Item> { todo!() }
}
