//! The portable pairs file of `export` and `import`: every key-value pair of a database, in key
//! order, in a format that depends on nothing of the engine's (byte layout and versioning in
//! `docs/format/export.md`).
//!
//! A file is a 16-byte header (`SKVPAIRS`, version, flags), one record per pair (kind, lengths,
//! key, value, CRC32C of the record), and an end record (pair count, CRC32C of every byte before
//! it). The per-record checksum says which record is damaged; the count and the whole-file
//! checksum catch a file cut short or records lost between intact ones. [`PairReader`] checks
//! every length against the bytes left before reserving memory, so a damaged length is an
//! error, never a huge allocation, and nothing here panics on any input.
//!
//! Not thread-safe by design: one writer or reader per file.

use std::io::{self, Read, Write};

/// First bytes of every pairs file.
pub const MAGIC: &[u8; 8] = b"SKVPAIRS";
/// The format version this tool writes and reads.
pub const VERSION: u32 = 1;
/// Header bytes: magic, version, flags.
pub const HEADER_LEN: u64 = 16;
const KIND_END: u8 = 0;
const KIND_PAIR: u8 = 1;

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// Why a pairs file could not be read.
#[derive(Debug)]
pub enum PairsError {
    /// Reading failed.
    Io(io::Error),
    /// The bytes at `offset` are not a valid pairs file.
    Corrupt {
        /// Byte offset of the damaged header or record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

impl From<io::Error> for PairsError {
    fn from(e: io::Error) -> Self {
        PairsError::Io(e)
    }
}

/// Writes a pairs file: header first, then [`PairWriter::pair`] per pair, then
/// [`PairWriter::finish`].
pub struct PairWriter<W: Write> {
    out: W,
    crc: u32,
    count: u64,
    bytes: u64,
}

impl<W: Write> PairWriter<W> {
    /// Writes the header.
    pub fn new(out: W) -> io::Result<Self> {
        let mut writer = PairWriter { out, crc: 0, count: 0, bytes: 0 };
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        writer.emit(&header)?;
        Ok(writer)
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.bytes += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    /// Appends one pair.
    pub fn pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        let too_long = |what| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} longer than 4 GiB"));
        let key_len = u32::try_from(key.len()).map_err(|_| too_long("key"))?;
        let value_len = u32::try_from(value.len()).map_err(|_| too_long("value"))?;
        let mut head = [0u8; 9];
        head[0] = KIND_PAIR;
        head[1..5].copy_from_slice(&key_len.to_le_bytes());
        head[5..9].copy_from_slice(&value_len.to_le_bytes());
        let record_crc = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&head), key), value);
        self.emit(&head)?;
        self.emit(key)?;
        self.emit(value)?;
        self.emit(&record_crc.to_le_bytes())?;
        self.count += 1;
        Ok(())
    }

    /// Writes the end record and flushes; returns the pairs and bytes written.
    pub fn finish(mut self) -> io::Result<(u64, u64)> {
        let mut end = [0u8; 9];
        end[0] = KIND_END;
        end[1..9].copy_from_slice(&self.count.to_le_bytes());
        self.emit(&end)?;
        let crc = self.crc;
        self.emit(&crc.to_le_bytes())?;
        self.out.flush()?;
        Ok((self.count, self.bytes))
    }
}

/// Reads a pairs file written by [`PairWriter`], checking everything.
pub struct PairReader<R: Read> {
    input: R,
    /// Bytes of the file not read yet (bounds every length).
    remaining: u64,
    offset: u64,
    crc: u32,
    count: u64,
    done: bool,
}

impl<R: Read> PairReader<R> {
    /// Checks the header of a file of `len` bytes.
    pub fn new(input: R, len: u64) -> Result<Self, PairsError> {
        let mut reader = PairReader { input, remaining: len, offset: 0, crc: 0, count: 0, done: false };
        let header = reader.take(HEADER_LEN as usize, "file header")?;
        if header.get(..8) != Some(&MAGIC[..]) {
            return Err(reader.corrupt(0, "not a splitkv pairs file (bad magic)"));
        }
        let version = le_u32(&header, 8);
        if version != VERSION {
            return Err(reader.corrupt(8, &format!("format version {version}; this tool reads version {VERSION}")));
        }
        if le_u32(&header, 12) != 0 {
            return Err(reader.corrupt(12, "unknown flags"));
        }
        Ok(reader)
    }

    fn corrupt(&self, offset: u64, reason: &str) -> PairsError {
        PairsError::Corrupt { offset, reason: reason.to_string() }
    }

