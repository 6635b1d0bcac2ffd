//! The SSTable's physical framing: block handles, the 5-byte block trailer (compression type and
//! checksum), block compression, and the fixed-size footer. `docs/format/sstable.md` is the
//! byte-by-byte description; this module is its single implementation.
//!
//! Invariants: every block on disk is `contents ++ type u8 ++ masked_crc32c(contents ++ type) u32`;
//! a block is handed to a decoder only after its checksum matched and it decompressed to exactly
//! its recorded length. Everything here is stateless and thread-safe.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::path::Path;

use bytes::Bytes;

use crate::coding::{get_fixed32, get_fixed64, get_u8, get_varint64, mask_crc, masked_crc, put_varint64};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;

/// Version of the table format written by this code and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Last eight bytes of every table ("skvtable" read as a little-endian u64).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"skvtable");

/// Bytes after every block: compression type and masked CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Fixed length of the footer at the end of every table.
pub const FOOTER_LEN: usize = 8 * 5 + 1 + 4 + 4 + 8;

/// Where a block lives in the file: its offset and its stored length (trailer excluded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Length of the stored (possibly compressed) contents, without the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Largest varint encoding of a handle.
    pub const MAX_ENCODED_LEN: usize = 20;

    /// Appends the varint encoding (offset, size) used in index blocks.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle that must fill `src` exactly.
    pub fn decode(mut src: &[u8]) -> Option<BlockHandle> {
        let offset = get_varint64(&mut src)?;
        let size = get_varint64(&mut src)?;
        src.is_empty().then_some(BlockHandle { offset, size })
    }

    /// Offset just past the block's trailer.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size).saturating_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Block compression for SSTables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompressionType {
    /// Blocks are stored as built.
    #[default]
    None,
    /// LZ4 block format (`lz4_flex`).
    Lz4,
    /// Zstandard at level 1 (`zstd`).
    Zstd,
}

impl CompressionType {
    /// Parses `none`, `lz4` or `zstd` (db_bench's `--compression_type`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(CompressionType::None),
            "lz4" => Some(CompressionType::Lz4),
            "zstd" => Some(CompressionType::Zstd),
            _ => None,
        }
    }
}

/// How SSTables index their data blocks (the seam for TridentKV's learned index blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IndexBlockKind {
    /// Separator keys with binary search (LevelDB's index block).
    #[default]
    Binary,
    /// A model from key to entry position with a measured error bound (TridentKV), trained when
    /// the table is written; a table whose model is rejected gets a binary index.
    Learned,
    /// TridentKV's adaptive rule: learned indexes trained when tables are written unless the
    /// workload is write-intensive; binary-index tables that are read often and live long get a
    /// model trained lazily in memory. Never stored: a table records what it holds.
    Adaptive,
}

impl IndexBlockKind {
    /// Parses `binary`, `learned` or `adaptive`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "binary" => Some(IndexBlockKind::Binary),
            "learned" => Some(IndexBlockKind::Learned),
            "adaptive" => Some(IndexBlockKind::Adaptive),
            _ => None,
        }
    }
}

/// Compression byte stored in the block trailer.
pub(crate) fn compression_byte(c: CompressionType) -> u8 {
    match c {
        CompressionType::None => 0,
        CompressionType::Lz4 => 1,
        CompressionType::Zstd => 2,
    }
}

/// Index-kind byte stored in the footer.
pub(crate) fn index_kind_byte(k: IndexBlockKind) -> u8 {
    match k {
        IndexBlockKind::Binary => 0,
        // Builders resolve `Adaptive` before writing; a model is what would be stored.
        IndexBlockKind::Learned | IndexBlockKind::Adaptive => 1,
    }
}

/// Decodes the footer's index-kind byte.
pub(crate) fn index_kind_from_byte(b: u8) -> Option<IndexBlockKind> {
    match b {
        0 => Some(IndexBlockKind::Binary),
        1 => Some(IndexBlockKind::Learned),
        _ => None,
    }
}

