//! Little-endian fixed-width and LEB128 varint encodings shared by every on-disk format.
//!
//! Decoders take a cursor (`&mut &[u8]`) and return `None` on truncated or over-long input;
//! callers turn that into [`crate::Error::Corruption`] with the file and offset they know.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

/// Most bytes a varint-encoded `u64` takes.
pub const MAX_VARINT64_LEN: usize = 10;

/// Writes `v` varint-encoded (LEB128) at the start of `dst`; returns the bytes written, or
/// `None` if `dst` is too short for it (then the bytes of `dst` are unspecified).
pub fn write_varint64(dst: &mut [u8], mut v: u64) -> Option<usize> {
    let mut n = 0;
    loop {
        let slot = dst.get_mut(n)?;
        n += 1;
        if v < 0x80 {
            *slot = v as u8;
            return Some(n);
        }
        *slot = (v as u8) | 0x80;
        v >>= 7;
    }
}

/// Appends a varint-encoded `u64` (LEB128, at most [`MAX_VARINT64_LEN`] bytes). Not written
/// through [`write_varint64`]: a stack buffer and a copy cost 14% more instructions in a
/// memtable flush, where tables' blocks and index entries are encoded through here.
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends a varint-encoded `u32`.
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Decodes a varint `u64`, advancing `src`.
pub fn get_varint64(src: &mut &[u8]) -> Option<u64> {
    let mut result = 0u64;
    for (i, &b) in src.iter().enumerate().take(10) {
        let bits = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None;
        }
        result |= bits << (7 * i);
        if b < 0x80 {
            *src = src.get(i + 1..)?;
            return Some(result);
        }
    }
    None
}

/// Decodes a varint `u32`, advancing `src`.
pub fn get_varint32(src: &mut &[u8]) -> Option<u32> {
    get_varint64(src).and_then(|v| u32::try_from(v).ok())
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Decodes a varint-length-prefixed slice, advancing `src`.
pub fn get_length_prefixed<'a>(src: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(get_varint64(src)?).ok()?;
    if src.len() < len {
        return None;
    }
    let (head, tail) = src.split_at(len);
    *src = tail;
    Some(head)
}

/// Decodes a fixed little-endian `u32`, advancing `src`.
pub fn get_fixed32(src: &mut &[u8]) -> Option<u32> {
    let (head, tail) = src.split_first_chunk::<4>()?;
    *src = tail;
    Some(u32::from_le_bytes(*head))
}

/// Decodes a fixed little-endian `u64`, advancing `src`.
pub fn get_fixed64(src: &mut &[u8]) -> Option<u64> {
    let (head, tail) = src.split_first_chunk::<8>()?;
    *src = tail;
    Some(u64::from_le_bytes(*head))
}

/// The fixed little-endian `u32` at byte `at` of `bytes`, `None` if it runs past the end.
pub fn fixed32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..)?.first_chunk().map(|word| u32::from_le_bytes(*word))
}

/// The fixed little-endian `u64` at byte `at` of `bytes`, `None` if it runs past the end.
pub fn fixed64_at(bytes: &[u8], at: usize) -> Option<u64> {
    bytes.get(at..)?.first_chunk().map(|word| u64::from_le_bytes(*word))
}

/// Decodes one byte, advancing `src`.
pub fn get_u8(src: &mut &[u8]) -> Option<u8> {
    let (&b, tail) = src.split_first()?;
    *src = tail;
    Some(b)
}

/// CRC32C of `data`, masked like LevelDB so that a CRC stored inside checksummed data does not
/// produce a trivially predictable CRC of the outer data.
pub fn masked_crc(data: &[u8]) -> u32 {
    mask_crc(crc32c(data))
}

/// Inputs shorter than this take [`short_crc32c`]; longer ones the `crc32c` crate, whose
/// three-way interleaved loop is the faster one from a few hundred bytes up.
const SHORT_CRC_BYTES: usize = 256;

