//! RESP framing: the request parser and the reply encoder.
//!
//! Requests are what Redis clients send: an array of bulk strings (`*N\r\n$L\r\n...`), or an
//! inline line of space-separated words (telnet, `nc`). The parser is incremental and
//! stateless between calls: it reads the buffer from the start, and returns
//! [`Parsed::Incomplete`] without consuming anything until a whole request is there.
//!
//! Memory is bounded by checking every declared length against [`Limits`] *before* waiting for
//! the bytes it announces: a client that declares a 2 GiB bulk string gets a protocol error at
//! once, and nothing is reserved for it. Complete requests are split out of the buffer as
//! `Bytes` views (no copy of the arguments).
//!
//! Replies are built as [`Reply`] values and encoded for the connection's protocol version
//! (RESP2 or RESP3, chosen with `HELLO`): maps, doubles and nulls have RESP3 forms and RESP2
//! fallbacks (flat arrays, bulk strings, `$-1`).

use bytes::{Bytes, BytesMut};
use std::fmt::Write as _;

/// Bounds a request must stay within; the same defaults as Redis except the bulk length.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest `$` length accepted (Redis's `proto-max-bulk-len`).
    pub max_bulk: usize,
    /// Largest `*` count accepted (Redis's `PROTO_MAX_MULTIBULK`).
    pub max_multibulk: usize,
    /// Longest inline request or header line (Redis's `PROTO_INLINE_MAX_SIZE`).
    pub max_inline: usize,
    /// Most bytes one request may declare in all (Redis's `client-query-buffer-limit`).
    pub max_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk: 64 << 20, max_multibulk: 1 << 20, max_inline: 64 << 10, max_request: 256 << 20 }
    }
}

/// The outcome of one parse attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request, removed from the buffer (an empty inline line gives no request and is
    /// skipped).
    Request(Vec<Bytes>),
    /// More bytes are needed; nothing was consumed.
    Incomplete,
}

/// A request that breaks the protocol; the connection is answered and closed, as Redis does.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(what: &str) -> Self {
        ProtocolError(format!("Protocol error: {what}"))
    }
}