/// Compresses `raw` into `scratch` as the block body to store, returning the type byte.
///
/// Compressed bodies are `uncompressed_len u32 LE ++ compressed bytes` (the layout of
/// `lz4_flex::block::compress_prepend_size`, reused for zstd so both decode the same way).
/// A block is stored raw unless compression saves at least an eighth: below that, the CPU spent
/// decompressing on every cache miss is not worth the bytes.
pub(crate) fn compress_block<'a>(
    raw: &'a [u8],
    compression: CompressionType,
    scratch: &'a mut Vec<u8>,
) -> (&'a [u8], u8) {
    let compressed = match compression {
        CompressionType::None => return (raw, 0),
        CompressionType::Lz4 => {
            *scratch = lz4_flex::block::compress_prepend_size(raw);
            true
        }
        CompressionType::Zstd => match (u32::try_from(raw.len()), zstd::bulk::compress(raw, 1)) {
            (Ok(len), Ok(body)) => {
                scratch.clear();
                scratch.extend_from_slice(&len.to_le_bytes());
                scratch.extend_from_slice(&body);
                true
            }
            // A block zstd refuses is simply stored raw.
            _ => false,
        },
    };
    if compressed && scratch.len() < raw.len() - raw.len() / 8 {
        (scratch.as_slice(), compression_byte(compression))
    } else {
        (raw, 0)
    }
}

/// The 5-byte trailer for a stored block body.
pub(crate) fn block_trailer(body: &[u8], type_byte: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = mask_crc(crc32c::crc32c_append(crate::coding::crc32c(body), &[type_byte]));
    let mut t = [0u8; BLOCK_TRAILER_LEN];
    t[0] = type_byte;
    t[1..].copy_from_slice(&crc.to_le_bytes());
    t
}

/// Reads the block at `handle`, verifies its checksum and decompresses it. A block to be kept
/// (`keep`: the block cache's, a table's index and filter) is copied out of the file; one used
/// only now may be a slice of the file's map ([`RandomAccessFile::read_shared`]).
pub(crate) fn read_block(file: &dyn RandomAccessFile, path: &Path, handle: BlockHandle, keep: bool) -> Result<Bytes> {
    read_block_decoded(file, path, handle, keep).map(|(bytes, _)| bytes)
}

/// [`read_block`], also saying whether the block was stored compressed (so that the bytes
/// returned are a decompressed copy of their own, never a slice of the file's map).
pub(crate) fn read_block_decoded(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    keep: bool,
) -> Result<(Bytes, bool)> {
    let corrupt = |reason: String| Error::corruption(path, handle.offset, reason);
    let stored_len = usize::try_from(handle.size)
        .ok()
        .and_then(|n| n.checked_add(BLOCK_TRAILER_LEN))
        .ok_or_else(|| corrupt(format!("block size {} is too large", handle.size)))?;
    let read = if keep {
        file.read_vec(handle.offset, stored_len).map(Bytes::from)
    } else {
        file.read_shared(handle.offset, stored_len)
    };
    let buf = read.map_err(|e| match e {
        Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            corrupt(format!("block of {stored_len} bytes runs past the end of the file"))
        }
        other => other,
    })?;
    // The checksum covers the body and the type byte; `buf` holds at least the trailer.
    let Some((checked, type_byte, body, stored_crc)) = buf.split_last_chunk::<4>().and_then(|(checked, crc)| {
        let (&type_byte, body) = checked.split_last()?;
        Some((checked, type_byte, body, u32::from_le_bytes(*crc)))
    }) else {
        return Err(corrupt(format!("block of {stored_len} bytes is shorter than its trailer")));
    };
    let actual_crc = masked_crc(checked);
    if stored_crc != actual_crc {
        return Err(corrupt(format!(
            "block checksum mismatch (stored {stored_crc:#010x}, computed {actual_crc:#010x})"
        )));
    }
    match type_byte {
        0 => Ok((buf.slice_ref(body), false)),
        1 | 2 => decompress(body, type_byte).map(|raw| (Bytes::from(raw), true)).map_err(corrupt),
        other => Err(corrupt(format!("unknown block compression type {other}"))),
    }
}

fn decompress(body: &[u8], type_byte: u8) -> std::result::Result<Vec<u8>, String> {
    let mut src = body;
    let raw_len = get_fixed32(&mut src).ok_or("compressed block shorter than its length prefix")? as usize;
    let out = if type_byte == 1 {
        let mut out = vec![0u8; raw_len];
        let n =
            lz4_flex::block::decompress_into(src, &mut out).map_err(|e| format!("lz4 decompression failed: {e}"))?;
        out.truncate(n);
        out
    } else {
        zstd::bulk::decompress(src, raw_len).map_err(|e| format!("zstd decompression failed: {e}"))?
    };
    if out.len() != raw_len {
        return Err(format!("block decompressed to {} bytes, expected {raw_len}", out.len()));
    }
    Ok(out)
}

/// The fixed-size record at the end of a table that locates everything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// The bloom filter block; `size == 0` means the table has no filter. Its offset is also where
    /// the data blocks end.
    pub filter: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
    /// Entries in the table.
    pub num_entries: u64,
    /// How the index block is encoded.
    pub index_kind: IndexBlockKind,
}

