//! Commands over keys of any type: DEL/UNLINK, EXISTS, TYPE, SCAN, KEYS, TTL/PTTL,
//! EXPIRE/PEXPIRE/PERSIST, FLUSHDB, DBSIZE.
//!
//! The keyspace is ordered, so SCAN walks the metadata records in key order. Its cursor is a
//! number (clients parse it as one) naming a resume key kept in a bounded server-side table;
//! a key present for the whole scan is returned exactly once, which is stronger than Redis's
//! "at least once". A cursor that fell out of the table is an error, not a silent restart.

use super::{glob_match, glob_prefix, parse_i64, syntax_error, Ctx};
use crate::keys::{self, Meta};
use crate::resp::Reply;
use crate::store::CmdResult;
use bytes::Bytes;
use splitkv::{ReadOptions, WriteBatch};
use std::collections::BTreeMap;

/// Resume keys of SCAN cursors in flight, oldest evicted first.
pub struct Cursors {
    next: u64,
    open: BTreeMap<u64, Vec<u8>>,
}

const MAX_CURSORS: usize = 4096;

impl Cursors {
    pub fn new() -> Self {
        Cursors { next: 1, open: BTreeMap::new() }
    }

    fn save(&mut self, resume: Vec<u8>) -> u64 {
        let id = self.next;
        self.next += 1;
        self.open.insert(id, resume);
        while self.open.len() > MAX_CURSORS {
            self.open.pop_first();
        }
        id
    }
}

pub fn del(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let mut deleted = 0;
    let mut seen = std::collections::HashSet::new();
    for key in &args[1..] {
        if !seen.insert(key) {
            continue;
        }
        if let Some(meta) = store.meta_for_write(key, ctx.now, &mut batch)? {
            store.delete_records(&mut batch, key, &meta)?;
            deleted += 1;
        }
    }
    store.commit(batch)?;
    Ok(Reply::Int(deleted))
}

pub fn exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() };
    let mut n = 0;
    for key in &args[1..] {
        // Counted once per argument, as in Redis (`EXISTS k k` is 2).
        if ctx.server.store.meta(&opts, key, ctx.now, &mut ctx.expired)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

pub fn type_(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let meta = ctx.server.store.meta(&ReadOptions::default(), &args[1], ctx.now, &mut ctx.expired)?;
    Ok(Reply::Simple(meta.map_or("none", |m| m.kind.name())))
}

/// Walks live keys from `from` (a full metadata key) in order, calling `visit` with each
/// Redis key and its metadata until it returns false. Returns the metadata key it stopped at
/// (not visited), or None at the end of the keyspace or of `prefix`.
fn walk(
    ctx: &mut Ctx,
    from: Vec<u8>,
    prefix: &[u8],
    mut visit: impl FnMut(&[u8], &Meta) -> bool,
) -> Result<Option<Vec<u8>>, Reply> {
    let end = keys::prefix_end(&keys::meta_key(prefix));
    for item in ctx.server.store.db.range_opt(ReadOptions::default(), from..end)? {
        let (raw_key, raw) = item?;
        let key = &raw_key[1..];
        let Some(meta) = Meta::decode(raw) else { continue };
        if meta.is_expired(ctx.now) {
            ctx.expired.push(Bytes::copy_from_slice(key));
            continue;
        }
        if !visit(key, &meta) {
            return Ok(Some(raw_key.to_vec()));
        }
    }
    Ok(None)
}

pub fn scan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
    let (mut pattern, mut count, mut kind) = (None, 10usize, None);
    let mut i = 2;
    while i < args.len() {
        let value = args.get(i + 1).ok_or_else(syntax_error)?;
        match args[i].to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(value.clone()),
            b"COUNT" => count = usize::try_from(parse_i64(value)?).ok().filter(|&c| c > 0).ok_or_else(syntax_error)?,
            b"TYPE" => kind = Some(value.to_ascii_lowercase()),
            _ => return Err(syntax_error()),
        }
        i += 2;
    }
    let prefix = pattern.as_deref().map_or(&b""[..], glob_prefix).to_vec();
    let from = if cursor == 0 {
        keys::meta_key(&prefix)
    } else {
        let saved = ctx.server.cursors.lock().open.remove(&cursor);
        saved.ok_or_else(|| Reply::err("ERR invalid cursor (expired or unknown)"))?
    };
    let mut found = Vec::new();
    let mut examined = 0;
    let resume = walk(ctx, from, &prefix, |key, meta| {
        if examined == count {
            return false;
        }
        examined += 1;
        let type_ok = kind.as_deref().is_none_or(|k| k == meta.kind.name().as_bytes());
        if type_ok && pattern.as_deref().is_none_or(|p| glob_match(p, key)) {
            found.push(Reply::Bulk(Bytes::copy_from_slice(key)));
        }
        true
    })?;
    let next = match resume {
        Some(resume) => ctx.server.cursors.lock().save(resume),
        None => 0,
    };
    Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(found)]))
}

