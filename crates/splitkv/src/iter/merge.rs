//! A k-way merge of several [`InternalIterator`]s into one ordered cursor.
//!
//! Each read (point or scan) merges the memtables, every L0 file and one iterator per deeper
//! level. The children are kept in a binary heap keyed by their current entries (RocksDB's
//! merging iterator; LevelDB scans every child on each step instead): a step re-sifts only the
//! child that moved. In a long scan one child usually supplies a run of entries; the merge keeps
//! which of the root's two children comes next (the runner-up) until the heap below the root
//! changes, so a step of such a run costs one key comparison whatever the number of children (a
//! plain sift takes two: which child is first, then whether it beats the root). The heap compares
//! keys it asked each child for once, after that child last moved (LevelDB's and RocksDB's
//! `IteratorWrapper`): a comparison then costs no dynamic call down the child's stack of
//! iterators, and neither does reading the current key or value.
//!
//! Invariants:
//! - Moving forward, every valid child is positioned at its first entry `>=` the current key;
//!   moving backward, at its last entry `<=` the current key.
//! - Entries with identical internal keys in several children are yielded in child order when
//!   moving forward (lower index first) and in reverse child order when moving backward, so a
//!   backward walk is exactly the reverse of a forward walk. Direction switches preserve this.
//!   The heap orders by (key, child index) to keep it.
//!
//! After a child returns an error the merged iterator is invalid and must be re-seeked.
//! Exclusively owned (`&mut self`); `Send` because every child is.

use std::cmp::Ordering;

