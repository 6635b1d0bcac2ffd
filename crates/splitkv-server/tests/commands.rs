//! The command set through a real client crate (`redis`), against a spawned server.

mod common;

use common::{error_of, ServerProcess, TestResult};
use redis::Commands;
use std::collections::HashMap;

fn server() -> (tempfile::TempDir, ServerProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ServerProcess::start(&dir.path().join("db"), &[]);
    (dir, server)
}

#[test]
fn strings_behave_like_redis() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    let _: () = con.set("k", "v")?;
    assert_eq!(con.get::<_, Option<String>>("k")?, Some("v".into()));
    assert_eq!(con.get::<_, Option<String>>("missing")?, None);
    // NX / XX / GET
    let r: Option<String> = redis::cmd("SET").arg("k").arg("w").arg("NX").query(&mut con)?;
    assert_eq!(r, None);
    let r: Option<String> = redis::cmd("SET").arg("new").arg("x").arg("XX").query(&mut con)?;
    assert_eq!(r, None);
    let r: Option<String> = redis::cmd("SET").arg("k").arg("w").arg("GET").query(&mut con)?;
    assert_eq!(r.as_deref(), Some("v"));
    assert_eq!(redis::cmd("GETDEL").arg("k").query::<Option<String>>(&mut con)?.as_deref(), Some("w"));
    assert_eq!(con.exists::<_, i64>("k")?, 0);
    // MSET / MGET, a key twice takes its last value
    let _: () = redis::cmd("MSET").arg(&["a", "1", "b", "2", "a", "3"]).query(&mut con)?;
    assert_eq!(con.mget::<_, Vec<Option<String>>>(&["a", "b", "c"])?, vec![Some("3".into()), Some("2".into()), None]);
    // counters
    assert_eq!(con.incr::<_, _, i64>("n", 1)?, 1);
    assert_eq!(redis::cmd("INCRBY").arg("n").arg(41).query::<i64>(&mut con)?, 42);
    assert_eq!(redis::cmd("DECR").arg("n").query::<i64>(&mut con)?, 41);
    let _: () = con.set("big", i64::MAX)?;
    assert_eq!(error_of(&mut con, &["INCR", "big"]), "ERR increment or decrement would overflow");
    let _: () = con.set("text", "abc")?;
    assert_eq!(error_of(&mut con, &["INCR", "text"]), "ERR value is not an integer or out of range");
    assert_eq!(error_of(&mut con, &["INCRBY", "n", "1.5"]), "ERR value is not an integer or out of range");
    // APPEND / STRLEN / GETRANGE
    assert_eq!(con.append::<_, _, i64>("text", "def")?, 6);
    assert_eq!(redis::cmd("STRLEN").arg("text").query::<i64>(&mut con)?, 6);
    assert_eq!(con.getrange::<_, String>("text", 1, 3)?, "bcd");
    assert_eq!(con.getrange::<_, String>("text", -3, -1)?, "def");
    assert_eq!(con.getrange::<_, String>("text", 10, 20)?, "");
    // DEL / UNLINK / EXISTS count per argument
    assert_eq!(redis::cmd("EXISTS").arg(&["a", "a", "b", "zz"]).query::<i64>(&mut con)?, 3);
    assert_eq!(con.del::<_, i64>(&["a", "b", "zz"])?, 2);
    assert_eq!(redis::cmd("UNLINK").arg("text").query::<i64>(&mut con)?, 1);
    // binary-safe keys and values
    let value: Vec<u8> = (0..=255u8).collect();
    let _: () = con.set(b"bin\x00\xff".as_slice(), value.as_slice())?;
    assert_eq!(con.get::<_, Vec<u8>>(b"bin\x00\xff".as_slice())?, value);
    Ok(())
}