    /// Reads exactly `n` bytes (known to be within the file) and folds them into the file CRC.
    fn take(&mut self, n: usize, what: &str) -> Result<Vec<u8>, PairsError> {
        if n as u64 > self.remaining {
            return Err(self.corrupt(self.offset, &format!("{what} runs past the end of the file")));
        }
        let mut buf = vec![0u8; n];
        self.input.read_exact(&mut buf)?;
        self.remaining -= n as u64;
        self.offset += n as u64;
        self.crc = crc32c::crc32c_append(self.crc, &buf);
        Ok(buf)
    }

    /// The next pair, `None` after a valid end record; an error for anything else.
    pub fn next_pair(&mut self) -> Result<Option<Pair>, PairsError> {
        if self.done {
            return Ok(None);
        }
        let at = self.offset;
        let head = self.take(9, "record header")?;
        match head[0] {
            KIND_PAIR => {
                let key_len = le_u32(&head, 1) as usize;
                let value_len = le_u32(&head, 5) as usize;
                if (key_len as u64) + (value_len as u64) + 4 > self.remaining {
                    return Err(self.corrupt(at, "record lengths run past the end of the file"));
                }
                let key = self.take(key_len, "key")?;
                let value = self.take(value_len, "value")?;
                let stored = le_u32(&self.take(4, "record checksum")?, 0);
                let computed = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&head), &key), &value);
                if stored != computed {
                    return Err(self.corrupt(at, "record checksum mismatch"));
                }
                self.count += 1;
                Ok(Some((key, value)))
            }
            KIND_END => {
                let count = u64::from_le_bytes(head[1..9].try_into().unwrap_or_default());
                let before = self.crc;
                let stored = le_u32(&self.take(4, "file checksum")?, 0);
                if count != self.count {
                    return Err(
                        self.corrupt(at, &format!("end record counts {count} pairs, the file holds {}", self.count))
                    );
                }
                if stored != before {
                    return Err(self.corrupt(at, "file checksum mismatch"));
                }
                if self.remaining != 0 {
                    return Err(self.corrupt(self.offset, "bytes after the end record"));
                }
                self.done = true;
                Ok(None)
            }
            kind => Err(self.corrupt(at, &format!("unknown record kind {kind}"))),
        }
    }
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = PairWriter::new(&mut out).expect("in memory");
        for (k, v) in pairs {
            writer.pair(k, v).expect("in memory");
        }
        let (count, bytes) = writer.finish().expect("in memory");
        assert_eq!((count, bytes), (pairs.len() as u64, out.len() as u64));
        out
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<Pair>, PairsError> {
        let mut reader = PairReader::new(bytes, bytes.len() as u64)?;
        let mut out = Vec::new();
        while let Some(pair) = reader.next_pair()? {
            out.push(pair);
        }
        Ok(out)
    }

    #[test]
    fn pairs_round_trip() {
        let pairs: [(&[u8], &[u8]); 3] = [(b"", b""), (b"a\x00b", b"value"), (b"key", &[0xff; 300])];
        let bytes = write(&pairs);
        assert_eq!(&bytes[..8], MAGIC);
        let back = read_all(&bytes).expect("valid file");
        assert_eq!(back.len(), 3);
        for ((k, v), (bk, bv)) in pairs.iter().zip(&back) {
            assert_eq!((*k, *v), (bk.as_slice(), bv.as_slice()));
        }
        assert!(read_all(&write(&[])).expect("empty export").is_empty());
    }

    #[test]
    fn every_damage_is_an_error_never_a_panic() {
        let bytes = write(&[(b"alpha", b"one"), (b"beta", b"two")]);
        // Every single-byte flip and every truncation is caught.
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x40;
            assert!(read_all(&damaged).is_err(), "flip at {i} went unnoticed");
            assert!(read_all(&bytes[..i]).is_err(), "cut at {i} went unnoticed");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read_all(&longer).is_err());
    }

    #[test]
    fn a_huge_length_is_refused_before_allocating() {
        let mut bytes = write(&[(b"k", b"v")]);
        // The first record's value length, made 4 GiB - 1.
        bytes[21..25].copy_from_slice(&u32::MAX.to_le_bytes());
        match read_all(&bytes) {
            Err(PairsError::Corrupt { offset, reason }) => {
                assert_eq!(offset, HEADER_LEN);
                assert!(reason.contains("past the end"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_versions_are_refused_by_name() {
        let mut bytes = write(&[]);
        bytes[8] = 2;
        match read_all(&bytes) {
            Err(PairsError::Corrupt { reason, .. }) => assert!(reason.contains("version 2"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}