use crate::iter::{EntryOrigin, InternalIterator};
use crate::types::compare_internal_keys;
use crate::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges children that are each sorted by [`compare_internal_keys`].
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// `entries[i]` is the key and value child `i`'s `entry()` returned after it last moved,
    /// while `i` is in the heap (see [`MergingIterator::cached`]).
    entries: Vec<(*const [u8], *const [u8])>,
    /// The valid children's indexes as a binary heap whose root comes first in the current
    /// direction (smallest key moving forward, largest moving backward); the root holds the
    /// current entry, and an empty heap means the merge is exhausted.
    heap: Vec<usize>,
    /// Heap position (1 or 2) of the root's first child in the current direction, while the
    /// heap below the root has not changed since it was found: in a run of entries from the
    /// root's child, each step then compares the moved root with it alone (one key comparison
    /// where a sift takes two).
    runner_up: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children`; the result starts unpositioned.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        let empty = &[][..] as *const [u8];
        let entries = vec![(empty, empty); children.len()];
        MergingIterator { children, entries, heap, runner_up: None, direction: Direction::Forward }
    }

    /// Number of merged children.
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// The child holding the current entry.
    fn current(&self) -> Option<usize> {
        self.heap.first().copied()
    }

    /// Runs a movement; an error leaves the merged iterator invalid rather than half-moved.
    fn guarded(&mut self, movement: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = movement(self);
        if result.is_err() {
            self.heap.clear();
            self.runner_up = None;
        }
        result
    }

    /// Rebuilds the heap from every valid child, for `direction`.
    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        self.runner_up = None;
        self.heap.clear();
        for i in 0..self.children.len() {
            if self.cache_entry(i) {
                self.heap.push(i);
            }
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Remembers child `i`'s current entry, if it has one (returns whether it does); called
    /// after every movement of a child that is or stays in the heap.
    fn cache_entry(&mut self, i: usize) -> bool {
        match self.children[i].entry() {
            Some((key, value)) => {
                self.entries[i] = (key, value);
                true
            }
            None => false,
        }
    }

    /// Child `i`'s current key and value, as cached by [`MergingIterator::cache_entry`].
    fn cached(&self, i: usize) -> (&[u8], &[u8]) {
        let (key, value) = self.entries[i];
        #[allow(unsafe_code)]
        // SAFETY: `entries[i]` was returned by `children[i].entry()` after child `i` last moved
        // (the heap holds only children whose entry was cached since: `rebuild` and `fix_root`
        // cache after every movement, and every movement goes through `&mut self`). An
        // iterator's key and value stay valid until the iterator moves; the child is boxed, so
        // moving the box pointers around `children` moves nothing they point into; and no child
        // mutates what they borrow through `&self`. The returned borrows of `self` end before
        // any movement.
        unsafe {
            (&*key, &*value)
        }
    }

    /// Child `i`'s current key, as cached.
    fn cached_key(&self, i: usize) -> &[u8] {
        self.cached(i).0
    }

    /// True if child `a`'s entry comes out before child `b`'s in the current direction.
    fn before(&self, a: usize, b: usize) -> bool {
        let order = compare_internal_keys(self.cached_key(a), self.cached_key(b)).then(a.cmp(&b));
        match self.direction {
            Direction::Forward => order == Ordering::Less,
            Direction::Reverse => order == Ordering::Greater,
        }
    }

    /// Heap position of whichever of `pos`'s children comes first, if it has any.
    fn first_child(&self, pos: usize) -> Option<usize> {
        let len = self.heap.len();
        let left = 2 * pos + 1;
        if left >= len {
            return None;
        }
        let right = left + 1;
        Some(if right < len && self.before(self.heap[right], self.heap[left]) { right } else { left })
    }

    /// Restores the heap below `pos` after the child there moved.
    fn sift_down(&mut self, mut pos: usize) {
        loop {
            let Some(first) = self.first_child(pos) else { return };
            if !self.before(self.heap[first], self.heap[pos]) {
                return;
            }
            self.heap.swap(pos, first);
            pos = first;
        }
    }

    /// Re-places the root after its child moved: keeps it while it still comes before the
    /// runner-up, else sifts it down; drops it once exhausted.
    fn fix_root(&mut self) {
        let Some(&root) = self.heap.first() else { return };
        if !self.cache_entry(root) {
            self.heap.swap_remove(0);
            self.runner_up = None;
            self.sift_down(0);
            return;
        }
        let runner_up = match self.runner_up {
            Some(pos) => pos,
            None => {
                let Some(pos) = self.first_child(0) else { return };
                self.runner_up = Some(pos);
                pos
            }
        };
        if self.before(root, self.heap[runner_up]) {
            return;
        }
        // The runner-up comes before every other child, so it takes the root's place (the first
        // step of a sift), and the old root sinks below; the heap under the root changes.
        self.heap.swap(0, runner_up);
        self.runner_up = None;
        self.sift_down(runner_up);
    }

    fn seek_all(&mut self, movement: impl Fn(&mut dyn InternalIterator) -> Result<()>) -> Result<()> {
        for child in &mut self.children {
            movement(child.as_mut())?;
        }
        Ok(())
    }

    /// Positions `child` past every entry equal to `key` (it was just sought to `key`).
    fn skip_equal(child: &mut dyn InternalIterator, key: &[u8]) -> Result<()> {
        while child.valid() && compare_internal_keys(child.key(), key) == Ordering::Equal {
            child.next()?;
        }
        Ok(())
    }

    fn next_impl(&mut self) -> Result<()> {
        let Some(current) = self.current() else {
            return Ok(());
        };
        if self.direction == Direction::Reverse {
            // Children were at their last entry <= key(); move each to the first entry that
            // follows the current one in forward order: equal keys count only in later children.
            let key = self.children[current].key().to_vec();
            for (index, child) in self.children.iter_mut().enumerate() {
                if index == current {
                    continue;
                }
                child.seek(&key)?;
                if index < current {
                    Self::skip_equal(child.as_mut(), &key)?;
                }
            }
            self.children[current].next()?;
            self.rebuild(Direction::Forward);
            return Ok(());
        }
        self.children[current].next()?;
        self.fix_root();
        Ok(())
    }

    fn prev_impl(&mut self) -> Result<()> {
        let Some(current) = self.current() else {
            return Ok(());
        };
        if self.direction == Direction::Forward {
            // Children were at their first entry >= key(); move each to the last entry that
            // precedes the current one in forward order: equal keys count only in earlier children.
            let key = self.children[current].key().to_vec();
            for (index, child) in self.children.iter_mut().enumerate() {
                if index == current {
                    continue;
                }
                child.seek(&key)?;
                if index < current {
                    Self::skip_equal(child.as_mut(), &key)?;
                }
                if child.valid() {
                    child.prev()?;
                } else {
                    child.seek_to_last()?;
                }
            }
            self.children[current].prev()?;
            self.rebuild(Direction::Reverse);
            return Ok(());
        }
        self.children[current].prev()?;
        self.fix_root();
        Ok(())
    }
}

#[allow(unsafe_code)]
// SAFETY: the cached key and value pointers point into the children (or at an empty static slice), which
// the merge owns and which are `Send`; they move between threads with them, and are only read
// through `&self`.
unsafe impl Send for MergingIterator {}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|merged| {
            merged.seek_all(|child| child.seek_to_first())?;
            merged.rebuild(Direction::Forward);
            Ok(())
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|merged| {
            merged.seek_all(|child| child.seek_to_last())?;
            merged.rebuild(Direction::Reverse);
            Ok(())
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|merged| {
            merged.seek_all(|child| child.seek(target))?;
            merged.rebuild(Direction::Forward);
            Ok(())
        })
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.guarded(Self::next_impl)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.guarded(Self::prev_impl)
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |current| self.cached_key(current))
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |current| self.cached(current).1)
    }

    fn entry_origin(&self) -> EntryOrigin {
        self.current().map_or(EntryOrigin::Unpositioned, |current| self.children[current].entry_origin())
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::iter::test_util::values_forward;
    use crate::iter::vec::VecIterator;
    use crate::types::{internal_key, SequenceNumber, ValueKind};
    use crate::Error;

    fn ikey(user: &str, seq: u64) -> Vec<u8> {
        internal_key(user.as_bytes(), SequenceNumber(seq), ValueKind::Inline)
    }

    fn child(entries: &[(&str, u64, &str)]) -> Box<dyn InternalIterator> {
        Box::new(VecIterator::new(
            entries.iter().map(|&(user, seq, value)| (ikey(user, seq), value.as_bytes().to_vec())).collect(),
        ))
    }

    #[test]
    fn merges_in_internal_key_order() -> Result<()> {
        let mut merged = MergingIterator::new(vec![
            child(&[("a", 3, "a3"), ("c", 1, "c1")]),
            child(&[("a", 5, "a5"), ("b", 2, "b2")]),
            child(&[]),
            child(&[("a", 1, "a1"), ("d", 9, "d9")]),
        ]);
        assert_eq!(values_forward(&mut merged)?, ["a5", "a3", "a1", "b2", "c1", "d9"]);
        merged.seek_to_last()?;
        let mut backward = Vec::new();
        while merged.valid() {
            backward.push(String::from_utf8_lossy(merged.value()).into_owned());
            merged.prev()?;
        }
        assert_eq!(backward, ["d9", "c1", "b2", "a1", "a3", "a5"]);
        Ok(())
    }

    #[test]
    fn prev_next_interleave_with_one_user_key_in_every_child() -> Result<()> {
        let mut merged = MergingIterator::new(vec![
            child(&[("k", 4, "k4"), ("z", 1, "z1")]),
            child(&[("k", 6, "k6"), ("k", 2, "k2")]),
            child(&[("a", 1, "a1"), ("k", 5, "k5"), ("k", 1, "k1")]),
        ]);
        let expected = ["a1", "k6", "k5", "k4", "k2", "k1", "z1"];
        assert_eq!(values_forward(&mut merged)?, expected);
        // Zig-zag through the run of equal user keys: each switch must land on a neighbour.
        merged.seek(&ikey("k", 5))?;
        assert_eq!(merged.value(), b"k5");
        merged.prev()?;
        assert_eq!(merged.value(), b"k6");
        merged.next()?;
        assert_eq!(merged.value(), b"k5");
        merged.next()?;
        assert_eq!(merged.value(), b"k4");
        merged.prev()?;
        assert_eq!(merged.value(), b"k5");
        merged.next()?;
        merged.next()?;
        merged.next()?;
        assert_eq!(merged.value(), b"k1");
        merged.prev()?;
        assert_eq!(merged.value(), b"k2");
        merged.prev()?;
        merged.prev()?;
        merged.prev()?;
        merged.prev()?;
        assert_eq!(merged.value(), b"a1");
        merged.prev()?;
        assert!(!merged.valid());
        Ok(())
    }

    #[test]
    fn identical_keys_in_several_children_reverse_exactly() -> Result<()> {
        // The same internal key in three children (e.g. a value rewritten without a new
        // sequence): forward yields children in order, backward in reverse, switches agree.
        let mut merged = MergingIterator::new(vec![
            child(&[("k", 1, "first")]),
            child(&[("k", 1, "second")]),
            child(&[("k", 1, "third"), ("m", 1, "m")]),
        ]);
        assert_eq!(values_forward(&mut merged)?, ["first", "second", "third", "m"]);
        merged.seek_to_first()?;
        merged.next()?;
        assert_eq!(merged.value(), b"second");
        merged.prev()?;
        assert_eq!(merged.value(), b"first");
        merged.next()?;
        merged.next()?;
        assert_eq!(merged.value(), b"third");
        merged.prev()?;
        assert_eq!(merged.value(), b"second");
        merged.next()?;
        assert_eq!(merged.value(), b"third");
        merged.next()?;
        assert_eq!(merged.value(), b"m");
        merged.prev()?;
        merged.prev()?;
        assert_eq!(merged.value(), b"second");
        Ok(())
    }

    /// Random walks over a merge compared with a single sorted list of the same entries. A merge
    /// that compared a key it took before the child last moved fails here: each entry's key is
    /// a buffer of its own, so a stale key is the child's previous entry.
    #[test]
    fn random_walks_match_single_sorted_list() -> Result<()> {
        random_walks(0..200, 6, 60, 100, 7)
    }

    /// Longer walks through more children: deeper heaps, and children that run dry mid-walk.
    #[test]
    fn long_runs_through_many_children_match_single_sorted_list() -> Result<()> {
        random_walks(1000..1100, 10, 400, 400, 9)
    }

    /// `steps` random movements per seed of a merge of fewer than `max_children` children,
    /// checked against one sorted list: of every 10, 4 are seeks, `forward_up_to - 4` are `next`
    /// and the rest `prev`.
    fn random_walks(
        seeds: std::ops::Range<u64>,
        max_children: usize,
        max_entries: u64,
        steps: usize,
        forward_up_to: u32,
    ) -> Result<()> {
        for seed in seeds {
            let mut rng = SmallRng::seed_from_u64(seed);
            let children_count = rng.gen_range(1..max_children);
            let mut parts: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); children_count];
            let mut all = Vec::new();
            for seq in 1..rng.gen_range(1..max_entries) {
                let user = format!("{:02}", rng.gen_range(0..15));
                let entry = (ikey(&user, seq), format!("{user}@{seq}").into_bytes());
                parts[rng.gen_range(0..children_count)].push(entry.clone());
                all.push(entry);
            }
            let mut merged =
                MergingIterator::new(parts.into_iter().map(|p| Box::new(VecIterator::new(p)) as _).collect());
            let mut reference = VecIterator::new(all);
            for step in 0..steps {
                let op = rng.gen_range(0..10);
                match op {
                    0 => {
                        merged.seek_to_first()?;
                        reference.seek_to_first()?;
                    }
                    1 => {
                        merged.seek_to_last()?;
                        reference.seek_to_last()?;
                    }
                    2 | 3 => {
                        let target = ikey(&format!("{:02}", rng.gen_range(0..16)), rng.gen_range(0..max_entries));
                        merged.seek(&target)?;
                        reference.seek(&target)?;
                    }
                    _ if op < forward_up_to && reference.valid() => {
                        merged.next()?;
                        reference.next()?;
                    }
                    _ if reference.valid() => {
                        merged.prev()?;
                        reference.prev()?;
                    }
                    _ => continue,
                }
                assert_eq!(merged.valid(), reference.valid(), "seed {seed} step {step} op {op}");
                assert_eq!(merged.key(), reference.key(), "seed {seed} step {step} op {op}");
                assert_eq!(merged.value(), reference.value(), "seed {seed} step {step} op {op}");
            }
        }
        Ok(())
    }

    /// A child that fails every movement, standing in for an unreadable file.
    struct FailingIterator;

    impl InternalIterator for FailingIterator {
        fn valid(&self) -> bool {
            false
        }
        fn seek_to_first(&mut self) -> Result<()> {
            Err(Error::corruption("broken.sst", 7, "bad block"))
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.seek_to_first()
        }
        fn seek(&mut self, _: &[u8]) -> Result<()> {
            self.seek_to_first()
        }
        fn next(&mut self) -> Result<()> {
            self.seek_to_first()
        }
        fn prev(&mut self) -> Result<()> {
            self.seek_to_first()
        }
        fn key(&self) -> &[u8] {
            &[]
        }
        fn value(&self) -> &[u8] {
            &[]
        }
        fn entry_origin(&self) -> EntryOrigin {
            EntryOrigin::Unpositioned
        }
    }

    #[test]
    fn child_errors_propagate_and_invalidate() {
        let mut merged = MergingIterator::new(vec![child(&[("a", 1, "a1")]), Box::new(FailingIterator)]);
        assert!(merged.seek_to_first().unwrap_err().is_corruption());
        assert!(!merged.valid());
        assert!(merged.seek(&ikey("a", 1)).is_err());
        assert!(merged.seek_to_last().is_err());
        assert!(!merged.valid());
    }
}
