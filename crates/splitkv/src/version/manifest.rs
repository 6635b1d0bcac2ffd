//! The MANIFEST file (a checksummed log of encoded [`VersionEdit`](super::VersionEdit)s) and the `CURRENT` file that
//! names the live MANIFEST. Byte layout: `docs/format/manifest.md`.
//!
//! ```text
//! file   := header record*
//! header := magic[8] "SKVMANIF" | format_version u32 LE | masked crc32c(magic ++ version) u32 LE
//! record := payload_len u32 LE | payload_crc u32 LE | header_crc u32 LE | payload[payload_len]
//! ```
//! `payload_crc` is the masked CRC32C of the payload; `header_crc` the masked CRC32C of the first
//! eight bytes of the record header, so a damaged length is detected rather than mistaken for a
//! torn tail.
//!
//! Reading tells two failures apart. A *torn tail* is the last, unacknowledged append cut short by
//! a crash: fewer than a record header's bytes left, a verified header whose payload runs past the
//! end of the file, or nothing but zero bytes to the end of the file. It is ignored. Anything else
//! that fails a check is [`crate::Error::Corruption`] at the record's offset.
//!
//! Thread-safety: a [`ManifestWriter`] has one owner; reading functions are stateless.

// Decodes bytes read from disk: short or damaged input is an error, never a panic.
#![warn(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use crate::coding::{get_fixed32, masked_crc};
use crate::error::{Error, Result};
use crate::filenames::{current_file, manifest_file, parse_file_name, temp_file, FileKind};
use crate::fs::{FileSystem, WritableFile};
use crate::types::FileNumber;

/// First eight bytes of every MANIFEST.
pub const MANIFEST_MAGIC: [u8; 8] = *b"SKVMANIF";
/// Version of the MANIFEST layout written by this code; readers refuse newer versions.
/// Version 2 added skipped ranges and garbage surveys (edit tags 10 and 11).
pub const MANIFEST_FORMAT_VERSION: u32 = 4;
/// Oldest MANIFEST layout this code reads (version 1 is version 2 without tags 10 and 11;
/// version 2 is version 3 without tag 12).
pub const MANIFEST_MIN_FORMAT_VERSION: u32 = 1;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 16;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 12;

/// Appends records to a new MANIFEST.
pub struct ManifestWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
}

impl ManifestWriter {
    /// Creates (or truncates) `path` and appends the file header; nothing is durable until
    /// [`ManifestWriter::sync`].
    pub fn create(fs: &dyn FileSystem, path: &Path) -> Result<ManifestWriter> {
        let mut file = fs.create(path)?;
        file.append(&encode_file_header())?;
        Ok(ManifestWriter { file, path: path.to_path_buf() })
    }

    /// Appends one record holding `payload`.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        let len = u32::try_from(payload.len())
            .map_err(|_| Error::InvalidArgument(format!("MANIFEST record of {} bytes is too large", payload.len())))?;
        self.file.append(&encode_record_header(len, payload))?;
        self.file.append(payload)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes appended so far, header included.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True if not even the header was appended (never, once created).
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn encode_file_header() -> [u8; FILE_HEADER_LEN] {
    let mut header = [0u8; FILE_HEADER_LEN];
    header[..8].copy_from_slice(&MANIFEST_MAGIC);
    header[8..12].copy_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
    let crc = masked_crc(&header[..12]);
    header[12..].copy_from_slice(&crc.to_le_bytes());
    header
}

fn encode_record_header(len: u32, payload: &[u8]) -> [u8; RECORD_HEADER_LEN] {
    let mut header = [0u8; RECORD_HEADER_LEN];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4..8].copy_from_slice(&masked_crc(payload).to_le_bytes());
    let header_crc = masked_crc(&header[..8]);
    header[8..].copy_from_slice(&header_crc.to_le_bytes());
    header
}

/// How a MANIFEST read ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestEnd {
    /// Number of complete records read.
    pub records: u64,
    /// Offset just past the last complete record.
    pub valid_len: u64,
    /// Bytes of an ignored torn record after `valid_len` (0 if the file ended cleanly).
    pub torn_bytes: u64,
}

