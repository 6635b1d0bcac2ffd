//! Identifiers, internal keys and value pointers: the vocabulary every layer shares.
//!
//! An *internal key* is `user_key ++ trailer`, where the 8-byte little-endian trailer packs
//! `(sequence << 8) | kind`. Internal keys order by user key ascending, then by trailer
//! descending, so the newest version of a key comes first (LevelDB's `InternalKeyComparator`).
//! The value stored next to an internal key depends on its [`ValueKind`]: the value itself
//! (`Inline`), an encoded [`ValuePointer`] into the value log (`Pointer`), or nothing (`Deletion`).

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::fmt;

use crate::coding::{get_varint32, get_varint64, put_varint32, put_varint64, write_varint64, MAX_VARINT64_LEN};

/// Largest sequence number that fits in an internal key trailer (56 bits).
pub const MAX_SEQUENCE: u64 = (1 << 56) - 1;

/// Length of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_newtype!(
    /// Monotonic write sequence number; every record of a batch gets its own.
    SequenceNumber
);
id_newtype!(
    /// Number of an SSTable (or MANIFEST) file, unique within a database.
    FileNumber
);
id_newtype!(
    /// Identifier of a value-log segment file (a zone); allocated in increasing order.
    SegmentId
);

/// What an internal key's value holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence.
    Deletion = 0,
    /// The user value is stored inline next to the key.
    Inline = 1,
    /// The value lives in the value log; the stored bytes are an encoded [`ValuePointer`].
    Pointer = 2,
}

impl ValueKind {
    /// Kind used in seek keys: the largest, so a seek key sorts before every entry of the same
    /// user key and sequence.
    pub const FOR_SEEK: ValueKind = ValueKind::Pointer;

    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Inline),
            2 => Some(ValueKind::Pointer),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into a trailer.
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq.0 <= MAX_SEQUENCE);
    (seq.0 << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SequenceNumber, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds the internal key for `(user_key, seq, kind)`.
pub fn internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// Builds the key that seeks to the newest version of `user_key` visible at `seq`.
pub fn seek_key(user_key: &[u8], seq: SequenceNumber) -> Vec<u8> {
    internal_key(user_key, seq, ValueKind::FOR_SEEK)
}

/// An internal key split into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub sequence: SequenceNumber,
    /// What the value holds.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is too short or has an unknown kind.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let trailer = u64::from_le_bytes(trailer.try_into().ok()?);
    Some(ParsedInternalKey {
        user_key,
        sequence: SequenceNumber(trailer >> 8),
        kind: ValueKind::from_u8(trailer as u8)?,
    })
}

/// The user-key part of an internal key (empty if it is too short to have a trailer, so that
/// such a key sorts first).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.split_last_chunk::<TRAILER_LEN>().map_or(&[], |(user_key, _)| user_key)
}

fn trailer(ikey: &[u8]) -> u64 {
    ikey.last_chunk::<TRAILER_LEN>().map_or(0, |trailer| u64::from_le_bytes(*trailer))
}

/// Orders internal keys: user key ascending, then trailer (sequence, kind) descending.
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a).cmp(user_key(b)).then_with(|| trailer(b).cmp(&trailer(a)))
}

/// An owned internal key whose `Ord` is [`compare_internal_keys`].
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct InternalKey(pub Vec<u8>);

impl InternalKey {
    /// Builds the internal key for `(user_key, seq, kind)`.
    pub fn new(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Self {
        InternalKey(internal_key(user_key, seq, kind))
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The user-key part.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match parse_internal_key(&self.0) {
            Some(p) => write!(f, "{}@{}:{:?}", EscapedBytes(p.user_key), p.sequence, p.kind),
            None => write!(f, "invalid:{}", EscapedBytes(&self.0)),
        }
    }
}

/// Displays bytes as ASCII with `\xNN` escapes, for debug output and error messages.
pub struct EscapedBytes<'a>(pub &'a [u8]);

