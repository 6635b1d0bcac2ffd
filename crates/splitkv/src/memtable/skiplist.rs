//! The memtable's ordered map: a concurrent skiplist whose nodes live in an arena.
//!
//! Each entry is one node carved out of the arena: a header, a tower of `height` links, then the
//! key and the value bytes. Nothing is ever removed or moved, and the arena frees every node at
//! once when the list is dropped, so a reader that holds the list may follow any link it loads
//! for as long as it holds the list. Against a skiplist of separately allocated nodes
//! (`crossbeam-skiplist`, which this replaced) a put allocates nothing of its own, a search pins
//! no epoch and counts no references, and a node is smaller (no reference count, key and value
//! bytes packed after the tower).
//!
//! Insertion is lock-free between inserters, as in RocksDB's `InlineSkipList`: a node is linked
//! bottom-up, each level with one compare-and-swap on its predecessor's link, searching that
//! level again from the same predecessor if another insert got in first. A node's key, value and
//! empty tower are written before its level-0 link is published (`Release`; readers load links
//! with `Acquire`), so a reader that reaches a node sees it whole. A reader may find an upper
//! link still empty while the node is being linked; that only sends its search down a level.
//!
//! The list remembers where its last insert went at every level (a [`Splice`], as RocksDB's
//! `InlineSkipList` keeps one for sequential inserts). An insert whose key falls between those
//! neighbours starts its search there instead of at the head, so keys written in ascending
//! order (a bulk load, `fillseq`, a key-order rewrite) link in a few comparisons whatever the
//! list's size. The hint is only consulted while inserts keep landing right after the previous
//! one, so keys in random order pay only for taking its lock (never waited for) and a pointer
//! comparison.
//!
//! Keys are ordered by [`compare_internal_keys`] and must be unique (the memtable's internal keys
//! carry a sequence number).
//!
//! Thread-safety: `insert` and every read may run at once from any number of threads.

use std::cmp::Ordering as KeyOrder;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::types::compare_internal_keys;

/// Tallest tower. With one node in four reaching each next level (LevelDB's branching), 12
/// levels keep searches logarithmic up to about 4^12 = 16M entries, far past a memtable's.
const MAX_HEIGHT: usize = 12;

/// A node's fixed part; its tower, key and value follow it in the arena. Never changed once
/// written.
#[repr(C)]
struct Header {
    key_len: u32,
    value_len: u32,
    height: u32,
    _reserved: u32,
}

const HEADER_BYTES: usize = size_of::<Header>();
const LINK_BYTES: usize = size_of::<AtomicPtr<Header>>();
/// Cache lines [`SkipList::prefetch_next`] asks for: a 100-byte value's node spans about three.
const PREFETCH_LINES: usize = 3;

/// Bytes of a node with this tower, key and value.
fn node_size(height: usize, key_len: usize, value_len: usize) -> usize {
    HEADER_BYTES + height * LINK_BYTES + key_len + value_len
}

/// A node of a list borrowed for `'a`. It is a pointer that keeps the arena's provenance over
/// the whole node (a `&Header` would only cover the header), so the tower, key and value are
/// reached through it.
#[derive(Clone, Copy)]
pub(super) struct Node<'a> {
    ptr: NonNull<Header>,
    _list: PhantomData<&'a SkipList>,
}

