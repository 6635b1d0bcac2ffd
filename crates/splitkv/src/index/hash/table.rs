//! The persistent hash table: buckets, collision chains and the crash-safe order in which a batch
//! of changes reaches the medium.
//!
//! Geometry (SSHKV's SCMHash): `buckets` slots in a normal region, where a key's home slot is
//! `hash % buckets`, and as many in a collision region, whose free slots a bitmap tracks. A key
//! whose home slot is taken goes to a free collision slot linked into its bucket's chain by slot
//! index (`next` = collision index + 1), never by address, so the file means the same at any
//! mapping address.
//!
//! Crash safety rests on two rules. First, a slot becomes reachable only by one aligned 8-byte
//! store (a head's `meta` word, or a predecessor's `next`) after its contents are durable, and
//! a slot is unlinked (or its head emptied) by one such store before it is reused. Second, an
//! in-place update of a reachable slot's payload may tear; the payload checksum shows it, and
//! since the index records a new log head only after a batch is durable, every slot a crash
//! could tear belongs to a key whose log record is replayed at open, which rewrites it.
//! [`Table::apply`] groups a batch's flushes into two fences: every new slot's contents, then
//! every publishing store. Slots unlinked or heads emptied by a batch are not reused by it.
//!
//! The bitmap, the entry counts and the set of torn slots are soft state, rebuilt by walking
//! every chain at open; that walk also rejects cycles, shared or dangling links and slots in
//! the wrong chain as corruption.
//!
//! Thread-safety: a `Table` is owned by the hash index's lock; `&self` methods only read.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::slot::{
    decode_head, decode_slot, encode_key, encode_payload, meta_word, Slot, SlotHead, SlotKey, SlotPayload, SlotState,
    TableHeader, HEADER_LEN, KEY_FIELDS_OFFSET, META_OFFSET, NEXT_OFFSET, PAYLOAD_OFFSET, SLOT_LEN,
};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, MappedFile, MemFileSystem};
use crate::types::SequenceNumber;

/// One change of a batch: set a key's newest version, or remove the key.
#[derive(Clone, Copy, Debug)]
pub struct TableOp<'a> {
    /// The user key.
    pub key: &'a [u8],
    /// Its [`key_hash`](super::slot::key_hash).
    pub hash: u64,
    /// The new newest version, or `None` to remove the key.
    pub set: Option<SlotPayload>,
}

/// Where a key was found.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// The slot's index (normal region first, then collision region).
    pub index: u64,
    /// The slot before it in its chain (`None` for a bucket head).
    pub pred: Option<u64>,
    /// The slot.
    pub slot: Slot,
}

/// Confirms a long key whose prefix and hash match: reads the key stored in the log record the
/// payload points to and says whether it is the key looked up (the first argument).
pub type Confirm<'a> = dyn FnMut(&[u8], &SlotPayload) -> Result<bool> + 'a;

/// A persistent hash table on a mapped file.
pub struct Table {
    file: Box<dyn MappedFile>,
    path: PathBuf,
    buckets: u64,
    soft: Soft,
    /// Where the next search for a free collision slot starts.
    alloc_cursor: u64,
}

/// What the chains imply, kept in memory and rebuilt at open.
#[derive(Debug, PartialEq, Eq)]
struct Soft {
    /// One bit per collision slot: linked into some chain.
    used: Vec<u64>,
    used_count: u64,
    entries: u64,
    tombstones: u64,
    /// Slots whose payload a crash tore; replay must rewrite every one.
    torn: HashSet<u64>,
}

impl Soft {
    fn empty(buckets: u64) -> Soft {
        Soft {
            used: vec![0; buckets.div_ceil(64) as usize],
            used_count: 0,
            entries: 0,
            tombstones: 0,
            torn: HashSet::new(),
        }
    }

    // Collision indexes are below `buckets`, for which `used` has bits.
    fn is_used(&self, c: u64) -> bool {
        self.used.get((c / 64) as usize).is_some_and(|word| word & (1 << (c % 64)) != 0)
    }

    fn set_used(&mut self, c: u64, used: bool) {
        let Some(word) = self.used.get_mut((c / 64) as usize) else { return };
        let bit = 1u64 << (c % 64);
        if used && *word & bit == 0 {
            *word |= bit;
            self.used_count += 1;
        } else if !used && *word & bit != 0 {
            *word &= !bit;
            self.used_count -= 1;
        }
    }
}

