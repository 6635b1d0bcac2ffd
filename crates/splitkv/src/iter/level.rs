//! A cursor over one sorted level: the concatenation of its non-overlapping files.
//!
//! Files are opened lazily through a caller-supplied opener (normally the table cache), and only
//! one is open at a time, so a scan over a large level holds one table's resources, not all.
//! Files that turn out to hold no entries are skipped in both directions.
//!
//! Invariants: `files` are sorted by key range and do not overlap (each file's `largest` is below
//! the next file's `smallest`), and every entry of a file lies within `[smallest, largest]`.
//! Seek relies on this to pick the single file that can hold the target.
//! After an error (a failed open or a failed move in a file) the iterator is invalid until the
//! next seek. Exclusively owned; `Send` because the opener is `Send + Sync`.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::{compare_internal_keys, InternalKey};
use crate::Result;

/// One file of a level, as far as iteration needs to know it.
#[derive(Clone, PartialEq, Eq)]
pub struct LevelFile {
    /// File number, passed to the opener.
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
}

impl fmt::Debug for LevelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LevelFile")
            .field("id", &self.id)
            .field("size", &self.size)
            .field("smallest", &InternalKey(self.smallest.clone()))
            .field("largest", &InternalKey(self.largest.clone()))
            .finish()
    }
}

/// Opens an iterator of type `T` over one file of a level.
pub type LevelFileOpener<T = Box<dyn InternalIterator>> = Arc<dyn Fn(&LevelFile) -> Result<T> + Send + Sync>;

/// Concatenates the files of one level into a single [`InternalIterator`].
///
/// Generic over the file iterator so that a level of tables calls its table cursor directly: a
/// scan asks the level for every entry's key and value, and a boxed file would add a dynamic
/// call to each of those.
pub struct LevelIterator<T = Box<dyn InternalIterator>> {
    // Shared: an index builds a level's list once per version, not once per cursor.
    files: Arc<[LevelFile]>,
    open: LevelFileOpener<T>,
    /// Index into `files` of the open file; meaningful only while `current` is `Some`.
    file_index: usize,
    /// The open file, `None` once the iterator has run off either end (or before the first seek).
    current: Option<T>,
}

impl<T: InternalIterator> LevelIterator<T> {
    /// Iterates `files` (sorted, non-overlapping), opening each through `open` when reached.
    pub fn new(files: impl Into<Arc<[LevelFile]>>, open: LevelFileOpener<T>) -> Self {
        let files = files.into();
        LevelIterator { files, open, file_index: 0, current: None }
    }

    /// Makes `files[index]` the open file, reusing it if it already is; past the end closes all.
    fn open_file(&mut self, index: usize) -> Result<()> {
        if self.current.is_some() && self.file_index == index {
            return Ok(());
        }
        // Closed before opening the next one: at most one file open at a time.
        self.current = None;
        if let Some(file) = self.files.get(index) {
            self.current = Some((self.open)(file)?);
            self.file_index = index;
        }
        Ok(())
    }

    fn current_valid(&self) -> bool {
        self.current.as_ref().is_some_and(|file| file.valid())
    }