pub fn keys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pattern = &args[1];
    let prefix = glob_prefix(pattern).to_vec();
    let mut found = Vec::new();
    walk(ctx, keys::meta_key(&prefix), &prefix, |key, _| {
        if glob_match(pattern, key) {
            found.push(Reply::Bulk(Bytes::copy_from_slice(key)));
        }
        true
    })?;
    Ok(Reply::Array(found))
}

fn ttl_ms(ctx: &mut Ctx, key: &[u8]) -> Result<i64, Reply> {
    Ok(match ctx.server.store.meta(&ReadOptions::default(), key, ctx.now, &mut ctx.expired)? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) => (m.expire_at - ctx.now) as i64,
    })
}

pub fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let ms = ttl_ms(ctx, &args[1])?;
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

pub fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ttl_ms(ctx, &args[1])?))
}

/// Sets `key`'s expiry to `expire_at` (0 removes it) subject to EXPIRE's NX/XX/GT/LT flags;
/// an expiry in the past deletes the key. Returns 1 if the key was changed.
fn set_expiry(ctx: &mut Ctx, key: &[u8], expire_at: u64, flags: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let Some(meta) = store.meta_for_write(key, ctx.now, &mut batch)? else {
        store.commit(batch)?;
        return Ok(Reply::Int(0));
    };
    let current = meta.expire_at;
    for flag in flags {
        // A key without expiry counts as an infinite TTL for GT and LT, as in Redis.
        let allowed = match flag.to_ascii_uppercase().as_slice() {
            b"NX" => current == 0,
            b"XX" => current != 0,
            b"GT" => current != 0 && expire_at > current,
            b"LT" => current == 0 || expire_at < current,
            _ => return Err(syntax_error()),
        };
        if !allowed {
            return Ok(Reply::Int(0));
        }
    }
    if expire_at != 0 && expire_at <= ctx.now {
        store.delete_records(&mut batch, key, &meta)?;
    } else {
        let mut updated = meta.clone();
        updated.expire_at = expire_at;
        store.put_meta(&mut batch, key, &updated, current);
    }
    store.commit(batch)?;
    Ok(Reply::Int(1))
}

fn expire_in(ctx: &mut Ctx, args: &[Bytes], unit_ms: i64) -> CmdResult {
    let n = parse_i64(&args[2])?;
    let delta = n.checked_mul(unit_ms).ok_or_else(|| Reply::err("ERR invalid expire time in 'expire' command"))?;
    let at = (ctx.now as i64).saturating_add(delta).max(1) as u64;
    set_expiry(ctx, &args[1], at, &args[3..])
}

pub fn expire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_in(ctx, args, 1000)
}

pub fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_in(ctx, args, 1)
}

pub fn persist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut batch = WriteBatch::new();
    let store = &ctx.server.store;
    let reply = match store.meta_for_write(&args[1], ctx.now, &mut batch)? {
        Some(meta) if meta.expire_at != 0 => {
            store.put_meta(&mut batch, &args[1], &Meta { expire_at: 0, ..meta.clone() }, meta.expire_at);
            1
        }
        _ => 0,
    };
    store.commit(batch)?;
    Ok(Reply::Int(reply))
}

pub fn dbsize(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    // Counts metadata records (one per key), expired-but-unswept ones included as Redis does.
    let opts = ReadOptions { keys_only: true, ..ReadOptions::default() };
    let mut n = 0;
    for item in ctx.server.store.prefix_iter(&opts, &[keys::META])? {
        item?;
        n += 1;
    }
    Ok(Reply::Int(n))
}

/// Deletes every record in batches of this many: one batch for a whole large database would
/// hold every key in memory at once.
const FLUSH_CHUNK: usize = 10_000;

pub fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if let Some(mode) = args.get(1) {
        if !matches!(mode.to_ascii_uppercase().as_slice(), b"SYNC" | b"ASYNC") || args.len() > 2 {
            return Err(syntax_error());
        }
    }
    let store = &ctx.server.store;
    // Everything after the format marker: the metadata, field, member and expiry records.
    let start = {
        let mut k = keys::FORMAT_KEY.to_vec();
        k.push(0);
        k
    };
    let opts = ReadOptions { keys_only: true, ..ReadOptions::default() };
    let mut batch = WriteBatch::new();
    for item in store.db.range_opt(opts, start..)? {
        batch.delete(item?.0);
        if batch.len() >= FLUSH_CHUNK {
            store.commit(std::mem::take(&mut batch))?;
        }
    }
    store.commit(batch)?;
    Ok(Reply::Ok)
}