/// Reads the MANIFEST at `path`, calling `visit(record_offset, payload)` for each complete,
/// verified record in order. An error returned by `visit` stops the read and is returned.
pub fn read_records(
    fs: &dyn FileSystem,
    path: &Path,
    mut visit: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<ManifestEnd> {
    let data = fs.read_all(path)?;
    let mut rest = check_file_header(path, &data)?;
    let mut pos = FILE_HEADER_LEN;
    let mut records = 0;
    loop {
        let end = |torn_bytes: usize| ManifestEnd { records, valid_len: pos as u64, torn_bytes: torn_bytes as u64 };
        if rest.is_empty() {
            return Ok(end(0));
        }
        // A file extended before its bytes landed reads back as zeros; like a short header, that
        // can only be the interrupted final append.
        let Some((header, body)) =
            rest.split_first_chunk::<RECORD_HEADER_LEN>().filter(|_| rest.iter().any(|&b| b != 0))
        else {
            return Ok(end(rest.len()));
        };
        let corrupt = |reason: String| Error::corruption(path, pos as u64, reason);
        let mut fields = header.as_slice();
        let (Some(len), Some(payload_crc), Some(header_crc)) =
            (get_fixed32(&mut fields), get_fixed32(&mut fields), get_fixed32(&mut fields))
        else {
            return Err(corrupt("unreadable record header".into()));
        };
        if masked_crc(&header[..8]) != header_crc {
            return Err(corrupt("record header checksum mismatch".into()));
        }
        let len = len as usize;
        let Some((payload, next)) = body.split_at_checked(len) else {
            return Ok(end(rest.len()));
        };
        if masked_crc(payload) != payload_crc {
            return Err(corrupt(format!("checksum mismatch in {len}-byte record")));
        }
        visit(pos as u64, payload)?;
        records += 1;
        pos += RECORD_HEADER_LEN + len;
        rest = next;
    }
}

/// Checks the file header and returns the records after it.
fn check_file_header<'a>(path: &Path, data: &'a [u8]) -> Result<&'a [u8]> {
    let corrupt = |reason: &str| Error::corruption(path, 0, reason);
    let Some((header, records)) = data.split_first_chunk::<FILE_HEADER_LEN>() else {
        return Err(corrupt("file is shorter than the MANIFEST header"));
    };
    if header[..8] != MANIFEST_MAGIC {
        return Err(corrupt("bad MANIFEST magic"));
    }
    let mut fields = &header[8..];
    let (Some(version), Some(crc)) = (get_fixed32(&mut fields), get_fixed32(&mut fields)) else {
        return Err(corrupt("unreadable MANIFEST header"));
    };
    if masked_crc(&header[..12]) != crc {
        return Err(corrupt("MANIFEST header checksum mismatch"));
    }
    if !(MANIFEST_MIN_FORMAT_VERSION..=MANIFEST_FORMAT_VERSION).contains(&version) {
        return Err(corrupt(&format!(
            "unsupported MANIFEST format version {version} (this build reads \
             {MANIFEST_MIN_FORMAT_VERSION} to {MANIFEST_FORMAT_VERSION})"
        )));
    }
    Ok(records)
}

/// Reads `CURRENT` and returns the number of the MANIFEST it names.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<FileNumber> {
    let path = current_file(dir);
    let contents = fs.read_all(&path)?;
    let name = contents
        .strip_suffix(b"\n")
        .and_then(|name| std::str::from_utf8(name).ok())
        .ok_or_else(|| Error::corruption(&path, 0, "CURRENT is not a newline-terminated file name"))?;
    match parse_file_name(name) {
        Some(FileKind::Manifest(number)) => Ok(number),
        _ => Err(Error::corruption(&path, 0, format!("CURRENT names {name:?}, which is not a MANIFEST"))),
    }
}

