//! The command table and the dispatcher every request goes through.
//!
//! Each command is described the way Redis's `COMMAND` reply describes it: name, arity
//! (positive: exact argument count including the name; negative: at least that many), whether
//! it writes, and where its keys are (first, last, step). The dispatcher uses that one
//! description for everything generic — authentication, arity errors, cluster redirects
//! (`MOVED`, `CROSSSLOT`), key locks for writers, and the `COMMAND` reply that cluster clients
//! route with — so handlers contain only the command's own logic.
//!
//! Handlers run synchronously on the connection's task and may block on engine I/O.

mod admin;
mod hashes;
pub mod keyspace;
mod strings;
mod zsets;

use crate::cluster::key_slot;
use crate::resp::{Protocol, Reply};
use crate::server::Server;
use crate::store::{now_ms, CmdResult};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Per-connection state the commands read and change.
#[derive(Debug)]
pub struct ConnState {
    pub id: u64,
    pub proto: Protocol,
    pub authenticated: bool,
    pub name: Option<Bytes>,
    /// Set by QUIT: reply, then close.
    pub quit: bool,
    /// A write command succeeded since the last flush of replies (the `group` sync policy
    /// waits for an fsync before sending them).
    pub wrote: bool,
}

impl ConnState {
    pub fn new(id: u64, authenticated: bool) -> Self {
        ConnState { id, proto: Protocol::Resp2, authenticated, name: None, quit: false, wrote: false }
    }
}

/// What a handler sees.
pub struct Ctx<'a> {
    pub server: &'a Server,
    pub conn: &'a mut ConnState,
    /// The request's time, in Unix milliseconds: one command sees one clock.
    pub now: u64,
    /// Keys found expired by reads, deleted after the command releases its locks.
    pub expired: Vec<Bytes>,
}

type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub struct Command {
    pub name: &'static str,
    pub arity: i32,
    pub write: bool,
    /// First key position (0 = no keys), last (-1 = the last argument), step.
    pub keys: (i32, i32, i32),
    pub run: Handler,
}

impl Command {
    const fn new(name: &'static str, arity: i32, write: bool, keys: (i32, i32, i32), run: Handler) -> Command {
        Command { name, arity, write, keys, run }
    }

    /// The arguments that are keys.
    pub fn key_args<'a>(&self, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
        let (first, last, step) = self.keys;
        let n = args.len() as i32;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let positions = if first == 0 { 0..0 } else { first..last + 1 };
        positions.step_by(step.max(1) as usize).filter_map(move |i| args.get(i as usize))
    }
}

const R: bool = false;
const W: bool = true;
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const KEY1: (i32, i32, i32) = (1, 1, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);

