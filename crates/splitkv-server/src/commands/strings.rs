//! String commands: GET, SET (NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL), SETNX, GETDEL, MGET, MSET,
//! INCR family, APPEND, STRLEN, GETRANGE.
//!
//! A string is its metadata record alone (type, expiry, value), so reads are one engine `get`
//! and writes one `put`. Writers run under their keys' locks (see the dispatcher); an existing
//! key of another type that `SET`/`MSET` replaces has its records deleted in the same batch.

use super::{parse_i64, syntax_error, Ctx};
use crate::keys::{Kind, Meta};
use crate::resp::Reply;
use crate::store::{wrong_type, CmdResult};
use bytes::Bytes;
use splitkv::{ReadOptions, WriteBatch};

/// The live string value of `key` (None when absent); WRONGTYPE for other kinds.
pub(super) fn read_string(ctx: &mut Ctx, opts: &ReadOptions, key: &[u8]) -> Result<Option<Meta>, Reply> {
    match ctx.server.store.meta(opts, key, ctx.now, &mut ctx.expired)? {
        Some(m) if m.kind != Kind::String => Err(wrong_type()),
        other => Ok(other),
    }
}

pub fn get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(read_string(ctx, &ReadOptions::default(), &args[1])?.map_or(Reply::Nil, |m| Reply::Bulk(m.value)))
}

/// Replaces whatever `key` holds with a string; `old` is its live metadata.
fn overwrite(
    ctx: &Ctx,
    batch: &mut WriteBatch,
    key: &[u8],
    old: Option<&Meta>,
    value: Bytes,
    expire_at: u64,
) -> Result<(), Reply> {
    let store = &ctx.server.store;
    let mut old_expire = 0;
    if let Some(old) = old {
        if old.kind != Kind::String {
            store.delete_records(batch, key, old)?;
        } else {
            old_expire = old.expire_at;
        }
    }
    store.put_meta(batch, key, &Meta::string(value, expire_at), old_expire);
    Ok(())
}

enum Expiry {
    Clear,
    Keep,
    At(u64),
}

pub fn set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, value) = (&args[1], &args[2]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = Expiry::Clear;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if matches!(expiry, Expiry::Clear) => expiry = Expiry::Keep,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if matches!(expiry, Expiry::Clear) => {
                let n = parse_i64(args.get(i + 1).ok_or_else(syntax_error)?)?;
                if n <= 0 {
                    return Err(Reply::err("ERR invalid expire time in 'set' command"));
                }
                let n = n as u64;
                expiry = Expiry::At(match opt.as_slice() {
                    b"EX" => ctx.now.saturating_add(n.saturating_mul(1000)),
                    b"PX" => ctx.now.saturating_add(n),
                    b"EXAT" => n.saturating_mul(1000),
                    _ => n,
                });
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    let mut batch = WriteBatch::new();
    let old = ctx.server.store.meta_for_write(key, ctx.now, &mut batch)?;
    if get && old.as_ref().is_some_and(|m| m.kind != Kind::String) {
        return Err(wrong_type());
    }
    let previous = || old.as_ref().map_or(Reply::Nil, |m| Reply::Bulk(m.value.clone()));
    if (nx && old.is_some()) || (xx && old.is_none()) {
        // The batch may hold the deletion of an expired key; committing it is harmless.
        ctx.server.store.commit(batch)?;
        return Ok(if get { previous() } else { Reply::Nil });
    }
    let expire_at = match expiry {
        Expiry::Clear => 0,
        Expiry::Keep => old.as_ref().map_or(0, |m| m.expire_at),
        Expiry::At(at) => at,
    };
    overwrite(ctx, &mut batch, key, old.as_ref(), value.clone(), expire_at)?;
    ctx.server.store.commit(batch)?;
    Ok(if get { previous() } else { Reply::Ok })
}

pub fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let old = ctx.server.store.meta_for_write(&args[1], ctx.now, &mut batch)?;
    if old.is_some() {
        return Ok(Reply::Int(0));
    }
    overwrite(ctx, &mut batch, &args[1], None, args[2].clone(), 0)?;
    ctx.server.store.commit(batch)?;
    Ok(Reply::Int(1))
}

pub fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let old = store.typed_for_write(&args[1], Kind::String, ctx.now, &mut batch)?;
    let reply = match old {
        Some(m) => {
            store.delete_records(&mut batch, &args[1], &m)?;
            Reply::Bulk(m.value)
        }
        None => Reply::Nil,
    };
    store.commit(batch)?;
    Ok(reply)
}

pub fn mget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // One snapshot: MGET sees the keys as of one moment, as in Redis.
    let opts = ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() };
    let mut out = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        // Keys of another type read as nil in MGET, not as an error.
        out.push(match ctx.server.store.meta(&opts, key, ctx.now, &mut ctx.expired)? {
            Some(m) if m.kind == Kind::String => Reply::Bulk(m.value),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

pub fn mset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    // A key given twice takes its last value; only its first occurrence reads the old state.
    let mut seen = std::collections::HashSet::new();
    for pair in args[1..].chunks(2) {
        let old =
            if seen.insert(&pair[0]) { ctx.server.store.meta_for_write(&pair[0], ctx.now, &mut batch)? } else { None };
        overwrite(ctx, &mut batch, &pair[0], old.as_ref(), pair[1].clone(), 0)?;
    }
    ctx.server.store.commit(batch)?;
    Ok(Reply::Ok)
}

fn incr_by(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let old = store.typed_for_write(key, Kind::String, ctx.now, &mut batch)?;
    let current = match &old {
        Some(m) => parse_i64(&m.value)?,
        None => 0,
    };
    let next = current.checked_add(delta).ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
    let expire_at = old.as_ref().map_or(0, |m| m.expire_at);
    store.put_meta(&mut batch, key, &Meta::string(Bytes::from(next.to_string()), expire_at), expire_at);
    store.commit(batch)?;
    Ok(Reply::Int(next))
}

pub fn incr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], parse_i64(&args[2])?)
}

pub fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = parse_i64(&args[2])?.checked_neg().ok_or_else(|| Reply::err("ERR decrement would overflow"))?;
    incr_by(ctx, &args[1], delta)
}

pub fn append(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let old = store.typed_for_write(&args[1], Kind::String, ctx.now, &mut batch)?;
    let mut value = old.as_ref().map_or_else(Vec::new, |m| m.value.to_vec());
    value.extend_from_slice(&args[2]);
    if value.len() > ctx.server.limits.max_bulk {
        return Err(Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    let len = value.len() as i64;
    let expire_at = old.as_ref().map_or(0, |m| m.expire_at);
    store.put_meta(&mut batch, &args[1], &Meta::string(Bytes::from(value), expire_at), expire_at);
    store.commit(batch)?;
    Ok(Reply::Int(len))
}

pub fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_string(ctx, &ReadOptions::default(), &args[1])?.map_or(0, |m| m.value.len() as i64)))
}

pub fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, end) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    let value = read_string(ctx, &ReadOptions::default(), &args[1])?.map_or_else(Bytes::new, |m| m.value);
    let len = value.len() as i64;
    // Redis's arithmetic: negative offsets count from the end, then both are clamped.
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::bulk(Bytes::new()));
    }
    let start = if start < 0 { (len + start).max(0) } else { start };
    let end = if end < 0 { (len + end).max(0) } else { end.min(len - 1) };
    if len == 0 || start > end {
        return Ok(Reply::bulk(Bytes::new()));
    }
    Ok(Reply::Bulk(value.slice(start as usize..=end as usize)))
}
