//! Hash commands: HSET/HMSET, HGET, HMGET, HGETALL, HKEYS, HVALS, HDEL, HEXISTS, HLEN, HINCRBY.
//!
//! A hash is a metadata record holding its field count plus one `h` record per field. The
//! count is kept exact by reading each written field's old state under the key's lock, so
//! HLEN is one read. Multi-field reads use one snapshot for a consistent view.

use super::{parse_i64, Ctx};
use crate::keys::{self, Kind, Meta};
use crate::resp::Reply;
use crate::store::{wrong_type, CmdResult};
use bytes::Bytes;
use splitkv::{ReadOptions, WriteBatch};
use std::collections::HashMap;

fn read_hash(ctx: &mut Ctx, opts: &ReadOptions, key: &[u8]) -> Result<Option<Meta>, Reply> {
    match ctx.server.store.meta(opts, key, ctx.now, &mut ctx.expired)? {
        Some(m) if m.kind != Kind::Hash => Err(wrong_type()),
        other => Ok(other),
    }
}

fn snapshot_opts(ctx: &Ctx) -> ReadOptions {
    ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() }
}

/// Writes `pairs` into the hash at `key`, creating it; returns how many fields are new.
fn set_fields(ctx: &mut Ctx, key: &[u8], pairs: &[Bytes]) -> Result<i64, Reply> {
    let store = &ctx.server.store;
    let mut batch = WriteBatch::new();
    let meta = store.typed_for_write(key, Kind::Hash, ctx.now, &mut batch)?;
    let (mut len, expire_at) = meta.as_ref().map_or((0, 0), |m| (m.len, m.expire_at));
    // Fields written earlier in this same command, whose records are not in the engine yet.
    let mut written: HashMap<&[u8], ()> = HashMap::new();
    let mut added = 0;
    for pair in pairs.chunks(2) {
        let field_key = keys::sub_key(keys::HASH_FIELD, key, &pair[0]);
        let existed = written.insert(&pair[0], ()).is_some() || (meta.is_some() && store.db.get(&field_key)?.is_some());
        if !existed {
            added += 1;
            len += 1;
        }
        batch.put(field_key, &pair[1]);
    }
    store.put_meta(&mut batch, key, &Meta::collection(Kind::Hash, len, expire_at), expire_at);
    store.commit(batch)?;
    Ok(added)
}

fn check_pairs(args: &[Bytes], name: &str) -> Result<(), Reply> {
    if !(args.len() - 2).is_multiple_of(2) {
        return Err(Reply::err(format!("ERR wrong number of arguments for '{name}' command")));
    }
    Ok(())
}

pub fn hset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_pairs(args, "hset")?;
    Ok(Reply::Int(set_fields(ctx, &args[1], &args[2..])?))
}

pub fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_pairs(args, "hmset")?;
    set_fields(ctx, &args[1], &args[2..])?;
    Ok(Reply::Ok)
}

pub fn hget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = snapshot_opts(ctx);
    if read_hash(ctx, &opts, &args[1])?.is_none() {
        return Ok(Reply::Nil);
    }
    let value = ctx.server.store.db.get_opt(&opts, keys::sub_key(keys::HASH_FIELD, &args[1], &args[2]))?;
    Ok(value.map_or(Reply::Nil, Reply::Bulk))
}

pub fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = snapshot_opts(ctx);
    let exists = read_hash(ctx, &opts, &args[1])?.is_some();
    let mut out = Vec::with_capacity(args.len() - 2);
    for field in &args[2..] {
        let value = if exists {
            ctx.server.store.db.get_opt(&opts, keys::sub_key(keys::HASH_FIELD, &args[1], field))?
        } else {
            None
        };
        out.push(value.map_or(Reply::Nil, Reply::Bulk));
    }
    Ok(Reply::Array(out))
}

/// Every (field, value) of the hash, in field order.
fn all_fields(ctx: &mut Ctx, key: &[u8]) -> Result<Vec<(Bytes, Bytes)>, Reply> {
    let opts = snapshot_opts(ctx);
    if read_hash(ctx, &opts, key)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = keys::sub_prefix(keys::HASH_FIELD, key);
    let mut out = Vec::new();
    for item in ctx.server.store.prefix_iter(&opts, &prefix)? {
        let (k, v) = item?;
        out.push((k.slice(prefix.len()..), v));
    }
    Ok(out)
}

pub fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Map(all_fields(ctx, &args[1])?.into_iter().map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect()))
}

pub fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(all_fields(ctx, &args[1])?.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()))
}

pub fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(all_fields(ctx, &args[1])?.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()))
}

pub fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.server.store;
    let mut batch = WriteBatch::new();
    let Some(meta) = store.typed_for_write(&args[1], Kind::Hash, ctx.now, &mut batch)? else {
        store.commit(batch)?;
        return Ok(Reply::Int(0));
    };
    let mut removed = 0u64;
    let mut seen = std::collections::HashSet::new();
    for field in &args[2..] {
        let field_key = keys::sub_key(keys::HASH_FIELD, &args[1], field);
        if seen.insert(field) && store.db.get(&field_key)?.is_some() {
            batch.delete(field_key);
            removed += 1;
        }
    }
    if removed == meta.len {
        store.delete_records(&mut batch, &args[1], &meta)?;
    } else if removed > 0 {
        store.put_meta(
            &mut batch,
            &args[1],
            &Meta::collection(Kind::Hash, meta.len - removed, meta.expire_at),
            meta.expire_at,
        );
    }
    store.commit(batch)?;
    Ok(Reply::Int(removed as i64))
}

pub fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(matches!(hget(ctx, args)?, Reply::Bulk(_)) as i64))
}

pub fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_hash(ctx, &ReadOptions::default(), &args[1])?.map_or(0, |m| m.len as i64)))
}

pub fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = parse_i64(&args[3])?;
    let store = &ctx.server.store;
    let mut batch = WriteBatch::new();
    let meta = store.typed_for_write(&args[1], Kind::Hash, ctx.now, &mut batch)?;
    let field_key = keys::sub_key(keys::HASH_FIELD, &args[1], &args[2]);
    let old = if meta.is_some() { store.db.get(&field_key)? } else { None };
    let current = match &old {
        Some(v) => parse_i64(v).map_err(|_| Reply::err("ERR hash value is not an integer"))?,
        None => 0,
    };
    let next = current.checked_add(delta).ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
    batch.put(field_key, next.to_string());
    let (len, expire_at) = meta.as_ref().map_or((0, 0), |m| (m.len, m.expire_at));
    let len = if old.is_none() { len + 1 } else { len };
    store.put_meta(&mut batch, &args[1], &Meta::collection(Kind::Hash, len, expire_at), expire_at);
    store.commit(batch)?;
    Ok(Reply::Int(next))
}
