//! Malformed RESP from one client — truncated frames, huge declared lengths, wrong frame
//! types, garbage — gets a protocol error (or waits for more bytes) and never disturbs the
//! other clients.

mod common;

use common::{ServerProcess, TestResult};
use redis::Commands;
use std::io::{Read, Write};
use std::net::TcpStream;

/// Sends `bytes` and reads until the server closes the connection; returns what it replied.
fn send_and_read_to_close(port: u16, bytes: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.write_all(bytes)?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

#[test]
fn protocol_errors_close_only_the_offending_connection() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = ServerProcess::start(&dir.path().join("db"), &[]);
    let mut healthy = server.client();
    let _: () = healthy.set("k", "v")?;

    // A truncated frame just waits; the server is not stuck on it.
    let mut truncated = TcpStream::connect(("127.0.0.1", server.port))?;
    truncated.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nonly-a-little")?;

    let cases: &[(&[u8], &str)] = &[
        // A 2 GiB bulk string is refused from its header alone.
        (b"*2\r\n$3\r\nGET\r\n$2147483648\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$-7\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*99999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*2\r\n:1\r\n:2\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"),
        (b"*1\r\n$3\r\nGETxx\r\n", "-ERR Protocol error: bulk string not terminated by CRLF\r\n"),
        (b"*1x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
    ];
    for (bytes, want) in cases {
        let got = send_and_read_to_close(server.port, bytes)?;
        assert_eq!(got, *want, "for {:?}", String::from_utf8_lossy(bytes));
    }

    // An endless header line is cut off at the inline limit (64 KiB) instead of buffered
    // forever. One byte past the limit, so the server has read everything when it closes.
    let got = send_and_read_to_close(server.port, &vec![b'*'; (64 << 10) + 1])?;
    assert_eq!(got, "-ERR Protocol error: too big multibulk count\r\n");

    // A declared length under the limit but beyond the request limit.
    let small = tempfile::tempdir()?;
    let limited = ServerProcess::start(&small.path().join("db"), &["--client-query-buffer-limit", "1000"]);
    let got = send_and_read_to_close(limited.port, b"*2\r\n$3\r\nGET\r\n$5000\r\n")?;
    assert_eq!(got, "-ERR Protocol error: request exceeds the query buffer limit\r\n");

    // Commands that are well framed but wrong get ordinary errors and the connection stays.
    let mut s = TcpStream::connect(("127.0.0.1", server.port))?;
    s.write_all(b"*1\r\n$3\r\nGET\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\nPING\r\n")?;
    let mut buf = [0u8; 256];
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let n = s.read(&mut buf)?;
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR wrong number of arguments for 'get' command\r\n-ERR value is not an integer or out of range\r\n+PONG\r\n"
    );

    // Through all of it the healthy client was served, and the truncated frame, once
    // completed, is executed.
    assert_eq!(healthy.get::<_, String>("k")?, "v");
    truncated.write_all(&[b'x'; 87])?;
    truncated.write_all(b"\r\n")?;
    let mut ok = [0u8; 5];
    truncated.read_exact(&mut ok)?;
    assert_eq!(&ok, b"+OK\r\n");
    assert_eq!(healthy.get::<_, String>("k")?.len(), 100);
    Ok(())
}