impl Footer {
    /// Encodes the footer (always [`FOOTER_LEN`] bytes).
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut v = Vec::with_capacity(FOOTER_LEN);
        for x in [self.filter.offset, self.filter.size, self.index.offset, self.index.size, self.num_entries] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.push(index_kind_byte(self.index_kind));
        v.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = masked_crc(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&v);
        out
    }

    /// Decodes and validates a footer read from the last [`FOOTER_LEN`] bytes of a file of
    /// `file_size` bytes; `Err(reason)` on any mismatch.
    pub fn decode(bytes: &[u8], file_size: u64) -> std::result::Result<Footer, String> {
        if bytes.len() != FOOTER_LEN {
            return Err(format!("footer is {} bytes, expected {FOOTER_LEN}", bytes.len()));
        }
        let magic = u64::from_le_bytes(*bytes.last_chunk::<8>().ok_or("short footer")?);
        if magic != TABLE_MAGIC {
            return Err(format!("bad table magic {magic:#018x}"));
        }
        let mut src = bytes;
        let mut next64 = || get_fixed64(&mut src);
        let fields = [next64(), next64(), next64(), next64(), next64()];
        let [Some(filter_offset), Some(filter_size), Some(index_offset), Some(index_size), Some(num_entries)] = fields
        else {
            return Err("short footer".into());
        };
        let kind_byte = get_u8(&mut src).ok_or("short footer")?;
        let version = get_fixed32(&mut src).ok_or("short footer")?;
        let stored_crc = get_fixed32(&mut src).ok_or("short footer")?;
        if version != FORMAT_VERSION {
            return Err(format!("unsupported table format version {version} (this build reads {FORMAT_VERSION})"));
        }
        let crc = masked_crc(bytes.get(..FOOTER_LEN - 12).ok_or("short footer")?);
        if crc != stored_crc {
            return Err(format!("footer checksum mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"));
        }
        let index_kind =
            index_kind_from_byte(kind_byte).ok_or_else(|| format!("unknown index block kind {kind_byte}"))?;
        let filter = BlockHandle { offset: filter_offset, size: filter_size };
        let index = BlockHandle { offset: index_offset, size: index_size };
        let meta_end = file_size.saturating_sub(FOOTER_LEN as u64);
        // Layout is data blocks, filter block (if any), index block, footer.
        let filter_end = if filter.size == 0 { filter.offset } else { filter.end() };
        if filter_end > index.offset || index.end() != meta_end {
            return Err(format!(
                "block handles out of range: filter {}+{}, index {}+{}, footer at {meta_end}",
                filter.offset, filter.size, index.offset, index.size
            ));
        }
        Ok(Footer { filter, index, num_entries, index_kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trip_and_rejects_damage() {
        let f = Footer {
            filter: BlockHandle { offset: 100, size: 20 },
            index: BlockHandle { offset: 125, size: 30 },
            num_entries: 7,
            index_kind: IndexBlockKind::Binary,
        };
        let size = 160 + FOOTER_LEN as u64;
        let enc = f.encode();
        assert_eq!(Footer::decode(&enc, size), Ok(f));
        for i in 0..FOOTER_LEN {
            let mut bad = enc;
            bad[i] ^= 0x10;
            assert!(Footer::decode(&bad, size).is_err(), "flip at {i} accepted");
        }
        assert!(Footer::decode(&enc, size + 1).is_err());
    }

    #[test]
    fn compression_skips_incompressible_blocks() {
        let mut scratch = Vec::new();
        use rand::{RngCore, SeedableRng};
        let mut noise = vec![0u8; 4096];
        rand::rngs::SmallRng::seed_from_u64(1).fill_bytes(&mut noise);
        assert_eq!(compress_block(&noise, CompressionType::Lz4, &mut scratch).1, 0);
        assert_eq!(compress_block(&noise, CompressionType::Zstd, &mut scratch).1, 0);
        let zeros = vec![0u8; 4096];
        for c in [CompressionType::Lz4, CompressionType::Zstd] {
            let (body, t) = compress_block(&zeros, c, &mut scratch);
            assert_eq!(t, compression_byte(c));
            assert_eq!(decompress(body, t).unwrap(), zeros);
        }
    }

    #[test]
    fn handle_round_trip() {
        let h = BlockHandle { offset: 1 << 40, size: 4096 };
        let mut v = Vec::new();
        h.encode_to(&mut v);
        assert_eq!(BlockHandle::decode(&v), Some(h));
        v.push(0);
        assert_eq!(BlockHandle::decode(&v), None);
    }
}
