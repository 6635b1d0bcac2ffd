//! Byte layout of the persistent hash table: its header and its 64-byte slots (specified in
//! `docs/format/hashtable.md`).
//!
//! A slot is one cache line. Its words are grouped by how they change:
//! - `next` (bytes 0..8) links a chain; it changes only by one aligned 8-byte store, which is
//!   how an insert is published or a slot unlinked.
//! - `meta` (8..16: state, key length, payload checksum) is also one aligned word: storing it is
//!   how a bucket's head slot is published or emptied.
//! - the payload (sequence number, value pointer) is rewritten in place by updates; a crash may
//!   tear it, which its checksum (in `meta`) detects and log replay repairs.
//! - the key (length in `meta`, 24 key bytes, key checksum) never changes while the slot is in
//!   use.
//!
//! Keys of up to [`INLINE_KEY_LEN`] bytes are stored whole. Longer keys store their first 16
//! bytes and the 64-bit hash of the whole key; a match on those is confirmed against the key
//! stored in the log record. Pure encoding; thread-agnostic.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use xxhash_rust::xxh3::xxh3_64;

use crate::coding::{fixed32_at, fixed64_at, masked_crc};
use crate::types::{SegmentId, SequenceNumber, ValuePointer};

/// Identifies a hash table file.
pub const TABLE_MAGIC: [u8; 8] = *b"SPLKVHSH";
/// Version of the table layout written by this code.
pub const TABLE_VERSION: u32 = 1;
/// Bytes before the first slot (one page, so slots never straddle pages).
pub const HEADER_LEN: usize = 4096;
/// Bytes of one slot.
pub const SLOT_LEN: usize = 64;
/// Longest key stored whole in a slot.
pub const INLINE_KEY_LEN: usize = 24;
/// Bytes of a long key's prefix kept in its slot.
const LONG_KEY_PREFIX: usize = 16;
/// `key_len` value marking a long key.
const LONG_KEY: u8 = 0xff;

/// Offset of the `next` word within a slot.
pub const NEXT_OFFSET: usize = 0;
/// Offset of the `meta` word within a slot.
pub const META_OFFSET: usize = 8;
const SEQ_OFFSET: usize = 16;
const POINTER_OFFSET: usize = 24;
const KEY_CRC_OFFSET: usize = 36;
const KEY_OFFSET: usize = 40;

/// The hash of a key that places it in a bucket (and identifies long keys).
pub fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Nothing (a bucket head with no entry; collision slots are unlinked instead).
    Empty = 0,
    /// A key whose newest version is a put.
    Value = 1,
    /// A key whose newest version is a delete, kept while a snapshot may read older versions.
    Tombstone = 2,
}

/// The newest version of a key as a slot records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPayload {
    /// Put or tombstone.
    pub state: SlotState,
    /// Sequence number of the version.
    pub seq: SequenceNumber,
    /// Its record in the value log.
    pub pointer: ValuePointer,
}

/// The key as a slot stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotKey {
    /// Whole key length up to [`INLINE_KEY_LEN`], or `0xff` for a long key.
    len: u8,
    /// The key (zero-padded), or a long key's prefix and hash.
    bytes: [u8; INLINE_KEY_LEN],
}

impl SlotKey {
    /// The stored form of `key`, whose [`key_hash`] is `hash`.
    pub fn new(key: &[u8], hash: u64) -> SlotKey {
        let mut bytes = [0u8; INLINE_KEY_LEN];
        // A key that fits is stored whole.
        if let Some(stored) = bytes.get_mut(..key.len()) {
            stored.copy_from_slice(key);
            return SlotKey { len: key.len() as u8, bytes };
        }
        if let Some(prefix) = key.first_chunk::<LONG_KEY_PREFIX>() {
            bytes[..LONG_KEY_PREFIX].copy_from_slice(prefix);
        }
        bytes[LONG_KEY_PREFIX..].copy_from_slice(&hash.to_le_bytes());
        SlotKey { len: LONG_KEY, bytes }
    }

    /// The whole key, if it is stored inline (`None` also for a length out of range, which
    /// only an empty slot may have: `decode_head` rejects it in a used one).
    pub fn inline(&self) -> Option<&[u8]> {
        if self.len == LONG_KEY {
            return None;
        }
        self.bytes.get(..usize::from(self.len))
    }

