//! Order-preserving keys to numbers (TridentKV's string-number base coding, SNBC): a model needs
//! numbers, tables hold byte strings.
//!
//! A table's sorted user keys are split into *sub-ranges*. Within one, the common prefix carries
//! no information and is stripped; the bytes after it are read as digits of a number whose base is
//! the sub-range's alphabet (its smallest to largest byte). Decimal keys (`"0000012345"`) thus
//! become their own value in base 10 instead of a sparse base-256 number with a jump at every
//! carry, which a linear model could not follow; a u64 holds 19 such digits. Arbitrary bytes get
//! base 256 and 8 digits.
//!
//! One prefix for the whole file fails where keys come in clusters far apart (`user:…` next to
//! `zone:…`): the file's common prefix is then empty and the keys of one cluster share their
//! leading digits. Sub-ranges start where the keys' shared prefixes change by more than the
//! digits can absorb, so within a sub-range consecutive keys always differ inside the digits.
//!
//! Invariant: for a fixed coder, `a <= b` implies `map(a) <= map(b)` for *all* byte strings, not
//! only the sub-range's keys: a key below the prefix maps to 0 and above it to `u64::MAX`, and a
//! byte outside the alphabet saturates its digit and every digit after it. Distinct keys may share
//! a number (saturation, or keys equal in the digits); lookups treat a shared number as a run that
//! the last-mile search walks.

use crate::sstable::block::shared_prefix_len;

/// Digits every coder has at least (base 256 fits 8 in a u64).
pub const MIN_DIGITS: usize = 8;
/// Key bytes after the prefix a coder looks at, at most.
pub const MAX_DIGITS: usize = 64;

/// Maps keys of one sub-range to numbers: a mixed-radix number whose digit `j` is the key's byte
/// `j` after the prefix, in the alphabet `alphabet[j]` seen at that position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coder {
    /// Smallest and largest byte at each position. A byte's digit is its distance from the
    /// smallest; a key that ends maps its remaining digits to 0, like the smallest byte (order is
    /// kept; the two may share a number).
    pub alphabet: Vec<(u8, u8)>,
}

impl Coder {
    /// The coder for `tails` (the keys after their prefix): per position, the bytes seen there,
    /// for as many positions as the product of their bases fits a u64.
    pub fn covering<'a>(tails: impl IntoIterator<Item = &'a [u8]> + Clone) -> Coder {
        let mut alphabet: Vec<(u8, u8)> = Vec::new();
        for tail in tails {
            for (j, &b) in tail.iter().take(MAX_DIGITS).enumerate() {
                match alphabet.get_mut(j) {
                    Some((lo, hi)) => (*lo, *hi) = ((*lo).min(b), (*hi).max(b)),
                    None => alphabet.push((b, b)),
                }
            }
        }
        let mut product = 1u128;
        let fits = alphabet
            .iter()
            .take_while(|&&(lo, hi)| {
                product *= u128::from(hi - lo) + 1;
                product <= 1 << 64
            })
            .count();
        alphabet.truncate(fits);
        Coder { alphabet }
    }

    /// True if the digits' bases multiply to at most 2^64 (a decoded coder must be checked).
    pub fn fits(&self) -> bool {
        let mut product = 1u128;
        self.alphabet.iter().all(|&(lo, hi)| {
            product *= u128::from(hi.wrapping_sub(lo)) + 1;
            lo <= hi && product <= 1 << 64
        })
    }

    /// The number of `key` in a sub-range with `prefix`.
    pub fn map(&self, prefix: &[u8], key: &[u8]) -> u64 {
        let rest = match key.split_at_checked(prefix.len()) {
            Some((head, rest)) if head == prefix => rest,
            _ => {
                // Below the sub-range unless the key's first byte that differs from the prefix
                // is larger; a proper prefix of `prefix` sorts before every key that has it.
                let below = key.iter().zip(prefix).find(|(k, p)| k != p).is_none_or(|(k, p)| k < p);
                return if below { 0 } else { u64::MAX };
            }
        };
        let mut value = 0u64;
        // Once a byte falls outside its alphabet (or the key ends), every later digit is the
        // lowest or the highest, so the number stays between its neighbours' numbers.
        let mut fill: Option<bool> = None;
        for (j, &(lo, hi)) in self.alphabet.iter().enumerate() {
            let base = u64::from(hi - lo) + 1;
            let digit = match (fill, rest.get(j)) {
                (Some(high), _) => {
                    if high {
                        base - 1
                    } else {
                        0
                    }
                }
                (None, None) => {
                    fill = Some(false);
                    0
                }
                (None, Some(&c)) if c < lo => {
                    fill = Some(false);
                    0
                }
                (None, Some(&c)) if c > hi => {
                    fill = Some(true);
                    base - 1
                }
                (None, Some(&c)) => u64::from(c - lo),
            };
            // Cannot overflow: the bases multiply to at most 2^64.
            value = value.wrapping_mul(base).wrapping_add(digit);
        }
        value
    }
}

/// A sub-range of a table's distinct user keys: keys `start..` up to the next sub-range's start,
/// sharing the first `prefix_len` bytes of key `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubRange {
    /// Index of the sub-range's first key.
    pub start: usize,
    /// Length of the prefix shared by every key of the sub-range.
    pub prefix_len: usize,
}