impl<'a> Node<'a> {
    fn header(self) -> &'a Header {
        #[allow(unsafe_code)]
        // SAFETY: the header was written before the node was published and never changes; the
        // node lives in the arena for as long as the list is borrowed (`'a`).
        unsafe {
            self.ptr.as_ref()
        }
    }

    /// The link to the next node at `level` (`level < height`).
    fn next(self, level: usize) -> &'a AtomicPtr<Header> {
        debug_assert!(level < self.header().height as usize);
        #[allow(unsafe_code)]
        // SAFETY: the tower's `height` links follow the header inside the node's block, which
        // is 8-aligned (the arena hands out 8-aligned blocks and the header is 16 bytes); links
        // are only ever accessed atomically.
        unsafe {
            &*self.ptr.as_ptr().cast::<u8>().add(HEADER_BYTES + level * LINK_BYTES).cast::<AtomicPtr<Header>>()
        }
    }

    fn bytes_after_tower(self, skip: usize, len: u32) -> &'a [u8] {
        let header = self.header();
        #[allow(unsafe_code)]
        // SAFETY: the key and value were written after the tower, inside the node's block,
        // before the node was published; they never change afterwards.
        unsafe {
            let start = self.ptr.as_ptr().cast::<u8>().add(HEADER_BYTES + header.height as usize * LINK_BYTES);
            std::slice::from_raw_parts(start.add(skip), len as usize)
        }
    }

    pub(super) fn key(self) -> &'a [u8] {
        self.bytes_after_tower(0, self.header().key_len)
    }

    pub(super) fn value(self) -> &'a [u8] {
        let header = self.header();
        self.bytes_after_tower(header.key_len as usize, header.value_len)
    }

    /// The node as a position that outlives the borrow (see [`SkipList::at`]).
    pub(super) fn position(self) -> Position {
        Position(self.ptr)
    }
}

/// Where a node is, kept by a cursor across calls; only [`SkipList::at`] of the same list turns
/// it back into a node.
#[derive(Clone, Copy)]
pub(super) struct Position(NonNull<Header>);

#[allow(unsafe_code)]
// SAFETY: a position is an address; it is only dereferenced through `SkipList::at`, whose
// caller vouches that the list owning the node is alive.
unsafe impl Send for Position {}
#[allow(unsafe_code)]
// SAFETY: as above.
unsafe impl Sync for Position {}

/// Bump allocation from chunks that never move; freed all at once when dropped.
struct Arena {
    chunks: Mutex<Chunks>,
    chunk_words: usize,
}

/// Chunks of 8-byte words (so that every block handed out is 8-aligned), held as raw pointers:
/// blocks handed out are written and read by other threads while new blocks are carved.
struct Chunks {
    all: Vec<(NonNull<u64>, usize)>,
    /// The chunk blocks are carved from: its next free word and the words left in it.
    next: Option<NonNull<u64>>,
    left: usize,
}

#[allow(unsafe_code)]
// SAFETY: the chunks are plain heap memory owned by the arena; the pointers carry no thread
// affinity.
unsafe impl Send for Chunks {}

impl Arena {
    fn new(chunk_bytes: usize) -> Self {
        let chunks = Chunks { all: Vec::new(), next: None, left: 0 };
        Arena { chunks: Mutex::new(chunks), chunk_words: chunk_bytes.div_ceil(8).max(1) }
    }

    /// A block of `bytes` (8-aligned, uninitialised) that lives as long as the arena.
    fn alloc(&self, bytes: usize) -> NonNull<u8> {
        let words = bytes.div_ceil(8);
        let mut chunks = self.chunks.lock();
        let start = match chunks.next {
            Some(next) if words <= chunks.left => next,
            _ => {
                let len = words.max(self.chunk_words);
                let chunk = NonNull::from(Box::leak(Box::<[u64]>::new_uninit_slice(len))).cast::<u64>();
                chunks.all.push((chunk, len));
                chunks.left = len;
                chunk
            }
        };
        #[allow(unsafe_code)]
        // SAFETY: `start` has at least `words` free words before the end of its chunk (checked
        // above), so the new free pointer stays inside the chunk or one past its end.
        let next = unsafe { start.add(words) };
        chunks.next = Some(next);
        chunks.left -= words;
        start.cast::<u8>()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for &(chunk, len) in &self.chunks.get_mut().all {
            #[allow(unsafe_code)]
            // SAFETY: each chunk came from `Box::leak` of a boxed slice of `len` words, and is
            // freed once, here, when nothing can reach the arena any more.
            drop(unsafe {
                Box::from_raw(ptr::slice_from_raw_parts_mut(chunk.as_ptr().cast::<MaybeUninit<u64>>(), len))
            });
        }
    }
}