#[test]
fn errors_are_clear() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    assert_eq!(error_of(&mut con, &["GET"]), "ERR wrong number of arguments for 'get' command");
    assert_eq!(error_of(&mut con, &["MSET", "a"]), "ERR wrong number of arguments for 'mset' command");
    assert_eq!(error_of(&mut con, &["MSET", "a", "1", "b"]), "ERR wrong number of arguments for 'mset' command");
    assert!(error_of(&mut con, &["NOSUCH", "x"]).starts_with("ERR unknown command 'NOSUCH'"));
    assert_eq!(error_of(&mut con, &["SET", "k", "v", "EX", "0"]), "ERR invalid expire time in 'set' command");
    assert_eq!(error_of(&mut con, &["SET", "k", "v", "BOGUS"]), "ERR syntax error");
    assert_eq!(error_of(&mut con, &["SELECT", "1"]), "ERR DB index is out of range");
    let _: () = con.hset("h", "f", "v")?;
    assert_eq!(error_of(&mut con, &["GET", "h"]), "WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(
        error_of(&mut con, &["ZADD", "h", "1", "m"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(error_of(&mut con, &["ZADD", "z", "notanumber", "m"]), "ERR value is not a valid float");
    assert_eq!(error_of(&mut con, &["EXPIRE", "h", "soon"]), "ERR value is not an integer or out of range");
    // The connection still works after every error.
    assert_eq!(redis::cmd("PING").query::<String>(&mut con)?, "PONG");
    // SET replaces any type.
    let _: () = con.set("h", "now a string")?;
    assert_eq!(con.get::<_, String>("h")?, "now a string");
    assert!(con.hlen::<_, i64>("h").is_err());
    Ok(())
}

#[test]
fn hashes() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    assert_eq!(redis::cmd("HSET").arg(&["h", "a", "1", "b", "2", "a", "3"]).query::<i64>(&mut con)?, 2);
    assert_eq!(con.hlen::<_, i64>("h")?, 2);
    assert_eq!(con.hget::<_, _, String>("h", "a")?, "3");
    assert_eq!(con.hget::<_, _, Option<String>>("h", "zz")?, None);
    assert_eq!(
        redis::cmd("HMGET").arg(&["h", "a", "zz", "b"]).query::<Vec<Option<String>>>(&mut con)?,
        vec![Some("3".into()), None, Some("2".into())]
    );
    let all: HashMap<String, String> = con.hgetall("h")?;
    assert_eq!(all, HashMap::from([("a".into(), "3".into()), ("b".into(), "2".into())]));
    assert!(con.hexists::<_, _, bool>("h", "b")?);
    assert_eq!(con.hincr::<_, _, _, i64>("h", "b", 10)?, 12);
    assert_eq!(con.hincr::<_, _, _, i64>("h", "c", -1)?, -1);
    assert_eq!(con.hlen::<_, i64>("h")?, 3);
    assert_eq!(error_of(&mut con, &["HINCRBY", "h", "a", "x"]), "ERR value is not an integer or out of range");
    assert_eq!(redis::cmd("HDEL").arg(&["h", "a", "a", "zz"]).query::<i64>(&mut con)?, 1);
    assert_eq!(con.hlen::<_, i64>("h")?, 2);
    assert_eq!(redis::cmd("HKEYS").arg("h").query::<Vec<String>>(&mut con)?, vec!["b", "c"]);
    // Deleting the last field deletes the key; a prefix-sharing key is untouched.
    let _: () = con.hset("h2", "x", "y")?;
    assert_eq!(redis::cmd("HDEL").arg(&["h", "b", "c"]).query::<i64>(&mut con)?, 2);
    assert_eq!(con.exists::<_, i64>("h")?, 0);
    assert_eq!(con.hgetall::<_, HashMap<String, String>>("h2")?.len(), 1);
    // DEL removes every field: a new hash of the same name starts empty.
    let _: () = redis::cmd("HSET").arg(&["h3", "a", "1", "b", "2"]).query(&mut con)?;
    assert_eq!(con.del::<_, i64>("h3")?, 1);
    let _: () = con.hset("h3", "c", "3")?;
    assert_eq!(con.hgetall::<_, HashMap<String, String>>("h3")?, HashMap::from([("c".into(), "3".into())]));
    Ok(())
}

#[test]
fn sorted_sets() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    assert_eq!(redis::cmd("ZADD").arg(&["z", "1", "a", "2", "b", "-1.5", "c", "+inf", "d"]).query::<i64>(&mut con)?, 4);
    assert_eq!(con.zcard::<_, i64>("z")?, 4);
    assert_eq!(con.zrange::<_, Vec<String>>("z", 0, -1)?, vec!["c", "a", "b", "d"]);
    assert_eq!(con.zrange_withscores::<_, Vec<(String, f64)>>("z", 0, 1)?, vec![("c".into(), -1.5), ("a".into(), 1.0)]);
    assert_eq!(redis::cmd("ZRANGE").arg(&["z", "0", "1", "REV"]).query::<Vec<String>>(&mut con)?, vec!["d", "b"]);
    assert_eq!(con.zscore::<_, _, f64>("z", "c")?, -1.5);
    assert_eq!(con.zscore::<_, _, Option<f64>>("z", "nope")?, None);
    // update: CH counts changes, NX leaves existing members, XX adds nothing new
    assert_eq!(redis::cmd("ZADD").arg(&["z", "CH", "5", "a", "7", "e"]).query::<i64>(&mut con)?, 2);
    assert_eq!(redis::cmd("ZADD").arg(&["z", "NX", "100", "a"]).query::<i64>(&mut con)?, 0);
    assert_eq!(redis::cmd("ZADD").arg(&["z", "XX", "100", "zz"]).query::<i64>(&mut con)?, 0);
    assert_eq!(con.zscore::<_, _, f64>("z", "a")?, 5.0);
    assert_eq!(con.zrangebyscore::<_, _, _, Vec<String>>("z", 2, 5)?, vec!["b", "a"]);
    assert_eq!(con.zrangebyscore::<_, _, _, Vec<String>>("z", "(2", "+inf")?, vec!["a", "e", "d"]);
    assert_eq!(con.zrangebyscore::<_, _, _, Vec<String>>("z", "-inf", "(5")?, vec!["c", "b"]);
    assert_eq!(
        redis::cmd("ZRANGEBYSCORE")
            .arg(&["z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"])
            .query::<Vec<(String, f64)>>(&mut con)?,
        vec![("b".into(), 2.0), ("a".into(), 5.0)]
    );
    assert_eq!(error_of(&mut con, &["ZRANGEBYSCORE", "z", "x", "1"]), "ERR min or max is not a float");
    assert_eq!(redis::cmd("ZREM").arg(&["z", "a", "a", "zz"]).query::<i64>(&mut con)?, 1);
    assert_eq!(con.zcard::<_, i64>("z")?, 4);
    assert_eq!(con.zrange::<_, Vec<String>>("z", -2, -1)?, vec!["e", "d"]);
    Ok(())
}

