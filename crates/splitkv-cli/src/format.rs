//! How the tool shows bytes, sizes and errors to people and to JSON consumers.
//!
//! Keys and values are shown either as escaped text (printable ASCII as is, a backslash as `\\`,
//! anything else as `\xNN`; unambiguous and reversible) or, with `--hex`, as hex digits. Long
//! values in human-readable dumps are cut to [`PREVIEW_BYTES`] with a note of how much was left
//! out; JSON output always carries the whole value. Pure functions; thread-agnostic.

use std::fmt::Write as _;

use crate::hex;

/// Bytes of a value shown in human-readable dumps before it is cut short.
pub const PREVIEW_BYTES: usize = 64;

/// How keys and values are spelled in output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteStyle {
    /// Escaped text.
    Escaped,
    /// Hex digits.
    Hex,
}

impl ByteStyle {
    /// The style chosen by the `--hex` flag.
    pub fn from_hex_flag(hex: bool) -> Self {
        if hex {
            ByteStyle::Hex
        } else {
            ByteStyle::Escaped
        }
    }

    /// `bytes` spelled in this style.
    pub fn show(self, bytes: &[u8]) -> String {
        match self {
            ByteStyle::Hex => hex::encode(bytes),
            ByteStyle::Escaped => escape(bytes),
        }
    }

    /// `bytes` spelled in this style, cut to [`PREVIEW_BYTES`] with a note of the rest.
    pub fn preview(self, bytes: &[u8]) -> String {
        if bytes.len() <= PREVIEW_BYTES {
            return self.show(bytes);
        }
        format!("{}... (+{} bytes)", self.show(&bytes[..PREVIEW_BYTES]), bytes.len() - PREVIEW_BYTES)
    }
}

/// Printable ASCII as is, `\` as `\\`, everything else as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b' '..=b'~' => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`, `1.0 GiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut scaled = bytes as f64 / 1024.0;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{scaled:.1} {}", UNITS[unit])
}

/// Writes one line to stdout. A reader that went away (broken pipe) ends the process with
/// success, as `head` expects; any other write failure ends it with the error exit code.
pub fn emit_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("splitkv: cannot write output: {e}");
        std::process::exit(3);
    }
}

/// Pretty-printed JSON for stdout.
pub fn json(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"cannot encode output: {e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_is_unambiguous() {
        assert_eq!(escape(b"a b\\c\x00\xff\n"), "a b\\\\c\\x00\\xff\\x0a");
        // A literal backslash-x sequence is not confused with an escaped byte.
        assert_eq!(escape(b"\\x00"), "\\\\x00");
    }

    #[test]
    fn preview_cuts_long_values_and_says_how_much() {
        let long = vec![b'v'; PREVIEW_BYTES + 10];
        let shown = ByteStyle::Escaped.preview(&long);
        assert!(shown.ends_with("... (+10 bytes)"));
        assert_eq!(ByteStyle::Hex.preview(b"ab"), "6162");
    }

    #[test]
    fn sizes_pick_a_readable_unit() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 20), "3.0 MiB");
    }
}