/// Parses one request from the front of `buf`.
pub fn parse_request(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, ProtocolError> {
    loop {
        let Some(&first) = buf.first() else { return Ok(Parsed::Incomplete) };
        if first != b'*' {
            match parse_inline(buf, limits)? {
                // Blank lines are skipped, as Redis does (redis-cli's keep-alives, telnet).
                Some(args) if args.is_empty() => continue,
                Some(args) => return Ok(Parsed::Request(args)),
                None => return Ok(Parsed::Incomplete),
            }
        }
        return parse_multibulk(buf, limits);
    }
}

/// Finds the line starting at `at`; `Ok(None)` when its `\r\n` has not arrived yet.
fn line(buf: &[u8], at: usize, limits: &Limits, what: &str) -> Result<Option<(usize, usize)>, ProtocolError> {
    let rest = buf.get(at..).unwrap_or_default();
    match rest.iter().position(|&b| b == b'\r') {
        Some(cr) if rest.get(cr + 1).is_some() => {
            if rest.get(cr + 1) != Some(&b'\n') {
                return Err(ProtocolError::new(&format!("missing newline after {what}")));
            }
            Ok(Some((at + cr, at + cr + 2)))
        }
        _ if rest.len() > limits.max_inline => Err(ProtocolError::new(&format!("too big {what}"))),
        _ => Ok(None),
    }
}

/// Reads a decimal length (`-1` and up), as Redis's `string2ll` accepts them.
fn parse_len(digits: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(digits).ok()?;
    if s.is_empty() || s.starts_with('+') {
        return None;
    }
    s.parse::<i64>().ok()
}

fn parse_multibulk(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, ProtocolError> {
    let Some((end, mut pos)) = line(buf, 0, limits, "multibulk count")? else { return Ok(Parsed::Incomplete) };
    let count = match parse_len(&buf[1..end]) {
        Some(n) if n <= limits.max_multibulk as i64 => n,
        _ => return Err(ProtocolError::new("invalid multibulk length")),
    };
    if count <= 0 {
        let _ = buf.split_to(pos);
        // `*0` and `*-1` are empty requests: skip them and look for the next one.
        return parse_request(buf, limits);
    }
    let mut spans = Vec::with_capacity((count as usize).min(1024));
    for _ in 0..count {
        let Some(&tag) = buf.get(pos) else { return Ok(Parsed::Incomplete) };
        if tag != b'$' {
            return Err(ProtocolError::new(&format!("expected '$', got '{}'", char::from(tag))));
        }
        let Some((end, start)) = line(buf, pos, limits, "bulk length")? else { return Ok(Parsed::Incomplete) };
        let len = match parse_len(&buf[pos + 1..end]) {
            Some(n) if n >= 0 && n as usize <= limits.max_bulk => n as usize,
            _ => return Err(ProtocolError::new("invalid bulk length")),
        };
        if start + len > limits.max_request {
            return Err(ProtocolError::new("request exceeds the query buffer limit"));
        }
        if buf.len() < start + len + 2 {
            // Let the buffer grow toward what was announced, but never ahead of the bytes that
            // arrive: a client that lies about a length costs nothing.
            return Ok(Parsed::Incomplete);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(ProtocolError::new("bulk string not terminated by CRLF"));
        }
        spans.push((start, len));
        pos = start + len + 2;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Parsed::Request(spans.into_iter().map(|(s, l)| frame.slice(s..s + l)).collect()))
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.max_inline {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    let line = buf.split_to(nl + 1).freeze();
    let text = line.slice(..nl);
    let text = text.strip_suffix(b"\r").map_or(text.clone(), |t| text.slice(..t.len()));
    let mut args = Vec::new();
    let mut i = 0;
    while i < text.len() {
        while i < text.len() && text[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < text.len() && !text[i].is_ascii_whitespace() {
            i += 1;
        }
        if i > start {
            args.push(text.slice(start..i));
        }
    }
    Ok(Some(args))
}

/// The protocol version a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// One reply, independent of the protocol version until encoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ok,
    Simple(&'static str),
    /// An error line; the text starts with its code (`ERR`, `WRONGTYPE`, `MOVED`, ...).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    Nil,
    NilArray,
    Array(Vec<Reply>),
    /// RESP3 map; a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 double; a bulk string in RESP2.
    Double(f64),
}

impl Reply {
    pub fn err(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    pub fn bulk(bytes: impl Into<Bytes>) -> Reply {
        Reply::Bulk(bytes.into())
    }
}

/// Formats a score the way Redis prints doubles (`1`, `1.5`, `inf`, `-inf`).
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format!("{d}")
}

fn header(out: &mut BytesMut, tag: char, n: impl std::fmt::Display) {
    let mut s = String::with_capacity(16);
    let _ = write!(s, "{tag}{n}\r\n");
    out.extend_from_slice(s.as_bytes());
}

/// Appends the encoding of `reply` to `out`.
pub fn encode(reply: &Reply, proto: Protocol, out: &mut BytesMut) {
    match reply {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Simple(s) => line_reply(out, b'+', s),
        Reply::Error(s) => line_reply(out, b'-', s),
        Reply::Int(n) => header(out, ':', n),
        Reply::Bulk(b) => {
            header(out, '$', b.len());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Nil | Reply::NilArray if proto == Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
        Reply::Array(items) => {
            header(out, '*', items.len());
            for item in items {
                encode(item, proto, out);
            }
        }
        Reply::Map(pairs) => {
            match proto {
                Protocol::Resp2 => header(out, '*', pairs.len() * 2),
                Protocol::Resp3 => header(out, '%', pairs.len()),
            }
            for (k, v) in pairs {
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Reply::Double(d) => match proto {
            Protocol::Resp2 => encode(&Reply::Bulk(Bytes::from(format_double(*d))), proto, out),
            Protocol::Resp3 => line_reply(out, b',', &format_double(*d)),
        },
    }
}

/// Simple strings and errors cannot hold line breaks; they are replaced by spaces as Redis does.
fn line_reply(out: &mut BytesMut, tag: u8, text: &str) {
    out.extend_from_slice(&[tag]);
    if text.contains(['\r', '\n']) {
        out.extend_from_slice(text.replace(['\r', '\n'], " ").as_bytes());
    } else {
        out.extend_from_slice(text.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn parse_all(input: &[u8], limits: &Limits) -> Result<(Vec<Vec<Bytes>>, usize), ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Parsed::Request(args) = parse_request(&mut buf, limits)? {
            out.push(args);
        }
        Ok((out, buf.len()))
    }

    fn encode_request(args: &[Vec<u8>]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    #[test]
    fn parses_multibulk_and_inline_requests() {
        let (reqs, left) =
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\nSET a  b\r\n", &Limits::default()).unwrap();
        assert_eq!(
            reqs,
            vec![
                vec![Bytes::from("GET"), Bytes::from("k")],
                vec![Bytes::from("PING")],
                vec![Bytes::from("SET"), Bytes::from("a"), Bytes::from("b")]
            ]
        );
        assert_eq!(left, 0);
    }

    #[test]
    fn huge_declared_lengths_fail_before_any_payload_arrives() {
        let limits = Limits::default();
        let err = parse_all(b"*1\r\n$2147483648\r\n", &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid bulk length");
        let err = parse_all(b"*99999999999\r\n", &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid multibulk length");
        let err = parse_all(b"*1\r\n$-5\r\n", &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid bulk length");
        let err = parse_all(b"*2\r\n:1\r\n", &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: expected '$', got ':'");
        let small = Limits { max_request: 100, ..limits };
        assert!(parse_all(&encode_request(&[vec![b'x'; 60], vec![b'y'; 60]]), &small).is_err());
    }

    #[test]
    fn header_lines_without_an_end_are_bounded() {
        let limits = Limits { max_inline: 16, ..Limits::default() };
        assert!(parse_all(&[b'*'; 32], &limits).is_err());
        assert!(parse_all(&[b'a'; 32], &limits).is_err());
        assert_eq!(parse_all(&[b'a'; 8], &limits).unwrap(), (vec![], 8));
    }

    /// A property test: random requests, encoded and cut at every possible point, parse back
    /// to themselves, and no prefix of a valid stream is ever an error or a different request.
    #[test]
    fn random_requests_split_anywhere_round_trip() {
        let seed: u64 = std::env::var("SPLITKV_RESP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
        println!("resp property seed {seed}");
        let mut rng = SmallRng::seed_from_u64(seed);
        let limits = Limits::default();
        for _ in 0..300 {
            let n = rng.gen_range(1..6);
            let reqs: Vec<Vec<Vec<u8>>> = (0..n)
                .map(|_| {
                    (0..rng.gen_range(1..5))
                        .map(|_| (0..rng.gen_range(0..40)).map(|_| rng.gen::<u8>()).collect())
                        .collect()
                })
                .collect();
            let wire: Vec<u8> = reqs.iter().flat_map(|r| encode_request(r)).collect();
            let cut = rng.gen_range(0..=wire.len());
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut got = Vec::new();
            while let Parsed::Request(args) = parse_request(&mut buf, &limits).unwrap() {
                got.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
            buf.extend_from_slice(&wire[cut..]);
            while let Parsed::Request(args) = parse_request(&mut buf, &limits).unwrap() {
                got.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
            assert_eq!(got, reqs);
            assert!(buf.is_empty());
        }
    }

    /// Random garbage never panics and never consumes more than it was given.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = SmallRng::seed_from_u64(11);
        let alphabet = b"*$:\r\n0123456789-+abc ";
        let limits = Limits { max_bulk: 64, max_inline: 64, ..Limits::default() };
        for _ in 0..20_000 {
            let len = rng.gen_range(0..48);
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[rng.gen_range(0..alphabet.len())]).collect();
            let _ = parse_all(&bytes, &limits);
        }
    }

    #[test]
    fn replies_follow_the_protocol_version() {
        let mut out = BytesMut::new();
        let reply = Reply::Map(vec![(Reply::bulk("a"), Reply::Double(1.5)), (Reply::bulk("b"), Reply::Nil)]);
        encode(&reply, Protocol::Resp2, &mut out);
        assert_eq!(&out[..], b"*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$-1\r\n");
        out.clear();
        encode(&reply, Protocol::Resp3, &mut out);
        assert_eq!(&out[..], b"%2\r\n$1\r\na\r\n,1.5\r\n$1\r\nb\r\n_\r\n");
        out.clear();
        encode(&Reply::err("ERR bad\r\nthing"), Protocol::Resp2, &mut out);
        assert_eq!(&out[..], b"-ERR bad  thing\r\n");
    }
}