#[test]
fn expiry_is_lazy_and_swept() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    assert_eq!(con.ttl::<_, i64>("nokey")?, -2);
    let _: () = con.set("k", "v")?;
    assert_eq!(con.ttl::<_, i64>("k")?, -1);
    assert!(con.expire::<_, bool>("k", 100)?);
    let ttl: i64 = con.ttl("k")?;
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert!(con.pttl::<_, i64>("k")? > 98_000);
    assert!(con.persist::<_, bool>("k")?);
    assert_eq!(con.ttl::<_, i64>("k")?, -1);
    // EXPIRE flags
    assert_eq!(redis::cmd("EXPIRE").arg(&["k", "100", "XX"]).query::<i64>(&mut con)?, 0);
    assert_eq!(redis::cmd("EXPIRE").arg(&["k", "100", "NX"]).query::<i64>(&mut con)?, 1);
    assert_eq!(redis::cmd("EXPIRE").arg(&["k", "50", "GT"]).query::<i64>(&mut con)?, 0);
    // SET clears the TTL, KEEPTTL keeps it
    let _: () = redis::cmd("SET").arg(&["k", "v2", "KEEPTTL"]).query(&mut con)?;
    assert!(con.ttl::<_, i64>("k")? > 0);
    let _: () = con.set("k", "v3")?;
    assert_eq!(con.ttl::<_, i64>("k")?, -1);
    // An expiry in the past deletes at once; a hash with a TTL loses its fields too.
    let _: () = redis::cmd("HSET").arg(&["h", "a", "1", "b", "2"]).query(&mut con)?;
    assert_eq!(redis::cmd("PEXPIRE").arg(&["h", "-1"]).query::<i64>(&mut con)?, 1);
    assert_eq!(con.exists::<_, i64>("h")?, 0);
    let _: () = con.hset("h", "c", "3")?;
    assert_eq!(con.hlen::<_, i64>("h")?, 1);
    // A key that expires while nobody reads it is removed by the sweep: poll DBSIZE (which
    // counts unswept keys) with a bounded number of tries rather than a fixed sleep.
    let _: () = redis::cmd("SET").arg(&["gone", "v", "PX", "1"]).query(&mut con)?;
    let _: () = redis::cmd("ZADD").arg(&["gonez", "1", "m"]).query(&mut con)?;
    let _: () = redis::cmd("PEXPIRE").arg(&["gonez", "1"]).query(&mut con)?;
    let mut swept = false;
    for _ in 0..200 {
        let keys: Vec<String> = redis::cmd("KEYS").arg("gone*").query(&mut con)?;
        let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con)?;
        if keys.is_empty() && dbsize == 2 {
            swept = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(swept, "expired keys were never swept");
    // Lazily hidden on read even before the sweep.
    let _: () = redis::cmd("SET").arg(&["lazy", "v", "PX", "1"]).query(&mut con)?;
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(con.get::<_, Option<String>>("lazy")?, None);
    assert_eq!(con.ttl::<_, i64>("lazy")?, -2);
    Ok(())
}