/// Splits sorted, distinct keys into sub-ranges in one pass.
///
/// A sub-range's prefix is the shortest common prefix of its consecutive pairs; two consecutive
/// keys differ at byte `lcp`, inside the digits iff `lcp < prefix + digits`. A key joins the
/// current sub-range while that holds, with the fewest digits any coder has, for every pair;
/// otherwise it starts a new one.
pub fn split_sub_ranges<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<SubRange> {
    let mut out = Vec::new();
    let mut prev: Option<&[u8]> = None;
    // Shortest and longest common prefix of consecutive pairs inside the current sub-range.
    let mut lcp_range: Option<(usize, usize)> = None;
    let mut first_len = 0;
    for (i, key) in keys.into_iter().enumerate() {
        let Some(p) = prev else {
            out.push(SubRange { start: 0, prefix_len: 0 });
            first_len = key.len();
            prev = Some(key);
            continue;
        };
        let d = shared_prefix_len(p, key);
        let (lo, hi) = lcp_range.map_or((d, d), |(lo, hi)| (lo.min(d), hi.max(d)));
        if hi < lo + MIN_DIGITS {
            lcp_range = Some((lo, hi));
        } else {
            close(&mut out, lcp_range, first_len);
            out.push(SubRange { start: i, prefix_len: 0 });
            lcp_range = None;
            first_len = key.len();
        }
        prev = Some(key);
    }
    close(&mut out, lcp_range, first_len);
    out
}

/// Sets the prefix of the last sub-range: its shortest pair prefix, or for a single key the
/// whole key.
fn close(out: &mut [SubRange], lcp_range: Option<(usize, usize)>, first_len: usize) {
    if let Some(last) = out.last_mut() {
        last.prefix_len = lcp_range.map_or(first_len, |(lo, _)| lo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_preserves_order_for_any_keys() {
        let prefix = b"user:";
        let mut keys: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"user",
            b"user:",
            b"user:\0",
            b"user:0",
            b"user:09",
            b"user:1",
            b"user:a",
            b"user:abcdefgh",
            b"user:abcdefghz",
            b"user:\xff\xff",
            b"user;",
            b"usez",
            b"\xff",
        ];
        keys.sort();
        let coders = [
            Coder { alphabet: vec![(b'0', b'9'); 19] },
            Coder { alphabet: vec![(0, 255); 8] },
            Coder { alphabet: vec![(b'a', b'a'), (b'0', b'9'), (b'b', b'c')] },
        ];
        for coder in coders {
            for w in keys.windows(2) {
                assert!(coder.map(prefix, w[0]) <= coder.map(prefix, w[1]), "{coder:?}: {:?} {:?}", w[0], w[1]);
            }
            assert_eq!(coder.map(prefix, b"usea"), 0);
            assert_eq!(coder.map(prefix, b"usez"), u64::MAX);
        }
    }

    #[test]
    fn decimal_keys_map_to_their_value() {
        let tails: Vec<String> = (0..2000u64).map(|i| format!("{i:05}")).collect();
        let coder = Coder::covering(tails.iter().map(|t| t.as_bytes()));
        assert_eq!(coder.alphabet, vec![(b'0', b'0'), (b'0', b'1'), (b'0', b'9'), (b'0', b'9'), (b'0', b'9')]);
        let numbers: Vec<u64> = (0..2000u64).map(|i| coder.map(b"00000", format!("00000{i:05}").as_bytes())).collect();
        // Evenly spaced, where base-256 bytes would jump 247-fold at every carry of the last digit.
        assert!(numbers.windows(2).all(|w| w[1] - w[0] == numbers[1] - numbers[0]));
    }

    #[test]
    fn clusters_far_apart_get_their_own_sub_ranges() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for cluster in [b"aaaaaaaaaaaa", b"bbbbbbbbbbbb"] {
            for i in 0..50u32 {
                let mut k = cluster.to_vec();
                k.extend_from_slice(&i.to_be_bytes());
                keys.push(k);
            }
        }
        let ranges = split_sub_ranges(keys.iter().map(Vec::as_slice));
        assert_eq!(ranges.len(), 2, "{ranges:?}");
        assert_eq!(ranges[1].start, 50);
        for (r, end) in ranges.iter().zip([50, 100]) {
            let prefix = &keys[r.start][..r.prefix_len];
            let coder = Coder::covering(keys[r.start..end].iter().map(|k| &k[r.prefix_len..]));
            let numbers: Vec<u64> = keys[r.start..end].iter().map(|k| coder.map(prefix, k)).collect();
            assert!(numbers.windows(2).all(|w| w[0] < w[1]), "distinct keys, distinct numbers");
        }
    }

    #[test]
    fn uniform_keys_stay_in_one_sub_range() {
        let keys: Vec<Vec<u8>> = (0..1000u64).map(|i| format!("{:016}", i * 7919).into_bytes()).collect();
        let ranges = split_sub_ranges(keys.iter().map(Vec::as_slice));
        assert_eq!(ranges, vec![SubRange { start: 0, prefix_len: shared_prefix_len(&keys[0], &keys[999]) }]);
    }
}