    /// A long key's stored prefix (its first bytes); `None` for a key stored inline.
    pub fn long_prefix(&self) -> Option<&[u8]> {
        (self.len == LONG_KEY).then(|| &self.bytes[..LONG_KEY_PREFIX])
    }

    /// The key's hash (computed for inline keys, stored for long ones).
    pub fn hash(&self) -> u64 {
        match self.inline() {
            Some(key) => key_hash(key),
            None => {
                let mut word = [0u8; 8];
                word.copy_from_slice(&self.bytes[LONG_KEY_PREFIX..]);
                u64::from_le_bytes(word)
            }
        }
    }

    /// True if `key` (with hash `hash`) is this key for certain (`Some(true)`), certainly not
    /// (`Some(false)`), or only probably — a long key whose prefix and hash match, to be
    /// confirmed against the log (`None`).
    pub fn matches(&self, key: &[u8], hash: u64) -> Option<bool> {
        match self.inline() {
            Some(stored) => Some(stored == key),
            None if key.len() <= INLINE_KEY_LEN => Some(false),
            None if key.starts_with(&self.bytes[..LONG_KEY_PREFIX]) && self.hash() == hash => None,
            None => Some(false),
        }
    }

    fn crc(&self) -> u32 {
        let mut covered = [0u8; 1 + INLINE_KEY_LEN];
        covered[0] = self.len;
        covered[1..].copy_from_slice(&self.bytes);
        masked_crc(&covered)
    }
}

/// A decoded slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Chain link: collision index + 1, or 0 at a chain's end.
    pub next: u64,
    /// Empty, value or tombstone.
    pub state: SlotState,
    /// The key (meaningful unless empty).
    pub key: SlotKey,
    /// The newest version (meaningful unless empty).
    pub payload: SlotPayload,
    /// False if the payload's checksum fails: a crash tore an in-place update (or the medium
    /// is damaged), to be repaired by log replay.
    pub payload_intact: bool,
}

const SHORT_SLOT: &str = "truncated slot";

/// Encodes the payload words (bytes 16..36) and returns their checksum (which also covers the
/// state), or an error message if the pointer does not fit the slot's 32-bit fields.
pub fn encode_payload(payload: &SlotPayload, out: &mut [u8; 20]) -> Result<u32, String> {
    let ptr = payload.pointer;
    let (Ok(segment), Ok(offset)) = (u32::try_from(ptr.segment.0), u32::try_from(ptr.offset)) else {
        return Err(format!(
            "value pointer {}:{} does not fit a hash slot (segment and offset are 32-bit)",
            ptr.segment.0, ptr.offset
        ));
    };
    out[0..8].copy_from_slice(&payload.seq.0.to_le_bytes());
    out[8..12].copy_from_slice(&segment.to_le_bytes());
    out[12..16].copy_from_slice(&offset.to_le_bytes());
    out[16..20].copy_from_slice(&ptr.len.to_le_bytes());
    Ok(payload_crc(payload.state, out))
}

fn payload_crc(state: SlotState, payload: &[u8; 20]) -> u32 {
    let mut covered = [0u8; 21];
    covered[0] = state as u8;
    covered[1..].copy_from_slice(payload);
    masked_crc(&covered)
}

/// The `meta` word: state, key length and payload checksum.
pub fn meta_word(state: SlotState, key: &SlotKey, payload_crc: u32) -> u64 {
    u64::from(state as u8) | (u64::from(key.len) << 8) | (u64::from(payload_crc) << 32)
}

/// The key bytes (36..64): key checksum and key.
pub fn encode_key(key: &SlotKey) -> [u8; 28] {
    let mut out = [0u8; 28];
    out[..4].copy_from_slice(&key.crc().to_le_bytes());
    out[4..].copy_from_slice(&key.bytes);
    out
}

/// Offset of the payload words within a slot.
pub const PAYLOAD_OFFSET: usize = SEQ_OFFSET;
/// Offset of the key checksum and key within a slot.
pub const KEY_FIELDS_OFFSET: usize = KEY_CRC_OFFSET;

/// What a lookup compares: a slot's link, state and key (whose checksum is verified, so that a
/// damaged key is an error rather than a silent miss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHead {
    /// Chain link: collision index + 1, or 0 at a chain's end.
    pub next: u64,
    /// Empty, value or tombstone.
    pub state: SlotState,
    /// The key (meaningful unless empty).
    pub key: SlotKey,
}

