//! How Redis data types map onto the engine's ordered byte keys (format version 1; the byte
//! layout is in `docs/format/server.md`).
//!
//! Every Redis key has one *metadata record* under `m` + key, holding its type, its expiry
//! and, for a string, the value itself (so `GET` is one engine read). Hash fields and sorted-set
//! members live in records of their own under `h`, `z` and `s`, prefixed by the length of the
//! Redis key so that one key's records never interleave with another's (`ab` + field `c` and
//! `a` + field `bc` differ). Expiring keys are also listed under `e` + expiry time, so the
//! background sweep reads only what is due.
//!
//! All functions here are pure: they build and decode bytes and never touch the database.

use bytes::Bytes;

/// The version written under [`FORMAT_KEY`]; a database with another version is refused.
pub const FORMAT_VERSION: u32 = 1;
/// Where the format version lives. `\0` sorts before every record prefix below.
pub const FORMAT_KEY: &[u8] = b"\x00splitkv-server-format";

pub const META: u8 = b'm';
pub const HASH_FIELD: u8 = b'h';
pub const ZSET_MEMBER: u8 = b'z';
pub const ZSET_SCORE: u8 = b's';
pub const EXPIRY: u8 = b'e';

/// The type of a Redis key, as its metadata record's first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String = 1,
    Hash = 2,
    ZSet = 3,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::String),
            2 => Some(Kind::Hash),
            3 => Some(Kind::ZSet),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::ZSet => "zset",
        }
    }
}

/// A decoded metadata record.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub kind: Kind,
    /// Unix time in milliseconds at which the key expires; 0 = never.
    pub expire_at: u64,
    /// The value of a string; empty for other kinds.
    pub value: Bytes,
    /// Number of fields or members of a hash or sorted set; 0 for a string.
    pub len: u64,
}

impl Meta {
    pub fn string(value: Bytes, expire_at: u64) -> Meta {
        Meta { kind: Kind::String, expire_at, value, len: 0 }
    }

    pub fn collection(kind: Kind, len: u64, expire_at: u64) -> Meta {
        Meta { kind, expire_at, value: Bytes::new(), len }
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9 + self.value.len().max(8));
        v.push(self.kind as u8);
        v.extend_from_slice(&self.expire_at.to_be_bytes());
        match self.kind {
            Kind::String => v.extend_from_slice(&self.value),
            Kind::Hash | Kind::ZSet => v.extend_from_slice(&self.len.to_be_bytes()),
        }
        v
    }

    /// `None` for bytes this version did not write (a record from a newer format).
    pub fn decode(raw: Bytes) -> Option<Meta> {
        let kind = Kind::from_byte(*raw.first()?)?;
        let expire_at = u64::from_be_bytes(raw.get(1..9)?.try_into().ok()?);
        Some(match kind {
            Kind::String => Meta::string(raw.slice(9..), expire_at),
            Kind::Hash | Kind::ZSet => {
                Meta::collection(kind, u64::from_be_bytes(raw.get(9..17)?.try_into().ok()?), expire_at)
            }
        })
    }
}

pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + key.len());
    v.push(META);
    v.extend_from_slice(key);
    v
}

/// The prefix of every record of `kind` (`h`, `z`, `s`) that belongs to `key`.
pub fn sub_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + key.len() + 16);
    v.push(tag);
    v.extend_from_slice(&(key.len() as u32).to_be_bytes());
    v.extend_from_slice(key);
    v
}

pub fn sub_key(tag: u8, key: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut v = sub_prefix(tag, key);
    v.extend_from_slice(rest);
    v
}

/// The smallest key greater than every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // A prefix of only 0xff bytes: nothing is greater; callers use an unbounded range then.
    Vec::new()
}

/// Maps a score to 8 bytes whose unsigned order is the numeric order (-inf first).
pub fn score_to_sortable(score: f64) -> [u8; 8] {
    // -0.0 and 0.0 compare equal in Redis; store one of them.
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
    ordered.to_be_bytes()
}

pub fn sortable_to_score(b: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(b);
    let bits = if ordered >> 63 == 1 { ordered ^ (1 << 63) } else { !ordered };
    f64::from_bits(bits)
}

/// `s` record: prefix, sortable score, member.
pub fn score_key(key: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut v = sub_prefix(ZSET_SCORE, key);
    v.extend_from_slice(&score_to_sortable(score));
    v.extend_from_slice(member);
    v
}

/// Splits an `s` record's key (after its prefix of `prefix_len` bytes) into score and member.
pub fn split_score_key(raw: &[u8], prefix_len: usize) -> Option<(f64, &[u8])> {
    let score: [u8; 8] = raw.get(prefix_len..prefix_len + 8)?.try_into().ok()?;
    Some((sortable_to_score(score), raw.get(prefix_len + 8..)?))
}

pub fn expiry_key(expire_at: u64, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + key.len());
    v.push(EXPIRY);
    v.extend_from_slice(&expire_at.to_be_bytes());
    v.extend_from_slice(key);
    v
}

/// Splits an `e` record's key into expiry time and Redis key.
pub fn split_expiry_key(raw: &[u8]) -> Option<(u64, &[u8])> {
    let at = u64::from_be_bytes(raw.get(1..9)?.try_into().ok()?);
    Some((at, raw.get(9..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips() {
        for meta in [
            Meta::string(Bytes::from_static(b"hello"), 0),
            Meta::string(Bytes::new(), 1_700_000_000_000),
            Meta::collection(Kind::Hash, 3, 0),
            Meta::collection(Kind::ZSet, u64::MAX, 5),
        ] {
            assert_eq!(Meta::decode(Bytes::from(meta.encode())), Some(meta));
        }
        assert_eq!(Meta::decode(Bytes::from_static(b"\x09\0\0\0\0\0\0\0\0")), None);
        assert_eq!(Meta::decode(Bytes::from_static(b"\x02\0\0")), None);
    }

    #[test]
    fn sortable_scores_order_like_numbers() {
        let scores =
            [f64::NEG_INFINITY, -1e300, -2.5, -1.0, -f64::MIN_POSITIVE, 0.0, 1e-300, 1.0, 2.5, 1e300, f64::INFINITY];
        for w in scores.windows(2) {
            assert!(score_to_sortable(w[0]) < score_to_sortable(w[1]), "{} < {}", w[0], w[1]);
        }
        for s in scores {
            assert_eq!(sortable_to_score(score_to_sortable(s)), s);
        }
        assert_eq!(score_to_sortable(-0.0), score_to_sortable(0.0));
    }

    #[test]
    fn one_keys_records_never_interleave_with_anothers() {
        // "ab" with field "c" and "a" with field "bc" must not share a prefix.
        let a = sub_key(HASH_FIELD, b"ab", b"c");
        let b = sub_key(HASH_FIELD, b"a", b"bc");
        assert_ne!(a, b);
        assert!(!a.starts_with(&sub_prefix(HASH_FIELD, b"a")));
        assert_eq!(prefix_end(b"m\xff"), b"n".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), Vec::<u8>::new());
    }
}