    /// Moves into later files until one has an entry at its start or the level is exhausted.
    fn skip_exhausted_files_forward(&mut self) -> Result<()> {
        while self.current.is_some() && !self.current_valid() {
            self.open_file(self.file_index + 1)?;
            if let Some(file) = self.current.as_mut() {
                file.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves into earlier files until one has an entry at its end or the level is exhausted.
    fn skip_exhausted_files_backward(&mut self) -> Result<()> {
        while self.current.is_some() && !self.current_valid() {
            if self.file_index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open_file(self.file_index - 1)?;
            if let Some(file) = self.current.as_mut() {
                file.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// Runs a movement; an error closes the open file so the iterator reads as invalid.
    fn guarded(&mut self, movement: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = movement(self);
        if result.is_err() {
            self.current = None;
        }
        result
    }
}

impl<T: InternalIterator> InternalIterator for LevelIterator<T> {
    fn valid(&self) -> bool {
        self.current_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|level| {
            level.open_file(0)?;
            if let Some(file) = level.current.as_mut() {
                file.seek_to_first()?;
            }
            level.skip_exhausted_files_forward()
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|level| {
            match level.files.len().checked_sub(1) {
                Some(last) => level.open_file(last)?,
                None => level.current = None,
            }
            if let Some(file) = level.current.as_mut() {
                file.seek_to_last()?;
            }
            level.skip_exhausted_files_backward()
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|level| {
            // The first file whose largest key is >= target is the only one that can hold it;
            // if it holds nothing >= target, the answer is the start of a later file.
            let index =
                level.files.partition_point(|file| compare_internal_keys(&file.largest, target) == Ordering::Less);
            level.open_file(index)?;
            if let Some(file) = level.current.as_mut() {
                file.seek(target)?;
            }
            level.skip_exhausted_files_forward()
        })
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.guarded(|level| {
            if let Some(file) = level.current.as_mut() {
                file.next()?;
            }
            level.skip_exhausted_files_forward()
        })
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.guarded(|level| {
            if let Some(file) = level.current.as_mut() {
                file.prev()?;
            }
            level.skip_exhausted_files_backward()
        })
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |file| file.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |file| file.value())
    }

    fn entry_origin(&self) -> EntryOrigin {
        self.current.as_ref().map_or(EntryOrigin::Unpositioned, |file| file.entry_origin())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

    use super::*;
    use crate::iter::test_util::{values_backward, values_forward};
    use crate::iter::vec::VecIterator;
    use crate::iter::KeepAlive;
    use crate::types::{internal_key, SequenceNumber, ValueKind};
    use crate::Error;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn ikey(user: &str, seq: u64) -> Vec<u8> {
        internal_key(user.as_bytes(), SequenceNumber(seq), ValueKind::Inline)
    }

    /// Counts live file iterators so the one-open-file rule can be checked: dropping the guard
    /// (with its file iterator) releases the count.
    struct OpenFileGuard(Arc<AtomicUsize>);

    impl Drop for OpenFileGuard {
        fn drop(&mut self) {
            self.0.fetch_sub(1, AtomicOrdering::SeqCst);
        }
    }

    /// Builds a level from per-file user-key lists (an empty list is an empty file whose bounds
    /// still claim a key range, as a file emptied by filtering might). Returns the level and the
    /// counter of open files.
    fn level(files: &[(&str, &str, &[&str])], broken_file: Option<u64>) -> (LevelIterator, Arc<AtomicUsize>) {
        let contents: HashMap<u64, Entries> = files
            .iter()
            .enumerate()
            .map(|(id, (_, _, keys))| (id as u64, keys.iter().map(|k| (ikey(k, 1), k.as_bytes().to_vec())).collect()))
            .collect();
        let level_files: Vec<LevelFile> = files
            .iter()
            .enumerate()
            .map(|(id, (smallest, largest, _))| LevelFile {
                id: id as u64,
                size: 100,
                smallest: ikey(smallest, 1),
                largest: ikey(largest, 1),
            })
            .collect();
        let open_files = Arc::new(AtomicUsize::new(0));
        let counter = open_files.clone();
        let open: LevelFileOpener = Arc::new(move |file: &LevelFile| {
            if Some(file.id) == broken_file {
                return Err(Error::corruption(format!("{}.sst", file.id), 0, "bad footer"));
            }
            let previously_open = counter.fetch_add(1, AtomicOrdering::SeqCst);
            assert_eq!(previously_open, 0, "a second file opened while one was still open");
            let entries = contents.get(&file.id).cloned().unwrap_or_default();
            Ok(Box::new(KeepAlive { inner: VecIterator::new(entries), keep: OpenFileGuard(counter.clone()) }) as _)
        });
        (LevelIterator::new(level_files, open), open_files)
    }

    #[test]
    fn walks_across_files_skipping_empty_ones() -> Result<()> {
        let (mut it, open_files) = level(
            &[
                ("a", "a", &[]),
                ("b", "c", &["b", "c"]),
                ("d", "e", &[]),
                ("f", "f", &[]),
                ("g", "h", &["g", "h"]),
                ("i", "j", &[]),
            ],
            None,
        );
        assert_eq!(values_forward(&mut it)?, ["b", "c", "g", "h"]);
        assert_eq!(values_backward(&mut it)?, ["h", "g", "c", "b"]);
        assert!(open_files.load(AtomicOrdering::SeqCst) <= 1);

        // Crossing the empty gap in both directions from the middle.
        it.seek(&ikey("c", 1))?;
        assert_eq!(it.value(), b"c");
        it.next()?;
        assert_eq!(it.value(), b"g");
        it.prev()?;
        assert_eq!(it.value(), b"c");
        it.prev()?;
        it.prev()?;
        assert!(!it.valid());
        assert_eq!(open_files.load(AtomicOrdering::SeqCst), 0);
        Ok(())
    }

    #[test]
    fn seek_picks_the_file_by_largest_key() -> Result<()> {
        let (mut it, _) = level(&[("b", "d", &["b", "d"]), ("f", "f", &[]), ("h", "k", &["h", "k"])], None);
        for (target, expected) in [("a", Some("b")), ("c", Some("d")), ("d", Some("d")), ("e", Some("h"))] {
            it.seek(&ikey(target, 1))?;
            assert_eq!(it.valid().then(|| it.value().to_vec()), expected.map(|e| e.as_bytes().to_vec()), "{target}");
        }
        // Same user key, older sequence: sorts after `d@1`, so the next file answers.
        it.seek(&ikey("d", 0))?;
        assert_eq!(it.value(), b"h");
        it.seek(&ikey("j", 1))?;
        assert_eq!(it.value(), b"k");
        it.seek(&ikey("l", 1))?;
        assert!(!it.valid());
        Ok(())
    }

    #[test]
    fn empty_level_and_all_empty_files_are_never_valid() -> Result<()> {
        let (mut empty, _) = level(&[], None);
        empty.seek_to_first()?;
        assert!(!empty.valid());
        empty.seek_to_last()?;
        assert!(!empty.valid());
        empty.seek(&ikey("a", 1))?;
        assert!(!empty.valid());

        let (mut hollow, _) = level(&[("a", "b", &[]), ("c", "d", &[])], None);
        assert!(values_forward(&mut hollow)?.is_empty());
        assert!(values_backward(&mut hollow)?.is_empty());
        Ok(())
    }

    #[test]
    fn open_failure_propagates_and_invalidates() -> Result<()> {
        let (mut it, open_files) = level(&[("a", "a", &["a"]), ("b", "b", &["b"])], Some(1));
        it.seek_to_first()?;
        assert_eq!(it.value(), b"a");
        assert!(it.next().unwrap_err().is_corruption());
        assert!(!it.valid());
        assert_eq!(open_files.load(AtomicOrdering::SeqCst), 0);
        assert!(it.seek_to_last().is_err());
        it.seek_to_first()?;
        assert_eq!(it.value(), b"a");
        Ok(())
    }
}
