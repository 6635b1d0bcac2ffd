//! Hexadecimal encoding of keys and values, for `--hex` input and output of binary data.
//!
//! Input accepts upper- or lower-case digits and an optional `0x` prefix; output is lower-case
//! without a prefix, so `splitkv get --hex` output can be fed back to `splitkv put --hex`.
//! Pure functions; thread-agnostic.

/// Lower-case hex digits of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// The bytes spelled by `text`, or a message saying why it is not hex.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if !digits.len().is_multiple_of(2) {
        return Err(format!("{text:?} is not hex: odd number of digits"));
    }
    let nibble = |c: u8| -> Result<u8, String> {
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| format!("{text:?} is not hex: bad digit {:?}", c as char))
    };
    digits.as_bytes().chunks_exact(2).map(|pair| Ok((nibble(pair[0])? << 4) | nibble(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn accepts_prefix_and_upper_case() {
        assert_eq!(decode("0xDEadBE").unwrap(), vec![0xde, 0xad, 0xbe]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn rejects_odd_length_and_bad_digits() {
        assert!(decode("abc").unwrap_err().contains("odd"));
        assert!(decode("zz").unwrap_err().contains("bad digit"));
    }
}