/// Points `CURRENT` at MANIFEST `number` atomically: write `CURRENT.tmp`, sync it, rename it over
/// `CURRENT`, sync the directory. The MANIFEST itself must already be durable.
pub fn write_current(fs: &dyn FileSystem, dir: &Path, number: FileNumber) -> Result<()> {
    let manifest = manifest_file(dir, number);
    let name = manifest
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("bad MANIFEST path {}", manifest.display())))?;
    let tmp = temp_file(dir, "CURRENT");
    let mut file = fs.create(&tmp)?;
    file.append(format!("{name}\n").as_bytes())?;
    file.sync()?;
    drop(file);
    fs.rename(&tmp, &current_file(dir))?;
    fs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;

    fn write_manifest(fs: &dyn FileSystem, path: &Path, payloads: &[&[u8]]) -> Vec<u64> {
        let mut writer = ManifestWriter::create(fs, path).unwrap();
        let mut offsets = Vec::new();
        for p in payloads {
            offsets.push(writer.len());
            writer.add_record(p).unwrap();
        }
        writer.sync().unwrap();
        offsets
    }

    fn read_all_records(fs: &dyn FileSystem, path: &Path) -> Result<(Vec<Vec<u8>>, ManifestEnd)> {
        let mut out = Vec::new();
        let end = read_records(fs, path, |_, p| {
            out.push(p.to_vec());
            Ok(())
        })?;
        Ok((out, end))
    }

    #[test]
    fn records_round_trip_and_torn_tails_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("MANIFEST-000001");
        let payloads: [&[u8]; 3] = [b"one", b"", b"three three"];
        let offsets = write_manifest(&fs, &path, &payloads);
        let (got, end) = read_all_records(&fs, &path).unwrap();
        assert_eq!(got, payloads.iter().map(|p| p.to_vec()).collect::<Vec<_>>());
        assert_eq!(end.torn_bytes, 0);

        let full = fs.file_size(&path).unwrap();
        // Cut inside the last payload, inside its header, and zero-fill past the end.
        for cut in [full - 1, offsets[2] + 5] {
            fs.truncate(&path, cut).unwrap();
            let (got, end) = read_all_records(&fs, &path).unwrap();
            assert_eq!(got.len(), 2);
            assert_eq!((end.valid_len, end.torn_bytes), (offsets[2], cut - offsets[2]));
        }
        fs.truncate(&path, offsets[2]).unwrap();
        fs.truncate(&path, offsets[2] + 40).unwrap();
        let (got, end) = read_all_records(&fs, &path).unwrap();
        assert_eq!((got.len(), end.torn_bytes), (2, 40));
    }

    #[test]
    fn damaged_length_is_corruption_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("MANIFEST-000001");
        let offsets = write_manifest(&fs, &path, &[b"first", b"second", b"third"]);
        let mut bytes = fs.read_all(&path).unwrap();
        // A high bit in the length would point far past the end of the file.
        bytes[offsets[1] as usize + 3] ^= 0x40;
        let mut f = fs.create(&path).unwrap();
        f.append(&bytes).unwrap();
        f.sync().unwrap();
        match read_all_records(&fs, &path) {
            Err(Error::Corruption { offset, reason, .. }) => {
                assert_eq!(offset, offsets[1]);
                assert!(reason.contains("header checksum"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn bad_file_header_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("MANIFEST-000001");
        let mut f = fs.create(&path).unwrap();
        f.append(b"not a manifest at all").unwrap();
        f.sync().unwrap();
        assert!(read_all_records(&fs, &path).unwrap_err().is_corruption());
    }

    #[test]
    fn current_round_trip_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        write_current(&fs, dir.path(), FileNumber(42)).unwrap();
        assert_eq!(fs.read_all(&current_file(dir.path())).unwrap(), b"MANIFEST-000042\n");
        assert_eq!(read_current(&fs, dir.path()).unwrap(), FileNumber(42));
        assert!(!fs.exists(&temp_file(dir.path(), "CURRENT")));

        let mut f = fs.create(&current_file(dir.path())).unwrap();
        f.append(b"000042.sst\n").unwrap();
        f.sync().unwrap();
        assert!(read_current(&fs, dir.path()).unwrap_err().is_corruption());
    }
}