/// Figures about a table, for stats and tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Normal-region slots (= collision-region slots).
    pub buckets: u64,
    /// Keys held (values and tombstones).
    pub entries: u64,
    /// Of those, tombstones.
    pub tombstones: u64,
    /// Collision slots in use.
    pub collision_used: u64,
    /// Bytes of the table file.
    pub file_bytes: u64,
}

impl Table {
    /// Creates an empty table with `buckets` buckets at `path` (replacing any file there).
    pub fn create(fs: &dyn FileSystem, path: &Path, buckets: u64) -> Result<Table> {
        let header = TableHeader { buckets: buckets.max(1) };
        let len = header
            .file_len()
            .ok_or_else(|| Error::InvalidArgument(format!("a hash table of {buckets} buckets is too large")))?;
        if fs.exists(path) {
            fs.remove(path)?;
        }
        let mut file = fs.map(path, len)?;
        file.write(0, &header.encode());
        file.flush(0, HEADER_LEN);
        file.fence()?;
        Ok(Table::with_state(file, path, header.buckets))
    }

    fn with_state(file: Box<dyn MappedFile>, path: &Path, buckets: u64) -> Table {
        Table { file, path: path.to_path_buf(), buckets, soft: Soft::empty(buckets), alloc_cursor: 0 }
    }