/// CRC32C of `data` (the same function as `crc32c::crc32c`).
///
/// Short inputs, such as a value-log record's 20-byte header and the body of a 100-byte put,
/// go through the SSE4.2 instruction directly. For them the crate's setup cost more than the
/// data: it walks to an 8-byte boundary a byte at a time at both ends and prepares its
/// three-way interleave, about 170 instructions per checksum of a 100-byte put's record, 7%
/// of the put (callgrind, `docs/design.md`, "Where the time goes").
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() < SHORT_CRC_BYTES && std::arch::is_x86_feature_detected!("sse4.2") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU supports SSE4.2, checked just above.
        return unsafe { short_crc32c(data) };
    }
    if data.len() >= FOLDED_CRC_BYTES {
        return crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32;
    }
    crc32c::crc32c(data)
}

/// Inputs at least this long (a table block) take `crc-fast`, which folds 64 bytes at a time with
/// carry-less multiplies: 63 ns for a 4 KiB block here against `crc32c`'s 142.
const FOLDED_CRC_BYTES: usize = 2048;

/// CRC32C with one `crc32` instruction per 8 bytes, then at most three for the rest (unaligned
/// loads cost nothing extra on x86-64).
///
/// # Safety
/// The CPU must support SSE4.2.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "sse4.2")]
unsafe fn short_crc32c(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let (words, mut rest) = data.as_chunks::<8>();
    let mut crc = u64::from(u32::MAX);
    for word in words {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(*word));
    }
    // The instruction leaves the CRC in the low 32 bits. The last 0-7 bytes: 4, 2, then 1.
    let mut crc = crc as u32;
    if let Some((four, tail)) = rest.split_first_chunk::<4>() {
        crc = _mm_crc32_u32(crc, u32::from_le_bytes(*four));
        rest = tail;
    }
    if let Some((two, tail)) = rest.split_first_chunk::<2>() {
        crc = _mm_crc32_u16(crc, u16::from_le_bytes(*two));
        rest = tail;
    }
    if let [byte] = rest {
        crc = _mm_crc32_u8(crc, *byte);
    }
    !crc
}

/// Masks a raw CRC32C (see [`masked_crc`]).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inputs_checksum_as_the_crate_does() {
        let data: Vec<u8> = (0..600u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..9 {
            for len in (0..SHORT_CRC_BYTES + 20).chain([599 - start]) {
                let slice = &data[start..start + len];
                assert_eq!(crc32c(slice), crc32c::crc32c(slice), "offset {start}, {len} bytes");
            }
        }
        assert_eq!(crc32c(b"123456789"), 0xe306_9283, "the CRC32C check value");
    }

    #[test]
    fn long_inputs_checksum_as_the_crate_does() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..9 {
            for len in (FOLDED_CRC_BYTES - 70..FOLDED_CRC_BYTES + 70).chain([4096, 4101, 8191, 8999 - start]) {
                let slice = &data[start..start + len];
                assert_eq!(crc32c(slice), crc32c::crc32c(slice), "offset {start}, {len} bytes");
            }
        }
    }

    #[test]
    fn varint_round_trip_and_truncation() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            let mut cur = buf.as_slice();
            assert_eq!(get_varint64(&mut cur), Some(v));
            assert!(cur.is_empty());
            let mut short = &buf[..buf.len() - 1];
            assert_eq!(get_varint64(&mut short), None);
        }
        let mut over = &[0xffu8; 11][..];
        assert_eq!(get_varint64(&mut over), None);
    }

    #[test]
    fn writing_a_varint_into_a_slice_matches_appending_it_and_refuses_a_short_slice() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut appended = Vec::new();
            put_varint64(&mut appended, v);
            let mut slot = [0u8; MAX_VARINT64_LEN];
            let n = write_varint64(&mut slot, v).expect("fits");
            assert_eq!(&slot[..n], &appended[..]);
            assert_eq!(write_varint64(&mut slot[..n - 1], v), None, "{v} in {} bytes", n - 1);
        }
    }

    #[test]
    fn length_prefixed_rejects_short_input() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        let mut cur = buf.as_slice();
        assert_eq!(get_length_prefixed(&mut cur), Some(&b"hello"[..]));
        let mut short = &buf[..3];
        assert_eq!(get_length_prefixed(&mut short), None);
    }
}