#[test]
fn scan_and_keys_walk_the_ordered_keyspace() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    for i in 0..57 {
        let _: () = con.set(format!("user:{i:03}"), i)?;
    }
    let _: () = con.hset("other", "f", "v")?;
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("user:*").query(&mut con)?;
    assert_eq!(keys.len(), 57);
    keys.sort();
    assert_eq!(keys[0], "user:000");
    assert_eq!(redis::cmd("KEYS").arg("user:0[0-1]?").query::<Vec<String>>(&mut con)?.len(), 20);
    // Walk with cursors: every key exactly once, in order.
    let mut cursor = 0u64;
    let mut seen = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(10).query(&mut con)?;
        seen.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), 58);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
    let iter: Vec<String> = con.scan_match("user:01*")?.collect();
    assert_eq!(iter.len(), 10);
    let hashes: (u64, Vec<String>) = redis::cmd("SCAN").arg(&["0", "TYPE", "hash", "COUNT", "1000"]).query(&mut con)?;
    assert_eq!(hashes.1, vec!["other"]);
    assert_eq!(redis::cmd("TYPE").arg("other").query::<String>(&mut con)?, "hash");
    assert_eq!(error_of(&mut con, &["SCAN", "123456"]), "ERR invalid cursor (expired or unknown)");
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con)?, 58);
    let _: () = redis::cmd("FLUSHDB").query(&mut con)?;
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con)?, 0);
    assert_eq!(con.hlen::<_, i64>("other")?, 0);
    Ok(())
}

#[test]
fn pipelines_and_many_connections() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("INCR").arg("counter").ignore();
        pipe.cmd("SET").arg(format!("p{i}")).arg(i).ignore();
    }
    pipe.cmd("GET").arg("counter");
    let (counter,): (i64,) = pipe.query(&mut con)?;
    assert_eq!(counter, 1000);
    // Concurrent INCRs from many connections are never lost (read-modify-write under a lock).
    let url = server.url();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || -> redis::RedisResult<()> {
                let mut con = redis::Client::open(url)?.get_connection()?;
                for _ in 0..200 {
                    let _: i64 = con.incr("shared", 1)?;
                    let _: i64 = con.hincr("hshared", "f", 1)?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread")?;
    }
    assert_eq!(con.get::<_, i64>("shared")?, 1600);
    assert_eq!(con.hget::<_, _, i64>("hshared", "f")?, 1600);
    Ok(())
}

#[test]
fn auth_is_required_when_configured() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = ServerProcess::start(&dir.path().join("db"), &["--requirepass", "s3cret"]);
    let mut con = redis::Client::open(server.url())?.get_connection()?;
    assert_eq!(error_of(&mut con, &["GET", "k"]), "NOAUTH Authentication required.");
    assert_eq!(error_of(&mut con, &["AUTH", "wrong"]), "WRONGPASS invalid username-password pair or user is disabled.");
    let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut con)?;
    let _: () = con.set("k", "v")?;
    // The client crate's own AUTH on connect (password in the URL).
    let mut authed = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", server.port))?.get_connection()?;
    assert_eq!(authed.get::<_, String>("k")?, "v");
    Ok(())
}

#[test]
fn resp3_through_hello() -> TestResult {
    let (_dir, server) = server();
    let mut con = redis::Client::open(format!("{}?protocol=resp3", server.url()))?.get_connection()?;
    let _: () = redis::cmd("HSET").arg(&["h", "a", "1"]).query(&mut con)?;
    match redis::cmd("HGETALL").arg("h").query::<redis::Value>(&mut con)? {
        redis::Value::Map(pairs) => assert_eq!(pairs.len(), 1),
        other => panic!("expected a RESP3 map, got {other:?}"),
    }
    let _: () = redis::cmd("ZADD").arg(&["z", "1.5", "m"]).query(&mut con)?;
    match redis::cmd("ZSCORE").arg(&["z", "m"]).query::<redis::Value>(&mut con)? {
        redis::Value::Double(d) => assert_eq!(d, 1.5),
        other => panic!("expected a RESP3 double, got {other:?}"),
    }
    assert_eq!(redis::cmd("GET").arg("missing").query::<redis::Value>(&mut con)?, redis::Value::Nil);
    Ok(())
}

#[test]
fn info_and_config_answer_probes() -> TestResult {
    let (_dir, server) = server();
    let mut con = server.client();
    let info: String = redis::cmd("INFO").query(&mut con)?;
    assert!(info.contains("redis_version:"));
    assert!(info.contains("# Splitkv"));
    let save: HashMap<String, String> = redis::cmd("CONFIG").arg(&["GET", "save"]).query(&mut con)?;
    assert_eq!(save.get("save").map(String::as_str), Some(""));
    let append: HashMap<String, String> = redis::cmd("CONFIG").arg(&["GET", "append*"]).query(&mut con)?;
    assert_eq!(append.get("appendfsync").map(String::as_str), Some("everysec"));
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut con)?;
    let all: Vec<redis::Value> = redis::cmd("COMMAND").query(&mut con)?;
    assert_eq!(all.len() as i64, count);
    assert_eq!(redis::cmd("CLUSTER").arg(&["KEYSLOT", "foo"]).query::<i64>(&mut con)?, 12182);
    assert_eq!(error_of(&mut con, &["CLUSTER", "SLOTS"]), "ERR This instance has cluster support disabled");
    Ok(())
}