    /// Opens the table at `path` and rebuilds its soft state by walking every chain.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<Table> {
        let len = fs.file_size(path)?;
        let file = fs.map(path, len)?;
        let header = TableHeader::decode(file.bytes()).map_err(|reason| Error::corruption(path, 0, reason))?;
        if header.file_len() != Some(len) {
            return Err(Error::corruption(
                path,
                0,
                format!("hash table file is {len} bytes; its header's geometry needs {:?}", header.file_len()),
            ));
        }
        let mut table = Table::with_state(file, path, header.buckets);
        table.soft = table.scan()?;
        Ok(table)
    }

    /// Opens a private in-memory copy of a table file's `bytes`, named `path` in errors: reads
    /// see exactly these bytes whatever happens to the file, and stores stay in memory. For
    /// readers of a table that another process may be updating or replacing.
    pub fn open_copy(path: &Path, bytes: &[u8]) -> Result<Table> {
        let mem = MemFileSystem::new();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            mem.create_dir_all(parent)?;
        }
        let mut copy = mem.create(path)?;
        copy.append(bytes)?;
        copy.sync()?;
        drop(copy);
        Table::open(&mem, path)
    }

    /// The table's current bytes: every store so far, durable or not (a checkpoint copies them
    /// while no write can change them).
    pub fn bytes(&self) -> &[u8] {
        self.file.bytes()
    }

    /// The soft state the chains imply (see [`walk`](Self::walk)).
    fn scan(&self) -> Result<Soft> {
        self.walk(&mut |_, _| Ok(()))
    }

    /// Walks every chain, checking it on the way (every slot in its own bucket's chain, no
    /// link beyond the collision region, no slot linked twice, so no cycles), calls `visit`
    /// with every entry (values and tombstones), and returns the soft state the chains imply.
    fn walk(&self, visit: &mut dyn FnMut(u64, &Slot) -> Result<()>) -> Result<Soft> {
        let mut soft = Soft::empty(self.buckets);
        for bucket in 0..self.buckets {
            let mut index = bucket;
            loop {
                let slot = self.slot(index)?;
                if slot.state != SlotState::Empty {
                    if slot.key.hash() % self.buckets != bucket {
                        return Err(self.slot_error(index, "slot linked into another bucket's chain"));
                    }
                    soft.entries += 1;
                    if slot.state == SlotState::Tombstone {
                        soft.tombstones += 1;
                    }
                    if !slot.payload_intact {
                        soft.torn.insert(index);
                    }
                    visit(index, &slot)?;
                }
                let Some(c) = self.link(index, slot.next)? else { break };
                if soft.is_used(c) {
                    return Err(
                        self.slot_error(index, "chain link to a slot already linked (a cycle or a shared tail)")
                    );
                }
                soft.set_used(c, true);
                index = self.buckets + c;
            }
        }
        Ok(soft)
    }

    /// The collision index a `next` word of slot `index` names, validated.
    fn link(&self, index: u64, next: u64) -> Result<Option<u64>> {
        match next {
            0 => Ok(None),
            n if n - 1 < self.buckets => Ok(Some(n - 1)),
            _ => Err(self.slot_error(index, "chain link beyond the collision region")),
        }
    }

    /// Corruption of slot `index`, reported at its offset in the file.
    pub fn slot_error(&self, index: u64, reason: &str) -> Error {
        Error::corruption(&self.path, slot_offset(index) as u64, reason)
    }

    /// The link, state and key of slot `index`.
    fn head(&self, index: u64) -> Result<SlotHead> {
        decode_head(self.slot_bytes(index)?).map_err(|reason| self.slot_error(index, reason))
    }

    /// The decoded slot `index`.
    pub fn slot(&self, index: u64) -> Result<Slot> {
        decode_slot(self.slot_bytes(index)?).map_err(|reason| self.slot_error(index, reason))
    }

    /// The bytes of slot `index`; an error past the end of the file (open checked its length
    /// against the header's geometry, and links are checked against it).
    fn slot_bytes(&self, index: u64) -> Result<&[u8]> {
        let at = slot_offset(index);
        self.file.bytes().get(at..at + SLOT_LEN).ok_or_else(|| self.slot_error(index, "slot past the end of the file"))
    }

    /// Finds `key` (whose hash is `hash`). Long keys that match by prefix and hash are confirmed
    /// with `confirm`.
    pub fn find(&self, key: &[u8], hash: u64, confirm: &mut Confirm<'_>) -> Result<Option<Found>> {
        let mut index = hash % self.buckets;
        let mut pred = None;
        for _ in 0..=self.buckets {
            let head = self.head(index)?;
            if head.state != SlotState::Empty && head.key.matches(key, hash) != Some(false) {
                // Only the slot that matches is decoded whole.
                let slot = self.slot(index)?;
                let hit = match slot.key.matches(key, hash) {
                    Some(certain) => certain,
                    // A torn payload cannot point at the key to compare; prefix, length class
                    // and 64-bit hash all match, and replay rewrites the slot anyway.
                    None if !slot.payload_intact => true,
                    None => confirm(key, &slot.payload)?,
                };
                if hit {
                    return Ok(Some(Found { index, pred, slot }));
                }
            }
            let Some(c) = self.link(index, head.next)? else { return Ok(None) };
            pred = Some(index);
            index = self.buckets + c;
        }
        Err(self.slot_error(index, "chain longer than the collision region (a cycle)"))
    }

    /// True if a batch inserting up to `inserts` new keys might not fit: the collision region
    /// could run out, or the load would pass one key per bucket.
    pub fn needs_growth(&self, inserts: u64) -> bool {
        self.buckets - self.soft.used_count < inserts || self.soft.entries + inserts > self.buckets
    }

    /// Applies a batch in crash-safe order (see the module docs) and returns, per op, the
    /// payload it replaced, if any. The caller checks [`needs_growth`](Self::needs_growth) first;
    /// a collision region that runs out anyway is an error, after which the table is unchanged
    /// for the ops not yet applied and the caller must not record the batch as durable.
    pub fn apply(&mut self, ops: &[TableOp<'_>], confirm: &mut Confirm<'_>) -> Result<Vec<Option<SlotPayload>>> {
        let mut replaced = Vec::with_capacity(ops.len());
        let mut inserts = Vec::new();
        let mut emptied_heads = HashSet::new();
        let mut freed = HashSet::new();
        // Phase 1: updates in place and removals, each one store that leaves every chain whole.
        for op in ops {
            let found = self.find(op.key, op.hash, confirm)?;
            replaced.push(found.map(|f| f.slot.payload));
            match (found, op.set) {
                (Some(f), Some(payload)) => self.update(&f, &payload)?,
                (Some(f), None) => self.remove(&f, &mut emptied_heads, &mut freed),
                (None, Some(_)) => inserts.push(op),
                (None, None) => {}
            }
        }
        // Phase 2: contents of new slots (unreachable until published), then one fence.
        let mut head_fills: Vec<(u64, u64)> = Vec::new();
        let mut filled = HashSet::new();
        let mut new_heads: HashMap<u64, u64> = HashMap::new();
        let mut alloc_failed = None;
        for op in inserts {
            let Some(payload) = op.set else { continue };
            let bucket = op.hash % self.buckets;
            let head = self.slot(bucket)?;
            let key = SlotKey::new(op.key, op.hash);
            let mut encoded = [0u8; 20];
            let crc = encode_payload(&payload, &mut encoded).map_err(|reason| self.slot_error(bucket, &reason))?;
            let meta = meta_word(payload.state, &key, crc);
            if head.state == SlotState::Empty && !emptied_heads.contains(&bucket) && filled.insert(bucket) {
                let at = slot_offset(bucket);
                self.file.write(at + PAYLOAD_OFFSET, &encoded);
                self.file.write(at + KEY_FIELDS_OFFSET, &encode_key(&key));
                self.file.flush(at, SLOT_LEN);
                head_fills.push((bucket, meta));
            } else {
                let Some(c) = self.allocate(&freed) else {
                    alloc_failed = Some(bucket);
                    break;
                };
                let next = new_heads.get(&bucket).copied().unwrap_or(head.next);
                let mut bytes = [0u8; SLOT_LEN];
                bytes[NEXT_OFFSET..NEXT_OFFSET + 8].copy_from_slice(&next.to_le_bytes());
                bytes[META_OFFSET..META_OFFSET + 8].copy_from_slice(&meta.to_le_bytes());
                bytes[PAYLOAD_OFFSET..PAYLOAD_OFFSET + 20].copy_from_slice(&encoded);
                bytes[KEY_FIELDS_OFFSET..].copy_from_slice(&encode_key(&key));
                let at = slot_offset(self.buckets + c);
                self.file.write(at, &bytes);
                self.file.flush(at, SLOT_LEN);
                new_heads.insert(bucket, c + 1);
            }
            self.soft.entries += 1;
            if payload.state == SlotState::Tombstone {
                self.soft.tombstones += 1;
            }
        }
        self.file.fence()?;
        // Phase 3: publish, one aligned store each, then one fence.
        for &(bucket, meta) in &head_fills {
            let at = slot_offset(bucket) + META_OFFSET;
            self.file.store_u64(at, meta);
            self.file.flush(at, 8);
        }
        for (&bucket, &next) in &new_heads {
            let at = slot_offset(bucket) + NEXT_OFFSET;
            self.file.store_u64(at, next);
            self.file.flush(at, 8);
        }
        self.file.fence()?;
        // Unlinked slots are durably unreachable now: they may be reused.
        for c in freed {
            self.soft.set_used(c, false);
        }
        if let Some(bucket) = alloc_failed {
            return Err(Error::InvalidArgument(format!(
                "hash table full: no free collision slot for bucket {bucket} of {} (grow it first)",
                self.buckets
            )));
        }
        Ok(replaced)
    }

    fn update(&mut self, found: &Found, payload: &SlotPayload) -> Result<()> {
        let mut encoded = [0u8; 20];
        let crc = encode_payload(payload, &mut encoded).map_err(|reason| self.slot_error(found.index, &reason))?;
        let at = slot_offset(found.index);
        self.file.write(at + PAYLOAD_OFFSET, &encoded);
        self.file.store_u64(at + META_OFFSET, meta_word(payload.state, &found.slot.key, crc));
        self.file.flush(at, SLOT_LEN);
        match (found.slot.state, payload.state) {
            (SlotState::Tombstone, SlotState::Value) => self.soft.tombstones -= 1,
            (SlotState::Value, SlotState::Tombstone) => self.soft.tombstones += 1,
            _ => {}
        }
        self.soft.torn.remove(&found.index);
        Ok(())
    }

    fn remove(&mut self, found: &Found, emptied_heads: &mut HashSet<u64>, freed: &mut HashSet<u64>) {
        match found.pred {
            // A head keeps its `next`: the rest of the chain stays reachable through it.
            None => {
                let at = slot_offset(found.index) + META_OFFSET;
                self.file.store_u64(at, 0);
                self.file.flush(at, 8);
                emptied_heads.insert(found.index);
            }
            Some(pred) => {
                let at = slot_offset(pred) + NEXT_OFFSET;
                self.file.store_u64(at, found.slot.next);
                self.file.flush(at, 8);
                freed.insert(found.index - self.buckets);
            }
        }
        self.soft.entries -= 1;
        if found.slot.state == SlotState::Tombstone {
            self.soft.tombstones -= 1;
        }
        self.soft.torn.remove(&found.index);
    }

    /// Removes every tombstone at or below sequence number `upto` (no reader can walk past
    /// it), in the order `apply` removes keys: one store each, a fence, then the freed slots
    /// become reusable. Returns how many were removed.
    pub fn remove_tombstones(&mut self, upto: SequenceNumber) -> Result<u64> {
        if self.soft.tombstones == 0 {
            return Ok(0);
        }
        let mut emptied_heads = HashSet::new();
        let mut freed = HashSet::new();
        let mut removed = 0;
        for bucket in 0..self.buckets {
            let mut index = bucket;
            let mut pred = None;
            loop {
                let slot = self.slot(index)?;
                let doomed = slot.state == SlotState::Tombstone && slot.payload_intact && slot.payload.seq <= upto;
                if doomed {
                    self.remove(&Found { index, pred, slot }, &mut emptied_heads, &mut freed);
                    removed += 1;
                }
                let Some(c) = self.link(index, slot.next)? else { break };
                // An unlinked slot is no one's predecessor; an emptied head still is.
                if !(doomed && pred.is_some()) {
                    pred = Some(index);
                }
                index = self.buckets + c;
            }
        }
        self.file.fence()?;
        for c in freed {
            self.soft.set_used(c, false);
        }
        Ok(removed)
    }

    /// A free collision slot not freed by the current batch, marked used.
    fn allocate(&mut self, freed: &HashSet<u64>) -> Option<u64> {
        let mut c = self.alloc_cursor;
        let mut scanned = 0;
        while scanned < self.buckets {
            // Whole words in use are skipped at once.
            if c.is_multiple_of(64) && self.soft.used.get((c / 64) as usize) == Some(&u64::MAX) {
                scanned += 64;
                c = (c + 64) % self.buckets.next_multiple_of(64);
                continue;
            }
            if c < self.buckets && !self.soft.is_used(c) && !freed.contains(&c) {
                self.soft.set_used(c, true);
                self.alloc_cursor = (c + 1) % self.buckets;
                return Some(c);
            }
            scanned += 1;
            c = (c + 1) % self.buckets.next_multiple_of(64);
        }
        None
    }

    /// Calls `visit` with every entry (values and tombstones), bucket by bucket, checking the
    /// chains as open does.
    pub fn for_each(&self, visit: &mut dyn FnMut(u64, &Slot) -> Result<()>) -> Result<()> {
        self.walk(visit).map(drop)
    }

    /// Copies every entry into a new table of `buckets` buckets at `path`, made durable before
    /// this returns. Slots are copied as they are (a torn payload stays detectably torn).
    pub fn rehash_into(&self, fs: &dyn FileSystem, path: &Path, buckets: u64) -> Result<Table> {
        let mut target = Table::create(fs, path, buckets)?;
        let source = self.file.bytes();
        let mut copy = |index: u64, slot: &Slot| -> Result<()> {
            let from = slot_offset(index);
            let bucket = slot.key.hash() % target.buckets;
            let head = target.slot(bucket)?;
            let to = if head.state == SlotState::Empty {
                bucket
            } else {
                let c = target.allocate(&HashSet::new()).ok_or_else(|| {
                    Error::InvalidArgument(format!("{} buckets cannot hold the table's entries", target.buckets))
                })?;
                let to = target.buckets + c;
                target.file.store_u64(slot_offset(to) + NEXT_OFFSET, head.next);
                target.file.store_u64(slot_offset(bucket) + NEXT_OFFSET, c + 1);
                to
            };
            let at = slot_offset(to);
            let fields = source
                .get(from + META_OFFSET..from + SLOT_LEN)
                .ok_or_else(|| self.slot_error(index, "slot past the end of the file"))?;
            target.file.write(at + META_OFFSET, fields);
            target.soft.entries += 1;
            if slot.state == SlotState::Tombstone {
                target.soft.tombstones += 1;
            }
            if !slot.payload_intact {
                target.soft.torn.insert(to);
            }
            Ok(())
        };
        self.for_each(&mut copy)?;
        // Nothing reads the new file before it is renamed into place: one flush of it all.
        let len = target.file.len();
        target.file.flush(0, len);
        target.file.fence()?;
        Ok(target)
    }

    /// The path of the table file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the table to `path` after its file was renamed there.
    pub fn renamed(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    /// Number of buckets.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Slots whose payload a crash tore and no replayed write has rewritten yet.
    pub fn torn_slots(&self) -> usize {
        self.soft.torn.len()
    }

    /// Figures for stats.
    pub fn stats(&self) -> TableStats {
        TableStats {
            buckets: self.buckets,
            entries: self.soft.entries,
            tombstones: self.soft.tombstones,
            collision_used: self.soft.used_count,
            file_bytes: self.file.len() as u64,
        }
    }

    /// Walks every chain again and checks the soft state against it (for tests and `verify`):
    /// no cycles or dangling links, the bitmap equal to the set of linked collision slots, the
    /// counts right, every slot in its own bucket's chain.
    pub fn check(&self) -> Result<()> {
        if self.scan()? != self.soft {
            return Err(Error::corruption(&self.path, 0, "soft state (bitmap, counts) differs from the chains"));
        }
        Ok(())
    }
}

/// Byte offset of slot `index` in the file.
fn slot_offset(index: u64) -> usize {
    HEADER_LEN + index as usize * SLOT_LEN
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::slot::key_hash;
    use super::*;
    use crate::fs::MemFileSystem;
    use crate::types::{SegmentId, ValuePointer};

    fn payload(n: u64) -> SlotPayload {
        SlotPayload {
            state: SlotState::Value,
            seq: SequenceNumber(n),
            pointer: ValuePointer { segment: SegmentId(1), offset: 100 + n, len: 30 },
        }
    }

    fn no_long_keys(_: &[u8], _: &SlotPayload) -> Result<bool> {
        panic!("only inline keys in this test")
    }

    fn set(table: &mut Table, pairs: &[(&[u8], Option<u64>)]) {
        let ops: Vec<TableOp<'_>> =
            pairs.iter().map(|(k, n)| TableOp { key: k, hash: key_hash(k), set: n.map(payload) }).collect();
        table.apply(&ops, &mut no_long_keys).unwrap();
        table.check().unwrap();
    }

    fn get(table: &Table, key: &[u8]) -> Option<u64> {
        table.find(key, key_hash(key), &mut no_long_keys).unwrap().map(|f| f.slot.payload.seq.0)
    }

    /// Keys that all land in bucket 0 of a table of `buckets`.
    fn colliding(buckets: u64, n: usize) -> Vec<Vec<u8>> {
        (0u32..)
            .map(|i| format!("key{i}").into_bytes())
            .filter(|k| key_hash(k).is_multiple_of(buckets))
            .take(n)
            .collect()
    }

    fn new_table(buckets: u64) -> (MemFileSystem, Table) {
        let fs = MemFileSystem::new();
        fs.create_dir_all(Path::new("/db")).unwrap();
        let table = Table::create(&fs, Path::new("/db/HASHINDEX"), buckets).unwrap();
        (fs, table)
    }

    #[test]
    fn chains_survive_deleting_head_middle_and_tail_and_reuse_slots() {
        let (_fs, mut table) = new_table(8);
        let keys = colliding(8, 5);
        let all: Vec<(&[u8], Option<u64>)> = keys.iter().enumerate().map(|(i, k)| (&k[..], Some(i as u64))).collect();
        set(&mut table, &all);
        assert_eq!(table.stats().collision_used, 4);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(get(&table, k), Some(i as u64));
        }
        // The head (first inserted), a middle slot and the chain's last slot.
        for victim in [0, 2, 4] {
            set(&mut table, &[(&keys[victim], None)]);
            assert_eq!(get(&table, &keys[victim]), None);
        }
        for i in [1, 3] {
            assert_eq!(get(&table, &keys[i]), Some(i as u64), "survivor {i}");
        }
        assert_eq!(table.stats().entries, 2);
        // Re-inserting refills the emptied head and reuses freed collision slots.
        let used_before = table.stats().collision_used;
        set(&mut table, &[(&keys[0], Some(10)), (&keys[2], Some(12)), (&keys[4], Some(14))]);
        assert_eq!(table.stats().entries, 5);
        assert!(table.stats().collision_used <= used_before + 2);
        assert_eq!(get(&table, &keys[4]), Some(14));
    }

    #[test]
    fn updates_in_place_and_tombstones_are_counted() {
        let (_fs, mut table) = new_table(16);
        set(&mut table, &[(b"a", Some(1)), (b"b", Some(2))]);
        set(&mut table, &[(b"a", Some(3))]);
        assert_eq!(get(&table, b"a"), Some(3));
        let mut tomb = payload(4);
        tomb.state = SlotState::Tombstone;
        table.apply(&[TableOp { key: b"b", hash: key_hash(b"b"), set: Some(tomb) }], &mut no_long_keys).unwrap();
        assert_eq!(table.stats().tombstones, 1);
        assert_eq!(table.remove_tombstones(SequenceNumber(3)).unwrap(), 0);
        assert_eq!(table.remove_tombstones(SequenceNumber(4)).unwrap(), 1);
        table.check().unwrap();
        assert_eq!(get(&table, b"b"), None);
        assert_eq!(table.stats().entries, 1);
    }

    #[test]
    fn a_batch_with_many_keys_in_one_bucket_and_removals_keeps_every_chain_whole() {
        let (_fs, mut table) = new_table(4);
        let keys = colliding(4, 4);
        set(&mut table, &[(&keys[0], Some(0)), (&keys[1], Some(1))]);
        // One batch: remove the head and the chain's second slot, insert two more.
        set(&mut table, &[(&keys[0], None), (&keys[1], None), (&keys[2], Some(2)), (&keys[3], Some(3))]);
        assert_eq!((get(&table, &keys[0]), get(&table, &keys[1])), (None, None));
        assert_eq!((get(&table, &keys[2]), get(&table, &keys[3])), (Some(2), Some(3)));
    }

    #[test]
    fn reopening_rebuilds_the_same_soft_state() {
        let (fs, mut table) = new_table(64);
        let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("k{i}").into_bytes()).collect();
        let pairs: Vec<(&[u8], Option<u64>)> = keys.iter().enumerate().map(|(i, k)| (&k[..], Some(i as u64))).collect();
        set(&mut table, &pairs);
        set(&mut table, &pairs[..10].iter().map(|(k, _)| (*k, None)).collect::<Vec<_>>());
        let stats = table.stats();
        drop(table);
        let reopened = Table::open(&fs, Path::new("/db/HASHINDEX")).unwrap();
        assert_eq!(reopened.stats(), stats);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(get(&reopened, k), (i >= 10).then_some(i as u64));
        }
    }

    #[test]
    fn rehashing_keeps_every_entry_and_long_keys_by_their_stored_hash() {
        let (fs, mut table) = new_table(16);
        let long: Vec<Vec<u8>> = (0..10).map(|i| format!("{:0>40}", i).into_bytes()).collect();
        let records: BTreeMap<u64, Vec<u8>> =
            long.iter().enumerate().map(|(i, k)| (100 + i as u64, k.clone())).collect();
        let mut confirm = |key: &[u8], p: &SlotPayload| Ok(records.get(&p.pointer.offset).is_some_and(|k| k == key));
        let ops: Vec<TableOp<'_>> = long
            .iter()
            .enumerate()
            .map(|(i, k)| TableOp { key: k, hash: key_hash(k), set: Some(payload(i as u64)) })
            .collect();
        table.apply(&ops, &mut confirm).unwrap();
        assert!(table.needs_growth(10));
        let grown = table.rehash_into(&fs, Path::new("/db/grown"), 64).unwrap();
        grown.check().unwrap();
        for (i, k) in long.iter().enumerate() {
            let found = grown.find(k, key_hash(k), &mut confirm).unwrap().map(|f| f.slot.payload.seq.0);
            assert_eq!(found, Some(i as u64));
        }
        assert_eq!(grown.stats().entries, 10);
    }

    #[test]
    fn a_full_collision_region_is_an_error_not_a_lost_key() {
        let (_fs, mut table) = new_table(2);
        let keys = colliding(2, 4);
        let ops: Vec<TableOp<'_>> =
            keys.iter().map(|k| TableOp { key: k, hash: key_hash(k), set: Some(payload(1)) }).collect();
        assert!(table.needs_growth(4));
        assert!(table.apply(&ops, &mut no_long_keys).is_err());
        table.check().unwrap();
    }

    #[test]
    fn damaged_chains_are_corruption_at_open() {
        let (fs, mut table) = new_table(4);
        let keys = colliding(4, 3);
        set(&mut table, &[(&keys[0], Some(0)), (&keys[1], Some(1)), (&keys[2], Some(2))]);
        let second = table.slot(0).unwrap().next;
        // A chain pointing back at its own first collision slot: a cycle.
        let tail = table.buckets + second - 1;
        let tail_next = table.slot(tail).unwrap().next;
        let last = table.buckets + tail_next - 1;
        table.file.store_u64(slot_offset(last) + NEXT_OFFSET, second);
        let len = table.file.len();
        table.file.flush(0, len);
        table.file.fence().unwrap();
        drop(table);
        let err = Table::open(&fs, Path::new("/db/HASHINDEX")).err().expect("a cycle is corruption");
        assert!(err.is_corruption(), "{err}");
    }

    /// A crash at any point of a batch (a failed fence, then power loss keeping a random subset
    /// of the stores not yet durable) leaves well-formed chains where every key holds its old or
    /// new version or a torn payload; applying the batch again (what log replay does) repairs
    /// every torn slot and gives exactly the new state.
    #[test]
    fn a_crash_inside_a_batch_leaves_whole_chains_and_replay_repairs_it() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};

        use crate::fs::{FaultInjectingFileSystem, FaultKind};

        let path = Path::new("/db/HASHINDEX");
        let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("key{i}").into_bytes()).collect();
        for seed in 0..300u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mem = MemFileSystem::new();
            mem.create_dir_all(Path::new("/db")).unwrap();
            let faulty = FaultInjectingFileSystem::new(mem.shared());
            let mut table = Table::create(&faulty, path, 32).unwrap();
            faulty.sync_dir(Path::new("/db")).unwrap();
            let mut before: BTreeMap<&[u8], u64> = BTreeMap::new();
            let base: Vec<TableOp<'_>> = keys
                .iter()
                .filter(|_| rng.gen_bool(0.6))
                .map(|k| {
                    before.insert(k, 1);
                    TableOp { key: k, hash: key_hash(k), set: Some(payload(1)) }
                })
                .collect();
            table.apply(&base, &mut no_long_keys).unwrap();
            let mut after = before.clone();
            let mut batch = Vec::new();
            for k in &keys {
                if rng.gen_bool(0.5) {
                    continue;
                }
                let set = rng.gen_bool(0.6).then(|| payload(2));
                match set {
                    Some(_) => after.insert(k, 2),
                    None => after.remove(&k[..]),
                };
                batch.push(TableOp { key: k, hash: key_hash(k), set });
            }
            // Fail the first or second fence of the batch, or none.
            let fail_at = rng.gen_range(0..3u64);
            faulty.inject(FaultKind::Sync.fault().on_path("HASHINDEX").after(fail_at).persistent());
            let outcome = table.apply(&batch, &mut no_long_keys);
            assert_eq!(outcome.is_err(), fail_at < 2, "seed {seed}");
            drop(table);
            mem.crash_with_torn_tails(seed);

            let mut table = Table::open(&mem, path).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            table.check().unwrap();
            let touched: BTreeMap<&[u8], bool> = batch.iter().map(|op| (op.key, op.set.is_some())).collect();
            for k in &keys {
                let found = table.find(k, key_hash(k), &mut no_long_keys).unwrap();
                let old = before.get(&k[..]).copied();
                let new = after.get(&k[..]).copied();
                match found {
                    Some(f) if !f.slot.payload_intact => {
                        assert!(
                            touched.get(&k[..]) == Some(&true) && old.is_some(),
                            "seed {seed}: torn slot of an untouched key"
                        );
                    }
                    found => {
                        let seen = found.map(|f| f.slot.payload.seq.0);
                        assert!(seen == old || seen == new, "seed {seed}: {k:?} is {seen:?}, not {old:?} or {new:?}");
                    }
                }
            }
            table.apply(&batch, &mut no_long_keys).unwrap();
            table.check().unwrap();
            assert_eq!(table.torn_slots(), 0, "seed {seed}");
            for k in &keys {
                let seen = table.find(k, key_hash(k), &mut no_long_keys).unwrap().map(|f| f.slot.payload.seq.0);
                assert_eq!(seen, after.get(&k[..]).copied(), "seed {seed}: {k:?} after replay");
            }
        }
    }
}