/// Where the last insert through the hint went: at every level below `height`, the node before
/// it and the link that followed that node. Nodes are never removed, so the pointers stay valid
/// as long as the list; later inserts elsewhere may make a level stale, which costs only a search.
struct Splice {
    prev: [NonNull<Header>; MAX_HEIGHT],
    next: [*mut Header; MAX_HEIGHT],
    /// Levels filled in; above it the splice is the head and the end of the list.
    height: usize,
    /// Whether the last insert went after the one before it, within the splice's reach (right
    /// after it, or below a level that still bracketed it). Only then are `prev` and `next`
    /// kept and checked: keys in random order would pay for the check and the copy on every
    /// insert and never gain from them.
    ascending: bool,
    /// The node the last insert through the hint linked (the head before any).
    last: NonNull<Header>,
}

#[allow(unsafe_code)]
// SAFETY: the pointers are addresses of nodes in the list's arena, only followed through the
// list while it is alive, exactly like the links themselves.
unsafe impl Send for Splice {}

/// The ordered map itself; see the module header.
pub(super) struct SkipList {
    arena: Arena,
    /// A node without key whose tower is `MAX_HEIGHT` tall: every search starts here.
    head: NonNull<Header>,
    /// The tallest tower linked so far (at least 1).
    height: AtomicUsize,
    len: AtomicUsize,
    /// Drawn from for tower heights (a Weyl sequence, mixed).
    seed: AtomicU64,
    /// Where the last insert that held it went. Concurrent inserters that find it taken search
    /// from the head instead of waiting: it is only a hint.
    hint: Mutex<Splice>,
}

