//! Connection and server commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT, INFO, CONFIG GET,
//! COMMAND, CLIENT, CLUSTER.
//!
//! These answer what real clients ask when they connect — redis-cli's `COMMAND DOCS`,
//! redis-benchmark's `CONFIG GET save`/`appendonly`, redis-py's `CLIENT SETINFO`, and the
//! cluster clients' `CLUSTER SLOTS`/`NODES` and `COMMAND` (key positions for routing) — with
//! what is true of this server.

use super::{glob_match, syntax_error, Ctx, COMMANDS};
use crate::cluster::key_slot;
use crate::resp::{Protocol, Reply};
use crate::store::CmdResult;
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// The Redis version reported to clients: the command set and replies follow Redis 7.
pub const REDIS_COMPAT_VERSION: &str = "7.2.0";

pub fn ok(_ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Ok(Reply::Ok)
}

pub fn ping(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        1 => Ok(Reply::Simple("PONG")),
        2 => Ok(Reply::Bulk(args[1].clone())),
        _ => Err(Reply::err("ERR wrong number of arguments for 'ping' command")),
    }
}

pub fn echo(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(args[1].clone()))
}

pub fn quit(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.conn.quit = true;
    Ok(Reply::Ok)
}

fn check_password(ctx: &mut Ctx, user: Option<&[u8]>, password: &[u8]) -> CmdResult {
    let Some(expected) = &ctx.server.requirepass else {
        return Err(Reply::err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if user_ok && password == expected.as_bytes() {
        ctx.conn.authenticated = true;
        Ok(Reply::Ok)
    } else {
        Err(Reply::err("WRONGPASS invalid username-password pair or user is disabled."))
    }
}

pub fn auth(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        2 => check_password(ctx, None, &args[1]),
        3 => check_password(ctx, Some(&args[1]), &args[2]),
        _ => Err(syntax_error()),
    }
}

pub fn hello(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut proto = ctx.conn.proto;
    if let Some(version) = args.get(1) {
        proto = match version.as_ref() {
            b"2" => Protocol::Resp2,
            b"3" => Protocol::Resp3,
            _ => return Err(Reply::err("NOPROTO unsupported protocol version")),
        };
    }
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"AUTH" if i + 2 < args.len() => {
                check_password(ctx, Some(&args[i + 1]), &args[i + 2])?;
                i += 3;
            }
            b"SETNAME" if i + 1 < args.len() => {
                ctx.conn.name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => return Err(syntax_error()),
        }
    }
    if !ctx.conn.authenticated {
        return Err(Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    ctx.conn.proto = proto;
    let mode = if ctx.server.cluster.is_some() { "cluster" } else { "standalone" };
    Ok(Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REDIS_COMPAT_VERSION)),
        (Reply::bulk("proto"), Reply::Int(if proto == Protocol::Resp3 { 3 } else { 2 })),
        (Reply::bulk("id"), Reply::Int(ctx.conn.id as i64)),
        (Reply::bulk("mode"), Reply::bulk(mode)),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ]))
}

pub fn select(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args[1].as_ref() {
        b"0" => Ok(Reply::Ok),
        _ => Err(Reply::err("ERR DB index is out of range")),
    }
}

pub fn info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let server = ctx.server;
    let wanted: Vec<String> = args[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let show =
        |section: &str| wanted.is_empty() || wanted.iter().any(|w| w == section || w == "all" || w == "everything");
    let mut out = String::new();
    if show("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_COMPAT_VERSION}\r\nsplitkv_server_version:{}\r\nredis_mode:{}\r\n\
             process_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            if server.cluster.is_some() { "cluster" } else { "standalone" },
            std::process::id(),
            server.port,
            server.started.elapsed().as_secs()
        );
    }
    if show("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            server.stats.connected.load(Ordering::Relaxed),
            server.maxclients
        );
    }
    if show("persistence") {
        let _ = write!(out, "# Persistence\r\naof_enabled:1\r\nsplitkv_sync_policy:{:?}\r\n\r\n", server.policy);
    }
    if show("stats") {
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{}\r\n\r\n",
            server.stats.connections.load(Ordering::Relaxed),
            server.stats.commands.load(Ordering::Relaxed),
            server.store.expired_keys.load(Ordering::Relaxed)
        );
    }
    if show("cluster") {
        let _ = write!(out, "# Cluster\r\ncluster_enabled:{}\r\n\r\n", u8::from(server.cluster.is_some()));
    }
    if show("splitkv") {
        // The engine's figures (`Db::stats`), one `key:value` line each as INFO parsers expect.
        let st = server.store.db.stats();
        let _ = write!(
            out,
            "# Splitkv\r\nsplitkv_last_sequence:{}\r\nsplitkv_user_bytes_written:{}\r\nsplitkv_vlog_bytes_written:{}\r\n\
             splitkv_write_amplification:{:.3}\r\nsplitkv_memtable_bytes:{}\r\nsplitkv_flushes:{}\r\nsplitkv_compactions:{}\r\n\
             splitkv_gets:{}\r\nsplitkv_vlog_reads:{}\r\nsplitkv_block_cache_hits:{}\r\nsplitkv_block_cache_misses:{}\r\n\
             splitkv_vlog_segments:{}\r\nsplitkv_gc_runs:{}\r\nsplitkv_disk_bytes:{}\r\n",
            st.last_sequence,
            st.user_bytes_written,
            st.vlog_bytes_written,
            st.write_amplification(),
            st.memtable_bytes,
            st.flushes,
            st.compactions,
            st.gets,
            st.vlog_reads,
            st.block_cache_hits,
            st.block_cache_misses,
            st.segments.len(),
            st.gc_runs,
            st.disk_bytes,
        );
        for level in st.levels.iter().filter(|l| l.files > 0) {
            let _ = write!(out, "splitkv_level{}:files={},bytes={}\r\n", level.level, level.files, level.bytes);
        }
        out.push_str("\r\n");
    }
    Ok(Reply::bulk(out))
}

