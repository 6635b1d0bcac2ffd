//! The user-visible view of the database at one sequence number.
//!
//! [`DbIter`] wraps a merged [`InternalIterator`] (memtables + tables) and turns its stream of
//! versions into user entries, following LevelDB's `DBIter`:
//! - versions newer than the read sequence are invisible;
//! - only the newest visible version of each user key is shown;
//! - a user key whose newest visible version is a deletion is hidden;
//! - keys outside `[lower_bound, upper_bound)` are never shown.
//!
//! Direction invariants (as in LevelDB):
//! - Forward: the inner iterator sits on the entry being shown; `key()`/`raw_value()` read it.
//! - Reverse: the inner iterator sits just before every version of the shown key (on an entry
//!   with a smaller user key, or exhausted), and the shown key and value are copied into
//!   `saved_key` / `saved_value`, because finding the newest version walking backward means
//!   reading past it.
//!
//! An internal key that does not parse is reported as [`Error::Corruption`] at the entry's
//! [`crate::iter::EntryOrigin`] (its table file and data block); after any error the iterator is
//! invalid until re-seeked. Exclusively owned; `Send` when the inner iterator is.

use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::{parse_internal_key, seek_key, user_key, EscapedBytes, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// User-key iteration over internal entries as of a sequence number, within optional bounds.
pub struct DbIter<I: InternalIterator> {
    inner: I,
    sequence: SequenceNumber,
    /// Inclusive lower bound on user keys.
    lower_bound: Option<Vec<u8>>,
    /// Exclusive upper bound on user keys.
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward: the user key whose older versions are being skipped.
    /// Reverse: the user key being shown.
    saved_key: Vec<u8>,
    /// Reverse only: the value being shown.
    saved_value: Vec<u8>,
    /// Kind of the entry being shown (never `Deletion` while valid).
    current_kind: ValueKind,
}

/// The error for the entry `inner` is on, whose internal key does not parse.
fn unparsable(inner: &impl InternalIterator) -> Error {
    inner.entry_origin().corruption(format!("unparsable internal key {}", EscapedBytes(inner.key())))
}

/// `key >= bound`, decided on the first bytes when they differ, before any call to `memcmp`. A
/// scan checks its bound at every entry, and an iterator of the default keyspace always has one
/// (the keys reserved for keyspaces start with 0xFF, `KEYSPACE_MARK`), which a user key's first
/// byte almost always settles (callgrind: one `memcmp` call of the scan's two per entry).
fn at_or_after(key: &[u8], bound: &[u8]) -> bool {
    match (key.first(), bound.first()) {
        (Some(k), Some(b)) if k != b => k > b,
        _ => key >= bound,
    }
}

impl<I: InternalIterator> DbIter<I> {
    /// Reads `inner` as of `sequence`, showing user keys in `[lower_bound, upper_bound)`.
    /// Starts unpositioned.
    pub fn new(inner: I, sequence: SequenceNumber, lower_bound: Option<Vec<u8>>, upper_bound: Option<Vec<u8>>) -> Self {
        DbIter {
            inner,
            sequence: SequenceNumber(sequence.0.min(MAX_SEQUENCE)),
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            current_kind: ValueKind::Inline,
        }
    }

    /// True if positioned on a user entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Only meaningful while `valid()`.
    pub fn key(&self) -> &[u8] {
        debug_assert!(self.valid);
        match self.direction {
            Direction::Forward => user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// Whether `raw_value()` is the value itself or an encoded value pointer.
    pub fn value_kind(&self) -> ValueKind {
        debug_assert!(self.valid);
        self.current_kind
    }

    /// The inline value or the encoded [`crate::types::ValuePointer`], per `value_kind()`.
    pub fn raw_value(&self) -> &[u8] {
        debug_assert!(self.valid);
        match self.direction {
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// Where the shown entry is stored, for reporting it as corrupt (a value pointer that does
    /// not decode, say): `it.entry_origin()?.corruption(reason)`.
    ///
    /// Walking backward leaves the inner iterator before the shown entry, so this seeks the inner
    /// iterator to the entry and back (hence `&mut` and `Result`); meant for error paths, where
    /// that cost does not matter, rather than saving an origin for every entry passed.
    pub fn entry_origin(&mut self) -> Result<EntryOrigin> {
        if !self.valid {
            return Ok(EntryOrigin::Unpositioned);
        }
        if self.direction == Direction::Forward {
            return Ok(self.inner.entry_origin());
        }
        let mut origin = EntryOrigin::Unpositioned;
        self.guarded(|it| {
            // The shown entry is the newest version of `saved_key` visible at `sequence`.
            it.inner.seek(&seek_key(&it.saved_key, it.sequence))?;
            origin = it.inner.entry_origin();
            // Back to just before every version of `saved_key`, as `seek_to_last` leaves it.
            it.inner.seek(&seek_key(&it.saved_key, SequenceNumber(MAX_SEQUENCE)))?;
            if it.inner.valid() {
                it.inner.prev()
            } else {
                it.inner.seek_to_last()
            }
        })?;
        Ok(origin)
    }

    /// Gives back the wrapped iterator.
    pub fn into_inner(self) -> I {
        self.inner
    }

    /// Positions on the first visible key (at or above the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.direction = Direction::Forward;
            it.saved_value.clear();
            match it.lower_bound.as_deref() {
                Some(lower) => it.inner.seek(&seek_key(lower, it.sequence))?,
                None => it.inner.seek_to_first()?,
            }
            it.find_next_user_entry(false)
        })
    }

    /// Positions on the last visible key below the upper bound.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.direction = Direction::Reverse;
            it.saved_value.clear();
            it.saved_key.clear();
            match it.upper_bound.as_deref() {
                Some(upper) => {
                    // The smallest internal key of `upper`: everything before it is below the bound.
                    it.inner.seek(&seek_key(upper, SequenceNumber(MAX_SEQUENCE)))?;
                    if it.inner.valid() {
                        it.inner.prev()?;
                    } else {
                        it.inner.seek_to_last()?;
                    }
                }
                None => it.inner.seek_to_last()?,
            }
            it.find_prev_user_entry()
        })
    }

    /// Positions on the first visible key `>= target` (clamped to the lower bound).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| {
            it.direction = Direction::Forward;
            it.saved_value.clear();
            let target = match it.lower_bound.as_deref() {
                Some(lower) if lower > target => lower,
                _ => target,
            };
            it.inner.seek(&seek_key(target, it.sequence))?;
            it.find_next_user_entry(false)
        })
    }

    /// Moves to the next visible key.
    // Named like the cursor methods of `InternalIterator`; a std `Iterator` adapter (yielding
    // owned, resolved entries) belongs to the layer that resolves value pointers.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if !self.valid {
            return Ok(());
        }
        self.guarded(|it| {
            if it.direction == Direction::Reverse {
                it.direction = Direction::Forward;
                // The inner iterator is before every version of `saved_key`; step into them so
                // the skip below passes them all. `saved_key` already names the key to skip.
                if it.inner.valid() {
                    it.inner.next()?;
                } else {
                    match it.lower_bound.as_deref() {
                        Some(lower) => it.inner.seek(&seek_key(lower, SequenceNumber(MAX_SEQUENCE)))?,
                        None => it.inner.seek_to_first()?,
                    }
                }
            } else {
                it.saved_key.clear();
                it.saved_key.extend_from_slice(user_key(it.inner.key()));
                it.inner.next()?;
            }
            it.find_next_user_entry(true)
        })
    }

    /// Moves to the previous visible key.
    pub fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if !self.valid {
            return Ok(());
        }
        self.guarded(|it| {
            if it.direction == Direction::Forward {
                // Step back past every version of the current key so the reverse invariant holds.
                it.saved_key.clear();
                it.saved_key.extend_from_slice(user_key(it.inner.key()));
                loop {
                    it.inner.prev()?;
                    if !it.inner.valid() || user_key(it.inner.key()) < it.saved_key.as_slice() {
                        break;
                    }
                }
                it.direction = Direction::Reverse;
            }
            it.find_prev_user_entry()
        })
    }

    /// Runs a movement; an error leaves the iterator invalid rather than half-moved.
    fn guarded(&mut self, movement: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = movement(self);
        if result.is_err() {
            self.valid = false;
            self.direction = Direction::Forward;
            self.saved_key.clear();
            self.saved_value.clear();
        }
        result
    }

    /// Forward: stops on the first visible, live version at or after the inner position.
    /// With `skipping`, versions of user keys `<= saved_key` are hidden (already shown or deleted).
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        while self.inner.valid() {
            let parsed = parse_internal_key(self.inner.key()).ok_or_else(|| unparsable(&self.inner))?;
            if self.upper_bound.as_deref().is_some_and(|upper| at_or_after(parsed.user_key, upper)) {
                break;
            }
            if parsed.sequence <= self.sequence {
                match parsed.kind {
                    ValueKind::Deletion => {
                        // Older versions of this key are shadowed by the tombstone.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        skipping = true;
                    }
                    kind => {
                        if !(skipping && parsed.user_key <= self.saved_key.as_slice()) {
                            self.current_kind = kind;
                            self.valid = true;
                            self.saved_key.clear();
                            return Ok(());
                        }
                    }
                }
            }
            self.inner.next()?;
        }
        self.valid = false;
        self.saved_key.clear();
        Ok(())
    }

    /// Reverse: walks back from the inner position over the versions of one user key, keeping
    /// the newest visible one, and stops before the previous user key.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        // `Deletion` doubles as "nothing found yet".
        let mut found_kind = ValueKind::Deletion;
        while self.inner.valid() {
            let parsed = parse_internal_key(self.inner.key()).ok_or_else(|| unparsable(&self.inner))?;
            if self.lower_bound.as_deref().is_some_and(|lower| !at_or_after(parsed.user_key, lower)) {
                break;
            }
            if parsed.sequence <= self.sequence {
                if found_kind != ValueKind::Deletion && parsed.user_key < self.saved_key.as_slice() {
                    // All versions of `saved_key` have been seen; the newest visible one stands.
                    break;
                }
                found_kind = parsed.kind;
                if parsed.kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(parsed.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.inner.value());
                }
            }
            self.inner.prev()?;
        }
        if found_kind == ValueKind::Deletion {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
            self.current_kind = found_kind;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Arc;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::fs::{FileSystem, OsFileSystem};
    use crate::iter::level::{LevelFile, LevelFileOpener, LevelIterator};
    use crate::iter::merge::MergingIterator;
    use crate::iter::vec::VecIterator;
    use crate::iter::KeepAlive;
    use crate::sstable::{Table, TableBuilder, TableOptions};
    use crate::types::{internal_key, FileNumber};

    /// One write as the model sees it.
    #[derive(Clone, Debug)]
    struct Version {
        user_key: Vec<u8>,
        sequence: u64,
        kind: ValueKind,
        value: Vec<u8>,
    }

    impl Version {
        fn entry(&self) -> (Vec<u8>, Vec<u8>) {
            (internal_key(&self.user_key, SequenceNumber(self.sequence), self.kind), self.value.clone())
        }
    }

    type Shown = (Vec<u8>, ValueKind, Vec<u8>);
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// What a reader at `sequence` within the bounds must see, in key order.
    fn model(versions: &[Version], sequence: u64, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Vec<Shown> {
        let mut newest: BTreeMap<&[u8], &Version> = BTreeMap::new();
        for version in versions.iter().filter(|v| v.sequence <= sequence) {
            let slot = newest.entry(&version.user_key).or_insert(version);
            if slot.sequence < version.sequence {
                *slot = version;
            }
        }
        newest
            .into_iter()
            .filter(|(key, v)| {
                v.kind != ValueKind::Deletion
                    && lower.is_none_or(|lower| *key >= lower)
                    && upper.is_none_or(|upper| *key < upper)
            })
            .map(|(key, v)| (key.to_vec(), v.kind, v.value.clone()))
            .collect()
    }

    /// Spreads sorted `entries` over files with empty files mixed in, behind a LevelIterator.
    fn level_of(mut entries: Entries, rng: &mut SmallRng) -> LevelIterator {
        entries.sort_by(|a, b| crate::types::compare_internal_keys(&a.0, &b.0));
        let mut contents: HashMap<u64, Entries> = HashMap::new();
        let mut files = Vec::new();
        let mut rest = entries.as_slice();
        let mut last_largest = entries.first().map(|e| e.0.clone()).unwrap_or_default();
        while !rest.is_empty() || files.is_empty() {
            let id = files.len() as u64;
            if rng.gen_bool(0.25) || rest.is_empty() {
                // An empty file claiming the boundary key, as a fully filtered file might.
                files.push(LevelFile { id, size: 0, smallest: last_largest.clone(), largest: last_largest.clone() });
                contents.insert(id, Vec::new());
                if rest.is_empty() {
                    break;
                }
                continue;
            }
            let take = rng.gen_range(1..=rest.len().min(6));
            let (chunk, remainder) = rest.split_at(take);
            rest = remainder;
            last_largest = chunk[take - 1].0.clone();
            files.push(LevelFile { id, size: 1, smallest: chunk[0].0.clone(), largest: last_largest.clone() });
            contents.insert(id, chunk.to_vec());
        }
        let open: LevelFileOpener = Arc::new(move |file: &LevelFile| {
            let entries = contents.get(&file.id).cloned().unwrap_or_default();
            Ok(Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>)
        });
        LevelIterator::new(files, open)
    }

    fn random_user_key(rng: &mut SmallRng) -> Vec<u8> {
        let len = rng.gen_range(0..=3);
        (0..len).map(|_| b"abcd"[rng.gen_range(0..4)]).collect()
    }

    fn shown<I: InternalIterator>(it: &DbIter<I>) -> Option<Shown> {
        it.valid().then(|| (it.key().to_vec(), it.value_kind(), it.raw_value().to_vec()))
    }

    fn run_random_case(seed: u64) -> Result<()> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut versions: Vec<Version> = Vec::new();
        let mut used = std::collections::HashSet::new();
        let mut max_sequence = 0;
        for _ in 0..rng.gen_range(0..80) {
            let user_key = random_user_key(&mut rng);
            let sequence = rng.gen_range(1..50u64);
            if !used.insert((user_key.clone(), sequence)) {
                continue;
            }
            max_sequence = max_sequence.max(sequence);
            let kind = match rng.gen_range(0..10) {
                0..=2 => ValueKind::Deletion,
                3..=6 => ValueKind::Inline,
                _ => ValueKind::Pointer,
            };
            let value = match kind {
                ValueKind::Deletion => Vec::new(),
                _ => format!("{}@{sequence}", EscapedBytes(&user_key)).into_bytes(),
            };
            versions.push(Version { user_key, sequence, kind, value });
        }

        let children_count = rng.gen_range(1..=5);
        let mut parts: Vec<Entries> = vec![Vec::new(); children_count];
        for version in &versions {
            parts[rng.gen_range(0..children_count)].push(version.entry());
        }
        let children: Vec<Box<dyn InternalIterator>> = parts
            .into_iter()
            .map(|part| -> Box<dyn InternalIterator> {
                if rng.gen_bool(0.4) {
                    Box::new(level_of(part, &mut rng))
                } else {
                    Box::new(VecIterator::new(part))
                }
            })
            .collect();

        let sequence = match rng.gen_range(0..4) {
            0 => MAX_SEQUENCE,
            _ => rng.gen_range(0..=max_sequence + 1),
        };
        let lower = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
        let upper = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
        let expected = model(&versions, sequence, lower.as_deref(), upper.as_deref());
        let mut it =
            DbIter::new(MergingIterator::new(children), SequenceNumber(sequence), lower.clone(), upper.clone());

        // Model cursor: index into `expected`, `None` when invalid.
        let mut cursor: Option<usize> = None;
        let mut log = Vec::new();
        for step in 0..120 {
            match rng.gen_range(0..10) {
                0 => {
                    log.push("seek_to_first".to_string());
                    it.seek_to_first()?;
                    cursor = (!expected.is_empty()).then_some(0);
                }
                1 => {
                    log.push("seek_to_last".to_string());
                    it.seek_to_last()?;
                    cursor = expected.len().checked_sub(1);
                }
                2 | 3 => {
                    let target = random_user_key(&mut rng);
                    log.push(format!("seek({})", EscapedBytes(&target)));
                    it.seek(&target)?;
                    let index = expected.partition_point(|(key, _, _)| *key < target);
                    cursor = (index < expected.len()).then_some(index);
                }
                4..=6 if cursor.is_some() => {
                    log.push("next".to_string());
                    it.next()?;
                    cursor = cursor.map(|c| c + 1).filter(|&c| c < expected.len());
                }
                _ if cursor.is_some() => {
                    log.push("prev".to_string());
                    it.prev()?;
                    cursor = cursor.and_then(|c| c.checked_sub(1));
                }
                _ => continue,
            }
            let want = cursor.map(|c| expected[c].clone());
            assert_eq!(
                shown(&it),
                want,
                "seed {seed} step {step} sequence {sequence} lower {lower:?} upper {upper:?} ops {log:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn bound_checks_agree_with_byte_order() {
        let keys: [&[u8]; 9] =
            [b"", b"\x00", b"a", b"ab", b"b", b"\xfe\xff", b"\xff", b"\xff\xff\xff\xff", b"\xff\xff\xff\xff\x00"];
        for key in keys {
            for bound in keys {
                assert_eq!(at_or_after(key, bound), key >= bound, "{key:?} against {bound:?}");
            }
        }
    }

    #[test]
    fn random_operations_match_btreemap_model() {
        let base: u64 = std::env::var("SPLITKV_ITER_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed);
        for case in 0..400 {
            let seed = base.wrapping_add(case);
            if let Err(err) = run_random_case(seed) {
                panic!("seed {seed}: unexpected error {err}");
            }
        }
    }

    fn db_iter(
        entries: &[(&str, u64, ValueKind, &str)],
        sequence: u64,
        lower: Option<&str>,
        upper: Option<&str>,
    ) -> DbIter<VecIterator> {
        let entries = entries
            .iter()
            .map(|&(key, seq, kind, value)| {
                (internal_key(key.as_bytes(), SequenceNumber(seq), kind), value.as_bytes().to_vec())
            })
            .collect();
        DbIter::new(
            VecIterator::new(entries),
            SequenceNumber(sequence),
            lower.map(|l| l.as_bytes().to_vec()),
            upper.map(|u| u.as_bytes().to_vec()),
        )
    }

    fn current<I: InternalIterator>(it: &DbIter<I>) -> Option<(String, String)> {
        it.valid().then(|| {
            (String::from_utf8_lossy(it.key()).into_owned(), String::from_utf8_lossy(it.raw_value()).into_owned())
        })
    }

    fn pair(key: &str, value: &str) -> Option<(String, String)> {
        Some((key.to_string(), value.to_string()))
    }

    use ValueKind::{Deletion as Del, Inline as Put, Pointer as Ptr};

    #[test]
    fn direction_switches_over_many_versions_of_each_key() -> Result<()> {
        let mut it = db_iter(
            &[
                ("a", 1, Put, "a1"),
                ("a", 3, Put, "a3"),
                ("a", 9, Put, "a9-invisible"),
                ("b", 2, Put, "b2"),
                ("b", 4, Ptr, "b4"),
                ("b", 5, Del, ""),
                ("b", 6, Put, "b6"),
                ("c", 2, Put, "c2"),
                ("c", 7, Put, "c7-invisible"),
            ],
            6,
            None,
            None,
        );
        it.seek_to_first()?;
        assert_eq!(current(&it), pair("a", "a3"));
        it.next()?;
        assert_eq!(current(&it), pair("b", "b6"));
        it.prev()?;
        assert_eq!(current(&it), pair("a", "a3"));
        it.next()?;
        assert_eq!(current(&it), pair("b", "b6"));
        it.next()?;
        assert_eq!(current(&it), pair("c", "c2"));
        it.prev()?;
        assert_eq!(current(&it), pair("b", "b6"));
        it.prev()?;
        it.next()?;
        it.next()?;
        assert_eq!(current(&it), pair("c", "c2"));
        it.next()?;
        assert!(!it.valid());

        // At sequence 4 the pointer version of `b` is the newest visible one.
        let mut older = db_iter(&[("b", 2, Put, "b2"), ("b", 4, Ptr, "b4"), ("b", 5, Del, "")], 4, None, None);
        older.seek_to_last()?;
        assert_eq!((current(&older), older.value_kind()), (pair("b", "b4"), Ptr));
        older.seek(b"b")?;
        assert_eq!((current(&older), older.value_kind()), (pair("b", "b4"), Ptr));
        Ok(())
    }

    #[test]
    fn deleted_keys_at_both_edges_are_skipped() -> Result<()> {
        let entries = [
            ("a", 1, Put, "a1"),
            ("a", 2, Del, ""),
            ("b", 1, Put, "b1"),
            ("c", 3, Put, "c3"),
            ("d", 1, Put, "d1"),
            ("d", 4, Del, ""),
            ("e", 5, Del, ""),
        ];
        let mut it = db_iter(&entries, 10, None, None);
        it.seek_to_first()?;
        assert_eq!(current(&it), pair("b", "b1"));
        it.prev()?;
        assert!(!it.valid());
        it.seek_to_last()?;
        assert_eq!(current(&it), pair("c", "c3"));
        it.next()?;
        assert!(!it.valid());
        it.seek(b"d")?;
        assert!(!it.valid());
        it.seek(b"a")?;
        assert_eq!(current(&it), pair("b", "b1"));

        // Before the deletions, the edge keys are back.
        let mut before = db_iter(&entries, 1, None, None);
        before.seek_to_first()?;
        assert_eq!(current(&before), pair("a", "a1"));
        before.seek_to_last()?;
        assert_eq!(current(&before), pair("d", "d1"));
        before.prev()?;
        assert_eq!(current(&before), pair("b", "b1"));

        let mut everything_deleted = db_iter(&[("a", 1, Put, "a1"), ("a", 2, Del, "")], 5, None, None);
        everything_deleted.seek_to_first()?;
        assert!(!everything_deleted.valid());
        everything_deleted.seek_to_last()?;
        assert!(!everything_deleted.valid());
        Ok(())
    }

    #[test]
    fn bounds_clamp_seeks_and_stop_movement() -> Result<()> {
        let entries = [
            ("a", 1, Put, "a"),
            ("b", 1, Put, "b"),
            ("c", 1, Put, "c"),
            ("c", 2, Put, "c2"),
            ("d", 1, Put, "d"),
            ("e", 1, Put, "e"),
        ];
        let mut it = db_iter(&entries, 10, Some("b"), Some("d"));
        it.seek_to_first()?;
        assert_eq!(current(&it), pair("b", "b"));
        it.prev()?;
        assert!(!it.valid());
        it.seek(b"a")?;
        assert_eq!(current(&it), pair("b", "b"));
        it.seek_to_last()?;
        assert_eq!(current(&it), pair("c", "c2"));
        it.next()?;
        assert!(!it.valid());
        it.seek(b"d")?;
        assert!(!it.valid());
        it.seek(b"c")?;
        it.prev()?;
        it.next()?;
        assert_eq!(current(&it), pair("c", "c2"));

        // An upper bound above every key and one equal to the first key.
        let mut high = db_iter(&entries, 10, None, Some("z"));
        high.seek_to_last()?;
        assert_eq!(current(&high), pair("e", "e"));
        let mut nothing = db_iter(&entries, 10, None, Some("a"));
        nothing.seek_to_last()?;
        assert!(!nothing.valid());
        nothing.seek_to_first()?;
        assert!(!nothing.valid());

        let mut crossed = db_iter(&entries, 10, Some("d"), Some("b"));
        crossed.seek_to_first()?;
        assert!(!crossed.valid());
        crossed.seek_to_last()?;
        assert!(!crossed.valid());
        Ok(())
    }

    #[test]
    fn reverse_then_forward_from_before_the_first_key() -> Result<()> {
        // prev() off the front leaves the iterator invalid; a new seek recovers.
        let mut it = db_iter(&[("a", 1, Put, "a"), ("b", 1, Put, "b")], 5, None, None);
        it.seek_to_last()?;
        it.prev()?;
        assert_eq!(current(&it), pair("a", "a"));
        it.next()?;
        assert_eq!(current(&it), pair("b", "b"));
        it.prev()?;
        it.prev()?;
        assert!(!it.valid());
        it.seek_to_first()?;
        assert_eq!(current(&it), pair("a", "a"));
        Ok(())
    }

    /// Writes `entries` (in order) to a table in `dir` with tiny data blocks, so that later
    /// entries sit in blocks at non-zero offsets.
    fn table_of(dir: &std::path::Path, entries: &Entries) -> Result<Arc<Table>> {
        let path = dir.join("000007.sst");
        let opts = TableOptions { block_size: 32, ..TableOptions::default() };
        let mut builder = TableBuilder::new(OsFileSystem.create(&path)?, opts);
        for (key, value) in entries {
            builder.add(key, value)?;
        }
        let size = builder.finish()?.size;
        Table::open(OsFileSystem.open(&path)?, path, FileNumber(7), size, &opts, None, None)
    }

    #[test]
    fn unparsable_internal_key_is_corruption_at_its_table_block_in_both_directions() -> Result<()> {
        // A bad kind byte passes the block checksum (the table was written that way); only the
        // reader that parses the key notices, several iterators above the table.
        let put =
            |key: &str| (internal_key(key.as_bytes(), SequenceNumber(1), ValueKind::Inline), key.as_bytes().to_vec());
        let mut bad_kind = internal_key(b"m", SequenceNumber(1), ValueKind::Inline);
        let kind_byte = bad_kind.len() - 8;
        bad_kind[kind_byte] = 0x7f;
        let mut entries: Entries = ["a", "c", "e", "g", "i", "k"].map(put).to_vec();
        entries.push((bad_kind.clone(), b"x".to_vec()));
        entries.push(put("z"));
        let dir = tempfile::tempdir()?;
        let table = table_of(dir.path(), &entries)?;
        let block_offset = table.approximate_offset_of(&bad_kind);
        assert!(block_offset > 0, "the bad key should not be in the first block");

        // The table behind every kind of wrapper: a level (opening it in a KeepAlive, as the
        // index does), merged with an in-memory child.
        let file = LevelFile { id: 7, size: table.file_size(), smallest: entries[0].0.clone(), largest: put("z").0 };
        let opened = Arc::clone(&table);
        let open: LevelFileOpener = Arc::new(move |_: &LevelFile| {
            Ok(Box::new(KeepAlive { inner: opened.iter(true), keep: () }) as Box<dyn InternalIterator>)
        });
        let children: Vec<Box<dyn InternalIterator>> =
            vec![Box::new(VecIterator::new(vec![put("b")])), Box::new(LevelIterator::new(vec![file], open))];
        let mut it = DbIter::new(MergingIterator::new(children), SequenceNumber(5), None, None);
        let at_bad_block = |err: Error| match err {
            Error::Corruption { file, offset, .. } => file == table.path() && offset == block_offset,
            _ => false,
        };

        // Reached by next() and by seek(), walking forward...
        it.seek(b"k")?;
        assert_eq!(current(&it), pair("k", "k"));
        let err = it.next().unwrap_err();
        assert!(err.to_string().contains("000007.sst"), "{err}");
        assert!(at_bad_block(err));
        assert!(!it.valid());
        assert!(at_bad_block(it.seek(b"l").unwrap_err()));
        // ...and by seek_to_last() and prev(), walking backward.
        assert!(at_bad_block(it.seek_to_last().unwrap_err()));
        assert!(!it.valid());
        it.seek(b"z")?;
        assert_eq!(current(&it), pair("z", "z"));
        assert!(at_bad_block(it.prev().unwrap_err()));
        it.seek(b"b")?;
        assert_eq!(current(&it), pair("b", "b"));

        // A key shorter than a trailer sorts first: reached by seek_to_first() and by prev().
        let good = put("a");
        let mut it = DbIter::new(
            VecIterator::new(vec![good, (b"short".to_vec(), b"x".to_vec())]),
            SequenceNumber(5),
            None,
            None,
        );
        assert!(it.seek_to_first().unwrap_err().is_corruption());
        assert!(it.seek_to_last().unwrap_err().is_corruption());
        assert!(!it.valid());
        it.seek(b"a")?;
        assert_eq!(current(&it), pair("a", "a"));
        assert!(it.prev().unwrap_err().is_corruption());
        Ok(())
    }

    #[test]
    fn entry_origin_names_the_shown_entry_in_both_directions() -> Result<()> {
        // Several versions per key, one data block every entry or two, behind a merge.
        let mut entries = Entries::new();
        for key in ["a", "b", "c", "d"] {
            for seq in [9, 4, 1] {
                let value = format!("{key}{seq}").into_bytes();
                entries.push((internal_key(key.as_bytes(), SequenceNumber(seq), ValueKind::Inline), value));
            }
        }
        let dir = tempfile::tempdir()?;
        let table = table_of(dir.path(), &entries)?;
        let children: Vec<Box<dyn InternalIterator>> = vec![Box::new(table.iter(true))];
        let mut it = DbIter::new(MergingIterator::new(children), SequenceNumber(5), None, None);
        let origin_of = |key: &str| EntryOrigin::Table {
            file: table.path().to_path_buf(),
            block_offset: table.approximate_offset_of(&internal_key(
                key.as_bytes(),
                SequenceNumber(4),
                ValueKind::Inline,
            )),
        };

        it.seek(b"b")?;
        assert_eq!(it.entry_origin()?, origin_of("b"));
        // Backward, the inner iterator is before the shown entry; asking must not move the walk.
        it.seek_to_last()?;
        assert_eq!(current(&it), pair("d", "d4"));
        assert_eq!(it.entry_origin()?, origin_of("d"));
        it.prev()?;
        assert_eq!(it.entry_origin()?, origin_of("c"));
        assert_eq!(current(&it), pair("c", "c4"));
        it.prev()?;
        assert_eq!(current(&it), pair("b", "b4"));
        assert_eq!(it.entry_origin()?, origin_of("b"));
        it.next()?;
        assert_eq!(current(&it), pair("c", "c4"));
        it.prev()?;
        it.prev()?;
        assert_eq!(it.entry_origin()?, origin_of("a"));
        it.prev()?;
        assert!(!it.valid());
        assert_eq!(it.entry_origin()?, EntryOrigin::Unpositioned);
        assert_ne!(origin_of("a"), origin_of("d"));
        Ok(())
    }

    #[test]
    fn inner_errors_propagate() -> Result<()> {
        let good = vec![(internal_key(b"a", SequenceNumber(1), ValueKind::Inline), b"a".to_vec())];
        let broken: Box<dyn InternalIterator> = Box::new(level_with_broken_file());
        let merged = MergingIterator::new(vec![Box::new(VecIterator::new(good)), broken]);
        let mut it = DbIter::new(merged, SequenceNumber(5), None, None);
        assert!(it.seek_to_first().is_err());
        assert!(!it.valid());
        assert!(it.seek_to_last().is_err());
        Ok(())
    }

    fn level_with_broken_file() -> LevelIterator {
        let key = internal_key(b"b", SequenceNumber(1), ValueKind::Inline);
        let file = LevelFile { id: 3, size: 10, smallest: key.clone(), largest: key };
        let open: LevelFileOpener =
            Arc::new(|file: &LevelFile| Err(Error::corruption(format!("{}.sst", file.id), 12, "bad block checksum")));
        LevelIterator::new(vec![file], open)
    }
}