/// Decodes a slot's link, state and key; an error names what is damaged.
pub fn decode_head(bytes: &[u8]) -> Result<SlotHead, &'static str> {
    debug_assert_eq!(bytes.len(), SLOT_LEN);
    let next = fixed64_at(bytes, NEXT_OFFSET).ok_or(SHORT_SLOT)?;
    let meta = fixed64_at(bytes, META_OFFSET).ok_or(SHORT_SLOT)?;
    let state = match meta & 0xff {
        0 => SlotState::Empty,
        1 => SlotState::Value,
        2 => SlotState::Tombstone,
        _ => return Err("unknown slot state"),
    };
    let key_bytes = *bytes.get(KEY_OFFSET..).and_then(<[u8]>::first_chunk).ok_or(SHORT_SLOT)?;
    let key = SlotKey { len: ((meta >> 8) & 0xff) as u8, bytes: key_bytes };
    if state != SlotState::Empty {
        if usize::from(key.len) > INLINE_KEY_LEN && key.len != LONG_KEY {
            return Err("slot key length out of range");
        }
        if fixed32_at(bytes, KEY_CRC_OFFSET).ok_or(SHORT_SLOT)? != key.crc() {
            return Err("slot key checksum mismatch");
        }
    }
    Ok(SlotHead { next, state, key })
}

/// Decodes a slot; an error names what is damaged beyond a torn payload.
pub fn decode_slot(bytes: &[u8]) -> Result<Slot, &'static str> {
    let SlotHead { next, state, key } = decode_head(bytes)?;
    let meta = fixed64_at(bytes, META_OFFSET).ok_or(SHORT_SLOT)?;
    let payload_bytes: &[u8; 20] = bytes.get(SEQ_OFFSET..).and_then(<[u8]>::first_chunk).ok_or(SHORT_SLOT)?;
    let word32 = |at| fixed32_at(bytes, at).ok_or(SHORT_SLOT);
    let payload = SlotPayload {
        state,
        seq: SequenceNumber(fixed64_at(bytes, SEQ_OFFSET).ok_or(SHORT_SLOT)?),
        pointer: ValuePointer {
            segment: SegmentId(u64::from(word32(POINTER_OFFSET)?)),
            offset: u64::from(word32(POINTER_OFFSET + 4)?),
            len: word32(POINTER_OFFSET + 8)?,
        },
    };
    if state == SlotState::Empty {
        return Ok(Slot { next, state, key, payload, payload_intact: true });
    }
    let payload_intact = (meta >> 32) as u32 == payload_crc(state, payload_bytes);
    Ok(Slot { next, state, key, payload, payload_intact })
}

/// The table header: identifies the file and its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableHeader {
    /// Slots in the normal region (= buckets), and in the collision region.
    pub buckets: u64,
}

impl TableHeader {
    /// Bytes of a table file with this geometry.
    pub fn file_len(&self) -> Option<u64> {
        self.buckets.checked_mul(2 * SLOT_LEN as u64)?.checked_add(HEADER_LEN as u64)
    }