/// The parameters CONFIG GET reports: what clients and benchmarks probe.
fn config_params(ctx: &Ctx) -> Vec<(&'static str, String)> {
    let s = ctx.server;
    vec![
        ("appendonly", "yes".into()),
        ("appendfsync", s.policy.appendfsync().into()),
        ("save", String::new()),
        ("databases", "1".into()),
        ("port", s.port.to_string()),
        ("bind", s.bind.clone()),
        ("maxclients", s.maxclients.to_string()),
        ("maxmemory", "0".into()),
        ("proto-max-bulk-len", s.limits.max_bulk.to_string()),
        ("client-query-buffer-limit", s.limits.max_request.to_string()),
        ("cluster-enabled", if s.cluster.is_some() { "yes" } else { "no" }.into()),
        ("dir", s.dir_display.clone()),
    ]
}

pub fn config(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args[1].to_ascii_uppercase().as_slice() {
        b"GET" if args.len() >= 3 => {
            let params = config_params(ctx);
            let mut pairs = Vec::new();
            for (name, value) in params {
                if args[2..].iter().any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
                    pairs.push((Reply::bulk(name), Reply::bulk(value)));
                }
            }
            Ok(Reply::Map(pairs))
        }
        b"SET" => Err(Reply::err("ERR CONFIG SET is not supported; restart with the new flags")),
        b"RESETSTAT" => Ok(Reply::Ok),
        _ => Err(Reply::err("ERR unknown subcommand or wrong number of arguments for 'config'")),
    }
}

fn command_entry(cmd: &super::Command) -> Reply {
    let flags =
        if cmd.write { vec![Reply::Simple("write")] } else { vec![Reply::Simple("readonly"), Reply::Simple("fast")] };
    Reply::Array(vec![
        Reply::bulk(cmd.name),
        Reply::Int(cmd.arity.into()),
        Reply::Array(flags),
        Reply::Int(cmd.keys.0.into()),
        Reply::Int(cmd.keys.1.into()),
        Reply::Int(cmd.keys.2.into()),
        Reply::Array(Vec::new()),
    ])
}

pub fn command(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(sub) = args.get(1) else { return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect())) };
    match sub.to_ascii_uppercase().as_slice() {
        b"COUNT" => Ok(Reply::Int(COMMANDS.len() as i64)),
        // redis-cli asks for docs to show hints; it works without them.
        b"DOCS" => Ok(Reply::Map(Vec::new())),
        b"INFO" => Ok(Reply::Array(
            args[2..].iter().map(|name| super::lookup(name).map_or(Reply::NilArray, command_entry)).collect(),
        )),
        b"GETKEYS" if args.len() >= 3 => {
            let cmd = super::lookup(&args[2]).ok_or_else(|| Reply::err("ERR Invalid command specified"))?;
            Ok(Reply::Array(cmd.key_args(&args[2..]).map(|k| Reply::Bulk(k.clone())).collect()))
        }
        b"LIST" => Ok(Reply::Array(COMMANDS.iter().map(|c| Reply::bulk(c.name)).collect())),
        _ => Err(Reply::err("ERR unknown subcommand for 'command'")),
    }
}

pub fn client(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args[1].to_ascii_uppercase().as_slice() {
        b"SETNAME" if args.len() == 3 => {
            ctx.conn.name = Some(args[2].clone());
            Ok(Reply::Ok)
        }
        b"GETNAME" => Ok(ctx.conn.name.clone().map_or(Reply::Nil, Reply::Bulk)),
        b"ID" => Ok(Reply::Int(ctx.conn.id as i64)),
        // Library name and version (redis-py, redis-rs send them): accepted, not stored.
        b"SETINFO" => Ok(Reply::Ok),
        _ => Err(Reply::err("ERR unknown subcommand or wrong number of arguments for 'client'")),
    }
}

pub fn cluster(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    if sub.as_slice() == b"KEYSLOT" {
        // Answered in standalone mode too: it is pure arithmetic.
        let key =
            args.get(2).ok_or_else(|| Reply::err("ERR wrong number of arguments for 'cluster|keyslot' command"))?;
        return Ok(Reply::Int(key_slot(key).into()));
    }
    let Some(map) = &ctx.server.cluster else {
        return Err(Reply::err("ERR This instance has cluster support disabled"));
    };
    match sub.as_slice() {
        b"SLOTS" => Ok(map.slots_reply()),
        b"SHARDS" => Ok(map.shards_reply()),
        b"NODES" => Ok(Reply::Bulk(map.nodes_text())),
        b"INFO" => Ok(Reply::bulk(map.info())),
        b"MYID" => Ok(Reply::bulk(map.me().id.clone())),
        _ => Err(Reply::err("ERR unknown subcommand or wrong number of arguments for 'cluster'")),
    }
}