/// Every command the server knows.
pub static COMMANDS: &[Command] = &[
    Command::new("ping", -1, R, NO_KEYS, admin::ping),
    Command::new("echo", 2, R, NO_KEYS, admin::echo),
    Command::new("quit", -1, R, NO_KEYS, admin::quit),
    Command::new("hello", -1, R, NO_KEYS, admin::hello),
    Command::new("auth", -2, R, NO_KEYS, admin::auth),
    Command::new("select", 2, R, NO_KEYS, admin::select),
    Command::new("info", -1, R, NO_KEYS, admin::info),
    Command::new("config", -2, R, NO_KEYS, admin::config),
    Command::new("command", -1, R, NO_KEYS, admin::command),
    Command::new("client", -2, R, NO_KEYS, admin::client),
    Command::new("cluster", -2, R, NO_KEYS, admin::cluster),
    Command::new("readonly", 1, R, NO_KEYS, admin::ok),
    Command::new("readwrite", 1, R, NO_KEYS, admin::ok),
    Command::new("flushdb", -1, W, NO_KEYS, keyspace::flushdb),
    Command::new("flushall", -1, W, NO_KEYS, keyspace::flushdb),
    Command::new("dbsize", 1, R, NO_KEYS, keyspace::dbsize),
    Command::new("get", 2, R, KEY1, strings::get),
    Command::new("set", -3, W, KEY1, strings::set),
    Command::new("setnx", 3, W, KEY1, strings::setnx),
    Command::new("getdel", 2, W, KEY1, strings::getdel),
    Command::new("mget", -2, R, ALL_KEYS, strings::mget),
    Command::new("mset", -3, W, (1, -1, 2), strings::mset),
    Command::new("incr", 2, W, KEY1, strings::incr),
    Command::new("decr", 2, W, KEY1, strings::decr),
    Command::new("incrby", 3, W, KEY1, strings::incrby),
    Command::new("decrby", 3, W, KEY1, strings::decrby),
    Command::new("append", 3, W, KEY1, strings::append),
    Command::new("strlen", 2, R, KEY1, strings::strlen),
    Command::new("getrange", 4, R, KEY1, strings::getrange),
    Command::new("del", -2, W, ALL_KEYS, keyspace::del),
    Command::new("unlink", -2, W, ALL_KEYS, keyspace::del),
    Command::new("exists", -2, R, ALL_KEYS, keyspace::exists),
    Command::new("type", 2, R, KEY1, keyspace::type_),
    Command::new("scan", -2, R, NO_KEYS, keyspace::scan),
    Command::new("keys", 2, R, NO_KEYS, keyspace::keys),
    Command::new("ttl", 2, R, KEY1, keyspace::ttl),
    Command::new("pttl", 2, R, KEY1, keyspace::pttl),
    Command::new("expire", -3, W, KEY1, keyspace::expire),
    Command::new("pexpire", -3, W, KEY1, keyspace::pexpire),
    Command::new("persist", 2, W, KEY1, keyspace::persist),
    Command::new("hset", -4, W, KEY1, hashes::hset),
    Command::new("hmset", -4, W, KEY1, hashes::hmset),
    Command::new("hget", 3, R, KEY1, hashes::hget),
    Command::new("hmget", -3, R, KEY1, hashes::hmget),
    Command::new("hgetall", 2, R, KEY1, hashes::hgetall),
    Command::new("hkeys", 2, R, KEY1, hashes::hkeys),
    Command::new("hvals", 2, R, KEY1, hashes::hvals),
    Command::new("hdel", -3, W, KEY1, hashes::hdel),
    Command::new("hexists", 3, R, KEY1, hashes::hexists),
    Command::new("hlen", 2, R, KEY1, hashes::hlen),
    Command::new("hincrby", 4, W, KEY1, hashes::hincrby),
    Command::new("zadd", -4, W, KEY1, zsets::zadd),
    Command::new("zrem", -3, W, KEY1, zsets::zrem),
    Command::new("zrange", -4, R, KEY1, zsets::zrange),
    Command::new("zrangebyscore", -4, R, KEY1, zsets::zrangebyscore),
    Command::new("zcard", 2, R, KEY1, zsets::zcard),
    Command::new("zscore", 3, R, KEY1, zsets::zscore),
];

fn table() -> &'static HashMap<&'static str, &'static Command> {
    static TABLE: OnceLock<HashMap<&'static str, &'static Command>> = OnceLock::new();
    TABLE.get_or_init(|| COMMANDS.iter().map(|c| (c.name, c)).collect())
}

pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    let mut lower = [0u8; 24];
    let slot = lower.get_mut(..name.len())?;
    slot.copy_from_slice(name);
    slot.make_ascii_lowercase();
    table().get(std::str::from_utf8(slot).ok()?).copied()
}

/// Runs one request and returns its reply.
pub fn execute(server: &Server, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    let Some(name) = args.first() else { return Reply::err("ERR empty command") };
    let Some(cmd) = lookup(name) else {
        let shown: Vec<String> =
            args[1..].iter().take(8).map(|a| format!("'{}'", String::from_utf8_lossy(a))).collect();
        return Reply::err(format!(
            "ERR unknown command '{}', with args beginning with: {}",
            String::from_utf8_lossy(name),
            shown.join(" ")
        ));
    };
    if !conn.authenticated && !matches!(cmd.name, "auth" | "hello" | "quit") {
        return Reply::err("NOAUTH Authentication required.");
    }
    let n = args.len() as i32;
    if (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) {
        return Reply::err(format!("ERR wrong number of arguments for '{}' command", cmd.name));
    }
    if cmd.keys.2 > 1 && (n - 1) % cmd.keys.2 != 0 {
        return Reply::err(format!("ERR wrong number of arguments for '{}' command", cmd.name));
    }
    if let Some(map) = &server.cluster {
        let mut slot = None;
        for key in cmd.key_args(args) {
            let s = key_slot(key);
            match slot {
                None => slot = Some(s),
                Some(prev) if prev != s => return Reply::err("CROSSSLOT Keys in request don't hash to the same slot"),
                Some(_) => {}
            }
        }
        if let Some(redirect) = slot.and_then(|s| map.redirect(s)) {
            return redirect;
        }
    }
    server.stats.commands.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut ctx = Ctx { server, conn, now: now_ms(), expired: Vec::new() };
    let result = if cmd.write {
        let _guards = server.store.lock(cmd.key_args(args).map(|k| k.as_ref()));
        (cmd.run)(&mut ctx, args)
    } else {
        (cmd.run)(&mut ctx, args)
    };
    for key in std::mem::take(&mut ctx.expired) {
        // Lazy expiry: a failure here only leaves the key for the sweep.
        let _ = server.store.expire_if_due(&key, ctx.now);
    }
    match result {
        Ok(reply) => {
            if cmd.write {
                ctx.conn.wrote = true;
            }
            reply
        }
        Err(reply) => reply,
    }
}