    /// The header's encoding (the first 28 bytes of the file).
    pub fn encode(&self) -> [u8; 28] {
        let mut out = [0u8; 28];
        out[..8].copy_from_slice(&TABLE_MAGIC);
        out[8..12].copy_from_slice(&TABLE_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(SLOT_LEN as u32).to_le_bytes());
        out[16..24].copy_from_slice(&self.buckets.to_le_bytes());
        let crc = masked_crc(&out[..24]);
        out[24..28].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Validates and decodes a header.
    pub fn decode(bytes: &[u8]) -> Result<TableHeader, String> {
        let Some(bytes) = bytes.first_chunk::<28>() else {
            return Err("hash table file shorter than its header".into());
        };
        // Fixed offsets inside the 28 bytes: the fallbacks are never taken.
        let le_u32 = |at| fixed32_at(bytes, at).unwrap_or_default();
        if bytes[..8] != TABLE_MAGIC {
            return Err("not a hash table file (bad magic)".into());
        }
        if le_u32(24) != masked_crc(&bytes[..24]) {
            return Err("hash table header checksum mismatch".into());
        }
        let version = le_u32(8);
        if version != TABLE_VERSION {
            return Err(format!("hash table format version {version} is not supported"));
        }
        if le_u32(12) as usize != SLOT_LEN {
            return Err("hash table slot size differs from this build's".into());
        }
        let buckets = fixed64_at(bytes, 16).unwrap_or_default();
        if buckets == 0 {
            return Err("hash table has no buckets".into());
        }
        Ok(TableHeader { buckets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_bytes(next: u64, state: SlotState, key: &SlotKey, payload: &SlotPayload) -> Vec<u8> {
        let mut out = vec![0u8; SLOT_LEN];
        out[..8].copy_from_slice(&next.to_le_bytes());
        let mut p = [0u8; 20];
        let crc = encode_payload(payload, &mut p).unwrap();
        out[8..16].copy_from_slice(&meta_word(state, key, crc).to_le_bytes());
        out[PAYLOAD_OFFSET..PAYLOAD_OFFSET + 20].copy_from_slice(&p);
        out[KEY_FIELDS_OFFSET..].copy_from_slice(&encode_key(key));
        out
    }

    fn payload() -> SlotPayload {
        SlotPayload {
            state: SlotState::Value,
            seq: SequenceNumber(42),
            pointer: ValuePointer { segment: SegmentId(7), offset: 1234, len: 99 },
        }
    }

    #[test]
    fn slots_round_trip_for_inline_and_long_keys() {
        for key in [&b""[..], b"k", &[7u8; 24], &[9u8; 25], &[1u8; 300]] {
            let hash = key_hash(key);
            let k = SlotKey::new(key, hash);
            let bytes = slot_bytes(5, SlotState::Value, &k, &payload());
            let slot = decode_slot(&bytes).unwrap();
            assert_eq!(slot.next, 5);
            assert_eq!(slot.payload, payload());
            assert!(slot.payload_intact);
            assert_eq!(slot.key.hash(), hash);
            assert_eq!(slot.key.inline().is_some(), key.len() <= INLINE_KEY_LEN);
            let prefix = (key.len() > INLINE_KEY_LEN).then(|| &key[..LONG_KEY_PREFIX]);
            assert_eq!(slot.key.long_prefix(), prefix);
            let expected = if key.len() <= INLINE_KEY_LEN { Some(true) } else { None };
            assert_eq!(slot.key.matches(key, hash), expected);
        }
    }

    #[test]
    fn long_keys_differing_in_prefix_or_hash_never_match() {
        let a = vec![1u8; 40];
        let mut b = a.clone();
        b[39] = 2;
        let ka = SlotKey::new(&a, key_hash(&a));
        assert_eq!(ka.matches(&b, key_hash(&b)), Some(false));
        assert_eq!(ka.matches(&a[..24], key_hash(&a[..24])), Some(false));
        let mut c = a.clone();
        c[0] = 9;
        assert_eq!(ka.matches(&c, key_hash(&a)), Some(false));
    }

    #[test]
    fn a_torn_payload_is_detected_and_a_damaged_key_is_an_error() {
        let k = SlotKey::new(b"key", key_hash(b"key"));
        let mut bytes = slot_bytes(0, SlotState::Value, &k, &payload());
        bytes[PAYLOAD_OFFSET] ^= 1;
        assert!(!decode_slot(&bytes).unwrap().payload_intact);
        let mut bytes = slot_bytes(0, SlotState::Value, &k, &payload());
        bytes[KEY_FIELDS_OFFSET + 5] ^= 1;
        assert!(decode_slot(&bytes).is_err());
        let mut bytes = slot_bytes(0, SlotState::Value, &k, &payload());
        bytes[META_OFFSET] = 9;
        assert!(decode_slot(&bytes).is_err());
    }

    #[test]
    fn pointers_beyond_32_bits_are_refused() {
        let mut p = payload();
        p.pointer.offset = 1 << 33;
        assert!(encode_payload(&p, &mut [0u8; 20]).is_err());
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let h = TableHeader { buckets: 1000 };
        let bytes = h.encode();
        assert_eq!(TableHeader::decode(&bytes).unwrap(), h);
        for i in 0..bytes.len() {
            let mut damaged = bytes;
            damaged[i] ^= 0x10;
            assert!(TableHeader::decode(&damaged).is_err(), "byte {i}");
        }
    }
}