#[allow(unsafe_code)]
// SAFETY: the list owns its arena; the raw pointers point into it and nodes are only mutated
// through their atomic links, so sharing and sending the list is as safe as sharing the arena.
unsafe impl Send for SkipList {}
#[allow(unsafe_code)]
// SAFETY: as above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list whose arena grows by chunks of about `chunk_bytes`.
    pub(super) fn new(chunk_bytes: usize) -> Self {
        let arena = Arena::new(chunk_bytes);
        let head = Self::new_node(&arena, MAX_HEIGHT, &[], &[]);
        let hint = Mutex::new(Splice {
            prev: [head; MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
            height: 0,
            ascending: false,
            last: head,
        });
        SkipList { arena, head, height: AtomicUsize::new(1), len: AtomicUsize::new(0), seed: AtomicU64::new(0), hint }
    }

    /// Writes a node with an empty tower into the arena.
    fn new_node(arena: &Arena, height: usize, key: &[u8], value: &[u8]) -> NonNull<Header> {
        debug_assert!(align_of::<Header>() <= 8 && align_of::<AtomicPtr<Header>>() <= 8);
        let (Ok(key_len), Ok(value_len)) = (u32::try_from(key.len()), u32::try_from(value.len())) else {
            // Unreachable: the value log refuses a record (key and value together) over 4 GiB
            // before anything is applied to the memtable.
            panic!("memtable entry over 4 GiB");
        };
        let block = arena.alloc(node_size(height, key.len(), value.len()));
        #[allow(unsafe_code)]
        // SAFETY: `block` is a fresh, 8-aligned block of `node_size` bytes that nothing else
        // sees yet: header, tower, key and value are written inside it, in that order.
        unsafe {
            block.as_ptr().cast::<Header>().write(Header { key_len, value_len, height: height as u32, _reserved: 0 });
            let tower = block.as_ptr().add(HEADER_BYTES).cast::<AtomicPtr<Header>>();
            for level in 0..height {
                tower.add(level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let data = block.as_ptr().add(HEADER_BYTES + height * LINK_BYTES);
            ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        block.cast::<Header>()
    }

    fn node(&self, ptr: NonNull<Header>) -> Node<'_> {
        Node { ptr, _list: PhantomData }
    }

    fn head(&self) -> Node<'_> {
        self.node(self.head)
    }

    /// The node a loaded link points to, `None` at the end of a level. A non-null link was
    /// published (`Release`) after its node was written whole, and was loaded with `Acquire`.
    fn follow(&self, link: *mut Header) -> Option<Node<'_>> {
        NonNull::new(link).map(|ptr| self.node(ptr))
    }

    /// The node at `position`.
    ///
    /// # Safety
    /// `position` must come from a node of this list.
    #[allow(unsafe_code)]
    pub(super) unsafe fn at(&self, position: Position) -> Node<'_> {
        self.node(position.0)
    }

    fn random_height(&self) -> usize {
        let mut z = self.seed.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let mut height = 1;
        while height < MAX_HEIGHT && z & 3 == 0 {
            height += 1;
            z >>= 2;
        }
        height
    }

    /// Number of entries.
    pub(super) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first().is_none()
    }

    /// Inserts `key` (not already present) with `value`. `next_follows`: the caller's next insert
    /// comes after this key, so the hint is kept for it even if this one landed far from the last.
    pub(super) fn insert(&self, key: &[u8], value: &[u8], next_follows: bool) {
        let height = self.random_height();
        let node = Self::new_node(&self.arena, height, key, value);
        let mut list_height = self.height.load(Ordering::Relaxed);
        while height > list_height {
            match self.height.compare_exchange_weak(list_height, height, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => list_height = height,
                Err(seen) => list_height = seen,
            }
        }
        // Where the key goes at every level: from the hint's neighbours where they still
        // bracket it, found from there (or from the head) downwards below that.
        let mut hint = self.hint.try_lock();
        let mut prev = [self.head; MAX_HEIGHT];
        let mut next = [ptr::null_mut(); MAX_HEIGHT];
        let mut search_below = list_height;
        if let Some(splice) = hint.as_deref().filter(|splice| splice.ascending) {
            search_below = self.bracketing_level(splice, key, list_height);
            // The levels from the bracketing one up keep the splice's neighbours (none if the
            // key is not bracketed: then `search_below` is the list's height).
            let kept = search_below..list_height.min(splice.height).max(search_below);
            prev[kept.clone()].copy_from_slice(&splice.prev[kept.clone()]);
            next[kept.clone()].copy_from_slice(&splice.next[kept]);
        }
        let mut start = self.node(prev[search_below.min(list_height - 1)]);
        for level in (0..search_below).rev() {
            let (before, after) = self.splice(key, start, level);
            (prev[level], next[level]) = (before.ptr, after);
            start = before;
        }
        debug_assert!(self.follow(next[0]).is_none_or(|n| n.key() != key), "duplicate memtable key");
        let new = self.node(node);
        for level in 0..height {
            loop {
                new.next(level).store(next[level], Ordering::Relaxed);
                let published = self.node(prev[level]).next(level).compare_exchange(
                    next[level],
                    node.as_ptr(),
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                if published.is_ok() {
                    break;
                }
                // Another insert linked a node here first (or the hint was stale): search this
                // level again from the same predecessor, which still comes before the key
                // (nothing is ever removed).
                let (before, after) = self.splice(key, self.node(prev[level]), level);
                (prev[level], next[level]) = (before.ptr, after);
            }
        }
        if let Some(splice) = hint.as_deref_mut() {
            splice.ascending = next_follows || search_below < list_height || prev[0] == splice.last;
            if splice.ascending {
                // The next key in ascending order goes right after this one, at every level it has.
                (splice.prev, splice.next, splice.height) = (prev, next, list_height);
                splice.prev[..height].fill(node);
            }
            splice.last = node;
        }
        drop(hint);
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// The lowest level at which `splice` still brackets `key` (its node there comes before
    /// the key, the link after it is unchanged and leads past the key), or `list_height` if
    /// none does. The splice was taken top-down, so each level's node comes at or before the one
    /// below it and its link leads at or past the one below: once a level's node comes before
    /// the key, every level above it does too, and a key past one level's link may still be
    /// inside a wider level above (keys in ascending order but not adjacent, as a GC relocation
    /// batch sorted by key inserts them). Levels that gained nodes since are passed over; the
    /// insert's compare-and-swap finds what they gained.
    fn bracketing_level(&self, splice: &Splice, key: &[u8], list_height: usize) -> usize {
        let mut starts_before = false;
        for level in 0..splice.height.min(list_height) {
            let before = self.node(splice.prev[level]);
            let after = splice.next[level];
            if before.next(level).load(Ordering::Acquire) != after {
                // Not tight any more: something was linked in between. Try a level up.
                continue;
            }
            if !starts_before {
                starts_before =
                    splice.prev[level] == self.head || compare_internal_keys(before.key(), key) == KeyOrder::Less;
                if !starts_before {
                    // The key comes before the splice: no level of it is any better than the head.
                    break;
                }
            }
            if self.follow(after).is_none_or(|n| compare_internal_keys(key, n.key()) == KeyOrder::Less) {
                return level;
            }
        }
        list_height
    }

    /// The last node before `key` at `level` from `start` on (which must come before it), and
    /// the link that follows it.
    fn splice<'a>(&'a self, key: &[u8], start: Node<'a>, level: usize) -> (Node<'a>, *mut Header) {
        let mut before = start;
        loop {
            let after = before.next(level).load(Ordering::Acquire);
            match self.follow(after) {
                Some(node) if compare_internal_keys(node.key(), key) == KeyOrder::Less => before = node,
                _ => return (before, after),
            }
        }
    }

    /// The first node, if any.
    pub(super) fn first(&self) -> Option<Node<'_>> {
        self.follow(self.head().next(0).load(Ordering::Acquire))
    }

    /// The node after `node`.
    pub(super) fn next<'a>(&'a self, node: Node<'a>) -> Option<Node<'a>> {
        self.follow(node.next(0).load(Ordering::Acquire))
    }

    /// Asks the CPU to start loading the node after `node` (its header, tower, key and the start
    /// of its value), so that a cursor stepping there later finds it in cache. In a memtable of
    /// random keys each node is otherwise a cache miss, and a scan that merges the memtable with
    /// tables steps it only now and then, which leaves the load time to finish.
    pub(super) fn prefetch_next(&self, node: Node<'_>) {
        let next = node.next(0).load(Ordering::Acquire);
        if !next.is_null() {
            crate::prefetch::cache_lines_at(next.cast::<u8>(), PREFETCH_LINES);
        }
    }

    /// The first node whose key is `>= key`.
    pub(super) fn lower_bound(&self, key: &[u8]) -> Option<Node<'_>> {
        self.follow(self.descend(key).1)
    }

    /// The last node whose key is `< key`.
    pub(super) fn last_before(&self, key: &[u8]) -> Option<Node<'_>> {
        let (before, _) = self.descend(key);
        (before.ptr != self.head).then_some(before)
    }

    /// The level-0 splice of `key`, found from the top level down: the last node before it (the
    /// head if none) and the link that follows that node.
    fn descend(&self, key: &[u8]) -> (Node<'_>, *mut Header) {
        let (mut before, mut after) = (self.head(), ptr::null_mut());
        for level in (0..self.height.load(Ordering::Relaxed)).rev() {
            (before, after) = self.splice(key, before, level);
        }
        (before, after)
    }

    /// The last node, if any.
    pub(super) fn last(&self) -> Option<Node<'_>> {
        let mut x = self.head();
        let mut level = self.height.load(Ordering::Relaxed) - 1;
        loop {
            match self.follow(x.next(level).load(Ordering::Acquire)) {
                Some(node) => x = node,
                None if level == 0 => return (x.ptr != self.head).then_some(x),
                None => level -= 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::types::{internal_key, user_key, SequenceNumber, ValueKind};

    fn key(k: u32, seq: u64) -> Vec<u8> {
        internal_key(format!("k{k:06}").as_bytes(), SequenceNumber(seq), ValueKind::Inline)
    }

    /// Starts `threads` threads, each running `insert(list, its number)`.
    fn spawn_writers(
        list: &Arc<SkipList>,
        threads: u32,
        insert: fn(&SkipList, u32),
    ) -> Vec<std::thread::JoinHandle<()>> {
        (0..threads)
            .map(|t| {
                let list = Arc::clone(list);
                std::thread::spawn(move || insert(&list, t))
            })
            .collect()
    }

    fn forward(list: &SkipList) -> Vec<Vec<u8>> {
        std::iter::successors(list.first(), |n| list.next(*n)).map(|n| n.key().to_vec()).collect()
    }

    #[test]
    fn keeps_entries_in_internal_key_order_with_their_values() {
        let list = SkipList::new(256);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut model = BTreeSet::new();
        for seq in 1..2000u64 {
            let k = key(rng.gen_range(0..500), seq);
            list.insert(&k, &seq.to_le_bytes()[..(seq % 9) as usize], false);
            model.insert(k);
        }
        let mut expected: Vec<Vec<u8>> = model.into_iter().collect();
        expected.sort_by(|a, b| compare_internal_keys(a, b));
        assert_eq!(forward(&list), expected);
        assert_eq!(list.len(), expected.len());
        for n in std::iter::successors(list.first(), |n| list.next(*n)) {
            let seq = u64::from_le_bytes(n.key()[n.key().len() - 8..].try_into().unwrap()) >> 8;
            assert_eq!(n.value(), &seq.to_le_bytes()[..(seq % 9) as usize]);
        }
    }

    #[test]
    fn searches_find_neighbours() {
        let list = SkipList::new(4096);
        assert!(list.is_empty() && list.first().is_none() && list.last().is_none());
        for k in (0..100).map(|i| i * 2) {
            list.insert(&key(k, 1), b"v", false);
        }
        let at = |n: Option<Node<'_>>| n.map(|n| user_key(n.key()).to_vec());
        assert_eq!(at(list.lower_bound(&key(10, 1))), Some(b"k000010".to_vec()));
        assert_eq!(at(list.lower_bound(&key(11, 1))), Some(b"k000012".to_vec()));
        assert_eq!(at(list.lower_bound(&key(199, 1))), None);
        assert_eq!(at(list.last_before(&key(10, 1))), Some(b"k000008".to_vec()));
        assert_eq!(at(list.last_before(&key(0, 1))), None);
        assert_eq!(at(list.last()), Some(b"k000198".to_vec()));
        assert_eq!(at(list.first()), Some(b"k000000".to_vec()));
    }

    #[test]
    fn inserts_in_any_order_through_the_hint_keep_the_list_ordered() {
        // Ascending runs (the hint brackets each key), descending runs (it never does), and
        // random keys, interleaved, on one list whose height grows as it goes.
        let list = SkipList::new(1 << 12);
        let mut rng = SmallRng::seed_from_u64(11);
        let mut model = BTreeSet::new();
        let mut seq = 0;
        let mut add = |list: &SkipList, k: u32| {
            seq += 1;
            let k = key(k, seq);
            list.insert(&k, &seq.to_le_bytes(), false);
            model.insert(k);
        };
        for run in 0..60u32 {
            let base = rng.gen_range(0..100_000);
            match run % 3 {
                0 => (base..base + 200).for_each(|k| add(&list, k)),
                1 => (base..base + 200).rev().for_each(|k| add(&list, k)),
                _ => (0..200).for_each(|_| add(&list, rng.gen_range(0..100_000))),
            }
        }
        let mut expected: Vec<Vec<u8>> = model.into_iter().collect();
        expected.sort_by(|a, b| compare_internal_keys(a, b));
        assert_eq!(forward(&list), expected);
        for k in expected.iter().step_by(97) {
            assert!(list.lower_bound(k).is_some_and(|n| n.key() == k.as_slice()));
        }
        // Every level's links are in order too, not only level 0's.
        for level in 0..list.height.load(Ordering::Relaxed) {
            let mut at = list.head();
            while let Some(n) = list.follow(at.next(level).load(Ordering::Acquire)) {
                assert!(at.ptr == list.head || compare_internal_keys(at.key(), n.key()) == KeyOrder::Less);
                at = n;
            }
        }
    }

    #[test]
    fn the_hint_places_the_next_ascending_key_and_not_a_distant_one() {
        let list = SkipList::new(1 << 12);
        for k in 0..5000 {
            list.insert(&key(k * 2, 1), b"v", false);
        }
        let height = list.height.load(Ordering::Relaxed);
        {
            let splice = list.hint.lock();
            assert!(splice.ascending);
            assert_eq!(list.bracketing_level(&splice, &key(10_001, 1), height), 0, "right after the last insert");
            assert_eq!(list.bracketing_level(&splice, &key(9_997, 1), height), height, "before the last insert");
            assert_eq!(list.bracketing_level(&splice, &key(11, 1), height), height, "far before it");
        }
        // Keys in descending order never land right after the previous one: the hint is set aside.
        for k in (0..50).rev() {
            list.insert(&key(k * 2 + 1, 1), b"v", false);
        }
        assert!(!list.hint.lock().ascending);
        list.insert(&key(10_001, 1), b"v", false);
        list.insert(&key(10_003, 1), b"v", false);
        assert!(list.hint.lock().ascending, "two keys in a row at the end take it up again");
    }

    #[test]
    fn a_sorted_run_of_distant_keys_starts_each_search_above_the_bottom_level() {
        let list = SkipList::new(1 << 16);
        for k in 0..20_000u32 {
            list.insert(&key(k * 10, 1), b"v", false);
        }
        // In key order, about a hundred nodes apart (and ending in 5, so none is already there):
        // no key lands right after the one before. A key past the next node of the splice's top
        // level is bracketed nowhere (and searched from the head); few are, since few nodes are
        // that tall.
        let run: Vec<u32> = (0..199).map(|i| i * 1000 + 5).collect();
        let mut bracketed = 0;
        for (i, k) in run.iter().enumerate() {
            if i > 0 {
                let height = list.height.load(Ordering::Relaxed);
                let splice = list.hint.lock();
                assert!(splice.ascending, "the run keeps the hint");
                let level = list.bracketing_level(&splice, &key(*k, 1), height);
                assert!(level > 0, "key {k} is not next to the one before");
                bracketed += usize::from(level < height);
            }
            list.insert(&key(*k, 1), b"w", i + 1 < run.len());
        }
        assert!(bracketed >= 150, "only {bracketed} of 198 keys bracketed");
        let mut expected: Vec<Vec<u8>> = (0..20_000u32).map(|k| key(k * 10, 1)).collect();
        expected.extend(run.iter().map(|k| key(*k, 1)));
        expected.sort_by(|a, b| compare_internal_keys(a, b));
        assert_eq!(forward(&list), expected);
    }

    #[test]
    fn concurrent_ascending_and_random_inserts_lose_nothing() {
        // One writer holds the hint at a time; the others search from the head, and whoever
        // next takes the hint finds it stale.
        let list = Arc::new(SkipList::new(1 << 16));
        let writers = spawn_writers(&list, 3, |list, t| {
            let mut rng = SmallRng::seed_from_u64(u64::from(t));
            for i in 0..6000u32 {
                let k = if t == 2 { rng.gen_range(0..18_000) * 3 + 2 } else { i * 3 + t };
                list.insert(&key(k, u64::from(i)), &i.to_le_bytes(), false);
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        let keys = forward(&list);
        assert_eq!(keys.len(), 18_000);
        assert!(keys.windows(2).all(|w| compare_internal_keys(&w[0], &w[1]) == KeyOrder::Less));
        for k in keys.iter().step_by(13) {
            assert!(list.lower_bound(k).is_some_and(|n| n.key() == k.as_slice()));
        }
    }

    #[test]
    fn large_entries_get_chunks_of_their_own() {
        let list = SkipList::new(64);
        let big = vec![7u8; 10_000];
        list.insert(&key(1, 1), &big, false);
        list.insert(&key(2, 1), b"small", false);
        assert_eq!(list.first().map(Node::value), Some(&big[..]));
        assert_eq!(list.last().map(Node::value), Some(&b"small"[..]));
    }

    #[test]
    fn concurrent_inserts_lose_nothing_and_readers_see_order() {
        let list = Arc::new(SkipList::new(1 << 16));
        let writers = spawn_writers(&list, 4, |list, t| {
            for i in 0..5000u32 {
                list.insert(&key(i * 4 + t, u64::from(t)), &i.to_le_bytes(), false);
            }
        });
        let reader = {
            let list = Arc::clone(&list);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let keys = forward(&list);
                    assert!(keys.windows(2).all(|w| compare_internal_keys(&w[0], &w[1]) == KeyOrder::Less));
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        reader.join().unwrap();
        let keys = forward(&list);
        assert_eq!(keys.len(), 20_000);
        assert_eq!(list.len(), 20_000);
        assert!(keys.windows(2).all(|w| compare_internal_keys(&w[0], &w[1]) == KeyOrder::Less));
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(user_key(k), format!("k{i:06}").as_bytes());
            assert!(list.lower_bound(k).is_some_and(|n| n.key() == k.as_slice()));
        }
    }
}