pub fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

pub fn not_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

/// A strict decimal integer, as Redis's `string2ll` reads it (no spaces, no `+`).
pub fn parse_i64(arg: &[u8]) -> Result<i64, Reply> {
    if arg.is_empty() || arg.len() > 20 || arg[0] == b'+' || (arg.len() > 1 && arg[0] == b'0') {
        return Err(not_integer());
    }
    std::str::from_utf8(arg).ok().and_then(|s| s.parse().ok()).ok_or_else(not_integer)
}

/// A score or float argument: decimal, exponent, `inf`, `+inf`, `-inf`; never NaN.
pub fn parse_f64(arg: &[u8]) -> Result<f64, Reply> {
    let bad = || Reply::err("ERR value is not a valid float");
    let s = std::str::from_utf8(arg).map_err(|_| bad())?;
    let lower = s.to_ascii_lowercase();
    let v: f64 = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if s.is_empty()
            || s.contains(|c: char| c.is_ascii_whitespace() || c.is_ascii_alphabetic() && c != 'e' && c != 'E') =>
        {
            return Err(bad())
        }
        _ => s.parse().map_err(|_| bad())?,
    };
    if v.is_nan() {
        return Err(bad());
    }
    Ok(v)
}

/// Redis's glob matching (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), as KEYS, SCAN and CONFIG GET use.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the most recent `*`: pattern index after it, text index it covers to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p + 1, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = match_class(pattern, p, text[t]) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() && pattern[p + 1] == text[t] => {
                    p += 2;
                    t += 1;
                    continue;
                }
                c if c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp;
                t = st + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[open] == b'['`; returns whether it
/// matched and the index after the class, or `None` for an unterminated class.
fn match_class(pattern: &[u8], open: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    while let Some(&pc) = pattern.get(i) {
        if pc == b']' {
            return Some((matched != negate, i + 1));
        }
        if pc == b'\\' && i + 1 < pattern.len() {
            matched |= pattern[i + 1] == c;
            i += 2;
        } else if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&e| e != b']') {
            let (lo, hi) = (pc.min(pattern[i + 2]), pc.max(pattern[i + 2]));
            matched |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            matched |= pc == c;
            i += 1;
        }
    }
    None
}

/// The literal bytes a pattern's matches must start with (up to its first special character):
/// KEYS and SCAN start their range there instead of at the first key.
pub fn glob_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern.iter().position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\')).unwrap_or(pattern.len());
    &pattern[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_redis() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("user:*:name", "user:12:name", true),
            ("user:*:name", "user:12:age", false),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("*a*b*", "xxaxxbxx", true),
            ("", "", true),
            ("", "a", false),
        ];
        for &(p, t, want) in cases {
            assert_eq!(glob_match(p.as_bytes(), t.as_bytes()), want, "{p} ~ {t}");
        }
        assert_eq!(glob_prefix(b"user:*"), b"user:");
    }

    #[test]
    fn numbers_are_strict() {
        assert_eq!(parse_i64(b"-42"), Ok(-42));
        for bad in [&b""[..], b"+1", b" 1", b"01", b"1.0", b"99999999999999999999"] {
            assert!(parse_i64(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_f64(b"1.5"), Ok(1.5));
        assert_eq!(parse_f64(b"-inf"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e3"), Ok(1000.0));
        assert!(parse_f64(b"nan").is_err());
        assert!(parse_f64(b"abc").is_err());
    }

    #[test]
    fn key_positions_follow_the_table() {
        let args: Vec<Bytes> = ["mset", "a", "1", "b", "2"].iter().map(|s| Bytes::from(*s)).collect();
        let mset = lookup(b"MSET").unwrap();
        assert_eq!(mset.key_args(&args).collect::<Vec<_>>(), vec!["a", "b"]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_args(&args).count(), 0);
    }
}