impl fmt::Display for EscapedBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0 {
            if b.is_ascii_graphic() || b == b' ' {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// A position in the value log: a segment and a byte offset inside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition {
    /// Segment holding the position.
    pub segment: SegmentId,
    /// Byte offset within the segment.
    pub offset: u64,
}

/// Address of one record in the value log, stored in the LSM-tree in place of a large value.
///
/// `offset` is where the record starts and `len` its full encoded length, so one positioned read
/// fetches header, key and value, and the reader can verify checksum and key before trusting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValuePointer {
    /// Segment holding the record.
    pub segment: SegmentId,
    /// Byte offset of the record's first byte.
    pub offset: u64,
    /// Length of the whole record (header + key + value).
    pub len: u32,
}

impl ValuePointer {
    /// Largest encoded size, for buffer reservations: two varint `u64`s and a varint `u32`.
    pub const MAX_ENCODED_LEN: usize = 2 * MAX_VARINT64_LEN + 5;

    /// Offset just past the record (saturating: a corrupt pointer must not overflow).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.len))
    }

    /// Appends the varint encoding: segment, offset, len.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.segment.0);
        put_varint64(dst, self.offset);
        put_varint32(dst, self.len);
    }

    /// The encoding, written at the start of `buf` on the caller's stack (a memtable insert then
    /// needs no heap buffer for it).
    pub fn encode_into<'a>(&self, buf: &'a mut [u8; Self::MAX_ENCODED_LEN]) -> &'a [u8] {
        // The three varints take at most `MAX_ENCODED_LEN` bytes in all, so each fits.
        let mut n = 0;
        for v in [self.segment.0, self.offset, u64::from(self.len)] {
            n += buf.get_mut(n..).and_then(|rest| write_varint64(rest, v)).unwrap_or(0);
        }
        buf.get(..n).unwrap_or_default()
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::MAX_ENCODED_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a pointer that must fill `src` exactly.
    pub fn decode(mut src: &[u8]) -> Option<ValuePointer> {
        let segment = SegmentId(get_varint64(&mut src)?);
        let offset = get_varint64(&mut src)?;
        let len = get_varint32(&mut src)?;
        src.is_empty().then_some(ValuePointer { segment, offset, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_keys_order_newest_first() {
        let a1 = internal_key(b"a", SequenceNumber(1), ValueKind::Inline);
        let a2 = internal_key(b"a", SequenceNumber(2), ValueKind::Deletion);
        let b1 = internal_key(b"b", SequenceNumber(1), ValueKind::Inline);
        assert_eq!(compare_internal_keys(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal_keys(&a1, &b1), Ordering::Less);
        assert_eq!(compare_internal_keys(&seek_key(b"a", SequenceNumber(2)), &a2), Ordering::Less);
        assert_eq!(compare_internal_keys(&seek_key(b"a", SequenceNumber(1)), &a2), Ordering::Greater);
        // A user key that is a prefix of another sorts first regardless of trailers.
        let ab = internal_key(b"ab", SequenceNumber(9), ValueKind::Inline);
        assert_eq!(compare_internal_keys(&a1, &ab), Ordering::Less);
    }

    #[test]
    fn parse_round_trip_and_rejects_bad_kind() {
        let k = internal_key(b"key", SequenceNumber(42), ValueKind::Pointer);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!((p.user_key, p.sequence, p.kind), (&b"key"[..], SequenceNumber(42), ValueKind::Pointer));
        let mut bad = k.clone();
        bad[3] = 9;
        assert!(parse_internal_key(&bad).is_none());
        assert!(parse_internal_key(b"short").is_none());
    }

    #[test]
    fn value_pointer_round_trip() {
        let p = ValuePointer { segment: SegmentId(7), offset: 1 << 33, len: 1045 };
        assert_eq!(ValuePointer::decode(&p.encode()), Some(p));
        assert_eq!(p.encode_into(&mut [0; ValuePointer::MAX_ENCODED_LEN]), p.encode().as_slice());
        let mut trailing = p.encode();
        trailing.push(0);
        assert_eq!(ValuePointer::decode(&trailing), None);
    }
}
